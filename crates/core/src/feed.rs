//! The relay-wide feed: every logged event of every session and every session created, on one
//! broadcast channel, plus counters for metrics, so a dashboard needs one subscription.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::broadcast;

use crate::event::Envelope;
use crate::relay::Relay;
use crate::session::SessionSnapshot;

/// What the feed carries. Status changes, closes and requests opened or resolved are envelopes
/// (`status`, `request-opened`, `request-resolved`).
#[derive(Debug, Clone)]
pub enum RelayEvent {
    /// A session joined this relay (created, resumed from Codex, or restored).
    SessionCreated(Box<SessionSnapshot>),
    /// An event was appended to a session's log.
    Logged {
        session_id: Arc<str>,
        envelope: Arc<Envelope>,
    },
}

/// Events a slow feed subscriber may fall behind by before it is told it lagged.
const FEED_CAPACITY: usize = 4096;

/// The feed and the relay's counters. One per relay.
#[derive(Debug)]
pub struct Feed {
    tx: broadcast::Sender<RelayEvent>,
    events_appended: AtomicU64,
    codex_starts: AtomicU64,
    /// Tokens the sessions this instance runs spent, summed over every model request:
    /// input, cached input, output, reasoning output, total.
    tokens: [AtomicU64; 5],
    /// Turns the relay stopped: for a deadline, the idle watchdog, a budget.
    stops: [AtomicU64; 3],
    /// The account's rate limits, from every Codex process's notifications, and the turn queue.
    pub rate_limits: crate::rate_limits::RateLimitGate,
}

impl Default for Feed {
    fn default() -> Self {
        Self {
            tx: broadcast::channel(FEED_CAPACITY).0,
            events_appended: AtomicU64::new(0),
            codex_starts: AtomicU64::new(0),
            tokens: Default::default(),
            stops: Default::default(),
            rate_limits: Default::default(),
        }
    }
}

impl Feed {
    pub(crate) fn logged(&self, session_id: &str, envelope: &Arc<Envelope>) {
        self.events_appended.fetch_add(1, Ordering::Relaxed);
        if self.tx.receiver_count() > 0 {
            let _ = self.tx.send(RelayEvent::Logged {
                session_id: session_id.into(),
                envelope: envelope.clone(),
            });
        }
    }

    pub(crate) fn session_created(&self, snapshot: SessionSnapshot) {
        if self.tx.receiver_count() > 0 {
            let _ = self.tx.send(RelayEvent::SessionCreated(Box::new(snapshot)));
        }
    }

    pub(crate) fn codex_started(&self) {
        self.codex_starts.fetch_add(1, Ordering::Relaxed);
    }

    /// Events appended to any session's log since the relay opened.
    pub(crate) fn count_tokens(&self, u: &crate::event::Usage) {
        let parts = [
            u.input_tokens,
            u.cached_input_tokens,
            u.output_tokens,
            u.reasoning_output_tokens,
            u.total_tokens,
        ];
        for (slot, n) in self.tokens.iter().zip(parts) {
            slot.fetch_add(n.max(0) as u64, Ordering::Relaxed);
        }
    }

    /// Tokens spent by kind (`input`, `cached_input`, `output`, `reasoning_output`, `total`),
    /// summed over every model request of this instance's sessions.
    pub fn tokens(&self) -> [(&'static str, u64); 5] {
        let names = [
            "input",
            "cached_input",
            "output",
            "reasoning_output",
            "total",
        ];
        std::array::from_fn(|i| (names[i], self.tokens[i].load(Ordering::Relaxed)))
    }

    pub(crate) fn count_stop(&self, reason: &crate::limits::StopReason) {
        let i = match reason {
            crate::limits::StopReason::Deadline { .. } => 0,
            crate::limits::StopReason::Idle { .. } => 1,
            crate::limits::StopReason::Budget { .. } => 2,
        };
        self.stops[i].fetch_add(1, Ordering::Relaxed);
    }

    /// Turns the relay stopped, by reason (`deadline`, `idle`, `budget`).
    pub fn stops(&self) -> [(&'static str, u64); 3] {
        let names = ["deadline", "idle", "budget"];
        std::array::from_fn(|i| (names[i], self.stops[i].load(Ordering::Relaxed)))
    }

    pub fn events_appended(&self) -> u64 {
        self.events_appended.load(Ordering::Relaxed)
    }

    /// Codex app-servers started since the relay opened (the first one included).
    pub fn codex_starts(&self) -> u64 {
        self.codex_starts.load(Ordering::Relaxed)
    }
}

impl Relay {
    /// Everything that happens from now on, across sessions.
    pub fn subscribe(&self) -> broadcast::Receiver<RelayEvent> {
        self.inner.feed.tx.subscribe()
    }

    /// The relay's counters.
    pub fn feed(&self) -> &Feed {
        &self.inner.feed
    }
}
