//! People over HTTP: who am I (`/api/me`), users, personal tokens, invitations (admin), and
//! the audit log with filters and its JSONL export (admin). Roles are checked before any of
//! these run ([`crate::access`]).

use std::time::Duration;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use codex_relay_core::people::{AuditQuery, People, PeopleError, Person, Role};
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::{IntoParams, ToSchema};

use crate::AppState;
use crate::auth::Principal;
use crate::error::{ApiError, Body, ErrorBody};
use crate::gate::Client;

/// How long an invitation lasts unless told: a week.
const INVITE_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

impl From<PeopleError> for ApiError {
    fn from(e: PeopleError) -> Self {
        let message = e.to_string();
        match e {
            PeopleError::Invalid(_) => ApiError::unprocessable("invalid_person", message),
            PeopleError::NotFound(what) => ApiError::not_found(
                match what {
                    "user" => "unknown_user",
                    "token" => "unknown_token",
                    _ => "not_found",
                },
                message,
            ),
            PeopleError::Conflict(_) => ApiError::new(StatusCode::CONFLICT, "conflict", message),
            PeopleError::Store(_) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "store_unavailable",
                message,
            ),
        }
    }
}

fn store_error(e: codex_relay_core::store::StoreError) -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "store_unavailable",
        e.to_string(),
    )
}

fn people(st: &AppState) -> People {
    st.relay.people()
}

fn parse_role(s: &str) -> Result<Role, ApiError> {
    Role::parse(s).ok_or_else(|| {
        ApiError::unprocessable(
            "invalid_role",
            format!("role {s:?} is not one of viewer, approver, operator, admin"),
        )
    })
}

/// `GET /api/me`: who this request is, with which role and sessions.
#[utoipa::path(get, path = "/api/me", tag = "people",
    responses((status = 200, description = "{person: {id, name, role, front, device?}, sessions}")))]
pub async fn me(
    who: Option<axum::Extension<Principal>>,
    person: Option<axum::Extension<Person>>,
) -> Json<Value> {
    let sessions = match who.as_deref() {
        Some(Principal::User(g)) => json!(g.sessions),
        _ => Value::Null,
    };
    Json(json!({"person": person.map(|p| p.0), "sessions": sessions}))
}

#[utoipa::path(get, path = "/api/users", tag = "people",
    responses((status = 200, description = "{users: [...]}"), (status = 403, body = ErrorBody, description = "forbidden_role: needs admin")))]
pub async fn list_users(State(st): State<AppState>) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!({"users": people(&st).users().await?})))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct NewUser {
    pub name: String,
    pub role: String,
}

#[utoipa::path(post, path = "/api/users", tag = "people", request_body = NewUser,
    responses((status = 201, description = "the user"), (status = 409, body = ErrorBody), (status = 403, body = ErrorBody, description = "forbidden_role: needs admin")))]
pub async fn create_user(
    State(st): State<AppState>,
    person: Option<axum::Extension<Person>>,
    Body(u): Body<NewUser>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let role = parse_role(&u.role)?;
    let user = people(&st)
        .create_user(&u.name, role, person.as_deref())
        .await?;
    Ok((StatusCode::CREATED, Json(json!(user))))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct UserChange {
    pub role: Option<String>,
    pub disabled: Option<bool>,
}

/// `POST /api/users/{id}`: a new role, or disabled (every token and login refused at once).
#[utoipa::path(post, path = "/api/users/{id}", tag = "people", request_body = UserChange,
    responses((status = 200, description = "the user"), (status = 404, body = ErrorBody), (status = 403, body = ErrorBody, description = "forbidden_role: needs admin")))]
pub async fn update_user(
    State(st): State<AppState>,
    Path(id): Path<String>,
    Body(c): Body<UserChange>,
) -> Result<Json<Value>, ApiError> {
    let role = c.role.as_deref().map(parse_role).transpose()?;
    let user = people(&st).update_user(&id, role, c.disabled).await?;
    Ok(Json(json!(user)))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TokensQuery {
    pub user: Option<String>,
}

#[utoipa::path(get, path = "/api/tokens", tag = "people", params(TokensQuery),
    responses((status = 200, description = "{tokens: [...]} (never a secret)"), (status = 403, body = ErrorBody, description = "forbidden_role: needs admin")))]
pub async fn list_tokens(
    State(st): State<AppState>,
    Query(q): Query<TokensQuery>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(
        json!({"tokens": people(&st).tokens(q.user.as_deref()).await?}),
    ))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct NewToken {
    /// The user's id or name.
    pub user: String,
    pub role: Option<String>,
    pub label: Option<String>,
    pub sessions: Option<Vec<String>>,
}

/// `POST /api/tokens`: the secret is in this answer only.
#[utoipa::path(post, path = "/api/tokens", tag = "people", request_body = NewToken,
    responses((status = 201, description = "{token, id, ...}: the secret, this once"), (status = 422, body = ErrorBody), (status = 403, body = ErrorBody, description = "forbidden_role: needs admin")))]
pub async fn create_token(
    State(st): State<AppState>,
    Body(t): Body<NewToken>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let role = t.role.as_deref().map(parse_role).transpose()?;
    let made = people(&st)
        .create_token(&t.user, role, t.label, t.sessions)
        .await?;
    Ok((StatusCode::CREATED, Json(json!(made))))
}

#[utoipa::path(delete, path = "/api/tokens/{id}", tag = "people",
    responses((status = 204), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 403, body = ErrorBody, description = "forbidden_role: needs admin")))]
pub async fn revoke_token(
    State(st): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    people(&st).revoke_token(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(get, path = "/api/invitations", tag = "people",
    responses((status = 200, description = "{invitations: [...]}"), (status = 403, body = ErrorBody, description = "forbidden_role: needs admin")))]
pub async fn list_invitations(State(st): State<AppState>) -> Result<Json<Value>, ApiError> {
    Ok(Json(
        json!({"invitations": people(&st).invitations().await?}),
    ))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NewInvitation {
    pub name: String,
    pub role: String,
    pub sessions: Option<Vec<String>>,
    /// How long it may be used (default a week).
    pub ttl_seconds: Option<u64>,
}

/// `POST /api/invitations`: the link (shown this once) makes the named user when opened and
/// accepted, once.
#[utoipa::path(post, path = "/api/invitations", tag = "people", request_body = NewInvitation,
    responses((status = 201, description = "{id, name, role, expiresAt, path, url}: the link, this once"), (status = 403, body = ErrorBody, description = "forbidden_role: needs admin")))]
pub async fn create_invitation(
    State(st): State<AppState>,
    person: Option<axum::Extension<Person>>,
    client: Option<axum::Extension<Client>>,
    headers: HeaderMap,
    Body(i): Body<NewInvitation>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let role = parse_role(&i.role)?;
    let ttl = i.ttl_seconds.map(Duration::from_secs).unwrap_or(INVITE_TTL);
    let (code, inv) = people(&st)
        .invite(&i.name, role, i.sessions, ttl, person.as_deref())
        .await?;
    let path = format!("/invite/{code}");
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost");
    let scheme = if client.is_some_and(|c| c.https) {
        "https"
    } else {
        "http"
    };
    let mut body = json!(inv);
    body["path"] = json!(path);
    body["url"] = json!(format!("{scheme}://{host}{path}"));
    Ok((StatusCode::CREATED, Json(body)))
}

/// The audit filters: `user` (id or name), `action` (or a prefix ending in `.`), `session`,
/// `since`/`until` (Unix ms), `after` (a `seq`), `limit`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AuditParams {
    pub user: Option<String>,
    pub action: Option<String>,
    pub session: Option<String>,
    pub since: Option<String>,
    pub until: Option<String>,
    pub after: Option<i64>,
    pub limit: Option<i64>,
}

fn time_param(name: &str, v: Option<&str>) -> Result<Option<i64>, ApiError> {
    let Some(v) = v.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    v.parse::<i64>()
        .map(Some)
        .map_err(|_| ApiError::bad_request(format!("{name} {v:?} is not Unix milliseconds")))
}

impl AuditParams {
    fn query(&self) -> Result<AuditQuery, ApiError> {
        Ok(AuditQuery {
            user: self.user.clone(),
            action: self.action.clone(),
            session: self.session.clone(),
            since: time_param("since", self.since.as_deref())?,
            until: time_param("until", self.until.as_deref())?,
            after: self.after,
            limit: self.limit,
        })
    }
}

/// `GET /api/audit`: entries matching the filters, oldest first (`nextAfter` pages on).
#[utoipa::path(get, path = "/api/audit", tag = "people", params(AuditParams),
    responses((status = 200, description = "{entries: [...], nextAfter}"), (status = 403, body = ErrorBody, description = "forbidden_role: needs admin")))]
pub async fn audit(
    State(st): State<AppState>,
    Query(q): Query<AuditParams>,
) -> Result<Json<Value>, ApiError> {
    let entries = people(&st)
        .audit_log(&q.query()?)
        .await
        .map_err(store_error)?;
    let next = entries.last().map(|e| e.seq);
    Ok(Json(json!({"entries": entries, "nextAfter": next})))
}

/// `GET /api/audit/export`: the same as JSON Lines (one entry a line), up to 10 000 a call.
#[utoipa::path(get, path = "/api/audit/export", tag = "people", params(AuditParams),
    responses((status = 200, content_type = "application/x-ndjson", description = "one audit entry a line"), (status = 403, body = ErrorBody, description = "forbidden_role: needs admin")))]
pub async fn export(
    State(st): State<AppState>,
    Query(mut q): Query<AuditParams>,
) -> Result<Response, ApiError> {
    q.limit = Some(q.limit.unwrap_or(10_000));
    let entries = people(&st)
        .audit_log(&q.query()?)
        .await
        .map_err(store_error)?;
    let mut out = String::new();
    for e in &entries {
        out.push_str(&serde_json::to_string(e).unwrap_or_default());
        out.push('\n');
    }
    Ok((
        [
            (header::CONTENT_TYPE, "application/x-ndjson"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"codex-relay-audit.jsonl\"",
            ),
        ],
        out,
    )
        .into_response())
}
