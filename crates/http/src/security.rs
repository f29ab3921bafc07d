//! The security layers around everything served (API, SSE, MCP, UI): the Host allow-list
//! (DNS rebinding), the token (Bearer header or login cookie, compared in constant time), the
//! body size limit (413), CORS only for named origins, and the refusal to listen beyond
//! loopback without a token.

use std::net::SocketAddr;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::error::ApiError;

/// The cookie the login form sets (EventSource cannot send headers).
pub const TOKEN_COOKIE: &str = "codex_relay_token";
/// Default limit of a request body.
pub const DEFAULT_BODY_LIMIT: usize = 2 * 1024 * 1024;

/// How requests are checked before they reach any route.
#[derive(Debug, Clone)]
pub struct Security {
    /// Required on every request when set.
    pub token: Option<String>,
    /// `Host` values accepted, with or without a port.
    pub allowed_hosts: Vec<String>,
    /// Origins allowed cross-origin; empty means no CORS headers at all.
    pub cors_origins: Vec<String>,
    /// Largest request body in bytes.
    pub body_limit: usize,
}

/// Refuses a listen address beyond loopback unless a token protects it.
pub fn check_listen(addr: SocketAddr, token: Option<&str>) -> Result<(), String> {
    if token.is_some_and(|t| t.trim().is_empty()) {
        return Err("the token is empty; set a non-empty --token / CODEX_RELAY_TOKEN".into());
    }
    if !addr.ip().is_loopback() && token.is_none() {
        return Err(format!(
            "refusing to listen on {addr} without a token: anyone who can reach it could run \
             commands through Codex. Set --token (or CODEX_RELAY_TOKEN), or listen on 127.0.0.1"
        ));
    }
    Ok(())
}

/// Equal in time independent of where the first difference is.
pub(crate) fn same_secret(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a
        .iter()
        .zip(b)
        .fold(0u8, |acc, (x, y)| acc | std::hint::black_box(x ^ y));
    diff == 0
}

/// The token a request carries: `Authorization: Bearer <t>` or the login cookie.
fn presented(req: &Request) -> Option<String> {
    let headers = req.headers();
    if let Some(t) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    {
        return Some(t.trim().to_owned());
    }
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(k, _)| *k == TOKEN_COOKIE)
        .map(|(_, v)| v.trim().to_owned())
}

/// Whether `host` (a Host header, maybe with a port) is allowed.
pub fn host_allowed(host: &str, allowed: &[String]) -> bool {
    let host = host.trim().to_ascii_lowercase();
    let bare = if host.starts_with('[') {
        host.split_inclusive(']').next().unwrap_or(&host).to_owned()
    } else if host.matches(':').count() == 1 {
        host.split(':').next().unwrap_or(&host).to_owned()
    } else {
        host.clone()
    };
    allowed.iter().any(|a| {
        let a = a.to_ascii_lowercase();
        a == host || a == bare
    })
}

async fn check_host(
    State(allowed): State<std::sync::Arc<[String]>>,
    req: Request,
    next: Next,
) -> Response {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned)
        .or_else(|| req.uri().authority().map(|a| a.to_string()));
    match host {
        Some(h) if host_allowed(&h, &allowed) => next.run(req).await,
        Some(h) => ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden_host",
            format!("Host {h:?} is not allowed (DNS-rebinding protection); serve with --allow-host {h} to accept it"),
        )
        .into_response(),
        None => ApiError::new(StatusCode::FORBIDDEN, "forbidden_host", "the request has no Host")
            .into_response(),
    }
}

async fn check_token(State(token): State<String>, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    if path == "/login" {
        return next.run(req).await;
    }
    if presented(&req).is_some_and(|t| same_secret(t.as_bytes(), token.as_bytes())) {
        return next.run(req).await;
    }
    let wants_html = req.method() == Method::GET
        && !path.starts_with("/api/")
        && !path.starts_with("/mcp")
        && req
            .headers()
            .get(header::ACCEPT)
            .and_then(|a| a.to_str().ok())
            .is_some_and(|a| a.contains("text/html"));
    if wants_html {
        // A browser: 401, and on to the login form.
        let page = "<!doctype html><meta http-equiv=\"refresh\" content=\"0;url=/login\">\
                    <p>This relay needs a token. <a href=\"/login\">Log in</a>.</p>";
        return (StatusCode::UNAUTHORIZED, Html(page)).into_response();
    }
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "this relay needs its token: send `Authorization: Bearer <token>` (or log in at /login)",
    )
    .into_response()
}

async fn check_length(State(limit): State<usize>, req: Request, next: Next) -> Response {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("the body is larger than {limit} bytes"),
        )
        .into_response();
    }
    next.run(req).await
}

/// Wraps `app` (the HTTP front and `/mcp`) in the security layers.
pub fn secure(app: axum::Router, sec: Security) -> axum::Router {
    let mut app = app;
    if let Some(token) = sec.token.clone() {
        app = app.layer(middleware::from_fn_with_state(token, check_token));
    }
    app = app
        .layer(DefaultBodyLimit::max(sec.body_limit))
        .layer(middleware::from_fn_with_state(sec.body_limit, check_length));
    if !sec.cors_origins.is_empty() {
        let origins: Vec<HeaderValue> = sec
            .cors_origins
            .iter()
            .filter_map(|o| HeaderValue::from_str(o).ok())
            .collect();
        app = app.layer(
            CorsLayer::new()
                .allow_origin(AllowOrigin::list(origins))
                .allow_methods([Method::GET, Method::POST, Method::DELETE, Method::OPTIONS])
                .allow_headers([
                    header::AUTHORIZATION,
                    header::CONTENT_TYPE,
                    header::HeaderName::from_static("last-event-id"),
                ])
                .allow_credentials(true),
        );
    }
    let allowed: std::sync::Arc<[String]> = sec.allowed_hosts.into();
    app.layer(middleware::from_fn_with_state(allowed, check_host))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_match_with_or_without_their_port() {
        let allowed = vec![
            "localhost".to_owned(),
            "[::1]".to_owned(),
            "127.0.0.1:7878".to_owned(),
        ];
        assert!(host_allowed("localhost:9999", &allowed));
        assert!(host_allowed("LOCALHOST", &allowed));
        assert!(host_allowed("[::1]:7878", &allowed));
        assert!(host_allowed("127.0.0.1:7878", &allowed));
        assert!(!host_allowed("evil.example:7878", &allowed));
        assert!(!host_allowed("localhost.evil.example", &allowed));
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abc", b"abd"));
        assert!(!same_secret(b"abc", b"abcd"));
    }

    #[test]
    fn beyond_loopback_needs_a_token() {
        let public: SocketAddr = "0.0.0.0:7878".parse().unwrap();
        let local: SocketAddr = "127.0.0.1:7878".parse().unwrap();
        assert!(check_listen(public, None).unwrap_err().contains("--token"));
        assert!(check_listen(public, Some("s3cret")).is_ok());
        assert!(check_listen(local, None).is_ok());
        assert!(check_listen(local, Some(" ")).is_err());
    }
}
