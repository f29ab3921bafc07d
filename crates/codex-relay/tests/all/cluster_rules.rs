//! Approval rules in a cluster (two `serve` instances on one Postgres, real Codex 0.169, the
//! scripted model): a deny rule saved through B answers a request that opens on A, with the
//! rule named as who answered and its reason; once the rule is deleted through B, the same
//! command on A waits for a human again, who denies it through B the moment A shows it: the
//! deny (not some other answer) is what A's Codex gets.

use crate::common::Bed;
use crate::http_support::{Client, Event};
use codex_relay_testkit::Reply;
use serde_json::json;

use crate::cluster_support::*;

fn resolved(events: &[Event]) -> Vec<(String, String)> {
    events
        .iter()
        .filter(|e| e.event == "envelope" && ev_t(e) == "request-resolved")
        .map(|e| e.json()["ev"].clone())
        .map(|ev| {
            (
                ev["by"].as_str().unwrap_or_default().to_owned(),
                ev["decision"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_postgres_a_rule_saved_through_one_instance_answers_on_another() {
    let Some(db) =
        fresh_schema("cluster_postgres_a_rule_saved_through_one_instance_answers_on_another").await
    else {
        return;
    };
    let bed = Bed::start(NEWEST).await;
    std::fs::create_dir(bed.home.workspace().join("build")).unwrap();
    bed.model.route(
        "CL-RULES",
        [
            Reply::exec("rm -rf build", "call-r1"),
            Reply::text("was refused"),
            Reply::exec("rm -rf build", "call-r2"),
            Reply::text("asked this time"),
        ],
    );
    let a = instance(&bed, &db, "A").await;
    let b = instance(&bed, &db, "B").await;
    let (ca, cb) = (Client::new(&a.url), Client::new(&b.url));
    cluster_until(&ca, "two live instances", |cl| {
        ["A", "B"]
            .iter()
            .all(|i| instance_of(cl, i)["state"] == "live")
    })
    .await;

    let saved = cb
        .post(
            "/api/rules",
            &json!({"name": "no-rm-rf", "action": "deny", "argv": ["rm", "-rf"],
                    "reason": "use cargo clean"}),
        )
        .await;
    assert_eq!(saved.status, 200, "{}", saved.text());
    // A lists it once the notice has reached it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let rules = ca.get("/api/rules").await.json();
        if rules["rules"]
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r["name"] == "no-rm-rf"))
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "A never saw B's rule: {rules}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    let ws = bed.home.workspace().display().to_string();
    let id = create(
        &ca,
        json!({"prompt": "CL-RULES: tidy", "cwd": ws, "approvalPolicy": "untrusted",
               "sandbox": "workspace-write"}),
    )
    .await;
    let mut s = ca.stream(&format!("/api/sessions/{id}/stream"), &[]).await;
    let first = s.until(TURN, |e| is_status(e, "idle")).await;
    assert!(
        !first.iter().any(|e| e.event == "permission_request"),
        "nobody was asked"
    );
    assert_eq!(
        resolved(&first),
        vec![("rule:no-rm-rf".to_owned(), "deny".to_owned())]
    );
    assert!(
        bed.home.workspace().join("build").is_dir(),
        "the denied command did not run"
    );

    // Deleted through B: on A the same command waits for a human again.
    let r = cb.delete("/api/rules/no-rm-rf").await;
    assert_eq!(r.status, 204, "{}", r.text());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while ca.get("/api/rules").await.json()["rules"]
        .as_array()
        .is_some_and(|r| !r.is_empty())
    {
        assert!(
            std::time::Instant::now() < deadline,
            "A still has the deleted rule"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let r = ca
        .post(
            &format!("/api/sessions/{id}/messages"),
            &json!({"text": "CL-RULES again"}),
        )
        .await;
    assert!(r.status < 300, "{}", r.text());
    let asked = s
        .until(TURN, |e| e.event == "permission_request")
        .await
        .pop()
        .unwrap()
        .json();
    let r = cb
        .post(
            "/api/codex/permission/respond",
            &json!({"id": asked["id"], "action": "deny"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["decision"], "deny", "{}", r.text());
    // The human's deny, given through B as soon as A showed the request, is what A's Codex
    // got: the command declined, the turn goes on to its end.
    let second = s.until(TURN, |e| is_status(e, "idle")).await;
    assert_eq!(
        resolved(&second),
        vec![("http".to_owned(), "deny".to_owned())]
    );
    assert!(
        second
            .iter()
            .any(|e| e.json()["ev"]["text"] == "asked this time"),
        "the turn went on after the deny"
    );
    drop(s);
    drop((a, b));
    bed.assert_no_codex_left().await;
}
