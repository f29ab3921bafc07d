//! Reference-001 compatibility: pending requests as `permission_request` / `ask_user_question`
//! payloads, and `POST /api/codex/permission/respond {id, action, updatedInput?, message?}`
//! turned into the broker's answers (the same broker MCP answers through: first one wins).

use axum::Json;
use axum::extract::State;
use codex_relay_core::answer::PendingKind;
use codex_relay_core::{Answer, PendingDetails, PendingView, Scope};
use serde_json::{Value, json};

use crate::AppState;
use crate::error::{ApiError, Body, ErrorBody};
use crate::types::{Action, PermissionResolved, PermissionResponse};

/// Who answered, in resolutions and events.
pub const BY: codex_relay_core::Decider =
    codex_relay_core::Decider::Person(codex_relay_core::Front::Http);

/// The reference-001 SSE event for an open request: its event type and data, or `None` for
/// kinds that reference has no event for (tool calls, unknown requests). A sub-agent's
/// request also says which agent asks (`agent`, and `invoke`, the call that spawned it); an
/// approval, what approving it lets Codex do (`reach`).
pub fn compat_event(p: &PendingView) -> Option<(&'static str, Value)> {
    let (kind, mut data) = reference_event(p)?;
    if let Some(reach) = &p.reach {
        data["reach"] = json!(reach);
    }
    if let Some(agent) = &p.agent {
        data["agent"] = json!(agent);
        data["invoke"] = json!(p.invoke);
    }
    Some((kind, data))
}

fn reference_event(p: &PendingView) -> Option<(&'static str, Value)> {
    let permission = |tool: &str, input: Value| {
        // Absent values are left out, as the reference's tool inputs do.
        let input = match input {
            Value::Object(m) => {
                Value::Object(m.into_iter().filter(|(_, v)| !v.is_null()).collect())
            }
            other => other,
        };
        Some((
            "permission_request",
            json!({"id": p.id, "sessionId": p.session_id, "toolName": tool, "toolInput": input,
                "question": p.question}),
        ))
    };
    match &p.details {
        PendingDetails::CommandApproval {
            command,
            cwd,
            reason,
            ..
        } => permission(
            "Bash",
            json!({"command": command, "cwd": cwd, "reason": reason}),
        ),
        PendingDetails::FileChangeApproval {
            reason,
            grant_root,
            changes,
            ..
        } => permission(
            "Edit",
            json!({"reason": reason, "grantRoot": grant_root, "changes": changes}),
        ),
        PendingDetails::PermissionsApproval {
            permissions,
            cwd,
            reason,
        } => permission(
            "Permissions",
            json!({"permissions": permissions, "cwd": cwd, "reason": reason}),
        ),
        PendingDetails::Elicitation { params } => {
            permission("McpElicitation", Value::Object(params.clone()))
        }
        PendingDetails::Question { questions } => {
            let questions: Vec<Value> = questions
                .iter()
                .map(|q| {
                    let header = q
                        .header
                        .clone()
                        .filter(|h| !h.is_empty())
                        .unwrap_or_else(|| q.question.chars().take(12).collect());
                    let options: Vec<Value> = q
                        .options
                        .iter()
                        .flatten()
                        .map(|o| {
                            let description = o
                                .description
                                .clone()
                                .filter(|d| !d.is_empty())
                                .unwrap_or_else(|| o.label.clone());
                            json!({"label": o.label, "description": description})
                        })
                        .collect();
                    json!({"id": q.id, "question": q.question, "header": header,
                        "options": options, "multiSelect": false})
                })
                .collect();
            Some((
                "ask_user_question",
                json!({"id": p.id, "sessionId": p.session_id, "questions": questions}),
            ))
        }
        PendingDetails::ToolCall { .. } | PendingDetails::Other { .. } => None,
    }
}

/// The engine's answer for a reference-001 response to `p`.
fn answer(p: &PendingView, r: &PermissionResponse) -> Result<Answer, ApiError> {
    let message = r
        .message
        .as_deref()
        .map(str::trim)
        .filter(|m| !m.is_empty());
    if let Some(option) = &r.option {
        return p
            .answer_for(option, message.map(str::to_owned))
            .map_err(|e| ApiError::unprocessable("invalid_answer", e));
    }
    match (p.kind, r.action) {
        (_, Action::Cancel) => Ok(Answer::Cancel),
        (PendingKind::ToolCall, Action::Deny) => Ok(Answer::ToolOutput {
            success: false,
            text: message
                .unwrap_or("the user refused this tool call")
                .to_owned(),
        }),
        (PendingKind::Question, Action::Deny) => Ok(Answer::Deny { reason: None }),
        (_, Action::Deny) => Ok(Answer::Deny {
            reason: message.map(str::to_owned),
        }),
        (PendingKind::Question, Action::Allow) => {
            question_answers(p, r.updated_input.as_ref()).map(Answer::Answers)
        }
        (PendingKind::ToolCall | PendingKind::Other, Action::Allow) => {
            let output = r
                .updated_input
                .as_ref()
                .and_then(|u| u.get("output"))
                .map(|o| {
                    o.as_str()
                        .map(str::to_owned)
                        .unwrap_or_else(|| o.to_string())
                })
                .or(message.map(str::to_owned))
                .ok_or_else(|| {
                    ApiError::unprocessable(
                        "invalid_answer",
                        "this request takes an answer: updatedInput {\"output\": \"...\"}",
                    )
                })?;
            Ok(if p.kind == PendingKind::Other {
                Answer::Raw(output)
            } else {
                Answer::ToolOutput {
                    success: true,
                    text: output,
                }
            })
        }
        (_, Action::Allow) if r.for_session == Some(true) => Ok(Answer::Approve {
            scope: Scope::Session,
        }),
        (_, Action::Allow) => Ok(Answer::Approve { scope: Scope::Once }),
    }
}

/// One answer per question, from `updatedInput.answers`: an object keyed by `q<index>`, the
/// question id or the question text, or a list in question order.
fn question_answers(p: &PendingView, input: Option<&Value>) -> Result<Vec<String>, ApiError> {
    let questions = p.questions();
    let given = input.and_then(|u| u.get("answers")).ok_or_else(|| {
        ApiError::unprocessable(
            "invalid_answer",
            "a question takes updatedInput {\"answers\": {\"q0\": \"<option label>\"}}",
        )
    })?;
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Array(a) => a
            .first()
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        other => other.to_string(),
    };
    match given {
        Value::Array(list) => Ok(list.iter().map(text).collect()),
        Value::Object(map) => questions
            .iter()
            .enumerate()
            .map(|(i, q)| {
                [format!("q{i}"), q.id.clone(), q.question.clone()]
                    .iter()
                    .find_map(|k| map.get(k))
                    .map(text)
                    .ok_or_else(|| {
                        ApiError::unprocessable(
                            "invalid_answer",
                            format!("no answer for question {i} (key \"q{i}\")"),
                        )
                    })
            })
            .collect(),
        _ => Err(ApiError::unprocessable(
            "invalid_answer",
            "updatedInput.answers must be an object or a list",
        )),
    }
}

#[utoipa::path(post, path = "/api/codex/permission/respond", tag = "permissions",
    request_body = PermissionResponse,
    responses((status = 200, body = PermissionResolved), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn respond(
    State(st): State<AppState>,
    who: Option<axum::Extension<crate::auth::Principal>>,
    person: Option<axum::Extension<codex_relay_core::people::Person>>,
    client: Option<axum::Extension<crate::gate::Client>>,
    headers: axum::http::HeaderMap,
    Body(r): Body<PermissionResponse>,
) -> Result<axum::response::Response, ApiError> {
    use axum::response::IntoResponse;
    // In a cluster the request may be one another instance opened a moment ago.
    let Some(p) = st.relay.find_pending(&r.id).await else {
        // Gone: the engine says whether it was resolved (409) or never existed (404).
        return Err(st.relay.not_open(&r.id).await.into());
    };
    if who.as_ref().is_some_and(|w| !w.covers(&p.session_id)) {
        return Err(ApiError::new(
            axum::http::StatusCode::FORBIDDEN,
            "forbidden_role",
            "this request's session is outside this token's sessions",
        ));
    }
    let answer = answer(&p, &r)?;
    let mut person = person.map(|p| p.0);
    let mut stepped_up = None;
    if crate::passkeys::approves(&answer) {
        use crate::passkeys::Needs;
        match crate::passkeys::needs_of(&st, &p, who.as_deref()).await? {
            Needs::Nothing => {}
            Needs::Refused(why) => {
                return Err(ApiError::new(
                    axum::http::StatusCode::FORBIDDEN,
                    "step_up_required",
                    why,
                ));
            }
            Needs::Passkey(user) => {
                let Some(credential) = &r.step_up else {
                    return Err(crate::passkeys::step_up_required(&p, false));
                };
                let rp = crate::passkeys::relying_party(&st, &headers, client.as_deref())?;
                let done =
                    crate::passkeys::check_step_up(&st, &rp, &p.id, user.as_deref(), credential)
                        .await?;
                person = person.map(|p| p.with_device(Some(&done.device())));
                stepped_up = Some(done.passkey);
            }
        }
    }
    let resolution = st
        .relay
        .respond_as(&p.session_id, &r.id, answer, BY, person)
        .await?;
    let note = crate::enforce::AuditNote {
        session: Some(p.session_id.clone()),
        request: Some(resolution.id.clone()),
        decision: Some(resolution.decision.as_str().to_owned()),
        rule: None,
        step_up: stepped_up,
    };
    Ok(note.on(Json(PermissionResolved {
        id: resolution.id,
        decision: resolution.decision.as_str().to_owned(),
        by: resolution.by.to_string(),
        by_user: resolution
            .by_user
            .and_then(|p| serde_json::to_value(p).ok()),
        reason: resolution.reason,
    })
    .into_response()))
}

/// Open requests of every session, oldest first.
#[utoipa::path(get, path = "/api/codex/permission/pending", tag = "permissions",
    responses((status = 200, description = "open requests: PendingView objects with sessionId",
        body = Vec<Object>)))]
pub async fn pending(
    State(st): State<AppState>,
    who: Option<axum::Extension<crate::auth::Principal>>,
) -> Json<Vec<PendingView>> {
    let mut open = st.relay.pending(None);
    // A token limited to some sessions sees only their requests.
    open.retain(|p| who.as_ref().is_none_or(|w| w.covers(&p.session_id)));
    Json(open)
}
