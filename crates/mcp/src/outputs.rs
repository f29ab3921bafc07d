//! The tools' results as typed structs (camelCase on the wire): what each tool returns as
//! structured content, and the output schemas `tools/list` publishes for them.

use codex_relay_core::api::{AgentView, StoreFaultView, UsageView};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

/// `codex_start`.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StartOutput {
    pub session_id: String,
    /// `active` while the first turn runs.
    pub status: String,
    pub turn_id: Option<String>,
    pub cwd: Option<String>,
    pub model: Option<String>,
}

/// `codex_say`.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SayOutput {
    pub session_id: String,
    pub status: String,
    /// `started` (a new turn), `steered` (added to the running turn) or `queued` (a rate
    /// limit is hit: the turn waits and starts when it clears).
    pub mode: String,
    /// Empty while the turn is queued.
    pub turn_id: String,
    pub note: String,
}

/// One question of the pending request, with the answers it takes.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuestionOutput {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub question: String,
    pub options: Vec<String>,
}

/// The oldest open request of a session.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingQuestion {
    pub id: String,
    /// `command_approval`, `file_change_approval`, `permissions_approval`, `question`,
    /// `elicitation`, `tool_call`, `other`.
    #[serde(rename = "type")]
    pub kind: String,
    pub questions: Vec<QuestionOutput>,
    /// command, cwd, reason, changes, questions, tool, arguments, ... as the kind has them.
    pub details: Value,
    pub how_to_answer: String,
    /// ISO-8601; the request is declined then.
    pub expires_at: String,
    pub more_pending: usize,
    /// The sub-agent that asks, when it is not the session's own thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentOutput>,
    /// The `spawn_agent` call that started that sub-agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invoke: Option<String>,
    /// For an approval: what approving it lets Codex do beyond its sandbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reach: Option<ReachOutput>,
}

/// What approving a request lets Codex do (docs/RULES.md).
#[derive(Debug, Serialize, JsonSchema)]
pub struct ReachOutput {
    /// `no_sandbox`, `sandboxed`, `outside_if_blocked`, `outside`, `more_permissions`,
    /// `network`, `mcp_server`.
    pub kind: String,
    /// The same in one sentence.
    pub text: String,
}

/// A sub-agent: a Codex thread the session's thread spawned (directly or through others).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentOutput {
    pub thread: String,
    /// The thread that spawned it.
    pub parent: String,
    /// 1 for a child of the session's thread, 2 for a grandchild, ...
    pub depth: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nickname: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
}

impl From<&codex_relay_core::event::AgentRef> for AgentOutput {
    fn from(a: &codex_relay_core::event::AgentRef) -> Self {
        Self {
            thread: a.thread.clone(),
            parent: a.parent.clone(),
            depth: a.depth,
            nickname: a.nickname.clone(),
            role: a.role.clone(),
        }
    }
}

/// One sub-agent of a session, with the call that spawned it and whether it runs a turn.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubAgentOutput {
    pub agent: AgentOutput,
    pub invoke: Option<String>,
    pub running: bool,
}

impl From<&codex_relay_core::session::AgentInfo> for SubAgentOutput {
    fn from(a: &codex_relay_core::session::AgentInfo) -> Self {
        // The engine's view, nested the way this front documents it.
        let view = AgentView::from(a);
        Self {
            agent: (&view.agent).into(),
            invoke: view.invoke,
            running: view.running,
        }
    }
}

/// `codex_status`.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatusOutput {
    pub session_id: String,
    /// active, awaiting_approval, awaiting_input, queued, done, idle, interrupted, error,
    /// closed.
    pub status: String,
    /// The final message of the last completed turn (parsed JSON with an outputSchema).
    pub result: Option<Value>,
    pub error: Option<String>,
    pub recent_output: Vec<String>,
    pub pending_question: Option<PendingQuestion>,
    /// What the latest turn did, one entry per item: `{id?, itemType, status, summary?,
    /// exitCode?}`; each answered request is an `approval` item with `answeredBy` (`mcp`,
    /// `http`, `rule:<name>`, `timeout`, ...) and `who` (`human`, `rule`, `timeout`,
    /// `restart`, `relay`).
    pub item_events: Vec<Value>,
    /// Codex's running total for the thread.
    pub usage: Option<UsageView>,
    /// The running (or last) turn's usage, summed over every model request it made.
    pub turn_usage: UsageView,
    /// What the session spent over its life: `usage` summed over every model request,
    /// `turns`, `wallMs`, `costUsd` (with a price table).
    pub spent: codex_relay_core::limits::Spent,
    /// The session's budget (empty: none).
    pub budget: codex_relay_core::limits::Budget,
    /// The budget the session reached: it starts no new turn until codex_limits raises it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_reached: Option<codex_relay_core::limits::StopReason>,
    /// Why the relay stopped the last turn: `{reason: "deadline", limitMs}`,
    /// `{reason: "idle", idleMs}` or `{reason: "budget", budget, limit, used}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<codex_relay_core::limits::StopReason>,
    /// While a rate limit is hit and this session's new turn waits (status `queued`):
    /// `{position, hold: {limitId, window, usedPercent, resetsAt?}}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued: Option<Value>,
    /// The account's rate limits as Codex last reported them (`[{limitId, primary?,
    /// secondary?, ...}]`); empty until Codex sent some.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rate_limits: Vec<Value>,
    pub turn_count: u64,
    pub cwd: Option<String>,
    pub model: Option<String>,
    /// Session-protocol envelopes after `cursor` (docs/EVENTS.md).
    pub events: Vec<Value>,
    pub next_cursor: u64,
    pub more_events: bool,
    /// The session's sub-agents (Codex's `spawn_agent`), at any depth.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sub_agents: Vec<SubAgentOutput>,
    /// Present only while the store cannot take writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_fault: Option<StoreFaultView>,
}

/// `codex_respond`.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RespondOutput {
    pub session_id: String,
    pub id: String,
    pub decision: String,
    pub reason: Option<String>,
    /// The signed-in person who answered (over HTTP with a personal token, or the relay's
    /// token as `admin-token`); absent over stdio.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answered_by_user: Option<codex_relay_core::people::Person>,
    pub status: String,
    pub pending_question: Option<PendingQuestion>,
}

/// `codex_limits`.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LimitsOutput {
    pub session_id: String,
    pub budget: codex_relay_core::limits::Budget,
    pub limits: codex_relay_core::limits::TurnLimits,
    pub prices: Option<codex_relay_core::limits::Prices>,
    pub spent: codex_relay_core::limits::Spent,
    /// The budget the session reached, if any (it starts no new turn until raised).
    pub budget_reached: Option<codex_relay_core::limits::StopReason>,
}

/// `codex_interrupt`.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InterruptOutput {
    pub session_id: String,
    pub status: String,
    pub interrupted: bool,
    pub note: String,
}

/// One row of `codex_list`.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListedOutput {
    pub session_id: String,
    pub directory: Option<String>,
    pub summary: Option<String>,
    /// ISO-8601 time of the last update.
    pub timestamp: String,
    pub is_active: bool,
    pub active_status: Option<String>,
    pub source: String,
    pub owned_by_relay: bool,
    /// Its sub-agents, nested here instead of listed as sessions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sub_agents: Vec<SubAgentOutput>,
}

/// `codex_list`.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListOutput {
    pub sessions: Vec<ListedOutput>,
    /// Present only while the store cannot take writes (it is the relay's, so it is shown
    /// once here, not on every row).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_fault: Option<StoreFaultView>,
}

/// The structured content of a result.
pub fn value<T: Serialize>(out: T) -> Value {
    serde_json::to_value(out).unwrap_or(Value::Null)
}

/// `codex_worktree`.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorktreeOutput {
    pub session_id: String,
    /// diff, export or merge.
    pub action: String,
    /// diff: `{branch, base, baseCommit, path, files: [{path, status}], patch, truncated}`;
    /// export: `{branch, commit?, to?, patch?}`; merge: `{branch, into, commit, how}`.
    pub result: Value,
}
