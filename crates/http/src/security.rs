//! The security layers around everything served (API, SSE, MCP, UI), outermost first: the
//! Host allow-list (DNS rebinding), who the request is ([`crate::gate`]: the token, a browser
//! login, throttling; the Origin check for state-changing requests), the body size limit (413,
//! chunked bodies included), the cap on open event streams ([`crate::streams`]), and CORS only
//! for named origins. Also the checks `serve` makes before it listens.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::auth::Credentials;
use crate::error::ApiError;
use crate::streams::StreamLimits;

/// Default limit of a request body.
pub const DEFAULT_BODY_LIMIT: usize = 2 * 1024 * 1024;

/// How requests are checked before they reach any route.
#[derive(Clone)]
pub struct Security {
    /// The token and the logins granted with it.
    pub credentials: Arc<Credentials>,
    /// `Host` values accepted, with or without a port.
    pub allowed_hosts: Vec<String>,
    /// Origins allowed cross-origin (checked with [`parse_cors_origin`]); empty means no CORS
    /// headers at all.
    pub cors_origins: Vec<String>,
    /// Largest request body in bytes.
    pub body_limit: usize,
    /// Reverse proxies whose `X-Forwarded-For` and `X-Forwarded-Proto` are believed.
    pub trusted_proxies: Vec<IpAddr>,
    /// Open event streams allowed.
    pub streams: StreamLimits,
}

/// Refuses a listen address beyond loopback without a token.
pub fn check_listen(addr: SocketAddr, token_required: bool) -> Result<(), String> {
    if !addr.ip().is_loopback() && !token_required {
        return Err(format!(
            "refusing to listen on {addr} without a token: anyone who can reach it could run \
             commands through Codex. Drop --no-auth, or listen on 127.0.0.1"
        ));
    }
    Ok(())
}

/// Checks a `--cors-origin` value: an origin (`https://dash.example.com`, no path), never `*`
/// or `null`, which would hand the relay to every site or to sandboxed frames.
pub fn parse_cors_origin(origin: &str) -> Result<String, String> {
    let o = origin.trim();
    if o == "*" {
        return Err(
            "--cors-origin '*' would let every website drive Codex with your credentials; name each origin, e.g. https://dash.example.com".into(),
        );
    }
    if o.eq_ignore_ascii_case("null") {
        return Err(
            "--cors-origin null would trust sandboxed frames and local files of any site; name a real origin, e.g. https://dash.example.com".into(),
        );
    }
    let url = url::Url::parse(o).map_err(|e| {
        format!("--cors-origin {o:?} is not an origin ({e}); e.g. https://dash.example.com")
    })?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(format!(
            "--cors-origin {o:?} must be an http or https origin, e.g. https://dash.example.com"
        ));
    }
    if url.path() != "/"
        || url.query().is_some()
        || url.fragment().is_some()
        || !url.username().is_empty()
    {
        return Err(format!(
            "--cors-origin {o:?} must be an origin only (scheme, host and port; no path), e.g. https://dash.example.com"
        ));
    }
    Ok(url.origin().ascii_serialization())
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

async fn check_host(State(allowed): State<Arc<[String]>>, req: Request, next: Next) -> Response {
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

fn too_large(limit: usize) -> Response {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        format!("the body is larger than {limit} bytes"),
    )
    .into_response()
}

/// Bodies over the limit get 413 on every endpoint: a declared length is checked at once; a
/// body without one (chunked) is read up to the limit before the route sees it.
async fn check_length(State(limit): State<usize>, req: Request, next: Next) -> Response {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    match declared {
        Some(n) if n > limit as u64 => too_large(limit),
        Some(_) => next.run(req).await,
        None if req.method() == Method::GET || req.method() == Method::HEAD => next.run(req).await,
        None => {
            let (mut parts, body) = req.into_parts();
            match axum::body::to_bytes(body, limit).await {
                Ok(bytes) => {
                    parts.headers.remove(header::TRANSFER_ENCODING);
                    parts
                        .headers
                        .insert(header::CONTENT_LENGTH, bytes.len().into());
                    next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
                        .await
                }
                Err(_) => too_large(limit),
            }
        }
    }
}

/// Wraps `app` (the HTTP front, `/mcp`, `/mcp-server`) in the security layers.
pub fn secure(app: axum::Router, sec: Security) -> axum::Router {
    let streams = crate::streams::Streams::new(sec.streams).checking(sec.credentials.clone());
    let mut app = app
        .layer(middleware::from_fn_with_state(
            streams,
            crate::streams::limit,
        ))
        .layer(axum::extract::DefaultBodyLimit::max(sec.body_limit))
        .layer(middleware::from_fn_with_state(sec.body_limit, check_length));
    let gate = Arc::new(crate::gate::Gate {
        credentials: sec.credentials.clone(),
        cors_origins: sec.cors_origins.clone(),
        trusted_proxies: sec.trusted_proxies.clone(),
        body_limit: sec.body_limit,
    });
    app = app.layer(middleware::from_fn_with_state(gate, crate::gate::check));
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
                    header::HeaderName::from_static("mcp-session-id"),
                    header::HeaderName::from_static("mcp-protocol-version"),
                ])
                .allow_credentials(true),
        );
    }
    let allowed: Arc<[String]> = sec.allowed_hosts.into();
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
    fn beyond_loopback_needs_a_token() {
        let public: SocketAddr = "0.0.0.0:7878".parse().unwrap();
        let local: SocketAddr = "127.0.0.1:7878".parse().unwrap();
        assert!(
            check_listen(public, false)
                .unwrap_err()
                .contains("--no-auth")
        );
        assert!(check_listen(public, true).is_ok());
        assert!(check_listen(local, false).is_ok());
    }

    #[test]
    fn cors_origins_are_origins() {
        assert_eq!(
            parse_cors_origin("https://Dash.Example.com").unwrap(),
            "https://dash.example.com"
        );
        assert_eq!(
            parse_cors_origin("http://localhost:3000").unwrap(),
            "http://localhost:3000"
        );
        assert!(
            parse_cors_origin("*")
                .unwrap_err()
                .contains("every website")
        );
        assert!(parse_cors_origin("null").unwrap_err().contains("sandboxed"));
        assert!(parse_cors_origin("https://a.example/path").is_err());
        assert!(parse_cors_origin("ftp://a.example").is_err());
        assert!(parse_cors_origin("dash.example.com").is_err());
    }
}
