//! Who a request is, before any route runs: the token as a Bearer header or a browser login
//! cookie (wrong tokens throttled after repeated failures; a correct one never is), then, for a state-changing request a browser
//! could have been made to send (anything not carrying the Bearer header), the Origin and
//! `Sec-Fetch-Site` check that stops other websites (cross-site request forgery).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};

use crate::auth::{Credentials, Principal, Via};
use crate::error::ApiError;

/// The browser login cookie over plain HTTP.
pub const LOGIN_COOKIE: &str = "codex_relay_login";
/// The same behind TLS (`__Host-`: only from this host, over HTTPS, for the whole site).
pub const SECURE_LOGIN_COOKIE: &str = "__Host-codex_relay_login";

/// The state of [`check`].
pub struct Gate {
    pub credentials: Arc<Credentials>,
    pub cors_origins: Vec<String>,
    pub trusted_proxies: Vec<IpAddr>,
    /// The largest body: what an MCP message the gate reads (to find its tool) may be.
    pub body_limit: usize,
}

/// Where the request came from, as the routes see it (with a trusted proxy: the client
/// behind it, and whether it spoke HTTPS).
#[derive(Debug, Clone, Copy)]
pub struct Client {
    pub ip: IpAddr,
    pub https: bool,
}

impl Gate {
    fn client(&self, req: &Request) -> Client {
        let peer = req
            .extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip())
            .unwrap_or(IpAddr::from([127, 0, 0, 1]));
        if !self.trusted_proxies.contains(&peer) {
            return Client {
                ip: peer,
                https: false,
            };
        }
        let h = req.headers();
        let ip = h
            .get("x-forwarded-for")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.rsplit(',').next())
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(peer);
        let https = h
            .get("x-forwarded-proto")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"));
        Client { ip, https }
    }
}

/// The login cookie a request carries (either name).
pub fn login_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(k, _)| *k == LOGIN_COOKIE || *k == SECURE_LOGIN_COOKIE)
        .map(|(_, v)| v.trim().to_owned())
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
}

fn unauthorized(req: &Request) -> Response {
    let path = req.uri().path();
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

/// 429 with `Retry-After`.
pub fn throttled(wait: std::time::Duration) -> Response {
    let mut res = ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        "too_many_attempts",
        format!(
            "too many failed attempts from this address; try again in {} s",
            wait.as_secs().max(1)
        ),
    )
    .into_response();
    if let Ok(v) = HeaderValue::from_str(&wait.as_secs().max(1).to_string()) {
        res.headers_mut().insert(header::RETRY_AFTER, v);
    }
    res
}

/// Whether a request that a browser may have sent on another site's behalf comes from this
/// relay's own pages (or an allowed CORS origin). Browsers send `Sec-Fetch-Site` (recent ones),
/// which decides, or else `Origin` (all, on POST); a request with neither did not come from a
/// browser page.
fn same_origin(headers: &HeaderMap, https: bool, cors: &[String]) -> Result<(), String> {
    let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok());
    if let Some(origin) = origin
        && cors.iter().any(|c| c.eq_ignore_ascii_case(origin))
    {
        return Ok(());
    }
    // Fetch metadata, which pages cannot set, decides where the browser sends it (a form
    // posted from a page with `Referrer-Policy: no-referrer` carries `Origin: null`).
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        return match site {
            "same-origin" | "none" => Ok(()),
            other => Err(format!("Sec-Fetch-Site is {other:?}")),
        };
    }
    let Some(origin) = origin else {
        return Ok(());
    };
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let ours = format!("{}://{host}", if https { "https" } else { "http" });
    if origin.eq_ignore_ascii_case(&ours) {
        Ok(())
    } else {
        Err(format!("Origin {origin:?} is not this relay ({ours})"))
    }
}

/// The middleware: authenticates, checks the origin of state-changing requests, and puts the
/// [`Principal`], the [`Via`] and the [`Client`] into the request's extensions.
pub async fn check(State(gate): State<Arc<Gate>>, mut req: Request, next: Next) -> Response {
    let client = gate.client(&req);
    let creds = &gate.credentials;
    let path = req.uri().path();
    // The login pages check credentials themselves (and are throttled there); an answer link
    // is its own credential (signed, single-use, for one request), and so is an invitation
    // (single-use, it makes its user); the app's manifest, worker
    // and icons are static and fetched by the browser without the login cookie.
    let open_path = matches!(
        path,
        "/login"
            | "/logout"
            | "/login/oidc"
            | crate::sso::CALLBACK_PATH
            | "/manifest.webmanifest"
            | "/sw.js"
            | "/ui/icon-192.png"
            | "/ui/icon-512.png"
    ) || path.starts_with("/login/passkey")
        || path == "/answer-step-up.js"
        || path.starts_with("/answer/")
        || path.starts_with("/invite/")
        || path.starts_with("/n/");
    // A correct credential is never throttled (or anyone sharing the client's address could
    // lock it out); a wrong one past the budget gets 429 instead of 401.
    let (principal, via) = if let Some(token) = bearer(req.headers()) {
        if creds.is_token(token) {
            (Principal::Token, Via::Bearer)
        } else if creds.required()
            && let Some(grant) = match personal(creds, token).await {
                Ok(g) => g,
                Err(res) => return res,
            }
        {
            (Principal::User(grant), Via::Bearer)
        } else if creds.required() {
            let wait = creds.throttled(client.ip);
            creds.failed(client.ip);
            return match wait {
                Some(wait) => throttled(wait),
                None => unauthorized(&req),
            };
        } else {
            (Principal::Open, Via::None)
        }
    } else if let Some(cookie) = login_cookie(req.headers())
        && creds.required()
        && cookie.starts_with(codex_relay_core::people::TOKEN_PREFIX)
        && let Some(grant) = match personal(creds, &cookie).await {
            Ok(g) => g,
            Err(res) => return res,
        }
    {
        (Principal::User(grant), Via::Cookie)
    } else if let Some(login) = login_cookie(req.headers()).and_then(|c| creds.login(&c)) {
        (login, Via::Cookie)
    } else if !creds.required() || open_path {
        (Principal::Open, Via::None)
    } else {
        return unauthorized(&req);
    };
    let safe = matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if !safe
        && via != Via::Bearer
        && let Err(why) = same_origin(req.headers(), client.https, &gate.cors_origins)
    {
        tracing::warn!(target: "codex_relay::security", method = %req.method(), path, "cross-site request refused: {why}");
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "cross_site",
            format!(
                "refused a cross-site request ({why}): only this relay's own pages, or origins given with --cors-origin, may change things with a browser login; other clients send `Authorization: Bearer <token>`"
            ),
        )
        .into_response();
    }
    // A connection that showed a credential is never closed to make room for others.
    if matches!(
        principal,
        Principal::Token | Principal::Login(_) | Principal::User(_)
    ) && let Some(trust) = req.extensions().get::<crate::server::ConnTrust>()
    {
        trust.mark();
    }
    if open_path {
        req.extensions_mut().insert(principal);
        req.extensions_mut().insert(via);
        req.extensions_mut().insert(client);
        return next.run(req).await;
    }
    crate::enforce::authorize(&gate, principal, via, client, req, next).await
}

/// What a personal token (`crp_...`) grants, asked of the store now (so a revoked token is
/// refused on its next request, on every relay of the store); `Ok(None)`: not one, or not
/// (or no longer) valid. 503 when the store cannot say.
async fn personal(
    creds: &crate::auth::Credentials,
    token: &str,
) -> Result<Option<codex_relay_core::people::Grant>, Response> {
    let Some(people) = creds.people() else {
        return Ok(None);
    };
    if !token.starts_with(codex_relay_core::people::TOKEN_PREFIX) {
        return Ok(None);
    }
    people.check_token(token).await.map_err(|e| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "store_unavailable",
            format!("cannot check this personal token now (the store: {e}); try again"),
        )
        .into_response()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn only_this_relays_pages_may_post_with_a_login() {
        let none: &[String] = &[];
        let host = ("host", "127.0.0.1:7878");
        assert!(same_origin(&headers(&[host]), false, none).is_ok());
        assert!(
            same_origin(
                &headers(&[host, ("origin", "http://127.0.0.1:7878")]),
                false,
                none
            )
            .is_ok()
        );
        assert!(
            same_origin(
                &headers(&[host, ("origin", "https://evil.example")]),
                false,
                none
            )
            .is_err()
        );
        // Another port of the same host is same-site, not same-origin.
        assert!(
            same_origin(
                &headers(&[host, ("origin", "http://127.0.0.1:8888")]),
                false,
                none
            )
            .is_err()
        );
        assert!(same_origin(&headers(&[host, ("origin", "null")]), false, none).is_err());
        assert!(
            same_origin(
                &headers(&[host, ("sec-fetch-site", "cross-site")]),
                false,
                none
            )
            .is_err()
        );
        assert!(
            same_origin(
                &headers(&[host, ("sec-fetch-site", "same-site")]),
                false,
                none
            )
            .is_err()
        );
        assert!(
            same_origin(
                &headers(&[
                    host,
                    ("sec-fetch-site", "same-origin"),
                    ("origin", "http://127.0.0.1:7878")
                ]),
                false,
                none
            )
            .is_ok()
        );
        // A form posted by a no-referrer page: `Origin: null`, but the browser's own metadata
        // says same-origin.
        assert!(
            same_origin(
                &headers(&[host, ("sec-fetch-site", "same-origin"), ("origin", "null")]),
                false,
                none
            )
            .is_ok()
        );
        // Behind a TLS proxy the page's origin is https.
        assert!(
            same_origin(
                &headers(&[host, ("origin", "http://127.0.0.1:7878")]),
                true,
                none
            )
            .is_err()
        );
        let cors = vec!["https://dash.example".to_owned()];
        assert!(
            same_origin(
                &headers(&[
                    host,
                    ("origin", "https://dash.example"),
                    ("sec-fetch-site", "cross-site")
                ]),
                false,
                &cors
            )
            .is_ok()
        );
    }

    #[test]
    fn the_login_cookie_is_found_among_others() {
        let h = headers(&[("cookie", "theme=dark; codex_relay_login=abc; x=y")]);
        assert_eq!(login_cookie(&h).as_deref(), Some("abc"));
        let h = headers(&[("cookie", "__Host-codex_relay_login=def")]);
        assert_eq!(login_cookie(&h).as_deref(), Some("def"));
        assert_eq!(
            login_cookie(&headers(&[("cookie", "codex_relay_token=t")])),
            None
        );
    }
}
