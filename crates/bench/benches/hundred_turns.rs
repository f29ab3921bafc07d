//! A hundred sessions each running one turn at the same moment over the real Codex 0.169 with
//! the scripted model (figures printed, not asserted). Each turn: the model asks for
//! `exec_command {"cmd":"echo hi"}`, then answers with a short text. Arrangements:
//! (a) the release `codex-relay mcp` with one shared app-server (`--sessions-per-codex 0`),
//! driven over stdio by the rmcp client: 100 `codex_start` calls at once, each waited for with
//! `codex_status {waitMs, until: "attention"}`;
//! (b) the same relay pooled (`--sessions-per-codex N` for each N of POOL_SIZES, default
//! "5,10,25");
//! (c) 100 `codex exec --json` processes at once, the process-per-task way;
//! and (a) again with `TOKIO_WORKER_THREADS=1` (the relay's runtime on one worker thread), the
//! "fewer runtime threads" lever for the relay's CPU per turn, before/after in the same run.
//! `HUNDRED_TURNS_EXEC=0` leaves out (c). (f), the floor: `drive-app-server` (this crate's
//! binary) runs the same turns over one app-server with only the project's peer in between; its
//! CPU per turn, taken like the relay's, is what reading and parsing Codex's lines costs here;
//! bare, with no peer either (each line parsed into a JSON value), the least any client pays.
//!
//! Figures per arrangement: wall time (first call to last turn known done), p50/p99 turn time
//! (a turn is timed from its start call to its completion being seen; it includes creating the
//! session and, for the first turns, starting Codex), the peak summed RSS and PSS of every
//! process below the bench (the relay, its app-servers and their commands; or the exec
//! processes), and, for the relay, its own CPU seconds per turn (utime + stime of the relay
//! process from /proc/PID/stat, children excluded), its threads and its context switches per
//! turn (wake-ups). Memory is reported as a ratio against (c), wall time against (a).
//!
//! Codex and its commands get an empty `HOME` (in every arrangement): Codex's login-shell
//! snapshot sources the user's shell rc files once per session, and where those run
//! `pyenv rehash`, 100 sessions at once queue on its lock for over a minute, which measures the
//! machine's rc files rather than the relay.
//!
//! Run: `cargo bench -p codex-relay-bench --bench hundred_turns` (SESSIONS=100 by default, set
//! HUNDRED_TURNS_SESSIONS to change it). It first runs `cargo build --release -p codex-relay`.
//! `RELAY_BASELINE=PATH` also measures another codex-relay binary (e.g. the last commit's) in
//! the same run, and `HUNDRED_TURNS_REPEAT=N` runs the one-app-server arrangements N times,
//! interleaved: on two shared cores a change of the relay's CPU per turn is only seen as a
//! same-run ratio. The `SQLite CPU` column is the part of the relay's CPU spent on the store's
//! SQLite connection threads. `HUNDRED_TURNS_FOLLOW_UP=1` then runs a second turn on every
//! session, all at once (`codex_say`), and reports it as its own row: what a turn costs once
//! its session exists. With a baseline, the two binaries take turns going first, and
//! `HUNDRED_TURNS_LEVERS=0` leaves out the one-worker and floor arrangements (more rounds of
//! the comparison in the same time).

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use codex_relay_testkit::{CodexHome, ModelServer, Reply};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, ProtocolVersion,
};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

#[path = "hundred_turns/floor.rs"]
mod floor;
#[path = "mcp_turns/support.rs"]
#[allow(dead_code)]
mod support;
#[path = "hundred_turns/tree.rs"]
mod tree;
use support::{codex, ms, pct, relay_binary};

const NEW: &str = codex_relay_testkit::NEWEST;
const TURN_TIMEOUT: Duration = Duration::from_secs(600);

type Client = RunningService<RoleClient, ClientConfig>;

struct Figures {
    name: String,
    wall: Duration,
    turns: Vec<Duration>,
    failed: usize,
    peak: tree::Peak,
    /// The relay's own figures (none for `codex exec`).
    relay: Option<RelayFigures>,
    /// Codex app-servers the relay ran at the end (its child processes), or exec processes.
    codex_processes: usize,
}

impl Figures {
    /// A phase of process `pid` that `probe` and `sampler` measured since they started: its
    /// wall time and CPU from the probe, its peak from the sampler, its children counted now.
    fn phase(
        name: String,
        (turns, failed): (Vec<Duration>, usize),
        probe: &RelayProbe,
        sampler: tree::Sampler,
        pid: u32,
    ) -> Figures {
        let relay = probe.lap();
        Figures {
            name,
            wall: relay.wall,
            turns,
            failed,
            peak: sampler.finish(),
            relay: Some(relay),
            codex_processes: tree::children(pid).len(),
        }
    }
}

/// A scripted model with one route per session, and a fresh CODEX_HOME.
async fn bed(sessions: usize) -> (ModelServer, CodexHome) {
    let model = ModelServer::start().await;
    let home = CodexHome::new(model.url());
    for i in 0..sessions {
        model.route(
            &format!("BENCH-{i}:"),
            [
                Reply::exec("echo hi", &format!("call-{i}")),
                Reply::text(format!("done {i}")),
                // The follow-up turn (HUNDRED_TURNS_FOLLOW_UP=1).
                Reply::exec("echo hi", &format!("again-{i}")),
                Reply::text(format!("done again {i}")),
            ],
        );
    }
    (model, home)
}

/// An empty home directory for Codex and its shells (see the module doc).
fn clean_home(home: &CodexHome) -> std::path::PathBuf {
    let dir = home.root().join("user-home");
    std::fs::create_dir_all(&dir).expect("create the clean HOME");
    dir
}

fn prompt(i: usize) -> String {
    format!("BENCH-{i}: run `echo hi` and say done")
}

/// Every turn reached the model twice, and each command's output went back to it. A command
/// whose output Codex returned empty (its exec tool under this load sometimes answers "exited
/// with code 0" with no output: Codex's doing, not the relay's, which never sees the output)
/// is counted and reported, not a reason to throw the run's figures away.
fn check(model: &ModelServer, sessions: usize, name: &str, requests: usize) {
    assert_eq!(model.unscripted(), 0, "{name}: unscripted model requests");
    let mut empty = 0;
    for i in 0..sessions {
        let reqs = model.requests_with(&format!("BENCH-{i}:"));
        assert_eq!(
            reqs.len(),
            requests,
            "{name}: session {i} made {} model requests",
            reqs.len()
        );
        // The second request of each turn carries its command's output.
        let calls = [format!("call-{i}"), format!("again-{i}")];
        for (req, call) in reqs.iter().skip(1).step_by(2).zip(&calls) {
            let out = req.tool_output(call);
            let out = out.expect("the command's output went back to the model");
            if !out.contains("hi") {
                assert!(
                    out.contains("exited with code 0"),
                    "{name}: session {i} ran no `echo hi`: {out:?}"
                );
                empty += 1;
            }
        }
    }
    if empty > 0 {
        eprintln!("{name}: Codex returned {empty} `echo hi` result(s) with empty output");
    }
}

async fn call(client: &Client, tool: &str, args: Value) -> Result<Value, String> {
    let Value::Object(args) = args else {
        unreachable!("tool arguments are objects")
    };
    let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(args);
    let result = tokio::time::timeout(TURN_TIMEOUT, client.call_tool(params))
        .await
        .map_err(|_| format!("{tool}: no answer within {TURN_TIMEOUT:?}"))?
        .map_err(|e| format!("{tool}: {e}"))?;
    if result.is_error == Some(true) {
        return Err(format!("{tool} failed: {:?}", result.content));
    }
    Ok(result.structured_content.unwrap_or(Value::Null))
}

/// One session: `codex_start` with the prompt, then long-polls until its turn is done.
async fn relay_turn(
    client: Arc<Client>,
    i: usize,
    cwd: String,
) -> Result<(String, Duration), String> {
    let started = Instant::now();
    let args = json!({"prompt": prompt(i), "workingDirectory": cwd,
        "approvalPolicy": "never", "sandbox": "read-only"});
    let out = call(&client, "codex_start", args).await?;
    let session = out["sessionId"].as_str().ok_or("no sessionId")?.to_owned();
    let took = until_done(&client, i, &session, 1, started).await?;
    Ok((session, took))
}

/// A second turn on a session that exists and is idle: `codex_say`, then long-polls.
async fn follow_up(client: Arc<Client>, i: usize, session: String) -> Result<Duration, String> {
    let started = Instant::now();
    let args = json!({"sessionId": session, "message": format!("BENCH-{i}: once more")});
    call(&client, "codex_say", args).await?;
    until_done(&client, i, &session, 2, started).await
}

/// Long-polls `codex_status {until: attention}` until the session has done `turns` turns.
async fn until_done(
    client: &Client,
    i: usize,
    session: &str,
    turns: u64,
    started: Instant,
) -> Result<Duration, String> {
    let mut cursor = 0u64;
    loop {
        let args = json!({"sessionId": session, "cursor": cursor, "waitMs": 30000,
            "until": "attention"});
        let st = call(client, "codex_status", args).await?;
        cursor = st["nextCursor"].as_u64().unwrap_or(cursor);
        match st["status"].as_str().unwrap_or_default() {
            "done" if st["turnCount"].as_u64() == Some(turns) => return Ok(started.elapsed()),
            s @ ("error" | "failed" | "closed") => {
                return Err(format!("session {i} {s}: {}", st["error"]));
            }
            _ if started.elapsed() > TURN_TIMEOUT => return Err(format!("session {i} timed out")),
            _ => {}
        }
    }
}

async fn relay_run(
    binary: &Path,
    sessions: usize,
    per: usize,
    one_worker: bool,
    label: &str,
) -> Vec<Figures> {
    let (model, home) = bed(sessions).await;
    let mut cmd = tokio::process::Command::new(binary);
    cmd.arg("mcp")
        .arg("--codex")
        .arg(codex(NEW))
        .arg("--codex-home")
        .arg(home.path())
        .arg("--db")
        .arg(home.root().join("relay.db"))
        .args(["--max-sessions", &(sessions + 10).to_string()])
        .args(["--sessions-per-codex", &per.to_string()])
        .env("RUST_LOG", "warn")
        .env("HOME", clean_home(&home))
        .kill_on_drop(true);
    if one_worker {
        // Tokio reads this when it builds the relay's runtime: one worker thread, not one per core.
        cmd.env("TOKIO_WORKER_THREADS", "1");
    }
    let stderr = std::fs::File::create(home.root().join("relay.stderr")).expect("stderr log");
    let (transport, _) = TokioChildProcess::builder(cmd)
        .stderr(stderr)
        .spawn()
        .expect("spawn codex-relay mcp");
    let pid = transport.id().expect("relay pid");
    let client = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("codex-relay-bench", env!("CARGO_PKG_VERSION")),
    )
    .with_protocol_version(ProtocolVersion::V_2025_11_25)
    .serve(transport)
    .await
    .expect("MCP initialize");
    let client = Arc::new(client);
    let cwd = home.workspace().display().to_string();

    let sampler = tree::Sampler::start(Duration::from_millis(100));
    let probe = RelayProbe::start(pid);
    let results = futures_join(
        (0..sessions).map(|i| tokio::spawn(relay_turn(client.clone(), i, cwd.clone()))),
    )
    .await;
    let relay = probe.lap();
    let wall = relay.wall;
    let codex_processes = tree::children(pid).len();
    let peak = sampler.finish();
    let mut name = if per == 0 {
        "(a) relay, one app-server".to_owned()
    } else {
        format!("(b) relay, {per} per app-server")
    };
    if one_worker {
        name += ", 1 worker";
    }
    name += label;
    let mut ids = Vec::new();
    let results = results
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            r.map(|(id, took)| {
                ids.push((i, id));
                took
            })
        })
        .collect();
    let (turns, failed) = split(results, &name);
    if failed == 0 {
        check(&model, sessions, &name, 2);
    }
    let mut out = vec![Figures {
        name: name.clone(),
        wall,
        turns,
        failed,
        peak,
        relay: Some(relay),
        codex_processes,
    }];
    // HUNDRED_TURNS_FOLLOW_UP=1: a second turn on every session, all at once, measured on its
    // own: what a turn costs once its session exists (no `thread/start`, no MCP session start).
    if follow_ups() && failed == 0 {
        let sampler = tree::Sampler::start(Duration::from_millis(100));
        let probe = RelayProbe::start(pid);
        let results = futures_join(
            ids.into_iter()
                .map(|(i, id)| tokio::spawn(follow_up(client.clone(), i, id))),
        )
        .await;
        let name = format!("{name}, follow-up turn");
        let outcome = split(results, &name);
        let phase = Figures::phase(name, outcome, &probe, sampler, pid);
        if phase.failed == 0 {
            check(&model, sessions, &phase.name, 4);
        }
        out.push(phase);
    }
    drop(client);
    out
}

fn follow_ups() -> bool {
    std::env::var("HUNDRED_TURNS_FOLLOW_UP").as_deref() == Ok("1")
}

/// The relay's own figures over one phase of a run.
#[derive(Clone, Copy)]
struct RelayFigures {
    wall: Duration,
    /// utime + stime of the relay process.
    cpu: Duration,
    /// Its threads at the end.
    threads: usize,
    /// Its context switches (voluntary and not).
    switches: u64,
    /// The CPU time of its SQLite connection threads (part of `cpu`).
    store_cpu: Duration,
}

/// Reads the relay's counters at the start of a phase and again at its end.
struct RelayProbe {
    pid: u32,
    started: Instant,
    cpu: Duration,
    store_cpu: Duration,
    switches: u64,
}

impl RelayProbe {
    fn start(pid: u32) -> Self {
        Self {
            pid,
            started: Instant::now(),
            cpu: tree::cpu_time(pid),
            store_cpu: tree::thread_cpu_time(pid, "sqlx-sqlite"),
            switches: tree::context_switches(pid),
        }
    }

    fn lap(&self) -> RelayFigures {
        RelayFigures {
            wall: self.started.elapsed(),
            cpu: tree::cpu_time(self.pid).saturating_sub(self.cpu),
            threads: tree::threads(self.pid),
            switches: tree::context_switches(self.pid).saturating_sub(self.switches),
            store_cpu: tree::thread_cpu_time(self.pid, "sqlx-sqlite")
                .saturating_sub(self.store_cpu),
        }
    }
}

async fn exec_turn(
    i: usize,
    home: std::path::PathBuf,
    user_home: std::path::PathBuf,
    cwd: std::path::PathBuf,
) -> Result<Duration, String> {
    let started = Instant::now();
    let out = tokio::process::Command::new(codex(NEW))
        .args([
            "exec",
            "--json",
            "--skip-git-repo-check",
            "-s",
            "read-only",
            "-C",
        ])
        .arg(&cwd)
        .arg(prompt(i))
        .env("CODEX_HOME", &home)
        .env("HOME", &user_home)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| format!("spawn codex exec: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || !stdout.contains("turn.completed") {
        return Err(format!(
            "codex exec {i} failed: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(started.elapsed())
}

async fn exec_run(sessions: usize) -> Figures {
    let (model, home) = bed(sessions).await;
    let user_home = clean_home(&home);
    let sampler = tree::Sampler::start(Duration::from_millis(100));
    let started = Instant::now();
    let results = futures_join((0..sessions).map(|i| {
        tokio::spawn(exec_turn(
            i,
            home.path().to_owned(),
            user_home.clone(),
            home.workspace().to_owned(),
        ))
    }))
    .await;
    let wall = started.elapsed();
    let peak = sampler.finish();
    let left = support::kill_leftovers(home.path());
    if left > 0 {
        eprintln!("(c): killed {left} leftover process(es) after the run");
    }
    let name = "(c) 100 × codex exec --json".replace("100", &sessions.to_string());
    let (turns, failed) = split(results, &name);
    if failed == 0 {
        check(&model, sessions, &name, 2);
    }
    Figures {
        name,
        wall,
        turns,
        failed,
        peak,
        relay: None,
        codex_processes: sessions,
    }
}

async fn futures_join<T>(
    tasks: impl Iterator<Item = tokio::task::JoinHandle<Result<T, String>>>,
) -> Vec<Result<T, String>> {
    let mut out = Vec::new();
    for t in tasks.collect::<Vec<_>>() {
        out.push(
            t.await
                .unwrap_or_else(|e| Err(format!("task panicked: {e}"))),
        );
    }
    out
}

fn split(results: Vec<Result<Duration, String>>, name: &str) -> (Vec<Duration>, usize) {
    let mut ok = Vec::new();
    let mut failed = 0;
    for r in results {
        match r {
            Ok(d) => ok.push(d),
            Err(e) => {
                failed += 1;
                if failed <= 3 {
                    eprintln!("{name}: {e}");
                }
            }
        }
    }
    (ok, failed)
}

fn report(all: &[Figures], sessions: usize) {
    let base_mem = all
        .iter()
        .find(|f| f.relay.is_none())
        .map(|f| (f.peak.rss_kib as f64, f.peak.pss_kib as f64));
    let base_wall = all.first().map(|f| f.wall.as_secs_f64());
    println!(
        "\n{sessions} sessions, one turn each (exec_command `echo hi` + a message), all at once; Codex {NEW}"
    );
    println!(
        "{:<54} {:>8} {:>9} {:>9} {:>6} {:>10} {:>10} {:>9} {:>9} {:>6} {:>11} {:>9} {:>11}",
        "arrangement",
        "wall s",
        "p50 ms",
        "p99 ms",
        "fail",
        "peak RSS",
        "peak PSS",
        "c/RSS",
        "c/PSS",
        "codex",
        "relay CPU",
        "ctx-sw",
        "SQLite CPU"
    );
    for f in all {
        let mut v: Vec<f64> = f.turns.iter().copied().map(ms).collect();
        v.sort_by(f64::total_cmp);
        let (p50, p99) = if v.is_empty() {
            (f64::NAN, f64::NAN)
        } else {
            (pct(&v, 50.0), pct(&v, 99.0))
        };
        let (rss_ratio, pss_ratio) = base_mem.map_or((f64::NAN, f64::NAN), |(r, p)| {
            (
                r / f.peak.rss_kib.max(1) as f64,
                p / f.peak.pss_kib.max(1) as f64,
            )
        });
        let (cpu, switches, store) = match f.relay {
            Some(r) => (
                format!("{:.2} ms/turn", ms(r.cpu) / sessions as f64),
                format!("{:.0}/turn", r.switches as f64 / sessions as f64),
                format!("{:.2} ms/turn", ms(r.store_cpu) / sessions as f64),
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        println!(
            "{:<54} {:>8.2} {:>9.0} {:>9.0} {:>6} {:>8} MB {:>7} MB {:>8.1}× {:>8.1}× {:>6} {:>11} {:>9} {:>11}",
            f.name,
            f.wall.as_secs_f64(),
            p50,
            p99,
            f.failed,
            f.peak.rss_kib / 1024,
            f.peak.pss_kib / 1024,
            rss_ratio,
            pss_ratio,
            f.codex_processes,
            cpu,
            switches,
            store,
        );
    }
    println!(
        "\nc/RSS, c/PSS: how many times less memory than (c) (higher is better; target ≥ 5×)."
    );
    println!("relay CPU of (f): the driver's own CPU, taken the same way as the relay's.");
    if let Some(b) = base_wall {
        for f in all {
            println!(
                "{:<54} wall time {:.2}× (a)'s; relay threads at the end: {}",
                f.name,
                f.wall.as_secs_f64() / b,
                f.relay.map_or("-".into(), |r| r.threads.to_string())
            );
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let sessions: usize = std::env::var("HUNDRED_TURNS_SESSIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    let pools: Vec<usize> = std::env::var("POOL_SIZES")
        .unwrap_or_else(|_| "5,10,25".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let binary = relay_binary();
    println!("codex-relay binary: {}", binary.display());
    // RELAY_BASELINE=PATH: another codex-relay binary (e.g. the previous commit's) measured in
    // the same run as arrangement (a), so a change's effect is a ratio, not two runs' noise.
    let baseline = std::env::var_os("RELAY_BASELINE").map(std::path::PathBuf::from);
    // HUNDRED_TURNS_REPEAT=N runs the one-app-server arrangements N times, interleaved.
    let repeat: usize = std::env::var("HUNDRED_TURNS_REPEAT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
        .max(1);
    let mut all = Vec::new();
    for round in 0..repeat {
        let label = if repeat > 1 {
            format!(" #{}", round + 1)
        } else {
            String::new()
        };
        // The baseline goes first in odd rounds and second in even ones: what running first
        // or second costs (a warm page cache, the previous run's processes still exiting)
        // falls on both binaries alike.
        let base_first = round % 2 == 0;
        if let Some(base) = baseline.as_ref().filter(|_| base_first) {
            all.extend(relay_run(base, sessions, 0, false, &format!(" BASELINE{label}")).await);
        }
        all.extend(relay_run(&binary, sessions, 0, false, &label).await);
        if let Some(base) = baseline.as_ref().filter(|_| !base_first) {
            all.extend(relay_run(base, sessions, 0, false, &format!(" BASELINE{label}")).await);
        }
        // HUNDRED_TURNS_LEVERS=0 leaves out the levers and floors below, e.g. for more rounds
        // of a before/after comparison in the same time.
        if std::env::var("HUNDRED_TURNS_LEVERS").as_deref() == Ok("0") {
            continue;
        }
        // The lever the issue names for the relay's CPU: fewer runtime threads (fewer
        // wake-ups).
        all.extend(relay_run(&binary, sessions, 0, true, &label).await);
        all.extend(floor::floor_run(sessions, false, &label).await);
        all.extend(floor::floor_run(sessions, true, &label).await);
    }
    for per in pools {
        all.extend(relay_run(&binary, sessions, per, false, "").await);
    }
    // HUNDRED_TURNS_EXEC=0 leaves out (c), e.g. while comparing relay settings.
    if std::env::var("HUNDRED_TURNS_EXEC").as_deref() != Ok("0") {
        all.push(exec_run(sessions).await);
    }
    report(&all, sessions);
}
