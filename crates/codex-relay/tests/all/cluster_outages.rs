//! Three `serve` instances on one Postgres when Postgres goes away for longer than a lease, or
//! an owner dies with an answer on its way (docs/CLUSTER.md, "Failures"), over the real Codex
//! with the scripted model; Postgres is a private server the test stops and starts.
//!
//! - An instance that cannot write takes no work: a session or a message sent to it while it
//!   holds no lease is refused (503 `instance_unavailable`, saying why), and everything it
//!   acknowledged before is in Postgres afterwards.
//! - An owner whose peers joined a moment before the outage (after its last renewal) still
//!   stops its sessions, and their commands, before its lease runs out.
//! - `/healthz` answers 503 on an instance that cannot confirm its lease, and says why.
//! - An answer sent through B to a session whose owner A was just killed: once B's take-over
//!   closes the request, B says so (409, by `relay-restart`) instead of waiting for A.
//! - The 409 after a take-over names the answerer the session's log records, on the instance
//!   that lost the session too.
//!
//! Skipped, with the reason, without PostgreSQL server binaries.

use std::time::{Duration, Instant};

use crate::cluster_support::*;
use crate::common::{Bed, HttpRelay};
use crate::http_support::Client;
use codex_relay_testkit::Reply;
use codex_relay_testkit::postgres::Private;
use serde_json::{Value, json};

/// The instances' lease here (see [`LEASE_MS`]).
const LEASE: u64 = LEASE_MS;

/// Waits until `relay`'s log says `needle`.
async fn logged(relay: &HttpRelay, who: &str, needle: &str, within: Duration) {
    let deadline = Instant::now() + within;
    while !relay.log_text().contains(needle) {
        assert!(
            Instant::now() < deadline,
            "{who} logs {needle:?} within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `/healthz` of `c` once `done` holds for its status and body (polled with a short pause;
/// each answer is bounded by the relay); panics after `within`.
async fn health_until(
    c: &Client,
    what: &str,
    within: Duration,
    done: impl Fn(u16, &Value) -> bool,
) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let r = c.get("/healthz").await;
        let body = r.json();
        if done(r.status, &body) {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: last /healthz {} {body}",
            r.status
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Waits until every client's `/healthz` answers 200 with its lease held.
async fn all_healthy(clients: &[&Client]) {
    for c in clients {
        health_until(c, "healthy again", TURN, |status, h| {
            status == 200 && h["cluster"]["leased"] == true
        })
        .await;
    }
}

fn workspace(bed: &Bed) -> String {
    bed.home.workspace().display().to_string()
}

fn stop_pg(pg: &Private) {
    tokio::task::block_in_place(|| pg.stop());
}

fn start_pg(pg: &Private) {
    tokio::task::block_in_place(|| pg.start_again());
}

/// The session's row and last stored seq, read from Postgres itself.
async fn stored(db: &str, id: &str) -> (bool, i64) {
    let pool = sqlx::PgPool::connect(db).await.expect("the test Postgres");
    let row: Option<String> = sqlx::query_scalar("SELECT id FROM sessions WHERE id = $1")
        .bind(id)
        .fetch_optional(&pool)
        .await
        .unwrap();
    let last: Option<i64> = sqlx::query_scalar("SELECT max(seq) FROM events WHERE session_id = $1")
        .bind(id)
        .fetch_one(&pool)
        .await
        .unwrap();
    pool.close().await;
    (row.is_some(), last.unwrap_or(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_postgres_an_instance_that_cannot_write_takes_no_work_and_keeps_what_it_acknowledged()
 {
    let Some(pg) = Private::start() else {
        return;
    };
    let bed = Bed::start(NEWEST).await;
    bed.model.route(
        "OUT-KEPT",
        [
            Reply::text("stored before the outage"),
            Reply::text("a message through B after it"),
        ],
    );
    bed.model
        .route("OUT-REFUSED", [Reply::text("accepted without a lease")]);
    for marker in ["OUT-AFTER-A", "OUT-AFTER-B", "OUT-AFTER-C"] {
        bed.model
            .route(marker, [Reply::text(format!("{marker} done"))]);
    }
    let db = pg.url();
    let a = instance_with(&bed, &db, "A", LEASE).await;
    let b = instance_with(&bed, &db, "B", LEASE).await;
    let c = instance_with(&bed, &db, "C", LEASE).await;
    let (ca, cb, cc) = (
        Client::new(&a.url),
        Client::new(&b.url),
        Client::new(&c.url),
    );
    let ws = workspace(&bed);
    let kept = create(
        &cb,
        json!({"prompt": "OUT-KEPT: hello", "cwd": ws, "sandbox": "read-only"}),
    )
    .await;
    view_until(&cb, &kept, "the first turn on B", |v| {
        v["status"] == "idle" && v["turnCount"] == 1
    })
    .await;

    stop_pg(&pg);
    logged(&b, "B", "could not confirm the lease", TURN).await;
    // A session and a message sent to B now, while it holds no lease.
    let (cb2, ws2, kept2) = (cb.clone(), ws.clone(), kept.clone());
    let mut create_now = tokio::spawn(async move {
        cb2.post(
            "/api/sessions",
            &json!({"prompt": "OUT-REFUSED: hello", "cwd": ws2, "sandbox": "read-only"}),
        )
        .await
    });
    let cb3 = cb.clone();
    let say_now = tokio::spawn(async move {
        cb3.post(
            &format!("/api/sessions/{kept2}/messages"),
            &json!({"text": "OUT-KEPT: once more"}),
        )
        .await
    });
    // Postgres comes back while they may still be waiting for it.
    let early = tokio::time::timeout(Duration::from_secs(5), &mut create_now).await;
    start_pg(&pg);
    let created = match early {
        Ok(answered) => answered.unwrap(),
        Err(_) => create_now.await.unwrap(),
    };
    let said = say_now.await.unwrap();
    all_healthy(&[&ca, &cb, &cc]).await;
    if created.status == 201 {
        let id = created.json()["sessionId"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let (row, last) = stored(&db, &id).await;
        panic!(
            "B acknowledged a session while it could not write ({}); in Postgres: sessions row {row}, last seq {last}",
            created.text()
        );
    }
    for (what, r) in [("the new session", &created), ("the message", &said)] {
        assert_eq!(r.status, 503, "{what}: {}", r.text());
        let err = &r.json()["error"];
        assert_eq!(err["code"], "instance_unavailable", "{what}: {err}");
        assert!(
            err["message"]
                .as_str()
                .is_some_and(|m| m.contains("instance B") && m.contains("lease")),
            "{what}: the refusal says why: {err}"
        );
    }

    // What B acknowledged before is in Postgres and readable anywhere, once.
    let (row, last) = stored(&db, &kept).await;
    assert!(row && last > 0, "the session B acknowledged is stored");
    let log = history(&ca, &kept).await;
    assert_contiguous(&log);
    assert_eq!(log.len() as i64, last);
    // Every instance takes work again, and every session it acknowledges is stored.
    for (cl, marker) in [
        (&ca, "OUT-AFTER-A"),
        (&cb, "OUT-AFTER-B"),
        (&cc, "OUT-AFTER-C"),
    ] {
        let id = create(
            cl,
            json!({"prompt": format!("{marker}: hello"), "cwd": ws, "sandbox": "read-only"}),
        )
        .await;
        let (row, _) = stored(&db, &id).await;
        assert!(row, "{marker}: the session is stored when the 201 comes");
        view_until(&cc, &id, "a session after the outage", |v| {
            v["status"] == "idle" && v["turnCount"] == 1
        })
        .await;
    }
    let r = cb
        .post(
            &format!("/api/sessions/{kept}/messages"),
            &json!({"text": "OUT-KEPT: once more"}),
        )
        .await;
    assert!(r.status == 200 || r.status == 202, "{}", r.text());
    let v = view_until(&ca, &kept, "the message after the outage", |v| {
        v["status"] == "idle" && v["turnCount"] == 2
    })
    .await;
    assert_eq!(v["result"], "a message through B after it", "{v}");
    assert_contiguous(&history(&cc, &kept).await);
    drop((a, b, c));
    bed.assert_no_codex_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_postgres_an_owner_whose_peers_just_joined_still_stops_in_an_outage() {
    let Some(pg) = Private::start() else {
        return;
    };
    let bed = Bed::start(NEWEST).await;
    // A command that writes a numbered line every quarter second for 30 s.
    bed.model.route(
        "OUT-BEATS",
        [Reply::exec(
            "for i in $(seq 1 120); do echo $i >> beats.txt; sleep 0.25; done; echo finished",
            "call-beats",
        )],
    );
    let db = pg.url();
    // A alone first, with a lease twice the others': it renews every half of theirs, and stops
    // one and a half of theirs after its last renewal.
    let a = instance_with(&bed, &db, "A", 2 * LEASE).await;
    let ca = Client::new(&a.url);
    let ws = workspace(&bed);
    let id = create(
        &ca,
        json!({"prompt": "OUT-BEATS: count", "cwd": ws, "sandbox": "workspace-write",
            "approvalPolicy": "never"}),
    )
    .await;
    let mut on_a = ca.stream(&format!("/api/sessions/{id}/stream"), &[]).await;
    on_a.until(TURN, |e| {
        e.event == "envelope" && ev_t(e) == "tool-call-start"
    })
    .await;
    let beats = bed.home.workspace().join("beats.txt");
    let lines = |p: &std::path::Path| {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .lines()
            .count()
    };
    // Right after a renewal of A (as A alone), B and C join, and Postgres stops before A
    // renews again: A never confirmed its lease with them in the cluster.
    cluster_until(&ca, "A just renewed", |cl| {
        instance_of(cl, "A")["renewedMsAgo"]
            .as_i64()
            .is_some_and(|ms| ms < 300)
    })
    .await;
    let (b, c) = tokio::join!(
        instance_with(&bed, &db, "B", LEASE),
        instance_with(&bed, &db, "C", LEASE)
    );
    let groups = codex_groups(a.pid());
    stop_pg(&pg);
    let stopped = Instant::now();
    // A stops the session while Postgres is still away (it must, before its lease runs out
    // and B or C may take it over).
    logged(
        &a,
        "A, with peers it never renewed beside",
        "could not confirm the lease",
        Duration::from_millis(6 * LEASE),
    )
    .await;
    for g in groups {
        let left = codex_relay_testkit::procs::wait_group_gone(g, Duration::from_secs(10)).await;
        assert!(
            left.is_empty(),
            "A's Codex (group {g}) is stopped: {left:?}"
        );
    }
    let at_stop = lines(&beats);
    assert!(at_stop > 0, "the command ran before the outage");
    eprintln!(
        "A stopped its session {:?} into the outage, after {at_stop} beats",
        stopped.elapsed()
    );
    start_pg(&pg);
    let (cb, cc) = (Client::new(&b.url), Client::new(&c.url));
    all_healthy(&[&ca, &cb, &cc]).await;
    // The session is run by one instance now, its cut turn closed; nothing ran the command on.
    let v = view_until(&cb, &id, "the cut turn closed", |v| {
        v["status"] == "interrupted"
    })
    .await;
    assert_eq!(v["turnCount"], 1, "{v}");
    assert_contiguous(&history(&cc, &id).await);
    let text = std::fs::read_to_string(&beats).unwrap_or_default();
    let numbers: Vec<u32> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
    assert_eq!(
        numbers,
        (1..=numbers.len() as u32).collect::<Vec<_>>(),
        "one command wrote the beats, once each"
    );
    assert_eq!(
        numbers.len(),
        at_stop,
        "no beat after A stopped the command"
    );
    drop(on_a);
    drop((a, b, c));
    bed.assert_no_codex_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_postgres_healthz_is_503_on_an_instance_that_cannot_confirm_its_lease() {
    let Some(pg) = Private::start() else {
        return;
    };
    let bed = Bed::start(NEWEST).await;
    let db = pg.url();
    let a = instance_with(&bed, &db, "A", LEASE).await;
    let b = instance_with(&bed, &db, "B", LEASE).await;
    let c = instance_with(&bed, &db, "C", LEASE).await;
    let clients = [
        ("A", Client::new(&a.url)),
        ("B", Client::new(&b.url)),
        ("C", Client::new(&c.url)),
    ];
    for (name, cl) in &clients {
        let h = health_until(cl, "healthy", TURN, |status, h| {
            status == 200 && h["cluster"]["leased"] == true
        })
        .await;
        assert_eq!(h["cluster"]["instance"], *name, "{h}");
        assert!(h["cluster"]["unavailable"].is_null(), "{h}");
    }
    stop_pg(&pg);
    for (name, cl) in &clients {
        // Within a few leases: an instance that cannot confirm its lease for half of it
        // answers 503, and stops its sessions at three quarters.
        let h = health_until(
            cl,
            "503 while the lease cannot be confirmed",
            Duration::from_millis(8 * LEASE),
            |status, _| status == 503,
        )
        .await;
        let cluster = &h["cluster"];
        assert_eq!(h["status"], "degraded", "{h}");
        assert_eq!(cluster["instance"], *name, "{h}");
        assert_eq!(cluster["leased"], false, "{h}");
        assert!(
            cluster["unavailable"].as_str().is_some_and(|why| why
                .contains(&format!("instance {name}"))
                && why.contains("lease")),
            "/healthz says why: {h}"
        );
        assert!(
            cluster["error"].as_str().is_some_and(|e| !e.is_empty()),
            "and that the instances could not be read: {h}"
        );
    }
    start_pg(&pg);
    for (_, cl) in &clients {
        let h = health_until(cl, "healthy again", TURN, |status, h| {
            status == 200
                && h["cluster"]["leased"] == true
                && ["A", "B", "C"]
                    .iter()
                    .all(|i| instance_of(&h["cluster"], i)["state"] == "live")
        })
        .await;
        assert!(h["cluster"]["error"].is_null(), "{h}");
    }
    drop((a, b, c));
    bed.assert_no_codex_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_postgres_an_answer_sent_to_a_killed_owner_hears_of_the_take_over() {
    let Some(db) =
        fresh_schema("cluster_postgres_an_answer_sent_to_a_killed_owner_hears_of_the_take_over")
            .await
    else {
        return;
    };
    let bed = Bed::start(NEWEST).await;
    // One reply: A dies waiting for the approval.
    bed.model.route(
        "OUT-KILLED",
        [Reply::exec("touch answered-too-late.txt", "call-late")],
    );
    let a = instance_with(&bed, &db, "A", LEASE).await;
    let b = instance_with(&bed, &db, "B", LEASE).await;
    let c = instance_with(&bed, &db, "C", LEASE).await;
    let (ca, cb, cc) = (
        Client::new(&a.url),
        Client::new(&b.url),
        Client::new(&c.url),
    );
    let id = create(
        &ca,
        json!({"prompt": "OUT-KILLED: make it", "cwd": workspace(&bed),
            "approvalPolicy": "untrusted", "sandbox": "workspace-write"}),
    )
    .await;
    let mut on_c = cc.stream(&format!("/api/sessions/{id}/stream"), &[]).await;
    let asked = on_c
        .until(TURN, |e| e.event == "permission_request")
        .await
        .pop()
        .unwrap()
        .json();
    a.crash().await;
    // Sent through B while A's lease still runs: the answer waits for A, until A is taken
    // over and the request closed.
    let r = cb
        .post(
            "/api/codex/permission/respond",
            &json!({"id": asked["id"], "action": "allow"}),
        )
        .await;
    let rest = on_c.until(TURN, |e| is_status(e, "interrupted")).await;
    let closed = rest
        .iter()
        .find(|e| e.event == "envelope" && ev_t(e) == "request-resolved")
        .unwrap_or_else(|| panic!("the take-over closes the request: {rest:#?}"))
        .json();
    assert_eq!(closed["ev"]["by"], "relay-restart", "{closed}");
    assert_eq!(r.status, 409, "{}", r.text());
    let err = &r.json()["error"];
    assert_eq!(err["code"], "already_resolved", "{err}");
    assert!(
        err["message"]
            .as_str()
            .is_some_and(|m| m.contains("deny by relay-restart")),
        "the answer says the request is closed and by whom: {err}"
    );
    assert!(
        !bed.home.workspace().join("answered-too-late.txt").exists(),
        "the command never ran"
    );
    let log = history(&cb, &id).await;
    assert_contiguous(&log);
    assert_eq!(
        log.iter()
            .filter(|e| e["ev"]["t"] == "request-resolved")
            .count(),
        1
    );
    drop((b, c));
    bed.assert_no_codex_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_postgres_the_409_after_a_take_over_names_who_the_log_says_answered() {
    let Some(pg) = Private::start() else {
        return;
    };
    let bed = Bed::start(NEWEST).await;
    bed.model.route(
        "OUT-ASKED",
        [Reply::exec("touch never-made.txt", "call-never")],
    );
    let db = pg.url();
    let a = instance_with(&bed, &db, "A", LEASE).await;
    let b = instance_with(&bed, &db, "B", LEASE).await;
    let c = instance_with(&bed, &db, "C", LEASE).await;
    let (ca, cb, cc) = (
        Client::new(&a.url),
        Client::new(&b.url),
        Client::new(&c.url),
    );
    let id = create(
        &ca,
        json!({"prompt": "OUT-ASKED: make it", "cwd": workspace(&bed),
            "approvalPolicy": "untrusted", "sandbox": "workspace-write"}),
    )
    .await;
    let mut on_b = cb.stream(&format!("/api/sessions/{id}/stream"), &[]).await;
    let asked = on_b
        .until(TURN, |e| e.event == "permission_request")
        .await
        .pop()
        .unwrap()
        .json();
    stop_pg(&pg);
    // A stops the session (declining the request to its Codex), then is paused, so that B or
    // C takes the session over when Postgres is back.
    logged(&a, "A", "this instance lost its lease", TURN).await;
    // SAFETY: signalling our own child.
    unsafe { libc::kill(a.pid() as i32, libc::SIGSTOP) };
    start_pg(&pg);
    let cluster = cluster_until(&cb, "A taken over", |cl| {
        instance_of(cl, "A")["state"] == "gone" && !instance_of(cl, "A")["takenBy"].is_null()
    })
    .await;
    let taker = instance_of(&cluster, "A")["takenBy"].clone();
    let log = loop {
        let log = history(&cc, &id).await;
        if log.iter().any(|e| e["ev"]["t"] == "request-resolved") {
            break log;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let closed = log
        .iter()
        .find(|e| e["ev"]["t"] == "request-resolved")
        .unwrap();
    let by = closed["ev"]["by"].as_str().unwrap().to_owned();
    assert_eq!(by, "relay-restart", "{closed}");
    // SAFETY: as above.
    unsafe { libc::kill(a.pid() as i32, libc::SIGCONT) };
    all_healthy(&[&ca, &cb, &cc]).await;
    for (name, cl) in [("A", &ca), ("B", &cb), ("C", &cc)] {
        let r = cl
            .post(
                "/api/codex/permission/respond",
                &json!({"id": asked["id"], "action": "allow"}),
            )
            .await;
        assert_eq!(r.status, 409, "through {name}: {}", r.text());
        let message = r.json()["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            message.contains(&format!("deny by {by}")),
            "through {name} (the session taken by {taker}), the 409 names what the log says: {message}"
        );
    }
    assert!(!bed.home.workspace().join("never-made.txt").exists());
    drop((a, b, c));
    bed.assert_no_codex_left().await;
}
