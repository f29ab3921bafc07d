//! The thread operations of a session (review, fork, rollback, compact, its model and
//! effort) and the model list, over the engine's verbs (docs/HTTP.md, "Thread operations").

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use codex_relay_core::{Forked, ModelChoice, ModelInfo, ReviewTarget, RolledBack};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::AppState;
use crate::error::{ApiError, Body, ErrorBody};

/// What to review.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReviewRequest {
    /// `{"type": "uncommittedChanges"}`, `{"type": "baseBranch", "branch"}`,
    /// `{"type": "commit", "sha", "title"?}` or `{"type": "custom", "instructions"}`.
    pub target: ReviewTarget,
}

/// A turn an operation started.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnStarted {
    pub session_id: String,
    pub turn_id: String,
}

/// Where to fork.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForkRequest {
    /// Fork through this turn (one of the session's `turns`; Codex 0.169+); absent: all of
    /// the history.
    pub turn_id: Option<String>,
}

/// How many turns to drop.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RollbackRequest {
    /// The last `turns` turns of the history go (at least 1).
    pub turns: u32,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Compacting {
    pub session_id: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Models {
    pub models: Vec<ModelInfo>,
}

#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
pub struct ModelsQuery {
    /// Models hidden from the default picker too.
    pub include_hidden: Option<bool>,
}

/// Starts a review turn; its `review` event carries the findings, and once it ends the
/// session's `result` is the review (structured).
#[utoipa::path(post, path = "/api/sessions/{id}/review", tag = "threads",
    params(("id" = String, Path, description = "session id")),
    request_body = ReviewRequest,
    responses((status = 202, body = TurnStarted), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn review(
    State(st): State<AppState>,
    Path(id): Path<String>,
    Body(body): Body<ReviewRequest>,
) -> Result<(StatusCode, Json<TurnStarted>), ApiError> {
    let started = st.relay.review(&id, body.target).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(TurnStarted {
            session_id: id,
            turn_id: started.turn_id().to_owned(),
        }),
    ))
}

/// Forks the session into a new one (with its settings), through a turn or whole.
#[utoipa::path(post, path = "/api/sessions/{id}/fork", tag = "threads",
    params(("id" = String, Path, description = "session id")),
    request_body = ForkRequest,
    responses((status = 201, body = Forked), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 422, body = ErrorBody),
        (status = 501, body = ErrorBody, description = "this Codex forks whole threads only")))]
pub async fn fork(
    State(st): State<AppState>,
    Path(id): Path<String>,
    Body(body): Body<ForkRequest>,
) -> Result<(StatusCode, Json<Forked>), ApiError> {
    let forked = st.relay.fork(&id, body.turn_id).await?;
    Ok((StatusCode::CREATED, Json(forked)))
}

/// Drops the last turns from the thread's history (files they changed stay changed).
#[utoipa::path(post, path = "/api/sessions/{id}/rollback", tag = "threads",
    params(("id" = String, Path, description = "session id")),
    request_body = RollbackRequest,
    responses((status = 200, body = RolledBack), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "a turn runs"),
        (status = 422, body = ErrorBody)))]
pub async fn rollback(
    State(st): State<AppState>,
    Path(id): Path<String>,
    Body(body): Body<RollbackRequest>,
) -> Result<Json<RolledBack>, ApiError> {
    Ok(Json(st.relay.rollback(&id, body.turns).await?))
}

/// Compacts the thread's history; Codex runs it as a turn.
#[utoipa::path(post, path = "/api/sessions/{id}/compact", tag = "threads",
    params(("id" = String, Path, description = "session id")),
    responses((status = 202, body = Compacting), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody)))]
pub async fn compact(
    State(st): State<AppState>,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Compacting>), ApiError> {
    st.relay.compact(&id).await?;
    Ok((StatusCode::ACCEPTED, Json(Compacting { session_id: id })))
}

/// Sets the model and reasoning effort of the session's next turns (the fields given).
#[utoipa::path(post, path = "/api/sessions/{id}/model", tag = "threads",
    params(("id" = String, Path, description = "session id")),
    request_body = ModelChoice,
    responses((status = 200, body = ModelChoice), (status = 404, body = ErrorBody),
        (status = 422, body = ErrorBody)))]
pub async fn set_model(
    State(st): State<AppState>,
    Path(id): Path<String>,
    Body(choice): Body<ModelChoice>,
) -> Result<Json<ModelChoice>, ApiError> {
    Ok(Json(st.relay.set_model(&id, choice).await?))
}

/// The models Codex offers, with the reasoning efforts each takes.
#[utoipa::path(get, path = "/api/models", tag = "threads", params(ModelsQuery),
    responses((status = 200, body = Models), (status = 503, body = ErrorBody)))]
pub async fn models(
    State(st): State<AppState>,
    Query(q): Query<ModelsQuery>,
) -> Result<Json<Models>, ApiError> {
    let models = st.relay.models(q.include_hidden == Some(true)).await?;
    Ok(Json(Models { models }))
}
