//! Flow control of the peer's reader: the relay's gate (closed while its store falls behind)
//! and a bound on notifications delivered to subscribers but not yet read by them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

/// An open/closed signal the peer waits on before reading the next line from Codex.
#[derive(Clone)]
pub struct ReadGate(pub tokio::sync::watch::Receiver<bool>);

impl std::fmt::Debug for ReadGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ReadGate(open: {})", *self.0.borrow())
    }
}

impl ReadGate {
    /// Resolves once the gate is open (at once if it is, or if nobody can close it any more).
    pub(crate) async fn opened(&mut self) {
        let _ = self.0.wait_for(|open| *open).await;
    }
}

/// Most notifications waiting in subscribers' queues before the reader pauses.
const IN_FLIGHT_LIMIT: usize = 2048;
/// Longest pause per line: a subscriber busy awaiting a call's answer (which only the reader
/// can deliver) slows the reader down instead of deadlocking it.
const IN_FLIGHT_PAUSE: Duration = Duration::from_millis(20);

/// Notifications delivered to subscribers and not yet received by them; the reader pauses
/// while there are more than [`IN_FLIGHT_LIMIT`], so a subscriber that falls behind Codex
/// holds a bounded backlog.
#[derive(Default)]
pub(crate) struct InFlight {
    count: AtomicUsize,
    drained: Notify,
}

impl InFlight {
    pub fn delivered(&self) {
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Subscribers took `n` notifications off their queues.
    pub fn received(&self, n: usize) {
        if n == 0 {
            return;
        }
        let before = self
            .count
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                Some(v.saturating_sub(n))
            })
            .unwrap_or(0);
        if before > IN_FLIGHT_LIMIT / 2 && before.saturating_sub(n) <= IN_FLIGHT_LIMIT / 2 {
            self.drained.notify_waiters();
        }
    }

    /// Waits (a bounded time) while subscribers hold too many unread notifications.
    pub async fn throttle(&self) {
        if self.count.load(Ordering::Relaxed) > IN_FLIGHT_LIMIT {
            let _ = tokio::time::timeout(IN_FLIGHT_PAUSE, self.drained.notified()).await;
        }
    }
}
