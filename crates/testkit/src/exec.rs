//! Making a thread the way another Codex client would: `codex exec --json` in a test's
//! CODEX_HOME, for the discovery and resume scenarios.

use std::path::Path;
use std::process::Stdio;

use codex_relay_protocol::exec::ExecEvent;

/// Runs `codex exec --json PROMPT` in `cwd` with `codex_home`; returns the thread id it
/// reports. Panics (with Codex's output) when it fails.
pub async fn thread_from_codex_exec(
    codex: &Path,
    codex_home: &Path,
    cwd: &Path,
    prompt: &str,
) -> String {
    let out = tokio::process::Command::new(codex)
        .args(["exec", "--json", "--skip-git-repo-check", "-C"])
        .arg(cwd)
        .arg(prompt)
        .env("CODEX_HOME", codex_home)
        .stdin(Stdio::null())
        .output()
        .await
        .expect("run codex exec");
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
