//! The HTTP front's limits on the real Codex (0.169) and the scripted model: `serve
//! --idle-timeout` stops a turn whose command is silent forever, the session view and the
//! turn's end say so, the metrics count it; a budget set at create is reached, a message is
//! refused with 409 `budget_reached`, and `POST /api/sessions/{id}/limits` raises it.

use std::time::Duration;

use crate::common::{Bed, HttpRelay};
use crate::http_support::{Client, Event};
use codex_relay_testkit::{NEWEST, Reply};
use serde_json::{Value, json};

const TURN: Duration = Duration::from_secs(120);

fn is_end(e: &Event) -> bool {
    e.event == "envelope" && e.json()["ev"]["t"] == "turn-end"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relays_idle_timeout_and_a_budget_stop_turns_and_the_api_says_why() {
    let bed = Bed::start(NEWEST).await;
    let ws = bed.home.workspace().to_path_buf();
    let marker = format!("IDLE-{}", std::process::id());
    bed.model.route(
        "HTTP-IDLE",
        [Reply::exec(
            &format!("sleep 1000; echo {marker}"),
            "call-idle",
        )],
    );
    let mut args = bed.args(120_000);
    args.extend(["--idle-timeout".into(), "3s".into()]);
    let relay = HttpRelay::start(args).await;
    let c = Client::new(&relay.url);
    let created = c
        .post(
            "/api/sessions",
            &json!({"prompt": "HTTP-IDLE wait", "cwd": ws, "approvalPolicy": "never",
                    "sandbox": "workspace-write"}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text());
    let id = created.json()["sessionId"].as_str().unwrap().to_owned();
    let mut s = c.stream(&format!("/api/sessions/{id}/stream"), &[]).await;
    let got = s.until(TURN, is_end).await;
    let end = got.last().expect("the turn ended").json();
    assert_eq!(end["ev"]["stopped"]["reason"], "idle", "{end}");
    assert_eq!(end["ev"]["stopped"]["idleMs"], 3000, "{end}");
    let view = c.get(&format!("/api/sessions/{id}")).await.json();
    assert_eq!(view["status"], "interrupted", "{view}");
    assert_eq!(view["stopped"]["reason"], "idle", "{view}");
    let metrics = c.get("/metrics").await.text();
    assert!(
        metrics.contains("codex_relay_turns_stopped_total{reason=\"idle\"} 1"),
        "{metrics}"
    );

    // A budget of 100 output tokens: the first answer (30 output tokens by default) stays
    // under it, the second crosses it.
    bed.model
        .route("HTTP-BUDGET", [Reply::text("one").with_usage(10, 30)]);
    let created = c
        .post(
            "/api/sessions",
            &json!({"prompt": "HTTP-BUDGET one", "cwd": ws, "approvalPolicy": "never",
                    "budget": {"outputTokens": 100}, "prices": {"input": 1.0, "output": 2.0}}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text());
    let id = created.json()["sessionId"].as_str().unwrap().to_owned();
    let mut s = c.stream(&format!("/api/sessions/{id}/stream"), &[]).await;
    s.until(TURN, is_end).await;
    bed.model
        .route("HTTP-OVER", [Reply::text("two").with_usage(10, 80)]);
    let said = c
        .post(
            &format!("/api/sessions/{id}/messages"),
            &json!({"text": "HTTP-OVER two"}),
        )
        .await;
    assert_eq!(said.status, 200, "{}", said.text());
    s.until(TURN, is_end).await;
    let limits: Value = c.get(&format!("/api/sessions/{id}/limits")).await.json();
    assert_eq!(
        limits["budgetReached"]["budget"], "outputTokens",
        "{limits}"
    );
    assert_eq!(limits["spent"]["usage"]["output_tokens"], 110, "{limits}");
    // 20 input tokens at $1/M and 110 output tokens at $2/M.
    let cost = limits["spent"]["costUsd"].as_f64().unwrap();
    assert!((cost - 0.00024).abs() < 1e-12, "{limits}");
    let refused = c
        .post(
            &format!("/api/sessions/{id}/messages"),
            &json!({"text": "HTTP-AFTER three"}),
        )
        .await;
    assert_eq!(refused.status, 409, "{}", refused.text());
    assert_eq!(refused.json()["error"]["code"], "budget_reached");
    assert!(
        refused.text().contains("outputTokens"),
        "{}",
        refused.text()
    );
    let raised = c
        .post(
            &format!("/api/sessions/{id}/limits"),
            &json!({"budget": {"outputTokens": 1000}}),
        )
        .await;
    assert_eq!(raised.status, 200, "{}", raised.text());
    assert!(
        raised.json()["budgetReached"].is_null(),
        "{}",
        raised.text()
    );
    bed.model.route("HTTP-AFTER", [Reply::text("three")]);
    let said = c
        .post(
            &format!("/api/sessions/{id}/messages"),
            &json!({"text": "HTTP-AFTER three"}),
        )
        .await;
    assert_eq!(said.status, 200, "{}", said.text());
    let got = s.until(TURN, is_end).await;
    let end = got.last().expect("the third turn ended").json();
    assert_eq!(end["ev"]["status"], "completed", "{end}");
    drop(relay);
    bed.assert_no_codex_left().await;
}
