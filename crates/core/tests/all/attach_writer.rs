//! The active-writer conflict: the Codex daemon holds a thread (another client works in it);
//! the relay, not attached, is asked for that thread: its own Codex cannot resume it ("already
//! has an active writer"), and the relay says which process holds it (pid and command line,
//! from /proc) and what works: attaching to that daemon, reading the thread without writing
//! (`thread/read`), forking it (`thread/fork`). Each offer is then taken and works, and the
//! daemon's client goes on writing its thread. On the real daemon of 0.171 and 0.169.

use std::time::Duration;

use crate::attach::{is, until_attached, until_logged};
use crate::common::{Backend, Env};
use codex_relay_core::error::RelayError;
use codex_relay_core::{Ev, SayInput};
use codex_relay_testkit::Reply;
use codex_relay_testkit::daemon::{TestDaemon, TuiClient};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_active_writer_is_named_and_each_offer_works_on_0_171() {
    active_writer(codex_relay_testkit::NEWEST).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_active_writer_is_named_and_each_offer_works_on_0_169() {
    active_writer(codex_relay_testkit::PREVIOUS).await
}

async fn active_writer(version: &'static str) {
    let Some(env) = Env::start(version, Backend::Sqlite, Duration::from_secs(600)).await else {
        return;
    };
    env.model
        .route("MARK-HELD", [Reply::text("held by the daemon")]);
    env.model
        .route("MARK-FORK", [Reply::text("a fork of the relay's own")]);
    env.model
        .route("MARK-STILL", [Reply::text("the daemon still writes it")]);
    let daemon = TestDaemon::start(version, &env.home).expect("the daemon starts");
    let mut tui = TuiClient::connect(&daemon.socket(), "tui-stand-in").await;
    let started = tui
        .request(
            "thread/start",
            json!({"cwd": env.home.workspace(), "approvalPolicy": "on-request",
                   "sandbox": "workspace-write"}),
        )
        .await
        .expect("thread/start");
    let thread = started["thread"]["id"].as_str().unwrap().to_owned();
    tui.request(
        "turn/start",
        json!({"threadId": thread, "input": [{"type": "text", "text": "MARK-HELD: hi"}]}),
    )
    .await
    .expect("turn/start");
    tui.until("the turn's end", is("turn/completed")).await;

    // Asked for the thread, the relay names the holder and the offers.
    let err = env
        .relay
        .say(
            &thread,
            SayInput {
                text: "MARK-FORK: mine?".into(),
                ..Default::default()
            },
        )
        .await
        .expect_err("the relay's Codex cannot write a thread the daemon writes");
    let RelayError::ActiveWriter {
        holders,
        explanation,
        ..
    } = &err
    else {
        panic!("not explained: {err:?}");
    };
    let pid = daemon.pid().expect("the daemon's pid");
    assert!(
        holders
            .iter()
            .any(|(p, command)| *p == pid && command.contains("app-server")),
        "the daemon is named: {holders:?}"
    );
    for part in [
        format!("process {pid} ("),
        "already has an active writer".into(),
        "codex-relay serve --attach".into(),
        "thread/read".into(),
        "thread/fork".into(),
    ] {
        assert!(explanation.contains(&part), "{part} in: {explanation}");
    }
    assert_eq!(err.code(), "active_writer");
    assert!(
        env.relay.status(&thread).is_err(),
        "no half-made session was left for the thread"
    );

    // Read it without writing.
    let read = env.relay.read_thread(&thread).await.expect("thread/read");
    assert!(
        read.to_string().contains("held by the daemon"),
        "the thread's turns: {read}"
    );

    // Fork it: a new session of the relay's own, from a copy of its history.
    let fork = env.relay.fork_thread(&thread).await.expect("thread/fork");
    let forked = fork.id().to_owned();
    assert_ne!(forked, thread);
    env.relay
        .say(
            &forked,
            SayInput {
                text: "MARK-FORK: go on here".into(),
                ..Default::default()
            },
        )
        .await
        .expect("the fork takes a message");
    until_logged(&env, &forked, |events| {
        events.iter().any(
            |e| matches!(&e.ev, Ev::Text { text, .. } if text.contains("a fork of the relay's own")),
        )
    })
    .await;
    assert!(
        env.relay.status(&forked).unwrap().attached.is_none(),
        "the fork is the relay's own"
    );

    // The daemon's client goes on writing its thread.
    tui.request(
        "turn/start",
        json!({"threadId": thread, "input": [{"type": "text", "text": "MARK-STILL: on"}]}),
    )
    .await
    .expect("the daemon still writes it");
    tui.until("the next turn's end", is("turn/completed")).await;

    // Attach to the daemon: the thread becomes a session here, one only.
    let attachment = env.relay.attach(daemon.socket());
    until_attached(&env, &thread, |a| a.daemon_pid == Some(pid)).await;
    let rows = env
        .relay
        .list(codex_relay_core::ListFilter::default())
        .await
        .unwrap();
    assert_eq!(
        rows.iter().filter(|r| r.session_id == thread).count(),
        1,
        "{rows:?}"
    );
    attachment.stop().await;
    env.relay.shutdown().await;
    daemon.stop();
}
