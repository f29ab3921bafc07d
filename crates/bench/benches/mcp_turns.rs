//! Turn latency through the MCP front against the real Codex, and the cold start of
//! `codex-relay mcp` (figures are printed, not asserted):
//! 1. sixty scripted one-command turns (the model asks for `exec_command {"cmd":"echo hi"}`,
//!    then answers with a short text), sequentially in one session, driven three ways. Sixty is
//!    three times the twenty the target names: with twenty, run-to-run noise on two shared
//!    cores is about ±2 ms per turn, as large as the target.
//!    - relay: the release `codex-relay mcp` driven by the rmcp client over stdio
//!      (`codex_start`, then `codex_say`; each turn waited for with `codex_status {waitMs,
//!      until: "attention"}`, and once more on 0.169 waking on every event as a client that
//!      does not use `until` would);
//!    - floor: `codex app-server` driven directly by `codex_relay_codex::AppServer`;
//!    - legacy: `codex mcp-server` of Codex 0.98 driven by the same rmcp client (`codex`, then
//!      `codex-reply`; each call blocks until its turn completes).
//!
//!    The engine in-process (the library front, no MCP) runs too, to separate the engine's cost
//!    from the MCP layer's. Relay and floor run on Codex 0.169.0 and 0.98.0; legacy only exists on 0.98.0. Every
//!    arrangement has its own scripted model server and its own `CODEX_HOME`, and one warm-up
//!    turn (in a separate session, not counted) before its measured session. Turn 1 of the
//!    measured session includes creating the thread. One turn runs at a time; the arrangements
//!    take turns (turn k of each, then turn k+1), so outside load falls on all of them alike.
//! 2. cold start of `codex-relay mcp` (fresh store) to its answer to a raw `initialize` line;
//!    Codex is not started by `initialize`.
//!
//! Run: `cargo bench -p codex-relay-bench --bench mcp_turns`. It first runs
//! `cargo build --release -p codex-relay` (a no-op when up to date) so the release binary is
//! the one measured. Needs the pinned Codex binaries (installed into `~/.cache/codex-relay` on
//! first use by `codex_relay_testkit::codex_bin`).

use std::path::Path;
use std::time::{Duration, Instant};

use codex_relay_codex::{AppServer, AppServerConfig, PeerEvent, Subscription};
use codex_relay_protocol::v2::{
    ApprovalPolicy, SandboxMode, ServerNotification, ThreadStartParams, TurnStartParams,
    TurnStatus, UserInput,
};
use codex_relay_testkit::{CodexHome, ModelServer, Reply};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, ProtocolVersion,
};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Map, Value, json};

#[path = "mcp_turns/support.rs"]
mod support;
use support::{codex, cold_start, median, ms, relay_binary, stats};

/// Measured turns per arrangement (see the module doc for why not twenty).
const TURNS: usize = 60;
const COLD_STARTS: usize = 20;
/// Longest wait for one turn (or one call) before the bench gives up.
const TURN_TIMEOUT: Duration = Duration::from_secs(60);
const NEW: &str = codex_relay_testkit::NEWEST;
const OLD: &str = "0.98.0";

type Client = RunningService<RoleClient, ClientConfig>;

// ---------------------------------------------------------------------------------------------
// The common bed: a scripted model and a CODEX_HOME per arrangement.

struct Bed {
    model: ModelServer,
    home: CodexHome,
    /// Turns scripted so far (warm-up included); call ids are `call-N`.
    scripted: usize,
}

impl Bed {
    async fn new() -> Bed {
        let model = ModelServer::start().await;
        let home = CodexHome::new(model.url());
        Bed {
            model,
            home,
            scripted: 0,
        }
    }

    /// Scripts the next turn and returns its prompt.
    fn next_turn(&mut self) -> String {
        let n = self.scripted;
        self.scripted += 1;
        self.model.push([
            Reply::exec("echo hi", &format!("call-{n}")),
            Reply::text(format!("done {n}")),
        ]);
        format!("turn {n}: run `echo hi` and say done")
    }

    fn cwd(&self) -> String {
        self.home.workspace().display().to_string()
    }

    /// Every scripted turn reached the model twice and every command's output went back to it.
    fn check(&self, name: &str) {
        let reqs = self.model.requests();
        assert_eq!(
            self.model.unscripted(),
            0,
            "{name}: unscripted model requests"
        );
        assert_eq!(reqs.len(), 2 * self.scripted, "{name}: model requests");
        for n in 0..self.scripted {
            let out = reqs[2 * n + 1].tool_output(&format!("call-{n}"));
            assert!(
                out.as_deref().is_some_and(|o| o.contains("hi")),
                "{name}: turn {n} ran no `echo hi`: {out:?}"
            );
        }
    }

    fn stderr_file(&self, name: &str) -> std::fs::File {
        std::fs::File::create(self.home.root().join(name)).expect("create stderr log")
    }
}

// ---------------------------------------------------------------------------------------------
// rmcp client helpers.

async fn connect(
    mut cmd: tokio::process::Command,
    stderr: std::fs::File,
    v: ProtocolVersion,
) -> Client {
    cmd.kill_on_drop(true);
    let (transport, _) = TokioChildProcess::builder(cmd)
        .stderr(stderr)
        .spawn()
        .expect("spawn the MCP server");
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("codex-relay-bench", env!("CARGO_PKG_VERSION")),
    )
    .with_protocol_version(v)
    .serve(transport)
    .await
    .expect("MCP initialize")
}

/// Calls a tool and returns its structured content; panics on an error result.
async fn call(client: &Client, tool: &str, args: Value) -> Value {
    let Value::Object(args) = args else {
        unreachable!("tool arguments are objects")
    };
    let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(args);
    let result = tokio::time::timeout(TURN_TIMEOUT, client.call_tool(params))
        .await
        .unwrap_or_else(|_| panic!("{tool}: no answer within {TURN_TIMEOUT:?}"))
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
    let text = || serde_json::to_string(&result.content).unwrap_or_default();
    assert_ne!(result.is_error, Some(true), "{tool} failed: {}", text());
    match result.structured_content.clone() {
        Some(v) => v,
        None => json!({ "content": text() }),
    }
}

// ---------------------------------------------------------------------------------------------
// The three ways of driving a turn.

enum Driver {
    /// (a) `codex-relay mcp` over the rmcp client.
    Relay {
        client: Client,
        session: String,
        cursor: u64,
        turns: u64,
        /// `codex_status` calls so far (warm-up turn included).
        polls: usize,
        /// Wait with `until: "attention"` (one call covers the turn) rather than waking on
        /// every event.
        attention: bool,
    },
    /// (b) the floor: `codex app-server` through the project's own peer.
    Floor {
        server: AppServer,
        thread: Option<(String, Subscription)>,
    },
    /// The engine in-process (the library front): `Relay::create`/`say`, waited for with
    /// `Relay::wait`; separates the engine's cost from the MCP layer's.
    Engine {
        relay: codex_relay_core::Relay,
        session: String,
    },
    /// (c) the legacy `codex mcp-server` over the rmcp client.
    Legacy {
        client: Client,
        /// The reply tool and the name of its thread argument, read from the tool list.
        reply: (String, &'static str),
        thread: String,
    },
}

struct Arrangement {
    name: &'static str,
    version: &'static str,
    bed: Bed,
    driver: Driver,
    times: Vec<Duration>,
}

impl Arrangement {
    async fn relay(binary: &Path, version: &'static str, attention: bool) -> Self {
        let bed = Bed::new().await;
        let mut cmd = tokio::process::Command::new(binary);
        cmd.arg("mcp")
            .arg("--codex")
            .arg(codex(version))
            .arg("--codex-home")
            .arg(bed.home.path())
            .arg("--db")
            .arg(bed.home.root().join("relay.db"))
            .args(["--approval-timeout-ms", "60000"]);
        let stderr = bed.stderr_file("relay.stderr");
        let client = connect(cmd, stderr, ProtocolVersion::V_2025_11_25).await;
        let driver = Driver::Relay {
            client,
            session: String::new(),
            cursor: 0,
            turns: 0,
            polls: 0,
            attention,
        };
        let name = if attention {
            "relay (codex-relay mcp)"
        } else {
            "relay, wake on any event"
        };
        Self::new(name, version, bed, driver)
    }

    async fn engine(version: &'static str) -> Self {
        let bed = Bed::new().await;
        let codex = AppServerConfig::new(codex(version)).codex_home(bed.home.path());
        let config = codex_relay_core::RelayConfig::new(
            codex,
            bed.home.root().join("relay.db").display().to_string(),
        );
        let relay = codex_relay_core::Relay::open(config)
            .await
            .expect("engine opens");
        let driver = Driver::Engine {
            relay,
            session: String::new(),
        };
        Self::new("engine (library)", version, bed, driver)
    }

    async fn floor(version: &'static str) -> Self {
        let bed = Bed::new().await;
        let config = AppServerConfig::new(codex(version)).codex_home(bed.home.path());
        let server = AppServer::start(config).await.expect("app-server starts");
        let driver = Driver::Floor {
            server,
            thread: None,
        };
        Self::new("floor (app-server)", version, bed, driver)
    }

    async fn legacy() -> Self {
        let bed = Bed::new().await;
        let mut cmd = tokio::process::Command::new(codex(OLD));
        cmd.arg("mcp-server")
            .env("CODEX_HOME", bed.home.path())
            .current_dir(bed.home.workspace());
        let stderr = bed.stderr_file("legacy.stderr");
        // rmcp offers 2026-07-28 by default, which this server does not know.
        let client = connect(cmd, stderr, ProtocolVersion::V_2025_06_18).await;
        if let Some(info) = client.peer_info() {
            let server = info.server_info.as_ref();
            println!(
                "legacy mcp-server: protocol {}, {}",
                info.protocol_version,
                server.map_or(String::new(), |s| format!("{} {}", s.name, s.version))
            );
        }
        let reply = legacy_reply_tool(&client).await;
        let driver = Driver::Legacy {
            client,
            reply,
            thread: String::new(),
        };
        Self::new("legacy codex mcp-server", OLD, bed, driver)
    }

    fn new(name: &'static str, version: &'static str, bed: Bed, driver: Driver) -> Self {
        Self {
            name,
            version,
            bed,
            driver,
            times: Vec::with_capacity(TURNS),
        }
    }

    /// Runs one scripted turn, in a new session when `new_session`, and returns how long it
    /// took from the call that starts it to knowing that it completed.
    async fn turn(&mut self, new_session: bool) -> Duration {
        let n = self.bed.scripted;
        let prompt = self.bed.next_turn();
        let cwd = self.bed.cwd();
        let started = Instant::now();
        match &mut self.driver {
            Driver::Relay {
                client,
                session,
                cursor,
                turns,
                polls,
                attention,
            } => {
                if new_session {
                    let args = json!({"prompt": prompt, "workingDirectory": cwd,
                        "approvalPolicy": "never", "sandbox": "workspace-write"});
                    let out = call(client, "codex_start", args).await;
                    *session = out["sessionId"].as_str().expect("sessionId").to_owned();
                    (*cursor, *turns) = (0, 0);
                } else {
                    let args = json!({"sessionId": session, "message": prompt});
                    call(client, "codex_say", args).await;
                }
                *turns += 1;
                // Long-poll from the last cursor until the session is done with this turn.
                loop {
                    let mut args = json!({"sessionId": session, "cursor": cursor, "waitMs": 30000});
                    if *attention {
                        args["until"] = json!("attention");
                    }
                    let st = call(client, "codex_status", args).await;
                    *polls += 1;
                    *cursor = st["nextCursor"].as_u64().unwrap_or(*cursor);
                    let status = st["status"].as_str().unwrap_or_default();
                    assert!(
                        !matches!(status, "error" | "failed" | "closed"),
                        "relay session {status}: {}",
                        st["error"]
                    );
                    if status == "done" && st["turnCount"].as_u64() == Some(*turns) {
                        break;
                    }
                    assert!(started.elapsed() < TURN_TIMEOUT, "relay turn {n}: {st}");
                }
            }
            Driver::Engine { relay, session } => {
                use codex_relay_core::{CreateOptions, SayInput, SessionStatus};
                if new_session {
                    let opts = CreateOptions {
                        cwd: Some(cwd.clone()),
                        approval_policy: Some(ApprovalPolicy::Never),
                        sandbox: Some(SandboxMode::WorkspaceWrite),
                        ..Default::default()
                    };
                    let (h, _) = relay.create(opts).await.expect("create");
                    *session = h.id().to_owned();
                }
                relay
                    .say(session, SayInput::text(prompt))
                    .await
                    .expect("say");
                loop {
                    let snap = relay.status(session).expect("status");
                    if snap.status == SessionStatus::Idle {
                        break;
                    }
                    assert!(
                        !matches!(snap.status, SessionStatus::Error),
                        "engine turn failed"
                    );
                    relay
                        .wait(session, snap.last_seq, TURN_TIMEOUT)
                        .await
                        .expect("wait");
                }
            }
            Driver::Floor { server, thread } => {
                if new_session || thread.is_none() {
                    let params = ThreadStartParams {
                        cwd: Some(cwd),
                        approval_policy: Some(ApprovalPolicy::Never),
                        sandbox: Some(SandboxMode::WorkspaceWrite),
                        ..Default::default()
                    };
                    let id = server.thread_start(&params).await.expect("thread/start");
                    let sub = server.subscribe_thread(&id.thread.id);
                    *thread = Some((id.thread.id, sub));
                }
                let (id, sub) = thread.as_mut().expect("a thread");
                let params = TurnStartParams {
                    thread_id: id.clone(),
                    input: vec![UserInput::text(prompt)],
                    ..Default::default()
                };
                let turn = server.turn_start(&params).await.expect("turn/start").turn;
                wait_turn_completed(sub, &turn.id).await;
            }
            Driver::Legacy {
                client,
                reply,
                thread,
            } => {
                let out = if new_session {
                    let args = json!({"prompt": prompt, "approval-policy": "never",
                        "sandbox": "workspace-write", "cwd": cwd});
                    let out = call(client, "codex", args).await;
                    *thread = ["threadId", "conversationId"]
                        .iter()
                        .find_map(|k| out[*k].as_str())
                        .unwrap_or_else(|| panic!("no thread id in {out}"))
                        .to_owned();
                    out
                } else {
                    let mut args = Map::new();
                    args.insert("prompt".into(), prompt.into());
                    args.insert(reply.1.into(), thread.clone().into());
                    call(client, &reply.0, Value::Object(args)).await
                };
                let text = out["content"].to_string();
                assert!(
                    text.contains(&format!("done {n}")),
                    "legacy turn {n}: {out}"
                );
            }
        }
        started.elapsed()
    }

    /// Stops the server and checks that every scripted turn really ran its command.
    async fn close(self) -> (&'static str, &'static str, Vec<Duration>) {
        if let Driver::Relay { polls, .. } = &self.driver {
            let per_turn = *polls as f64 / (TURNS + 1) as f64;
            println!(
                "{} {}: {per_turn:.1} codex_status calls per turn",
                self.name, self.version
            );
        }
        match self.driver {
            Driver::Relay { client, .. } | Driver::Legacy { client, .. } => {
                let _ = client.cancel().await;
            }
            Driver::Floor { server, .. } => {
                server.shutdown(Duration::from_secs(2)).await;
            }
            Driver::Engine { relay, .. } => relay.shutdown().await,
        }
        self.bed.check(&format!("{} {}", self.name, self.version));
        (self.name, self.version, self.times)
    }
}

async fn wait_turn_completed(sub: &mut Subscription, turn_id: &str) {
    loop {
        let event = tokio::time::timeout(TURN_TIMEOUT, sub.recv())
            .await
            .unwrap_or_else(|_| panic!("floor: no turn/completed within {TURN_TIMEOUT:?}"))
            .expect("subscription open");
        match event {
            PeerEvent::Notification(n) => {
                if let ServerNotification::TurnCompleted(t) = &n.notification {
                    assert_eq!(t.turn.id, turn_id);
                    assert_eq!(t.turn.status, TurnStatus::Completed, "{:?}", t.turn.error);
                    return;
                }
            }
            PeerEvent::Request(r) => panic!("unexpected server request {:?}", r.request()),
            PeerEvent::Closed(e) => panic!("app-server closed: {e}"),
        }
    }
}

/// The legacy server's reply tool and the name of its thread argument (`threadId`, or
/// `conversationId` on servers that only know that), read from its tool list.
async fn legacy_reply_tool(client: &Client) -> (String, &'static str) {
    let tools = client.list_all_tools().await.expect("tools/list");
    let props = |name: &str| -> Vec<String> {
        tools
            .iter()
            .find(|t| t.name == name)
            .and_then(|t| t.input_schema.get("properties")?.as_object().cloned())
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default()
    };
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    println!("legacy mcp-server tools: {names:?}");
    println!("  codex {{{}}}", props("codex").join(", "));
    let reply = ["codex-reply", "codex_reply"]
        .into_iter()
        .find(|n| names.contains(n))
        .expect("a reply tool")
        .to_owned();
    let reply_props = props(&reply);
    println!("  {reply} {{{}}}", reply_props.join(", "));
    let key = if reply_props.iter().any(|p| p == "threadId") {
        "threadId"
    } else {
        "conversationId"
    };
    (reply, key)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let binary = relay_binary();
    println!("codex-relay binary: {}", binary.display());
    let mut arrangements = vec![
        Arrangement::relay(&binary, NEW, true).await,
        Arrangement::floor(NEW).await,
        Arrangement::relay(&binary, OLD, true).await,
        Arrangement::floor(OLD).await,
        Arrangement::legacy().await,
        Arrangement::relay(&binary, NEW, false).await,
        Arrangement::engine(NEW).await,
    ];
    // One warm-up turn each, in a session of its own (starts Codex behind the relay).
    for a in &mut arrangements {
        a.turn(true).await;
    }
    // Round k runs turn k of every arrangement, one at a time, starting with a different
    // arrangement each round: load from elsewhere on the machine hits them all alike.
    let count = arrangements.len();
    for k in 0..TURNS {
        for j in 0..count {
            let a = &mut arrangements[(j + k) % count];
            let took = a.turn(k == 0).await;
            a.times.push(took);
        }
    }
    let mut results = Vec::new();
    for a in arrangements {
        results.push(a.close().await);
    }

    println!();
    println!(
        "{TURNS} one-command turns per arrangement, sequential in one session (after one warm-up \
         turn in another), arrangements interleaved turn by turn; ms per turn:"
    );
    println!(
        "{:<24} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>10}",
        "arrangement",
        "codex",
        "mean",
        "median",
        "min",
        "p95",
        "max",
        "turn 1",
        format!("mean 2..{TURNS}")
    );
    let mut table = Vec::new();
    for (name, version, times) in &results {
        let s = stats(times);
        let rest = stats(&times[1..]);
        println!(
            "{name:<24} {version:>8} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>10.2}",
            s.mean,
            s.median,
            s.min,
            s.p95,
            s.max,
            ms(times[0]),
            rest.mean
        );
        table.push(s);
    }
    println!();
    for (i, version) in [(0, "0.169"), (2, "0.98")] {
        let (relay, floor) = (&table[i], &table[i + 1]);
        let paired: Vec<f64> = (results[i].2.iter().zip(&results[i + 1].2))
            .map(|(r, f)| ms(*r) - ms(*f))
            .collect();
        println!(
            "relay-vs-floor ({version}): {:+.2} ms/turn (target <= 2 ms); medians {:+.2} ms; \
             median of paired differences {:+.2} ms; ratio {:.3}",
            relay.mean - floor.mean,
            relay.median - floor.median,
            median(paired),
            relay.mean / floor.mean
        );
    }
    let (relay, floor, legacy) = (&table[2], &table[3], &table[4]);
    println!(
        "relay vs legacy mcp-server (0.98): ratio {:.2} (target: faster; relay mean / legacy mean, \
         {:+.2} ms/turn; ratio of medians {:.2})",
        relay.mean / legacy.mean,
        relay.mean - legacy.mean,
        relay.median / legacy.median
    );
    println!(
        "legacy mcp-server vs floor (0.98): {:+.2} ms/turn; ratio {:.2}",
        legacy.mean - floor.mean,
        legacy.mean / floor.mean
    );
    let (engine, floor) = (&table[6], &table[1]);
    println!(
        "engine in-process vs floor (0.169): {:+.2} ms/turn; medians {:+.2} ms",
        engine.mean - floor.mean,
        engine.median - floor.median
    );
    let (woken, floor) = (&table[5], &table[1]);
    println!(
        "relay waking on every event vs floor (0.169): {:+.2} ms/turn; medians {:+.2} ms",
        woken.mean - floor.mean,
        woken.median - floor.median
    );

    let mut cold = Vec::with_capacity(COLD_STARTS);
    for _ in 0..COLD_STARTS {
        cold.push(cold_start(&binary).await);
    }
    let s = stats(&cold);
    println!();
    println!(
        "cold start of `codex-relay mcp` to the initialize response ({COLD_STARTS} runs, fresh \
         store): min {:.2} ms, median {:.2} ms, p95 {:.2} ms, max {:.2} ms (target < 50 ms)",
        s.min, s.median, s.p95, s.max
    );
}
