//! `serve`'s HTTP-front flags (the token and where it comes from, CORS origins, body and
//! connection limits, trusted proxies) and the one app it serves: the API, streams and UI
//! beside `/mcp` and `/mcp-server`, all behind the same security layers.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use codex_relay_core::Relay;
use codex_relay_http::auth::{self, Credentials, Hash};
use codex_relay_http::server::ServerLimits;
use codex_relay_http::streams::StreamLimits;
use codex_relay_http::{HttpOptions, Security};

/// The file in the data directory that keeps the generated token's hash.
const TOKEN_FILE: &str = "serve-token.sha256";
/// The file in the data directory that keeps browser logins (their hashes).
const LOGINS_FILE: &str = "serve-logins.json";

#[derive(clap::Args)]
pub struct HttpArgs {
    /// Refused: a token on the command line is readable by every process on this machine
    /// (`/proc/<pid>/cmdline`). Use CODEX_RELAY_TOKEN or --token-file.
    #[arg(long, hide = true)]
    token: Option<String>,
    /// Read the token from this file (its first line), e.g. one your secret store writes; or
    /// set CODEX_RELAY_TOKEN. Every request (API, streams, MCP, UI) must carry the token, as
    /// `Authorization: Bearer <token>` or the UI's login cookie; at least 16 bytes. Without
    /// either, serve makes one, prints it once and keeps only its hash in the data directory.
    #[arg(long, env = "CODEX_RELAY_TOKEN_FILE", value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Serve without a token: on loopback only, and every local user and browser tab can
    /// then drive Codex (processes Codex itself started are still refused).
    #[arg(long)]
    no_auth: bool,
    /// An origin allowed to call the API from a browser page served elsewhere (CORS), e.g.
    /// `https://dash.example.com`; repeatable. None by default: no CORS headers.
    #[arg(long = "cors-origin")]
    cors_origins: Vec<String>,
    /// The largest request body accepted, in bytes (larger ones get 413, chunked or not).
    #[arg(long, env = "CODEX_RELAY_MAX_BODY", default_value_t = codex_relay_http::security::DEFAULT_BODY_LIMIT)]
    max_body_bytes: usize,
    /// Connections open at once; at the cap the longest-idle one is closed to make room.
    #[arg(long, env = "CODEX_RELAY_MAX_CONNECTIONS", default_value_t = 1024)]
    max_connections: usize,
    /// How long a request's headers may take, a connection may sit idle, and a body may take
    /// before it must average 4 KiB/s, in milliseconds.
    #[arg(long, env = "CODEX_RELAY_HEADER_TIMEOUT_MS", default_value_t = 10_000)]
    header_timeout_ms: u64,
    /// Event streams (SSE, MCP streams) open at once, in all.
    #[arg(long, env = "CODEX_RELAY_MAX_STREAMS", default_value_t = StreamLimits::default().total)]
    max_streams: usize,
    /// Event streams open at once per caller (the token, or one browser login).
    #[arg(long, env = "CODEX_RELAY_MAX_STREAMS_PER_CALLER", default_value_t = StreamLimits::default().per_caller)]
    max_streams_per_caller: usize,
    /// A reverse proxy (its address as the relay sees it) whose X-Forwarded-For and
    /// X-Forwarded-Proto are believed: with `https` there, the login cookie is `Secure` and
    /// `__Host-`; repeatable.
    #[arg(long = "trusted-proxy", value_name = "IP")]
    trusted_proxies: Vec<IpAddr>,
    /// Where browsers reach the relay, e.g. `https://relay.example.com`: its host is the
    /// passkeys' relying party ID (a domain name; WebAuthn refuses IP addresses) and its
    /// origin the one passkeys are used from (without it, the address each browser used);
    /// single sign-on's callback is under it (without it, the notify file's `public_url`, the
    /// cluster's advertised URL, else where the relay listens).
    #[arg(long, env = "CODEX_RELAY_PUBLIC_URL", value_name = "URL")]
    pub public_url: Option<String>,
    /// Who must confirm approving a risky request (one that leaves the sandbox, reaches the
    /// network, asks for more permissions, or a --step-up-command) with a fresh passkey check:
    /// `off`, `passkey-users` (named users who registered a passkey; answer links once anyone
    /// has) or `all` (then the relay's token and users without a passkey cannot approve them).
    #[arg(long, env = "CODEX_RELAY_STEP_UP", default_value = "passkey-users", value_parser = ["off", "passkey-users", "all"])]
    step_up: String,
    /// A command pattern (as in rules: `git push*`) whose approval is risky whatever it
    /// reaches; repeatable.
    #[arg(long = "step-up-command", value_name = "PATTERN")]
    step_up_commands: Vec<String>,
}

/// CODEX_RELAY_TOKEN, taken from the environment by `main` before anything else runs (the
/// variable is then removed and its value overwritten: see `harden_self`).
static ENV_TOKEN: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();

/// The environment variable that holds the token.
pub const TOKEN_VAR: &str = "CODEX_RELAY_TOKEN";

/// Takes the token from the environment; call once, before [`codex_relay_codex::platform::process::harden_self`].
pub fn take_env_token() {
    let _ = ENV_TOKEN.set(
        std::env::var(TOKEN_VAR)
            .ok()
            .filter(|t| !t.trim().is_empty()),
    );
}

fn env_token() -> Option<String> {
    ENV_TOKEN.get().cloned().flatten()
}

/// The relay's token, as `serve` settled it.
pub struct Token {
    /// Its hash; `None` with --no-auth.
    pub hash: Option<Hash>,
    /// The token itself, when it was made now (shown once).
    pub fresh: Option<String>,
    /// Where its hash is kept, when serve made it.
    pub kept_in: Option<PathBuf>,
}

impl HttpArgs {
    /// Refuses what cannot be served safely, before anything starts: a token on the command
    /// line, a short token, `--no-auth` beyond loopback, bad CORS origins.
    pub fn check(&mut self, addr: SocketAddr) -> anyhow::Result<()> {
        if self.token.is_some() {
            anyhow::bail!(
                "--token is not accepted: a token on the command line is readable by every process on this machine (/proc/<pid>/cmdline), the commands Codex runs included. Pass it in CODEX_RELAY_TOKEN or --token-file, or let serve make one"
            );
        }
        if self.no_auth && (env_token().is_some() || self.token_file.is_some()) {
            anyhow::bail!(
                "--no-auth and a token (CODEX_RELAY_TOKEN / --token-file) contradict each other; pass one"
            );
        }
        codex_relay_http::check_listen(addr, !self.no_auth).map_err(anyhow::Error::msg)?;
        self.cors_origins = self
            .cors_origins
            .iter()
            .map(|o| codex_relay_http::security::parse_cors_origin(o))
            .collect::<Result<_, _>>()
            .map_err(anyhow::Error::msg)?;
        if let Some(url) = self.passkeys()?.public_url
            && let Some(why) = codex_relay_http::passkeys::unusable_for_passkeys(&url)
        {
            tracing::warn!("--public-url {url}: passkeys are unavailable there ({why})");
        }
        Ok(())
    }

    /// The passkey settings: the public URL and the step-up policy.
    pub fn passkeys(&self) -> anyhow::Result<codex_relay_http::passkeys::PasskeyOptions> {
        use codex_relay_http::passkeys::{StepUpMode, StepUpPolicy};
        let public_url = match &self.public_url {
            Some(u) => Some(
                codex_relay_http::passkeys::public_url(u)
                    .map_err(|e| anyhow::anyhow!("--public-url: {e}"))?,
            ),
            None => None,
        };
        let commands = self
            .step_up_commands
            .iter()
            .map(|c| {
                codex_relay_core::glob::Pattern::command(c)
                    .map_err(|e| anyhow::anyhow!("--step-up-command {c:?}: {e}"))
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(codex_relay_http::passkeys::PasskeyOptions {
            public_url,
            step_up: StepUpPolicy {
                mode: StepUpMode::parse(&self.step_up).unwrap_or_default(),
                commands,
                ..Default::default()
            },
        })
    }

    /// The token: the one given (CODEX_RELAY_TOKEN, --token-file), else the one kept in
    /// `data_dir`, else a new one (its hash kept there, mode 0600).
    pub fn token(&self, data_dir: &Path) -> anyhow::Result<Token> {
        if self.no_auth {
            return Ok(Token {
                hash: None,
                fresh: None,
                kept_in: None,
            });
        }
        let given = match (env_token(), &self.token_file) {
            (Some(t), _) => Some(t),
            (None, Some(file)) => Some(
                std::fs::read_to_string(file)
                    .with_context(|| format!("reading the token from {}", file.display()))?
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .to_owned(),
            ),
            (None, None) => None,
        };
        if let Some(t) = given {
            let t = auth::check_token(&t).map_err(anyhow::Error::msg)?;
            return Ok(Token {
                hash: Some(auth::sha256(t.as_bytes())),
                fresh: None,
                kept_in: None,
            });
        }
        let file = data_dir.join(TOKEN_FILE);
        if let Ok(text) = std::fs::read_to_string(&file) {
            let hash = text
                .trim()
                .strip_prefix("sha256:")
                .and_then(auth::from_hex)
                .with_context(|| {
                    format!(
                        "{} is not a token hash; remove it to have serve make a new token",
                        file.display()
                    )
                })?;
            return Ok(Token {
                hash: Some(hash),
                fresh: None,
                kept_in: Some(file),
            });
        }
        let token = auth::random_secret(32);
        let hash = auth::sha256(token.as_bytes());
        std::fs::create_dir_all(data_dir)
            .with_context(|| format!("creating {}", data_dir.display()))?;
        auth::write_private(
            &file,
            format!("sha256:{}\n", auth::to_hex(&hash)).as_bytes(),
        )
        .with_context(|| format!("keeping the token's hash in {}", file.display()))?;
        Ok(Token {
            hash: Some(hash),
            fresh: Some(token),
            kept_in: Some(file),
        })
    }

    pub fn limits(&self) -> ServerLimits {
        ServerLimits {
            max_connections: self.max_connections.max(1),
            header_timeout: Duration::from_millis(self.header_timeout_ms.max(100)),
            ..Default::default()
        }
    }

    /// The HTTP front and `fronts` (the MCP endpoints), all behind the Host allow-list, the
    /// token, the cross-site check, the body limit, the stream cap and CORS. `oidc`: single
    /// sign-on, when configured.
    #[allow(clippy::too_many_arguments)]
    pub fn app(
        &self,
        relay: &Relay,
        credentials: Arc<Credentials>,
        fronts: axum::Router,
        allowed_hosts: Vec<String>,
        notify: NotifyFront,
        oidc: Option<Arc<codex_relay_http::sso::Oidc>>,
        stop: tokio_util::sync::CancellationToken,
    ) -> axum::Router {
        // Personal tokens are checked against the relay's store (shared by the cluster).
        credentials.set_people(relay.people());
        let opts = HttpOptions {
            credentials: credentials.clone(),
            vapid_public_key: notify.vapid_public_key,
            notify_channels: notify.channels,
            passkeys: self.passkeys().unwrap_or_default(),
            oidc,
            stop,
        };
        let app = codex_relay_http::router(relay.clone(), opts).merge(fronts);
        codex_relay_http::secure(
            app,
            Security {
                credentials,
                allowed_hosts,
                cors_origins: self.cors_origins.clone(),
                body_limit: self.max_body_bytes,
                trusted_proxies: self.trusted_proxies.clone(),
                streams: StreamLimits {
                    total: self.max_streams.max(1),
                    per_caller: self.max_streams_per_caller.max(1),
                },
            },
        )
    }
}

/// Where browser logins are kept.
pub fn logins_file(data_dir: &Path) -> PathBuf {
    data_dir.join(LOGINS_FILE)
}

/// What the HTTP front shows of notifications: Web Push's public key (when push is on) and the
/// channels a test can be sent on (webhook names, and `push`).
#[derive(Debug, Clone, Default)]
pub struct NotifyFront {
    pub vapid_public_key: Option<String>,
    pub channels: Vec<String>,
}
