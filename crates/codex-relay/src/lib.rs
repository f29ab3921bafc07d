//! Run OpenAI Codex from Rust: a prompt in, the final text (or a typed value) out, with your
//! own tools, your approval policy and a deadline.
//!
//! codex-relay owns the `codex app-server` process (in its own process group: nothing is
//! left running), keeps every session in a store (SQLite or Postgres) that the
//! `codex-relay` binary's `run --resume`, MCP and HTTP fronts share, and maps what Codex says
//! into one event model (docs/EVENTS.md).
//!
//! You need the Codex CLI (`npm install -g @openai/codex`, 0.98 or newer) and credentials
//! Codex can use (`codex login`, or a model provider in its `config.toml`).
//!
//! # A typed answer
//!
//! ```no_run
//! use codex_relay::{Client, SessionOptions};
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Summary {
//!     title: String,
//!     files: Vec<String>,
//! }
//!
//! # async fn demo() -> Result<(), codex_relay::Error> {
//! let client = Client::builder().build().await?;
//! let session = client.session(SessionOptions::new().cwd("/path/to/repo")).await?;
//! let summary = session.run_typed::<Summary>("Summarize this repository.").await?;
//! println!("{}: {} files", summary.value.title, summary.value.files.len());
//! client.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! # Your own tool, an approval callback, a deadline
//!
//! ```no_run
//! use std::time::Duration;
//! use codex_relay::{Approval, ApprovalDecision, Client, Phase, SessionOptions, Tool};
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Lookup { ticket: u32 }
//!
//! # async fn demo() -> Result<(), codex_relay::Error> {
//! let tickets = Tool::typed("ticket", "Reads a ticket from the tracker", |q: Lookup| async move {
//!     Ok::<_, String>(format!("ticket {}: the login page is slow", q.ticket))
//! });
//! let options = SessionOptions::new()
//!     .cwd("/path/to/repo")
//!     .tool(tickets)
//!     .approval(Approval::callback(|req| async move {
//!         if req.command.as_deref().is_some_and(|c| c.starts_with("git push")) {
//!             ApprovalDecision::deny("pushing is for humans")
//!         } else {
//!             ApprovalDecision::Approve
//!         }
//!     }))
//!     .deadline(Duration::from_secs(900));
//! let client = Client::builder().build().await?;
//! match client.run(options, "Fix ticket 42.").await {
//!     Ok(done) => println!("{}", done.text),
//!     Err(e) if e.phase() == Phase::Budget => eprintln!("out of time or quota: {e}"),
//!     Err(e) => eprintln!("{e}; Codex said: {:?}", e.codex_error_info()),
//! }
//! # Ok(()) }
//! ```
//!
//! # Streaming
//!
//! ```no_run
//! use futures::StreamExt;
//! use codex_relay::RunEvent;
//!
//! # async fn demo(session: codex_relay::Session) -> Result<(), codex_relay::Error> {
//! let mut run = session.stream("Run the tests and tell me what fails.").await?;
//! while let Some(event) = run.next().await {
//!     match event {
//!         RunEvent::Delta(d) => print!("{}", d.delta),
//!         RunEvent::Event(e) => eprintln!("[{}] {}", e.seq, e.ev.kind()),
//!     }
//! }
//! let result = run.finish().await?;
//! println!("\n{} tokens", result.usage.turn.total_tokens);
//! # Ok(()) }
//! ```
//!
//! # Credentials, isolated workspaces, questions
//!
//! [`ClientBuilder::api_key_env`] and [`ClientBuilder::chatgpt_tokens_file`] log every Codex
//! the client starts in ([`credentials`]). [`SessionOptions::workspace`] runs a session in a
//! temporary copy of host directories ([`workspace`]); [`Client::resume`] continues it later in
//! a fresh copy. [`SessionOptions::questions`] answers the model's questions (in plan mode,
//! [`Prompt::plan_mode`]) and MCP servers' elicitations, failing closed.
//!
//! # Errors
//!
//! Every failure is an [`Error`] with a [`Phase`] — `request`, `response`, `tool`, `budget`,
//! `codex` — mapped from Codex's `codexErrorInfo`, plus Codex's raw error object and the
//! tail of its stderr. `codex-relay run` exits with [`Phase::exit_code`].
#![deny(missing_docs)]

mod approval;
mod client;
pub mod credentials;
mod error;
mod options;
mod questions;
mod result;
mod run;
mod schema;
mod session;
mod tool;

pub use approval::{Approval, ApprovalDecision, ApprovalKind, ApprovalRequest};
pub use client::{Client, ClientBuilder};
pub use codex_relay_core::store::Retention;
pub use codex_relay_core::{
    Forked, ModelChoice, ModelInfo, OverLimit, Reach, RecyclePolicy, ReviewFinding, ReviewOutput,
    ReviewTarget, RolledBack, Stopped,
};
pub use error::{Error, ErrorKind, Phase, phase_of_error_info};
pub use options::{DEFAULT_INTERRUPT_GRACE, SandboxMode, SessionOptions};
pub use questions::{Answer, Question, QuestionItem, QuestionKind, Questions};
pub use result::{RunEvent, RunResult, RunStream, ToolCall, TurnUsage, Typed};
pub use schema::{make_strict, output_schema};
pub use session::{Prompt, Session};
pub use tool::{DEFAULT_TOOL_TIMEOUT, Tool};

/// The engine underneath (sessions, the event model, the store), for what this API does not
/// wrap.
pub use codex_relay_core as core;
/// Isolated workspaces: host directories copied into a temporary directory Codex works in
/// ([`SessionOptions::workspace`]), with include/exclude globs, byte budgets and allowed
/// host roots.
pub mod workspace {
    pub use codex_relay_core::workspace::{
        HostMount, MountPreview, Workspace, WorkspaceError, WorkspaceSpec, fingerprint,
    };
}
/// Turn limits (deadline, idle watchdog), budgets, what a session spent, and why a turn was
/// stopped (docs/AGENTS.md).
pub mod limits {
    pub use codex_relay_core::limits::{
        Budget, BudgetKind, LimitsChange, LimitsView, Prices, Spent, StopReason, TurnLimits,
    };
}
/// A git worktree per session ([`SessionOptions::worktree`]): its diff, export and merge
/// (docs/AGENTS.md).
pub mod worktree {
    pub use codex_relay_core::worktree::{
        ChangedFile, ExportAs, Exported, Merged, WorktreeDiff, WorktreeSpec,
    };
}
/// The account's rate limits as Codex reports them and the relay's turn queue.
pub mod rate_limits {
    pub use codex_relay_core::rate_limits::{
        QueuedTurn, RateLimitHold, RateLimitSnapshot, RateLimitWindow, RateLimitsView,
        TurnQueueLimits,
    };
}
/// The session-protocol event model: envelopes, events, deltas, token usage.
pub mod event {
    pub use codex_relay_core::event::{
        AgentRef, Delta, Envelope, Ev, Role, ToolEndStatus, TurnEndStatus, Usage,
    };
}
