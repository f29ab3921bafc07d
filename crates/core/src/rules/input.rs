//! What a rule looks at in one request: its kind, the command (read by [`super::shell`] and
//! as Codex parsed it), the working directory, the files a patch touches, the session's
//! labels, and what approving it lets Codex do ([`crate::reach`]).

use codex_relay_codex::CodexVersion;
use codex_relay_protocol::v2::{ApprovalPolicy, SandboxMode, ServerRequest};
use serde_json::Value;

use super::RuleKind;
use super::shell::{self, Parsed};
use crate::pending::{PendingDetails, PendingView};
use crate::reach::Reach;

/// What the session adds: where it works, its labels, its approval policy and sandbox (`None`:
/// left to Codex's own configuration, so not known), and the Codex version it runs on.
#[derive(Debug, Clone, Default)]
pub struct RuleContext {
    pub cwd: Option<String>,
    pub labels: Vec<String>,
    pub approval_policy: Option<ApprovalPolicy>,
    pub sandbox: Option<SandboxMode>,
    pub codex_version: Option<CodexVersion>,
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
    /// What approving it lets Codex do ([`crate::reach`]): an allow rule answers only what
    /// stays in the sandbox (or has none), unless it opts in to leaving it.
    pub reach: Option<Reach>,
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
            // What the broker showed everyone, so that the rules and the people agree.
            reach: view.reach.or_else(|| crate::reach::of(view, request, ctx)),
        };
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
            }
            (PendingDetails::FileChangeApproval { changes, .. }, _) => {
                input.kind = RuleKind::FileChange;
                input.cwd = ctx.cwd.clone();
                input.paths = changes.iter().map(|c| c.path.clone()).collect();
            }
            (PendingDetails::PermissionsApproval { cwd, .. }, _) => {
                input.kind = RuleKind::Permissions;
                input.cwd = cwd.clone().or(ctx.cwd.clone());
            }
            (PendingDetails::Elicitation { .. }, _) => {
                input.kind = RuleKind::Elicitation;
                input.cwd = ctx.cwd.clone();
            }
            _ => return None,
        }
        Some(input)
    }
}
