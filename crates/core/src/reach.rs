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
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::pending::{PendingDetails, PendingView};
use crate::rules::RuleContext;

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
