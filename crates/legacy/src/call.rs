//! One `codex` / `codex-reply` call: start (or continue) the session, say the prompt, stream the
//! turn's events to the client as `codex/event` notifications, ask approvals by elicitation,
//! and answer with `{threadId, content}` when the turn ends. `notifications/cancelled` for the
//! call interrupts the turn.

use std::time::Duration;

use codex_relay_core::event::TurnEndStatus;
use codex_relay_core::{FollowOptions, Followed, PendingView, Relay, SayInput};
use rmcp::model::{
    CallToolResult, ClientResult, ContentBlock, CustomNotification, CustomRequest, RequestId,
    ServerNotification, ServerRequest,
};
use rmcp::{Peer, RoleServer};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::approval;
use crate::events::Translator;
use crate::params::{CodexParams, ReplyParams};

/// How long a cancelled call waits for Codex to end the turn (to forward `turn_aborted`).
const CANCEL_SETTLE: Duration = Duration::from_secs(10);
/// Events read from the log at a time.
const BATCH: usize = 500;

/// The MCP side of one call.
pub struct Call {
    pub peer: Peer<RoleServer>,
    pub request_id: RequestId,
    /// Cancelled when the client cancels the call.
    pub ct: CancellationToken,
    /// The signed-in person making the call (over HTTP), recorded on its answers.
    pub person: Option<codex_relay_core::people::Person>,
}

fn id_text(id: &RequestId) -> String {
    match serde_json::to_value(id) {
        Ok(Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

impl Call {
    async fn notify(&self, thread: &str, event_id: &str, msg: Value) {
        let params = json!({
            "_meta": {"requestId": self.request_id, "threadId": thread},
            "id": event_id,
            "msg": msg,
        });
        let note = ServerNotification::CustomNotification(CustomNotification::new(
            "codex/event",
            Some(params),
        ));
        if let Err(e) = self.peer.send_notification(note).await {
            tracing::debug!("codex/event not sent: {e}");
        }
    }

    /// `codex`: a new session, `session_configured` first, then the first turn.
    pub async fn codex(&self, relay: &Relay, p: CodexParams) -> Result<CallToolResult, String> {
        let opts = p.create_options()?;
        let (handle, _) = relay
            .create(opts.clone())
            .await
            .map_err(|e| e.to_string())?;
        let id = handle.id().to_owned();
        let snap = handle.snapshot();
        self.notify(
            &id,
            "",
            json!({
                "type": "session_configured",
                "session_id": id,
                "model": snap.model,
                "approval_policy": opts.approval_policy.map(|a| a.as_str()),
                "sandbox_policy": opts.sandbox.map(|s| json!({"type": s})),
                "cwd": snap.cwd,
                "history_log_id": 0,
                "history_entry_count": 0,
            }),
        )
        .await;
        self.turn(relay, &id, p.prompt).await
    }

    /// `codex-reply`: the next turn of a session (any Codex thread id works).
    pub async fn reply(&self, relay: &Relay, p: ReplyParams) -> Result<CallToolResult, String> {
        let id = p.thread()?;
        if p.prompt.trim().is_empty() {
            return Err(codex_relay_core::InvalidStart::EmptyPrompt.to_string());
        }
        self.turn(relay, &id, p.prompt).await
    }

    async fn turn(
        &self,
        relay: &Relay,
        id: &str,
        prompt: String,
    ) -> Result<CallToolResult, String> {
        let handle = relay.session(id).await.map_err(|e| e.to_string())?;
        // Followed from before the turn starts: nothing it logs can be missed.
        let mut follow = relay
            .follow(
                id,
                handle.snapshot().last_seq,
                FollowOptions {
                    deltas: true,
                    batch: BATCH,
                },
            )
            .await
            .map_err(|e| e.to_string())?;
        let outcome = relay
            .say_started(id, SayInput::text(prompt))
            .await
            .map_err(|e| e.to_string())?;
        let turn = outcome.turn_id().to_owned();
        let asks = CancellationToken::new();
        let _stop_asks = asks.clone().drop_guard();
        let mut tr = Translator::default();
        let mut cancelled_at: Option<tokio::time::Instant> = None;
        loop {
            let settle = async {
                match cancelled_at {
                    Some(at) => tokio::time::sleep_until(at + CANCEL_SETTLE).await,
                    None => std::future::pending().await,
                }
            };
            let next = tokio::select! {
                next = follow.next() => next,
                _ = self.ct.cancelled(), if cancelled_at.is_none() => {
                    cancelled_at = Some(tokio::time::Instant::now());
                    if let Err(e) = relay.interrupt(id).await {
                        tracing::warn!(session = id, "interrupting the cancelled call's turn failed: {e}");
                    }
                    continue;
                }
                _ = settle => {
                    return Err("the call was cancelled; the turn did not end in time".into());
                }
            };
            let events = match next {
                Some(Ok(Followed::Events(events))) => events,
                Some(Ok(Followed::Delta(d))) => {
                    if d.turn == turn
                        && let Some(msg) = tr.delta(&d)
                    {
                        self.notify(id, &turn, msg).await;
                    }
                    continue;
                }
                Some(Ok(Followed::End)) | None => {
                    return Err("the session was closed before the turn ended".into());
                }
                Some(Err(e)) => return Err(e.to_string()),
            };
            for env in events {
                let t = tr.event(&env);
                for msg in t.msgs {
                    self.notify(id, &turn, msg).await;
                }
                if let Some(p) = t.request {
                    self.ask(relay, id, p, asks.clone());
                }
                if let Some((status, error)) = t.end
                    && env.turn.as_deref().is_none_or(|t| t == turn)
                {
                    if cancelled_at.is_some() {
                        return Err("the call was cancelled; the turn was interrupted".into());
                    }
                    return Ok(finish(id, status, error, tr.last_agent_message.take()));
                }
            }
        }
    }

    /// Sends the legacy elicitation for `p` and answers the request with the client's
    /// decision. An error answer is not a decision: the request stays pending, and the
    /// engine declines it at its deadline (the legacy server waited forever).
    fn ask(&self, relay: &Relay, thread: &str, p: PendingView, stop: CancellationToken) {
        let Some(params) = approval::elicitation_params(&p, thread, &id_text(&self.request_id))
        else {
            return;
        };
        let peer = self.peer.clone();
        let relay = relay.clone();
        let thread = thread.to_owned();
        let person = self.person.clone();
        tokio::spawn(async move {
            let request = ServerRequest::CustomRequest(CustomRequest::new(
                "elicitation/create",
                Some(params),
            ));
            let reply = tokio::select! {
                r = peer.send_request(request) => r,
                _ = stop.cancelled() => return,
            };
            let result = match reply {
                Ok(ClientResult::CustomResult(v)) => v.0,
                Ok(other) => serde_json::to_value(other).unwrap_or(Value::Null),
                Err(e) => {
                    tracing::info!(request = %p.id, "the elicitation got no decision ({e}); it stays pending until its deadline");
                    return;
                }
            };
            let answer = approval::answer(&result);
            match relay
                .respond_as(&thread, &p.id, answer, approval::BY, person)
                .await
            {
                Ok(r) => {
                    tracing::info!(request = %p.id, decision = %r.decision.as_str(), "answered by legacy elicitation")
                }
                Err(e) => {
                    tracing::info!(request = %p.id, "the elicitation answer was not used: {e}")
                }
            }
        });
    }
}

/// The call's result: `{threadId, content}` as structured content and the final message as
/// text; an aborted or failed turn is an error result that says so.
fn finish(
    thread: &str,
    status: TurnEndStatus,
    error: Option<String>,
    last: Option<String>,
) -> CallToolResult {
    let (content, is_error) = match status {
        TurnEndStatus::Completed => (last.unwrap_or_default(), false),
        TurnEndStatus::Cancelled => ("the turn was aborted (interrupted)".to_owned(), true),
        TurnEndStatus::Failed => (error.unwrap_or_else(|| "the turn failed".to_owned()), true),
    };
    let mut result = if is_error {
        CallToolResult::error(vec![ContentBlock::text(content.clone())])
    } else {
        CallToolResult::success(vec![ContentBlock::text(content.clone())])
    };
    result.structured_content = Some(json!({"threadId": thread, "content": content}));
    result
}
