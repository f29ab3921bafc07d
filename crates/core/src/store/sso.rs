//! The single sign-on tables, read and written directly: identities at an OpenID provider
//! bound to users, and the sign-ins under way (see [`crate::people`], "sso").

use super::{Pool, Store, StoreError};

/// An identity at a provider (`issuer` + its `sub`) bound to a user.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct IdentityRecord {
    pub issuer: String,
    pub subject: String,
    pub user_id: String,
    pub email: Option<String>,
    pub created_at: i64,
    pub created_by: Option<String>,
    pub last_sign_in_at: Option<i64>,
}

/// A sign-in under way: what the callback needs to finish it, kept under the state's hash.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct PendingSsoRecord {
    pub state_hash: String,
    pub nonce: String,
    pub verifier: String,
    pub next: String,
    pub invite_hash: Option<String>,
    pub created_at: i64,
    pub expires_at: i64,
}

const IDENTITY_COLUMNS: &str =
    "issuer, subject, user_id, email, created_at, created_by, last_sign_in_at";
const PENDING_COLUMNS: &str =
    "state_hash, nonce, verifier, next, invite_hash, created_at, expires_at";

impl Store {
    fn sso_pool(&self) -> &Pool {
        &self.inner.pool
    }

    /// Keeps a sign-in under way, and drops the ones that expired.
    pub async fn insert_sso_pending(&self, r: &PendingSsoRecord) -> Result<(), StoreError> {
        on_pool!(self.sso_pool(), |p| sqlx::query(
            "DELETE FROM sso_pending WHERE expires_at <= $1"
        )
        .bind(r.created_at)
        .execute(p)
        .await
        .map(|_| ()))
        .map_err(StoreError::query("prune sign-ins under way"))?;
        on_pool!(self.sso_pool(), |p| sqlx::query(
            "INSERT INTO sso_pending (state_hash, nonce, verifier, next, invite_hash, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)"
        )
        .bind(&r.state_hash)
        .bind(&r.nonce)
        .bind(&r.verifier)
        .bind(&r.next)
        .bind(&r.invite_hash)
        .bind(r.created_at)
        .bind(r.expires_at)
        .execute(p)
        .await
        .map(|_| ()))
        .map_err(StoreError::query("keep a sign-in under way"))
    }

    /// Takes a sign-in under way out of the store: only one caller ever gets it (also across
    /// relays sharing the store), expired or not (the caller checks `expires_at`).
    pub async fn take_sso_pending(
        &self,
        state_hash: &str,
    ) -> Result<Option<PendingSsoRecord>, StoreError> {
        let sql =
            format!("DELETE FROM sso_pending WHERE state_hash = $1 RETURNING {PENDING_COLUMNS}");
        on_pool!(self.sso_pool(), |p| sqlx::query_as(sqlx::AssertSqlSafe(
            sql
        ))
        .bind(state_hash)
        .fetch_optional(p)
        .await)
        .map_err(StoreError::query("take a sign-in under way"))
    }

    pub async fn identity(
        &self,
        issuer: &str,
        subject: &str,
    ) -> Result<Option<IdentityRecord>, StoreError> {
        let sql = format!(
            "SELECT {IDENTITY_COLUMNS} FROM user_identities WHERE issuer = $1 AND subject = $2"
        );
        on_pool!(self.sso_pool(), |p| sqlx::query_as(sqlx::AssertSqlSafe(
            sql
        ))
        .bind(issuer)
        .bind(subject)
        .fetch_optional(p)
        .await)
        .map_err(StoreError::query("read an identity"))
    }

    /// Identities, of one user when given.
    pub async fn identities(
        &self,
        user_id: Option<&str>,
    ) -> Result<Vec<IdentityRecord>, StoreError> {
        let sql = format!(
            "SELECT {IDENTITY_COLUMNS} FROM user_identities WHERE ($1 IS NULL OR user_id = $1) ORDER BY created_at, subject"
        );
        on_pool!(self.sso_pool(), |p| sqlx::query_as(sqlx::AssertSqlSafe(
            sql
        ))
        .bind(user_id)
        .fetch_all(p)
        .await)
        .map_err(StoreError::query("read identities"))
    }

    /// Binds an identity; false when it is already bound (to anyone).
    pub async fn insert_identity(&self, r: &IdentityRecord) -> Result<bool, StoreError> {
        on_pool!(self.sso_pool(), |p| sqlx::query(
            "INSERT INTO user_identities (issuer, subject, user_id, email, created_at, created_by, last_sign_in_at) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (issuer, subject) DO NOTHING"
        )
        .bind(&r.issuer)
        .bind(&r.subject)
        .bind(&r.user_id)
        .bind(&r.email)
        .bind(r.created_at)
        .bind(&r.created_by)
        .bind(r.last_sign_in_at)
        .execute(p)
        .await
        .map(|r| r.rows_affected() == 1))
        .map_err(StoreError::query("bind an identity"))
    }

    pub async fn touch_identity(
        &self,
        issuer: &str,
        subject: &str,
        email: Option<&str>,
        now: i64,
    ) -> Result<(), StoreError> {
        on_pool!(self.sso_pool(), |p| sqlx::query(
            "UPDATE user_identities SET last_sign_in_at = $3, email = COALESCE($4, email) WHERE issuer = $1 AND subject = $2"
        )
        .bind(issuer)
        .bind(subject)
        .bind(now)
        .bind(email)
        .execute(p)
        .await
        .map(|_| ()))
        .map_err(StoreError::query("note a sign-in"))
    }

    /// Unbinds an identity from a user; true when it was bound to them.
    pub async fn delete_identity(
        &self,
        user_id: &str,
        issuer: &str,
        subject: &str,
    ) -> Result<bool, StoreError> {
        on_pool!(self.sso_pool(), |p| sqlx::query(
            "DELETE FROM user_identities WHERE user_id = $1 AND issuer = $2 AND subject = $3"
        )
        .bind(user_id)
        .bind(issuer)
        .bind(subject)
        .execute(p)
        .await
        .map(|r| r.rows_affected() > 0))
        .map_err(StoreError::query("unbind an identity"))
    }
}
