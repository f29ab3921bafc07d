//! What a session spent, derived from its events: token usage summed over every model request
//! (of its own thread and its sub-agents'), per turn and for the session; turns; time spent
//! running turns; the estimated cost; and why the relay stopped its last turn.
//!
//! Codex's `thread/tokenUsage/updated` carries `total` (its running sum of every request of
//! the thread) and `last` (the latest request). Codex sends it again unchanged (with rate
//! limit updates, say), so each request counts as `total` minus the total seen before; a total
//! that went down (a new Codex process that did not keep it) counts its `last`.

use std::collections::HashMap;

use crate::event::{Ev, Usage};
use crate::limits::{Prices, Spent, StopReason};

#[derive(Debug, Default)]
pub(crate) struct Spend {
    /// The last `total` per thread ("" for the session's own).
    totals: HashMap<String, Usage>,
    /// The running (or last) turn's usage.
    pub turn: Usage,
    pub spent: Spent,
    /// Unix ms the running turn started at.
    turn_started: Option<i64>,
    /// Why the relay stopped the last turn.
    pub stopped: Option<StopReason>,
    /// A stop the guard asked for, with the turn it is for: stamped on that turn's end.
    pub stopping: Option<(String, StopReason)>,
    /// A fork's: the first report of its own thread outside a turn is the history it was
    /// forked with (Codex reports it as the thread loads), a baseline, not spending.
    baseline_first: bool,
}

impl Spend {
    pub fn restored(spent: Option<Spent>, total: Option<Usage>) -> Self {
        let mut s = Spend {
            spent: spent.unwrap_or_default(),
            ..Default::default()
        };
        if let Some(total) = total {
            s.totals.insert(String::new(), total);
        }
        s
    }

    /// Counts one usage report; returns what it added.
    pub fn on_usage(
        &mut self,
        thread: &str,
        total: &Usage,
        last: &Usage,
        prices: Option<&Prices>,
    ) -> Usage {
        if self.baseline_first && thread.is_empty() && self.turn_started.is_none() {
            self.baseline_first = false;
            self.totals.insert(String::new(), total.clone());
            return Usage::default();
        }
        let delta = match self.totals.get(thread) {
            Some(prev) if not_below(total, prev) => total.since(prev),
            _ => last.clone(),
        };
        self.totals.insert(thread.to_owned(), total.clone());
        add(&mut self.turn, &delta);
        add(&mut self.spent.usage, &delta);
        self.spent.cost_usd = prices.map(|p| p.cost(&self.spent.usage));
        delta
    }

    /// A fork's spending: nothing yet (the turns it was forked with were its source's).
    pub fn forked() -> Self {
        Spend {
            baseline_first: true,
            ..Default::default()
        }
    }

    pub fn on_turn_start(&mut self, now: i64) {
        self.baseline_first = false;
        self.turn = Usage::default();
        self.turn_started = Some(now);
        self.spent.turns += 1;
        self.stopped = None;
    }

    pub fn on_turn_end(&mut self, now: i64, stopped: Option<&StopReason>) {
        if let Some(at) = self.turn_started.take() {
            self.spent.wall_ms += (now - at).max(0) as u64;
        }
        self.stopped = stopped.cloned();
    }

    /// What was spent, with the running turn's time so far.
    pub fn spent_now(&self, now: i64) -> Spent {
        let mut spent = self.spent.clone();
        if let Some(at) = self.turn_started {
            spent.wall_ms += (now - at).max(0) as u64;
        }
        spent
    }

    /// Stamps a `turn-end` of the session's own `turn` with the turn's usage and, when the
    /// relay stopped it, why (also in its error text).
    pub fn stamp(&mut self, turn: Option<&str>, ev: &mut Ev) {
        let Ev::TurnEnd {
            status,
            error,
            stopped,
            usage,
            ..
        } = ev
        else {
            return;
        };
        if usage.is_none() {
            *usage = Some(self.turn.clone());
        }
        let Some((for_turn, reason)) = &self.stopping else {
            return;
        };
        if turn.is_some_and(|t| t != for_turn) {
            return;
        }
        if *status != crate::event::TurnEndStatus::Completed && stopped.is_none() {
            let why = reason.message();
            *error = Some(match error.take() {
                Some(e) if !e.is_empty() => format!("{why} ({e})"),
                _ => why,
            });
            *stopped = Some(reason.clone());
        }
        self.stopping = None;
    }
}

fn not_below(a: &Usage, b: &Usage) -> bool {
    a.input_tokens >= b.input_tokens
        && a.cached_input_tokens >= b.cached_input_tokens
        && a.output_tokens >= b.output_tokens
        && a.reasoning_output_tokens >= b.reasoning_output_tokens
        && a.total_tokens >= b.total_tokens
}

pub(crate) fn add(a: &mut Usage, b: &Usage) {
    a.input_tokens += b.input_tokens;
    a.cached_input_tokens += b.cached_input_tokens;
    a.output_tokens += b.output_tokens;
    a.reasoning_output_tokens += b.reasoning_output_tokens;
    a.total_tokens += b.total_tokens;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(input: i64, output: i64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            total_tokens: input + output,
            ..Default::default()
        }
    }

    #[test]
    fn every_request_counts_once_and_a_repeat_counts_nothing() {
        let mut s = Spend::default();
        s.on_turn_start(0);
        s.on_usage("", &u(10, 1), &u(10, 1), None);
        // Sent again unchanged (a rate-limit update).
        s.on_usage("", &u(10, 1), &u(10, 1), None);
        s.on_usage("", &u(30, 3), &u(20, 2), None);
        // A sub-agent's thread counts too.
        s.on_usage("child", &u(5, 5), &u(5, 5), None);
        assert_eq!(s.turn, u(35, 8));
        // A new Codex process starts its total again: its `last` counts.
        s.on_usage("", &u(7, 7), &u(7, 7), None);
        assert_eq!(s.spent.usage, u(42, 15));
        s.on_turn_start(10);
        s.on_usage("", &u(8, 8), &u(1, 1), None);
        assert_eq!(s.turn, u(1, 1));
        assert_eq!(s.spent.turns, 2);
    }
}
