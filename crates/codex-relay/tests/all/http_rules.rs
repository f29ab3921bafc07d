//! Approval rules through `serve` on the real Codex (0.169) with the scripted model: rules
//! from `--rules FILE` answer `git status` (allow) and `rm -rf` (deny) with nobody asked and
//! every front told who answered (`rule:<name>`, `who: rule`); a third command waits; the
//! rule the relay suggests from that request ("always allow"), saved over the API with
//! `outside_sandbox` ticked (under `untrusted` an approved command may leave the sandbox),
//! answers the same command in the next turn; the file's rules cannot be changed over the API, a bad rule
//! is refused with the field named; after a restart the API's rule is still there and can be
//! deleted.

use std::time::Duration;

use crate::common::{Bed, HttpRelay};
use crate::http_support::{Client, Event, Sse};
use codex_relay_testkit::Reply;
use serde_json::{Value, json};

const TURN: Duration = Duration::from_secs(90);

const RULES: &str = r#"
# Under untrusted an approved command may run outside the sandbox (when the sandbox blocks
# it): a rule answers such requests only when it says so.
[[rule]]
name = "allow-git-status"
action = "allow"
argv = ["git", "status"]
outside_sandbox = true

[[rule]]
name = "no-rm-rf"
action = "deny"
argv = ["rm", "-rf"]
reason = "never delete build trees here; use cargo clean"
"#;

fn ev_t(e: &Event) -> String {
    e.json()["ev"]["t"].as_str().unwrap_or_default().to_owned()
}

async fn until_idle(s: &mut Sse) -> Vec<Event> {
    s.until(TURN, |e| {
        e.event == "envelope" && ev_t(e) == "status" && e.json()["ev"]["status"] == "idle"
    })
    .await
}

/// `(command, by, decision)` of every request a rule answered in a stream's envelopes.
fn ruled(events: &[Event]) -> Vec<(String, String, String)> {
    events
        .iter()
        .filter(|e| e.event == "envelope" && ev_t(e) == "request-resolved")
        .map(|e| e.json()["ev"].clone())
        .filter(|ev| ev.get("request").is_some())
        .map(|ev| {
            (
                ev["request"]["details"]["command"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                ev["by"].as_str().unwrap().to_owned(),
                ev["decision"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_from_the_file_and_the_api_answer_and_survive_a_restart() {
    let bed = Bed::start(codex_relay_testkit::NEWEST).await;
    let ws = bed.home.workspace().to_path_buf();
    assert!(
        std::process::Command::new("git")
            .args(["init", "-q"])
            .current_dir(&ws)
            .status()
            .unwrap()
            .success()
    );
    std::fs::create_dir(ws.join("build")).unwrap();
    let rules_file = bed.home.root().join("rules.toml");
    std::fs::write(&rules_file, RULES).unwrap();
    bed.model.route(
        "MARK-RULES",
        [
            Reply::exec("git status", "c1"),
            Reply::exec("rm -rf build", "c2"),
            Reply::exec("touch a.txt", "c3"),
            Reply::text("first done"),
            Reply::exec("touch a.txt", "c4"),
            Reply::text("second done"),
        ],
    );
    let mut args = bed.args(120_000);
    args.extend(["--rules".into(), rules_file.display().to_string()]);
    let relay = HttpRelay::start(args.clone()).await;
    let c = Client::new(&relay.url);
    let mut dashboard = c.stream("/api/stream", &[]).await;

    let r = c.get("/api/rules").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let names: Vec<(Value, Value)> = r.json()["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["name"].clone(), r["source"].clone()))
        .collect();
    assert_eq!(
        names,
        vec![
            (json!("allow-git-status"), json!("file")),
            (json!("no-rm-rf"), json!("file"))
        ]
    );
    // The file's rules are edited in the file.
    let r = c
        .post(
            "/api/rules",
            &json!({"name": "no-rm-rf", "action": "allow", "argv": ["rm"]}),
        )
        .await;
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (409, json!("rule_from_file"))
    );
    // An allow rule cannot grant permissions; the message names the field.
    let r = c
        .post(
            "/api/rules",
            &json!({"name": "grant", "action": "allow", "kinds": ["permissions"]}),
        )
        .await;
    assert_eq!(r.status, 422, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], "invalid_rule");
    assert!(r.text().contains("kinds"), "{}", r.text());

    let created = c
        .post(
            "/api/sessions",
            &json!({"prompt": "MARK-RULES: tidy up", "cwd": ws,
                "approvalPolicy": "untrusted", "sandbox": "workspace-write", "labels": ["ci"]}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text());
    let id = created.json()["sessionId"].as_str().unwrap().to_owned();
    let mut s = c.stream(&format!("/api/sessions/{id}/stream"), &[]).await;
    let seen = s.until(TURN, |e| e.event == "permission_request").await;
    let asked = seen.last().unwrap().json();
    assert!(
        asked["toolInput"]["command"]
            .as_str()
            .unwrap()
            .contains("touch a.txt"),
        "only the third command reaches a person: {asked}"
    );
    assert_eq!(
        seen.iter()
            .filter(|e| e.event == "envelope" && ev_t(e) == "request-opened")
            .count(),
        1,
        "nobody was asked about the first two"
    );
    assert_eq!(
        ruled(&seen),
        vec![
            (
                "/bin/bash -lc 'git status'".into(),
                "rule:allow-git-status".into(),
                "approve".into()
            ),
            (
                "/bin/bash -lc 'rm -rf build'".into(),
                "rule:no-rm-rf".into(),
                "deny".into()
            ),
        ]
    );
    assert!(ws.join("build").is_dir(), "the denied command did not run");
    // The relay-wide stream says who answered, in words every front shares.
    let resolved = dashboard
        .until(TURN, |e| {
            e.event == "request_resolved" && e.json()["by"] == "rule:no-rm-rf"
        })
        .await;
    let deny = resolved.last().unwrap().json();
    assert_eq!(deny["who"], "rule", "{deny}");
    assert_eq!(
        deny["reason"],
        "never delete build trees here; use cargo clean"
    );

    // "Always allow": the relay's suggestion for the waiting request, saved, then approve.
    let r = c
        .get(&format!(
            "/api/rules/suggest?request={}&action=allow",
            asked["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let spec = r.json();
    assert_eq!(spec["argv"], json!(["touch", "a.txt"]), "{spec}");
    assert_eq!(spec["cwd"], json!(ws), "{spec}");
    assert_eq!(spec["action"], "allow");
    assert_eq!(
        spec.get("outside_sandbox"),
        None,
        "never suggested: a person opts in"
    );
    // The request says what approving it lets Codex do; the person ticks the box that lets
    // the rule answer such requests.
    assert_eq!(asked["reach"]["kind"], "outside", "{asked}");
    let mut spec = spec;
    spec["outside_sandbox"] = json!(true);
    let saved = c.post("/api/rules", &spec).await;
    assert_eq!(saved.status, 200, "{}", saved.text());
    assert_eq!(saved.json()["source"], "api");
    let name = spec["name"].as_str().unwrap().to_owned();
    let r = c
        .post(
            "/api/codex/permission/respond",
            &json!({"id": asked["id"], "action": "allow"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let resolved = dashboard
        .until(TURN, |e| {
            e.event == "request_resolved" && e.json()["id"] == asked["id"]
        })
        .await;
    assert_eq!(resolved.last().unwrap().json()["who"], "human");
    until_idle(&mut s).await;

    // The next turn's same command is answered by the saved rule.
    let r = c
        .post(
            &format!("/api/sessions/{id}/messages"),
            &json!({"text": "again"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let second = until_idle(&mut s).await;
    assert_eq!(
        ruled(&second),
        vec![(
            "/bin/bash -lc 'touch a.txt'".into(),
            format!("rule:{name}"),
            "approve".into()
        )]
    );
    assert!(
        !second.iter().any(|e| e.event == "permission_request"),
        "nobody was asked the second time"
    );
    let counts = c.get("/api/rules").await.json()["counts"].clone();
    assert_eq!(counts, json!({"allowed": 2, "denied": 1, "asked": 1}));
    drop(s);
    drop(dashboard);
    relay.stop().await;

    // After a restart the API's rule is there beside the file's, and can be deleted.
    let relay = HttpRelay::start(args).await;
    let c = Client::new(&relay.url);
    let rules = c.get("/api/rules").await.json()["rules"].clone();
    let sources: Vec<(Value, Value)> = rules
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["name"].clone(), r["source"].clone()))
        .collect();
    assert!(sources.contains(&(json!(name), json!("api"))), "{rules}");
    assert_eq!(sources.len(), 3, "{rules}");
    let r = c.delete(&format!("/api/rules/{name}")).await;
    assert_eq!(r.status, 204, "{}", r.text());
    let r = c.delete(&format!("/api/rules/{name}")).await;
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (404, json!("unknown_rule"))
    );
    let r = c.delete("/api/rules/no-rm-rf").await;
    assert_eq!(r.status, 409, "{}", r.text());
    assert_eq!(
        c.get("/api/rules").await.json()["rules"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    relay.stop().await;
    bed.assert_no_codex_left().await;
}
