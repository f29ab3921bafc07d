//! The passkey tables, read and written directly: users' WebAuthn credentials (public keys)
//! and the one-use state of ceremonies in flight (see [`crate::people::Passkeys`]).

use super::{Pool, Store, StoreError};

/// A registered passkey, as kept (binary values base64url).
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct PasskeyRecord {
    /// The credential id, base64url.
    pub id: String,
    pub user_id: String,
    pub name: String,
    pub user_handle: String,
    pub static_state: String,
    pub dynamic_state: String,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
}

/// A WebAuthn ceremony in flight, keyed by its challenge.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct CeremonyRecord {
    pub challenge: String,
    pub kind: String,
    pub user_id: Option<String>,
    pub request_id: Option<String>,
    pub state: String,
    pub expires_at: i64,
}

const PASSKEY_COLUMNS: &str =
    "id, user_id, name, user_handle, static_state, dynamic_state, created_at, last_used_at";

impl Store {
    fn passkey_pool(&self) -> &Pool {
        &self.inner.pool
    }

    pub async fn insert_passkey(&self, k: &PasskeyRecord) -> Result<(), StoreError> {
        on_pool!(self.passkey_pool(), |p| sqlx::query(
            "INSERT INTO passkeys (id, user_id, name, user_handle, static_state, dynamic_state, created_at, last_used_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
        )
        .bind(&k.id)
        .bind(&k.user_id)
        .bind(&k.name)
        .bind(&k.user_handle)
        .bind(&k.static_state)
        .bind(&k.dynamic_state)
        .bind(k.created_at)
        .bind(k.last_used_at)
        .execute(p)
        .await
        .map(|_| ()))
        .map_err(StoreError::query("add a passkey"))
    }

    /// A user's passkeys (`None`: everyone's), oldest first.
    pub async fn passkeys(&self, user_id: Option<&str>) -> Result<Vec<PasskeyRecord>, StoreError> {
        let sql = format!(
            "SELECT {PASSKEY_COLUMNS} FROM passkeys WHERE ($1 IS NULL OR user_id = $1) ORDER BY created_at, id"
        );
        on_pool!(self.passkey_pool(), |p| sqlx::query_as(
            sqlx::AssertSqlSafe(sql)
        )
        .bind(user_id)
        .fetch_all(p)
        .await)
        .map_err(StoreError::query("read passkeys"))
    }

    pub async fn passkey(&self, id: &str) -> Result<Option<PasskeyRecord>, StoreError> {
        let sql = format!("SELECT {PASSKEY_COLUMNS} FROM passkeys WHERE id = $1");
        on_pool!(self.passkey_pool(), |p| sqlx::query_as(
            sqlx::AssertSqlSafe(sql)
        )
        .bind(id)
        .fetch_optional(p)
        .await)
        .map_err(StoreError::query("read a passkey"))
    }

    /// Whether a user (`None`: anyone) has a passkey.
    pub async fn has_passkey(&self, user_id: Option<&str>) -> Result<bool, StoreError> {
        on_pool!(self.passkey_pool(), |p| sqlx::query_scalar::<_, i64>(
            "SELECT COUNT(*) FROM passkeys WHERE ($1 IS NULL OR user_id = $1)"
        )
        .bind(user_id)
        .fetch_one(p)
        .await)
        .map(|n| n > 0)
        .map_err(StoreError::query("count passkeys"))
    }

    /// Notes a use: its new counters and when.
    pub async fn touch_passkey(
        &self,
        id: &str,
        dynamic_state: &str,
        at: i64,
    ) -> Result<(), StoreError> {
        on_pool!(self.passkey_pool(), |p| sqlx::query(
            "UPDATE passkeys SET dynamic_state = $2, last_used_at = $3 WHERE id = $1"
        )
        .bind(id)
        .bind(dynamic_state)
        .bind(at)
        .execute(p)
        .await
        .map(|_| ()))
        .map_err(StoreError::query("note a passkey's use"))
    }

    /// Removes a passkey; true when there was one.
    pub async fn delete_passkey(&self, id: &str) -> Result<bool, StoreError> {
        on_pool!(self.passkey_pool(), |p| sqlx::query(
            "DELETE FROM passkeys WHERE id = $1"
        )
        .bind(id)
        .execute(p)
        .await
        .map(|r| r.rows_affected() == 1))
        .map_err(StoreError::query("remove a passkey"))
    }

    /// Keeps a ceremony's state (and forgets the expired ones).
    pub async fn put_ceremony(&self, c: &CeremonyRecord, now: i64) -> Result<(), StoreError> {
        on_pool!(self.passkey_pool(), |p| sqlx::query(
            "DELETE FROM passkey_ceremonies WHERE expires_at <= $1"
        )
        .bind(now)
        .execute(p)
        .await
        .map(|_| ()))
        .map_err(StoreError::query("forget expired passkey ceremonies"))?;
        on_pool!(self.passkey_pool(), |p| sqlx::query(
            "INSERT INTO passkey_ceremonies (challenge, kind, user_id, request_id, state, expires_at) VALUES ($1, $2, $3, $4, $5, $6)"
        )
        .bind(&c.challenge)
        .bind(&c.kind)
        .bind(&c.user_id)
        .bind(&c.request_id)
        .bind(&c.state)
        .bind(c.expires_at)
        .execute(p)
        .await
        .map(|_| ()))
        .map_err(StoreError::query("keep a passkey ceremony"))
    }

    /// Takes a ceremony by its challenge: once (also across relays: the row is deleted by the
    /// one call that gets it), and only before it expires.
    pub async fn take_ceremony(
        &self,
        challenge: &str,
        now: i64,
    ) -> Result<Option<CeremonyRecord>, StoreError> {
        let taken: Option<CeremonyRecord> = on_pool!(self.passkey_pool(), |p| sqlx::query_as(
            "DELETE FROM passkey_ceremonies WHERE challenge = $1 RETURNING challenge, kind, user_id, request_id, state, expires_at"
        )
        .bind(challenge)
        .fetch_optional(p)
        .await)
        .map_err(StoreError::query("take a passkey ceremony"))?;
        Ok(taken.filter(|c| c.expires_at > now))
    }
}
