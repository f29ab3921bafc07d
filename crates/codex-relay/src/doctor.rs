//! `codex-relay doctor`: the store (can it take writes), the Codex binary, its version and
//! compatibility, a real `app-server` start-up and handshake, and the credentials Codex holds
//! (`account/read`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use codex_relay_codex::app_server::probe_version;
use codex_relay_codex::{AppServer, AppServerConfig, Compatibility};

#[derive(clap::Args)]
pub struct DoctorArgs {
    /// The `codex` executable (default: `codex` on PATH, else the pinned Codex the scripts
    /// install into ~/.cache/codex-relay).
    #[arg(long, env = "CODEX_CLI_PATH")]
    codex: Option<PathBuf>,
    /// CODEX_HOME for the test start (default: Codex's own, usually ~/.codex).
    #[arg(long, env = "CODEX_HOME")]
    codex_home: Option<PathBuf>,
    /// Where codex-relay keeps its SQLite store, as for `serve` (default: $XDG_DATA_HOME/codex-relay,
    /// else ~/.local/share/codex-relay).
    #[arg(long, env = "CODEX_RELAY_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// The store to check, as for `serve`: a SQLite file path or URL, or a postgres:// URL
    /// (default: relay.db in the data directory).
    #[arg(long, env = "CODEX_RELAY_DB")]
    db: Option<String>,
    /// How long app-server may take to answer `initialize`.
    #[arg(long, default_value_t = 10_000)]
    startup_timeout_ms: u64,
    #[command(flatten)]
    auth: crate::auth_args::AuthArgs,
}

/// Bytes as a person reads them.
fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// The store check: prints what it found; false when the store cannot take writes.
async fn check_store(target: &str) -> bool {
    match codex_relay_core::store::probe(target).await {
        Ok(r) => {
            let mut line = format!("{} at {}: takes writes", r.backend, r.location);
            if r.backend == "sqlite" && !r.exists {
                line.push_str(" (the file does not exist yet; the relay creates it)");
            }
            if let Some(free) = r.free_bytes {
                line.push_str(&format!("; {} free", human(free)));
            }
            println!("store:           {line}");
            if let Some(spool) = &r.spool {
                println!(
                    "store spool:     {} file(s), {} of writes in {} (a running relay's, or replayed by the next start)",
                    spool.files,
                    human(spool.bytes),
                    spool.dir.display()
                );
            }
            if let Some(note) = &r.loss_note {
                let events: usize = note.sessions.iter().map(|s| s.count).sum();
                println!(
                    "store loss note: {events} event(s) of {} session(s) were shown but not stored ({}); the next start tells those sessions",
                    note.sessions.len(),
                    note.fault
                );
            }
            let cluster = if r.backend == "postgres" {
                codex_relay_core::cluster::instances_at(target, std::time::Duration::from_secs(3))
                    .await
            } else {
                Vec::new()
            };
            for i in &cluster {
                println!(
                    "cluster:         instance {} ({}, epoch {}): {} session(s), lease {} ({} ms since renewed){}{}",
                    i.id,
                    i.state,
                    i.epoch,
                    i.sessions,
                    if i.lease_left_ms >= 0 {
                        format!("{} ms left", i.lease_left_ms)
                    } else {
                        format!("expired {} ms ago", -i.lease_left_ms)
                    },
                    i.renewed_ms_ago,
                    i.url
                        .as_deref()
                        .map(|u| format!(", at {u}"))
                        .unwrap_or_default(),
                    i.taken_by
                        .as_deref()
                        .map(|t| format!(", taken over by {t}"))
                        .unwrap_or_default(),
                );
            }
            true
        }
        Err(e) => {
            println!("store:           FAILED: {e}");
            false
        }
    }
}

pub async fn run(args: DoctorArgs) -> anyhow::Result<ExitCode> {
    // The store `serve` would open with the same flags and environment.
    let mut builder = codex_relay::ClientBuilder::new();
    if let Some(dir) = &args.data_dir {
        builder = builder.data_dir(dir);
    }
    if let Some(db) = &args.db {
        builder = builder.store(db);
    }
    if !check_store(&builder.store_target()).await {
        return Ok(ExitCode::FAILURE);
    }
    use codex_relay_codex::locate::{self, Found};
    let (binary, how) = match args.codex {
        Some(b) => (b, "named by --codex / CODEX_CLI_PATH"),
        None => match locate::find_default() {
            Some((b, Found::OnPath)) => (b, "`codex` on PATH"),
            Some((b, Found::Pinned)) => (
                b,
                "the pinned Codex the scripts installed; not on PATH, used when no other is named",
            ),
            None => {
                println!("codex binary:    FAILED: {}", locate::install_advice());
                return Ok(ExitCode::FAILURE);
            }
        },
    };
    println!("codex binary:    {} ({how})", binary.display());
    let timeout = Duration::from_millis(args.startup_timeout_ms);
    let version = match probe_version(&binary, timeout).await {
        Ok(v) => v,
        Err(e) => {
            println!("codex version:   FAILED: {e}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let compat = version.compatibility();
    println!("codex version:   {version}");
    println!("compatibility:   {compat:?}: {}", compat.describe(&version));
    if compat == Compatibility::Unsupported {
        return Ok(ExitCode::FAILURE);
    }
    println!(
        "legacy mcp-server: {}",
        if version.has_legacy_mcp_server() {
            "available"
        } else {
            "removed (0.154+)"
        }
    );

    // The credentials the relay would send: checked here, and Codex is logged in with them
    // below so that `auth:` shows what a relay's Codex would hold. Secrets are never printed.
    let mut builder = codex_relay::ClientBuilder::new();
    if let Some(home) = &args.codex_home {
        builder = builder.codex_home(home);
    }
    // With the ChatGPT login of CODEX_HOME this names it and says the relay refreshes it;
    // Codex here reads the same auth.json itself.
    let source = args.auth.apply(builder).auth_source();
    let auth = match (&args.auth.api_key_env, &args.auth.chatgpt_tokens) {
        (Some(name), _) => Some(codex_relay::credentials::api_key_from_env(name)),
        (None, Some(file)) => Some(codex_relay::credentials::chatgpt_tokens_from_file(file)),
        (None, None) => None,
    };
    let auth = match auth.transpose() {
        Ok(auth) => {
            println!("credentials:     {source}");
            auth
        }
        Err(e) => {
            println!("credentials:     FAILED: {}", e.message());
            return Ok(ExitCode::FAILURE);
        }
    };

    let mut config = AppServerConfig::new(&binary);
    config.codex_home = args.codex_home;
    config.startup_timeout = timeout;
    let started = Instant::now();
    match AppServer::start(config.clone()).await {
        Ok(server) => {
            let took = started.elapsed();
            let init = server.initialize_response();
            println!(
                "app-server:      started and initialized in {} ms (pid {})",
                took.as_millis(),
                server.pid()
            );
            println!("user agent:      {}", init.user_agent);
            if let Some(home) = &init.codex_home {
                println!("codex home:      {home}");
            }
            if let Some(auth) = &auth {
                codex_relay_core::auth::serve_unrouted(&server, auth);
                if let Err(e) = codex_relay_core::auth::login(&server, auth).await {
                    println!("login:           FAILED: {e}");
                    server.shutdown(Duration::from_secs(2)).await;
                    return Ok(ExitCode::FAILURE);
                }
                println!("login:           accepted (account/login/start)");
            }
            match codex_relay_core::auth::account_state(&server).await {
                Ok(state) => {
                    println!("auth:            {state}");
                    let advice = auth
                        .is_none()
                        .then(|| codex_relay_core::logged_in::not_logged_in(&state, &config))
                        .flatten();
                    // Said, not failed: the store and Codex are fine, and the fix is named.
                    if let Some(advice) = advice {
                        println!("login needed:    {advice}");
                    }
                }
                Err(e) => println!("auth:            unknown (account/read failed: {e})"),
            }
            server.shutdown(Duration::from_secs(2)).await;
            // Said, not failed: attaching is optional.
            if let Some(socket) = crate::attach::socket(None, config.codex_home.as_deref()) {
                println!(
                    "codex daemon:    {}",
                    crate::attach::describe(&socket).await
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            println!("app-server:      FAILED: {e}");
            Ok(ExitCode::FAILURE)
        }
    }
}
