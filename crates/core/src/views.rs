//! Typed views every front shows (MCP, HTTP, the UI): a session's stored metadata, a pending
//! request's details as a tagged enum, and a resolution's decision and who made it. The stored
//! JSON is unchanged: these parse it (`from_*`) and serialize back to the same shape.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::answer::PendingKind;
use crate::broker::{PendingView, Resolution};
use crate::event::Usage;

/// A session's `meta` column: how it was created and what it ended with.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionMeta {
    /// The create options in effect (camelCase `CreateOptions`, with the resolved approval
    /// policy, sandbox, config and cwd).
    #[serde(default)]
    pub options: Map<String, Value>,
    /// Names of the dynamic tools offered to the model.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// The session is a Codex thread another client made, resumed here.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resumed_from_codex: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
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

/// One question of a `question` request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QuestionView {
    pub id: String,
    #[serde(default)]
    pub header: Option<String>,
    pub question: String,
    /// Free text is accepted besides the options.
    #[serde(default)]
    pub is_other: bool,
    /// The answer should not be shown back.
    #[serde(default)]
    pub is_secret: bool,
    #[serde(default)]
    pub options: Option<Vec<OptionView>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OptionView {
    pub label: String,
    #[serde(default)]
    pub description: Option<String>,
}

/// A file change shown with a file-change approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChangeView {
    pub path: String,
    #[serde(default)]
    pub kind: Value,
    #[serde(default)]
    pub diff: String,
}

/// What a pending request is about, by kind (`PendingView::details`, typed).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PendingDetails {
    #[serde(rename_all = "camelCase")]
    CommandApproval {
        command: String,
        cwd: Option<String>,
        reason: Option<String>,
        item_id: Option<String>,
    },
    #[serde(rename_all = "camelCase")]
    FileChangeApproval {
        reason: Option<String>,
        grant_root: Option<String>,
        item_id: Option<String>,
        changes: Vec<ChangeView>,
    },
    PermissionsApproval {
        permissions: Value,
        cwd: Option<String>,
        reason: Option<String>,
    },
    Question {
        questions: Vec<QuestionView>,
    },
    #[serde(rename_all = "camelCase")]
    ToolCall {
        tool: String,
        arguments: Value,
        call_id: Option<String>,
    },
    /// An MCP server's elicitation, as Codex sent it.
    Elicitation {
        details: Value,
    },
    /// A request codex-relay does not know (or details it could not read), kept raw.
    Other {
        details: Value,
    },
}

fn text(d: &Value, k: &str) -> Option<String> {
    d.get(k).and_then(Value::as_str).map(str::to_owned)
}

fn field<T: serde::de::DeserializeOwned>(d: &Value, k: &str) -> Result<T, serde_json::Error> {
    serde_json::from_value(d.get(k).cloned().unwrap_or(Value::Null))
}

impl PendingDetails {
    /// The typed details of a pending request (from its stored JSON shape).
    pub fn of(p: &PendingView) -> Self {
        let d = &p.details;
        match p.kind {
            PendingKind::CommandApproval => Self::CommandApproval {
                command: text(d, "command").unwrap_or_default(),
                cwd: text(d, "cwd"),
                reason: text(d, "reason"),
                item_id: text(d, "itemId"),
            },
            PendingKind::FileChangeApproval => Self::FileChangeApproval {
                reason: text(d, "reason"),
                grant_root: text(d, "grantRoot"),
                item_id: text(d, "itemId"),
                changes: field(d, "changes").unwrap_or_default(),
            },
            PendingKind::PermissionsApproval => Self::PermissionsApproval {
                permissions: d.get("permissions").cloned().unwrap_or(Value::Null),
                cwd: text(d, "cwd"),
                reason: text(d, "reason"),
            },
            PendingKind::Question => match field(d, "questions") {
                Ok(questions) => Self::Question { questions },
                Err(_) => Self::Other { details: d.clone() },
            },
            PendingKind::ToolCall => Self::ToolCall {
                tool: text(d, "tool").unwrap_or_default(),
                arguments: d.get("arguments").cloned().unwrap_or(Value::Null),
                call_id: text(d, "callId"),
            },
            PendingKind::Elicitation => Self::Elicitation { details: d.clone() },
            PendingKind::Other => Self::Other { details: d.clone() },
        }
    }
}

/// How a request was decided (`Resolution::decision`, typed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Approve,
    ApproveForSession,
    Deny,
    Cancel,
    /// A question answered, a tool's output given, or JSON for an unknown request.
    Answer,
    /// A tool call answered with an error, or a request failed closed with an error.
    Error,
    /// A decision word this version does not know (kept raw).
    Other(String),
}

impl Decision {
    pub fn parse(s: &str) -> Self {
        match s {
            "approve" => Self::Approve,
            "approve for session" => Self::ApproveForSession,
            "deny" => Self::Deny,
            "cancel" => Self::Cancel,
            "answer" => Self::Answer,
            "error" => Self::Error,
            other => Self::Other(other.to_owned()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            Self::Approve => "approve",
            Self::ApproveForSession => "approve for session",
            Self::Deny => "deny",
            Self::Cancel => "cancel",
            Self::Answer => "answer",
            Self::Error => "error",
            Self::Other(s) => s,
        }
    }
}

/// Who resolved a request (`Resolution::by`, typed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResolvedBy {
    /// A front: `mcp`, `mcp-elicitation`, `http`, or a library caller's name.
    Front(String),
    /// Nobody answered before the deadline.
    Timeout,
    /// The Codex process that asked is gone.
    CodexExit,
    SessionClosed,
    RelayRestart,
    RelayShutdown,
}

impl ResolvedBy {
    pub fn parse(s: &str) -> Self {
        match s {
            "timeout" => Self::Timeout,
            "codex-exit" => Self::CodexExit,
            "session-closed" => Self::SessionClosed,
            "relay-restart" => Self::RelayRestart,
            "relay-shutdown" => Self::RelayShutdown,
            front => Self::Front(front.to_owned()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            Self::Front(s) => s,
            Self::Timeout => "timeout",
            Self::CodexExit => "codex-exit",
            Self::SessionClosed => "session-closed",
            Self::RelayRestart => "relay-restart",
            Self::RelayShutdown => "relay-shutdown",
        }
    }

    /// A person (through a front) decided, rather than the relay failing closed.
    pub fn is_front(&self) -> bool {
        matches!(self, Self::Front(_))
    }
}

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
as_string_serde!(Decision);
as_string_serde!(ResolvedBy);

impl Resolution {
    pub fn decision(&self) -> Decision {
        Decision::parse(&self.decision)
    }

    pub fn resolved_by(&self) -> ResolvedBy {
        ResolvedBy::parse(&self.by)
    }
}

impl PendingView {
    /// The typed details of this request.
    pub fn typed_details(&self) -> PendingDetails {
        PendingDetails::of(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn view(kind: PendingKind, details: Value) -> PendingView {
        PendingView {
            id: "req_1".into(),
            session_id: "s".into(),
            kind,
            question: "q".into(),
            options: vec![],
            details,
            turn: None,
            created_at: 0,
            deadline: 0,
            agent: None,
            invoke: None,
        }
    }

    #[test]
    fn details_are_read_from_the_stored_shape() {
        let cmd = view(
            PendingKind::CommandApproval,
            json!({"command": "rm -rf build", "cwd": "/w", "reason": null, "itemId": "i1"}),
        );
        assert_eq!(
            cmd.typed_details(),
            PendingDetails::CommandApproval {
                command: "rm -rf build".into(),
                cwd: Some("/w".into()),
                reason: None,
                item_id: Some("i1".into()),
            }
        );
        let q = view(
            PendingKind::Question,
            json!({"questions": [{"id": "env", "header": "Env", "question": "Which?", "isOther": true,
                "options": [{"label": "prod", "description": "live"}]}]}),
        );
        let PendingDetails::Question { questions } = q.typed_details() else {
            panic!("a question");
        };
        assert_eq!(questions[0].options.as_ref().unwrap()[0].label, "prod");
        assert!(questions[0].is_other);
        let typed = serde_json::to_value(cmd.typed_details()).unwrap();
        assert_eq!(typed["kind"], "command_approval");
        assert_eq!(typed["itemId"], "i1");
        let odd = view(PendingKind::Other, json!({"method": "x/y"}));
        assert!(matches!(odd.typed_details(), PendingDetails::Other { .. }));
    }

    #[test]
    fn decisions_and_deciders_keep_their_words() {
        for word in [
            "approve",
            "approve for session",
            "deny",
            "cancel",
            "answer",
            "error",
            "maybe",
        ] {
            assert_eq!(Decision::parse(word).as_str(), word);
        }
        assert_eq!(ResolvedBy::parse("timeout"), ResolvedBy::Timeout);
        assert_eq!(ResolvedBy::parse("http"), ResolvedBy::Front("http".into()));
        assert!(!ResolvedBy::parse("relay-restart").is_front());
        let r = Resolution {
            id: "r".into(),
            decision: "deny".into(),
            by: "mcp".into(),
            reason: Some("no".into()),
        };
        assert_eq!(
            (r.decision(), r.resolved_by()),
            (Decision::Deny, ResolvedBy::Front("mcp".into()))
        );
    }

    #[test]
    fn stored_meta_round_trips_unchanged() {
        let stored = json!({"options": {"cwd": "/w", "approvalPolicy": "never"}, "tools": ["t"],
            "result": "done", "lastError": null, "usage": null, "future": 1});
        let meta = SessionMeta::from_stored(&stored.to_string());
        assert_eq!(meta.options["cwd"], "/w");
        assert_eq!(meta.tools, vec!["t".to_owned()]);
        assert_eq!(meta.result, Some(json!("done")));
        assert_eq!(meta.other["future"], 1);
    }
}
