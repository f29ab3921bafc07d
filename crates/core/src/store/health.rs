//! A typed view of the store's health for fronts and sessions: its backend, the writes it holds, whether Codex is paused, and the fault while the database cannot take writes.

use serde::Serialize;

/// Why the database cannot take writes right now, while the store keeps them in memory and
/// retries (docs/STORE.md, "Faults").
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoreFault {
    /// The database's reason, e.g. `error returned from database: (code: 5) database is locked`.
    pub message: String,
    /// How long the fault has lasted, in milliseconds.
    pub for_ms: u64,
    /// Writes kept in memory, not yet committed.
    pub queued_writes: u64,
    /// The write queue reached its bound: reading from Codex is paused (its turns wait) until
    /// the database takes writes again.
    pub codex_paused: bool,
}

/// The store at a glance ([`Store::health`](super::Store::health)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoreHealth {
    /// `sqlite` or `postgres`.
    pub backend: &'static str,
    /// Writes queued and not yet committed.
    pub queued_writes: u64,
    /// The write queue is at its bound and reading from Codex is paused (also without a fault,
    /// briefly, when the database is only slow).
    pub codex_paused: bool,
    /// `Some` while the database cannot take writes.
    pub fault: Option<StoreFault>,
}

impl StoreFault {
    /// `None` (after one lock) while the database takes writes: cheap enough for every
    /// session snapshot.
    pub(crate) fn of(stats: &super::StoreStats) -> Option<Self> {
        let (message, age) = stats.fault_and_age()?;
        Some(StoreFault {
            message,
            for_ms: u64::try_from(age.as_millis()).unwrap_or(u64::MAX),
            queued_writes: stats.queue_depth(),
            codex_paused: stats.ingest_paused(),
        })
    }
}

impl StoreHealth {
    pub(crate) fn of(backend: &'static str, stats: &super::StoreStats) -> Self {
        StoreHealth {
            backend,
            queued_writes: stats.queue_depth(),
            codex_paused: stats.ingest_paused(),
            fault: StoreFault::of(stats),
        }
    }
}
