//! The session actor: one task per session looping over operations from fronts (each
//! operation's runner is in its file in op/) and events from Codex. Approvals go to the broker
//! and never block this loop. It holds narrow handles (the pool, a broker handle, its
//! `MAX_SESSIONS` slot guard), never the relay.

use std::collections::HashMap;
use std::sync::Arc;

use codex_relay_codex::{AppServer, IncomingRequest, PeerError, PeerEvent, Subscription};
use codex_relay_protocol::v2::{
    FileUpdateChange, ServerNotification, ServerRequest, ThreadItem, ThreadResume,
    ThreadResumeParams, ToolCallResponse, TurnStartParams,
};
use futures::future::BoxFuture;
use tokio::sync::{mpsc, oneshot};

use super::agent_sync::{AgentResumed, Seen};
use super::{Logged, SayInput, SayOutcome, SessionShared};
use crate::broker::Broker;
use crate::error::RelayError;
use crate::event::{Ev, Role};
use crate::mapper;
use crate::op::Operation;
use crate::pool::Pool;
use crate::slots::{SlotGuard, Slots};
use crate::tool::ToolHandler;

/// Where an operation's typed reply goes.
pub(crate) type Replier<T> = oneshot::Sender<Result<T, RelayError>>;

/// An operation the session's actor runs: its runner.
pub(crate) trait ActorOp: Operation {
    fn on_actor(self, actor: &mut Actor, reply: Replier<Self::Reply>) -> BoxFuture<'_, Flow>;
}

/// An operation on its way to the actor, with where its reply goes.
pub(crate) trait Job: Send {
    fn run(self: Box<Self>, actor: &mut Actor) -> BoxFuture<'_, Flow>;
}

pub(crate) struct Asked<O: Operation> {
    pub op: O,
    pub reply: Replier<O::Reply>,
}

impl<O: ActorOp> Job for Asked<O> {
    fn run(self: Box<Self>, actor: &mut Actor) -> BoxFuture<'_, Flow> {
        let Asked { op, reply } = *self;
        op.on_actor(actor, reply)
    }
}

pub(crate) struct Actor {
    pub shared: Arc<SessionShared>,
    /// Where this session's requests go.
    pub broker: Broker,
    /// The pool this session's app-server comes from: the same process for life, restarted
    /// on demand.
    pub servers: Pool,
    /// Where a dormant (restored) session claims its `MAX_SESSIONS` slot when used again.
    pub slots: Slots,
    /// This session's slot; dropping it (close, the actor ending or crashing) frees it.
    pub slot: Option<SlotGuard>,
    pub cmds: mpsc::Receiver<Box<dyn Job>>,
    pub server: Option<Arc<AppServer>>,
    /// The Codex daemon's connection, for a session whose thread lives there (attach.rs):
    /// its verbs go there, without overrides, and it is never resumed in the relay's Codex.
    pub attached: Option<codex_relay_codex::Peer>,
    pub sub: Option<Subscription>,
    pub tools: HashMap<String, Arc<dyn ToolHandler>>,
    /// File changes announced by `item/started` in the running turn, by item id, so a
    /// file-change approval can show its diff.
    pub file_changes: HashMap<String, Vec<FileUpdateChange>>,
    /// Answers of the `thread/resume` calls that subscribe to sub-agents' threads.
    pub agent_tx: mpsc::Sender<AgentResumed>,
    pub agent_rx: mpsc::Receiver<AgentResumed>,
    pub agent_seen: Seen,
    /// Live events of the session's own thread wait in `sub` while a late `thread/resume`
    /// answer is on its way (catch_up.rs), so what it shows is logged before them.
    pub catching_up: bool,
    /// The operator's limits, checked again against what Codex reports a resumed thread runs
    /// with; and where a session without a directory works.
    pub limits: crate::policy::StartPolicy,
    pub default_cwd: std::path::PathBuf,
}

pub(crate) enum Flow {
    Continue,
    Stop,
}

impl Actor {
    pub async fn run(mut self) {
        loop {
            tokio::select! {
                job = self.cmds.recv() => match job {
                    Some(job) => {
                        if let Flow::Stop = job.run(&mut self).await {
                            break;
                        }
                    }
                    None => break,
                },
                event = next(&mut self.sub), if self.sub.is_some() && !self.catching_up => self.on_event(event),
                Some(resumed) = self.agent_rx.recv() => self.on_agent_resumed(resumed),
            }
        }
        self.servers.release(&self.shared.id);
        // The slot guard goes with the actor.
    }

    /// Makes sure the thread is loaded in a live app-server, restarting Codex and resuming
    /// the thread if needed.
    pub(super) async fn attach(&mut self) -> Result<Arc<AppServer>, RelayError> {
        if let (Some(server), Some(_)) = (&self.server, &self.sub)
            && server.peer().closed().is_none()
        {
            return Ok(server.clone());
        }
        let opts = self.shared.meta().options;
        let home = opts.codex_home.clone().map(Into::into);
        let server = self.servers.server_for(&self.shared.id, home).await?;
        let sub = server.subscribe_thread(&self.shared.id);
        // Sub-agents known from before (the store) keep reaching this session.
        for thread in self.shared.agent_threads() {
            sub.follow(&thread);
        }
        let mut params = ThreadResumeParams {
            thread_id: self.shared.id.clone(),
            cwd: opts.cwd,
            model: opts.model,
            approval_policy: opts.approval_policy,
            sandbox: opts.sandbox,
            config: opts.config,
            base_instructions: opts.base_instructions,
            developer_instructions: opts.developer_instructions,
            ..Default::default()
        };
        server
            .version()
            .adapt_approval_policy(&mut params.approval_policy);
        let resumed = server.call::<ThreadResume>(&params).await.map_err(|e| {
            tracing::warn!(session = %self.shared.id, "thread/resume failed: {e}");
            RelayError::from_resume(&self.shared.id, e)
        })?;
        // Stored settings from before a limit was set (or tightened), or a thread Codex kept
        // loaded with others: the same limits hold before any turn runs.
        self.limits
            .check_effective(&crate::policy::Effective::of(&resumed), &self.default_cwd)?;
        tracing::info!(session = %self.shared.id, "thread resumed in codex app-server");
        self.server = Some(server.clone());
        self.sub = Some(sub);
        Ok(server)
    }

    pub(crate) async fn say(&mut self, input: SayInput) -> Result<SayOutcome, RelayError> {
        if crate::attach::lives_on_daemon(&self.shared) {
            return self.say_on_daemon(input).await;
        }
        // A dormant (restored) session takes a slot when it is used again, and keeps it once
        // its thread is loaded in Codex; if that fails the guard is dropped and the slot freed.
        let claimed = match self.slot {
            Some(_) => None,
            None => Some(self.slots.claim(&self.shared.id)?),
        };
        let server = self.attach().await?;
        if claimed.is_some() {
            self.slot = claimed;
        }
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
        // A session that reached a budget starts no turn until it is raised.
        if let Some(reason) = self.shared.budget_reached(true) {
            return Err(RelayError::BudgetReached {
                session: self.shared.id.clone(),
                reason,
            });
        }
        // The session's model and effort (set at its start or since) go with every turn.
        let opts = self.shared.meta().options;
        let mut params = TurnStartParams {
            thread_id: self.shared.id.clone(),
            input: items,
            output_schema: input.output_schema.clone(),
            // Moved to another directory since the thread was loaded (a fresh isolated copy).
            cwd: self.shared.pending_cwd(),
            model: opts.model,
            effort: opts.effort,
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
        self.servers.turn_started(&self.shared.id);
        if params.cwd.is_some() {
            self.shared.moved_cwd_sent();
        }
        self.shared
            .turn_started(&turn.id, input.output_schema.is_some());
        self.shared.persist();
        Ok(SayOutcome::Started { turn_id: turn.id })
    }

    /// A message to a thread of the Codex daemon, asked by the user: steers the running turn
    /// or starts one, with nothing but the input (an override would persist for the
    /// terminal's later turns).
    async fn say_on_daemon(&mut self, input: SayInput) -> Result<SayOutcome, RelayError> {
        let Some(peer) = self.attached.clone() else {
            return Err(RelayError::Unavailable {
                instance: "codex-daemon".into(),
                why: format!(
                    "session {} lives on a Codex daemon the relay is not attached to now; it reattaches when the daemon answers",
                    self.shared.id
                ),
            });
        };
        let items = input.to_input();
        if let Some(turn) = self.shared.current_turn() {
            let steer = codex_relay_protocol::v2::TurnSteerParams {
                thread_id: self.shared.id.clone(),
                expected_turn_id: turn.clone(),
                input: items.clone(),
            };
            if peer
                .call::<codex_relay_protocol::v2::TurnSteer>(&steer)
                .await
                .is_ok()
            {
                return Ok(SayOutcome::Steered { turn_id: turn });
            }
        }
        let params = TurnStartParams {
            thread_id: self.shared.id.clone(),
            input: items,
            output_schema: input.output_schema.clone(),
            ..Default::default()
        };
        let turn = peer
            .call::<codex_relay_protocol::v2::TurnStart>(&params)
            .await?
            .turn;
        self.shared
            .turn_started(&turn.id, input.output_schema.is_some());
        self.shared.persist();
        Ok(SayOutcome::Started { turn_id: turn.id })
    }

    /// The running turns of the session's thread and of its sub-agents: `(thread, turn)`.
    pub(crate) fn running_turns(&self) -> Vec<(String, String)> {
        let own = self
            .shared
            .current_turn()
            .map(|turn| (self.shared.id.clone(), turn));
        own.into_iter()
            .chain(
                self.shared
                    .running_agents()
                    .into_iter()
                    .map(|(a, turn)| (a.agent.thread, turn)),
            )
            .collect()
    }

    /// Interrupts the running turn and every running sub-agent turn, all at once.
    /// Asks Codex to interrupt the running turns (the session's and its sub-agents'); the
    /// returned future owns what it needs, so it can run apart from the actor.
    pub(crate) fn interrupt(
        &self,
    ) -> impl std::future::Future<Output = Result<bool, RelayError>> + use<> {
        let server = self.server.clone();
        let daemon = self.attached.clone();
        let turns = self.running_turns();
        let shared = self.shared.clone();
        async move {
            // On the daemon, only the thread's own turn, and only because the user asked.
            if let (Some(peer), Some((thread, turn))) = (daemon, turns.first()) {
                let params = codex_relay_protocol::v2::TurnInterruptParams {
                    thread_id: thread.clone(),
                    turn_id: turn.clone(),
                };
                peer.call::<codex_relay_protocol::v2::TurnInterrupt>(&params)
                    .await?;
                return Ok(true);
            }
            let Some(server) = server else {
                return Ok(false);
            };
            if turns.is_empty() {
                return Ok(false);
            }
            let calls = turns
                .iter()
                .map(|(thread, turn)| server.turn_interrupt(thread, turn));
            let results = futures::future::join_all(calls).await;
            // The session's own turn decides the answer; a sub-agent that ended meanwhile is
            // fine.
            match results.into_iter().next() {
                Some(Err(e)) if shared.current_turn().is_some() => Err(e.into()),
                _ => Ok(true),
            }
        }
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
                    if let ServerNotification::TurnCompleted(t) = &n.notification {
                        // A turn that ends (interrupted, failed) with a request still open:
                        // the request is resolved first, then the turn's end is logged.
                        self.shared.push_raw_all(std::mem::take(&mut raws));
                        self.shared.append_all(std::mem::take(&mut events));
                        self.broker.fail_turn(
                            &self.shared.id,
                            &t.turn.id,
                            crate::decider::Decider::TurnEnded,
                            "the turn ended before anyone answered",
                        );
                    }
                    if self.attached.is_some()
                        && let ServerNotification::ServerRequestResolved(r) = &n.notification
                    {
                        // Another client of the daemon answered first: the relay's card goes.
                        self.shared.push_raw_all(std::mem::take(&mut raws));
                        self.shared.append_all(std::mem::take(&mut events));
                        self.broker
                            .withdraw_answered_elsewhere(&self.shared.id, &r.request_id);
                    }
                    if self.attached.is_some()
                        && let ServerNotification::Unknown { method, params } = &n.notification
                        && method == "thread/settings/updated"
                        && params.get("threadId").and_then(|t| t.as_str())
                            == Some(self.shared.id.as_str())
                        && let Some(message) = crate::attach::settings_updated(&self.shared, params)
                    {
                        events.push(Logged {
                            role: Role::System,
                            turn: None,
                            ev: Ev::Note { message },
                            origin: None,
                        });
                    }
                    self.on_notification(&n.notification, &mut events);
                    persist |= matches!(n.notification, ServerNotification::TurnCompleted(_));
                    raws.push(n.raw);
                }
                Some(PeerEvent::Request(req)) => {
                    // Everything before the request is logged before it.
                    self.shared.push_raw_all(std::mem::take(&mut raws));
                    self.shared.append_all(std::mem::take(&mut events));
                    self.shared.push_raw_all(vec![req.raw.clone()]);
                    self.on_request(req);
                }
                Some(PeerEvent::Closed(PeerError::Shutdown)) => {
                    self.flush(raws, events, persist);
                    return self.codex_stopped();
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

    /// Maps one notification of the session's thread or of one of its sub-agents into
    /// `events` (sub-agents' events carry their origin); deltas go out at once.
    pub(super) fn on_notification(&mut self, n: &ServerNotification, events: &mut Vec<Logged>) {
        let child = n
            .thread_id()
            .filter(|t| *t != self.shared.id)
            .map(str::to_owned);
        match n {
            ServerNotification::ItemStarted(i) | ServerNotification::ItemCompleted(i) => {
                match &i.item {
                    ThreadItem::FileChange(f) => {
                        if matches!(n, ServerNotification::ItemStarted(_)) {
                            self.file_changes.insert(f.id.clone(), f.changes.clone());
                        } else {
                            self.file_changes.remove(&f.id);
                        }
                    }
                    ThreadItem::CollabAgentToolCall(c) => {
                        for thread in self.shared.on_collab_call(c) {
                            self.subscribe_agent(thread);
                        }
                    }
                    _ => {}
                }
            }
            ServerNotification::ThreadStarted(t)
                if child.is_some() && self.shared.adopt(&t.thread) =>
            {
                self.subscribe_agent(t.thread.id.clone());
            }
            _ => {}
        }
        let origin = match &child {
            Some(thread) => {
                // A sub-agent's event may be seen twice (live and in what `thread/resume`
                // returned when the session subscribed to it): logged once.
                if !self.agent_seen.first_time(thread, n) {
                    return;
                }
                Some(Arc::new(self.shared.origin(thread)))
            }
            None => None,
        };
        let mapped = mapper::map(n);
        events.extend(mapped.events.into_iter().map(|(role, turn, ev)| Logged {
            role,
            turn,
            ev,
            origin: origin.clone(),
        }));
        if child.is_none() {
            self.on_review_item(n, events);
        }
        if let Some(mut d) = mapped.delta {
            if let Some(o) = &origin {
                d.invoke = o.invoke.clone();
                d.agent = Some(o.agent.thread.clone());
            }
            self.shared.push_delta(d);
        }
    }

    pub(super) fn flush(
        &self,
        raws: Vec<std::sync::Arc<String>>,
        events: Vec<Logged>,
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
        // The daemon replays a pending request to a client that resumes the thread: one the
        // relay holds already stays the one it has (dropping this copy answers nothing on
        // the daemon's shared connection).
        if self.attached.is_some()
            && self
                .broker
                .holds_codex_request(&self.shared.id, req.responder.id())
        {
            tracing::debug!(session = %self.shared.id, "a request the daemon sent again is open already");
            return;
        }
        let server = match (&self.server, &self.attached) {
            (Some(server), _) => Some(Arc::downgrade(server)),
            // The daemon's: no process of the relay's own behind it.
            (None, Some(_)) => Some(std::sync::Weak::new()),
            (None, None) => None,
        };
        match server {
            Some(server) => {
                let changes = match req.request() {
                    ServerRequest::FileChangeApproval(p) => {
                        self.file_changes.get(&p.item_id).map(Vec::as_slice)
                    }
                    _ => None,
                };
                let origin = req
                    .request()
                    .thread_id()
                    .filter(|t| *t != self.shared.id)
                    .map(|t| self.shared.origin(t));
                let sink: Arc<dyn crate::broker::PendingSink> = self.shared.clone();
                self.broker.open(&sink, server, req, changes, origin);
            }
            None => drop(req), // answered fail-closed by its responder
        }
    }

    /// The relay stopped Codex on purpose (it is shutting down): no error, and a running turn
    /// ends cancelled (its open tool calls first), saying why. A thread on the Codex daemon
    /// (the attachment stopped) is only let go of: the daemon runs it on.
    fn codex_stopped(&mut self) {
        self.sub = None;
        self.server = None;
        if self.attached.take().is_some() {
            // The daemon runs the thread on: its turn is not over, and following it again
            // logs what it did meanwhile (catch_up.rs).
            self.broker.fail_session(
                &self.shared.id,
                crate::decider::Decider::RelayShutdown,
                "the relay stopped following this thread",
            );
            self.shared.persist();
            return;
        }
        let message = "the relay stopped (a restart resumes the session)";
        self.broker.fail_session(
            &self.shared.id,
            crate::decider::Decider::RelayShutdown,
            message,
        );
        self.shared.end_turn_cancelled(message);
        self.shared.persist();
    }

    /// Codex died under this session.
    fn codex_gone(&mut self, why: String) {
        self.sub = None;
        self.server = None;
        let message = match self.attached.take() {
            Some(_) => format!(
                "the Codex daemon this session lives on went away ({why}); the relay reattaches when it returns"
            ),
            None => format!("Codex exited: {why}"),
        };
        self.broker.fail_session(
            &self.shared.id,
            crate::decider::Decider::CodexExit,
            &message,
        );
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
