//! Delivery trails over HTTP: what happened to a request's notifications (per channel and
//! device: queued, sent, accepted, failed and why, opened, skipped), a test notification per
//! channel with a trail of its own, and the open link (`/n/{id}?k=…`) that records a
//! notification as opened and sends the browser on to the request.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use codex_relay_core::store::{DeliveryRecord, OutboxRecord};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::AppState;
use crate::error::{ApiError, Body, ErrorBody};

/// One step of one notification's delivery.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryStep {
    /// The notification (the outbox row, `webhook-id`).
    pub notification_id: String,
    /// `webhook` or `push`.
    pub channel: String,
    /// A webhook's name, or `push-<hash>` for one browser.
    pub target: String,
    /// The browser's label, for push.
    pub device: Option<String>,
    /// `queued`, `sent`, `accepted` (a push service took it: 201), `failed`, `opened`,
    /// `skipped` (answered before it was sent).
    pub status: String,
    /// Why: the receiver's HTTP status, the push service's answer, the network error, or what
    /// queued it (first notice, re-notify, escalation and its reason, test).
    pub detail: Option<String>,
    /// Unix ms.
    pub at: i64,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Trail {
    pub deliveries: Vec<DeliveryStep>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Channels {
    /// Webhook names, and `push` when Web Push is on.
    pub channels: Vec<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TestRequest {
    /// A channel of `GET /api/notifications/channels`.
    pub channel: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TestQueued {
    /// The test notifications queued (one per browser for `push`): their trails are at
    /// `GET /api/notifications/{id}/deliveries`.
    pub notifications: Vec<String>,
}

#[derive(Deserialize)]
pub(crate) struct OpenQuery {
    #[serde(default)]
    k: String,
}

fn store_down(e: codex_relay_core::store::StoreError) -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "store_unavailable",
        e.to_string(),
    )
}

/// A push target as shown: `push-` and the first bytes of the endpoint's SHA-256.
pub(crate) fn shown_target(target: &str) -> String {
    match target.strip_prefix("push:") {
        Some(endpoint) => {
            use sha2::Digest;
            let h = sha2::Sha256::digest(endpoint.as_bytes());
            format!("push-{:02x}{:02x}{:02x}{:02x}", h[0], h[1], h[2], h[3])
        }
        None => target.to_owned(),
    }
}

async fn steps(st: &AppState, rows: Vec<DeliveryRecord>) -> Result<Trail, ApiError> {
    let labels: std::collections::HashMap<String, Option<String>> = st
        .relay
        .store()
        .push_subscriptions()
        .await
        .map_err(store_down)?
        .into_iter()
        .map(|s| (format!("push:{}", s.endpoint), s.label))
        .collect();
    Ok(Trail {
        deliveries: rows
            .into_iter()
            .map(|d| DeliveryStep {
                channel: if d.target.starts_with("push:") {
                    "push"
                } else {
                    "webhook"
                }
                .into(),
                device: labels.get(&d.target).cloned().flatten(),
                target: shown_target(&d.target),
                notification_id: d.outbox_id,
                status: d.status,
                detail: d.detail,
                at: d.at,
            })
            .collect(),
    })
}

#[utoipa::path(get, path = "/api/requests/{id}/deliveries", tag = "notifications",
    params(("id" = String, Path, description = "The request")),
    responses((status = 200, body = Trail), (status = 503, body = ErrorBody)))]
pub async fn for_request(
    State(st): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Trail>, ApiError> {
    let rows = st
        .relay
        .store()
        .deliveries_for_request(&id, 1000)
        .await
        .map_err(store_down)?;
    Ok(Json(steps(&st, rows).await?))
}

#[utoipa::path(get, path = "/api/notifications/{id}/deliveries", tag = "notifications",
    params(("id" = String, Path, description = "The notification (outbox row)")),
    responses((status = 200, body = Trail), (status = 503, body = ErrorBody)))]
pub async fn for_notification(
    State(st): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Trail>, ApiError> {
    let rows = st
        .relay
        .store()
        .deliveries_for_notification(&id)
        .await
        .map_err(store_down)?;
    Ok(Json(steps(&st, rows).await?))
}

#[utoipa::path(get, path = "/api/notifications/channels", tag = "notifications",
    responses((status = 200, body = Channels)))]
pub async fn channels(State(st): State<AppState>) -> Json<Channels> {
    Json(Channels {
        channels: st.opts.notify_channels.clone(),
    })
}

fn random_hex(n: usize) -> String {
    let mut b = vec![0u8; n];
    getrandom::fill(&mut b).expect("the operating system's random source");
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default()
}

#[utoipa::path(post, path = "/api/notifications/test", tag = "notifications",
    request_body = TestRequest,
    responses((status = 202, body = TestQueued), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn send_test(
    State(st): State<AppState>,
    Body(t): Body<TestRequest>,
) -> Result<(StatusCode, Json<TestQueued>), ApiError> {
    if !st.opts.notify_channels.contains(&t.channel) {
        return Err(ApiError::not_found(
            "unknown_channel",
            format!(
                "no notification channel {:?} (this relay has: {})",
                t.channel,
                st.opts.notify_channels.join(", ")
            ),
        ));
    }
    let store = st.relay.store();
    let targets: Vec<String> = if t.channel == "push" {
        store
            .push_subscriptions()
            .await
            .map_err(store_down)?
            .into_iter()
            .map(|s| format!("push:{}", s.endpoint))
            .collect()
    } else {
        vec![t.channel.clone()]
    };
    if targets.is_empty() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "no_devices",
            "no browser is subscribed to push: enable push on a device first",
        ));
    }
    let now = now_ms();
    let nonce = random_hex(6);
    // The payload is the notifier's message shape (crates/notify `Message`): a test has no
    // session or request; its open link leads to the Notifications view.
    let payload = serde_json::json!({
        "type": "test", "time": now, "sessionId": "",
        "title": "codex-relay test notification",
        "text": format!("A test of the channel {:?}: it reached you.", t.channel),
        "openUrl": "/#/notify",
    })
    .to_string();
    let mut ids = Vec::new();
    for target in targets {
        let row = OutboxRecord {
            id: format!("test_{nonce}_{}", shown_target(&target)),
            target: target.clone(),
            event: "test".into(),
            session_id: None,
            request_id: None,
            payload: payload.clone(),
            created_at: now,
            attempts: 0,
            next_at: now,
            state: "pending".into(),
            done_at: None,
            last_error: None,
            open_token: Some(random_hex(16)),
        };
        store.enqueue_notification(&row).await.map_err(store_down)?;
        store
            .record_delivery(&DeliveryRecord {
                outbox_id: row.id.clone(),
                request_id: None,
                target,
                status: "queued".into(),
                detail: Some("test, asked from the API".into()),
                at: now,
            })
            .await
            .map_err(store_down)?;
        ids.push(row.id);
    }
    Ok((
        StatusCode::ACCEPTED,
        Json(TestQueued { notifications: ids }),
    ))
}

/// Where an opened notification leads: its request's card, its session, or the
/// Notifications view (a test).
fn landing(row: &OutboxRecord) -> String {
    match (&row.session_id, &row.request_id) {
        (Some(s), Some(r)) if !s.is_empty() => format!("/#/s/{s}?request={r}"),
        (Some(s), None) if !s.is_empty() => format!("/#/s/{s}"),
        _ => "/#/notify".into(),
    }
}

/// `GET /n/{id}?k=…`: the notification's open link. With its token it records `opened` (once
/// per notification) and redirects to the request in the UI (which asks for a login as
/// usual); without it, it redirects to the UI and records nothing.
pub(crate) async fn open(
    State(st): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<OpenQuery>,
) -> Response {
    let store = st.relay.store();
    let row = store.notification(&id).await.ok().flatten();
    let to = match row {
        Some(row) => {
            let genuine = row.open_token.as_deref().is_some_and(|t| {
                use sha2::Digest;
                // Compared as hashes: the time taken says nothing about the token.
                sha2::Sha256::digest(t.as_bytes()) == sha2::Sha256::digest(q.k.as_bytes())
            });
            if genuine {
                let seen = store
                    .deliveries_for_notification(&row.id)
                    .await
                    .map(|t| t.iter().any(|d| d.status == "opened"))
                    .unwrap_or(false);
                if !seen {
                    let _ = store
                        .record_delivery(&DeliveryRecord {
                            outbox_id: row.id.clone(),
                            request_id: row.request_id.clone(),
                            target: row.target.clone(),
                            status: "opened".into(),
                            detail: Some("the notification's link was followed".into()),
                            at: now_ms(),
                        })
                        .await;
                }
            }
            landing(&row)
        }
        None => "/".into(),
    };
    let mut res = (StatusCode::SEE_OTHER, [(header::LOCATION, to)]).into_response();
    let h = res.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    res
}
