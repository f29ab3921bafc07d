//! Escalation in a cluster (two `serve` instances on one Postgres, both notifying, real Codex
//! 0.169, the scripted model): the request's first channel is unreachable, so both instances
//! see every channel failed and escalate; the second channel gets the request once, and the
//! trail (read on either instance) has one escalation.

use std::time::{Duration, Instant};

use crate::common::Bed;
use crate::http_answer_links::{receiver, until_hook};
use crate::http_support::Client;
use codex_relay_testkit::Reply;
use serde_json::json;

use crate::cluster_support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_postgres_a_request_escalates_once_across_instances() {
    let Some(db) = fresh_schema("cluster_postgres_a_request_escalates_once_across_instances").await
    else {
        return;
    };
    let bed = Bed::start(NEWEST).await;
    let ws = bed.home.workspace().to_path_buf();
    bed.model.route(
        "CL-ESC",
        [
            Reply::exec("touch esc.txt", "call-e1"),
            Reply::text("esc done"),
        ],
    );
    let (hook, got) = receiver().await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let phone = format!("http://{}/phone", closed.local_addr().unwrap());
    drop(closed);
    let notify = bed.home.root().join("notify.toml");
    std::fs::write(
        &notify,
        format!(
            r#"push = false
retry_max_delay_secs = 1
[escalation]
renotify_after_secs = 0
after_secs = 300
to = ["oncall"]
[[webhook]]
name = "phone"
url = "{phone}"
format = "ntfy"
[[webhook]]
name = "oncall"
url = "{hook}"
secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
"#
        ),
    )
    .unwrap();
    let extra = ["--notify".into(), notify.display().to_string()];
    let a = instance_extra(&bed, &db, "A", LEASE_MS, &extra).await;
    let b = instance_extra(&bed, &db, "B", LEASE_MS, &extra).await;
    let (ca, cb) = (Client::new(&a.url), Client::new(&b.url));
    cluster_until(&ca, "two live instances", |cl| {
        ["A", "B"]
            .iter()
            .all(|i| instance_of(cl, i)["state"] == "live")
    })
    .await;
    let id = create(
        &ca,
        json!({"prompt": "CL-ESC: make a file", "cwd": ws, "approvalPolicy": "untrusted",
               "sandbox": "workspace-write"}),
    )
    .await;
    let asked = view_until(&ca, &id, "the request opens on A", |v| {
        v["pending"][0]["id"].is_string()
    })
    .await;
    let request = asked["pending"][0]["id"].as_str().unwrap().to_owned();
    let hit = until_hook(&got, &request).await;
    assert_eq!(hit["type"], "request.opened");
    // Both instances look at the request every second while phone keeps failing: give them
    // several looks each, then count.
    let deadline = Instant::now() + TURN;
    loop {
        let t = cb
            .get(&format!("/api/requests/{request}/deliveries"))
            .await
            .json();
        let fails = t["deliveries"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["target"] == "phone" && d["status"] == "failed")
            .count();
        if fails >= 4 {
            break;
        }
        assert!(Instant::now() < deadline, "phone was not retried: {t}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let to_oncall = got
        .lock()
        .unwrap()
        .iter()
        .filter(|v| v["data"]["requestId"] == request.as_str())
        .count();
    assert_eq!(to_oncall, 1, "escalated once across the two instances");
    let trail = ca
        .get(&format!("/api/requests/{request}/deliveries"))
        .await
        .json();
    let queued: Vec<&serde_json::Value> = trail["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["status"] == "queued")
        .collect();
    assert_eq!(queued.len(), 2, "phone once, oncall once: {trail}");
    assert!(
        queued.iter().any(|d| d["target"] == "oncall"
            && d["detail"]
                .as_str()
                .unwrap()
                .starts_with("escalation: every channel failed")),
        "{trail}"
    );
    let r = ca
        .post(
            "/api/codex/permission/respond",
            &json!({"id": request, "action": "deny", "message": "no"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    view_until(&ca, &id, "the turn ends on A", |v| v["status"] == "idle").await;
    drop((ca, cb));
    drop((a, b));
    bed.assert_no_codex_left().await;
}
