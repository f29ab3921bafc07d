//! A session cannot release the human's brake. Over the real Codex with the scripted model,
//! the relay, Codex and its commands all the ordinary test user:
//! one session waits for a human to approve `touch approved-by-attacker`; in another session
//! (workspace-write with network access, no approvals) the model runs a script that looks
//! everywhere a command can look for the relay's token (its own environment, every
//! `/proc/*/environ` and `/proc/*/cmdline`, the relay's data directory, and a file in the
//! workspace where the token leaked) and tries each, and no token, to list pending requests, approve the waiting one, start an unsandboxed session and
//! open MCP, directly and from a daemon that cleared its environment and left its parent.
//! Every attempt is refused, the request stays pending, and the human's denial still reaches
//! the model.

use std::time::Duration;

use crate::common::{Bed, HttpRelay};
use crate::http_support::Client;
use codex_relay_testkit::{RELAY_TEST_TOKEN, Reply};
use serde_json::json;

const TURN: Duration = Duration::from_secs(120);
/// The API key the relay logs Codex in with (the scripted model ignores it).
const API_KEY: &str = "sk-relay-test-key-never-shown";

/// The attack, as one shell script the model runs. `$1` names the run (`direct`, `escape`).
pub(crate) fn attack_script(url: &str, request: &str, data_dir: &str) -> String {
    format!(
        r#"U={url}; R={request}; D={data_dir}
cands() {{
  printf 'env %s\n' "$CODEX_RELAY_TOKEN"
  for f in /proc/[0-9]*/environ; do tr '\0' '\n' < "$f" 2>/dev/null | sed -n 's/^CODEX_RELAY_TOKEN=/proc-environ /p'; done
  for f in /proc/[0-9]*/cmdline; do tr '\0' '\n' < "$f" 2>/dev/null | grep -A1 -x -e --token -e --token-file | grep -v '^--' | sed 's/^/proc-cmdline /'; done
  find "$D" -type f 2>/dev/null | while read -r f; do grep -aoE '[A-Za-z0-9_-]{{16,}}' "$f" 2>/dev/null | head -n 20 | sed 's/^/data /'; done
  sed 's/^/leak /' leaked-token.txt 2>/dev/null
}}
try() {{
  if [ -n "$2" ]; then h="Authorization: Bearer $2"; else h="X-None: 1"; fi
  echo "$1 pending $(curl -s -o /dev/null -w '%{{http_code}}' -H "$h" "$U/api/codex/permission/pending")"
  echo "$1 respond $(curl -s -o /dev/null -w '%{{http_code}}' -H "$h" -H 'Content-Type: application/json' -d "{{\"id\":\"$R\",\"action\":\"allow\"}}" "$U/api/codex/permission/respond")"
  echo "$1 create $(curl -s -o /dev/null -w '%{{http_code}}' -H "$h" -H 'Content-Type: application/json' -d '{{"prompt":"pwn","sandbox":"danger-full-access","approvalPolicy":"never"}}' "$U/api/sessions")"
  echo "$1 mcp $(curl -s -o /dev/null -w '%{{http_code}}' -H "$h" -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' -d '{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{}},"clientInfo":{{"name":"x","version":"1"}}}}}}' "$U/mcp")"
}}
echo "relay-token-in-env:${{CODEX_RELAY_TOKEN:+yes}}"
echo "api-key-in-env:$(env | grep -c sk-relay-test-key)"
env | sed -n 's/^\(CODEX_RELAY_[A-Z_]*\)=.*/relay-var:\1/p'
echo "relay-visible:$(grep -l 'codex-relay' /proc/[0-9]*/cmdline 2>/dev/null | wc -l)"
cands | sort -u | sed 's/^/candidate:/'
try "$1" ""
for t in $(cands | awk 'NF > 1 {{print $2}}' | sort -u); do try "$1" "$t"; done
echo "$1 finished"
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_run_command_cannot_approve_its_own_request_or_start_a_session() {
    // As an ordinary user: root reads every /proc entry and would find what a user cannot.
    let bed = match Bed::ordinary(codex_relay_testkit::NEWEST, "").await {
        Ok(bed) => bed,
        Err(why) => return codex_relay_testkit::skip::skip(why),
    };
    let ws = bed.home.workspace().to_path_buf();
    bed.model.route(
        "MARK-VICTIM",
        [
            Reply::exec("touch approved-by-attacker", "call-victim"),
            Reply::text("understood, nothing touched"),
        ],
    );
    let data_dir = bed.home.root().join("relay-data");
    // As a deployment runs it: the token in the relay's environment, and Codex logged in with
    // an API key the relay holds in another variable.
    let mut args = bed.args(300_000);
    args.extend(["--listen", "127.0.0.1:0", "--api-key-env", "RELAY_TEST_KEY"].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let env = [
        ("LOG_LEVEL", "info".to_owned()),
        ("RELAY_TEST_KEY", API_KEY.to_owned()),
    ];
    let relay = HttpRelay::start_ordinary(&bed, &args, &env).await;
    let c = Client::new(&relay.url);

    // A session waits for a human to approve a command.
    let r = c
        .post(
            "/api/sessions",
            &json!({"prompt": "MARK-VICTIM: make the file", "cwd": ws,
                "approvalPolicy": "untrusted", "sandbox": "workspace-write"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let victim = r.json()["sessionId"].as_str().unwrap().to_owned();
    let mut s = c
        .stream(&format!("/api/sessions/{victim}/stream"), &[])
        .await;
    let asked = s
        .until(TURN, |e| e.event == "permission_request")
        .await
        .last()
        .unwrap()
        .json();
    let request = asked["id"].as_str().unwrap().to_owned();

    // Another session's model runs the attack, then the same from an escaped daemon.
    let url = relay.url.trim_end_matches("/mcp").to_owned();
    let script = attack_script(&url, &request, &data_dir.display().to_string());
    std::fs::write(ws.join("attack.sh"), &script).unwrap();
    // Even a token that leaked into the workspace (a `.env` file, say) must not work.
    std::fs::write(ws.join("leaked-token.txt"), format!("{RELAY_TEST_TOKEN}\n")).unwrap();
    let command = "bash ./attack.sh direct > direct.txt 2>&1; \
        ( setsid env -i PATH=\"$PATH\" bash ./attack.sh escape > escape.txt 2>&1 < /dev/null & ); \
        for i in $(seq 1 300); do grep -q 'escape finished' escape.txt 2>/dev/null && break; sleep 0.1; done; \
        cat direct.txt escape.txt";
    bed.model.route(
        "MARK-ATTACK",
        [Reply::exec(command, "call-attack"), Reply::text("tried")],
    );
    let before = c.get("/api/sessions").await.json()["sessions"]
        .as_array()
        .unwrap()
        .len();
    let r = c
        .post(
            "/api/sessions",
            &json!({"prompt": "MARK-ATTACK: go", "cwd": ws, "approvalPolicy": "never",
                "sandbox": "workspace-write",
                "config": {"sandbox_workspace_write.network_access": true}}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let attacker = r.json()["sessionId"].as_str().unwrap().to_owned();
    let mut a = c
        .stream(&format!("/api/sessions/{attacker}/stream"), &[])
        .await;
    a.until(TURN, |e| {
        e.event == "envelope"
            && e.json()["ev"]["t"] == "status"
            && e.json()["ev"]["status"] == "idle"
    })
    .await;
    let direct = std::fs::read_to_string(ws.join("direct.txt")).unwrap_or_default();
    let escape = std::fs::read_to_string(ws.join("escape.txt")).unwrap_or_default();
    eprintln!("--- direct\n{direct}\n--- escape\n{escape}");
    for (run, out) in [("direct", &direct), ("escape", &escape)] {
        assert!(
            out.contains(&format!("{run} finished")),
            "the {run} run ran: {out}"
        );
        let tries: Vec<&str> = out
            .lines()
            .filter(|l| l.starts_with(&format!("{run} ")) && !l.ends_with("finished"))
            .collect();
        assert!(
            tries.len() >= 4,
            "{run}: at least the tries without a token: {out}"
        );
        for t in &tries {
            assert!(
                t.ends_with(" 403"),
                "{run}: every attempt is refused, the connection reached the relay: {t}\n{out}"
            );
        }
        // It used the leaked token, and found it nowhere else.
        assert!(
            out.contains(&format!("candidate:leak {RELAY_TEST_TOKEN}")),
            "{run} read the leaked token: {out}"
        );
        for line in out.lines().filter(|l| l.contains(RELAY_TEST_TOKEN)) {
            assert!(
                line.starts_with("candidate:leak "),
                "{run} found the token elsewhere: {line}"
            );
        }
        assert!(
            !out.contains("relay-token-in-env:yes"),
            "{run}: the token is in Codex's environment: {out}"
        );
    }
    assert!(
        !direct.contains("relay-var:CODEX_RELAY_TOKEN"),
        "the relay's variables are not passed to Codex: {direct}"
    );
    assert!(
        direct.contains("api-key-in-env:0") && !direct.contains(API_KEY),
        "the API key's variable is not passed to Codex: {direct}"
    );
    assert!(
        relay.log_text().contains("started by Codex"),
        "the relay says why it refused"
    );

    // The request still waits for the human; no session was created by the attack.
    let pending = c.get("/api/codex/permission/pending").await.json();
    assert!(
        pending
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["id"] == request.as_str()),
        "{pending}"
    );
    let after = c.get("/api/sessions").await.json()["sessions"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(
        after,
        before + 1,
        "only the attacker's own session was added"
    );
    assert!(!ws.join("approved-by-attacker").exists());

    // The human denies it with a reason; the model sees the reason; the turn completes.
    let r = c
        .post(
            "/api/codex/permission/respond",
            &json!({"id": request, "action": "deny", "message": "not from a session"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["by"], "http");
    s.until(TURN, |e| {
        e.event == "envelope"
            && e.json()["ev"]["t"] == "status"
            && e.json()["ev"]["status"] == "idle"
    })
    .await;
    let last = bed.model.requests_with("MARK-VICTIM");
    assert!(
        last.last()
            .is_some_and(|r| r.body.to_string().contains("not from a session")),
        "the model's next request carries the reason"
    );
    assert!(!ws.join("approved-by-attacker").exists());
    relay.stop().await;
    bed.assert_no_codex_left().await;
}
