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
}

impl Default for Feed {
    fn default() -> Self {
        Self {
            tx: broadcast::channel(FEED_CAPACITY).0,
            events_appended: AtomicU64::new(0),
            codex_starts: AtomicU64::new(0),
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
