//! The cluster's queries: instances and their leases (Postgres's clock), session owners, and
//! the command table. Notices go out with `pg_notify`, so they leave only on commit.

use sha2::{Digest, Sha256};
use sqlx::{PgPool, Row};

use super::InstanceView;

/// The notification channel of the cluster in this database schema: instances in other
/// schemas of the same database (other clusters, other tests) never hear each other.
pub(super) async fn channel(pool: &PgPool) -> Result<String, sqlx::Error> {
    let schema: String = sqlx::query_scalar("SELECT current_schema()")
        .fetch_one(pool)
        .await?;
    let digest = Sha256::digest(schema.as_bytes());
    let hex: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("codex_relay_{hex}"))
}

/// Registers (or registers again) instance `id` under a new epoch, live with a fresh lease.
pub(super) async fn register(
    pool: &PgPool,
    id: &str,
    url: Option<&str>,
    lease_ms: i64,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "INSERT INTO relay_instances (id, epoch, url, state, lease_until, version) \
         VALUES ($1, nextval('relay_epochs'), $2, 'live', now() + $3 * interval '1 millisecond', $4) \
         ON CONFLICT (id) DO UPDATE SET epoch = excluded.epoch, url = excluded.url, state = 'live', \
           started_at = now(), renewed_at = now(), lease_until = excluded.lease_until, \
           taken_by = NULL, version = excluded.version \
         RETURNING epoch",
    )
    .bind(id)
    .bind(url)
    .bind(lease_ms)
    .bind(env!("CARGO_PKG_VERSION"))
    .fetch_one(pool)
    .await
}

/// Renews the lease; false when the instance is no longer live at `epoch` (taken over, or
/// registered again by another process with the same id), or its lease already ran out: from
/// then on any instance may take it over, so its sessions must be stopped even if none has
/// yet (it joins again under a new epoch).
pub(super) async fn renew<'c>(
    db: impl sqlx::PgExecutor<'c>,
    id: &str,
    epoch: i64,
    lease_ms: i64,
    sessions: i64,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        "UPDATE relay_instances SET renewed_at = now(), \
           lease_until = now() + $3 * interval '1 millisecond', sessions = $4 \
         WHERE id = $1 AND epoch = $2 AND state = 'live' AND lease_until > now()",
    )
    .bind(id)
    .bind(epoch)
    .bind(lease_ms)
    .bind(sessions)
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The epoch under which instance `id` is live with a lease, if it is.
pub(super) async fn holder(pool: &PgPool, id: &str) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT epoch FROM relay_instances WHERE id = $1 AND state = 'live' AND lease_until > now()",
    )
    .bind(id)
    .fetch_optional(pool)
    .await
}

/// Leaves the cluster: the instance is gone at once, so another adopts its sessions without
/// waiting for the lease to run out.
pub(super) async fn leave(
    pool: &PgPool,
    channel: &str,
    id: &str,
    epoch: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "WITH gone AS (UPDATE relay_instances SET state = 'gone', lease_until = now() \
           WHERE id = $1 AND epoch = $2 AND state = 'live' RETURNING id) \
         SELECT pg_notify($3, 'i ' || id) FROM gone",
    )
    .bind(id)
    .bind(epoch)
    .bind(channel)
    .execute(pool)
    .await?;
    Ok(())
}

/// Takes over every instance past its lease (or gone and not yet taken over), if this one
/// still holds its own lease: marks each gone, taken by `me`, and makes `me` the owner of
/// their sessions. An instance whose batch is committing right now holds a share lock on its
/// row and is skipped this round, so its last writes land before anything is adopted.
/// Returns each taken instance with the sessions adopted from it.
pub(super) async fn take_over(
    pool: &PgPool,
    channel: &str,
    me: &str,
    epoch: i64,
) -> Result<Vec<(String, Vec<String>)>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let mine: Option<i64> = sqlx::query_scalar(
        "SELECT epoch FROM relay_instances \
         WHERE id = $1 AND epoch = $2 AND state = 'live' AND lease_until > now() FOR SHARE",
    )
    .bind(me)
    .bind(epoch)
    .fetch_optional(&mut *tx)
    .await?;
    if mine.is_none() {
        return Ok(Vec::new());
    }
    let dead: Vec<String> = sqlx::query_scalar(
        "SELECT id FROM relay_instances WHERE id <> $1 AND \
           ((state = 'live' AND lease_until < now()) OR (state = 'gone' AND taken_by IS NULL)) \
         ORDER BY id FOR UPDATE SKIP LOCKED",
    )
    .bind(me)
    .fetch_all(&mut *tx)
    .await?;
    let mut taken = Vec::new();
    for id in dead {
        sqlx::query("UPDATE relay_instances SET state = 'gone', taken_by = $2 WHERE id = $1")
            .bind(&id)
            .bind(me)
            .execute(&mut *tx)
            .await?;
        let sessions: Vec<String> = sqlx::query_scalar(
            "UPDATE relay_owners SET owner = $2, since = now() WHERE owner = $1 RETURNING session_id",
        )
        .bind(&id)
        .bind(me)
        .fetch_all(&mut *tx)
        .await?;
        sqlx::query("SELECT pg_notify($1, 'i ' || $2)")
            .bind(channel)
            .bind(&id)
            .execute(&mut *tx)
            .await?;
        taken.push((id, sessions));
    }
    tx.commit().await?;
    Ok(taken)
}

/// Makes `me` the owner of `session` unless someone is; returns the owner.
pub(super) async fn claim(pool: &PgPool, session: &str, me: &str) -> Result<String, sqlx::Error> {
    sqlx::query(
        "INSERT INTO relay_owners (session_id, owner) VALUES ($1, $2) ON CONFLICT (session_id) DO NOTHING",
    )
    .bind(session)
    .bind(me)
    .execute(pool)
    .await?;
    sqlx::query_scalar("SELECT owner FROM relay_owners WHERE session_id = $1")
        .bind(session)
        .fetch_one(pool)
        .await
}

/// Makes this instance (`fence`'s) the owner of the new `session`, if it still holds its
/// lease: checked in the same transaction, under the share lock a take-over waits for, so a
/// session is never recorded for an instance that lost its lease (it would be adopted with no
/// log). Returns the owner.
pub(super) async fn claim_fenced(
    pool: &PgPool,
    fence: &crate::store::Fence,
    session: &str,
) -> Result<String, sqlx::Error> {
    let mut tx = pool.begin().await?;
    crate::store::fence::check(&mut tx, fence, fence.epoch()).await?;
    sqlx::query(
        "INSERT INTO relay_owners (session_id, owner) VALUES ($1, $2) ON CONFLICT (session_id) DO NOTHING",
    )
    .bind(session)
    .bind(&fence.instance)
    .execute(&mut *tx)
    .await?;
    let owner = sqlx::query_scalar("SELECT owner FROM relay_owners WHERE session_id = $1")
        .bind(session)
        .fetch_one(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(owner)
}

/// Claims every stored session nobody owns (rows from before the cluster, or from a relay that
/// ran with clustering off).
pub(super) async fn claim_unowned(pool: &PgPool, me: &str) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar(
        "INSERT INTO relay_owners (session_id, owner) \
         SELECT s.id, $1 FROM sessions s \
         WHERE NOT EXISTS (SELECT 1 FROM relay_owners o WHERE o.session_id = s.id) \
         ON CONFLICT (session_id) DO NOTHING RETURNING session_id",
    )
    .bind(me)
    .fetch_all(pool)
    .await
}

/// The sessions `me` owns.
pub(super) async fn owned_by(pool: &PgPool, me: &str) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar("SELECT session_id FROM relay_owners WHERE owner = $1")
        .bind(me)
        .fetch_all(pool)
        .await
}

/// The stored sessions other instances own.
pub(super) async fn others_sessions(pool: &PgPool, me: &str) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT s.id FROM sessions s JOIN relay_owners o ON o.session_id = s.id WHERE o.owner <> $1",
    )
    .bind(me)
    .fetch_all(pool)
    .await
}

/// Who owns `session`, and whether that instance holds its lease.
pub(super) async fn owner_of(
    pool: &PgPool,
    session: &str,
) -> Result<Option<(String, bool)>, sqlx::Error> {
    let row = sqlx::query(
        "SELECT o.owner, COALESCE(i.state = 'live' AND i.lease_until > now(), false) AS live \
         FROM relay_owners o LEFT JOIN relay_instances i ON i.id = o.owner WHERE o.session_id = $1",
    )
    .bind(session)
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|r| (r.get("owner"), r.get("live"))))
}

/// The session a request belongs to and its resolution (JSON) once resolved, from the stored
/// requests.
pub(super) async fn session_of_request(
    pool: &PgPool,
    request: &str,
) -> Result<Option<(String, Option<String>)>, sqlx::Error> {
    sqlx::query_as("SELECT session_id, resolution FROM pending WHERE id = $1")
        .bind(request)
        .fetch_optional(pool)
        .await
}

/// A session's head as its committed log says up to `last`: its turns (the session's own, not
/// its sub-agents') and its last status. The session row can be ahead of the log (it is
/// written when a turn is asked for), and a mirror must apply each later event exactly once.
pub(super) async fn head(
    pool: &PgPool,
    session: &str,
    last: i64,
) -> Result<(i64, Option<String>), sqlx::Error> {
    let row = sqlx::query(
        "SELECT            count(*) FILTER (WHERE json::jsonb -> 'ev' ->> 't' = 'turn-start'              AND NOT (json::jsonb ? 'agent')) AS turns,            (SELECT json::jsonb -> 'ev' ->> 'status' FROM events              WHERE session_id = $1 AND seq <= $2 AND json::jsonb -> 'ev' ->> 't' = 'status'                AND NOT (json::jsonb ? 'agent')              ORDER BY seq DESC LIMIT 1) AS status          FROM events WHERE session_id = $1 AND seq <= $2",
    )
    .bind(session)
    .bind(last)
    .fetch_one(pool)
    .await?;
    Ok((row.get("turns"), row.get("status")))
}

/// The stored events of each of `sessions` after its seq in `after` (at most `limit` per
/// session), in seq order per session: one read for many mirrors.
pub(super) async fn events_after(
    pool: &PgPool,
    sessions: &[String],
    after: &[i64],
    limit: i64,
) -> Result<Vec<(String, String)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT e.session_id, e.json FROM UNNEST($1::text[], $2::bigint[]) AS d(id, after) \
         CROSS JOIN LATERAL (SELECT session_id, seq, json FROM events \
           WHERE session_id = d.id AND seq > d.after ORDER BY seq LIMIT $3) e \
         ORDER BY e.session_id, e.seq",
    )
    .bind(sessions)
    .bind(after)
    .bind(limit)
    .fetch_all(pool)
    .await
}

/// A notice to every instance.
pub(super) async fn notice(pool: &PgPool, channel: &str, payload: &str) -> Result<(), sqlx::Error> {
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(channel)
        .bind(payload)
        .execute(pool)
        .await
        .map(|_| ())
}

/// Every instance, as [`InstanceView`]s.
pub(super) async fn instances<'c>(
    db: impl sqlx::PgExecutor<'c>,
) -> Result<Vec<InstanceView>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, url, state, epoch, \
           (EXTRACT(EPOCH FROM (lease_until - now())) * 1000)::int8 AS lease_left_ms, \
           (EXTRACT(EPOCH FROM (now() - renewed_at)) * 1000)::int8 AS renewed_ms_ago, \
           sessions, taken_by \
         FROM relay_instances ORDER BY id",
    )
    .fetch_all(db)
    .await
}

/// The live instance (other than `me`) running the fewest sessions, with that number.
pub(super) async fn least_loaded(
    pool: &PgPool,
    me: &str,
) -> Result<Option<(String, i64)>, sqlx::Error> {
    let row = sqlx::query(
        "SELECT id, sessions FROM relay_instances \
         WHERE id <> $1 AND state = 'live' AND lease_until > now() ORDER BY sessions, id LIMIT 1",
    )
    .bind(me)
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|r| (r.get("id"), r.get("sessions"))))
}

/// Queues a command for instance `target` and tells it: `c <id> <target>`.
pub(super) async fn send_command(
    pool: &PgPool,
    channel: &str,
    target: &str,
    body: &str,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "WITH c AS (INSERT INTO relay_commands (target, body) VALUES ($1, $2) RETURNING id) \
         SELECT id FROM c, LATERAL (SELECT pg_notify($3, 'c ' || c.id || ' ' || $1)) AS n",
    )
    .bind(target)
    .bind(body)
    .bind(channel)
    .fetch_one(pool)
    .await
}

/// Takes command `id` for `me`, once: its body, or `None` if it was taken already.
pub(super) async fn take_command(
    pool: &PgPool,
    me: &str,
    id: i64,
) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar(
        "UPDATE relay_commands SET taken_at = now() \
         WHERE id = $1 AND target = $2 AND taken_at IS NULL RETURNING body",
    )
    .bind(id)
    .bind(me)
    .fetch_optional(pool)
    .await
}

/// Commands for `me` nobody took yet (a notice can be missed while the listener reconnects).
pub(super) async fn waiting_commands(pool: &PgPool, me: &str) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT id FROM relay_commands WHERE target = $1 AND taken_at IS NULL ORDER BY id",
    )
    .bind(me)
    .fetch_all(pool)
    .await
}

/// Where a command stands, with the instance it was sent to.
pub(super) struct CommandState {
    /// Its answer, once there is one.
    pub result: Option<String>,
    /// The target took it.
    pub taken: bool,
    /// The target is gone (it left, or another instance took it over).
    pub target_gone: bool,
    /// The target is live with a lease that has not run out.
    pub target_leased: bool,
}

/// Command `id` and its target's lease, in one read.
pub(super) async fn command_state(
    pool: &PgPool,
    id: i64,
) -> Result<Option<CommandState>, sqlx::Error> {
    let row = sqlx::query(
        "SELECT c.result, c.taken_at IS NOT NULL AS taken, \
           COALESCE(i.state <> 'live', true) AS gone, \
           COALESCE(i.state = 'live' AND i.lease_until > now(), false) AS leased \
         FROM relay_commands c LEFT JOIN relay_instances i ON i.id = c.target WHERE c.id = $1",
    )
    .bind(id)
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|r| CommandState {
        result: r.get("result"),
        taken: r.get("taken"),
        target_gone: r.get("gone"),
        target_leased: r.get("leased"),
    }))
}

/// Withdraws command `id` if its target has not taken it: true when withdrawn (the target
/// will never take it).
pub(super) async fn withdraw_command(pool: &PgPool, id: i64) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        "UPDATE relay_commands SET taken_at = now(), done_at = now(), \
           result = '{\"err\":{\"code\":\"withdrawn\",\"message\":\"withdrawn: its target was taken over before it took it\"}}' \
         WHERE id = $1 AND taken_at IS NULL",
    )
    .bind(id)
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Stores a command's answer and tells its sender: `d <id>`.
pub(super) async fn finish_command(
    pool: &PgPool,
    channel: &str,
    id: i64,
    result: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "WITH d AS (UPDATE relay_commands SET result = $2, done_at = now() WHERE id = $1 RETURNING id) \
         SELECT pg_notify($3, 'd ' || id) FROM d",
    )
    .bind(id)
    .bind(result)
    .bind(channel)
    .execute(pool)
    .await?;
    Ok(())
}

/// Forgets answered commands older than ten minutes.
pub(super) async fn prune_commands(pool: &PgPool) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM relay_commands WHERE done_at < now() - interval '10 minutes'")
        .execute(pool)
        .await?;
    Ok(())
}
