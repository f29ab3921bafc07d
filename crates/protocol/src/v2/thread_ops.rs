//! Thread operations beyond a turn: `review/start`, `thread/fork` (whole, or up to a turn),
//! `thread/revert` (0.169+) and `thread/rollback` (0.98) to drop the last turns, and
//! `thread/compact/start`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::common::{ApprovalPolicy, SandboxMode};
use super::thread::Thread;
use super::turn::Turn;

/// What a review looks at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ReviewTarget {
    /// The working tree: staged, unstaged and untracked files.
    UncommittedChanges,
    /// The current branch against `branch`.
    BaseBranch { branch: String },
    /// What one commit introduced.
    Commit {
        sha: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
    },
    /// Free-form review instructions.
    Custom { instructions: String },
}

/// `review/start`: a review turn on the thread (`inline`, the only delivery every tested
/// Codex offers).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewStartParams {
    pub thread_id: String,
    pub target: ReviewTarget,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewStartResponse {
    pub turn: Turn,
    pub review_thread_id: String,
}

/// `thread/fork`: a new thread starting from a copy of another one's history, all of it or
/// up to a turn (`lastTurnId`, inclusive, or `beforeTurnId`, exclusive: 0.169+).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadForkParams {
    pub thread_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_turn_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_turn_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_policy: Option<ApprovalPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_instructions: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub developer_instructions: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `thread/revert` (0.169+): the thread's history becomes what it was before `beforeTurnId`
/// (that turn and every later one dropped). Files the turns changed stay as they are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadRevertParams {
    pub thread_id: String,
    pub before_turn_id: String,
}

/// `thread/rollback` (0.98; 0.169 replaced it with `thread/revert`): drops the last
/// `numTurns` turns of the thread's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadRollbackParams {
    pub thread_id: String,
    pub num_turns: u32,
}

/// The answer of `thread/revert` and `thread/rollback`: the thread after it (0.98 with its
/// turns; 0.169+ without them, read with `thread/read`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadRewoundResponse {
    pub thread: Thread,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}
