//! Notifications over HTTP: the outbox as the UI shows it (every notification's target,
//! state, attempts, last error; counts by state) and this relay's Web Push: its VAPID public
//! key, and the browsers' subscriptions.

use axum::Json;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use codex_relay_core::store::PushSubscriptionRecord;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::AppState;
use crate::error::{ApiError, Body, ErrorBody};

/// One notification as listed (its payload's title, never an answer link).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NotificationRow {
    /// The message id (`webhook-id`).
    pub id: String,
    /// A webhook's name, or `push-<hash>` for a browser.
    pub target: String,
    /// `request`, `reminder` (re-notify), `escalation`, `turn-completed`, `turn-failed`, `test`.
    pub event: String,
    pub title: Option<String>,
    pub session_id: Option<String>,
    pub request_id: Option<String>,
    /// `pending` (being retried), `delivered`, `skipped`, `failed` (given up).
    pub state: String,
    pub attempts: i64,
    pub created_at: i64,
    pub next_at: Option<i64>,
    pub done_at: Option<i64>,
    pub last_error: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct NotificationList {
    pub notifications: Vec<NotificationRow>,
    /// How many notifications are in each state.
    #[schema(value_type = Object)]
    pub counts: serde_json::Map<String, serde_json::Value>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// At most this many, newest first (default 100, at most 1000).
    pub limit: Option<i64>,
}

/// A browser's push subscription (`PushSubscription.toJSON()`).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Subscribe {
    pub endpoint: String,
    pub keys: SubscribeKeys,
    #[serde(default)]
    pub label: Option<String>,
    /// Ignored (browsers send it).
    #[serde(default, rename = "expirationTime")]
    #[schema(value_type = Option<f64>)]
    pub expiration_time: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct SubscribeKeys {
    pub p256dh: String,
    pub auth: String,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct Unsubscribe {
    pub endpoint: String,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PushKey {
    /// The VAPID public key (`applicationServerKey`), base64url.
    pub public_key: String,
}

use crate::deliveries::shown_target;

#[utoipa::path(get, path = "/api/notifications", tag = "notifications", params(ListQuery),
    responses((status = 200, body = NotificationList), (status = 503, body = ErrorBody)))]
pub async fn list(
    State(st): State<AppState>,
    Query(q): Query<ListQuery>,
) -> Result<Json<NotificationList>, ApiError> {
    let store = st.relay.store();
    let limit = q.limit.unwrap_or(100).clamp(1, 1000);
    let rows = store.notifications(limit).await.map_err(store_down)?;
    let counts = store.outbox_counts().await.map_err(store_down)?;
    Ok(Json(NotificationList {
        notifications: rows
            .into_iter()
            .map(|r| {
                let title = serde_json::from_str::<serde_json::Value>(&r.payload)
                    .ok()
                    .and_then(|v| v["title"].as_str().map(str::to_owned));
                NotificationRow {
                    target: shown_target(&r.target),
                    next_at: (r.state == "pending").then_some(r.next_at),
                    id: r.id,
                    event: r.event,
                    title,
                    session_id: r.session_id,
                    request_id: r.request_id,
                    state: r.state,
                    attempts: r.attempts,
                    created_at: r.created_at,
                    done_at: r.done_at,
                    last_error: r.last_error,
                }
            })
            .collect(),
        counts: counts
            .into_iter()
            .map(|(k, n)| (k, serde_json::json!(n)))
            .collect(),
    }))
}

fn store_down(e: codex_relay_core::store::StoreError) -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "store_unavailable",
        e.to_string(),
    )
}

fn no_push() -> ApiError {
    ApiError::not_found(
        "push_off",
        "Web Push is off on this relay (serve runs it unless the notify file says push = false)",
    )
}

#[utoipa::path(get, path = "/api/push/key", tag = "notifications",
    responses((status = 200, body = PushKey), (status = 404, body = ErrorBody)))]
pub async fn key(State(st): State<AppState>) -> Result<Json<PushKey>, ApiError> {
    let key = st.opts.vapid_public_key.clone().ok_or_else(no_push)?;
    Ok(Json(PushKey { public_key: key }))
}

#[utoipa::path(post, path = "/api/push/subscriptions", tag = "notifications",
    request_body = Subscribe,
    responses((status = 201), (status = 404, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn subscribe(
    State(st): State<AppState>,
    who: Option<axum::Extension<crate::auth::Principal>>,
    Body(s): Body<Subscribe>,
) -> Result<StatusCode, ApiError> {
    if st.opts.vapid_public_key.is_none() {
        return Err(no_push());
    }
    if !(s.endpoint.starts_with("https://") || s.endpoint.starts_with("http://")) {
        return Err(ApiError::unprocessable(
            "invalid_subscription",
            "endpoint must be the push service's http(s) URL",
        ));
    }
    use base64::Engine;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let key = b64.decode(s.keys.p256dh.trim_end_matches('='));
    let auth = b64.decode(s.keys.auth.trim_end_matches('='));
    if !matches!((&key, &auth), (Ok(k), Ok(a)) if k.len() == 65 && a.len() == 16) {
        return Err(ApiError::unprocessable(
            "invalid_subscription",
            "keys.p256dh must be a 65-byte P-256 point and keys.auth 16 bytes, base64url",
        ));
    }
    st.relay
        .store()
        .upsert_push_subscription(&PushSubscriptionRecord {
            endpoint: s.endpoint,
            p256dh: s.keys.p256dh,
            auth: s.keys.auth,
            label: s.label.map(|l| l.chars().take(200).collect()),
            created_at: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as i64)
                .unwrap_or_default(),
            // Whose browser it is: escalation to `user:<name>` reaches it.
            user_id: match who.as_deref() {
                Some(crate::auth::Principal::User(g)) => Some(g.user_id.clone()),
                _ => None,
            },
        })
        .await
        .map_err(store_down)?;
    Ok(StatusCode::CREATED)
}

#[utoipa::path(post, path = "/api/push/unsubscribe", tag = "notifications",
    request_body = Unsubscribe, responses((status = 204)))]
pub async fn unsubscribe(
    State(st): State<AppState>,
    Body(u): Body<Unsubscribe>,
) -> Result<StatusCode, ApiError> {
    st.relay
        .store()
        .delete_push_subscription(&u.endpoint)
        .await
        .map_err(store_down)?;
    Ok(StatusCode::NO_CONTENT)
}
