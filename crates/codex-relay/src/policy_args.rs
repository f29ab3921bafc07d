//! The flags that limit what clients may start (`--allow-cwd`, `--max-sandbox`,
//! `--max-approval-policy`, `--allow-config-overrides`), shared by every serving subcommand.
//! Unset, they allow everything, except for `serve` beyond loopback, where they are strict.

use std::net::SocketAddr;
use std::path::PathBuf;

use codex_relay_core::StartPolicy;
use codex_relay_protocol::v2::{ApprovalPolicy, SandboxMode};

#[derive(clap::Args, Debug, Clone, Default)]
pub struct PolicyArgs {
    /// A directory sessions may work in (with everything under it); repeatable. Working
    /// directories and local images elsewhere are refused. Default: anywhere, except for
    /// `serve` beyond loopback: the directory it was started in.
    #[arg(
        long = "allow-cwd",
        value_name = "DIR",
        env = "CODEX_RELAY_ALLOW_CWD",
        value_delimiter = ':'
    )]
    pub allow_cwd: Vec<PathBuf>,
    /// The most permissive sandbox a client may ask for: read-only, workspace-write or
    /// danger-full-access. Default: danger-full-access, except for `serve` beyond loopback:
    /// workspace-write.
    #[arg(long, value_name = "SANDBOX", env = "CODEX_RELAY_MAX_SANDBOX")]
    pub max_sandbox: Option<SandboxMode>,
    /// The most permissive approval policy a client may ask for: untrusted, on-request or
    /// never (`never` with a read-only sandbox is always allowed). Default: never, except for
    /// `serve` beyond loopback: on-request.
    #[arg(long, value_name = "POLICY", env = "CODEX_RELAY_MAX_APPROVAL_POLICY")]
    pub max_approval_policy: Option<ApprovalPolicy>,
    /// Whether clients may pass Codex config overrides (`config`) and profiles: yes or no.
    /// While the sandbox or approval policy is limited, only keys that tune the model (and a
    /// profile setting only those) are taken. Default: yes, except for `serve` beyond
    /// loopback: no.
    #[arg(long, value_name = "YES|NO", env = "CODEX_RELAY_ALLOW_CONFIG_OVERRIDES", value_parser = parse_yes_no)]
    pub allow_config_overrides: Option<bool>,
    #[arg(skip)]
    strict: bool,
}

fn parse_yes_no(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "yes" | "true" | "1" | "on" => Ok(true),
        "no" | "false" | "0" | "off" => Ok(false),
        _ => Err(format!("{s:?}: say yes or no")),
    }
}

impl PolicyArgs {
    /// `serve` beyond loopback: what is not set is strict.
    pub fn apply_serve_defaults(&mut self, listen: SocketAddr) {
        self.strict = !listen.ip().is_loopback();
    }

    /// The policy these flags make.
    pub fn policy(&self) -> anyhow::Result<StartPolicy> {
        let open = StartPolicy::default();
        let roots = if !self.allow_cwd.is_empty() {
            Some(self.allow_cwd.clone())
        } else if self.strict {
            Some(vec![std::env::current_dir()?])
        } else {
            None
        };
        if let Some(roots) = &roots {
            for root in roots {
                if !root.is_dir() {
                    anyhow::bail!("--allow-cwd {}: not a directory", root.display());
                }
            }
        }
        let (sandbox, approval) = if self.strict {
            (SandboxMode::WorkspaceWrite, ApprovalPolicy::OnRequest)
        } else {
            (open.max_sandbox, open.max_approval)
        };
        Ok(StartPolicy {
            roots,
            max_sandbox: self.max_sandbox.unwrap_or(sandbox),
            max_approval: self.max_approval_policy.unwrap_or(approval),
            allow_config: self
                .allow_config_overrides
                .unwrap_or(!self.strict && open.allow_config),
        })
    }

    /// One line for the settings log.
    pub fn describe(policy: &StartPolicy) -> String {
        if policy.is_open() {
            return "any (no limits)".into();
        }
        format!(
            "cwd under {}; sandbox up to {:?}; approval policy up to {}; config overrides {}",
            policy
                .roots
                .as_ref()
                .map(|r| r
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "))
                .unwrap_or_else(|| "anywhere".into()),
            policy.max_sandbox,
            policy.max_approval.as_str(),
            if policy.allow_config && policy.limits_commands() {
                "allowed (keys that tune the model only)"
            } else if policy.allow_config {
                "allowed"
            } else {
                "refused"
            }
        )
    }
}
