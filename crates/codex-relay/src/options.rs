//! Session options: where and how Codex works, your tools, the approval policy, and the default deadline of each run.

use std::time::Duration;

use serde_json::{Map, Value};

pub use codex_relay_protocol::v2::SandboxMode;

use crate::approval::Approval;
use crate::questions::Questions;
use crate::tool::Tool;
use crate::workspace::WorkspaceSpec;

/// How long a turn may take to stop after `turn/interrupt` before Codex's process group is
/// killed, unless [`SessionOptions::interrupt_grace`] says otherwise.
pub const DEFAULT_INTERRUPT_GRACE: Duration = Duration::from_secs(5);

/// How to open a session. Everything is optional; unset values fall back to Codex's config.
///
/// ```
/// use std::time::Duration;
/// use codex_relay::{Approval, SandboxMode, SessionOptions};
///
/// let options = SessionOptions::new()
///     .cwd("/path/to/repo")
///     .model("gpt-5.1-codex")
///     .sandbox(SandboxMode::ReadOnly)
///     .approval(Approval::Deny)
///     .config("model_reasoning_effort", "low")
///     .deadline(Duration::from_secs(300));
/// # let _ = options;
/// ```
#[derive(Debug, Clone)]
pub struct SessionOptions {
    pub(crate) cwd: Option<String>,
    pub(crate) model: Option<String>,
    pub(crate) effort: Option<String>,
    pub(crate) sandbox: SandboxMode,
    pub(crate) approval: Approval,
    pub(crate) config: Map<String, Value>,
    pub(crate) profile: Option<String>,
    pub(crate) base_instructions: Option<String>,
    pub(crate) developer_instructions: Option<String>,
    pub(crate) tools: Vec<Tool>,
    pub(crate) deadline: Option<Duration>,
    pub(crate) idle: Option<Duration>,
    pub(crate) grace: Duration,
    pub(crate) budget: codex_relay_core::limits::Budget,
    pub(crate) worktree: Option<codex_relay_core::worktree::WorktreeSpec>,
    pub(crate) prices: Option<codex_relay_core::limits::Prices>,
    pub(crate) workspace: Option<WorkspaceSpec>,
    pub(crate) questions: Questions,
}

impl Default for SessionOptions {
    fn default() -> Self {
        Self {
            cwd: None,
            model: None,
            effort: None,
            sandbox: SandboxMode::WorkspaceWrite,
            approval: Approval::Never,
            config: Map::new(),
            profile: None,
            base_instructions: None,
            developer_instructions: None,
            tools: Vec::new(),
            deadline: None,
            idle: None,
            grace: DEFAULT_INTERRUPT_GRACE,
            budget: Default::default(),
            worktree: None,
            prices: None,
            workspace: None,
            questions: Questions::Unanswered,
        }
    }
}

impl SessionOptions {
    /// Defaults: the workspace-write sandbox, [`Approval::Never`], no deadline, 5 s grace.
    pub fn new() -> Self {
        Self::default()
    }

    /// The directory Codex works in (absolute; default: the relay's working directory).
    pub fn cwd(mut self, dir: impl Into<String>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// The model (default: Codex's config).
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// The reasoning effort of its turns: `low`, `medium`, `high`, ... (what the model
    /// takes; [`crate::Client::models`] lists them; default: Codex's config).
    pub fn effort(mut self, effort: impl Into<String>) -> Self {
        self.effort = Some(effort.into());
        self
    }

    /// The sandbox commands run in (default: workspace-write).
    pub fn sandbox(mut self, sandbox: SandboxMode) -> Self {
        self.sandbox = sandbox;
        self
    }

    /// Who decides when Codex asks (default: [`Approval::Never`]).
    pub fn approval(mut self, approval: Approval) -> Self {
        self.approval = approval;
        self
    }

    /// Who answers the model's questions and MCP elicitations (default:
    /// [`Questions::Unanswered`]: other fronts may; else the approval timeout declines them).
    pub fn questions(mut self, questions: Questions) -> Self {
        self.questions = questions;
        self
    }

    /// A Codex config override for this session (a `-c key=value`, e.g.
    /// `("model_reasoning_effort", "low")`).
    pub fn config(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.config.insert(key.into(), value.into());
        self
    }

    /// A profile from Codex's `config.toml` (explicit [`SessionOptions::config`] wins).
    pub fn profile(mut self, profile: impl Into<String>) -> Self {
        self.profile = Some(profile.into());
        self
    }

    /// Replaces Codex's base instructions.
    pub fn base_instructions(mut self, text: impl Into<String>) -> Self {
        self.base_instructions = Some(text.into());
        self
    }

    /// Adds developer instructions.
    pub fn developer_instructions(mut self, text: impl Into<String>) -> Self {
        self.developer_instructions = Some(text.into());
        self
    }

    /// Offers one of your tools to the model (repeatable).
    pub fn tool(mut self, tool: Tool) -> Self {
        self.tools.push(tool);
        self
    }

    /// The default deadline of each run in this session (a run may set its own).
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// The idle watchdog of each run in this session (a run may set its own): a turn with
    /// no output (items, text, command output) for this long is interrupted and the run fails
    /// with [`crate::ErrorKind::Idle`]. Time waiting for an approval does not count.
    pub fn idle_timeout(mut self, idle: Duration) -> Self {
        self.idle = Some(idle);
        self
    }

    /// The session's budget (tokens, turns, wall time, estimated cost; see
    /// [`crate::limits::Budget`]): reaching one stops the running turn and the
    /// session starts no new one until it is raised ([`crate::Session::set_limits`]).
    pub fn budget(mut self, budget: codex_relay_core::limits::Budget) -> Self {
        self.budget = budget;
        self
    }

    /// Works in a git worktree the relay makes for the session from `base` (default: the
    /// repository's current branch) of the repository at `repo` (default: [`cwd`](Self::cwd)),
    /// on a new branch (default `codex/<id>`); removed when the session closes unless `keep`
    /// (its uncommitted work committed to its branch first). See [`crate::Session::worktree_diff`].
    pub fn worktree(mut self, spec: codex_relay_core::worktree::WorktreeSpec) -> Self {
        self.worktree = Some(spec);
        self
    }

    /// The price table (US dollars per million tokens) the estimated cost uses.
    pub fn prices(mut self, prices: codex_relay_core::limits::Prices) -> Self {
        self.prices = Some(prices);
        self
    }

    /// How long a turn may take to stop after the deadline's `turn/interrupt` before
    /// Codex's process group is killed (default 5 s).
    pub fn interrupt_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Work in an isolated copy: the spec's host mounts are copied into a fresh temporary
    /// directory, which becomes the session's `cwd` (replacing [`cwd`](Self::cwd)); a mount
    /// outside the allowed roots or over a budget is refused before Codex starts. The copy is
    /// removed when the last clone of the [`crate::Session`] is dropped or closed; the host is
    /// never written. The spec is stored with the session: [`crate::Client::resume`] makes a
    /// fresh copy of the same mounts (or of the spec it is given).
    ///
    /// ```
    /// use codex_relay::SessionOptions;
    /// use codex_relay::workspace::{HostMount, WorkspaceSpec};
    ///
    /// let spec = WorkspaceSpec::new(["/home/me/projects"])
    ///     .mount(HostMount::new("/home/me/projects/app", "app").exclude(["target", ".git"]))
    ///     .max_bytes(50 << 20);
    /// let options = SessionOptions::new().workspace(spec);
    /// # let _ = options;
    /// ```
    pub fn workspace(mut self, spec: WorkspaceSpec) -> Self {
        self.workspace = Some(spec);
        self
    }
}
