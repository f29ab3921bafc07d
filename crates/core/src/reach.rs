//! What approving a request lets Codex do beyond its sandbox ([`Reach`]), worked out once from
//! the request, the session's approval policy and sandbox and the Codex version. The rules
//! (an allow rule answers only what cannot leave the sandbox, unless it opts in), the pending
//! views of every front (`reach`) and docs/RULES.md and docs/SECURITY.md all say this.
//!
//! What Codex does with an approval (read in openai/codex, `core/src/tools/orchestrator.rs`,
//! `tools/sandboxing.rs`, `safety.rs`, `tools/runtimes/apply_patch.rs`; seen over 0.98 and
//! 0.169 in `crates/codex-relay/tests/all/rules_sandbox.rs`): an approved command or patch runs
//! in the sandbox unless the model asked to escalate (then outside it at once); if the sandbox
//! blocks it, Codex runs it again without the sandbox under `untrusted` (patches: also under
//! `on-request`), and an earlier approval of the same call means it asks nobody again. Under
//! `on-request` Codex asks about commands only to escalate them. No answer keeps a command in
//! the sandbox.

use std::path::{Path, PathBuf};

use codex_relay_codex::CodexVersion;
use codex_relay_protocol::v2::{ApprovalPolicy, FileUpdateChange, SandboxMode, ServerRequest};

pub use crate::pending::Reach;
use crate::pending::{PendingDetails, PendingView};
use crate::rules::RuleContext;
use serde_json::Value;

/// The last Codex release seen to refuse a command that asks to escalate under `untrusted`
/// ("you cannot ask for escalated permissions if the approval policy is UnlessTrusted"), so
/// that there an approved command always starts in the sandbox. 0.169 asks instead.
const REFUSES_UNTRUSTED_ESCALATION: CodexVersion = CodexVersion::new(0, 98, u64::MAX);

/// Directories inside a workspace that Codex's sandbox keeps read-only (Git's and Codex's own
/// settings run code later): a write there is blocked, then retried outside the sandbox.
const PROTECTED: [&str; 3] = [".git", ".codex", ".agents"];

/// What approving the request `view` (Codex's `request`) lets Codex do, in the session
/// described by `ctx`; `None` for requests that are not approvals (questions, tool calls,
/// unknown requests).
pub fn of(view: &PendingView, request: &ServerRequest, ctx: &RuleContext) -> Option<Reach> {
    let no_sandbox = ctx.sandbox == Some(SandboxMode::DangerFullAccess);
    let untrusted = ctx.approval_policy == Some(ApprovalPolicy::Untrusted);
    match (&view.details, request) {
        (PendingDetails::CommandApproval { .. }, ServerRequest::CommandApproval(p)) => {
            let given = |v: &Option<Value>| v.as_ref().is_some_and(|v| !v.is_null());
            let reason = p.reason.as_deref().unwrap_or_default().to_ascii_lowercase();
            Some(if given(&p.additional_permissions) {
                Reach::MorePermissions
            } else if given(&p.network_approval_context)
                || p.proposed_network_policy_amendments
                    .as_ref()
                    .is_some_and(|v| !v.is_empty())
                || reason.contains("network access")
            {
                Reach::Network
            } else if no_sandbox {
                Reach::NoSandbox
            } else if retry_without_sandbox(&reason) {
                Reach::Outside
            } else if untrusted
                && ctx
                    .codex_version
                    .as_ref()
                    .is_some_and(|v| *v <= REFUSES_UNTRUSTED_ESCALATION)
            {
                Reach::OutsideIfBlocked
            } else {
                Reach::Outside
            })
        }
        (
            PendingDetails::FileChangeApproval {
                grant_root,
                changes,
                reason,
                ..
            },
            _,
        ) => Some(if grant_root.is_some() {
            Reach::Outside
        } else if no_sandbox {
            Reach::NoSandbox
        } else if reason.as_deref().is_some_and(|r| !r.trim().is_empty()) {
            // Codex gives a patch's first request no reason; a reason is a retry without the
            // sandbox ("command failed; retry without sandbox?").
            Reach::Outside
        } else if !untrusted {
            // Under on-request (and on-failure) Codex asks about a patch only when it may
            // leave the writable roots, or to run it again without the sandbox.
            Reach::Outside
        } else if ctx.sandbox == Some(SandboxMode::WorkspaceWrite)
            && !changes.is_empty()
            && ctx
                .cwd
                .as_deref()
                .is_some_and(|cwd| changes.iter().all(|c| stays_inside(c, Path::new(cwd))))
        {
            Reach::Sandboxed
        } else {
            Reach::OutsideIfBlocked
        }),
        (PendingDetails::PermissionsApproval { .. }, _) => Some(Reach::MorePermissions),
        (PendingDetails::Elicitation { .. }, _) => Some(Reach::McpServer),
        _ => None,
    }
}

/// Whether a command request's reason is Codex asking to run it again without the sandbox.
fn retry_without_sandbox(reason: &str) -> bool {
    reason.contains("without sandbox")
        || reason.contains("without the sandbox")
        || reason.contains("sandbox failed")
        || reason.contains("sandbox denied")
}

/// Whether every file `change` writes (its path, and where an update moves it) lies inside
/// `workspace`, outside its protected directories, as the file system resolves it now.
fn stays_inside(change: &FileUpdateChange, workspace: &Path) -> bool {
    let moved = ["move_path", "movePath"]
        .iter()
        .find_map(|k| change.kind.get(k)?.as_str());
    std::iter::once(change.path.as_str())
        .chain(moved)
        .all(|p| writes_inside(Path::new(p), workspace))
}

/// Whether writing `path` (relative ones from `workspace`) writes inside `workspace`: after
/// following every symbolic link that exists now, the file is under the workspace, and no
/// directory on the way, as written or as resolved, is a protected one.
pub(crate) fn writes_inside(path: &Path, workspace: &Path) -> bool {
    let path = workspace.join(path);
    let (Some(file), Some(root)) = (resolve(&path), resolve(workspace)) else {
        return false;
    };
    let protected = |p: &Path| {
        p.components().any(|c| {
            PROTECTED
                .iter()
                .any(|d| c.as_os_str().eq_ignore_ascii_case(d))
        })
    };
    let Ok(inside) = file.strip_prefix(&root) else {
        return false;
    };
    inside.components().next().is_some()
        && !protected(inside)
        && !protected(path.strip_prefix(workspace).unwrap_or(&path))
}

/// `path` as the kernel would reach it: its longest existing ancestor canonicalized (links
/// followed), then the names below it that do not exist yet (so hold no link). `None` when
/// that cannot be told (a `..` below a directory that does not exist).
fn resolve(path: &Path) -> Option<PathBuf> {
    if !path.is_absolute() {
        return None;
    }
    let mut base = path.to_path_buf();
    let mut missing = Vec::new();
    loop {
        match std::fs::canonicalize(&base) {
            Ok(mut out) => {
                out.extend(missing.iter().rev());
                return Some(out);
            }
            Err(_) => {
                // `file_name` is `None` for a trailing `..`: then give up.
                missing.push(base.file_name()?.to_owned());
                if !base.pop() {
                    return None;
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "reach_tests.rs"]
mod tests;
