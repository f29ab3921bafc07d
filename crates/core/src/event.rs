//! The session-protocol event model every front speaks: an envelope with a contiguous `seq`
//! around one event (`ev`), the seven base kinds plus codex-relay's extensions.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who an event is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Agent,
    /// The relay itself (status, pending requests, errors).
    System,
}

/// One entry of a session's log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    /// Unique id of the event: `<session>:<seq>`.
    pub id: String,
    /// 1, 2, 3, ... per session, without gaps.
    pub seq: u64,
    /// Unix milliseconds.
    pub time: i64,
    pub role: Role,
    /// The Codex turn the event belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<String>,
    /// The tool call that spawned the sub-agent this event comes from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invoke: Option<String>,
    /// The sub-agent this event comes from; absent for the session's own thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentRef>,
    pub ev: Ev,
}

/// A sub-agent: a Codex thread spawned (directly or through other sub-agents) by a session's
/// thread. Its events, requests and turns belong to that session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentRef {
    /// The sub-agent's own Codex thread.
    pub thread: String,
    /// The thread that spawned it (the session's thread, or another sub-agent's).
    pub parent: String,
    /// 1 for a child of the session's thread, 2 for a grandchild, ...
    #[serde(default)]
    pub depth: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nickname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
}

impl AgentRef {
    /// How a person names it: its nickname, else its role, else its thread id.
    pub fn label(&self) -> &str {
        self.nickname
            .as_deref()
            .or(self.role.as_deref())
            .unwrap_or(&self.thread)
    }
}

/// Where an event of a sub-agent comes from; absent for the session's own thread.
#[derive(Debug, Clone, PartialEq)]
pub struct Origin {
    pub invoke: Option<String>,
    pub agent: AgentRef,
}

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TurnEndStatus {
    Completed,
    Failed,
    Cancelled,
}

/// How a tool call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolEndStatus {
    Completed,
    Failed,
    Declined,
}

/// Token counts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Usage {
    pub input_tokens: i64,
    pub cached_input_tokens: i64,
    pub output_tokens: i64,
    pub reasoning_output_tokens: i64,
    pub total_tokens: i64,
}

impl Usage {
    /// What was used since `before` (an earlier reading of the same running total).
    pub fn since(&self, before: &Usage) -> Usage {
        Usage {
            input_tokens: self.input_tokens - before.input_tokens,
            cached_input_tokens: self.cached_input_tokens - before.cached_input_tokens,
            output_tokens: self.output_tokens - before.output_tokens,
            reasoning_output_tokens: self.reasoning_output_tokens - before.reasoning_output_tokens,
            total_tokens: self.total_tokens - before.total_tokens,
        }
    }
}

/// The event itself, tagged by `t`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "kebab-case")]
pub enum Ev {
    /// Text from the user or the agent; `thinking` marks reasoning.
    Text {
        text: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        thinking: bool,
    },
    /// A tool call began (a command, a patch, a dynamic or MCP tool).
    ToolCallStart {
        call: String,
        name: String,
        title: String,
        description: String,
        args: Value,
    },
    /// A tool call ended.
    ToolCallEnd {
        call: String,
        status: ToolEndStatus,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i64>,
    },
    /// A file the agent changed (`kind`: add, delete, update), with its diff.
    File {
        path: String,
        kind: String,
        diff: String,
    },
    /// An image the user sent or the agent produced.
    Photo {
        url: String,
    },
    TurnStart {},
    TurnEnd {
        status: TurnEndStatus,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// Why the relay stopped the turn (its deadline, the idle watchdog, a budget).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stopped: Option<crate::limits::StopReason>,
        /// The turn's token usage, summed over every model request it made.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
        /// The kind of a failure, as Codex names it (`codexErrorInfo`): `usageLimitExceeded`
        /// when the account's usage limit is reached, `unauthorized`, `contextWindowExceeded`...
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error_kind: Option<String>,
    },
    // --- codex-relay extensions (docs/EVENTS.md) ---
    /// Codex asked something (an approval, a question, a tool call); see [`crate::broker`].
    RequestOpened {
        request: Box<crate::pending::PendingView>,
    },
    /// A pending request was answered: by a front, by a rule, by its timeout, or because
    /// Codex went away.
    RequestResolved {
        id: String,
        decision: crate::answer::Decision,
        by: crate::decider::Decider,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// The person who answered (name, id, role, front, device), when one signed in did.
        #[serde(default, rename = "byUser", skip_serializing_if = "Option::is_none")]
        by_user: Option<Box<crate::person::Person>>,
        /// The request itself, when a rule answered it as it opened (no `request-opened`
        /// went before: nobody was asked).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request: Option<Box<crate::pending::PendingView>>,
    },
    /// Token usage after a model call: thread totals and the last call.
    Usage {
        total: Usage,
        last: Usage,
    },
    /// The session's status changed.
    Status {
        status: String,
    },
    /// Something went wrong; `retrying` means Codex is retrying on its own.
    Error {
        message: String,
        #[serde(default)]
        retrying: bool,
    },
    /// The agent's plan.
    Plan {
        steps: Value,
    },
    /// Something the relay did that changes nothing in the conversation, for whoever reads
    /// the log: the Codex process under the session was recycled, or is far over its memory
    /// limit during a turn.
    Note {
        message: String,
    },
    /// A review turn's findings (`review/start`), as the reviewing model gave them.
    Review {
        review: Box<ReviewOutput>,
    },
    /// The session's last turns were dropped from the thread's history (`rollback`): the
    /// events of those turns stay in the log, and these turns no longer count as history.
    RolledBack {
        turns: Vec<String>,
    },
    /// The session was forked from another one: the turns that follow were copied from it
    /// (through `through`, or all of them).
    Forked {
        from: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        through: Option<String>,
    },
    /// A Codex notification codex-relay does not map (kept raw, never dropped).
    Codex {
        method: String,
        params: Value,
    },
}

impl Ev {
    /// The `t` tag.
    pub fn kind(&self) -> &'static str {
        match self {
            Ev::Text { .. } => "text",
            Ev::ToolCallStart { .. } => "tool-call-start",
            Ev::ToolCallEnd { .. } => "tool-call-end",
            Ev::File { .. } => "file",
            Ev::Photo { .. } => "photo",
            Ev::TurnStart {} => "turn-start",
            Ev::TurnEnd { .. } => "turn-end",
            Ev::RequestOpened { .. } => "request-opened",
            Ev::RequestResolved { .. } => "request-resolved",
            Ev::Usage { .. } => "usage",
            Ev::Status { .. } => "status",
            Ev::Error { .. } => "error",
            Ev::Plan { .. } => "plan",
            Ev::Note { .. } => "note",
            Ev::Review { .. } => "review",
            Ev::RolledBack { .. } => "rolled-back",
            Ev::Forked { .. } => "forked",
            Ev::Codex { .. } => "codex",
        }
    }
}

/// What a review found: Codex's review output (`findings`, the overall verdict) and the text
/// it showed for it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReviewOutput {
    pub findings: Vec<ReviewFinding>,
    /// E.g. `patch is correct`, `patch is incorrect`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overall_correctness: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overall_explanation: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overall_confidence_score: Option<f64>,
    /// The review as Codex rendered it for people.
    #[serde(default)]
    pub text: String,
}

/// One finding of a review.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReviewFinding {
    pub title: String,
    #[serde(default)]
    pub body: String,
    /// 0 (most urgent) to 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence_score: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// First and last line, 1-based.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines: Option<(u64, u64)>,
}

impl ReviewOutput {
    /// Codex's review output as the reviewing model wrote it (`findings`, `overall_*`,
    /// snake_case, each finding's `code_location`); `None` when `text` is not that.
    pub fn from_model_json(text: &str) -> Option<ReviewOutput> {
        let v: Value = serde_json::from_str(text.trim()).ok()?;
        let findings = v.get("findings")?.as_array()?;
        let str_of = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        Some(ReviewOutput {
            findings: findings
                .iter()
                .map(|f| {
                    let loc = f.get("code_location");
                    let range = loc.and_then(|l| l.get("line_range"));
                    ReviewFinding {
                        title: str_of(f, "title").unwrap_or_default(),
                        body: str_of(f, "body").unwrap_or_default(),
                        priority: f.get("priority").and_then(Value::as_i64),
                        confidence_score: f.get("confidence_score").and_then(Value::as_f64),
                        file: loc.and_then(|l| str_of(l, "absolute_file_path")),
                        lines: range.and_then(|r| {
                            Some((r.get("start")?.as_u64()?, r.get("end")?.as_u64()?))
                        }),
                    }
                })
                .collect(),
            overall_correctness: str_of(&v, "overall_correctness"),
            overall_explanation: str_of(&v, "overall_explanation"),
            overall_confidence_score: v.get("overall_confidence_score").and_then(Value::as_f64),
            text: String::new(),
        })
    }
}

/// The `request-opened` event for a pending request.
pub fn request_opened(view: &crate::pending::PendingView) -> Ev {
    Ev::RequestOpened {
        request: Box::new(view.clone()),
    }
}

/// The `request-resolved` event for a resolution.
pub fn request_resolved(r: &crate::decider::Resolution) -> Ev {
    Ev::RequestResolved {
        id: r.id.clone(),
        decision: r.decision.clone(),
        by: r.by.clone(),
        reason: r.reason.clone(),
        by_user: r.by_user.clone().map(Box::new),
        request: None,
    }
}

/// The `request-resolved` event of a request a rule answered as it opened: it carries the
/// request, so the log says which rule let (or kept) which command through.
pub fn request_ruled(r: &crate::decider::Resolution, view: &crate::pending::PendingView) -> Ev {
    Ev::RequestResolved {
        id: r.id.clone(),
        decision: r.decision.clone(),
        by: r.by.clone(),
        reason: r.reason.clone(),
        by_user: None,
        request: Some(Box::new(view.clone())),
    }
}

/// Live-only streaming text: not stored and not numbered; the completed item that follows is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delta {
    pub turn: String,
    pub item: String,
    /// `text`, `thinking` or `output` (command output).
    pub stream: String,
    pub delta: String,
    /// For a sub-agent's delta: the call that spawned it, and its thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invoke: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn envelopes_serialize_in_the_session_protocol_shape() {
        let env = Envelope {
            id: "s1:3".into(),
            seq: 3,
            time: 1,
            role: Role::Agent,
            turn: Some("u1".into()),
            invoke: None,
            agent: None,
            ev: Ev::Text {
                text: "hi".into(),
                thinking: false,
            },
        };
        assert_eq!(
            serde_json::to_value(&env).unwrap(),
            json!({"id": "s1:3", "seq": 3, "time": 1, "role": "agent", "turn": "u1", "ev": {"t": "text", "text": "hi"}})
        );
        let end: Ev =
            serde_json::from_value(json!({"t": "turn-end", "status": "cancelled"})).unwrap();
        assert_eq!(
            end,
            Ev::TurnEnd {
                status: TurnEndStatus::Cancelled,
                error: None,
                stopped: None,
                usage: None,
                error_kind: None,
            }
        );
        assert_eq!(end.kind(), "turn-end");
    }
}
