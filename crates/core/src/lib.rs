//! The sessions engine every front (MCP, HTTP/SSE, library, CLI) calls.
//!
//! - [`relay`]: a pool of `codex app-server` processes serving many sessions; create, say (start or steer),
//!   interrupt, close, status, events since a cursor, long-poll waits, answers, listing.
//! - [`session`]: an actor per session and the state fronts read (log, status, pending).
//! - [`broker`] and [`answer`]: pending approvals, questions and tool calls; first answer wins;
//!   unanswered ones are resolved fail-closed at their deadline.
//! - [`event`] and [`mapper`]: the session-protocol event model and the one place that maps
//!   Codex notifications into it (see docs/EVENTS.md).
//! - [`store`]: SQLite or Postgres, batched writes (see docs/STORE.md).
//! - [`modes`]: permission modes → approval policy + sandbox.
//! - [`api`]: what every front calls and shows: start requests checked once, shared views.
//! - [`policy`]: the operator's limits on what a client may start.
//! - [`follow`]: a session's events after a seq, then live, then its end.
//! - [`control`]: stopping one session's turn without touching the sessions beside it.
//! - [`workspace`]: fingerprints for thread reuse; isolated copies of host mounts.
//! - [`auth`]: API key or ChatGPT tokens sent to every app-server; token refresh callback.
//! - [`rules`]: approval rules that answer a request before a human is asked;
//!   [`links`]: signed single-use links that answer one request (docs/RULES.md, NOTIFY.md).
//! - [`recycle`]: Codex processes past a memory, turn or age limit replaced by fresh ones
//!   once their sessions are idle.
//! - [`login`]: the ChatGPT login of CODEX_HOME shared by every Codex, refreshed by the relay
//!   alone (one refresh at a time across processes, relays and the cluster).

pub mod answer;
pub mod api;
mod approvals;
pub mod attach;
pub mod auth;
pub mod broker;
mod by_id;
mod capabilities;
pub mod cluster;
pub mod config;
pub mod control;
pub mod crash_loop;
mod daemon_place;
mod deadlines;
pub mod decider;
pub mod discovery;
mod door;
pub mod error;
pub mod event;
pub mod export;
pub mod feed;
pub mod follow;
pub mod glob;
mod guard;
mod host;
mod ids;
pub mod limits;
pub mod links;
pub mod logged_in;
pub mod login;
pub mod mapper;
pub mod modes;
mod op;
pub mod options;
pub mod pending;
pub mod people;
pub mod person;
mod placement;
pub mod policy;
pub mod pool;
mod profile;
pub mod rate_limits;
pub mod reach;
mod recovery;
pub mod recycle;
pub mod relay;
pub mod relay_config;
pub mod rules;
pub mod session;
mod slots;
pub mod store;
mod store_notice;
pub mod threads;
pub mod time;
mod tool;
mod turn_queue;
pub mod views;
#[cfg(test)]
mod wire_snapshots;
pub mod workspace;
pub mod worktree;
mod writer_offers;

pub use answer::{Answer, Decision, FormValue, Scope};
pub use api::{InvalidStart, StartRequest};
pub use broker::{PendingView, Resolution};
pub use control::Stopped;
pub use decider::{Decider, Front};
pub use discovery::{ListFilter, ListedSession};
pub use error::RelayError;
pub use event::{Envelope, Ev, ReviewFinding, ReviewOutput, Role};
pub use feed::{Feed, RelayEvent};
pub use follow::{Follow, FollowOptions, Followed};
pub use modes::PermissionMode;
pub use pending::PendingDetails;
pub use policy::StartPolicy;
pub use pool::CodexProcessView;
pub use reach::Reach;
pub use recycle::{OverLimit, RecyclePolicy};
pub use relay::{CreateOptions, DynamicTool, Relay, RelayConfig, ToolHandler};
pub use session::{SayInput, SayOutcome, SessionHandle, SessionSnapshot, SessionStatus};
pub use threads::{Forked, ModelChoice, ModelInfo, ReviewTarget, RolledBack};
pub use views::SessionMeta;
