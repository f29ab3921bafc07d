//! `codex-relay serve --no-cluster` (a relay alone on its database) while its Postgres store is
//! stopped in the middle of a turn (a private server of this test; the shared test server is
//! never stopped), over the real Codex with the scripted model: the turn goes on over the API,
//! `/healthz` says the store cannot take writes and why, `/metrics` shows
//! `codex_relay_store_fault 1`, the session's JSON has `storeFault`, and once Postgres is back
//! all three are healthy again. Then Postgres is stopped for good and `serve` is stopped with a turn's events
//! still unstored: it exits within its bound instead of hanging on the dead store, says how many
//! events were not stored, and leaves the note that tells the next start which.
//!
//! Skipped, with the reason, when no PostgreSQL binaries are installed.

use std::time::{Duration, Instant};

use crate::common::{Bed, HttpRelay};
use crate::http_support::{Client, Event};
use codex_relay_testkit::Reply;
use serde_json::{Value, json};

const NEWEST: &str = codex_relay_testkit::NEWEST;
const TURN: Duration = Duration::from_secs(90);

fn ev_t(e: &Event) -> String {
    e.json()["ev"]["t"].as_str().unwrap_or_default().to_owned()
}

fn is_status(e: &Event, status: &str) -> bool {
    e.event == "envelope" && ev_t(e) == "status" && e.json()["ev"]["status"] == status
}

/// Polls `/healthz` until its store check is healthy, or (`healthy == false`) reports the
/// store's fault (before the writer has met it, the check may only say that a flush is slow);
/// returns the last answer.
async fn health_until(c: &Client, healthy: bool) -> (u16, Value) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = c.get("/healthz").await;
        let body = r.json();
        let detail = body["store"]["detail"].as_str().unwrap_or_default();
        if body["store"]["ok"] == healthy && (healthy || detail.contains("cannot take writes")) {
            return (r.status, body);
        }
        assert!(
            Instant::now() < deadline,
            "/healthz store ok={healthy} within 60 s: {body}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn store_fault_gauge(c: &Client) -> String {
    let text = c.get("/metrics").await.text();
    text.lines()
        .find(|l| l.starts_with("codex_relay_store_fault "))
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_metrics_report_a_stopped_postgres_and_serve_stops_without_hanging() {
    let Some(pg) = codex_relay_testkit::postgres::Private::start() else {
        return;
    };
    let bed = Bed::start(NEWEST).await;
    bed.model.route(
        "PG-DOWN",
        [
            Reply::exec("sleep 3; echo slept", "call-pg"),
            Reply::text("finished while Postgres was down"),
        ],
    );
    bed.model
        .route("PG-GONE", [Reply::text("finished with Postgres gone")]);
    let state = tempfile::tempdir().unwrap();
    let mut args: Vec<String> = vec!["--listen".into(), "127.0.0.1:0".into()];
    args.extend(bed.args(60_000));
    let db = args.iter().position(|a| a == "--db").unwrap() + 1;
    args[db] = pg.url();
    // A relay alone on its database (docs/STORE.md, "Faults"): it keeps its sessions running
    // through the outage. In a cluster, even of one, an instance that cannot confirm its lease
    // for three quarters of it stops them (docs/CLUSTER.md; cluster_outages.rs).
    args.push("--no-cluster".into());
    let mut env: Vec<(&str, String)> = ["PATH", "HOME", "TMPDIR"]
        .into_iter()
        .filter_map(|k| Some((k, std::env::var(k).ok()?)))
        .collect();
    env.push(("LOG_LEVEL", "info".into()));
    // Where the loss note goes (Postgres has no spool directory).
    env.push(("XDG_STATE_HOME", state.path().display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let relay = HttpRelay::start_with_env(&args, &env).await;
    let c = Client::new(&relay.url);
    let (status, body) = health_until(&c, true).await;
    assert_eq!(status, 200, "{body}");

    let ws = bed.home.workspace().display().to_string();
    let r = c
        .post(
            "/api/sessions",
            &json!({"prompt": "PG-DOWN run something", "cwd": ws, "sandbox": "read-only",
                    "approvalPolicy": "never"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let mut s = c.stream(&format!("/api/sessions/{id}/stream"), &[]).await;
    s.until(TURN, |e| ev_t(e) == "tool-call-start").await;
    tokio::task::block_in_place(|| pg.stop());
    // The live view goes on while the store cannot take the turn's events.
    let rest = s.until(TURN, |e| is_status(e, "idle")).await;
    assert!(
        rest.iter()
            .any(|e| e.json()["ev"]["text"] == "finished while Postgres was down"),
        "the turn's last message arrives live"
    );
    let (status, body) = health_until(&c, false).await;
    assert_eq!(status, 503, "{body}");
    let detail = body["store"]["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("cannot take writes")
            && (detail.contains("Connection refused")
                || detail.contains("Connection reset by peer")
                || detail.contains("terminating connection due to administrator command")),
        "/healthz says what is wrong: {detail}"
    );
    assert_eq!(store_fault_gauge(&c).await, "codex_relay_store_fault 1");
    // The session's JSON says so too, while it lasts.
    let view = c.get(&format!("/api/sessions/{id}")).await.json();
    let fault = &view["storeFault"];
    assert!(
        fault["message"].as_str().is_some_and(|m| !m.is_empty())
            && fault["forMs"].is_u64()
            && fault["writesHeld"].is_u64()
            && fault["codexPaused"].is_boolean(),
        "the session shows the store's fault: {view}"
    );

    tokio::task::block_in_place(|| pg.start_again());
    let (status, body) = health_until(&c, true).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(store_fault_gauge(&c).await, "codex_relay_store_fault 0");
    let view = c.get(&format!("/api/sessions/{id}")).await.json();
    assert!(
        view.get("storeFault").is_none(),
        "the fault is gone: {view}"
    );
    let events = c.get(&format!("/api/sessions/{id}/events")).await.json();
    eprintln!("events after the restart: {events}");

    // Postgres goes away for good while a second turn runs; serve is stopped once the fault
    // has lasted its bound.
    tokio::task::block_in_place(|| pg.stop());
    let r = c
        .post(
            &format!("/api/sessions/{id}/messages"),
            &json!({"text": "PG-GONE once more"}),
        )
        .await;
    assert!(r.status < 300, "{}", r.text());
    s.until(TURN, |e| is_status(e, "idle")).await;
    health_until(&c, false).await;
    // An open SSE stream holds serve's graceful HTTP shutdown for its 5 s; this test is about
    // the store's bound.
    drop(s);
    tokio::time::sleep(Duration::from_secs(11)).await;
    let log = relay.log.clone();
    let started = Instant::now();
    let exit = relay.stop().await;
    eprintln!("serve stopped in {:?}: {exit}", started.elapsed());
    let log = log.lock().unwrap().join("\n");
    assert!(
        log.contains("shut down with events that were shown but not stored"),
        "serve says events were not stored"
    );
    let notes: Vec<_> = std::fs::read_dir(state.path().join("codex-relay/lost"))
        .expect("a loss note was written")
        .filter_map(|e| e.ok())
        .collect();
    assert_eq!(notes.len(), 1);
    let note: Value =
        serde_json::from_str(&std::fs::read_to_string(notes[0].path()).unwrap()).unwrap();
    assert_eq!(note["sessions"][0]["sessionId"], json!(id), "{note}");
    assert!(note["sessions"][0]["count"].as_u64().unwrap() > 0, "{note}");
}
