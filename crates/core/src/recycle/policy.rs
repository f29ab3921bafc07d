//! When a Codex process has done enough: its memory (RSS of its process group), the turns it
//! ran, its age; and what to do when it is far over its memory limit during a turn.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::pool::Life;

/// What to do when a process is far over its memory limit while a turn runs on it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OverLimit {
    /// Say so (a warning, a note in each busy session's log) and recycle once the turns end.
    #[default]
    Wait,
    /// Say so and interrupt the running turns, so the process is recycled at once.
    Interrupt,
}

impl std::str::FromStr for OverLimit {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "wait" => Ok(OverLimit::Wait),
            "interrupt" => Ok(OverLimit::Interrupt),
            other => Err(format!("`{other}`: expected `wait` or `interrupt`")),
        }
    }
}

/// Limits per `codex app-server` process of the pool (docs/OPERATIONS.md, "Recycling Codex
/// processes"). All off by default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecyclePolicy {
    /// Resident bytes of a process group (the app-server and what runs in its group) past
    /// which the process is recycled (`--codex-max-rss`).
    pub max_rss: Option<u64>,
    /// "Far over": past this, a running turn is reported, and interrupted if `over_hard` says
    /// so (`--codex-hard-rss`; default twice `max_rss`).
    pub hard_rss: Option<u64>,
    /// Turns started on one process after which it is recycled (`--codex-max-turns`).
    pub max_turns: Option<u64>,
    /// How long one process serves before it is recycled (`--codex-max-age`).
    pub max_age: Option<Duration>,
    /// What to do past `hard_rss` while a turn runs (`--codex-over-limit`).
    pub over_hard: OverLimit,
    /// How often the processes are looked at.
    pub check_every: Duration,
    /// How long the old process has to exit (SIGTERM to its group) before it is killed.
    pub grace: Duration,
}

impl Default for RecyclePolicy {
    fn default() -> Self {
        Self {
            max_rss: None,
            hard_rss: None,
            max_turns: None,
            max_age: None,
            over_hard: OverLimit::Wait,
            check_every: Duration::from_secs(5),
            grace: Duration::from_secs(2),
        }
    }
}

const MIB: u64 = 1024 * 1024;

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / MIB as f64)
}

impl RecyclePolicy {
    /// Whether any limit is set (no monitor runs otherwise).
    pub fn enabled(&self) -> bool {
        self.max_rss.is_some() || self.max_turns.is_some() || self.max_age.is_some()
    }

    /// The "far over" memory bound.
    pub fn hard(&self) -> Option<u64> {
        self.hard_rss.or(self.max_rss.map(|m| m.saturating_mul(2)))
    }

    /// Which limit a process crossed, in words, if any. A process that has run no turn yet
    /// is never recycled: what it holds is its baseline, which a fresh process would hold too
    /// (a limit below it would otherwise replace processes in a loop).
    pub(crate) fn crossed(&self, life: &Life, now: Instant) -> Option<String> {
        if life.turns == 0 {
            return None;
        }
        if let (Some(max), Some(rss)) = (self.max_rss, life.rss)
            && rss > max
        {
            return Some(format!(
                "its memory ({}) is over the limit ({})",
                mib(rss),
                mib(max)
            ));
        }
        if let Some(max) = self.max_turns
            && life.turns >= max
        {
            return Some(format!("it ran {} turns (the limit is {max})", life.turns));
        }
        if let Some(max) = self.max_age {
            let age = now.saturating_duration_since(life.since);
            if age >= max {
                return Some(format!(
                    "it has served for {} s (the limit is {} s)",
                    age.as_secs(),
                    max.as_secs()
                ));
            }
        }
        None
    }

    /// Words for a process far over its memory limit, if it is.
    pub(crate) fn far_over(&self, life: &Life) -> Option<String> {
        let (hard, rss) = (self.hard()?, life.rss?);
        (rss > hard).then(|| {
            format!(
                "the Codex app-server (pid {}) uses {}, far over its limit ({})",
                life.pid,
                mib(rss),
                mib(hard)
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn life(turns: u64, rss: Option<u64>, age: Duration) -> (Life, Instant) {
        let now = Instant::now();
        let since = now.checked_sub(age).unwrap_or(now);
        (
            Life {
                pid: 7,
                since,
                turns,
                rss,
            },
            since + age,
        )
    }

    #[test]
    fn each_limit_is_crossed_only_after_a_turn() {
        let p = RecyclePolicy {
            max_rss: Some(100 * MIB),
            max_turns: Some(3),
            max_age: Some(Duration::from_secs(60)),
            ..Default::default()
        };
        let (l, now) = life(0, Some(500 * MIB), Duration::from_secs(600));
        assert_eq!(p.crossed(&l, now), None, "nothing ran on it yet");
        let (l, now) = life(1, Some(101 * MIB), Duration::ZERO);
        assert!(p.crossed(&l, now).unwrap().contains("memory"));
        let (l, now) = life(3, Some(MIB), Duration::ZERO);
        assert!(p.crossed(&l, now).unwrap().contains("3 turns"));
        let (l, now) = life(1, None, Duration::from_secs(61));
        assert!(p.crossed(&l, now).unwrap().contains("served"));
        let (l, now) = life(2, Some(MIB), Duration::from_secs(1));
        assert_eq!(p.crossed(&l, now), None);
    }

    #[test]
    fn far_over_is_twice_the_limit_unless_set() {
        let mut p = RecyclePolicy {
            max_rss: Some(100 * MIB),
            ..Default::default()
        };
        let (l, _) = life(1, Some(199 * MIB), Duration::ZERO);
        assert_eq!(p.far_over(&l), None);
        let (l, _) = life(1, Some(201 * MIB), Duration::ZERO);
        assert!(p.far_over(&l).unwrap().contains("pid 7"));
        p.hard_rss = Some(300 * MIB);
        assert_eq!(p.far_over(&l), None);
        assert!(!RecyclePolicy::default().enabled());
        assert_eq!("interrupt".parse(), Ok(OverLimit::Interrupt));
        assert!("later".parse::<OverLimit>().is_err());
    }
}
