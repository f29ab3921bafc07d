//! One scripted one-shot task, run as a fresh process each time, three ways (figures printed,
//! not asserted): `codex-relay run` (or, when the binary has no `run`, one task through
//! `codex-relay mcp` over stdio; the report says which), `codex exec --json`, and a Node script
//! on `@openai/codex-sdk` (0.163.0, the newest published; it drives the same pinned Codex
//! 0.169.0 through `codexPathOverride`). The task: the model asks for `exec_command
//! {"cmd":"echo hi"}`, then answers `done N`; the sandbox is read-only, approvals never asked.
//!
//! Per run: wall time from spawn to exit, and peak RSS of the whole process tree (the root and
//! every descendant summed, sampled every 10 ms through /proc). Every arrangement has its own
//! scripted model and `CODEX_HOME`, one warm-up run (not counted), and the arrangements take
//! turns run by run (rotating who goes first) so outside load falls on all of them alike.
//! Ratios are relay / baseline from the same run. Targets: wall within 5 % of `codex exec`,
//! below the SDK.
//!
//! Run: `cargo bench -p codex-relay-bench --bench one_shot` (builds the release relay first).
//! `ONE_SHOT_RUNS` sets the measured runs (default 10). `ONE_SHOT_RELAY_CMD` replaces the relay
//! side with any command line (split on spaces, the prompt appended; it gets CODEX_CLI_PATH,
//! CODEX_HOME and CODEX_RELAY_DB in its environment and must print the final message);
//! `ONE_SHOT_RELAY_BIN` measures that `codex-relay` binary instead of building the release one.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use codex_relay_testkit::{CodexHome, ModelServer, Reply};

#[path = "one_shot/mcp_driver.rs"]
mod mcp_driver;
#[allow(dead_code)]
#[path = "mcp_turns/support.rs"]
mod support;
#[path = "one_shot/tree.rs"]
mod tree;

use tree::Measured;

const VERSION: &str = codex_relay_testkit::NEWEST;
/// Read by the shared `support` helpers.
#[allow(dead_code)]
const NEW: &str = VERSION;

/// How the relay side is run.
enum RelayMode {
    Command(Vec<String>),
    Run(PathBuf),
    Mcp(PathBuf),
}

impl RelayMode {
    fn detect(relay: &Path) -> RelayMode {
        if let Ok(cmd) = std::env::var("ONE_SHOT_RELAY_CMD") {
            return RelayMode::Command(cmd.split_whitespace().map(str::to_owned).collect());
        }
        let has_run = Command::new(relay)
            .args(["run", "--help"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if has_run {
            RelayMode::Run(relay.to_path_buf())
        } else {
            RelayMode::Mcp(relay.to_path_buf())
        }
    }

    fn label(&self) -> String {
        match self {
            RelayMode::Command(c) => format!("relay: `{}`", c.join(" ")),
            RelayMode::Run(_) => "codex-relay run".into(),
            RelayMode::Mcp(_) => "codex-relay mcp (one task; no `run` in this binary)".into(),
        }
    }
}

enum Kind {
    Exec,
    Sdk { node: PathBuf, script: PathBuf },
    Relay(RelayMode),
}

struct Arrangement {
    name: String,
    kind: Kind,
    model: ModelServer,
    home: CodexHome,
    runs: Vec<Measured>,
}

impl Arrangement {
    async fn new(name: String, kind: Kind) -> Arrangement {
        let model = ModelServer::start().await;
        let home = CodexHome::new(model.url());
        Arrangement {
            name,
            kind,
            model,
            home,
            runs: Vec::new(),
        }
    }

    /// One run of the task; panics with the output when it did not produce the answer.
    fn run_once(&self, codex: &Path, n: usize) -> Measured {
        self.model.push([
            Reply::exec("echo hi", &format!("call-{n}")),
            Reply::text(format!("done {n}")),
        ]);
        let prompt = format!("say hi, run {n}");
        let cwd = self.home.workspace().display().to_string();
        let db = self.home.root().join("relay.db");
        let mut cmd = match &self.kind {
            Kind::Exec => {
                let mut c = Command::new(codex);
                c.args([
                    "exec",
                    "--json",
                    "--skip-git-repo-check",
                    "-C",
                    &cwd,
                    &prompt,
                ]);
                c
            }
            Kind::Sdk { node, script } => {
                let mut c = Command::new(node);
                c.arg(script).arg(&prompt).env("WORKDIR", &cwd);
                c
            }
            Kind::Relay(RelayMode::Command(argv)) => {
                let mut c = Command::new(&argv[0]);
                c.args(&argv[1..]).arg(&prompt);
                c
            }
            Kind::Relay(RelayMode::Run(relay)) => {
                let mut c = Command::new(relay);
                c.args(["run", "--cwd", &cwd, "--approve", "never", &prompt]);
                c
            }
            Kind::Relay(RelayMode::Mcp(relay)) => {
                let mut c = Command::new(relay);
                c.arg("mcp");
                c
            }
        };
        cmd.env("CODEX_HOME", self.home.path())
            .env("CODEX_BIN", codex)
            .env("CODEX_CLI_PATH", codex)
            .env("CODEX_RELAY_DB", &db)
            .env_remove("RUST_LOG")
            .stderr(Stdio::null());
        let mcp = matches!(self.kind, Kind::Relay(RelayMode::Mcp(_)));
        cmd.stdin(if mcp { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped());
        let started = Instant::now();
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("{}: spawn: {e}", self.name));
        let mut answer = String::new();
        let (m, status) = tree::measure(child, started, |child| {
            if mcp {
                answer = mcp_driver::one_shot(child, &prompt, &cwd)
                    .unwrap_or_else(|e| format!("FAILED: {e}"));
            }
            if let Some(mut out) = child.stdout.take() {
                use std::io::Read;
                let _ = out.read_to_string(&mut answer);
            }
        });
        let want = format!("done {n}");
        assert!(
            status.success() && answer.contains(&want),
            "{} (run {n}) did not answer {want:?}: {status}; output: {answer}",
            self.name
        );
        self.kill_leftovers();
        m
    }

    /// After a run, outside its timing: what it left running with this arrangement's
    /// `CODEX_HOME` (see [`support::kill_leftovers`]).
    fn kill_leftovers(&self) {
        let left = support::kill_leftovers(self.home.path());
        if left > 0 {
            eprintln!(
                "{}: killed {left} leftover process(es) after the run",
                self.name
            );
        }
    }
}

fn median_of(v: impl Iterator<Item = f64>) -> f64 {
    support::median(v.collect())
}

fn mib(bytes: f64) -> f64 {
    bytes / (1024.0 * 1024.0)
}

fn main() {
    let runs: usize = std::env::var("ONE_SHOT_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let _guard = rt.enter();

    let codex = support::codex(VERSION);
    let relay = match std::env::var_os("ONE_SHOT_RELAY_BIN") {
        Some(bin) => PathBuf::from(bin),
        None => support::relay_binary(),
    };
    let sdk_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/one_shot/sdk");
    codex_relay_testkit::clients::npm_ci(&sdk_dir).expect("npm ci of the SDK script");
    let node = codex_relay_testkit::clients::node22().expect("Node 22");
    let mode = RelayMode::detect(&relay);
    let relay_label = mode.label();

    let mut arrangements = rt.block_on(async {
        vec![
            Arrangement::new("codex exec --json".into(), Kind::Exec).await,
            Arrangement::new(
                "@openai/codex-sdk 0.163.0 (node 22)".into(),
                Kind::Sdk {
                    node,
                    script: sdk_dir.join("one_shot.mjs"),
                },
            )
            .await,
            Arrangement::new(relay_label.clone(), Kind::Relay(mode)).await,
        ]
    });

    eprintln!("one_shot: {runs} measured runs per arrangement (+1 warm-up), Codex {VERSION}");
    let n_arr = arrangements.len();
    for round in 0..=runs {
        for k in 0..n_arr {
            let a = &mut arrangements[(round + k) % n_arr];
            let m = a.run_once(&codex, round);
            if round > 0 {
                a.runs.push(m);
            }
        }
        if round > 0 {
            eprint!(".");
        }
    }
    eprintln!();

    println!(
        "\none-shot task on Codex {VERSION} (exec_command `echo hi`, then a text answer), {runs} runs each, process started fresh every run:"
    );
    println!(
        "{:<56} {:>10} {:>9} {:>9} {:>12} {:>10} {:>6}",
        "arrangement", "wall med", "wall min", "wall p95", "RSS med MiB", "RSS max", "procs"
    );
    let mut medians = Vec::new();
    for a in &arrangements {
        let walls: Vec<Duration> = a.runs.iter().map(|m| m.wall).collect();
        let s = support::stats(&walls);
        let rss = median_of(a.runs.iter().map(|m| m.peak_rss as f64));
        let rss_max = a.runs.iter().map(|m| m.peak_rss).max().unwrap_or(0) as f64;
        let procs = a.runs.iter().map(|m| m.peak_procs).max().unwrap_or(0);
        println!(
            "{:<56} {:>8.1}ms {:>7.1}ms {:>7.1}ms {:>12.1} {:>10.1} {:>6}",
            a.name,
            s.median,
            s.min,
            s.p95,
            mib(rss),
            mib(rss_max),
            procs
        );
        medians.push((s.median, rss));
    }
    let (exec, sdk, relay) = (medians[0], medians[1], medians[2]);
    println!("\nratios (relay / baseline, medians of this run):");
    println!(
        "  wall: relay / codex exec = {:.3}  (target <= 1.05: {})",
        relay.0 / exec.0,
        if relay.0 / exec.0 <= 1.05 {
            "met"
        } else {
            "NOT met"
        }
    );
    println!(
        "  wall: relay / SDK        = {:.3}  (target < 1: {})",
        relay.0 / sdk.0,
        if relay.0 < sdk.0 { "met" } else { "NOT met" }
    );
    println!(
        "  peak tree RSS: relay / codex exec = {:.3}",
        relay.1 / exec.1
    );
    println!(
        "  peak tree RSS: relay / SDK        = {:.3}",
        relay.1 / sdk.1
    );
    println!(
        "  (SDK / codex exec: wall {:.3}, RSS {:.3})",
        sdk.0 / exec.0,
        sdk.1 / exec.1
    );
    println!("relay side measured: {relay_label}");
}
