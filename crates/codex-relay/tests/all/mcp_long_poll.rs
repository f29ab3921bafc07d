//! A long-poll never sleeps through the end of a turn. As LLM agents use it (the Node SDK over
//! stdio, the real Codex): `codex_say`, a moment of thought in which the turn ends, then
//! `codex_status` with `waitMs: 30000` and no cursor answers at once with `done` and the
//! result; a wait while a turn runs still waits for it; a wait on a session with no turn
//! running answers at once.

use std::time::{Duration, Instant};

use crate::common::{Bed, Driver, Sdk, Transport};
use codex_relay_testkit::{NEWEST, Reply};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_after_the_turn_ended_answers_at_once() {
    let bed = Bed::start(NEWEST).await;
    bed.model.route("POLL-1", [Reply::text("first answer")]);
    bed.model.route("POLL-2", [Reply::text("second answer")]);
    bed.model.route(
        "POLL-3",
        [
            Reply::exec("sleep 3; echo slept", "call-sleep"),
            Reply::text("third answer"),
        ],
    );
    let mut d = Driver::spawn(Sdk::Node).await;
    d.connect(Transport::Stdio, &bed.args(60_000), "").await;
    let ws = bed.home.workspace();
    let started = d
        .ok(
            "codex_start",
            json!({"prompt": "POLL-1 go", "workingDirectory": ws, "approvalPolicy": "never",
                   "sandbox": "workspace-write"}),
        )
        .await;
    let session = started["sessionId"].as_str().unwrap().to_owned();
    let (done, _) = d
        .status_until(&session, Duration::from_secs(90), |s| s["status"] == "done")
        .await;
    assert_eq!(done["result"], "first answer");

    // The follow-up ends while the agent "thinks"; its long-poll must not wait 30 s for it.
    d.ok(
        "codex_say",
        json!({"sessionId": session, "message": "POLL-2 again"}),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let t = Instant::now();
    let s = d
        .ok(
            "codex_status",
            json!({"sessionId": session, "waitMs": 30000}),
        )
        .await;
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "answered after {:?}",
        t.elapsed()
    );
    assert_eq!(
        (s["status"].clone(), s["result"].clone()),
        (json!("done"), json!("second answer"))
    );

    // Nothing running: a wait answers at once, with or without a cursor.
    for args in [
        json!({"sessionId": session, "waitMs": 30000}),
        json!({"sessionId": session, "waitMs": 30000, "cursor": s["nextCursor"]}),
    ] {
        let t = Instant::now();
        d.ok("codex_status", args).await;
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "waited {:?}",
            t.elapsed()
        );
    }

    // A turn that runs (a 3 s command): the wait lasts until something happens, and the last
    // wait of the turn ends with it.
    d.ok(
        "codex_say",
        json!({"sessionId": session, "message": "POLL-3 sleep"}),
    )
    .await;
    let t = Instant::now();
    let (s, _) = d
        .status_until(&session, Duration::from_secs(90), |s| s["status"] == "done")
        .await;
    assert_eq!(s["result"], "third answer");
    assert!(t.elapsed() >= Duration::from_secs(3), "the command ran");
    d.close().await;
    bed.assert_no_codex_left().await;
}
