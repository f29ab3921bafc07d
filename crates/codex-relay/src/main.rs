//! The `codex-relay` command line.

mod ask;
mod attach;
mod auth_args;
mod cli_run;
mod cli_workspace;
mod cluster_args;
mod demo;
mod demo_model;
mod doctor;
mod engine;
mod http_front;
mod legacy;
mod limits_args;
mod policy_args;
mod progress;
mod serve;
mod sso_args;

use clap::{Parser, Subcommand};

/// mimalloc: the event pipeline allocates a lot of small strings; glibc's malloc cost about a
/// fifth of its throughput in `cargo bench -p codex-relay-bench` (same allocator there). Built
/// with `no_thp`: mimalloc otherwise asks the kernel for transparent huge pages (which it
/// grants even in its default `madvise` mode), so the relay's heap grew in 2 MiB pages, each
/// cleared whole on first touch: over 100 concurrent turns 20 MiB of them, and a sixth of the
/// relay's profiled CPU in those clears. Without them the same turns fault in 4 KiB pages.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Set by the npm launcher (npm/codex-relay/bin/codex-relay.js) to its own pid.
const LAUNCHER_PID: &str = "CODEX_RELAY_LAUNCHER_PID";

#[derive(Parser)]
#[command(
    name = "codex-relay",
    version,
    about = "A control plane for OpenAI Codex sessions"
)]
struct Cli {
    /// Log filter (also LOG_LEVEL), e.g. `info` or `codex_relay=debug`. Logs go to stderr.
    #[arg(long, env = "LOG_LEVEL", default_value = "warn", global = true)]
    log_level: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show which Codex would be used, whether it is compatible, and whether `app-server` starts.
    Doctor(doctor::DoctorArgs),
    /// Serve MCP over stdio: Codex as six tools for Claude, Cursor, Codex itself, ...
    Mcp(serve::McpArgs),
    /// Serve the web UI, the HTTP API (/api, Server-Sent Events) and MCP at /mcp (loopback by
    /// default).
    Serve(Box<serve::ServeArgs>),
    /// Serve the legacy `codex mcp-server` contract over stdio (`codex` and `codex-reply`).
    McpServer(legacy::LegacyArgs),
    /// Run one prompt as one turn and print the final message (or the parsed JSON); the
    /// session stays in the store (`--resume ID` continues it).
    #[command(after_help = cli_run::EXIT_CODES)]
    Run(Box<cli_run::RunArgs>),
}

fn main() -> std::process::ExitCode {
    // Before any thread exists: take the token, then make this process's memory and
    // environment unreadable to the processes of the same user (the commands Codex runs among
    // them), and overwrite the token where /proc/<pid>/environ would still show it.
    http_front::take_env_token();
    sso_args::take_env_secret();
    // Started by the npm launcher (which names itself): go when it goes, even by SIGKILL.
    if let Some(pid) = std::env::var(LAUNCHER_PID)
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
    {
        codex_relay_codex::platform::process::stop_with_parent(pid);
    }
    // SAFETY: no other thread exists yet.
    unsafe { std::env::remove_var(LAUNCHER_PID) };
    codex_relay_codex::platform::process::harden_self(&[
        http_front::TOKEN_VAR,
        sso_args::SECRET_VAR,
    ]);
    // A descriptor per connection (up to --max-connections), plus Codex's pipes and the store.
    codex_relay_codex::platform::process::raise_fd_limit(65_536);
    // What a Codex process leaves when it dies (a command may kill it to leave its tree) comes
    // to the relay, not to init: still inside, for the peer check; stopped and reaped here.
    if let Err(e) = codex_relay_codex::platform::reaper::adopt_orphans() {
        serve::say(&format!(
            "codex-relay: warning: cannot keep what a dead Codex leaves in the relay's tree: {e}"
        ));
    }
    // The other relays on this machine learn that this process is one (everything below it is
    // Codex's), so they refuse its sessions too.
    codex_relay_codex::platform::relays::announce();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            serve::say(&format!("error: starting the runtime: {e}"));
            return std::process::ExitCode::from(cli_run::EXIT_LOCAL);
        }
    };
    let code = runtime.block_on(run(cli));
    // What may still run on the blocking pool is a read that only input or EOF ends: stdin
    // when it is not a pipe (`mcp` on a terminal, or with stdout to a file) or `run --approve
    // ask`'s question on /dev/tty. Dropping the runtime would wait for it, so after SIGINT or
    // SIGTERM the process lived on until the next keystroke. Everything else is done by now
    // (the engine shut down and the store flushed inside `run`).
    runtime.shutdown_background();
    codex_relay_codex::platform::reaper::stop_adopted();
    code
}

async fn run(cli: Cli) -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_new(&cli.log_level)
                .unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        // Colour on a terminal only: files and pipes (where MCP clients keep server logs) get
        // plain text. NO_COLOR turns it off on a terminal too.
        .with_ansi(
            std::io::IsTerminal::is_terminal(&std::io::stderr())
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        )
        // A log line that cannot be written (stderr's reader went away) is dropped: reporting
        // it would `eprintln!` to the same broken pipe, which panics the task that logged.
        .log_internal_errors(false)
        .init();
    let result = match cli.command {
        Command::Doctor(args) => doctor::run(args).await,
        Command::Mcp(args) => serve::mcp(args).await,
        Command::Serve(args) => serve::serve(*args).await,
        Command::McpServer(args) => legacy::mcp_server(args).await,
        Command::Run(args) => cli_run::run(*args).await,
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            serve::say(&format!("error: {e:#}"));
            std::process::ExitCode::from(cli_run::EXIT_LOCAL)
        }
    }
}
