//! `codex-relay mcp` (MCP over stdio) and `codex-relay serve` (MCP over streamable HTTP at
//! `/mcp`): both run the engine until the client goes away or a signal arrives, then stop
//! Codex (its whole process group) and flush the store.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use codex_relay_http::auth::Credentials;
use tokio_util::sync::CancellationToken;

use crate::engine::{EngineArgs, shutdown_signal};

/// How long open HTTP connections may take to close after SIGTERM/SIGINT.
const DRAIN: std::time::Duration = std::time::Duration::from_secs(5);

#[derive(clap::Args)]
pub struct McpArgs {
    #[command(flatten)]
    engine: EngineArgs,
    /// Run against a built-in scripted model (no OpenAI account): its Codex home, workspace
    /// and store are kept in `demo/` in the data directory.
    #[arg(long)]
    demo: bool,
}

#[derive(clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    engine: EngineArgs,
    /// Address to listen on. Loopback by default: anyone who can reach it can run commands
    /// through Codex.
    #[arg(long, env = "CODEX_RELAY_LISTEN", default_value = "127.0.0.1:7878")]
    listen: SocketAddr,
    /// Extra `Host` header values to accept (loopback names always are), e.g. when serving
    /// behind a proxy.
    #[arg(long = "allow-host")]
    allow_hosts: Vec<String>,
    #[command(flatten)]
    http: crate::http_front::HttpArgs,
    #[command(flatten)]
    sso: crate::sso_args::SsoArgs,
    /// Run against a built-in scripted model: a whole session (plan, file diff, command
    /// approval, question) with no OpenAI account. Its Codex home, workspace, store, token and
    /// logins are kept in `demo/` in the data directory across restarts.
    #[arg(long)]
    demo: bool,
    /// With /mcp-server (the legacy contract): also offer the six codex_* tools there.
    #[arg(long)]
    with_session_tools: bool,
    /// Notifications (TOML; docs/NOTIFY.md): webhooks (Standard Webhooks, ntfy, Slack), the
    /// public URL of links, answer links, Web Push. Without it, Web Push alone is on.
    #[arg(long, env = "CODEX_RELAY_NOTIFY", value_name = "FILE")]
    notify: Option<std::path::PathBuf>,
    /// Attach to the Codex daemon the terminal uses (docs/ATTACH.md): its threads appear here
    /// marked attached, and their approvals go through this relay (rules, notifications, the
    /// UI). SOCKET defaults to $CODEX_HOME/app-server-control/app-server-control.sock. The
    /// socket must be this user's, in a directory only this user can enter.
    #[arg(long, value_name = "SOCKET", num_args = 0..=1, default_missing_value = "")]
    attach: Option<std::path::PathBuf>,
}

/// The notify file's settings, or the defaults (Web Push only).
fn notify_config(
    file: Option<&std::path::Path>,
) -> anyhow::Result<codex_relay_notify::NotifyConfig> {
    let Some(file) = file else {
        return Ok(Default::default());
    };
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("reading the notify file {}", file.display()))?;
    Ok(codex_relay_notify::NotifyConfig::parse(
        &file.display().to_string(),
        &text,
    )?)
}

pub async fn mcp(args: McpArgs) -> anyhow::Result<ExitCode> {
    let (relay, demo) = if args.demo {
        let (relay, demo) = crate::demo::open(&args.engine, crate::demo::Questions::Asked).await?;
        say(&demo.describe());
        (relay, Some(demo))
    } else {
        (args.engine.open().await?, None)
    };
    // Said now, not after the client's first call: the log is where a person looks.
    warn_if_not_logged_in(&relay, demo.is_some());
    let result = tokio::select! {
        r = codex_relay_mcp::serve_stdio(relay.clone()) => r.map_err(anyhow::Error::from),
        _ = shutdown_signal() => Ok(()),
    };
    relay.shutdown().await;
    drop(demo);
    result.map(|()| ExitCode::SUCCESS)
}

/// Starts a Codex in the background and says on stderr when it is not logged in (sessions
/// would fail, each with the same message); a demo needs no login.
fn warn_if_not_logged_in(relay: &codex_relay_core::Relay, demo: bool) {
    if demo {
        return;
    }
    let relay = relay.clone();
    tokio::spawn(async move {
        if let Err(e @ codex_relay_core::RelayError::NotLoggedIn(_)) = relay.check_login().await {
            say(&format!("codex-relay: {e}"));
        }
    });
}

pub async fn serve(mut args: ServeArgs) -> anyhow::Result<ExitCode> {
    args.http.check(args.listen)?;
    let notify = notify_config(args.notify.as_deref())?;
    args.engine.notify_retention = notify.retention();
    args.engine.policy.apply_serve_defaults(args.listen);
    let (relay, demo) = if args.demo {
        let (relay, demo) = crate::demo::open(&args.engine, crate::demo::Questions::Asked).await?;
        say(&demo.describe());
        (relay, Some(demo))
    } else {
        (args.engine.open().await?, None)
    };
    // The token and browser logins live in the data directory (the demo's own, unless it is
    // kept in --data-dir).
    let data_dir = match &demo {
        Some(d) => d.dir().to_path_buf(),
        None => args.engine.builder().data_dir_target(),
    };
    let token = args.http.token(&data_dir)?;
    let credentials = Arc::new(Credentials::new(
        token.hash,
        token
            .hash
            .is_some()
            .then(|| crate::http_front::logins_file(&data_dir)),
    ));
    let listener = match tokio::net::TcpListener::bind(args.listen).await {
        Ok(l) => l,
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => anyhow::bail!(
            "listening on {}: {e}: another process listens there (a codex-relay still running?); stop it, or choose another address with --listen",
            args.listen
        ),
        Err(e) => return Err(e).with_context(|| format!("listening on {}", args.listen)),
    };
    let addr = listener.local_addr()?;
    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1", "[::1]"]
        .iter()
        .map(|h| h.to_string())
        .collect();
    hosts.push(addr.to_string());
    hosts.extend(args.allow_hosts);
    let stop = CancellationToken::new();
    let mcp = codex_relay_mcp::http_service(relay.clone(), hosts.clone(), stop.child_token());
    let legacy = crate::legacy::http(
        relay.clone(),
        args.with_session_tools,
        hosts.clone(),
        stop.child_token(),
    );
    let fronts = axum::Router::new().nest_service("/mcp", mcp).nest_service(
        "/mcp-server",
        tower_layer_apply(
            axum::middleware::from_fn(crate::legacy::narrow_answers),
            legacy,
        ),
    );
    // Web Push's key is made once and kept beside the token's hash.
    let vapid = if notify.push {
        let subject = notify
            .vapid_subject
            .clone()
            .unwrap_or_else(|| "mailto:codex-relay@localhost".into());
        Some(codex_relay_notify::Vapid::load_or_create(
            &data_dir.join("vapid-key"),
            subject,
        )?)
    } else {
        None
    };
    let vapid_key = vapid.as_ref().map(|v| v.public_key());
    // The channels the UI offers a test for: the webhooks, and push when it is on.
    let mut channels: Vec<String> = notify.webhooks.iter().map(|w| w.name.clone()).collect();
    if vapid.is_some() {
        channels.push("push".into());
    }
    // Links in notifications point where this instance is reached: its advertised URL in a
    // cluster, else where it listens (the notify config's `public_url` wins over both).
    let link_base = args
        .engine
        .cluster
        .advertise_url
        .clone()
        .unwrap_or_else(|| format!("http://{addr}"));
    // Single sign-on's callback is under the relay's public URL: --public-url, else the
    // notify file's, else the link base.
    let oidc = args.sso.oidc(
        args.http
            .public_url
            .as_deref()
            .or(notify.public_url.as_deref())
            .unwrap_or(&link_base),
    )?;
    if oidc.is_some() && token.hash.is_none() {
        anyhow::bail!(
            "single sign-on (--oidc-issuer) and --no-auth contradict each other: without a token everyone is the admin, so there is nobody to sign in"
        );
    }
    if let Some(o) = &oidc {
        say(&format!(
            "codex-relay: single sign-on through {} (its redirect URI: {})",
            o.issuer(),
            o.redirect_url()
        ));
    }
    let notifier = codex_relay_notify::Notifier::start(relay.clone(), notify, &link_base, vapid)?;
    let app = args.http.app(
        &relay,
        credentials.clone(),
        fronts,
        hosts,
        crate::http_front::NotifyFront {
            vapid_public_key: vapid_key,
            channels,
        },
        oidc,
        stop.clone(),
    );
    say(&banner(addr, &token, &credentials));
    // The daemon the terminal uses: attached when asked, else offered when one runs.
    let daemon_socket =
        crate::attach::socket(args.attach.as_deref(), args.engine.codex_home.as_deref());
    let attachment = match (&args.attach, daemon_socket) {
        (Some(_), Some(socket)) => {
            say(&format!(
                "codex-relay: attaching to the Codex daemon at {} (its threads appear marked attached; retried while it is away)",
                socket.display()
            ));
            Some(relay.attach(socket))
        }
        (Some(_), None) => anyhow::bail!(
            "--attach: no Codex home to find the daemon's socket in (set CODEX_HOME or name the socket)"
        ),
        (None, Some(socket)) if socket.exists() && demo.is_none() => {
            say(&format!(
                "codex-relay: a Codex daemon's socket is at {}; `serve --attach` shows its threads here",
                socket.display()
            ));
            None
        }
        (None, _) => None,
    };
    warn_if_not_logged_in(&relay, demo.is_some());
    let graceful = stop.clone();
    let server = codex_relay_http::server::serve(
        listener,
        app,
        args.http.limits(),
        Some(Arc::new(OwnTrees)),
        async move {
            shutdown_signal().await;
            graceful.cancel();
        },
    );
    // Cancelling ends the MCP sessions and their streams; a connection that still hangs on
    // does not keep Codex alive for long.
    let result = tokio::select! {
        r = server => r.context("serving HTTP"),
        _ = async { stop.cancelled().await; tokio::time::sleep(DRAIN).await } => {
            tracing::warn!("connections still open {DRAIN:?} after the signal; stopping anyway");
            Ok(())
        }
    };
    drop(notifier);
    if let Some(a) = attachment {
        a.stop().await;
    }
    relay.shutdown().await;
    drop(demo);
    result.map(|()| ExitCode::SUCCESS)
}

/// What `serve` prints when it listens: where everything is, a one-time login link for the
/// UI, the token when it was made now (shown this once), and how MCP clients send it.
fn banner(addr: SocketAddr, token: &crate::http_front::Token, creds: &Credentials) -> String {
    let mut out = format!(
        "codex-relay: web UI and API at http://{addr}/ ; MCP at http://{addr}/mcp\n\
         codex-relay: legacy mcp-server at http://{addr}/mcp-server"
    );
    if token.hash.is_none() {
        out.push_str(
            "\ncodex-relay: WARNING: --no-auth: every local user and every browser tab can drive Codex through this relay",
        );
        return out;
    }
    let once = creds.new_once();
    out.push_str(&format!(
        "\ncodex-relay: open the UI (a one-time login link): http://{addr}/login?once={once}"
    ));
    match (&token.fresh, &token.kept_in) {
        (Some(t), Some(file)) => out.push_str(&format!(
            "\ncodex-relay: API token (shown only now; {} keeps only its hash): {t}",
            file.display()
        )),
        (None, Some(file)) => out.push_str(&format!(
            "\ncodex-relay: API token: the one printed when {} was made (delete that file and restart for a new one)",
            file.display()
        )),
        _ => out.push_str("\ncodex-relay: API token: the one in CODEX_RELAY_TOKEN / --token-file"),
    }
    out.push_str(&format!(
        "\ncodex-relay: MCP over HTTP: {{\"url\": \"http://{addr}/mcp\", \"headers\": {{\"Authorization\": \"Bearer <token>\"}}}}"
    ));
    out
}

/// Refuses connections from the processes of every relay's Codex trees on this machine (this
/// relay's and the others'): everything a Codex a relay started runs, at any depth (Codex,
/// and the relay after it, keep the orphans of what they run), so a model-run command can
/// neither drive a relay nor answer its own approval, whatever it has read. A connection
/// passes only when its client is on another machine, another user's, or held by processes
/// found outside all of them; one that cannot be checked is refused.
struct OwnTrees;

impl codex_relay_http::server::PeerCheck for OwnTrees {
    fn check(&self, conns: &[(SocketAddr, SocketAddr)]) -> Vec<Result<(), String>> {
        use codex_relay_codex::platform::peers::{PeerOwner, owners};
        owners(conns)
            .into_iter()
            .map(|owner| match owner {
                PeerOwner::Remote | PeerOwner::OtherUser { .. } | PeerOwner::Outside { .. } => {
                    Ok(())
                }
                PeerOwner::Inside { pid, command, why } => Err(format!(
                    "the client is process {pid} ({command}), started by Codex: {why}"
                )),
                PeerOwner::Unchecked(why) => Err(format!(
                    "the client's process cannot be checked, so it counts as started by Codex: {why}"
                )),
            })
            .collect()
    }
}

/// Writes `text` and a newline to stderr in one call, ignoring failure: a server whose stderr
/// was closed (`serve 2>&1 | head -1`, a supervisor that stopped reading) goes on serving,
/// where `eprintln!` would panic on the broken pipe.
pub(crate) fn say(text: &str) {
    use std::io::Write;
    let _ = std::io::stderr()
        .lock()
        .write_all(format!("{text}\n").as_bytes());
}

/// Wraps `service` in `layer`.
fn tower_layer_apply<L: tower_layer::Layer<S>, S>(layer: L, service: S) -> L::Service {
    layer.layer(service)
}
