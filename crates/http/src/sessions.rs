//! The session endpoints: create, list, snapshot, message, interrupt, close, event history,
//! limits (budget, deadline, idle watchdog, prices).

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use codex_relay_core::api::start::{self, StartRequest};
use codex_relay_core::{ListFilter, SayInput, SayOutcome, SessionStatus};

use crate::AppState;
use crate::error::{ApiError, Body, ErrorBody};
use crate::types::*;

/// Events one history page returns at most.
const MAX_PAGE: usize = 1000;

#[utoipa::path(post, path = "/api/sessions", tag = "sessions", request_body = CreateSession,
    responses((status = 201, body = Created), (status = 422, body = ErrorBody),
        (status = 503, body = ErrorBody)))]
pub async fn create(
    State(st): State<AppState>,
    Body(body): Body<CreateSession>,
) -> Result<axum::response::Response, ApiError> {
    let opts = StartRequest {
        prompt: Some(body.prompt),
        cwd: body.cwd,
        model: body.model,
        effort: body.effort,
        approval_policy: body.approval_policy,
        sandbox: body.sandbox,
        full_auto: body.full_auto == Some(true),
        bypass_approvals_and_sandbox: body.dangerously_bypass_approvals_and_sandbox == Some(true),
        profile: body.profile,
        config: body.config.map(start::read_config_strings),
        base_instructions: body.base_instructions,
        developer_instructions: body.developer_instructions,
        images: body.images.unwrap_or_default(),
        output_schema: body.output_schema,
        plan_mode: body.plan_mode == Some(true),
        labels: body.labels.unwrap_or_default(),
        on_daemon: body.on_daemon == Some(true),
        worktree: body.worktree.map(Into::into),
    }
    .options()
    .map_err(|e| ApiError::unprocessable("invalid_options", e.to_string()))?;
    let mut opts = opts;
    opts.limits = body.limits.unwrap_or_default();
    opts.budget = body.budget.unwrap_or_default();
    opts.prices = body.prices;
    let change = codex_relay_core::limits::LimitsChange {
        budget: Some(opts.budget),
        prices: opts.prices,
        limits: None,
    };
    change
        .check()
        .map_err(|e| ApiError::unprocessable("invalid_options", e))?;
    let (handle, first) = st.relay.create(opts).await?;
    let note = crate::enforce::AuditNote {
        session: Some(handle.id().to_owned()),
        ..Default::default()
    };
    Ok(note.on((
        StatusCode::CREATED,
        Json(Created {
            session_id: handle.id().to_owned(),
            turn_id: first
                .map(|f| f.turn_id().to_owned())
                .filter(|t| !t.is_empty()),
            status: handle.snapshot().status.as_str().to_owned(),
        }),
    )
        .into_response()))
}

#[utoipa::path(get, path = "/api/sessions", tag = "sessions", params(ListQuery),
    responses((status = 200, body = SessionList), (status = 400, body = ErrorBody)))]
pub async fn list(
    State(st): State<AppState>,
    who: Option<axum::Extension<crate::auth::Principal>>,
    Query(q): Query<ListQuery>,
) -> Result<Json<SessionList>, ApiError> {
    let limit = q.limit.unwrap_or(50).clamp(1, 500);
    let offset: usize = match &q.cursor {
        Some(c) => c
            .parse()
            .map_err(|_| ApiError::bad_request(format!("cursor {c:?} is not a nextCursor")))?,
        None => 0,
    };
    let status = match &q.status {
        Some(s) => Some(SessionStatus::parse(s).ok_or_else(|| {
            ApiError::bad_request(format!(
                "status {s:?} is not one of active, awaiting_approval, awaiting_input, idle, interrupted, error, closed"
            ))
        })?),
        None => None,
    };
    // Rows are newest first; a page is a window of the filtered list.
    let rows = st
        .relay
        .list(ListFilter {
            cwd: q.cwd.clone(),
            limit: Some(if status.is_some() {
                usize::MAX / 2
            } else {
                offset + limit + 1
            }),
        })
        .await?;
    let mut rows: Vec<_> = rows
        .into_iter()
        .filter(|r| status.is_none() || r.status == status)
        // A token limited to some sessions lists only those.
        .filter(|r| who.as_ref().is_none_or(|w| w.covers(&r.session_id)))
        .skip(offset)
        .take(limit + 1)
        .collect();
    let more = rows.len() > limit;
    rows.truncate(limit);
    let sessions = rows
        .into_iter()
        .map(|r| {
            let snap = r
                .owned
                .then(|| st.relay.status(&r.session_id).ok())
                .flatten();
            SessionRow {
                status: r.status.map(|s| s.as_str().to_owned()),
                model: snap.as_ref().and_then(|s| s.model.clone()),
                usage: snap
                    .and_then(|s| s.usage)
                    .and_then(|u| serde_json::to_value(u).ok()),
                session_id: r.session_id,
                cwd: r.cwd,
                preview: r.preview,
                updated_at: r.updated_at,
                source: r.source,
                owned: r.owned,
                live: r.live,
                agents: r.agents.iter().map(Into::into).collect(),
            }
        })
        .collect();
    Ok(Json(SessionList {
        sessions,
        next_cursor: more.then(|| (offset + limit).to_string()),
    }))
}

#[utoipa::path(get, path = "/api/sessions/{id}", tag = "sessions",
    params(("id" = String, Path, description = "session id")),
    responses((status = 200, body = SessionView), (status = 404, body = ErrorBody)))]
pub async fn get(
    State(st): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<SessionView>, ApiError> {
    let mut view: SessionView = st.relay.find(&id).await?.into();
    if let Some(position) = st.relay.queued_position(&id) {
        view.queued = Some(serde_json::json!({
            "position": position, "hold": st.relay.rate_limits().hold
        }));
    }
    Ok(Json(view))
}

#[utoipa::path(post, path = "/api/sessions/{id}/messages", tag = "sessions",
    params(("id" = String, Path, description = "session id")), request_body = Message,
    responses((status = 200, body = Said), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn message(
    State(st): State<AppState>,
    Path(id): Path<String>,
    Body(m): Body<Message>,
) -> Result<Json<Said>, ApiError> {
    if m.text.trim().is_empty() {
        return Err(ApiError::unprocessable(
            "empty_message",
            "text is empty; say what Codex should do",
        ));
    }
    let cwd = st.relay.status(&id).ok().and_then(|s| s.cwd);
    let images = start::images(m.images, cwd.as_deref().map(std::path::Path::new))
        .map_err(|e| ApiError::unprocessable("invalid_image", e.to_string()))?;
    let outcome = st
        .relay
        .say(
            &id,
            SayInput {
                text: m.text,
                images,
                limits: m.limits.unwrap_or_default(),
                ..Default::default()
            },
        )
        .await?;
    let (mode, position) = match &outcome {
        SayOutcome::Started { .. } => ("started", None),
        SayOutcome::Steered { .. } => ("steered", None),
        SayOutcome::Queued { position, .. } => ("queued", Some(*position)),
    };
    Ok(Json(Said {
        mode: mode.into(),
        turn_id: outcome.turn_id().to_owned(),
        position,
    }))
}

#[utoipa::path(post, path = "/api/sessions/{id}/interrupt", tag = "sessions",
    params(("id" = String, Path, description = "session id")),
    responses((status = 200, body = Interrupted), (status = 404, body = ErrorBody)))]
pub async fn interrupt(
    State(st): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Interrupted>, ApiError> {
    let interrupted = st.relay.interrupt(&id).await?;
    Ok(Json(Interrupted { interrupted }))
}

#[utoipa::path(delete, path = "/api/sessions/{id}", tag = "sessions",
    params(("id" = String, Path, description = "session id"), CloseQuery),
    responses((status = 204, description = "closed"), (status = 404, body = ErrorBody)))]
pub async fn close(
    State(st): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<CloseQuery>,
) -> Result<StatusCode, ApiError> {
    st.relay.close(&id, q.force.unwrap_or(false)).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(get, path = "/api/sessions/{id}/events", tag = "sessions",
    params(("id" = String, Path, description = "session id"), EventsQuery),
    responses((status = 200, body = EventPage), (status = 404, body = ErrorBody)))]
pub async fn events(
    State(st): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<EventsQuery>,
) -> Result<Json<EventPage>, ApiError> {
    let last_seq = st.relay.find(&id).await?.last_seq;
    let limit = q.limit.unwrap_or(500).clamp(1, MAX_PAGE);
    let events = st.relay.events(&id, q.after.unwrap_or(0), limit).await?;
    Ok(Json(EventPage { events, last_seq }))
}

#[utoipa::path(get, path = "/api/sessions/{id}/limits", tag = "sessions",
    params(("id" = String, Path, description = "session id")),
    responses((status = 200, body = codex_relay_core::limits::LimitsView),
        (status = 404, body = ErrorBody)))]
pub async fn limits(
    State(st): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<codex_relay_core::limits::LimitsView>, ApiError> {
    Ok(Json(st.relay.limits(&id).await?))
}

/// Changes a session's budget (each limit named replaces the old one; raising one it reached
/// lets it start turns again), its turns' limits or its price table.
#[utoipa::path(post, path = "/api/sessions/{id}/limits", tag = "sessions",
    params(("id" = String, Path, description = "session id")),
    request_body = codex_relay_core::limits::LimitsChange,
    responses((status = 200, body = codex_relay_core::limits::LimitsView),
        (status = 404, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn set_limits(
    State(st): State<AppState>,
    Path(id): Path<String>,
    Body(change): Body<codex_relay_core::limits::LimitsChange>,
) -> Result<Json<codex_relay_core::limits::LimitsView>, ApiError> {
    Ok(Json(st.relay.set_limits(&id, change).await?))
}
