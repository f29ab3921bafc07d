//! How a session is created ([`CreateOptions`], an isolated [`WorkspaceSpec`]), how a relay
//! takes part in a cluster ([`ClusterConfig`]), and the defaults. On core's ground floor: the
//! engine's own settings, which gather the store's, auth's, policy's and rules' settings, are
//! in relay_config.rs.

use std::path::PathBuf;
use std::time::Duration;

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

/// Sessions open at once, unless configured (`MAX_SESSIONS`).
pub const DEFAULT_MAX_SESSIONS: usize = 32;
/// How long a request waits for an answer before it is declined, in milliseconds, unless
/// configured (`APPROVAL_TIMEOUT_MS`).
pub const DEFAULT_APPROVAL_TIMEOUT_MS: u64 = 300_000;
/// Events per session kept in memory, unless configured (`EVENT_BUFFER_SIZE`).
pub const DEFAULT_EVENT_BUFFER: usize = 1000;

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
    /// Reasoning effort of its turns (`low`, `medium`, `high`, ...; Codex's default unset).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effort: Option<String>,
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
    /// A git worktree made for this session from a base branch, as its working directory
    /// (`crate::worktree`); the relay fills in where it made it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worktree: Option<WorktreeSpec>,
    #[serde(skip)]
    pub dynamic_tools: Vec<DynamicTool>,
    /// Start the thread on the Codex daemon the relay is attached to (`serve --attach`,
    /// docs/ATTACH.md) instead of in a Codex of the relay's own: the terminal can then pick
    /// it up (`codex resume <id>`). Refused when the relay is not attached now.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub on_daemon: bool,
}

/// A git worktree per session: asked with `repo` (a directory in the source repository),
/// `base` (a branch or commit, default the repository's current branch), `branch` (the new
/// branch's name, default `codex/<id>`) and `keep` (leave it on close). The relay fills in
/// the rest when it made the worktree.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WorktreeSpec {
    pub repo: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub keep: bool,
    /// The repository's top directory (made).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repo_root: Option<String>,
    /// The worktree's directory, under the relay's worktree directory (made).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The commit the worktree started from (made).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_commit: Option<String>,
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

/// One host path copied into the workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostMount {
    /// A file or directory on the host; must lie under one of the allowed host roots.
    pub host_path: PathBuf,
    /// Where it goes, relative to the workspace root (`""` or `"."` for the root itself).
    pub mount_path: PathBuf,
    /// Files to copy (see [`crate::workspace::glob`]); empty copies every file.
    #[serde(default)]
    pub include: Vec<String>,
    /// Files and directories to leave out; an excluded directory is not even walked.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Bytes this mount may copy.
    #[serde(default)]
    pub max_bytes: Option<u64>,
}

impl HostMount {
    pub fn new(host_path: impl Into<PathBuf>, mount_path: impl Into<PathBuf>) -> Self {
        Self {
            host_path: host_path.into(),
            mount_path: mount_path.into(),
            include: Vec::new(),
            exclude: Vec::new(),
            max_bytes: None,
        }
    }

    pub fn include<S: Into<String>>(mut self, globs: impl IntoIterator<Item = S>) -> Self {
        self.include.extend(globs.into_iter().map(Into::into));
        self
    }

    pub fn exclude<S: Into<String>>(mut self, globs: impl IntoIterator<Item = S>) -> Self {
        self.exclude.extend(globs.into_iter().map(Into::into));
        self
    }

    pub fn max_bytes(mut self, bytes: u64) -> Self {
        self.max_bytes = Some(bytes);
        self
    }
}

/// What an isolated workspace holds and the limits it must respect.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceSpec {
    pub mounts: Vec<HostMount>,
    /// Host directories mounts may come from. Empty refuses every mount (fail closed).
    pub allowed_host_roots: Vec<PathBuf>,
    /// Bytes all mounts together may copy.
    #[serde(default)]
    pub max_bytes: Option<u64>,
    /// Where the temporary workspace is created (default: the system temp directory).
    #[serde(default)]
    pub parent_dir: Option<PathBuf>,
    /// Anything else that should make a different thread: model, sandbox, instructions, ...
    #[serde(default)]
    pub settings: Value,
}
