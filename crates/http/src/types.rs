//! The API's request and response bodies (what the OpenAPI document is generated from).

use codex_relay_core::api::{AgentView, StoreFaultView};
use codex_relay_core::{PendingView, SessionSnapshot};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};

/// `POST /api/sessions`: the options of MCP's `codex_start` (same validation and messages),
/// plus `planMode` and `developerInstructions`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateSession {
    /// The task for Codex (the first message of the session).
    pub prompt: String,
    /// Directory the session works in (absolute, or relative to the relay's directory).
    #[serde(alias = "workingDirectory")]
    pub cwd: Option<String>,
    /// Model override, e.g. "gpt-5-codex" (`GET /api/models` lists them).
    pub model: Option<String>,
    /// Reasoning effort of its turns: `low`, `medium`, `high`, ... (what the model takes).
    pub effort: Option<String>,
    /// `untrusted`, `on-failure`, `on-request` or `never`.
    #[schema(value_type = Option<String>)]
    pub approval_policy: Option<codex_relay_protocol::v2::ApprovalPolicy>,
    /// `read-only`, `workspace-write` or `danger-full-access`.
    #[schema(value_type = Option<String>)]
    pub sandbox: Option<codex_relay_protocol::v2::SandboxMode>,
    /// approvalPolicy "on-request" + sandbox "workspace-write" (explicit values win).
    pub full_auto: Option<bool>,
    /// No approvals and no sandbox; only for isolated environments.
    pub dangerously_bypass_approvals_and_sandbox: Option<bool>,
    /// A Codex profile for this session.
    pub profile: Option<String>,
    /// Codex config overrides (`-c key=value`).
    #[schema(value_type = Option<Object>)]
    pub config: Option<Map<String, Value>>,
    pub base_instructions: Option<String>,
    pub developer_instructions: Option<String>,
    /// Local paths (relative to cwd) or http(s)/data URLs.
    pub images: Option<Vec<String>>,
    /// JSON Schema the first turn's final message must follow.
    #[schema(value_type = Option<Object>)]
    pub output_schema: Option<Value>,
    /// Run the first turn in plan mode, where the model may ask questions.
    pub plan_mode: Option<bool>,
    /// Labels approval rules can match on (a rule's `labels` must all be here).
    pub labels: Option<Vec<String>>,
    /// Every turn's `{deadlineMs?, idleMs?, graceMs?}` (a message may set its own; unset:
    /// the relay's `--turn-deadline` / `--idle-timeout`).
    pub limits: Option<codex_relay_core::limits::TurnLimits>,
    /// The session's budget (docs/AGENTS.md); raised with `POST /api/sessions/{id}/limits`.
    pub budget: Option<codex_relay_core::limits::Budget>,
    /// The price table of its estimated cost (US dollars per million tokens).
    pub prices: Option<codex_relay_core::limits::Prices>,
    /// Start it on the Codex daemon this relay is attached to (`serve --attach`,
    /// docs/ATTACH.md), where the terminal picks it up with `codex resume <id>`; 503 when
    /// the relay is not attached now.
    pub on_daemon: Option<bool>,
    /// Work in a git worktree made for the session (docs/AGENTS.md, "A worktree per session").
    pub worktree: Option<WorktreeRequest>,
}

/// `{repo?, base?, branch?, keep?}`: `repo` (default `cwd`) a directory in the repository,
/// `base` (default its current branch) what to start from, `branch` (default `codex/<id>`)
/// the new branch, `keep` leaves the worktree when the session closes.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorktreeRequest {
    pub repo: Option<String>,
    pub base: Option<String>,
    pub branch: Option<String>,
    pub keep: Option<bool>,
}

impl From<WorktreeRequest> for codex_relay_core::worktree::WorktreeSpec {
    fn from(w: WorktreeRequest) -> Self {
        Self {
            repo: w.repo.unwrap_or_default(),
            base: w.base,
            branch: w.branch,
            keep: w.keep == Some(true),
            ..Default::default()
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Created {
    pub session_id: String,
    pub turn_id: Option<String>,
    pub status: String,
}

/// `GET /api/sessions` filters.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only sessions working in this directory.
    pub cwd: Option<String>,
    /// Only sessions of this relay with this status (`active`, `idle`, `closed`, ...).
    pub status: Option<String>,
    /// Rows per page (default 50, at most 500).
    pub limit: Option<usize>,
    /// `nextCursor` of the previous page.
    pub cursor: Option<String>,
}

/// One row of `GET /api/sessions`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionRow {
    pub session_id: String,
    pub cwd: Option<String>,
    /// The first user message, when Codex has one.
    pub preview: Option<String>,
    /// This relay's status for its sessions; null for threads other clients made.
    pub status: Option<String>,
    pub model: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub usage: Option<Value>,
    /// Unix milliseconds.
    pub updated_at: i64,
    /// `codex-relay`, or Codex's source (`cli`, `exec`, `vscode`, ...).
    pub source: String,
    /// Known to this relay.
    pub owned: bool,
    /// Attached in this relay's Codex right now.
    pub live: bool,
    /// Its sub-agents (threads it spawned, at any depth), nested here instead of listed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schema(value_type = Vec<Object>)]
    pub agents: Vec<AgentView>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionList {
    pub sessions: Vec<SessionRow>,
    pub next_cursor: Option<String>,
}

/// A session at a glance.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionView {
    pub session_id: String,
    /// `active`, `awaiting_approval`, `awaiting_input`, `idle`, `interrupted`, `error`, `closed`.
    pub status: String,
    pub cwd: Option<String>,
    pub model: Option<String>,
    /// The reasoning effort its turns run with (absent: Codex's default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effort: Option<String>,
    /// The turns of its thread's history, in order (a rollback drops the last ones).
    pub turns: Vec<String>,
    pub turn_count: u64,
    pub current_turn: Option<String>,
    /// The seq of the newest logged event.
    pub last_seq: u64,
    /// The final message of the last completed turn (parsed JSON with an output schema).
    #[schema(value_type = Option<Object>)]
    pub result: Option<Value>,
    pub last_error: Option<String>,
    /// Codex's running total for the thread.
    #[schema(value_type = Option<Object>)]
    pub usage: Option<Value>,
    /// The running (or last) turn's usage, summed over every model request it made.
    pub turn_usage: codex_relay_core::event::Usage,
    /// What the session spent over its life (usage summed over every request, turns, wall
    /// time, estimated cost).
    pub spent: codex_relay_core::limits::Spent,
    pub budget: codex_relay_core::limits::Budget,
    /// The budget it reached: it starts no new turn until that is raised.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_reached: Option<codex_relay_core::limits::StopReason>,
    /// Why the relay stopped its last turn (a deadline, the idle watchdog, a budget).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<codex_relay_core::limits::StopReason>,
    /// Open requests: `{id, sessionId, kind, question, options, details, turn, createdAt,
    /// deadline}`.
    #[schema(value_type = Vec<Object>)]
    pub pending: Vec<PendingView>,
    /// Sub-agents the session's thread spawned: `{thread, parent, depth, nickname?, role?,
    /// invoke?, running}`.
    #[schema(value_type = Vec<Object>)]
    pub agents: Vec<AgentView>,
    pub created_at: i64,
    pub updated_at: i64,
    /// Present only while the store cannot take writes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store_fault: Option<StoreFaultView>,
    /// Present only for a thread of the Codex daemon the relay attached to (docs/ATTACH.md):
    /// `{socket, state: live|idle|detached, daemonPid?}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub attached: Option<Value>,
    /// Present while a rate limit is hit and the session's new turn waits in the relay's
    /// queue: `{position, hold: {limitId, window, usedPercent, resetsAt?}}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub queued: Option<Value>,
    /// The session's git worktree: `{repo, base, branch, keep?, repoRoot, path, baseCommit}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub worktree: Option<Value>,
}

impl From<SessionSnapshot> for SessionView {
    fn from(s: SessionSnapshot) -> Self {
        Self {
            session_id: s.session_id,
            status: s.status.as_str().to_owned(),
            cwd: s.cwd,
            model: s.model,
            effort: s.effort,
            turns: s.turns,
            turn_count: s.turn_count,
            current_turn: s.current_turn,
            last_seq: s.last_seq,
            result: s.result,
            last_error: s.last_error,
            usage: s.usage.and_then(|u| serde_json::to_value(u).ok()),
            turn_usage: s.turn_usage,
            spent: s.spent,
            budget: s.budget,
            budget_reached: s.budget_reached,
            stopped: s.stopped,
            pending: s.pending,
            agents: s.agents.iter().map(Into::into).collect(),
            created_at: s.created_at,
            updated_at: s.updated_at,
            store_fault: s.store_fault.as_ref().map(Into::into),
            attached: s
                .attached
                .as_ref()
                .and_then(|a| serde_json::to_value(a).ok()),
            queued: None,
            worktree: s.worktree.and_then(|w| serde_json::to_value(w).ok()),
        }
    }
}

/// `POST /api/sessions/{id}/messages`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Message {
    pub text: String,
    /// Local paths or http(s)/data URLs.
    #[serde(default)]
    pub images: Vec<String>,
    /// This turn's `{deadlineMs?, idleMs?, graceMs?}` (ignored when steering).
    #[serde(default)]
    pub limits: Option<codex_relay_core::limits::TurnLimits>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Said {
    /// `started` (a new turn), `steered` (added to the running turn) or `queued` (a rate
    /// limit is hit: the turn waits in the relay's queue and starts when it clears).
    pub mode: String,
    /// The turn's id; empty while it is queued.
    pub turn_id: String,
    /// The queued turn's place in the queue (1 is next).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position: Option<usize>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Interrupted {
    /// False when no turn was running.
    pub interrupted: bool,
}

#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CloseQuery {
    /// Do not wait for the running turn to stop.
    pub force: Option<bool>,
}

#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// Events with a seq greater than this (default 0).
    pub after: Option<u64>,
    /// At most this many (default 500, at most 1000).
    pub limit: Option<usize>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventPage {
    /// Session-protocol envelopes `{id, seq, time, role, turn?, ev: {t, ...}}` (docs/EVENTS.md).
    #[schema(value_type = Vec<Object>)]
    pub events: Vec<std::sync::Arc<codex_relay_core::Envelope>>,
    /// The newest seq of the session (more events follow when it is above the last one here).
    pub last_seq: u64,
}

#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StreamQuery {
    /// Resume after this seq (the `Last-Event-ID` header wins when both are given).
    pub after: Option<u64>,
}

/// `POST /api/codex/permission/respond` (reference-001 compatible).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PermissionResponse {
    /// The id of the `permission_request` / `ask_user_question` event.
    pub id: String,
    pub action: Action,
    /// For questions: `{"answers": {"q0": "label"}}` (or keyed by question id, or a list);
    /// for tool calls: `{"output": "..."}`.
    #[schema(value_type = Option<Object>)]
    pub updated_input: Option<Value>,
    /// With `deny`: the reason, passed on to the model.
    pub message: Option<String>,
    /// With `allow` on an approval: approve for the rest of the session.
    pub for_session: Option<bool>,
    /// On an approval: one of the request's `options` words (`approve`, `approve for
    /// session`, `approve with codex rule` where offered, `deny`, `cancel`); when given it is
    /// the answer (`message` goes with a denial) and `action` and `forSession` are not read.
    pub option: Option<String>,
    /// With an approval of a risky request, when step-up applies: the user-verified passkey
    /// assertion (`PublicKeyCredential.toJSON()`) made for the challenge of
    /// `POST /api/passkeys/step-up {request}`. Without it such an approval gets 403
    /// `step_up_required`.
    #[schema(value_type = Option<Object>)]
    pub step_up: Option<Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Allow,
    Deny,
    Cancel,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PermissionResolved {
    pub id: String,
    /// `approve`, `approve for session`, `deny`, `cancel`, `answer`, `error`.
    pub decision: String,
    /// Who answered (`http` here).
    pub by: String,
    /// The signed-in person who answered: `{id, name, role, front, device?}` (the relay's
    /// token is `admin-token`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub by_user: Option<serde_json::Value>,
    pub reason: Option<String>,
}

/// Health of the relay.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    /// `ok` or `degraded`.
    pub status: String,
    pub codex: Check,
    pub store: Check,
    /// With a Postgres store shared by several instances: the cluster as this instance sees
    /// it (docs/CLUSTER.md). Absent when the relay runs alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<codex_relay_core::cluster::ClusterView>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Check {
    pub ok: bool,
    pub detail: String,
}
