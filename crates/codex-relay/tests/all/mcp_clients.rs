//! The MCP front driven by real MCP clients (the official Node and Python SDKs), over stdio and
//! over streamable HTTP, on the real Codex with the scripted model: approval by elicitation,
//! approval by `codex_status` + `codex_respond "deny: too risky"` (the model sees the reason),
//! a follow-up, interrupting `sleep 30`, listing, long-poll progress, and bad input.
//!
//! The Node SDK negotiates 2025-11-25 (elicitation is pushed as `elicitation/create`); the
//! Python SDK negotiates 2026-07-28 by default (no server-to-client requests: the same forms
//! come back as `InputRequiredResult` rounds of `codex_status`), and 2025-11-25 with pushed
//! forms when pinned to the `initialize` handshake.
//!
//! The oldest supported Codex (0.98: no `turn/steer`, and `on-failure` still exists) runs the
//! same scenario with the Node SDK over stdio and the Python SDK over HTTP, with `on-failure`
//! for the session that is interrupted.

use std::time::{Duration, Instant};

use crate::common::{Bed, Driver, HttpRelay, Sdk, Transport};
use codex_relay_testkit::{NEWEST, OLDEST, Reply};
use serde_json::{Value, json};

const TURN: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_sdk_over_stdio() {
    scenario(NEWEST, Sdk::Node, Transport::Stdio).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_sdk_over_http() {
    scenario(NEWEST, Sdk::Node, Transport::Http).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_over_stdio() {
    scenario(NEWEST, Sdk::Python, Transport::Stdio).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_over_http() {
    scenario(NEWEST, Sdk::Python, Transport::Http).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_with_the_initialize_handshake_over_stdio() {
    scenario(NEWEST, Sdk::PythonLegacy, Transport::Stdio).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_sdk_over_stdio_on_codex_0_98() {
    scenario(OLDEST, Sdk::Node, Transport::Stdio).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_over_http_on_codex_0_98() {
    scenario(OLDEST, Sdk::Python, Transport::Http).await
}

fn id(v: &Value) -> String {
    v["sessionId"].as_str().expect("sessionId").to_owned()
}

fn resolutions(events: &[Value]) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| e["ev"]["t"] == "request-resolved")
        .map(|e| &e["ev"])
        .collect()
}

async fn scenario(version: &str, sdk: Sdk, transport: Transport) {
    let bed = Bed::start(version).await;
    let ws = bed.home.workspace().to_path_buf();
    std::fs::create_dir(ws.join("build")).unwrap();
    // Each session's prompt carries a marker, so its model requests draw from its own script.
    bed.model.route(
        "MARK-A",
        [
            Reply::exec("touch elicited.txt", "call-a"),
            Reply::text("created elicited.txt"),
            Reply::text("follow-up answered"),
        ],
    );
    bed.model.route(
        "MARK-B",
        [
            Reply::exec("rm -rf build", "call-b"),
            Reply::text("understood, build stays"),
        ],
    );
    bed.model
        .route("MARK-C", [Reply::exec("sleep 30", "call-c")]);

    let args = bed.args(120_000);
    let http = match transport {
        Transport::Http => Some(HttpRelay::start(args.clone()).await),
        Transport::Stdio => None,
    };
    let url = http.as_ref().map(|h| h.url.clone()).unwrap_or_default();
    let mut d = Driver::spawn(sdk).await;
    let info = d.connect(transport, &args, &url).await;
    let mut tools: Vec<String> = serde_json::from_value(info["tools"].clone()).unwrap();
    tools.sort();
    assert_eq!(
        tools,
        [
            "codex_interrupt",
            "codex_limits",
            "codex_list",
            "codex_respond",
            "codex_say",
            "codex_start",
            "codex_status",
            "codex_thread",
            "codex_worktree"
        ]
    );
    match sdk {
        Sdk::Python => assert_eq!(info["protocolVersion"], "2026-07-28", "{info}"),
        Sdk::PythonLegacy => assert_eq!(info["protocolVersion"], "2025-11-25", "{info}"),
        Sdk::Node => {}
    }
    let start = |marker: &str, extra: Value| {
        let mut a = json!({
            "prompt": format!("{marker}: do the task"),
            "workingDirectory": ws,
            "approvalPolicy": "untrusted",
            "sandbox": "workspace-write",
        });
        a.as_object_mut()
            .unwrap()
            .extend(extra.as_object().cloned().unwrap_or_default());
        a
    };

    // A: the client approves `touch elicited.txt` in an elicitation form.
    d.cmd(json!({"op": "policy", "acceptWhen": "touch elicited.txt", "content": {"decision": "approve"}}))
        .await;
    let a = d.ok("codex_start", start("MARK-A", json!({}))).await;
    assert_eq!(a["status"], "active", "{a}");
    let a = id(&a);
    let (done, events) = d.status_until(&a, TURN, |s| s["status"] == "done").await;
    assert_eq!(done["result"], "created elicited.txt", "{done}");
    assert!(ws.join("elicited.txt").exists(), "the approved command ran");
    let asked = d.cmd(json!({"op": "elicitations"})).await;
    let asked = asked["elicitations"].as_array().unwrap().clone();
    assert!(
        asked.iter().any(|e| e["message"]
            .as_str()
            .unwrap()
            .contains("touch elicited.txt")),
        "the approval reached the client as a form: {asked:?}"
    );
    let resolved = resolutions(&events);
    assert_eq!(resolved.len(), 1, "{events:?}");
    assert_eq!(resolved[0]["decision"], "approve");
    assert_eq!(resolved[0]["by"], "mcp-elicitation");
    assert_eq!(done["turnCount"], 1);
    assert!(
        done["usage"]["totalTokens"].as_i64().unwrap_or(0) > 0,
        "{done}"
    );

    // B: forms are declined, so the approval waits for codex_status + codex_respond.
    d.cmd(json!({"op": "policy", "acceptWhen": null, "content": {}}))
        .await;
    let b = id(&d.ok("codex_start", start("MARK-B", json!({}))).await);
    let (waiting, _) = d
        .status_until(&b, TURN, |s| !s["pendingQuestion"].is_null())
        .await;
    assert_eq!(waiting["status"], "awaiting_approval", "{waiting}");
    let pq = &waiting["pendingQuestion"];
    assert_eq!(pq["type"], "command_approval");
    let question = pq["questions"][0]["question"].as_str().unwrap();
    assert!(question.contains("rm -rf build"), "{pq}");
    assert!(
        pq["questions"][0]["options"]
            .as_array()
            .unwrap()
            .contains(&json!("deny")),
        "{pq}"
    );
    // Long-poll with nothing happening: progress notifications arrive meanwhile. (Codex 0.98
    // sends a late `codex/event/skills_update_available`, which rightly ends a wait early:
    // poll on from there until a wait sees nothing.)
    let mut cursor = waiting["nextCursor"].clone();
    let mut polled = Value::Null;
    for _ in 0..3 {
        polled = d
            .call(
                "codex_status",
                json!({"sessionId": b, "cursor": cursor, "waitMs": 4500}),
            )
            .await;
        assert_eq!(polled["isError"], false, "{polled}");
        if polled["structured"]["events"]
            .as_array()
            .is_some_and(|e| e.is_empty())
        {
            break;
        }
        cursor = polled["structured"]["nextCursor"].clone();
    }
    assert!(polled["progress"].as_u64().unwrap() >= 1, "{polled}");
    assert!(polled["ms"].as_u64().unwrap() >= 4000, "{polled}");
    // An answer that is not an option is refused with the options named; the request stays.
    let bad = d
        .call(
            "codex_respond",
            json!({"sessionId": b, "id": pq["id"], "answers": ["maybe"]}),
        )
        .await;
    assert_eq!(bad["isError"], true, "{bad}");
    assert!(
        bad["text"].as_str().unwrap().contains("deny: <reason>"),
        "{bad}"
    );
    let answered = d
        .ok(
            "codex_respond",
            json!({"sessionId": b, "id": pq["id"], "answers": ["deny: too risky"]}),
        )
        .await;
    assert_eq!(answered["decision"], "deny", "{answered}");
    let again = d
        .call(
            "codex_respond",
            json!({"sessionId": b, "id": pq["id"], "answers": ["approve"]}),
        )
        .await;
    assert_eq!(again["isError"], true, "{again}");
    assert!(
        again["text"].as_str().unwrap().contains("already resolved"),
        "{again}"
    );
    let (done_b, _) = d.status_until(&b, TURN, |s| s["status"] == "done").await;
    assert_eq!(done_b["result"], "understood, build stays");
    assert!(ws.join("build").is_dir(), "the denied command did not run");
    let after_denial = bed.model.requests_with("MARK-B");
    let last = after_denial.last().expect("model requests for B");
    assert!(
        last.body["input"].to_string().contains("too risky"),
        "the model saw the reason: {}",
        last.body["input"]
    );

    // A again: a follow-up starts a new turn.
    let said = d
        .ok(
            "codex_say",
            json!({"sessionId": a, "message": "thanks, anything else?"}),
        )
        .await;
    assert_eq!(said["mode"], "started", "{said}");
    // One call waits the whole turn out: `until: "attention"` ignores the events in between.
    let done = d
        .ok(
            "codex_status",
            json!({"sessionId": a, "waitMs": 60000, "until": "attention"}),
        )
        .await;
    assert_eq!(done["status"], "done", "{done}");
    assert_eq!(done["turnCount"], 2, "{done}");
    assert_eq!(done["result"], "follow-up answered", "{done}");

    // C: `sleep 30` runs unasked (never; on 0.98 `on-failure`, which runs it in the sandbox
    // and asks only if it fails) and is interrupted.
    let policy = if version == OLDEST {
        "on-failure"
    } else {
        "never"
    };
    let c = id(&d
        .ok(
            "codex_start",
            start("MARK-C", json!({"approvalPolicy": policy})),
        )
        .await);
    d.status_until(&c, TURN, |s| {
        s["itemEvents"].as_array().unwrap().iter().any(|i| {
            i["itemType"] == "command_execution"
                && i["status"] == "started"
                && i["summary"].as_str().unwrap_or("").contains("sleep 30")
        })
    })
    .await;
    let t = Instant::now();
    let stopped = d.ok("codex_interrupt", json!({"sessionId": c})).await;
    assert_eq!(stopped["status"], "interrupted", "{stopped}");
    assert_eq!(stopped["interrupted"], true);
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());

    // List: all three, in this directory.
    let listed = d.ok("codex_list", json!({"workingDirectory": ws})).await;
    let ids: Vec<&str> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap())
        .collect();
    for s in [&a, &b, &c] {
        assert!(ids.contains(&s.as_str()), "{s} in {listed}");
    }

    // Bad input: clear tool errors, and the server keeps serving.
    let unknown = d
        .call("codex_status", json!({"sessionId": "no-such-session"}))
        .await;
    assert_eq!(unknown["isError"], true, "{unknown}");
    assert!(
        unknown["text"]
            .as_str()
            .unwrap()
            .contains("unknown session"),
        "{unknown}"
    );
    let wrong_type = d.call("codex_status", json!({"sessionId": 5})).await;
    assert_eq!(wrong_type["isError"], true, "{wrong_type}");
    assert!(
        wrong_type["text"]
            .as_str()
            .unwrap()
            .contains("codex_status takes {sessionId"),
        "{wrong_type}"
    );
    let no_request = d
        .call(
            "codex_respond",
            json!({"sessionId": b, "id": "req_nope", "answers": ["approve"]}),
        )
        .await;
    assert_eq!(no_request["isError"], true, "{no_request}");
    assert!(
        no_request["text"]
            .as_str()
            .unwrap()
            .contains("unknown request"),
        "{no_request}"
    );
    let still = d.ok("codex_status", json!({"sessionId": a})).await;
    assert_eq!(still["status"], "done");

    // The client goes away (stdio: the relay sees EOF; HTTP: the relay is stopped with
    // SIGTERM): Codex and everything it ran are gone.
    let codex_ran = !codex_relay_testkit::procs::pids_with_env(&format!(
        "CODEX_HOME={}",
        bed.home.path().display()
    ))
    .is_empty();
    assert!(codex_ran, "Codex runs while the client is connected");
    d.close().await;
    if let Some(http) = http {
        assert!(http.stop().await.success());
    }
    bed.assert_no_codex_left().await;
}
