//! The refresh itself, as Codex does it: `POST` JSON `{client_id, grant_type: "refresh_token",
//! refresh_token}` to `https://auth.openai.com/oauth/token` (or the URL in
//! `CODEX_REFRESH_TOKEN_URL_OVERRIDE`), answered `{id_token, access_token, refresh_token}`;
//! a refusal carries a code (`refresh_token_reused`, `refresh_token_expired`,
//! `refresh_token_invalidated`) that says whether signing in again is the only way out.

use std::time::Duration;

use serde_json::{Value, json};

use super::LoginError;
use super::auth_file::Tokens;

/// Codex's token endpoint.
pub const DEFAULT_TOKEN_URL: &str = "https://auth.openai.com/oauth/token";
/// The variable Codex reads the token endpoint from; the relay reads it too (from the
/// environment it gives Codex, else its own).
pub const TOKEN_URL_ENV: &str = "CODEX_REFRESH_TOKEN_URL_OVERRIDE";
/// The OAuth client id Codex refreshes with.
pub const CODEX_CLIENT_ID: &str = "app_EMoamEEZ73f0CkXaXp7hrann";

/// A client for the token endpoint (rustls with ring, the platform's roots).
pub(crate) fn client(timeout: Duration) -> Result<reqwest::Client, LoginError> {
    // reqwest is built without a TLS provider of its own: rustls with ring.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .map_err(|e| LoginError::Endpoint {
            reason: format!("building the HTTP client: {e}"),
        })
}

/// Spends `current.refresh_token` at `url` for the next generation of tokens.
pub(crate) async fn refresh(
    http: &reqwest::Client,
    url: &str,
    client_id: &str,
    current: &Tokens,
) -> Result<Tokens, LoginError> {
    let body = json!({
        "client_id": client_id,
        "grant_type": "refresh_token",
        "refresh_token": current.refresh_token,
    });
    let response = http
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        // reqwest's errors name the URL, never the body.
        .map_err(|e| LoginError::Endpoint {
            reason: e.without_url().to_string(),
        })?;
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    let answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    if !status.is_success() {
        let code = error_code(&answer);
        return Err(match code.as_deref() {
            Some(
                c
                @ ("refresh_token_reused" | "refresh_token_expired" | "refresh_token_invalidated"),
            ) => LoginError::Refused {
                code: c.to_owned(),
                status: status.as_u16(),
            },
            _ => LoginError::Endpoint {
                reason: format!(
                    "HTTP {status}{}",
                    code.map(|c| format!(" ({c})")).unwrap_or_default()
                ),
            },
        });
    }
    let field = |k: &str| {
        answer
            .get(k)
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    };
    let access_token = field("access_token").ok_or_else(|| LoginError::Endpoint {
        reason: "the answer holds no access_token".into(),
    })?;
    // Codex keeps what the answer leaves out; so do we.
    Ok(Tokens {
        id_token: field("id_token").unwrap_or_else(|| current.id_token.clone()),
        access_token,
        refresh_token: field("refresh_token").unwrap_or_else(|| current.refresh_token.clone()),
        account_id: current.account_id.clone(),
    })
}

/// The error code of a refusal: `{"error": {"code": ...}}`, `{"error": "..."}` or `{"code": ...}`.
fn error_code(answer: &Value) -> Option<String> {
    let code = match answer.get("error") {
        Some(Value::Object(e)) => e.get("code").and_then(Value::as_str),
        Some(Value::String(s)) => Some(s.as_str()),
        _ => None,
    };
    code.or_else(|| answer.get("code").and_then(Value::as_str))
        .map(str::to_ascii_lowercase)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusal_codes_are_read_where_codex_reads_them() {
        let reused = json!({"error": {"code": "refresh_token_reused", "message": "m"}});
        assert_eq!(error_code(&reused).as_deref(), Some("refresh_token_reused"));
        assert_eq!(
            error_code(&json!({"error": "REFRESH_TOKEN_EXPIRED"})).as_deref(),
            Some("refresh_token_expired")
        );
        assert_eq!(
            error_code(&json!({"code": "invalid_grant"})).as_deref(),
            Some("invalid_grant")
        );
        assert_eq!(error_code(&Value::Null), None);
    }
}
