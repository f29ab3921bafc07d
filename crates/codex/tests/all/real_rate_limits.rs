//! What the real Codex (0.171 and 0.169) makes of the model server's rate-limit headers and
//! of a 429 `usage_limit_reached`: `account/rateLimits/updated` on the process's unrouted
//! stream (no thread id), and a failed turn whose `codexErrorInfo` is `usageLimitExceeded`.

use std::time::Duration;

use crate::common::{Bed, TURN_TIMEOUT, run_turn};
use codex_relay_codex::PeerEvent;
use codex_relay_protocol::v2::{ApprovalPolicy, SandboxMode, TurnStatus};
use codex_relay_testkit::Reply;
use codex_relay_testkit::rate_limits::{Window, headers, usage_limit_reached};
use serde_json::Value;

mod header_snapshot {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn codex_0_171_0() {
        super::headers_become_a_rate_limit_notification("0.171.0").await
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn codex_0_169_0() {
        super::headers_become_a_rate_limit_notification("0.169.0").await
    }
}

mod usage_limit {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn codex_0_171_0() {
        super::usage_limit_reached_fails_the_turn_as_such("0.171.0").await
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn codex_0_169_0() {
        super::usage_limit_reached_fails_the_turn_as_such("0.169.0").await
    }
}

/// The `account/rateLimits/updated` params on the unrouted stream, until one matches `want`.
/// (Codex rounds `usedPercent` to a whole number: 42.5 arrives as 43.)
async fn rate_limit_update(
    unrouted: &mut codex_relay_codex::Subscription,
    want: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    loop {
        let event = tokio::time::timeout_at(deadline, unrouted.recv())
            .await
            .unwrap_or_else(|_| panic!("no matching account/rateLimits/updated; saw {seen:?}"))
            .expect("the peer closed");
        if let PeerEvent::Notification(n) = event {
            let raw: Value = serde_json::from_str(&n.raw).unwrap_or(Value::Null);
            if raw["method"] == "account/rateLimits/updated" {
                if want(&raw["params"]) {
                    return raw["params"].clone();
                }
                seen.push(raw["params"].clone());
            }
        }
    }
}

async fn headers_become_a_rate_limit_notification(version: &'static str) {
    let bed = Bed::start(version).await;
    let mut unrouted = bed.server.peer().subscribe_default();
    let window = Window::used(42.0, 300, 3600);
    bed.model
        .push([Reply::text("fine")
            .with_headers(headers(window, Some(Window::used(7.0, 10080, 86400))))]);
    let (thread, mut sub) = bed
        .thread(bed.thread_params(ApprovalPolicy::Never, SandboxMode::ReadOnly))
        .await;
    bed.turn(&thread, "hello").await;
    let log = run_turn(&mut sub, TURN_TIMEOUT, |r| {
        panic!("unexpected {:?}", r.request())
    })
    .await;
    assert_eq!(log.completed.status, TurnStatus::Completed);
    let update = rate_limit_update(&mut unrouted, |p| {
        p.pointer("/rateLimits/primary/usedPercent").is_some()
    })
    .await;
    println!("{version}: {update}");
    let limits = &update["rateLimits"];
    assert_eq!(
        limits["primary"]["usedPercent"].as_f64(),
        Some(42.0),
        "{update}"
    );
    assert_eq!(
        limits["primary"]["resetsAt"].as_i64(),
        Some(window.resets_at),
        "{update}"
    );
    assert_eq!(
        limits["secondary"]["usedPercent"].as_f64(),
        Some(7.0),
        "{update}"
    );
}

async fn usage_limit_reached_fails_the_turn_as_such(version: &'static str) {
    let bed = Bed::start(version).await;
    let mut unrouted = bed.server.peer().subscribe_default();
    let window = Window::used(100.0, 300, 3600);
    bed.model.push([usage_limit_reached(window)]);
    let (thread, mut sub) = bed
        .thread(bed.thread_params(ApprovalPolicy::Never, SandboxMode::ReadOnly))
        .await;
    bed.turn(&thread, "hello").await;
    let log = run_turn(&mut sub, TURN_TIMEOUT, |r| {
        panic!("unexpected {:?}", r.request())
    })
    .await;
    assert_eq!(log.completed.status, TurnStatus::Failed);
    let error = serde_json::to_value(&log.completed.error).unwrap();
    println!("{version}: turn error {error}");
    assert_eq!(error["codexErrorInfo"], "usageLimitExceeded", "{error}");
    let update = rate_limit_update(&mut unrouted, |p| {
        p.pointer("/rateLimits/primary/usedPercent")
            .and_then(Value::as_f64)
            == Some(100.0)
    })
    .await;
    println!("{version}: {update}");
}
