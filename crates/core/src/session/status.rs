//! What a front sees of a session: its status word and a snapshot at a glance.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::agents::AgentInfo;
use crate::broker::PendingView;
use crate::event::Usage;

/// Where a session stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    /// A turn is running.
    Active,
    /// A turn waits for an approval.
    AwaitingApproval,
    /// A turn waits for an answer to a question or a tool call.
    AwaitingInput,
    /// No turn is running; the last one completed (or there was none yet).
    Idle,
    /// The last turn was interrupted.
    Interrupted,
    /// The last turn failed, or Codex died under it.
    Error,
    /// Closed; it takes no more input.
    Closed,
}

impl SessionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            SessionStatus::Active => "active",
            SessionStatus::AwaitingApproval => "awaiting_approval",
            SessionStatus::AwaitingInput => "awaiting_input",
            SessionStatus::Idle => "idle",
            SessionStatus::Interrupted => "interrupted",
            SessionStatus::Error => "error",
            SessionStatus::Closed => "closed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        serde_json::from_value(Value::String(s.to_owned())).ok()
    }

    /// A turn is running (in any of its forms).
    pub fn is_running(self) -> bool {
        matches!(
            self,
            Self::Active | Self::AwaitingApproval | Self::AwaitingInput
        )
    }
}

/// What a front sees of a session at a glance.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSnapshot {
    pub session_id: String,
    pub status: SessionStatus,
    pub cwd: Option<String>,
    pub model: Option<String>,
    /// The reasoning effort its turns run with (unset: Codex's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<String>,
    /// The turns of its thread's history, in order (what `thread/read` lists; a rollback
    /// drops the last ones).
    pub turns: Vec<String>,
    /// Turns it ran (a rollback does not lower it).
    pub turn_count: u64,
    pub current_turn: Option<String>,
    pub last_seq: u64,
    /// The final message of the last completed turn (parsed JSON when it had an output schema).
    pub result: Option<Value>,
    pub last_error: Option<String>,
    /// Codex's running total for the thread (as Codex last reported it).
    pub usage: Option<Usage>,
    /// The running (or last) turn's usage, summed over its model requests.
    pub turn_usage: Usage,
    /// What the session spent over its life (see [`crate::limits::Spent`]).
    pub spent: crate::limits::Spent,
    /// Its budget (empty: none).
    pub budget: crate::limits::Budget,
    /// The budget it reached: it refuses new turns until that is raised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_reached: Option<crate::limits::StopReason>,
    /// Why the relay stopped its last turn (a deadline, the idle watchdog, a budget).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<crate::limits::StopReason>,
    pub pending: Vec<PendingView>,
    /// Sub-agents this session's thread spawned (at any depth), with their running turn.
    pub agents: Vec<AgentInfo>,
    pub created_at: i64,
    pub updated_at: i64,
    /// While the store cannot take writes: why, for how long, the writes held in memory, and
    /// whether Codex is paused (the live view goes on; nothing is lost once it takes writes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_fault: Option<crate::store::StoreFault>,
    /// A thread of the Codex daemon the relay attached to (see docs/ATTACH.md): where, and
    /// whether the relay follows it now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attached: Option<crate::attach::Attached>,
    /// The git worktree the relay made for the session (its working directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<crate::config::WorktreeSpec>,
}
