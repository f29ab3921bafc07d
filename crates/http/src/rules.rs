//! Approval rules over HTTP: list them with their counters, create or replace one, delete
//! one, and a rule suggested from an open request ("always allow this command here").

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use codex_relay_core::rules::{Action, Rule, RuleSpec};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::AppState;
use crate::error::{ApiError, Body, ErrorBody};

/// `GET /api/rules`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuleList {
    /// Every rule, by name.
    pub rules: Vec<Rule>,
    /// Decisions since the relay started: allowed and denied by a rule, left to a human.
    pub counts: RuleCounts,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RuleCounts {
    pub allowed: u64,
    pub denied: u64,
    pub asked: u64,
}

/// `GET /api/rules/suggest` parameters.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SuggestQuery {
    /// An open request's id.
    pub request: String,
    /// `allow` (default), `deny` or `ask`.
    pub action: Option<Action>,
}

#[utoipa::path(get, path = "/api/rules", tag = "rules",
    responses((status = 200, body = RuleList)))]
pub async fn list(State(st): State<AppState>) -> Json<RuleList> {
    use std::sync::atomic::Ordering::Relaxed;
    let c = st.relay.rule_counts();
    Json(RuleList {
        rules: st.relay.rules(),
        counts: RuleCounts {
            allowed: c.allowed.load(Relaxed),
            denied: c.denied.load(Relaxed),
            asked: c.asked.load(Relaxed),
        },
    })
}

/// Creates the rule, or replaces the one of that name made over the API; it answers requests
/// that open from now on.
#[utoipa::path(post, path = "/api/rules", tag = "rules", request_body = RuleSpec,
    responses((status = 200, body = Rule), (status = 409, body = ErrorBody,
        description = "a rule of that name comes from the rules file"),
        (status = 422, body = ErrorBody)))]
pub async fn put(
    State(st): State<AppState>,
    Body(spec): Body<RuleSpec>,
) -> Result<axum::response::Response, ApiError> {
    use axum::response::IntoResponse;
    let rule = st.relay.put_rule(spec).await?;
    let note = crate::enforce::AuditNote {
        rule: Some(rule.spec.name.clone()),
        ..Default::default()
    };
    Ok(note.on(Json(rule).into_response()))
}

#[utoipa::path(delete, path = "/api/rules/{name}", tag = "rules",
    responses((status = 204), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn delete(
    State(st): State<AppState>,
    Path(name): Path<String>,
) -> Result<axum::response::Response, ApiError> {
    use axum::response::IntoResponse;
    st.relay.delete_rule(&name).await?;
    let note = crate::enforce::AuditNote {
        rule: Some(name),
        ..Default::default()
    };
    Ok(note.on(StatusCode::NO_CONTENT.into_response()))
}

/// A rule for requests like an open one, not saved: the command's words (or the prefix Codex
/// proposes) in the request's directory, or the files a patch touches. Edit it, then POST it.
#[utoipa::path(get, path = "/api/rules/suggest", tag = "rules", params(SuggestQuery),
    responses((status = 200, body = RuleSpec), (status = 404, body = ErrorBody),
        (status = 422, body = ErrorBody)))]
pub async fn suggest(
    State(st): State<AppState>,
    Query(q): Query<SuggestQuery>,
) -> Result<Json<RuleSpec>, ApiError> {
    let p = st.relay.pending_by_id(&q.request).ok_or_else(|| {
        ApiError::not_found(
            "unknown_request",
            format!("no open request {:?}", q.request),
        )
    })?;
    st.relay
        .suggest_rule(&p, q.action.unwrap_or(Action::Allow))
        .map(Json)
        .ok_or_else(|| {
            ApiError::unprocessable(
                "no_rule_fits",
                "rules answer command and file-change approvals only",
            )
        })
}
