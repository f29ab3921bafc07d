//! Retention on a running relay over the real Codex: with events kept for two seconds, an idle
//! session's stored log is pruned in the background and the session goes on (its next turn
//! runs, its seqs continue), while a session waiting for an approval keeps every event and its
//! request, which is answered after several passes and reaches Codex.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::common::{Backend, Env};
use codex_relay_core::store::Retention;
use codex_relay_core::{Answer, CreateOptions, PermissionMode, SayInput, SessionStatus};
use codex_relay_testkit::Reply;

crate::matrix!(an_idle_session_is_pruned_and_one_waiting_for_an_approval_is_not);

const LONG: Duration = Duration::from_secs(300);
const KEEP: Duration = Duration::from_secs(2);

/// Polls `what` with backoff until it holds (60 s at most).
async fn eventually<F: std::future::Future<Output = bool>>(
    what: &str,
    mut check: impl FnMut() -> F,
) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut wait = Duration::from_millis(50);
    while !check().await {
        assert!(Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_secs(1));
    }
}

async fn an_idle_session_is_pruned_and_one_waiting_for_an_approval_is_not(
    version: &'static str,
    backend: Backend,
) {
    let Some(env) = Env::start_with(version, backend, LONG, |c| {
        c.store_options.retention = Retention {
            max_age: Some(KEEP),
            every: Duration::from_millis(300),
            pause: Duration::ZERO,
            ..Retention::default()
        };
    })
    .await
    else {
        return;
    };
    let store = env.relay.store().clone();
    let start = |prompt: &str| CreateOptions {
        prompt: Some(prompt.into()),
        cwd: Some(env.cwd()),
        mode: Some(PermissionMode::Default),
        ..Default::default()
    };
    env.model.route(
        "MARK-IDLE",
        [Reply::text("first answer"), Reply::text("second answer")],
    );
    env.model.route(
        "MARK-LIVE",
        [
            Reply::exec("touch kept.txt", "call_kept"),
            Reply::text("created kept.txt"),
        ],
    );
    let (idle, _) = env
        .relay
        .create(start("MARK-IDLE: say something"))
        .await
        .unwrap();
    let idle = idle.id().to_owned();
    let first = env
        .until(&idle, "the first turn", |s| {
            s.status == SessionStatus::Idle && s.turn_count == 1
        })
        .await;
    let (live, _) = env
        .relay
        .create(start("MARK-LIVE: create kept.txt"))
        .await
        .unwrap();
    let live = live.id().to_owned();
    let waiting = env
        .until(&live, "the approval", |s| {
            s.status == SessionStatus::AwaitingApproval
        })
        .await;
    let asked_at = Instant::now();
    let request = waiting.pending[0].id.clone();

    // The idle session's stored log goes once it is older than two seconds.
    eventually("the idle session's events are pruned", || async {
        store.events(&idle, 0, 1000).await.unwrap().is_empty()
    })
    .await;
    // Two more passes after the waiting session's events and request are past the limit too.
    eventually("two seconds pass", || async {
        asked_at.elapsed() > KEEP + Duration::from_millis(500)
    })
    .await;
    let passes = store.retention_stats().passes.load(Ordering::Relaxed);
    eventually("two more passes", || async {
        store.retention_stats().passes.load(Ordering::Relaxed) >= passes + 2
    })
    .await;
    store.flush().await.unwrap();
    let now_last = env.relay.status(&live).unwrap().last_seq;
    let kept: Vec<i64> = store
        .events(&live, 0, 1000)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(
        kept,
        (1..=now_last as i64).collect::<Vec<_>>(),
        "every event of the session in a turn"
    );
    let open = store.pending(Some(&live), true).await.unwrap();
    assert_eq!(open.len(), 1, "its request: {open:?}");
    assert_eq!(open[0].id, request);

    // The request is answered after all that, and Codex runs the command.
    env.relay
        .respond(
            &live,
            &request,
            Answer::approve(),
            codex_relay_core::Decider::library("test"),
        )
        .await
        .unwrap();
    env.until(&live, "the approved turn", |s| {
        s.status == SessionStatus::Idle && s.turn_count == 1
    })
    .await;
    assert!(
        env.home.workspace().join("kept.txt").exists(),
        "the approval reached Codex"
    );

    // The pruned session takes another turn; its seqs go on after the pruned ones.
    env.relay
        .say(&idle, SayInput::text("MARK-IDLE: again"))
        .await
        .unwrap();
    let second = env
        .until(&idle, "the second turn", |s| {
            s.status == SessionStatus::Idle && s.turn_count == 2
        })
        .await;
    assert_eq!(second.result, Some(serde_json::json!("second answer")));
    store.flush().await.unwrap();
    let stored: Vec<i64> = store
        .events(&idle, 0, 1000)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert!(
        stored.first().is_some_and(|s| *s > first.last_seq as i64),
        "only the second turn is stored: {stored:?} (the first ended at {})",
        first.last_seq
    );
    assert_eq!(stored.last(), Some(&(second.last_seq as i64)));
    env.relay.shutdown().await;
}
