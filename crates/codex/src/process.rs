//! The Codex child process: spawned in its own process group, stderr kept as a bounded tail,
//! exit observed and reaped, the whole group killed on shutdown and on drop.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::watch;

use crate::error::{ExitInfo, PeerError, StartError};
use crate::platform::{self, tree};

/// The last lines Codex wrote to stderr, bounded in lines and bytes.
#[derive(Clone, Default)]
pub struct StderrTail {
    inner: Arc<Mutex<TailBuf>>,
}

#[derive(Default)]
struct TailBuf {
    lines: VecDeque<String>,
    bytes: usize,
    max_lines: usize,
    max_bytes: usize,
}

impl StderrTail {
    pub fn new(max_lines: usize, max_bytes: usize) -> Self {
        let buf = TailBuf {
            max_lines: max_lines.max(1),
            max_bytes: max_bytes.max(64),
            ..Default::default()
        };
        Self {
            inner: Arc::new(Mutex::new(buf)),
        }
    }

    pub fn push(&self, line: &str) {
        let mut b = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut line = line.to_owned();
        if line.len() > b.max_bytes {
            let mut cut = b.max_bytes;
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            line.truncate(cut);
        }
        b.bytes += line.len();
        b.lines.push_back(line);
        while b.lines.len() > b.max_lines || b.bytes > b.max_bytes {
            if let Some(old) = b.lines.pop_front() {
                b.bytes -= old.len();
            }
        }
    }

    /// The kept lines joined by newlines.
    pub fn text(&self) -> String {
        let b = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        b.lines
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    pub binary: PathBuf,
    pub args: Vec<OsString>,
    pub codex_home: Option<PathBuf>,
    pub cwd: Option<PathBuf>,
    /// Extra environment; `None` removes the variable.
    pub env: Vec<(OsString, Option<OsString>)>,
    pub stderr_tail_lines: usize,
    pub stderr_tail_bytes: usize,
}

/// The module Codex logs every rollout file it scans under; muted so stderr stays useful.
const MUTED_LOG_TARGETS: &str = "codex_core::rollout::list=off";

/// `RUST_LOG` for the child: the user's filter with the noisy target muted.
pub fn child_rust_log(user: Option<&str>) -> String {
    match user.map(str::trim).filter(|s| !s.is_empty()) {
        Some(u) => format!("{u},{MUTED_LOG_TARGETS}"),
        None => format!("warn,{MUTED_LOG_TARGETS}"),
    }
}

/// A running Codex process that owns its process group.
pub struct CodexProcess {
    pid: u32,
    /// Carried by every process of this Codex's tree ([`crate::tree`]).
    marker: String,
    /// Cleans the tree up if the relay dies without doing it.
    _watchdog: std::sync::Arc<tree::Watchdog>,
    exit: watch::Receiver<Option<ExitInfo>>,
    stderr: StderrTail,
}

/// The stdio handles of a freshly spawned process.
pub struct Stdio2 {
    pub stdin: ChildStdin,
    pub stdout: ChildStdout,
}

impl CodexProcess {
    /// Starts the process as the leader of a new process group.
    pub fn spawn(spec: &SpawnSpec) -> Result<(Self, Stdio2), StartError> {
        let mut cmd = Command::new(&spec.binary);
        cmd.args(&spec.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        platform::process::configure_child(&mut cmd);
        // The relay's own variables (its token among them) never reach Codex, nor the commands
        // the model runs, which inherit Codex's environment.
        for (name, _) in std::env::vars_os() {
            if platform::process::is_relay_variable(&name) {
                cmd.env_remove(name);
            }
        }
        if let Some(home) = &spec.codex_home {
            cmd.env("CODEX_HOME", home);
        }
        let marker = tree::new_marker();
        cmd.env(tree::MARKER_VAR, &marker);
        if let Some(cwd) = &spec.cwd {
            cmd.current_dir(cwd);
        }
        cmd.env(
            "RUST_LOG",
            child_rust_log(std::env::var("RUST_LOG").ok().as_deref()),
        );
        for (k, v) in &spec.env {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        let mut child =
            platform::reaper::spawn_owned(|| cmd.spawn(), |c| c.id()).map_err(|source| {
                StartError::Spawn {
                    binary: spec.binary.display().to_string(),
                    source,
                }
            })?;
        let pid = child.id().unwrap_or(0);
        let stdin = child.stdin.take().expect("stdin is piped");
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr = StderrTail::new(spec.stderr_tail_lines, spec.stderr_tail_bytes);
        if let Some(err) = child.stderr.take() {
            let tail = stderr.clone();
            tokio::spawn(async move {
                let mut lines = BufReader::new(err).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    tracing::trace!(target: "codex_relay::codex_stderr", "{line}");
                    tail.push(&line);
                }
            });
        }
        let (tx, exit) = watch::channel(None);
        let watchdog = std::sync::Arc::new(tree::Watchdog::start(&marker));
        tokio::spawn(reap(child, pid, marker.clone(), watchdog.clone(), tx));
        Ok((
            Self {
                pid,
                marker,
                _watchdog: watchdog,
                exit,
                stderr,
            },
            Stdio2 { stdin, stdout },
        ))
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The process group id (the same as the pid: the child leads its group).
    pub fn pgid(&self) -> u32 {
        self.pid
    }

    pub fn stderr_tail(&self) -> &StderrTail {
        &self.stderr
    }

    /// How the process ended, if it has.
    pub fn exit_info(&self) -> Option<ExitInfo> {
        *self.exit.borrow()
    }

    /// Resolves once the process has exited (and been reaped).
    pub async fn exited(&self) -> ExitInfo {
        wait_exit(self.exit.clone()).await
    }

    /// A future that resolves to the typed error callers see once the process has exited.
    pub fn exit_error(&self) -> impl std::future::Future<Output = PeerError> + Send + 'static {
        let exit = self.exit.clone();
        let tail = self.stderr.clone();
        async move {
            let status = wait_exit(exit).await;
            // Let the stderr reader catch the last lines Codex wrote.
            tokio::time::sleep(Duration::from_millis(50)).await;
            PeerError::Exited {
                status,
                stderr_tail: tail.text(),
            }
        }
    }

    /// Sends a signal to every process in the group.
    pub fn signal_group(&self, signal: i32) {
        platform::process::signal_group(self.pid, signal);
    }

    /// Asks the group to stop (SIGTERM), then kills it (SIGKILL) after `grace`; what outlived
    /// the leader (in the group or outside it) gets the same, [`tree::STOP_GRACE`] apart.
    pub async fn shutdown(&self, grace: Duration) -> ExitInfo {
        if let Some(info) = self.exit_info() {
            let left = tree::stop(self.pid, Some(&self.marker), &[], tree::STOP_GRACE);
            if left.any_left() {
                tokio::time::sleep(tree::STOP_GRACE).await;
                left.kill_now();
            }
            return info;
        }
        self.signal_group(libc::SIGTERM);
        let info = match tokio::time::timeout(grace, self.exited()).await {
            Ok(info) => info,
            Err(_) => {
                self.signal_group(libc::SIGKILL);
                self.exited().await
            }
        };
        // Children that outlived the leader (in the group or outside it): asked, then, since
        // the relay may be on its way out, waited for and killed here.
        let left = tree::stop(self.pid, Some(&self.marker), &[], tree::STOP_GRACE);
        if left.any_left() {
            tokio::time::sleep(tree::STOP_GRACE).await;
            left.kill_now();
        }
        info
    }
}

impl Drop for CodexProcess {
    /// The relay is alive: the tree is asked to stop, and killed after a short grace.
    fn drop(&mut self) {
        tree::stop(self.pid, Some(&self.marker), &[], tree::STOP_GRACE);
    }
}

async fn wait_exit(mut rx: watch::Receiver<Option<ExitInfo>>) -> ExitInfo {
    loop {
        if let Some(info) = *rx.borrow_and_update() {
            return info;
        }
        if rx.changed().await.is_err() {
            return rx.borrow().unwrap_or(ExitInfo {
                code: None,
                signal: None,
            });
        }
    }
}

async fn reap(
    mut child: Child,
    pid: u32,
    marker: String,
    watchdog: std::sync::Arc<tree::Watchdog>,
    tx: watch::Sender<Option<ExitInfo>>,
) {
    use std::os::unix::process::ExitStatusExt;
    let info = match child.wait().await {
        Ok(status) => ExitInfo {
            code: status.code(),
            signal: status.signal(),
        },
        Err(e) => {
            tracing::warn!(pid, "waiting for codex failed: {e}");
            ExitInfo {
                code: None,
                signal: None,
            }
        }
    };
    tracing::debug!(pid, %info, "codex process exited");
    // The exit is known at once (callers report it); what the leader left behind (a running
    // command, a sandbox helper, a shell in a session of its own) goes with it: asked first,
    // killed after a short grace.
    let left = tree::stop(pid, Some(&marker), &[], tree::STOP_GRACE);
    let _ = tx.send(Some(info));
    if left.any_left() {
        tokio::time::sleep(tree::STOP_GRACE).await;
        left.kill_now();
    }
    // The watchdog goes only once the tree has.
    drop(watchdog);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_is_bounded_by_lines_and_bytes() {
        let t = StderrTail::new(3, 1000);
        for i in 0..10 {
            t.push(&format!("line {i}"));
        }
        assert_eq!(t.text(), "line 7\nline 8\nline 9");
        let t = StderrTail::new(100, 64);
        t.push(&"a".repeat(40));
        t.push(&"b".repeat(40));
        assert_eq!(t.text(), "b".repeat(40));
    }

    #[test]
    fn rust_log_keeps_the_users_filter_and_mutes_rollout_listing() {
        assert_eq!(
            child_rust_log(Some("debug")),
            "debug,codex_core::rollout::list=off"
        );
        assert_eq!(child_rust_log(None), "warn,codex_core::rollout::list=off");
        assert_eq!(
            child_rust_log(Some("  ")),
            "warn,codex_core::rollout::list=off"
        );
    }
}
