//! The MCP turn bench's helpers: the cold start of `codex-relay mcp`, finding the binaries, and
//! the statistics of the report.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::NEW;

// ---------------------------------------------------------------------------------------------
// 2. Cold start of `codex-relay mcp` to the initialize response.

pub async fn cold_start(relay: &Path) -> Duration {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("codex-home");
    std::fs::create_dir_all(&home).expect("codex home");
    let mut cmd = tokio::process::Command::new(relay);
    cmd.arg("mcp")
        .arg("--codex")
        .arg(codex(NEW))
        .arg("--codex-home")
        .arg(&home)
        .arg("--db")
        .arg(dir.path().join("data").join("relay.db"))
        .args(["--approval-timeout-ms", "60000"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let started = Instant::now();
    let mut child = cmd.spawn().expect("spawn codex-relay mcp");
    let mut stdin = child.stdin.take().expect("stdin");
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "codex-relay-bench", "version": "0"}}});
    stdin
        .write_all(format!("{init}\n").as_bytes())
        .await
        .expect("write initialize");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .expect("an initialize response within 10 s")
        .expect("read stdout")
        .expect("a line");
    let elapsed = started.elapsed();
    let answer: Value = serde_json::from_str(&line).expect("JSON answer");
    assert_eq!(answer["id"], 1, "{line}");
    assert_eq!(answer["result"]["protocolVersion"], "2025-11-25", "{line}");
    drop(stdin); // EOF: the server exits
    if tokio::time::timeout(Duration::from_secs(5), child.wait())
        .await
        .is_err()
    {
        let _ = child.kill().await;
    }
    elapsed
}

// ---------------------------------------------------------------------------------------------
// Setup, statistics and the report.

pub fn codex(version: &str) -> PathBuf {
    codex_relay_testkit::codex_bin(version)
        .unwrap_or_else(|e| panic!("Codex {version} is needed and could not be installed: {e}"))
}

/// The release `codex-relay`, built (or brought up to date) first.
pub fn relay_binary() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let release = target.join("release").join("codex-relay");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!("running `cargo build --release -p codex-relay` (the binary this bench measures)");
    let built = std::process::Command::new(cargo)
        .args(["build", "--release", "-p", "codex-relay"])
        .current_dir(&root)
        .status()
        .is_ok_and(|s| s.success());
    if !built {
        assert!(
            release.exists(),
            "`cargo build --release -p codex-relay` failed and {} does not exist: \
             run `cargo build --release -p codex-relay` first",
            release.display()
        );
        eprintln!("warning: the build failed; measuring the existing (maybe stale) release binary");
    }
    release.canonicalize().unwrap_or(release)
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Nearest-rank percentile of sorted values.
pub fn pct(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub struct Stats {
    pub mean: f64,
    pub median: f64,
    pub min: f64,
    pub p95: f64,
    pub max: f64,
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n.is_multiple_of(2) {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    } else {
        v[n / 2]
    }
}

pub fn stats(times: &[Duration]) -> Stats {
    let mut v: Vec<f64> = times.iter().copied().map(ms).collect();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Stats {
        mean: v.iter().sum::<f64>() / n as f64,
        median: median(v.clone()),
        min: v[0],
        p95: pct(&v, 95.0),
        max: v[n - 1],
    }
}

/// Kills every process whose environment has `CODEX_HOME=<codex_home>` (what a measured run
/// left running) and returns how many, so it does not load the runs that follow. Codex's
/// login-shell snapshot runs the user's shell rc files in a session of its own; on a machine
/// whose rc runs `pyenv rehash`, that lingers for a minute after each `codex exec`.
#[allow(dead_code)] // mcp_turns has none to kill
pub fn kill_leftovers(codex_home: &Path) -> usize {
    let entry = format!("CODEX_HOME={}", codex_home.display());
    let left = codex_relay_testkit::procs::pids_with_env(&entry);
    for pid in &left {
        // SAFETY: kill(2) with a pid read from /proc; a pid that is gone meanwhile is harmless.
        unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
    }
    left.len()
}
