//! The account's rate limits as Codex reports them (`account/rateLimits/updated`, sent per
//! app-server process with no thread id), whether one is hit now, and the bounded queue of
//! new turns that wait while it is: the state behind the relay's turn queue (turn_queue.rs).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::watch;

/// One window of a limit: how full it is (percent, Codex rounds to whole numbers), how long it
/// is, and when it resets (Unix seconds).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RateLimitWindow {
    pub used_percent: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_minutes: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resets_at: Option<i64>,
}

/// The latest snapshot of one limit (`limitId`, `codex` unless the server names another).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RateLimitSnapshot {
    pub limit_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary: Option<RateLimitWindow>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secondary: Option<RateLimitWindow>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_type: Option<String>,
    /// When the relay received it (Unix ms).
    pub seen_at_ms: i64,
}

impl RateLimitSnapshot {
    /// Reads `account/rateLimits/updated`'s params (`{rateLimits: {...}}`); `None` when they
    /// carry no snapshot.
    pub fn from_notification(params: &Value, now_ms: i64) -> Option<Self> {
        let limits = params.get("rateLimits")?;
        let window = |key: &str| {
            let w = limits.get(key).filter(|w| w.is_object())?;
            Some(RateLimitWindow {
                used_percent: w.get("usedPercent")?.as_f64()?,
                window_minutes: w.get("windowDurationMins").and_then(Value::as_i64),
                resets_at: w.get("resetsAt").and_then(Value::as_i64),
            })
        };
        let text = |key: &str| limits.get(key).and_then(Value::as_str).map(str::to_owned);
        Some(RateLimitSnapshot {
            limit_id: text("limitId").unwrap_or_else(|| "codex".into()),
            limit_name: text("limitName"),
            primary: window("primary"),
            secondary: window("secondary"),
            plan_type: text("planType"),
            seen_at_ms: now_ms,
        })
    }

    /// The window that is full now (100 % used and not yet reset), if one is.
    fn hit(&self, now_secs: i64) -> Option<RateLimitHold> {
        [("primary", self.primary), ("secondary", self.secondary)]
            .into_iter()
            .filter_map(|(name, w)| Some((name, w?)))
            .find(|(_, w)| w.used_percent >= 100.0 && w.resets_at.is_none_or(|at| at > now_secs))
            .map(|(name, w)| RateLimitHold {
                limit_id: self.limit_id.clone(),
                window: name.to_owned(),
                used_percent: w.used_percent,
                resets_at: w.resets_at,
            })
    }
}

/// A limit that is hit: new turns wait until Codex reports it below 100 % or its reset time
/// passes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RateLimitHold {
    pub limit_id: String,
    /// `primary` or `secondary`.
    pub window: String,
    pub used_percent: f64,
    /// When it resets (Unix seconds), when Codex said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resets_at: Option<i64>,
}

/// How many new turns may wait, and for how long, while a limit is hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnQueueLimits {
    /// Turns waiting at once, over all sessions; one more is refused.
    pub max_queued: usize,
    /// How long a turn may wait; a turn that would wait longer (the limit resets later) is
    /// refused, and one that waited this long is dropped with an error in its session's log.
    pub max_wait_ms: u64,
}

impl Default for TurnQueueLimits {
    fn default() -> Self {
        TurnQueueLimits {
            max_queued: 64,
            max_wait_ms: 15 * 60 * 1000,
        }
    }
}

impl TurnQueueLimits {
    pub fn max_wait(&self) -> Duration {
        Duration::from_millis(self.max_wait_ms)
    }
}

/// A turn waiting for a limit to clear.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueuedTurn {
    pub session_id: String,
    /// 1 is the next to start.
    pub position: usize,
    pub queued_at_ms: i64,
}

/// What every front shows: the latest snapshot of each limit, the hold (if one is hit), the
/// waiting turns and the queue's bounds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RateLimitsView {
    pub limits: Vec<RateLimitSnapshot>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<RateLimitHold>,
    pub queued: Vec<QueuedTurn>,
    pub max_queued: usize,
    pub max_wait_ms: u64,
    /// Turns that waited in the queue since the relay opened, and those refused or dropped.
    pub queued_total: u64,
    pub refused_total: u64,
}

#[derive(Debug, Default)]
struct State {
    limits: BTreeMap<String, RateLimitSnapshot>,
    queue: VecDeque<(String, i64)>,
    bounds: TurnQueueLimits,
    queued_total: u64,
    refused_total: u64,
}

/// Why a turn was not queued.
#[derive(Debug, Clone, PartialEq)]
pub enum QueueRefusal {
    /// The queue holds `max_queued` turns already.
    Full { max_queued: usize },
    /// The limit resets later than a turn may wait.
    TooLong { max_wait_ms: u64 },
}

/// The relay's rate-limit state: updated from every Codex process's notifications, read by
/// the turn queue and every front. `changed` ticks on every update and queue change.
#[derive(Debug)]
pub struct RateLimitGate {
    state: Mutex<State>,
    changed: watch::Sender<u64>,
}

impl Default for RateLimitGate {
    fn default() -> Self {
        RateLimitGate {
            state: Mutex::default(),
            changed: watch::channel(0).0,
        }
    }
}

fn refusal(s: &State, hold: &RateLimitHold) -> Option<QueueRefusal> {
    if s.queue.len() >= s.bounds.max_queued {
        Some(QueueRefusal::Full {
            max_queued: s.bounds.max_queued,
        })
    } else if hold
        .resets_at
        .is_some_and(|at| (at - now_secs()) * 1000 > s.bounds.max_wait_ms as i64)
    {
        Some(QueueRefusal::TooLong {
            max_wait_ms: s.bounds.max_wait_ms,
        })
    } else {
        None
    }
}

fn now_secs() -> i64 {
    crate::ids::now_ms() / 1000
}

impl RateLimitGate {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn tick(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    pub fn set_bounds(&self, bounds: TurnQueueLimits) {
        self.state().bounds = bounds;
    }

    pub fn bounds(&self) -> TurnQueueLimits {
        self.state().bounds
    }

    /// Takes one `account/rateLimits/updated` (its params).
    pub fn update(&self, params: &Value) {
        let Some(snapshot) = RateLimitSnapshot::from_notification(params, crate::ids::now_ms())
        else {
            return;
        };
        tracing::debug!(?snapshot, "rate limits updated");
        self.state()
            .limits
            .insert(snapshot.limit_id.clone(), snapshot);
        self.tick();
    }

    /// The limit hit now, if any.
    pub fn hold(&self) -> Option<RateLimitHold> {
        let now = now_secs();
        self.state().limits.values().find_map(|s| s.hit(now))
    }

    /// Wakes on every update, queue change (and the caller's own timers).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Puts `session`'s turn at the back of the queue; `Err` when the queue is full or the
    /// hold resets later than a turn may wait. Returns the turn's position.
    pub fn enqueue(&self, session: &str, hold: &RateLimitHold) -> Result<usize, QueueRefusal> {
        let mut s = self.state();
        let refusal = refusal(&s, hold);
        if let Some(r) = refusal {
            s.refused_total += 1;
            return Err(r);
        }
        s.queue
            .push_back((session.to_owned(), crate::ids::now_ms()));
        s.queued_total += 1;
        let position = s.queue.len();
        drop(s);
        self.tick();
        Ok(position)
    }

    /// Why a turn would be refused if it had to wait for `hold` now, if it would.
    pub fn would_refuse(&self, hold: &RateLimitHold) -> Option<QueueRefusal> {
        refusal(&self.state(), hold)
    }

    /// Counts a turn refused before it was queued (a new session's first prompt).
    pub fn refused(&self) {
        self.state().refused_total += 1;
    }

    /// Whether `session`'s waiting turn is the next to start.
    pub fn is_first(&self, session: &str) -> bool {
        self.state()
            .queue
            .front()
            .is_some_and(|(s, _)| s == session)
    }

    /// Takes `session`'s turn out of the queue (started, dropped or its session closed).
    pub fn leave(&self, session: &str) {
        let mut s = self.state();
        if let Some(i) = s.queue.iter().position(|(id, _)| id == session) {
            s.queue.remove(i);
            drop(s);
            self.tick();
        }
    }

    /// Counts a turn dropped after waiting too long.
    pub fn dropped(&self, session: &str) {
        self.state().refused_total += 1;
        self.leave(session);
    }

    /// `session`'s place in the queue (1 is next), if a turn of it waits.
    pub fn position(&self, session: &str) -> Option<usize> {
        self.state()
            .queue
            .iter()
            .position(|(id, _)| id == session)
            .map(|i| i + 1)
    }

    pub fn view(&self) -> RateLimitsView {
        let hold = self.hold();
        let s = self.state();
        RateLimitsView {
            limits: s.limits.values().cloned().collect(),
            hold,
            queued: s
                .queue
                .iter()
                .enumerate()
                .map(|(i, (id, at))| QueuedTurn {
                    session_id: id.clone(),
                    position: i + 1,
                    queued_at_ms: *at,
                })
                .collect(),
            max_queued: s.bounds.max_queued,
            max_wait_ms: s.bounds.max_wait_ms,
            queued_total: s.queued_total,
            refused_total: s.refused_total,
        }
    }

    /// When the hold's reset time passes (the queue wakes then), if it has one.
    pub fn hold_resets_in(&self) -> Option<Duration> {
        let at = self.hold()?.resets_at?;
        let ms = (at * 1000 - crate::ids::now_ms()).max(0) as u64;
        Some(Duration::from_millis(ms + 50))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn update(used: f64, resets_in: i64) -> Value {
        json!({"rateLimits": {"limitId": "codex", "primary": {
            "usedPercent": used, "windowDurationMins": 300, "resetsAt": now_secs() + resets_in
        }, "secondary": null, "rateLimitReachedType": null}})
    }

    #[test]
    fn a_full_window_holds_until_codex_reports_it_below_100() {
        let gate = RateLimitGate::default();
        assert_eq!(gate.hold(), None);
        gate.update(&update(43.0, 3600));
        assert_eq!(gate.hold(), None, "43 % is not a hit");
        gate.update(&update(100.0, 3600));
        let hold = gate.hold().expect("100 % holds");
        assert_eq!(
            (hold.limit_id.as_str(), hold.window.as_str()),
            ("codex", "primary")
        );
        gate.update(&update(10.0, 3600));
        assert_eq!(gate.hold(), None, "cleared by the next snapshot");
    }

    #[test]
    fn a_full_window_whose_reset_time_passed_holds_nothing() {
        let gate = RateLimitGate::default();
        gate.update(&update(100.0, -1));
        assert_eq!(gate.hold(), None);
    }

    #[test]
    fn the_queue_is_bounded_in_length_and_in_wait() {
        let gate = RateLimitGate::default();
        gate.set_bounds(TurnQueueLimits {
            max_queued: 2,
            max_wait_ms: 60_000,
        });
        gate.update(&update(100.0, 30));
        let hold = gate.hold().unwrap();
        assert_eq!(gate.enqueue("a", &hold), Ok(1));
        assert_eq!(gate.enqueue("b", &hold), Ok(2));
        assert_eq!(
            gate.enqueue("c", &hold),
            Err(QueueRefusal::Full { max_queued: 2 })
        );
        assert!(gate.is_first("a"));
        gate.leave("a");
        assert_eq!(gate.position("b"), Some(1));
        gate.update(&update(100.0, 3600));
        let later = gate.hold().unwrap();
        assert_eq!(
            gate.enqueue("c", &later),
            Err(QueueRefusal::TooLong {
                max_wait_ms: 60_000
            })
        );
        let view = gate.view();
        assert_eq!((view.queued_total, view.refused_total), (2, 2));
    }
}
