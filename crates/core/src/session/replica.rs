//! Sessions this instance does not write: a mirror of a session another instance of the
//! cluster runs (its state follows the log that instance commits), and a session this instance
//! ran until it lost its lease (detached: nothing more of it reaches the store).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::*;

impl SessionShared {
    /// The store, unless this session's writes are off.
    pub(super) fn writer(&self) -> Option<&Store> {
        (!self.no_writes.load(Ordering::SeqCst)).then_some(&self.store)
    }

    /// Nothing of this session reaches the store, or its readers, from now on (its instance
    /// lost its lease).
    pub(crate) fn detach(&self) {
        self.no_writes.store(true, Ordering::SeqCst);
        self.freeze();
    }

    /// This instance runs the session now (it adopted it): its writes go to the store, and
    /// its readers, as every reader of a session this instance runs in a cluster, see what the
    /// store committed (everything the mirror holds is).
    pub(crate) fn own(&self) {
        self.all_committed(&self.lock());
        self.gate();
        self.no_writes.store(false, Ordering::SeqCst);
    }

    /// A mirror of a session another instance runs, from its stored row as it is (a running
    /// status stays running), its open requests and the turn running now.
    pub(crate) fn mirror(
        store: Store,
        buffer: usize,
        rec: &SessionRecord,
        pending: Vec<PendingView>,
        turn: Option<String>,
    ) -> Arc<Self> {
        let mut state = Self::restored_state(rec);
        state.status = SessionStatus::parse(&rec.status).unwrap_or(SessionStatus::Idle);
        state.closed = state.status == SessionStatus::Closed;
        state.pending = pending;
        state.turn = turn.filter(|_| state.status.is_running());
        let shared = Self::new(rec.id.clone(), store, buffer, state);
        shared.no_writes.store(true, Ordering::SeqCst);
        shared
    }

    /// Takes events the owner committed, in seq order: kept in memory, shown to the feed, and
    /// applied as the owner applied them (the status from its `status` events, open requests
    /// from `request-opened` and `request-resolved`). Events at or below the last seq are
    /// skipped. Returns false at a gap (the caller reads the store again).
    pub(crate) fn replicate(&self, events: Vec<Envelope>) -> bool {
        let mut s = self.lock();
        let mut shown = Vec::new();
        let mut contiguous = true;
        for env in events {
            if env.seq <= s.last_seq {
                continue;
            }
            if env.seq != s.last_seq + 1 {
                contiguous = false;
                break;
            }
            let origin = env.agent.clone().map(|agent| Origin {
                invoke: env.invoke.clone(),
                agent,
            });
            self.apply(&mut s, env.turn.as_deref(), &env.ev, origin.as_ref());
            match &env.ev {
                Ev::Status { status } => {
                    if let Some(st) = SessionStatus::parse(status) {
                        s.status = st;
                        s.closed = st == SessionStatus::Closed;
                        // The turn itself comes with its `turn-start` (which counts it).
                        if !st.is_running() {
                            s.turn = None;
                        }
                        self.status.send_replace(st);
                    }
                }
                Ev::TurnStart {} if env.agent.is_none() => s.last_error = None,
                // Once: a mirror loaded between the commit of the request's row and that of
                // this event has it already.
                Ev::RequestOpened { request } if !s.pending.iter().any(|p| p.id == request.id) => {
                    s.pending.push((**request).clone())
                }
                Ev::RequestResolved { id, .. } => s.pending.retain(|p| &p.id != id),
                _ => {}
            }
            s.last_seq = env.seq;
            s.updated_at = env.time;
            let env = Arc::new(env);
            s.events.push_back(env.clone());
            while s.events.len() > self.buffer {
                s.events.pop_front();
            }
            shown.push(env);
        }
        self.all_committed(&s);
        drop(s);
        if let Some(feed) = self.feed.get() {
            for env in &shown {
                feed.logged(&self.id, env);
            }
        }
        if !shown.is_empty() {
            self.changed.send_modify(|v| *v += 1);
        }
        contiguous
    }
}
