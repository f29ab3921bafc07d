//! The scripted model's failure modes, as the real Codex experiences them: HTTP 401/429/500,
//! `response.failed`, and a stream cut off mid-response.

use crate::common::{Bed, TURN_TIMEOUT, TurnLog, run_turn};
use codex_relay_protocol::v2::{ApprovalPolicy, SandboxMode, ServerNotification, TurnStatus};
use codex_relay_testkit::{HomeOptions, Item, Reply, for_each_codex};

for_each_codex!(
    a_500_is_retried_by_codex_and_the_turn_completes,
    http_401_fails_the_turn,
    http_429_fails_the_turn_when_retries_are_exhausted,
    response_failed_fails_the_turn_with_its_message,
    a_dropped_stream_fails_the_turn,
);

async fn one_turn(bed: &Bed, replies: Vec<Reply>) -> TurnLog {
    bed.model.push(replies);
    let (thread, mut sub) = bed
        .thread(bed.thread_params(ApprovalPolicy::Never, SandboxMode::ReadOnly))
        .await;
    bed.turn(&thread, "hello").await;
    run_turn(&mut sub, TURN_TIMEOUT, |r| {
        panic!("unexpected request {:?}", r.request())
    })
    .await
}

fn error_text(log: &TurnLog) -> String {
    let mut text = log
        .completed
        .error
        .as_ref()
        .map(|e| e.to_string())
        .unwrap_or_default();
    for n in &log.notifications {
        if let ServerNotification::Error(e) = n {
            text.push_str(&e.error.to_string());
        }
    }
    text
}

async fn a_500_is_retried_by_codex_and_the_turn_completes(version: &'static str) {
    let opts = HomeOptions {
        request_max_retries: 1,
        ..HomeOptions::default()
    };
    let bed = Bed::start_with(version, opts).await;
    let log = one_turn(
        &bed,
        vec![
            Reply::Status {
                code: 500,
                message: "boom".into(),
            },
            Reply::text("fine now"),
        ],
    )
    .await;
    assert_eq!(
        log.completed.status,
        TurnStatus::Completed,
        "{}",
        error_text(&log)
    );
    assert_eq!(bed.model.requests().len(), 2);
}

async fn http_401_fails_the_turn(version: &'static str) {
    let bed = Bed::start(version).await;
    let log = one_turn(
        &bed,
        vec![Reply::Status {
            code: 401,
            message: "bad key".into(),
        }],
    )
    .await;
    assert_eq!(log.completed.status, TurnStatus::Failed);
    assert_eq!(bed.model.requests().len(), 1);
}

async fn http_429_fails_the_turn_when_retries_are_exhausted(version: &'static str) {
    let bed = Bed::start(version).await;
    let log = one_turn(
        &bed,
        vec![Reply::Status {
            code: 429,
            message: "slow down".into(),
        }],
    )
    .await;
    assert_eq!(log.completed.status, TurnStatus::Failed);
}

async fn response_failed_fails_the_turn_with_its_message(version: &'static str) {
    let bed = Bed::start(version).await;
    let log = one_turn(
        &bed,
        vec![Reply::Failed {
            message: "the scripted model gave up".into(),
        }],
    )
    .await;
    assert_eq!(log.completed.status, TurnStatus::Failed);
    assert!(
        error_text(&log).contains("the scripted model gave up"),
        "{}",
        error_text(&log)
    );
}

async fn a_dropped_stream_fails_the_turn(version: &'static str) {
    let bed = Bed::start(version).await;
    let log = one_turn(
        &bed,
        vec![Reply::Drop {
            items: vec![Item::Reasoning("thinking".into())],
        }],
    )
    .await;
    assert_eq!(
        log.completed.status,
        TurnStatus::Failed,
        "{}",
        error_text(&log)
    );
}
