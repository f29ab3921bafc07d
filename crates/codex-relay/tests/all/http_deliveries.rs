//! Delivery trails through `serve --notify` on the real Codex (0.169) with the scripted model:
//! a request's trail in the API says which channel took it and which failed (a webhook whose
//! receiver is not there: the network error); following the notification's open link records
//! it as opened (a forged one does not); the answer page shows the whole command and the
//! model's reason, escaped; a test per channel records its own trail, ok and failing.

use std::time::{Duration, Instant};

use crate::common::{Bed, HttpRelay};
use crate::http_answer_links::{path_of, receiver, until_hook};
use crate::http_support::Client;
use codex_relay_testkit::{Item, Reply};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(90);

/// Polls `path` (a trail) with backoff until `pred` holds on its steps.
async fn trail_until(
    c: &Client,
    path: &str,
    what: &str,
    pred: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let deadline = Instant::now() + WAIT;
    let mut wait = Duration::from_millis(50);
    loop {
        let r = c.get(path).await;
        assert_eq!(r.status, 200, "{}", r.text());
        let steps = r.json()["deliveries"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if pred(&steps) {
            return steps;
        }
        assert!(
            Instant::now() < deadline,
            "no {what} within {WAIT:?}: {steps:#?}"
        );
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_millis(500));
    }
}

fn has(steps: &[Value], target: &str, status: &str) -> bool {
    steps
        .iter()
        .any(|d| d["target"] == target && d["status"] == status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requests_trail_shows_sent_failed_and_opened_and_a_test_records_its_own() {
    let bed = Bed::start(codex_relay_testkit::NEWEST).await;
    let ws = bed.home.workspace().to_path_buf();
    bed.model.route(
        "MARK-TRAIL",
        [
            Reply::items(vec![Item::function_call(
                "exec_command",
                json!({"cmd": "touch outside.txt && echo '<done>'",
                    "sandbox_permissions": "require_escalated",
                    "justification": "the <b>file</b> & its \"twin\" must go there"}),
                "ct",
            )]),
            Reply::text("done"),
        ],
    );
    let (hook, got) = receiver().await;
    // A port nobody listens on: the "broken" webhook's attempts fail with a network error.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let broken = format!("http://{}/hook", closed.local_addr().unwrap());
    drop(closed);
    let notify = bed.home.root().join("notify.toml");
    std::fs::write(
        &notify,
        format!(
            r#"answer_links = true
retry_max_delay_secs = 2
retention = "7d"
[escalation]
renotify_after_secs = 0
[[webhook]]
name = "ops"
url = "{hook}"
secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
[[webhook]]
name = "broken"
url = "{broken}"
format = "ntfy"
"#
        ),
    )
    .unwrap();
    let mut args = bed.args(120_000);
    args.extend(["--notify".into(), notify.display().to_string()]);
    let relay = HttpRelay::start(args).await;
    let c = Client::new(&relay.url);
    let anon = Client::anonymous(&relay.url);

    let s = c
        .post(
            "/api/sessions",
            &json!({"prompt": "MARK-TRAIL: make a file", "cwd": ws,
                "approvalPolicy": "untrusted", "sandbox": "workspace-write"}),
        )
        .await
        .json()["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let deadline = Instant::now() + WAIT;
    let request = loop {
        let snap = c.get(&format!("/api/sessions/{s}")).await.json();
        if let Some(id) = snap["pending"][0]["id"].as_str() {
            break id.to_owned();
        }
        assert!(Instant::now() < deadline, "no request: {snap}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let body = until_hook(&got, &request).await;
    let trail_path = format!("/api/requests/{request}/deliveries");
    let steps = trail_until(&c, &trail_path, "ops sent and broken failing", |t| {
        has(t, "ops", "sent") && has(t, "broken", "failed")
    })
    .await;
    let failed = steps
        .iter()
        .find(|d| d["target"] == "broken" && d["status"] == "failed")
        .unwrap();
    let why = failed["detail"].as_str().unwrap();
    assert!(why.contains("retrying in"), "{why}");
    assert!(
        why.to_lowercase().contains("connect"),
        "the network error: {why}"
    );
    assert_eq!(failed["channel"], "webhook");
    let sent = steps
        .iter()
        .find(|d| d["target"] == "ops" && d["status"] == "sent")
        .unwrap();
    assert!(sent["detail"].as_str().unwrap().contains("204"), "{sent}");
    assert!(!has(&steps, "ops", "opened"));

    // The open link: forged, it leads to the UI and records nothing; genuine, it records the
    // notification as opened, once, and leads to the request's card. No login needed.
    let open = path_of(body["data"]["openUrl"].as_str().unwrap());
    assert!(open.starts_with("/n/"), "{open}");
    let (base, _) = open.split_once("?k=").unwrap();
    let forged = anon
        .get(&format!("{base}?k=00112233445566778899aabbccddeeff"))
        .await;
    assert_eq!(forged.status, 303);
    let r = anon.get(&open).await;
    assert_eq!(r.status, 303, "{}", r.text());
    assert_eq!(
        r.header("location"),
        Some(format!("/#/s/{s}?request={request}").as_str())
    );
    anon.get(&open).await;
    let steps = trail_until(&c, &trail_path, "opened", |t| has(t, "ops", "opened")).await;
    assert_eq!(
        steps.iter().filter(|d| d["status"] == "opened").count(),
        1,
        "{steps:#?}"
    );

    // The answer page: the whole command and the model's reason, escaped.
    let link = path_of(body["data"]["answer"]["approveUrl"].as_str().unwrap());
    let page = anon.get(&link).await;
    assert_eq!(page.status, 200, "{}", page.text());
    let html = page.text();
    assert!(
        html.contains("touch outside.txt &amp;&amp; echo &#39;&lt;done&gt;&#39;"),
        "{html}"
    );
    assert!(
        html.contains("the &lt;b&gt;file&lt;/b&gt; &amp; its &quot;twin&quot; must go there"),
        "{html}"
    );
    assert!(!html.contains("<b>file</b>"));

    // A test per channel: the channels listed, an ok one sent, a failing one failing with why.
    let channels = c.get("/api/notifications/channels").await.json();
    assert_eq!(channels["channels"], json!(["ops", "broken", "push"]));
    let r = c
        .post("/api/notifications/test", &json!({"channel": "ops"}))
        .await;
    assert_eq!(r.status, 202, "{}", r.text());
    let id = r.json()["notifications"][0].as_str().unwrap().to_owned();
    let steps = trail_until(
        &c,
        &format!("/api/notifications/{id}/deliveries"),
        "the test sent",
        |t| has(t, "ops", "sent"),
    )
    .await;
    assert_eq!(steps[0]["status"], "queued");
    let deadline = Instant::now() + WAIT;
    while !got.lock().unwrap().iter().any(|v| v["type"] == "test") {
        assert!(Instant::now() < deadline, "the test webhook never came");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let r = c
        .post("/api/notifications/test", &json!({"channel": "broken"}))
        .await;
    assert_eq!(r.status, 202, "{}", r.text());
    let id = r.json()["notifications"][0].as_str().unwrap().to_owned();
    let steps = trail_until(
        &c,
        &format!("/api/notifications/{id}/deliveries"),
        "the test failing",
        |t| has(t, "broken", "failed"),
    )
    .await;
    assert!(
        steps.iter().any(|d| d["detail"]
            .as_str()
            .is_some_and(|t| t.contains("retrying in"))),
        "{steps:#?}"
    );
    let r = c
        .post("/api/notifications/test", &json!({"channel": "push"}))
        .await;
    assert_eq!(r.status, 409, "no browser subscribed: {}", r.text());
    let r = c
        .post("/api/notifications/test", &json!({"channel": "nope"}))
        .await;
    assert_eq!(r.status, 404, "{}", r.text());
    assert!(r.text().contains("unknown_channel"));
    // Only with the token.
    assert_eq!(anon.get(&trail_path).await.status, 401);
    assert_eq!(
        anon.post("/api/notifications/test", &json!({"channel": "ops"}))
            .await
            .status,
        401
    );

    let r = c
        .post(
            "/api/codex/permission/respond",
            &json!({"id": request, "action": "deny", "message": "not now"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    // Answered: what was still being retried is skipped, and the trail says so.
    trail_until(&c, &trail_path, "broken skipped", |t| {
        has(t, "broken", "skipped")
    })
    .await;
}
