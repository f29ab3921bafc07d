//! `serve --demo` on the real Codex: Codex knows the demo model, so a session's timeline starts
//! with the turn, not with Codex's warning that the model is unknown and fallback metadata is
//! used; the first turn reaches its file-change approval as the demo promises.

use crate::common;

use std::process::Stdio;
use std::time::Duration;

use crate::http_support::Client;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_demo_session_starts_without_a_model_warning() {
    let codex = codex_relay_testkit::codex_bin(codex_relay_testkit::NEWEST).expect("pinned Codex");
    let mut child = tokio::process::Command::new(common::RELAY)
        .args(["serve", "--demo", "--listen", "127.0.0.1:0", "--codex"])
        .arg(&codex)
        .env("CODEX_RELAY_TOKEN", codex_relay_testkit::RELAY_TEST_TOKEN)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let url = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            eprintln!("[relay] {line}");
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
