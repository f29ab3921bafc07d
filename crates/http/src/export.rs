//! `GET /api/sessions/{id}/export`: a session's whole history as JSON lines, streamed page by
//! page (the engine's `Relay::export`): what an operator keeps before retention prunes it.

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};

use crate::AppState;
use crate::error::{ApiError, ErrorBody};

#[utoipa::path(get, path = "/api/sessions/{id}/export", tag = "sessions",
    params(("id" = String, Path, description = "session id")),
    responses((status = 200, content_type = "application/x-ndjson",
        description = "one `session` line, one `event` line per logged event, one `request` line per request with its resolution"),
        (status = 404, body = ErrorBody)))]
pub async fn export(
    State(st): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let export = st.relay.export(&id).await?;
    let body = futures::stream::unfold(export, |mut e| async move {
        // A read that fails half-way ends the body early: the client sees a cut download
        // (no final newline-terminated `request` lines), never a silently partial one.
        let chunk = e.next_chunk().await?;
        Some((chunk.map(Bytes::from).map_err(std::io::Error::other), e))
    });
    let name = format!(
        "attachment; filename=\"codex-relay-{}.ndjson\"",
        sanitize(&id)
    );
    Ok((
        [
            (header::CONTENT_TYPE, "application/x-ndjson".to_owned()),
            (header::CONTENT_DISPOSITION, name),
            (header::CACHE_CONTROL, "no-store".to_owned()),
        ],
        Body::from_stream(body),
    )
        .into_response())
}

/// A session id as a file name: letters, digits, `-` and `_` only.
fn sanitize(id: &str) -> String {
    id.chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .take(80)
        .collect()
}
