//! The durable outbox: a watcher queues one row per notification and target as the relay's
//! feed shows a request opening or a turn ending (never on the session's path), and a
//! deliverer sends due rows, each claimed in the store for one attempt, retried with doubling,
//! jittered delays until it is delivered, no longer worth sending, or given up.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use codex_relay_core::event::TurnEndStatus;
use codex_relay_core::store::{DeliveryRecord, OutboxRecord};
use codex_relay_core::{Ev, Relay, RelayEvent};
use serde_json::json;
use tokio::sync::broadcast::error::RecvError;

use crate::config::{EventKind, Format, NotifyConfig, Webhook};
use crate::message::{AnswerLinks, Message};
use crate::webpush::Vapid;

pub(crate) use codex_relay_core::time::now_ms;

/// Counters since the relay started, for metrics and the UI.
#[derive(Debug, Default)]
pub struct Stats {
    pub queued: AtomicU64,
    pub delivered: AtomicU64,
    /// Attempts that failed (each retry counts).
    pub failed_attempts: AtomicU64,
    pub given_up: AtomicU64,
    pub skipped: AtomicU64,
}

pub(crate) struct Inner {
    pub relay: Relay,
    pub config: NotifyConfig,
    pub public: String,
    pub http: reqwest::Client,
    pub vapid: Option<Vapid>,
    pub wake: tokio::sync::Notify,
    pub stats: Stats,
}

/// The push target of a subscription: `push:<endpoint>`.
const PUSH: &str = "push:";
/// How long one attempt may hold a row before another deliverer may take it.
const LEASE_MS: i64 = 30_000;
/// Attempts in flight at once.
const PARALLEL: usize = 8;

enum Failure {
    /// Try again later.
    Retry(String),
    /// Do not try again (the target said it is gone, or the row cannot be sent).
    Permanent(String),
}

impl Inner {
    fn targets(&self, event: EventKind) -> impl Iterator<Item = &Webhook> {
        self.config
            .webhooks
            .iter()
            .filter(move |w| w.events.contains(&event))
    }

    /// Queues `msg` for `target` as row `id` (`kind`: the row's event, `request`, `reminder`,
    /// `escalation`, or the message's for turn ends); the trail's first step says `why`. A row
    /// of that id already queued (by this relay or another of a shared store) is left alone.
    pub(crate) async fn queue_as(
        &self,
        id: String,
        kind: &str,
        target: &str,
        msg: &Message,
        why: &str,
    ) {
        let now = now_ms();
        let row = OutboxRecord {
            id,
            target: target.to_owned(),
            event: kind.to_owned(),
            session_id: Some(msg.session_id.clone()),
            request_id: msg.request_id.clone(),
            payload: serde_json::to_string(msg).expect("a message serializes"),
            created_at: now,
            attempts: 0,
            next_at: now,
            state: "pending".into(),
            done_at: None,
            last_error: None,
            open_token: Some(random_token()),
        };
        match self.relay.store().enqueue_notification(&row).await {
            Ok(true) => {
                self.stats.queued.fetch_add(1, Ordering::Relaxed);
                self.step(&row, "queued", Some(why.to_owned())).await;
                self.wake.notify_one();
            }
            Ok(false) => {}
            Err(e) => tracing::warn!(target, "could not queue a notification: {e}"),
        }
    }

    async fn queue(&self, key: &str, target: &str, msg: &Message) {
        let kind = msg.event().as_str();
        self.queue_as(
            format!("msg_{key}_{}", short(target)),
            kind,
            target,
            msg,
            "first notice",
        )
        .await;
    }

    /// Records one step of a row's delivery trail.
    pub(crate) async fn step(&self, row: &OutboxRecord, status: &str, detail: Option<String>) {
        let d = DeliveryRecord {
            outbox_id: row.id.clone(),
            request_id: row.request_id.clone(),
            target: row.target.clone(),
            status: status.to_owned(),
            detail,
            at: now_ms(),
        };
        if let Err(e) = self.relay.store().record_delivery(&d).await {
            tracing::warn!(id = %row.id, "could not record a delivery step: {e}");
        }
    }

    /// The push targets (`push:<endpoint>`) of every subscribed browser.
    pub(crate) async fn push_targets(&self) -> Vec<String> {
        self.push_targets_of(None).await
    }

    /// The push targets of the browsers user `user_id` subscribed (`None`: every browser).
    pub(crate) async fn push_targets_of(&self, user_id: Option<&str>) -> Vec<String> {
        if !(self.config.push && self.vapid.is_some()) {
            return Vec::new();
        }
        match self.relay.store().push_subscriptions().await {
            Ok(subs) => subs
                .into_iter()
                .filter(|s| user_id.is_none_or(|u| s.user_id.as_deref() == Some(u)))
                .map(|s| format!("{PUSH}{}", s.endpoint))
                .collect(),
            Err(e) => {
                tracing::warn!("could not read push subscriptions: {e}");
                Vec::new()
            }
        }
    }

    /// Queues what `msg` should reach: the webhooks that want its event and, for requests,
    /// every browser subscribed to push; targets kept for escalation wait for it. A request
    /// that reaches no channel at all escalates at once.
    async fn fan_out(&self, key: &str, msg: &Message) {
        let request = msg.event() == EventKind::Request;
        let mut first = 0;
        for w in self.targets(msg.event()) {
            if request && self.config.escalation_only(&w.name) {
                continue;
            }
            first += 1;
            self.queue(key, &w.name, msg).await;
        }
        if request && !self.config.escalation_only("push") {
            for t in self.push_targets().await {
                first += 1;
                self.queue(key, &t, msg).await;
            }
        }
        if request && first == 0 && !self.config.escalation.to.is_empty() {
            crate::reminders::escalate(self, key, msg, "no other channel to notify").await;
        }
    }

    /// Requests open now (at start, after the feed lagged): queued unless they were.
    async fn catch_up(&self) {
        for p in self.relay.pending(None) {
            self.fan_out(&p.id, &Message::request(&p, &self.public))
                .await;
        }
    }

    async fn on_event(&self, session: &str, env: &codex_relay_core::Envelope) {
        match &env.ev {
            Ev::RequestOpened { request } => {
                self.fan_out(&request.id, &Message::request(request, &self.public))
                    .await;
            }
            Ev::RequestResolved {
                id,
                decision,
                by,
                reason,
                by_user,
                ..
            } => {
                match self
                    .relay
                    .store()
                    .skip_notifications_for(id, now_ms())
                    .await
                {
                    Ok(rows) => {
                        self.stats
                            .skipped
                            .fetch_add(rows.len() as u64, Ordering::Relaxed);
                        for (outbox_id, target) in rows {
                            let d = DeliveryRecord {
                                outbox_id,
                                request_id: Some(id.clone()),
                                target,
                                status: "skipped".into(),
                                detail: Some("answered before it was sent".into()),
                                at: now_ms(),
                            };
                            let _ = self.relay.store().record_delivery(&d).await;
                        }
                    }
                    Err(e) => tracing::warn!("could not skip notifications: {e}"),
                }
                // Told after the notifications still queued for it were skipped (its own row
                // is not one of them).
                if self.targets(EventKind::RequestResolved).next().is_some() {
                    let mut r = json!({"decision": decision.as_str(), "by": by.as_str()});
                    if let Some(p) = by_user {
                        r["byUser"] = json!(p);
                    }
                    if let Some(reason) = reason {
                        r["reason"] = json!(reason);
                    }
                    let msg = Message::resolved(session, id, r, env.time, &self.public);
                    self.fan_out(&format!("{id}_resolved"), &msg).await;
                }
            }
            Ev::TurnEnd { status, error, .. } if env.agent.is_none() => {
                let failed = match status {
                    TurnEndStatus::Completed => false,
                    TurnEndStatus::Failed => true,
                    TurnEndStatus::Cancelled => return,
                };
                let event = if failed {
                    EventKind::TurnFailed
                } else {
                    EventKind::TurnCompleted
                };
                if self.targets(event).next().is_none() {
                    return;
                }
                let Ok(snap) = self.relay.status(session) else {
                    return;
                };
                let msg =
                    Message::turn_end(&snap, failed, error.as_deref(), env.time, &self.public);
                let key = format!(
                    "{}_{}",
                    env.turn.as_deref().unwrap_or("turn"),
                    event.as_str()
                );
                self.fan_out(&key, &msg).await;
            }
            _ => {}
        }
    }

    fn backoff(&self, attempts: i64) -> i64 {
        let cap = (self.config.retry_max_delay_secs.max(1) * 1000) as i64;
        let base = 1000i64
            .saturating_mul(1 << attempts.clamp(1, 20).saturating_sub(1))
            .min(cap);
        // ±20 % jitter, so many rows failing together do not retry together.
        let mut r = [0u8; 2];
        getrandom::fill(&mut r).expect("the operating system's random source");
        let jitter = (u16::from_le_bytes(r) as i64 % 401 - 200) * base / 1000;
        (base + jitter).max(250)
    }

    async fn answer_links(&self, msg: &Message) -> Option<AnswerLinks> {
        if !(self.config.answer_links && msg.answerable) {
            return None;
        }
        let request = msg.request_id.as_deref()?;
        let ttl = self.config.answer_link_ttl();
        let token = match self.relay.mint_answer_link(request, ttl).await {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(request, "no answer link for this notification: {e}");
                return None;
            }
        };
        let url = |action: &str| {
            format!(
                "{}/answer/{request}?t={token}&a={action}",
                self.public.trim_end_matches('/')
            )
        };
        Some(AnswerLinks {
            approve: url("approve"),
            deny: url("deny"),
            expires_at: now_ms() + ttl.as_millis() as i64,
        })
    }

    /// One attempt; `Ok` says how it went (`sent` or `accepted`, and the receiver's status).
    async fn send(
        &self,
        row: &OutboxRecord,
        msg: &Message,
    ) -> Result<(&'static str, String), Failure> {
        // A request answered in the meantime is not worth a notification any more (but for
        // the news that it was answered).
        if let Some(r) = &msg.request_id
            && msg.event() != EventKind::RequestResolved
            && self.relay.pending_by_id(r).is_none()
        {
            return Err(Failure::Permanent(
                "skipped: answered before it was sent".into(),
            ));
        }
        // The link that opens the request counts as opened when followed (`/n/{id}?k=…`).
        let mut msg = msg.clone();
        if let Some(token) = &row.open_token {
            msg.open_url = format!(
                "{}/n/{}?k={token}",
                self.public.trim_end_matches('/'),
                row.id
            );
        }
        let msg = &msg;
        if let Some(endpoint) = row.target.strip_prefix(PUSH) {
            return self.send_push(endpoint, msg).await;
        }
        let Some(w) = self.config.webhooks.iter().find(|w| w.name == row.target) else {
            return Err(Failure::Permanent(format!(
                "no webhook named {:?} in the notify file any more",
                row.target
            )));
        };
        let links = self.answer_links(msg).await;
        let req = match w.format {
            Format::Standard => {
                let body = serde_json::to_vec(&msg.standard(links.as_ref())).expect("JSON");
                let ts = now_ms() / 1000;
                let key = w
                    .secret
                    .as_deref()
                    .and_then(|s| crate::standard::secret_bytes(s).ok())
                    .ok_or_else(|| Failure::Permanent("the webhook's secret is gone".into()))?;
                self.http
                    .post(&w.url)
                    .header("content-type", "application/json")
                    .header("webhook-id", &row.id)
                    .header("webhook-timestamp", ts.to_string())
                    .header(
                        "webhook-signature",
                        crate::standard::sign(&key, &row.id, ts, &body),
                    )
                    .body(body)
            }
            Format::Slack => self
                .http
                .post(&w.url)
                .header("content-type", "application/json")
                .body(serde_json::to_vec(&msg.slack(links.as_ref())).expect("JSON")),
            Format::Ntfy => {
                let (body, headers) = msg.ntfy(links.as_ref());
                let mut req = self.http.post(&w.url).body(body);
                for (k, v) in headers {
                    req = req.header(k, v);
                }
                if let Some(token) = &w.secret {
                    req = req.bearer_auth(token);
                }
                req
            }
        };
        let res = req
            .send()
            .await
            .map_err(|e| Failure::Retry(error_chain(&e)))?;
        match res.status().as_u16() {
            200..=299 => Ok(("sent", format!("the receiver answered {}", res.status()))),
            410 => Err(Failure::Permanent("the receiver says 410 Gone".into())),
            code => Err(Failure::Retry(format!("the receiver answered {code}"))),
        }
    }

    async fn send_push(
        &self,
        endpoint: &str,
        msg: &Message,
    ) -> Result<(&'static str, String), Failure> {
        let vapid = self
            .vapid
            .as_ref()
            .ok_or_else(|| Failure::Permanent("push is off".into()))?;
        let subs = self
            .relay
            .store()
            .push_subscriptions()
            .await
            .map_err(|e| Failure::Retry(e.to_string()))?;
        let Some(sub) = subs.into_iter().find(|s| s.endpoint == endpoint) else {
            return Err(Failure::Permanent("the browser unsubscribed".into()));
        };
        use base64::Engine;
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let decode = |s: &str| b64.decode(s.trim_end_matches('='));
        let (Ok(key), Ok(auth)) = (decode(&sub.p256dh), decode(&sub.auth)) else {
            return Err(Failure::Permanent(
                "the subscription's keys are not base64url".into(),
            ));
        };
        let body = crate::webpush::encrypt(msg.push().to_string().as_bytes(), &key, &auth)
            .map_err(|e| Failure::Permanent(e.to_string()))?;
        let res = self
            .http
            .post(endpoint)
            .header("content-encoding", "aes128gcm")
            .header("content-type", "application/octet-stream")
            .header("ttl", "3600")
            .header("urgency", "high")
            .header("topic", topic(msg))
            .header(
                "authorization",
                vapid.authorization(endpoint, now_ms() / 1000),
            )
            .body(body)
            .send()
            .await
            .map_err(|e| Failure::Retry(error_chain(&e)))?;
        match res.status().as_u16() {
            // RFC 8030: 201 Created is the push service taking the message for the browser.
            201 => Ok((
                "accepted",
                format!("the push service answered {}", res.status()),
            )),
            200..=299 => Ok((
                "sent",
                format!("the push service answered {}", res.status()),
            )),
            404 | 410 => {
                // RFC 8030: the subscription is gone; forget it.
                let _ = self.relay.store().delete_push_subscription(endpoint).await;
                Err(Failure::Permanent(format!(
                    "the push service says {}: unsubscribed",
                    res.status()
                )))
            }
            code => Err(Failure::Retry(format!("the push service answered {code}"))),
        }
    }

    async fn attempt(self: Arc<Self>, mut row: OutboxRecord) {
        let outcome = match serde_json::from_str::<Message>(&row.payload) {
            Ok(msg) => self.send(&row, &msg).await,
            Err(e) => Err(Failure::Permanent(format!("unreadable payload: {e}"))),
        };
        let now = now_ms();
        row.attempts += 1;
        let step = match outcome {
            Ok((status, detail)) => {
                row.state = "delivered".into();
                row.done_at = Some(now);
                row.last_error = None;
                self.stats.delivered.fetch_add(1, Ordering::Relaxed);
                tracing::info!(id = %row.id, target = %short(&row.target), attempts = row.attempts, waited_ms = now - row.created_at, "notification delivered");
                (status, detail)
            }
            Err(Failure::Permanent(e)) => {
                let skipped = e.starts_with("skipped");
                row.state = if skipped { "skipped" } else { "failed" }.into();
                row.done_at = Some(now);
                row.last_error = Some(e.clone());
                if skipped {
                    self.stats.skipped.fetch_add(1, Ordering::Relaxed);
                    ("skipped", e)
                } else {
                    self.stats.given_up.fetch_add(1, Ordering::Relaxed);
                    ("failed", format!("{e}; not retried"))
                }
            }
            Err(Failure::Retry(e)) => {
                self.stats.failed_attempts.fetch_add(1, Ordering::Relaxed);
                let give_up = (self.config.give_up_after_secs * 1000) as i64;
                let detail = if now - row.created_at >= give_up {
                    row.state = "failed".into();
                    row.done_at = Some(now);
                    self.stats.given_up.fetch_add(1, Ordering::Relaxed);
                    format!("{e}; given up after {} attempts", row.attempts)
                } else {
                    let wait = self.backoff(row.attempts);
                    row.next_at = now + wait;
                    format!("{e}; retrying in {:.1} s", wait as f64 / 1000.0)
                };
                tracing::warn!(id = %row.id, target = %short(&row.target), attempts = row.attempts, "notification not delivered: {e}");
                row.last_error = Some(e);
                ("failed", detail)
            }
        };
        if let Err(e) = self.relay.store().update_notification(&row).await {
            tracing::warn!(id = %row.id, "could not record a delivery: {e}");
        }
        self.step(&row, step.0, Some(step.1)).await;
        self.wake.notify_one();
    }
}

/// Push `Topic` (at most 32 URL-safe characters): a newer push for the request replaces it.
fn topic(msg: &Message) -> String {
    msg.request_id
        .as_deref()
        .unwrap_or(&msg.session_id)
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .take(32)
        .collect()
}

/// 128 random bits, hex: an open link's token.
fn random_token() -> String {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).expect("the operating system's random source");
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A target as shown (a push endpoint is long and says little).
pub(crate) fn short(target: &str) -> String {
    match target.strip_prefix(PUSH) {
        Some(endpoint) => {
            use sha2::Digest;
            let h = sha2::Sha256::digest(endpoint.as_bytes());
            format!("push-{:02x}{:02x}{:02x}{:02x}", h[0], h[1], h[2], h[3])
        }
        None => target.to_owned(),
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

pub(crate) async fn watch(inner: Arc<Inner>) {
    let mut rx = inner.relay.subscribe();
    inner.catch_up().await;
    loop {
        match rx.recv().await {
            Ok(RelayEvent::Logged {
                session_id,
                envelope,
            }) => inner.on_event(&session_id, &envelope).await,
            Ok(_) => {}
            Err(RecvError::Lagged(n)) => {
                tracing::warn!(missed = n, "the notifier fell behind the feed; catching up");
                inner.catch_up().await;
            }
            Err(RecvError::Closed) => break,
        }
    }
}

pub(crate) async fn deliver(inner: Arc<Inner>) {
    let slots = Arc::new(tokio::sync::Semaphore::new(PARALLEL));
    loop {
        let now = now_ms();
        match inner
            .relay
            .store()
            .due_notifications(now, PARALLEL as i64)
            .await
        {
            Ok(rows) => {
                for row in rows {
                    let Ok(permit) = slots.clone().acquire_owned().await else {
                        return;
                    };
                    match inner
                        .relay
                        .store()
                        .claim_notification(&row.id, row.next_at, now + LEASE_MS)
                        .await
                    {
                        Ok(true) => {
                            let inner = inner.clone();
                            tokio::spawn(async move {
                                inner.attempt(row).await;
                                drop(permit);
                            });
                        }
                        Ok(false) => {}
                        Err(e) => tracing::warn!("could not claim a notification: {e}"),
                    }
                }
            }
            Err(e) => tracing::warn!("could not read the outbox: {e}"),
        }
        let next = inner
            .relay
            .store()
            .next_notification_at()
            .await
            .ok()
            .flatten();
        let wait = next.map_or(1000, |t| (t - now_ms()).clamp(20, 1000));
        tokio::select! {
            _ = inner.wake.notified() => {}
            _ = tokio::time::sleep(Duration::from_millis(wait as u64)) => {}
        }
    }
}
