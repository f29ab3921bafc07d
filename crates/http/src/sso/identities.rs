//! Identities at the OpenID provider bound to users (admin): list, bind, unbind. A bound
//! identity (issuer and `sub`) signs in as its user; binding is how an existing user gets
//! single sign-on. docs/HTTP.md "Single sign-on".

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use codex_relay_core::people::Person;
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::{IntoParams, ToSchema};

use crate::AppState;
use crate::error::{ApiError, Body, ErrorBody};

/// The issuer a binding names: the one given, else the configured provider's.
fn issuer(st: &AppState, given: Option<String>) -> Result<String, ApiError> {
    given
        .filter(|i| !i.trim().is_empty())
        .or_else(|| st.opts.oidc.as_ref().map(|o| o.issuer().to_owned()))
        .ok_or_else(|| {
            ApiError::unprocessable(
                "invalid_identity",
                "single sign-on is not configured: name the issuer",
            )
        })
}

#[utoipa::path(get, path = "/api/users/{id}/identities", tag = "people",
    responses((status = 200, description = "{identities: [{issuer, subject, userId, email?, createdAt, createdBy?, lastSignInAt?}]}"),
        (status = 404, body = ErrorBody), (status = 403, body = ErrorBody, description = "forbidden_role: needs admin")))]
pub async fn list(
    State(st): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let identities = st.relay.people().identities(Some(&id)).await?;
    Ok(Json(json!({"identities": identities})))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct NewIdentity {
    /// The provider's `sub` claim for the person (stable; an email is not an identity).
    pub subject: String,
    /// The issuer; default: the configured provider's.
    pub issuer: Option<String>,
}

/// `POST /api/users/{id}/identities`: the identity then signs in as this user.
#[utoipa::path(post, path = "/api/users/{id}/identities", tag = "people", request_body = NewIdentity,
    responses((status = 201, description = "the identity"), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "already bound to a user"),
        (status = 422, body = ErrorBody), (status = 403, body = ErrorBody, description = "forbidden_role: needs admin")))]
pub async fn bind(
    State(st): State<AppState>,
    Path(id): Path<String>,
    person: Option<axum::Extension<Person>>,
    Body(b): Body<NewIdentity>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let issuer = issuer(&st, b.issuer)?;
    let identity = st
        .relay
        .people()
        .bind_identity(&id, &issuer, &b.subject, person.as_deref())
        .await?;
    Ok((StatusCode::CREATED, Json(json!(identity))))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct IdentityQuery {
    pub subject: String,
    pub issuer: Option<String>,
}

/// `DELETE /api/users/{id}/identities?subject=...`: the identity no longer signs in (logins
/// it made stay until they expire or their tokens are revoked).
#[utoipa::path(delete, path = "/api/users/{id}/identities", tag = "people", params(IdentityQuery),
    responses((status = 204), (status = 404, body = ErrorBody), (status = 403, body = ErrorBody, description = "forbidden_role: needs admin")))]
pub async fn unbind(
    State(st): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<IdentityQuery>,
) -> Result<StatusCode, ApiError> {
    let issuer = issuer(&st, q.issuer)?;
    st.relay
        .people()
        .unbind_identity(&id, &issuer, &q.subject)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
