//! `serve`'s single sign-on flags (docs/SECURITY.md "Single sign-on"): the OpenID provider's
//! issuer, the client id, the client secret (from a file or CODEX_RELAY_OIDC_CLIENT_SECRET,
//! never the command line), scopes, who an unbound identity may be, how long an SSO login
//! lasts; and `--public-url`, where browsers reach the relay (the callback is under it).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use codex_relay_core::people::{Role, SsoPolicy};
use codex_relay_http::sso::{Oidc, OidcSettings};

/// The environment variable that may hold the client secret.
pub const SECRET_VAR: &str = "CODEX_RELAY_OIDC_CLIENT_SECRET";

/// CODEX_RELAY_OIDC_CLIENT_SECRET, taken by `main` before anything else runs (the variable is
/// then removed and overwritten, like the token: see `harden_self`).
static ENV_SECRET: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();

/// Takes the client secret from the environment; call once, before `harden_self`.
pub fn take_env_secret() {
    let _ = ENV_SECRET.set(
        std::env::var(SECRET_VAR)
            .ok()
            .filter(|t| !t.trim().is_empty()),
    );
}

#[derive(clap::Args, Debug)]
pub struct SsoArgs {
    /// Sign in through this OpenID provider (its issuer URL; the discovery document is at
    /// `<issuer>/.well-known/openid-configuration`). https, or http on loopback only.
    #[arg(
        long = "oidc-issuer",
        env = "CODEX_RELAY_OIDC_ISSUER",
        value_name = "URL"
    )]
    issuer: Option<String>,
    /// The client id registered at the provider (its redirect URI:
    /// `<public URL>/login/oidc/callback`).
    #[arg(long = "oidc-client-id", env = "CODEX_RELAY_OIDC_CLIENT_ID")]
    client_id: Option<String>,
    /// Read the client secret from this file (its first line); or set
    /// CODEX_RELAY_OIDC_CLIENT_SECRET. Without either: a public client (PKCE alone).
    #[arg(
        long = "oidc-client-secret-file",
        env = "CODEX_RELAY_OIDC_CLIENT_SECRET_FILE",
        value_name = "FILE"
    )]
    secret_file: Option<PathBuf>,
    /// Refused: a secret on the command line is readable by every process on this machine.
    #[arg(long = "oidc-client-secret", hide = true)]
    secret: Option<String>,
    /// The scopes asked for, space-separated (`openid` is always asked).
    #[arg(
        long = "oidc-scopes",
        env = "CODEX_RELAY_OIDC_SCOPES",
        default_value = "openid email profile"
    )]
    scopes: String,
    /// The provider's name on the login page ("Sign in with NAME").
    #[arg(
        long = "oidc-name",
        env = "CODEX_RELAY_OIDC_NAME",
        default_value = "single sign-on"
    )]
    name: String,
    /// Also sign in a person whose provider-verified email (`email_verified`) equals a
    /// user's name, binding the identity to that user. Off by default: only identities an
    /// admin bound, or that used an invitation, sign in.
    #[arg(long = "oidc-match-email", env = "CODEX_RELAY_OIDC_MATCH_EMAIL")]
    match_email: bool,
    /// Make a new user with this role (viewer, approver, ...) for an identity the relay does
    /// not know. Off by default: unknown identities are refused.
    #[arg(
        long = "oidc-create-users",
        env = "CODEX_RELAY_OIDC_CREATE_USERS",
        value_name = "ROLE"
    )]
    create_role: Option<String>,
    /// How long a browser login made by single sign-on lasts, in minutes (on the server: its
    /// token expires then, whatever the browser keeps).
    #[arg(
        long = "oidc-login-minutes",
        env = "CODEX_RELAY_OIDC_LOGIN_MINUTES",
        default_value_t = 8 * 60
    )]
    login_minutes: u64,
}

impl SsoArgs {
    /// The provider, when one is configured; `public_url` is the relay's public URL as
    /// `serve` settled it (`--public-url`, else the notify file's, else its link base).
    pub fn oidc(&self, public_url: &str) -> anyhow::Result<Option<std::sync::Arc<Oidc>>> {
        if self.secret.is_some() {
            anyhow::bail!(
                "--oidc-client-secret is not accepted: a secret on the command line is readable by every process on this machine (/proc/<pid>/cmdline). Pass it in {SECRET_VAR} or --oidc-client-secret-file"
            );
        }
        let Some(issuer) = self.issuer.clone() else {
            if self.client_id.is_some() {
                anyhow::bail!("--oidc-client-id needs --oidc-issuer");
            }
            return Ok(None);
        };
        let client_id = self
            .client_id
            .clone()
            .context("--oidc-issuer needs --oidc-client-id")?;
        let client_secret = match (ENV_SECRET.get().cloned().flatten(), &self.secret_file) {
            (Some(s), _) => Some(s.trim().to_owned()),
            (None, Some(file)) => Some(
                std::fs::read_to_string(file)
                    .with_context(|| {
                        format!("reading the OIDC client secret from {}", file.display())
                    })?
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .trim()
                    .to_owned(),
            )
            .filter(|s| !s.is_empty()),
            (None, None) => None,
        };
        let create_role = match &self.create_role {
            Some(r) => Some(Role::parse(r).with_context(|| {
                format!(
                    "--oidc-create-users: {r:?} is not one of viewer, approver, operator, admin"
                )
            })?),
            None => None,
        };
        if create_role == Some(Role::Admin) {
            anyhow::bail!(
                "--oidc-create-users admin would make anyone the provider knows an admin; name a lower role"
            );
        }
        let scopes: Vec<String> = std::iter::once("openid".to_owned())
            .chain(
                self.scopes
                    .split([' ', ','])
                    .filter(|s| !s.is_empty() && *s != "openid")
                    .map(str::to_owned),
            )
            .collect();
        let settings = OidcSettings {
            issuer,
            client_id,
            client_secret,
            public_url: public_url.to_owned(),
            scopes,
            display_name: self.name.clone(),
            policy: SsoPolicy {
                match_email: self.match_email,
                create_role,
            },
            login_lifetime: Duration::from_secs(self.login_minutes.clamp(1, 30 * 24 * 60) * 60),
        };
        Ok(Some(Oidc::new(settings)?))
    }
}
