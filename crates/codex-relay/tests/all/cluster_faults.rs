//! A cluster when Postgres fails (docs/CLUSTER.md, "Failures"), over the real Codex with the
//! scripted model. Postgres restarted mid-turn: the turn goes on on its owner, whose readers,
//! like the other instance's, are shown each event once it is committed — every event once and
//! in order, nothing shown that the log does not hold — no instance is taken over, and an
//! approval after it is answered once. The network between the owner and Postgres cut
//! past the lease (a proxy of the test): the owner stops its session before another instance
//! takes it over, so the open approval reaches no Codex; the other instance adopts the session
//! (the request declined once, fail-closed, in the log); once mended, the old owner joins again
//! with nothing, and the session goes on where it runs now.
//!
//! Skipped, with the reason, without PostgreSQL server binaries (the restart) or a test
//! Postgres (the cut).

use std::time::{Duration, Instant};

use crate::cluster_support::*;
use crate::common::Bed;
use crate::http_support::Client;
use codex_relay_testkit::Reply;
use serde_json::{Value, json};

/// The request ids resolved in a session's log, in order.
fn resolved(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["ev"]["t"] == "request-resolved")
        .map(|e| e["ev"]["id"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_postgres_restarted_mid_turn_loses_nothing() {
    let Some(pg) = codex_relay_testkit::postgres::Private::start() else {
        return;
    };
    let bed = Bed::start(NEWEST).await;
    bed.model.route(
        "CL-RESTART",
        [
            Reply::exec("sleep 3; echo slept", "call-r"),
            Reply::text("finished across the restart"),
        ],
    );
    bed.model.route(
        "CL-ASK",
        [
            Reply::exec("touch asked.txt", "call-ask"),
            Reply::text("made it"),
        ],
    );
    // A lease longer than the restart: nobody is taken over.
    let a = instance_with(&bed, &pg.url(), "A", 20_000).await;
    let b = instance_with(&bed, &pg.url(), "B", 20_000).await;
    let (ca, cb) = (Client::new(&a.url), Client::new(&b.url));
    let ws = bed.home.workspace().display().to_string();
    let id = create(
        &ca,
        json!({"prompt": "CL-RESTART: wait", "cwd": ws, "sandbox": "read-only",
            "approvalPolicy": "never"}),
    )
    .await;
    let mut on_a = ca.stream(&format!("/api/sessions/{id}/stream"), &[]).await;
    let mut on_b = cb.stream(&format!("/api/sessions/{id}/stream"), &[]).await;
    let mut seen_on_a = on_a
        .until(TURN, |e| {
            e.event == "envelope" && ev_t(e) == "tool-call-start"
        })
        .await;
    tokio::task::block_in_place(|| pg.stop());
    // The turn goes on on its owner while Postgres is down (the model is asked for its last
    // reply); its readers are shown its events once they are committed.
    bed.model.wait_for_requests(2, TURN).await;
    tokio::task::block_in_place(|| pg.start_again());
    // Both instances' readers: every event once, in order, up to the end of the turn, as the
    // log has it.
    let stored_after = |seen: Vec<crate::http_support::Event>| -> Vec<Value> {
        seen.iter()
            .filter(|e| e.event == "envelope")
            .map(|e| e.json())
            .collect()
    };
    seen_on_a.extend(on_a.until(TURN, |e| is_status(e, "idle")).await);
    let on_owner = stored_after(seen_on_a);
    assert!(
        on_owner
            .iter()
            .any(|e| e["ev"]["text"] == "finished across the restart"),
        "the turn ends on its owner"
    );
    let on_other = stored_after(on_b.until(TURN, |e| is_status(e, "idle")).await);
    let stored = history(&cb, &id).await;
    assert_contiguous(&stored);
    for (who, seen) in [("A", &on_owner), ("B", &on_other)] {
        assert_eq!(
            seqs(seen),
            (1..=seen.len() as u64).collect::<Vec<_>>(),
            "{who}'s view"
        );
        let evs = |l: &[Value]| l.iter().map(|e| e["ev"].clone()).collect::<Vec<_>>();
        assert_eq!(
            evs(seen),
            evs(&stored[..seen.len()]),
            "{who} was shown what the log holds"
        );
    }
    // Both take work again once each has confirmed its lease with Postgres back.
    let cluster = cluster_until(&cb, "both live, nobody taken over", |cl| {
        instance_of(cl, "A")["state"] == "live"
            && instance_of(cl, "B")["state"] == "live"
            && cl["leased"] == true
    })
    .await;
    cluster_until(&ca, "A takes work again", |cl| cl["leased"] == true).await;
    assert!(instance_of(&cluster, "A")["takenBy"].is_null(), "{cluster}");

    // After it, an approval on A answered through B, once.
    let asked_id = create(
        &ca,
        json!({"prompt": "CL-ASK: make it", "cwd": ws, "approvalPolicy": "untrusted",
            "sandbox": "workspace-write"}),
    )
    .await;
    let mut s = cb
        .stream(&format!("/api/sessions/{asked_id}/stream"), &[])
        .await;
    let asked = s
        .until(TURN, |e| e.event == "permission_request")
        .await
        .pop()
        .unwrap()
        .json();
    let answer = json!({"id": asked["id"], "action": "allow"});
    let (first, second) = tokio::join!(
        cb.post("/api/codex/permission/respond", &answer),
        ca.post("/api/codex/permission/respond", &answer)
    );
    let mut statuses = [first.status, second.status];
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 409], "{} / {}", first.text(), second.text());
    s.until(TURN, |e| is_status(e, "idle")).await;
    assert!(bed.home.workspace().join("asked.txt").exists());
    let log = history(&ca, &asked_id).await;
    assert_eq!(
        resolved(&log),
        vec![asked["id"].as_str().unwrap().to_owned()]
    );
    drop((a, b));
    bed.assert_no_codex_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_postgres_an_owner_cut_off_stops_before_it_is_taken_over() {
    let Some(db) =
        fresh_schema("cluster_postgres_an_owner_cut_off_stops_before_it_is_taken_over").await
    else {
        return;
    };
    // A reaches Postgres through a proxy of this test; B directly.
    let host_port = db
        .split("://")
        .nth(1)
        .and_then(|rest| rest.split('@').next_back())
        .and_then(|rest| rest.split('/').next())
        .expect("host:port in the test Postgres URL")
        .to_owned();
    let target = tokio::net::lookup_host(&host_port)
        .await
        .unwrap()
        .next()
        .expect("the test Postgres address");
    let proxy = codex_relay_testkit::tcp_proxy::TcpProxy::start(target).await;
    let through_proxy = db.replacen(&host_port, &proxy.addr().to_string(), 1);
    let bed = Bed::start(NEWEST).await;
    // One reply: A's Codex is stopped while it waits for the approval, so the model is not
    // asked again in that turn (the next turn's request carries this marker too).
    bed.model
        .route("CL-CUT", [Reply::exec("touch cut.txt", "call-cut")]);
    bed.model
        .route("CL-MENDED", [Reply::text("going on where it runs now")]);
    let a = instance(&bed, &through_proxy, "A").await;
    let b = instance(&bed, &db, "B").await;
    let (ca, cb) = (Client::new(&a.url), Client::new(&b.url));
    let ws = bed.home.workspace().display().to_string();
    let id = create(
        &ca,
        json!({"prompt": "CL-CUT: make it", "cwd": ws, "approvalPolicy": "untrusted",
            "sandbox": "workspace-write"}),
    )
    .await;
    let mut on_b = cb.stream(&format!("/api/sessions/{id}/stream"), &[]).await;
    let asked = on_b
        .until(TURN, |e| e.event == "permission_request")
        .await
        .pop()
        .unwrap()
        .json();
    let groups = codex_groups(a.pid());
    proxy.cut();
    // A stops the session before its lease runs out, and says so.
    let deadline = Instant::now() + TURN;
    while !a.log_text().contains("could not confirm the lease") {
        assert!(
            Instant::now() < deadline,
            "A says it cannot confirm its lease: {}",
            a.log_text()
                .lines()
                .filter(|l| l.contains("lease"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for g in groups {
        let left = codex_relay_testkit::procs::wait_group_gone(g, Duration::from_secs(5)).await;
        assert!(
            left.is_empty(),
            "A's Codex (group {g}) is stopped: {left:?}"
        );
    }
    // An answer through A now reaches no Codex.
    let late = ca
        .post(
            "/api/codex/permission/respond",
            &json!({"id": asked["id"], "action": "allow"}),
        )
        .await;
    assert_ne!(late.status, 200, "{}", late.text());
    // B adopts the session once A's lease ran out: the request declined, the turn closed.
    let rest = on_b.until(TURN, |e| is_status(e, "interrupted")).await;
    // A had stopped it before: its log says so earlier than B's says it took A over.
    let stopped = logged_at(&a, "could not confirm the lease").expect("A's stop, timed");
    let took = logged_at(&b, "took over an instance").expect("B's take-over, timed");
    assert!(
        stopped < took,
        "A stopped its session ({stopped}) before B took it over ({took})"
    );
    let declined = rest
        .iter()
        .find(|e| e.event == "envelope" && ev_t(e) == "request-resolved")
        .unwrap_or_else(|| panic!("the request is resolved: {rest:#?}"))
        .json();
    assert_eq!(declined["ev"]["decision"], "deny", "{declined}");
    assert!(
        !bed.home.workspace().join("cut.txt").exists(),
        "the command never ran"
    );
    proxy.mend();
    let deadline = Instant::now() + TURN;
    while !a.log_text().contains("joined the cluster again") {
        assert!(Instant::now() < deadline, "A joins again once mended");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    cluster_until(&ca, "A live with nothing, B running the session", |cl| {
        instance_of(cl, "A")["state"] == "live"
            && instance_of(cl, "B")["sessions"] == 1
            && cl["leased"] == true
    })
    .await;
    let again = cb
        .post(
            "/api/codex/permission/respond",
            &json!({"id": asked["id"], "action": "allow"}),
        )
        .await;
    assert_eq!(again.status, 409, "{}", again.text());
    let r = ca
        .post(
            &format!("/api/sessions/{id}/messages"),
            &json!({"text": "CL-MENDED: go on"}),
        )
        .await;
    assert!(r.status == 200 || r.status == 202, "{}", r.text());
    let v = view_until(&ca, &id, "the next turn, asked through A, run on B", |v| {
        v["status"] == "idle" && v["turnCount"] == 2
    })
    .await;
    assert_eq!(v["result"], "going on where it runs now", "{v}");
    let log = history(&cb, &id).await;
    assert_contiguous(&log);
    assert_eq!(
        resolved(&log),
        vec![asked["id"].as_str().unwrap().to_owned()]
    );
    assert!(!bed.home.workspace().join("cut.txt").exists());
    drop((a, b));
    bed.assert_no_codex_left().await;
}
