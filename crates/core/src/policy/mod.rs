//! Who may start what: the operator's limits on the options a client may ask for (working
//! directories and image paths under allowed roots, the most permissive sandbox and approval
//! policy, config overrides and profiles), checked by the engine for every front before Codex
//! sees them, and again against what Codex reports it runs with.

mod apply;
mod keys;
mod settle;

use std::path::{Path, PathBuf};

use codex_relay_protocol::v2::{ApprovalPolicy, SandboxMode};
use serde_json::Value;

use crate::error::RelayError;

pub use keys::ALLOWED as CONFIG_KEYS_UNDER_LIMITS;
pub use settle::{CodexConfig, Wanted};

/// The limits a relay puts on session options. The default allows everything (the library
/// and stdio MCP, where the client is the user).
#[derive(Debug, Clone)]
pub struct StartPolicy {
    /// Directories sessions may work in (and take local images from), with everything under
    /// them; `None` allows any directory.
    pub roots: Option<Vec<PathBuf>>,
    /// The most permissive sandbox a client may ask for.
    pub max_sandbox: SandboxMode,
    /// The most permissive approval policy a client may ask for (`never` with a `read-only`
    /// sandbox is always allowed: nothing can be written, so there is nothing to approve).
    pub max_approval: ApprovalPolicy,
    /// Whether `config` overrides and profiles are accepted.
    pub allow_config: bool,
}

impl Default for StartPolicy {
    fn default() -> Self {
        Self {
            roots: None,
            max_sandbox: SandboxMode::DangerFullAccess,
            max_approval: ApprovalPolicy::Never,
            allow_config: true,
        }
    }
}

/// How much a sandbox allows, least first.
fn sandbox_rank(s: SandboxMode) -> u8 {
    match s {
        SandboxMode::ReadOnly => 0,
        SandboxMode::WorkspaceWrite => 1,
        SandboxMode::DangerFullAccess => 2,
    }
}

/// How little an approval policy asks, least permissive first: `untrusted` asks before
/// anything, `on-request` and `on-failure` before leaving the sandbox, `never` never.
fn approval_rank(p: ApprovalPolicy) -> u8 {
    match p {
        ApprovalPolicy::Untrusted => 0,
        ApprovalPolicy::OnRequest | ApprovalPolicy::OnFailure => 1,
        ApprovalPolicy::Never => 2,
    }
}

/// The parts of a start (or resume) that the policy looks at.
#[derive(Debug, Default)]
pub struct Asked<'a> {
    /// The working directory, as given (`None`: the relay's default directory).
    pub cwd: Option<&'a str>,
    pub sandbox: Option<SandboxMode>,
    pub approval: Option<ApprovalPolicy>,
    pub config: Option<&'a serde_json::Map<String, Value>>,
    pub profile: Option<&'a str>,
    pub images: &'a [String],
}

impl StartPolicy {
    /// Whether this policy restricts anything (an unrestricted one skips every check).
    pub fn is_open(&self) -> bool {
        self.roots.is_none()
            && self.max_sandbox == SandboxMode::DangerFullAccess
            && self.max_approval == ApprovalPolicy::Never
            && self.allow_config
    }

    /// Whether the sandbox or the approval policy is limited: then every session is told an
    /// explicit sandbox and approval policy within the limits ([`StartPolicy::settle`]), and
    /// config overrides and profiles may only tune the model ([`CONFIG_KEYS_UNDER_LIMITS`]).
    /// (With `danger-full-access` and `never` allowed, a session may run anything anyway.)
    pub fn limits_commands(&self) -> bool {
        self.max_sandbox != SandboxMode::DangerFullAccess
            || self.max_approval != ApprovalPolicy::Never
    }

    /// The sandbox and approval limits in words, for messages.
    pub fn limits_described(&self) -> String {
        format!(
            "sandbox up to {}, approval policy up to {}",
            sandbox_str(self.max_sandbox),
            self.max_approval.as_str()
        )
    }

    /// Refuses what is beyond the policy, naming the option and the limit. `default_cwd` is
    /// where a session without a `cwd` works.
    pub fn check(&self, asked: &Asked<'_>, default_cwd: &Path) -> Result<(), RelayError> {
        let refuse = |what: String| {
            tracing::warn!(target: "codex_relay::policy", "refused: {what}");
            Err(RelayError::Forbidden(what))
        };
        if self.allow_config
            && self.limits_commands()
            && let Some(config) = asked.config
            && let Some(why) = config.iter().find_map(|(key, value)| {
                keys::refused(key, value, "config override", &self.limits_described())
            })
        {
            return refuse(why);
        }
        if !self.allow_config {
            if asked.config.is_some_and(|c| !c.is_empty()) {
                return refuse(
                    "config overrides are not accepted by this relay (the operator did not allow them)"
                        .into(),
                );
            }
            if asked.profile.is_some() {
                return refuse(
                    "profiles are not accepted by this relay (they are config overrides, which the operator did not allow)"
                        .into(),
                );
            }
        }
        // Config overrides may name a sandbox or approval policy too: the same limits hold.
        let from_config = |key: &str| {
            asked
                .config
                .and_then(|c| c.get(key))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let sandbox = match from_config("sandbox_mode") {
            Some(s) => Some(
                s.parse::<SandboxMode>()
                    .map_err(RelayError::InvalidOption)?,
            ),
            None => asked.sandbox,
        };
        let approval = match from_config("approval_policy") {
            Some(s) => Some(
                s.parse::<ApprovalPolicy>()
                    .map_err(RelayError::InvalidOption)?,
            ),
            None => asked.approval,
        };
        if let Some(s) = sandbox
            && sandbox_rank(s) > sandbox_rank(self.max_sandbox)
        {
            return refuse(format!(
                "sandbox {:?} is beyond this relay's limit ({:?}); ask for {:?} or less",
                sandbox_str(s),
                sandbox_str(self.max_sandbox),
                sandbox_str(self.max_sandbox)
            ));
        }
        if let Some(p) = approval
            && approval_rank(p) > approval_rank(self.max_approval)
            && !(p == ApprovalPolicy::Never && sandbox == Some(SandboxMode::ReadOnly))
        {
            return refuse(format!(
                "approval policy {:?} is beyond this relay's limit ({:?}): a human must be able to approve what Codex does here",
                p.as_str(),
                self.max_approval.as_str()
            ));
        }
        if let Some(roots) = &self.roots {
            let cwd = match asked.cwd {
                Some(c) => default_cwd.join(c),
                None => default_cwd.to_path_buf(),
            };
            let cwd = within(&cwd, roots).map_err(|why| {
                tracing::warn!(target: "codex_relay::policy", "refused: working directory: {why}");
                RelayError::Forbidden(format!("working directory: {why}"))
            })?;
            for image in asked.images {
                if ["http://", "https://", "data:"]
                    .iter()
                    .any(|p| image.starts_with(p))
                {
                    continue;
                }
                within(&cwd.join(image), roots).map_err(|why| {
                    tracing::warn!(target: "codex_relay::policy", "refused: image: {why}");
                    RelayError::Forbidden(format!("image: {why}"))
                })?;
            }
        }
        Ok(())
    }

    /// Refuses the settings a profile brings beyond the limits (its sandbox, approval policy
    /// and every key, as for the request's own overrides), and a profile whose settings cannot
    /// be read. Only while commands are limited ([`StartPolicy::limits_commands`]).
    pub(crate) fn check_profile(
        &self,
        profile: &crate::profile::Profile,
        default_cwd: &Path,
    ) -> Result<(), RelayError> {
        if !self.limits_commands() {
            return Ok(());
        }
        let from = profile.described();
        let Some(settings) = &profile.settings else {
            let why = format!(
                "{from}: CODEX_HOME has no such profile (neither {}.config.toml nor [profiles.{}] in config.toml), so what it would set cannot be checked against this relay's limits ({})",
                profile.name,
                profile.name,
                self.limits_described()
            );
            tracing::warn!(target: "codex_relay::policy", "refused: {why}");
            return Err(RelayError::Forbidden(why));
        };
        if let Some(why) = settings.iter().find_map(|(key, value)| {
            keys::refused(
                key,
                value,
                &format!("{from} sets"),
                &self.limits_described(),
            )
        }) {
            tracing::warn!(target: "codex_relay::policy", "refused: {why}");
            return Err(RelayError::Forbidden(why));
        }
        // Its sandbox and approval policy, as the request's own would be (its directory is the
        // request's, checked on its own).
        let modes_only = StartPolicy {
            roots: None,
            ..self.clone()
        };
        modes_only
            .check(
                &Asked {
                    config: Some(settings),
                    ..Default::default()
                },
                default_cwd,
            )
            .map_err(|e| match e {
                RelayError::Forbidden(why) => RelayError::Forbidden(format!("{from}: {why}")),
                other => other,
            })
    }

    /// Checks the settings Codex reports a thread runs with (after `thread/start`, or a
    /// `thread/resume` of a thread this relay did not make): its directory, sandbox and
    /// approval policy, and that approvals go to a person. While commands are limited, a
    /// sandbox or policy Codex does not report (or in a shape not understood) is refused too.
    pub fn check_effective(
        &self,
        effective: &Effective<'_>,
        default_cwd: &Path,
    ) -> Result<(), RelayError> {
        if self.is_open() {
            return Ok(());
        }
        let sandbox = effective.sandbox.and_then(sandbox_of);
        let approval = effective
            .approval
            .and_then(Value::as_str)
            .and_then(|s| s.parse().ok());
        if self.limits_commands() {
            let unknown = match (sandbox, approval) {
                (None, _) => Some(("sandbox", effective.sandbox)),
                (_, None) => Some(("approval policy", effective.approval)),
                _ => None,
            };
            if let Some((what, shown)) = unknown {
                let why = format!(
                    "Codex reports the {what} of this thread as {}, which cannot be checked against this relay's limits ({})",
                    shown.map_or("nothing".into(), Value::to_string),
                    self.limits_described()
                );
                tracing::warn!(target: "codex_relay::policy", "refused: {why}");
                return Err(RelayError::Forbidden(why));
            }
            if let Some(reviewer) = effective.reviewer.and_then(Value::as_str)
                && reviewer != "user"
            {
                let why = format!(
                    "Codex would send this thread's approvals to {reviewer:?}, not to a person (approvals_reviewer in Codex's config); this relay limits sessions ({}), so a person must answer them",
                    self.limits_described()
                );
                tracing::warn!(target: "codex_relay::policy", "refused: {why}");
                return Err(RelayError::Forbidden(why));
            }
        }
        let asked = Asked {
            cwd: effective.cwd,
            sandbox,
            approval,
            ..Default::default()
        };
        self.check(&asked, default_cwd)
    }
}

/// What Codex reports a thread runs with, as it reports it.
#[derive(Debug, Default, Clone, Copy)]
pub struct Effective<'a> {
    pub cwd: Option<&'a str>,
    /// A string (`"workspace-write"`) or a policy object (`{"type": "workspaceWrite", ...}`).
    pub sandbox: Option<&'a Value>,
    pub approval: Option<&'a Value>,
    /// `approvalsReviewer` (Codex 0.169: `"user"`, or a model that reviews instead).
    pub reviewer: Option<&'a Value>,
}

impl<'a> Effective<'a> {
    /// As a `thread/start` or `thread/resume` answer reports it.
    pub fn of(r: &'a codex_relay_protocol::v2::ThreadStartResponse) -> Self {
        Self {
            cwd: r.cwd.as_deref().or(r.thread.cwd.as_deref()),
            sandbox: r.sandbox.as_ref(),
            approval: r.approval_policy.as_ref(),
            reviewer: r.approvals_reviewer.as_ref(),
        }
    }
}

fn sandbox_str(s: SandboxMode) -> &'static str {
    match s {
        SandboxMode::ReadOnly => "read-only",
        SandboxMode::WorkspaceWrite => "workspace-write",
        SandboxMode::DangerFullAccess => "danger-full-access",
    }
}

/// A sandbox as Codex reports it: a string (`"workspace-write"`) or a policy object
/// (`{"type": "workspaceWrite", ...}`).
fn sandbox_of(v: &Value) -> Option<SandboxMode> {
    let word = v
        .as_str()
        .or_else(|| v.get("type").and_then(Value::as_str))?;
    let kebab: String = word
        .chars()
        .flat_map(|c| {
            if c.is_ascii_uppercase() {
                vec!['-', c.to_ascii_lowercase()]
            } else {
                vec![c]
            }
        })
        .collect();
    kebab.parse().ok()
}

/// `path` resolved (symbolic links followed) if it lies under one of `roots`.
fn within(path: &Path, roots: &[PathBuf]) -> Result<PathBuf, String> {
    let real = path.canonicalize().map_err(|e| {
        format!(
            "{} cannot be resolved here ({e}); it must exist under an allowed root",
            path.display()
        )
    })?;
    let inside = roots.iter().any(|root| {
        root.canonicalize()
            .is_ok_and(|root| real.starts_with(&root))
    });
    if inside {
        Ok(real)
    } else {
        Err(format!(
            "{} is outside the directories this relay allows ({})",
            real.display(),
            roots
                .iter()
                .map(|r| r.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }
}

#[cfg(test)]
mod tests;
