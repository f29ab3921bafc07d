//! Codex threads another app-server writes (the active-writer conflict, docs/ATTACH.md): read
//! one without writing it (`thread/read`), or fork it into a new session of this relay
//! (`thread/fork`).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde_json::Value;

use crate::AppState;
use crate::error::{ApiError, ErrorBody};
use crate::types::Created;

#[utoipa::path(get, path = "/api/threads/{id}", tag = "sessions",
    params(("id" = String, Path, description = "Codex thread id")),
    responses((status = 200, description = "the thread as Codex stores it, turns included"),
        (status = 404, body = ErrorBody)))]
pub async fn read(
    State(st): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(st.relay.read_thread(&id).await?))
}

#[utoipa::path(post, path = "/api/threads/{id}/fork", tag = "sessions",
    params(("id" = String, Path, description = "Codex thread id")),
    responses((status = 201, body = Created), (status = 404, body = ErrorBody)))]
pub async fn fork(
    State(st): State<AppState>,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Created>), ApiError> {
    let handle = st.relay.fork_thread(&id).await?;
    Ok((
        StatusCode::CREATED,
        Json(Created {
            session_id: handle.id().to_owned(),
            turn_id: None,
            status: handle.snapshot().status.as_str().to_owned(),
        }),
    ))
}
