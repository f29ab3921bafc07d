//! The narrow handles a session actor gets from its relay instead of the relay itself: the
//! app-server source (started or restarted on demand) and the `MAX_SESSIONS` slots.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use codex_relay_codex::{AppServer, AppServerConfig};

use crate::auth::AuthConfig;
use crate::crash_loop::{CrashGuard, CrashPolicy, GaveUp};
use crate::error::RelayError;
use crate::feed::Feed;

/// Where sessions get the running `codex app-server`; cheap to clone.
#[derive(Clone)]
pub(crate) struct ServerSource {
    config: AppServerConfig,
    /// Sent after every start; answers token refreshes.
    auth: AuthConfig,
    slot: Arc<tokio::sync::Mutex<Option<Arc<AppServer>>>>,
    /// Crashes and failed starts: restarts back off, and a crash loop gives up.
    crashes: Arc<Mutex<CrashGuard>>,
    /// Counts the starts (a metric).
    feed: Arc<Feed>,
    /// Starts of this source (the pool counts restarts with it).
    starts: Arc<AtomicU64>,
}

impl ServerSource {
    pub fn new(
        config: AppServerConfig,
        auth: AuthConfig,
        crash_policy: CrashPolicy,
        feed: Arc<Feed>,
    ) -> Self {
        Self {
            config,
            auth,
            slot: Arc::default(),
            crashes: Arc::new(Mutex::new(CrashGuard::new(crash_policy))),
            feed,
            starts: Arc::default(),
        }
    }

    fn crashes(&self) -> std::sync::MutexGuard<'_, CrashGuard> {
        self.crashes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The running app-server, started (or restarted after it died) on demand; restarts wait
    /// longer after each recent crash, and a crash loop is refused with `CodexCrashLoop`.
    pub async fn get(&self) -> Result<Arc<AppServer>, RelayError> {
        let mut slot = self.slot.lock().await;
        if let Some(s) = slot.as_ref() {
            match s.peer().closed() {
                None => return Ok(s.clone()),
                Some(died) => {
                    tracing::warn!("codex app-server is gone ({died}); starting a new one");
                    self.crashes().record(Instant::now(), died.to_string());
                    *slot = None;
                }
            }
        }
        let wait = self.crashes().before_start(Instant::now());
        let wait = wait.map_err(RelayError::from)?;
        if !wait.is_zero() {
            tracing::info!(?wait, "waiting before restarting codex app-server");
            tokio::time::sleep(wait).await;
        }
        let server = match AppServer::start(self.config.clone()).await {
            Ok(s) => Arc::new(s),
            Err(e) => {
                self.crashes().record(Instant::now(), e.to_string());
                return Err(e.into());
            }
        };
        // Before the login: Codex may ask for fresh tokens at any time after it.
        crate::auth::serve_unrouted(&server, &self.auth);
        // On failure the server is dropped here, which kills its process group.
        crate::auth::login(&server, &self.auth).await?;
        self.feed.codex_started();
        self.starts.fetch_add(1, Ordering::Relaxed);
        *slot = Some(server.clone());
        Ok(server)
    }

    /// Set while restarts are refused (a crash loop), for status and health checks.
    pub fn gave_up(&self) -> Option<GaveUp> {
        self.crashes().gave_up(Instant::now())
    }

    /// The app-server started last, if any, without starting one (it may have exited); `None`
    /// too while another task is starting it.
    pub fn current(&self) -> Option<Arc<AppServer>> {
        self.slot.try_lock().ok()?.clone()
    }

    /// How many times this source started an app-server.
    pub fn starts(&self) -> u64 {
        self.starts.load(Ordering::Relaxed)
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
