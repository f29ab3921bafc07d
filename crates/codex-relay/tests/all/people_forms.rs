//! The person on answers given in forms, through `serve` on the newest pinned real Codex with
//! the scripted model: an operator's MCP client (the official TypeScript SDK, over HTTP with
//! their personal token) approves Codex's request in an elicitation form, and their legacy
//! client (`/mcp-server`, same token) approves in the legacy form. Each resolution names the
//! operator (`byUser`) beside the front's word (`mcp-elicitation`, `mcp-legacy`).

use std::time::{Duration, Instant};

use crate::common::{Bed, Driver, HttpRelay, Sdk};
use crate::http_support::Client;
use crate::legacy_support::LegacyDriver;
use codex_relay_testkit::Reply;
use serde_json::{Value, json};

const TURN: Duration = Duration::from_secs(90);

/// Every `request-resolved` event of every session, once `n` of them are logged.
async fn resolutions(admin: &Client, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + TURN;
    let mut wait = Duration::from_millis(50);
    loop {
        let mut got = Vec::new();
        let list = admin.get("/api/sessions").await.json();
        for s in list["sessions"].as_array().into_iter().flatten() {
            let id = s["sessionId"]
                .as_str()
                .or(s["id"].as_str())
                .unwrap_or_default();
            let events = admin
                .get(&format!("/api/sessions/{id}/events?after=0&limit=1000"))
                .await
                .json();
            got.extend(
                events["events"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|e| e["ev"]["t"] == "request-resolved")
                    .map(|e| e["ev"].clone()),
            );
        }
        if got.len() >= n {
            return got;
        }
        assert!(
            Instant::now() < deadline,
            "{n} resolutions: {got:?} of {list}"
        );
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_millis(500));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operators_answers_in_forms_name_them() {
    let bed = Bed::start(codex_relay_testkit::NEWEST).await;
    for (mark, cmd) in [
        ("PEOPLE-FORM", "touch by-form.txt"),
        ("PEOPLE-LEGACY", "touch by-legacy.txt"),
    ] {
        bed.model.route(
            mark,
            [
                Reply::exec(cmd, &format!("call-{mark}")),
                Reply::text(format!("{mark} over")),
            ],
        );
    }
    let relay = HttpRelay::start(bed.args(120_000)).await;
    let admin = Client::new(&relay.url);
    let r = admin
        .post(
            "/api/users",
            &json!({"name": "Otto Operator", "role": "operator"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let r = admin
        .post("/api/tokens", &json!({"user": "Otto Operator"}))
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let token = r.json()["token"].as_str().unwrap().to_owned();
    let ws = bed.home.workspace().to_path_buf();

    let mut mcp = Driver::spawn(Sdk::Node).await;
    mcp.connect_http_with_token(&relay.url, &token).await;
    mcp.cmd(json!({"op": "policy", "acceptWhen": "touch by-form.txt",
        "content": {"decision": "approve"}}))
        .await;
    let started = mcp
        .ok(
            "codex_start",
            json!({"prompt": "PEOPLE-FORM: go", "workingDirectory": ws,
                   "approvalPolicy": "untrusted", "sandbox": "workspace-write"}),
        )
        .await;
    let id = started["sessionId"].as_str().unwrap().to_owned();
    mcp.status_until(&id, TURN, |s| s["status"] == "done").await;
    assert!(
        ws.join("by-form.txt").exists(),
        "the form's approval ran it"
    );

    let mut legacy = LegacyDriver::spawn().await;
    legacy
        .cmd(
            json!({"op": "connect", "url": format!("{}-server", relay.url), "elicitation": true,
            "headers": {"Authorization": format!("Bearer {token}")}}),
        )
        .await;
    let done = legacy
        .call(
            "codex",
            json!({"prompt": "PEOPLE-LEGACY: go", "cwd": ws, "approval-policy": "untrusted",
                   "sandbox": "workspace-write"}),
            &["approved"],
            json!({}),
        )
        .await;
    assert!(ws.join("by-legacy.txt").exists(), "{done}");

    let resolved = resolutions(&admin, 2).await;
    for by in ["mcp-elicitation", "mcp-legacy"] {
        let r = resolved
            .iter()
            .find(|r| r["by"] == by)
            .unwrap_or_else(|| panic!("a resolution by {by}: {resolved:?}"));
        assert_eq!(r["decision"], "approve", "{r}");
        assert_eq!(r["byUser"]["name"], "Otto Operator", "{by}: {r}");
        assert_eq!(r["byUser"]["role"], "operator", "{by}: {r}");
    }
    mcp.close().await;
    legacy.close().await;
    relay.stop().await;
    bed.assert_no_codex_left().await;
}
