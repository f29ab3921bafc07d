//! Arrangement (f), the floor: the same turns driven by `drive-app-server`, a process with only
//! the project's peer between one app-server and the turns (or, bare, not even that). Its CPU per turn is what reading
//! and parsing Codex's lines costs on this machine; the relay's figure less this one is what the
//! engine, the store and the MCP front add.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{ChildStdin, ChildStdout};

use super::{Figures, NEW, RelayProbe, bed, check, clean_home, codex, follow_ups, tree};

/// Sends one command to the driver and reads its answer: each turn's time.
async fn command(
    stdin: &mut ChildStdin,
    out: &mut Lines<BufReader<ChildStdout>>,
    what: &str,
) -> Result<Vec<Duration>, String> {
    stdin
        .write_all(format!("{what}\n").as_bytes())
        .await
        .map_err(|e| format!("floor: write {what}: {e}"))?;
    let line = out
        .next_line()
        .await
        .map_err(|e| format!("floor: read: {e}"))?
        .ok_or("floor: the driver exited")?;
    let times = line
        .strip_prefix("done")
        .ok_or_else(|| format!("floor {what}: {line}"))?;
    Ok(times
        .split_whitespace()
        .filter_map(|t| t.parse::<f64>().ok())
        .map(|ms| Duration::from_secs_f64(ms / 1000.0))
        .collect())
}

/// One phase's figures, or its failure counted against every turn.
fn figures(
    name: String,
    sessions: usize,
    result: Result<Vec<Duration>, String>,
    probe: &RelayProbe,
    sampler: tree::Sampler,
    pid: u32,
) -> Figures {
    let outcome = match result {
        Ok(turns) => (turns, 0),
        Err(e) => {
            eprintln!("{name}: {e}");
            (Vec::new(), sessions)
        }
    };
    Figures::phase(name, outcome, probe, sampler, pid)
}

/// `bare`: no peer either, only each line parsed into a JSON value (`drive-app-server --bare`).
pub(super) async fn floor_run(sessions: usize, bare: bool, label: &str) -> Vec<Figures> {
    let (model, home) = bed(sessions).await;
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_drive-app-server"));
    if bare {
        cmd.arg("--bare");
    }
    let mut child = cmd
        .arg(codex(NEW))
        .arg(home.path())
        .arg(home.workspace())
        .arg(sessions.to_string())
        .env("RUST_LOG", "warn")
        .env("HOME", clean_home(&home))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn drive-app-server");
    let pid = child.id().expect("driver pid");
    let mut stdin = child.stdin.take().expect("piped stdin");
    let mut out = BufReader::new(child.stdout.take().expect("piped stdout")).lines();

    let name = if bare {
        format!("(f) floor: JSON values alone, one app-server{label}")
    } else {
        format!("(f) floor: the peer alone, one app-server{label}")
    };
    let sampler = tree::Sampler::start(Duration::from_millis(100));
    let probe = RelayProbe::start(pid);
    let result = command(&mut stdin, &mut out, "start").await;
    let ok = result.is_ok();
    let first = figures(name.clone(), sessions, result, &probe, sampler, pid);
    if ok {
        check(&model, sessions, &first.name, 2);
    }
    let mut all = vec![first];
    if follow_ups() && ok {
        let name = format!("{name}, follow-up turn");
        let sampler = tree::Sampler::start(Duration::from_millis(100));
        let probe = RelayProbe::start(pid);
        let result = command(&mut stdin, &mut out, "again").await;
        let ok = result.is_ok();
        all.push(figures(name, sessions, result, &probe, sampler, pid));
        if ok {
            check(&model, sessions, &all[1].name, 4);
        }
    }
    drop(stdin);
    let _ = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
    all
}
