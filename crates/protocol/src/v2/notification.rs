//! Server→client notifications, typed for the ones codex-relay acts on, raw for the rest.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::common::TokenUsage;
use super::item::ThreadItem;
use super::thread::Thread;
use super::turn::Turn;
use crate::jsonrpc::{Params, ParamsError, RequestId};

/// `error`: a turn-level error. `will_retry: true` is a notice, not the end of the turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorNotification {
    pub thread_id: String,
    #[serde(default)]
    pub turn_id: Option<String>,
    /// `{message, codexErrorInfo?, additionalDetails?}`.
    pub error: Value,
    #[serde(default)]
    pub will_retry: bool,
}

impl ErrorNotification {
    pub fn message(&self) -> &str {
        self.error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("")
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadStartedNotification {
    pub thread: Thread,
}

/// `thread/status/changed` (0.169): `status` is `{type: idle|active|systemError|notLoaded,
/// activeFlags?: [waitingOnApproval, waitingOnUserInput]}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadStatusChangedNotification {
    pub thread_id: String,
    pub status: Value,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadTokenUsage {
    /// Running total for the thread.
    #[serde(default)]
    pub total: TokenUsage,
    /// The last model call.
    #[serde(default)]
    pub last: TokenUsage,
    #[serde(default)]
    pub model_context_window: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsageUpdatedNotification {
    pub thread_id: String,
    #[serde(default)]
    pub turn_id: Option<String>,
    pub token_usage: ThreadTokenUsage,
}

/// `turn/started` and `turn/completed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnNotification {
    pub thread_id: String,
    pub turn: Turn,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnDiffUpdatedNotification {
    pub thread_id: String,
    pub turn_id: String,
    pub diff: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanStep {
    pub step: String,
    /// `pending`, `inProgress` or `completed`.
    pub status: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnPlanUpdatedNotification {
    pub thread_id: String,
    pub turn_id: String,
    #[serde(default)]
    pub explanation: Option<String>,
    pub plan: Vec<PlanStep>,
}

/// `item/started` and `item/completed`; the completed item is authoritative.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ItemNotification {
    pub thread_id: String,
    pub turn_id: String,
    pub item: ThreadItem,
}

/// Streaming text of one item: agent message, command output, reasoning.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeltaNotification {
    pub thread_id: String,
    pub turn_id: String,
    pub item_id: String,
    pub delta: String,
}

/// `serverRequest/resolved` (0.169): a server request was answered or withdrawn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerRequestResolvedNotification {
    pub thread_id: String,
    pub request_id: RequestId,
}

/// A notification from the server. Unknown methods, and known ones whose params do not
/// parse, are kept as [`ServerNotification::Unknown`] with their raw params.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerNotification {
    Error(ErrorNotification),
    ThreadStarted(ThreadStartedNotification),
    ThreadStatusChanged(ThreadStatusChangedNotification),
    TokenUsageUpdated(TokenUsageUpdatedNotification),
    TurnStarted(TurnNotification),
    TurnCompleted(TurnNotification),
    TurnDiffUpdated(TurnDiffUpdatedNotification),
    TurnPlanUpdated(TurnPlanUpdatedNotification),
    ItemStarted(ItemNotification),
    ItemCompleted(ItemNotification),
    AgentMessageDelta(DeltaNotification),
    CommandOutputDelta(DeltaNotification),
    ReasoningSummaryDelta(DeltaNotification),
    ReasoningTextDelta(DeltaNotification),
    ServerRequestResolved(ServerRequestResolvedNotification),
    Unknown { method: String, params: Value },
}

impl ServerNotification {
    /// Reads a notification; never fails.
    pub fn parse(method: &str, params: Value) -> Self {
        Self::from_params(method, &Params::from(params))
    }

    /// Reads a notification straight from its JSON text; never fails (see [`Self::try_from_params`]).
    pub fn from_params(method: &str, params: &Params<'_>) -> Self {
        Self::try_from_params(method, params).unwrap_or_else(|_| Self::raw(method, params))
    }

    /// The notification kept raw, as [`ServerNotification::Unknown`].
    pub fn raw(method: &str, params: &Params<'_>) -> Self {
        ServerNotification::Unknown {
            method: method.to_owned(),
            params: params.value(),
        }
    }

    /// Reads a notification: an unknown method is `Ok(Unknown)`; a known one whose params do
    /// not fit its type is an error that says what did not fit.
    pub fn try_from_params(method: &str, params: &Params<'_>) -> Result<Self, ParamsError> {
        fn typed<T: serde::de::DeserializeOwned>(p: &Params<'_>) -> serde_json::Result<Option<T>> {
            p.try_parse().map(Some)
        }
        use ServerNotification as N;
        let parsed = match method {
            "error" => typed(params).map(|p| p.map(N::Error)),
            "thread/started" => typed(params).map(|p| p.map(N::ThreadStarted)),
            "thread/status/changed" => typed(params).map(|p| p.map(N::ThreadStatusChanged)),
            "thread/tokenUsage/updated" => typed(params).map(|p| p.map(N::TokenUsageUpdated)),
            "turn/started" => typed(params).map(|p| p.map(N::TurnStarted)),
            "turn/completed" => typed(params).map(|p| p.map(N::TurnCompleted)),
            "turn/diff/updated" => typed(params).map(|p| p.map(N::TurnDiffUpdated)),
            "turn/plan/updated" => typed(params).map(|p| p.map(N::TurnPlanUpdated)),
            "item/started" => typed(params).map(|p| p.map(N::ItemStarted)),
            "item/completed" => typed(params).map(|p| p.map(N::ItemCompleted)),
            "item/agentMessage/delta" => typed(params).map(|p| p.map(N::AgentMessageDelta)),
            "item/commandExecution/outputDelta" => {
                typed(params).map(|p| p.map(N::CommandOutputDelta))
            }
            "item/reasoning/summaryTextDelta" => {
                typed(params).map(|p| p.map(N::ReasoningSummaryDelta))
            }
            "item/reasoning/textDelta" => typed(params).map(|p| p.map(N::ReasoningTextDelta)),
            "serverRequest/resolved" => typed(params).map(|p| p.map(N::ServerRequestResolved)),
            _ => Ok(None),
        };
        match parsed {
            Ok(Some(typed)) => Ok(typed),
            Ok(None) => Ok(Self::raw(method, params)),
            Err(reason) => Err(ParamsError {
                method: method.to_owned(),
                reason,
            }),
        }
    }

    /// The thread this notification belongs to, if any.
    pub fn thread_id(&self) -> Option<&str> {
        use ServerNotification as N;
        match self {
            N::Error(n) => Some(&n.thread_id),
            N::ThreadStarted(n) => Some(&n.thread.id),
            N::ThreadStatusChanged(n) => Some(&n.thread_id),
            N::TokenUsageUpdated(n) => Some(&n.thread_id),
            N::TurnStarted(n) | N::TurnCompleted(n) => Some(&n.thread_id),
            N::TurnDiffUpdated(n) => Some(&n.thread_id),
            N::TurnPlanUpdated(n) => Some(&n.thread_id),
            N::ItemStarted(n) | N::ItemCompleted(n) => Some(&n.thread_id),
            N::AgentMessageDelta(n)
            | N::CommandOutputDelta(n)
            | N::ReasoningSummaryDelta(n)
            | N::ReasoningTextDelta(n) => Some(&n.thread_id),
            N::ServerRequestResolved(n) => Some(&n.thread_id),
            N::Unknown { params, .. } => thread_id_of(params),
        }
    }
}

/// `params.threadId`, or `params.thread.id`, of any message.
pub fn thread_id_of(params: &Value) -> Option<&str> {
    params
        .get("threadId")
        .or_else(|| params.get("conversationId"))
        .or_else(|| params.get("thread").and_then(|t| t.get("id")))
        .and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn typed_when_known_raw_when_not() {
        let n = ServerNotification::parse(
            "turn/completed",
            json!({"threadId": "t1", "turn": {"id": "u1", "status": "interrupted", "items": [], "error": null}}),
        );
        match &n {
            ServerNotification::TurnCompleted(t) => {
                assert_eq!(t.turn.status, super::super::turn::TurnStatus::Interrupted)
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(n.thread_id(), Some("t1"));

        let unknown =
            ServerNotification::parse("thread/goal/updated", json!({"threadId": "t2", "goal": 1}));
        assert!(
            matches!(unknown, ServerNotification::Unknown { ref method, .. } if method == "thread/goal/updated")
        );
        assert_eq!(unknown.thread_id(), Some("t2"));

        // A known method with unreadable params is kept raw, not dropped.
        let bad = ServerNotification::parse("turn/started", json!({"threadId": 5}));
        assert!(matches!(bad, ServerNotification::Unknown { .. }));
    }
}
