//! The engine's settings ([`RelayConfig`]) and how a session is created ([`CreateOptions`]).

use std::time::Duration;

use codex_relay_codex::AppServerConfig;
use codex_relay_protocol::v2::{ApprovalPolicy, SandboxMode};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::modes::PermissionMode;
use crate::tool::DynamicTool;

/// Sessions per app-server unless configured (see docs/ARCHITECTURE.md, "Pool", for the
/// measurements behind it).
pub const DEFAULT_SESSIONS_PER_CODEX: usize = 25;

/// How long [`Relay::shutdown`] lets a failing store retry before it gives up what it holds.
pub const STORE_FAULT_AT_SHUTDOWN: Duration = Duration::from_secs(10);

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
}

/// Sessions open at once, unless configured (`MAX_SESSIONS`).
pub const DEFAULT_MAX_SESSIONS: usize = 32;
/// How long a request waits for an answer before it is declined, in milliseconds, unless
/// configured (`APPROVAL_TIMEOUT_MS`).
pub const DEFAULT_APPROVAL_TIMEOUT_MS: u64 = 300_000;
/// Events per session kept in memory, unless configured (`EVENT_BUFFER_SIZE`).
pub const DEFAULT_EVENT_BUFFER: usize = 1000;

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
            auth: Default::default(),
            policy: Default::default(),
            rules_file: None,
            cluster: Default::default(),
            turn_limits: Default::default(),
            budget: Default::default(),
            prices: None,
        }
    }
}

/// How to create a session. Optional values reach Codex only when given. Stored (with the
/// values in effect) as the session's options.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CreateOptions {
    /// The first message; without it the session starts idle.
    pub prompt: Option<String>,
    pub images: Vec<String>,
    pub cwd: Option<String>,
    pub model: Option<String>,
    pub approval_policy: Option<ApprovalPolicy>,
    pub sandbox: Option<SandboxMode>,
    /// Sets approval policy and sandbox together (explicit values above win).
    pub mode: Option<PermissionMode>,
    pub base_instructions: Option<String>,
    pub developer_instructions: Option<String>,
    /// Codex config overrides (`-c` keys), e.g. `{"model_reasoning_effort": "low"}`.
    pub config: Option<Map<String, Value>>,
    /// A Codex profile for this session (see `profile.rs`); explicit `config` wins over it.
    pub profile: Option<String>,
    /// CODEX_HOME for this session's Codex (default: the relay's). Sessions with different
    /// homes never share an app-server process.
    pub codex_home: Option<String>,
    /// JSON schema for the first turn's final message.
    pub output_schema: Option<Value>,
    /// Run the first turn in plan mode (the model may ask questions).
    pub plan_mode: bool,
    /// Its turns' deadline, idle watchdog and grace (each message may set its own).
    #[serde(skip_serializing_if = "crate::limits::TurnLimits::is_empty")]
    pub limits: crate::limits::TurnLimits,
    /// Its budget; raised with [`Relay::set_limits`](crate::relay::Relay::set_limits).
    #[serde(skip_serializing_if = "crate::limits::Budget::is_empty")]
    pub budget: crate::limits::Budget,
    /// The price table its estimated cost uses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prices: Option<crate::limits::Prices>,
    /// Labels approval rules can match on (`labels = ["ci"]`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// The workspace this session works in ([`crate::workspace::fingerprint`]); stored, so
    /// [`Relay::session_for_workspace`] finds the session again for reuse.
    pub workspace_fingerprint: Option<String>,
    #[serde(skip)]
    pub dynamic_tools: Vec<DynamicTool>,
}

/// How a relay on Postgres takes part in a cluster.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// Take part (the default for a Postgres store). Off: the relay assumes it is alone on the
    /// database, as before clusters existed.
    pub enabled: bool,
    /// This instance's id (default: the host name and a random suffix).
    pub instance_id: Option<String>,
    /// Where other instances or a load balancer reach this one (shown, not dialled).
    pub url: Option<String>,
    /// How long a lease lasts without renewal; renewed every quarter of it. An instance silent
    /// for longer is taken over.
    pub lease: Duration,
    /// Sessions this instance runs before new ones go to the least-loaded live instance
    /// (default: no limit, every session starts where it was asked for).
    pub max_load: Option<usize>,
    /// How long a command for another instance waits for its answer.
    pub command_timeout: Duration,
    /// The longest the store's writer collects writes before it commits, in a cluster: other
    /// instances see a session's events only once they are committed, so this bounds what a
    /// remote reader waits beyond a local one (alone, the store lingers 50 ms; see
    /// `StoreOptions::linger`). Default 5 ms.
    pub commit_linger: Duration,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            instance_id: None,
            url: None,
            lease: Duration::from_secs(10),
            max_load: None,
            command_timeout: Duration::from_secs(60),
            commit_linger: Duration::from_millis(5),
        }
    }
}
