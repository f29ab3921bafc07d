//! The delivery trail of notifications: what happened to each outbox row (queued, sent,
//! accepted by a push service, failed and why, opened, skipped, given up), read per request or
//! per notification, and the outbox rows of one request (re-notify and escalation read them).

use serde::{Deserialize, Serialize};

use super::tables::OUTBOX_COLUMNS;
use super::{OutboxRecord, Pool, Store, StoreError};

/// One step of one notification's delivery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, sqlx::FromRow)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryRecord {
    /// The outbox row (the message id).
    pub outbox_id: String,
    pub request_id: Option<String>,
    /// As stored in the outbox: a webhook's name or `push:<endpoint>`.
    pub target: String,
    /// `queued`, `sent`, `accepted`, `failed`, `opened`, `skipped`, `given-up`.
    pub status: String,
    /// Why: the HTTP status, the push service's answer, the network error, what queued it.
    pub detail: Option<String>,
    /// Unix ms.
    pub at: i64,
}

const COLUMNS: &str = "outbox_id, request_id, target, status, detail, at";

impl Store {
    pub async fn record_delivery(&self, d: &DeliveryRecord) -> Result<(), StoreError> {
        on_pool!(&self.inner.pool, |p| sqlx::query(
            "INSERT INTO notify_deliveries (outbox_id, request_id, target, status, detail, at) VALUES ($1, $2, $3, $4, $5, $6)"
        )
        .bind(&d.outbox_id)
        .bind(&d.request_id)
        .bind(&d.target)
        .bind(&d.status)
        .bind(&d.detail)
        .bind(d.at)
        .execute(p)
        .await
        .map(|_| ()))
        .map_err(StoreError::query("record a delivery step"))
    }

    /// A request's trail, oldest first (at most `limit` steps).
    pub async fn deliveries_for_request(
        &self,
        request_id: &str,
        limit: i64,
    ) -> Result<Vec<DeliveryRecord>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM notify_deliveries WHERE request_id = $1 ORDER BY at, id LIMIT $2"
        );
        on_pool!(&self.inner.pool, |p| sqlx::query_as(sqlx::AssertSqlSafe(
            sql
        ))
        .bind(request_id)
        .bind(limit)
        .fetch_all(p)
        .await)
        .map_err(StoreError::query("read a delivery trail"))
    }

    /// One notification's trail, oldest first.
    pub async fn deliveries_for_notification(
        &self,
        outbox_id: &str,
    ) -> Result<Vec<DeliveryRecord>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM notify_deliveries WHERE outbox_id = $1 ORDER BY at, id LIMIT 500"
        );
        on_pool!(&self.inner.pool, |p| sqlx::query_as(sqlx::AssertSqlSafe(
            sql
        ))
        .bind(outbox_id)
        .fetch_all(p)
        .await)
        .map_err(StoreError::query("read a delivery trail"))
    }

    /// Every outbox row of a request, oldest first.
    pub async fn notifications_for_request(
        &self,
        request_id: &str,
    ) -> Result<Vec<OutboxRecord>, StoreError> {
        let sql = format!(
            "SELECT {OUTBOX_COLUMNS} FROM notify_outbox WHERE request_id = $1 ORDER BY created_at, id"
        );
        on_pool!(&self.inner.pool, |p| sqlx::query_as(sqlx::AssertSqlSafe(
            sql
        ))
        .bind(request_id)
        .fetch_all(p)
        .await)
        .map_err(StoreError::query("read a request's notifications"))
    }

    /// One outbox row.
    pub async fn notification(&self, id: &str) -> Result<Option<OutboxRecord>, StoreError> {
        let sql = format!("SELECT {OUTBOX_COLUMNS} FROM notify_outbox WHERE id = $1");
        on_pool!(&self.inner.pool, |p| sqlx::query_as(sqlx::AssertSqlSafe(
            sql
        ))
        .bind(id)
        .fetch_optional(p)
        .await)
        .map_err(StoreError::query("read a notification"))
    }

    /// Whether any notification of the request was opened.
    pub async fn request_opened(&self, request_id: &str) -> Result<bool, StoreError> {
        on_pool!(&self.inner.pool, |p| sqlx::query_scalar::<_, i64>(
            "SELECT COUNT(*) FROM notify_deliveries WHERE request_id = $1 AND status = 'opened'"
        )
        .bind(request_id)
        .fetch_one(p)
        .await)
        .map(|n| n > 0)
        .map_err(StoreError::query("read a delivery trail"))
    }
}
