//! The relay side of the start policy: the check before any Codex work, and the sandbox,
//! approval policy and config overrides a new thread is started with (its profile read and
//! judged, and, under limits, both settings explicit and within them).

use codex_relay_codex::AppServer;
use codex_relay_protocol::v2::{ApprovalPolicy, SandboxMode};
use serde_json::{Map, Value};

use crate::config::CreateOptions;
use crate::error::RelayError;
use crate::relay::Relay;

/// A new thread's approval policy, sandbox and config overrides.
pub(crate) type StartSettings = (
    Option<ApprovalPolicy>,
    Option<SandboxMode>,
    Option<Map<String, Value>>,
);

impl Relay {
    /// Where a session without a `cwd` works: the configured directory, else the relay's own.
    pub(crate) fn default_cwd(&self) -> std::path::PathBuf {
        self.inner
            .config
            .codex
            .cwd
            .clone()
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_else(|| "/".into())
    }

    /// Refuses options beyond the operator's [`StartPolicy`](crate::policy::StartPolicy),
    /// before any Codex work is done.
    pub(crate) fn check_policy(&self, opts: &CreateOptions) -> Result<(), RelayError> {
        let policy = &self.inner.config.policy;
        if policy.is_open() {
            return Ok(());
        }
        // A permission mode's settings; the Codex version only renames `on-failure`, which
        // ranks as `on-request` anyway.
        let from_mode = opts
            .mode
            .map(|m| m.settings(&codex_relay_codex::CodexVersion::new(0, 169, 0)));
        let asked = crate::policy::Asked {
            cwd: opts.cwd.as_deref(),
            sandbox: opts.sandbox.or(from_mode.map(|m| m.1)),
            approval: opts.approval_policy.or(from_mode.map(|m| m.0)),
            config: opts.config.as_ref(),
            profile: opts.profile.as_deref(),
            images: &opts.images,
        };
        policy.check(&asked, &self.default_cwd())
    }

    /// What `thread/start` gets for `opts` on `server`: the approval policy, sandbox and config
    /// overrides (a profile's settings included).
    pub(crate) fn start_settings(
        &self,
        opts: &CreateOptions,
        server: &AppServer,
    ) -> Result<StartSettings, RelayError> {
        let (mut policy, mut sandbox) = (opts.approval_policy, opts.sandbox);
        if let Some(mode) = opts.mode {
            let (p, s) = mode.settings(server.version());
            policy = policy.or(Some(p));
            sandbox = sandbox.or(Some(s));
        }
        // Codex's own CODEX_HOME: as it reports it (0.169), else as it was started with
        // (0.98 does not say).
        let process = self
            .inner
            .servers
            .config_for(opts.codex_home.clone().map(Into::into));
        let home = server
            .initialize_response()
            .codex_home
            .clone()
            .map(std::path::PathBuf::from)
            .or(process.codex_home.clone())
            .or_else(crate::login::default_codex_home);
        let limits = &self.inner.config.policy;
        let config = match &opts.profile {
            Some(name) => {
                let profile = crate::profile::load(home.as_deref(), name)?;
                limits.check_profile(&profile, &self.default_cwd())?;
                Some(crate::profile::overrides(&profile, opts.config.clone()))
            }
            None => opts.config.clone(),
        };
        if limits.limits_commands() {
            // Codex is told both, within the limits, whatever its own config says.
            let cwd = opts
                .cwd
                .as_deref()
                .map(std::path::PathBuf::from)
                .unwrap_or_else(|| self.default_cwd());
            let (s, p) = limits.settle(
                &super::Wanted {
                    sandbox,
                    approval: policy,
                    overrides: config.as_ref(),
                    cwd: &cwd,
                },
                &super::CodexConfig::read(home.as_deref(), &process.config_overrides),
            );
            sandbox = Some(s);
            policy = Some(p);
        }
        Ok((policy, sandbox, config))
    }
}
