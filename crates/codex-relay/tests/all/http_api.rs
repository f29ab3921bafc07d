//! The HTTP front on the real Codex with the scripted model: a command approval arrives as a
//! reference-001 `permission_request` on the session's SSE stream and on `/api/stream`; a
//! deny with a message reaches the model and the turn completes; the same with allow; a
//! plan-mode question arrives as `ask_user_question` and is answered; a resumed stream
//! (`Last-Event-ID`) joins its first connection with nothing lost or repeated.

use std::time::Duration;

use crate::common::{Bed, HttpRelay};
use crate::http_support::{Client, Event, Sse};
use codex_relay_testkit::{Item, Reply};
use serde_json::{Value, json};

const NEWEST: &str = codex_relay_testkit::NEWEST;
const TURN: Duration = Duration::from_secs(90);

fn ev_t(e: &Event) -> String {
    e.json()["ev"]["t"].as_str().unwrap_or_default().to_owned()
}

fn is_status(e: &Event, status: &str) -> bool {
    e.event == "envelope" && ev_t(e) == "status" && e.json()["ev"]["status"] == status
}

async fn create(c: &Client, body: Value) -> String {
    let r = c.post("/api/sessions", &body).await;
    assert_eq!(r.status, 201, "{}", r.text());
    r.json()["sessionId"].as_str().unwrap().to_owned()
}

/// Waits on a session stream for its turn to end and the session to be idle again.
async fn until_idle(s: &mut Sse) -> Vec<Event> {
    s.until(TURN, |e| is_status(e, "idle")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_and_questions_over_sse_and_the_permission_endpoint() {
    let bed = Bed::start(NEWEST).await;
    let ws = bed.home.workspace().to_path_buf();
    std::fs::create_dir(ws.join("build")).unwrap();
    bed.model.route(
        "MARK-DENY",
        [
            Reply::exec("rm -rf build", "call-deny"),
            Reply::text("understood, build stays"),
            Reply::text("follow-up done"),
        ],
    );
    bed.model.route(
        "MARK-ALLOW",
        [
            Reply::exec("touch allowed.txt", "call-allow"),
            Reply::text("created allowed.txt"),
        ],
    );
    let question = json!({"questions": [{"id": "env", "header": "Env", "question": "Which environment?",
        "options": [{"label": "staging", "description": "safe"}, {"label": "prod", "description": "live"}]}]});
    bed.model.route(
        "MARK-ASK",
        [
            Reply::items(vec![Item::function_call(
                "request_user_input",
                question,
                "call_q",
            )]),
            Reply::text("deploying"),
        ],
    );
    let relay = HttpRelay::start(bed.args(120_000)).await;
    let c = Client::new(&relay.url);
    let mut dashboard = c.stream("/api/stream", &[]).await;
    let start = |marker: &str| {
        json!({"prompt": format!("{marker}: do the task"), "cwd": ws,
            "approvalPolicy": "untrusted", "sandbox": "workspace-write"})
    };

    // Deny with a message: the model's next request carries it; the turn completes.
    let deny = create(&c, start("MARK-DENY")).await;
    let mut s = c.stream(&format!("/api/sessions/{deny}/stream"), &[]).await;
    let seen = s.until(TURN, |e| e.event == "permission_request").await;
    let asked = seen.last().unwrap().json();
    assert_eq!(asked["toolName"], "Bash", "{asked}");
    assert_eq!(asked["sessionId"], deny.as_str());
    assert!(
        asked["toolInput"]["command"]
            .as_str()
            .unwrap()
            .contains("rm -rf build"),
        "{asked}"
    );
    assert!(
        seen.iter()
            .any(|e| e.event == "envelope" && ev_t(e) == "request-opened"),
        "the envelope comes with it: {seen:#?}"
    );
    let pending = c.get("/api/codex/permission/pending").await.json();
    assert_eq!(pending[0]["id"], asked["id"], "{pending}");
    assert_eq!(pending[0]["sessionId"], deny.as_str());
    let r = c
        .post(
            "/api/codex/permission/respond",
            &json!({"id": asked["id"], "action": "deny", "message": "too risky"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["decision"], "deny");
    assert_eq!(r.json()["by"], "http");
    let rest = until_idle(&mut s).await;
    assert!(
        rest.iter().any(|e| ev_t(e) == "request-resolved"),
        "{rest:#?}"
    );
    let snap = c.get(&format!("/api/sessions/{deny}")).await.json();
    assert_eq!(snap["result"], "understood, build stays", "{snap}");
    assert!(ws.join("build").is_dir(), "the denied command did not run");
    let last = bed
        .model
        .requests_with("MARK-DENY")
        .last()
        .cloned()
        .expect("requests");
    assert!(
        last.body["input"].to_string().contains("too risky"),
        "the model saw the reason: {}",
        last.body["input"]
    );
    let again = c
        .post(
            "/api/codex/permission/respond",
            &json!({"id": asked["id"], "action": "allow"}),
        )
        .await;
    assert_eq!(again.status, 409, "{}", again.text());
    assert_eq!(again.json()["error"]["code"], "already_resolved");
    assert!(
        again.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already resolved")
    );

    // Allow: the command runs and the turn completes.
    let allow = create(&c, start("MARK-ALLOW")).await;
    let mut s = c
        .stream(&format!("/api/sessions/{allow}/stream"), &[])
        .await;
    let asked = s
        .until(TURN, |e| e.event == "permission_request")
        .await
        .pop()
        .unwrap()
        .json();
    assert!(
        asked["toolInput"]["command"]
            .as_str()
            .unwrap()
            .contains("touch allowed.txt")
    );
    let r = c
        .post(
            "/api/codex/permission/respond",
            &json!({"id": asked["id"], "action": "allow"}),
        )
        .await;
    assert_eq!(
        (r.status, r.json()["decision"].clone()),
        (200, json!("approve")),
        "{}",
        r.text()
    );
    until_idle(&mut s).await;
    assert!(ws.join("allowed.txt").exists(), "the allowed command ran");
    let snap = c.get(&format!("/api/sessions/{allow}")).await.json();
    assert_eq!(snap["result"], "created allowed.txt", "{snap}");

    // A plan-mode question: `ask_user_question`, answered with one of its options.
    let ask = create(
        &c,
        json!({"prompt": "MARK-ASK: ask me where to deploy", "cwd": ws, "sandbox": "read-only",
            "planMode": true}),
    )
    .await;
    let mut s = c.stream(&format!("/api/sessions/{ask}/stream"), &[]).await;
    let q = s
        .until(TURN, |e| e.event == "ask_user_question")
        .await
        .pop()
        .unwrap()
        .json();
    assert_eq!(q["questions"][0]["question"], "Which environment?", "{q}");
    assert_eq!(
        q["questions"][0]["options"][1],
        json!({"label": "prod", "description": "live"})
    );
    assert_eq!(q["questions"][0]["multiSelect"], false);
    let r = c
        .post(
            "/api/codex/permission/respond",
            &json!({"id": q["id"], "action": "allow", "updatedInput": {"answers": {"q0": "prod"}}}),
        )
        .await;
    assert_eq!(
        (r.status, r.json()["decision"].clone()),
        (200, json!("answer")),
        "{}",
        r.text()
    );
    until_idle(&mut s).await;
    let output = bed.model.requests_with("MARK-ASK")[1]
        .tool_output("call_q")
        .expect("the answer reached the model");
    assert!(output.contains(r#"["prod"]"#), "{output}");

    // The dashboard stream saw all three sessions come and their requests open and resolve.
    let mut created = Vec::new();
    let mut opened = 0;
    let mut resolved = 0;
    while resolved < 3 {
        let e = dashboard
            .next(TURN)
            .await
            .expect("the relay stream goes on");
        match e.event.as_str() {
            "session_created" => created.push(e.json()["sessionId"].as_str().unwrap().to_owned()),
            "request_opened" => opened += 1,
            "request_resolved" => resolved += 1,
            _ => {}
        }
    }
    assert_eq!(created, vec![deny.clone(), allow.clone(), ask.clone()]);
    assert_eq!(opened, 3);

    // The listing: this relay's sessions with status and model, paged, filtered.
    let page = c.get("/api/sessions?limit=2").await.json();
    assert_eq!(page["sessions"].as_array().unwrap().len(), 2, "{page}");
    let next = page["nextCursor"].as_str().expect("a next page").to_owned();
    let rest = c
        .get(&format!("/api/sessions?limit=2&cursor={next}"))
        .await
        .json();
    let ids: Vec<&Value> = page["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .chain(rest["sessions"].as_array().unwrap())
        .map(|r| &r["sessionId"])
        .collect();
    for id in [&deny, &allow, &ask] {
        assert_eq!(
            ids.iter().filter(|i| **i == id).count(),
            1,
            "{id} once in {ids:?}"
        );
    }
    let idle = c.get("/api/sessions?status=idle").await.json();
    let row = idle["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["sessionId"] == deny.as_str())
        .cloned()
        .expect("the idle session is listed");
    assert_eq!(
        (row["owned"].clone(), row["status"].clone()),
        (json!(true), json!("idle"))
    );
    assert!(row["model"].is_string(), "{row}");
    let bad = c.get("/api/sessions?status=sleepy").await;
    assert_eq!(bad.status, 400, "{}", bad.text());

    // A follow-up message starts a new turn; interrupting an idle session says so.
    let seen = c.get(&format!("/api/sessions/{deny}")).await.json()["lastSeq"].clone();
    let mut s = c
        .stream(&format!("/api/sessions/{deny}/stream?after={seen}"), &[])
        .await;
    let said = c
        .post(
            &format!("/api/sessions/{deny}/messages"),
            &json!({"text": "anything else?"}),
        )
        .await;
    assert_eq!(said.status, 200, "{}", said.text());
    assert_eq!(said.json()["mode"], "started");
    until_idle(&mut s).await;
    let snap = c.get(&format!("/api/sessions/{deny}")).await.json();
    assert_eq!(
        (snap["result"].clone(), snap["turnCount"].clone()),
        (json!("follow-up done"), json!(2))
    );
    let r = c
        .post(&format!("/api/sessions/{deny}/interrupt"), &json!({}))
        .await;
    assert_eq!(r.json(), json!({"interrupted": false}));

    // An idle stream carries keep-alive comments.
    let before = s.comments;
    assert!(
        s.next(Duration::from_secs(17)).await.is_none(),
        "nothing happened"
    );
    assert!(s.comments > before, "a `: keep-alive` comment within 15 s");

    // Closing ends the session's stream cleanly.
    let last_seq = c.get(&format!("/api/sessions/{allow}")).await.json()["lastSeq"].clone();
    let mut s = c
        .stream(
            &format!("/api/sessions/{allow}/stream?after={last_seq}"),
            &[],
        )
        .await;
    assert_eq!(
        c.delete(&format!("/api/sessions/{allow}")).await.status,
        204
    );
    let tail = s.until(TURN, |e| e.event == "end").await;
    assert!(tail.iter().any(|e| is_status(e, "closed")), "{tail:#?}");
    let closed = dashboard
        .until(TURN, |e| e.event == "session_closed")
        .await
        .pop()
        .unwrap()
        .json();
    assert_eq!(
        (closed["sessionId"].as_str(), closed["status"].as_str()),
        (Some(allow.as_str()), Some("closed"))
    );
    assert!(
        s.next(Duration::from_secs(5)).await.is_none(),
        "the stream ends after `end`"
    );
    relay.stop().await;
    bed.assert_no_codex_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_resumed_mid_turn_misses_nothing_and_repeats_nothing() {
    let bed = Bed::start(NEWEST).await;
    let ws = bed.home.workspace().to_path_buf();
    bed.model.push([
        Reply::exec("echo one", "c1"),
        Reply::exec("echo two", "c2").with_delay(Duration::from_millis(800)),
        Reply::exec("echo three", "c3").with_delay(Duration::from_millis(800)),
        Reply::exec("echo four", "c4").with_delay(Duration::from_millis(300)),
        Reply::exec("echo five", "c5").with_delay(Duration::from_millis(300)),
        Reply::text("counted").with_delay(Duration::from_millis(800)),
        // In case the steer lands after the last request and Codex asks once more.
        Reply::text("counted, and kept going"),
    ]);
    // A small in-memory window: older history comes from the store, newer from memory.
    let mut args = bed.args(120_000);
    args.extend(["--event-buffer".into(), "16".into()]);
    let relay = HttpRelay::start(args).await;
    let c = Client::new(&relay.url);
    let id = create(
        &c,
        json!({"prompt": "count to three", "cwd": ws, "approvalPolicy": "never",
            "sandbox": "workspace-write"}),
    )
    .await;
    let path = format!("/api/sessions/{id}/stream");
    let mut first = c.stream(&path, &[]).await;
    // Disconnect once the first command has ended, while the turn still runs.
    let mut got = first.until(TURN, |e| ev_t(e) == "tool-call-end").await;
    drop(first);
    // While disconnected, a message steers the running turn.
    let said = c
        .post(
            &format!("/api/sessions/{id}/messages"),
            &json!({"text": "STEER-MARK keep going"}),
        )
        .await;
    assert_eq!(
        (said.status, said.json()["mode"].clone()),
        (200, json!("steered")),
        "{}",
        said.text()
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let last_id = got
        .iter()
        .rev()
        .find_map(|e| e.id.clone())
        .expect("numbered events");
    let mut second = c.stream(&path, &[("Last-Event-ID", &last_id)]).await;
    got.extend(until_idle(&mut second).await);
    let turn_end = got
        .iter()
        .position(|e| ev_t(e) == "turn-end")
        .expect("the turn ended");
    assert!(
        turn_end
            > got
                .iter()
                .position(|e| e.id.as_deref() == Some(&last_id))
                .unwrap(),
        "the disconnect was mid-turn"
    );
    let streamed: Vec<Value> = got
        .iter()
        .filter(|e| e.event == "envelope")
        .map(|e| {
            assert_eq!(
                e.id.as_deref(),
                e.json()["seq"].to_string().as_str().into(),
                "id = seq"
            );
            e.json()
        })
        .collect();
    let logged = c
        .get(&format!("/api/sessions/{id}/events?after=0&limit=1000"))
        .await
        .json();
    let logged = logged["events"].as_array().unwrap();
    let seqs = |v: &[Value]| {
        v.iter()
            .map(|e| e["seq"].as_u64().unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        seqs(&streamed),
        seqs(logged),
        "same events, in order, once each"
    );
    assert_eq!(streamed.as_slice(), logged.as_slice(), "the same envelopes");
    assert_eq!(seqs(logged), (1..=logged.len() as u64).collect::<Vec<_>>());
    assert!(
        logged.len() > 16,
        "more history than memory holds: {}",
        logged.len()
    );
    let mid = logged.len() / 2;
    let mut third = c.stream(&format!("{path}?after={mid}"), &[]).await;
    let again: Vec<Value> = third
        .until(TURN, |e| {
            e.id.as_deref() == Some(logged.len().to_string().as_str())
        })
        .await
        .iter()
        .filter(|e| e.event == "envelope")
        .map(|e| e.json())
        .collect();
    assert_eq!(
        again.as_slice(),
        &logged[mid..],
        "`?after=` resumes the same way"
    );
    relay.stop().await;
    bed.assert_no_codex_left().await;
}
