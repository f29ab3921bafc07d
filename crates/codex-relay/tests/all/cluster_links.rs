//! Answer links in a cluster (two `serve` instances on one Postgres, real Codex 0.169, the
//! scripted model): a request opens on A, which runs the session; B only mirrors it and is the
//! one that sends notifications, so the link in its webhook points at B. Posted to B, the link
//! approves A's request (carried to the owner like any answer), the command runs, A's log says
//! `answer-link` answered, and the link is used up.

use std::time::{Duration, Instant};

use crate::common::Bed;
use crate::http_answer_links::{path_of, receiver, until_hook};
use crate::http_support::Client;
use codex_relay_testkit::Reply;
use serde_json::json;

use crate::cluster_support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_postgres_a_link_made_by_a_mirror_answers_on_the_owner() {
    let Some(db) =
        fresh_schema("cluster_postgres_a_link_made_by_a_mirror_answers_on_the_owner").await
    else {
        return;
    };
    let bed = Bed::start(NEWEST).await;
    let ws = bed.home.workspace().to_path_buf();
    bed.model.route(
        "CL-LINK",
        [
            Reply::exec("touch linked.txt", "call-l1"),
            Reply::text("linked done"),
        ],
    );
    let (hook, got) = receiver().await;
    let notify = bed.home.root().join("notify-b.toml");
    std::fs::write(
        &notify,
        format!(
            "answer_links = true\npush = false\n[[webhook]]\nname = \"ops\"\nurl = \"{hook}\"\nsecret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"\n"
        ),
    )
    .unwrap();
    let a = instance(&bed, &db, "A").await;
    let b = instance_extra(
        &bed,
        &db,
        "B",
        LEASE_MS,
        &["--notify".into(), notify.display().to_string()],
    )
    .await;
    let (ca, cb) = (Client::new(&a.url), Client::new(&b.url));
    let anon_b = Client::anonymous(&b.url);
    cluster_until(&ca, "two live instances", |cl| {
        ["A", "B"]
            .iter()
            .all(|i| instance_of(cl, i)["state"] == "live")
    })
    .await;

    let id = create(
        &ca,
        json!({"prompt": "CL-LINK: make a file", "cwd": ws, "approvalPolicy": "untrusted",
               "sandbox": "workspace-write"}),
    )
    .await;
    let asked = view_until(&ca, &id, "the request opens on A", |v| {
        v["pending"][0]["id"].is_string()
    })
    .await;
    let request = asked["pending"][0]["id"].as_str().unwrap().to_owned();
    // B, which only mirrors the session, sent the webhook: its link points at B.
    let hook_body = until_hook(&got, &request).await;
    let approve = hook_body["data"]["answer"]["approveUrl"].as_str().unwrap();
    let b_base = b.url.trim_end_matches("/mcp");
    assert!(approve.starts_with(b_base), "{approve} is B's ({b_base})");
    let link = path_of(approve);
    let token = link.split("t=").nth(1).unwrap().split('&').next().unwrap();

    let page = anon_b.get(&link).await;
    assert_eq!(page.status, 200, "{}", page.text());
    assert!(page.text().contains("touch linked.txt"), "{}", page.text());

    let body = format!("t={token}&a=approve");
    let path = format!("/answer/{request}");
    let post = || {
        anon_b.send(
            "POST",
            &path,
            &[
                ("content-type", "application/x-www-form-urlencoded"),
                ("sec-fetch-site", "same-origin"),
            ],
            body.as_bytes(),
        )
    };
    let r = post().await;
    assert_eq!(r.status, 200, "the link answers on the owner: {}", r.text());
    assert!(
        r.text().contains("data-decision=\"approve\""),
        "{}",
        r.text()
    );
    // Used once: a second post is refused as used, not taken.
    let again = post().await;
    assert_eq!(again.status, 410, "{}", again.text());
    assert!(again.text().contains("link_used"), "{}", again.text());

    let deadline = Instant::now() + TURN;
    while !ws.join("linked.txt").exists() {
        assert!(
            Instant::now() < deadline,
            "the command approved by the link did not run"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    view_until(&ca, &id, "the turn ends on A", |v| v["status"] == "idle").await;
    let resolved: Vec<(String, String)> = history(&ca, &id)
        .await
        .iter()
        .filter(|e| e["ev"]["t"] == "request-resolved")
        .map(|e| {
            (
                e["ev"]["by"].as_str().unwrap_or_default().to_owned(),
                e["ev"]["decision"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        resolved,
        vec![("answer-link".to_owned(), "approve".to_owned())]
    );
    drop(cb);
    drop((a, b));
    bed.assert_no_codex_left().await;
}
