//! Failure and recovery against the real Codex: Codex killed mid-turn, the relay restarted over
//! the same store, and sessions other Codex clients created.

use crate::common;

use std::time::Duration;

use crate::common::{Backend, Env, assert_contiguous};
use codex_relay_core::{
    Answer, CreateOptions, Decider, Decision, Ev, ListFilter, PermissionMode, Relay, SayInput,
    SayOutcome, SessionStatus,
};
use codex_relay_testkit::{Reply, procs};

crate::matrix!(
    sigkill_mid_turn_errors_resolves_and_the_next_say_works,
    relay_restart_keeps_list_and_history_and_say_resumes,
    discovery_lists_a_codex_exec_session_and_say_resumes_it,
);

const LONG: Duration = Duration::from_secs(300);

async fn sigkill_mid_turn_errors_resolves_and_the_next_say_works(
    version: &'static str,
    backend: Backend,
) {
    let Some(env) = Env::start(version, backend, LONG).await else {
        return;
    };
    env.model
        .route("KILL-ME", [Reply::exec("touch never.txt", "call_k")]);
    let opts = CreateOptions {
        prompt: Some("KILL-ME please".into()),
        cwd: Some(env.cwd()),
        mode: Some(PermissionMode::Default),
        ..Default::default()
    };
    let (h, _) = env.relay.create(opts).await.unwrap();
    let id = h.id().to_owned();
    let snap = env
        .until(&id, "the approval", |s| {
            s.status == SessionStatus::AwaitingApproval
        })
        .await;
    let pending_id = snap.pending[0].id.clone();
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
    assert!(snap.pending.is_empty());
    assert!(
        snap.last_error
            .as_deref()
            .unwrap_or("")
            .contains("Codex exited"),
        "{:?}",
        snap.last_error
    );
    let events = env.all_events(&id).await;
    assert!(
        events
            .iter()
            .any(|e| matches!(&e.ev, Ev::Error { message, .. } if message.contains("signal 9")))
    );
    let resolved = events.iter().find_map(|e| match &e.ev {
        Ev::RequestResolved {
            id, decision, by, ..
        } => Some((id.clone(), decision.clone(), by.clone())),
        _ => None,
    });
    assert_eq!(
        resolved,
        Some((pending_id, Decision::Deny, Decider::CodexExit))
    );
    assert!(
        procs::wait_group_gone(pgid, Duration::from_secs(2))
            .await
            .is_empty(),
        "Codex's group survived"
    );

    env.model.route("KILL-ME", [Reply::text("I am back")]);
    let out = env
        .relay
        .say(&id, SayInput::text("KILL-ME are you back?"))
        .await
        .unwrap();
    assert!(matches!(out, SayOutcome::Started { .. }));
    let snap = env
        .until(&id, "the turn after the restart", |s| {
            s.status == SessionStatus::Idle
        })
        .await;
    assert_eq!(snap.result, Some(serde_json::json!("I am back")));
    assert!(!env.home.workspace().join("never.txt").exists());
    assert_contiguous(&env.all_events(&id).await);
}

async fn relay_restart_keeps_list_and_history_and_say_resumes(
    version: &'static str,
    backend: Backend,
) {
    let Some(env) = Env::start(version, backend, LONG).await else {
        return;
    };
    env.model.route("DONE-ONE", [Reply::text("first reply")]);
    env.model
        .route("WAITING-ONE", [Reply::exec("touch pending.txt", "call_p")]);
    let cwd = env.cwd();
    let config = env.config.clone();
    // The first relay crashes with one session done and one waiting for an approval.
    let (done, waiting, pending_id, before_done, before_waiting) =
        common::crash_after(config, move |relay1| async move {
            let opts = |p: &str| CreateOptions {
                prompt: Some(p.into()),
                cwd: Some(cwd.clone()),
                mode: Some(PermissionMode::Default),
                ..Default::default()
            };
            let (done, _) = relay1.create(opts("DONE-ONE hello")).await.unwrap();
            let done = done.id().to_owned();
            common::until(&relay1, &done, "the first session's turn", |s| {
                s.status == SessionStatus::Idle && s.turn_count == 1
            })
            .await;
            let (waiting, _) = relay1.create(opts("WAITING-ONE go")).await.unwrap();
            let waiting = waiting.id().to_owned();
            let snap = common::until(&relay1, &waiting, "the approval", |s| {
                s.status == SessionStatus::AwaitingApproval
            })
            .await;
            let pending_id = snap.pending[0].id.clone();
            let before_done = relay1.events(&done, 0, 10_000).await.unwrap();
            let before_waiting = relay1.events(&waiting, 0, 10_000).await.unwrap();
            relay1.store().flush().await.unwrap();
            (done, waiting, pending_id, before_done, before_waiting)
        })
        .await;

    let relay2 = Relay::open(env.config.clone()).await.expect("reopen");
    let listed = relay2
        .list(ListFilter {
            cwd: Some(env.cwd()),
            limit: None,
        })
        .await
        .unwrap();
    for id in [&done, &waiting] {
        let row = listed
            .iter()
            .find(|r| &r.session_id == id)
            .unwrap_or_else(|| panic!("{id} not listed: {listed:?}"));
        assert!(row.owned);
        assert!(!row.live, "restored sessions are dormant until used");
    }
    let after_done = relay2.events(&done, 0, 10_000).await.unwrap();
    assert_eq!(after_done, before_done, "history intact");
    let after_waiting = relay2.events(&waiting, 0, 10_000).await.unwrap();
    assert_eq!(&after_waiting[..before_waiting.len()], &before_waiting[..]);
    assert_contiguous(&after_waiting);
    assert!(after_waiting.iter().any(
        |e| matches!(&e.ev, Ev::RequestResolved { id, by, decision, .. }
        if *id == pending_id && by.as_str() == "relay-restart" && decision.as_str() == "deny")
    ));
    assert_eq!(
        relay2.status(&waiting).unwrap().status,
        SessionStatus::Interrupted
    );
    assert_eq!(relay2.status(&done).unwrap().status, SessionStatus::Idle);
    assert!(relay2.pending(None).is_empty());
    let late = relay2
        .respond(
            &waiting,
            &pending_id,
            Answer::approve(),
            codex_relay_core::Decider::library("test"),
        )
        .await;
    assert!(
        matches!(
            late,
            Err(codex_relay_core::RelayError::AlreadyResolved { .. })
        ),
        "{late:?}"
    );

    env.model.route("DONE-ONE", [Reply::text("resumed fine")]);
    let out = relay2
        .say(&done, SayInput::text("DONE-ONE again"))
        .await
        .unwrap();
    assert!(matches!(out, SayOutcome::Started { .. }));
    let snap = common::until(&relay2, &done, "the resumed turn", |s| {
        s.status == SessionStatus::Idle && s.turn_count == 2
    })
    .await;
    assert_eq!(snap.result, Some(serde_json::json!("resumed fine")));
    // The resumed thread still has its history: the model saw the first exchange.
    let last = env.model.requests_with("DONE-ONE").pop().unwrap();
    let input = last.body["input"].to_string();
    assert!(
        input.contains("DONE-ONE hello") && input.contains("first reply"),
        "{input}"
    );
    assert_contiguous(&relay2.events(&done, 0, 10_000).await.unwrap());
    relay2.shutdown().await;
}

async fn discovery_lists_a_codex_exec_session_and_say_resumes_it(
    version: &'static str,
    backend: Backend,
) {
    let Some(env) = Env::start(version, backend, LONG).await else {
        return;
    };
    env.model
        .route("EXEC-MARKER", [Reply::text("exec says hi")]);
    let bin = codex_relay_testkit::codex_bin(version).unwrap();
    let thread_id = codex_relay_testkit::exec::thread_from_codex_exec(
        &bin,
        env.home.path(),
        env.home.workspace(),
        "EXEC-MARKER hello from exec",
    )
    .await;

    let listed = env
        .relay
        .list(ListFilter {
            cwd: Some(env.cwd()),
            limit: Some(20),
        })
        .await
        .unwrap();
    let row = listed
        .iter()
        .find(|r| r.session_id == thread_id)
        .unwrap_or_else(|| panic!("exec thread not listed: {listed:?}"));
    assert!(!row.owned && !row.live);
    assert!(
        row.preview.as_deref().unwrap_or("").contains("EXEC-MARKER"),
        "{row:?}"
    );
    let elsewhere = env
        .relay
        .list(ListFilter {
            cwd: Some("/nonexistent-dir".into()),
            limit: Some(20),
        })
        .await
        .unwrap();
    assert!(elsewhere.iter().all(|r| r.session_id != thread_id));

    env.model
        .route("EXEC-MARKER", [Reply::text("relay took over")]);
    let out = env
        .relay
        .say(&thread_id, SayInput::text("EXEC-MARKER continue"))
        .await
        .unwrap();
    assert!(matches!(out, SayOutcome::Started { .. }));
    let snap = env
        .until(&thread_id, "the resumed exec thread", |s| {
            s.status == SessionStatus::Idle && s.turn_count == 1
        })
        .await;
    assert_eq!(snap.result, Some(serde_json::json!("relay took over")));
    let input = env.model.requests_with("EXEC-MARKER").pop().unwrap().body["input"].to_string();
    assert!(
        input.contains("hello from exec") && input.contains("exec says hi"),
        "{input}"
    );
    let listed = env
        .relay
        .list(ListFilter {
            cwd: Some(env.cwd()),
            limit: Some(20),
        })
        .await
        .unwrap();
    let row = listed.iter().find(|r| r.session_id == thread_id).unwrap();
    assert!(row.owned && row.live);
}
