//! The people tables, read and written directly: users, personal API tokens (hashes only),
//! invitations (hashes only) and the append-only audit log (see [`crate::people`]).

use super::{Pool, Store, StoreError};

/// A named user.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct UserRecord {
    pub id: String,
    pub name: String,
    pub role: String,
    pub created_at: i64,
    pub created_by: Option<String>,
    pub disabled_at: Option<i64>,
}

/// A personal API token, as kept: the SHA-256 of its secret, never the secret.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct TokenRecord {
    pub id: String,
    pub hash: String,
    pub user_id: String,
    pub label: Option<String>,
    pub role: String,
    /// JSON array of session ids; `None`: every session.
    pub sessions: Option<String>,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
    /// When it stops working (Unix ms); `None`: never (until revoked). SSO logins' tokens end.
    pub expires_at: Option<i64>,
}

/// A token with its user, as a request presenting it is checked.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct TokenUse {
    pub id: String,
    pub user_id: String,
    pub user_name: String,
    pub user_role: String,
    pub role: String,
    pub sessions: Option<String>,
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
    pub disabled_at: Option<i64>,
    pub expires_at: Option<i64>,
}

/// An invitation, as kept: the SHA-256 of its code.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct InviteRecord {
    pub hash: String,
    pub id: String,
    pub name: String,
    pub role: String,
    pub sessions: Option<String>,
    pub created_at: i64,
    pub created_by: Option<String>,
    pub expires_at: i64,
    pub used_at: Option<i64>,
    pub user_id: Option<String>,
}

/// One line of the audit log.
#[derive(Debug, Clone, PartialEq, Default, sqlx::FromRow)]
pub struct AuditRecord {
    /// Assigned by the store (ignored on insert).
    pub seq: i64,
    pub at: i64,
    pub user_id: Option<String>,
    pub user_name: String,
    pub role: String,
    pub front: String,
    pub device: Option<String>,
    pub ip: Option<String>,
    pub instance: Option<String>,
    pub action: String,
    pub session_id: Option<String>,
    pub request_id: Option<String>,
    pub decision: Option<String>,
    pub rule: Option<String>,
    /// JSON text.
    pub detail: Option<String>,
}

/// Which audit lines to read (every `None` matches all).
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    /// A user's id or name.
    pub user: Option<String>,
    /// An action, or a prefix of one ending in `.` (`session.`).
    pub action: Option<String>,
    pub session: Option<String>,
    /// From this Unix ms on (inclusive).
    pub since: Option<i64>,
    /// Before this Unix ms (exclusive).
    pub until: Option<i64>,
    /// Lines after this `seq` only (paging).
    pub after: Option<i64>,
    pub limit: i64,
}

const USER_COLUMNS: &str = "id, name, role, created_at, created_by, disabled_at";
const TOKEN_COLUMNS: &str =
    "id, hash, user_id, label, role, sessions, created_at, last_used_at, revoked_at, expires_at";
const INVITE_COLUMNS: &str =
    "hash, id, name, role, sessions, created_at, created_by, expires_at, used_at, user_id";
const AUDIT_COLUMNS: &str = "seq, at, user_id, user_name, role, front, device, ip, instance, action, session_id, request_id, decision, rule, detail";

impl Store {
    fn people_pool(&self) -> &Pool {
        &self.inner.pool
    }

    pub async fn insert_user(&self, u: &UserRecord) -> Result<(), StoreError> {
        on_pool!(self.people_pool(), |p| sqlx::query(
            "INSERT INTO users (id, name, role, created_at, created_by, disabled_at) VALUES ($1, $2, $3, $4, $5, $6)"
        )
        .bind(&u.id)
        .bind(&u.name)
        .bind(&u.role)
        .bind(u.created_at)
        .bind(&u.created_by)
        .bind(u.disabled_at)
        .execute(p)
        .await
        .map(|_| ()))
        .map_err(StoreError::query("add a user"))
    }

    pub async fn users(&self) -> Result<Vec<UserRecord>, StoreError> {
        let sql = format!("SELECT {USER_COLUMNS} FROM users ORDER BY created_at, id");
        on_pool!(self.people_pool(), |p| sqlx::query_as(sqlx::AssertSqlSafe(
            sql
        ))
        .fetch_all(p)
        .await)
        .map_err(StoreError::query("read users"))
    }

    /// A user by id or by name.
    pub async fn user(&self, id_or_name: &str) -> Result<Option<UserRecord>, StoreError> {
        let sql = format!("SELECT {USER_COLUMNS} FROM users WHERE id = $1 OR name = $1");
        on_pool!(self.people_pool(), |p| sqlx::query_as(sqlx::AssertSqlSafe(
            sql
        ))
        .bind(id_or_name)
        .fetch_optional(p)
        .await)
        .map_err(StoreError::query("read a user"))
    }

    /// Sets a user's role and whether it is disabled; true when the user exists.
    pub async fn update_user(
        &self,
        id: &str,
        role: &str,
        disabled_at: Option<i64>,
    ) -> Result<bool, StoreError> {
        on_pool!(self.people_pool(), |p| sqlx::query(
            "UPDATE users SET role = $2, disabled_at = $3 WHERE id = $1"
        )
        .bind(id)
        .bind(role)
        .bind(disabled_at)
        .execute(p)
        .await
        .map(|r| r.rows_affected() > 0))
        .map_err(StoreError::query("change a user"))
    }

    pub async fn insert_token(&self, t: &TokenRecord) -> Result<(), StoreError> {
        on_pool!(self.people_pool(), |p| sqlx::query(
            "INSERT INTO api_tokens (id, hash, user_id, label, role, sessions, created_at, last_used_at, revoked_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
        )
        .bind(&t.id)
        .bind(&t.hash)
        .bind(&t.user_id)
        .bind(&t.label)
        .bind(&t.role)
        .bind(&t.sessions)
        .bind(t.created_at)
        .bind(t.last_used_at)
        .bind(t.revoked_at)
        .bind(t.expires_at)
        .execute(p)
        .await
        .map(|_| ()))
        .map_err(StoreError::query("add a token"))
    }

    /// Tokens, newest first; of one user when given.
    pub async fn tokens(&self, user_id: Option<&str>) -> Result<Vec<TokenRecord>, StoreError> {
        let sql = format!(
            "SELECT {TOKEN_COLUMNS} FROM api_tokens WHERE ($1 IS NULL OR user_id = $1) ORDER BY created_at DESC, id"
        );
        on_pool!(self.people_pool(), |p| sqlx::query_as(sqlx::AssertSqlSafe(
            sql
        ))
        .bind(user_id)
        .fetch_all(p)
        .await)
        .map_err(StoreError::query("read tokens"))
    }

    /// The token whose secret hashes to `hash`, with its user.
    pub async fn token_use(&self, hash: &str) -> Result<Option<TokenUse>, StoreError> {
        on_pool!(self.people_pool(), |p| sqlx::query_as(
            "SELECT t.id, t.user_id, u.name AS user_name, u.role AS user_role, t.role, t.sessions, t.last_used_at, t.revoked_at, u.disabled_at, t.expires_at \
             FROM api_tokens t JOIN users u ON u.id = t.user_id WHERE t.hash = $1"
        )
        .bind(hash)
        .fetch_optional(p)
        .await)
        .map_err(StoreError::query("check a token"))
    }

    pub async fn touch_token(&self, id: &str, now: i64) -> Result<(), StoreError> {
        on_pool!(self.people_pool(), |p| sqlx::query(
            "UPDATE api_tokens SET last_used_at = $2 WHERE id = $1"
        )
        .bind(id)
        .bind(now)
        .execute(p)
        .await
        .map(|_| ()))
        .map_err(StoreError::query("note a token's use"))
    }

    /// Revokes a token; true when it was live.
    /// Whether token `id` still lets its holder in: known, not revoked, its user not disabled.
    pub async fn token_active(&self, id: &str) -> Result<bool, StoreError> {
        on_pool!(self.people_pool(), |p| sqlx::query_scalar::<_, i64>(
            "SELECT COUNT(*) FROM api_tokens t JOIN users u ON u.id = t.user_id \
             WHERE t.id = $1 AND t.revoked_at IS NULL AND u.disabled_at IS NULL"
        )
        .bind(id)
        .fetch_one(p)
        .await
        .map(|n| n > 0))
        .map_err(StoreError::query("check a token"))
    }

    pub async fn revoke_token(&self, id: &str, now: i64) -> Result<bool, StoreError> {
        on_pool!(self.people_pool(), |p| sqlx::query(
            "UPDATE api_tokens SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL"
        )
        .bind(id)
        .bind(now)
        .execute(p)
        .await
        .map(|r| r.rows_affected() > 0))
        .map_err(StoreError::query("revoke a token"))
    }

    pub async fn insert_invite(&self, i: &InviteRecord) -> Result<(), StoreError> {
        on_pool!(self.people_pool(), |p| sqlx::query(
            "INSERT INTO invitations (hash, id, name, role, sessions, created_at, created_by, expires_at, used_at, user_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
        )
        .bind(&i.hash)
        .bind(&i.id)
        .bind(&i.name)
        .bind(&i.role)
        .bind(&i.sessions)
        .bind(i.created_at)
        .bind(&i.created_by)
        .bind(i.expires_at)
        .bind(i.used_at)
        .bind(&i.user_id)
        .execute(p)
        .await
        .map(|_| ()))
        .map_err(StoreError::query("add an invitation"))
    }

    pub async fn invite(&self, hash: &str) -> Result<Option<InviteRecord>, StoreError> {
        let sql = format!("SELECT {INVITE_COLUMNS} FROM invitations WHERE hash = $1");
        on_pool!(self.people_pool(), |p| sqlx::query_as(sqlx::AssertSqlSafe(
            sql
        ))
        .bind(hash)
        .fetch_optional(p)
        .await)
        .map_err(StoreError::query("read an invitation"))
    }

    pub async fn invites(&self) -> Result<Vec<InviteRecord>, StoreError> {
        let sql = format!("SELECT {INVITE_COLUMNS} FROM invitations ORDER BY created_at DESC, id");
        on_pool!(self.people_pool(), |p| sqlx::query_as(sqlx::AssertSqlSafe(
            sql
        ))
        .fetch_all(p)
        .await)
        .map_err(StoreError::query("read invitations"))
    }

    /// Uses an invitation for `user_id`; true only for the one call that did (single use,
    /// also across relays sharing the store), and only before it expires.
    pub async fn use_invite(
        &self,
        hash: &str,
        user_id: &str,
        now: i64,
    ) -> Result<bool, StoreError> {
        on_pool!(self.people_pool(), |p| sqlx::query(
            "UPDATE invitations SET used_at = $2, user_id = $3 WHERE hash = $1 AND used_at IS NULL AND expires_at > $2"
        )
        .bind(hash)
        .bind(now)
        .bind(user_id)
        .execute(p)
        .await
        .map(|r| r.rows_affected() == 1))
        .map_err(StoreError::query("use an invitation"))
    }

    /// Appends one line to the audit log.
    pub async fn append_audit(&self, a: &AuditRecord) -> Result<(), StoreError> {
        on_pool!(self.people_pool(), |p| sqlx::query(
            "INSERT INTO audit_log (at, user_id, user_name, role, front, device, ip, instance, action, session_id, request_id, decision, rule, detail) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
        )
        .bind(a.at)
        .bind(&a.user_id)
        .bind(&a.user_name)
        .bind(&a.role)
        .bind(&a.front)
        .bind(&a.device)
        .bind(&a.ip)
        .bind(&a.instance)
        .bind(&a.action)
        .bind(&a.session_id)
        .bind(&a.request_id)
        .bind(&a.decision)
        .bind(&a.rule)
        .bind(&a.detail)
        .execute(p)
        .await
        .map(|_| ()))
        .map_err(StoreError::query("append to the audit log"))
    }

    /// Audit lines matching `f`, oldest first.
    pub async fn audit(&self, f: &AuditFilter) -> Result<Vec<AuditRecord>, StoreError> {
        let (action, prefix) = match &f.action {
            Some(a) if a.ends_with('.') => (None, Some(format!("{a}%"))),
            Some(a) => (Some(a.clone()), None),
            None => (None, None),
        };
        let sql = format!(
            "SELECT {AUDIT_COLUMNS} FROM audit_log WHERE ($1 IS NULL OR user_id = $1 OR user_name = $1) \
             AND ($2 IS NULL OR action = $2) AND ($3 IS NULL OR action LIKE $3) AND ($4 IS NULL OR session_id = $4) \
             AND ($5 IS NULL OR at >= $5) AND ($6 IS NULL OR at < $6) AND ($7 IS NULL OR seq > $7) ORDER BY seq LIMIT $8"
        );
        on_pool!(self.people_pool(), |p| sqlx::query_as(sqlx::AssertSqlSafe(
            sql
        ))
        .bind(&f.user)
        .bind(&action)
        .bind(&prefix)
        .bind(&f.session)
        .bind(f.since)
        .bind(f.until)
        .bind(f.after)
        .bind(f.limit)
        .fetch_all(p)
        .await)
        .map_err(StoreError::query("read the audit log"))
    }
}
