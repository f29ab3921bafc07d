//! The engine settings every serving subcommand shares (flags and the reference's environment
//! variables), and opening the relay with them.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use codex_relay_codex::AppServerConfig;
use codex_relay_core::{Relay, RelayConfig};

use crate::doctor::find_on_path;

#[derive(clap::Args, Debug, Clone)]
pub struct EngineArgs {
    /// The `codex` executable (default: `codex` on PATH).
    #[arg(long, env = "CODEX_CLI_PATH")]
    pub codex: Option<PathBuf>,
    /// CODEX_HOME for Codex (default: Codex's own, usually ~/.codex).
    #[arg(long, env = "CODEX_HOME")]
    pub codex_home: Option<PathBuf>,
    /// Where codex-relay keeps its SQLite store (default: $XDG_DATA_HOME/codex-relay, else
    /// ~/.local/share/codex-relay).
    #[arg(long, env = "CODEX_RELAY_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// The store: a SQLite file path or URL, or a postgres:// URL (default: relay.db in the data
    /// directory).
    #[arg(long, env = "CODEX_RELAY_DB")]
    pub db: Option<String>,
    /// How long an approval or question waits for an answer before it is declined.
    #[arg(long, env = "APPROVAL_TIMEOUT_MS", default_value_t = 300_000)]
    pub approval_timeout_ms: u64,
    /// Sessions open at once.
    #[arg(long, env = "MAX_SESSIONS", default_value_t = 32)]
    pub max_sessions: usize,
    /// Events per session kept in memory (older ones are read from the store).
    #[arg(long, env = "EVENT_BUFFER_SIZE", default_value_t = 1000)]
    pub event_buffer: usize,
    /// Sessions per `codex app-server` process: more sessions start more processes, so a
    /// crash touches at most this many; 0 shares one process among all sessions.
    #[arg(long, env = "SESSIONS_PER_CODEX", default_value_t = codex_relay_core::relay::DEFAULT_SESSIONS_PER_CODEX)]
    pub sessions_per_codex: usize,
}

fn default_data_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("XDG_DATA_HOME") {
        return PathBuf::from(d).join("codex-relay");
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    home.join(".local").join("share").join("codex-relay")
}

impl EngineArgs {
    pub fn relay_config(&self) -> anyhow::Result<RelayConfig> {
        let binary = match &self.codex {
            Some(b) => b.clone(),
            None => find_on_path("codex").context(
                "no `codex` on PATH; install it with `npm install -g @openai/codex`, or pass --codex / CODEX_CLI_PATH",
            )?,
        };
        let mut codex = AppServerConfig::new(binary);
        codex.codex_home = self.codex_home.clone();
        let store = match &self.db {
            Some(db) => db.clone(),
            None => {
                let dir = self.data_dir.clone().unwrap_or_else(default_data_dir);
                std::fs::create_dir_all(&dir)
                    .with_context(|| format!("creating the data directory {}", dir.display()))?;
                dir.join("relay.db").display().to_string()
            }
        };
        let mut config = RelayConfig::new(codex, store);
        config.approval_timeout = Duration::from_millis(self.approval_timeout_ms);
        config.max_sessions = self.max_sessions.max(1);
        config.event_buffer = self.event_buffer;
        config.sessions_per_codex = self.sessions_per_codex;
        Ok(config)
    }

    pub async fn open(&self) -> anyhow::Result<Relay> {
        let config = self.relay_config()?;
        // The settings in effect, for operators (and the knob tests); a Postgres URL may hold a
        // password, so only its scheme is shown.
        let store = if config.store.starts_with("postgres") {
            "postgres://…"
        } else {
            config.store.as_str()
        };
        tracing::info!(
            codex = %config.codex.binary.display(),
            codex_home = ?config.codex.codex_home,
            store = %store,
            approval_timeout_ms = config.approval_timeout.as_millis() as u64,
            max_sessions = config.max_sessions,
            event_buffer = config.event_buffer,
            sessions_per_codex = config.sessions_per_codex,
            "engine settings"
        );
        Relay::open(config)
            .await
            .context("opening the codex-relay engine")
    }
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("cannot listen for SIGTERM: {e}");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
