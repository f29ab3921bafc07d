//! Approvals and questions as MCP elicitation: for each session created or continued through a
//! connection whose client can be asked (it declared `elicitation` and negotiated a protocol
//! version that still allows server-to-client requests), a background task watches the
//! session's pending requests and sends each new one as an `elicitation/create` form. No tool
//! call waits for it. An accepted form answers the request (`by = "mcp-elicitation"`); a
//! declined or cancelled form, an error, or a client that cannot answer leaves it pending for
//! `codex_respond`. A form whose request was answered elsewhere meanwhile is cancelled.

use std::collections::HashSet;
use std::sync::Mutex;

use codex_relay_core::answer::PendingKind;
use codex_relay_core::{
    Answer, Ev, Follow, FollowOptions, Followed, PendingView, Relay, RelayError,
};
use rmcp::model::{
    ClientResult, ElicitRequest, ElicitRequestParams, ElicitationAction, ElicitationSchema,
    ServerRequest,
};
use rmcp::service::{ElicitationMode, PeerRequestOptions};
use rmcp::{Peer, RoleServer};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::view;

/// Who answers through this path, as recorded in `request-resolved`.
pub const BY: codex_relay_core::Decider =
    codex_relay_core::Decider::Person(codex_relay_core::Front::McpElicitation);

/// Whether `peer` can be sent `elicitation/create` forms.
pub fn can_elicit(peer: &Peer<RoleServer>) -> bool {
    let Some(info) = peer.peer_info() else {
        // No `initialize`: the 2026-07-28 per-request lifecycle, which forbids
        // server-to-client requests.
        return false;
    };
    info.protocol_version.has_initialize()
        && peer
            .supported_elicitation_modes()
            .contains(&ElicitationMode::Form)
}

/// One connection's elicitation state: the sessions it watches. Dropping it stops the tasks.
pub struct Elicitor {
    relay: Relay,
    watched: Mutex<HashSet<String>>,
    stop: CancellationToken,
}

impl Drop for Elicitor {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Following a session for its requests: no live deltas.
const NO_DELTAS: FollowOptions = FollowOptions {
    deltas: false,
    batch: 256,
};

impl Elicitor {
    pub fn new(relay: Relay) -> Self {
        Self {
            relay,
            watched: Mutex::default(),
            stop: CancellationToken::new(),
        }
    }

    /// Starts forwarding `session_id`'s requests to `peer` (once per session; nothing when the
    /// client cannot be asked); answers are recorded as `person`'s (the caller signed in).
    pub async fn watch(
        &self,
        peer: &Peer<RoleServer>,
        session_id: &str,
        person: Option<codex_relay_core::people::Person>,
    ) {
        if !can_elicit(peer) {
            return;
        }
        if !self
            .watched
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(session_id.to_owned())
        {
            return;
        }
        let Ok(snap) = self.relay.status(session_id) else {
            return;
        };
        // Followed from now; what is pending already is asked first.
        let Ok(follow) = self
            .relay
            .follow(session_id, snap.last_seq, NO_DELTAS)
            .await
        else {
            return;
        };
        let task = Watch {
            relay: self.relay.clone(),
            peer: peer.clone(),
            session: session_id.to_owned(),
            stop: self.stop.clone(),
            person,
        };
        tokio::spawn(task.run(follow));
    }
}

#[derive(Clone)]
struct Watch {
    relay: Relay,
    peer: Peer<RoleServer>,
    session: String,
    stop: CancellationToken,
    /// Who answers through this connection's forms (recorded as `byUser`).
    person: Option<codex_relay_core::people::Person>,
}

impl Watch {
    async fn run(self, mut follow: Follow) {
        let mut asked: HashSet<String> = HashSet::new();
        let mut open = self.relay.pending(Some(&self.session));
        loop {
            for p in open.drain(..) {
                if asked.insert(p.id.clone())
                    && let Some(form) = Form::for_request(&p)
                {
                    tokio::spawn(self.clone().ask(p, form));
                }
            }
            if self.peer.is_transport_closed() {
                break;
            }
            let next = tokio::select! {
                next = follow.next() => next,
                _ = self.stop.cancelled() => break,
            };
            match next {
                Some(Ok(Followed::Events(events))) => {
                    open.extend(events.iter().filter_map(|e| match &e.ev {
                        Ev::RequestOpened { request } => Some((**request).clone()),
                        _ => None,
                    }))
                }
                Some(Ok(Followed::Delta(_))) => {}
                Some(Ok(Followed::End)) | Some(Err(_)) | None => break,
            }
        }
        tracing::debug!(session = %self.session, "elicitation watcher stopped");
    }

    fn still_pending(&self, id: &str) -> bool {
        self.relay
            .pending(Some(&self.session))
            .iter()
            .any(|p| p.id == id)
    }

    /// Waits until request `id` is no longer pending (answered elsewhere, timed out, ...).
    async fn resolved(&self, id: &str) {
        let Ok(snap) = self.relay.status(&self.session) else {
            return;
        };
        // Followed first, looked at second: a resolution in between is not missed.
        let Ok(mut follow) = self
            .relay
            .follow(&self.session, snap.last_seq, NO_DELTAS)
            .await
        else {
            return;
        };
        if !self.still_pending(id) {
            return;
        }
        while let Some(Ok(next)) = follow.next().await {
            match next {
                Followed::Events(events) => {
                    if events.iter().any(|e| {
                        matches!(&e.ev, Ev::RequestResolved { id: resolved, .. } if resolved == id)
                    }) {
                        return;
                    }
                }
                Followed::Delta(_) => {}
                Followed::End => return,
            }
        }
    }

    async fn ask(self, p: PendingView, form: Form) {
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: form.message.clone(),
            requested_schema: form.schema.clone(),
        };
        let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
        let mut handle = match self
            .peer
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
        {
            Ok(h) => h,
            Err(e) => {
                tracing::info!(request = %p.id, "could not send the elicitation ({e}); it stays pending for codex_respond");
                return;
            }
        };
        let reply = tokio::select! {
            reply = &mut handle.rx => reply,
            _ = self.resolved(&p.id) => {
                let _ = handle.cancel(Some("answered elsewhere".into())).await;
                return;
            }
            _ = self.stop.cancelled() => {
                let _ = handle.cancel(Some("the connection's server is going away".into())).await;
                return;
            }
        };
        let result = match reply {
            Ok(Ok(ClientResult::ElicitResult(r))) => r,
            Ok(Ok(other)) => {
                tracing::warn!(request = %p.id, "unexpected answer to elicitation/create: {other:?}");
                return;
            }
            Ok(Err(e)) => {
                tracing::info!(request = %p.id, "the client did not answer the elicitation ({e}); it stays pending for codex_respond");
                return;
            }
            Err(_) => return, // the connection closed
        };
        if result.action != ElicitationAction::Accept {
            tracing::info!(request = %p.id, action = ?result.action, "elicitation not accepted; the request stays pending for codex_respond");
            return;
        }
        let content = result.content.unwrap_or(Value::Null);
        let answer = match form.answer(&content) {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(request = %p.id, "unusable elicitation answer ({e}); the request stays pending");
                return;
            }
        };
        match self
            .relay
            .respond_as(&self.session, &p.id, answer, BY, self.person.clone())
            .await
        {
            Ok(r) => {
                tracing::info!(request = %p.id, decision = %r.decision.as_str(), "answered by elicitation")
            }
            Err(RelayError::AlreadyResolved { .. }) => {}
            Err(e) => {
                tracing::warn!(request = %p.id, "the elicitation answer was refused: {e}; the request stays pending")
            }
        }
    }
}

/// The form sent for one pending request, and how its content becomes answers.
#[derive(Debug, Clone)]
pub struct Form {
    pub message: String,
    pub schema: ElicitationSchema,
    kind: FormKind,
}

#[derive(Debug, Clone)]
enum FormKind {
    /// `decision`, one of the request's options (+ optional `reason` sent with a denial);
    /// read by the engine ([`PendingView::answer_for`]).
    Decision(Box<PendingView>),
    /// One property per question, in order.
    Questions(Vec<String>),
}

impl Form {
    /// The form for `p`, or `None` for requests a form cannot answer (tool calls, raw JSON).
    pub fn for_request(p: &PendingView) -> Option<Form> {
        let session = &p.session_id;
        match p.kind {
            PendingKind::Question => {
                let qs = view::questions(p);
                let mut props = Map::new();
                let mut keys = Vec::new();
                for (i, (id, question, options)) in qs.iter().enumerate() {
                    let key = id.clone().unwrap_or_else(|| format!("answer{}", i + 1));
                    let mut prop = json!({"type": "string", "title": question});
                    if !options.is_empty() {
                        prop["enum"] = json!(options);
                    }
                    props.insert(key.clone(), prop);
                    keys.push(key);
                }
                let schema = json!({"type": "object", "properties": props, "required": keys});
                Some(Form {
                    message: format!("Codex (session {session}) asks:\n{}", p.question),
                    schema: ElicitationSchema::from_json_schema(schema.as_object()?.clone())
                        .ok()?,
                    kind: FormKind::Questions(keys),
                })
            }
            PendingKind::ToolCall | PendingKind::Other => None,
            _ if p.options.is_empty() => None,
            _ => {
                let schema = json!({
                    "type": "object",
                    "properties": {
                        "decision": {"type": "string", "title": "Decision", "enum": p.options},
                        "reason": {
                            "type": "string",
                            "title": "Reason",
                            "description": "Why (optional; passed to Codex with a denial)"
                        }
                    },
                    "required": ["decision"]
                });
                Some(Form {
                    message: format!(
                        "Codex (session {session}) asks for approval:\n{}",
                        view::describe(p)
                    ),
                    schema: ElicitationSchema::from_json_schema(schema.as_object()?.clone())
                        .ok()?,
                    kind: FormKind::Decision(Box::new(p.clone())),
                })
            }
        }
    }

    /// The answer an accepted form's content gives.
    pub fn answer(&self, content: &Value) -> Result<Answer, String> {
        let field = |k: &str| {
            content
                .get(k)
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|s| !s.is_empty())
        };
        match &self.kind {
            FormKind::Decision(p) => {
                let decision = field("decision").ok_or("no decision in the form")?;
                p.answer_for(decision, field("reason").map(str::to_owned))
                    .map_err(|_| format!("{decision:?} is not one of the form's decisions"))
            }
            FormKind::Questions(keys) => keys
                .iter()
                .map(|k| {
                    field(k)
                        .map(str::to_owned)
                        .ok_or_else(|| format!("no answer for {k}"))
                })
                .collect::<Result<_, _>>()
                .map(Answer::Answers),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(kind: PendingKind, options: &[&str], details: Value) -> PendingView {
        serde_json::from_value(json!({
            "id": "req_1", "sessionId": "s1", "kind": kind, "question": "Allow Codex to run `rm x`?",
            "options": options, "details": details, "turn": "t", "createdAt": 0, "deadline": 1
        }))
        .unwrap()
    }

    #[test]
    fn approval_forms_offer_the_options_and_a_reason() {
        let p = view(
            PendingKind::CommandApproval,
            &["approve", "approve for session", "deny", "cancel"],
            json!({"command": "rm x", "cwd": "/w"}),
        );
        let form = Form::for_request(&p).unwrap();
        let schema = serde_json::to_value(&form.schema).unwrap();
        assert_eq!(
            schema["properties"]["decision"]["enum"],
            json!(["approve", "approve for session", "deny", "cancel"])
        );
        assert_eq!(schema["required"], json!(["decision"]));
        assert!(form.message.contains("rm x") && form.message.contains("/w"));
        assert_eq!(
            form.answer(&json!({"decision": "deny", "reason": "too risky"}))
                .unwrap(),
            Answer::deny("too risky")
        );
        assert_eq!(
            form.answer(&json!({"decision": "approve", "reason": "ok"}))
                .unwrap(),
            Answer::approve()
        );
        assert!(form.answer(&json!({})).is_err());
    }

    #[test]
    fn question_forms_have_one_field_per_question_and_tool_calls_none() {
        let p = view(
            PendingKind::Question,
            &["staging", "prod"],
            json!({"questions": [
                {"id": "env", "question": "Which environment?", "options": [{"label": "staging"}, {"label": "prod"}]},
                {"id": "why", "question": "Why?"}
            ]}),
        );
        let form = Form::for_request(&p).unwrap();
        let schema = serde_json::to_value(&form.schema).unwrap();
        assert_eq!(
            schema["properties"]["env"]["enum"],
            json!(["staging", "prod"])
        );
        assert_eq!(schema["properties"]["why"]["type"], "string");
        assert_eq!(
            form.answer(&json!({"env": "prod", "why": "release"}))
                .unwrap(),
            Answer::Answers(vec!["prod".into(), "release".into()])
        );
        assert!(Form::for_request(&view(PendingKind::ToolCall, &[], json!({}))).is_none());
    }
}
