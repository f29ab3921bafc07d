//! `GET/POST /login`: the form that puts the relay's token into an HttpOnly cookie, since the
//! browser's EventSource cannot send an `Authorization` header.

use axum::Form;
use axum::extract::{Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;

use crate::AppState;
use crate::security::{TOKEN_COOKIE, same_secret};

#[derive(Debug, Default, Deserialize)]
pub(crate) struct Next {
    next: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Login {
    token: String,
    next: Option<String>,
}

/// Where to go after logging in: a path on this relay, never another site.
fn safe_next(next: Option<&str>) -> &str {
    match next {
        Some(n) if n.starts_with('/') && !n.starts_with("//") && !n.contains('\\') => n,
        _ => "/",
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// The page: no scripts, its own small style (the UI's stylesheet needs the token).
fn page(status: StatusCode, body: &str) -> Response {
    let html = format!(
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>codex-relay · log in</title>
<style>
body {{ font: 16px/1.5 system-ui, sans-serif; margin: 0; display: grid; place-items: center; min-height: 100vh; }}
main {{ width: min(92vw, 380px); display: grid; gap: 14px; }}
h1 {{ font-size: 1.3rem; margin: 0; }}
label {{ display: grid; gap: 4px; font-weight: 600; }}
input {{ font: inherit; padding: 10px; border-radius: 8px; border: 1px solid #8a94a3; }}
button {{ font: inherit; font-weight: 600; padding: 10px; border-radius: 8px; border: 0; background: #2457d6; color: #fff; cursor: pointer; }}
.error {{ color: #c62828; margin: 0; }}
p {{ margin: 0; }}
</style></head>
<body><main>{body}</main></body></html>"#
    );
    let mut res = (status, Html(html)).into_response();
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
        ),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

fn form_html(next: &str, error: Option<&str>) -> String {
    let error = error
        .map(|e| format!(r#"<p class="error" role="alert">{}</p>"#, escape(e)))
        .unwrap_or_default();
    format!(
        r#"<h1>codex-relay</h1>
<p>This relay needs its token (the <code>--token</code> or <code>CODEX_RELAY_TOKEN</code> it was started with).</p>
{error}
<form method="post" action="/login">
<label for="token">Token <input id="token" name="token" type="password" autocomplete="current-password" required autofocus></label>
<input type="hidden" name="next" value="{next}">
<p><button type="submit">Log in</button></p>
</form>"#,
        next = escape(next)
    )
}

pub(crate) async fn form(State(st): State<AppState>, Query(q): Query<Next>) -> Response {
    let next = safe_next(q.next.as_deref());
    if st.opts.token.is_none() {
        return page(
            StatusCode::OK,
            &format!(
                r#"<h1>codex-relay</h1><p>This relay runs without a token (loopback only): nothing to log in to.</p><p><a href="{}">Open the UI</a></p>"#,
                escape(next)
            ),
        );
    }
    page(StatusCode::OK, &form_html(next, None))
}

pub(crate) async fn submit(State(st): State<AppState>, Form(login): Form<Login>) -> Response {
    let next = safe_next(login.next.as_deref());
    let Some(token) = st.opts.token.as_deref() else {
        return redirect(next, None);
    };
    if !same_secret(login.token.trim().as_bytes(), token.as_bytes()) {
        return page(
            StatusCode::UNAUTHORIZED,
            &form_html(next, Some("That is not this relay's token.")),
        );
    }
    let cookie = format!("{TOKEN_COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict");
    match HeaderValue::from_str(&cookie) {
        Ok(cookie) => redirect(next, Some(cookie)),
        Err(_) => page(
            StatusCode::BAD_REQUEST,
            &form_html(
                next,
                Some(
                    "The token has characters a cookie cannot carry; use the Authorization header instead.",
                ),
            ),
        ),
    }
}

fn redirect(to: &str, cookie: Option<HeaderValue>) -> Response {
    let mut res = StatusCode::SEE_OTHER.into_response();
    let h = res.headers_mut();
    if let Ok(loc) = HeaderValue::from_str(to) {
        h.insert(header::LOCATION, loc);
    } else {
        h.insert(header::LOCATION, HeaderValue::from_static("/"));
    }
    if let Some(c) = cookie {
        h.insert(header::SET_COOKIE, c);
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_stays_on_this_relay() {
        assert_eq!(safe_next(Some("/#/s/abc")), "/#/s/abc");
        assert_eq!(safe_next(Some("//evil.example/")), "/");
        assert_eq!(safe_next(Some("https://evil.example/")), "/");
        assert_eq!(safe_next(Some("/\\evil")), "/");
        assert_eq!(safe_next(None), "/");
    }

    #[test]
    fn the_form_escapes_what_it_echoes() {
        let html = form_html("/\"><script>", Some("<b>"));
        assert!(
            !html.contains("<script>") && !html.contains("<b>"),
            "{html}"
        );
    }
}
