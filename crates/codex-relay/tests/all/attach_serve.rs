//! The binary attached to the Codex daemon the terminal uses (docs/ATTACH.md), on the real
//! daemon of Codex 0.171 and 0.169 in a temporary CODEX_HOME: `codex-relay doctor` names the running
//! daemon and its pid; `codex-relay serve --attach` says it attaches; a thread another client
//! of the daemon (a plain WebSocket client standing in for the TUI) runs under `on-request`
//! asks to run an escalated command, and the approval reaches a webhook, MCP (the official
//! Node SDK over HTTP: `codex_list` marks the thread, `codex_status` shows the question) and
//! the UI in Chromium, where it is approved: the other client sees it resolved and the
//! command runs. A second thread, set to `never` by the other client, is shown as asking
//! nobody, in the UI and the API.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::browser::{LogIn, drive_script_with, set_up};
use crate::common::{Bed, Driver, HttpRelay, Sdk, Transport};
use crate::http_answer_links::{receiver, until_hook};
use crate::http_support::Client;
use codex_relay_testkit::daemon::{TestDaemon, TuiClient};
use codex_relay_testkit::{Item, NEWEST, PREVIOUS, Reply};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(120);

fn escalated(cmd: &str, call: &str) -> Item {
    Item::function_call(
        "exec_command",
        json!({"cmd": cmd, "sandbox_permissions": "require_escalated",
               "justification": "May I run this outside the sandbox?"}),
        call,
    )
}

fn is(method: &'static str) -> impl Fn(&Value) -> bool {
    move |m: &Value| m["method"] == method
}

/// `GET /api/sessions/{id}` once `done` holds for it (404 until the relay knows the thread).
async fn until_view(c: &Client, id: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + WAIT;
    let mut wait = Duration::from_millis(50);
    loop {
        let r = c.get(&format!("/api/sessions/{id}")).await;
        let view = r.json();
        if done(&view) {
            return view;
        }
        assert!(Instant::now() < deadline, "{what}: {view}");
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_secs(1));
    }
}

/// `codex-relay doctor` on this bed: its output.
fn doctor(bed: &Bed) -> String {
    let out = Command::new(crate::common::RELAY)
        .arg("doctor")
        .arg("--codex")
        .arg(&bed.codex)
        .arg("--codex-home")
        .arg(bed.home.path())
        .arg("--db")
        .arg(bed.home.root().join("doctor.db"))
        .output()
        .expect("run codex-relay doctor");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

async fn start_thread(tui: &mut TuiClient, ws: &Path) -> String {
    let started = tui
        .request(
            "thread/start",
            json!({"cwd": ws, "approvalPolicy": "on-request", "sandbox": "workspace-write"}),
        )
        .await
        .expect("thread/start");
    started["thread"]["id"].as_str().unwrap().to_owned()
}

async fn turn(tui: &mut TuiClient, thread: &str, text: &str, extra: Value) {
    let mut params = json!({"threadId": thread, "input": [{"type": "text", "text": text}]});
    if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    tui.request("turn/start", params).await.expect("turn/start");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_attach_reaches_the_ui_mcp_and_a_webhook_on_0_171() {
    serve_attach_reaches_the_ui_mcp_and_a_webhook(NEWEST).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_attach_reaches_the_ui_mcp_and_a_webhook_on_0_169() {
    serve_attach_reaches_the_ui_mcp_and_a_webhook(PREVIOUS).await
}

async fn serve_attach_reaches_the_ui_mcp_and_a_webhook(version: &'static str) {
    let Some((node, _)) = set_up(version) else {
        return;
    };
    let bed = Bed::start(version).await;
    let ws = bed.home.workspace().to_path_buf();
    bed.model.route(
        "MARK-PHONE",
        [
            Reply::items(vec![escalated("touch phone-ran.txt", "call-phone")]),
            Reply::text("the phone let it run"),
        ],
    );
    bed.model
        .route("MARK-FIRST", [Reply::text("a first turn, asked nothing")]);
    bed.model.route(
        "MARK-NEVER",
        [
            Reply::items(vec![escalated("touch unasked.txt", "call-never")]),
            Reply::text("nobody was asked"),
        ],
    );
    let daemon = TestDaemon::start(version, &bed.home).expect("the daemon starts");
    let socket = daemon.socket();

    // doctor names the daemon, and that its socket would be accepted.
    let said = doctor(&bed);
    let line = said
        .lines()
        .find(|l| l.starts_with("codex daemon:"))
        .unwrap_or_else(|| panic!("doctor says nothing of the daemon: {said}"));
    let pid = daemon.pid().expect("the daemon's pid");
    assert!(
        line.contains("running at") && line.contains(&format!("(pid {pid},")),
        "{line}"
    );

    let (hook, got) = receiver().await;
    let notify = bed.home.root().join("notify.toml");
    std::fs::write(
        &notify,
        format!("push = false\n[[webhook]]\nname = \"ops\"\nurl = \"{hook}\"\nsecret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"\n"),
    )
    .unwrap();
    let mut args = bed.args(300_000);
    args.extend([
        "--notify".into(),
        notify.display().to_string(),
        "--attach".into(),
        socket.display().to_string(),
    ]);
    let relay = HttpRelay::start(args).await;
    // Said right after the banner.
    let deadline = Instant::now() + WAIT;
    while !relay
        .log_text()
        .contains("attaching to the Codex daemon at")
    {
        assert!(Instant::now() < deadline, "{}", relay.log_text());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let c = Client::new(&relay.url);
    let mut tui = TuiClient::connect(&socket, "tui-stand-in").await;

    // A thread the other client sets to `never` after a first turn the relay followed.
    let never = start_thread(&mut tui, &ws).await;
    turn(&mut tui, &never, "MARK-FIRST: hello", json!({})).await;
    tui.until("the first turn's end", is("turn/completed"))
        .await;
    until_view(&c, &never, "followed, under on-request", |v| {
        v["attached"]["approvalPolicy"] == "on-request"
    })
    .await;
    turn(
        &mut tui,
        &never,
        "MARK-NEVER: go",
        json!({"approvalPolicy": "never"}),
    )
    .await;
    tui.until("the unasked turn's end", is("turn/completed"))
        .await;
    let view = until_view(&c, &never, "flagged as asking nobody", |v| {
        v["attached"]["approvalPolicy"] == "never"
    })
    .await;
    assert_eq!(
        view["attached"]["policyChangedBy"], "another client of the Codex daemon",
        "{view}"
    );

    // The thread that asks.
    let asking = start_thread(&mut tui, &ws).await;
    turn(&mut tui, &asking, "MARK-PHONE: go", json!({})).await;
    let asked = tui
        .until("the approval", is("item/commandExecution/requestApproval"))
        .await;
    let view = until_view(&c, &asking, "the relay's request", |v| {
        v["pending"][0]["id"].is_string()
    })
    .await;
    assert_eq!(view["attached"]["state"], "live", "{view}");
    let request = view["pending"][0]["id"].as_str().unwrap().to_owned();

    // A webhook.
    let hooked = until_hook(&got, &request).await;
    assert_eq!(hooked["data"]["sessionId"], asking.as_str(), "{hooked}");

    // MCP, over HTTP with the official Node SDK; forms declined, so it answers nothing.
    let mut mcp = Driver::spawn(Sdk::Node).await;
    mcp.connect(Transport::Http, &[], &relay.url).await;
    mcp.cmd(json!({"op": "policy", "acceptWhen": null, "content": {}}))
        .await;
    let listed = mcp.ok("codex_list", json!({})).await;
    let row = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["sessionId"] == asking.as_str())
        .cloned()
        .unwrap_or_else(|| panic!("codex_list lists the attached thread: {listed}"));
    assert_eq!(row["source"], "codex-daemon", "{row}");
    let status = mcp
        .ok("codex_status", json!({"sessionId": asking, "cursor": 0}))
        .await;
    let pq = &status["pendingQuestion"];
    assert_eq!(pq["type"], "command_approval", "{status}");
    assert!(
        pq["questions"][0]["question"]
            .as_str()
            .is_some_and(|q| q.contains("phone-ran.txt")),
        "{pq}"
    );

    // The UI in Chromium: both threads marked, the `never` one warned of, the card approved.
    let base = relay.url.trim_end_matches("/mcp").to_owned();
    let env = [("ASKING", asking.clone()), ("NEVER", never.clone())];
    let findings = tokio::task::spawn_blocking(move || {
        drive_script_with(
            &node,
            "attach.mjs",
            &base,
            "attach",
            LogIn::Token(codex_relay_testkit::RELAY_TEST_TOKEN.into()),
            &env,
        )
    })
    .await
    .expect("the browser run");
    let text = |k: &str| findings[k].as_str().unwrap_or_default().to_owned();
    assert!(
        text("neverNote").contains("no longer asks for approval")
            && text("neverNote").contains("another client of the Codex daemon"),
        "{findings}"
    );
    assert!(
        text("neverTimeline").contains("no longer asks for approval"),
        "the note is in the thread's timeline: {findings}"
    );
    assert_eq!(findings["askingState"], "live", "{findings}");
    assert!(text("card").contains("phone-ran.txt"), "{findings}");

    let resolved = tui
        .until("serverRequest/resolved", is("serverRequest/resolved"))
        .await;
    assert_eq!(resolved["params"]["requestId"], asked["id"], "{resolved}");
    tui.until("the turn's end", is("turn/completed")).await;
    assert!(
        ws.join("phone-ran.txt").exists(),
        "the approved command ran"
    );
    let events = c
        .get(&format!("/api/sessions/{asking}/events?after=0&limit=1000"))
        .await
        .json();
    let by: Vec<&Value> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ev"]["t"] == "request-resolved")
        .map(|e| &e["ev"]["by"])
        .collect();
    assert_eq!(by, vec![&json!("http")], "{events}");
    // Asked once: the request the daemon sends again when the relay resumes the thread is
    // not a second one.
    let opened = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ev"]["t"] == "request-opened")
        .count();
    assert_eq!(opened, 1, "{events}");

    mcp.close().await;
    let status = relay.stop().await;
    assert!(status.success(), "serve exited with {status}");
    // The daemon was not stopped with the relay: the other client still works.
    tui.request(
        "thread/read",
        json!({"threadId": asking, "includeTurns": false}),
    )
    .await
    .expect("the daemon still answers");
    daemon.stop();
}
