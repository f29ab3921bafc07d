//! Fencing and commit notices for a relay that is one instance of several on one Postgres:
//! every batch first checks, under a share lock on its instance's row, that the instance still
//! holds its lease at its epoch (a takeover waits for that lock, so a batch either lands before
//! the takeover or not at all), and tells the other instances on commit which sessions gained
//! events (`pg_notify`, delivered only if the transaction commits), and this instance's
//! sessions how far the store committed them (they show readers only that). An event whose
//! seq the stored log gives another event fails its batch rather than being taken for stored.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

use sqlx::PgConnection;

use super::StoredEvent;

/// What ties this store's writes to one instance of a cluster.
#[derive(Debug)]
pub struct Fence {
    /// The notification channel of this cluster (one per database schema).
    pub channel: String,
    /// This instance's id.
    pub instance: String,
    epoch: AtomicI64,
    lost: AtomicBool,
    dropped: AtomicU64,
    lost_notice: tokio::sync::Notify,
}

/// The error a batch gets once its instance no longer holds its lease.
#[derive(Debug, thiserror::Error)]
#[error("this instance no longer holds its lease (another instance took over its sessions)")]
pub struct Fenced;

impl Fence {
    pub fn new(channel: String, instance: String, epoch: i64) -> Self {
        Self {
            channel,
            instance,
            epoch: AtomicI64::new(epoch),
            lost: AtomicBool::new(false),
            dropped: AtomicU64::new(0),
            lost_notice: tokio::sync::Notify::new(),
        }
    }

    pub fn epoch(&self) -> i64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// The instance registered again under a new epoch: its writes are taken again.
    pub fn renew(&self, epoch: i64) {
        self.epoch.store(epoch, Ordering::SeqCst);
        self.lost.store(false, Ordering::SeqCst);
    }

    /// Writes are refused from now on (a batch met a takeover, or the lease renewal failed).
    pub fn mark_lost(&self) {
        if !self.lost.swap(true, Ordering::SeqCst) {
            self.lost_notice.notify_waiters();
        }
    }

    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// Resolves once the fence is lost.
    pub async fn lost(&self) {
        loop {
            let notified = self.lost_notice.notified();
            if self.is_lost() {
                return;
            }
            notified.await;
        }
    }

    /// Writes dropped because the instance had lost its lease.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    pub(crate) fn count_dropped(&self, n: usize) {
        self.dropped.fetch_add(n as u64, Ordering::Relaxed);
    }
}

/// Told, after each batch commits, each session of the batch with its last committed seq.
pub(crate) type CommitHook = Box<dyn Fn(&[(String, u64)]) + Send + Sync>;

/// Tells `hook` (when set) how far the committed `items` took each session.
pub(crate) fn tell_committed(
    hook: &std::sync::OnceLock<CommitHook>,
    items: &[super::writer::Item],
) {
    let Some(hook) = hook.get() else { return };
    let mut last: BTreeMap<&str, u64> = BTreeMap::new();
    for item in items {
        if let super::writer::Item::Event(e) = item {
            let seq = last.entry(e.session_id.as_str()).or_default();
            *seq = (*seq).max(e.seq.max(0) as u64);
        }
    }
    if !last.is_empty() {
        let committed: Vec<(String, u64)> =
            last.into_iter().map(|(s, q)| (s.to_owned(), q)).collect();
        hook(&committed);
    }
}

/// The error a batch gets when the stored log of a session has another event under a seq it
/// writes: what this instance holds is not that session's log, and must not be taken for
/// committed (shown to readers, or acknowledged to a client).
#[derive(Debug, thiserror::Error)]
#[error(
    "the stored log of session {session} has another event at seq {seq} (committed by another instance, or an earlier epoch of this one): this instance's event is not stored"
)]
pub struct Diverged {
    pub session: String,
    pub seq: i64,
}

/// Inserts a fenced batch's events. An event already stored as it is (a batch retried after
/// its commit went through unseen) is no fault; another event under its seq is [`Diverged`]
/// (`ON CONFLICT DO NOTHING` alone would let the batch commit as if it were stored).
pub(crate) async fn insert_events(
    conn: &mut PgConnection,
    events: &[&StoredEvent],
) -> Result<(), sqlx::Error> {
    let inserted = super::postgres::insert_events(conn, events).await?;
    if inserted == events.len() as u64 {
        return Ok(());
    }
    let sessions: Vec<&str> = events.iter().map(|e| e.session_id.as_str()).collect();
    let seqs: Vec<i64> = events.iter().map(|e| e.seq).collect();
    let jsons: Vec<&str> = events.iter().map(|e| e.json.as_str()).collect();
    let other: Option<(String, i64)> = sqlx::query_as(
        "SELECT e.session_id, e.seq FROM events e \
         JOIN UNNEST($1::text[], $2::int8[], $3::text[]) AS t(s, q, j) \
           ON e.session_id = t.s AND e.seq = t.q \
         WHERE e.json <> t.j ORDER BY e.session_id, e.seq LIMIT 1",
    )
    .bind(sessions)
    .bind(seqs)
    .bind(jsons)
    .fetch_optional(&mut *conn)
    .await?;
    match other {
        Some((session, seq)) => Err(sqlx::Error::Configuration(Box::new(Diverged {
            session,
            seq,
        }))),
        None => Ok(()),
    }
}

/// Whether a write error is the fence refusing the batch.
pub(crate) fn is_fenced(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Configuration(inner) if inner.is::<Fenced>())
}

/// The first statement of a batch: the instance must still be live at `epoch`, the one its
/// writes were queued under (a batch kept through a Postgres outage must not land under the
/// epoch the instance joined again with: by then another log of its sessions may have been
/// written after what was committed). The share lock holds off a takeover until the batch
/// commits.
pub(crate) async fn check(
    conn: &mut PgConnection,
    fence: &Fence,
    epoch: i64,
) -> Result<(), sqlx::Error> {
    if fence.is_lost() || fence.epoch() != epoch {
        return Err(sqlx::Error::Configuration(Box::new(Fenced)));
    }
    let live: Option<i64> = sqlx::query_scalar(
        "SELECT epoch FROM relay_instances WHERE id = $1 AND epoch = $2 AND state = 'live' FOR SHARE",
    )
    .bind(&fence.instance)
    .bind(epoch)
    .fetch_optional(&mut *conn)
    .await?;
    if live.is_none() {
        fence.mark_lost();
        return Err(sqlx::Error::Configuration(Box::new(Fenced)));
    }
    Ok(())
}

/// One notice per session of the batch, naming its newest event: `e <seq> <session id>`.
pub(crate) async fn notify(
    conn: &mut PgConnection,
    fence: &Fence,
    events: &[&StoredEvent],
) -> Result<(), sqlx::Error> {
    let mut newest: BTreeMap<&str, i64> = BTreeMap::new();
    for e in events {
        let seq = newest.entry(e.session_id.as_str()).or_insert(e.seq);
        *seq = (*seq).max(e.seq);
    }
    if newest.is_empty() {
        return Ok(());
    }
    let payloads: Vec<String> = newest
        .iter()
        .map(|(session, seq)| format!("e {seq} {session}"))
        .collect();
    sqlx::query("SELECT pg_notify($1, p) FROM UNNEST($2::text[]) AS t(p)")
        .bind(&fence.channel)
        .bind(payloads)
        .execute(&mut *conn)
        .await?;
    Ok(())
}
