//! Retention: events, raw lines, resolved requests, sent notifications, spent answer links and
//! (by their own age only) audit entries older than a configured age (or past a size) deleted in small batches by a background task
//! that never holds the database for long, so the writer keeps its pace (docs/STORE.md).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::{Pool, Store, StoreError};

/// What the store keeps, and how the pruner works through the rest. The default keeps
/// everything (nothing is deleted unless asked for).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retention {
    /// Rows older than this are deleted (events by their time, requests by when they were
    /// opened, notifications by when they were done, sessions by their last update).
    pub max_age: Option<Duration>,
    /// Past this many bytes of data (see [`StoreSize::used`]), the oldest events go (and with
    /// them the other rows as old as they are) until the store is at 90 % of it.
    pub max_bytes: Option<u64>,
    /// Notifications (outbox rows done with, and their delivery trails) older than this are
    /// deleted even when [`Retention::max_age`] keeps everything else longer (or forever);
    /// the sooner of the two applies to them. `serve` sets it from the notify file
    /// (`retention`, default 30 days).
    pub notifications_max_age: Option<Duration>,
    /// Audit log entries older than this are deleted. Only this age applies to them: neither
    /// [`Retention::max_age`] nor [`Retention::max_bytes`] touches the audit log (a record of
    /// who did what is often kept longer than the sessions it names). `None`: kept for good.
    pub audit_max_age: Option<Duration>,
    /// How often a pass runs (the first one a minute after the store opens).
    pub every: Duration,
    /// Most rows one statement deletes: each is a short transaction of its own.
    pub batch: usize,
    /// The least pause between two statements, so the writer's commits are never queued
    /// behind a run of deletes; it is three times what the last statement took when that is
    /// longer (the pruner holds the database at most a quarter of the time).
    pub pause: Duration,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            max_age: None,
            max_bytes: None,
            notifications_max_age: None,
            audit_max_age: None,
            every: Duration::from_secs(600),
            batch: 1000,
            pause: Duration::from_millis(20),
        }
    }
}

impl Retention {
    /// Whether anything is ever deleted.
    pub fn enabled(&self) -> bool {
        self.max_age.is_some()
            || self.max_bytes.is_some()
            || self.notifications_max_age.is_some()
            || self.audit_max_age.is_some()
    }

    /// An age as the flags and the environment give it: a whole number and a unit, `s`, `m`,
    /// `h`, `d` or `w` (`30d`, `12h`); `off` (or `0`) keeps everything.
    pub fn parse_age(text: &str) -> Result<Option<Duration>, String> {
        const HINT: &str = "give an age like 30d, 12h or 90m (units s, m, h, d, w), or off";
        let (n, unit) = number_and_unit(text).map_err(|()| format!("{text:?}: {HINT}"))?;
        let secs = match unit.as_str() {
            _ if n == 0 => return Ok(None),
            "s" => 1,
            "m" => 60,
            "h" => 3600,
            "d" => 86_400,
            "w" => 7 * 86_400,
            _ => return Err(format!("{text:?}: {HINT}")),
        };
        Ok(Some(Duration::from_secs(n.saturating_mul(secs))))
    }

    /// A size as the flags and the environment give it: a whole number and a unit, `KB`, `MB`,
    /// `GB`, `TB` (powers of 1000) or `KiB`, `MiB`, `GiB`, `TiB` (of 1024), or bytes without
    /// one (`20GiB`, `500MB`); `off` (or `0`) sets no limit.
    pub fn parse_size(text: &str) -> Result<Option<u64>, String> {
        const HINT: &str = "give a size like 20GiB or 500MB, or off";
        let (n, unit) = number_and_unit(text).map_err(|()| format!("{text:?}: {HINT}"))?;
        let scale: u64 = match unit.to_ascii_lowercase().as_str() {
            _ if n == 0 => return Ok(None),
            "" | "b" => 1,
            "kb" => 1000,
            "mb" => 1000_u64.pow(2),
            "gb" => 1000_u64.pow(3),
            "tb" => 1000_u64.pow(4),
            "kib" => 1 << 10,
            "mib" => 1 << 20,
            "gib" => 1 << 30,
            "tib" => 1 << 40,
            _ => return Err(format!("{text:?}: {HINT}")),
        };
        Ok(Some(n.saturating_mul(scale)))
    }
}

/// `30d` → `(30, "d")`; `off` → `(0, "")`.
fn number_and_unit(text: &str) -> Result<(u64, String), ()> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("off") {
        return Ok((0, String::new()));
    }
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let n = t[..split].parse().map_err(|_| ())?;
    Ok((n, t[split..].trim().to_owned()))
}

/// What one pass deleted, and how long it took.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PruneReport {
    pub events: u64,
    pub raw_lines: u64,
    /// Resolved requests (the approvals' record).
    pub requests: u64,
    /// Notifications delivered, skipped or given up.
    pub notifications: u64,
    /// Steps of delivery trails.
    pub deliveries: u64,
    pub answer_links: u64,
    /// Audit log entries.
    pub audit: u64,
    /// Closed sessions with nothing left.
    pub sessions: u64,
    /// Statements run (each a transaction of at most [`Retention::batch`] rows).
    pub batches: u64,
    /// Everything older than this (Unix ms) was due.
    pub cutoff: i64,
    pub took: Duration,
}

impl PruneReport {
    pub fn rows(&self) -> u64 {
        self.events
            + self.raw_lines
            + self.requests
            + self.notifications
            + self.deliveries
            + self.answer_links
            + self.audit
            + self.sessions
    }
}

/// How big the store is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreSize {
    /// Bytes holding data. SQLite: the pages in use (pages freed by pruning are reused, the file
    /// does not shrink). Postgres: the rows of the relay's tables, estimated from a sample (the
    /// space pruned rows leave is reused by later writes, not returned to the disk).
    pub used: u64,
    /// Bytes on disk: the SQLite file (without its WAL), or the relay's tables, indexes and
    /// TOAST on Postgres.
    pub on_disk: u64,
}

/// Totals of the background pruner, for metrics.
#[derive(Debug, Default)]
pub struct RetentionStats {
    pub passes: AtomicU64,
    pub rows: AtomicU64,
    pub events: AtomicU64,
    /// The store's size as the last pass measured it ([`StoreSize::used`]).
    pub used_bytes: AtomicU64,
    pub last_pass_micros: AtomicU64,
}

/// A session is in a turn: its events and requests are kept until the turn is over (recovery
/// needs an open turn's start to close it).
const LIVE: &str =
    "SELECT id FROM sessions WHERE status IN ('active', 'awaiting_approval', 'awaiting_input')";

/// The pause between two statements.
async fn breathe(pause: Duration) {
    if !pause.is_zero() {
        tokio::time::sleep(pause).await;
    }
}

/// The share of a table's pages (in percent) to sample: about 2000 pages of a big table, a
/// small one whole.
fn sample_percent(pages: i64) -> f64 {
    (200_000.0 / pages.max(1) as f64).clamp(0.5, 100.0)
}

use crate::time::now_ms;

impl Store {
    /// The store's size now.
    pub async fn size(&self) -> Result<StoreSize, StoreError> {
        let q = StoreError::query("measure the store");
        match &self.inner.pool {
            Pool::Sqlite(p) => {
                let (pages, free, page): (i64, i64, i64) = sqlx::query_as(
                    "SELECT (SELECT page_count FROM pragma_page_count()), (SELECT freelist_count FROM pragma_freelist_count()), (SELECT page_size FROM pragma_page_size())",
                )
                .fetch_one(p)
                .await
                .map_err(q)?;
                Ok(StoreSize {
                    used: ((pages - free).max(0) * page) as u64,
                    on_disk: (pages * page) as u64,
                })
            }
            Pool::Postgres(p) => {
                let tables: Vec<(String, i64, i64)> = sqlx::query_as(
                    "SELECT c.relname::text, pg_total_relation_size(c.oid), pg_relation_size(c.oid) / 8192 FROM pg_class c \
                     WHERE c.relkind = 'r' AND c.relnamespace = current_schema()::regnamespace \
                     AND c.relname IN ('sessions', 'events', 'pending', 'raw_lines', 'notify_outbox', 'notify_deliveries', 'answer_links', 'rules', 'push_subscriptions')",
                )
                .fetch_all(p)
                .await
                .map_err(q)?;
                let mut size = StoreSize::default();
                for (table, on_disk, pages) in tables {
                    size.on_disk += on_disk as u64;
                    let pct = sample_percent(pages);
                    let sql = format!(
                        "SELECT COALESCE(SUM(pg_column_size(t.*)), 0)::bigint FROM {table} t TABLESAMPLE SYSTEM ({pct})"
                    );
                    let sampled: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                        .fetch_one(p)
                        .await
                        .map_err(StoreError::query("measure the store"))?;
                    size.used += (sampled as f64 * 100.0 / pct) as u64;
                }
                Ok(size)
            }
        }
    }

    /// The store's size as cheaply as it can be had, for metrics: on SQLite exact; on Postgres
    /// the bytes on disk, and the bytes in use as the last retention pass measured them
    /// (`None` before one did: sampling every table is too much for every scrape).
    pub async fn size_now(&self) -> Result<(u64, Option<u64>), StoreError> {
        match &self.inner.pool {
            Pool::Sqlite(_) => self.size().await.map(|s| (s.on_disk, Some(s.used))),
            Pool::Postgres(p) => {
                let on_disk: i64 = sqlx::query_scalar(
                    "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c \
                     WHERE c.relkind = 'r' AND c.relnamespace = current_schema()::regnamespace \
                     AND c.relname IN ('sessions', 'events', 'pending', 'raw_lines', 'notify_outbox', 'notify_deliveries', 'answer_links', 'rules', 'push_subscriptions')",
                )
                .fetch_one(p)
                .await
                .map_err(StoreError::query("measure the store"))?;
                let used = self.inner.retention.used_bytes.load(Ordering::Relaxed);
                Ok((on_disk as u64, (used > 0).then_some(used)))
            }
        }
    }

    /// The time (Unix ms) before which events must go for the store to be back at 90 % of
    /// `max_bytes`; `None` while it is under `max_bytes`.
    async fn size_cutoff(&self, max_bytes: u64, used: u64) -> Result<Option<i64>, StoreError> {
        if used <= max_bytes {
            return Ok(None);
        }
        let share = (used - max_bytes * 9 / 10) as f64 / used as f64;
        let q = StoreError::query("find the size cutoff");
        let time: Option<i64> = match &self.inner.pool {
            // Rowids grow with time: the row that far into the table is the one. (No events:
            // no row; an OFFSET of NULL would be an error.)
            Pool::Sqlite(p) => sqlx::query_scalar(
                "SELECT time FROM events ORDER BY id LIMIT 1 OFFSET \
                 (SELECT COALESCE(CAST((MAX(id) - MIN(id)) * $1 AS INTEGER), 0) FROM events)",
            )
            .bind(share)
            .fetch_optional(p)
            .await
            .map_err(q)?,
            Pool::Postgres(p) => {
                let pages: i64 = sqlx::query_scalar("SELECT pg_relation_size('events') / 8192")
                    .fetch_one(p)
                    .await
                    .map_err(StoreError::query("find the size cutoff"))?;
                let sql = format!(
                    "SELECT percentile_disc($1) WITHIN GROUP (ORDER BY time) FROM events TABLESAMPLE SYSTEM ({})",
                    sample_percent(pages)
                );
                sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                    .bind(share)
                    .fetch_one(p)
                    .await
                    .map_err(q)?
            }
        };
        Ok(time.map(|t| t + 1))
    }

    /// One pass: deletes, in batches with a pause between them, every row `retention` no
    /// longer keeps. Never touches a request still waiting for its answer, a notification
    /// still to be sent, or anything of a session in a turn.
    pub async fn prune(&self, retention: &Retention) -> Result<PruneReport, StoreError> {
        let started = Instant::now();
        let mut cutoff = retention
            .max_age
            .map_or(i64::MIN, |age| now_ms() - age.as_millis() as i64);
        if let Some(max) = retention.max_bytes {
            let used = self.size().await?.used;
            if let Some(by_size) = self.size_cutoff(max, used).await? {
                cutoff = cutoff.max(by_size);
            }
        }
        let mut report = PruneReport {
            cutoff,
            ..Default::default()
        };
        let notify_cutoff = retention
            .notifications_max_age
            .map_or(cutoff, |age| cutoff.max(now_ms() - age.as_millis() as i64));
        let audit_cutoff = retention
            .audit_max_age
            .map_or(i64::MIN, |age| now_ms() - age.as_millis() as i64);
        if cutoff == i64::MIN && notify_cutoff == i64::MIN && audit_cutoff == i64::MIN {
            return Ok(report);
        }
        let batch = retention.batch.max(1) as i64;
        for table in Table::ALL {
            let cutoff = match table {
                Table::Notifications | Table::Deliveries => notify_cutoff,
                Table::Audit => audit_cutoff,
                _ => cutoff,
            };
            if cutoff == i64::MIN {
                continue;
            }
            loop {
                // A store closing mid-pass: the rest waits for the next run.
                if self.inner.stats.closing() {
                    report.took = started.elapsed();
                    return Ok(report);
                }
                let t = Instant::now();
                let deleted = self.prune_batch(table, cutoff, batch).await?;
                report.batches += 1;
                *table.count(&mut report) += deleted;
                // At most a quarter of the database's time goes to pruning.
                breathe(retention.pause.max(t.elapsed() * 3)).await;
                if deleted < batch as u64 {
                    break;
                }
            }
        }
        report.took = started.elapsed();
        Ok(report)
    }

    /// Deletes at most `batch` rows of `table` older than `cutoff`: one statement, one
    /// transaction.
    async fn prune_batch(&self, table: Table, cutoff: i64, batch: i64) -> Result<u64, StoreError> {
        let sql = match &self.inner.pool {
            Pool::Sqlite(_) => table.sqlite(),
            Pool::Postgres(_) => table.postgres(),
        };
        on_pool!(&self.inner.pool, |p| sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(cutoff)
            .bind(batch)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))
        .map_err(StoreError::query("prune"))
    }

    /// Runs [`Store::prune`] every [`Retention::every`] until the store closes; a failed pass
    /// is logged and tried again at the next one.
    pub(crate) fn start_retention(&self, retention: Retention, totals: Arc<RetentionStats>) {
        if !retention.enabled() {
            return;
        }
        let weak = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            let mut first = true;
            loop {
                let wait = if first {
                    retention.every.min(Duration::from_secs(60))
                } else {
                    retention.every
                };
                first = false;
                tokio::time::sleep(wait).await;
                let Some(inner) = weak.upgrade() else { return };
                let store = Store { inner };
                if store.inner.ops.is_closed() || store.inner.stats.closing() {
                    return;
                }
                match store.prune(&retention).await {
                    Ok(r) => {
                        totals.passes.fetch_add(1, Ordering::Relaxed);
                        totals.rows.fetch_add(r.rows(), Ordering::Relaxed);
                        totals.events.fetch_add(r.events, Ordering::Relaxed);
                        totals
                            .last_pass_micros
                            .store(r.took.as_micros() as u64, Ordering::Relaxed);
                        if r.rows() > 0 {
                            tracing::info!(
                                events = r.events,
                                raw_lines = r.raw_lines,
                                requests = r.requests,
                                notifications = r.notifications,
                                deliveries = r.deliveries,
                                answer_links = r.answer_links,
                                audit = r.audit,
                                sessions = r.sessions,
                                took_ms = r.took.as_millis() as u64,
                                "retention pruned the store"
                            );
                        }
                    }
                    Err(e) => tracing::warn!("retention could not prune the store: {e}"),
                }
                if let Ok(size) = store.size().await {
                    totals.used_bytes.store(size.used, Ordering::Relaxed);
                }
            }
        });
    }

    /// The background pruner's totals (all zero while retention is off).
    pub fn retention_stats(&self) -> &RetentionStats {
        &self.inner.retention
    }
}

/// The tables retention prunes, in the order a pass takes them (sessions last: a closed
/// session goes once nothing of it is left).
#[derive(Debug, Clone, Copy)]
enum Table {
    Events,
    RawLines,
    Requests,
    Notifications,
    Deliveries,
    AnswerLinks,
    Audit,
    Sessions,
}

impl Table {
    const ALL: [Table; 8] = [
        Table::Events,
        Table::RawLines,
        Table::Requests,
        Table::Notifications,
        Table::Deliveries,
        Table::AnswerLinks,
        Table::Audit,
        Table::Sessions,
    ];

    fn count(self, r: &mut PruneReport) -> &mut u64 {
        match self {
            Table::Events => &mut r.events,
            Table::RawLines => &mut r.raw_lines,
            Table::Requests => &mut r.requests,
            Table::Notifications => &mut r.notifications,
            Table::Deliveries => &mut r.deliveries,
            Table::AnswerLinks => &mut r.answer_links,
            Table::Audit => &mut r.audit,
            Table::Sessions => &mut r.sessions,
        }
    }

    /// `$1` the cutoff, `$2` the batch. Events go by rowid, which grows with time: the scan
    /// stops at the first event young enough to keep, so a pass reads only what it deletes
    /// (and the old events of sessions in a turn) however big the table is.
    fn sqlite(self) -> String {
        match self {
            Table::Events => format!(
                "DELETE FROM events WHERE id IN (SELECT id FROM events WHERE id < \
                 COALESCE((SELECT id FROM events WHERE time >= $1 ORDER BY id LIMIT 1), (SELECT MAX(id) + 1 FROM events)) \
                 AND time < $1 AND session_id NOT IN ({LIVE}) ORDER BY id LIMIT $2)"
            ),
            other => other.common("rowid"),
        }
    }

    /// `$1` the cutoff, `$2` the batch. Events are found by a BRIN index on their time.
    fn postgres(self) -> String {
        match self {
            Table::Events => format!(
                "DELETE FROM events e USING (SELECT session_id, seq FROM events WHERE time < $1 \
                 AND session_id NOT IN ({LIVE}) LIMIT $2) old WHERE e.session_id = old.session_id AND e.seq = old.seq"
            ),
            other => other.common("ctid"),
        }
    }

    /// The statements both backends share (`row` names a row: rowid or ctid).
    fn common(self, row: &str) -> String {
        match self {
            Table::Events => unreachable!("events have their own statement per backend"),
            // A session's raw lines go once it has not been updated since the cutoff.
            Table::RawLines => format!(
                "DELETE FROM raw_lines WHERE {row} IN (SELECT r.{row} FROM raw_lines r WHERE r.session_id IN \
                 (SELECT id FROM sessions WHERE updated_at < $1 AND id NOT IN ({LIVE})) LIMIT $2)"
            ),
            Table::Requests => format!(
                "DELETE FROM pending WHERE {row} IN (SELECT {row} FROM pending WHERE resolution IS NOT NULL \
                 AND created_at < $1 AND session_id NOT IN ({LIVE}) LIMIT $2)"
            ),
            Table::Notifications => format!(
                "DELETE FROM notify_outbox WHERE {row} IN (SELECT {row} FROM notify_outbox WHERE state <> 'pending' \
                 AND COALESCE(done_at, created_at) < $1 LIMIT $2)"
            ),
            // A trail goes with its notification: once that row is gone (or when the step is
            // past the cutoff and its row is done with).
            Table::Deliveries => format!(
                "DELETE FROM notify_deliveries WHERE {row} IN (SELECT d.{row} FROM notify_deliveries d WHERE d.at < $1 \
                 AND NOT EXISTS (SELECT 1 FROM notify_outbox o WHERE o.id = d.outbox_id AND o.state = 'pending') LIMIT $2)"
            ),
            Table::AnswerLinks => format!(
                "DELETE FROM answer_links WHERE {row} IN (SELECT {row} FROM answer_links WHERE expires_at < $1 LIMIT $2)"
            ),
            Table::Audit => format!(
                "DELETE FROM audit_log WHERE {row} IN (SELECT {row} FROM audit_log WHERE at < $1 LIMIT $2)"
            ),
            Table::Sessions => format!(
                "DELETE FROM sessions WHERE {row} IN (SELECT s.{row} FROM sessions s WHERE s.status = 'closed' AND s.updated_at < $1 \
                 AND NOT EXISTS (SELECT 1 FROM events e WHERE e.session_id = s.id) \
                 AND NOT EXISTS (SELECT 1 FROM pending p WHERE p.session_id = s.id AND p.resolution IS NULL) LIMIT $2)"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Retention;
    use std::time::Duration;

    #[test]
    fn ages_and_sizes_read_as_written() {
        let age = Retention::parse_age;
        assert_eq!(age("30d"), Ok(Some(Duration::from_secs(30 * 86_400))));
        assert_eq!(age(" 12h "), Ok(Some(Duration::from_secs(12 * 3600))));
        assert_eq!(age("90m"), Ok(Some(Duration::from_secs(5400))));
        assert_eq!(age("2w"), Ok(Some(Duration::from_secs(14 * 86_400))));
        assert_eq!(age("off"), Ok(None));
        assert_eq!(age("0"), Ok(None));
        for bad in ["", "30", "d", "1.5d", "30 days", "-1d"] {
            assert!(age(bad).is_err(), "{bad:?}");
        }
        let size = Retention::parse_size;
        assert_eq!(size("20GiB"), Ok(Some(20 << 30)));
        assert_eq!(size("500MB"), Ok(Some(500_000_000)));
        assert_eq!(size("4096"), Ok(Some(4096)));
        assert_eq!(size("1 kib"), Ok(Some(1024)));
        assert_eq!(size("OFF"), Ok(None));
        for bad in ["", "GB", "1.5GB", "10 parsecs"] {
            assert!(size(bad).is_err(), "{bad:?}");
        }
    }
}
