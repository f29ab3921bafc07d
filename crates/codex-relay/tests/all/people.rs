//! People and roles through `serve` on the newest pinned real Codex with the scripted model, on
//! SQLite and on Postgres. The admin (the relay's token) makes a viewer, an approver and an
//! operator with personal tokens and invites a second approver by a one-time link (used once;
//! the second use is refused). The viewer gets 403 on start, on answer (the real request) and
//! on an MCP start; the approver on start and on rules; the operator starts a session but
//! cannot change rules; the invited approver answers the request, and every front names them
//! (`byUser`). A revoked token is refused at once, and on Postgres also on a second instance.
//! The audit export (JSONL) lists the start, the answer and the rule change with the person's
//! name.

use std::time::Duration;

use crate::common::{Bed, Driver, HttpRelay, Sdk};
use crate::http_support::{Client, Resp};
use codex_relay_testkit::Reply;
use serde_json::{Value, json};

use crate::cluster_support::{fresh_schema, history, instance, view_until};

const TURN: Duration = Duration::from_secs(90);

pub(crate) fn bearer(url: &str, token: &str) -> Client {
    Client::anonymous(url).with_header("Authorization", &format!("Bearer {token}"))
}

fn assert_forbidden(r: &Resp, role: &str, what: &str) {
    assert_eq!(r.status, 403, "{what}: {}", r.text());
    let e = &r.json()["error"];
    assert_eq!(e["code"], "forbidden_role", "{what}: {e}");
    let msg = e["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains(&format!("needs the {role} role")),
        "{what}: {msg}"
    );
}

/// A user made by the admin, and a personal token of theirs.
pub(crate) async fn user_with_token(admin: &Client, name: &str, role: &str) -> (String, String) {
    let r = admin
        .post("/api/users", &json!({"name": name, "role": role}))
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let r = admin.post("/api/tokens", &json!({"user": name})).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let t = r.json();
    let token = t["token"].as_str().unwrap().to_owned();
    assert!(token.starts_with("crp_"), "{token}");
    (t["id"].as_str().unwrap().to_owned(), token)
}

async fn mcp_start(c: &Client) -> Resp {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "codex_start", "arguments": {"prompt": "hi"}}});
    c.send(
        "POST",
        "/mcp",
        &[
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ],
        body.to_string().as_bytes(),
    )
    .await
}

/// The scenario on one relay (`a`), with `b` a second instance on the same store if any.
async fn scenario(bed: &Bed, a: &HttpRelay, b: Option<&HttpRelay>) {
    let ws = bed.home.workspace().to_path_buf();
    let admin = Client::new(&a.url);
    let (vera_tok_id, vera_secret) = user_with_token(&admin, "Vera Viewer", "viewer").await;
    let (_, april_secret) = user_with_token(&admin, "April Approver", "approver").await;
    let (_, otto) = user_with_token(&admin, "Otto Operator", "operator").await;
    let (vera, april, otto) = (
        bearer(&a.url, &vera_secret),
        bearer(&a.url, &april_secret),
        bearer(&a.url, &otto),
    );

    // An invitation works once: it makes Ivan, an approver, with a token.
    let r = admin
        .post(
            "/api/invitations",
            &json!({"name": "Ivan Invited", "role": "approver"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let link = r.json()["path"].as_str().unwrap().to_owned();
    let anon = Client::anonymous(&a.url).with_header("Accept", "application/json");
    let page = anon.get(&link).await;
    assert_eq!(page.status, 200, "{}", page.text());
    let used = anon.post(&link, &json!({})).await;
    assert_eq!(used.status, 201, "{}", used.text());
    let made = used.json();
    assert_eq!(made["user"]["name"], "Ivan Invited");
    assert_eq!(made["user"]["role"], "approver");
    let cookie = used.header("set-cookie").unwrap_or_default().to_owned();
    let ivan_token = made["token"]["token"].as_str().unwrap().to_owned();
    assert!(
        cookie.contains(&ivan_token) && cookie.contains("HttpOnly"),
        "{cookie}"
    );
    let again = anon.post(&link, &json!({})).await;
    assert_eq!(
        (again.status, again.json()["error"]["code"].clone()),
        (410, json!("invitation_used")),
        "{}",
        again.text()
    );
    // Ivan answers through the second instance when there is one.
    let ivan = bearer(b.map_or(&a.url, |b| &b.url), &ivan_token);
    let me = ivan.get("/api/me").await;
    assert_eq!(me.json()["person"]["name"], "Ivan Invited", "{}", me.text());

    // What each role may not do.
    let start = json!({"prompt": "PEOPLE: make a file", "cwd": ws,
        "approvalPolicy": "untrusted", "sandbox": "workspace-write"});
    assert_forbidden(
        &vera.post("/api/sessions", &start).await,
        "operator",
        "viewer starts",
    );
    assert_forbidden(
        &mcp_start(&vera).await,
        "operator",
        "viewer starts over MCP",
    );
    assert_forbidden(
        &april.post("/api/sessions", &start).await,
        "operator",
        "approver starts",
    );
    let rule = json!({"name": "allow-ls", "action": "allow", "argv": ["ls"]});
    assert_forbidden(
        &april.post("/api/rules", &rule).await,
        "admin",
        "approver rules",
    );
    assert_forbidden(
        &otto.post("/api/rules", &rule).await,
        "admin",
        "operator rules",
    );
    assert_forbidden(&otto.get("/api/audit").await, "admin", "operator audit");
    assert_eq!(vera.get("/api/sessions").await.status, 200);

    // The operator starts a session; Codex asks; the viewer cannot answer, Ivan can.
    let r = otto.post("/api/sessions", &start).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let asked = view_until(&vera, &id, "the request opens", |v| {
        v["pending"][0]["id"].is_string()
    })
    .await;
    let request = asked["pending"][0]["id"].as_str().unwrap().to_owned();
    let answer = json!({"id": request, "action": "allow"});
    let r = vera.post("/api/codex/permission/respond", &answer).await;
    assert_forbidden(&r, "approver", "viewer answers");
    let r = ivan.post("/api/codex/permission/respond", &answer).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["by"], "http");
    assert_eq!(r.json()["byUser"]["name"], "Ivan Invited", "{}", r.text());
    assert_eq!(r.json()["byUser"]["role"], "approver");
    let done = view_until(&admin, &id, "the turn ends", |v| v["status"] == "idle").await;
    assert!(ws.join("made.txt").exists(), "{done}");
    // The log names the person beside the front's word.
    let resolved: Vec<Value> = history(&admin, &id)
        .await
        .iter()
        .filter(|e| e["ev"]["t"] == "request-resolved")
        .map(|e| e["ev"].clone())
        .collect();
    assert_eq!(resolved.len(), 1, "{resolved:?}");
    assert_eq!(resolved[0]["by"], "http");
    assert_eq!(resolved[0]["byUser"]["name"], "Ivan Invited");

    // A token limited to some sessions sees and acts on those only: it cannot list, read or
    // stream the others, nor the relay-wide stream, nor start one.
    let scoped = |sessions: Value| {
        let admin = admin.clone();
        async move {
            let r = admin
                .post(
                    "/api/tokens",
                    &json!({"user": "Otto Operator", "sessions": sessions}),
                )
                .await;
            assert_eq!(r.status, 201, "{}", r.text());
            bearer(&a.url, r.json()["token"].as_str().unwrap())
        }
    };
    let mine = scoped(json!([id])).await;
    let other = scoped(json!(["some-other-session"])).await;
    let listed = |r: Resp| -> Vec<Value> {
        r.json()["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["sessionId"].clone())
            .collect()
    };
    assert_eq!(listed(mine.get("/api/sessions").await), vec![json!(id)]);
    assert_eq!(
        listed(other.get("/api/sessions").await),
        Vec::<Value>::new()
    );
    assert_eq!(mine.get(&format!("/api/sessions/{id}")).await.status, 200);
    let r = other.get(&format!("/api/sessions/{id}")).await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert!(
        r.text().contains("outside this token's sessions"),
        "{}",
        r.text()
    );
    assert_eq!(
        other
            .get(&format!("/api/sessions/{id}/events"))
            .await
            .status,
        403
    );
    assert_eq!(mine.get("/api/stream").await.status, 403);
    assert_eq!(mine.post("/api/sessions", &start).await.status, 403);

    // The admin token can do all: change rules.
    let r = admin.post("/api/rules", &rule).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = admin.delete("/api/rules/allow-ls").await;
    assert_eq!(r.status, 204, "{}", r.text());

    // A revoked token is refused at once, here and on the other instance.
    let vera_b = b.map(|b| bearer(&b.url, &vera_secret));
    if let Some(vb) = &vera_b {
        assert_eq!(vb.get("/api/sessions").await.status, 200);
    }
    let r = admin.delete(&format!("/api/tokens/{vera_tok_id}")).await;
    assert_eq!(r.status, 204, "{}", r.text());
    assert_eq!(vera.get("/api/sessions").await.status, 401);
    if let Some(vb) = &vera_b {
        let r = vb.get("/api/sessions").await;
        assert_eq!(
            r.status,
            401,
            "the other instance refuses it too: {}",
            r.text()
        );
    }
    // A disabled user (a colleague who left) is refused at once, on every instance.
    let april_b = b.map(|b| bearer(&b.url, &april_secret));
    assert_eq!(april.get("/api/sessions").await.status, 200);
    let r = admin
        .post("/api/users/April%20Approver", &json!({"disabled": true}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.json()["disabledAt"].is_i64(), "{}", r.text());
    assert_eq!(april.get("/api/sessions").await.status, 401);
    if let Some(ab) = &april_b {
        assert_eq!(ab.get("/api/sessions").await.status, 401);
    }
    let listed = admin.get("/api/tokens").await.json();
    let row = listed["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == vera_tok_id.as_str())
        .cloned()
        .unwrap();
    assert!(
        row["revokedAt"].is_i64() && row["lastUsedAt"].is_i64(),
        "{row}"
    );
    assert!(
        row.get("hash").is_none() && row.get("token").is_none(),
        "{row}"
    );

    // The audit export lists every action with the person's name.
    let r = admin.get("/api/audit/export").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        r.header("content-type")
            .unwrap_or_default()
            .contains("ndjson")
    );
    let lines: Vec<Value> = r
        .text()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let find = |action: &str, name: &str| {
        lines
            .iter()
            .find(|l| l["action"] == action && l["person"]["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {action} by {name} in {lines:#?}"))
    };
    let started = find("session.start", "Otto Operator");
    assert_eq!(started["session"], id.as_str());
    assert_eq!(started["person"]["role"], "operator");
    let answered = find("request.answer", "Ivan Invited");
    assert_eq!(answered["request"], request.as_str());
    assert_eq!(answered["decision"], "approve");
    assert_eq!(answered["session"], id.as_str());
    assert_eq!(find("rule.put", "admin-token")["rule"], "allow-ls");
    assert_eq!(find("rule.delete", "admin-token")["rule"], "allow-ls");
    assert_eq!(
        find("token.revoke", "admin-token")["action"],
        "token.revoke"
    );
    let denied = find("access.denied", "Vera Viewer");
    assert_eq!(denied["detail"]["needs"], "operator");
    // Filters: one person's entries only.
    let r = admin.get("/api/audit?user=Ivan%20Invited").await;
    let entries = r.json()["entries"].as_array().unwrap().clone();
    assert!(!entries.is_empty());
    assert!(
        entries
            .iter()
            .all(|e| e["person"]["name"] == "Ivan Invited"),
        "{entries:?}"
    );
    let r = admin
        .get(&format!("/api/audit?session={id}&action=session."))
        .await;
    let actions: Vec<Value> = r.json()["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].clone())
        .collect();
    assert_eq!(actions, vec![json!("session.start")]);
}

fn script(bed: &Bed) {
    bed.model.route(
        "PEOPLE",
        [
            Reply::exec("touch made.txt", "people-1"),
            Reply::text("made it"),
        ],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_roles_invitations_revocation_and_the_audit_export() {
    let bed = Bed::start(codex_relay_testkit::NEWEST).await;
    script(&bed);
    let relay = HttpRelay::start(bed.args(120_000)).await;
    tokio::time::timeout(TURN * 2, scenario(&bed, &relay, None))
        .await
        .expect("the scenario ends in time");
    relay.stop().await;
    bed.assert_no_codex_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_postgres_roles_and_a_revocation_holds_on_every_instance() {
    let Some(db) =
        fresh_schema("cluster_postgres_roles_and_a_revocation_holds_on_every_instance").await
    else {
        return;
    };
    let bed = Bed::start(codex_relay_testkit::NEWEST).await;
    script(&bed);
    let a = instance(&bed, &db, "A").await;
    let b = instance(&bed, &db, "B").await;
    tokio::time::timeout(TURN * 2, scenario(&bed, &a, Some(&b)))
        .await
        .expect("the scenario ends in time");
    a.stop().await;
    b.stop().await;
    bed.assert_no_codex_left().await;
}

/// The invitation and the People view in real Chromium (skipped, counted, where the browser
/// cannot be had): the invited viewer is signed in by the link and refused the admin's view;
/// the link works once; the admin sees the user and the audit log. On a session waiting for an
/// approval (real Codex), the viewer is offered no answer, message or start, and told why; the
/// admin is offered them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invitation_in_the_browser_and_the_people_view() {
    let Some((node, _codex)) = crate::browser::set_up(codex_relay_testkit::NEWEST) else {
        return;
    };
    let bed = Bed::start(codex_relay_testkit::NEWEST).await;
    bed.model.route(
        "PEOPLE-VIEW",
        [
            Reply::exec("touch watched.txt", "people-view-1"),
            Reply::text("done"),
        ],
    );
    let relay = HttpRelay::start(bed.args(300_000)).await;
    let admin = Client::new(&relay.url);
    let r = admin
        .post(
            "/api/sessions",
            &json!({"prompt": "PEOPLE-VIEW: make a file", "cwd": bed.home.workspace(),
                "approvalPolicy": "untrusted", "sandbox": "workspace-write"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let session = r.json()["sessionId"].as_str().unwrap().to_owned();
    view_until(&admin, &session, "the request opens", |v| {
        v["pending"][0]["id"].is_string()
    })
    .await;
    let r = admin
        .post(
            "/api/invitations",
            &json!({"name": "Paula Viewer", "role": "viewer"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let path = r.json()["path"].as_str().unwrap().to_owned();
    let url = relay.url.trim_end_matches("/mcp").to_owned();
    let findings: Value = tokio::task::spawn_blocking(move || {
        crate::browser::drive_script_with(
            &node,
            "people.mjs",
            &url,
            "people",
            crate::browser::LogIn::Token(codex_relay_testkit::RELAY_TEST_TOKEN.to_owned()),
            &[("INVITE_PATH", path), ("SESSION_ID", session)],
        )
    })
    .await
    .unwrap();
    assert_eq!(findings["token"], true, "{findings}");
    assert_eq!(
        findings["viewerButtons"],
        json!({"approve": 0, "message": 0, "interrupt": 0}),
        "{findings}"
    );
    assert_eq!(
        findings["adminButtons"],
        json!({"approve": 1, "message": 1, "newSession": 1, "watchOnly": 0}),
        "{findings}"
    );
    assert!(
        findings["again"]
            .as_str()
            .unwrap_or_default()
            .contains("already used"),
        "{findings}"
    );
    assert!(
        findings["denied"]
            .as_str()
            .unwrap_or_default()
            .contains("Paula Viewer"),
        "{findings}"
    );
    // The audit log in the store says the same.
    let r = admin.get("/api/audit?action=access.denied").await;
    let entries = r.json()["entries"].as_array().unwrap().clone();
    assert!(
        entries
            .iter()
            .any(|e| e["person"]["name"] == "Paula Viewer" && e["person"]["front"] == "ui"),
        "{entries:?}"
    );
    relay.stop().await;
}

/// Over MCP (the official TypeScript SDK over HTTP) with personal tokens: the viewer's
/// `codex_respond` is refused before it runs; the approver's answers the real request, and the
/// tool's answer, the status items and the audit log name the approver.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approver_answers_over_mcp_and_is_named() {
    let bed = Bed::start(codex_relay_testkit::NEWEST).await;
    bed.model.route(
        "PEOPLE-MCP",
        [
            Reply::exec("touch by-mcp.txt", "people-mcp-1"),
            Reply::text("done over mcp"),
        ],
    );
    let relay = HttpRelay::start(bed.args(120_000)).await;
    let admin = Client::new(&relay.url);
    let (_, vic) = user_with_token(&admin, "Vic Viewer", "viewer").await;
    let (_, mia) = user_with_token(&admin, "Mia Approver", "approver").await;
    let ws = bed.home.workspace().to_path_buf();
    let r = admin
        .post(
            "/api/sessions",
            &json!({"prompt": "PEOPLE-MCP: make a file", "cwd": ws,
                "approvalPolicy": "untrusted", "sandbox": "workspace-write"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let asked = view_until(&admin, &id, "the request opens", |v| {
        v["pending"][0]["id"].is_string()
    })
    .await;
    let request = asked["pending"][0]["id"].as_str().unwrap().to_owned();
    let answer = json!({"sessionId": id, "id": request, "answers": ["approve"]});

    let mut viewer = Driver::spawn(Sdk::Node).await;
    viewer.connect_http_with_token(&relay.url, &vic).await;
    let refused = viewer.call("codex_respond", answer.clone()).await;
    assert!(
        refused.get("thrown").is_some() || refused["isError"] == true,
        "{refused}"
    );
    viewer.close().await;
    assert!(
        admin.get(&format!("/api/sessions/{id}")).await.json()["pending"][0]["id"]
            == request.as_str(),
        "the viewer's answer did nothing"
    );

    let mut approver = Driver::spawn(Sdk::Node).await;
    approver.connect_http_with_token(&relay.url, &mia).await;
    let out = approver.ok("codex_respond", answer).await;
    assert_eq!(out["decision"], "approve", "{out}");
    assert_eq!(out["answeredByUser"]["name"], "Mia Approver", "{out}");
    let (done, _) = approver
        .status_until(&id, TURN, |s| {
            s["status"] == "done" || s["status"] == "idle"
        })
        .await;
    let item = done["itemEvents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["itemType"] == "approval")
        .cloned()
        .unwrap_or_else(|| panic!("an approval item: {done}"));
    assert_eq!(item["answeredBy"], "mcp", "{item}");
    assert_eq!(item["answeredByUser"]["name"], "Mia Approver", "{item}");
    approver.close().await;
    assert!(ws.join("by-mcp.txt").exists());

    let r = admin.get("/api/audit?user=Mia%20Approver").await;
    let entries = r.json()["entries"].as_array().unwrap().clone();
    let answered = entries
        .iter()
        .find(|e| e["action"] == "mcp.codex_respond")
        .unwrap_or_else(|| panic!("{entries:?}"));
    assert_eq!(answered["request"], request.as_str());
    assert_eq!(answered["decision"], "approve");
    assert_eq!(answered["person"]["front"], "mcp");
    let r = admin
        .get("/api/audit?user=Vic%20Viewer&action=access.denied")
        .await;
    assert!(
        !r.json()["entries"].as_array().unwrap().is_empty(),
        "{}",
        r.text()
    );
    relay.stop().await;
    bed.assert_no_codex_left().await;
}
