//! Approvals: a fixed policy (never ask, approve all, deny all) or an async callback that sees each request and decides.

use std::future::Future;
use std::sync::Arc;

use codex_relay_core::answer::PendingKind;
use codex_relay_core::{PendingDetails, PendingView, Reach};
use codex_relay_protocol::v2::ApprovalPolicy;
use futures::future::BoxFuture;
use serde_json::Value;

type Callback = dyn Fn(ApprovalRequest) -> BoxFuture<'static, ApprovalDecision> + Send + Sync;

/// Who decides when Codex asks to run a command, change files or widen its permissions.
///
/// ```
/// use codex_relay::{Approval, ApprovalDecision};
///
/// let careful = Approval::callback(|req| async move {
///     match req.command.as_deref() {
///         Some(cmd) if cmd.contains("rm ") => ApprovalDecision::deny("no deleting here"),
///         _ => ApprovalDecision::Approve,
///     }
/// });
/// # let _ = careful;
/// ```
#[derive(Clone, Default)]
pub enum Approval {
    /// Codex never asks (`approvalPolicy: never`): it runs what it decides within its sandbox.
    /// Anything it asks anyway is approved. The default, as for unattended runs.
    #[default]
    Never,
    /// Codex asks before anything not known to be safe (`untrusted`); every request is
    /// approved.
    Auto,
    /// Codex asks before anything not known to be safe; every request is declined with a
    /// reason the model sees, and the turn goes on without it.
    Deny,
    /// Codex asks before anything not known to be safe; your function decides.
    Callback(Arc<Callback>),
}

impl std::fmt::Debug for Approval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Approval::Never => "Never",
            Approval::Auto => "Auto",
            Approval::Deny => "Deny",
            Approval::Callback(_) => "Callback",
        })
    }
}

impl Approval {
    /// Decides each request with `f`.
    pub fn callback<F, Fut>(f: F) -> Self
    where
        F: Fn(ApprovalRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ApprovalDecision> + Send + 'static,
    {
        Approval::Callback(Arc::new(move |req| Box::pin(f(req))))
    }

    /// The approval policy the Codex thread runs with.
    pub(crate) fn codex_policy(&self) -> ApprovalPolicy {
        match self {
            Approval::Never => ApprovalPolicy::Never,
            Approval::Auto | Approval::Deny | Approval::Callback(_) => ApprovalPolicy::Untrusted,
        }
    }

    /// The decision for one request.
    pub(crate) async fn decide(&self, request: ApprovalRequest) -> ApprovalDecision {
        match self {
            Approval::Never | Approval::Auto => ApprovalDecision::Approve,
            Approval::Deny => ApprovalDecision::deny("denied by the caller's approval policy"),
            Approval::Callback(f) => f(request).await,
        }
    }
}

/// What a pending approval is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ApprovalKind {
    /// Run a command.
    Command,
    /// Apply a file change (see [`ApprovalRequest::diff`]).
    FileChange,
    /// Widen the sandbox's permissions.
    Permissions,
    /// Call a tool of an MCP server (Codex 0.169 asks this as an MCP elicitation whose
    /// `_meta.codex_approval_kind` is `mcp_tool_call`); [`ApprovalRequest::reason`] holds
    /// Codex's question, the details the tool and its arguments.
    McpToolCall,
}

/// One request for approval, as your callback sees it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ApprovalRequest {
    /// The request's id in the relay (answerable from any front while it is pending).
    pub id: String,
    /// The session (Codex thread) that asks.
    pub session_id: String,
    /// What is asked for.
    pub kind: ApprovalKind,
    /// The command to run, for [`ApprovalKind::Command`].
    pub command: Option<String>,
    /// Where it would run.
    pub cwd: Option<String>,
    /// The unified diff of a file change, every file in turn.
    pub diff: Option<String>,
    /// Why Codex asks, when it says.
    pub reason: Option<String>,
    /// What approving it lets Codex do beyond its sandbox ([`Reach::text`] says it in words).
    pub reach: Option<Reach>,
    /// Everything Codex sent, as the relay keeps it.
    pub details: Value,
}

impl ApprovalRequest {
    /// The request behind a pending view, when it is an approval.
    pub(crate) fn from_pending(view: &PendingView) -> Option<Self> {
        let base = |kind| ApprovalRequest {
            id: view.id.clone(),
            session_id: view.session_id.clone(),
            kind,
            command: None,
            cwd: None,
            diff: None,
            reason: None,
            reach: view.reach,
            details: serde_json::to_value(&view.details).unwrap_or_default(),
        };
        if is_mcp_tool_approval(view) {
            let message = match &view.details {
                PendingDetails::Elicitation { params } => params.get("message"),
                _ => None,
            };
            return Some(ApprovalRequest {
                reason: message.and_then(Value::as_str).map(str::to_owned),
                ..base(ApprovalKind::McpToolCall)
            });
        }
        if !matches!(
            view.kind,
            PendingKind::CommandApproval
                | PendingKind::FileChangeApproval
                | PendingKind::PermissionsApproval
        ) {
            return None;
        }
        Some(match view.details.clone() {
            PendingDetails::CommandApproval {
                command,
                cwd,
                reason,
                ..
            } => ApprovalRequest {
                command: Some(command),
                cwd,
                reason,
                ..base(ApprovalKind::Command)
            },
            PendingDetails::FileChangeApproval {
                reason, changes, ..
            } => {
                let diff = changes
                    .iter()
                    .map(|c| format!("--- {}\n{}", c.path, c.diff))
                    .collect::<Vec<_>>()
                    .join("\n");
                ApprovalRequest {
                    diff: Some(diff),
                    reason,
                    ..base(ApprovalKind::FileChange)
                }
            }
            PendingDetails::PermissionsApproval { cwd, reason, .. } => ApprovalRequest {
                cwd,
                reason,
                ..base(ApprovalKind::Permissions)
            },
            _ => return None,
        })
    }
}

/// An MCP elicitation that is really Codex asking to call an MCP tool (0.169:
/// `_meta.codex_approval_kind`), which the approval policy answers, not the questions policy.
pub(crate) fn is_mcp_tool_approval(view: &PendingView) -> bool {
    matches!(&view.details, PendingDetails::Elicitation { params }
        if params.get("_meta").and_then(|m| m.get("codex_approval_kind")).is_some_and(|k| !k.is_null()))
}

/// Your answer to an [`ApprovalRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalDecision {
    /// Go ahead, this once.
    Approve,
    /// Go ahead, and do not ask again for the same thing in this session.
    ApproveForSession,
    /// Do not; the reason (if any) is passed on to the model, and the turn goes on.
    Deny {
        /// Why not, in words the model reads.
        reason: Option<String>,
    },
}

impl ApprovalDecision {
    /// A denial with a reason.
    pub fn deny(reason: impl Into<String>) -> Self {
        ApprovalDecision::Deny {
            reason: Some(reason.into()),
        }
    }

    /// The engine's answer.
    pub(crate) fn answer(&self) -> codex_relay_core::Answer {
        use codex_relay_core::{Answer, Scope};
        match self {
            ApprovalDecision::Approve => Answer::Approve { scope: Scope::Once },
            ApprovalDecision::ApproveForSession => Answer::Approve {
                scope: Scope::Session,
            },
            ApprovalDecision::Deny { reason } => Answer::Deny {
                reason: reason.clone(),
            },
        }
    }
}
