//! Retention over HTTP on the real Codex: `serve --retention 30d --retention-size 10GiB`
//! starts with them in effect; a session whose command Codex asked to run was denied is
//! exported (`GET /api/sessions/{id}/export`) with every event the log holds and the request
//! with its resolution; `/metrics` shows the store's size. A retention setting that cannot be
//! read stops `serve` with a clear error.

use std::process::Stdio;
use std::time::Duration;

use crate::common::{Bed, HttpRelay, RELAY};
use crate::http_support::Client;
use codex_relay_testkit::{NEWEST, Reply};
use serde_json::{Value, json};

const TURN: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_session_exports_its_whole_history_and_its_approval() {
    let bed = Bed::start(NEWEST).await;
    let ws = bed.home.workspace().to_path_buf();
    std::fs::create_dir(ws.join("build")).unwrap();
    bed.model.route(
        "MARK-EXPORT",
        [
            Reply::exec("rm -rf build", "call-export"),
            Reply::text("understood, build stays"),
        ],
    );
    let mut args = bed.args(120_000);
    args.extend(["--retention", "30d", "--retention-size", "10GiB"].map(String::from));
    let relay = HttpRelay::start(args).await;
    let settings = relay.log_text();
    assert!(
        settings.contains("retention=Some(2592000s)")
            && settings.contains("retention_bytes=Some(10737418240)"),
        "the engine settings line says what is kept: {settings}"
    );
    let c = Client::new(&relay.url);
    let r = c
        .post(
            "/api/sessions",
            &json!({"prompt": "MARK-EXPORT: clean up", "cwd": ws,
                "approvalPolicy": "untrusted", "sandbox": "workspace-write"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let mut s = c.stream(&format!("/api/sessions/{id}/stream"), &[]).await;
    let asked = s.until(TURN, |e| e.event == "permission_request").await;
    let asked = asked.last().expect("a permission request").json();
    let r = c
        .post(
            "/api/codex/permission/respond",
            &json!({"id": asked["id"], "action": "deny", "message": "keep the build"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    s.until(TURN, |e| {
        e.event == "envelope"
            && e.json()["ev"]["t"] == "status"
            && e.json()["ev"]["status"] == "idle"
    })
    .await;

    let r = c.get(&format!("/api/sessions/{id}/export")).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("application/x-ndjson"));
    let lines: Vec<Value> = r
        .text()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(lines[0]["type"], "session", "{}", lines[0]);
    assert_eq!(lines[0]["session"]["sessionId"], id.as_str());
    // The events, exactly as the paged events endpoint has them, from seq 1 on.
    let page = c
        .get(&format!("/api/sessions/{id}/events?limit=1000"))
        .await
        .json();
    let logged = page["events"].as_array().unwrap().clone();
    let exported: Vec<Value> = lines
        .iter()
        .filter(|l| l["type"] == "event")
        .map(|l| l["event"].clone())
        .collect();
    assert!(!logged.is_empty());
    assert_eq!(exported, logged);
    let seqs: Vec<u64> = exported
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    // The approval's record: the request Codex made and who denied it, with the reason.
    let requests: Vec<&Value> = lines.iter().filter(|l| l["type"] == "request").collect();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(requests[0]["id"], asked["id"]);
    assert!(
        requests[0]["request"].to_string().contains("rm -rf build"),
        "{}",
        requests[0]
    );
    let resolution = &requests[0]["resolution"];
    assert_eq!(resolution["decision"], "deny", "{resolution}");
    assert_eq!(resolution["reason"], "keep the build", "{resolution}");
    assert_eq!(lines.last().unwrap()["type"], "request");

    let unknown = c.get("/api/sessions/no-such-session/export").await;
    assert_eq!(unknown.status, 404, "{}", unknown.text());

    let metrics = c.get("/metrics").await.text();
    for measure in ["disk", "used"] {
        let line = metrics
            .lines()
            .find(|l| l.starts_with(&format!("codex_relay_store_bytes{{measure=\"{measure}\"}}")))
            .unwrap_or_else(|| panic!("no store_bytes {measure} in {metrics}"));
        let bytes: u64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        assert!(bytes > 0, "{line}");
    }
    assert!(
        metrics.contains("codex_relay_retention_pruned_rows_total 0"),
        "{metrics}"
    );
    drop(relay);
    bed.assert_no_codex_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retention_that_cannot_be_read_stops_serve_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    for (key, value, says) in [
        ("CODEX_RELAY_RETENTION", "3 parsecs", "give an age like 30d"),
        (
            "CODEX_RELAY_RETENTION_SIZE",
            "lots",
            "give a size like 20GiB",
        ),
    ] {
        let out = tokio::process::Command::new(RELAY)
            .arg("serve")
            .args(["--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path())
            .env(key, value)
            .env("CODEX_RELAY_TOKEN", codex_relay_testkit::RELAY_TEST_TOKEN)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(Duration::from_secs(30), out)
            .await
            .expect("serve gives up within 30 s")
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{stderr}");
        assert!(
            stderr.contains(says) && stderr.contains(value),
            "{key}: {stderr}"
        );
    }
}
