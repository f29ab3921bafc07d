//! The web UI: its assets (`crates/http/ui/`, compiled in) served at `/` and `/ui/*` with an
//! ETag of their content and `304 Not Modified` when it matches, and the login form.

mod answer;
mod invite;
pub(crate) mod login;

pub(crate) use login::{cookie_attrs, cookie_name, escape, page, redirect, safe_next};

use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::AppState;
use crate::error::ApiError;

/// One compiled-in file.
struct Asset {
    name: &'static str,
    mime: &'static str,
    body: &'static [u8],
    etag: &'static str,
}

/// FNV-1a, 64 bits: a stable content hash for ETags, computed at compile time.
const fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < bytes.len() {
        hash ^= bytes[i] as u64;
        hash = hash.wrapping_mul(0x0100_0000_01b3);
        i += 1;
    }
    hash
}

/// `"<16 hex digits>"`, as a static string built at compile time.
const fn etag_of(bytes: &[u8]) -> [u8; 18] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let hash = fnv1a(bytes);
    let mut out = [b'"'; 18];
    let mut i = 0;
    while i < 16 {
        out[1 + i] = HEX[((hash >> (60 - 4 * i)) & 0xf) as usize];
        i += 1;
    }
    out
}

macro_rules! asset {
    ($name:literal, $mime:expr) => {{
        const BODY: &[u8] = include_bytes!(concat!("../ui/", $name));
        const TAG: [u8; 18] = etag_of(BODY);
        Asset {
            name: $name,
            mime: $mime,
            body: BODY,
            etag: match std::str::from_utf8(&TAG) {
                Ok(s) => s,
                Err(_) => panic!("an ETag is ASCII"),
            },
        }
    }};
}

const JS: &str = "text/javascript; charset=utf-8";

static ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("style.css", "text/css; charset=utf-8"),
    asset!("app.js", JS),
    asset!("api.js", JS),
    asset!("stream.js", JS),
    asset!("dom.js", JS),
    asset!("list.js", JS),
    asset!("new.js", JS),
    asset!("session.js", JS),
    asset!("threads.js", JS),
    asset!("timeline.js", JS),
    asset!("cards.js", JS),
    asset!("trail.js", JS),
    asset!("diff.js", JS),
    asset!("worktree.js", JS),
    asset!("text.js", JS),
    asset!("rules.js", JS),
    asset!("ruleform.js", JS),
    asset!("notify.js", JS),
    asset!("audit.js", JS),
    asset!("passkeys.js", JS),
    asset!("webauthn.js", JS),
    asset!("passkey-login.js", JS),
    asset!("step-up.js", JS),
    asset!("sw.js", JS),
    asset!("manifest.webmanifest", "application/manifest+json"),
    asset!("icon-192.png", "image/png"),
    asset!("icon-512.png", "image/png"),
];

/// Only our own scripts, styles and connections; no framing.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; manifest-src 'self'; worker-src 'self'; base-uri 'none'; \
                   form-action 'self'; frame-ancestors 'none'";

pub(crate) fn routes() -> axum::Router<AppState> {
    axum::Router::new()
        .route("/", get(index))
        .route("/ui/{file}", get(file))
        // The worker's scope is where it is served from: the whole UI.
        .route(
            "/sw.js",
            get(|h: HeaderMap| async move { named("sw.js", &h) }),
        )
        .route(
            "/manifest.webmanifest",
            get(|h: HeaderMap| async move { named("manifest.webmanifest", &h) }),
        )
        .route("/answer/{request}", get(answer::show).post(answer::submit))
        .route(
            "/answer/{request}/step-up",
            axum::routing::post(answer::step_up_options),
        )
        // The scripts of the pages open without a login (plain files, no secrets).
        .route(
            "/login/passkey.js",
            get(|h: HeaderMap| async move { named("passkey-login.js", &h) }),
        )
        .route(
            "/answer-step-up.js",
            get(|h: HeaderMap| async move { named("step-up.js", &h) }),
        )
        .route("/invite/{code}", get(invite::show).post(invite::accept))
        .route("/n/{id}", get(crate::deliveries::open))
        .route("/login", get(login::form).post(login::submit))
        .route("/login/oidc", get(crate::sso::flow::start))
        .route(crate::sso::CALLBACK_PATH, get(crate::sso::flow::callback))
        .route("/logout", axum::routing::post(login::logout))
}

async fn index(headers: HeaderMap) -> Response {
    serve(&ASSETS[0], &headers)
}

fn named(name: &str, headers: &HeaderMap) -> Response {
    let asset = ASSETS.iter().find(|a| a.name == name).expect("compiled in");
    serve(asset, headers)
}

async fn file(Path(name): Path<String>, headers: HeaderMap) -> Response {
    match ASSETS.iter().find(|a| a.name == name) {
        Some(asset) => serve(asset, &headers),
        None => {
            ApiError::not_found("not_found", format!("no UI file named {name:?}")).into_response()
        }
    }
}

/// Whether an `If-None-Match` header names this ETag (a list, `W/` tags, or `*`).
fn matches(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().trim_start_matches("W/"))
        .any(|t| t == etag || t == "*")
}

fn serve(asset: &Asset, headers: &HeaderMap) -> Response {
    let mut res = if matches(headers, asset.etag) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let mut res = asset.body.into_response();
        res.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(asset.mime));
        res
    };
    let h = res.headers_mut();
    h.insert(header::ETAG, HeaderValue::from_static(asset.etag));
    // Always revalidate: a new binary serves new files at the same paths.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_asset_the_index_and_scripts_name_is_served() {
        let names: Vec<&str> = ASSETS.iter().map(|a| a.name).collect();
        for asset in ASSETS {
            let Ok(text) = std::str::from_utf8(asset.body) else {
                assert!(asset.name.ends_with(".png"), "{} is not UTF-8", asset.name);
                continue;
            };
            // `/ui/x.js` in the page and `./x.js` in module imports must be compiled in.
            for part in text.split(['"', '\'']) {
                let wanted = part
                    .strip_prefix("/ui/")
                    .or_else(|| part.strip_prefix("./"));
                if let Some(w) = wanted.filter(|w| w.ends_with(".js") || w.ends_with(".css")) {
                    assert!(
                        names.contains(&w),
                        "{} refers to {w}, not served",
                        asset.name
                    );
                }
            }
        }
        let on_disk = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/ui"))
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| !n.starts_with('.'))
            .count();
        assert_eq!(on_disk, ASSETS.len(), "a file in ui/ is not compiled in");
    }

    #[test]
    fn etags_follow_the_content_and_if_none_match_is_understood() {
        assert_ne!(etag_of(b"a"), etag_of(b"b"));
        assert_eq!(etag_of(b"a"), etag_of(b"a"));
        let tag = ASSETS[0].etag;
        assert!(
            tag.starts_with('"') && tag.ends_with('"') && tag.len() == 18,
            "{tag}"
        );
        let mut h = HeaderMap::new();
        assert!(!matches(&h, tag));
        h.insert(
            header::IF_NONE_MATCH,
            HeaderValue::from_str(&format!("\"other\", W/{tag}")).unwrap(),
        );
        assert!(matches(&h, tag));
        assert_eq!(serve(&ASSETS[0], &h).status(), StatusCode::NOT_MODIFIED);
        assert_eq!(serve(&ASSETS[1], &h).status(), StatusCode::OK);
    }
}
