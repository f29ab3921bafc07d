//! Sub-agents over the HTTP front on the real Codex 0.169 with the scripted model: the
//! parent's model spawns a child, the child's command approval arrives on the parent session's
//! stream as a `permission_request` naming the agent, a deny with a message reaches the
//! child's model, and the child's events stream in the parent's session tagged with `invoke`.

use std::time::Duration;

use crate::common::{Bed, HttpRelay};
use crate::http_support::Client;
use codex_relay_testkit::{Item, Reply};
use serde_json::json;

const TURN: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_childs_approval_is_the_sessions_permission_request_and_a_deny_reaches_the_child() {
    let bed = Bed::start(codex_relay_testkit::NEWEST).await;
    let ws = bed.home.workspace().to_path_buf();
    bed.model.route(
        "PARENT-H",
        [
            Reply::items(vec![Item::spawn_agent(
                "CHILD-H: make h.txt",
                "call_spawn_h",
            )]),
            Reply::text("parent done"),
        ],
    );
    bed.model.route_sub_agent(
        "CHILD-H",
        [
            Reply::exec("touch h.txt", "call_h"),
            Reply::text("child gave up"),
        ],
    );
    let relay = HttpRelay::start(bed.args(120_000)).await;
    let c = Client::new(&relay.url);
    let r = c
        .post(
            "/api/sessions",
            &json!({"prompt": "PARENT-H: delegate", "cwd": ws,
                "approvalPolicy": "untrusted", "sandbox": "workspace-write"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let mut s = c.stream(&format!("/api/sessions/{id}/stream"), &[]).await;
    let seen = s.until(TURN, |e| e.event == "permission_request").await;
    let asked = seen.last().unwrap().json();
    assert_eq!(asked["sessionId"], id.as_str(), "{asked}");
    assert_eq!(asked["invoke"], "call_spawn_h", "{asked}");
    assert_eq!(asked["agent"]["parent"], id.as_str(), "{asked}");
    assert!(
        asked["toolInput"]["command"]
            .as_str()
            .unwrap()
            .contains("touch h.txt"),
        "{asked}"
    );
    let r = c
        .post(
            "/api/codex/permission/respond",
            &json!({"id": asked["id"], "action": "deny", "message": "no files from sub-agents"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    // The child ends its turn; its events are in the parent's stream, tagged.
    let mut rest = Vec::new();
    let deadline = tokio::time::Instant::now() + TURN;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let Some(e) = s.next(left).await else {
            // The whole log, so a stall says which of the child's events never came.
            let log = c.get(&format!("/api/sessions/{id}/events")).await.json();
            let brief: Vec<String> = log["events"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|e| {
                    format!(
                        "{} {} {} {}",
                        e["seq"], e["ev"]["t"], e["invoke"], e["turn"]
                    )
                })
                .collect();
            panic!("the child's turn never ended within {TURN:?}; the session's log: {brief:#?}");
        };
        let end = e.event == "envelope"
            && e.json()["invoke"] == "call_spawn_h"
            && e.json()["ev"]["t"] == "turn-end";
        rest.push(e);
        if end {
            break;
        }
    }
    let child_kinds: Vec<String> = seen
        .iter()
        .chain(rest.iter())
        .filter(|e| e.event == "envelope" && e.json()["invoke"] == "call_spawn_h")
        .map(|e| e.json()["ev"]["t"].as_str().unwrap_or_default().to_owned())
        .collect();
    let missing: Vec<&str> = [
        "turn-start",
        "tool-call-start",
        "request-opened",
        "request-resolved",
        "turn-end",
    ]
    .into_iter()
    .filter(|want| !child_kinds.iter().any(|k| k == want))
    .collect();
    let child_requests: Vec<_> = bed
        .model
        .requests()
        .into_iter()
        .filter(|r| r.parent_thread.as_deref() == Some(id.as_str()))
        .collect();
    if !missing.is_empty() {
        // Enough to tell a stalled Codex (the child's model never got the deny) from a relay
        // that did not pass the child's end on (it did).
        let snap = c.get(&format!("/api/sessions/{id}")).await.text();
        panic!(
            "no {missing:?} for the child within {TURN:?}: {child_kinds:?}; the child made \
             {} model request(s) (2 once the deny reached it); session: {snap}",
            child_requests.len()
        );
    }
    assert!(!ws.join("h.txt").exists());
    let next = child_requests.last().unwrap().body["input"].to_string();
    assert!(next.contains("no files from sub-agents"), "{next}");
    let snap = c.get(&format!("/api/sessions/{id}")).await.json();
    assert_eq!(snap["agents"][0]["invoke"], "call_spawn_h", "{snap}");
}
