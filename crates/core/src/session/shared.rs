//! A session's shared state: its event log (contiguous seq, bounded memory, written through to
//! the store), its derived status, and the channels fronts wait on.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::Value;
use tokio::sync::{broadcast, watch};

use super::agents::{AgentInfo, Agents};
pub use super::status::{SessionSnapshot, SessionStatus};
use crate::broker::PendingView;
use crate::event::{AgentRef, Delta, Envelope, Ev, Role, TurnEndStatus, Usage};
use crate::ids::now_ms;
use crate::store::{SessionRecord, Store, StoredEvent};
use crate::views::SessionMeta;

pub use crate::event::Origin;

/// One event to log, with its role, turn and origin.
#[derive(Debug, Clone)]
pub(crate) struct Logged {
    pub role: Role,
    pub turn: Option<String>,
    pub ev: Ev,
    pub origin: Option<Arc<Origin>>,
}

pub(crate) struct State {
    pub events: VecDeque<Arc<Envelope>>,
    pub last_seq: u64,
    pub status: SessionStatus,
    pub turn: Option<String>,
    pub turn_count: u64,
    pub last_outcome: Option<TurnEndStatus>,
    /// Open requests in the order they were opened (the oldest first, also when two open in
    /// the same millisecond).
    pub pending: Vec<PendingView>,
    pub usage: Option<Usage>,
    pub last_message: Option<String>,
    pub result: Option<Value>,
    pub expect_json: bool,
    pub last_error: Option<String>,
    pub closed: bool,
    pub created_at: i64,
    pub updated_at: i64,
    pub cwd: Option<String>,
    pub model: Option<String>,
    /// Engine data kept in the store's `meta` column (create options, where it moved, ...).
    pub meta: SessionMeta,
    pub raw: VecDeque<Arc<String>>,
    pub agents: Agents,
    /// What it spent, and why its last turn was stopped.
    pub spend: super::spend::Spend,
    /// The running turn is a review (`review/start`), and what it found so far.
    pub review_turn: Option<String>,
    pub review: Option<crate::event::ReviewOutput>,
}

pub struct SessionShared {
    pub id: String,
    state: Mutex<State>,
    changed: watch::Sender<u64>,
    /// The status alone, for waiters that care only when it changes (not on every event).
    status: watch::Sender<SessionStatus>,
    /// Live deltas, made on the first subscription: a channel's 1024 slots cost every session
    /// (100 at once measured ~4% of the relay's CPU) while most are never watched live.
    deltas: std::sync::OnceLock<broadcast::Sender<Delta>>,
    store: Store,
    buffer: usize,
    /// The relay-wide feed every appended event also goes to (set when the session is spawned).
    feed: OnceLock<Arc<crate::feed::Feed>>,
    /// Nothing goes to the store: a mirror of a session another instance runs, or a session
    /// this instance ran until it lost its lease (see `replica.rs`).
    no_writes: std::sync::atomic::AtomicBool,
    /// Readers see only what the store committed (see `committed.rs`).
    gated: std::sync::atomic::AtomicBool,
    /// The highest seq the store committed.
    committed: std::sync::atomic::AtomicU64,
    /// Stopped after its instance lost its lease: nothing more of it is shown.
    frozen: std::sync::atomic::AtomicBool,
    /// When it last logged an event or sent a delta, in ms after `born` (the idle watchdog).
    activity: std::sync::atomic::AtomicU64,
    born: std::time::Instant,
    /// How the guard's last stop ended, per turn (see `guard.rs`).
    stops: watch::Sender<Option<(String, crate::control::Stopped)>>,
}

const RAW_IN_MEMORY: usize = 256;
/// Raw lines per stored chunk.
pub(crate) const RAW_CHUNK: usize = 64;

impl SessionShared {
    pub(crate) fn new(id: String, store: Store, buffer: usize, init: State) -> Arc<Self> {
        let (changed, _) = watch::channel(0);
        let (status, _) = watch::channel(init.status);
        let stored = init.last_seq;
        Arc::new(Self {
            id,
            state: Mutex::new(init),
            changed,
            status,
            deltas: std::sync::OnceLock::new(),
            store,
            buffer: buffer.max(16),
            feed: OnceLock::new(),
            no_writes: std::sync::atomic::AtomicBool::new(false),
            gated: std::sync::atomic::AtomicBool::new(false),
            committed: std::sync::atomic::AtomicU64::new(stored),
            frozen: std::sync::atomic::AtomicBool::new(false),
            activity: std::sync::atomic::AtomicU64::new(0),
            born: std::time::Instant::now(),
            stops: watch::channel(None).0,
        })
    }

    pub(crate) fn attach_feed(&self, feed: Arc<crate::feed::Feed>) {
        let _ = self.feed.set(feed);
    }

    pub(crate) fn fresh_state(
        cwd: Option<String>,
        model: Option<String>,
        meta: SessionMeta,
    ) -> State {
        let now = now_ms();
        State {
            agents: Agents::new(meta.agents.clone()),
            events: VecDeque::new(),
            last_seq: 0,
            status: SessionStatus::Idle,
            turn: None,
            turn_count: 0,
            last_outcome: None,
            pending: Vec::new(),
            usage: None,
            last_message: None,
            result: None,
            expect_json: false,
            last_error: None,
            closed: false,
            created_at: now,
            updated_at: now,
            cwd,
            model,
            meta,
            raw: VecDeque::new(),
            spend: Default::default(),
            review_turn: None,
            review: None,
        }
    }

    /// State rebuilt from a stored record (after a relay restart).
    pub(crate) fn restored_state(rec: &SessionRecord) -> State {
        let meta = SessionMeta::from_stored(&rec.meta);
        let (result, last_error, usage) = (
            meta.result.clone().filter(|v| !v.is_null()),
            meta.last_error.clone(),
            meta.usage.clone(),
        );
        let mut s = Self::fresh_state(rec.cwd.clone(), rec.model.clone(), meta);
        s.last_seq = rec.last_seq.max(0) as u64;
        s.turn_count = rec.turn_count.max(0) as u64;
        s.created_at = rec.created_at;
        s.updated_at = rec.updated_at;
        s.result = result;
        s.last_error = last_error;
        s.spend = super::spend::Spend::restored(s.meta.spent.clone(), usage.clone());
        s.usage = usage;
        s.status = match SessionStatus::parse(&rec.status) {
            // A turn that was running when the relay stopped did not finish.
            Some(st) if st.is_running() => SessionStatus::Interrupted,
            Some(st) => st,
            None => SessionStatus::Idle,
        };
        s.closed = s.status == SessionStatus::Closed;
        s
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends one event of the session's own thread (and a status event if the status
    /// changed because of it).
    pub fn append(&self, role: Role, turn: Option<String>, mut ev: Ev) -> u64 {
        let mut s = self.lock();
        s.spend.stamp(turn.as_deref(), &mut ev);
        self.apply(&mut s, turn.as_deref(), &ev, None);
        let seq = self.push(&mut s, role, turn, ev, None);
        self.refresh_status(&mut s);
        drop(s);
        self.changed.send_modify(|v| *v += 1);
        seq
    }

    /// Appends several events under one lock.
    pub(crate) fn append_all(&self, events: Vec<Logged>) {
        if events.is_empty() {
            return;
        }
        let mut s = self.lock();
        // The burst goes to the store (and its spool) as one write, still under the lock so
        // seq order is queue order; the feed sees each event only once it is spooled.
        let mut burst = Vec::with_capacity(events.len());
        for mut e in events {
            if e.origin.is_none() {
                s.spend.stamp(e.turn.as_deref(), &mut e.ev);
            }
            let origin = e.origin.as_deref();
            self.apply(&mut s, e.turn.as_deref(), &e.ev, origin);
            burst.push(self.log(&mut s, e.role, e.turn, e.ev, origin));
            if Self::derive(&s) != s.status {
                // The status event goes to the store at once, after what came before it.
                self.queue(std::mem::take(&mut burst));
                self.refresh_status(&mut s);
            }
        }
        self.queue(burst);
        drop(s);
        self.changed.send_modify(|v| *v += 1);
    }

    fn push(
        &self,
        s: &mut State,
        role: Role,
        turn: Option<String>,
        ev: Ev,
        origin: Option<&Origin>,
    ) -> u64 {
        let logged = self.log(s, role, turn, ev, origin);
        self.queue(vec![logged]);
        s.last_seq
    }

    /// Queues logged events to the store in order, then shows them to the relay-wide feed.
    fn queue(&self, burst: Vec<(StoredEvent, Arc<Envelope>)>) {
        let (stored, envs): (Vec<_>, Vec<_>) = burst.into_iter().unzip();
        if let Some(store) = self.writer() {
            store.append_events(stored);
        }
        // Gated: the feed is shown each event once it is committed.
        if let Some(feed) = self.feed.get().filter(|_| !self.is_gated()) {
            envs.iter().for_each(|env| feed.logged(&self.id, env));
        }
    }

    /// Gives the event the next seq and keeps it in memory; returns it as the store keeps it
    /// and as the feed shows it, for the caller to [`queue`](Self::queue).
    fn log(
        &self,
        s: &mut State,
        role: Role,
        turn: Option<String>,
        ev: Ev,
        origin: Option<&Origin>,
    ) -> (StoredEvent, Arc<Envelope>) {
        s.last_seq += 1;
        s.updated_at = now_ms();
        self.touch();
        let env = Envelope {
            id: format!("{}:{}", self.id, s.last_seq),
            seq: s.last_seq,
            time: s.updated_at,
            role,
            turn,
            invoke: origin.and_then(|o| o.invoke.clone()),
            agent: origin.map(|o| o.agent.clone()),
            ev,
        };
        let stored = StoredEvent {
            session_id: self.id.clone(),
            seq: env.seq as i64,
            time: env.time,
            json: serde_json::to_string(&env).unwrap_or_default(),
        };
        let env = Arc::new(env);
        s.events.push_back(env.clone());
        while s.events.len() > self.buffer {
            s.events.pop_front();
        }
        (stored, env)
    }

    /// Keeps the derived fields in step with what an event says. A sub-agent's events only
    /// move its own turn: the session's result, usage and errors are its own thread's.
    fn apply(&self, s: &mut State, turn: Option<&str>, ev: &Ev, origin: Option<&Origin>) {
        if let Some(o) = origin {
            match ev {
                Ev::TurnStart {} => s.agents.set_turn(&o.agent.thread, turn.map(str::to_owned)),
                Ev::TurnEnd { .. } => s.agents.set_turn(&o.agent.thread, None),
                // A sub-agent's model requests are the session's spending too.
                Ev::Usage { total, last } => {
                    let prices = s.meta.options.prices;
                    let added = s
                        .spend
                        .on_usage(&o.agent.thread, total, last, prices.as_ref());
                    self.count_tokens(&added);
                }
                _ => {}
            }
            return;
        }
        match ev {
            Ev::TurnStart {} => {
                if let Some(t) = turn
                    && s.review_turn.as_deref() != Some(t)
                {
                    Self::note_turn(s, t);
                }
                if Self::inside_review(s, turn) {
                    // Codex 0.169+ runs a review as a turn inside the one review/start
                    // answered: the session's turn is still that one.
                } else if let Some(t) = turn
                    && s.turn.as_deref() != Some(t)
                {
                    s.turn = Some(t.to_owned());
                    s.turn_count += 1;
                    s.spend.on_turn_start(now_ms());
                }
            }
            Ev::TurnEnd {
                status,
                error,
                stopped,
                ..
            } => {
                if turn.is_some() && s.turn.as_deref() != turn && s.turn.is_some() {
                    // The end of an older turn (a newer one already runs): nothing to update.
                    return;
                }
                if s.turn.is_some() {
                    s.spend.on_turn_end(now_ms(), stopped.as_ref());
                }
                s.turn = None;
                let review = Self::review_turn_ended(s, *status);
                s.last_outcome = Some(*status);
                if let Some(e) = error {
                    s.last_error = Some(e.clone());
                }
                if *status == TurnEndStatus::Completed
                    && let Some(r) = review
                {
                    // A review's result is what it found, structured.
                    s.result = serde_json::to_value(r).ok();
                } else if *status == TurnEndStatus::Completed {
                    s.result = s.last_message.as_ref().map(|m| {
                        if s.expect_json {
                            serde_json::from_str(m).unwrap_or_else(|_| Value::String(m.clone()))
                        } else {
                            Value::String(m.clone())
                        }
                    });
                }
            }
            Ev::Text {
                text,
                thinking: false,
            } => s.last_message = Some(text.clone()),
            Ev::Usage { total, last } => {
                let prices = s.meta.options.prices;
                let added = s.spend.on_usage("", total, last, prices.as_ref());
                self.count_tokens(&added);
                s.usage = Some(total.clone());
            }
            Ev::Error {
                message,
                retrying: false,
            } => s.last_error = Some(message.clone()),
            Ev::Text { thinking: true, .. }
            | Ev::ToolCallStart { .. }
            | Ev::ToolCallEnd { .. }
            | Ev::File { .. }
            | Ev::Photo { .. }
            | Ev::RequestOpened { .. }
            | Ev::RequestResolved { .. }
            | Ev::Status { .. }
            | Ev::Error { .. }
            | Ev::Plan { .. }
            | Ev::Note { .. }
            | Ev::Forked { .. }
            | Ev::Codex { .. } => {}
            Ev::Review { review } => s.review = Some((**review).clone()),
            Ev::RolledBack { turns } => Self::drop_turns(s, turns),
        }
    }

    fn derive(s: &State) -> SessionStatus {
        if s.closed {
            return SessionStatus::Closed;
        }
        // The session or any of its sub-agents waits for an answer, or runs a turn.
        if s.turn.is_some() || s.agents.is_running() || !s.pending.is_empty() {
            if s.pending.iter().any(|p| p.kind.is_approval()) {
                return SessionStatus::AwaitingApproval;
            }
            if !s.pending.is_empty() {
                return SessionStatus::AwaitingInput;
            }
            return SessionStatus::Active;
        }
        match s.last_outcome {
            Some(TurnEndStatus::Cancelled) => SessionStatus::Interrupted,
            Some(TurnEndStatus::Failed) => SessionStatus::Error,
            Some(TurnEndStatus::Completed) => SessionStatus::Idle,
            None => s.status,
        }
    }

    /// Recomputes the status; on a change, logs a status event and writes the session row.
    fn refresh_status(&self, s: &mut State) {
        let next = Self::derive(s);
        self.set_status(s, next);
    }

    /// Moves to status `next`: logs a status event and writes the session row if it changed.
    fn set_status(&self, s: &mut State, next: SessionStatus) {
        if next != s.status {
            s.status = next;
            // In a cluster, waiters see the new status with its event, once committed.
            if !self.is_gated() {
                self.status.send_replace(next);
            }
            self.push(
                s,
                Role::System,
                s.turn.clone(),
                Ev::Status {
                    status: next.as_str().into(),
                },
                None,
            );
            if let Some(store) = self.writer() {
                store.upsert_session(self.record(s));
            }
        }
    }

    pub(crate) fn record(&self, s: &State) -> SessionRecord {
        let meta = SessionMeta {
            result: s.result.clone(),
            last_error: s.last_error.clone(),
            usage: s.usage.clone(),
            agents: s.agents.all(),
            spent: Some(s.spend.spent.clone()),
            ..s.meta.clone()
        };
        SessionRecord {
            id: self.id.clone(),
            thread_id: self.id.clone(),
            cwd: s.cwd.clone(),
            model: s.model.clone(),
            status: s.status.as_str().into(),
            created_at: s.created_at,
            updated_at: s.updated_at,
            turn_count: s.turn_count as i64,
            last_seq: s.last_seq as i64,
            meta: serde_json::to_string(&meta).unwrap_or_default(),
        }
    }

    /// Writes the session row now (e.g. after create or a turn).
    pub fn persist(&self) {
        let s = self.lock();
        if let Some(store) = self.writer() {
            store.upsert_session(self.record(&s));
        }
    }

    /// Marks a turn as running (before Codex's `turn/started` arrives), so a quick second
    /// `say` steers instead of starting another turn.
    pub(crate) fn turn_started(&self, turn: &str, expect_json: bool) {
        let mut s = self.lock();
        if s.turn.as_deref() != Some(turn) {
            s.turn = Some(turn.to_owned());
            s.turn_count += 1;
            s.spend.on_turn_start(now_ms());
        }
        if s.review_turn.as_deref() != Some(turn) {
            Self::note_turn(&mut s, turn);
        }
        s.expect_json = expect_json;
        s.last_error = None;
        self.refresh_status(&mut s);
        drop(s);
        self.changed.send_modify(|v| *v += 1);
    }

    pub(crate) fn add_pending(&self, view: PendingView) {
        let turn = view.turn.clone();
        let origin = view.origin();
        let opened = crate::event::request_opened(&view);
        let mut s = self.lock();
        s.pending.push(view);
        self.push(&mut s, Role::System, turn, opened, origin.as_ref());
        self.refresh_status(&mut s);
        drop(s);
        self.changed.send_modify(|v| *v += 1);
    }

    pub(crate) fn remove_pending(&self, id: &str, resolved: Ev) {
        let mut s = self.lock();
        let (turn, origin) = match s.pending.iter().position(|p| p.id == id) {
            Some(i) => {
                let p = s.pending.remove(i);
                (p.turn.clone(), p.origin())
            }
            None => (None, None),
        };
        self.push(&mut s, Role::System, turn, resolved, origin.as_ref());
        self.refresh_status(&mut s);
        drop(s);
        self.changed.send_modify(|v| *v += 1);
    }

    pub(crate) fn close(&self) {
        let mut s = self.lock();
        s.closed = true;
        s.turn = None;
        s.agents.stop_all();
        self.refresh_status(&mut s);
        drop(s);
        self.changed.send_modify(|v| *v += 1);
    }

    /// A closed session someone resumes explicitly (the library's `resume`, `run --resume`) is
    /// open again: idle, until its next turn.
    pub(crate) fn reopen(&self) {
        let mut s = self.lock();
        if !s.closed {
            return;
        }
        s.closed = false;
        // What it does now decides; with nothing running it is idle until its next turn.
        s.last_outcome = None;
        let next = match Self::derive(&s) {
            SessionStatus::Closed => SessionStatus::Idle,
            other => other,
        };
        self.set_status(&mut s, next);
        drop(s);
        self.changed.send_modify(|v| *v += 1);
    }

    /// Sends a live delta to its subscribers (none yet: it goes nowhere, as it would with a
    /// channel nobody listens to).
    pub fn push_delta(&self, d: Delta) {
        self.touch();
        if let Some(tx) = self.deltas.get() {
            let _ = tx.send(d);
        }
    }

    /// Keeps raw Codex lines: the last ones in memory, and in the store as chunks of up to
    /// [`RAW_CHUNK`] lines (one row each, lines separated by `\n`), so a burst costs a few
    /// rows rather than one per line.
    pub(crate) fn push_raw_all(&self, lines: Vec<Arc<String>>) {
        if lines.is_empty() {
            return;
        }
        for chunk in lines.chunks(RAW_CHUNK) {
            let mut joined = String::with_capacity(chunk.iter().map(|l| l.len() + 1).sum());
            for (i, line) in chunk.iter().enumerate() {
                if i > 0 {
                    joined.push('\n');
                }
                joined.push_str(line);
            }
            if let Some(store) = self.writer() {
                store.append_raw(&self.id, &joined);
            }
        }
        let mut s = self.lock();
        s.raw.extend(lines);
        while s.raw.len() > RAW_IN_MEMORY {
            s.raw.pop_front();
        }
    }

    pub fn status(&self) -> SessionStatus {
        self.lock().status
    }

    pub fn current_turn(&self) -> Option<String> {
        self.lock().turn.clone()
    }

    pub fn last_seq(&self) -> u64 {
        self.lock().last_seq
    }

    /// The session's stored metadata (its create options, ...).
    pub(crate) fn meta(&self) -> SessionMeta {
        self.lock().meta.clone()
    }

    /// Changes the state under the lock (callers persist afterwards if it matters).
    pub(crate) fn with_state<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        f(&mut self.lock())
    }

    /// Events with `seq > after` held in memory, or `None` when older ones were evicted and the
    /// store must be asked.
    pub fn events_in_memory(&self, after: u64, limit: usize) -> Option<Vec<Arc<Envelope>>> {
        let s = self.lock();
        let top = self.shown_in(&s);
        Self::held(&s, after, limit, top)
    }

    /// The events in memory with `after < seq <= top` (at most `limit`), or `None` when older
    /// ones were evicted.
    fn held(s: &State, after: u64, limit: usize, top: u64) -> Option<Vec<Arc<Envelope>>> {
        let first = s.events.front().map(|e| e.seq).unwrap_or(s.last_seq + 1);
        if after + 1 < first && after < top {
            return None;
        }
        // seq is contiguous, so the position of `after + 1` is known; only pointers are copied
        // under the lock.
        let skip = ((after + 1).saturating_sub(first) as usize).min(s.events.len());
        let wanted = top.saturating_sub(after).min(limit as u64) as usize;
        // A range is found in O(1) (`skip` walked the ring from its front on every read).
        let end = skip.saturating_add(wanted).min(s.events.len());
        Some(s.events.range(skip..end).cloned().collect())
    }

    /// The last raw Codex lines kept in memory.
    pub fn raw_tail(&self) -> Vec<Arc<String>> {
        self.lock().raw.iter().cloned().collect()
    }

    pub fn subscribe_status(&self) -> watch::Receiver<SessionStatus> {
        self.status.subscribe()
    }

    pub fn subscribe_changes(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    pub fn subscribe_deltas(&self) -> broadcast::Receiver<Delta> {
        self.deltas
            .get_or_init(|| broadcast::channel(1024).0)
            .subscribe()
    }
}

impl crate::broker::PendingSink for SessionShared {
    fn session_id(&self) -> &str {
        &self.id
    }

    fn add_pending(&self, view: PendingView) {
        SessionShared::add_pending(self, view)
    }

    fn remove_pending(&self, id: &str, ev: Ev) {
        SessionShared::remove_pending(self, id, ev)
    }

    fn rule_context(&self) -> crate::rules::RuleContext {
        let s = self.lock();
        let options = &s.meta.options;
        crate::rules::RuleContext {
            cwd: s.cwd.clone().or(options.cwd.clone()),
            labels: options.labels.clone(),
            approval_policy: options.approval_policy,
            sandbox: options.sandbox,
            // The broker knows which Codex asks.
            codex_version: None,
        }
    }

    fn ruled(&self, view: &PendingView, ev: Ev) {
        let origin = view.origin();
        let mut s = self.lock();
        self.push(&mut s, Role::System, view.turn.clone(), ev, origin.as_ref());
        drop(s);
        self.changed.send_modify(|v| *v += 1);
    }
}

#[path = "agents_of.rs"]
mod agents_of;
#[path = "committed.rs"]
mod committed;
#[path = "limits_of.rs"]
mod limits_of;
#[path = "replica.rs"]
mod replica;
#[path = "turn_ends.rs"]
mod turn_ends;
#[path = "turns.rs"]
mod turns;

#[cfg(test)]
#[path = "shared_tests.rs"]
mod tests;
