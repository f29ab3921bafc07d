//! Every decider reaches the same door (one `serve`, real Codex 0.169, the scripted model):
//! a deny rule, a person through the HTTP API, MCP's `codex_respond`, an MCP elicitation form,
//! the legacy contract's elicitation, an answer link from a webhook, and the deadline each end
//! one request, and each session's stored log and the relay-wide stream record who decided, in
//! the words clients have always read (`rule:<name>`, `http`, `mcp`, `mcp-elicitation`,
//! `mcp-legacy`, `answer-link`, `timeout`) with the kind of decider (`who`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::common::{Bed, Driver, HttpRelay, Sdk, Transport};
use crate::http_answer_links::{path_of, receiver, until_hook};
use crate::http_support::Client;
use crate::legacy_support::LegacyDriver;
use codex_relay_testkit::Reply;
use serde_json::{Value, json};

const TURN: Duration = Duration::from_secs(90);
/// Long enough that the requests answered at once are answered well before it, on a loaded
/// machine; the one nobody answers is declined when it passes.
const APPROVAL_TIMEOUT_MS: u64 = 20_000;

async fn pending_of(c: &Client, session: &str) -> String {
    let deadline = Instant::now() + TURN;
    loop {
        let snap = c.get(&format!("/api/sessions/{session}")).await.json();
        if let Some(id) = snap["pending"][0]["id"].as_str() {
            return id.to_owned();
        }
        assert!(Instant::now() < deadline, "no request in {session}: {snap}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The `by` and `decision` of every `request-resolved` in a session's stored log, once it
/// holds one.
async fn resolved_in_log(c: &Client, session: &str) -> Vec<(String, String)> {
    let deadline = Instant::now() + TURN;
    loop {
        let events = c
            .get(&format!(
                "/api/sessions/{session}/events?after=0&limit=1000"
            ))
            .await
            .json();
        let got: Vec<(String, String)> = events["events"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["ev"]["t"] == "request-resolved")
            .map(|e| {
                (
                    e["ev"]["by"].as_str().unwrap_or_default().to_owned(),
                    e["ev"]["decision"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        if !got.is_empty() {
            return got;
        }
        assert!(Instant::now() < deadline, "nothing resolved in {session}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_a_link_each_front_and_the_deadline_all_answer_through_one_door() {
    let bed = Bed::start(codex_relay_testkit::NEWEST).await;
    let ws = bed.home.workspace().to_path_buf();
    std::fs::create_dir(ws.join("build")).unwrap();
    for (mark, cmd) in [
        ("DOOR-RULE", "rm -rf build"),
        ("DOOR-HTTP", "touch http.txt"),
        ("DOOR-MCP", "touch mcp.txt"),
        ("DOOR-FORM", "touch form.txt"),
        ("DOOR-LEGACY", "touch legacy.txt"),
        ("DOOR-LINK", "touch link.txt"),
        ("DOOR-LATE", "touch late.txt"),
    ] {
        bed.model.route(
            mark,
            [
                Reply::exec(cmd, &format!("call-{mark}")),
                Reply::text(format!("{mark} over")),
            ],
        );
    }
    let (hook, got) = receiver().await;
    let notify = bed.home.root().join("notify.toml");
    std::fs::write(
        &notify,
        format!(
            "answer_links = true\npush = false\n[[webhook]]\nname = \"ops\"\nurl = \"{hook}\"\nsecret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"\n"
        ),
    )
    .unwrap();
    let mut args = bed.args(APPROVAL_TIMEOUT_MS);
    args.extend(["--notify".into(), notify.display().to_string()]);
    let relay = HttpRelay::start(args).await;
    let c = Client::new(&relay.url);
    let mut stream = c.stream("/api/stream", &[]).await;
    let r = c
        .post(
            "/api/rules",
            &json!({"name": "no-rm", "action": "deny", "argv": ["rm", "-rf"],
                    "reason": "use cargo clean"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let start = |mark: &str| {
        json!({"prompt": format!("{mark}: go"), "cwd": ws, "approvalPolicy": "untrusted",
               "sandbox": "workspace-write"})
    };
    let create = |mark: &'static str| {
        let c = &c;
        let body = start(mark);
        async move {
            let r = c.post("/api/sessions", &body).await;
            assert_eq!(r.status, 201, "{}", r.text());
            r.json()["sessionId"].as_str().unwrap().to_owned()
        }
    };
    let mut sessions: BTreeMap<&str, String> = BTreeMap::new();

    // The deadline's request opens first: nobody answers it.
    sessions.insert("timeout", create("DOOR-LATE").await);
    // A rule.
    sessions.insert("rule:no-rm", create("DOOR-RULE").await);
    // A person through the HTTP API.
    let s = create("DOOR-HTTP").await;
    let req = pending_of(&c, &s).await;
    let r = c
        .post(
            "/api/codex/permission/respond",
            &json!({"id": req, "action": "allow"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    sessions.insert("http", s);
    // A person through an answer link in the webhook.
    let s = create("DOOR-LINK").await;
    let req = pending_of(&c, &s).await;
    let hook = until_hook(&got, &req).await;
    let link = path_of(hook["data"]["answer"]["approveUrl"].as_str().unwrap());
    let token = link.split("t=").nth(1).unwrap().split('&').next().unwrap();
    let r = Client::anonymous(&relay.url)
        .send(
            "POST",
            &format!("/answer/{req}"),
            &[
                ("content-type", "application/x-www-form-urlencoded"),
                ("sec-fetch-site", "same-origin"),
            ],
            format!("t={token}&a=approve").as_bytes(),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    sessions.insert("answer-link", s);

    // Through MCP: `codex_respond` answers a session started over HTTP (nobody is sent a form
    // for it); a session started over MCP is asked with a form, which the client accepts.
    let mut mcp = Driver::spawn(Sdk::Node).await;
    mcp.connect(Transport::Http, &[], &relay.url).await;
    let s = create("DOOR-MCP").await;
    let req = pending_of(&c, &s).await;
    mcp.ok(
        "codex_respond",
        json!({"sessionId": s, "id": req, "answers": ["approve"]}),
    )
    .await;
    sessions.insert("mcp", s);
    mcp.cmd(json!({"op": "policy", "acceptWhen": "touch form.txt",
        "content": {"decision": "approve"}}))
        .await;
    let started = mcp
        .ok(
            "codex_start",
            json!({"prompt": "DOOR-FORM: go", "workingDirectory": ws,
                   "approvalPolicy": "untrusted", "sandbox": "workspace-write"}),
        )
        .await;
    sessions.insert(
        "mcp-elicitation",
        started["sessionId"].as_str().unwrap().to_owned(),
    );

    // Through the legacy contract at /mcp-server: its form, approved.
    let mut legacy = LegacyDriver::spawn().await;
    legacy
        .cmd(json!({"op": "connect", "url": format!("{}-server", relay.url), "elicitation": true,
            "headers": {"Authorization": format!("Bearer {}", codex_relay_testkit::RELAY_TEST_TOKEN)}}))
        .await;
    let done = legacy
        .call(
            "codex",
            json!({"prompt": "DOOR-LEGACY: go", "cwd": ws, "approval-policy": "untrusted",
                   "sandbox": "workspace-write"}),
            &["approved"],
            json!({}),
        )
        .await;
    assert!(ws.join("legacy.txt").exists(), "{done}");

    // The relay-wide stream shows each resolution with who decided and the kind of decider.
    let mut seen: BTreeMap<String, (String, String)> = BTreeMap::new();
    let deadline = Instant::now() + TURN;
    while seen.len() < sessions.len() + 1 {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "the stream showed only {seen:?}");
        for e in stream
            .until(left, |e| e.event == "request_resolved")
            .await
            .into_iter()
            .filter(|e| e.event == "request_resolved")
        {
            let v: Value = e.json();
            seen.insert(
                v["by"].as_str().unwrap_or_default().to_owned(),
                (
                    v["who"].as_str().unwrap_or_default().to_owned(),
                    v["sessionId"].as_str().unwrap_or_default().to_owned(),
                ),
            );
        }
    }
    let legacy_session = seen
        .get("mcp-legacy")
        .map(|(_, s)| s.clone())
        .unwrap_or_else(|| panic!("the legacy answer on the stream: {seen:?}"));
    sessions.insert("mcp-legacy", legacy_session);
    for (by, session) in &sessions {
        let who = match *by {
            b if b.starts_with("rule:") => "rule",
            "timeout" => "timeout",
            _ => "human",
        };
        assert_eq!(
            seen.get(*by),
            Some(&(who.to_owned(), session.clone())),
            "{by}: {seen:?}"
        );
        // The session's stored log says the same.
        let decision = if who == "human" { "approve" } else { "deny" };
        assert_eq!(
            resolved_in_log(&c, session).await,
            vec![(by.to_string(), decision.to_owned())],
            "{by}"
        );
    }
    for file in ["http", "mcp", "form", "legacy", "link"] {
        assert!(ws.join(format!("{file}.txt")).exists(), "{file} ran");
    }
    assert!(!ws.join("late.txt").exists() && ws.join("build").is_dir());
    mcp.close().await;
    legacy.close().await;
    relay.stop().await;
    bed.assert_no_codex_left().await;
}
