//! Thread operations against the real Codex binaries, at the protocol level: `review/start`
//! (the reviewing model's JSON arrives as an agent message, the rendered review as the
//! `exitedReviewMode` item), `thread/compact/start`, `thread/fork` through a turn (0.169+), and
//! dropping the last turn (`thread/revert` from 0.169, `thread/rollback` in 0.98), each typed
//! answer parsed and checked against `thread/read`.

use crate::common::{Bed, TURN_TIMEOUT, run_turn};
use codex_relay_codex::CodexVersion;
use codex_relay_protocol::v2::*;
use codex_relay_testkit::{Reply, for_every_pinned_codex};

for_every_pinned_codex!(review_compact_fork_and_rewind);

async fn user_texts(bed: &Bed, thread: &str) -> Vec<Vec<String>> {
    bed.server
        .call::<ThreadRead>(&ThreadReadParams {
            thread_id: thread.to_owned(),
            include_turns: true,
        })
        .await
        .expect("thread/read")
        .thread
        .turns
        .iter()
        .map(|t| {
            t.items
                .iter()
                .filter_map(|i| match i {
                    ThreadItem::UserMessage(u) => u.content[0]["text"].as_str().map(str::to_owned),
                    _ => None,
                })
                .collect()
        })
        .collect()
}

async fn review_compact_fork_and_rewind(version: &'static str) {
    let v = CodexVersion::parse(version).unwrap();
    let bed = Bed::start(version).await;
    let review = serde_json::json!({
        "findings": [{"title": "[P1] Off-by-one", "body": "Skips the last element.",
                      "confidence_score": 0.8, "priority": 1,
                      "code_location": {"absolute_file_path": "/tmp/x.rs", "line_range": {"start": 3, "end": 5}}}],
        "overall_correctness": "patch is incorrect",
        "overall_explanation": "One bug.",
        "overall_confidence_score": 0.7
    });
    bed.model.push([Reply::text("one"), Reply::text("two")]);
    // 0.169+ reviews in a sub-agent of the thread; 0.98 in the thread.
    if v.has_thread_revert() {
        bed.model
            .route_sub_agent("look at x.rs", [Reply::text(review.to_string())]);
    } else {
        bed.model.push([Reply::text(review.to_string())]);
    }
    bed.model.push([Reply::text("summary")]);
    let (thread, mut sub) = bed
        .thread(bed.thread_params(ApprovalPolicy::Never, SandboxMode::ReadOnly))
        .await;
    let t1 = bed.turn(&thread, "first").await;
    run_turn(&mut sub, TURN_TIMEOUT, |_| {}).await;
    bed.turn(&thread, "second").await;
    run_turn(&mut sub, TURN_TIMEOUT, |_| {}).await;
    let history = user_texts(&bed, &thread).await;
    assert_eq!(history, [["first"], ["second"]]);

    let started = bed
        .server
        .call::<ReviewStart>(&ReviewStartParams {
            thread_id: thread.clone(),
            target: ReviewTarget::Custom {
                instructions: "look at x.rs".into(),
            },
            delivery: None,
        })
        .await
        .expect("review/start");
    assert_eq!(started.review_thread_id, thread, "an inline review");
    let log = run_turn(&mut sub, TURN_TIMEOUT, |_| {}).await;
    assert_eq!(log.completed.status, TurnStatus::Completed);
    let items: Vec<&ThreadItem> = log
        .notifications
        .iter()
        .filter_map(|n| match n {
            ServerNotification::ItemStarted(i) | ServerNotification::ItemCompleted(i) => {
                Some(&i.item)
            }
            _ => None,
        })
        .collect();
    assert!(
        items.iter().any(|i| matches!(i, ThreadItem::AgentMessage(m)
            if serde_json::from_str::<serde_json::Value>(&m.text).ok().as_ref() == Some(&review))),
        "the reviewing model's JSON is an agent message"
    );
    assert!(items.iter().any(|i| matches!(i, ThreadItem::Other(o)
        if o["type"] == "exitedReviewMode" && o["review"].as_str().unwrap_or("").contains("Off-by-one"))));

    bed.server
        .call::<ThreadCompactStart>(&ThreadIdParams {
            thread_id: thread.clone(),
        })
        .await
        .expect("thread/compact/start");
    let compacted = run_turn(&mut sub, TURN_TIMEOUT, |_| {}).await;
    assert_eq!(compacted.completed.status, TurnStatus::Completed);

    if v.has_thread_revert() {
        let forked = bed
            .server
            .call::<ThreadFork>(&ThreadForkParams {
                thread_id: thread.clone(),
                last_turn_id: Some(t1.id.clone()),
                ..Default::default()
            })
            .await
            .expect("thread/fork through a turn");
        assert_eq!(user_texts(&bed, &forked.thread.id).await, [["first"]]);
        bed.server
            .call::<ThreadRevert>(&ThreadRevertParams {
                thread_id: thread.clone(),
                before_turn_id: t1.id.clone(),
            })
            .await
            .expect("thread/revert");
        assert!(user_texts(&bed, &thread).await.is_empty());
    } else {
        let rolled = bed
            .server
            .call::<ThreadRollback>(&ThreadRollbackParams {
                thread_id: thread.clone(),
                num_turns: 1,
            })
            .await
            .expect("thread/rollback");
        let after = user_texts(&bed, &thread).await;
        assert_eq!(rolled.thread.turns.len(), after.len());
        assert_eq!(after[..2], [["first"], ["second"]]);
    }
}
