//! Recycling Codex processes on the real Codex: a process past its memory limit (set below any
//! app-server's baseline, so the RSS path decides) drains and is replaced while its session is
//! idle; the next turn runs on a fresh process with the history intact; an approval pending
//! when the process crosses its limit keeps it alive until answered, reaches Codex, and the
//! turn completes before the process goes. A turn limit does the same on Codex 0.98; a
//! process far over its limit during a turn has the turn interrupted when so configured.

use std::sync::Arc;
use std::time::Duration;

use crate::common::{self, Backend, Env, assert_contiguous};
use codex_relay_core::event::TurnEndStatus;
use codex_relay_core::{
    Answer, CreateOptions, Decider, Envelope, Ev, OverLimit, PermissionMode, RecyclePolicy, Relay,
    SayInput, SessionStatus,
};
use codex_relay_testkit::{NEWEST, OLDEST, Reply, procs};

const LONG: Duration = Duration::from_secs(300);
const MIB: u64 = 1024 * 1024;

fn asks(env: &Env, prompt: &str) -> CreateOptions {
    CreateOptions {
        prompt: Some(prompt.into()),
        cwd: Some(env.cwd()),
        mode: Some(PermissionMode::Default),
        ..Default::default()
    }
}

async fn events(relay: &Relay, id: &str) -> Vec<Arc<Envelope>> {
    relay.events(id, 0, 100_000).await.expect("events")
}

/// The pids named by the session's "replaced by a fresh process" notes, in order.
async fn recycled_pids(relay: &Relay, id: &str) -> Vec<u32> {
    events(relay, id)
        .await
        .iter()
        .filter_map(|e| match &e.ev {
            Ev::Note { message } if message.contains("replaced by a fresh process") => {
                let rest = message.split("(pid ").nth(1)?;
                rest.split(')').next()?.parse().ok()
            }
            _ => None,
        })
        .collect()
}

/// Waits (woken by the session's log) until `n` recycles are noted in its log.
async fn until_recycled(relay: &Relay, id: &str, n: usize) -> Vec<u32> {
    let deadline = tokio::time::Instant::now() + common::WAIT;
    loop {
        let pids = recycled_pids(relay, id).await;
        if pids.len() >= n {
            return pids;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for recycle {n} of {id}: {pids:?}"
        );
        let last = relay.status(id).unwrap().last_seq;
        relay
            .wait(id, last, Duration::from_millis(500))
            .await
            .unwrap();
    }
}

fn turn_ends(log: &[Arc<Envelope>]) -> Vec<TurnEndStatus> {
    log.iter()
        .filter_map(|e| match &e.ev {
            Ev::TurnEnd { status, .. } => Some(*status),
            _ => None,
        })
        .collect()
}

fn agent_texts(log: &[Arc<Envelope>]) -> Vec<String> {
    log.iter()
        .filter_map(|e| match (&e.role, &e.ev) {
            (
                codex_relay_core::Role::Agent,
                Ev::Text {
                    text,
                    thinking: false,
                },
            ) => Some(text.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_over_its_memory_limit_is_recycled_once_idle_and_a_pending_approval_keeps_it() {
    let Some(env) = Env::start_with(NEWEST, Backend::Sqlite, LONG, |c| {
        // Below any app-server's own baseline: every process that ran a turn is over it.
        c.recycle = RecyclePolicy {
            max_rss: Some(MIB),
            // Far over is out of reach here: only the drain and the idle recycle are tested.
            hard_rss: Some(u64::MAX),
            check_every: Duration::from_millis(100),
            ..Default::default()
        };
        c.sessions_per_codex = 2;
    })
    .await
    else {
        return;
    };
    let relay = &env.relay;
    env.model.route(
        "RECYCLE-A",
        [
            Reply::text("one"),
            Reply::exec("touch after-recycle.txt", "call_r"),
            Reply::text("created it"),
            Reply::text("three"),
        ],
    );
    env.model.route("RECYCLE-B", [Reply::text("b done")]);

    // Turn 1 runs; once the session is idle its process (over the limit) is replaced.
    let (h, _) = relay
        .create(asks(&env, "RECYCLE-A first turn"))
        .await
        .unwrap();
    let id = h.id().to_owned();
    let first_pid = relay.codex_pid(&id).expect("a running process");
    let pids = until_recycled(relay, &id, 1).await;
    assert_eq!(pids, [first_pid]);
    assert!(
        procs::wait_group_gone(first_pid, Duration::from_secs(10))
            .await
            .is_empty(),
        "the recycled app-server's group is gone"
    );
    assert_eq!(relay.codex_recycles(), 1);
    assert_eq!(relay.codex_restarts(), 0, "a recycle is no restart");
    let snap = relay.status(&id).unwrap();
    assert_eq!(
        snap.status,
        SessionStatus::Idle,
        "the note changes no status"
    );
    assert!(snap.last_error.is_none(), "{snap:?}");

    // Turn 2 runs on a fresh process and asks for an approval.
    relay
        .say(
            &id,
            SayInput::text("RECYCLE-A now create after-recycle.txt"),
        )
        .await
        .unwrap();
    let snap = env
        .until(&id, "the approval", |s| {
            s.status == SessionStatus::AwaitingApproval
        })
        .await;
    let second_pid = relay.codex_pid(&id).expect("a fresh process");
    assert_ne!(second_pid, first_pid, "the turn runs on a fresh process");
    let pending = snap.pending[0].clone();

    // That process crossed the limit too (it ran a turn): it drains, but stays while the
    // approval waits. A new session goes to another process.
    let deadline = tokio::time::Instant::now() + common::WAIT;
    let mut pause = Duration::from_millis(50);
    while !relay
        .codex_processes()
        .iter()
        .any(|p| p.pid == Some(second_pid) && p.draining.is_some())
    {
        assert!(tokio::time::Instant::now() < deadline, "never drained");
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }
    let (b, _) = relay
        .create(asks(&env, "RECYCLE-B another session"))
        .await
        .unwrap();
    let b_pid = relay.codex_pid(b.id()).expect("B runs");
    assert_ne!(b_pid, second_pid, "a draining process takes no new session");
    env.until(b.id(), "B's turn", |s| {
        s.status == SessionStatus::Idle && s.turn_count == 1
    })
    .await;
    // Several looks have passed meanwhile: the approval still waits, on the same process.
    assert_eq!(
        relay.status(&id).unwrap().status,
        SessionStatus::AwaitingApproval
    );
    assert_eq!(relay.codex_pid(&id), Some(second_pid));

    // Answered, it reaches Codex: the command runs and the turn completes; then the process
    // is recycled.
    relay
        .respond(
            &id,
            &pending.id,
            Answer::approve(),
            Decider::library("test"),
        )
        .await
        .unwrap();
    let snap = env
        .until(&id, "turn 2 done", |s| {
            s.status == SessionStatus::Idle && s.turn_count == 2
        })
        .await;
    assert_eq!(snap.result, Some(serde_json::json!("created it")));
    assert!(
        env.home.workspace().join("after-recycle.txt").exists(),
        "the approved command ran"
    );
    let pids = until_recycled(relay, &id, 2).await;
    assert_eq!(pids, [first_pid, second_pid]);

    // Turn 3 on yet another process; the whole history is there and Codex saw it too.
    relay
        .say(&id, SayInput::text("RECYCLE-A third turn"))
        .await
        .unwrap();
    let snap = env
        .until(&id, "turn 3 done", |s| {
            s.status == SessionStatus::Idle && s.turn_count == 3
        })
        .await;
    assert_eq!(snap.result, Some(serde_json::json!("three")));
    let log = events(relay, &id).await;
    assert_contiguous(&log);
    assert_eq!(turn_ends(&log), [TurnEndStatus::Completed; 3]);
    assert_eq!(agent_texts(&log), ["one", "created it", "three"]);
    assert!(
        !log.iter().any(|e| matches!(e.ev, Ev::Error { .. })),
        "no error in the log"
    );
    let third = env.model.requests_with("RECYCLE-A third turn");
    let seen = third.last().expect("turn 3 reached the model").user_texts();
    assert!(
        seen.iter().any(|t| t.contains("RECYCLE-A first turn")),
        "the resumed thread carries the earlier turns: {seen:?}"
    );
    relay.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_limit_recycles_the_process_after_that_many_turns_on_codex_0_98() {
    let Some(env) = Env::start_with(OLDEST, Backend::Sqlite, LONG, |c| {
        c.recycle = RecyclePolicy {
            max_turns: Some(2),
            check_every: Duration::from_millis(100),
            ..Default::default()
        };
    })
    .await
    else {
        return;
    };
    let relay = &env.relay;
    env.model
        .route("TURNS", ["t1", "t2", "t3"].map(Reply::text));
    let (h, _) = relay.create(asks(&env, "TURNS one")).await.unwrap();
    let id = h.id().to_owned();
    let first_pid = relay.codex_pid(&id).expect("running");
    env.until(&id, "turn 1", |s| {
        s.status == SessionStatus::Idle && s.turn_count == 1
    })
    .await;
    relay.say(&id, SayInput::text("TURNS two")).await.unwrap();
    env.until(&id, "turn 2", |s| {
        s.status == SessionStatus::Idle && s.turn_count == 2
    })
    .await;
    assert_eq!(until_recycled(relay, &id, 1).await, [first_pid]);
    relay.say(&id, SayInput::text("TURNS three")).await.unwrap();
    let snap = env
        .until(&id, "turn 3", |s| {
            s.status == SessionStatus::Idle && s.turn_count == 3
        })
        .await;
    assert_eq!(snap.result, Some(serde_json::json!("t3")));
    assert_ne!(relay.codex_pid(&id), Some(first_pid));
    let log = events(relay, &id).await;
    assert_contiguous(&log);
    assert_eq!(agent_texts(&log), ["t1", "t2", "t3"]);
    relay.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_far_over_its_limit_has_its_turn_interrupted_when_configured() {
    let Some(env) = Env::start_with(NEWEST, Backend::Sqlite, LONG, |c| {
        c.recycle = RecyclePolicy {
            max_rss: Some(MIB),
            hard_rss: Some(2 * MIB),
            over_hard: OverLimit::Interrupt,
            check_every: Duration::from_millis(100),
            ..Default::default()
        };
    })
    .await
    else {
        return;
    };
    let relay = &env.relay;
    env.model.route(
        "FAR",
        [Reply::exec("sleep 30", "call_s"), Reply::text("never")],
    );
    let (h, _) = relay
        .create(CreateOptions {
            prompt: Some("FAR sleep".into()),
            cwd: Some(env.cwd()),
            mode: Some(PermissionMode::ReadOnly),
            ..Default::default()
        })
        .await
        .unwrap();
    let id = h.id().to_owned();
    let pid = relay.codex_pid(&id).expect("running");
    common::until_logged(relay, &id, "the far-over note", |ev| {
        matches!(ev, Ev::Note { message } if message.contains("far over") && message.contains("interrupted"))
    })
    .await;
    let snap = env
        .until(&id, "the turn ends", |s| s.status != SessionStatus::Active)
        .await;
    let log = events(relay, &id).await;
    assert_eq!(
        snap.status,
        SessionStatus::Interrupted,
        "{:#?}",
        log.iter().map(|e| &e.ev).collect::<Vec<_>>()
    );
    assert_eq!(until_recycled(relay, &id, 1).await, [pid]);
    let log = events(relay, &id).await;
    assert_contiguous(&log);
    assert_eq!(turn_ends(&log), [TurnEndStatus::Cancelled]);
    relay.shutdown().await;
}
