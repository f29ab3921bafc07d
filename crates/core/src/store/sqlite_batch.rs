//! SQLite: a small batch (the common case: a few events of a few sessions) written in one
//! round trip to the connection's worker thread.

use std::sync::OnceLock;

use sqlx::{AssertSqlSafe, SqliteConnection};

use super::writer::{Grouped, PENDING_HEAD, PENDING_TAIL, PRUNE_RAW, SESSION_HEAD, SESSION_TAIL};

/// Most writes a batch may hold to go this way. Past it, the per-table multi-row statements
/// (`sqlite::insert_events`, ...) are faster: their hand-offs are few per row, while here every
/// row is encoded once more as JSON and parsed again by SQLite (measured in the `pipeline`
/// bench: 210k events/s with them alone, 168k with this for every batch, 212k–221k with
/// this up to 32 writes).
pub(crate) const MAX_WRITES: usize = 32;

/// A batch as one statement text: `BEGIN`, one statement per table the batch writes to (events,
/// raw lines, sessions, pending requests), each taking a JSON array of rows unpacked by
/// `json_each`, then `COMMIT` (left out when raw-line pruning still follows). There are only
/// 2⁴ × 2 such texts, so each is prepared once per connection, and the whole transaction is one
/// hand-off to the connection's worker thread instead of one per statement. Tables the batch
/// does not write to are left out, so a table the database refuses costs only its own writes.
/// The parameters are `?`, one per statement: sqlx binds anonymous parameters in order across
/// the statements of one text (numbered ones it would misplace after the first statement).
fn batch_sql(tables: [bool; 4], commit: bool) -> String {
    let cols = |n: usize| {
        (0..n)
            .map(|i| format!("value->>{i}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    // `WHERE true` keeps SQLite from reading an `ON CONFLICT` as a join constraint.
    let upsert = |head: &str, n: usize, tail: &str| {
        format!(
            "{}SELECT {} FROM json_each(?) WHERE true ORDER BY key{tail}; ",
            head.trim_end_matches("VALUES "),
            cols(n)
        )
    };
    let statements = [
        upsert(
            "INSERT INTO events (session_id, seq, time, json) VALUES ",
            4,
            " ON CONFLICT (session_id, seq) DO NOTHING",
        ),
        upsert("INSERT INTO raw_lines (session_id, line) VALUES ", 2, ""),
        upsert(SESSION_HEAD, 10, SESSION_TAIL),
        upsert(PENDING_HEAD, 7, PENDING_TAIL),
    ];
    let mut sql = "BEGIN IMMEDIATE; ".to_owned();
    for (statement, used) in statements.iter().zip(tables) {
        if used {
            sql += statement;
        }
    }
    if commit {
        sql += "COMMIT;";
    }
    sql
}

/// Writes a batch in one transaction, in one round trip to the connection's worker (more only
/// when raw lines are pruned). On error the transaction may still be open: the caller closes
/// the connection.
pub(crate) async fn write_batch(
    conn: &mut SqliteConnection,
    g: &Grouped<'_>,
    prune: &[String],
    keep: i64,
) -> Result<(), sqlx::Error> {
    static TEXTS: [OnceLock<String>; 32] = [const { OnceLock::new() }; 32];
    let tables = [
        !g.events.is_empty(),
        !g.raw.is_empty(),
        !g.sessions.is_empty(),
        !g.pending.is_empty(),
    ];
    let commit = prune.is_empty();
    let index = tables
        .iter()
        .enumerate()
        .fold(usize::from(commit) << 4, |i, (bit, used)| {
            i | usize::from(*used) << bit
        });
    let sql = TEXTS[index].get_or_init(|| batch_sql(tables, commit));
    let json = |v: serde_json::Result<String>| v.map_err(|e| sqlx::Error::Encode(Box::new(e)));
    let events: Vec<_> = g
        .events
        .iter()
        .map(|e| (e.session_id.as_str(), e.seq, e.time, e.json.as_str()))
        .collect();
    let sessions: Vec<_> = g
        .sessions
        .iter()
        .map(|s| {
            (
                s.id.as_str(),
                s.thread_id.as_str(),
                s.cwd.as_deref(),
                s.model.as_deref(),
                s.status.as_str(),
                s.created_at,
                s.updated_at,
                s.turn_count,
                s.last_seq,
                s.meta.as_str(),
            )
        })
        .collect();
    let pending: Vec<_> = g
        .pending
        .iter()
        .map(|p| {
            (
                p.id.as_str(),
                p.session_id.as_str(),
                p.kind.as_str(),
                p.created_at,
                p.deadline,
                p.request.as_str(),
                p.resolution.as_deref(),
            )
        })
        .collect();
    let mut query = sqlx::query(AssertSqlSafe(sql.as_str()));
    if tables[0] {
        query = query.bind(json(serde_json::to_string(&events))?);
    }
    if tables[1] {
        query = query.bind(json(serde_json::to_string(&g.raw))?);
    }
    if tables[2] {
        query = query.bind(json(serde_json::to_string(&sessions))?);
    }
    if tables[3] {
        query = query.bind(json(serde_json::to_string(&pending))?);
    }
    query.execute(&mut *conn).await?;
    if !prune.is_empty() {
        for session_id in prune {
            sqlx::query(PRUNE_RAW)
                .bind(session_id.as_str())
                .bind(keep)
                .execute(&mut *conn)
                .await?;
        }
        sqlx::query("COMMIT").execute(&mut *conn).await?;
    }
    Ok(())
}
