//! The background writer: drains queued writes and commits them in batches, one transaction per batch.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use sqlx::AssertSqlSafe;
use tokio::sync::{mpsc, oneshot};

use super::batch_sql::{Params, Statements, statements};
use super::fence::{self, Fence};
use super::lost::Losses;
use super::{
    PendingRecord, Pool, SessionRecord, StoreError, StoreOptions, StoredEvent, postgres, sqlite,
    sqlite_batch,
};

/// One queued write.
pub(crate) enum Item {
    Event(StoredEvent),
    Raw { session_id: String, line: String },
    Session(SessionRecord),
    Pending(PendingRecord),
}

impl Item {
    /// About how many bytes the write holds while queued (what the queue's bound counts).
    pub(crate) fn weight(&self) -> usize {
        64 + match self {
            Item::Event(e) => e.session_id.len() + e.json.len(),
            Item::Raw { session_id, line } => session_id.len() + line.len(),
            Item::Session(s) => s.id.len() + s.thread_id.len() + s.meta.len(),
            Item::Pending(p) => p.id.len() + p.session_id.len() + p.request.len(),
        }
    }
}

/// What the [`Store`](super::Store) sends the writer.
pub(crate) enum Op {
    /// A write, with the epoch of the cluster instance that queued it (`None` outside a
    /// cluster, or before the store joined one): a batch holds writes of one epoch, and
    /// commits only while the instance is live at it.
    Write(Item, Option<i64>),
    /// Answer once everything queued before it is committed.
    Flush(oneshot::Sender<Result<(), StoreError>>),
    /// Commit what is queued, answer, and stop.
    Close(oneshot::Sender<Result<(), StoreError>>),
}

/// First delay before retrying a batch the database could not take for now; it doubles up to
/// [`RETRY_MAX`], and retries go on until the database takes it (or the store closes).
const RETRY_FIRST: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(5);
/// How long the writer waits for a connection before it counts the database as unreachable
/// (the pool itself would keep retrying a refused connection for its whole acquire timeout).
const ACQUIRE_WAIT: Duration = Duration::from_secs(5);
/// The same wait for the last attempt of a store that is closing on a failing database.
const ACQUIRE_WAIT_CLOSING: Duration = Duration::from_secs(1);
/// Most extra transactions spent isolating the bad writes of a batch the database refused.
const ISOLATION_BUDGET: usize = 64;

/// Multi-row upserts (up to [`MAX_UPSERT_ROWS`] rows each); both backends take this SQL.
pub(super) const SESSION_HEAD: &str = "INSERT INTO sessions (id, thread_id, cwd, model, status, created_at, updated_at, turn_count, last_seq, meta) VALUES ";
pub(super) const SESSION_TAIL: &str = " ON CONFLICT (id) DO UPDATE SET \
     thread_id = excluded.thread_id, cwd = excluded.cwd, model = excluded.model, status = excluded.status, \
     created_at = excluded.created_at, updated_at = excluded.updated_at, turn_count = excluded.turn_count, \
     last_seq = excluded.last_seq, meta = excluded.meta";
pub(super) const PENDING_HEAD: &str =
    "INSERT INTO pending (id, session_id, kind, created_at, deadline, request, resolution) VALUES ";
pub(super) const PENDING_TAIL: &str = " ON CONFLICT (id) DO UPDATE SET \
     session_id = excluded.session_id, kind = excluded.kind, created_at = excluded.created_at, \
     deadline = excluded.deadline, request = excluded.request, resolution = excluded.resolution";
/// Most rows in one upsert statement: every write of a batch to the sessions or pending table
/// is one round trip to the database, not one per row.
const MAX_UPSERT_ROWS: usize = 64;
/// Deletes all but the newest `$2` raw lines of session `$1`.
pub(super) const PRUNE_RAW: &str = "DELETE FROM raw_lines WHERE session_id = $1 AND id <= \
     (SELECT id FROM raw_lines WHERE session_id = $1 ORDER BY id DESC LIMIT 1 OFFSET $2)";

/// A batch sorted by table. Sessions and pending requests keep only the last write per id
/// (they are replaced whole, so that is what committing them in order would leave).
pub(super) struct Grouped<'a> {
    pub events: Vec<&'a StoredEvent>,
    pub raw: Vec<(&'a str, &'a str)>,
    pub sessions: Vec<&'a SessionRecord>,
    pub pending: Vec<&'a PendingRecord>,
}

impl<'a> Grouped<'a> {
    fn new(items: &'a [Item]) -> Self {
        let mut g = Grouped {
            events: Vec::new(),
            raw: Vec::new(),
            sessions: Vec::new(),
            pending: Vec::new(),
        };
        let mut session_at: HashMap<&str, usize> = HashMap::new();
        let mut pending_at: HashMap<&str, usize> = HashMap::new();
        for item in items {
            match item {
                Item::Event(ev) => g.events.push(ev),
                Item::Raw { session_id, line } => g.raw.push((session_id, line)),
                Item::Session(rec) => last_wins(&mut g.sessions, &mut session_at, &rec.id, rec),
                Item::Pending(rec) => last_wins(&mut g.pending, &mut pending_at, &rec.id, rec),
            }
        }
        g
    }
}

fn last_wins<'a, T>(
    slots: &mut Vec<&'a T>,
    index: &mut HashMap<&'a str, usize>,
    id: &'a str,
    rec: &'a T,
) {
    match index.get(id) {
        Some(&at) => slots[at] = rec,
        None => {
            index.insert(id, slots.len());
            slots.push(rec);
        }
    }
}

/// The statements both backends share (their SQL is the same), run on `$conn`: the sessions
/// and pending upserts in multi-row statements, then the raw-line pruning that is due.
macro_rules! shared_writes {
    ($conn:expr, $g:expr, $prune:expr, $keep:expr) => {{
        static SESSIONS: OnceLock<Statements> = OnceLock::new();
        static PENDING: OnceLock<Statements> = OnceLock::new();
        let sql = SESSIONS.get_or_init(|| {
            statements(
                SESSION_HEAD,
                10,
                SESSION_TAIL,
                MAX_UPSERT_ROWS,
                Params::Numbered,
            )
        });
        let mut rest = &$g.sessions[..];
        while !rest.is_empty() {
            let (rows, text) = sql.pick(rest.len());
            let (chunk, tail) = rest.split_at(rows);
            let mut query = sqlx::query(AssertSqlSafe(text));
            for s in chunk {
                query = query
                    .bind(s.id.as_str())
                    .bind(s.thread_id.as_str())
                    .bind(s.cwd.as_deref())
                    .bind(s.model.as_deref())
                    .bind(s.status.as_str())
                    .bind(s.created_at)
                    .bind(s.updated_at)
                    .bind(s.turn_count)
                    .bind(s.last_seq)
                    .bind(s.meta.as_str());
            }
            query.execute(&mut *$conn).await?;
            rest = tail;
        }
        let sql = PENDING.get_or_init(|| {
            statements(
                PENDING_HEAD,
                7,
                PENDING_TAIL,
                MAX_UPSERT_ROWS,
                Params::Numbered,
            )
        });
        let mut rest = &$g.pending[..];
        while !rest.is_empty() {
            let (rows, text) = sql.pick(rest.len());
            let (chunk, tail) = rest.split_at(rows);
            let mut query = sqlx::query(AssertSqlSafe(text));
            for p in chunk {
                query = query
                    .bind(p.id.as_str())
                    .bind(p.session_id.as_str())
                    .bind(p.kind.as_str())
                    .bind(p.created_at)
                    .bind(p.deadline)
                    .bind(p.request.as_str())
                    .bind(p.resolution.as_deref());
            }
            query.execute(&mut *$conn).await?;
            rest = tail;
        }
        for session_id in $prune {
            sqlx::query(PRUNE_RAW)
                .bind(session_id.as_str())
                .bind($keep)
                .execute(&mut *$conn)
                .await?;
        }
    }};
}

/// The writer's own SQLite connection, kept from one batch to the next. A pool hands its idle
/// connections out in turn, and a SQLite connection that finds another one's commit in the
/// WAL drops its page cache and reads the pages again: with one connection for every batch
/// the cache and the prepared statements stay warm (readers use the pool's others). A local
/// file does not go stale; a Postgres connection does (a server restart ends it), so Postgres
/// batches take a connection the pool has checked, as before.
#[derive(Default)]
pub(super) struct Held {
    sqlite: Option<sqlx::pool::PoolConnection<sqlx::Sqlite>>,
}

/// Commits `items` in one transaction, on the writer's held connection (taken from the pool
/// when there is none). A connection a failed transaction went through is
/// closed, not returned to the pool: after a disk-full or I/O error its rollback may not have
/// happened, and the next batch on it would only nest a savepoint in the dead transaction
/// (and be lost with it).
async fn commit(
    pool: &Pool,
    held: &mut Held,
    items: &[Item],
    prune: &[String],
    keep: i64,
    acquire_wait: Duration,
    fence: Option<(&Fence, i64)>,
) -> Result<(), sqlx::Error> {
    let g = Grouped::new(items);
    macro_rules! on {
        ($pool:expr, $slot:expr, |$conn:ident| $write:expr) => {{
            let mut conn = match $slot.take() {
                Some(conn) => conn,
                None => tokio::time::timeout(acquire_wait, $pool.acquire())
                    .await
                    .map_err(|_| sqlx::Error::PoolTimedOut)??,
            };
            let result = {
                let $conn = &mut *conn;
                $write.await
            };
            if result.is_err() {
                let _ = sqlx::Connection::close(conn.detach()).await;
            } else {
                $slot = Some(conn);
            }
            result
        }};
    }
    macro_rules! per_table {
        ($conn:expr, $backend:ident) => {
            async {
                let mut tx = sqlx::Connection::begin($conn).await?;
                $backend::insert_events(&mut tx, &g.events).await?;
                $backend::insert_raw(&mut tx, &g.raw).await?;
                shared_writes!(tx, g, prune, keep);
                tx.commit().await
            }
        };
    }
    // One instance of a cluster: the batch lands only while the instance holds its lease, and
    // the others hear of it on commit.
    macro_rules! fenced {
        ($conn:expr, $fence:expr, $epoch:expr) => {
            async {
                let mut tx = sqlx::Connection::begin($conn).await?;
                fence::check(&mut tx, $fence, $epoch).await?;
                fence::insert_events(&mut tx, &g.events).await?;
                postgres::insert_raw(&mut tx, &g.raw).await?;
                shared_writes!(tx, g, prune, keep);
                fence::notify(&mut tx, $fence, &g.events).await?;
                tx.commit().await
            }
        };
    }
    match pool {
        Pool::Sqlite(pool) if items.len() <= sqlite_batch::MAX_WRITES => {
            on!(pool, held.sqlite, |conn| sqlite_batch::write_batch(
                conn, &g, prune, keep
            ))
        }
        Pool::Sqlite(pool) => on!(pool, held.sqlite, |conn| per_table!(conn, sqlite)),
        Pool::Postgres(pool) => {
            let mut checked = None;
            let result = match fence {
                Some((fence, epoch)) => on!(pool, checked, |conn| fenced!(conn, fence, epoch)),
                None => on!(pool, checked, |conn| per_table!(conn, postgres)),
            };
            // Back to the pool after the batch.
            drop(checked);
            result
        }
    }
}

/// A transient error as the fault reports it.
async fn describe(e: &sqlx::Error, pool: &Pool) -> String {
    match e {
        sqlx::Error::PoolTimedOut => format!("{e} ({})", why_no_connection(pool).await),
        _ => e.to_string(),
    }
}

/// Why the pool has no connection to give: it only says that it timed out, so one direct
/// connection attempt names the reason (refused, unknown host, ...).
async fn why_no_connection(pool: &Pool) -> String {
    use sqlx::{ConnectOptions, Connection};
    let attempt = async {
        match pool {
            Pool::Sqlite(p) => p.connect_options().connect().await?.close().await,
            Pool::Postgres(p) => p.connect_options().connect().await?.close().await,
        }
    };
    match tokio::time::timeout(ACQUIRE_WAIT, attempt).await {
        Ok(Ok(())) => "a direct connection works: the pool's connections are all busy".into(),
        Ok(Err(e)) => format!("connecting: {e}"),
        Err(_) => format!("connecting: no answer within {ACQUIRE_WAIT:?}"),
    }
}

/// The database cannot take writes for now (unreachable, restarting, disk full, read-only,
/// locked), so the batch is kept and retried, as opposed to the database refusing the data.
pub(crate) fn is_transient(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => {
            let code = db.code().unwrap_or_default();
            match code.parse::<i32>() {
                // SQLite (primary code in the low byte): BUSY, LOCKED, READONLY, IOERR, FULL,
                // CANTOPEN.
                Ok(n) => matches!(n & 0xff, 5 | 6 | 8 | 10 | 13 | 14),
                // Postgres SQLSTATE: connection exceptions, insufficient resources (disk
                // full), operator intervention (shutdown, cannot connect now), read-only
                // transaction, serialization failure and deadlock.
                Err(_) => {
                    code.starts_with("08")
                        || code.starts_with("53")
                        || code.starts_with("57P")
                        || code == "25006"
                        || code == "40001"
                        || code == "40P01"
                }
            }
        }
        _ => false,
    }
}

/// Commits a batch. While the database cannot take it for now, retries with backoff and
/// reports the fault in `stats` (until the store is closing: then the batch is given up).
/// When the database refuses it, commits it again in ever smaller parts, in order, so only the
/// refused writes are lost. On failure returns how many writes were lost and the first error
/// ([`Failed::GaveUp`]: the whole batch, the database could not take it while closing).
async fn commit_batch(
    pool: &Pool,
    held: &mut Held,
    items: &[Item],
    prune: &[String],
    keep: i64,
    stats: &super::StoreStats,
    fence: Option<(&Fence, i64)>,
) -> Result<(), Failed> {
    let mut delay = RETRY_FIRST;
    let error = loop {
        let wait = if stats.closing() && stats.fault().is_some() {
            ACQUIRE_WAIT_CLOSING
        } else {
            ACQUIRE_WAIT
        };
        match commit(pool, held, items, prune, keep, wait, fence).await {
            Ok(()) => {
                stats.set_fault(None);
                return Ok(());
            }
            Err(e) if fence::is_fenced(&e) => {
                stats.set_fault(None);
                return Err(Failed::Fenced(items.len()));
            }
            Err(e) if is_transient(&e) && !stats.closing() => {
                let why = describe(&e, pool).await;
                if stats.fault().is_none() {
                    tracing::error!(error = %why, writes = items.len(),
                        "the store cannot take writes; keeping them and retrying");
                }
                stats.set_fault(Some(why));
                stats.retry_pause(delay).await;
                delay = (delay * 2).min(RETRY_MAX);
            }
            Err(e) => break e,
        }
    };
    if is_transient(&error) {
        return Err(Failed::GaveUp(error));
    }
    if items.len() == 1 {
        return Err(Failed::Refused(1, error));
    }
    tracing::warn!(error = %error, writes = items.len(), "store batch refused; committing it in parts");
    let mut budget = ISOLATION_BUDGET;
    let mut lost = 0;
    let mut first_error = None;
    // Slices still to commit, next one on top; `false` = not tried on its own yet.
    let mut stack: Vec<(&[Item], bool)> = vec![(items, true)];
    while let Some((slice, tried)) = stack.pop() {
        if !tried {
            if budget == 0 {
                lost += slice.len();
                continue;
            }
            budget -= 1;
            match commit(pool, held, slice, &[], keep, ACQUIRE_WAIT, fence).await {
                Ok(()) => continue,
                Err(e) if fence::is_fenced(&e) => {
                    lost += slice.len();
                    budget = 0;
                    first_error.get_or_insert(e);
                    continue;
                }
                Err(e) => {
                    if is_transient(&e) {
                        budget = 0;
                    }
                    first_error.get_or_insert(e);
                    if slice.len() == 1 || budget == 0 {
                        lost += slice.len();
                        continue;
                    }
                }
            }
        }
        let (left, right) = slice.split_at(slice.len() / 2);
        stack.push((right, false));
        stack.push((left, false));
    }
    match (lost, first_error) {
        (0, _) => Ok(()),
        (lost, e) => Err(Failed::Refused(lost, e.unwrap_or(error))),
    }
}

/// Which sessions' raw lines to prune with a batch: each session once it has gained an eighth
/// of its bound since it was last pruned (every batch for bounds under 8), so a busy session
/// costs one DELETE per many batches, and it holds at most 1⅛ × the bound meanwhile (readers
/// see only the newest `raw_lines_per_session`).
struct Pruning {
    every: usize,
    since: HashMap<String, usize>,
}

impl Pruning {
    fn new(keep: usize) -> Self {
        Pruning {
            every: (keep / 8).max(1),
            since: HashMap::new(),
        }
    }

    /// Counts the batch's raw rows and returns the sessions due for pruning.
    fn due(&mut self, items: &[Item]) -> Vec<String> {
        for item in items {
            if let Item::Raw { session_id, .. } = item {
                // A session's id is copied once, not with every chunk.
                match self.since.get_mut(session_id.as_str()) {
                    Some(n) => *n += 1,
                    None => {
                        self.since.insert(session_id.clone(), 1);
                    }
                }
            }
        }
        // Sessions a failed batch left due are due again.
        self.since
            .iter()
            .filter(|(_, n)| **n >= self.every)
            .map(|(s, _)| s.clone())
            .collect()
    }

    fn pruned(&mut self, sessions: &[String]) {
        for s in sessions {
            self.since.remove(s);
        }
    }
}

/// Why a batch did not (wholly) commit.
enum Failed {
    /// The database could not take it and the store is closing: every write of it is given up.
    GaveUp(sqlx::Error),
    /// The database refused this many of its writes (the rest committed).
    Refused(usize, sqlx::Error),
    /// The instance lost its lease: this many writes belong to sessions another instance
    /// runs now, and are dropped.
    Fenced(usize),
}

/// Gives up a batch the database could not take while the store closes: writes the spool
/// holds are kept there (the spool is not advanced past the first of them), the events it
/// does not hold are noted in `losses`. Returns how many writes are lost for good. `first` is
/// the spool number of `items[0]`.
fn give_up(
    items: &[Item],
    first: u64,
    spool: Option<&super::spool::Spool>,
    spool_hold: &mut Option<u64>,
    losses: &std::sync::Mutex<Losses>,
) -> usize {
    let mut lost = 0;
    let mut losses = losses.lock().unwrap_or_else(|e| e.into_inner());
    for (number, item) in (first..).zip(items) {
        let held = matches!(item, Item::Event(_) | Item::Session(_) | Item::Pending(_))
            && spool.is_some_and(|s| s.holds(number));
        if held {
            spool_hold.get_or_insert(number - 1);
            continue;
        }
        lost += 1;
        if let Item::Event(ev) = item {
            losses.event(&ev.session_id, ev.seq);
        }
    }
    lost
}

/// Adds a failure to the error the next `flush()` returns (the first error is kept).
fn record_failure(unreported: &mut Option<StoreError>, lost_now: usize, error: sqlx::Error) {
    tracing::error!(error = %error, lost = lost_now, "store write failed: writes were not committed");
    match unreported {
        Some(StoreError::Write { lost, .. }) => *lost += lost_now,
        _ => {
            *unreported = Some(StoreError::Write {
                lost: lost_now,
                source: Arc::new(error),
            })
        }
    }
}

/// The writer task: runs until every `Store` clone is dropped or `close()` is called.
pub(crate) async fn run(
    pool: Pool,
    (mut rx, urgent): (mpsc::UnboundedReceiver<Op>, Arc<tokio::sync::Notify>),
    options: StoreOptions,
    stats: std::sync::Arc<super::StoreStats>,
    spool: Option<Arc<super::spool::Spool>>,
    losses: Arc<std::sync::Mutex<Losses>>,
    (fence, committed): (Arc<OnceLock<Arc<Fence>>>, Arc<OnceLock<fence::CommitHook>>),
) {
    // Writes received so far, in the order the spool numbered them.
    let mut received: u64 = 0;
    // Writes up to this number are committed or lost; later ones given up stay in the spool
    // for the next open to replay.
    let mut spool_hold: Option<u64> = None;
    // Why the database could not take a batch while the store was closing.
    let mut given_up: Option<String> = None;
    let cap = options.max_batch.max(1);
    let keep = i64::try_from(options.raw_lines_per_session).unwrap_or(i64::MAX);
    let mut unreported: Option<StoreError> = None;
    let mut pruning = Pruning::new(options.raw_lines_per_session);
    let mut items: Vec<Item> = Vec::new();
    let mut flush_waiters = Vec::new();
    let mut close_waiters = Vec::new();
    let mut held = Held::default();
    // The epoch of the writes in `items` (they all have one), and a write of another epoch
    // that ended the batch: it starts the next one.
    let mut epoch: Option<i64> = None;
    let mut carried: Option<Op> = None;
    loop {
        let op = match carried.take() {
            Some(op) => op,
            None => match rx.recv().await {
                Some(op) => op,
                None => break,
            },
        };
        let linger_until = tokio::time::Instant::now() + options.linger;
        let mut next = Some(op);
        loop {
            while let Some(op) = next.take() {
                match op {
                    Op::Write(item, of) if !items.is_empty() && of != epoch => {
                        carried = Some(Op::Write(item, of));
                        break;
                    }
                    Op::Write(item, of) => {
                        received += 1;
                        epoch = of;
                        items.push(item);
                    }
                    Op::Flush(tx) => flush_waiters.push(tx),
                    Op::Close(tx) => {
                        close_waiters.push(tx);
                        // Refuse new writes; what is already queued is still drained below.
                        rx.close();
                    }
                }
                if items.len() < cap {
                    next = rx.try_recv().ok();
                }
            }
            if carried.is_some() {
                break;
            }
            // Nothing more queued yet: wait a little for the rest of the burst, unless the batch
            // is full or someone waits for it. The wait is a sleep, not a receive, so writes
            // arriving meanwhile do not wake the writer one by one; a flush, a close or a full
            // batch's worth of queued writes rings `urgent` and cuts it short.
            if items.len() >= cap || !flush_waiters.is_empty() || !close_waiters.is_empty() {
                break;
            }
            if tokio::time::Instant::now() >= linger_until {
                break;
            }
            tokio::select! {
                () = tokio::time::sleep_until(linger_until) => {}
                () = urgent.notified() => {}
            }
            next = rx.try_recv().ok();
        }
        if !items.is_empty() {
            let started = std::time::Instant::now();
            if !options.commit_delay.is_zero() {
                tokio::time::sleep(options.commit_delay).await;
            }
            let prune = pruning.due(&items);
            let result = match &given_up {
                // Closing on a database that just failed: the rest is not tried again.
                Some(why) => Err(Failed::GaveUp(sqlx::Error::Protocol(why.clone()))),
                None => {
                    // Writes queued before the store joined the cluster belong to its epoch.
                    let fence = fence
                        .get()
                        .map(|f| (f.as_ref(), epoch.unwrap_or_else(|| f.epoch())));
                    commit_batch(&pool, &mut held, &items, &prune, keep, &stats, fence).await
                }
            };
            match result {
                Ok(()) => {
                    pruning.pruned(&prune);
                    fence::tell_committed(&committed, &items);
                }
                Err(Failed::Fenced(dropped)) => {
                    if let Some(fence) = fence.get() {
                        if fence.dropped() == 0 {
                            tracing::error!(instance = %fence.instance, writes = dropped,
                                "this instance lost its lease: another instance runs its sessions now, so its writes are dropped");
                        }
                        fence.count_dropped(dropped);
                    }
                }
                Err(Failed::Refused(lost, error)) => record_failure(&mut unreported, lost, error),
                Err(Failed::GaveUp(error)) => {
                    let first = received - items.len() as u64 + 1;
                    let lost = give_up(&items, first, spool.as_deref(), &mut spool_hold, &losses);
                    let why = match given_up.clone().or_else(|| stats.fault()) {
                        Some(why) => why,
                        None => describe(&error, &pool).await,
                    };
                    given_up = Some(why.clone());
                    losses.lock().unwrap_or_else(|e| e.into_inner()).fault = Some(why);
                    if lost > 0 {
                        record_failure(&mut unreported, lost, error);
                    } else {
                        tracing::warn!(error = %error, writes = items.len(),
                            "the store closed before the database took these writes; the spool keeps them for the next open");
                    }
                }
            }
            let bytes = items.iter().map(Item::weight).sum();
            stats.committed(items.len(), bytes, started.elapsed());
            tracing::trace!(writes = items.len(), elapsed = ?started.elapsed(), "store batch committed");
            items.clear();
            if let Some(spool) = &spool {
                spool.committed(spool_hold.map_or(received, |hold| hold.min(received)));
            }
        }
        if !flush_waiters.is_empty() {
            let result = unreported.take().map_or(Ok(()), Err);
            for waiter in flush_waiters.drain(..) {
                let _ = waiter.send(result.clone());
            }
        }
    }
    // Back to the pool before anyone is told the store closed (closing the pool waits for it).
    drop(held);
    let result = unreported.take().map_or(Ok(()), Err);
    if let Err(e) = &result
        && close_waiters.is_empty()
    {
        tracing::error!(error = %e, "store writer stopped with an unreported write error");
    }
    for waiter in close_waiters {
        let _ = waiter.send(result.clone());
    }
}
