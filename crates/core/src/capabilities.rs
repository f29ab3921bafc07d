//! The app-server source, one of the narrow handles a session actor gets instead of the relay
//! (the others: the pool, a broker handle and its slot guard, `slots.rs`).

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
        // A shared login due for a refresh is refreshed once, here, before a Codex would.
        if let Some(login) = self.auth.codex_login() {
            login.ensure_fresh().await;
        }
        let server = match AppServer::start(self.config.clone()).await {
            Ok(s) => Arc::new(s),
            Err(e) => {
                self.crashes().record(Instant::now(), e.to_string());
                return Err(e.into());
            }
        };
        // Before the login: Codex may ask for fresh tokens at any time after it.
        crate::auth::serve_unrouted_into(&server, &self.auth, self.feed.clone());
        // On failure the server is dropped here, which kills its process group.
        crate::auth::login(&server, &self.auth).await?;
        self.feed.codex_started();
        self.starts.fetch_add(1, Ordering::Relaxed);
        *slot = Some(server.clone());
        Ok(server)
    }

    /// For a session about to run on `server`: without credentials of the relay's own, a Codex
    /// that needs a login and holds none would retry every turn until its deadline, so the
    /// session fails now with `NotLoggedIn`, saying what to run. Asked every time (a login may
    /// have happened since); calls that reach no model (listing, reading threads) never ask.
    pub async fn check_login(&self, server: &AppServer) -> Result<(), RelayError> {
        if self.auth.credentials.is_some() {
            return Ok(());
        }
        match crate::logged_in::missing_login(server, &self.config).await {
            Some(why) => Err(RelayError::NotLoggedIn(why)),
            None => Ok(()),
        }
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

    /// Whether a task is starting (or taking out) the app-server right now.
    pub fn is_starting(&self) -> bool {
        self.slot.try_lock().is_err()
    }

    /// Waits until no task is starting the app-server (returns at once when none is).
    pub async fn settled(&self) {
        drop(self.slot.lock().await);
    }

    /// Takes the running app-server out (for shutdown).
    pub async fn take(&self) -> Option<Arc<AppServer>> {
        self.slot.lock().await.take()
    }
}
