//! Making a thread the way another Codex client would: `codex exec --json` in a test's
//! CODEX_HOME, for the discovery and resume scenarios.

use std::path::Path;
use std::process::Stdio;

use codex_relay_protocol::exec::ExecEvent;

/// Runs `codex exec --json PROMPT` in `cwd` with `codex_home`; returns the thread id it
/// reports. Panics (with Codex's output) when it fails. What that Codex started and left
/// running (a login-shell snapshot still sourcing the profile, in a session of its own) is
/// killed when it is done, as the relay does for its own Codex processes.
pub async fn thread_from_codex_exec(
    codex: &Path,
    codex_home: &Path,
    cwd: &Path,
    prompt: &str,
) -> String {
    static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let marker = format!("CODEX_RELAY_TREE=testkit-exec-{}-{run}", std::process::id());
    let (key, value) = marker.split_once('=').expect("KEY=value");
    let out = tokio::process::Command::new(codex)
        .args(["exec", "--json", "--skip-git-repo-check", "-C"])
        .arg(cwd)
        .arg(prompt)
        .env("CODEX_HOME", codex_home)
        .env(key, value)
        .stdin(Stdio::null())
        .output()
        .await
        .expect("run codex exec");
    for pid in crate::procs::pids_with_env(&marker) {
        // SAFETY: kill(2) of a process this helper's `codex exec` started.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "codex exec failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .find_map(|l| match ExecEvent::parse(l) {
            Ok(ExecEvent::ThreadStarted { thread_id }) => Some(thread_id),
            _ => None,
        })
        .expect("thread.started in the exec output")
}
