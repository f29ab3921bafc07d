//! Permission modes: one word for "how much may Codex do alone", mapped to an approval policy
//! and a sandbox (the table the mobile client of reference 000 used), aware of the Codex version.

use codex_relay_codex::CodexVersion;
use codex_relay_protocol::v2::{ApprovalPolicy, SandboxMode};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PermissionMode {
    /// Ask before anything not known to be safe; write only in the workspace.
    Default,
    /// Never ask; read only.
    ReadOnly,
    /// Run in the workspace sandbox; ask only to leave it.
    SafeYolo,
    /// No sandbox; ask only when a command fails.
    Yolo,
    /// As `yolo` (the name Claude clients use).
    BypassPermissions,
    /// Let the model decide when to ask; workspace sandbox.
    AcceptEdits,
    /// Ask before anything; workspace sandbox (the name Claude clients use).
    Plan,
}

impl PermissionMode {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "default" => Self::Default,
            "read-only" | "readOnly" => Self::ReadOnly,
            "safe-yolo" | "safeYolo" => Self::SafeYolo,
            "yolo" => Self::Yolo,
            "bypassPermissions" | "bypass-permissions" => Self::BypassPermissions,
            "acceptEdits" | "accept-edits" => Self::AcceptEdits,
            "plan" => Self::Plan,
            _ => return None,
        })
    }

    /// The policy and sandbox for `version`. `on-failure` (gone from Codex 0.153) becomes
    /// `on-request` there: still sandboxed, and the model may still ask to leave the sandbox.
    pub fn settings(self, version: &CodexVersion) -> (ApprovalPolicy, SandboxMode) {
        let (policy, sandbox) = match self {
            Self::Default | Self::Plan => (ApprovalPolicy::Untrusted, SandboxMode::WorkspaceWrite),
            Self::ReadOnly => (ApprovalPolicy::Never, SandboxMode::ReadOnly),
            Self::SafeYolo => (ApprovalPolicy::OnFailure, SandboxMode::WorkspaceWrite),
            Self::Yolo | Self::BypassPermissions => {
                (ApprovalPolicy::OnFailure, SandboxMode::DangerFullAccess)
            }
            Self::AcceptEdits => (ApprovalPolicy::OnRequest, SandboxMode::WorkspaceWrite),
        };
        (version.approval_policy(policy).0, sandbox)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_and_its_version_awareness() {
        let old = CodexVersion::new(0, 98, 0);
        let new = CodexVersion::new(0, 169, 0);
        assert_eq!(
            PermissionMode::Default.settings(&new),
            (ApprovalPolicy::Untrusted, SandboxMode::WorkspaceWrite)
        );
        assert_eq!(
            PermissionMode::ReadOnly.settings(&old),
            (ApprovalPolicy::Never, SandboxMode::ReadOnly)
        );
        assert_eq!(
            PermissionMode::Yolo.settings(&old),
            (ApprovalPolicy::OnFailure, SandboxMode::DangerFullAccess)
        );
        assert_eq!(
            PermissionMode::Yolo.settings(&new),
            (ApprovalPolicy::OnRequest, SandboxMode::DangerFullAccess)
        );
        assert_eq!(
            PermissionMode::SafeYolo.settings(&new).0,
            ApprovalPolicy::OnRequest
        );
        assert_eq!(
            PermissionMode::parse("acceptEdits"),
            Some(PermissionMode::AcceptEdits)
        );
        assert_eq!(PermissionMode::parse("nope"), None);
    }
}
