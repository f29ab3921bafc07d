//! A session created on the Codex daemon (`on_daemon`): refused with the reason while the
//! relay is not attached; once attached, the thread starts in the daemon, its approval comes
//! to the relay and is answered there (the daemon's Codex runs the command), and the terminal
//! picks the thread up as `codex resume <id>` does (a client of the daemon resumes it and runs
//! a turn, which the relay follows into the same session). On the real daemon of 0.171 and
//! 0.169.

use std::time::Duration;

use crate::attach::{escalated, is, relay_pending, until_logged};
use crate::common::{Backend, Env};
use codex_relay_core::attach::AttachState;
use codex_relay_core::error::RelayError;
use codex_relay_core::{Answer, CreateOptions, Decider, Ev, Relay};
use codex_relay_protocol::v2::{ApprovalPolicy, SandboxMode};
use codex_relay_testkit::Reply;
use codex_relay_testkit::daemon::{TestDaemon, TuiClient};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_created_on_the_daemon_is_picked_up_by_the_terminal_on_0_171() {
    created_on_the_daemon(codex_relay_testkit::NEWEST).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_created_on_the_daemon_is_picked_up_by_the_terminal_on_0_169() {
    created_on_the_daemon(codex_relay_testkit::PREVIOUS).await
}

fn on_daemon(env: &Env, prompt: &str) -> CreateOptions {
    CreateOptions {
        prompt: Some(prompt.into()),
        cwd: Some(env.cwd()),
        approval_policy: Some(ApprovalPolicy::OnRequest),
        sandbox: Some(SandboxMode::WorkspaceWrite),
        on_daemon: true,
        ..Default::default()
    }
}

/// Creates on the daemon once the relay is attached (refused until then), with backoff.
async fn create_when_attached(relay: &Relay, opts: CreateOptions) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut wait = Duration::from_millis(20);
    loop {
        match relay.create(opts.clone()).await {
            Ok((h, _)) => return h.id().to_owned(),
            Err(RelayError::Unavailable { .. }) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_millis(500));
            }
            Err(e) => panic!("create on the daemon: {e}"),
        }
    }
}

async fn created_on_the_daemon(version: &'static str) {
    let Some(env) = Env::start(version, Backend::Sqlite, Duration::from_secs(600)).await else {
        return;
    };
    env.model.route(
        "MARK-DAEMON",
        [
            Reply::items(vec![escalated("touch placed.txt", "call-placed")]),
            Reply::text("ran on the daemon"),
        ],
    );
    env.model
        .route("MARK-TERMINAL", [Reply::text("the terminal took over")]);
    // Not attached: refused, with what to do.
    let err = env
        .relay
        .create(on_daemon(&env, "MARK-DAEMON: go"))
        .await
        .err()
        .expect("refused while not attached");
    assert!(
        err.to_string().contains("not attached to a Codex daemon")
            && err.to_string().contains("serve --attach"),
        "{err}"
    );

    let daemon = TestDaemon::start(version, &env.home).expect("the daemon starts");
    let attachment = env.relay.attach(daemon.socket());
    let id = create_when_attached(&env.relay, on_daemon(&env, "MARK-DAEMON: go")).await;
    let snap = env.relay.status(&id).unwrap();
    let attached = snap.attached.expect("marked attached");
    assert_eq!(attached.state, AttachState::Live);
    assert_eq!(attached.daemon_pid, daemon.pid());
    assert_eq!(attached.approval_policy.as_deref(), Some("on-request"));

    // Its approval comes to the relay; answered there, the daemon's Codex runs it.
    let card = relay_pending(&env, &id).await;
    assert!(card.question.contains("placed.txt"), "{}", card.question);
    env.relay
        .respond(&id, &card.id, Answer::approve(), Decider::library("test"))
        .await
        .expect("answered");
    until_logged(&env, &id, |events| {
        events.iter().any(|e| matches!(e.ev, Ev::TurnEnd { .. }))
    })
    .await;
    let ws = env.home.workspace().to_owned();
    assert!(ws.join("placed.txt").exists(), "the daemon's Codex ran it");

    // The terminal picks it up (as `codex resume <id>` does on the daemon) and works on.
    let mut tui = TuiClient::connect(&daemon.socket(), "tui-stand-in").await;
    let listed = tui
        .request("thread/list", json!({"limit": 50}))
        .await
        .expect("thread/list");
    assert!(
        listed["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["id"] == id.as_str()),
        "the daemon lists it: {listed}"
    );
    let resumed = tui
        .request("thread/resume", json!({"threadId": id}))
        .await
        .expect("the terminal resumes it");
    assert_eq!(resumed["thread"]["id"], id.as_str());
    tui.request(
        "turn/start",
        json!({"threadId": id, "input": [{"type": "text", "text": "MARK-TERMINAL: mine now"}]}),
    )
    .await
    .expect("turn/start");
    tui.until("the terminal's turn", is("turn/completed")).await;
    let events = until_logged(&env, &id, |events| {
        events
            .iter()
            .filter(|e| matches!(e.ev, Ev::TurnEnd { .. }))
            .count()
            >= 2
    })
    .await;
    assert!(
        events.iter().any(
            |e| matches!(&e.ev, Ev::Text { text, .. } if text.contains("the terminal took over"))
        ),
        "the relay followed the terminal's turn"
    );
    let rows = env
        .relay
        .list(codex_relay_core::ListFilter::default())
        .await
        .unwrap();
    assert_eq!(
        rows.iter().filter(|r| r.session_id == id).count(),
        1,
        "one session for the thread"
    );
    attachment.stop().await;
    env.relay.shutdown().await;
    daemon.stop();
}

/// A daemon thread the relay stored, then the relay stops and a new one opens on the same
/// store and attaches: the stored session is the one followed again (no second session for
/// the thread, its history kept, new events after the old ones without a gap).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_daemon_thread_is_followed_again_after_a_restart() {
    let version = codex_relay_testkit::NEWEST;
    let Some(env) = Env::start(version, Backend::Sqlite, Duration::from_secs(600)).await else {
        return;
    };
    env.model
        .route("MARK-BEFORE", [Reply::text("before the restart")]);
    env.model
        .route("MARK-AFTER", [Reply::text("after the restart")]);
    let daemon = TestDaemon::start(version, &env.home).expect("the daemon starts");
    let attachment = env.relay.attach(daemon.socket());
    let id = create_when_attached(&env.relay, {
        let mut o = on_daemon(&env, "MARK-BEFORE: hi");
        o.approval_policy = Some(ApprovalPolicy::Never);
        o
    })
    .await;
    until_logged(&env, &id, |events| {
        events.iter().any(|e| matches!(e.ev, Ev::TurnEnd { .. }))
    })
    .await;
    attachment.stop().await;
    env.relay.shutdown().await;

    let relay = Relay::open(env.config.clone()).await.expect("opens again");
    let attachment = relay.attach(daemon.socket());
    // Known from the store at once, detached until the daemon answers.
    assert!(relay.status(&id).unwrap().attached.is_some());
    let mut tui = TuiClient::connect(&daemon.socket(), "tui-stand-in").await;
    tui.request("thread/resume", json!({"threadId": id}))
        .await
        .expect("the terminal resumes it");
    tui.request(
        "turn/start",
        json!({"threadId": id, "input": [{"type": "text", "text": "MARK-AFTER: again"}]}),
    )
    .await
    .expect("turn/start");
    tui.until("the turn's end", is("turn/completed")).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    let events = loop {
        let events = relay.events(&id, 0, 10_000).await.unwrap();
        // The second turn's reply, then its end: a count of turn ends alone can be met by
        // the first turn's end and one the restored session logs for the turn it saw cut
        // short, before the second turn's reply is there.
        let reply = events.iter().position(
            |e| matches!(&e.ev, Ev::Text { text, .. } if text.contains("after the restart")),
        );
        if reply.is_some_and(|at| {
            events[at..]
                .iter()
                .any(|e| matches!(e.ev, Ev::TurnEnd { .. }))
        }) {
            break events;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the second turn never reached the stored session: {:?}",
            events.iter().map(|e| e.ev.kind()).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    crate::common::assert_contiguous(&events);
    let texts: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.ev {
            Ev::Text { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect();
    assert!(
        texts.iter().any(|t| t.contains("before the restart"))
            && texts.iter().any(|t| t.contains("after the restart")),
        "{texts:?}"
    );
    let rows = relay
        .list(codex_relay_core::ListFilter::default())
        .await
        .unwrap();
    assert_eq!(rows.iter().filter(|r| r.session_id == id).count(), 1);
    attachment.stop().await;
    relay.shutdown().await;
    daemon.stop();
}
