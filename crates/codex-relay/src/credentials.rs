//! Credentials for the Codex processes a client starts: an API key read from a named environment variable, or ChatGPT tokens read from a JSON file (and read again whenever Codex asks for fresh ones).

use std::path::{Path, PathBuf};

pub use codex_relay_core::auth::{AuthConfig, ChatgptTokens, RefreshRequest};
pub use codex_relay_core::login::LoginRefresh;

use crate::error::Error;

/// Where a [`crate::ClientBuilder`]'s credentials come from; resolved when the client is built,
/// so a missing variable or an unreadable file fails before Codex starts.
#[derive(Debug, Clone)]
pub(crate) enum AuthSource {
    /// Given as they are ([`crate::ClientBuilder::auth`]).
    Given(AuthConfig),
    /// An API key in this environment variable.
    ApiKeyEnv(String),
    /// ChatGPT tokens in this JSON file.
    TokensFile(PathBuf),
    /// The ChatGPT login of this CODEX_HOME's `auth.json`, refreshed by the relay.
    CodexHomeLogin(PathBuf),
}

impl AuthSource {
    pub(crate) fn resolve(&self) -> Result<AuthConfig, Error> {
        match self {
            AuthSource::Given(auth) => Ok(auth.clone()),
            AuthSource::ApiKeyEnv(name) => api_key_from_env(name),
            AuthSource::TokensFile(path) => chatgpt_tokens_from_file(path),
            AuthSource::CodexHomeLogin(_) => Ok(AuthConfig::codex_home_login(Default::default())),
        }
    }

    /// Where the credentials come from, in words (never the secret itself).
    pub(crate) fn describe(&self) -> String {
        match self {
            AuthSource::Given(_) => "given by the program".into(),
            AuthSource::ApiKeyEnv(name) => format!("an API key from ${name}"),
            AuthSource::TokensFile(path) => format!(
                "ChatGPT tokens from {} (read again when Codex asks for fresh ones)",
                path.display()
            ),
            AuthSource::CodexHomeLogin(home) => format!(
                "the ChatGPT login of {}, refreshed by the relay for every Codex",
                home.join("auth.json").display()
            ),
        }
    }
}

/// An API-key login with the key held by the environment variable `name` (`OPENAI_API_KEY`,
/// say). The key is read now; an unset or empty variable is an error that names it. Codex
/// stores the key in its `CODEX_HOME/auth.json`, as `codex login --with-api-key` does.
///
/// ```no_run
/// # fn demo() -> Result<(), codex_relay::Error> {
/// let auth = codex_relay::credentials::api_key_from_env("OPENAI_API_KEY")?;
/// let builder = codex_relay::Client::builder().auth(auth);
/// # let _ = builder; Ok(()) }
/// ```
pub fn api_key_from_env(name: &str) -> Result<AuthConfig, Error> {
    match std::env::var(name) {
        Ok(key) if !key.trim().is_empty() => Ok(AuthConfig::api_key(key.trim())),
        Ok(_) => Err(Error::setup(format!(
            "the API key variable ${name} is empty"
        ))),
        Err(std::env::VarError::NotPresent) => Err(Error::setup(format!(
            "the API key variable ${name} is not set"
        ))),
        Err(std::env::VarError::NotUnicode(_)) => Err(Error::setup(format!(
            "the API key variable ${name} is not valid UTF-8"
        ))),
    }
}

/// A login with externally managed ChatGPT tokens kept in a JSON file:
/// `{"accessToken": "...", "chatgptAccountId": "...", "idToken": "...", "chatgptPlanType": "..."}`
/// (`accessToken` required; Codex 0.169 needs `chatgptAccountId`, 0.98 `idToken`). The file is
/// read now, and again each time Codex asks for fresh tokens (after a 401): whatever keeps the
/// file current (a cron job, a sidecar) renews Codex's tokens.
pub fn chatgpt_tokens_from_file(path: impl AsRef<Path>) -> Result<AuthConfig, Error> {
    let path = path.as_ref().to_path_buf();
    let tokens = read_tokens(&path).map_err(Error::setup)?;
    Ok(
        AuthConfig::chatgpt_tokens(tokens).refresher(move |req: RefreshRequest| {
            let path = path.clone();
            async move {
                tracing::info!(reason = %req.reason, file = %path.display(), "Codex asked for fresh ChatGPT tokens; reading the file again");
                read_tokens(&path)
            }
        }),
    )
}

/// Reads and checks a tokens file; the error names the file, never its contents.
fn read_tokens(path: &Path) -> Result<ChatgptTokens, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("reading the ChatGPT tokens file {}: {e}", path.display()))?;
    let tokens: ChatgptTokens = serde_json::from_str(&text).map_err(|e| {
        format!(
            "{} is not a ChatGPT tokens file ({{\"accessToken\": ..., \"chatgptAccountId\": ..., \"idToken\": ...}}): {}",
            path.display(),
            // serde's message quotes no values for a missing field or a wrong type; a syntax
            // error gives only a position.
            e.classify_message()
        )
    })?;
    if tokens.access_token.trim().is_empty() {
        return Err(format!("{}: accessToken is empty", path.display()));
    }
    Ok(tokens)
}

/// A serde error in words that quote nothing from the file.
trait Classify {
    fn classify_message(&self) -> String;
}

impl Classify for serde_json::Error {
    fn classify_message(&self) -> String {
        use serde_json::error::Category;
        match self.classify() {
            Category::Data => {
                let text = self.to_string();
                // "missing field `accessToken` at line 1 column 2" is safe to show; other data
                // errors may quote a value.
                if text.starts_with("missing field") {
                    text
                } else {
                    format!(
                        "a field has the wrong type (line {}, column {})",
                        self.line(),
                        self.column()
                    )
                }
            }
            Category::Syntax | Category::Eof => format!(
                "not valid JSON (line {}, column {})",
                self.line(),
                self.column()
            ),
            Category::Io => "could not be read".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tokens_file_is_read_and_its_errors_quote_no_secret() {
        let dir = std::env::temp_dir().join(format!("codex-relay-creds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good.json");
        std::fs::write(
            &good,
            r#"{"accessToken": "tok-1", "chatgptAccountId": "acct"}"#,
        )
        .unwrap();
        let auth = chatgpt_tokens_from_file(&good).unwrap();
        assert_eq!(
            auth.login_params().unwrap()["accessToken"],
            serde_json::json!("tok-1")
        );
        assert!(auth.refresher.is_some());
        let bad = dir.join("bad.json");
        std::fs::write(&bad, r#"{"accessToken": 42, "idToken": "secret-id"}"#).unwrap();
        let err = chatgpt_tokens_from_file(&bad).unwrap_err().to_string();
        assert!(
            err.contains("wrong type") && !err.contains("secret-id"),
            "{err}"
        );
        std::fs::write(&bad, r#"{"accessToken": "secret-x"#).unwrap();
        let err = chatgpt_tokens_from_file(&bad).unwrap_err().to_string();
        assert!(
            err.contains("not valid JSON") && !err.contains("secret-x"),
            "{err}"
        );
        let err = chatgpt_tokens_from_file(dir.join("none.json"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("none.json"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_chatgpt_login_of_codex_home_is_shared_when_found_and_required_when_asked() {
        let home = tempfile::tempdir().unwrap();
        let builder = || crate::ClientBuilder::new().codex_home(home.path());
        let mode = |m: LoginRefresh| builder().login_refresh(m).auth_source();
        assert!(mode(LoginRefresh::Auto).starts_with("none"), "no auth.json");
        let err = mode(LoginRefresh::Relay);
        assert!(err.contains("holds no ChatGPT login"), "{err}");

        let id = "e30.eyJlbWFpbCI6ImFAYi5jIn0.sig";
        std::fs::write(
            home.path().join("auth.json"),
            format!(
                r#"{{"tokens": {{"id_token": "{id}", "access_token": "at-secret", "refresh_token": "rt-secret"}}}}"#
            ),
        )
        .unwrap();
        for m in [LoginRefresh::Auto, LoginRefresh::Relay] {
            let shown = mode(m);
            assert!(shown.contains("refreshed by the relay"), "{shown}");
            assert!(!shown.contains("secret"), "{shown}");
        }
        assert!(mode(LoginRefresh::Codex).starts_with("none"));
        // Other credentials win over auto, and cannot be combined with `relay`.
        let keyed = builder().api_key_env("CODEX_RELAY_TEST_KEY_NAME");
        assert!(keyed.auth_source().contains("$CODEX_RELAY_TEST_KEY_NAME"));
        let both = keyed.login_refresh(LoginRefresh::Relay).auth_source();
        assert!(both.contains("cannot be combined"), "{both}");
    }

    #[test]
    fn an_unset_key_variable_is_named() {
        let err = api_key_from_env("CODEX_RELAY_TEST_SURELY_UNSET_KEY")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("$CODEX_RELAY_TEST_SURELY_UNSET_KEY is not set"),
            "{err}"
        );
    }
}
