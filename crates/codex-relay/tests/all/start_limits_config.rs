//! The operator's start limits (`--max-sandbox workspace-write --max-approval-policy
//! on-request`) hold against everything that reaches Codex's configuration, over the real
//! Codex with the relay, Codex and its commands running as an ordinary user, and every
//! approval left to time out (declined): a `notify` override (a program Codex runs unsandboxed
//! at a turn's end) is refused on every front; a session that asks for nothing while
//! CODEX_HOME's `config.toml` says `danger-full-access` and `never` runs in the workspace
//! sandbox (on `serve` beyond loopback, with no limit flag); a profile (its own file, or a
//! `[profiles.<name>]` table as Codex 0.98 keeps them) is judged by what it sets (these two
//! on 0.169 and 0.98); and a session resumed after the limits were tightened is refused before its turn
//! runs. Each case says where the model's file outside the workspace ended up.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::{Bed, Driver, HttpRelay, Sdk, Transport};
use crate::http_support::{self, Client};
use crate::legacy_support::LegacyDriver;
use codex_relay_testkit::Reply;
use codex_relay_testkit::ordinary::Ordinary;
use serde_json::{Value, json};

const TURN: Duration = Duration::from_secs(120);

codex_relay_testkit::for_each_codex!(
    a_session_that_asks_for_nothing_gets_the_limit_not_codexs_full_access,
    a_profile_is_judged_by_the_settings_it_brings,
);

/// Writes outside the workspace are blocked by the sandbox even for `/tmp` and `$TMPDIR`.
const NO_TMP: &str =
    "[sandbox_workspace_write]\nexclude_slash_tmp = true\nexclude_tmpdir_env_var = true\n";

const LIMITS: [&str; 4] = [
    "--max-sandbox",
    "workspace-write",
    "--max-approval-policy",
    "on-request",
];

fn code(r: &http_support::Resp) -> String {
    r.json()["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// A directory outside the workspace that the ordinary user may write to (so only the
/// sandbox stands between a command and it).
fn outside(bed: &Bed) -> PathBuf {
    let dir = bed.home.root().join("outside");
    std::fs::create_dir_all(&dir).unwrap();
    Ordinary::get().unwrap().chown(&dir);
    dir
}

/// `serve` as the ordinary user with the bed's engine flags, approvals timing out after 5 s
/// (declined), plus `extra`.
async fn serve(bed: &Bed, extra: &[&str]) -> HttpRelay {
    let mut args = bed.args(5_000);
    args.extend(extra.iter().map(|s| s.to_string()));
    if !extra.contains(&"--listen") {
        args.extend(["--listen".into(), "127.0.0.1:0".into()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    HttpRelay::start_ordinary(bed, &args, &[("LOG_LEVEL", "info".into())]).await
}

/// Waits until `n` turns of the session have ended (the stream replays the earlier ones).
async fn until_turns_end(c: &Client, id: &str, n: usize) {
    let ended = std::cell::Cell::new(0);
    let mut s = c.stream(&format!("/api/sessions/{id}/stream"), &[]).await;
    s.until(TURN, |e| {
        if e.event == "envelope" && e.json()["ev"]["t"] == "turn-end" {
            ended.set(ended.get() + 1);
        }
        ended.get() >= n
    })
    .await;
}

/// Waits for the session's first turn to end.
async fn until_idle(c: &Client, id: &str) {
    until_turns_end(c, id, 1).await;
}

/// Where the file ended up, in words for a failure message.
fn whereabouts(file: &Path) -> String {
    format!(
        "{} {}",
        file.display(),
        if file.exists() {
            "EXISTS (written outside the workspace with nobody asked)"
        } else {
            "does not exist"
        }
    )
}

/// For a request the relay should have refused: if it took it, let the turn run and say
/// where the model's file went.
async fn refused(c: &Client, r: &http_support::Resp, leak: &Path, says: &[&str]) {
    if r.status == 201 || r.status == 200 || r.status == 202 {
        if let Some(id) = r.json()["sessionId"].as_str() {
            until_idle(c, id).await;
        }
        panic!(
            "accepted ({}): {}; after the turn {}",
            r.status,
            r.text(),
            whereabouts(leak)
        );
    }
    assert_eq!(
        (r.status, code(r)),
        (403, "forbidden_option".into()),
        "{}",
        r.text()
    );
    for word in says {
        assert!(r.text().contains(word), "{word:?} in {}", r.text());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notify_program_is_refused_on_every_front_while_sessions_are_limited() {
    let bed = match Bed::ordinary(codex_relay_testkit::NEWEST, NO_TMP).await {
        Ok(bed) => bed,
        Err(why) => return codex_relay_testkit::skip::skip(why),
    };
    let ws = bed.home.workspace().to_path_buf();
    let out = outside(&bed);
    let leak = out.join("notified.txt");
    bed.model.route("MARK-NOTIFY", [Reply::text("done")]);
    bed.model
        .route("MARK-WITHIN", [Reply::text("within the limits")]);
    let relay = serve(&bed, &LIMITS).await;
    let c = Client::new(&relay.url);
    let notify = json!(["sh", "-c", format!("touch {}", leak.display())]);

    // HTTP: refused, naming the key and the limits.
    let r = c
        .post(
            "/api/sessions",
            &json!({"prompt": "MARK-NOTIFY go", "cwd": ws, "sandbox": "workspace-write",
                "approvalPolicy": "on-request", "config": {"notify": notify}}),
        )
        .await;
    refused(&c, &r, &leak, &["notify", "workspace-write", "on-request"]).await;
    // Dotted, nested and sandbox-widening spellings too.
    for config in [
        json!({"mcp_servers.evil.command": "sh"}),
        json!({"sandbox_workspace_write": {"writable_roots": [out]}}),
        json!({"sandbox_workspace_write.network_access": true}),
        json!({"shell_environment_policy.inherit": "all"}),
        json!({"approvals_reviewer": "auto_review"}),
    ] {
        let key = config.as_object().unwrap().keys().next().unwrap().clone();
        let r = c
            .post(
                "/api/sessions",
                &json!({"prompt": "MARK-NOTIFY go", "cwd": ws, "config": config}),
            )
            .await;
        refused(&c, &r, &leak, &[&key]).await;
    }
    // A key that only tunes the model is still taken.
    let r = c
        .post(
            "/api/sessions",
            &json!({"prompt": "MARK-WITHIN go", "cwd": ws,
                "config": {"model_reasoning_effort": "low"}}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    until_idle(&c, r.json()["sessionId"].as_str().unwrap()).await;

    // MCP over HTTP and the legacy `codex` tool: the same refusal.
    let mut mcp = Driver::spawn(Sdk::Node).await;
    mcp.connect(Transport::Http, &[], &relay.url).await;
    let answer = mcp
        .call(
            "codex_start",
            json!({"prompt": "MARK-NOTIFY go", "workingDirectory": ws,
                "config": {"notify": notify}}),
        )
        .await;
    assert_eq!(answer["isError"], true, "{answer}");
    assert!(text_of(&answer).contains("notify"), "{answer}");
    mcp.close().await;
    let mut legacy = LegacyDriver::spawn().await;
    legacy
        .cmd(json!({"op": "connect", "url": format!("{}-server", relay.url), "elicitation": true,
            "headers": {"Authorization": format!("Bearer {}", codex_relay_testkit::RELAY_TEST_TOKEN)}}))
        .await;
    let answer = legacy
        .call(
            "codex",
            json!({"prompt": "MARK-NOTIFY go", "cwd": ws, "config": {"notify": notify}}),
            &[],
            json!({"timeoutMs": 30000, "settleMs": 0}),
        )
        .await;
    let said = answer.to_string();
    assert!(
        said.contains("not allowed by this relay's policy") && said.contains("notify"),
        "{answer}"
    );
    legacy.close().await;
    assert!(!leak.exists(), "{}", whereabouts(&leak));
    relay.stop().await;
    bed.assert_no_codex_left().await;
}

fn text_of(answer: &Value) -> String {
    answer["text"].as_str().unwrap_or_default().to_owned()
}

async fn a_session_that_asks_for_nothing_gets_the_limit_not_codexs_full_access(
    version: &'static str,
) {
    let toml =
        format!("sandbox_mode = \"danger-full-access\"\napproval_policy = \"never\"\n{NO_TMP}");
    let bed = match Bed::ordinary(version, &toml).await {
        Ok(bed) => bed,
        Err(why) => return codex_relay_testkit::skip::skip(why),
    };
    let ws = bed.home.workspace().to_path_buf();
    let leak = outside(&bed).join("leak.txt");
    let command = format!("touch inside.txt; touch {}", leak.display());
    bed.model.route(
        "MARK-UNSET",
        [Reply::exec(&command, "call-unset"), Reply::text("tried")],
    );
    // `serve` beyond loopback with no limit flag: strict by default (its only root given).
    let relay = serve(
        &bed,
        &["--listen", "0.0.0.0:0", "--allow-cwd", ws.to_str().unwrap()],
    )
    .await;
    let c = Client::new(&relay.url);
    let r = c
        .post(
            "/api/sessions",
            &json!({"prompt": "MARK-UNSET: make the files", "cwd": ws}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    until_idle(&c, r.json()["sessionId"].as_str().unwrap()).await;
    assert!(
        ws.join("inside.txt").exists(),
        "the command ran, in the workspace"
    );
    assert!(!leak.exists(), "{}", whereabouts(&leak));
    relay.stop().await;
    bed.assert_no_codex_left().await;
}

async fn a_profile_is_judged_by_the_settings_it_brings(version: &'static str) {
    // A profile as Codex 0.98 keeps it: a table of config.toml.
    let toml = format!("[profiles.wide]\nsandbox_mode = \"danger-full-access\"\n{NO_TMP}");
    let bed = match Bed::ordinary(version, &toml).await {
        Ok(bed) => bed,
        Err(why) => return codex_relay_testkit::skip::skip(why),
    };
    let ws = bed.home.workspace().to_path_buf();
    let leak = outside(&bed).join("profiled.txt");
    std::fs::write(
        bed.home.path().join("full.config.toml"),
        "sandbox_mode = \"danger-full-access\"\napproval_policy = \"never\"\n",
    )
    .unwrap();
    std::fs::write(
        bed.home.path().join("fast.config.toml"),
        "model_reasoning_effort = \"low\"\n",
    )
    .unwrap();
    let command = format!("touch inside.txt; touch {}", leak.display());
    bed.model.route(
        "MARK-PROFILE",
        [Reply::exec(&command, "call-profile"), Reply::text("tried")],
    );
    let relay = serve(&bed, &LIMITS).await;
    let c = Client::new(&relay.url);
    let r = c
        .post(
            "/api/sessions",
            &json!({"prompt": "MARK-PROFILE: make the files", "cwd": ws, "profile": "full"}),
        )
        .await;
    refused(
        &c,
        &r,
        &leak,
        &["full.config.toml", "danger-full-access", "workspace-write"],
    )
    .await;
    let r = c
        .post(
            "/api/sessions",
            &json!({"prompt": "MARK-PROFILE: make the files", "cwd": ws, "profile": "wide"}),
        )
        .await;
    refused(
        &c,
        &r,
        &leak,
        &["wide", "config.toml", "danger-full-access"],
    )
    .await;
    let r = c
        .post(
            "/api/sessions",
            &json!({"prompt": "MARK-PROFILE: make the files", "cwd": ws, "profile": "nowhere"}),
        )
        .await;
    refused(&c, &r, &leak, &["no such profile"]).await;
    // A profile within the limits runs, sandboxed.
    let r = c
        .post(
            "/api/sessions",
            &json!({"prompt": "MARK-PROFILE: make the files", "cwd": ws, "profile": "fast",
                "sandbox": "workspace-write"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    until_idle(&c, r.json()["sessionId"].as_str().unwrap()).await;
    assert!(ws.join("inside.txt").exists(), "the command ran");
    assert!(!leak.exists(), "{}", whereabouts(&leak));
    relay.stop().await;
    bed.assert_no_codex_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_resumed_under_tighter_limits_is_refused_before_its_turn_runs() {
    let bed = match Bed::ordinary(codex_relay_testkit::NEWEST, NO_TMP).await {
        Ok(bed) => bed,
        Err(why) => return codex_relay_testkit::skip::skip(why),
    };
    let ws = bed.home.workspace().to_path_buf();
    let leak = outside(&bed).join("resumed.txt");
    bed.model.route("MARK-FIRST", [Reply::text("first turn")]);
    let command = format!("touch {}", leak.display());
    bed.model.route(
        "MARK-LATER",
        [Reply::exec(&command, "call-later"), Reply::text("tried")],
    );
    // Made with full access while the relay allowed it...
    let relay = serve(&bed, &[]).await;
    let c = Client::new(&relay.url);
    let r = c
        .post(
            "/api/sessions",
            &json!({"prompt": "MARK-FIRST hello", "cwd": ws,
                "sandbox": "danger-full-access", "approvalPolicy": "never"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    until_idle(&c, &id).await;
    relay.stop().await;
    // ...and continued after a restart with limits: its stored settings are beyond them.
    let relay = serve(&bed, &LIMITS).await;
    let c = Client::new(&relay.url);
    let r = c
        .post(
            &format!("/api/sessions/{id}/messages"),
            &json!({"text": "MARK-LATER go"}),
        )
        .await;
    if r.status == 200 || r.status == 202 {
        until_turns_end(&c, &id, 2).await;
        panic!(
            "continued ({}): {}; after the turn {}",
            r.status,
            r.text(),
            whereabouts(&leak)
        );
    }
    assert_eq!(
        (r.status, code(&r)),
        (403, "forbidden_option".into()),
        "{}",
        r.text()
    );
    assert!(r.text().contains("danger-full-access"), "{}", r.text());
    assert!(!leak.exists(), "{}", whereabouts(&leak));
    relay.stop().await;
    bed.assert_no_codex_left().await;
}
