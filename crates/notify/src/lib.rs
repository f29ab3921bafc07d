//! Notifications of codex-relay (docs/NOTIFY.md): when a request waits (and, if asked, when a
//! turn ends) the relay tells people through signed webhooks (Standard Webhooks, ntfy, Slack)
//! and Web Push, from a durable outbox in the store, never on the session's path.
//!
//! - [`config`]: the `--notify` file; [`message`]: what each format sends;
//!   [`standard`]: Standard Webhooks signatures; [`webpush`]: RFC 8291 and VAPID.
//! - [`Notifier`]: the watcher (relay feed → outbox rows) and the deliverer (retries with
//!   backoff; answer links minted per attempt, never stored), each step recorded in the
//!   request's delivery trail; re-notify and escalation of requests nobody opened.

pub mod config;
pub mod message;
mod outbox;
mod reminders;
pub mod standard;
pub mod webpush;

use std::sync::Arc;

use codex_relay_core::Relay;

pub use config::{Escalation, EventKind, Format, NotifyConfig, Webhook};
pub use outbox::Stats;
pub use webpush::Vapid;

/// The running notifier; its tasks stop when it is dropped.
pub struct Notifier {
    inner: Arc<outbox::Inner>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Why the notifier cannot start.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    #[error("the HTTP client cannot start: {0}")]
    Client(String),
}

impl Notifier {
    /// Starts watching `relay` and delivering. `public_url` is the base of links (the
    /// config's `public_url` wins); `vapid` enables Web Push.
    pub fn start(
        relay: Relay,
        config: NotifyConfig,
        public_url: &str,
        vapid: Option<Vapid>,
    ) -> Result<Notifier, NotifyError> {
        // reqwest is built without a TLS provider of its own: rustls with ring.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(10))
            .connect_timeout(std::time::Duration::from_secs(5))
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("codex-relay/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| NotifyError::Client(e.to_string()))?;
        let public = config
            .public_url
            .clone()
            .unwrap_or_else(|| public_url.to_owned());
        let vapid = vapid.filter(|_| config.push);
        let inner = Arc::new(outbox::Inner {
            relay,
            config,
            public,
            http,
            vapid,
            wake: tokio::sync::Notify::new(),
            stats: Stats::default(),
        });
        let tasks = vec![
            tokio::spawn(outbox::watch(inner.clone())),
            tokio::spawn(outbox::deliver(inner.clone())),
            tokio::spawn(reminders::run(inner.clone())),
        ];
        tracing::info!(
            webhooks = inner.config.webhooks.len(),
            push = inner.vapid.is_some(),
            answer_links = inner.config.answer_links,
            "notifications on"
        );
        Ok(Notifier { inner, tasks })
    }

    pub fn stats(&self) -> &Stats {
        &self.inner.stats
    }

    /// The base URL links point to.
    pub fn public_url(&self) -> &str {
        &self.inner.public
    }
}

impl Drop for Notifier {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}
