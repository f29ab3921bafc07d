//! What a rule looks at in one request: its kind, the command (read by [`super::shell`] and
//! as Codex parsed it), the working directory, the files a patch touches, the session's
//! labels, and whether answering it would widen the sandbox (then no allow rule answers it).

use codex_relay_protocol::v2::{ApprovalPolicy, SandboxMode, ServerRequest};
use serde_json::Value;

use super::RuleKind;
use super::shell::{self, Parsed};
use crate::pending::{PendingDetails, PendingView};

/// What the session adds: where it works, its labels, its approval policy and sandbox.
#[derive(Debug, Clone, Default)]
pub struct RuleContext {
    pub cwd: Option<String>,
    pub labels: Vec<String>,
    pub approval_policy: Option<ApprovalPolicy>,
    pub sandbox: Option<SandboxMode>,
}

/// One request, as rules see it.
#[derive(Debug, Clone)]
pub struct RuleInput {
    pub kind: RuleKind,
    /// Whether the request is an approval at all (questions and tool calls are never ruled).
    pub kind_is_approval: bool,
    pub command: Option<Parsed>,
    /// How many actions Codex read in the command (`commandActions`); 0 when it did not say.
    pub actions: usize,
    /// The commands of Codex's own reading, one per action.
    pub action_commands: Vec<String>,
    /// The request's working directory, else the session's.
    pub cwd: Option<String>,
    /// The files a file change touches (absolute, as Codex names them).
    pub paths: Vec<String>,
    pub labels: Vec<String>,
    /// Why approving would widen the sandbox, if it would.
    pub widens: Option<&'static str>,
}

impl RuleInput {
    /// The input for a request the broker is opening; `None` for requests rules never answer
    /// (questions, tool calls, unknown requests).
    pub fn of(view: &PendingView, request: &ServerRequest, ctx: &RuleContext) -> Option<Self> {
        let mut input = RuleInput {
            kind: RuleKind::Command,
            kind_is_approval: true,
            command: None,
            actions: 0,
            action_commands: Vec::new(),
            cwd: None,
            paths: Vec::new(),
            labels: ctx.labels.clone(),
            widens: None,
        };
        // Only `untrusted` asks before a sandboxed run; under the others (and Codex's own
        // default, which may be any of them) a prompt is a request to leave the sandbox.
        let escalating_policy = ctx.approval_policy != Some(ApprovalPolicy::Untrusted);
        let full_access = ctx.sandbox == Some(SandboxMode::DangerFullAccess);
        match (&view.details, request) {
            (
                PendingDetails::CommandApproval { command, cwd, .. },
                ServerRequest::CommandApproval(p),
            ) => {
                input.command = Some(shell::parse(command));
                input.cwd = cwd.clone().or(ctx.cwd.clone());
                if let Some(Value::Array(actions)) = &p.command_actions {
                    input.actions = actions.len();
                    input.action_commands = actions
                        .iter()
                        .filter_map(|a| a.get("command")?.as_str().map(str::to_owned))
                        .collect();
                }
                let reason = p.reason.as_deref().unwrap_or_default().to_ascii_lowercase();
                input.widens = if p
                    .additional_permissions
                    .as_ref()
                    .is_some_and(|v| !v.is_null())
                {
                    Some("it asks for permissions beyond the sandbox")
                } else if p
                    .network_approval_context
                    .as_ref()
                    .is_some_and(|v| !v.is_null())
                    || p.proposed_network_policy_amendments
                        .as_ref()
                        .is_some_and(|v| !v.is_empty())
                    || reason.contains("network access")
                {
                    Some("it asks for network access the sandbox blocks")
                } else if reason.contains("without sandbox") || reason.contains("sandbox failed") {
                    Some("it asks to run again outside the sandbox")
                } else if escalating_policy && !full_access {
                    // Under on-request (and on-failure) Codex asks only to leave the sandbox.
                    Some(
                        "under this approval policy an approval lets the command leave the sandbox",
                    )
                } else {
                    None
                };
            }
            (
                PendingDetails::FileChangeApproval {
                    grant_root,
                    changes,
                    ..
                },
                _,
            ) => {
                input.kind = RuleKind::FileChange;
                input.cwd = ctx.cwd.clone();
                input.paths = changes.iter().map(|c| c.path.clone()).collect();
                input.widens = if grant_root.is_some() {
                    Some("it asks for write access to a directory beyond the workspace")
                } else if changes.is_empty() {
                    Some("the files it changes are not known")
                } else if escalating_policy && !full_access {
                    Some("under this approval policy an approval lets the patch leave the sandbox")
                } else {
                    None
                };
            }
            (PendingDetails::PermissionsApproval { cwd, .. }, _) => {
                input.kind = RuleKind::Permissions;
                input.cwd = cwd.clone().or(ctx.cwd.clone());
                input.widens = Some("it asks for more permissions");
            }
            (PendingDetails::Elicitation { .. }, _) => {
                input.kind = RuleKind::Elicitation;
                input.cwd = ctx.cwd.clone();
                input.widens = Some("an MCP server's form is for a person to fill");
            }
            _ => return None,
        }
        Some(input)
    }
}
