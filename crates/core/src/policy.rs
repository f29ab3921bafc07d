//! Who may start what: the operator's limits on the options a client may ask for (working
//! directories and image paths under allowed roots, the most permissive sandbox and approval
//! policy, config overrides), checked by the engine for every front before Codex sees them.

use std::path::{Path, PathBuf};

use codex_relay_protocol::v2::{ApprovalPolicy, SandboxMode};
use serde_json::Value;

use crate::error::RelayError;

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

    /// Refuses what is beyond the policy, naming the option and the limit. `default_cwd` is
    /// where a session without a `cwd` works.
    pub fn check(&self, asked: &Asked<'_>, default_cwd: &Path) -> Result<(), RelayError> {
        let refuse = |what: String| {
            tracing::warn!(target: "codex_relay::policy", "refused: {what}");
            Err(RelayError::Forbidden(what))
        };
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

    /// Checks the settings a resumed thread (one Codex made, not this relay) came back with.
    pub fn check_resumed(
        &self,
        cwd: Option<&str>,
        sandbox: Option<&Value>,
        approval: Option<&Value>,
        default_cwd: &Path,
    ) -> Result<(), RelayError> {
        if self.is_open() {
            return Ok(());
        }
        let asked = Asked {
            cwd,
            sandbox: sandbox.and_then(sandbox_of),
            approval: approval
                .and_then(Value::as_str)
                .and_then(|s| s.parse().ok()),
            ..Default::default()
        };
        self.check(&asked, default_cwd)
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
mod tests {
    use super::*;
    use serde_json::json;

    fn strict(root: &Path) -> StartPolicy {
        StartPolicy {
            roots: Some(vec![root.to_path_buf()]),
            max_sandbox: SandboxMode::WorkspaceWrite,
            max_approval: ApprovalPolicy::OnRequest,
            allow_config: false,
        }
    }

    fn forbidden(r: Result<(), RelayError>) -> String {
        match r {
            Err(RelayError::Forbidden(m)) => m,
            other => panic!("expected Forbidden, got {other:?}"),
        }
    }

    #[test]
    fn the_default_allows_everything() {
        let p = StartPolicy::default();
        assert!(p.is_open());
        let config = json!({"sandbox_mode": "danger-full-access"});
        let asked = Asked {
            cwd: Some("/"),
            sandbox: Some(SandboxMode::DangerFullAccess),
            approval: Some(ApprovalPolicy::Never),
            config: config.as_object(),
            profile: Some("p"),
            images: &["/etc/hostname".into()],
        };
        p.check(&asked, Path::new("/")).unwrap();
    }

    #[test]
    fn a_strict_policy_names_what_it_refuses() {
        let dir = tempfile::tempdir().unwrap();
        let inner = dir.path().join("repo");
        std::fs::create_dir(&inner).unwrap();
        let p = strict(dir.path());
        let ok = Asked {
            cwd: Some("repo"),
            sandbox: Some(SandboxMode::WorkspaceWrite),
            approval: Some(ApprovalPolicy::OnRequest),
            ..Default::default()
        };
        p.check(&ok, dir.path()).unwrap();
        let m = forbidden(p.check(
            &Asked {
                sandbox: Some(SandboxMode::DangerFullAccess),
                ..Default::default()
            },
            dir.path(),
        ));
        assert!(m.contains("danger-full-access"), "{m}");
        let m = forbidden(p.check(
            &Asked {
                approval: Some(ApprovalPolicy::Never),
                ..Default::default()
            },
            dir.path(),
        ));
        assert!(m.contains("never"), "{m}");
        // Nothing to approve in a read-only sandbox.
        p.check(
            &Asked {
                approval: Some(ApprovalPolicy::Never),
                sandbox: Some(SandboxMode::ReadOnly),
                ..Default::default()
            },
            dir.path(),
        )
        .unwrap();
        let m = forbidden(p.check(
            &Asked {
                cwd: Some("/"),
                ..Default::default()
            },
            dir.path(),
        ));
        assert!(m.contains("outside"), "{m}");
        // `..` and symbolic links are resolved before the comparison.
        let m = forbidden(p.check(
            &Asked {
                cwd: Some("repo/../.."),
                ..Default::default()
            },
            dir.path(),
        ));
        assert!(m.contains("outside"), "{m}");
        std::os::unix::fs::symlink("/", inner.join("up")).unwrap();
        forbidden(p.check(
            &Asked {
                cwd: Some("repo/up"),
                ..Default::default()
            },
            dir.path(),
        ));
        let config = json!({"model_reasoning_effort": "low"});
        let m = forbidden(p.check(
            &Asked {
                config: config.as_object(),
                ..Default::default()
            },
            dir.path(),
        ));
        assert!(m.contains("config overrides"), "{m}");
        forbidden(p.check(
            &Asked {
                profile: Some("fast"),
                ..Default::default()
            },
            dir.path(),
        ));
        let m = forbidden(p.check(
            &Asked {
                cwd: Some("repo"),
                images: &["/etc/hostname".into()],
                ..Default::default()
            },
            dir.path(),
        ));
        assert!(m.contains("image"), "{m}");
        p.check(
            &Asked {
                cwd: Some("repo"),
                images: &["https://example.com/a.png".into()],
                ..Default::default()
            },
            dir.path(),
        )
        .unwrap();
    }

    #[test]
    fn config_overrides_cannot_go_around_the_limits() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = strict(dir.path());
        p.allow_config = true;
        let config = json!({"sandbox_mode": "danger-full-access"});
        let m = forbidden(p.check(
            &Asked {
                sandbox: Some(SandboxMode::ReadOnly),
                config: config.as_object(),
                ..Default::default()
            },
            dir.path(),
        ));
        assert!(m.contains("danger-full-access"), "{m}");
        let config = json!({"approval_policy": "never"});
        forbidden(p.check(
            &Asked {
                config: config.as_object(),
                ..Default::default()
            },
            dir.path(),
        ));
    }

    #[test]
    fn resumed_threads_are_read_in_either_shape() {
        let dir = tempfile::tempdir().unwrap();
        let p = strict(dir.path());
        let cwd = dir.path().display().to_string();
        p.check_resumed(
            Some(&cwd),
            Some(&json!({"type": "workspaceWrite", "networkAccess": false})),
            Some(&json!("on-request")),
            dir.path(),
        )
        .unwrap();
        forbidden(p.check_resumed(
            Some(&cwd),
            Some(&json!({"type": "dangerFullAccess"})),
            None,
            dir.path(),
        ));
        forbidden(p.check_resumed(
            Some(&cwd),
            Some(&json!("danger-full-access")),
            None,
            dir.path(),
        ));
        forbidden(p.check_resumed(Some("/"), None, None, dir.path()));
    }
}
