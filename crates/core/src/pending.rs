//! A pending request as every front sees it: who asks, what about (typed by kind), the
//! question a person answers, its deadline. Its JSON is the shape the store keeps and
//! docs/EVENTS.md documents (`details` an object of the kind's fields); rows written by older
//! versions load. [`Reach`] says what approving it lets Codex do (worked out in reach.rs).

use codex_relay_protocol::v2::{FileUpdateChange, ServerRequest, UserInputQuestion};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value, json};

use crate::answer::PendingKind;
use crate::event::{AgentRef, Origin};

/// A pending request.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingView {
    pub id: String,
    pub session_id: String,
    pub kind: PendingKind,
    /// One sentence a person can answer.
    pub question: String,
    /// The answers it takes (approval words, or a question's option labels).
    pub options: Vec<String>,
    /// What it is about, by kind.
    pub details: PendingDetails,
    pub turn: Option<String>,
    /// Unix milliseconds.
    pub created_at: i64,
    /// Unix milliseconds; answered fail-closed then.
    pub deadline: i64,
    /// The sub-agent that asks, when it is not the session's own thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentRef>,
    /// The tool call that spawned that sub-agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invoke: Option<String>,
    /// What approving it lets Codex do beyond its sandbox (`{kind, text}`), for approvals;
    /// set by the broker from the session's policy and sandbox ([`crate::reach`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reach: Option<Reach>,
}

/// What a pending request is about. Serialized as the kind's fields alone (the kind is the
/// view's `kind`), as stored.
#[derive(Debug, Clone, PartialEq)]
pub enum PendingDetails {
    CommandApproval {
        command: String,
        cwd: Option<String>,
        reason: Option<String>,
        item_id: Option<String>,
        /// The argv prefix Codex 0.169 offers to remember in its own execution policy (see
        /// [`crate::Answer::ApproveWithCodexRule`]); absent when it offers none.
        codex_rule: Option<Vec<String>>,
    },
    FileChangeApproval {
        reason: Option<String>,
        grant_root: Option<String>,
        item_id: Option<String>,
        /// The changes Codex announced for the item (path, kind, diff); empty if none.
        changes: Vec<FileUpdateChange>,
    },
    PermissionsApproval {
        /// The permission profile Codex asks for, as Codex describes it.
        permissions: Value,
        cwd: Option<String>,
        reason: Option<String>,
    },
    Question {
        questions: Vec<UserInputQuestion>,
    },
    ToolCall {
        tool: String,
        /// The model's arguments: whatever JSON the tool takes.
        arguments: Value,
        call_id: Option<String>,
    },
    /// An MCP server's elicitation, Codex's params as sent (MCP's elicitation shape plus
    /// `threadId`, `turnId`, `serverName`).
    Elicitation {
        params: Map<String, Value>,
    },
    /// A request codex-relay does not know (or details it could not read), kept raw.
    Other {
        details: Value,
    },
}

impl PendingDetails {
    /// The stored `details` object.
    fn to_json(&self) -> Value {
        match self {
            Self::CommandApproval {
                command,
                cwd,
                reason,
                item_id,
                codex_rule,
            } => {
                let mut v =
                    json!({"command": command, "cwd": cwd, "reason": reason, "itemId": item_id});
                if let Some(rule) = codex_rule {
                    v["codexRule"] = json!(rule);
                }
                v
            }
            Self::FileChangeApproval {
                reason,
                grant_root,
                item_id,
                changes,
            } => {
                let mut v = json!({"reason": reason, "grantRoot": grant_root, "itemId": item_id});
                if !changes.is_empty() {
                    v["changes"] = json!(changes);
                }
                v
            }
            Self::PermissionsApproval {
                permissions,
                cwd,
                reason,
            } => json!({"permissions": permissions, "cwd": cwd, "reason": reason}),
            Self::Question { questions } => json!({"questions": questions}),
            Self::ToolCall {
                tool,
                arguments,
                call_id,
            } => json!({"tool": tool, "arguments": arguments, "callId": call_id}),
            Self::Elicitation { params } => Value::Object(params.clone()),
            Self::Other { details } => details.clone(),
        }
    }

    /// Reads a stored `details` object of `kind` (what it cannot read stays raw).
    fn from_stored(kind: PendingKind, d: Value) -> Self {
        let text = |k: &str| d.get(k).and_then(Value::as_str).map(str::to_owned);
        fn field<T: serde::de::DeserializeOwned>(d: &Value, k: &str) -> Option<T> {
            serde_json::from_value(d.get(k).cloned().unwrap_or(Value::Null)).ok()
        }
        match kind {
            PendingKind::CommandApproval => Self::CommandApproval {
                command: text("command").unwrap_or_default(),
                cwd: text("cwd"),
                reason: text("reason"),
                item_id: text("itemId"),
                codex_rule: field(&d, "codexRule"),
            },
            PendingKind::FileChangeApproval => Self::FileChangeApproval {
                reason: text("reason"),
                grant_root: text("grantRoot"),
                item_id: text("itemId"),
                changes: field(&d, "changes").unwrap_or_default(),
            },
            PendingKind::PermissionsApproval => Self::PermissionsApproval {
                permissions: d.get("permissions").cloned().unwrap_or(Value::Null),
                cwd: text("cwd"),
                reason: text("reason"),
            },
            PendingKind::Question => match field(&d, "questions") {
                Some(questions) => Self::Question { questions },
                None => Self::Other { details: d },
            },
            PendingKind::ToolCall => Self::ToolCall {
                tool: text("tool").unwrap_or_default(),
                arguments: d.get("arguments").cloned().unwrap_or(Value::Null),
                call_id: text("callId"),
            },
            PendingKind::Elicitation => match d {
                Value::Object(params) => Self::Elicitation { params },
                other => Self::Other { details: other },
            },
            PendingKind::Other => Self::Other { details: d },
        }
    }
}

impl Serialize for PendingDetails {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(s)
    }
}

impl<'de> Deserialize<'de> for PendingView {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Stored {
            id: String,
            #[serde(default)]
            session_id: String,
            kind: PendingKind,
            #[serde(default)]
            question: String,
            #[serde(default)]
            options: Vec<String>,
            #[serde(default)]
            details: Value,
            #[serde(default)]
            turn: Option<String>,
            #[serde(default)]
            created_at: i64,
            #[serde(default)]
            deadline: i64,
            #[serde(default)]
            agent: Option<AgentRef>,
            #[serde(default)]
            invoke: Option<String>,
            #[serde(default)]
            reach: Option<Value>,
        }
        let s = Stored::deserialize(d)?;
        Ok(PendingView {
            details: PendingDetails::from_stored(s.kind, s.details),
            id: s.id,
            session_id: s.session_id,
            kind: s.kind,
            question: s.question,
            options: s.options,
            turn: s.turn,
            created_at: s.created_at,
            deadline: s.deadline,
            agent: s.agent,
            invoke: s.invoke,
            // A kind this version does not know is dropped, not a reason to lose the row.
            reach: s.reach.and_then(|r| serde_json::from_value(r).ok()),
        })
    }
}

impl PendingView {
    pub(crate) fn origin(&self) -> Option<Origin> {
        self.agent.as_ref().map(|agent| Origin {
            invoke: self.invoke.clone(),
            agent: agent.clone(),
        })
    }

    /// The Codex thread that asked: a sub-agent's, or the session's own.
    pub fn thread_id(&self) -> &str {
        self.agent
            .as_ref()
            .map_or(self.session_id.as_str(), |a| a.thread.as_str())
    }

    /// The questions of a `question` request (empty for other kinds).
    pub fn questions(&self) -> &[UserInputQuestion] {
        match &self.details {
            PendingDetails::Question { questions } => questions,
            _ => &[],
        }
    }
}

/// The prefix Codex offers to remember, when this prompt offers that decision (0.169 lists
/// the decisions it offers; a prompt that lists none offers it whenever it proposes one).
fn codex_rule(p: &codex_relay_protocol::v2::CommandApprovalParams) -> Option<Vec<String>> {
    let prefix = p
        .proposed_execpolicy_amendment
        .clone()
        .filter(|a| !a.is_empty())?;
    let offered = p.available_decisions.as_ref().is_none_or(|ds| {
        ds.iter()
            .any(|d| d.get("acceptWithExecpolicyAmendment").is_some())
    });
    offered.then_some(prefix)
}

/// The pending view of a request Codex made: its question, options and details (the broker
/// gives it its id and deadline; a front or a test may describe a request the same way).
pub fn describe(
    request: &ServerRequest,
    id: String,
    session_id: String,
    created_at: i64,
    deadline: i64,
) -> PendingView {
    let kind = PendingKind::of(request);
    let approval_options = || crate::options::approval_options(false);
    let (question, options, details, turn) = match request {
        ServerRequest::CommandApproval(p) => {
            let cmd = p.command.clone().unwrap_or_default();
            (
                format!("Allow Codex to run `{cmd}`?"),
                crate::options::approval_options(codex_rule(p).is_some()),
                PendingDetails::CommandApproval {
                    command: cmd,
                    cwd: p.cwd.clone(),
                    reason: p.reason.clone(),
                    item_id: Some(p.item_id.clone()),
                    codex_rule: codex_rule(p),
                },
                Some(p.turn_id.clone()),
            )
        }
        ServerRequest::FileChangeApproval(p) => (
            match &p.reason {
                Some(r) => format!("Allow Codex to change files? ({r})"),
                None => "Allow Codex to change files?".to_owned(),
            },
            approval_options(),
            PendingDetails::FileChangeApproval {
                reason: p.reason.clone(),
                grant_root: p.grant_root.clone(),
                item_id: Some(p.item_id.clone()),
                changes: Vec::new(),
            },
            Some(p.turn_id.clone()),
        ),
        ServerRequest::PermissionsApproval(p) => (
            format!(
                "Grant Codex more permissions?{}",
                p.reason
                    .as_ref()
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default()
            ),
            approval_options(),
            PendingDetails::PermissionsApproval {
                permissions: p.permissions.clone(),
                cwd: p.cwd.clone(),
                reason: p.reason.clone(),
            },
            Some(p.turn_id.clone()),
        ),
        ServerRequest::UserInput(p) => {
            let question = p
                .questions
                .iter()
                .map(|q| q.question.as_str())
                .collect::<Vec<_>>()
                .join(" / ");
            let options = p
                .questions
                .first()
                .and_then(|q| q.options.as_ref())
                .map(|os| os.iter().map(|o| o.label.clone()).collect())
                .unwrap_or_default();
            (
                question,
                options,
                PendingDetails::Question {
                    questions: p.questions.clone(),
                },
                Some(p.turn_id.clone()),
            )
        }
        ServerRequest::McpElicitation(v) => (
            v.get("message")
                .and_then(Value::as_str)
                .unwrap_or("An MCP server asks for input")
                .to_owned(),
            approval_options(),
            PendingDetails::from_stored(PendingKind::Elicitation, v.clone()),
            v.get("turnId").and_then(Value::as_str).map(str::to_owned),
        ),
        ServerRequest::ToolCall(p) => (
            format!(
                "Codex called the tool `{}`; answer with its output (or `error: ...`)",
                p.tool
            ),
            Vec::new(),
            PendingDetails::ToolCall {
                tool: p.tool.clone(),
                arguments: p.arguments.clone(),
                call_id: Some(p.call_id.clone()),
            },
            Some(p.turn_id.clone()),
        ),
        ServerRequest::ChatgptAuthRefresh(v) => (
            "Codex asks for fresh ChatGPT tokens (answer with JSON)".into(),
            vec![],
            PendingDetails::Other { details: v.clone() },
            None,
        ),
        ServerRequest::Unknown { method, params } => (
            format!("Codex sent `{method}` (answer with JSON)"),
            vec![],
            PendingDetails::Other {
                details: json!({"method": method, "params": params}),
            },
            params
                .get("turnId")
                .and_then(Value::as_str)
                .map(str::to_owned),
        ),
    };
    PendingView {
        id,
        session_id,
        kind,
        question,
        options,
        details,
        turn,
        created_at,
        deadline,
        agent: None,
        invoke: None,
        reach: None,
    }
}

/// What approving a request lets Codex do, as far as its sandbox goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reach {
    /// The session has no sandbox (`danger-full-access`): nothing is widened, and what runs
    /// has the user's full access.
    NoSandbox,
    /// It stays in the sandbox: a file change whose every file is inside the session's
    /// workspace (symbolic links followed) and outside its protected directories, under
    /// `untrusted` with `workspace-write`.
    Sandboxed,
    /// It runs in the sandbox first; if the sandbox blocks it, Codex runs it again outside
    /// the sandbox without asking (`untrusted` on Codex 0.98, which refuses escalations there;
    /// a file change that may leave the workspace).
    OutsideIfBlocked,
    /// It may run outside the sandbox: at once if the model asked to escalate, or when the
    /// sandbox blocks it (commands under `untrusted` from Codex 0.169, every request under
    /// `on-request` or `on-failure`, a retry without the sandbox, a write root beyond the
    /// workspace, or a session whose policy or sandbox the relay does not know).
    Outside,
    /// It grants permissions beyond the sandbox (a permissions request, or a command that
    /// asks for more).
    MorePermissions,
    /// It lets a command reach a network host the sandbox blocks.
    Network,
    /// It lets an MCP server go on with what it asked; MCP servers run outside the sandbox.
    McpServer,
}

impl Reach {
    pub const ALL: [Reach; 7] = [
        Reach::NoSandbox,
        Reach::Sandboxed,
        Reach::OutsideIfBlocked,
        Reach::Outside,
        Reach::MorePermissions,
        Reach::Network,
        Reach::McpServer,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Reach::NoSandbox => "no_sandbox",
            Reach::Sandboxed => "sandboxed",
            Reach::OutsideIfBlocked => "outside_if_blocked",
            Reach::Outside => "outside",
            Reach::MorePermissions => "more_permissions",
            Reach::Network => "network",
            Reach::McpServer => "mcp_server",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// What approving it does, in one sentence a person reads before answering (the UI
    /// card, the MCP question, the docs).
    pub fn text(self) -> &'static str {
        match self {
            Reach::NoSandbox => {
                "This session has no sandbox: approving runs it with your user's full access."
            }
            Reach::Sandboxed => "Approving keeps it inside the sandbox.",
            Reach::OutsideIfBlocked => {
                "Approving may run it outside the sandbox: it runs in the sandbox, and if the sandbox blocks it, Codex runs it again outside the sandbox without asking."
            }
            Reach::Outside => {
                "Approving may run it outside the sandbox: at once if the model asked to leave it, or when the sandbox blocks it, without asking again."
            }
            Reach::MorePermissions => "Approving grants permissions beyond the sandbox.",
            Reach::Network => "Approving lets it reach a network host the sandbox blocks.",
            Reach::McpServer => {
                "Approving lets an MCP server go on; MCP servers run outside the sandbox."
            }
        }
    }

    /// Whether approving it leaves what the session already lets Codex do without asking:
    /// false only for [`Reach::Sandboxed`] and [`Reach::NoSandbox`].
    pub fn widens(self) -> bool {
        !matches!(self, Reach::Sandboxed | Reach::NoSandbox)
    }

    /// Whether it may run outside the sandbox as a command or a file change (what an allow
    /// rule with `outside_sandbox = true` may answer); never permissions, network or MCP.
    pub fn leaves_sandbox(self) -> bool {
        matches!(self, Reach::OutsideIfBlocked | Reach::Outside)
    }
}

impl Serialize for Reach {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serde_json::json!({"kind": self.as_str(), "text": self.text()}).serialize(s)
    }
}

impl<'de> Deserialize<'de> for Reach {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        let kind = v.get("kind").unwrap_or(&v).as_str().unwrap_or_default();
        Reach::parse(kind)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown reach {kind:?}")))
    }
}
