//! Rate limits on the real Codex (0.171 and 0.169), over HTTP, with the scripted model sending
//! Codex's `x-codex-*` rate-limit headers: a response that reports the primary window full
//! makes Codex send `account/rateLimits/updated`; a new turn then waits in the relay's queue
//! (visible in the session, `/api/rate-limits` and the metrics) and starts only when the next
//! response reports the window below 100 %. A 429 `usage_limit_reached` ends a turn with the
//! error kind `usageLimitExceeded`, holds the queue again, and a full queue refuses the next
//! turn with 429 `rate_limited`.

use std::time::Duration;

use crate::common::{Bed, HttpRelay};
use crate::http_support::{Client, Event};
use codex_relay_testkit::Reply;
use codex_relay_testkit::rate_limits::{Window, headers, usage_limit_reached};
use serde_json::{Value, json};

const TURN: Duration = Duration::from_secs(120);

mod queued_until_the_limit_clears {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn codex_0_171_0() {
        super::a_full_window_queues_new_turns_until_codex_reports_it_clear("0.171.0").await
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn codex_0_169_0() {
        super::a_full_window_queues_new_turns_until_codex_reports_it_clear("0.169.0").await
    }
}

fn is_end(e: &Event) -> bool {
    e.event == "envelope" && e.json()["ev"]["t"] == "turn-end"
}

/// Polls `/api/rate-limits` (with backoff) until `want` holds; a minute at most.
async fn rate_limits_until(c: &Client, want: impl Fn(&Value) -> bool) -> Value {
    let until = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut pause = Duration::from_millis(50);
    loop {
        let v = c.get("/api/rate-limits").await.json();
        if want(&v) {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < until,
            "the rate limits never got there: {v}"
        );
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }
}

async fn created(c: &Client, body: Value) -> String {
    let r = c.post("/api/sessions", &body).await;
    assert_eq!(r.status, 201, "{}", r.text());
    r.json()["sessionId"].as_str().unwrap().to_owned()
}

async fn a_full_window_queues_new_turns_until_codex_reports_it_clear(version: &'static str) {
    let bed = Bed::start(version).await;
    let ws = bed.home.workspace().to_path_buf();
    let hold = format!("RL-HOLD-{version}");
    let queued = format!("RL-QUEUED-{version}");
    // Session A: its first model response says the primary window is full; the response
    // after it (held open until the test lets it go) says the window is at 10 %.
    let clear = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
    bed.model.route(
        &hold,
        [
            Reply::exec("echo waiting", "call-hold")
                .with_headers(headers(Window::used(100.0, 300, 600), None)),
            Reply::text("A is done")
                .with_headers(headers(Window::used(10.0, 300, 600), None))
                .after(&clear),
        ],
    );
    bed.model.route(&queued, [Reply::text("B ran")]);
    let mut args = bed.args(120_000);
    args.extend(["--rate-limit-queue".into(), "1".into()]);
    let relay = HttpRelay::start(args).await;
    let c = Client::new(&relay.url);
    let a = created(
        &c,
        json!({"prompt": format!("{hold}: wait"), "cwd": ws,
               "approvalPolicy": "never", "sandbox": "workspace-write"}),
    )
    .await;
    let limits = rate_limits_until(&c, |v| !v["hold"].is_null()).await;
    assert_eq!(limits["hold"]["limitId"], "codex", "{limits}");
    assert_eq!(limits["hold"]["window"], "primary", "{limits}");
    assert_eq!(limits["hold"]["usedPercent"], 100.0, "{limits}");

    // Session B's first turn waits in the queue instead of starting.
    let r = c
        .post(
            "/api/sessions",
            &json!({"prompt": format!("{queued}: go"), "cwd": ws, "approvalPolicy": "never",
                    "sandbox": "read-only"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert!(
        r.json()["turnId"].is_null(),
        "no turn started: {}",
        r.text()
    );
    let b = r.json()["sessionId"].as_str().unwrap().to_owned();
    let view = c.get(&format!("/api/sessions/{b}")).await.json();
    assert_eq!(view["queued"]["position"], 1, "{view}");
    assert_eq!(view["queued"]["hold"]["limitId"], "codex", "{view}");
    let limits = c.get("/api/rate-limits").await.json();
    assert_eq!(limits["queued"][0]["sessionId"], b.as_str(), "{limits}");
    let metrics = c.get("/metrics").await.text();
    for line in [
        "codex_relay_turns_queued 1",
        "codex_relay_rate_limit_hit 1",
        "codex_relay_rate_limit_used_percent{window=\"codex:primary\"} 100",
    ] {
        assert!(metrics.contains(line), "{line} in {metrics}");
    }
    // The queue's bound: one turn waits already, the next is refused (before any thread
    // starts).
    let refused = c
        .post(
            "/api/sessions",
            &json!({"prompt": "one too many", "cwd": ws, "approvalPolicy": "never"}),
        )
        .await;
    assert_eq!(refused.status, 429, "{}", refused.text());
    assert_eq!(refused.json()["error"]["code"], "rate_limited");
    // Nothing of B reached the model while the window was full.
    assert!(bed.model.requests_with(&queued).is_empty());

    // Codex's next response for A reports 10 %: the limit clears and B's turn runs.
    let mut sa = c.stream(&format!("/api/sessions/{a}/stream"), &[]).await;
    let mut sb = c.stream(&format!("/api/sessions/{b}/stream"), &[]).await;
    clear.add_permits(1);
    let end = sa.until(TURN, is_end).await.pop().unwrap().json();
    assert_eq!(end["ev"]["status"], "completed", "{end}");
    let end = sb.until(TURN, is_end).await.pop().unwrap().json();
    assert_eq!(end["ev"]["status"], "completed", "{end}");
    let order: Vec<String> = bed
        .model
        .requests()
        .iter()
        .map(|r| r.body["input"].to_string())
        .collect();
    let cleared = order.iter().rposition(|i| i.contains(&hold)).unwrap();
    let first_b = order.iter().position(|i| i.contains(&queued)).unwrap();
    assert!(
        first_b > cleared,
        "B's turn reached the model before the response that cleared the limit"
    );
    let limits = rate_limits_until(&c, |v| v["queued"].as_array().is_some_and(Vec::is_empty)).await;
    assert!(limits["hold"].is_null(), "{limits}");
    assert_eq!(limits["queuedTotal"], 1, "{limits}");
    assert_eq!(limits["refusedTotal"], 1, "{limits}");
    // The turn B waited for: the session's log says so.
    let events = c.get(&format!("/api/sessions/{b}/events")).await.json();
    assert!(
        events
            .to_string()
            .contains("waits in the queue (position 1)"),
        "{events}"
    );

    // The account's usage limit: Codex fails the turn with usageLimitExceeded, and the window
    // its 429 reported full holds the next turn in the queue.
    let usage = format!("RL-USAGE-{version}");
    bed.model
        .route(&usage, [usage_limit_reached(Window::used(100.0, 300, 600))]);
    let mut sb = c.stream(&format!("/api/sessions/{b}/stream"), &[]).await;
    let said = c
        .post(
            &format!("/api/sessions/{b}/messages"),
            &json!({"text": format!("{usage}: more")}),
        )
        .await;
    assert_eq!(said.json()["mode"], "started", "{}", said.text());
    let end = sb
        .until(TURN, |e| is_end(e) && e.json()["ev"]["status"] == "failed")
        .await
        .pop()
        .unwrap()
        .json();
    assert_eq!(end["ev"]["error_kind"], "usageLimitExceeded", "{end}");
    rate_limits_until(&c, |v| !v["hold"].is_null()).await;
    let said = c
        .post(
            &format!("/api/sessions/{b}/messages"),
            &json!({"text": "after the usage limit"}),
        )
        .await;
    assert_eq!(said.json()["mode"], "queued", "{}", said.text());
    drop(relay);
    bed.assert_no_codex_left().await;
}
