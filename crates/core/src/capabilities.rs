//! The narrow handles a session actor gets from its relay instead of the relay itself: the
//! app-server source (started or restarted on demand) and the `MAX_SESSIONS` slots.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use codex_relay_codex::{AppServer, AppServerConfig};

use crate::auth::AuthConfig;
use crate::error::RelayError;
use crate::feed::Feed;

/// Where sessions get the running `codex app-server`; cheap to clone.
#[derive(Clone)]
pub(crate) struct ServerSource {
    config: AppServerConfig,
    /// Sent after every start; answers token refreshes.
    auth: AuthConfig,
    slot: Arc<tokio::sync::Mutex<Option<Arc<AppServer>>>>,
    /// Counts the starts (a metric).
    feed: Arc<Feed>,
}

impl ServerSource {
    pub fn new(config: AppServerConfig, auth: AuthConfig, feed: Arc<Feed>) -> Self {
        Self {
            config,
            auth,
            slot: Arc::default(),
            feed,
        }
    }

    /// The running app-server, started (or restarted after it died) on demand.
    pub async fn get(&self) -> Result<Arc<AppServer>, RelayError> {
        let mut slot = self.slot.lock().await;
        if let Some(s) = slot.as_ref()
            && s.peer().closed().is_none()
        {
            return Ok(s.clone());
        }
        if slot.is_some() {
            tracing::warn!("codex app-server is gone; starting a new one");
        }
        let server = Arc::new(AppServer::start(self.config.clone()).await?);
        // Before the login: Codex may ask for fresh tokens at any time after it.
        crate::auth::serve_unrouted(&server, &self.auth);
        // On failure the server is dropped here, which kills its process group.
        crate::auth::login(&server, &self.auth).await?;
        self.feed.codex_started();
        *slot = Some(server.clone());
        Ok(server)
    }

    /// Takes the running app-server out (for shutdown).
    pub async fn take(&self) -> Option<Arc<AppServer>> {
        self.slot.lock().await.take()
    }
}

/// The sessions open at once (`MAX_SESSIONS`), by id; cheap to clone.
#[derive(Clone)]
pub(crate) struct Slots {
    max: usize,
    live: Arc<Mutex<HashSet<String>>>,
}

impl Slots {
    pub fn new(max: usize) -> Self {
        Self {
            max,
            live: Arc::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes a slot for `id` (a no-op if it has one); refused when all are taken.
    pub fn claim(&self, id: &str) -> Result<(), RelayError> {
        let mut live = self.lock();
        if live.contains(id) {
            return Ok(());
        }
        if live.len() >= self.max {
            return Err(RelayError::TooManySessions { max: self.max });
        }
        live.insert(id.to_owned());
        Ok(())
    }

    /// Refused when no slot is free (before any work is done for a new session).
    pub fn check_free(&self) -> Result<(), RelayError> {
        if self.lock().len() >= self.max {
            return Err(RelayError::TooManySessions { max: self.max });
        }
        Ok(())
    }

    pub fn release(&self, id: &str) {
        self.lock().remove(id);
    }

    pub fn holds(&self, id: &str) -> bool {
        self.lock().contains(id)
    }
}
