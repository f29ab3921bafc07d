//! The session actor: one task per session looping over commands from fronts and events from
//! Codex. Approvals go to the broker and never block this loop.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use codex_relay_codex::{AppServer, IncomingRequest, PeerEvent, Subscription};
use codex_relay_protocol::v2::{
    FileUpdateChange, ServerNotification, ServerRequest, ThreadItem, ThreadResume,
    ThreadResumeParams, ToolCallResponse, TurnStartParams,
};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::{SayInput, SayOutcome, SessionShared};
use crate::error::RelayError;
use crate::event::{Ev, Role};
use crate::mapper;
use crate::relay::{RelayInner, ToolHandler};

pub(crate) enum Command {
    Say {
        input: SayInput,
        reply: oneshot::Sender<Result<SayOutcome, RelayError>>,
    },
    Interrupt {
        reply: oneshot::Sender<Result<bool, RelayError>>,
    },
    Close {
        force: bool,
        reply: oneshot::Sender<Result<(), RelayError>>,
    },
}

pub(crate) struct Actor {
    pub shared: Arc<SessionShared>,
    pub relay: Weak<RelayInner>,
    pub cmds: mpsc::Receiver<Command>,
    pub server: Option<Arc<AppServer>>,
    pub sub: Option<Subscription>,
    pub tools: HashMap<String, Arc<dyn ToolHandler>>,
    /// File changes announced by `item/started` in the running turn, by item id, so a
    /// file-change approval can show its diff.
    pub file_changes: HashMap<String, Vec<FileUpdateChange>>,
}

enum Flow {
    Continue,
    Stop,
}

impl Actor {
    pub async fn run(mut self) {
        loop {
            tokio::select! {
                cmd = self.cmds.recv() => match cmd {
                    Some(cmd) => {
                        if let Flow::Stop = self.handle(cmd).await {
                            break;
                        }
                    }
                    None => break,
                },
                event = next(&mut self.sub), if self.sub.is_some() => self.on_event(event),
            }
        }
        if let Some(relay) = self.relay.upgrade() {
            relay.session_ended(&self.shared.id);
        }
    }

    async fn handle(&mut self, cmd: Command) -> Flow {
        match cmd {
            Command::Say { input, reply } => {
                let _ = reply.send(self.say(input).await);
                Flow::Continue
            }
            Command::Interrupt { reply } => {
                let _ = reply.send(self.interrupt().await);
                Flow::Continue
            }
            Command::Close { force, reply } => {
                if !force {
                    let _ = tokio::time::timeout(Duration::from_secs(3), self.interrupt()).await;
                } else if let (Some(server), Some(turn)) =
                    (&self.server, self.shared.current_turn())
                {
                    let server = server.clone();
                    let id = self.shared.id.clone();
                    tokio::spawn(async move { server.turn_interrupt(&id, &turn).await });
                }
                if let Some(relay) = self.relay.upgrade() {
                    relay.broker.fail_session(
                        &self.shared.id,
                        "session-closed",
                        "the session was closed",
                    );
                }
                self.shared.close();
                self.sub = None;
                let _ = reply.send(Ok(()));
                Flow::Stop
            }
        }
    }

    /// Makes sure the thread is loaded in a live app-server, restarting Codex and resuming
    /// the thread if needed.
    async fn attach(&mut self) -> Result<Arc<AppServer>, RelayError> {
        if let (Some(server), Some(_)) = (&self.server, &self.sub)
            && server.peer().closed().is_none()
        {
            return Ok(server.clone());
        }
        let relay = self
            .relay
            .upgrade()
            .ok_or_else(|| RelayError::Closed(self.shared.id.clone()))?;
        let server = relay.server().await?;
        let sub = server.subscribe_thread(&self.shared.id);
        let meta = self.shared.meta();
        let opts = meta.get("options").cloned().unwrap_or(Value::Null);
        let s = |k: &str| opts.get(k).and_then(Value::as_str).map(str::to_owned);
        let mut params = ThreadResumeParams {
            thread_id: self.shared.id.clone(),
            cwd: s("cwd"),
            model: s("model"),
            approval_policy: opts
                .get("approvalPolicy")
                .and_then(|v| serde_json::from_value(v.clone()).ok()),
            sandbox: opts
                .get("sandbox")
                .and_then(|v| serde_json::from_value(v.clone()).ok()),
            config: opts.get("config").and_then(|v| v.as_object().cloned()),
            base_instructions: s("baseInstructions"),
            developer_instructions: s("developerInstructions"),
            ..Default::default()
        };
        server
            .version()
            .adapt_approval_policy(&mut params.approval_policy);
        server.call::<ThreadResume>(&params).await.map_err(|e| {
            tracing::warn!(session = %self.shared.id, "thread/resume failed: {e}");
            RelayError::from_resume(&self.shared.id, e)
        })?;
        tracing::info!(session = %self.shared.id, "thread resumed in codex app-server");
        self.server = Some(server.clone());
        self.sub = Some(sub);
        Ok(server)
    }

    async fn say(&mut self, input: SayInput) -> Result<SayOutcome, RelayError> {
        let server = self.attach().await?;
        let items = input.to_input();
        if let Some(turn) = self.shared.current_turn() {
            match server.steer(&self.shared.id, &turn, &items).await {
                Ok(()) => return Ok(SayOutcome::Steered { turn_id: turn }),
                // The turn ended meanwhile: start a new one below.
                Err(e) => {
                    tracing::debug!(session = %self.shared.id, "steer failed ({e}); starting a new turn")
                }
            }
        }
        let mut params = TurnStartParams {
            thread_id: self.shared.id.clone(),
            input: items,
            output_schema: input.output_schema.clone(),
            ..Default::default()
        };
        if input.plan_mode {
            let model = self.shared.snapshot().model.unwrap_or_default();
            params.extra.insert(
                "collaborationMode".into(),
                serde_json::json!({"mode": "plan", "settings": {"model": model, "developer_instructions": null}}),
            );
        }
        let turn = server.turn_start(&params).await?.turn;
        self.shared
            .turn_started(&turn.id, input.output_schema.is_some());
        self.shared.persist();
        Ok(SayOutcome::Started { turn_id: turn.id })
    }

    async fn interrupt(&mut self) -> Result<bool, RelayError> {
        let (Some(server), Some(turn)) = (&self.server, self.shared.current_turn()) else {
            return Ok(false);
        };
        server.turn_interrupt(&self.shared.id, &turn).await?;
        Ok(true)
    }

    /// Handles one event and whatever else is already queued (up to a bound), so a burst of
    /// notifications costs one lock, one store hand-off and one wake-up of waiting fronts.
    fn on_event(&mut self, first: Option<PeerEvent>) {
        const BURST: usize = 512;
        let mut events = Vec::new();
        let mut raws = Vec::new();
        let mut persist = false;
        let mut next = Some(first);
        let mut handled = 0;
        while let Some(event) = next.take() {
            match event {
                Some(PeerEvent::Notification(n)) => {
                    match &n.notification {
                        ServerNotification::ItemStarted(i) => {
                            if let ThreadItem::FileChange(f) = &i.item {
                                self.file_changes.insert(f.id.clone(), f.changes.clone());
                            }
                        }
                        ServerNotification::TurnCompleted(_) => self.file_changes.clear(),
                        _ => {}
                    }
                    raws.push(n.raw);
                    let mapped = mapper::map(&n.notification);
                    events.extend(mapped.events);
                    if let Some(d) = mapped.delta {
                        self.shared.push_delta(d);
                    }
                    persist |= matches!(n.notification, ServerNotification::TurnCompleted(_));
                }
                Some(PeerEvent::Request(req)) => {
                    // Everything before the request is logged before it.
                    self.shared.push_raw_all(std::mem::take(&mut raws));
                    self.shared.append_all(std::mem::take(&mut events));
                    self.shared.push_raw_all(vec![req.raw.clone()]);
                    self.on_request(req);
                }
                Some(PeerEvent::Closed(err)) => {
                    self.flush(raws, events, persist);
                    return self.codex_gone(err.to_string());
                }
                None => {
                    self.flush(raws, events, persist);
                    return self.codex_gone("the connection to Codex ended".into());
                }
            }
            handled += 1;
            if handled < BURST {
                next = self.sub.as_mut().and_then(|s| s.try_recv()).map(Some);
            }
        }
        self.flush(raws, events, persist);
    }

    fn flush(
        &self,
        raws: Vec<std::sync::Arc<String>>,
        events: Vec<(Role, Option<String>, Ev)>,
        persist: bool,
    ) {
        self.shared.push_raw_all(raws);
        self.shared.append_all(events);
        if persist {
            self.shared.persist();
        }
    }

    fn on_request(&mut self, req: IncomingRequest) {
        if let ServerRequest::ToolCall(call) = req.request()
            && let Some(handler) = self.tools.get(&call.tool).cloned()
        {
            let args = call.arguments.clone();
            tokio::spawn(async move {
                let (ok, text) = match handler.call(args).await {
                    Ok(text) => (true, text),
                    Err(text) => (false, text),
                };
                req.responder.respond(Ok(
                    serde_json::to_value(ToolCallResponse::text(ok, text)).unwrap_or_default()
                ));
            });
            return;
        }
        match (self.relay.upgrade(), &self.server) {
            (Some(relay), Some(server)) => {
                let changes = match req.request() {
                    ServerRequest::FileChangeApproval(p) => {
                        self.file_changes.get(&p.item_id).map(Vec::as_slice)
                    }
                    _ => None,
                };
                relay.broker.open(&self.shared, server, req, changes);
            }
            _ => drop(req), // answered fail-closed by its responder
        }
    }

    /// Codex died (or was shut down) under this session.
    fn codex_gone(&mut self, why: String) {
        self.sub = None;
        self.server = None;
        let message = format!("Codex exited: {why}");
        if let Some(relay) = self.relay.upgrade() {
            relay
                .broker
                .fail_session(&self.shared.id, "codex-exit", &message);
        }
        self.shared.append(
            Role::System,
            self.shared.current_turn(),
            Ev::Error {
                message: message.clone(),
                retrying: false,
            },
        );
        self.shared.abandon_turn(&message);
        self.shared.persist();
    }
}

async fn next(sub: &mut Option<Subscription>) -> Option<PeerEvent> {
    match sub {
        Some(s) => s.recv().await,
        None => std::future::pending().await,
    }
}
