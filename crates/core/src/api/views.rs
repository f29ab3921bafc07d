//! The views several fronts show the same way: what a store fault means for a session, token
//! usage in camelCase, a sub-agent with whether it runs. Schema derives come with the
//! `json-schema` (MCP's output schemas) and `openapi` (the HTTP front's document) features.

use serde::Serialize;

use crate::event::{AgentRef, Usage};
use crate::session::AgentInfo;
use crate::store::StoreFault;

/// The store cannot take writes: the session goes on live, its events are held in memory and
/// retried, and nothing is lost once the database takes writes again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct StoreFaultView {
    /// The database's reason.
    pub message: String,
    /// How long the fault has lasted, in milliseconds.
    pub for_ms: u64,
    /// Writes held in memory, not yet stored.
    pub writes_held: u64,
    /// The held writes reached their bound: Codex is paused (its turns wait) until the
    /// database takes writes again.
    pub codex_paused: bool,
}

impl From<&StoreFault> for StoreFaultView {
    fn from(f: &StoreFault) -> Self {
        Self {
            message: f.message.clone(),
            for_ms: f.for_ms,
            writes_held: f.queued_writes,
            codex_paused: f.codex_paused,
        }
    }
}

/// Token usage of a session, as the tools show it (the event log keeps Codex's snake_case).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct UsageView {
    pub input_tokens: i64,
    pub cached_input_tokens: i64,
    pub output_tokens: i64,
    pub reasoning_output_tokens: i64,
    pub total_tokens: i64,
}

impl From<&Usage> for UsageView {
    fn from(u: &Usage) -> Self {
        Self {
            input_tokens: u.input_tokens,
            cached_input_tokens: u.cached_input_tokens,
            output_tokens: u.output_tokens,
            reasoning_output_tokens: u.reasoning_output_tokens,
            total_tokens: u.total_tokens,
        }
    }
}

/// One sub-agent of a session: `{thread, parent, depth, nickname?, role?, invoke?, running}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AgentView {
    #[serde(flatten)]
    pub agent: AgentRef,
    /// The `spawn_agent` call that started it, once known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invoke: Option<String>,
    /// It runs a turn now.
    pub running: bool,
}

impl From<&AgentInfo> for AgentView {
    fn from(a: &AgentInfo) -> Self {
        Self {
            agent: a.agent.clone(),
            invoke: a.invoke.clone(),
            running: a.turn.is_some(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_store_fault_shows_its_reason_age_writes_and_the_pause() {
        let fault = StoreFault {
            message: "database is locked".into(),
            for_ms: 1500,
            queued_writes: 42,
            codex_paused: true,
        };
        assert_eq!(
            serde_json::to_value(StoreFaultView::from(&fault)).unwrap(),
            json!({"message": "database is locked", "forMs": 1500, "writesHeld": 42,
                "codexPaused": true})
        );
    }

    #[test]
    fn an_agent_is_flat_with_its_call_and_whether_it_runs() {
        let info = AgentInfo {
            agent: AgentRef {
                thread: "t2".into(),
                parent: "t1".into(),
                depth: 1,
                nickname: Some("Ada".into()),
                role: None,
            },
            invoke: Some("call-1".into()),
            turn: Some("turn-9".into()),
        };
        assert_eq!(
            serde_json::to_value(AgentView::from(&info)).unwrap(),
            json!({"thread": "t2", "parent": "t1", "depth": 1, "nickname": "Ada",
                "invoke": "call-1", "running": true})
        );
        let idle = AgentInfo {
            turn: None,
            invoke: None,
            ..info
        };
        assert_eq!(
            serde_json::to_value(AgentView::from(&idle)).unwrap(),
            json!({"thread": "t2", "parent": "t1", "depth": 1, "nickname": "Ada",
                "running": false})
        );
    }
}
