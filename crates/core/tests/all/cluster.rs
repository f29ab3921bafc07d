//! Two engines on one Postgres, no binary (beside the binary's cluster tests): a session runs on
//! one instance, the other mirrors it from the committed log and carries what its callers ask
//! (an answer, a message, an interrupt, a close) to the owner through the placement seam, as typed
//! operations; every answer is recorded with its typed decider.

use std::time::Duration;

use crate::common::{Backend, Env, WAIT, until};
use codex_relay_core::{
    Answer, CreateOptions, Decider, Ev, Front, PermissionMode, Relay, SayInput, SayOutcome,
    SessionStatus,
};
use codex_relay_testkit::Reply;

const LONG: Duration = Duration::from_secs(300);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_answers_says_and_closes_through_the_owner_codex_0_169_0() {
    answers_says_and_closes_through_the_owner(codex_relay_testkit::NEWEST).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_answers_says_and_closes_through_the_owner_codex_0_98_0() {
    answers_says_and_closes_through_the_owner("0.98.0").await
}

/// Waits until `relay` knows session `id` (its owner committed it, and a notice or this call
/// mirrored it), with backoff.
async fn mirrored(relay: &Relay, id: &str) {
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut pause = Duration::from_millis(20);
    while let Err(e) = relay.find(id).await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the second instance never mirrored {id}: {e}"
        );
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(500));
    }
}

async fn answers_says_and_closes_through_the_owner(version: &'static str) {
    let Some(env) = Env::start(version, Backend::Postgres, LONG).await else {
        return;
    };
    let mut config = env.config.clone();
    let owner = env.relay.instance_id().expect("in a cluster").to_owned();
    config.cluster.instance_id = Some(format!("{owner}-b"));
    let other = Relay::open(config)
        .await
        .expect("the second instance opens");

    // The owner's session asks to run a command.
    env.model.push([
        Reply::exec("touch from-the-other.txt", "call_b"),
        Reply::text("created it"),
    ]);
    let (h, _) = env
        .relay
        .create(CreateOptions {
            prompt: Some("create from-the-other.txt".into()),
            cwd: Some(env.cwd()),
            mode: Some(PermissionMode::Default),
            ..Default::default()
        })
        .await
        .unwrap();
    let id = h.id().to_owned();
    env.until(&id, "the approval", |s| {
        s.status == SessionStatus::AwaitingApproval
    })
    .await;

    // The other instance shows it from the committed log, and answers it as a person
    // through HTTP would: the answer is carried to the owner, which gives it to Codex.
    mirrored(&other, &id).await;
    let shown = until(&other, &id, "the approval on the other instance", |s| {
        !s.pending.is_empty()
    })
    .await;
    let request = shown.pending[0].id.clone();
    let r = other
        .respond(
            &id,
            &request,
            Answer::approve(),
            Decider::Person(Front::Http),
        )
        .await
        .expect("the owner takes the answer");
    assert_eq!((r.decision.as_str(), r.by.as_str()), ("approve", "http"));
    env.until(&id, "turn 1 done", |s| {
        s.status == SessionStatus::Idle && s.turn_count == 1
    })
    .await;
    assert!(env.home.workspace().join("from-the-other.txt").exists());
    let resolved = env.all_events(&id).await.into_iter().any(|e| {
        matches!(&e.ev, Ev::RequestResolved { id: rid, by, decision, .. }
            if *rid == request && by.as_str() == "http" && decision.as_str() == "approve")
    });
    assert!(
        resolved,
        "the owner's log records the answer with its decider"
    );

    // A message through the other instance starts the next turn on the owner.
    env.model.push([Reply::text("second turn")]);
    let said = other
        .say(&id, SayInput::text("once more"))
        .await
        .expect("the owner takes the message");
    assert!(matches!(said, SayOutcome::Started { .. }), "{said:?}");
    let snap = env
        .until(&id, "turn 2 done", |s| {
            s.status == SessionStatus::Idle && s.turn_count == 2
        })
        .await;
    assert_eq!(snap.result, Some(serde_json::json!("second turn")));

    // An interrupt through the other instance asks the owner, where no turn runs now.
    let interrupted = other.interrupt(&id).await.expect("the owner answers");
    assert!(!interrupted, "no turn was running on the owner");

    // A close through the other instance closes it on the owner.
    other.close(&id, false).await.expect("the owner closes it");
    env.until(&id, "closed on the owner", |s| {
        s.status == SessionStatus::Closed
    })
    .await;
    other.shutdown().await;
    env.relay.shutdown().await;
}
