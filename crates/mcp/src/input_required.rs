//! Approvals and questions for clients on protocol 2026-07-28, which forbids server-to-client
//! requests: `codex_status` answers with an `InputRequiredResult` carrying one elicitation form
//! per pending request the call has not asked yet. The client's retry carries the answers
//! (applied first; the first answer wins, as everywhere) and the echoed `requestState`, which
//! lists what this call already asked, so a declined form is not asked again in it and stays
//! pending for `codex_respond`.

use std::collections::BTreeMap;

use codex_relay_core::{Relay, RelayError};
use rmcp::RoleServer;
use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, InputRequest,
    InputRequiredResult, InputResponses,
};
use rmcp::service::RequestContext;
use serde::{Deserialize, Serialize};

use crate::elicit::{BY, Form};

/// Whether this request may be answered with elicitation forms in an `InputRequiredResult`:
/// it uses the per-request lifecycle (2026-07-28 and later) and declares form elicitation.
pub fn applies(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|v| !v.has_initialize())
        && context
            .client_capabilities()
            .and_then(|c| c.elicitation)
            .is_some_and(|e| e.form.is_some() || e.url.is_none())
}

/// What a call keeps between its rounds (echoed by the client; only ids, so a forged state
/// can do no more than `codex_respond` could).
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct RoundState {
    pub asked: Vec<String>,
}

impl RoundState {
    pub fn parse(state: Option<&str>) -> Self {
        state
            .and_then(|s| serde_json::from_str(s).ok())
            .unwrap_or_default()
    }
}

/// Applies the answers a retry carries. Accepted forms answer their request; declined or
/// cancelled ones leave it pending.
/// Answers are recorded as `person`'s (the caller signed in, over HTTP).
pub async fn apply(
    relay: &Relay,
    session: &str,
    responses: InputResponses,
    person: Option<codex_relay_core::people::Person>,
) {
    let pending = relay.pending(Some(session));
    for (id, value) in responses {
        let Some(p) = pending.iter().find(|p| p.id == id) else {
            tracing::debug!(request = %id, "answer for a request that is no longer pending");
            continue;
        };
        let result: ElicitResult = match serde_json::from_value(value) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(request = %id, "unusable elicitation result ({e}); it stays pending");
                continue;
            }
        };
        if result.action != ElicitationAction::Accept {
            tracing::info!(request = %id, action = ?result.action, "form not accepted; the request stays pending for codex_respond");
            continue;
        }
        let Some(form) = Form::for_request(p) else {
            continue;
        };
        let answer = match form.answer(&result.content.unwrap_or_default()) {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(request = %id, "unusable form answer ({e}); it stays pending");
                continue;
            }
        };
        match relay
            .respond_as(session, &id, answer, BY, person.clone())
            .await
        {
            Ok(r) => {
                tracing::info!(request = %id, decision = %r.decision.as_str(), "answered by elicitation")
            }
            Err(RelayError::AlreadyResolved { .. }) => {}
            Err(e) => tracing::warn!(request = %id, "the form's answer was refused: {e}"),
        }
    }
}

/// An `InputRequiredResult` for the session's pending requests not yet in `state`, if any.
pub fn ask(relay: &Relay, session: &str, state: &mut RoundState) -> Option<InputRequiredResult> {
    let mut requests = BTreeMap::new();
    for p in relay.pending(Some(session)) {
        if state.asked.contains(&p.id) {
            continue;
        }
        let Some(form) = Form::for_request(&p) else {
            continue;
        };
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: form.message,
            requested_schema: form.schema,
        };
        requests.insert(
            p.id.clone(),
            InputRequest::Elicitation(ElicitRequest::new(params)),
        );
        state.asked.push(p.id);
    }
    if requests.is_empty() {
        return None;
    }
    let state = serde_json::to_string(state).ok();
    Some(InputRequiredResult::new(Some(requests), state))
}
