//! What readers of a session see in a cluster: only what the store committed. An instance
//! that dies or loses its lease takes its uncommitted events with it, and the instance that
//! adopts the session numbers its own from the last committed one; a reader shown an event
//! before its commit could be shown another under the same seq later. So an owner in a
//! cluster shows each event (to its streams, long-polls, snapshots and the relay-wide feed)
//! once the store says it is committed; token deltas, a preview that is never logged, still
//! go live; the status snapshots and waiters see moves with its event. Alone (SQLite, or `--no-cluster`) a relay shows each event at once, as it keeps
//! what it showed through store faults (docs/STORE.md).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::*;

impl SessionShared {
    /// The session as readers see it (in a cluster: as far as the store committed).
    pub fn snapshot(&self) -> SessionSnapshot {
        let s = self.lock();
        let top = self.shown_in(&s);
        // In a cluster, a request is listed once its request-opened event is shown.
        let unshown: Vec<&str> = s
            .events
            .iter()
            .rev()
            .take_while(|e| e.seq > top)
            .filter_map(|e| match &e.ev {
                Ev::RequestOpened { request } => Some(request.id.as_str()),
                _ => None,
            })
            .collect();
        let pending = s
            .pending
            .iter()
            .filter(|p| !unshown.contains(&p.id.as_str()))
            .cloned()
            .collect();
        SessionSnapshot {
            session_id: self.id.clone(),
            // The status readers were shown (with its event; see session/committed.rs).
            status: if self.is_gated() {
                *self.status.borrow()
            } else {
                s.status
            },
            cwd: s.cwd.clone(),
            model: s.model.clone(),
            effort: s.meta.options.effort.clone(),
            turns: s.meta.turns.clone(),
            turn_count: s.turn_count,
            current_turn: s.turn.clone(),
            last_seq: top,
            result: s.result.clone(),
            last_error: s.last_error.clone(),
            usage: s.usage.clone(),
            turn_usage: s.spend.turn.clone(),
            spent: s.spend.spent_now(crate::ids::now_ms()),
            budget: s.meta.options.budget,
            budget_reached: s
                .meta
                .options
                .budget
                .reached(&s.spend.spent_now(crate::ids::now_ms()), true),
            stopped: s.spend.stopped.clone(),
            pending,
            agents: s.agents.all(),
            created_at: s.created_at,
            updated_at: s.updated_at,
            store_fault: self.store.fault(),
            attached: s.meta.attached.clone(),
            worktree: s.meta.options.worktree.clone(),
        }
    }

    /// From now on readers see only what the store committed.
    pub(crate) fn gate(&self) {
        self.gated.store(true, Ordering::SeqCst);
    }

    pub(super) fn is_gated(&self) -> bool {
        self.gated.load(Ordering::SeqCst)
    }

    /// The last seq readers may see.
    pub(super) fn shown_in(&self, s: &State) -> u64 {
        if self.is_gated() {
            s.last_seq.min(self.committed.load(Ordering::SeqCst))
        } else {
            s.last_seq
        }
    }

    /// The last seq readers may see.
    pub fn shown_seq(&self) -> u64 {
        let s = self.lock();
        self.shown_in(&s)
    }

    /// Every event in memory after `after`, committed or not (what this instance logged).
    pub(crate) fn logged_in_memory(&self, after: u64) -> Vec<Arc<Envelope>> {
        let s = self.lock();
        Self::held(&s, after, usize::MAX, s.last_seq).unwrap_or_default()
    }

    /// The store committed this session's events up to `seq`: readers are shown them.
    pub(crate) fn committed_to(&self, seq: u64) {
        let before = self.committed.fetch_max(seq, Ordering::SeqCst);
        if seq <= before || !self.is_gated() {
            return;
        }
        let shown: Vec<Arc<Envelope>> = {
            let s = self.lock();
            s.events
                .iter()
                .filter(|e| e.seq > before && e.seq <= seq)
                .cloned()
                .collect()
        };
        if let Some(feed) = self.feed.get() {
            shown.iter().for_each(|env| feed.logged(&self.id, env));
        }
        // The status shown moves with its event: a snapshot or a waiter never says `idle`
        // before the events of the turn that ended are there to read.
        let status = shown.iter().rev().find_map(|e| match &e.ev {
            Ev::Status { status } => SessionStatus::parse(status),
            _ => None,
        });
        if let Some(status) = status {
            self.status.send_replace(status);
        }
        self.changed.send_modify(|v| *v += 1);
    }

    /// Everything in memory counts as committed (a mirror's events, read from the store).
    pub(super) fn all_committed(&self, s: &State) {
        self.committed.fetch_max(s.last_seq, Ordering::SeqCst);
    }

    /// Stops showing anything more of the session: its instance lost its lease, and what it
    /// would log now is never stored. Readers following it are woken to see that.
    pub(super) fn freeze(&self) {
        self.frozen.store(true, Ordering::SeqCst);
        self.changed.send_modify(|v| *v += 1);
    }

    /// Whether the session was stopped after its instance lost its lease (readers end, and
    /// find the session again where it runs now).
    pub fn is_frozen(&self) -> bool {
        self.frozen.load(Ordering::SeqCst)
    }
}
