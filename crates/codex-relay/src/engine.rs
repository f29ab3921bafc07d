//! The engine settings every serving subcommand shares (flags and the reference's environment
//! variables), and opening the relay with them.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use codex_relay_core::{Relay, RelayConfig};

#[derive(clap::Args, Debug, Clone)]
pub struct EngineArgs {
    /// The `codex` executable (default: `codex` on PATH, else the pinned Codex the scripts
    /// install into ~/.cache/codex-relay).
    #[arg(long, env = "CODEX_CLI_PATH")]
    pub codex: Option<PathBuf>,
    /// CODEX_HOME for Codex (default: Codex's own, usually ~/.codex).
    #[arg(long, env = "CODEX_HOME")]
    pub codex_home: Option<PathBuf>,
    /// Where codex-relay keeps its SQLite store (default: $XDG_DATA_HOME/codex-relay, else
    /// ~/.local/share/codex-relay).
    #[arg(long, env = "CODEX_RELAY_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// The store: a SQLite file path or URL, or a postgres:// URL (default: relay.db in the data
    /// directory).
    #[arg(long, env = "CODEX_RELAY_DB")]
    pub db: Option<String>,
    /// How long an approval or question waits for an answer before it is declined.
    #[arg(long, env = "APPROVAL_TIMEOUT_MS", default_value_t = codex_relay_core::config::DEFAULT_APPROVAL_TIMEOUT_MS)]
    pub approval_timeout_ms: u64,
    /// Sessions open at once.
    #[arg(long, env = "MAX_SESSIONS", default_value_t = codex_relay_core::config::DEFAULT_MAX_SESSIONS)]
    pub max_sessions: usize,
    /// Events per session kept in memory (older ones are read from the store).
    #[arg(long, env = "EVENT_BUFFER_SIZE", default_value_t = codex_relay_core::config::DEFAULT_EVENT_BUFFER)]
    pub event_buffer: usize,
    /// Crashes (or failed starts) of Codex within the crash window after which codex-relay
    /// stops restarting it and calls fail with a `codex_crash_loop` error.
    #[arg(long, env = "CODEX_CRASH_LIMIT", default_value_t = 5)]
    pub codex_crash_limit: u32,
    /// The crash window, in milliseconds.
    #[arg(long, env = "CODEX_CRASH_WINDOW_MS", default_value_t = 60_000)]
    pub codex_crash_window_ms: u64,
    /// Sessions per `codex app-server` process: more sessions start more processes, so a
    /// crash touches at most this many; 0 shares one process among all sessions.
    #[arg(long, env = "SESSIONS_PER_CODEX", default_value_t = codex_relay_core::relay::DEFAULT_SESSIONS_PER_CODEX)]
    pub sessions_per_codex: usize,
    /// Approval rules (TOML, `[[rule]]` tables; docs/RULES.md), read at every start: they
    /// replace the rules an earlier file gave; rules made in the UI or over the API stay.
    #[arg(long, env = "CODEX_RELAY_RULES", value_name = "FILE")]
    pub rules: Option<PathBuf>,
    /// How long the store keeps events, resolved approvals, sent notifications and closed
    /// sessions: an age like `30d`, `12h` or `90m`, or `off` (the default: everything, for
    /// good). Pruned in the background (docs/STORE.md, "Retention").
    #[arg(long, value_name = "AGE", env = "CODEX_RELAY_RETENTION", value_parser = parse_age)]
    pub retention: Option<Duration>,
    /// Past this size (e.g. `20GiB`, `500MB`) the oldest events go first until the store is at
    /// 90 % of it; `off` (the default) sets no limit.
    #[arg(long, value_name = "SIZE", env = "CODEX_RELAY_RETENTION_SIZE", value_parser = parse_size)]
    pub retention_size: Option<u64>,
    /// How long the audit log keeps an entry: an age like `400d`, or `off` (the default: for
    /// good). Only this applies to the audit log: `--retention` and `--retention-size` never
    /// delete it (docs/SECURITY.md, "People and roles").
    #[arg(long, value_name = "AGE", env = "CODEX_RELAY_AUDIT_RETENTION", value_parser = parse_age)]
    pub audit_retention: Option<Duration>,
    /// How long done notifications and their delivery trails are kept: `serve` sets it from
    /// the notify file's `retention` (docs/NOTIFY.md).
    #[arg(skip)]
    pub notify_retention: Option<Duration>,
    /// Resident memory of one `codex app-server` (with what runs in its process group) past
    /// which it takes no new session and is replaced by a fresh process once its sessions are
    /// idle, e.g. `2GiB`; `off` (the default) sets no limit (docs/OPERATIONS.md).
    #[arg(long, value_name = "SIZE", env = "CODEX_RELAY_CODEX_MAX_RSS", value_parser = parse_size)]
    pub codex_max_rss: Option<u64>,
    /// "Far over" the memory limit: past this, a turn running on the process is reported, and
    /// interrupted with `--codex-over-limit interrupt` (default: twice `--codex-max-rss`).
    #[arg(long, value_name = "SIZE", env = "CODEX_RELAY_CODEX_HARD_RSS", value_parser = parse_size)]
    pub codex_hard_rss: Option<u64>,
    /// What to do when a process is far over its memory limit during a turn: `wait` for the
    /// turn to end (the default) or `interrupt` it.
    #[arg(
        long,
        value_name = "WAIT|INTERRUPT",
        env = "CODEX_RELAY_CODEX_OVER_LIMIT",
        default_value = "wait"
    )]
    pub codex_over_limit: codex_relay_core::OverLimit,
    /// Turns one `codex app-server` runs before it is replaced by a fresh one (0: no limit).
    #[arg(long, value_name = "N", env = "CODEX_RELAY_CODEX_MAX_TURNS")]
    pub codex_max_turns: Option<u64>,
    /// How long one `codex app-server` serves before it is replaced by a fresh one once idle:
    /// an age like `12h`, or `off` (the default).
    #[arg(long, value_name = "AGE", env = "CODEX_RELAY_CODEX_MAX_AGE", value_parser = parse_age)]
    pub codex_max_age: Option<Duration>,
    #[command(flatten)]
    pub auth: crate::auth_args::AuthArgs,
    #[command(flatten)]
    pub policy: crate::policy_args::PolicyArgs,
    #[command(flatten)]
    pub cluster: crate::cluster_args::ClusterArgs,
    #[command(flatten)]
    pub limits: crate::limits_args::LimitsArgs,
    /// Where the relay makes sessions' git worktrees (a directory it owns, made 0700).
    /// Default: `worktrees` in the data directory.
    #[arg(long, value_name = "DIR", env = "CODEX_RELAY_WORKTREE_DIR")]
    pub worktree_dir: Option<std::path::PathBuf>,
}

impl EngineArgs {
    /// The library's builder with these settings: the binary and the library open the engine
    /// the same way.
    pub fn builder(&self) -> codex_relay::ClientBuilder {
        let mut b = codex_relay::ClientBuilder::new()
            .approval_timeout(Duration::from_millis(self.approval_timeout_ms))
            .max_sessions(self.max_sessions)
            .event_buffer(self.event_buffer);
        if let Some(codex) = &self.codex {
            b = b.codex_binary(codex);
        }
        if let Some(home) = &self.codex_home {
            b = b.codex_home(home);
        }
        if let Some(dir) = &self.data_dir {
            b = b.data_dir(dir);
        }
        if let Some(db) = &self.db {
            b = b.store(db);
        }
        b = b.retention(codex_relay::Retention {
            max_age: self.retention.filter(|d| !d.is_zero()),
            max_bytes: self.retention_size.filter(|n| *n > 0),
            notifications_max_age: self.notify_retention.filter(|d| !d.is_zero()),
            audit_max_age: self.audit_retention.filter(|d| !d.is_zero()),
            ..Default::default()
        });
        self.auth.apply(b)
    }

    pub fn relay_config(&self) -> anyhow::Result<RelayConfig> {
        if let Some(db) = &self.db {
            refuse_password_on_command_line(db)?;
        }
        let mut config = self.builder().relay_config()?;
        config.crash_policy.max_crashes = self.codex_crash_limit.max(1);
        config.crash_policy.window = Duration::from_millis(self.codex_crash_window_ms);
        config.sessions_per_codex = self.sessions_per_codex;
        config.recycle = codex_relay_core::RecyclePolicy {
            max_rss: self.codex_max_rss.filter(|n| *n > 0),
            hard_rss: self.codex_hard_rss.filter(|n| *n > 0),
            max_turns: self.codex_max_turns.filter(|n| *n > 0),
            max_age: self.codex_max_age.filter(|d| !d.is_zero()),
            over_hard: self.codex_over_limit,
            ..Default::default()
        };
        config.policy = self.policy.policy()?;
        self.limits.apply(&mut config);
        if let Some(dir) = &self.worktree_dir {
            config.worktree_dir = Some(dir.clone());
        }
        if let Some(file) = &self.rules {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("reading the rules file {}", file.display()))?;
            let rules = codex_relay_core::rules::parse_toml(&file.display().to_string(), &text)?;
            tracing::info!(file = %file.display(), rules = rules.len(), "rules file read");
            config.rules_file = Some(rules);
        }
        if config.store.starts_with("postgres") {
            config.cluster = self.cluster.config(&self.builder().data_dir_target())?;
        }
        Ok(config)
    }

    pub async fn open(&self) -> anyhow::Result<Relay> {
        let config = self.relay_config()?;
        let auth = self.builder().auth_source();
        // The settings in effect, for operators (and the knob tests); a Postgres URL may hold a
        // password, so only its scheme is shown.
        let store = if config.store.starts_with("postgres") {
            "postgres://…"
        } else {
            config.store.as_str()
        };
        tracing::info!(
            codex = %config.codex.binary.display(),
            codex_home = ?config.codex.codex_home,
            store = %store,
            approval_timeout_ms = config.approval_timeout.as_millis() as u64,
            max_sessions = config.max_sessions,
            event_buffer = config.event_buffer,
            sessions_per_codex = config.sessions_per_codex,
            codex_max_rss = ?config.recycle.max_rss,
            codex_max_turns = ?config.recycle.max_turns,
            codex_max_age = ?config.recycle.max_age,
            codex_over_limit = ?config.recycle.over_hard,
            retention = ?config.store_options.retention.max_age,
            retention_bytes = ?config.store_options.retention.max_bytes,
            credentials = %auth,
            start_policy = %crate::policy_args::PolicyArgs::describe(&config.policy),
            instance = config.cluster.instance_id.as_deref().unwrap_or("(random)"),
            turn_limits = ?config.turn_limits,
            session_budget = ?config.budget,
            "engine settings"
        );
        Relay::open(config)
            .await
            .context("opening the codex-relay engine")
    }
}

/// An age, `off` as zero (clap keeps `Option<Option<_>>` for flags with optional values).
fn parse_age(text: &str) -> Result<Duration, String> {
    codex_relay::Retention::parse_age(text).map(Option::unwrap_or_default)
}

/// A size, `off` as zero.
fn parse_size(text: &str) -> Result<u64, String> {
    codex_relay::Retention::parse_size(text).map(Option::unwrap_or_default)
}

/// A Postgres password given with `--db` is refused, as `--token` is: a command line is
/// readable by every process of the machine (`/proc/<pid>/cmdline`), the commands Codex runs
/// included, and with the database a command could write an answer to its own approval.
/// `CODEX_RELAY_DB` carries it instead (Codex never gets the relay's `CODEX_RELAY_*`
/// variables, and the relay's environment is out of other processes' reach).
fn refuse_password_on_command_line(db: &str) -> anyhow::Result<()> {
    let from_env = std::env::var("CODEX_RELAY_DB").is_ok_and(|v| v == db);
    if !from_env && postgres_password(db) {
        anyhow::bail!(
            "--db with a password is not accepted: a command line is readable by every process on this machine (/proc/<pid>/cmdline), the commands Codex runs included. Put the URL in CODEX_RELAY_DB instead"
        );
    }
    Ok(())
}

/// Whether a postgres:// URL carries a password (in its user info or as `password=`).
fn postgres_password(url: &str) -> bool {
    let Some(rest) = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"))
    else {
        return false;
    };
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    let in_user_info = authority
        .rsplit_once('@')
        .and_then(|(user_info, _)| user_info.split_once(':'))
        .is_some_and(|(_, password)| !password.is_empty());
    let in_query = rest
        .split_once('?')
        .is_some_and(|(_, query)| query.split('&').any(|kv| kv.starts_with("password=")));
    in_user_info || in_query
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("cannot listen for SIGTERM: {e}");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_password_in_a_postgres_url_is_found_wherever_it_is() {
        for (url, has) in [
            ("postgres://relay:s3cret@db:5432/relay", true),
            ("postgresql://relay:p%40ss@db/relay?sslmode=require", true),
            ("postgres://relay@db/relay?sslmode=require&password=x", true),
            ("postgres://relay@db:5432/relay", false),
            ("postgres://db/relay?user=relay", false),
            ("postgres://relay:@db/relay", false),
            ("/var/lib/relay/relay.db", false),
            ("sqlite://relay:x@relay.db", false),
        ] {
            assert_eq!(super::postgres_password(url), has, "{url}");
        }
    }
}
