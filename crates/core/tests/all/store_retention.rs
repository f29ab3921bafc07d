//! Retention scenarios on SQLite and Postgres: a pass deletes exactly what is past the age or
//! size limit, and never a request still waiting for its answer, a notification still to be
//! sent, or anything of a session in a turn.

use std::collections::BTreeSet;
use std::time::Duration;

use codex_relay_core::store::{
    AnswerLinkRecord, DeliveryRecord, OutboxRecord, Retention, Store, StoreOptions, StoredEvent,
};

use crate::store::{Fixture, pending, session};

const DAY: i64 = 24 * 3600 * 1000;

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn event_at(session_id: &str, seq: i64, time: i64) -> StoredEvent {
    StoredEvent {
        session_id: session_id.into(),
        seq,
        time,
        json: format!(
            r#"{{"session":"{session_id}","seq":{seq},"time":{time},"ev":{{"type":"agent_message","text":"{}"}}}}"#,
            "x".repeat(200)
        ),
    }
}

fn outbox(id: &str, state: &str, created_at: i64, done_at: Option<i64>) -> OutboxRecord {
    OutboxRecord {
        id: id.into(),
        target: "hook".into(),
        event: "request".into(),
        session_id: Some("idle".into()),
        request_id: None,
        payload: "{}".into(),
        created_at,
        attempts: 1,
        next_at: created_at,
        state: state.into(),
        done_at,
        last_error: None,
        open_token: None,
    }
}

fn step(outbox_id: &str, status: &str, at: i64) -> DeliveryRecord {
    DeliveryRecord {
        outbox_id: outbox_id.into(),
        request_id: Some(format!("req-{outbox_id}")),
        target: "hook".into(),
        status: status.into(),
        detail: None,
        at,
    }
}

fn link(hash: &str, expires_at: i64) -> AnswerLinkRecord {
    AnswerLinkRecord {
        hash: hash.into(),
        request_id: "r".into(),
        session_id: "idle".into(),
        expires_at,
        used_at: None,
        created_at: expires_at - DAY,
    }
}

fn keep_a_week() -> Retention {
    Retention {
        max_age: Some(Duration::from_millis(7 * DAY as u64)),
        // Small batches: a pass takes several statements per table.
        batch: 7,
        pause: Duration::ZERO,
        ..Retention::default()
    }
}

async fn seqs(store: &Store, id: &str) -> Vec<i64> {
    store
        .events(id, 0, 10_000)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect()
}

/// Sessions of every kind, with rows on both sides of a one-week limit: a pass deletes the old
/// rows and keeps the rest, row for row.
async fn prunes_exactly_what_is_past_the_limit(fx: &Fixture) {
    let store = Store::open_with(&fx.target, StoreOptions::default())
        .await
        .unwrap();
    let (now, old, young) = (now(), now() - 10 * DAY, now() - DAY);
    // idle: a long-lived session, its first 40 events old, the next 20 recent.
    store.upsert_session(session("idle", young, "idle"));
    store.append_events((1..=40).map(|s| event_at("idle", s, old + s)).collect());
    // closed: everything old; its row goes too once nothing of it is left.
    store.upsert_session(session("closed", old, "closed"));
    store.append_events((1..=25).map(|s| event_at("closed", s, old + s)).collect());
    store.append_raw("closed", "an old raw line");
    // gone-idle: old and idle: its events and raw lines go, the session stays (it can be resumed).
    store.upsert_session(session("gone-idle", old, "idle"));
    store.append_events((1..=9).map(|s| event_at("gone-idle", s, old + s)).collect());
    store.append_raw("gone-idle", "another old raw line");
    // live: in a turn waiting for an approval since long ago: nothing of it goes.
    store.upsert_session(session("live", old, "awaiting_approval"));
    store.append_events((1..=30).map(|s| event_at("live", s, old + s)).collect());
    store.append_raw("live", "a raw line of a turn");
    // Requests: resolved old ones are past; one still waiting never is, however old.
    // The store is written in time order, as a relay writes it (an event's time is when it
    // was logged): the idle session's recent events come last.
    store.append_events((41..=60).map(|s| event_at("idle", s, young + s)).collect());
    store.upsert_pending(pending(
        "answered-old",
        "idle",
        old,
        Some(r#"{"decision":"approve"}"#),
    ));
    store.upsert_pending(pending(
        "answered-new",
        "idle",
        young,
        Some(r#"{"decision":"deny"}"#),
    ));
    store.upsert_pending(pending("waiting-old", "gone-idle", old, None));
    store.upsert_pending(pending(
        "live-answered",
        "live",
        old,
        Some(r#"{"decision":"approve"}"#),
    ));
    store.upsert_pending(pending("live-waiting", "live", old, None));
    store.flush().await.unwrap();
    for n in [
        outbox("sent-old", "delivered", old, Some(old + 5)),
        outbox("failed-old", "failed", old, Some(old + 9)),
        outbox("skipped-old", "skipped", old, None),
        outbox("unsent-old", "pending", old, None),
        outbox("sent-new", "delivered", old, Some(young)),
    ] {
        store.enqueue_notification(&n).await.unwrap();
    }
    store
        .insert_answer_link(&link("expired", old))
        .await
        .unwrap();
    store
        .insert_answer_link(&link("valid", now + DAY))
        .await
        .unwrap();

    let report = store.prune(&keep_a_week()).await.unwrap();

    assert_eq!(seqs(&store, "idle").await, (41..=60).collect::<Vec<_>>());
    assert_eq!(seqs(&store, "closed").await, Vec::<i64>::new());
    assert_eq!(seqs(&store, "gone-idle").await, Vec::<i64>::new());
    assert_eq!(seqs(&store, "live").await, (1..=30).collect::<Vec<_>>());
    assert_eq!(
        store.raw_lines("closed", 10).await.unwrap(),
        Vec::<String>::new()
    );
    assert_eq!(
        store.raw_lines("gone-idle", 10).await.unwrap(),
        Vec::<String>::new()
    );
    assert_eq!(
        store.raw_lines("live", 10).await.unwrap(),
        vec!["a raw line of a turn"]
    );
    let sessions: BTreeSet<String> = store
        .sessions()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(
        sessions,
        ["gone-idle", "idle", "live"].map(String::from).into()
    );
    let requests: BTreeSet<String> = store
        .pending(None, false)
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.id)
        .collect();
    assert_eq!(
        requests,
        [
            "answered-new",
            "waiting-old",
            "live-answered",
            "live-waiting"
        ]
        .map(String::from)
        .into()
    );
    let notes: BTreeSet<String> = store
        .notifications(100)
        .await
        .unwrap()
        .into_iter()
        .map(|n| n.id)
        .collect();
    assert_eq!(notes, ["unsent-old", "sent-new"].map(String::from).into());
    assert!(store.answer_link("expired").await.unwrap().is_none());
    assert!(store.answer_link("valid").await.unwrap().is_some());
    assert_eq!(
        (
            report.events,
            report.raw_lines,
            report.requests,
            report.notifications,
            report.answer_links,
            report.sessions
        ),
        (40 + 25 + 9, 2, 1, 3, 1, 1),
        "{report:?}"
    );
    // 74 events in batches of 7: more than one statement, and a second pass finds nothing.
    assert!(report.batches > 11, "{report:?}");
    assert_eq!(store.prune(&keep_a_week()).await.unwrap().rows(), 0);
    // The store takes writes as before, and the pruned session goes on with its seqs.
    store.append_event(event_at("idle", 61, now));
    store.flush().await.unwrap();
    assert_eq!(seqs(&store, "idle").await.last(), Some(&61));
    store.close().await.unwrap();
}

/// A store over its size limit loses its oldest events until it is under the limit; the newest
/// stay, and what stays is the newest part of each session's log.
async fn prunes_the_oldest_past_the_size_limit(fx: &Fixture) {
    let store = Store::open_with(&fx.target, StoreOptions::default())
        .await
        .unwrap();
    let start = now() - 7 * DAY;
    for s in ["a", "b", "c", "d"] {
        store.upsert_session(session(s, now(), "idle"));
    }
    // A week of events, a minute apart, spread over four sessions.
    let per = 1500;
    for chunk in 0..per / 100 {
        let mut burst = Vec::new();
        for i in chunk * 100..(chunk + 1) * 100 {
            for (k, s) in ["a", "b", "c", "d"].iter().enumerate() {
                burst.push((s, i + 1, start + (i * 4 + k as i64) * 60_000));
            }
        }
        for s in ["a", "b", "c", "d"] {
            store.append_events(
                burst
                    .iter()
                    .filter(|(id, ..)| **id == s)
                    .map(|(id, seq, t)| event_at(id, *seq, *t))
                    .collect(),
            );
        }
    }
    store.flush().await.unwrap();
    let before = store.size().await.unwrap();
    assert!(
        before.used > 0 && before.on_disk >= before.used,
        "{before:?}"
    );
    let limit = before.used / 2;
    let retention = Retention {
        max_bytes: Some(limit),
        pause: Duration::ZERO,
        ..Retention::default()
    };
    let mut passes = 0;
    while store.size().await.unwrap().used > limit {
        passes += 1;
        assert!(passes <= 4, "still over the limit after {passes} passes");
        let report = store.prune(&retention).await.unwrap();
        assert!(
            report.events > 0,
            "over the limit, a pass deleted nothing: {report:?}"
        );
    }
    for s in ["a", "b", "c", "d"] {
        let kept = seqs(&store, s).await;
        let first = kept[0];
        assert!(
            first > 1 && kept.len() >= per as usize / 5,
            "{s}: kept {} from {first}",
            kept.len()
        );
        assert_eq!(
            kept,
            (first..=per).collect::<Vec<_>>(),
            "{s}: the newest part of the log"
        );
    }
    // Under the limit, a pass deletes nothing.
    assert_eq!(store.prune(&retention).await.unwrap().rows(), 0);
    store.close().await.unwrap();
}

/// Retention turned on in the options prunes in the background, without anyone asking.
async fn prunes_in_the_background(fx: &Fixture) {
    let options = StoreOptions {
        retention: Retention {
            max_age: Some(Duration::from_millis(DAY as u64)),
            every: Duration::from_millis(200),
            ..Retention::default()
        },
        ..StoreOptions::default()
    };
    let store = Store::open_with(&fx.target, options).await.unwrap();
    store.upsert_session(session("s", now(), "idle"));
    store.append_events(
        (1..=10)
            .map(|s| event_at("s", s, if s <= 4 { now() - 2 * DAY } else { now() }))
            .collect(),
    );
    store.flush().await.unwrap();
    let mut wait = Duration::from_millis(50);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let pruned = || {
        store
            .retention_stats()
            .events
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    while seqs(&store, "s").await.len() != 6 || pruned() < 4 {
        assert!(
            std::time::Instant::now() < deadline,
            "the background pass never pruned"
        );
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_secs(2));
    }
    assert_eq!(seqs(&store, "s").await, (5..=10).collect::<Vec<_>>());
    assert_eq!(pruned(), 4);
    store.close().await.unwrap();
}

/// Notifications have their own retention (the notify file's `retention`): with nothing
/// else pruned, outbox rows done with before it go with their delivery trails; a notification
/// still being retried keeps its row and its whole trail however old; the events stay.
async fn prunes_notifications_past_their_own_retention(fx: &Fixture) {
    let store = Store::open_with(&fx.target, StoreOptions::default())
        .await
        .unwrap();
    let (old, young) = (now() - 3 * DAY, now() - DAY / 2);
    store.upsert_session(session("s", young, "idle"));
    store.append_events((1..=5).map(|s| event_at("s", s, old + s)).collect());
    store.flush().await.unwrap();
    for n in [
        outbox("done-old", "delivered", old, Some(old + 1)),
        outbox("failed-old", "failed", old, Some(old + 1)),
        outbox("retrying-old", "pending", old, None),
        outbox("done-young", "delivered", young, Some(young)),
    ] {
        assert!(store.enqueue_notification(&n).await.unwrap());
        for status in ["queued", "failed"] {
            store
                .record_delivery(&step(&n.id, status, n.created_at))
                .await
                .unwrap();
        }
    }
    // Queued again under the same id: nothing is added (the id deduplicates).
    assert!(
        !store
            .enqueue_notification(&outbox("done-old", "pending", now(), None))
            .await
            .unwrap()
    );
    let retention = Retention {
        notifications_max_age: Some(Duration::from_millis(DAY as u64)),
        batch: 1,
        pause: Duration::ZERO,
        ..Retention::default()
    };
    assert!(retention.enabled());
    let report = store.prune(&retention).await.unwrap();
    assert_eq!(
        (report.notifications, report.deliveries, report.events),
        (2, 4, 0),
        "{report:?}"
    );
    let left: BTreeSet<String> = store
        .notifications(100)
        .await
        .unwrap()
        .into_iter()
        .map(|n| n.id)
        .collect();
    assert_eq!(
        left,
        ["retrying-old", "done-young"].map(String::from).into()
    );
    for (id, steps) in [
        ("done-old", 0),
        ("failed-old", 0),
        ("retrying-old", 2),
        ("done-young", 2),
    ] {
        assert_eq!(
            store.deliveries_for_notification(id).await.unwrap().len(),
            steps,
            "{id}"
        );
    }
    assert_eq!(
        store
            .deliveries_for_request("req-retrying-old", 10)
            .await
            .unwrap()
            .len(),
        2
    );
    assert_eq!(
        seqs(&store, "s").await.len(),
        5,
        "events are not the notifications' to prune"
    );
    assert_eq!(store.prune(&retention).await.unwrap().rows(), 0);
    store.close().await.unwrap();
}

/// The audit log has its own retention only: a one-day age for everything else and a size
/// limit leave old audit entries alone; its own age deletes exactly the older entries.
async fn prunes_the_audit_log_by_its_own_age_only(fx: &Fixture) {
    use codex_relay_core::people::{AuditEntry, AuditQuery, People, Person};
    let store = Store::open_with(&fx.target, StoreOptions::default())
        .await
        .unwrap();
    let people = People::new(store.clone());
    let (old, middle, young) = (now() - 40 * DAY, now() - 10 * DAY, now() - DAY / 2);
    for (n, at) in [old, old + 1, middle, young].into_iter().enumerate() {
        let mut e = AuditEntry::new(Person::admin_token("http"), format!("session.start.{n}"));
        e.at = at;
        people.audit(&e).await.unwrap();
    }
    let actions = || async {
        people
            .audit_log(&AuditQuery::default())
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.action)
            .collect::<BTreeSet<String>>()
    };
    let everything_else = Retention {
        max_age: Some(Duration::from_millis(DAY as u64)),
        max_bytes: Some(1),
        notifications_max_age: Some(Duration::from_millis(DAY as u64)),
        batch: 1,
        pause: Duration::ZERO,
        ..Retention::default()
    };
    assert_eq!(store.prune(&everything_else).await.unwrap().audit, 0);
    assert_eq!(
        actions().await.len(),
        4,
        "only the audit's own age deletes it"
    );
    let audit = Retention {
        audit_max_age: Some(Duration::from_millis(30 * DAY as u64)),
        batch: 1,
        pause: Duration::ZERO,
        ..Retention::default()
    };
    assert!(audit.enabled());
    let report = store.prune(&audit).await.unwrap();
    assert_eq!((report.audit, report.events), (2, 0), "{report:?}");
    assert_eq!(
        actions().await,
        ["session.start.2", "session.start.3"]
            .map(String::from)
            .into()
    );
    assert_eq!(store.prune(&audit).await.unwrap().rows(), 0);
    store.close().await.unwrap();
}

crate::store::scenarios!(
    prunes_the_audit_log_by_its_own_age_only,
    prunes_notifications_past_their_own_retention,
    prunes_exactly_what_is_past_the_limit,
    prunes_the_oldest_past_the_size_limit,
    prunes_in_the_background,
);
