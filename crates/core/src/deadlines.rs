//! The approval deadlines of one broker: a queue ordered by deadline and one task that resolves
//! each request fail-closed when its deadline passes (instead of a sleeping task per request).
//! Every request of a broker gets the same timeout, so deadlines arrive in order.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// How often an idle deadline task checks whether its broker is gone.
pub(crate) const IDLE_CHECK: Duration = Duration::from_secs(1);

#[derive(Default)]
pub(crate) struct Deadlines {
    queue: Mutex<VecDeque<(Instant, String)>>,
    wake: Arc<Notify>,
    started: AtomicBool,
}

impl Deadlines {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<(Instant, String)>> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a deadline; true the first time (the caller then starts the task).
    pub fn push(&self, at: Instant, id: String) -> bool {
        {
            let mut q = self.lock();
            // Keep the order even if a clock step made this one earlier than the last.
            let pos = q.iter().rposition(|(t, _)| *t <= at).map_or(0, |p| p + 1);
            q.insert(pos, (at, id));
        }
        self.wake.notify_one();
        !self.started.swap(true, Ordering::Relaxed)
    }

    /// Removes and returns the requests whose deadline has passed.
    pub fn due(&self, now: Instant) -> Vec<String> {
        let mut q = self.lock();
        let n = q.iter().take_while(|(t, _)| *t <= now).count();
        q.drain(..n).map(|(_, id)| id).collect()
    }

    pub fn next(&self) -> Option<Instant> {
        self.lock().front().map(|(t, _)| *t)
    }

    pub fn wake(&self) -> Arc<Notify> {
        self.wake.clone()
    }
}
