//! What docs/MCP.md and docs/EVENTS.md promise, tool by tool, with a real client (the Node SDK
//! over stdio) on the real Codex: `outputLines`, paging with `moreEvents`, `until: "change"`,
//! steering and `images` in `codex_say`, `approve for session` and `cancel` answers,
//! `expiresAt` and `morePending`, `codex_list` `limit`, an unknown tool (-32602), the event
//! kinds `photo` and thinking text (`plan`: tests/all/event_kinds.rs in core, as Codex 0.169 does
//! not offer the plan tool), the methods that stay out of the log, and a
//! cancelled long-poll that the server stops waiting on.

use std::time::Duration;

use crate::common::{Bed, Driver, Sdk, Transport};
use codex_relay_testkit::{Item, NEWEST, Reply};
use serde_json::{Value, json};

const TURN: Duration = Duration::from_secs(90);
/// More reasoning items than one `codex_status` page holds (500 events).
const THOUGHTS: usize = 520;

/// A 1×1 PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0,
    0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

fn id(v: &Value) -> String {
    v["sessionId"].as_str().expect("sessionId").to_owned()
}

fn kinds<'a>(events: &'a [Value], t: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["ev"]["t"] == t).collect()
}

/// Every event of a session, page by page; asserts the paging contract on the way.
async fn all_pages(d: &mut Driver, session: &str) -> Vec<Value> {
    let mut cursor = 0u64;
    let mut all = Vec::new();
    loop {
        let page = d
            .ok(
                "codex_status",
                json!({"sessionId": session, "cursor": cursor}),
            )
            .await;
        let events = page["events"].as_array().unwrap().clone();
        assert!(events.len() <= 500, "a page holds at most 500 events");
        let next = page["nextCursor"].as_u64().unwrap();
        if let Some(last) = events.last() {
            assert_eq!(last["seq"].as_u64().unwrap(), next);
        }
        all.extend(events);
        if page["moreEvents"] == false {
            return all;
        }
        assert_eq!(all.len(), 500, "moreEvents only after a full page");
        cursor = next;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tools_keep_the_documented_promises() {
    let bed = Bed::start(NEWEST).await;
    let ws = bed.home.workspace().to_path_buf();
    std::fs::write(ws.join("pixel.png"), PNG).unwrap();
    // P: thinking and a command with output, then more reasoning items than a page holds.
    let mut thoughts: Vec<Item> = (0..THOUGHTS)
        .map(|i| Item::Reasoning(format!("thought {i}")))
        .collect();
    thoughts.push(Item::text("planned and thought"));
    bed.model.route(
        "MARK-P",
        [
            Reply::items(vec![
                Item::Reasoning("first I look".into()),
                Item::exec("seq 1 30", "call-seq"),
            ]),
            Reply::items(thoughts),
            Reply::text("a pixel"),
            Reply::text("first answer").with_delay(Duration::from_secs(4)),
            Reply::text("saw your addition"),
        ],
    );
    // Q: approve for session (the same command again runs unasked), then cancel.
    bed.model.route(
        "MARK-Q",
        [
            Reply::exec("touch q.txt", "call-q1"),
            Reply::exec("touch q.txt", "call-q2"),
            Reply::text("touched twice"),
            Reply::exec("touch never.txt", "call-q3"),
        ],
    );
    // R: two commands in one model reply, both waiting at once.
    bed.model.route(
        "MARK-R",
        [
            Reply::items(vec![
                Item::exec("touch r1.txt", "call-r1"),
                Item::exec("touch r2.txt", "call-r2"),
            ]),
            Reply::text("both handled"),
        ],
    );

    let args = bed.args(120_000);
    let mut d = Driver::spawn(Sdk::Node).await;
    d.connect(Transport::Stdio, &args, "").await;
    let start = |marker: &str, policy: &str, sandbox: &str| {
        json!({"prompt": format!("{marker}: go"), "workingDirectory": ws,
               "approvalPolicy": policy, "sandbox": sandbox})
    };

    // --- P, turn 1: plan, thinking text, command output, paging.
    let p = id(&d
        .ok("codex_start", start("MARK-P", "never", "read-only"))
        .await);
    let done = d
        .ok(
            "codex_status",
            json!({"sessionId": p, "waitMs": 60000, "until": "attention"}),
        )
        .await;
    assert_eq!(done["status"], "done", "{done}");
    assert_eq!(done["result"], "planned and thought", "{done}");
    let five = d
        .ok("codex_status", json!({"sessionId": p, "outputLines": 5}))
        .await;
    assert_eq!(
        five["recentOutput"],
        json!(["27", "28", "29", "30", "planned and thought"]),
        "{five}"
    );
    let default = d.ok("codex_status", json!({"sessionId": p})).await;
    let lines: Vec<&str> = default["recentOutput"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert!(lines.len() > 31 && lines.len() <= 50, "{lines:?}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("$ ") && l.contains("seq 1 30"))
            && lines.contains(&"1"),
        "the command and all its output: {lines:?}"
    );
    let events = all_pages(&mut d, &p).await;
    let thinking: Vec<&str> = kinds(&events, "text")
        .iter()
        .filter(|e| e["ev"]["thinking"] == true)
        .map(|e| e["ev"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        thinking.len(),
        THOUGHTS + 1,
        "every reasoning item is logged"
    );
    assert_eq!(thinking[0], "first I look");
    assert!(events.len() > 500);
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["seq"].as_u64().unwrap(), i as u64 + 1, "contiguous pages");
    }

    // --- P, turn 2: an image in codex_say is a `photo` event and reaches the model.
    let said = d
        .ok(
            "codex_say",
            json!({"sessionId": p, "message": "what is this?", "images": ["pixel.png"]}),
        )
        .await;
    assert_eq!(said["mode"], "started", "{said}");
    let cursor = events.len() as u64;
    d.ok(
        "codex_status",
        json!({"sessionId": p, "waitMs": 60000, "until": "attention"}),
    )
    .await;
    let turn2 = d
        .ok("codex_status", json!({"sessionId": p, "cursor": cursor}))
        .await;
    let photos = kinds(turn2["events"].as_array().unwrap(), "photo");
    assert_eq!(photos.len(), 1, "{turn2}");
    let url = photos[0]["ev"]["url"].as_str().unwrap();
    assert!(
        url.starts_with("file://") && url.ends_with("pixel.png"),
        "{url}"
    );
    assert!(
        bed.model.requests_with("what is this?")[0].body["input"]
            .to_string()
            .contains("input_image")
    );

    // --- P, turn 3: `until: "change"` returns at the next event, not at the turn's end;
    // codex_say on the running turn steers it.
    let before = bed.model.requests_with("MARK-P").len();
    let cursor = turn2["nextCursor"].as_u64().unwrap();
    d.ok(
        "codex_say",
        json!({"sessionId": p, "message": "think slowly"}),
    )
    .await;
    let changed = d
        .call(
            "codex_status",
            json!({"sessionId": p, "cursor": cursor, "waitMs": 30000, "until": "change"}),
        )
        .await;
    assert!(
        changed["ms"].as_u64().unwrap() < 3000,
        "until change returned at once: {changed}"
    );
    assert_eq!(changed["structured"]["status"], "active", "{changed}");
    assert!(
        !changed["structured"]["events"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    bed.model.wait_for_requests(before + 1, TURN).await;
    let steered = d
        .ok("codex_say", json!({"sessionId": p, "message": "ALSO-THIS"}))
        .await;
    assert_eq!(steered["mode"], "steered", "{steered}");
    let done = d
        .ok(
            "codex_status",
            json!({"sessionId": p, "waitMs": 60000, "until": "attention"}),
        )
        .await;
    assert_eq!(done["result"], "saw your addition", "{done}");
    assert_eq!(done["turnCount"], 3, "steering adds no turn");
    let last = bed.model.requests_with("MARK-P").pop().unwrap();
    assert!(last.body["input"].to_string().contains("ALSO-THIS"));

    // --- Q: `approve for session`, then `cancel`.
    let q = id(&d
        .ok(
            "codex_start",
            start("MARK-Q", "untrusted", "workspace-write"),
        )
        .await);
    let (waiting, _) = d
        .status_until(&q, TURN, |s| !s["pendingQuestion"].is_null())
        .await;
    let pq = &waiting["pendingQuestion"];
    assert_eq!(pq["morePending"], 0, "{pq}");
    assert!(pq["expiresAt"].as_str().unwrap().ends_with('Z'), "{pq}");
    let answered = d
        .ok(
            "codex_respond",
            json!({"sessionId": q, "id": pq["id"], "answers": ["approve for session"]}),
        )
        .await;
    assert_eq!(answered["decision"], "approve for session", "{answered}");
    let (done, events) = d.status_until(&q, TURN, |s| s["status"] == "done").await;
    assert_eq!(done["result"], "touched twice", "{done}");
    assert!(ws.join("q.txt").exists());
    assert_eq!(
        kinds(&events, "request-opened").len(),
        1,
        "the same command ran again unasked"
    );
    d.ok("codex_say", json!({"sessionId": q, "message": "one more"}))
        .await;
    let (waiting, _) = d
        .status_until(&q, TURN, |s| !s["pendingQuestion"].is_null())
        .await;
    let pq = &waiting["pendingQuestion"];
    let cancelled = d
        .ok(
            "codex_respond",
            json!({"sessionId": q, "id": pq["id"], "answers": ["cancel"]}),
        )
        .await;
    assert_eq!(cancelled["decision"], "cancel", "{cancelled}");
    let (stopped, _) = d
        .status_until(&q, TURN, |s| {
            s["status"] != "awaiting_approval" && s["status"] != "active"
        })
        .await;
    assert_eq!(
        stopped["status"], "interrupted",
        "cancel stops the turn: {stopped}"
    );
    assert!(!ws.join("never.txt").exists());

    // --- R: two requests at once: the oldest is shown, `morePending` counts the other.
    let r = id(&d
        .ok(
            "codex_start",
            start("MARK-R", "untrusted", "workspace-write"),
        )
        .await);
    let (waiting, _) = d
        .status_until(&r, TURN, |s| s["pendingQuestion"]["morePending"] == 1)
        .await;
    let first = waiting["pendingQuestion"].clone();
    // Codex runs the two calls in parallel, so either may ask first: the one shown is the one
    // whose request the log opened first.
    let events = all_pages(&mut d, &r).await;
    let opened = kinds(&events, "request-opened");
    assert_eq!(opened.len(), 2, "{events:?}");
    assert_eq!(
        first["id"], opened[0]["ev"]["request"]["id"],
        "the oldest request is shown: {first}"
    );
    let question = first["questions"][0]["question"].as_str().unwrap();
    assert!(
        question.contains("touch r1.txt") || question.contains("touch r2.txt"),
        "{first}"
    );
    d.ok(
        "codex_respond",
        json!({"sessionId": r, "id": first["id"], "answers": ["approve"]}),
    )
    .await;
    let (waiting, _) = d
        .status_until(&r, TURN, |s| {
            !s["pendingQuestion"].is_null() && s["pendingQuestion"]["id"] != first["id"]
        })
        .await;
    assert_eq!(waiting["pendingQuestion"]["morePending"], 0, "{waiting}");
    d.ok(
        "codex_respond",
        json!({"sessionId": r, "id": waiting["pendingQuestion"]["id"], "answers": ["approve"]}),
    )
    .await;
    d.status_until(&r, TURN, |s| s["status"] == "done").await;

    // Not logged: thread/started, thread/status/changed, turn/diff/updated,
    // serverRequest/resolved (all of which these sessions provoked).
    for s in [&p, &q, &r] {
        let events = all_pages(&mut d, s).await;
        for e in &events {
            let method = e["ev"]["method"].as_str().unwrap_or("");
            assert!(
                !matches!(
                    method,
                    "thread/started"
                        | "thread/status/changed"
                        | "turn/diff/updated"
                        | "serverRequest/resolved"
                ),
                "{method} is not to be logged: {e}"
            );
        }
    }

    // codex_list `limit`: newest first, at most that many.
    let one = d
        .ok("codex_list", json!({"workingDirectory": ws, "limit": 1}))
        .await;
    let ids: Vec<&str> = one["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [r.as_str()], "{one}");
    let all = d.ok("codex_list", json!({"workingDirectory": ws})).await;
    assert_eq!(all["sessions"].as_array().unwrap().len(), 3, "{all}");

    // An unknown tool is a protocol error, -32602.
    let unknown = d.call("codex_nope", json!({})).await;
    assert_eq!(unknown["code"], -32602, "{unknown}");
    d.close().await;
    bed.assert_no_codex_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_long_poll_stops_on_the_server() {
    let bed = Bed::start(NEWEST).await;
    // The turn runs a long command: nothing happens meanwhile, so a long-poll waits.
    bed.model.route(
        "MARK-W",
        [Reply::exec("sleep 30", "call-w"), Reply::text("idle now")],
    );
    let args = bed.args(120_000);
    let mut d = Driver::spawn(Sdk::Node).await;
    d.connect(Transport::Stdio, &args, "").await;
    let s = id(&d
        .ok(
            "codex_start",
            json!({"prompt": "MARK-W: hi", "workingDirectory": bed.home.workspace(),
                   "approvalPolicy": "never", "sandbox": "read-only"}),
        )
        .await);
    let (running, _) = d
        .status_until(&s, TURN, |st| {
            st["itemEvents"]
                .as_array()
                .is_some_and(|items| items.iter().any(|i| i.to_string().contains("sleep 30")))
        })
        .await;
    assert_eq!(running["status"], "active", "{running}");
    let cursor = running["nextCursor"].clone();
    // The client gives up after 300 ms and sends notifications/cancelled.
    let cancelled = d
        .cmd(json!({"op": "call", "tool": "codex_status",
                    "args": {"sessionId": s, "cursor": cursor, "waitMs": 60000},
                    "abortAfterMs": 300}))
        .await;
    assert!(cancelled["thrown"].is_string(), "{cancelled}");
    // A server still waiting on it would send its progress every 2 s; over 4.5 s none comes
    // (the SDK reports a progress notification for a finished request as an error), while a
    // second long-poll on the same session gets its own.
    let second = d
        .call(
            "codex_status",
            json!({"sessionId": s, "cursor": cursor, "waitMs": 4500}),
        )
        .await;
    assert_eq!(second["isError"], false, "{second}");
    assert!(second["progress"].as_u64().unwrap() >= 1, "{second}");
    let errors = d.cmd(json!({"op": "errors"})).await;
    let late: Vec<&Value> = errors["errors"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e.as_str().unwrap_or("").contains("progress notification"))
        .collect();
    assert!(
        late.is_empty(),
        "the server kept waiting on the cancelled call: {late:?}"
    );
    d.ok("codex_interrupt", json!({"sessionId": s})).await;
    d.close().await;
}
