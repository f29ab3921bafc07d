//! A daemon thread the relay begins to follow halfway through a turn (the terminal ran it
//! before the relay attached): what the thread did before the relay subscribed comes from the
//! `thread/resume` answer, the rest live, and the session's log holds each event once, in
//! order. On the real daemon of 0.171.

use std::sync::Arc;
use std::time::Duration;

use crate::attach::{is, until_logged};
use crate::common::{Backend, Env};
use codex_relay_core::Ev;
use codex_relay_testkit::Reply;
use codex_relay_testkit::daemon::{TestDaemon, TuiClient};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_the_relay_joins_halfway_is_logged_whole_and_once() {
    let version = codex_relay_testkit::NEWEST;
    let Some(env) = Env::start(version, Backend::Sqlite, Duration::from_secs(600)).await else {
        return;
    };
    // The second reply waits until the relay has joined.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    env.model
        .route("MARK-FIRST", [Reply::text("the first reply")]);
    env.model.route(
        "MARK-SECOND",
        [Reply::text("the second reply").after(&gate)],
    );
    let daemon = TestDaemon::start(version, &env.home).expect("the daemon starts");
    let mut tui = TuiClient::connect(&daemon.socket(), "tui-stand-in").await;
    let started = tui
        .request(
            "thread/start",
            json!({"cwd": env.home.workspace(), "approvalPolicy": "never"}),
        )
        .await
        .expect("thread/start");
    let id = started["thread"]["id"].as_str().unwrap().to_owned();
    let say = |text: &str| json!({"threadId": id, "input": [{"type": "text", "text": text}]});
    tui.request("turn/start", say("MARK-FIRST: one"))
        .await
        .expect("turn/start");
    tui.until("the first turn's end", is("turn/completed"))
        .await;
    tui.request("turn/start", say("MARK-SECOND: two"))
        .await
        .expect("turn/start");
    tui.until("the second prompt", |m| {
        m["method"] == "item/completed" && m["params"]["item"]["type"] == "userMessage"
    })
    .await;

    // Only now does the relay attach: the second turn runs, its prompt long sent.
    let attachment = env.relay.attach(daemon.socket());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut wait = Duration::from_millis(20);
    while env.relay.status(&id).is_err() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the relay never took the thread up"
        );
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_millis(500));
    }
    let said = |events: &[codex_relay_core::Envelope], what: &str| {
        events
            .iter()
            .any(|e| matches!(&e.ev, Ev::Text { text, .. } if text.contains(what)))
    };
    until_logged(&env, &id, |events| said(events, "MARK-SECOND")).await;
    gate.add_permits(1);
    tui.until("the second turn's end", is("turn/completed"))
        .await;
    let events = until_logged(&env, &id, |events| {
        events
            .iter()
            .position(|e| matches!(&e.ev, Ev::Text { text, .. } if text == "the second reply"))
            .is_some_and(|at| {
                events[at..]
                    .iter()
                    .any(|e| matches!(e.ev, Ev::TurnEnd { .. }))
            })
    })
    .await;
    let arcs: Vec<_> = events.iter().cloned().map(Arc::new).collect();
    crate::common::assert_contiguous(&arcs);
    let texts: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.ev {
            Ev::Text { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        texts,
        [
            "MARK-FIRST: one",
            "the first reply",
            "MARK-SECOND: two",
            "the second reply"
        ],
        "the history, then the turn joined halfway, each once"
    );
    let count = |kind: &str| events.iter().filter(|e| e.ev.kind() == kind).count();
    assert_eq!((count("turn-start"), count("turn-end")), (2, 2));
    attachment.stop().await;
    env.relay.shutdown().await;
    daemon.stop();
}
