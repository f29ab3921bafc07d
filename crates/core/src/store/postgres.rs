//! Postgres: opening (connect check, migrations, pool) and array-based bulk INSERTs (`UNNEST`).

use std::str::FromStr;
use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, PgConnection, PgPool};

use super::StoredEvent;
use super::error::{StoreError, redact};

static MIGRATOR: Migrator = sqlx::migrate!("./migrations/postgres");

/// Rows per INSERT statement (one array per column, so the statement text never changes).
const MAX_ROWS: usize = 4096;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

const INSERT_EVENTS: &str = "INSERT INTO events (session_id, seq, time, json) \
     SELECT * FROM UNNEST($1::text[], $2::int8[], $3::int8[], $4::text[]) \
     ON CONFLICT (session_id, seq) DO NOTHING";
const INSERT_RAW: &str = "INSERT INTO raw_lines (session_id, line) \
     SELECT s, l FROM UNNEST($1::text[], $2::text[]) WITH ORDINALITY AS t(s, l, n) ORDER BY n";

/// One direct connection to `url` within `wait`, with the URL's options; errors name the
/// server (password redacted) and the real reason (refused, unknown host, bad URL).
pub(crate) async fn connect(
    url: &str,
    wait: Duration,
) -> Result<(PgConnection, PgConnectOptions), StoreError> {
    let shown = redact(url);
    let options = PgConnectOptions::from_str(url).map_err(|e| StoreError::InvalidTarget {
        target: shown.clone(),
        reason: e.to_string(),
    })?;
    let open_error = |reason: String| StoreError::Open {
        backend: "postgres",
        target: shown.clone(),
        reason,
    };
    let conn = tokio::time::timeout(wait, PgConnection::connect_with(&options))
        .await
        .map_err(|_| open_error(format!("no connection within {wait:?}")))?
        .map_err(|e| open_error(e.to_string()))?;
    Ok((conn, options))
}

/// Connects once (so a bad URL or an unreachable server fails here with the real reason),
/// migrates on that connection, then builds the pool.
pub(crate) async fn open(url: &str) -> Result<PgPool, StoreError> {
    let shown = redact(url);
    let (mut conn, options) = connect(url, CONNECT_TIMEOUT).await?;
    MIGRATOR
        .run(&mut conn)
        .await
        .map_err(|e| StoreError::Migrate {
            backend: "postgres",
            target: shown.clone(),
            reason: e.to_string(),
        })?;
    let _ = conn.close().await;
    Ok(PgPoolOptions::new()
        .max_connections(5)
        .acquire_timeout(CONNECT_TIMEOUT)
        .connect_lazy_with(options))
}

/// Inserts events; an existing `(session_id, seq)` is left as it is (`ON CONFLICT DO NOTHING`).
/// Returns how many were inserted.
pub(crate) async fn insert_events(
    conn: &mut PgConnection,
    events: &[&StoredEvent],
) -> Result<u64, sqlx::Error> {
    let mut inserted = 0;
    for chunk in events.chunks(MAX_ROWS) {
        let session_ids: Vec<&str> = chunk.iter().map(|e| e.session_id.as_str()).collect();
        let seqs: Vec<i64> = chunk.iter().map(|e| e.seq).collect();
        let times: Vec<i64> = chunk.iter().map(|e| e.time).collect();
        let jsons: Vec<&str> = chunk.iter().map(|e| e.json.as_str()).collect();
        inserted += sqlx::query(INSERT_EVENTS)
            .bind(session_ids)
            .bind(seqs)
            .bind(times)
            .bind(jsons)
            .execute(&mut *conn)
            .await?
            .rows_affected();
    }
    Ok(inserted)
}

/// Appends raw lines, in order.
pub(crate) async fn insert_raw(
    conn: &mut PgConnection,
    lines: &[(&str, &str)],
) -> Result<(), sqlx::Error> {
    for chunk in lines.chunks(MAX_ROWS) {
        let session_ids: Vec<&str> = chunk.iter().map(|(s, _)| *s).collect();
        let texts: Vec<&str> = chunk.iter().map(|(_, l)| *l).collect();
        sqlx::query(INSERT_RAW)
            .bind(session_ids)
            .bind(texts)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}
