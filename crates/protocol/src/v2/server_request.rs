//! Server→client requests (approvals, tool calls, questions) and the answers we send back.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::jsonrpc::{Params, ParamsError, RpcError};

/// `item/commandExecution/requestApproval`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandApprovalParams {
    pub thread_id: String,
    pub turn_id: String,
    pub item_id: String,
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub command_actions: Option<Value>,
    /// 0.169: distinguishes several approvals for one item.
    #[serde(default)]
    pub approval_id: Option<String>,
    /// The argv prefix Codex proposes to remember in its own execution policy
    /// (`acceptWithExecpolicyAmendment`): matching commands then run without asking, and
    /// outside the sandbox, for every session of that `CODEX_HOME`.
    #[serde(default)]
    pub proposed_execpolicy_amendment: Option<Vec<String>>,
    /// 0.169: the decisions this prompt offers, as Codex words them.
    #[serde(default)]
    pub available_decisions: Option<Vec<Value>>,
    /// 0.169: permissions beyond the sandbox asked for this command.
    #[serde(default)]
    pub additional_permissions: Option<Value>,
    /// 0.169: a managed-network prompt (a host the sandbox's network policy blocks).
    #[serde(default)]
    pub network_approval_context: Option<Value>,
    /// 0.169: network rules Codex proposes to remember.
    #[serde(default)]
    pub proposed_network_policy_amendments: Option<Vec<Value>>,
}

/// `item/fileChange/requestApproval`. The diff itself arrives on the `fileChange` item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileChangeApprovalParams {
    pub thread_id: String,
    pub turn_id: String,
    pub item_id: String,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub grant_root: Option<String>,
}

/// `item/tool/call`: the model called a dynamic tool registered on `thread/start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallParams {
    pub thread_id: String,
    pub turn_id: String,
    pub call_id: String,
    pub tool: String,
    #[serde(default)]
    pub arguments: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserInputOption {
    pub label: String,
    #[serde(default)]
    pub description: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserInputQuestion {
    pub id: String,
    #[serde(default)]
    pub header: Option<String>,
    pub question: String,
    #[serde(default)]
    pub options: Option<Vec<UserInputOption>>,
    #[serde(default)]
    pub is_other: bool,
    #[serde(default)]
    pub is_secret: bool,
}

/// `item/tool/requestUserInput`: the model asks the user questions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserInputParams {
    pub thread_id: String,
    pub turn_id: String,
    pub item_id: String,
    pub questions: Vec<UserInputQuestion>,
}

/// `item/permissions/requestApproval` (0.169): the model asks for more filesystem or network
/// access than the sandbox gives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionsApprovalParams {
    pub thread_id: String,
    pub turn_id: String,
    pub item_id: String,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
    pub permissions: Value,
}

/// A request from the server. Unknown methods, and known ones whose params do not parse, are
/// kept as [`ServerRequest::Unknown`].
#[derive(Debug, Clone, PartialEq)]
pub enum ServerRequest {
    CommandApproval(CommandApprovalParams),
    FileChangeApproval(FileChangeApprovalParams),
    ToolCall(ToolCallParams),
    UserInput(UserInputParams),
    /// `mcpServer/elicitation/request` (0.169): an MCP server Codex uses asks the user; the
    /// params follow MCP's elicitation shape plus `threadId`, `turnId`, `serverName`.
    McpElicitation(Value),
    PermissionsApproval(PermissionsApprovalParams),
    /// `account/chatgptAuthTokens/refresh`.
    ChatgptAuthRefresh(Value),
    Unknown {
        method: String,
        params: Value,
    },
}

impl ServerRequest {
    pub const COMMAND_APPROVAL: &'static str = "item/commandExecution/requestApproval";
    pub const FILE_CHANGE_APPROVAL: &'static str = "item/fileChange/requestApproval";
    pub const TOOL_CALL: &'static str = "item/tool/call";
    pub const USER_INPUT: &'static str = "item/tool/requestUserInput";
    pub const MCP_ELICITATION: &'static str = "mcpServer/elicitation/request";
    pub const PERMISSIONS_APPROVAL: &'static str = "item/permissions/requestApproval";
    pub const CHATGPT_AUTH_REFRESH: &'static str = "account/chatgptAuthTokens/refresh";

    /// Reads a request; never fails.
    pub fn parse(method: &str, params: Value) -> Self {
        Self::from_params(method, &Params::from(params))
    }

    /// Reads a request straight from its JSON text; never fails (see [`Self::try_from_params`]).
    pub fn from_params(method: &str, params: &Params<'_>) -> Self {
        Self::try_from_params(method, params).unwrap_or_else(|_| Self::raw(method, params))
    }

    /// The request kept raw, as [`ServerRequest::Unknown`].
    pub fn raw(method: &str, params: &Params<'_>) -> Self {
        ServerRequest::Unknown {
            method: method.to_owned(),
            params: params.value(),
        }
    }

    /// Reads a request: an unknown method is `Ok(Unknown)`; a known one whose params do
    /// not fit its type is an error that says what did not fit.
    pub fn try_from_params(method: &str, params: &Params<'_>) -> Result<Self, ParamsError> {
        fn typed<T: serde::de::DeserializeOwned>(p: &Params<'_>) -> serde_json::Result<Option<T>> {
            p.try_parse().map(Some)
        }
        use ServerRequest as R;
        let parsed = match method {
            Self::COMMAND_APPROVAL => typed(params).map(|p| p.map(R::CommandApproval)),
            Self::FILE_CHANGE_APPROVAL => typed(params).map(|p| p.map(R::FileChangeApproval)),
            Self::TOOL_CALL => typed(params).map(|p| p.map(R::ToolCall)),
            Self::USER_INPUT => typed(params).map(|p| p.map(R::UserInput)),
            Self::MCP_ELICITATION => Ok(Some(R::McpElicitation(params.value()))),
            Self::PERMISSIONS_APPROVAL => typed(params).map(|p| p.map(R::PermissionsApproval)),
            Self::CHATGPT_AUTH_REFRESH => Ok(Some(R::ChatgptAuthRefresh(params.value()))),
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

    pub fn method(&self) -> &str {
        match self {
            ServerRequest::CommandApproval(_) => Self::COMMAND_APPROVAL,
            ServerRequest::FileChangeApproval(_) => Self::FILE_CHANGE_APPROVAL,
            ServerRequest::ToolCall(_) => Self::TOOL_CALL,
            ServerRequest::UserInput(_) => Self::USER_INPUT,
            ServerRequest::McpElicitation(_) => Self::MCP_ELICITATION,
            ServerRequest::PermissionsApproval(_) => Self::PERMISSIONS_APPROVAL,
            ServerRequest::ChatgptAuthRefresh(_) => Self::CHATGPT_AUTH_REFRESH,
            ServerRequest::Unknown { method, .. } => method,
        }
    }

    /// The thread the request belongs to, if it names one.
    pub fn thread_id(&self) -> Option<&str> {
        match self {
            ServerRequest::CommandApproval(p) => Some(&p.thread_id),
            ServerRequest::FileChangeApproval(p) => Some(&p.thread_id),
            ServerRequest::ToolCall(p) => Some(&p.thread_id),
            ServerRequest::UserInput(p) => Some(&p.thread_id),
            ServerRequest::PermissionsApproval(p) => Some(&p.thread_id),
            ServerRequest::McpElicitation(v)
            | ServerRequest::ChatgptAuthRefresh(v)
            | ServerRequest::Unknown { params: v, .. } => super::notification::thread_id_of(v),
        }
    }

    /// The fail-closed answer used when nobody answers: approvals are declined (and
    /// permission requests grant nothing), everything else gets an error naming `why`.
    pub fn fail_closed(&self, why: &str) -> Result<Value, RpcError> {
        match self {
            ServerRequest::CommandApproval(_) | ServerRequest::FileChangeApproval(_) => {
                Ok(ApprovalDecision::Decline.to_response())
            }
            ServerRequest::PermissionsApproval(_) => {
                Ok(json!({"permissions": {}, "scope": "turn"}))
            }
            ServerRequest::McpElicitation(_) => Ok(json!({"action": "decline", "content": null})),
            ServerRequest::ToolCall(_)
            | ServerRequest::UserInput(_)
            | ServerRequest::ChatgptAuthRefresh(_)
            | ServerRequest::Unknown { .. } => Err(RpcError::new(
                RpcError::INTERNAL_ERROR,
                format!("{} was not answered: {why}", self.method()),
            )),
        }
    }
}

/// The answer to a command or file-change approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ApprovalDecision {
    /// Run it.
    Accept,
    /// Run it, and do not ask again for the same thing in this session.
    AcceptForSession,
    /// Do not run it; the turn goes on.
    Decline,
    /// Do not run it, and interrupt the turn.
    Cancel,
}

impl ApprovalDecision {
    /// `{decision}`, the result of an approval request.
    pub fn to_response(self) -> Value {
        json!({ "decision": self })
    }
}

/// One content item of a dynamic tool's output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ToolOutputContent {
    #[serde(rename_all = "camelCase")]
    InputText { text: String },
    #[serde(rename_all = "camelCase")]
    InputImage { image_url: String },
}

/// The result of `item/tool/call`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallResponse {
    pub success: bool,
    pub content_items: Vec<ToolOutputContent>,
}

impl ToolCallResponse {
    pub fn text(success: bool, text: impl Into<String>) -> Self {
        Self {
            success,
            content_items: vec![ToolOutputContent::InputText { text: text.into() }],
        }
    }
}

/// The answers to one user-input question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserInputAnswer {
    pub answers: Vec<String>,
}

/// The result of `item/tool/requestUserInput`: question id → answers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UserInputResponse {
    pub answers: BTreeMap<String, UserInputAnswer>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approvals_fail_closed_as_decline_and_others_as_errors() {
        let approval = ServerRequest::parse(
            ServerRequest::COMMAND_APPROVAL,
            json!({"threadId": "t", "turnId": "u", "itemId": "i", "command": "rm -rf build", "startedAtMs": 1}),
        );
        assert_eq!(approval.thread_id(), Some("t"));
        assert_eq!(
            approval.fail_closed("timeout").unwrap(),
            json!({"decision": "decline"})
        );

        let tool = ServerRequest::parse(
            ServerRequest::TOOL_CALL,
            json!({"threadId": "t", "turnId": "u", "callId": "c", "tool": "lookup", "arguments": {}}),
        );
        let err = tool.fail_closed("no handler").unwrap_err();
        assert!(err.message.contains("item/tool/call") && err.message.contains("no handler"));

        let unknown = ServerRequest::parse("attestation/generate", json!({"nonce": 1}));
        assert_eq!(unknown.method(), "attestation/generate");
        assert!(unknown.fail_closed("x").is_err());
    }
}
