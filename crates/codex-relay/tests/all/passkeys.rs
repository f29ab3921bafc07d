//! Passkeys and step-up through `serve` on the newest pinned real Codex with the scripted
//! model, in real Chromium with a virtual authenticator (skipped, counted, where the browser
//! cannot be had). The approver Pia registers a passkey and signs in with it alone. Codex asks
//! to run commands that may leave the sandbox (risky, `outside`): an approval without a passkey
//! check is refused with `step_up_required`, also with her token; from the UI's card and from an
//! answer link it is approved with a fresh passkey assertion, and the answer and the audit log
//! say so. Declining needs no passkey, and neither does approving a patch that stays inside the
//! workspace (`sandboxed`). Her token alone cannot add or remove a passkey of hers; the admin
//! removes it. Codex goes on after each answer.

use std::time::{Duration, Instant};

use crate::common::{Bed, HttpRelay};
use crate::http_answer_links::{path_of, receiver, until_hook, wait_pending};
use crate::http_support::Client;
use codex_relay_testkit::Reply;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(120);

/// A patch adding `file`, the way Codex takes one from the shell tool.
fn patch(file: &str, call: &str) -> Reply {
    Reply::exec(
        &format!(
            "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: {file}\n+hello\n*** End Patch\nEOF\n"
        ),
        call,
    )
}

async fn start(c: &Client, ws: &std::path::Path, marker: &str) -> String {
    let r = c
        .post(
            "/api/sessions",
            &json!({"prompt": format!("{marker}: go"), "cwd": ws,
                "approvalPolicy": "untrusted", "sandbox": "workspace-write"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    r.json()["sessionId"].as_str().unwrap().to_owned()
}

/// The reach of the request `id` open in `session`.
async fn reach_of(c: &Client, session: &str, id: &str) -> Value {
    let snap = c.get(&format!("/api/sessions/{session}")).await.json();
    snap["pending"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["id"] == id)
        .map(|p| p["reach"]["kind"].clone())
        .unwrap_or(Value::Null)
}

/// `codex_respond` over MCP (one posted JSON-RPC message).
async fn mcp_respond(
    c: &Client,
    session: &str,
    id: &str,
    answer: &str,
) -> crate::http_support::Resp {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "codex_respond",
            "arguments": {"sessionId": session, "id": id, "answers": answer}}});
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

/// Waits (with backoff) until `file` exists in the workspace: Codex ran what was approved.
async fn until_file(path: std::path::PathBuf) {
    let deadline = Instant::now() + WAIT;
    let mut pause = Duration::from_millis(20);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(500));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passkeys_sign_in_and_step_up_risky_approvals_in_the_ui_and_by_link() {
    let Some((node, _codex)) = crate::browser::set_up(codex_relay_testkit::NEWEST) else {
        return;
    };
    let bed = Bed::start(codex_relay_testkit::NEWEST).await;
    let ws = bed.home.workspace().to_path_buf();
    for (marker, file) in [
        ("STEP-UI", "ui-risky.txt"),
        ("STEP-LINK", "link-risky.txt"),
        ("STEP-BEARER", "bearer-risky.txt"),
        ("STEP-MCP", "mcp-risky.txt"),
    ] {
        bed.model.route(
            marker,
            [
                Reply::exec(&format!("touch {file}"), &format!("{marker}-1")),
                Reply::text(format!("{marker} done")),
            ],
        );
    }
    bed.model.route(
        "STEP-SAFE",
        [patch("safe.txt", "STEP-SAFE-1"), Reply::text("safe done")],
    );
    let (hook, got) = receiver().await;
    let notify = bed.home.root().join("notify.toml");
    std::fs::write(
        &notify,
        format!(
            "answer_links = true\npush = false\n[[webhook]]\nname = \"ops\"\nurl = \"{hook}\"\nsecret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"\n"
        ),
    )
    .unwrap();
    let mut args = bed.args(600_000);
    args.extend(["--notify".into(), notify.display().to_string()]);
    let relay = HttpRelay::start(args).await;
    let admin = Client::new(&relay.url);
    let r = admin
        .post(
            "/api/users",
            &json!({"name": "Pia Approver", "role": "approver"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let r = admin
        .post("/api/tokens", &json!({"user": "Pia Approver"}))
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let pia_token = r.json()["token"].as_str().unwrap().to_owned();
    let pia =
        Client::anonymous(&relay.url).with_header("Authorization", &format!("Bearer {pia_token}"));

    // The routes are in the API document, and the approval's `stepUp`.
    let api = admin.get("/api/openapi.json").await.json();
    for path in [
        "/api/passkeys",
        "/api/passkeys/register",
        "/api/passkeys/step-up",
        "/api/passkeys/{id}",
        "/login/passkey/options",
        "/login/passkey",
    ] {
        assert!(api["paths"][path].is_object(), "{path} documented");
    }
    assert!(api["components"]["schemas"]["PermissionResponse"]["properties"]["stepUp"].is_object());

    // The relay's own token has no person to verify: it cannot register a passkey.
    let r = admin.post("/api/passkeys/register", &json!({})).await;
    assert_eq!(r.status, 409, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], "named_user_required");

    let ui = start(&admin, &ws, "STEP-UI").await;
    let link = start(&admin, &ws, "STEP-LINK").await;
    let ui_req = wait_pending(&admin, &ui).await;
    let link_req = wait_pending(&admin, &link).await;
    assert_eq!(reach_of(&admin, &ui, &ui_req).await, "outside");
    let approve_url = until_hook(&got, &link_req).await["data"]["answer"]["approveUrl"]
        .as_str()
        .unwrap()
        .to_owned();

    // WebAuthn needs a domain: the browser uses localhost, never 127.0.0.1.
    let base = relay
        .url
        .trim_end_matches("/mcp")
        .replace("127.0.0.1", "localhost");
    let env = [
        ("UI_SESSION", ui.clone()),
        ("UI_REQUEST", ui_req.clone()),
        ("LINK_PATH", path_of(&approve_url)),
        ("LINK_REQUEST", link_req.clone()),
    ];
    let findings: Value = tokio::task::spawn_blocking(move || {
        crate::browser::drive_script_with(
            &node,
            "passkeys.mjs",
            &base,
            "passkeys",
            crate::browser::LogIn::Token(pia_token),
            &env,
        )
    })
    .await
    .unwrap();
    assert_eq!(findings["residentKeys"], 1, "{findings}");
    assert_eq!(findings["loggedOut"], 401, "{findings}");
    assert_eq!(
        findings["me"]["person"]["name"], "Pia Approver",
        "{findings}"
    );
    assert_eq!(findings["bare"]["status"], 403, "{findings}");
    assert_eq!(
        findings["bare"]["body"]["error"]["code"],
        "step_up_required"
    );
    assert!(
        findings["uiDecision"].as_str().is_some_and(
            |d| d.contains("approve") && d.contains("Pia Approver (approver, with a passkey)")
        ),
        "{findings}"
    );
    assert_eq!(findings["linkBare"]["status"], 403, "{findings}");
    assert_eq!(findings["linkBare"]["code"], "step_up_required");
    assert_eq!(findings["linkDecision"], "approve", "{findings}");
    // Codex ran both approved commands.
    until_file(ws.join("ui-risky.txt")).await;
    until_file(ws.join("link-risky.txt")).await;

    // Her passkey is listed with its use; the audit log says the approvals were stepped up.
    let keys = pia.get("/api/passkeys").await.json();
    assert_eq!(keys["passkeys"][0]["name"], "laptop", "{keys}");
    assert!(keys["passkeys"][0]["lastUsedAt"].is_i64(), "{keys}");
    let log = admin.get("/api/audit?action=request.answer").await.json();
    let entries = log["entries"].as_array().unwrap();
    for req in [&ui_req, &link_req] {
        let e = entries
            .iter()
            .find(|e| e["request"] == req.as_str())
            .unwrap_or_else(|| panic!("no audit entry for {req}: {log}"));
        assert_eq!(e["person"]["name"], "Pia Approver", "{e}");
        assert_eq!(e["detail"]["stepUp"]["userVerified"], true, "{e}");
    }

    // Her token (the cookie's value, as a Bearer) needs the passkey too for a risky request;
    // declining needs none; a patch inside the workspace needs none.
    let bearer = start(&admin, &ws, "STEP-BEARER").await;
    let bearer_req = wait_pending(&admin, &bearer).await;
    let r = pia
        .post(
            "/api/codex/permission/respond",
            &json!({"id": bearer_req, "action": "allow"}),
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], "step_up_required");
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("/api/passkeys/step-up")),
        "{}",
        r.text()
    );
    let r = pia
        .post(
            "/api/codex/permission/respond",
            &json!({"id": bearer_req, "action": "deny", "message": "not today"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    // Over MCP (no passkey there) her approval of a risky request is refused before it runs.
    let over_mcp = start(&admin, &ws, "STEP-MCP").await;
    let mcp_req = wait_pending(&admin, &over_mcp).await;
    let r = mcp_respond(&pia, &over_mcp, &mcp_req, "approve").await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], "step_up_required");
    assert!(r.text().contains("answer link"), "{}", r.text());
    let r = pia
        .post(
            "/api/codex/permission/respond",
            &json!({"id": mcp_req, "action": "deny"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let safe = start(&admin, &ws, "STEP-SAFE").await;
    let safe_req = wait_pending(&admin, &safe).await;
    assert_eq!(reach_of(&admin, &safe, &safe_req).await, "sandboxed");
    let r = pia
        .post(
            "/api/codex/permission/respond",
            &json!({"id": safe_req, "action": "allow"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    until_file(ws.join("safe.txt")).await;
    assert!(!ws.join("bearer-risky.txt").exists());
    assert!(!ws.join("mcp-risky.txt").exists());

    // Her open session alone can neither add a passkey (a thief's) nor remove hers (to escape
    // the step-up): both need a check with the passkey she has.
    let id = keys["passkeys"][0]["id"].as_str().unwrap();
    let r = pia.post("/api/passkeys/register", &json!({})).await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], "step_up_required");
    let r = pia
        .send(
            "DELETE",
            &format!("/api/passkeys/{id}"),
            &[("content-type", "application/json")],
            b"{}",
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], "step_up_required");
    // The admin removes it: the next risky approval of hers needs none again.
    let r = admin
        .send("DELETE", &format!("/api/passkeys/{id}"), &[], b"")
        .await;
    assert_eq!(r.status, 204, "{}", r.text());
    assert_eq!(pia.get("/api/passkeys").await.json()["passkeys"], json!([]));
    relay.stop().await;
    bed.assert_no_codex_left().await;
}

/// `--step-up all` on the real Codex: nobody has a passkey, so the relay's token cannot approve
/// a risky request (`step_up_required`, saying why), but declines it; it still approves a patch
/// that stays in the workspace; a risky request's answer link asks for a passkey on its page and
/// refuses an approval without one; a bad `--step-up` word is refused at start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_step_up_all_the_relays_token_cannot_approve_a_risky_request() {
    let bed = Bed::start(codex_relay_testkit::NEWEST).await;
    let ws = bed.home.workspace().to_path_buf();
    bed.model.route(
        "ALL-RISKY",
        [
            Reply::exec("touch all-risky.txt", "ALL-RISKY-1"),
            Reply::text("risky done"),
        ],
    );
    bed.model.route(
        "ALL-SAFE",
        [
            patch("all-safe.txt", "ALL-SAFE-1"),
            Reply::text("safe done"),
        ],
    );
    let (hook, got) = receiver().await;
    let notify = bed.home.root().join("notify.toml");
    std::fs::write(
        &notify,
        format!(
            "answer_links = true\npush = false\n[[webhook]]\nname = \"ops\"\nurl = \"{hook}\"\nsecret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"\n"
        ),
    )
    .unwrap();
    let mut args = bed.args(600_000);
    args.extend(["--step-up".into(), "sometimes".into()]);
    let out = tokio::process::Command::new(crate::common::RELAY)
        .arg("serve")
        .args(&args)
        .env("CODEX_RELAY_TOKEN", codex_relay_testkit::RELAY_TEST_TOKEN)
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("passkey-users"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut args = bed.args(600_000);
    args.extend([
        "--step-up".into(),
        "all".into(),
        "--notify".into(),
        notify.display().to_string(),
    ]);
    let relay = HttpRelay::start(args).await;
    let admin = Client::new(&relay.url);

    let risky = start(&admin, &ws, "ALL-RISKY").await;
    let req = wait_pending(&admin, &risky).await;
    assert_eq!(reach_of(&admin, &risky, &req).await, "outside");
    let r = admin
        .post(
            "/api/codex/permission/respond",
            &json!({"id": req, "action": "allow"}),
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], "step_up_required");
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("relay's token")),
        "{}",
        r.text()
    );
    let r = mcp_respond(&admin, &risky, &req, "approve").await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], "step_up_required");
    // Its answer link asks for a passkey and refuses an approval without one.
    let approve = until_hook(&got, &req).await["data"]["answer"]["approveUrl"]
        .as_str()
        .unwrap()
        .to_owned();
    let link = path_of(&approve);
    let anon = Client::anonymous(&relay.url);
    let page = anon.get(&link).await;
    assert!(
        page.text().contains("Approve once with a passkey"),
        "{}",
        page.text()
    );
    let t = link.split("t=").nth(1).unwrap().split('&').next().unwrap();
    let r = anon
        .send(
            "POST",
            &format!("/answer/{req}"),
            &[
                ("content-type", "application/x-www-form-urlencoded"),
                ("sec-fetch-site", "same-origin"),
            ],
            format!("t={t}&a=approve").as_bytes(),
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert!(r.text().contains("step_up_required"), "{}", r.text());
    // Declining needs no passkey.
    let r = admin
        .post(
            "/api/codex/permission/respond",
            &json!({"id": req, "action": "deny", "message": "no"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());

    let safe = start(&admin, &ws, "ALL-SAFE").await;
    let req = wait_pending(&admin, &safe).await;
    assert_eq!(reach_of(&admin, &safe, &req).await, "sandboxed");
    let r = admin
        .post(
            "/api/codex/permission/respond",
            &json!({"id": req, "action": "allow"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    until_file(ws.join("all-safe.txt")).await;
    assert!(!ws.join("all-risky.txt").exists());
    relay.stop().await;
    bed.assert_no_codex_left().await;
}
