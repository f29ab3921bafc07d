//! The README settings rows of approval rules, notifications and the shared ChatGPT login, on
//! `codex-relay serve`, each set through its environment variable (`http_rules.rs` and
//! `http_answer_links.rs` use the flags): `CODEX_RELAY_RULES` loads the file's rules,
//! `CODEX_RELAY_NOTIFY` the file's webhooks, and `CODEX_RELAY_LOGIN_REFRESH=relay` refuses to
//! start without a login to refresh. The defaults: no rules, Web Push only, and `auto`, which
//! starts without a login. The rest of the table is `mcp_knobs.rs` and `cluster_knobs.rs`.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::common::{Bed, HttpRelay, RELAY};
use crate::http_support::Client;
use codex_relay_testkit::{NEWEST, RELAY_TEST_TOKEN};
use serde_json::Value;

fn path_str(p: &Path) -> String {
    p.display().to_string()
}

/// What every start here shares: the bed's Codex and CODEX_HOME, a data directory of its own,
/// any free loopback port, the test token, info logs.
fn base_env(bed: &Bed, data: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("PATH", std::env::var("PATH").unwrap_or_default()),
        ("HOME", path_str(bed.home.root())),
        ("CODEX_CLI_PATH", path_str(&bed.codex)),
        ("CODEX_HOME", path_str(bed.home.path())),
        ("CODEX_RELAY_DATA_DIR", path_str(data)),
        ("CODEX_RELAY_LISTEN", "127.0.0.1:0".into()),
        ("CODEX_RELAY_TOKEN", RELAY_TEST_TOKEN.into()),
        ("LOG_LEVEL", "info".into()),
    ]
}

/// The log line that says which notifications run, without terminal colour codes.
fn notifications_line(log: &str) -> String {
    let line = log
        .lines()
        .find(|l| l.contains("notifications on"))
        .unwrap_or_else(|| panic!("no `notifications on` line in {log}"));
    let mut out = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            chars.by_ref().find(|c| c.is_ascii_alphabetic());
        } else {
            out.push(c);
        }
    }
    out
}

/// The rules `/api/rules` lists, as (name, source).
async fn rules(relay: &HttpRelay) -> Vec<(Value, Value)> {
    let r = Client::new(&relay.url).get("/api/rules").await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["rules"]
        .as_array()
        .unwrap_or_else(|| panic!("rules: {}", r.text()))
        .iter()
        .map(|r| (r["name"].clone(), r["source"].clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_notify_and_login_refresh_from_the_environment_take_effect() {
    let bed = Bed::start(NEWEST).await;
    let rules_file = bed.home.root().join("knob-rules.toml");
    std::fs::write(
        &rules_file,
        "[[rule]]\nname = \"knob-allow-git-status\"\naction = \"allow\"\nargv = [\"git\", \"status\"]\n",
    )
    .unwrap();
    let notify_file = bed.home.root().join("knob-notify.toml");
    std::fs::write(
        &notify_file,
        "push = false\n\n[[webhook]]\nname = \"knob\"\nurl = \"http://127.0.0.1:9/knob\"\nformat = \"ntfy\"\n",
    )
    .unwrap();

    // CODEX_RELAY_RULES and CODEX_RELAY_NOTIFY.
    let mut env = base_env(&bed, &bed.home.root().join("data-set"));
    env.push(("CODEX_RELAY_RULES", path_str(&rules_file)));
    env.push(("CODEX_RELAY_NOTIFY", path_str(&notify_file)));
    let relay = HttpRelay::start_with_env(&[], &env).await;
    let listed = rules(&relay).await;
    assert!(
        listed.contains(&("knob-allow-git-status".into(), "file".into())),
        "{listed:?}"
    );
    let line = notifications_line(&relay.log_text());
    assert!(
        line.contains("webhooks=1") && line.contains("push=false"),
        "{line}"
    );
    drop(relay);

    // With neither: no rules, Web Push only; and no login in CODEX_HOME does not stop `auto`.
    let relay =
        HttpRelay::start_with_env(&[], &base_env(&bed, &bed.home.root().join("data-none"))).await;
    assert_eq!(rules(&relay).await, vec![]);
    let line = notifications_line(&relay.log_text());
    assert!(
        line.contains("webhooks=0") && line.contains("push=true"),
        "{line}"
    );
    drop(relay);

    // CODEX_RELAY_LOGIN_REFRESH=relay: the relay must refresh a login, and CODEX_HOME holds
    // none, so serve refuses to start and says why.
    let mut env = base_env(&bed, &bed.home.root().join("data-relay-login"));
    env.push(("CODEX_RELAY_LOGIN_REFRESH", "relay".into()));
    let out = tokio::process::Command::new(RELAY)
        .arg("serve")
        .env_clear()
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(30), out)
        .await
        .expect("serve gives up within 30 s")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("login refresh `relay`") && stderr.contains("no ChatGPT login"),
        "{stderr}"
    );
    bed.assert_no_codex_left().await;
}
