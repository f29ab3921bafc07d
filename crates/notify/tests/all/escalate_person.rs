//! Escalation to a person, over the real Codex and the scripted model: `to = ["user:alice",
//! "user:vic", "user:carol"]` reaches the browsers Alice subscribed to push (not Bob's), and the
//! request's trail says why it could not reach Vic (a viewer cannot answer) or Carol (no such
//! user), once each. A webhook that asks for `request-resolved` is told who answered: the
//! decision, the front's word and the signed-in person.

use std::time::Duration;

use codex_relay_core::people::Role;
use codex_relay_core::store::PushSubscriptionRecord;
use codex_relay_core::{Answer, Decider, SessionStatus};
use codex_relay_notify::{Notifier, NotifyConfig, Vapid};

use crate::escalation::{AUTH, P256DH, answer_and_wait, bed, request, trail_until};
use crate::webhooks::{Receiver, SECRET, until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_nobody_opens_escalates_to_the_named_persons_browsers_only() {
    let b = bed(Duration::from_secs(300)).await;
    let people = b.relay.people();
    let alice = people
        .create_user("alice", Role::Approver, None)
        .await
        .unwrap();
    let bob = people
        .create_user("bob", Role::Approver, None)
        .await
        .unwrap();
    people.create_user("vic", Role::Viewer, None).await.unwrap();
    let push = Receiver::start().await;
    let endpoint = |who: &str| format!("http://127.0.0.1:{}/push/{who}", push.port);
    for (who, user) in [("alice", &alice), ("bob", &bob)] {
        b.relay
            .store()
            .upsert_push_subscription(&PushSubscriptionRecord {
                endpoint: endpoint(who),
                p256dh: P256DH.into(),
                auth: AUTH.into(),
                label: Some(format!("{who}'s phone")),
                created_at: 0,
                user_id: Some(user.id.clone()),
            })
            .await
            .unwrap();
    }
    let notify = NotifyConfig::parse(
        "notify.toml",
        r#"
public_url = "https://relay.example.test"
[escalation]
renotify_after_secs = 0
after_secs = 2
to = ["user:alice", "user:vic", "user:carol"]
"#,
    )
    .unwrap();
    let vapid =
        Vapid::load_or_create(&b.home.root().join("vapid-key"), "mailto:t@example.test").unwrap();
    let notifier = Notifier::start(b.relay.clone(), notify, "http://unused", Some(vapid)).unwrap();

    let (s, r) = request(&b, "MARK-P", "p.txt").await;
    let alice_target = format!("push:{}", endpoint("alice"));
    let trail = trail_until(&b.relay, &r, "the escalation to Alice's phone", |t| {
        t.iter()
            .any(|d| d.outbox_id.ends_with("_e") && d.target == alice_target && d.status == "sent")
            && t.iter().filter(|d| d.target.starts_with("user:")).count() == 2
    })
    .await;
    let escalated: Vec<&str> = trail
        .iter()
        .filter(|d| d.outbox_id.ends_with("_e") && d.status == "queued")
        .map(|d| d.target.as_str())
        .collect();
    assert_eq!(escalated, [alice_target.as_str()], "{trail:#?}");
    let why = |who: &str| {
        trail
            .iter()
            .find(|d| d.target == format!("user:{who}"))
            .and_then(|d| d.detail.clone())
            .unwrap_or_default()
    };
    assert_eq!(
        why("vic"),
        "escalation: vic is a viewer and cannot answer requests"
    );
    assert_eq!(why("carol"), "escalation: no user named \"carol\"");
    // Both phones had the first notice; only Alice's the escalation.
    let hits = |who: &str| {
        push.hits()
            .iter()
            .filter(|h| h.path == format!("/push/{who}"))
            .count()
    };
    assert_eq!((hits("alice"), hits("bob")), (2, 1), "{:#?}", push.hits());
    // Once: the failures are not written again while the request stays open.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let again = b
        .relay
        .store()
        .deliveries_for_request(&r, 500)
        .await
        .unwrap();
    assert_eq!(
        again
            .iter()
            .filter(|d| d.target.starts_with("user:"))
            .count(),
        2,
        "{again:#?}"
    );
    answer_and_wait(&b, &s, &r, Answer::approve(), "the turn's end").await;
    drop(notifier);
    b.relay.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_for_resolutions_names_the_person_who_answered() {
    let b = bed(Duration::from_secs(300)).await;
    let hook = Receiver::start().await;
    let notify = NotifyConfig::parse(
        "notify.toml",
        &format!(
            r#"
push = false
[[webhook]]
name = "audit"
url = "http://127.0.0.1:{}/audit"
secret = "{SECRET}"
events = ["request-resolved"]
"#,
            hook.port
        ),
    )
    .unwrap();
    let notifier = Notifier::start(b.relay.clone(), notify, "https://r.test", None).unwrap();
    let (s, r) = request(&b, "MARK-W", "w.txt").await;
    let mia = codex_relay_core::people::Person {
        id: "usr_mia".into(),
        name: "Mia Approver".into(),
        role: Role::Approver,
        front: "ui".into(),
        device: Some("phone".into()),
    };
    b.relay
        .respond_as(
            &s,
            &r,
            Answer::deny("not today"),
            Decider::Person(codex_relay_core::decider::Front::Http),
            Some(mia),
        )
        .await
        .unwrap();
    let hits = hook
        .until("the resolution", |h| {
            h.iter().any(|h| h.json()["type"] == "request.resolved")
        })
        .await;
    let hit = hits
        .iter()
        .find(|h| h.json()["type"] == "request.resolved")
        .unwrap()
        .json();
    let data = &hit["data"];
    assert_eq!(data["requestId"], r.as_str(), "{hit}");
    assert_eq!(data["sessionId"], s.as_str(), "{hit}");
    assert_eq!(data["resolution"]["decision"], "deny", "{hit}");
    assert_eq!(data["resolution"]["by"], "http", "{hit}");
    assert_eq!(data["resolution"]["reason"], "not today", "{hit}");
    assert_eq!(
        data["resolution"]["byUser"]["name"], "Mia Approver",
        "{hit}"
    );
    assert_eq!(
        data["title"], "Request deny by Mia Approver (approver, http)",
        "{hit}"
    );
    // Only what it asked for: the request's opening was not sent to it.
    assert!(
        hits.iter().all(|h| h.json()["type"] != "request.opened"),
        "{hits:#?}"
    );
    until(&b.relay, &s, "the turn's end", |s| {
        s.status == SessionStatus::Idle
    })
    .await;
    drop(notifier);
    b.relay.shutdown().await;
}
