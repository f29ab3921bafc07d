//! The crash-loop guard of the app-server source: restarts back off, and too many crashes in a
//! window stop the restarts with a typed error instead of spinning.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How often Codex may crash (or fail to start) before codex-relay stops restarting it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CrashPolicy {
    /// Crashes within `window` after which no restart is tried (CODEX_CRASH_LIMIT).
    pub max_crashes: u32,
    /// The sliding window (CODEX_CRASH_WINDOW_MS); when the oldest crash leaves it, one more
    /// start is allowed.
    pub window: Duration,
    /// The wait before the first restart; doubled per recent crash, capped at `backoff_max`.
    pub backoff_base: Duration,
    pub backoff_max: Duration,
}

impl Default for CrashPolicy {
    fn default() -> Self {
        Self {
            max_crashes: 5,
            window: Duration::from_secs(60),
            backoff_base: Duration::from_millis(250),
            backoff_max: Duration::from_secs(4),
        }
    }
}

/// Why no restart is tried now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GaveUp {
    pub crashes: u32,
    pub window: Duration,
    /// What the last crash or failed start said.
    pub last: String,
    /// When one more start will be tried (the oldest crash leaves the window).
    pub retry_in: Duration,
}

/// Recent crashes, newest last.
#[derive(Debug, Default)]
pub(crate) struct CrashGuard {
    policy: CrashPolicy,
    crashes: VecDeque<Instant>,
    last: String,
}

impl CrashGuard {
    pub fn new(policy: CrashPolicy) -> Self {
        Self {
            policy,
            crashes: VecDeque::new(),
            last: String::new(),
        }
    }

    /// Codex died, or could not be started, at `now`.
    pub fn record(&mut self, now: Instant, what: impl Into<String>) {
        self.crashes.push_back(now);
        self.last = what.into();
    }

    fn forget_old(&mut self, now: Instant) {
        while let Some(&oldest) = self.crashes.front() {
            if now.saturating_duration_since(oldest) < self.policy.window {
                break;
            }
            self.crashes.pop_front();
        }
    }

    /// Before a start at `now`: how long to wait first, or why not to start at all.
    pub fn before_start(&mut self, now: Instant) -> Result<Duration, GaveUp> {
        self.forget_old(now);
        let n = self.crashes.len() as u32;
        if n == 0 {
            return Ok(Duration::ZERO);
        }
        if n >= self.policy.max_crashes.max(1) {
            let oldest = self.crashes[0];
            return Err(GaveUp {
                crashes: n,
                window: self.policy.window,
                last: self.last.clone(),
                retry_in: (oldest + self.policy.window).saturating_duration_since(now),
            });
        }
        let delay = self
            .policy
            .backoff_base
            .saturating_mul(1u32 << (n - 1).min(16));
        Ok(delay.min(self.policy.backoff_max))
    }

    /// The give-up, if starting now would be refused (for status; no side effect on delays).
    pub fn gave_up(&mut self, now: Instant) -> Option<GaveUp> {
        self.before_start(now).err()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> CrashPolicy {
        CrashPolicy {
            max_crashes: 3,
            window: Duration::from_secs(10),
            backoff_base: Duration::from_millis(100),
            backoff_max: Duration::from_millis(250),
        }
    }

    #[test]
    fn restarts_back_off_then_give_up_then_retry_once_the_window_has_passed() {
        let t0 = Instant::now();
        let mut g = CrashGuard::new(policy());
        assert_eq!(g.before_start(t0), Ok(Duration::ZERO));
        g.record(t0, "killed by signal 9");
        assert_eq!(g.before_start(t0), Ok(Duration::from_millis(100)));
        g.record(t0 + Duration::from_secs(1), "killed by signal 9");
        assert_eq!(g.before_start(t0), Ok(Duration::from_millis(200)));
        g.record(t0 + Duration::from_secs(2), "exit status 1");
        let gave_up = g.before_start(t0 + Duration::from_secs(3)).unwrap_err();
        assert_eq!(gave_up.crashes, 3);
        assert_eq!(gave_up.last, "exit status 1");
        assert_eq!(gave_up.retry_in, Duration::from_secs(7));
        assert!(g.gave_up(t0 + Duration::from_secs(9)).is_some());
        // The first crash has left the window: one more start, after the longest wait.
        assert_eq!(
            g.before_start(t0 + Duration::from_secs(10)),
            Ok(Duration::from_millis(200))
        );
        g.record(t0 + Duration::from_secs(10), "killed by signal 9");
        assert!(g.before_start(t0 + Duration::from_secs(10)).is_err());
    }

    #[test]
    fn the_backoff_is_capped() {
        let t0 = Instant::now();
        let mut g = CrashGuard::new(CrashPolicy {
            max_crashes: 40,
            ..policy()
        });
        for _ in 0..30 {
            g.record(t0, "x");
        }
        assert_eq!(g.before_start(t0), Ok(Duration::from_millis(250)));
    }
}
