//! Signing in with a passkey (`/login/passkey/…`, open like `/login`): the options of a
//! discoverable, user-verified assertion, then the assertion itself, which signs the browser
//! in as the passkey's user with a new personal token as its login cookie (listed under their
//! tokens as a passkey sign-in, revocable; logging out revokes it). Failures are throttled
//! like wrong tokens. The login page's button is `ui/passkey-login.js`.

use axum::Json;
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use codex_relay_core::people::CeremonyKind;
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

use super::webauthn::RelyingParty;
use super::{people, relying_party, store_error};
use crate::AppState;
use crate::error::{ApiError, Body, ErrorBody};
use crate::gate::Client;

/// The label of the personal token a passkey sign-in makes (logging out revokes these).
pub const SIGN_IN_LABEL: &str = "passkey sign-in";

/// `POST /login/passkey/options`: the options for `navigator.credentials.get` (any passkey
/// registered here; user verification required), valid five minutes, once.
#[utoipa::path(post, path = "/login/passkey/options", tag = "passkeys",
    responses((status = 200, description = "{options: PublicKeyCredentialRequestOptionsJSON}"),
        (status = 409, body = ErrorBody, description = "passkeys_unavailable")))]
pub async fn options(
    State(st): State<AppState>,
    client: Option<Extension<Client>>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let rp = relying_party(&st, &headers, client.as_deref())?;
    let started = rp.start_assertion()?;
    people(&st)
        .begin_ceremony(codex_relay_core::people::Ceremony {
            challenge: started.challenge,
            kind: CeremonyKind::Login,
            user_id: None,
            request_id: None,
            state: started.state,
            expires_at: started.expires_at,
        })
        .await
        .map_err(store_error)?;
    Ok(Json(json!({"options": started.options})))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct PasskeySignIn {
    /// `PublicKeyCredential.toJSON()` of the assertion.
    #[schema(value_type = Object)]
    pub credential: Value,
}

/// `POST /login/passkey`: checks the assertion and signs this browser in as its user.
#[utoipa::path(post, path = "/login/passkey", tag = "passkeys", request_body = PasskeySignIn,
    responses((status = 200, description = "{user: {id, name, role}} and the login cookie"),
        (status = 403, body = ErrorBody, description = "passkey_refused / passkey_ceremony_unknown / user_disabled"),
        (status = 429, body = ErrorBody)))]
pub async fn sign_in(
    State(st): State<AppState>,
    client: Option<Extension<Client>>,
    headers: HeaderMap,
    Body(b): Body<PasskeySignIn>,
) -> Response {
    let client = client.map(|c| c.0);
    match check(&st, client.as_ref(), &headers, &b.credential).await {
        Ok(res) => res,
        Err(e) => {
            let creds = &st.opts.credentials;
            let ip = client
                .map(|c| c.ip)
                .unwrap_or(std::net::IpAddr::from([127, 0, 0, 1]));
            let wait = creds.throttled(ip);
            creds.failed(ip);
            match wait {
                Some(wait) => crate::gate::throttled(wait),
                None => e.into_response(),
            }
        }
    }
}

async fn check(
    st: &AppState,
    client: Option<&Client>,
    headers: &HeaderMap,
    credential: &Value,
) -> Result<Response, ApiError> {
    let rp = relying_party(st, headers, client)?;
    let assertion = RelyingParty::read_assertion(credential)?;
    let people = people(st);
    let ceremony = people
        .finish_ceremony(&assertion.challenge, CeremonyKind::Login)
        .await?;
    let refused = |m: &str| ApiError::new(StatusCode::FORBIDDEN, "passkey_refused", m.to_owned());
    let Some(key) = people
        .passkey_record(&assertion.credential_id)
        .await
        .map_err(store_error)?
    else {
        return Err(refused(
            "this passkey is not registered here (it may have been removed); sign in with a token",
        ));
    };
    let user = people.user(&key.user_id).await?;
    if user.disabled_at.is_some() {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "user_disabled",
            format!("{} is disabled", user.name),
        ));
    }
    let counters = rp.finish_assertion(
        &ceremony.state,
        &assertion,
        &key.user_handle,
        &key.static_state,
        &key.dynamic_state,
    )?;
    if let Err(e) = people.passkey_used(&key.id, &counters).await {
        tracing::warn!("noting a passkey's use: {e}");
    }
    let token = people
        .create_token(
            &user.id,
            None,
            Some(format!("{SIGN_IN_LABEL} ({})", key.name)),
            None,
        )
        .await?;
    tracing::info!(target: "codex_relay::security", user = %user.name, passkey = %key.name, "signed in with a passkey");
    let https = client.is_some_and(|c| c.https);
    let cookie = format!(
        "{}={}; {}; Max-Age={}",
        crate::ui::login::cookie_name(https),
        token.token,
        crate::ui::login::cookie_attrs(https),
        crate::auth::LOGIN_LIFETIME.as_secs()
    );
    let mut res = Json(json!({"user": {"id": user.id, "name": user.name, "role": user.role}}))
        .into_response();
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        res.headers_mut().insert(header::SET_COOKIE, v);
    }
    Ok(res)
}

/// Logging out of a passkey sign-in revokes the token it made (a token login stays: it is the
/// user's own token, made elsewhere).
pub(crate) async fn end_sign_in(st: &AppState, cookie: &str) {
    let people = people(st);
    let Ok(Some(grant)) = people.check_token(cookie).await else {
        return;
    };
    let Ok(tokens) = people.tokens(Some(&grant.user_id)).await else {
        return;
    };
    let made_by_sign_in = tokens.iter().any(|t| {
        t.id == grant.token_id
            && t.label
                .as_deref()
                .is_some_and(|l| l.starts_with(SIGN_IN_LABEL))
    });
    if made_by_sign_in && let Err(e) = people.revoke_token(&grant.token_id).await {
        tracing::warn!("revoking a passkey sign-in's token at logout: {e}");
    }
}
