//! The bed of the brake tests (`brake.rs`): a relay run as the ordinary test user over the real
//! Codex, its token leaked into the workspace's `.env` (as people leave them), `attack.py` beside
//! it, and sessions whose scripted model runs one way of reaching the relay's API from inside.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::common::{Bed, HttpRelay};
use crate::http_support::Client;
use codex_relay_testkit::{RELAY_TEST_TOKEN, Reply};
use serde_json::{Value, json};

pub const TURN: Duration = Duration::from_secs(120);
const ATTACK: &str = include_str!("attack.py");

/// What one attempt got: `RESULT <label> <status> <body>` in the script's output.
#[derive(Debug, Clone)]
pub struct Attempt {
    pub label: String,
    pub status: String,
    pub body: String,
}

pub struct Brake {
    pub bed: Bed,
    pub relay: HttpRelay,
    pub client: Client,
    pub ws: PathBuf,
}

/// The session settings of a command with network access in the workspace sandbox (writes
/// outside the workspace blocked, `/tmp` included).
pub fn sandboxed_with_network() -> Value {
    json!({"approvalPolicy": "never", "sandbox": "workspace-write",
        "config": {"sandbox_workspace_write.network_access": true,
            "sandbox_workspace_write.exclude_slash_tmp": true,
            "sandbox_workspace_write.exclude_tmpdir_env_var": true}})
}

/// No sandbox at all.
pub fn unsandboxed() -> Value {
    json!({"approvalPolicy": "never", "sandbox": "danger-full-access"})
}

/// One address of this machine's own beyond loopback, of the family asked.
pub fn own_address(v6: bool) -> Option<IpAddr> {
    codex_relay_testkit::addrs::own_addresses()
        .into_iter()
        .find(|ip| ip.is_ipv6() == v6)
}

impl Brake {
    /// A relay (token required) listening on `listen`, as the ordinary user. `None`: there is
    /// no such user here (skipped loudly).
    pub async fn start(listen: &str, approval_timeout_ms: u64) -> Option<Brake> {
        let bed = match Bed::ordinary(codex_relay_testkit::NEWEST, "").await {
            Ok(bed) => bed,
            Err(why) => {
                codex_relay_testkit::skip::skip(why);
                return None;
            }
        };
        let relay = start_relay(&bed, listen, false, approval_timeout_ms, "relay-data").await;
        let client = Client::new(&relay.url);
        let ws = bed.home.workspace().to_path_buf();
        std::fs::write(ws.join("attack.py"), ATTACK).unwrap();
        std::fs::write(
            ws.join(".env"),
            format!("CODEX_RELAY_TOKEN={RELAY_TEST_TOKEN}\n"),
        )
        .unwrap();
        Some(Brake {
            bed,
            relay,
            client,
            ws,
        })
    }

    /// The relay's host and port, as the script takes them.
    pub fn host_port(&self) -> (String, u16) {
        host_port(&self.relay)
    }

    /// The number of sessions the relay started (not the threads of its `CODEX_HOME` other
    /// clients made).
    pub async fn sessions(&self) -> usize {
        owned_sessions(&self.client).await
    }

    /// Starts a session (`settings` plus the prompt and the workspace) whose model runs
    /// `command` and ends its turn; returns the session's id once the turn is over (the
    /// command's output is in the workspace).
    pub async fn run(&self, marker: &str, command: &str, settings: Value) -> String {
        self.bed.model.route(
            marker,
            [
                Reply::exec(command, &format!("call-{marker}")),
                Reply::text("tried"),
            ],
        );
        let mut body = settings;
        body["prompt"] = json!(format!("{marker}: go"));
        body["cwd"] = json!(self.ws);
        let r = self.client.post("/api/sessions", &body).await;
        assert_eq!(r.status, 201, "{}", r.text());
        let id = r.json()["sessionId"].as_str().unwrap().to_owned();
        let mut s = self
            .client
            .stream(&format!("/api/sessions/{id}/stream"), &[])
            .await;
        s.until(TURN, |e| {
            e.event == "envelope"
                && e.json()["ev"]["t"] == "status"
                && matches!(
                    e.json()["ev"]["status"].as_str(),
                    Some("idle" | "error" | "interrupted" | "closed")
                )
        })
        .await;
        id
    }

    /// The shell command that runs `attack.py WAY HOST PORT [args]` into `WAY.txt` and waits
    /// (bounded) for its `END` line: some ways leave the first process before the end.
    pub fn command(way: &str, args: &[String]) -> String {
        format!(
            "python3 attack.py {way} {} > {way}.txt 2>&1; \
             for i in $(seq 1 300); do grep -q '^END' {way}.txt && break; sleep 0.1; done; cat {way}.txt",
            args.join(" ")
        )
    }

    /// What `attack.py` printed into `file` in the workspace.
    pub fn output(&self, file: &str) -> String {
        std::fs::read_to_string(self.ws.join(file)).unwrap_or_default()
    }

    /// The attempts printed into `file`.
    pub fn attempts(&self, file: &str) -> Vec<Attempt> {
        parse_attempts(&self.output(file))
    }
}

/// `codex-relay serve` as the ordinary user for `bed` on `listen`, with the test token or
/// `--no-auth`, its data in `data` under the bed's root.
pub async fn start_relay(
    bed: &Bed,
    listen: &str,
    no_auth: bool,
    approval_timeout_ms: u64,
    data: &str,
) -> HttpRelay {
    let mut args = bed.args(approval_timeout_ms);
    args.extend(["--listen", listen].map(String::from));
    if no_auth {
        args.push("--no-auth".into());
    }
    // A relay of its own: its own store and data directory.
    let at = |flag: &str, value: PathBuf| {
        let i = args.iter().position(|a| a == flag).unwrap();
        (i + 1, value.display().to_string())
    };
    for (i, v) in [
        at("--db", bed.home.root().join(format!("{data}.db"))),
        at("--data-dir", bed.home.root().join(data)),
    ] {
        args[i] = v;
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    HttpRelay::start_ordinary(bed, &args, &[("LOG_LEVEL", "info".into())]).await
}

/// The number of sessions the relay behind `client` started.
pub async fn owned_sessions(client: &Client) -> usize {
    let r = client.get("/api/sessions").await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["owned"] == true)
        .count()
}

pub fn host_port(relay: &HttpRelay) -> (String, u16) {
    let addr: std::net::SocketAddr = relay
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .parse()
        .unwrap();
    (addr.ip().to_string(), addr.port())
}

pub fn parse_attempts(out: &str) -> Vec<Attempt> {
    out.lines()
        .filter_map(|l| l.strip_prefix("RESULT "))
        .map(|l| {
            let mut parts = l.splitn(3, ' ');
            Attempt {
                label: parts.next().unwrap_or_default().to_owned(),
                status: parts.next().unwrap_or_default().to_owned(),
                body: parts.next().unwrap_or_default().to_owned(),
            }
        })
        .collect()
}

/// Asserts that every attempt labelled `label` (at least one) was refused as a peer, and
/// returns the reasons given.
pub fn assert_refused(attempts: &[Attempt], label: &str, out: &str) -> Vec<String> {
    let mine: Vec<&Attempt> = attempts.iter().filter(|a| a.label == label).collect();
    assert!(!mine.is_empty(), "no `{label}` attempt was made:\n{out}");
    mine.iter()
        .map(|a| {
            assert!(
                a.status == "403" && a.body.contains("forbidden_peer"),
                "`{label}` reached the relay: {a:?}\n{out}"
            );
            let v: Value = serde_json::from_str(&a.body).unwrap_or(Value::Null);
            v["error"]["message"]
                .as_str()
                .or(v["message"].as_str())
                .unwrap_or(&a.body)
                .to_owned()
        })
        .collect()
}
