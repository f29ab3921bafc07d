//! Credentials for the binary's fronts on the real Codex (0.169 and 0.98) and the scripted model: `serve --api-key-env NAME` logs Codex in with the key that variable holds, so the model request carries it as the bearer token, and the key never shows in the relay's output; `doctor` with the same flag reports where the credentials come from and that Codex holds an API key; a ChatGPT tokens file (`--chatgpt-tokens FILE`, `ClientBuilder::chatgpt_tokens_file`) is read again when a 401 makes Codex ask for fresh tokens.

use crate::common;

use std::process::Command;
use std::time::Duration;

use crate::common::{HttpRelay, RELAY};
use crate::http_support::Client;
use codex_relay_testkit::{CodexHome, HomeOptions, ModelServer, Reply, for_each_codex};
use serde_json::json;

for_each_codex!(
    serve_with_an_api_key_env_sends_the_key_as_the_bearer_token,
    doctor_shows_where_the_credentials_come_from_without_the_secret,
    a_tokens_file_is_read_again_when_codex_asks_for_fresh_tokens,
);

const KEY: &str = "sk-relay-fronts-test-0123456789";

/// A scripted provider that wants OpenAI credentials: Codex sends the ones it was given as
/// `Authorization: Bearer ...`.
fn home(model: &ModelServer) -> CodexHome {
    CodexHome::with_options(
        model.url(),
        &HomeOptions {
            provider_toml: "requires_openai_auth = true".into(),
            ..Default::default()
        },
    )
}

/// Only what the relay needs, plus the key under a name of the test's choosing: no
/// OPENAI_API_KEY or CODEX_API_KEY that Codex could pick up by itself.
fn env() -> Vec<(&'static str, String)> {
    let mut env = vec![
        ("RELAY_TEST_KEY", KEY.to_owned()),
        ("LOG_LEVEL", "debug".to_owned()),
    ];
    for key in ["PATH", "HOME", "TMPDIR"] {
        if let Ok(v) = std::env::var(key) {
            env.push((key, v));
        }
    }
    env
}

async fn serve_with_an_api_key_env_sends_the_key_as_the_bearer_token(version: &'static str) {
    let model = ModelServer::start().await;
    model.push([Reply::text("authorized answer")]);
    let home = home(&model);
    let codex = codex_relay_testkit::codex_bin(version).expect("pinned Codex installs");
    let mut args = common::engine_args(&codex, &home, 60_000);
    args.extend(["--listen".into(), "127.0.0.1:0".into()]);
    args.extend(["--api-key-env".into(), "RELAY_TEST_KEY".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let relay = HttpRelay::start_with_env(&args, &env()).await;
    let c = Client::new(&relay.url);
    let r = c
        .post(
            "/api/sessions",
            &json!({"prompt": "hello", "cwd": home.workspace()}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let requests = model.wait_for_requests(1, Duration::from_secs(90)).await;
    assert_eq!(
        requests[0].authorization.as_deref(),
        Some(format!("Bearer {KEY}").as_str()),
        "the model request carries the key the variable held"
    );
    let log = relay.log_text();
    assert!(
        log.contains("an API key from $RELAY_TEST_KEY"),
        "the settings line names the source: {log}"
    );
    assert!(!log.contains(KEY), "the key is never printed: {log}");
}

async fn doctor_shows_where_the_credentials_come_from_without_the_secret(version: &'static str) {
    let model = ModelServer::start().await;
    let home = home(&model);
    let codex = codex_relay_testkit::codex_bin(version).expect("pinned Codex installs");
    let doctor = |extra: &[&str]| {
        let mut cmd = Command::new(RELAY);
        cmd.arg("doctor")
            .arg("--codex")
            .arg(&codex)
            .arg("--codex-home")
            .arg(home.path())
            .args(extra)
            .env_clear()
            .envs(env());
        let out = cmd.output().expect("doctor runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!("doctor {extra:?}:\n{text}");
        (out.status.success(), text)
    };
    let (ok, before) = doctor(&[]);
    assert!(ok, "{before}");
    assert!(before.contains("credentials:     none"), "{before}");
    assert!(
        before.contains("auth:            not logged in"),
        "{before}"
    );

    let (ok, text) = doctor(&["--api-key-env", "RELAY_TEST_KEY"]);
    assert!(ok, "{text}");
    assert!(
        text.contains("credentials:     an API key from $RELAY_TEST_KEY"),
        "{text}"
    );
    assert!(text.contains("auth:            API key"), "{text}");
    assert!(!text.contains(KEY), "the key is never printed: {text}");

    let (ok, text) = doctor(&["--api-key-env", "RELAY_TEST_UNSET"]);
    assert!(!ok, "an unset variable fails: {text}");
    assert!(text.contains("$RELAY_TEST_UNSET is not set"), "{text}");
}

/// An unsigned JWT with the ChatGPT claims Codex reads (0.98 parses the id token; without a
/// user id, Codex 0.169 fails the turn with "application network policy is unavailable").
fn jwt(email: &str) -> String {
    let claims = json!({
        "email": email,
        "exp": 4_000_000_000u64,
        "https://api.openai.com/auth": {"chatgpt_account_id": "acct-1", "chatgpt_plan_type": "pro", "chatgpt_user_id": "user-1"}
    });
    let b64 = |data: &[u8]| {
        const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let mut out = String::new();
        for chunk in data.chunks(3) {
            let n = chunk.iter().fold(0u32, |n, b| n << 8 | *b as u32) << (8 * (3 - chunk.len()));
            for i in 0..=chunk.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            }
        }
        out
    };
    format!(
        "{}.{}.sig",
        b64(br#"{"alg":"none","typ":"JWT"}"#),
        b64(claims.to_string().as_bytes())
    )
}

fn write_tokens(path: &std::path::Path, email: &str) {
    let tokens =
        json!({"accessToken": jwt(email), "idToken": jwt(email), "chatgptAccountId": "acct-1"});
    std::fs::write(path, tokens.to_string()).unwrap();
}

async fn a_tokens_file_is_read_again_when_codex_asks_for_fresh_tokens(version: &'static str) {
    let model = ModelServer::start().await;
    let home = home(&model);
    let file = home.root().join("tokens.json");
    write_tokens(&file, "first@example.com");
    let codex = codex_relay_testkit::codex_bin(version).expect("pinned Codex installs");
    let client = codex_relay::ClientBuilder::new()
        .codex_binary(codex)
        .codex_home(home.path())
        .store(home.root().join("relay.db").display().to_string())
        .codex_env("OPENAI_API_KEY", None)
        .codex_env("CODEX_API_KEY", None)
        .chatgpt_tokens_file(&file)
        .build()
        .await
        .expect("the tokens file is read");
    // The tokens were read when the client was built; Codex is logged in with them when it
    // starts. Whatever renews the tokens rewrites the file; Codex learns of it at its next 401.
    write_tokens(&file, "renewed@example.com");
    model.push([
        Reply::Status {
            code: 401,
            message: "token expired".into(),
        },
        Reply::text("with the renewed tokens"),
    ]);
    let options = codex_relay::SessionOptions::new().cwd(home.workspace().display().to_string());
    let second = client
        .run(options, "hello")
        .await
        .expect("the retry succeeds");
    assert_eq!(second.text, "with the renewed tokens");
    let bearers: Vec<String> = model
        .requests()
        .iter()
        .map(|r| r.authorization.clone().unwrap_or_default())
        .collect();
    let first = format!("Bearer {}", jwt("first@example.com"));
    let renewed = format!("Bearer {}", jwt("renewed@example.com"));
    assert_eq!(bearers, [first, renewed]);
    client.shutdown().await;
}
