//! The durable store: sessions, event logs, pending requests and raw Codex lines in SQLite or Postgres, written in batches by one background task (see docs/STORE.md).

/// Runs `$body` with `$p` bound to the concrete pool of either backend (the SQL is shared).
macro_rules! on_pool {
    ($pool:expr, |$p:ident| $body:expr) => {
        match $pool {
            Pool::Sqlite($p) => $body,
            Pool::Postgres($p) => $body,
        }
    };
}

mod batch_sql;
mod deliveries;
mod error;
pub(crate) mod fence;
mod health;
mod lost;
mod open;
mod passkeys;
mod people;
mod postgres;
mod probe;
mod records;
mod retention;
mod spool;
mod sqlite;
mod sqlite_batch;
mod sso;
mod stats;
mod tables;
mod writer;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use sqlx::{PgPool, SqlitePool};
use tokio::sync::{mpsc, oneshot};

pub use deliveries::DeliveryRecord;
pub use error::StoreError;
pub use fence::{Diverged, Fence, Fenced};
pub use health::{StoreFault, StoreHealth};
pub use lost::{LossNote, LostEvents};
pub use passkeys::{CeremonyRecord, PasskeyRecord};
pub use people::{AuditFilter, AuditRecord, InviteRecord, TokenRecord, TokenUse, UserRecord};
pub(crate) use postgres::connect as connect_postgres;
pub use probe::{ProbeReport, SpoolReport, probe};
pub use records::*;
pub use retention::{PruneReport, Retention, RetentionStats, StoreSize};
pub use sso::{IdentityRecord, PendingSsoRecord};
pub use stats::StoreStats;
pub use tables::{AnswerLinkRecord, OutboxRecord, PushSubscriptionRecord, RuleRecord};

use writer::{Item, Op};

/// Tuning for [`Store::open_with`]; [`Store::open`] uses the defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreOptions {
    /// Raw Codex lines kept per session: readers get the newest this many; older ones are
    /// pruned with a batch once a session has gained an eighth of this since its last pruning
    /// (so up to 1⅛ × this are stored meanwhile). Default 5000.
    pub raw_lines_per_session: usize,
    /// Most queued writes committed in one transaction. Default 4096.
    pub max_batch: usize,
    /// How long the writer keeps collecting after a write arrives before it commits (unless
    /// the batch is full or someone flushes), so the many small bursts of one Codex turn (and
    /// of many sessions at once) cost one transaction instead of one each: every commit writes
    /// its pages to the WAL and wakes the connection's thread twice. Clients never wait for
    /// it (they read the live log; the spool covers a relay killed meanwhile). Default 50 ms.
    pub linger: std::time::Duration,
    /// Where queued writes are spooled before clients see them, so a relay killed before its
    /// writer committed them loses nothing (replayed on the next open). Default: `<file>.spool`
    /// beside a SQLite file; none for Postgres or in-memory SQLite unless set.
    pub spool: Option<std::path::PathBuf>,
    /// Most bytes (of JSON and text, approximately) queued and not yet committed; past it the
    /// store's gate ([`StoreStats::gate`]) closes and ingest from Codex waits. Default 8 MiB.
    pub max_queued_bytes: usize,
    /// Where the note of events a closing store had to give up goes when the spool directory
    /// cannot take it (or there is none). Default: `$XDG_STATE_HOME/codex-relay/lost`, else
    /// `~/.local/state/codex-relay/lost`.
    pub loss_notes: Option<std::path::PathBuf>,
    /// A deliberately slow store, for benchmarks and fault tests: each commit waits this long.
    #[doc(hidden)]
    pub commit_delay: std::time::Duration,
    /// What is kept and for how long; the default keeps everything.
    pub retention: Retention,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            raw_lines_per_session: 5000,
            max_batch: 4096,
            linger: std::time::Duration::from_millis(50),
            spool: None,
            max_queued_bytes: 8 << 20,
            loss_notes: None,
            commit_delay: std::time::Duration::ZERO,
            retention: Retention::default(),
        }
    }
}

/// The connection pool of one backend.
#[derive(Clone)]
pub(crate) enum Pool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

const SELECT_SESSIONS: &str = "SELECT id, thread_id, cwd, model, status, created_at, updated_at, turn_count, last_seq, meta FROM sessions ORDER BY updated_at DESC, id";
const SELECT_SESSION: &str = "SELECT id, thread_id, cwd, model, status, created_at, updated_at, turn_count, last_seq, meta FROM sessions WHERE id = $1";
const SELECT_EVENTS: &str = "SELECT session_id, seq, time, json FROM events WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3";
const SELECT_LAST_SEQ: &str = "SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = $1";
const SELECT_RAW: &str = "SELECT line FROM (SELECT id, line FROM raw_lines WHERE session_id = $1 ORDER BY id DESC LIMIT $2) AS newest ORDER BY id";
/// Indexed by `2 * by_session + unresolved_only`.
const SELECT_PENDING: [&str; 4] = [
    "SELECT id, session_id, kind, created_at, deadline, request, resolution FROM pending ORDER BY created_at, id",
    "SELECT id, session_id, kind, created_at, deadline, request, resolution FROM pending WHERE resolution IS NULL ORDER BY created_at, id",
    "SELECT id, session_id, kind, created_at, deadline, request, resolution FROM pending WHERE session_id = $1 ORDER BY created_at, id",
    "SELECT id, session_id, kind, created_at, deadline, request, resolution FROM pending WHERE session_id = $1 AND resolution IS NULL ORDER BY created_at, id",
];

/// The store. Cheap to clone; every clone shares one pool and one writer task.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    pool: Pool,
    ops: mpsc::UnboundedSender<Op>,
    /// Cuts the writer's linger short: rung after a flush or close is queued, or once a full
    /// batch is queued (other writes do not ring it, so a burst wakes the writer once).
    urgent: Arc<tokio::sync::Notify>,
    /// [`StoreOptions::max_batch`].
    max_batch: i64,
    spool: Option<Arc<spool::Spool>>,
    /// Set once a write was dropped because the store is closed (logged once).
    dropped_logged: AtomicBool,
    stats: Arc<StoreStats>,
    /// [`StoreOptions::raw_lines_per_session`]: readers see no more than this many.
    raw_keep: i64,
    /// Events this run's writer gave up (see [`Store::unstored_events`]).
    losses: Arc<std::sync::Mutex<lost::Losses>>,
    /// Where this store's loss note is kept (none for in-memory SQLite).
    notes: Option<lost::NotePlaces>,
    /// The note the last run left, until [`Store::forget_loss_note`].
    left_note: std::sync::Mutex<Option<LossNote>>,
    /// Events neither the spool nor the database holds yet; `at_risk_noted` says (without the
    /// lock) that there are some.
    at_risk: std::sync::Mutex<lost::AtRisk>,
    at_risk_noted: AtomicBool,
    /// Set when the relay is one instance of a cluster (Postgres only).
    fence: Arc<std::sync::OnceLock<Arc<Fence>>>,
    /// Told what each committed batch held (see [`Store::on_commit`]).
    committed: Arc<std::sync::OnceLock<fence::CommitHook>>,
    /// The background pruner's totals.
    retention: Arc<RetentionStats>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("backend", &self.backend())
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Opens (creating and migrating if needed) the store at `target`: a `postgres://` or
    /// `postgresql://` URL selects Postgres; a `sqlite:` URL or a plain file path selects SQLite
    /// (the file and its parent directories are created if missing; WAL mode).
    pub async fn open(target: &str) -> Result<Store, StoreError> {
        Store::open_with(target, StoreOptions::default()).await
    }

    /// [`Store::open`] with explicit [`StoreOptions`].
    pub async fn open_with(target: &str, options: StoreOptions) -> Result<Store, StoreError> {
        let pool = open::open(target).await?;
        let (ops, rx) = mpsc::unbounded_channel();
        let stats = Arc::new(StoreStats::new(options.max_queued_bytes));
        let spool_dir = options
            .spool
            .clone()
            .or_else(|| open::default_spool(target));
        let mut replay = Vec::new();
        let spool = match spool_dir {
            Some(dir) => match spool::Spool::open(&dir) {
                Ok(Some((spool, left))) => {
                    replay = left;
                    Some(Arc::new(spool))
                }
                Ok(None) => {
                    tracing::warn!(dir = %dir.display(), "another relay holds this spool; writes are not spooled");
                    None
                }
                Err(e) => {
                    tracing::warn!(dir = %dir.display(), "cannot open the spool; writes are not spooled: {e}");
                    None
                }
            },
            None => None,
        };
        let raw_keep = i64::try_from(options.raw_lines_per_session).unwrap_or(i64::MAX);
        let notes = lost::NotePlaces::new(
            target,
            spool.as_deref().map(spool::Spool::dir),
            options.loss_notes.clone(),
        );
        let left_note = notes.as_ref().and_then(lost::NotePlaces::read);
        let losses = Arc::default();
        let urgent = Arc::new(tokio::sync::Notify::new());
        let max_batch = i64::try_from(options.max_batch.max(1)).unwrap_or(i64::MAX);
        let fence: Arc<std::sync::OnceLock<Arc<Fence>>> = Arc::default();
        let committed: Arc<std::sync::OnceLock<fence::CommitHook>> = Arc::default();
        let retention = options.retention.clone();
        tokio::spawn(writer::run(
            pool.clone(),
            (rx, Arc::clone(&urgent)),
            options,
            stats.clone(),
            spool.clone(),
            Arc::clone(&losses),
            (Arc::clone(&fence), Arc::clone(&committed)),
        ));
        let store = Store {
            inner: Arc::new(Inner {
                pool,
                ops,
                urgent,
                max_batch,
                spool,
                dropped_logged: AtomicBool::new(false),
                stats,
                raw_keep,
                losses,
                notes,
                left_note: std::sync::Mutex::new(left_note),
                at_risk: Default::default(),
                at_risk_noted: AtomicBool::new(false),
                fence,
                committed,
                retention: Arc::default(),
            }),
        };
        if !replay.is_empty() {
            // Writes the last run queued but did not commit (it died in the linger window).
            tracing::info!(writes = replay.len(), "replaying spooled writes");
            for item in replay {
                store.send(Op::Write(item, None));
            }
            store.flush().await?;
        }
        store.start_retention(retention, Arc::clone(&store.inner.retention));
        Ok(store)
    }

    /// `"sqlite"` or `"postgres"`.
    pub fn backend(&self) -> &'static str {
        match self.inner.pool {
            Pool::Sqlite(_) => "sqlite",
            Pool::Postgres(_) => "postgres",
        }
    }

    /// Makes every later batch check `fence` and notify the cluster on commit (Postgres only;
    /// set once).
    pub fn set_fence(&self, fence: Arc<Fence>) {
        let _ = self.inner.fence.set(fence);
    }

    /// Calls `hook` after each batch commits, with each session of the batch and its last
    /// committed seq (set once; a cluster's sessions show readers only what is committed).
    pub(crate) fn on_commit(&self, hook: impl Fn(&[(String, u64)]) + Send + Sync + 'static) {
        let _ = self.inner.committed.set(Box::new(hook));
    }

    /// The fence, when this store belongs to one instance of a cluster.
    pub fn fence(&self) -> Option<&Arc<Fence>> {
        self.inner.fence.get()
    }

    /// The Postgres pool (for the cluster's own queries), when the backend is Postgres.
    pub fn postgres(&self) -> Option<&PgPool> {
        match &self.inner.pool {
            Pool::Postgres(p) => Some(p),
            Pool::Sqlite(_) => None,
        }
    }

    /// The writer's counters (queue depth, commit latency).
    pub fn stats(&self) -> &StoreStats {
        &self.inner.stats
    }

    /// The store at a glance: backend, writes held, whether Codex is paused, and the fault
    /// while the database cannot take writes.
    pub fn health(&self) -> StoreHealth {
        StoreHealth::of(self.backend(), &self.inner.stats)
    }

    /// Why the database cannot take writes right now (`None` while it can), as sessions show it.
    pub fn fault(&self) -> Option<StoreFault> {
        StoreFault::of(&self.inner.stats)
    }

    /// The counters, shared: for a task that must not keep the store itself alive.
    pub(crate) fn stats_handle(&self) -> Arc<StoreStats> {
        Arc::clone(&self.inner.stats)
    }

    /// Queues writes in order: spooled first (all of them with one `write(2)`), then sent to
    /// the writer. A write after close() is dropped, not spooled for the next run.
    fn enqueue(&self, items: Vec<Item>) {
        match &self.inner.spool {
            Some(spool) if !self.inner.ops.is_closed() => {
                match spool.append_all(items, |item| self.send(Op::Write(item, self.epoch()))) {
                    Some(refused) => self.note_at_risk(refused),
                    None if self.inner.at_risk_noted.load(Ordering::Relaxed) => {
                        self.settle_at_risk(spool)
                    }
                    None => {}
                }
            }
            _ => items
                .into_iter()
                .for_each(|item| self.send(Op::Write(item, self.epoch()))),
        }
    }

    /// The epoch a write queued now belongs to (in a cluster): it lands under that epoch or
    /// not at all, even if the instance joined again under another one before it committed.
    fn epoch(&self) -> Option<i64> {
        self.inner.fence.get().map(|f| f.epoch())
    }

    fn send(&self, op: Op) {
        // A full batch's worth queued: the writer stops lingering (writes alone never wake it).
        let full = matches!(&op, Op::Write(item, _)
            if self.inner.stats.enqueued(item.weight()) >= self.inner.max_batch);
        if self.inner.ops.send(op).is_err()
            && !self.inner.dropped_logged.swap(true, Ordering::Relaxed)
        {
            tracing::error!("the store is closed: writes after close() are dropped");
        }
        if full {
            self.inner.urgent.notify_one();
        }
    }

    /// Queues one event (never waits on the database). A second event with the same
    /// `(session_id, seq)` is ignored: the first one written wins.
    pub fn append_event(&self, ev: StoredEvent) {
        self.enqueue(vec![Item::Event(ev)]);
    }

    /// Queues events in order, spooled as one write (a burst of one session's log).
    pub fn append_events(&self, events: Vec<StoredEvent>) {
        self.enqueue(events.into_iter().map(Item::Event).collect());
    }

    /// Queues one raw Codex line; only the newest [`StoreOptions::raw_lines_per_session`] are kept.
    pub fn append_raw(&self, session_id: &str, line: &str) {
        self.enqueue(vec![Item::Raw {
            session_id: session_id.to_owned(),
            line: line.to_owned(),
        }]);
    }

    /// Queues an insert-or-replace of the session with this id.
    pub fn upsert_session(&self, rec: SessionRecord) {
        self.enqueue(vec![Item::Session(rec)]);
    }

    /// Queues an insert-or-replace of the pending request with this id.
    pub fn upsert_pending(&self, rec: PendingRecord) {
        self.enqueue(vec![Item::Pending(rec)]);
    }

    /// Barrier: resolves once everything queued before the call is committed. Returns the
    /// first write error the writer met since the last `flush()` (those writes are lost).
    pub async fn flush(&self) -> Result<(), StoreError> {
        let (tx, rx) = oneshot::channel();
        self.inner
            .ops
            .send(Op::Flush(tx))
            .map_err(|_| StoreError::Closed)?;
        self.inner.urgent.notify_one();
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// What the last run of this store gave up when it closed on a database that could not
    /// take writes: per session, the events clients were shown that are not in the log.
    /// Kept until [`Store::forget_loss_note`].
    pub fn loss_note(&self) -> Option<LossNote> {
        self.inner
            .left_note
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Deletes the last run's loss note, once the sessions' logs say what it said.
    pub fn forget_loss_note(&self) {
        let forgotten = self
            .inner
            .left_note
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if forgotten.is_some() {
            self.rewrite_note(&mut self.at_risk());
        }
    }

    fn at_risk(&self) -> std::sync::MutexGuard<'_, lost::AtRisk> {
        self.inner.at_risk.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The spool refused events: note them beside the store before clients see them.
    fn note_at_risk(&self, refused: spool::Refused) {
        let mut risk = self.at_risk();
        for (session, seq) in &refused.events {
            risk.losses.event(session, *seq);
        }
        risk.through = risk.through.max(refused.through);
        // The database's own error once the writer has met it; the spool's until then.
        risk.losses.fault = Some(
            self.inner
                .stats
                .fault()
                .map_or(refused.error, |f| f.to_string()),
        );
        self.inner.at_risk_noted.store(true, Ordering::Relaxed);
        self.rewrite_note(&mut risk);
    }

    /// Forgets the events at risk once the writer is past the last of them.
    fn settle_at_risk(&self, spool: &spool::Spool) {
        let mut risk = self.at_risk();
        if risk.losses.events() > 0 && spool.done_through(risk.through) {
            *risk = lost::AtRisk::default();
            self.inner.at_risk_noted.store(false, Ordering::Relaxed);
            self.rewrite_note(&mut risk);
        }
    }

    /// The note beside the store says what the last run left unforgotten and what this run
    /// holds at risk; with neither, there is none.
    fn rewrite_note(&self, risk: &mut lost::AtRisk) {
        let Some(notes) = &self.inner.notes else {
            return;
        };
        let left = self.loss_note();
        if left.is_none() && risk.losses.events() == 0 {
            notes.remove();
            return;
        }
        let mut note = risk.losses.note(notes.key());
        if let Some(left) = left {
            note.sessions.splice(0..0, left.sessions);
            if risk.losses.events() == 0 {
                note.fault = left.fault;
            }
        }
        if let Err(e) = notes.write(&note, false)
            && !std::mem::replace(&mut risk.unwritable, true)
        {
            tracing::error!(
                "events the spool refused are kept only in memory, and no note of them could be written: {e}"
            );
        }
    }

    /// Events this run gave up at [`Store::close`] because the database could not take them
    /// (and the spool does not hold them): they were shown, never stored.
    pub fn unstored_events(&self) -> usize {
        self.inner
            .losses
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .events()
    }

    /// Writes down what this run gave up (with what the last run's note still says), so the
    /// next open can tell the sessions.
    fn note_losses(&self) {
        let losses = self.inner.losses.lock().unwrap_or_else(|e| e.into_inner());
        if losses.events() == 0 {
            return;
        }
        let Some(notes) = &self.inner.notes else {
            return;
        };
        let mut note = losses.note(notes.key());
        if let Some(left) = self.loss_note() {
            note.sessions.splice(0..0, left.sessions);
        }
        match notes.write(&note, true) {
            Ok(place) => tracing::error!(events = losses.events(), note = %place.display(),
                "the store closed before the database took these events; they are lost, and the note says which"),
            Err(e) => tracing::error!(
                events = losses.events(),
                "the store closed before the database took these events; they are lost, and no note could be written: {e}"
            ),
        }
    }

    /// Lets another relay take this store's spool directory (after a flush, at shutdown).
    pub fn release_spool(&self) {
        if let Some(spool) = &self.inner.spool {
            spool.release();
        }
    }

    /// All sessions, most recently updated first.
    pub async fn sessions(&self) -> Result<Vec<SessionRecord>, StoreError> {
        on_pool!(&self.inner.pool, |p| sqlx::query_as(SELECT_SESSIONS)
            .fetch_all(p)
            .await)
        .map_err(StoreError::query("list sessions"))
    }

    /// One session by id.
    pub async fn session(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        on_pool!(&self.inner.pool, |p| sqlx::query_as(SELECT_SESSION)
            .bind(id)
            .fetch_optional(p)
            .await)
        .map_err(StoreError::query("read a session"))
    }

    /// Up to `limit` events of a session with `seq > after_seq`, ascending.
    pub async fn events(
        &self,
        session_id: &str,
        after_seq: i64,
        limit: i64,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        if limit <= 0 {
            return Ok(Vec::new());
        }
        on_pool!(&self.inner.pool, |p| {
            sqlx::query_as(SELECT_EVENTS)
                .bind(session_id)
                .bind(after_seq)
                .bind(limit)
                .fetch_all(p)
                .await
        })
        .map_err(StoreError::query("read events"))
    }

    /// The highest committed event seq of a session (0 when it has none).
    pub async fn last_seq(&self, session_id: &str) -> Result<i64, StoreError> {
        on_pool!(&self.inner.pool, |p| sqlx::query_scalar(SELECT_LAST_SEQ)
            .bind(session_id)
            .fetch_one(p)
            .await)
        .map_err(StoreError::query("read the last event seq"))
    }

    /// Pending requests, of one session or all, oldest first; optionally only unresolved ones.
    pub async fn pending(
        &self,
        session_id: Option<&str>,
        unresolved_only: bool,
    ) -> Result<Vec<PendingRecord>, StoreError> {
        let sql =
            SELECT_PENDING[usize::from(session_id.is_some()) * 2 + usize::from(unresolved_only)];
        on_pool!(&self.inner.pool, |p| {
            let query = sqlx::query_as(sql);
            match session_id {
                Some(id) => query.bind(id).fetch_all(p).await,
                None => query.fetch_all(p).await,
            }
        })
        .map_err(StoreError::query("read pending requests"))
    }

    /// The newest `limit` raw lines of a session, oldest first.
    pub async fn raw_lines(&self, session_id: &str, limit: i64) -> Result<Vec<String>, StoreError> {
        if limit <= 0 {
            return Ok(Vec::new());
        }
        // Pruning runs every so many lines, so more than the bound may be stored for a while.
        let limit = limit.min(self.inner.raw_keep);
        on_pool!(&self.inner.pool, |p| sqlx::query_scalar(SELECT_RAW)
            .bind(session_id)
            .bind(limit)
            .fetch_all(p)
            .await)
        .map_err(StoreError::query("read raw lines"))
    }

    /// Commits everything queued, stops the writer and closes the pool. Returns the last
    /// unreported write error, if any. Later writes are dropped (and logged once); later reads
    /// and flushes return [`StoreError::Closed`]. Closing twice is fine.
    pub async fn close(&self) -> Result<(), StoreError> {
        // A batch the database cannot take is given up now rather than retried forever.
        self.inner.stats.set_closing();
        let (tx, rx) = oneshot::channel();
        let result = match self.inner.ops.send(Op::Close(tx)) {
            Ok(()) => {
                self.inner.urgent.notify_one();
                rx.await.unwrap_or(Ok(()))
            }
            Err(_) => Ok(()),
        };
        // Bounded: closing waits for every connection still checked out.
        let closing = async { on_pool!(&self.inner.pool, |p| p.close().await) };
        if tokio::time::timeout(std::time::Duration::from_secs(3), closing)
            .await
            .is_err()
        {
            tracing::warn!("the store's connections were not all returned within 3 s of closing");
        }
        self.note_losses();
        if self.inner.at_risk_noted.swap(false, Ordering::Relaxed) {
            // The writer is done: what was at risk is committed, or given up and in the note
            // just written.
            let mut risk = self.at_risk();
            *risk = lost::AtRisk::default();
            if self.unstored_events() == 0 {
                self.rewrite_note(&mut risk);
            }
        }
        if let (Some(spool), Ok(())) = (&self.inner.spool, &result) {
            spool.release();
        }
        result
    }
}
