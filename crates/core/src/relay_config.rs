//! The engine's settings ([`RelayConfig`]): the session defaults of config.rs with the
//! settings of the store, auth, the start policy and the rules file, which sit above core's
//! ground floor.

use std::time::Duration;

use codex_relay_codex::AppServerConfig;

use crate::config::{
    ClusterConfig, DEFAULT_APPROVAL_TIMEOUT_MS, DEFAULT_EVENT_BUFFER, DEFAULT_MAX_SESSIONS,
    DEFAULT_SESSIONS_PER_CODEX,
};

/// Engine settings.
#[derive(Debug, Clone)]
pub struct RelayConfig {
    pub codex: AppServerConfig,
    /// A SQLite path or URL, or a Postgres URL.
    pub store: String,
    /// Sessions open at once in this relay (MAX_SESSIONS).
    pub max_sessions: usize,
    /// How long a pending request waits before it is resolved fail-closed (APPROVAL_TIMEOUT_MS).
    pub approval_timeout: Duration,
    /// Events per session kept in memory; older ones are read from the store (EVENT_BUFFER_SIZE).
    pub event_buffer: usize,
    /// Tuning of the store's writer (batching, the write-queue bound, the spool).
    pub store_options: crate::store::StoreOptions,
    /// When to stop restarting a crashing Codex (CODEX_CRASH_LIMIT, CODEX_CRASH_WINDOW_MS).
    pub crash_policy: crate::crash_loop::CrashPolicy,
    /// Sessions per `codex app-server` process (SESSIONS_PER_CODEX); 0 puts every session with
    /// the same process settings on one shared process.
    pub sessions_per_codex: usize,
    /// How long a process with no session left keeps running before it is stopped.
    pub codex_idle_linger: Duration,
    /// When a Codex process has done enough and is replaced by a fresh one (memory, turns,
    /// age; docs/OPERATIONS.md, "Recycling Codex processes"). Off by default.
    pub recycle: crate::recycle::RecyclePolicy,
    /// Credentials sent to every app-server the relay starts, and the token refresh callback
    /// (see [`crate::auth`]). The default sends none.
    pub auth: crate::auth::AuthConfig,
    /// What clients may start (directories, sandbox, approval policy, config overrides); the
    /// default allows everything.
    pub policy: crate::policy::StartPolicy,
    /// The rules of the `--rules` file: at open they replace the rules a file gave before
    /// (rules made over the API stay). `None` leaves the stored rules as they are.
    pub rules_file: Option<Vec<crate::rules::RuleSpec>>,
    /// With a Postgres store: this relay as one instance of a cluster (docs/CLUSTER.md).
    pub cluster: ClusterConfig,
    /// Every turn's deadline, idle watchdog and interrupt grace unless its session or its
    /// message sets them (docs/AGENTS.md).
    pub turn_limits: crate::limits::TurnLimits,
    /// The budget of a session that sets none.
    pub budget: crate::limits::Budget,
    /// The price table of a session that sets none (the estimated cost).
    pub prices: Option<crate::limits::Prices>,
    /// How many new turns may wait, and how long, while a rate limit is hit (turn_queue.rs).
    pub turn_queue: crate::rate_limits::TurnQueueLimits,
    /// Where the relay makes sessions' git worktrees (a directory it owns; made 0700). The
    /// library and the binary set `worktrees` in the data directory; unset, core uses
    /// `$XDG_STATE_HOME/codex-relay/worktrees` (or under `~/.local/state`).
    pub worktree_dir: Option<std::path::PathBuf>,
}

impl RelayConfig {
    pub fn new(codex: AppServerConfig, store: impl Into<String>) -> Self {
        Self {
            codex,
            store: store.into(),
            max_sessions: DEFAULT_MAX_SESSIONS,
            approval_timeout: Duration::from_millis(DEFAULT_APPROVAL_TIMEOUT_MS),
            event_buffer: DEFAULT_EVENT_BUFFER,
            // Raw lines are stored in chunks of up to RAW_CHUNK lines; 1000 chunks per session
            // keep the last 1000 bursts (at most 64,000 lines).
            store_options: crate::store::StoreOptions {
                raw_lines_per_session: 1000,
                ..Default::default()
            },
            crash_policy: Default::default(),
            sessions_per_codex: DEFAULT_SESSIONS_PER_CODEX,
            codex_idle_linger: Duration::from_secs(10),
            recycle: Default::default(),
            auth: Default::default(),
            policy: Default::default(),
            rules_file: None,
            cluster: Default::default(),
            turn_limits: Default::default(),
            budget: Default::default(),
            prices: None,
            turn_queue: Default::default(),
            worktree_dir: None,
        }
    }
}
