//! The small tables read and written directly (not through the event writer): approval
//! rules, the notification outbox, answer links (hashes only) and Web Push subscriptions.

use serde::{Deserialize, Serialize};

use super::{Pool, Store, StoreError};

/// One stored rule (its spec as JSON).
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct RuleRecord {
    pub name: String,
    pub spec: String,
    /// `file` or `api`.
    pub source: String,
    pub created_at: i64,
    pub updated_at: i64,
}

/// One notification for one target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, sqlx::FromRow)]
#[serde(rename_all = "camelCase")]
pub struct OutboxRecord {
    /// The message id (`webhook-id`): the same on every attempt.
    pub id: String,
    pub target: String,
    /// `request`, `reminder` (re-notify), `escalation`, `turn-completed`, `turn-failed`, `test`.
    pub event: String,
    pub session_id: Option<String>,
    pub request_id: Option<String>,
    /// The notification as JSON text (never an answer link's token).
    pub payload: String,
    pub created_at: i64,
    pub attempts: i64,
    /// When the next attempt is due (Unix ms).
    pub next_at: i64,
    /// `pending`, `delivered`, `skipped` (no longer worth sending), `failed` (gave up).
    pub state: String,
    pub done_at: Option<i64>,
    pub last_error: Option<String>,
    /// The random token of the notification's open link (`/n/{id}?k=…`): whoever follows it
    /// marks the notification opened. Kept by the first relay that queued the row.
    #[serde(default, skip_serializing)]
    pub open_token: Option<String>,
}

/// An answer link, as kept: the hash of its token, never the token.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct AnswerLinkRecord {
    pub hash: String,
    pub request_id: String,
    pub session_id: String,
    pub expires_at: i64,
    pub used_at: Option<i64>,
    pub created_at: i64,
}

/// A browser's Web Push subscription (RFC 8030 endpoint, RFC 8291 keys).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, sqlx::FromRow)]
#[serde(rename_all = "camelCase")]
pub struct PushSubscriptionRecord {
    pub endpoint: String,
    /// The browser's P-256 public key, base64url.
    pub p256dh: String,
    /// The 16-byte authentication secret, base64url.
    pub auth: String,
    pub label: Option<String>,
    pub created_at: i64,
    /// The named user who subscribed this browser (`None`: the relay token's login).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
}

pub(super) const OUTBOX_COLUMNS: &str = "id, target, event, session_id, request_id, payload, created_at, attempts, next_at, state, done_at, last_error, open_token";

impl Store {
    fn pool(&self) -> &Pool {
        &self.inner.pool
    }

    pub async fn rules(&self) -> Result<Vec<RuleRecord>, StoreError> {
        on_pool!(self.pool(), |p| sqlx::query_as(
            "SELECT name, spec, source, created_at, updated_at FROM rules ORDER BY name"
        )
        .fetch_all(p)
        .await)
        .map_err(StoreError::query("read rules"))
    }

    pub async fn upsert_rule(&self, r: &RuleRecord) -> Result<(), StoreError> {
        on_pool!(self.pool(), |p| sqlx::query(
            "INSERT INTO rules (name, spec, source, created_at, updated_at) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (name) DO UPDATE SET spec = excluded.spec, source = excluded.source, updated_at = excluded.updated_at"
        )
        .bind(&r.name)
        .bind(&r.spec)
        .bind(&r.source)
        .bind(r.created_at)
        .bind(r.updated_at)
        .execute(p)
        .await
        .map(|_| ()))
        .map_err(StoreError::query("write a rule"))
    }

    /// Deletes a rule; true when there was one.
    pub async fn delete_rule(&self, name: &str) -> Result<bool, StoreError> {
        on_pool!(self.pool(), |p| sqlx::query(
            "DELETE FROM rules WHERE name = $1"
        )
        .bind(name)
        .execute(p)
        .await
        .map(|r| r.rows_affected() > 0))
        .map_err(StoreError::query("delete a rule"))
    }

    /// Queues a notification; false when a row of that id was already there (another relay of
    /// a shared store, or an earlier pass, queued it): the id is what deduplicates.
    pub async fn enqueue_notification(&self, r: &OutboxRecord) -> Result<bool, StoreError> {
        on_pool!(self.pool(), |p| sqlx::query(
            "INSERT INTO notify_outbox (id, target, event, session_id, request_id, payload, created_at, attempts, next_at, state, done_at, last_error, open_token) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT (id) DO NOTHING"
        )
        .bind(&r.id)
        .bind(&r.target)
        .bind(&r.event)
        .bind(&r.session_id)
        .bind(&r.request_id)
        .bind(&r.payload)
        .bind(r.created_at)
        .bind(r.attempts)
        .bind(r.next_at)
        .bind(&r.state)
        .bind(r.done_at)
        .bind(&r.last_error)
        .bind(&r.open_token)
        .execute(p)
        .await
        .map(|r| r.rows_affected() == 1))
        .map_err(StoreError::query("queue a notification"))
    }

    /// Pending notifications due at `now`, oldest due first.
    pub async fn due_notifications(
        &self,
        now: i64,
        limit: i64,
    ) -> Result<Vec<OutboxRecord>, StoreError> {
        let sql = format!(
            "SELECT {OUTBOX_COLUMNS} FROM notify_outbox WHERE state = 'pending' AND next_at <= $1 ORDER BY next_at, id LIMIT $2"
        );
        on_pool!(self.pool(), |p| sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(now)
            .bind(limit)
            .fetch_all(p)
            .await)
        .map_err(StoreError::query("read due notifications"))
    }

    /// When the next pending notification is due, if any.
    pub async fn next_notification_at(&self) -> Result<Option<i64>, StoreError> {
        on_pool!(self.pool(), |p| sqlx::query_scalar(
            "SELECT MIN(next_at) FROM notify_outbox WHERE state = 'pending'"
        )
        .fetch_one(p)
        .await)
        .map_err(StoreError::query("read the outbox"))
    }

    /// Records an attempt's outcome (attempts, next try, state, error).
    pub async fn update_notification(&self, r: &OutboxRecord) -> Result<(), StoreError> {
        on_pool!(self.pool(), |p| sqlx::query(
            "UPDATE notify_outbox SET attempts = $2, next_at = $3, state = $4, done_at = $5, last_error = $6 WHERE id = $1"
        )
        .bind(&r.id)
        .bind(r.attempts)
        .bind(r.next_at)
        .bind(&r.state)
        .bind(r.done_at)
        .bind(&r.last_error)
        .execute(p)
        .await
        .map(|_| ()))
        .map_err(StoreError::query("record a delivery"))
    }

    /// Takes a due notification for one attempt: true for the one caller (of any relay on
    /// this store) that moved its next try from `due` to `lease_until`.
    pub async fn claim_notification(
        &self,
        id: &str,
        due: i64,
        lease_until: i64,
    ) -> Result<bool, StoreError> {
        on_pool!(self.pool(), |p| sqlx::query(
            "UPDATE notify_outbox SET next_at = $3 WHERE id = $1 AND state = 'pending' AND next_at = $2"
        )
        .bind(id)
        .bind(due)
        .bind(lease_until)
        .execute(p)
        .await
        .map(|r| r.rows_affected() == 1))
        .map_err(StoreError::query("claim a notification"))
    }

    /// Notifications of a request not yet sent, given up because it was answered first:
    /// `(id, target)` of each row this call skipped (none for a relay that lost the race).
    pub async fn skip_notifications_for(
        &self,
        request_id: &str,
        now: i64,
    ) -> Result<Vec<(String, String)>, StoreError> {
        on_pool!(self.pool(), |p| sqlx::query_as(
            "UPDATE notify_outbox SET state = 'skipped', done_at = $2, last_error = 'answered before it was sent' WHERE request_id = $1 AND state = 'pending' RETURNING id, target"
        )
        .bind(request_id)
        .bind(now)
        .fetch_all(p)
        .await)
        .map_err(StoreError::query("skip notifications"))
    }

    /// The newest notifications, newest first.
    pub async fn notifications(&self, limit: i64) -> Result<Vec<OutboxRecord>, StoreError> {
        let sql = format!(
            "SELECT {OUTBOX_COLUMNS} FROM notify_outbox ORDER BY created_at DESC, id LIMIT $1"
        );
        on_pool!(self.pool(), |p| sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(limit)
            .fetch_all(p)
            .await)
        .map_err(StoreError::query("read notifications"))
    }

    /// Notifications by state: `(state, count)`.
    pub async fn outbox_counts(&self) -> Result<Vec<(String, i64)>, StoreError> {
        on_pool!(self.pool(), |p| sqlx::query_as(
            "SELECT state, COUNT(*) FROM notify_outbox GROUP BY state ORDER BY state"
        )
        .fetch_all(p)
        .await)
        .map_err(StoreError::query("count notifications"))
    }

    pub async fn insert_answer_link(&self, r: &AnswerLinkRecord) -> Result<(), StoreError> {
        on_pool!(self.pool(), |p| sqlx::query(
            "INSERT INTO answer_links (hash, request_id, session_id, expires_at, used_at, created_at) VALUES ($1, $2, $3, $4, $5, $6)"
        )
        .bind(&r.hash)
        .bind(&r.request_id)
        .bind(&r.session_id)
        .bind(r.expires_at)
        .bind(r.used_at)
        .bind(r.created_at)
        .execute(p)
        .await
        .map(|_| ()))
        .map_err(StoreError::query("keep an answer link's hash"))
    }

    pub async fn answer_link(&self, hash: &str) -> Result<Option<AnswerLinkRecord>, StoreError> {
        on_pool!(self.pool(), |p| sqlx::query_as(
            "SELECT hash, request_id, session_id, expires_at, used_at, created_at FROM answer_links WHERE hash = $1"
        )
        .bind(hash)
        .fetch_optional(p)
        .await)
        .map_err(StoreError::query("read an answer link"))
    }

    /// Marks a link used; true only for the call that did (single use, also across relays
    /// sharing the store).
    pub async fn use_answer_link(&self, hash: &str, now: i64) -> Result<bool, StoreError> {
        on_pool!(self.pool(), |p| sqlx::query(
            "UPDATE answer_links SET used_at = $2 WHERE hash = $1 AND used_at IS NULL"
        )
        .bind(hash)
        .bind(now)
        .execute(p)
        .await
        .map(|r| r.rows_affected() == 1))
        .map_err(StoreError::query("use an answer link"))
    }

    /// Forgets links that expired before `before`.
    pub async fn prune_answer_links(&self, before: i64) -> Result<u64, StoreError> {
        on_pool!(self.pool(), |p| sqlx::query(
            "DELETE FROM answer_links WHERE expires_at < $1"
        )
        .bind(before)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))
        .map_err(StoreError::query("prune answer links"))
    }

    pub async fn upsert_push_subscription(
        &self,
        r: &PushSubscriptionRecord,
    ) -> Result<(), StoreError> {
        on_pool!(self.pool(), |p| sqlx::query(
            "INSERT INTO push_subscriptions (endpoint, p256dh, auth, label, created_at, user_id) VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (endpoint) DO UPDATE SET p256dh = excluded.p256dh, auth = excluded.auth, label = excluded.label, user_id = excluded.user_id"
        )
        .bind(&r.endpoint)
        .bind(&r.p256dh)
        .bind(&r.auth)
        .bind(&r.label)
        .bind(r.created_at)
        .bind(&r.user_id)
        .execute(p)
        .await
        .map(|_| ()))
        .map_err(StoreError::query("keep a push subscription"))
    }

    pub async fn push_subscriptions(&self) -> Result<Vec<PushSubscriptionRecord>, StoreError> {
        on_pool!(self.pool(), |p| sqlx::query_as(
            "SELECT endpoint, p256dh, auth, label, created_at, user_id FROM push_subscriptions ORDER BY created_at, endpoint"
        )
        .fetch_all(p)
        .await)
        .map_err(StoreError::query("read push subscriptions"))
    }

    /// Forgets a subscription (the browser unsubscribed, or its push service said it is gone).
    pub async fn delete_push_subscription(&self, endpoint: &str) -> Result<bool, StoreError> {
        on_pool!(self.pool(), |p| sqlx::query(
            "DELETE FROM push_subscriptions WHERE endpoint = $1"
        )
        .bind(endpoint)
        .execute(p)
        .await
        .map(|r| r.rows_affected() > 0))
        .map_err(StoreError::query("delete a push subscription"))
    }
}
