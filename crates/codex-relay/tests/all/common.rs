//! Set-up for the MCP front tests: the scripted model and a fresh CODEX_HOME, codex-relay
//! serving MCP (the client spawns `codex-relay mcp`, or the test runs `codex-relay serve`), and
//! a real MCP client (the official Node or Python SDK) driven one JSON command at a time.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use codex_relay_testkit::ordinary::Ordinary;
use codex_relay_testkit::{CodexHome, ModelServer};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

pub const RELAY: &str = env!("CARGO_BIN_EXE_codex-relay");
/// One driver command (a tool call may wait up to its own waitMs) at most.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(150);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sdk {
    Node,
    /// The Python SDK as it connects by default (2026-07-28 when the server offers it).
    Python,
    /// The Python SDK pinned to the `initialize` handshake (`mode="legacy"`: 2025-11-25).
    PythonLegacy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Stdio,
    Http,
}

fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("clients")
}

/// The engine flags every test passes to `codex-relay mcp` / `serve`.
pub fn engine_args(codex: &Path, home: &CodexHome, approval_timeout_ms: u64) -> Vec<String> {
    vec![
        "--codex".into(),
        codex.display().to_string(),
        "--codex-home".into(),
        home.path().display().to_string(),
        "--db".into(),
        home.root().join("relay.db").display().to_string(),
        "--data-dir".into(),
        home.root().join("relay-data").display().to_string(),
        "--approval-timeout-ms".into(),
        approval_timeout_ms.to_string(),
    ]
}

/// The environment a stdio-spawned relay gets (SDKs pass only what they are given).
pub fn relay_env() -> Value {
    let mut env = serde_json::Map::new();
    for key in ["PATH", "HOME", "TMPDIR", "RUST_LOG"] {
        if let Ok(v) = std::env::var(key) {
            env.insert(key.into(), json!(v));
        }
    }
    env.insert(
        "LOG_LEVEL".into(),
        json!(std::env::var("LOG_LEVEL").unwrap_or_else(|_| "info".into())),
    );
    Value::Object(env)
}

/// `codex-relay serve` on a random loopback port; killed (with its Codex) on drop. Its stderr
/// is echoed and kept in `log`.
pub struct HttpRelay {
    pub url: String,
    pub log: Arc<Mutex<Vec<String>>>,
    child: Child,
    /// Reads stderr into `log` until EOF; `stop` waits for it so the last lines are kept.
    reader: tokio::task::JoinHandle<()>,
}

impl HttpRelay {
    pub async fn start(args: Vec<String>) -> HttpRelay {
        let mut cmd = Command::new(RELAY);
        // The token `serve` requires (unless the test serves without one).
        if !args.iter().any(|a| a == "--no-auth") {
            cmd.env("CODEX_RELAY_TOKEN", codex_relay_testkit::RELAY_TEST_TOKEN);
        }
        cmd.arg("serve")
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .env(
                "LOG_LEVEL",
                std::env::var("LOG_LEVEL").unwrap_or_else(|_| "info".into()),
            );
        Self::spawn(cmd).await
    }

    /// `codex-relay serve` with exactly this environment (nothing inherited) and these args.
    pub async fn start_with_env(args: &[&str], env: &[(&str, String)]) -> HttpRelay {
        let mut cmd = Command::new(RELAY);
        cmd.arg("serve").args(args).env_clear();
        // The token `serve` requires, unless the test brings its own or serves without one.
        if !args.contains(&"--no-auth") && !env.iter().any(|(k, _)| *k == "CODEX_RELAY_TOKEN") {
            cmd.env("CODEX_RELAY_TOKEN", codex_relay_testkit::RELAY_TEST_TOKEN);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        Self::spawn(cmd).await
    }

    /// `codex-relay serve` as the ordinary test user ([`Bed::ordinary`]), with exactly this
    /// environment plus `HOME` (the bed's `user-home`), `USER` and a `PATH` of the system's
    /// directories only (root's own may not be reachable by that user).
    pub async fn start_ordinary(bed: &Bed, args: &[&str], env: &[(&str, String)]) -> HttpRelay {
        let user = Ordinary::get().expect("Bed::ordinary made the user");
        let mut cmd = Command::new(user.exe(Path::new(RELAY)));
        cmd.arg("serve").args(args).env_clear();
        if !args.contains(&"--no-auth") && !env.iter().any(|(k, _)| *k == "CODEX_RELAY_TOKEN") {
            cmd.env("CODEX_RELAY_TOKEN", codex_relay_testkit::RELAY_TEST_TOKEN);
        }
        cmd.env("PATH", "/usr/local/bin:/usr/bin:/bin");
        for (k, v) in env {
            cmd.env(k, v);
        }
        user.apply(&mut cmd, &bed.home.root().join("user-home"));
        Self::spawn(cmd).await
    }

    async fn spawn(mut cmd: Command) -> HttpRelay {
        let mut child = cmd
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn codex-relay serve");
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let echo = codex_relay_testkit::echo::Echo::new("relay");
        let kept = log.clone();
        let url = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(line) = lines.next_line().await.unwrap() {
                echo.line(&line);
                kept.lock().unwrap().push(line.clone());
                if let Some(url) = line.split("MCP at ").nth(1) {
                    return url.trim().to_owned();
                }
            }
            panic!(
                "codex-relay serve exited before listening: {:?}",
                kept.lock().unwrap()
            )
        })
        .await
        .expect("codex-relay serve listens within 30 s");
        let kept = log.clone();
        let reader = tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                echo.line(&line);
                kept.lock().unwrap().push(line);
            }
        });
        HttpRelay {
            url,
            log,
            child,
            reader,
        }
    }

    /// The stderr lines so far, joined.
    pub fn log_text(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    pub fn pid(&self) -> u32 {
        self.child.id().expect("running")
    }

    /// SIGKILL, as a crash: nothing runs on the way out.
    pub async fn crash(mut self) {
        // SAFETY: signalling our own child.
        unsafe {
            libc::kill(self.pid() as i32, libc::SIGKILL);
        }
        let _ = self.child.wait().await;
    }

    /// SIGTERM, as a service manager would stop it; waits for the exit, then for its stderr to
    /// be read to the end (the process can exit before the reader has taken its last lines).
    pub async fn stop(mut self) -> std::process::ExitStatus {
        if let Some(pid) = self.child.id() {
            // SAFETY: signalling our own child.
            unsafe {
                libc::kill(pid as i32, libc::SIGTERM);
            }
        }
        let status = tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .expect("codex-relay serve stops within 10 s of SIGTERM")
            .expect("wait");
        // A descendant still holding stderr would keep it open: bounded, and said.
        if tokio::time::timeout(Duration::from_secs(10), &mut self.reader)
            .await
            .is_err()
        {
            eprintln!("serve's stderr stayed open 10 s after it exited (a descendant holds it)");
        }
        status
    }
}

/// A real MCP client process, driven one JSON command per line.
pub struct Driver {
    pub sdk: Sdk,
    child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
}

impl Driver {
    pub async fn spawn(sdk: Sdk) -> Driver {
        let cmd = match sdk {
            Sdk::Node => {
                let dir = clients_dir().join("node");
                codex_relay_testkit::clients::npm_ci(&dir).expect("the Node MCP SDK installs");
                let mut c = Command::new("node");
                c.arg(dir.join("driver.mjs"));
                c
            }
            Sdk::Python | Sdk::PythonLegacy => {
                let dir = clients_dir().join("python");
                let python =
                    codex_relay_testkit::clients::python_env(&dir.join("requirements.txt"))
                        .expect("the Python MCP SDK installs");
                let mut c = Command::new(python);
                c.arg(dir.join("driver.py"));
                c
            }
        };
        Driver::start(sdk, cmd)
    }

    /// Starts a driver process `cmd` (a client of `sdk`) that speaks one JSON command per
    /// line.
    pub fn start(sdk: Sdk, mut cmd: Command) -> Driver {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn the MCP client driver");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        Driver {
            sdk,
            child,
            stdin,
            stdout,
        }
    }

    /// Sends one command; returns its `value`, panicking on a driver error.
    pub async fn cmd(&mut self, command: Value) -> Value {
        let mut line = command.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).await.unwrap();
        let answer = tokio::time::timeout(COMMAND_TIMEOUT, self.stdout.next_line())
            .await
            .unwrap_or_else(|_| panic!("the {:?} driver did not answer {command}", self.sdk))
            .unwrap()
            .unwrap_or_else(|| panic!("the {:?} driver exited during {command}", self.sdk));
        let answer: Value = serde_json::from_str(&answer).expect("driver answers JSON");
        assert_eq!(answer["ok"], true, "driver failed on {command}: {answer}");
        answer["value"].clone()
    }

    /// Connects over `transport` to a relay started with `args` (stdio) or at `url` (HTTP).
    pub async fn connect(&mut self, transport: Transport, args: &[String], url: &str) -> Value {
        let mut cmd = match transport {
            Transport::Stdio => {
                let mut all = vec!["mcp".to_owned()];
                all.extend_from_slice(args);
                json!({"op": "connect", "transport": "stdio", "command": RELAY, "args": all, "env": relay_env()})
            }
            Transport::Http => json!({"op": "connect", "transport": "http", "url": url,
                "headers": {"Authorization": format!("Bearer {}", codex_relay_testkit::RELAY_TEST_TOKEN)}}),
        };
        if self.sdk == Sdk::PythonLegacy {
            cmd["mode"] = json!("legacy");
        }
        self.cmd(cmd).await
    }

    /// Connects over HTTP sending `token` (one `serve` made itself, say).
    pub async fn connect_http_with_token(&mut self, url: &str, token: &str) -> Value {
        let mut cmd = json!({"op": "connect", "transport": "http", "url": url,
            "headers": {"Authorization": format!("Bearer {token}")}});
        if self.sdk == Sdk::PythonLegacy {
            cmd["mode"] = json!("legacy");
        }
        self.cmd(cmd).await
    }

    /// Calls a tool; the answer has `isError`, `structured`, `text`, `progress`, `ms` (or
    /// `thrown` for a protocol-level failure).
    pub async fn call(&mut self, tool: &str, args: Value) -> Value {
        self.cmd(json!({"op": "call", "tool": tool, "args": args}))
            .await
    }

    /// Calls a tool that must succeed; returns its structured content.
    pub async fn ok(&mut self, tool: &str, args: Value) -> Value {
        let r = self.call(tool, args.clone()).await;
        assert!(
            r.get("thrown").is_none() && r["isError"] == false,
            "{tool} {args} failed: {r}"
        );
        r["structured"].clone()
    }

    /// Polls `codex_status` with long waits until `done` holds; returns the last status and
    /// every event seen since `cursor`.
    pub async fn status_until(
        &mut self,
        session: &str,
        timeout: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> (Value, Vec<Value>) {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut cursor = 0;
        let mut events = Vec::new();
        // `waitMs` returns at once when no turn runs: then wait a little longer each time, so
        // a condition that never comes costs a few polls a second, not thousands.
        let mut idle = Duration::from_millis(50);
        loop {
            let s = self
                .ok(
                    "codex_status",
                    json!({"sessionId": session, "cursor": cursor, "waitMs": 5000}),
                )
                .await;
            let new = s["events"].as_array().cloned().unwrap_or_default();
            let quiet = new.is_empty();
            events.extend(new);
            cursor = s["nextCursor"].as_u64().expect("nextCursor");
            if done(&s) {
                return (s, events);
            }
            if quiet {
                tokio::time::sleep(idle).await;
                idle = (idle * 2).min(Duration::from_secs(1));
            } else {
                idle = Duration::from_millis(50);
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "session {session} did not get there in {timeout:?}; last status: {s}"
            );
        }
    }

    pub async fn close(mut self) {
        let _ = self.cmd(json!({"op": "close"})).await;
        drop(self.stdin);
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
    }
}

/// A fake `codex` that reports a supported version and then runs `app_server` as its body.
pub fn fake_codex(dir: &Path, name: &str, app_server: &str, mode: u32) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    let script = format!(
        "#!/bin/sh\nif [ \"$1\" = \"--version\" ]; then echo 'codex-cli 0.169.0'; exit 0; fi\n{app_server}\n"
    );
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

/// The body of a fake `codex app-server` that prints something other than JSON-RPC and exits:
/// every start of it fails, naming its first line (`Welcome to not-codex!`).
pub const GARBAGE: &str = "echo 'Welcome to not-codex!'\necho '{\"id\": oops'\nexit 3";

/// The scripted model and a fresh CODEX_HOME.
pub struct Bed {
    pub model: ModelServer,
    pub home: CodexHome,
    pub codex: PathBuf,
}

impl Bed {
    pub async fn start(version: &str) -> Bed {
        Self::with_toml(version, "").await
    }

    /// With extra top-level `config.toml` text (profiles, ...).
    pub async fn with_toml(version: &str, extra_toml: &str) -> Bed {
        let model = ModelServer::start().await;
        let opts = codex_relay_testkit::HomeOptions {
            extra_toml: extra_toml.into(),
            ..Default::default()
        };
        let home = CodexHome::with_options(model.url(), &opts);
        let codex = codex_relay_testkit::codex_bin(version).expect("pinned Codex installs");
        Bed { model, home, codex }
    }

    /// As [`Bed::with_toml`], for a relay run as the ordinary test user
    /// ([`codex_relay_testkit::ordinary`]): its Codex and `CODEX_HOME` where that user can
    /// reach them, the home owned by it, and a `HOME` of its own (`user-home` in the root).
    /// `Err` says why there is no such user (the caller skips loudly).
    pub async fn ordinary(version: &str, extra_toml: &str) -> Result<Bed, String> {
        let user = Ordinary::get()?;
        let model = ModelServer::start().await;
        let opts = codex_relay_testkit::HomeOptions {
            extra_toml: extra_toml.into(),
            ..Default::default()
        };
        let home = user.home(model.url(), &opts);
        std::fs::create_dir_all(home.root().join("user-home")).expect("the user's HOME");
        user.chown(home.root());
        let codex = user.codex(version);
        Ok(Bed { model, home, codex })
    }

    pub fn args(&self, approval_timeout_ms: u64) -> Vec<String> {
        engine_args(&self.codex, &self.home, approval_timeout_ms)
    }

    /// Asserts that no process started with this test's CODEX_HOME is left (Codex and what it
    /// ran), waiting up to 5 s for them to go.
    pub async fn assert_no_codex_left(&self) {
        let entry = format!("CODEX_HOME={}", self.home.path().display());
        let left = codex_relay_testkit::procs::wait_env_gone(&entry, Duration::from_secs(5)).await;
        let what: Vec<String> = left
            .iter()
            .map(|p| {
                std::fs::read_to_string(format!("/proc/{p}/cmdline"))
                    .unwrap_or_default()
                    .replace('\0', " ")
                    .chars()
                    .take(120)
                    .collect()
            })
            .collect();
        assert!(left.is_empty(), "processes left behind: {left:?} {what:?}");
    }
}

/// Calls a tool through an rmcp client; the call must succeed; returns its structured content.
pub async fn rmcp_call<H: rmcp::ClientHandler>(
    client: &rmcp::service::RunningService<rmcp::RoleClient, H>,
    tool: &str,
    args: Value,
) -> Value {
    let params = rmcp::model::CallToolRequestParams::new(tool.to_owned())
        .with_arguments(args.as_object().cloned().unwrap());
    let result = client.call_tool(params).await.expect("tools/call");
    assert_ne!(result.is_error, Some(true), "{tool}: {:?}", result.content);
    result.structured_content.expect("structured content")
}

/// Long-polls `codex_status` through an rmcp client until the session is done (90 s at most);
/// returns that status.
pub async fn rmcp_until_done<H: rmcp::ClientHandler>(
    client: &rmcp::service::RunningService<rmcp::RoleClient, H>,
    session: &str,
) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        let s = rmcp_call(
            client,
            "codex_status",
            json!({"sessionId": session, "waitMs": 10000, "until": "attention", "cursor": 0}),
        )
        .await;
        if s["status"] == "done" {
            return s;
        }
        assert!(tokio::time::Instant::now() < deadline, "no end: {s}");
    }
}
