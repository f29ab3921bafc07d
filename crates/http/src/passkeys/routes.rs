//! The passkey API: a named user registers passkeys (options, then the authenticator's
//! answer), lists and removes their own (the admin: anyone's), and asks for the challenge of a
//! step-up before approving a risky request.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use codex_relay_core::people::{Ceremony, CeremonyKind, Role};
use codex_relay_core::store::PasskeyRecord;
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::{IntoParams, ToSchema};

use super::webauthn::RelyingParty;
use super::{Needs, SELF_PREFIX, needs_of, people, relying_party, self_step_up, store_error};
use crate::AppState;
use crate::auth::Principal;
use crate::error::{ApiError, Body, ErrorBody};
use crate::gate::Client;

/// The named user a passkey route acts for: passkeys belong to named users, never to the
/// relay's own token (which has no person to verify).
fn named(who: Option<&Principal>) -> Result<&codex_relay_core::people::Grant, ApiError> {
    match who {
        Some(Principal::User(g)) => Ok(g),
        _ => Err(ApiError::new(
            StatusCode::CONFLICT,
            "named_user_required",
            "passkeys belong to named users: the relay's own token has no person to verify. Invite yourself as a named user (admin role if you like), sign in with that, and register the passkey there",
        )),
    }
}

/// `POST /api/passkeys/register`: the options for `navigator.credentials.create` (a
/// discoverable credential with user verification), valid for five minutes, once. A user who
/// has a passkey already steps up with it first (`stepUp`).
#[utoipa::path(post, path = "/api/passkeys/register", tag = "passkeys", request_body = SelfStepUp,
    responses((status = 200, description = "{options: PublicKeyCredentialCreationOptionsJSON}"),
        (status = 409, body = ErrorBody, description = "named_user_required: the relay's token has no passkeys; passkeys_unavailable: not a secure context or an IP address")))]
pub async fn register_options(
    State(st): State<AppState>,
    who: Option<axum::Extension<Principal>>,
    client: Option<axum::Extension<Client>>,
    headers: HeaderMap,
    Body(b): Body<SelfStepUp>,
) -> Result<Json<Value>, ApiError> {
    let g = named(who.as_deref())?;
    self_step_up(
        &st,
        &headers,
        client.as_deref(),
        g,
        "passkey.register",
        b.step_up.as_ref(),
    )
    .await?;
    let rp = relying_party(&st, &headers, client.as_deref())?;
    let people = people(&st);
    let have: Vec<String> = people
        .passkey_records(&g.user_id)
        .await
        .map_err(store_error)?
        .into_iter()
        .map(|k| k.id)
        .collect();
    let started = rp.start_registration(&g.user_id, &g.user_name, &have)?;
    people
        .begin_ceremony(Ceremony {
            challenge: started.challenge,
            kind: CeremonyKind::Register,
            user_id: Some(g.user_id.clone()),
            request_id: None,
            state: started.state,
            expires_at: started.expires_at,
        })
        .await
        .map_err(store_error)?;
    Ok(Json(json!({"options": started.options})))
}

/// The step-up a change to one's own passkeys needs once one has any.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SelfStepUp {
    /// The assertion of a passkey you have, made for the challenge of
    /// `POST /api/passkeys/step-up {request: "passkey.register"}` (or `"passkey.remove:<id>"`).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub step_up: Option<Value>,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct NewPasskey {
    /// What to call it ("phone", "laptop").
    pub name: String,
    /// `PublicKeyCredential.toJSON()` of the new credential.
    #[schema(value_type = Object)]
    pub credential: Value,
}

/// `POST /api/passkeys`: registers the credential the authenticator made for the options.
#[utoipa::path(post, path = "/api/passkeys", tag = "passkeys", request_body = NewPasskey,
    responses((status = 201, description = "the passkey {id, userId, name, createdAt}"),
        (status = 403, body = ErrorBody, description = "passkey_refused / passkey_ceremony_unknown"),
        (status = 422, body = ErrorBody)))]
pub async fn register(
    State(st): State<AppState>,
    who: Option<axum::Extension<Principal>>,
    client: Option<axum::Extension<Client>>,
    headers: HeaderMap,
    Body(k): Body<NewPasskey>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let g = named(who.as_deref())?;
    let rp = relying_party(&st, &headers, client.as_deref())?;
    let challenge = RelyingParty::registration_challenge(&k.credential)?;
    let people = people(&st);
    let ceremony = people
        .finish_ceremony(&challenge, CeremonyKind::Register)
        .await?;
    if ceremony.user_id.as_deref() != Some(g.user_id.as_str()) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "passkey_ceremony_unknown",
            "this registration was started by someone else",
        ));
    }
    let made = rp.finish_registration(&ceremony.state, &k.credential)?;
    let info = people
        .add_passkey(PasskeyRecord {
            id: made.id,
            user_id: g.user_id.clone(),
            name: k.name,
            user_handle: made.user_handle,
            static_state: made.static_state,
            dynamic_state: made.dynamic_state,
            created_at: codex_relay_core::time::now_ms(),
            last_used_at: None,
        })
        .await?;
    tracing::info!(target: "codex_relay::security", user = %g.user_name, passkey = %info.name, "a passkey was registered");
    Ok((StatusCode::CREATED, Json(json!(info))))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PasskeyQuery {
    /// The admin: only this user's (id or name).
    pub user: Option<String>,
}

/// `GET /api/passkeys`: your passkeys; the admin sees everyone's (or `?user=`'s).
#[utoipa::path(get, path = "/api/passkeys", tag = "passkeys", params(PasskeyQuery),
    responses((status = 200, description = "{passkeys: [{id, userId, name, createdAt, lastUsedAt?}]}")))]
pub async fn list(
    State(st): State<AppState>,
    who: Option<axum::Extension<Principal>>,
    Query(q): Query<PasskeyQuery>,
) -> Result<Json<Value>, ApiError> {
    let people = people(&st);
    let user = match who.as_deref() {
        Some(Principal::User(g)) if g.role < Role::Admin || q.user.is_none() => {
            Some(g.user_id.clone())
        }
        _ => match &q.user {
            Some(u) => Some(people.user(u).await?.id),
            None => None,
        },
    };
    Ok(Json(
        json!({"passkeys": people.passkeys(user.as_deref()).await?}),
    ))
}

/// `DELETE /api/passkeys/{id}` (`{stepUp}` for your own): removes one of your passkeys, after
/// a fresh check with one of them; the admin removes anyone else's without one.
#[utoipa::path(delete, path = "/api/passkeys/{id}", tag = "passkeys", request_body = SelfStepUp,
    responses((status = 204), (status = 404, body = ErrorBody),
        (status = 403, body = ErrorBody, description = "step_up_required: removing your own needs a passkey check")))]
pub async fn remove(
    State(st): State<AppState>,
    who: Option<axum::Extension<Principal>>,
    client: Option<axum::Extension<Client>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Option<axum::Json<SelfStepUp>>,
) -> Result<StatusCode, ApiError> {
    let owner = match who.as_deref() {
        Some(Principal::User(g)) if g.role < Role::Admin => Some(g.user_id.clone()),
        _ => None,
    };
    // Your own passkey (also an admin's own): only after a check with one you have.
    if let Some(Principal::User(g)) = who.as_deref() {
        let mine = people(&st)
            .passkey_record(&id)
            .await
            .map_err(store_error)?
            .is_some_and(|k| k.user_id == g.user_id);
        if mine {
            let step_up = body.as_ref().and_then(|b| b.step_up.as_ref());
            let purpose = format!("passkey.remove:{id}");
            self_step_up(&st, &headers, client.as_deref(), g, &purpose, step_up).await?;
        }
    }
    people(&st)
        .remove_passkey(&id, owner.as_deref())
        .await
        .map_err(|e| match e {
            codex_relay_core::people::PeopleError::NotFound(_) => {
                ApiError::not_found("unknown_passkey", "no such passkey of yours")
            }
            other => other.into(),
        })?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct StepUpAsk {
    /// The request to approve, or `passkey.register` / `passkey.remove:<id>` to change your
    /// own passkeys.
    pub request: String,
}

/// `POST /api/passkeys/step-up`: the challenge of a step-up for approving one request
/// (`navigator.credentials.get` options; the assertion goes with the approval as `stepUp`).
#[utoipa::path(post, path = "/api/passkeys/step-up", tag = "passkeys", request_body = StepUpAsk,
    responses((status = 200, description = "{options: PublicKeyCredentialRequestOptionsJSON, needed: bool}"),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn step_up_options(
    State(st): State<AppState>,
    who: Option<axum::Extension<Principal>>,
    client: Option<axum::Extension<Client>>,
    headers: HeaderMap,
    Body(ask): Body<StepUpAsk>,
) -> Result<Json<Value>, ApiError> {
    let rp = relying_party(&st, &headers, client.as_deref())?;
    // A change to one's own passkeys.
    if ask.request.starts_with(SELF_PREFIX) {
        let g = named(who.as_deref())?;
        let options = begin_step_up(&st, &rp, &ask.request, Some(g.user_id.clone())).await?;
        return Ok(Json(json!({"options": options, "needed": true})));
    }
    if who.as_deref().is_some_and(|w| w.role() < Role::Approver) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden_role",
            "approving needs the approver role",
        ));
    }
    let Some(p) = st.relay.find_pending(&ask.request).await else {
        return Err(st.relay.not_open(&ask.request).await.into());
    };
    if who.as_deref().is_some_and(|w| !w.covers(&p.session_id)) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden_role",
            "this request's session is outside this token's sessions",
        ));
    }
    let needs = needs_of(&st, &p, who.as_deref()).await?;
    if let Needs::Refused(why) = &needs {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "step_up_unavailable",
            why.clone(),
        ));
    }
    let user = match who.as_deref() {
        Some(Principal::User(g)) => Some(g.user_id.clone()),
        _ => None,
    };
    let options = begin_step_up(&st, &rp, &p.id, user).await?;
    Ok(Json(
        json!({"options": options, "needed": needs != Needs::Nothing}),
    ))
}

/// Starts a step-up ceremony for request `request` (by `user`, if known): its options.
pub(crate) async fn begin_step_up(
    st: &AppState,
    rp: &RelyingParty,
    request: &str,
    user: Option<String>,
) -> Result<Value, ApiError> {
    let started = rp.start_assertion()?;
    people(st)
        .begin_ceremony(Ceremony {
            challenge: started.challenge,
            kind: CeremonyKind::StepUp,
            user_id: user,
            request_id: Some(request.to_owned()),
            state: started.state,
            expires_at: started.expires_at,
        })
        .await
        .map_err(store_error)?;
    Ok(started.options)
}
