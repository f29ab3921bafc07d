//! SQLite: opening (WAL, `synchronous=NORMAL`, migrations) and multi-row INSERTs for the bulk tables.

use std::str::FromStr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{AssertSqlSafe, SqliteConnection, SqlitePool};

use super::StoredEvent;
use super::batch_sql;
use super::error::{StoreError, redact};

static MIGRATOR: Migrator = sqlx::migrate!("./migrations/sqlite");

/// Most rows in one INSERT statement (4096 parameters for events); shorter tails use the powers
/// of two below it, so at most `log2(MAX_ROWS) + 1` statements per table are ever prepared
/// (and cached per connection).
const MAX_ROWS: usize = 1024;
/// For new files. Every page a commit touches goes to the WAL whole, and live sessions make
/// many small commits: 4 KiB pages cost less per commit than 16 KiB, and the pipeline bench
/// keeps its throughput (docs/STORE.md). An existing file keeps its page size.
const PAGE_SIZE: u32 = 4 * 1024;

/// Opens the SQLite store at `target` (a `sqlite:` URL when `is_url`, else a file path).
pub(crate) async fn open(target: &str, is_url: bool) -> Result<SqlitePool, StoreError> {
    let shown = redact(target);
    let options = if is_url {
        SqliteConnectOptions::from_str(target).map_err(|e| StoreError::InvalidTarget {
            target: shown.clone(),
            reason: e.to_string(),
        })?
    } else {
        SqliteConnectOptions::new().filename(target)
    };
    let in_memory = target.contains(":memory:") || target.contains("mode=memory");
    if !in_memory
        && let Some(dir) = options
            .get_filename()
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
    {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::CreateDir {
            path: dir.to_owned(),
            source: Arc::new(e),
        })?;
    }
    let options = options
        .create_if_missing(true)
        .page_size(PAGE_SIZE)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(Duration::from_secs(10))
        .pragma("temp_store", "memory")
        .statement_cache_capacity(128);
    // An in-memory database lives as long as one of its connections: keep one open for good.
    let (idle_timeout, max_lifetime) = if in_memory {
        (None, None)
    } else {
        (
            Some(Duration::from_secs(600)),
            Some(Duration::from_secs(3600)),
        )
    };
    let pool = SqlitePoolOptions::new()
        .max_connections(4)
        // A local file does not go stale like a network connection: no ping (one more round
        // trip to the connection's thread) before every use.
        .test_before_acquire(false)
        .min_connections(u32::from(in_memory))
        .idle_timeout(idle_timeout)
        .max_lifetime(max_lifetime)
        .connect_with(options)
        .await
        .map_err(|e| StoreError::Open {
            backend: "sqlite",
            target: shown.clone(),
            reason: e.to_string(),
        })?;
    MIGRATOR.run(&pool).await.map_err(|e| StoreError::Migrate {
        backend: "sqlite",
        target: shown,
        reason: e.to_string(),
    })?;
    Ok(pool)
}

fn statements(head: &'static str, columns: usize, tail: &'static str) -> batch_sql::Statements {
    batch_sql::statements(head, columns, tail, MAX_ROWS, batch_sql::Params::Anonymous)
}

/// Inserts events; an existing `(session_id, seq)` is left as it is (`ON CONFLICT DO NOTHING`).
pub(crate) async fn insert_events(
    conn: &mut SqliteConnection,
    events: &[&StoredEvent],
) -> Result<(), sqlx::Error> {
    static SQL: OnceLock<batch_sql::Statements> = OnceLock::new();
    let sql = SQL.get_or_init(|| {
        statements(
            "INSERT INTO events (session_id, seq, time, json) VALUES ",
            4,
            " ON CONFLICT (session_id, seq) DO NOTHING",
        )
    });
    let mut rest = events;
    while !rest.is_empty() {
        let (rows, text) = sql.pick(rest.len());
        let (chunk, tail) = rest.split_at(rows);
        let mut query = sqlx::query(AssertSqlSafe(text));
        for ev in chunk {
            query = query
                .bind(ev.session_id.as_str())
                .bind(ev.seq)
                .bind(ev.time)
                .bind(ev.json.as_str());
        }
        query.execute(&mut *conn).await?;
        rest = tail;
    }
    Ok(())
}

/// Appends raw lines, in order.
pub(crate) async fn insert_raw(
    conn: &mut SqliteConnection,
    lines: &[(&str, &str)],
) -> Result<(), sqlx::Error> {
    static SQL: OnceLock<batch_sql::Statements> = OnceLock::new();
    let sql =
        SQL.get_or_init(|| statements("INSERT INTO raw_lines (session_id, line) VALUES ", 2, ""));
    let mut rest = lines;
    while !rest.is_empty() {
        let (rows, text) = sql.pick(rest.len());
        let (chunk, tail) = rest.split_at(rows);
        let mut query = sqlx::query(AssertSqlSafe(text));
        for (session_id, line) in chunk {
            query = query.bind(*session_id).bind(*line);
        }
        query.execute(&mut *conn).await?;
        rest = tail;
    }
    Ok(())
}
