//! `GET/POST /invite/{code}`: an invitation link. GET only shows who it invites (a link
//! preview or a mail scanner opening it uses nothing); POST uses it, once: it makes the named
//! user and their first personal token, signs this browser in with it, and shows the token this
//! once. `Accept: application/json` gets `{user, token}` instead of the page.

use axum::extract::{Extension, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use codex_relay_core::people::InviteError;
use serde_json::json;

use super::login::{cookie_attrs, cookie_name, escape, page};
use crate::AppState;
use crate::error::ApiError;
use crate::gate::Client;

fn wants_json(h: &HeaderMap) -> bool {
    h.get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/json"))
}

fn refused(e: InviteError, json: bool) -> Response {
    let (status, code) = match &e {
        InviteError::Unknown => (StatusCode::NOT_FOUND, "unknown_invitation"),
        InviteError::Used => (StatusCode::GONE, "invitation_used"),
        InviteError::Expired => (StatusCode::GONE, "invitation_expired"),
        InviteError::NameTaken(_) => (StatusCode::CONFLICT, "name_taken"),
        InviteError::Store(_) => (StatusCode::SERVICE_UNAVAILABLE, "store_unavailable"),
    };
    if json {
        return ApiError::new(status, code, e.to_string()).into_response();
    }
    page(
        status,
        &format!(
            "<h1>Invitation</h1><p class=\"error\">{}</p>",
            escape(&e.to_string())
        ),
    )
}

pub(crate) async fn show(
    State(st): State<AppState>,
    Path(code): Path<String>,
    headers: HeaderMap,
) -> Response {
    let json = wants_json(&headers);
    match st.relay.people().peek_invitation(&code).await {
        Ok(inv) if json => axum::Json(json!(inv)).into_response(),
        Ok(inv) => page(
            StatusCode::OK,
            &format!(
                "<h1>You are invited</h1><p>to this relay as <b>{}</b>, with the <b>{}</b> role.</p>\
                 <form method=\"post\"><button type=\"submit\">Accept and sign in</button></form>{}\
                 <p>The link works once.</p>",
                escape(&inv.name),
                inv.role,
                crate::sso::invite_button(&st, &code, inv.sessions.is_none())
            ),
        ),
        Err(e) => refused(e, json),
    }
}

pub(crate) async fn accept(
    State(st): State<AppState>,
    Path(code): Path<String>,
    client: Option<Extension<Client>>,
    headers: HeaderMap,
) -> Response {
    let json = wants_json(&headers);
    let made = match st.relay.people().redeem(&code).await {
        Ok(made) => made,
        Err(e) => return refused(e, json),
    };
    tracing::info!(target: "codex_relay::security", user = %made.user.name, role = %made.user.role, "an invitation was used");
    let https = client.is_some_and(|c| c.0.https);
    let cookie = format!(
        "{}={}; {}; Max-Age={}",
        cookie_name(https),
        made.token.token,
        cookie_attrs(https),
        crate::auth::LOGIN_LIFETIME.as_secs()
    );
    let mut res = if json {
        (StatusCode::CREATED, axum::Json(json!(made))).into_response()
    } else {
        page(
            StatusCode::CREATED,
            &format!(
                "<h1>Welcome, {}</h1><p>This browser is signed in as {} ({}).</p>\
                 <p>Your personal API token, shown this once (keep it like a password):</p>\
                 <p><code>{}</code></p><p><a href=\"/\">Open the relay</a></p>",
                escape(&made.user.name),
                escape(&made.user.name),
                made.user.role,
                escape(&made.token.token)
            ),
        )
    };
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        res.headers_mut().insert(header::SET_COOKIE, v);
    }
    res
}
