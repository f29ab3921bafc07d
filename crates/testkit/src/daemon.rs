//! A Codex daemon (`codex app-server daemon start`) in a test's own `CODEX_HOME`, stopped with
//! everything it started (the daemon and the updater loop `daemon stop` leaves running) when
//! dropped; and [`TuiClient`], a plain WebSocket JSON-RPC client of its socket standing in for
//! the `codex` TUI.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::CodexHome;

/// A running daemon of one test.
pub struct TestDaemon {
    bin: PathBuf,
    codex_home: PathBuf,
    user_home: PathBuf,
    /// The ordinary user it runs as ([`TestDaemon::start_as`]), else the tests' own.
    user: Option<crate::ordinary::Ordinary>,
    /// What `daemon start` printed (status, pid, socketPath, ...).
    pub started: Value,
}

impl TestDaemon {
    /// Starts the daemon of `version` in `home` (with an empty `HOME`).
    pub fn start(version: &str, home: &CodexHome) -> Result<TestDaemon, String> {
        let bin = crate::codex_bin(version).map_err(|e| e.to_string())?;
        Self::launch(bin, home, None)
    }

    /// Starts the daemon of `version` in `home` as the ordinary test user (`home` made for
    /// that user: [`crate::ordinary::Ordinary::home`]), as a relay run by that user finds it.
    pub fn start_as(
        version: &str,
        home: &CodexHome,
        user: &crate::ordinary::Ordinary,
    ) -> Result<TestDaemon, String> {
        Self::launch(user.codex(version), home, Some(user.clone()))
    }

    fn launch(
        bin: PathBuf,
        home: &CodexHome,
        user: Option<crate::ordinary::Ordinary>,
    ) -> Result<TestDaemon, String> {
        let user_home = home.root().join("daemon-user-home");
        std::fs::create_dir_all(&user_home).map_err(|e| e.to_string())?;
        if let Some(user) = &user {
            user.chown(&user_home);
        }
        let mut daemon = TestDaemon {
            bin,
            codex_home: home.path().to_owned(),
            user_home,
            user,
            started: Value::Null,
        };
        let out = daemon.run(&["app-server", "daemon", "start"])?;
        daemon.started = out
            .lines()
            .rev()
            .find_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["status"].is_string())
            .ok_or_else(|| format!("`daemon start` printed no status: {out}"))?;
        Ok(daemon)
    }

    fn run(&self, args: &[&str]) -> Result<String, String> {
        let mut cmd = Command::new(&self.bin);
        cmd.args(args)
            .env("CODEX_HOME", &self.codex_home)
            .env("HOME", &self.user_home)
            .stdin(Stdio::null());
        if let Some(user) = &self.user {
            user.apply_std(&mut cmd, &self.user_home);
        }
        let out = cmd.output().map_err(|e| format!("{args:?}: {e}"))?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() {
            return Err(format!(
                "{args:?} failed ({}): {text}{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(text)
    }

    /// The daemon's socket (the symbolic link under `CODEX_HOME`).
    pub fn socket(&self) -> PathBuf {
        self.started["socketPath"]
            .as_str()
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                self.codex_home
                    .join("app-server-control/app-server-control.sock")
            })
    }

    /// The daemon's app-server process.
    pub fn pid(&self) -> Option<u32> {
        self.started["pid"].as_u64().map(|p| p as u32)
    }

    /// Kills the daemon's app-server at once (SIGKILL), as a crash would.
    pub fn kill(&self) {
        if let Some(pid) = self.pid() {
            // SAFETY: kill(2) with a pid this test's daemon printed.
            unsafe {
                libc::kill(pid as i32, libc::SIGKILL);
            }
        }
    }

    /// Stops the daemon and every process started with this `CODEX_HOME` (the updater loop
    /// included), and waits until none is left.
    pub fn stop(&self) {
        let _ = self.run(&["app-server", "daemon", "stop"]);
        let entry = format!("CODEX_HOME={}", self.codex_home.display());
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let left = crate::procs::pids_with_env(&entry);
            if left.is_empty() || std::time::Instant::now() > deadline {
                break;
            }
            for pid in left {
                // SAFETY: kill(2) on processes of this test's CODEX_HOME.
                unsafe {
                    libc::kill(pid as i32, libc::SIGKILL);
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        self.stop();
    }
}

type Ws = tokio_tungstenite::WebSocketStream<tokio::net::UnixStream>;

/// A plain client of the daemon's socket (one JSON-RPC message per text frame), as the TUI
/// is: it keeps every message it has not been asked for yet.
pub struct TuiClient {
    ws: Ws,
    next_id: i64,
    unread: VecDeque<Value>,
}

impl TuiClient {
    /// Connects and initializes as `name`.
    pub async fn connect(socket: &Path, name: &str) -> TuiClient {
        // Through the link's target, as the TUI and the relay connect: `$CODEX_HOME/...` under
        // a long HOME is past a socket address's 108 bytes, the daemon's own directory is not.
        let real = std::fs::canonicalize(socket).expect("the daemon's socket resolves");
        let stream = tokio::net::UnixStream::connect(&real)
            .await
            .expect("connect to the daemon's socket");
        let (ws, _) = tokio_tungstenite::client_async("ws://localhost/", stream)
            .await
            .expect("WebSocket handshake with the daemon");
        let mut client = TuiClient {
            ws,
            next_id: 1,
            unread: VecDeque::new(),
        };
        client
            .request(
                "initialize",
                json!({"clientInfo": {"name": name, "title": name, "version": "0.0.0"},
                       "capabilities": {"experimentalApi": true}}),
            )
            .await
            .expect("initialize");
        client.send(json!({"method": "initialized"})).await;
        client
    }

    async fn send(&mut self, msg: Value) {
        self.ws
            .send(Message::text(msg.to_string()))
            .await
            .expect("send to the daemon");
    }

    async fn read(&mut self) -> Value {
        loop {
            let frame = tokio::time::timeout(Duration::from_secs(120), self.ws.next())
                .await
                .expect("the daemon said something within 120 s")
                .expect("the daemon's socket is open")
                .expect("a WebSocket frame");
            if let Message::Text(t) = frame {
                return serde_json::from_str(&t).expect("JSON from the daemon");
            }
        }
    }

    /// Sends a request and waits for its answer: `Ok(result)` or `Err(error)`.
    pub async fn request(&mut self, method: &str, params: Value) -> Result<Value, Value> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"id": id, "method": method, "params": params}))
            .await;
        loop {
            let msg = self.read().await;
            if msg["id"] == json!(id) && msg.get("method").is_none() {
                return match msg.get("error") {
                    Some(e) => Err(e.clone()),
                    None => Ok(msg["result"].clone()),
                };
            }
            self.unread.push_back(msg);
        }
    }

    /// Answers a server request.
    pub async fn respond(&mut self, id: &Value, result: Value) {
        self.send(json!({"id": id, "result": result})).await;
    }

    /// The first message (kept or new) for which `pick` holds; those before it stay kept.
    pub async fn until(&mut self, what: &str, pick: impl Fn(&Value) -> bool) -> Value {
        if let Some(at) = self.unread.iter().position(&pick) {
            return self.unread.remove(at).expect("found");
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
        loop {
            let msg = tokio::time::timeout_at(deadline, self.read())
                .await
                .unwrap_or_else(|_| panic!("waited 180 s for {what}"));
            if pick(&msg) {
                return msg;
            }
            self.unread.push_back(msg);
        }
    }
}
