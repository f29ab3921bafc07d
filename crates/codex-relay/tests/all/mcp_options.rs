//! The MCP front's options, limits and lifecycle with a real client (the Node SDK over HTTP) on
//! the real Codex: codex_start's optional settings reach Codex (profile, config, base
//! instructions, output schema, images), MAX_SESSIONS answers with a tool error, a cancelled
//! long-poll stops at once, and after a restart of `codex-relay serve` over the same store the
//! session's history is intact and codex_say resumes it.

use std::time::Duration;

use crate::common::{Bed, Driver, HttpRelay, Sdk, Transport};
use codex_relay_testkit::{NEWEST, Reply};
use serde_json::json;

const TURN: Duration = Duration::from_secs(90);

/// A 1×1 PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0,
    0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn options_limits_cancel_and_restart() {
    let bed = Bed::start(NEWEST).await;
    std::fs::write(
        bed.home.path().join("relaytest.config.toml"),
        "model = \"profile-model\"\n",
    )
    .unwrap();
    let ws = bed.home.workspace().to_path_buf();
    std::fs::write(ws.join("pixel.png"), PNG).unwrap();
    bed.model.route(
        "MARK-OPT",
        [
            Reply::text(r#"{"answer": 42}"#),
            Reply::text("resumed after the restart").with_delay(Duration::from_secs(4)),
        ],
    );
    let mut args = bed.args(60_000);
    args.extend(["--max-sessions".into(), "1".into()]);
    let relay = HttpRelay::start(args.clone()).await;
    let mut d = Driver::spawn(Sdk::Node).await;
    d.connect(Transport::Http, &[], &relay.url).await;

    let schema = json!({
        "type": "object",
        "properties": {"answer": {"type": "integer"}},
        "required": ["answer"],
        "additionalProperties": false
    });
    let started = d
        .ok(
            "codex_start",
            json!({
                "prompt": "MARK-OPT: what is the answer?",
                "workingDirectory": ws,
                "approvalPolicy": "never",
                "sandbox": "read-only",
                "profile": "relaytest",
                "config": {"model_reasoning_effort": "low"},
                "baseInstructions": "You are the relay test model.",
                "images": ["pixel.png"],
                "outputSchema": schema,
            }),
        )
        .await;
    let a = started["sessionId"].as_str().unwrap().to_owned();
    let (done, _) = d.status_until(&a, TURN, |s| s["status"] == "done").await;
    assert_eq!(done["result"], json!({"answer": 42}), "{done}");
    let sent = &bed.model.requests_with("MARK-OPT")[0].body;
    assert_eq!(
        sent["model"], "profile-model",
        "the profile chose the model"
    );
    // The mock model has no metadata, so Codex sends no `reasoning` block; the turn metadata
    // it sends says which effort the config override set.
    let turn_meta = sent["client_metadata"]["x-codex-turn-metadata"]
        .as_str()
        .unwrap_or("");
    assert!(
        turn_meta.contains(r#""reasoning_effort":"low""#),
        "config reached Codex: {turn_meta}"
    );
    // 0.169 sends base instructions as the first (developer) message.
    assert!(
        sent.to_string().contains("You are the relay test model."),
        "base instructions reached the model"
    );
    assert_eq!(sent["text"]["format"]["schema"], schema);
    assert!(
        sent["input"].to_string().contains("input_image"),
        "the image was attached: {}",
        sent["input"]
    );

    // MAX_SESSIONS = 1: a second session is refused with a tool error that says what to do.
    let refused = d
        .call(
            "codex_start",
            json!({"prompt": "MARK-NONE: another", "workingDirectory": ws}),
        )
        .await;
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(
        refused["text"].as_str().unwrap().contains("MAX_SESSIONS"),
        "{refused}"
    );

    // Between turns a long poll has nothing to wait for: it returns at once.
    let idle = d
        .cmd(json!({"op": "call", "tool": "codex_status", "args": {"sessionId": a, "waitMs": 60000}}))
        .await;
    assert!(idle["ms"].as_u64().unwrap() < 3000, "{idle}");
    let fine = d.ok("codex_status", json!({"sessionId": a})).await;
    assert_eq!(fine["status"], "done");
    assert!(
        fine.get("events")
            .is_none_or(|e| e.as_array().unwrap().is_empty()),
        "no cursor, no events: {fine}"
    );
    d.close().await;

    // Restart over the same store and CODEX_HOME: history intact, codex_say resumes.
    assert!(relay.stop().await.success());
    let relay = HttpRelay::start(args).await;
    let mut d = Driver::spawn(Sdk::Node).await;
    d.connect(Transport::Http, &[], &relay.url).await;
    let back = d
        .ok("codex_status", json!({"sessionId": a, "cursor": 0}))
        .await;
    assert_eq!(back["status"], "done", "{back}");
    assert_eq!(back["result"], json!({"answer": 42}), "{back}");
    assert!(
        back["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["ev"]["t"] == "turn-end"),
        "history came back: {back}"
    );
    let said = d
        .ok("codex_say", json!({"sessionId": a, "message": "and now?"}))
        .await;
    assert_eq!(said["mode"], "started", "{said}");
    // A long poll over a running turn that the client cancels ends at once, and the server
    // keeps serving (the model takes seconds to answer this turn).
    let cancelled = d
        .cmd(json!({"op": "call", "tool": "codex_status", "args": {"sessionId": a, "waitMs": 60000, "until": "attention"}, "abortAfterMs": 300}))
        .await;
    assert!(cancelled["thrown"].is_string(), "{cancelled}");
    assert!(cancelled["ms"].as_u64().unwrap() < 3000, "{cancelled}");
    let fine = d.ok("codex_status", json!({"sessionId": a})).await;
    assert_eq!(fine["status"], "active", "{fine}");
    let (done, _) = d
        .status_until(&a, TURN, |s| s["status"] == "done" && s["turnCount"] == 2)
        .await;
    assert_eq!(done["result"], "resumed after the restart", "{done}");
    let resumed = bed.model.requests_with("MARK-OPT");
    assert_eq!(
        resumed.last().unwrap().body["model"],
        "profile-model",
        "the resumed thread keeps its profile's settings"
    );
    d.close().await;
    assert!(relay.stop().await.success());
}

/// A thread another client made (`codex exec` in the same CODEX_HOME) shows in codex_list as
/// not ours, codex_status shows it, and codex_say continues it in this relay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_codex_exec_thread_is_listed_and_continued() {
    let bed = Bed::start(NEWEST).await;
    let ws = bed.home.workspace().to_path_buf();
    bed.model.route(
        "MARK-EXEC",
        [
            Reply::text("exec says hi"),
            Reply::text("continued over MCP"),
        ],
    );
    let thread = codex_relay_testkit::exec::thread_from_codex_exec(
        &bed.codex,
        bed.home.path(),
        &ws,
        "MARK-EXEC: hello from exec",
    )
    .await;

    let mut d = Driver::spawn(Sdk::Node).await;
    d.connect(Transport::Stdio, &bed.args(60_000), "").await;
    let listed = d.ok("codex_list", json!({"workingDirectory": ws})).await;
    let row = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["sessionId"] == thread.as_str())
        .unwrap_or_else(|| panic!("the exec thread is listed: {listed}"))
        .clone();
    assert_eq!(row["ownedByRelay"], false, "{row}");
    assert_eq!(row["isActive"], false, "{row}");
    assert_eq!(row["source"], "exec", "{row}");
    let said = d
        .ok(
            "codex_say",
            json!({"sessionId": thread, "message": "and from MCP?"}),
        )
        .await;
    assert_eq!(said["mode"], "started", "{said}");
    let done = d
        .ok(
            "codex_status",
            json!({"sessionId": thread, "waitMs": 60000, "until": "attention"}),
        )
        .await;
    assert_eq!(done["status"], "done", "{done}");
    assert_eq!(done["result"], "continued over MCP", "{done}");
    let last = bed.model.requests_with("MARK-EXEC");
    assert!(
        last.last().unwrap().body["input"]
            .to_string()
            .contains("exec says hi"),
        "the continued turn carries the exec thread's history"
    );
    d.close().await;
    bed.assert_no_codex_left().await;
}
