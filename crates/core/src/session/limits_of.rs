//! A session's limits as its shared state knows them: its budget and price table, what it
//! spent, when it last showed output (the idle watchdog), and the stop the guard asked for.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::*;
use crate::control::Stopped;
use crate::limits::{Budget, Prices, Spent, StopReason, TurnLimits};

impl SessionShared {
    /// Marks output now (an event logged, a delta sent).
    pub(super) fn touch(&self) {
        let ms = self.born.elapsed().as_millis() as u64;
        self.activity.store(ms, Ordering::Relaxed);
    }

    /// Adds tokens to the relay's metrics: only where the session runs (a mirror's events are
    /// counted by their own instance).
    pub(super) fn count_tokens(&self, added: &Usage) {
        if self.writer().is_some()
            && let Some(feed) = self.feed.get()
        {
            feed.count_tokens(added);
        }
    }

    /// How long since the session last logged an event or sent a delta.
    pub(crate) fn silent_for(&self) -> Duration {
        let last = Duration::from_millis(self.activity.load(Ordering::Relaxed));
        self.born.elapsed().saturating_sub(last)
    }

    /// Whether a request of the session (or its sub-agents) waits for an answer.
    pub(crate) fn has_pending(&self) -> bool {
        !self.lock().pending.is_empty()
    }

    pub(crate) fn budget(&self) -> Budget {
        self.lock().meta.options.budget
    }

    /// The session's own turn limits (what its create options set).
    pub(crate) fn turn_limits(&self) -> TurnLimits {
        self.lock().meta.options.limits
    }

    /// What it spent, the running turn's time included.
    pub(crate) fn spent_now(&self) -> Spent {
        self.lock().spend.spent_now(now_ms())
    }

    /// The budget the session reached, if any (`with_turns`: the turns budget too).
    pub(crate) fn budget_reached(&self, with_turns: bool) -> Option<StopReason> {
        let s = self.lock();
        let spent = s.spend.spent_now(now_ms());
        s.meta.options.budget.reached(&spent, with_turns)
    }

    /// Sets the budget (the limits `change` names; others kept), turn limits and prices; the
    /// session row is written at once.
    pub(crate) fn set_limits(
        &self,
        budget: Option<Budget>,
        limits: Option<TurnLimits>,
        prices: Option<Prices>,
    ) {
        let mut s = self.lock();
        if let Some(b) = budget {
            s.meta.options.budget = s.meta.options.budget.merged(b);
        }
        if let Some(l) = limits {
            s.meta.options.limits = l.or(s.meta.options.limits);
        }
        if let Some(p) = prices {
            s.meta.options.prices = Some(p);
            s.spend.spent.cost_usd = Some(p.cost(&s.spend.spent.usage));
        }
        if let Some(store) = self.writer() {
            store.upsert_session(self.record(&s));
        }
        drop(s);
        self.changed.send_modify(|v| *v += 1);
    }

    /// Its limits and what it spent.
    pub fn limits_view(&self) -> crate::limits::LimitsView {
        let s = self.lock();
        let spent = s.spend.spent_now(now_ms());
        let o = &s.meta.options;
        crate::limits::LimitsView {
            session_id: self.id.clone(),
            budget: o.budget,
            limits: o.limits,
            prices: o.prices,
            budget_reached: o.budget.reached(&spent, true),
            spent,
        }
    }

    /// The guard is stopping `turn` for `reason`: its end will say so.
    pub(crate) fn mark_stopping(&self, turn: &str, reason: StopReason) {
        if let Some(feed) = self.feed.get() {
            feed.count_stop(&reason);
        }
        self.lock().spend.stopping = Some((turn.to_owned(), reason));
    }

    /// How the guard's stop of `turn` ended.
    pub(crate) fn stop_done(&self, turn: &str, how: Stopped) {
        self.stops.send_replace(Some((turn.to_owned(), how)));
    }

    /// Waits (at most `limit`) for how the guard's stop of `turn` ended.
    pub async fn stop_outcome(&self, turn: &str, limit: Duration) -> Option<Stopped> {
        let mut rx = self.stops.subscribe();
        let found = tokio::time::timeout(
            limit,
            rx.wait_for(|v| v.as_ref().is_some_and(|(t, _)| t == turn)),
        )
        .await;
        match found {
            Ok(Ok(v)) => v.as_ref().map(|(_, how)| *how),
            _ => None,
        }
    }
}
