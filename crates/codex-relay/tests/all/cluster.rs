//! Several `codex-relay serve` instances on one Postgres and one shared CODEX_HOME, over the
//! real Codex with the scripted model (docs/CLUSTER.md): sessions start through each; a
//! session is read live through another instance (every event once, in order, resumable with
//! `Last-Event-ID`); an approval opened on A is answered through B, the command runs on A, and
//! C's relay-wide stream shows who answered; a late answer is refused. Then failover: A is
//! killed mid-turn and B adopts its session within the lease, the cut turn is closed in the
//! log, the next message continues the thread on B, and nothing of A's Codex is left; and an
//! instance paused past its lease writes nothing more for the sessions taken from it.

use std::time::{Duration, Instant};

use crate::common::Bed;
use crate::http_support::{Client, Event};
use codex_relay_testkit::Reply;
use serde_json::{Value, json};

use crate::cluster_support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_postgres_three_instances_read_and_answer_anywhere() {
    let Some(db) = fresh_schema("cluster_postgres_three_instances_read_and_answer_anywhere").await
    else {
        return;
    };
    let bed = Bed::start(NEWEST).await;
    for marker in ["CL-ON-A", "CL-ON-B", "CL-ON-C"] {
        bed.model.route(
            marker,
            [
                Reply::text(format!("{marker} done")),
                Reply::text(format!("{marker} again")),
            ],
        );
    }
    bed.model.route(
        "CL-APPROVE",
        [
            Reply::exec("touch approved-on-a.txt", "call-cl"),
            Reply::text("created it"),
        ],
    );
    let a = instance(&bed, &db, "A").await;
    let b = instance(&bed, &db, "B").await;
    let c = instance(&bed, &db, "C").await;
    let (ca, cb, cc) = (
        Client::new(&a.url),
        Client::new(&b.url),
        Client::new(&c.url),
    );
    let cluster = cluster_until(&cc, "three live instances", |cl| {
        ["A", "B", "C"]
            .iter()
            .all(|i| instance_of(cl, i)["state"] == "live")
            && cl["leased"] == true
    })
    .await;
    assert_eq!(cluster["instance"], "C", "{cluster}");

    // Sessions start through each instance and run there; each is read through another.
    let ws = bed.home.workspace().display().to_string();
    let simple = |marker: &str| json!({"prompt": format!("{marker}: hello"), "cwd": ws, "sandbox": "read-only"});
    let on_a = create(&ca, simple("CL-ON-A")).await;
    let on_b = create(&cb, simple("CL-ON-B")).await;
    let on_c = create(&cc, simple("CL-ON-C")).await;
    for (reader, id, marker) in [
        (&cb, &on_a, "CL-ON-A"),
        (&cc, &on_b, "CL-ON-B"),
        (&ca, &on_c, "CL-ON-C"),
    ] {
        let v = view_until(reader, id, "a session read through another instance", |v| {
            v["status"] == "idle" && v["turnCount"] == 1
        })
        .await;
        assert_eq!(v["result"], format!("{marker} done"), "{v}");
    }
    cluster_until(&ca, "one session on each instance", |cl| {
        ["A", "B", "C"]
            .iter()
            .all(|i| instance_of(cl, i)["sessions"] == 1)
    })
    .await;

    // An approval opened on A, watched through B, answered through B.
    let mut everywhere = cc.stream("/api/stream", &[]).await;
    let id = create(
        &ca,
        json!({"prompt": "CL-APPROVE: make the file", "cwd": ws,
            "approvalPolicy": "untrusted", "sandbox": "workspace-write"}),
    )
    .await;
    let mut through_b = cb.stream(&format!("/api/sessions/{id}/stream"), &[]).await;
    let asked = through_b
        .until(TURN, |e| e.event == "permission_request")
        .await
        .pop()
        .unwrap()
        .json();
    assert!(
        asked["toolInput"]["command"]
            .as_str()
            .is_some_and(|c| c.contains("touch approved-on-a.txt")),
        "{asked}"
    );
    // C lists it too, once its mirror has caught up with what A committed.
    let deadline = Instant::now() + TURN;
    loop {
        let pending_on_c = cc.get("/api/codex/permission/pending").await.json();
        let listed = pending_on_c
            .as_array()
            .is_some_and(|p| p.iter().filter(|r| r["id"] == asked["id"]).count() == 1);
        if listed {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "every instance lists the request, once: {pending_on_c}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let r = cb
        .post(
            "/api/codex/permission/respond",
            &json!({"id": asked["id"], "action": "allow"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["decision"], "approve", "{}", r.text());
    assert_eq!(r.json()["by"], "http", "{}", r.text());
    through_b.until(TURN, |e| is_status(e, "idle")).await;
    assert!(
        bed.home.workspace().join("approved-on-a.txt").exists(),
        "the approved command ran"
    );
    let late = cc
        .post(
            "/api/codex/permission/respond",
            &json!({"id": asked["id"], "action": "deny"}),
        )
        .await;
    assert_eq!(late.status, 409, "{}", late.text());
    assert_eq!(late.json()["error"]["code"], "already_resolved");

    // C's relay-wide stream saw the session come, the request open, and who answered it.
    let mut saw_created = false;
    let mut saw_opened = false;
    loop {
        let e = everywhere
            .next(TURN)
            .await
            .expect("C's relay stream goes on");
        match e.event.as_str() {
            "session_created" if e.json()["sessionId"] == id.as_str() => saw_created = true,
            "request_opened" if e.json()["id"] == asked["id"] => saw_opened = true,
            "request_resolved" if e.json()["id"] == asked["id"] => {
                assert_eq!(e.json()["by"], "http", "{}", e.data);
                assert_eq!(e.json()["decision"], "approve", "{}", e.data);
                break;
            }
            _ => {}
        }
    }
    assert!(
        saw_created && saw_opened,
        "created {saw_created}, opened {saw_opened}"
    );

    // B's live stream showed each stored event once and in order, as A stored it.
    let stored = history(&ca, &id).await;
    assert_contiguous(&stored);
    let mut again = cb.stream(&format!("/api/sessions/{id}/stream"), &[]).await;
    let n = stored.len();
    let replay = again
        .until(TURN, |e| {
            e.event == "envelope" && e.id.as_deref() == Some(&n.to_string())
        })
        .await;
    let shown: Vec<Value> = replay
        .iter()
        .filter(|e| e.event == "envelope")
        .map(Event::json)
        .collect();
    assert_eq!(seqs(&shown), seqs(&stored), "B shows what A stored");
    // Resumed with Last-Event-ID through C: exactly what came after.
    let mut resumed = cc
        .stream(
            &format!("/api/sessions/{id}/stream"),
            &[("Last-Event-ID", "3")],
        )
        .await;
    let tail = resumed
        .until(TURN, |e| {
            e.event == "envelope" && e.id.as_deref() == Some(&n.to_string())
        })
        .await;
    let tail: Vec<u64> = tail
        .iter()
        .filter(|e| e.event == "envelope")
        .map(|e| e.json()["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(tail, (4..=n as u64).collect::<Vec<_>>());

    // A follow-up through C runs on A, the session's owner, and C shows it.
    let r = cc
        .post(
            &format!("/api/sessions/{on_a}/messages"),
            &json!({"text": "CL-ON-A again"}),
        )
        .await;
    assert!(r.status == 200 || r.status == 202, "{}", r.text());
    let v = view_until(&cc, &on_a, "the follow-up through C", |v| {
        v["status"] == "idle" && v["turnCount"] == 2
    })
    .await;
    assert_eq!(v["result"], "CL-ON-A again", "{v}");
    drop((a, b, c));
    bed.assert_no_codex_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_postgres_a_killed_owner_is_adopted_within_the_lease() {
    let Some(db) =
        fresh_schema("cluster_postgres_a_killed_owner_is_adopted_within_the_lease").await
    else {
        return;
    };
    let bed = Bed::start(NEWEST).await;
    // One reply: A dies running the command, so the model is never asked again in that turn
    // (and the resumed thread's next request, which carries this marker too, finds no reply
    // left here).
    bed.model.route(
        "CL-FAIL",
        [Reply::exec("sleep 30; echo never", "call-long")],
    );
    bed.model
        .route("CL-AFTER", [Reply::text("carried on elsewhere")]);
    let a = instance(&bed, &db, "A").await;
    let b = instance(&bed, &db, "B").await;
    let (ca, cb) = (Client::new(&a.url), Client::new(&b.url));
    let ws = bed.home.workspace().display().to_string();
    let id = create(
        &ca,
        json!({"prompt": "CL-FAIL: wait a while", "cwd": ws, "sandbox": "read-only",
            "approvalPolicy": "never"}),
    )
    .await;
    let mut through_b = cb.stream(&format!("/api/sessions/{id}/stream"), &[]).await;
    through_b
        .until(TURN, |e| {
            e.event == "envelope" && ev_t(e) == "tool-call-start"
        })
        .await;
    let groups = codex_groups(a.pid());
    assert!(!groups.is_empty(), "A runs a Codex");
    a.crash().await;

    // B adopts the session once A's lease runs out: the cut turn ends, an error names A.
    let rest = through_b.until(TURN, |e| is_status(e, "interrupted")).await;
    // Closed as a restart closes it: the turn ends cancelled, its error naming the lost
    // instance.
    let end = rest
        .iter()
        .find(|e| e.event == "envelope" && ev_t(e) == "turn-end")
        .unwrap_or_else(|| panic!("the cut turn is closed: {rest:#?}"))
        .json();
    assert_eq!(end["ev"]["status"], "cancelled", "{end}");
    assert!(
        end["ev"]["error"]
            .as_str()
            .is_some_and(|m| m.contains("instance A stopped running this session")),
        "{end}"
    );
    for g in groups {
        let left = codex_relay_testkit::procs::wait_group_gone(g, Duration::from_secs(5)).await;
        assert!(left.is_empty(), "A's Codex (group {g}) is gone: {left:?}");
    }
    // B takes work: it holds its lease and Postgres takes its writes.
    cluster_until(&cb, "A gone, taken by B, which runs its session", |cl| {
        instance_of(cl, "A")["state"] == "gone"
            && instance_of(cl, "A")["takenBy"] == "B"
            && instance_of(cl, "B")["sessions"] == 1
            && cl["leased"] == true
    })
    .await;

    // The next message continues the thread on B.
    let r = cb
        .post(
            &format!("/api/sessions/{id}/messages"),
            &json!({"text": "CL-AFTER: go on"}),
        )
        .await;
    assert!(r.status == 200 || r.status == 202, "{}", r.text());
    let v = view_until(&cb, &id, "the next turn on B", |v| {
        v["status"] == "idle" && v["turnCount"] == 2
    })
    .await;
    assert_eq!(v["result"], "carried on elsewhere", "{v}");
    let second = bed.model.requests_with("CL-AFTER");
    assert!(
        second
            .last()
            .is_some_and(|r| r.body["input"].to_string().contains("CL-FAIL")),
        "the resumed thread carries the first turn"
    );
    assert_contiguous(&history(&cb, &id).await);
    let own_state = std::fs::read_dir(sqlite_home(&bed, "B"))
        .unwrap()
        .filter_map(|e| e.ok())
        .any(|e| e.file_name().to_string_lossy().ends_with(".sqlite"));
    assert!(
        own_state,
        "B's Codex kept its state database apart from A's: the thread resumed from the shared rollout"
    );
    drop(b);
    bed.assert_no_codex_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_postgres_an_owner_paused_past_its_lease_writes_nothing_more() {
    let Some(db) =
        fresh_schema("cluster_postgres_an_owner_paused_past_its_lease_writes_nothing_more").await
    else {
        return;
    };
    let bed = Bed::start(NEWEST).await;
    bed.model.route(
        "CL-PAUSE",
        [
            Reply::exec("sleep 4; echo woke", "call-pause"),
            Reply::text("finished on the paused one"),
        ],
    );
    bed.model.route("CL-NEXT", [Reply::text("next turn on B")]);
    let a = instance(&bed, &db, "A").await;
    let b = instance(&bed, &db, "B").await;
    let (ca, cb) = (Client::new(&a.url), Client::new(&b.url));
    let ws = bed.home.workspace().display().to_string();
    let id = create(
        &ca,
        json!({"prompt": "CL-PAUSE: sleep", "cwd": ws, "sandbox": "read-only",
            "approvalPolicy": "never"}),
    )
    .await;
    let mut through_b = cb.stream(&format!("/api/sessions/{id}/stream"), &[]).await;
    through_b
        .until(TURN, |e| {
            e.event == "envelope" && ev_t(e) == "tool-call-start"
        })
        .await;
    // SAFETY: signalling our own child.
    unsafe { libc::kill(a.pid() as i32, libc::SIGSTOP) };
    through_b.until(TURN, |e| is_status(e, "interrupted")).await;
    let adopted = history(&cb, &id).await;
    assert_contiguous(&adopted);
    // Meanwhile A's Codex finished the command; A wakes with its events to write.
    tokio::time::sleep(Duration::from_secs(5)).await;
    // SAFETY: as above.
    unsafe { libc::kill(a.pid() as i32, libc::SIGCONT) };
    let deadline = Instant::now() + TURN;
    while !a.log_text().contains("lost its lease") {
        assert!(Instant::now() < deadline, "A says it lost its lease");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = history(&cb, &id).await;
    assert_eq!(
        seqs(&after),
        seqs(&adopted),
        "nothing written for the session after it was taken: {after:#?}"
    );
    assert!(
        !after
            .iter()
            .any(|e| e["ev"]["text"] == "finished on the paused one"),
        "A's late turn is not in the log"
    );
    // A is back as an instance with no sessions; B runs the session on.
    cluster_until(&ca, "A live again, B owning the session", |cl| {
        instance_of(cl, "A")["state"] == "live"
            && instance_of(cl, "B")["sessions"] == 1
            && cl["leased"] == true
    })
    .await;
    let r = ca
        .post(
            &format!("/api/sessions/{id}/messages"),
            &json!({"text": "CL-NEXT: on"}),
        )
        .await;
    assert!(r.status == 200 || r.status == 202, "{}", r.text());
    let v = view_until(&ca, &id, "the next turn, asked through A, run on B", |v| {
        v["status"] == "idle" && v["turnCount"] == 2
    })
    .await;
    assert_eq!(v["result"], "next turn on B", "{v}");
    assert_contiguous(&history(&ca, &id).await);
    drop((a, b));
    bed.assert_no_codex_left().await;
}
