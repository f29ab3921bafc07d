//! Typed views every front shows (MCP, HTTP, the UI): a session's stored metadata (and the
//! serde of a decision's word). The stored JSON is unchanged: these parse it and serialize back to the
//! same shape.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::event::{AgentRef, Usage};

/// A session's `meta` column: how it was created, where it moved, and what it ended with. One
/// owner ([`crate::session::SessionShared`]) reads and writes it; rows written by older
/// versions load (unknown fields are kept in `other` and written back).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionMeta {
    /// The create options in effect: the resolved approval policy, sandbox, config overrides
    /// and working directory. What `thread/resume` sends again.
    #[serde(default)]
    pub options: crate::config::CreateOptions,
    /// Names of the dynamic tools offered to the model.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// The session is a Codex thread another client made, resumed here.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resumed_from_codex: bool,
    /// The session is a thread of a Codex daemon the relay attached to (the one the terminal
    /// uses): it lives there, not in the relay's own Codex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attached: Option<Attached>,
    /// The directory the next `turn/start` moves the thread to (a moved session).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_cwd: Option<String>,
    /// The isolated workspace the session was created (or last resumed) with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<crate::config::WorkspaceSpec>,
    /// The last turn's result: its final message, or the parsed JSON of a typed turn.
    #[serde(default)]
    pub result: Option<Value>,
    #[serde(default)]
    pub last_error: Option<String>,
    #[serde(default)]
    pub usage: Option<Usage>,
    /// What it spent over its life (token usage summed over every request, turns, time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spent: Option<crate::limits::Spent>,
    /// Its sub-agents.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<AgentInfo>,
    /// The turns of its thread's history, in order (a rollback drops the last ones).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<String>,
    /// Turns of `turns` that `review/start` answered: Codex 0.169+ runs the review in a turn
    /// of its own just before it, so a rollback counts the two as one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub review_turns: Vec<String>,
    /// Anything else stored there, kept as it is.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

impl SessionMeta {
    /// Reads the stored `meta` JSON (unknown fields are kept in `other`).
    pub fn from_stored(meta: &str) -> Self {
        serde_json::from_str(meta).unwrap_or_default()
    }
}

/// Serialized as the word itself, as stored and documented.
macro_rules! as_string_serde {
    ($t:ty) => {
        impl Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                Ok(Self::parse(&String::deserialize(d)?))
            }
        }
    };
}
as_string_serde!(crate::answer::Decision);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stored_meta_loads_typed_and_writes_back_the_same() {
        let stored = json!({"options": {"cwd": "/w", "approvalPolicy": "never", "images": [],
            "planMode": false, "sandbox": "read-only", "config": {"a": 1}}, "tools": ["t"],
            "result": "done", "lastError": null, "usage": null, "pendingCwd": "/x", "future": 1});
        let meta = SessionMeta::from_stored(&stored.to_string());
        assert_eq!(meta.options.cwd.as_deref(), Some("/w"));
        assert_eq!(
            meta.options.approval_policy,
            Some(codex_relay_protocol::v2::ApprovalPolicy::Never)
        );
        assert_eq!(meta.tools, vec!["t".to_owned()]);
        assert_eq!(meta.result, Some(json!("done")));
        assert_eq!(meta.pending_cwd.as_deref(), Some("/x"));
        assert_eq!(meta.other["future"], 1);
        let again = serde_json::to_value(&meta).unwrap();
        for key in ["tools", "result", "pendingCwd", "future"] {
            assert_eq!(again[key], stored[key], "{key}");
        }
        assert_eq!(again["options"]["sandbox"], "read-only");
        assert_eq!(again["options"]["config"], json!({"a": 1}));
        // Rows of sessions resumed from Codex hold no options.
        let resumed = SessionMeta::from_stored(r#"{"options": {}, "resumedFromCodex": true}"#);
        assert!(resumed.resumed_from_codex && resumed.options.cwd.is_none());
    }
}

/// One sub-agent as a session remembers it (kept in the session's stored metadata, so a
/// restarted relay still routes its events).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentInfo {
    #[serde(flatten)]
    pub agent: AgentRef,
    /// The tool call that spawned it, once known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invoke: Option<String>,
    /// Its running turn, if any (not stored: after a restart nothing runs).
    #[serde(skip)]
    pub turn: Option<String>,
}

/// Where an attached session lives, as the session's metadata (and every front) shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attached {
    /// The daemon's control socket.
    pub socket: String,
    pub state: AttachState,
    /// The daemon's app-server process, while attached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daemon_pid: Option<u32>,
    /// The thread's approval policy as the daemon last said (`on-request`, `untrusted`,
    /// `never`, `granular`): another client of the daemon can change it for every client
    /// (`codex exec --remote` runs its turns with `never`), and under `never` Codex asks
    /// nobody, the relay included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_policy: Option<String>,
    /// Who last changed the approval policy, when it changed while the relay followed the
    /// thread: the relay never passes overrides on a thread it did not start, so always
    /// another client of the daemon; Codex does not say which one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_changed_by: Option<String>,
}

impl Attached {
    /// Whether Codex asks anyone before it acts on this thread (`false` under `never`).
    pub fn asks(&self) -> bool {
        self.approval_policy.as_deref() != Some("never")
    }
}

/// Whether the relay follows an attached thread now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum AttachState {
    /// Followed: its events and requests reach the relay.
    Live,
    /// Known to the daemon but not loaded (it unloads 60 s after its last client left):
    /// followed again when a client resumes it.
    Idle,
    /// The daemon is gone (or unreachable); the relay reconnects with backoff.
    Detached,
}
