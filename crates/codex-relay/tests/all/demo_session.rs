//! `serve --demo` on the real Codex: Codex knows the demo model, so a session's timeline starts
//! with the turn, not with Codex's warning that the model is unknown and fallback metadata is
//! used; the first turn reaches its file-change approval as the demo promises; a stop with a
//! page open and a restart at once keep the demo, and read as a stop.

use crate::common;

use std::process::Stdio;
use std::time::Duration;

use crate::http_support::Client;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_demo_session_starts_without_a_model_warning() {
    let codex = codex_relay_testkit::codex_bin(codex_relay_testkit::NEWEST).expect("pinned Codex");
    let data = tempfile::Builder::new()
        .prefix("demo-")
        .tempdir_in(codex_relay_testkit::install::cache_root())
        .unwrap();
    let mut child = tokio::process::Command::new(common::RELAY)
        .args(["serve", "--demo", "--listen", "127.0.0.1:0", "--codex"])
        .arg(&codex)
        .arg("--data-dir")
        .arg(data.path())
        .env("CODEX_RELAY_TOKEN", codex_relay_testkit::RELAY_TEST_TOKEN)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let echo = codex_relay_testkit::echo::Echo::new("relay");
    let url = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            echo.line(&line);
            if let Some(url) = line.split("MCP at ").nth(1) {
                return url.trim().to_owned();
            }
        }
        panic!("serve --demo exited before listening")
    })
    .await
    .expect("serve --demo listens within 60 s");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let c = Client::new(&url);
    let r = c
        .post(
            "/api/sessions",
            &json!({"prompt": "show me", "approvalPolicy": "untrusted", "sandbox": "workspace-write"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let mut s = c.stream(&format!("/api/sessions/{id}/stream"), &[]).await;
    s.until(Duration::from_secs(90), |e| e.event == "permission_request")
        .await;
    let events = c
        .get(&format!("/api/sessions/{id}/events?after=0&limit=1000"))
        .await
        .json();
    let all = events["events"].to_string();
    assert!(
        !all.contains("Model metadata") && !all.contains("fallback metadata"),
        "the demo model is known to Codex: {all}"
    );
    assert!(all.contains("\"turn-start\""), "{all}");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id().unwrap() as i32, libc::SIGTERM) };
    let _ = tokio::time::timeout(Duration::from_secs(20), child.wait()).await;
}

/// `serve --demo` kept in `data_dir`, listening on `listen`; its stderr echoed and kept.
struct Demo {
    child: tokio::process::Child,
    url: String,
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Demo {
    async fn start(codex: &std::path::Path, listen: &str, data_dir: &std::path::Path) -> Demo {
        let mut child = tokio::process::Command::new(common::RELAY)
            .args(["serve", "--demo", "--listen", listen, "--codex"])
            .arg(codex)
            .arg("--data-dir")
            .arg(data_dir)
            .env_remove("CODEX_RELAY_TOKEN")
            .env("LOG_LEVEL", "info")
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let echo = codex_relay_testkit::echo::Echo::new("relay");
        let kept = log.clone();
        let url = tokio::time::timeout(Duration::from_secs(60), async {
            let mut url = None;
            while let Some(line) = lines.next_line().await.unwrap() {
                echo.line(&line);
                kept.lock().unwrap().push(line.clone());
                if let Some(u) = line.split("MCP at ").nth(1) {
                    url = Some(u.trim().to_owned());
                }
                if line.contains("MCP over HTTP") {
                    return url.expect("the banner names the address");
                }
            }
            panic!("serve --demo exited before listening")
        })
        .await
        .expect("serve --demo listens within 60 s");
        let kept = log.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                echo.line(&line);
                kept.lock().unwrap().push(line);
            }
        });
        Demo { child, url, log }
    }

    fn log_text(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// The token the banner showed (a fresh demo makes one).
    fn fresh_token(&self) -> Option<String> {
        let log = self.log_text();
        let line = log
            .lines()
            .find(|l| l.contains("API token (shown only now"))?;
        line.split_whitespace().last().map(str::to_owned)
    }

    /// `signal`, then the exit status (a stop waits for nothing: 20 s is room, not a target).
    async fn stop(&mut self, signal: i32) -> std::process::ExitStatus {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id().unwrap() as i32, signal) };
        tokio::time::timeout(Duration::from_secs(20), self.child.wait())
            .await
            .expect("serve --demo stops within 20 s")
            .unwrap()
    }
}

/// Ctrl-C while a page follows a demo turn that waits for an approval: the relay stops without
/// waiting on the open stream, and starting it again at once at the same address works; the
/// demo kept its token, store and session; the stop is logged as what it is (the turn
/// cancelled because the relay stopped, its open tool call ended) and not as a Codex error,
/// and Codex's unread-marker bookkeeping is no event. A follow-up then runs in the new relay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_mid_turn_then_a_restart_at_once_resumes_a_clean_demo() {
    let codex = codex_relay_testkit::codex_bin(codex_relay_testkit::NEWEST).expect("pinned Codex");
    // Not under /tmp: Codex refuses some helpers in temporary directories.
    let base = codex_relay_testkit::install::cache_root().join("test-homes");
    std::fs::create_dir_all(&base).unwrap();
    let data = tempfile::Builder::new()
        .prefix("demo-restart-")
        .tempdir_in(&base)
        .unwrap();
    let mut relay = Demo::start(&codex, "127.0.0.1:0", data.path()).await;
    let token = relay.fresh_token().expect("a fresh demo shows its token");
    let c = Client::anonymous(&relay.url).with_header("Authorization", &format!("Bearer {token}"));
    let r = c
        .post(
            "/api/sessions",
            &json!({"prompt": "show me", "approvalPolicy": "untrusted", "sandbox": "workspace-write"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    // A page's streams stay open through the stop.
    let mut page = c.stream(&format!("/api/sessions/{id}/stream"), &[]).await;
    let _dashboard = c.stream("/api/stream", &[]).await;
    page.until(Duration::from_secs(90), |e| e.event == "permission_request")
        .await;

    let status = relay.stop(libc::SIGINT).await;
    assert!(status.success(), "serve exited with {status}");
    assert!(
        !relay.log_text().contains("connections still open"),
        "the stop waited on an open stream: {}",
        relay.log_text()
    );
    let listen = relay
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let relay = Demo::start(&codex, &listen, data.path()).await;
    assert!(
        relay.log_text().contains("API token: the one printed when"),
        "the demo kept its token: {}",
        relay.log_text()
    );
    let c = Client::anonymous(&relay.url).with_header("Authorization", &format!("Bearer {token}"));
    let events = c
        .get(&format!("/api/sessions/{id}/events?after=0&limit=1000"))
        .await;
    assert_eq!(
        events.status,
        200,
        "the demo kept its session: {}",
        events.text()
    );
    let events: Vec<Value> = events.json()["events"].as_array().unwrap().clone();
    let all = Value::Array(events.clone()).to_string();
    let kind = |e: &Value| e["ev"]["t"].as_str().unwrap_or_default().to_owned();
    for e in &events {
        assert!(
            !(kind(e) == "codex" && e["ev"]["method"] == "thread/readState/changed"),
            "a raw unread-marker row: {e}"
        );
        assert!(
            !(kind(e) == "error"
                && e["ev"]["message"].as_str().is_some_and(|m| {
                    m.contains("peer was shut down") || m.contains("Codex exited")
                })),
            "a normal stop logged as an error: {e}"
        );
    }
    let started: Vec<&Value> = events
        .iter()
        .filter(|e| kind(e) == "tool-call-start")
        .collect();
    assert!(!started.is_empty(), "{all}");
    for s in started {
        let call = &s["ev"]["call"];
        assert!(
            events
                .iter()
                .any(|e| kind(e) == "tool-call-end" && e["ev"]["call"] == *call),
            "tool call {call} never ends: {all}"
        );
    }
    assert!(
        events.iter().any(|e| kind(e) == "turn-end"
            && e["ev"]["status"] == "cancelled"
            && e["ev"]["error"]
                .as_str()
                .is_some_and(|m| m.contains("the relay stopped"))),
        "{all}"
    );
    // The session goes on in the new relay.
    let last = events
        .last()
        .map(|e| e["seq"].to_string())
        .unwrap_or_default();
    let mut page = c
        .stream(
            &format!("/api/sessions/{id}/stream"),
            &[("Last-Event-ID", &last)],
        )
        .await;
    let r = c
        .post(
            &format!("/api/sessions/{id}/messages"),
            &json!({"text": "go on"}),
        )
        .await;
    assert!(r.status < 300, "{}", r.text());
    page.until(Duration::from_secs(90), |e| e.event == "permission_request")
        .await;
    let mut relay = relay;
    let status = relay.stop(libc::SIGTERM).await;
    assert!(status.success(), "serve exited with {status}");
}
