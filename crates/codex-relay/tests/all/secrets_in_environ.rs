//! Nothing of the relay's own settings is in an environment a model-run command can read.
//! Over the real Codex, the relay, Codex and the commands all the ordinary test user: the
//! relay gets its store in `CODEX_RELAY_DB`, its token through `CODEX_RELAY_TOKEN_FILE` (and,
//! with Postgres, a `PGPASSWORD`), single sign-on's client secret in
//! `CODEX_RELAY_OIDC_CLIENT_SECRET`, and an unsandboxed command reads `/proc/*/environ` of every
//! process it can (Codex, the relay's watchdog and its `sleep`, its own) looking for those
//! variables and their values. It finds none.

use std::time::Duration;

use crate::brake_support::unsandboxed;
use crate::common::{Bed, HttpRelay};
use crate::http_support::Client;
use codex_relay_testkit::{RELAY_TEST_TOKEN, Reply};
use serde_json::json;

const PG_SECRET: &str = "pg-secret-never-shown";
const OIDC_SECRET: &str = "oidc-client-secret-never-shown";

async fn scenario(store: Option<String>) {
    let bed = match Bed::ordinary(codex_relay_testkit::NEWEST, "").await {
        Ok(bed) => bed,
        Err(why) => return codex_relay_testkit::skip::skip(why),
    };
    let root = bed.home.root().to_path_buf();
    let token_file = root.join("relay-token");
    std::fs::write(&token_file, format!("{RELAY_TEST_TOKEN}\n")).unwrap();
    codex_relay_testkit::ordinary::Ordinary::get()
        .unwrap()
        .chown(&token_file);
    let db = store.unwrap_or_else(|| root.join("relay-env.db").display().to_string());
    // The store only through the environment, as a deployment keeps a Postgres password out of
    // the command line.
    let mut args = bed.args(60_000);
    let at = args.iter().position(|a| a == "--db").unwrap();
    args.drain(at..at + 2);
    args.extend(["--listen", "127.0.0.1:0"].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut env = vec![
        ("CODEX_RELAY_DB", db.clone()),
        ("CODEX_RELAY_TOKEN_FILE", token_file.display().to_string()),
        // serve takes the token from the file only.
        ("CODEX_RELAY_TOKEN", String::new()),
        ("LOG_LEVEL", "info".into()),
        // Single sign-on configured (the provider is asked only when someone signs in).
        (
            "CODEX_RELAY_OIDC_ISSUER",
            "https://id.example.invalid".into(),
        ),
        ("CODEX_RELAY_OIDC_CLIENT_ID", "relay".into()),
        ("CODEX_RELAY_OIDC_CLIENT_SECRET", OIDC_SECRET.into()),
    ];
    let postgres = db.starts_with("postgres");
    if postgres {
        env.push(("PGPASSWORD", PG_SECRET.into()));
    }
    let relay = HttpRelay::start_ordinary(&bed, &args, &env).await;
    let c = Client::new(&relay.url);
    let mut wanted: Vec<(String, String)> = vec![
        ("the store".into(), db.clone()),
        ("the token file".into(), token_file.display().to_string()),
        ("the token".into(), RELAY_TEST_TOKEN.into()),
        ("the OIDC client secret".into(), OIDC_SECRET.into()),
    ];
    if postgres {
        wanted.push(("the Postgres password".into(), PG_SECRET.into()));
    }
    let mut script = String::from(
        "n=0; for f in /proc/[0-9]*/environ; do\n\
         d=${f%/environ}; env=$(tr '\\0' '\\n' < \"$f\" 2>/dev/null) || continue; n=$((n+1))\n\
         who=\"${d#/proc/} $(tr '\\0\\n' '  ' < \"$d/cmdline\" | cut -c1-80)\"\n\
         printf '%s\\n' \"$env\" | grep -E '^(CODEX_RELAY_DB|CODEX_RELAY_TOKEN_FILE|CODEX_RELAY_TOKEN|CODEX_RELAY_OIDC_CLIENT_SECRET|PGPASSWORD|PGPASSFILE)=' | sed \"s|=.*||; s|^|LEAK $who: |\"\n",
    );
    for (what, value) in &wanted {
        script.push_str(&format!(
            "printf '%s\\n' \"$env\" | grep -qF -e '{value}' && echo \"LEAK $who: {what}\"\n"
        ));
    }
    script.push_str("done; echo \"READ $n\"\n");
    std::fs::write(bed.home.workspace().join("look.sh"), script).unwrap();
    bed.model.route(
        "MARK-ENV",
        [
            Reply::exec("bash look.sh > look.txt 2>&1; cat look.txt", "call-env"),
            Reply::text("looked"),
        ],
    );
    let mut body = unsandboxed();
    body["prompt"] = json!("MARK-ENV: look");
    body["cwd"] = json!(bed.home.workspace());
    let r = c.post("/api/sessions", &body).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let mut s = c.stream(&format!("/api/sessions/{id}/stream"), &[]).await;
    s.until(Duration::from_secs(120), |e| {
        e.event == "envelope"
            && e.json()["ev"]["t"] == "status"
            && e.json()["ev"]["status"] == "idle"
    })
    .await;
    let out = std::fs::read_to_string(bed.home.workspace().join("look.txt")).unwrap_or_default();
    eprintln!("--- environ\n{out}");
    let read: usize = out
        .lines()
        .find_map(|l| l.strip_prefix("READ "))
        .and_then(|n| n.trim().parse().ok())
        .expect("the look ran");
    // Codex (its launcher and the server), the watchdog and its sleep, the command's shells.
    assert!(read >= 5, "it read the environments it could: {out}");
    let leaks: Vec<&str> = out.lines().filter(|l| l.starts_with("LEAK")).collect();
    assert!(leaks.is_empty(), "the relay's settings leaked: {leaks:#?}");
    relay.stop().await;
    bed.assert_no_codex_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relays_store_and_token_file_are_in_no_environment_a_command_reads() {
    scenario(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nor_its_postgres_url_and_password() {
    let Some(url) = crate::cluster_support::fresh_schema("secrets_in_environ").await else {
        return;
    };
    scenario(Some(url)).await;
}
