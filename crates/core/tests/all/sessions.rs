//! The engine against the real Codex (0.169.0 and 0.98.0) and the scripted model, on SQLite
//! and (when configured) Postgres: turns, approvals, denials with reasons, timeouts, races,
//! steering and interrupts.

use crate::common;

use std::time::Duration;

use crate::common::{Backend, Env, assert_contiguous};
use codex_relay_core::answer::PendingKind;
use codex_relay_core::{
    Answer, CreateOptions, Decider, Decision, Ev, PermissionMode, RelayError, SayInput, SayOutcome,
    SessionStatus,
};
use codex_relay_testkit::Reply;

crate::matrix!(
    two_turns_with_an_approval_in_between,
    deny_with_a_reason_reaches_the_model,
    an_unanswered_approval_is_declined_at_its_timeout,
    two_racing_answers_exactly_one_wins,
    say_while_active_steers_and_interrupt_keeps_the_session,
    interrupt_with_an_approval_open_resolves_it_before_the_turn_ends,
);

const LONG: Duration = Duration::from_secs(300);

fn untrusted(env: &Env, prompt: &str) -> CreateOptions {
    CreateOptions {
        prompt: Some(prompt.into()),
        cwd: Some(env.cwd()),
        mode: Some(PermissionMode::Default),
        ..Default::default()
    }
}

/// Starts a session whose first turn asks to run `touch <file>`; returns its id once the
/// approval is pending.
async fn session_awaiting_approval(
    env: &Env,
    file: &str,
    after: Vec<Reply>,
) -> (String, codex_relay_core::PendingView) {
    let mut replies = vec![Reply::exec(&format!("touch {file}"), "call_t")];
    replies.extend(after);
    env.model.push(replies);
    let (h, first) = env
        .relay
        .create(untrusted(env, &format!("please create {file}")))
        .await
        .expect("create");
    assert!(matches!(first, Some(SayOutcome::Started { .. })));
    let id = h.id().to_owned();
    let snap = env
        .until(&id, "an approval", |s| {
            s.status == SessionStatus::AwaitingApproval
        })
        .await;
    assert_eq!(snap.pending.len(), 1);
    (id, snap.pending[0].clone())
}

async fn two_turns_with_an_approval_in_between(version: &'static str, backend: Backend) {
    let Some(env) = Env::start(version, backend, LONG).await else {
        return;
    };
    env.model.push([Reply::text("hello there")]);
    let (h, _) = env
        .relay
        .create(untrusted(&env, "first turn"))
        .await
        .unwrap();
    let id = h.id().to_owned();
    let snap = env
        .until(&id, "turn 1 done", |s| {
            s.status == SessionStatus::Idle && s.turn_count == 1
        })
        .await;
    assert_eq!(snap.result, Some(serde_json::json!("hello there")));

    env.model.push([
        Reply::exec("touch approved.txt", "call_a"),
        Reply::text("created it"),
    ]);
    let out = env
        .relay
        .say(&id, SayInput::text("now create approved.txt"))
        .await
        .unwrap();
    assert!(matches!(out, SayOutcome::Started { .. }));
    let snap = env
        .until(&id, "the approval", |s| {
            s.status == SessionStatus::AwaitingApproval
        })
        .await;
    let pending = &snap.pending[0];
    assert_eq!(pending.kind, PendingKind::CommandApproval);
    assert!(
        pending.question.contains("touch approved.txt"),
        "{}",
        pending.question
    );
    assert!(
        pending.id.starts_with("req_") && pending.id.len() >= 36,
        "unguessable id: {}",
        pending.id
    );
    assert_eq!(env.relay.pending(Some(&id)).len(), 1);
    let r = env
        .relay
        .respond(
            &id,
            &pending.id,
            Answer::approve(),
            codex_relay_core::Decider::library("test"),
        )
        .await
        .unwrap();
    assert_eq!((r.decision.as_str(), r.by.as_str()), ("approve", "test"));
    let snap = env
        .until(&id, "turn 2 done", |s| {
            s.status == SessionStatus::Idle && s.turn_count == 2
        })
        .await;
    assert!(env.home.workspace().join("approved.txt").exists());
    assert_eq!(snap.result, Some(serde_json::json!("created it")));
    assert!(snap.usage.as_ref().is_some_and(|u| u.total_tokens > 0));

    let events = env.all_events(&id).await;
    assert_contiguous(&events);
    let kinds = env.kinds(&id).await;
    let statuses: Vec<&str> = kinds
        .iter()
        .filter_map(|k| k.strip_prefix("status:"))
        .collect();
    assert_eq!(
        statuses,
        [
            "active",
            "idle",
            "active",
            "awaiting_approval",
            "active",
            "idle"
        ],
        "{kinds:?}"
    );
    let order = [
        "turn-start",
        "turn-end",
        "turn-start",
        "request-opened",
        "request-resolved",
        "tool-call-end",
        "turn-end",
    ];
    let mut at = 0;
    for k in &kinds {
        if at < order.len() && k == order[at] {
            at += 1;
        }
    }
    assert_eq!(at, order.len(), "events out of order: {kinds:?}");
    let texts: Vec<(codex_relay_core::Role, String)> = events
        .iter()
        .filter_map(|e| match &e.ev {
            Ev::Text {
                text,
                thinking: false,
            } => Some((e.role, text.clone())),
            _ => None,
        })
        .collect();
    assert!(
        texts.contains(&(codex_relay_core::Role::User, "first turn".into())),
        "{texts:?}"
    );
    assert!(
        texts.contains(&(codex_relay_core::Role::Agent, "created it".into())),
        "{texts:?}"
    );
    // Everything shown was also written to the store.
    env.relay.store().flush().await.unwrap();
    let stored = env.relay.store().events(&id, 0, 10_000).await.unwrap();
    assert_eq!(stored.len(), events.len());
}

async fn deny_with_a_reason_reaches_the_model(version: &'static str, backend: Backend) {
    let Some(env) = Env::start(version, backend, LONG).await else {
        return;
    };
    let (id, pending) =
        session_awaiting_approval(&env, "prod.txt", vec![Reply::text("understood")]).await;
    let r = env
        .relay
        .respond(
            &id,
            &pending.id,
            Answer::deny("not in prod"),
            codex_relay_core::Decider::library("test"),
        )
        .await
        .unwrap();
    assert_eq!(r.decision, Decision::Deny);
    assert_eq!(r.reason.as_deref(), Some("not in prod"));
    env.until(&id, "the turn to finish", |s| {
        s.status == SessionStatus::Idle
    })
    .await;
    assert!(!env.home.workspace().join("prod.txt").exists());
    let reqs = env.model.requests();
    assert_eq!(reqs.len(), 2);
    let next = reqs[1].body["input"].to_string();
    assert!(
        next.contains("not in prod"),
        "the model was not told the reason: {next}"
    );
    let resolved = env
        .all_events(&id)
        .await
        .into_iter()
        .find_map(|e| match &e.ev {
            Ev::RequestResolved {
                decision, reason, ..
            } => Some((decision.clone(), reason.clone())),
            _ => None,
        });
    assert_eq!(resolved, Some((Decision::Deny, Some("not in prod".into()))));
}

async fn an_unanswered_approval_is_declined_at_its_timeout(
    version: &'static str,
    backend: Backend,
) {
    let Some(env) = Env::start(version, backend, Duration::from_millis(1500)).await else {
        return;
    };
    let started = std::time::Instant::now();
    let (id, pending) =
        session_awaiting_approval(&env, "late.txt", vec![Reply::text("skipped it")]).await;
    let snap = env
        .until(&id, "the turn to carry on and finish", |s| {
            s.status == SessionStatus::Idle
        })
        .await;
    assert!(started.elapsed() >= Duration::from_millis(1500));
    assert_eq!(snap.result, Some(serde_json::json!("skipped it")));
    assert!(!env.home.workspace().join("late.txt").exists());
    let resolved = env
        .all_events(&id)
        .await
        .into_iter()
        .find_map(|e| match &e.ev {
            Ev::RequestResolved {
                id, decision, by, ..
            } => Some((id.clone(), decision.clone(), by.clone())),
            _ => None,
        });
    assert_eq!(
        resolved,
        Some((pending.id.clone(), Decision::Deny, Decider::Timeout))
    );
    // Checked from both sides: declined at its deadline, not before and not long after.
    let events = env.all_events(&id).await;
    let at = |kind: &str| {
        events
            .iter()
            .find(|e| e.ev.kind() == kind)
            .map(|e| e.time)
            .unwrap_or_else(|| panic!("no {kind} event"))
    };
    let waited = at("request-resolved") - at("request-opened");
    assert!(
        (1500..2500).contains(&waited),
        "the 1.5 s approval timeout fired after {waited} ms"
    );
    assert_eq!(pending.deadline - pending.created_at, 1500, "{pending:?}");
    // A late answer is told it came too late.
    let late = env
        .relay
        .respond(
            &id,
            &pending.id,
            Answer::approve(),
            codex_relay_core::Decider::library("test"),
        )
        .await;
    assert!(
        matches!(late, Err(RelayError::AlreadyResolved { ref by, .. }) if by.as_str() == "timeout"),
        "{late:?}"
    );
    env.relay.store().flush().await.unwrap();
    let stored = env.relay.store().pending(Some(&id), false).await.unwrap();
    assert_eq!(stored.len(), 1);
    assert!(
        stored[0]
            .resolution
            .as_deref()
            .unwrap_or("")
            .contains("timeout")
    );
}

async fn two_racing_answers_exactly_one_wins(version: &'static str, backend: Backend) {
    let Some(env) = Env::start(version, backend, LONG).await else {
        return;
    };
    let (id, pending) =
        session_awaiting_approval(&env, "race.txt", vec![Reply::text("done")]).await;
    let (a, b) = tokio::join!(
        env.relay.respond(
            &id,
            &pending.id,
            Answer::approve(),
            codex_relay_core::Decider::library("front-a")
        ),
        env.relay.respond(
            &id,
            &pending.id,
            Answer::Deny { reason: None },
            codex_relay_core::Decider::library("front-b")
        ),
    );
    let wins = [a.is_ok(), b.is_ok()].iter().filter(|w| **w).count();
    assert_eq!(wins, 1, "{a:?} / {b:?}");
    let loser = if a.is_ok() { b } else { a };
    assert!(
        matches!(loser, Err(RelayError::AlreadyResolved { .. })),
        "{loser:?}"
    );
    env.until(&id, "the turn to finish", |s| {
        s.status == SessionStatus::Idle
    })
    .await;
    let resolutions = env
        .all_events(&id)
        .await
        .iter()
        .filter(|e| matches!(e.ev, Ev::RequestResolved { .. }))
        .count();
    assert_eq!(resolutions, 1);
    // Unknown ids and junk answers are clear errors, not panics.
    assert!(matches!(
        env.relay
            .respond(
                &id,
                "req_nope",
                Answer::approve(),
                codex_relay_core::Decider::library("t")
            )
            .await,
        Err(RelayError::UnknownRequest { .. })
    ));
    let unknown = env.relay.say("no-such-session", SayInput::text("hi")).await;
    assert!(
        matches!(unknown, Err(RelayError::UnknownSession(_))),
        "{unknown:?}"
    );
    let unknown_uuid = env
        .relay
        .say("01a20000-0000-7000-8000-000000000000", SayInput::text("hi"))
        .await;
    assert!(
        matches!(unknown_uuid, Err(RelayError::UnknownSession(_))),
        "{unknown_uuid:?}"
    );
}

async fn say_while_active_steers_and_interrupt_keeps_the_session(
    version: &'static str,
    backend: Backend,
) {
    let Some(env) = Env::start(version, backend, LONG).await else {
        return;
    };
    env.model.push([
        Reply::text("first answer").with_delay(Duration::from_secs(2)),
        Reply::text("saw your addition"),
    ]);
    let opts = CreateOptions {
        prompt: Some("think slowly".into()),
        cwd: Some(env.cwd()),
        mode: Some(PermissionMode::ReadOnly),
        ..Default::default()
    };
    let (h, _) = env.relay.create(opts).await.unwrap();
    let id = h.id().to_owned();
    env.model.wait_for_requests(1, common::WAIT).await;
    let out = env
        .relay
        .say(&id, SayInput::text("ALSO-THIS"))
        .await
        .unwrap();
    assert!(matches!(out, SayOutcome::Steered { .. }), "{out:?}");
    let snap = env
        .until(&id, "the steered turn to finish", |s| {
            s.status == SessionStatus::Idle
        })
        .await;
    assert_eq!(snap.turn_count, 1, "steering must not start a second turn");
    let reqs = env.model.requests();
    assert!(
        reqs.last().unwrap().body["input"]
            .to_string()
            .contains("ALSO-THIS")
    );

    env.model.push([Reply::exec("sleep 30", "call_s")]);
    env.relay
        .say(&id, SayInput::text("now sleep"))
        .await
        .unwrap();
    env.until(&id, "the command to start", |s| {
        s.status == SessionStatus::Active && s.turn_count == 2
    })
    .await;
    env.model
        .wait_for_requests(reqs.len() + 1, common::WAIT)
        .await;
    let deadline = tokio::time::Instant::now() + common::WAIT;
    let sleeping = |e: &std::sync::Arc<codex_relay_core::Envelope>| matches!(&e.ev, Ev::ToolCallStart { description, .. } if description.contains("sleep 30"));
    while !env.all_events(&id).await.iter().any(sleeping) {
        assert!(tokio::time::Instant::now() < deadline, "no tool-call-start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(env.relay.interrupt(&id).await.unwrap());
    env.until(&id, "the interrupt", |s| {
        s.status == SessionStatus::Interrupted
    })
    .await;
    assert!(
        !env.relay.interrupt(&id).await.unwrap(),
        "nothing left to interrupt"
    );

    env.model.push([Reply::text("back again")]);
    let out = env
        .relay
        .say(&id, SayInput::text("are you there?"))
        .await
        .unwrap();
    assert!(matches!(out, SayOutcome::Started { .. }));
    let snap = env
        .until(&id, "the next turn", |s| {
            s.status == SessionStatus::Idle && s.turn_count == 3
        })
        .await;
    assert_eq!(snap.result, Some(serde_json::json!("back again")));
}

async fn interrupt_with_an_approval_open_resolves_it_before_the_turn_ends(
    version: &'static str,
    backend: Backend,
) {
    let Some(env) = Env::start(version, backend, LONG).await else {
        return;
    };
    let (id, pending) = session_awaiting_approval(&env, "never.txt", vec![]).await;
    assert!(env.relay.interrupt(&id).await.unwrap());
    let snap = env
        .until(&id, "the interrupted turn", |s| {
            s.status == SessionStatus::Interrupted
        })
        .await;
    // Nobody can act on the request any more: it is not left answerable until its timeout.
    assert!(snap.pending.is_empty(), "{:#?}", snap.pending);
    assert!(env.relay.pending(Some(&id)).is_empty());
    let events = env.all_events(&id).await;
    assert_contiguous(&events);
    let at = |pred: &dyn Fn(&Ev) -> bool| events.iter().position(|e| pred(&e.ev));
    let resolved = at(&|ev| {
        matches!(ev, Ev::RequestResolved { id, by, decision, .. }
            if *id == pending.id && *by == Decider::TurnEnded && *decision == Decision::Deny)
    })
    .expect("the open request is resolved as turn-ended");
    let ended = at(&|ev| matches!(ev, Ev::TurnEnd { .. })).expect("the turn ends");
    assert!(
        resolved < ended,
        "resolved at {resolved}, turn ended at {ended}"
    );
    // No status flickers back to awaiting_approval after the turn ended.
    assert!(
        !events[ended..]
            .iter()
            .any(|e| matches!(&e.ev, Ev::Status { status } if status == "awaiting_approval"))
    );
    assert!(!env.home.workspace().join("never.txt").exists());
}
