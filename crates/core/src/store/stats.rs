//! Counters of the store's writer for metrics: writes queued and not yet committed, and how
//! long commits take.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct StoreStats {
    queued: AtomicI64,
    commits: AtomicU64,
    commit_micros_total: AtomicU64,
    last_commit_micros: AtomicU64,
}

impl StoreStats {
    pub(crate) fn enqueued(&self) {
        self.queued.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn committed(&self, writes: usize, took: std::time::Duration) {
        self.queued.fetch_sub(writes as i64, Ordering::Relaxed);
        let micros = took.as_micros() as u64;
        self.commits.fetch_add(1, Ordering::Relaxed);
        self.commit_micros_total
            .fetch_add(micros, Ordering::Relaxed);
        self.last_commit_micros.store(micros, Ordering::Relaxed);
    }

    /// Writes queued and not yet committed.
    pub fn queue_depth(&self) -> u64 {
        self.queued.load(Ordering::Relaxed).max(0) as u64
    }

    /// Batches committed (or failed) so far.
    pub fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    /// Seconds spent committing, over all batches.
    pub fn commit_seconds_total(&self) -> f64 {
        self.commit_micros_total.load(Ordering::Relaxed) as f64 / 1e6
    }

    /// Seconds the last batch took.
    pub fn last_commit_seconds(&self) -> f64 {
        self.last_commit_micros.load(Ordering::Relaxed) as f64 / 1e6
    }
}
