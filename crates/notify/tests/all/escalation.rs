//! Approvals that cannot strand, over the real Codex (0.169) and the scripted model: a
//! request's push goes to a push service that fails (500, then 410 for another request); the
//! trail says so with the service's answer and the request escalates to the webhook kept for
//! that, once, long before its timeout. A request whose notification nobody opens is notified
//! again after the interval, no more once it is answered, and none once it was opened.

use std::time::{Duration, Instant};

use codex_relay_codex::AppServerConfig;
use codex_relay_core::store::{DeliveryRecord, PushSubscriptionRecord};
use codex_relay_core::{Answer, Decider, Relay, RelayConfig, SessionStatus};
use codex_relay_notify::{Notifier, NotifyConfig, Vapid};
use codex_relay_protocol::v2::ApprovalPolicy;
use codex_relay_testkit::{CodexHome, ModelServer, Reply};

use crate::webhooks::{Receiver, SECRET, WAIT, session, until};

/// RFC 8291 Appendix A's browser keys: a valid subscription for a push service of ours.
pub(crate) const P256DH: &str =
    "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4";
pub(crate) const AUTH: &str = "BTBZMqHH6r4Tts7J_aSIgg";

pub(crate) struct Bed {
    pub model: ModelServer,
    pub home: CodexHome,
    pub relay: Relay,
    pub ws: String,
}

pub(crate) async fn bed(approval_timeout: Duration) -> Bed {
    let model = ModelServer::start().await;
    let home = CodexHome::new(model.url());
    let ws = home.workspace().display().to_string();
    let bin =
        codex_relay_testkit::codex_bin(codex_relay_testkit::NEWEST).expect("pinned Codex installs");
    let mut config = RelayConfig::new(
        AppServerConfig::new(bin).codex_home(home.path()),
        home.root().join("relay.db").display().to_string(),
    );
    config.approval_timeout = approval_timeout;
    let user_home = home.root().join("user-home");
    std::fs::create_dir_all(&user_home).unwrap();
    config
        .codex
        .env
        .push(("HOME".into(), Some(user_home.into_os_string())));
    let relay = Relay::open(config).await.unwrap();
    Bed {
        model,
        home,
        relay,
        ws,
    }
}

/// Starts a session whose first command waits for approval; its request's id.
pub(crate) async fn request(b: &Bed, marker: &str, file: &str) -> (String, String) {
    b.model.route(
        marker,
        [
            Reply::exec(&format!("touch {file}"), &format!("c-{file}")),
            Reply::text("done"),
        ],
    );
    let (h, _) = b
        .relay
        .create(session(
            &b.ws,
            &format!("{marker}: make {file}"),
            ApprovalPolicy::Untrusted,
        ))
        .await
        .unwrap();
    let id = h.id().to_owned();
    let snap = until(&b.relay, &id, "the request", |s| !s.pending.is_empty()).await;
    (id, snap.pending[0].id.clone())
}

/// Answers request `r` of session `s` as a library caller, then waits for the turn's end.
pub(crate) async fn answer_and_wait(b: &Bed, s: &str, r: &str, answer: Answer, what: &str) {
    b.relay
        .respond(s, r, answer, Decider::library("test"))
        .await
        .unwrap();
    until(&b.relay, s, what, |s| s.status == SessionStatus::Idle).await;
}

/// Polls the request's trail (with backoff) until `pred` holds.
pub(crate) async fn trail_until(
    relay: &Relay,
    request: &str,
    what: &str,
    pred: impl Fn(&[DeliveryRecord]) -> bool,
) -> Vec<DeliveryRecord> {
    let deadline = Instant::now() + WAIT;
    let mut wait = Duration::from_millis(50);
    loop {
        let trail = relay
            .store()
            .deliveries_for_request(request, 500)
            .await
            .unwrap();
        if pred(&trail) {
            return trail;
        }
        assert!(
            Instant::now() < deadline,
            "no {what} within {WAIT:?}: {trail:#?}"
        );
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_millis(500));
    }
}

fn hits_for(rx: &Receiver, request: &str) -> usize {
    rx.hits()
        .iter()
        .filter(|h| h.json()["data"]["requestId"] == request)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_push_is_on_the_trail_and_the_request_escalates_to_the_webhook_once() {
    let b = bed(Duration::from_secs(240)).await;
    let push = Receiver::answering(500).await;
    let hook = Receiver::start().await;
    let endpoint = format!("http://127.0.0.1:{}/push/device-1", push.port);
    b.relay
        .store()
        .upsert_push_subscription(&PushSubscriptionRecord {
            endpoint: endpoint.clone(),
            p256dh: P256DH.into(),
            auth: AUTH.into(),
            label: Some("phone".into()),
            created_at: 0,
            user_id: None,
        })
        .await
        .unwrap();
    // Escalation by time is far off (and re-notify off): only the failure can escalate.
    let notify = NotifyConfig::parse(
        "notify.toml",
        &format!(
            r#"
public_url = "https://relay.example.test"
retry_max_delay_secs = 2
[escalation]
renotify_after_secs = 0
after_secs = 200
to = ["oncall"]
[[webhook]]
name = "oncall"
url = "http://127.0.0.1:{}/oncall"
secret = "{SECRET}"
"#,
            hook.port
        ),
    )
    .unwrap();
    let vapid =
        Vapid::load_or_create(&b.home.root().join("vapid-key"), "mailto:t@example.test").unwrap();
    let notifier = Notifier::start(b.relay.clone(), notify, "http://unused", Some(vapid)).unwrap();

    let (s1, r1) = request(&b, "MARK-E1", "e1.txt").await;
    let opened_at = Instant::now();
    let trail = trail_until(&b.relay, &r1, "an escalation sent to oncall", |t| {
        t.iter().any(|d| d.target == "oncall" && d.status == "sent")
    })
    .await;
    let escalated_in = opened_at.elapsed();
    eprintln!("escalated {escalated_in:?} after the request opened");
    assert!(
        escalated_in < Duration::from_secs(60),
        "escalated in {escalated_in:?}: the push failed at once, and the timeout is 240 s"
    );
    let push_target = format!("push:{endpoint}");
    let push_steps: Vec<&DeliveryRecord> =
        trail.iter().filter(|d| d.target == push_target).collect();
    assert_eq!(push_steps[0].status, "queued", "{trail:#?}");
    let failed = push_steps
        .iter()
        .find(|d| d.status == "failed")
        .expect("the push's failure is on the trail");
    assert!(
        failed
            .detail
            .as_deref()
            .unwrap()
            .starts_with("the push service answered 500"),
        "{failed:?}"
    );
    let queued = trail
        .iter()
        .find(|d| d.target == "oncall" && d.status == "queued")
        .unwrap();
    let why = queued.detail.as_deref().unwrap();
    assert!(
        why.starts_with("escalation: every channel failed (push-") && why.contains("500"),
        "{why}"
    );
    assert!(push.hits().iter().any(|h| h.path == "/push/device-1"));
    // Once: escalation is not repeated while the push keeps failing (several retries here).
    let after = Instant::now();
    while push.hits().len() < 3 {
        assert!(after.elapsed() < WAIT, "the push was not retried");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(hits_for(&hook, &r1), 1, "{:#?}", hook.hits());
    let hit = hook
        .hits()
        .into_iter()
        .find(|h| h.json()["data"]["requestId"] == r1.as_str())
        .unwrap();
    assert_eq!(hit.json()["type"], "request.opened");
    assert!(
        hit.json()["data"]["text"]
            .as_str()
            .unwrap()
            .contains("touch e1.txt")
    );
    assert_eq!(
        b.relay.status(&s1).unwrap().pending.len(),
        1,
        "still waiting: escalation came before the timeout"
    );

    // The push service says the subscription is gone (410): failed for good, the browser is
    // forgotten, and the next request escalates too.
    answer_and_wait(&b, &s1, &r1, Answer::approve(), "s1's turn end").await;
    push.set_status(410);
    let (s2, r2) = request(&b, "MARK-E2", "e2.txt").await;
    let trail = trail_until(&b.relay, &r2, "a second escalation", |t| {
        t.iter().any(|d| d.target == "oncall" && d.status == "sent")
    })
    .await;
    let gone = trail
        .iter()
        .find(|d| d.target == push_target && d.status == "failed")
        .unwrap();
    assert!(
        gone.detail.as_deref().unwrap().contains("410")
            && gone.detail.as_deref().unwrap().contains("not retried"),
        "{gone:?}"
    );
    assert!(
        b.relay
            .store()
            .push_subscriptions()
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(hits_for(&hook, &r2), 1);
    answer_and_wait(&b, &s2, &r2, Answer::deny("no"), "s2's turn end").await;
    drop(notifier);
    b.relay.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unopened_request_is_notified_again_until_it_is_answered() {
    let b = bed(Duration::from_secs(300)).await;
    let hook = Receiver::start().await;
    let notify = NotifyConfig::parse(
        "notify.toml",
        &format!(
            r#"
push = false
[escalation]
renotify_after_secs = 3
renotify_max = 10
[[webhook]]
name = "phone"
url = "http://127.0.0.1:{}/phone"
secret = "{SECRET}"
"#,
            hook.port
        ),
    )
    .unwrap();
    let notifier = Notifier::start(b.relay.clone(), notify, "http://r.test", None).unwrap();
    let (s, r) = request(&b, "MARK-R", "r.txt").await;
    let opened_at = Instant::now();
    // The first notice, then two reminders, each after the interval.
    let deadline = Instant::now() + WAIT;
    while hits_for(&hook, &r) < 3 {
        assert!(Instant::now() < deadline, "{:#?}", hook.hits());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let took = opened_at.elapsed();
    assert!(
        took >= Duration::from_secs(6),
        "two reminders 3 s apart came after {took:?}"
    );
    let titles: Vec<String> = hook
        .hits()
        .iter()
        .filter(|h| h.json()["data"]["requestId"] == r.as_str())
        .map(|h| h.json()["data"]["title"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(titles[0], "Codex asks to run a command");
    assert!(
        titles[1..].iter().all(|t| t.starts_with("Still waiting: ")),
        "{titles:?}"
    );
    let ids: std::collections::BTreeSet<String> = hook
        .hits()
        .iter()
        .filter_map(|h| h.header("webhook-id").map(str::to_owned))
        .collect();
    assert_eq!(
        ids.len(),
        hook.hits().len(),
        "each reminder is a message of its own"
    );
    let trail = b
        .relay
        .store()
        .deliveries_for_request(&r, 100)
        .await
        .unwrap();
    assert!(
        trail.iter().any(|d| d.status == "queued"
            && d.detail
                .as_deref()
                .is_some_and(|t| t.starts_with("re-notify 1 of 10"))),
        "{trail:#?}"
    );

    b.relay
        .respond(&s, &r, Answer::deny("not now"), Decider::library("test"))
        .await
        .unwrap();
    let answered = hits_for(&hook, &r);
    // Three intervals later: nothing more (at most one reminder queued just before the
    // answer, skipped or sent as it raced it).
    tokio::time::sleep(Duration::from_secs(10)).await;
    let total = hits_for(&hook, &r);
    assert!(
        total <= answered + 1,
        "{answered} before the answer, {total} after"
    );
    until(&b.relay, &s, "the turn's end", |s| {
        s.status == SessionStatus::Idle
    })
    .await;

    // Opened (the step `/n/{id}` records, tested over HTTP in http_deliveries.rs): no reminder
    // after that.
    let (s2, r2) = request(&b, "MARK-R2", "r2.txt").await;
    let deadline = Instant::now() + WAIT;
    while hits_for(&hook, &r2) < 1 {
        assert!(Instant::now() < deadline, "no first notice for r2");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let first = b
        .relay
        .store()
        .notifications_for_request(&r2)
        .await
        .unwrap()
        .remove(0);
    b.relay
        .store()
        .record_delivery(&DeliveryRecord {
            outbox_id: first.id,
            request_id: Some(r2.clone()),
            target: first.target,
            status: "opened".into(),
            detail: None,
            at: 0,
        })
        .await
        .unwrap();
    let seen = hits_for(&hook, &r2);
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert!(
        hits_for(&hook, &r2) <= seen + 1,
        "reminded after it was opened: {:#?}",
        hook.hits()
    );
    answer_and_wait(&b, &s2, &r2, Answer::approve(), "r2's turn end").await;
    drop(notifier);
    b.relay.shutdown().await;
}
