//! Failure paths over MCP on the real Codex, with the Node SDK over streamable HTTP: a scripted
//! 401, `response.failed` and 500 show as `status: "error"` with the `error` field filled (and
//! a good turn clears it); `codex-relay serve` SIGKILLed while a command runs leaves no Codex
//! behind, and after a restart the session keeps every event the client was shown, its cut
//! turn is closed (`turn-end` cancelled, then an `error` saying why), it is `interrupted`,
//! and `codex_say` continues it.

use std::time::Duration;

use crate::common::{Bed, Driver, HttpRelay, Sdk, Transport};
use codex_relay_testkit::{NEWEST, Reply};
use serde_json::{Value, json};

const TURN: Duration = Duration::from_secs(90);

fn id(v: &Value) -> String {
    v["sessionId"].as_str().expect("sessionId").to_owned()
}

async fn ended(d: &mut Driver, s: &str, turns: u64) -> Value {
    let (st, _) = d
        .status_until(s, TURN, |st| {
            st["turnCount"] == turns && st["status"] != "active"
        })
        .await;
    st
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_failures_show_as_status_error_with_the_reason() {
    let bed = Bed::start(NEWEST).await;
    bed.model.route(
        "MARK-F",
        [
            Reply::Status {
                code: 401,
                message: "scripted bad key".into(),
            },
            Reply::Failed {
                message: "scripted model gave up".into(),
            },
            Reply::Status {
                code: 500,
                message: "scripted trouble".into(),
            },
            Reply::text("fine again"),
        ],
    );
    let relay = HttpRelay::start(bed.args(120_000)).await;
    let mut d = Driver::spawn(Sdk::Node).await;
    d.connect(Transport::Http, &[], &relay.url).await;
    let s = id(&d
        .ok(
            "codex_start",
            json!({"prompt": "MARK-F: hello", "workingDirectory": bed.home.workspace(),
                   "approvalPolicy": "never", "sandbox": "read-only"}),
        )
        .await);
    let st = ended(&mut d, &s, 1).await;
    assert_eq!(st["status"], "error", "{st}");
    let e401 = st["error"].as_str().unwrap_or("").to_owned();
    assert!(e401.contains("401"), "{st}");

    d.ok("codex_say", json!({"sessionId": s, "message": "again"}))
        .await;
    let st = ended(&mut d, &s, 2).await;
    assert_eq!(st["status"], "error", "{st}");
    assert!(
        st["error"]
            .as_str()
            .unwrap_or("")
            .contains("scripted model gave up"),
        "{st}"
    );

    d.ok("codex_say", json!({"sessionId": s, "message": "once more"}))
        .await;
    let st = ended(&mut d, &s, 3).await;
    assert_eq!(st["status"], "error", "{st}");
    let e500 = st["error"].as_str().unwrap_or("");
    assert!(!e500.is_empty() && e500 != e401, "{st}");

    d.ok("codex_say", json!({"sessionId": s, "message": "last"}))
        .await;
    let st = ended(&mut d, &s, 4).await;
    assert_eq!(st["status"], "done", "{st}");
    assert_eq!(st["error"], Value::Null, "{st}");
    assert_eq!(st["result"], "fine again", "{st}");
    d.close().await;
    drop(relay);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_killed_mid_command_leaves_no_codex_and_comes_back_interrupted() {
    let bed = Bed::start(NEWEST).await;
    bed.model.route(
        "MARK-K",
        [Reply::exec("sleep 30", "call-k"), Reply::text("back again")],
    );
    let args = bed.args(120_000);
    let relay = HttpRelay::start(args.clone()).await;
    let mut d = Driver::spawn(Sdk::Node).await;
    d.connect(Transport::Http, &[], &relay.url).await;
    let s = id(&d
        .ok(
            "codex_start",
            json!({"prompt": "MARK-K: sleep", "workingDirectory": bed.home.workspace(),
                   "approvalPolicy": "never", "sandbox": "read-only"}),
        )
        .await);
    let (running, before) = d
        .status_until(&s, TURN, |st| {
            st["itemEvents"].as_array().unwrap().iter().any(|i| {
                i["status"] == "started" && i["summary"].as_str().unwrap_or("").contains("sleep 30")
            })
        })
        .await;
    assert_eq!(running["status"], "active");
    assert!(running["pendingQuestion"].is_null());
    // At once: what the client was shown may still be in the store's linger window.
    relay.crash().await;
    drop(d);
    bed.assert_no_codex_left().await;

    let relay = HttpRelay::start(args).await;
    let mut d = Driver::spawn(Sdk::Node).await;
    d.connect(Transport::Http, &[], &relay.url).await;
    let back = d
        .ok("codex_status", json!({"sessionId": s, "cursor": 0}))
        .await;
    assert_eq!(back["status"], "interrupted", "{back}");
    let events = back["events"].as_array().unwrap();
    for (i, e) in events.iter().enumerate() {
        assert_eq!(
            e["seq"].as_u64().unwrap(),
            i as u64 + 1,
            "contiguous: {back}"
        );
    }
    assert_eq!(
        &events[..before.len()],
        &before[..],
        "what the client saw is kept"
    );
    assert!(
        events.iter().any(|e| e["ev"]["t"] == "error"
            && e["ev"]["message"]
                .as_str()
                .unwrap_or("")
                .contains("relay restarted")),
        "an error event says why: {back}"
    );
    let tail: Vec<&str> = events[before.len()..]
        .iter()
        .filter_map(|e| e["ev"]["t"].as_str())
        .collect();
    assert!(
        tail.starts_with(&["tool-call-end", "turn-end", "error"]),
        "the cut command and turn end, then the error: {tail:?}"
    );
    assert_eq!(
        events[before.len() + 1]["ev"]["status"],
        "cancelled",
        "{back}"
    );
    d.ok(
        "codex_say",
        json!({"sessionId": s, "message": "MARK-K: wake up"}),
    )
    .await;
    let (done, _) = d.status_until(&s, TURN, |st| st["status"] == "done").await;
    assert_eq!(done["result"], "back again", "{done}");
    d.close().await;
    drop(relay);
    bed.assert_no_codex_left().await;
}
