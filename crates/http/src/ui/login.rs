//! `GET/POST /login`: the form that puts the relay's token into an HttpOnly cookie, since the
//! browser's EventSource cannot send an `Authorization` header.

use axum::Form;
use axum::extract::{Extension, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;

use crate::AppState;
use crate::gate::Client;

#[derive(Debug, Default, Deserialize)]
pub(crate) struct Next {
    next: Option<String>,
    /// A one-time login link's code.
    once: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Login {
    token: String,
    next: Option<String>,
}

/// Where to go after logging in: a path on this relay, never another site. `next` is parsed
/// as a browser would parse it against this relay (tabs and newlines dropped, backslashes
/// read as slashes, `.`, `..`, `%2e` segments resolved), and kept only if it stays on the same
/// origin and what is sent back is a plain path: one that normalises to `//host/...` (from
/// `/.//host`, `/a/..//host`, `/%2e//host`, `/./\host`) would send the browser to that host.
/// The answer is checked once more the way the browser will read it in `Location`.
pub(crate) fn safe_next(next: Option<&str>) -> String {
    let Some(next) = next else {
        return "/".into();
    };
    let base = url::Url::parse("http://relay.invalid/").expect("a valid base");
    let Ok(url) = base.join(next) else {
        return "/".into();
    };
    if url.origin() != base.origin() || !next.starts_with('/') {
        return "/".into();
    }
    let mut out = url.path().to_owned();
    if let Some(q) = url.query() {
        out.push('?');
        out.push_str(q);
    }
    if let Some(f) = url.fragment() {
        out.push('#');
        out.push_str(f);
    }
    let plain_path = out.starts_with('/') && !out.starts_with("//") && !out.contains('\\');
    let stays = base
        .join(&out)
        .is_ok_and(|again| again.origin() == base.origin() && again.path() == url.path());
    if plain_path && stays { out } else { "/".into() }
}

pub(crate) fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// The page: no scripts, its own small style (the UI's stylesheet needs the token).
pub(crate) fn page(status: StatusCode, body: &str) -> Response {
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
a.button {{ display: block; text-align: center; font-weight: 600; padding: 10px; border-radius: 8px; border: 1px solid #2457d6; color: inherit; text-decoration: none; }}
p {{ margin: 0; }}
</style></head>
<body><main>{body}</main></body></html>"#
    );
    let mut res = (status, Html(html)).into_response();
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
        ),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    res
}

fn form_html(next: &str, error: Option<&str>) -> String {
    let error = error
        .map(|e| format!(r#"<p class="error" role="alert">{}</p>"#, escape(e)))
        .unwrap_or_default();
    format!(
        r#"<h1>codex-relay</h1>
<p>This relay needs its token: the one <code>codex-relay serve</code> printed when it made it, or the <code>CODEX_RELAY_TOKEN</code> / <code>--token-file</code> it was started with. The login link it prints at start logs you in with one click.</p>
{error}
<form method="post" action="/login">
<label for="token">Token <input id="token" name="token" type="password" autocomplete="current-password" required autofocus></label>
<input type="hidden" name="next" value="{next}">
<p><button type="submit">Log in</button></p>
</form>
<div id="passkey-login"></div><script type="module" src="/login/passkey.js"></script>"#,
        next = escape(next)
    )
}

pub(crate) async fn form(
    State(st): State<AppState>,
    client: Option<Extension<Client>>,
    Query(q): Query<Next>,
) -> Response {
    let next = safe_next(q.next.as_deref());
    let creds = &st.opts.credentials;
    if !creds.required() {
        return page(
            StatusCode::OK,
            &format!(
                r#"<h1>codex-relay</h1><p>This relay runs without a token (<code>--no-auth</code>, loopback only): nothing to log in to.</p><p><a href="{}">Open the UI</a></p>"#,
                escape(&next)
            ),
        );
    }
    if let Some(code) = q.once.as_deref() {
        if creds.use_once(code) {
            return logged_in(&st, client.map(|c| c.0), &next);
        }
        return page(
            StatusCode::UNAUTHORIZED,
            &form_html(
                &next,
                Some(
                    "That login link was already used or has expired. Log in with the relay's token, or restart the relay for a new link.",
                ),
            ),
        );
    }
    let sso = crate::sso::login_button(&st, &next);
    page(StatusCode::OK, &format!("{}{sso}", form_html(&next, None)))
}

pub(crate) async fn submit(
    State(st): State<AppState>,
    client: Option<Extension<Client>>,
    Form(login): Form<Login>,
) -> Response {
    let next = safe_next(login.next.as_deref());
    let creds = &st.opts.credentials;
    if !creds.required() {
        return redirect(&next, None);
    }
    let client = client.map(|c| c.0);
    let ip = client
        .map(|c| c.ip)
        .unwrap_or(std::net::IpAddr::from([127, 0, 0, 1]));
    // A named user's personal token becomes the login cookie itself: checked against the
    // store on every request, so revoking it (or disabling the user) ends this login too.
    if let Some(people) = creds.people()
        && let Ok(Some(_)) = people.check_token(&login.token).await
    {
        return personal_login(client, login.token.trim(), &next);
    }
    // The right token logs in even while this address is throttled: only failures are.
    if !creds.is_token(&login.token) {
        let wait = creds.throttled(ip);
        creds.failed(ip);
        if let Some(wait) = wait {
            return crate::gate::throttled(wait);
        }
        return page(
            StatusCode::UNAUTHORIZED,
            &form_html(&next, Some("That is not this relay's token.")),
        );
    }
    logged_in(&st, client, &next)
}

/// `POST /logout`: ends this browser's login and clears its cookie.
pub(crate) async fn logout(
    State(st): State<AppState>,
    client: Option<Extension<Client>>,
    headers: axum::http::HeaderMap,
) -> Response {
    if let Some(cookie) = crate::gate::login_cookie(&headers) {
        st.opts.credentials.revoke_login(&cookie);
        crate::passkeys::login::end_sign_in(&st, &cookie).await;
        // A single sign-on's login is a token of its own: ended on the server too.
        if let Some(people) = st.opts.credentials.people()
            && let Err(e) = people.end_sso_login(&cookie).await
        {
            tracing::warn!("ending a single sign-on login: {e}");
        }
    }
    let https = client.is_some_and(|c| c.0.https);
    let cookie = format!(
        "{}=; {}; Max-Age=0",
        cookie_name(https),
        cookie_attrs(https)
    );
    redirect("/login", HeaderValue::from_str(&cookie).ok())
}

pub(crate) fn cookie_name(https: bool) -> &'static str {
    if https {
        crate::gate::SECURE_LOGIN_COOKIE
    } else {
        crate::gate::LOGIN_COOKIE
    }
}

pub(crate) fn cookie_attrs(https: bool) -> &'static str {
    if https {
        "Path=/; HttpOnly; SameSite=Strict; Secure"
    } else {
        "Path=/; HttpOnly; SameSite=Strict"
    }
}

/// A new browser login: its cookie (never the token), then on to `next`.
/// Signs a browser in with a personal token: the cookie is the token.
pub(super) fn personal_login(client: Option<Client>, token: &str, next: &str) -> Response {
    let https = client.is_some_and(|c| c.https);
    let cookie = format!(
        "{}={token}; {}; Max-Age={}",
        cookie_name(https),
        cookie_attrs(https),
        crate::auth::LOGIN_LIFETIME.as_secs()
    );
    redirect(next, HeaderValue::from_str(&cookie).ok())
}

fn logged_in(st: &AppState, client: Option<Client>, next: &str) -> Response {
    let https = client.is_some_and(|c| c.https);
    let value = st.opts.credentials.grant_login();
    let cookie = format!(
        "{}={value}; {}; Max-Age={}",
        cookie_name(https),
        cookie_attrs(https),
        crate::auth::LOGIN_LIFETIME.as_secs()
    );
    redirect(next, HeaderValue::from_str(&cookie).ok())
}

pub(crate) fn redirect(to: &str, cookie: Option<HeaderValue>) -> Response {
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
        assert_eq!(safe_next(Some("/api/x?y=1")), "/api/x?y=1");
        assert_eq!(safe_next(Some("//evil.example/")), "/");
        assert_eq!(safe_next(Some("https://evil.example/")), "/");
        assert_eq!(safe_next(Some("/\\evil.example")), "/");
        // A tab is dropped by browsers: `/\t/evil.example` would become `//evil.example`.
        assert_eq!(safe_next(Some("/\t/evil.example")), "/");
        assert_eq!(safe_next(Some("/\n/evil.example")), "/");
        assert_eq!(safe_next(Some("javascript:alert(1)")), "/");
        assert_eq!(safe_next(Some("relative")), "/");
        assert_eq!(safe_next(None), "/");
    }

    /// Spellings a browser normalises to `//host` (another site).
    const OFF_SITE: &[&str] = &[
        "/.//evil.example/",
        "/..//evil.example/",
        "/%2e//evil.example/",
        "/%2E//evil.example/",
        "/a/..//evil.example/",
        "/%2e%2e//evil.example/",
        "/.%2e//evil.example/",
        "/a/b/../..//evil.example/",
        "/a/%2e%2e//evil.example/",
        "/./\\evil.example/",
        "/.\\/evil.example/",
        "/.\\\\evil.example/",
        "/./\\/evil.example/",
        "/x;/..//evil.example/",
        "/.\t//evil.example/",
        "/.\n/\r/evil.example/",
        "/.//evil.example/?q=1#f",
        "/.//evil.example:8080/",
        "/.//user@evil.example/",
    ];

    #[test]
    fn next_that_normalises_to_another_host_is_refused() {
        let base = url::Url::parse("http://relay.invalid/").unwrap();
        for next in OFF_SITE {
            // Each is a real danger: resolved as a browser does, its path is `//...`.
            let raw = base.join(next).unwrap();
            assert!(raw.path().starts_with("//"), "{next:?} -> {}", raw.path());
            assert_eq!(safe_next(Some(next)), "/", "{next:?}");
        }
        // Normalising is fine when the result is a plain path here.
        assert_eq!(safe_next(Some("/a/../#/s/abc")), "/#/s/abc");
        assert_eq!(safe_next(Some("/./api/x")), "/api/x");
        assert_eq!(safe_next(Some("/%2F/evil.example")), "/%2F/evil.example");
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
