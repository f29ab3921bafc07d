//! A session's history as turns (what Codex's `thread/read` lists): noted as turns start,
//! dropped by a rollback; and the review a running review turn found.

use super::*;
use crate::event::ReviewOutput;

impl SessionShared {
    /// Notes `turn` as part of the thread's history (once: the relay and Codex both say it
    /// started).
    pub(super) fn note_turn(s: &mut State, turn: &str) {
        if s.meta.turns.last().map(String::as_str) != Some(turn) {
            s.meta.turns.push(turn.to_owned());
        }
    }

    /// Drops the last turns of the history (`dropped`, in order, as a rollback named them).
    pub(super) fn drop_turns(s: &mut State, dropped: &[String]) {
        for t in dropped.iter().rev() {
            if s.meta.turns.last() == Some(t) {
                s.meta.turns.pop();
            }
        }
    }

    /// Whether a turn starting now (`turn`) runs inside the review turn the session runs.
    pub(super) fn inside_review(s: &State, turn: Option<&str>) -> bool {
        s.review_turn.is_some() && s.turn == s.review_turn && turn != s.review_turn.as_deref()
    }

    /// The thread's history is these turns (as Codex listed them); the row is written.
    pub(crate) fn set_turns(&self, turns: Vec<String>) {
        let mut s = self.lock();
        s.meta.turns = turns;
        if let Some(store) = self.writer() {
            store.upsert_session(self.record(&s));
        }
    }

    /// The turns of the thread's history, in order.
    pub(crate) fn turns(&self) -> Vec<String> {
        self.lock().meta.turns.clone()
    }

    /// `turn` (just started by `review/start`) is a review. It joins the history when it
    /// ends (after the turn Codex runs the review in, as Codex lists them), unless it failed.
    pub(crate) fn review_started(&self, turn: &str) {
        {
            let mut s = self.lock();
            s.review_turn = Some(turn.to_owned());
            s.meta.review_turns.push(turn.to_owned());
        }
        self.turn_started(turn, false);
    }

    /// The running turn ended with `status`: a review joins the history (unless it failed);
    /// answers what it found.
    pub(super) fn review_turn_ended(s: &mut State, status: TurnEndStatus) -> Option<ReviewOutput> {
        if let Some(turn) = s.review_turn.take() {
            if status == TurnEndStatus::Failed {
                s.meta.review_turns.retain(|t| *t != turn);
            } else {
                Self::note_turn(s, &turn);
            }
        }
        s.review.take()
    }

    /// The turns a rollback of `n` drops from `history` (Codex's list): the last `n`, a
    /// review and the turn it ran in counting as one; `None` when there are fewer.
    pub(crate) fn last_turns(&self, history: &[String], n: usize) -> Option<Vec<String>> {
        let reviews = self.lock().meta.review_turns.clone();
        let mut counted = 0;
        for (i, t) in history.iter().enumerate().rev() {
            if !reviews.contains(t) {
                counted += 1;
            }
            if counted == n {
                return Some(history[i..].to_vec());
            }
        }
        None
    }

    /// Whether the running turn is a review.
    pub(crate) fn in_review(&self) -> bool {
        let s = self.lock();
        s.review_turn.is_some() && s.turn == s.review_turn
    }

    /// Keeps what the reviewing model wrote, for the review's event.
    pub(crate) fn review_draft(&self, found: ReviewOutput) {
        self.lock().review = Some(found);
    }

    /// What the reviewing model wrote (taken once).
    pub(crate) fn take_review_draft(&self) -> Option<ReviewOutput> {
        self.lock().review.take()
    }

    /// A fork's copied turns were the source's spending, not its own.
    pub(crate) fn forked_spend_reset(&self) {
        let mut s = self.lock();
        s.spend = super::super::spend::Spend::forked();
        s.result = None;
    }

    /// Sets the model and effort of the next turns (the fields given); the row is written.
    pub(crate) fn set_model(&self, choice: &crate::threads::ModelChoice) {
        let mut s = self.lock();
        if let Some(m) = &choice.model {
            s.meta.options.model = Some(m.clone());
            s.model = Some(m.clone());
        }
        if let Some(e) = &choice.effort {
            s.meta.options.effort = Some(e.clone());
        }
        if let Some(store) = self.writer() {
            store.upsert_session(self.record(&s));
        }
        drop(s);
        self.changed.send_modify(|v| *v += 1);
    }
}
