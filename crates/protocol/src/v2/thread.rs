//! Thread requests (`thread/start`, resume, list, read, archive) and the `Thread` object.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::common::{ApprovalPolicy, SandboxMode};
use super::turn::Turn;

/// A caller-defined tool the model may call; Codex forwards calls as `item/tool/call`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DynamicToolSpec {
    /// Always `function`; 0.169 requires it and 0.98 ignores it.
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

fn function_type() -> String {
    "function".to_owned()
}

impl DynamicToolSpec {
    pub fn function(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
    ) -> Self {
        Self {
            kind: function_type(),
            name: name.into(),
            description: description.into(),
            input_schema,
        }
    }
}

/// `thread/start`. Every field is optional: Codex falls back to its config.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadStartParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_policy: Option<ApprovalPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxMode>,
    /// `-c`-style overrides, e.g. `{"model_reasoning_effort": "low"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_instructions: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub developer_instructions: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamic_tools: Option<Vec<DynamicToolSpec>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ephemeral: Option<bool>,
    /// Fields this crate does not model yet, passed through as they are.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `thread/resume`: load a stored thread (by id, or by rollout `path`) into this process.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadResumeParams {
    pub thread_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
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

/// The result of `thread/start`, `thread/resume` and `thread/fork`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadStartResponse {
    pub thread: Thread,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub approval_policy: Option<Value>,
    #[serde(default)]
    pub sandbox: Option<Value>,
    /// Who answers the thread's approvals (0.169: `"user"`, or a reviewing model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvals_reviewer: Option<Value>,
}

/// A Codex thread (a conversation) as the server describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Thread {
    pub id: String,
    #[serde(default)]
    pub preview: Option<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    /// Unix seconds.
    #[serde(default)]
    pub created_at: Option<i64>,
    /// Unix seconds.
    #[serde(default)]
    pub updated_at: Option<i64>,
    #[serde(default)]
    pub cli_version: Option<String>,
    #[serde(default)]
    pub model_provider: Option<String>,
    /// Rollout file on disk, when there is one.
    #[serde(default)]
    pub path: Option<String>,
    /// Who created it (`cli`, `vscode`, `exec`, `appServer`, ...); the shape moves between
    /// versions, so it is kept raw.
    #[serde(default)]
    pub source: Option<Value>,
    /// Present from 0.169: `{type: notLoaded|idle|systemError|active, activeFlags?}`.
    #[serde(default)]
    pub status: Option<Value>,
    /// The thread that spawned this one, for a sub-agent (0.169).
    #[serde(default)]
    pub parent_thread_id: Option<String>,
    #[serde(default)]
    pub agent_nickname: Option<String>,
    #[serde(default)]
    pub agent_role: Option<String>,
    #[serde(default)]
    pub turns: Vec<Turn>,
}

/// How a sub-agent thread was spawned: its thread's `source` is
/// `{subAgent: {thread_spawn: {...}}}` (0.169).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubAgentSpawn {
    pub parent_thread_id: String,
    #[serde(default)]
    pub depth: i64,
    #[serde(default)]
    pub agent_nickname: Option<String>,
    #[serde(default)]
    pub agent_role: Option<String>,
    #[serde(default)]
    pub agent_path: Option<String>,
}

impl Thread {
    /// The spawn record when this thread is a sub-agent another thread spawned: from its
    /// `source`, else from the top-level `parentThreadId` and agent fields.
    pub fn spawned_by(&self) -> Option<SubAgentSpawn> {
        let from_source = self
            .source
            .as_ref()
            .and_then(|s| s.get("subAgent")?.get("thread_spawn"))
            .and_then(|spawn| SubAgentSpawn::deserialize(spawn).ok());
        let mut spawn = match from_source {
            Some(s) => s,
            None => SubAgentSpawn {
                parent_thread_id: self.parent_thread_id.clone()?,
                depth: 1,
                agent_nickname: None,
                agent_role: None,
                agent_path: None,
            },
        };
        spawn.agent_nickname = spawn.agent_nickname.or(self.agent_nickname.clone());
        spawn.agent_role = spawn.agent_role.or(self.agent_role.clone());
        Some(spawn)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadListParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archived: Option<bool>,
    /// Threads from every provider are listed only when this names them; `None` means the
    /// configured provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_providers: Option<Vec<String>>,
    /// Which creators to include (`cli`, `vscode`, `exec`, `appServer`, `subAgent…`,
    /// `unknown`); Codex lists only interactive ones when this is absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_kinds: Option<Vec<String>>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadListResponse {
    pub data: Vec<Thread>,
    #[serde(default)]
    pub next_cursor: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadReadParams {
    pub thread_id: String,
    #[serde(default, skip_serializing_if = "super::common::is_false")]
    pub include_turns: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadReadResponse {
    pub thread: Thread,
}
