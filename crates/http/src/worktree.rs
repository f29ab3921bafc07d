//! A session's git worktree over HTTP: `GET /api/sessions/{id}/worktree` (the diff against
//! its base), `POST .../worktree/export` (`{as: "branch", to?, name?}` or `{as: "patch"}`)
//! and `POST .../worktree/merge` (`{into?}`).

use axum::Json;
use axum::extract::{Path, State};
use codex_relay_core::worktree::ExportAs;
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::AppState;
use crate::error::{ApiError, Body, ErrorBody};

#[utoipa::path(get, path = "/api/sessions/{id}/worktree", tag = "sessions",
    params(("id" = String, Path, description = "session id")),
    responses((status = 200, description = "`{branch, base, baseCommit, path, files: [{path, status}], patch, truncated}`"),
        (status = 404, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn diff(
    State(st): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    st.relay.find(&id).await?;
    Ok(Json(
        serde_json::to_value(st.relay.worktree_diff(&id).await?).unwrap_or_default(),
    ))
}

/// `POST /api/sessions/{id}/worktree/export`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExportBody {
    /// `branch` (default): committed to the session's branch, and pushed to `to` (an absolute
    /// path to a repository or an https/ssh URL) as `name` when given; `patch`: one patch.
    #[serde(rename = "as")]
    pub export_as: Option<String>,
    pub to: Option<String>,
    pub name: Option<String>,
}

#[utoipa::path(post, path = "/api/sessions/{id}/worktree/export", tag = "sessions",
    params(("id" = String, Path, description = "session id")), request_body = ExportBody,
    responses((status = 200, description = "`{branch, commit?, to?, patch?}`"),
        (status = 404, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn export(
    State(st): State<AppState>,
    Path(id): Path<String>,
    Body(b): Body<ExportBody>,
) -> Result<Json<Value>, ApiError> {
    let how = match b.export_as.as_deref().unwrap_or("branch") {
        "branch" => ExportAs::Branch {
            to: b.to,
            name: b.name,
        },
        "patch" => ExportAs::Patch,
        other => {
            return Err(ApiError::unprocessable(
                "invalid_export",
                format!("as {other:?} is not an export: give \"branch\" or \"patch\""),
            ));
        }
    };
    st.relay.find(&id).await?;
    Ok(Json(
        serde_json::to_value(st.relay.export_worktree(&id, how).await?).unwrap_or_default(),
    ))
}

/// `POST /api/sessions/{id}/worktree/merge`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MergeBody {
    /// The branch to merge into (default: the base the worktree started from).
    pub into: Option<String>,
}

#[utoipa::path(post, path = "/api/sessions/{id}/worktree/merge", tag = "sessions",
    params(("id" = String, Path, description = "session id")), request_body = MergeBody,
    responses((status = 200, description = "`{branch, into, commit, how}`"),
        (status = 404, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn merge(
    State(st): State<AppState>,
    Path(id): Path<String>,
    Body(b): Body<MergeBody>,
) -> Result<Json<Value>, ApiError> {
    st.relay.find(&id).await?;
    Ok(Json(
        serde_json::to_value(st.relay.merge_worktree(&id, b.into).await?).unwrap_or_default(),
    ))
}
