//! Failure paths through the engine on the real Codex (both pinned versions, SQLite): a scripted
//! 401, 500 and `response.failed` each end the turn `failed` and the session in `error` with the
//! reason in `last_error`; the raw Codex lines of those turns are kept (`Relay::raw_lines`);
//! Codex killed under a running command ends the turn `failed` with an `error` event.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use crate::common::{Backend, Env, assert_contiguous};
use codex_relay_core::event::TurnEndStatus;
use codex_relay_core::{CreateOptions, Envelope, Ev, PermissionMode, SayInput, SessionStatus};
use codex_relay_testkit::{Reply, for_each_codex, procs};

for_each_codex!(
    model_failures_end_the_turn_in_error_with_the_reason,
    codex_killed_under_a_command_fails_the_turn,
);

const LONG: Duration = Duration::from_secs(300);

fn read_only(env: &Env, prompt: &str) -> CreateOptions {
    CreateOptions {
        prompt: Some(prompt.into()),
        cwd: Some(env.cwd()),
        mode: Some(PermissionMode::ReadOnly),
        ..Default::default()
    }
}

/// The `turn-end` events of the log, in order.
fn turn_ends(events: &[Arc<Envelope>]) -> Vec<(TurnEndStatus, Option<String>)> {
    events
        .iter()
        .filter_map(|e| match &e.ev {
            Ev::TurnEnd { status, error, .. } => Some((*status, error.clone())),
            _ => None,
        })
        .collect()
}

/// Says `prompt` and waits for the turn to end; returns the snapshot.
async fn failed_turn(
    env: &Env,
    id: &str,
    turns: u64,
    reply: Reply,
) -> codex_relay_core::SessionSnapshot {
    env.model.push([reply]);
    env.relay
        .say(id, SayInput::text(format!("turn {turns}")))
        .await
        .unwrap();
    env.until(id, "the turn to fail", |s| {
        s.turn_count == turns && !s.status.is_running()
    })
    .await
}

async fn model_failures_end_the_turn_in_error_with_the_reason(version: &'static str) {
    let env = Env::start(version, Backend::Sqlite, LONG).await.unwrap();
    env.model.push([Reply::Status {
        code: 401,
        message: "scripted bad key".into(),
    }]);
    let (h, _) = env.relay.create(read_only(&env, "turn 1")).await.unwrap();
    let id = h.id().to_owned();
    let snap = env
        .until(&id, "the 401 turn to fail", |s| {
            s.turn_count == 1 && !s.status.is_running()
        })
        .await;
    assert_eq!(snap.status, SessionStatus::Error, "{snap:?}");
    let e401 = snap.last_error.clone().unwrap_or_default();
    assert!(e401.contains("401"), "the 401 is named: {e401:?}");

    let snap = failed_turn(
        &env,
        &id,
        2,
        Reply::Status {
            code: 500,
            message: "scripted server trouble".into(),
        },
    )
    .await;
    assert_eq!(snap.status, SessionStatus::Error, "{snap:?}");
    // Codex words a 500 its own way ("high demand ..."); what matters is that it is there.
    let e500 = snap.last_error.clone().unwrap_or_default();
    assert!(
        !e500.is_empty() && e500 != e401,
        "the 500's error: {e500:?}"
    );

    let snap = failed_turn(
        &env,
        &id,
        3,
        Reply::Failed {
            message: "scripted model gave up".into(),
        },
    )
    .await;
    assert_eq!(snap.status, SessionStatus::Error, "{snap:?}");
    let efailed = snap.last_error.clone().unwrap_or_default();
    assert!(
        efailed.contains("scripted model gave up"),
        "response.failed's message is the error: {efailed:?}"
    );

    // Each failed turn ended `failed` with its error, and the session said `error` each time.
    let events = env.all_events(&id).await;
    let ends = turn_ends(&events);
    assert_eq!(ends.len(), 3, "{ends:?}");
    for (status, error) in &ends {
        assert_eq!(*status, TurnEndStatus::Failed, "{ends:?}");
        assert!(error.as_deref().is_some_and(|e| !e.is_empty()), "{ends:?}");
    }
    assert!(
        ends[2]
            .1
            .as_deref()
            .unwrap()
            .contains("scripted model gave up")
    );
    let errors = events
        .iter()
        .filter(|e| matches!(&e.ev, Ev::Status { status } if status == "error"))
        .count();
    assert!(errors >= 3, "a status event per failed turn: {errors}");
    assert_contiguous(&events);

    // The raw Codex lines of those turns are kept, newest last, and `limit` is the tail.
    let raw = env.relay.raw_lines(&id, 10_000).await.unwrap();
    let failed_completions = raw
        .iter()
        .filter(|l| l.contains("\"turn/completed\"") && l.contains("\"failed\""))
        .count();
    assert_eq!(failed_completions, 3, "raw turn/completed lines: {raw:#?}");
    assert!(
        raw.iter().any(|l| l.contains("scripted model gave up")),
        "the raw line with the model's message is kept"
    );
    let tail = env.relay.raw_lines(&id, 2).await.unwrap();
    assert_eq!(tail.as_slice(), &raw[raw.len() - 2..]);

    // The session is not stuck in error: the next turn works and clears it.
    env.model.push([Reply::text("working again")]);
    env.relay.say(&id, SayInput::text("turn 4")).await.unwrap();
    let snap = env
        .until(&id, "the fourth turn", |s| {
            s.turn_count == 4 && s.status == SessionStatus::Idle
        })
        .await;
    assert_eq!(snap.result, Some(serde_json::json!("working again")));
}

async fn codex_killed_under_a_command_fails_the_turn(version: &'static str) {
    let env = Env::start(version, Backend::Sqlite, LONG).await.unwrap();
    env.model.push([Reply::exec("sleep 30", "call_sleep")]);
    let (h, _) = env
        .relay
        .create(read_only(&env, "sleep for a while"))
        .await
        .unwrap();
    let id = h.id().to_owned();
    let deadline = tokio::time::Instant::now() + common::WAIT;
    let sleeping = |e: &Arc<Envelope>| matches!(&e.ev, Ev::ToolCallStart { description, .. } if description.contains("sleep 30"));
    while !env.all_events(&id).await.iter().any(sleeping) {
        assert!(tokio::time::Instant::now() < deadline, "no tool-call-start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(env.relay.status(&id).unwrap().pending.is_empty());
    let server = env.relay.server().await.unwrap();
    let pgid = server.process().pgid();
    // SAFETY: kill(2) of the Codex process the relay spawned.
    unsafe { libc::kill(server.pid() as i32, libc::SIGKILL) };
    drop(server);

    let snap = env
        .until(&id, "the error status", |s| {
            s.status == SessionStatus::Error
        })
        .await;
    assert!(
        snap.last_error
            .as_deref()
            .unwrap_or("")
            .contains("Codex exited"),
        "{:?}",
        snap.last_error
    );
    let events = env.all_events(&id).await;
    let ends = turn_ends(&events);
    assert_eq!(ends.len(), 1, "{ends:?}");
    assert_eq!(ends[0].0, TurnEndStatus::Failed, "{ends:?}");
    assert!(
        ends[0].1.as_deref().unwrap_or("").contains("Codex exited"),
        "{ends:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(&e.ev, Ev::Error { message, retrying: false } if message.contains("Codex exited"))),
        "an error event says why"
    );
    assert_contiguous(&events);
    assert!(
        procs::wait_group_gone(pgid, Duration::from_secs(5))
            .await
            .is_empty(),
        "Codex's group (and its `sleep 30`) survived"
    );
}
