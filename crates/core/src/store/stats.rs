//! Counters of the store's writer for metrics: writes queued and not yet committed, and how
//! long commits take.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use tokio::sync::watch;

#[derive(Debug)]
pub struct StoreStats {
    queued: AtomicI64,
    /// Bytes (approximately) of the writes queued and not yet committed.
    queued_bytes: AtomicI64,
    /// Most bytes queued before ingest is paused; it resumes at half.
    bound: i64,
    /// Open while the queue is under its bound (see [`StoreStats::gate`]).
    gate: watch::Sender<bool>,
    paused: AtomicU64,
    /// Why the database cannot take writes right now (they are kept and retried), and since
    /// when.
    fault: std::sync::Mutex<Option<(String, std::time::Instant)>>,
    closing: std::sync::atomic::AtomicBool,
    /// Wakes a writer waiting to retry when the store starts closing.
    closing_wake: tokio::sync::Notify,
    commits: AtomicU64,
    commit_micros_total: AtomicU64,
    last_commit_micros: AtomicU64,
}

impl Default for StoreStats {
    fn default() -> Self {
        Self::new(super::StoreOptions::default().max_queued_bytes)
    }
}

impl StoreStats {
    pub(crate) fn new(bound: usize) -> Self {
        Self {
            queued: AtomicI64::new(0),
            queued_bytes: AtomicI64::new(0),
            bound: i64::try_from(bound.max(2)).unwrap_or(i64::MAX),
            gate: watch::Sender::new(true),
            paused: AtomicU64::new(0),
            fault: std::sync::Mutex::new(None),
            closing: std::sync::atomic::AtomicBool::new(false),
            closing_wake: tokio::sync::Notify::new(),
            commits: AtomicU64::new(0),
            commit_micros_total: AtomicU64::new(0),
            last_commit_micros: AtomicU64::new(0),
        }
    }

    /// Counts one queued write; returns how many are queued and not yet committed.
    pub(crate) fn enqueued(&self, bytes: usize) -> i64 {
        let queued = self.queued.fetch_add(1, Ordering::Relaxed) + 1;
        let depth = self.queued_bytes.fetch_add(bytes as i64, Ordering::Relaxed) + bytes as i64;
        if depth >= self.bound && *self.gate.borrow() {
            self.gate
                .send_if_modified(|open| std::mem::replace(open, false));
            self.paused.fetch_add(1, Ordering::Relaxed);
        }
        queued
    }

    /// Open while the write queue is under its bound: whoever feeds the store (the Codex
    /// readers) waits on it, so a store that falls behind slows ingest instead of memory
    /// growing.
    pub fn gate(&self) -> watch::Receiver<bool> {
        self.gate.subscribe()
    }

    /// The queue is at its bound: the gate is closed and whoever feeds the store waits.
    pub fn ingest_paused(&self) -> bool {
        !*self.gate.borrow()
    }

    /// Why the database cannot take writes right now, while the writer keeps them and retries;
    /// `None` when it is writing normally.
    pub fn fault(&self) -> Option<String> {
        let f = self.fault.lock().unwrap_or_else(|e| e.into_inner());
        f.as_ref().map(|(why, _)| why.clone())
    }

    /// The fault and how long it has lasted, read together (`None` while the store writes
    /// normally).
    pub(crate) fn fault_and_age(&self) -> Option<(String, std::time::Duration)> {
        let f = self.fault.lock().unwrap_or_else(|e| e.into_inner());
        f.as_ref()
            .map(|(why, since)| (why.clone(), since.elapsed()))
    }

    /// How long the current fault has lasted (`None` while the store writes normally).
    pub fn fault_age(&self) -> Option<std::time::Duration> {
        let f = self.fault.lock().unwrap_or_else(|e| e.into_inner());
        f.as_ref().map(|(_, since)| since.elapsed())
    }

    pub(crate) fn set_fault(&self, fault: Option<String>) {
        let mut f = self.fault.lock().unwrap_or_else(|e| e.into_inner());
        if f.is_some() && fault.is_none() {
            tracing::info!("the store takes writes again; the kept writes are committed");
        }
        let since = f
            .as_ref()
            .map_or_else(std::time::Instant::now, |(_, since)| *since);
        *f = fault.map(|why| (why, since));
    }

    pub(crate) fn closing(&self) -> bool {
        self.closing.load(Ordering::Relaxed)
    }

    pub(crate) fn set_closing(&self) {
        self.closing.store(true, Ordering::Relaxed);
        self.closing_wake.notify_one();
    }

    /// Waits `delay`, or less if the store starts closing meanwhile.
    pub(crate) async fn retry_pause(&self, delay: std::time::Duration) {
        if self.closing() {
            return;
        }
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = self.closing_wake.notified() => {}
        }
    }

    /// How often the queue reached its bound and paused ingest.
    pub fn pauses(&self) -> u64 {
        self.paused.load(Ordering::Relaxed)
    }

    pub(crate) fn committed(&self, writes: usize, bytes: usize, took: std::time::Duration) {
        self.queued.fetch_sub(writes as i64, Ordering::Relaxed);
        let depth = self.queued_bytes.fetch_sub(bytes as i64, Ordering::Relaxed) - bytes as i64;
        if depth <= self.bound / 2 && !*self.gate.borrow() {
            self.gate
                .send_if_modified(|open| !std::mem::replace(open, true));
        }
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
