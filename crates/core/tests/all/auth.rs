//! Credentials through the relay on the real Codex (both pinned versions): an API key given in
//! `RelayConfig::auth` reaches the model server as the bearer token; ChatGPT tokens do too, and
//! are sent again to the app-server started after Codex died; a 401 makes Codex ask for fresh
//! tokens, which the caller's refresher supplies and the retried request carries; without a
//! refresher the request is refused at once and the turn fails instead of hanging.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use codex_relay_codex::AppServerConfig;
use codex_relay_core::auth::{AuthConfig, ChatgptTokens, RefreshRequest};
use codex_relay_core::{
    CreateOptions, PermissionMode, Relay, RelayConfig, SayInput, SessionStatus,
};
use codex_relay_testkit::{CodexHome, HomeOptions, ModelServer, Reply, for_each_codex};
use serde_json::json;

for_each_codex!(
    an_api_key_reaches_the_model_as_the_bearer_token,
    a_401_asks_the_refresher_and_the_retry_carries_the_fresh_token,
    chatgpt_tokens_are_sent_again_after_codex_restarts,
    without_a_refresher_a_401_fails_the_turn_instead_of_hanging,
);

struct Bed {
    model: ModelServer,
    home: CodexHome,
    relay: Relay,
}

/// A relay whose scripted model provider wants OpenAI credentials, so Codex sends the ones it
/// was given as `Authorization: Bearer ...`.
async fn bed(version: &'static str, auth: AuthConfig) -> Bed {
    common::init_tracing();
    let model = ModelServer::start().await;
    let opts = HomeOptions {
        provider_toml: "requires_openai_auth = true".into(),
        ..Default::default()
    };
    let home = CodexHome::with_options(model.url(), &opts);
    let bin = codex_relay_testkit::codex_bin(version).expect("pinned Codex installs");
    let mut codex = AppServerConfig::new(bin).codex_home(home.path());
    // No credentials from the environment: only what the relay sends.
    codex.env.push(("OPENAI_API_KEY".into(), None));
    codex.env.push(("CODEX_API_KEY".into(), None));
    let mut config = RelayConfig::new(codex, home.root().join("relay.db").display().to_string());
    config.auth = auth;
    let relay = Relay::open(config).await.expect("relay opens");
    Bed { model, home, relay }
}

fn ask(bed: &Bed, prompt: &str) -> CreateOptions {
    CreateOptions {
        prompt: Some(prompt.into()),
        cwd: Some(bed.home.workspace().display().to_string()),
        mode: Some(PermissionMode::ReadOnly),
        ..Default::default()
    }
}

/// An unsigned JWT with the ChatGPT claims Codex reads (email, plan, account id).
fn jwt(email: &str) -> String {
    let claims = json!({
        "email": email,
        "exp": 4_000_000_000u64,
        "https://api.openai.com/auth": {
            "chatgpt_account_id": "acct-1", "chatgpt_plan_type": "pro", "chatgpt_user_id": "user-1"
        }
    });
    format!(
        "{}.{}.sig",
        b64url(br#"{"alg":"none","typ":"JWT"}"#),
        b64url(claims.to_string().as_bytes())
    )
}

fn b64url(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let n = chunk.iter().fold(0u32, |n, b| n << 8 | *b as u32) << (8 * (3 - chunk.len()));
        for i in 0..=chunk.len() {
            out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// Tokens both versions accept: 0.98 reads the id token, 0.169 the account id.
fn tokens(email: &str) -> ChatgptTokens {
    ChatgptTokens::new(jwt(email))
        .id_token(jwt(email))
        .account_id("acct-1")
}

async fn done(bed: &Bed, id: &str) -> codex_relay_core::SessionSnapshot {
    common::until(&bed.relay, id, "the turn to end", |s| {
        matches!(s.status, SessionStatus::Idle | SessionStatus::Error)
    })
    .await
}

async fn an_api_key_reaches_the_model_as_the_bearer_token(version: &'static str) {
    let bed = bed(version, AuthConfig::api_key("sk-relay-test-4711")).await;
    bed.model.push([Reply::text("hello with a key")]);
    let (h, _) = bed.relay.create(ask(&bed, "hi")).await.unwrap();
    let snap = done(&bed, h.id()).await;
    assert_eq!(snap.status, SessionStatus::Idle, "{:?}", snap.last_error);
    let requests = bed.model.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        requests[0].authorization.as_deref(),
        Some("Bearer sk-relay-test-4711")
    );
    let server = bed.relay.server().await.unwrap();
    let state = codex_relay_core::auth::account_state(&server)
        .await
        .unwrap();
    assert_eq!(state, codex_relay_core::auth::AccountState::ApiKey);
    bed.relay.shutdown().await;
}

async fn a_401_asks_the_refresher_and_the_retry_carries_the_fresh_token(version: &'static str) {
    let asked: Arc<Mutex<Vec<RefreshRequest>>> = Arc::default();
    let seen = asked.clone();
    let auth = AuthConfig::chatgpt_tokens(tokens("old@example.com")).refresher(
        move |req: RefreshRequest| {
            seen.lock().unwrap().push(req);
            async { Ok(tokens("fresh@example.com")) }
        },
    );
    let bed = bed(version, auth).await;
    bed.model.push([
        Reply::Status {
            code: 401,
            message: "token expired".into(),
        },
        Reply::text("hello after the refresh"),
    ]);
    let (h, _) = bed.relay.create(ask(&bed, "hi")).await.unwrap();
    let snap = done(&bed, h.id()).await;
    assert_eq!(snap.status, SessionStatus::Idle, "{:?}", snap.last_error);
    assert_eq!(snap.result, Some(json!("hello after the refresh")));

    let asked = asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0].reason, "unauthorized");
    assert_eq!(asked[0].previous_account_id.as_deref(), Some("acct-1"));
    let bearers: Vec<_> = bed
        .model
        .requests()
        .iter()
        .map(|r| r.authorization.clone().unwrap_or_default())
        .collect();
    assert_eq!(
        bearers,
        vec![
            format!("Bearer {}", jwt("old@example.com")),
            format!("Bearer {}", jwt("fresh@example.com"))
        ]
    );
    assert!(bed.model.requests()[1].account_id.as_deref() == Some("acct-1"));
    bed.relay.shutdown().await;
}

async fn chatgpt_tokens_are_sent_again_after_codex_restarts(version: &'static str) {
    // External tokens live only in Codex's memory: a new app-server knows them only if the
    // relay logs it in again.
    let bed = bed(
        version,
        AuthConfig::chatgpt_tokens(tokens("me@example.com")),
    )
    .await;
    bed.model
        .push([Reply::text("first"), Reply::text("second, on a new Codex")]);
    let (h, _) = bed.relay.create(ask(&bed, "one")).await.unwrap();
    let id = h.id().to_owned();
    assert_eq!(done(&bed, &id).await.status, SessionStatus::Idle);

    let server = bed.relay.server().await.unwrap();
    let first_pid = server.pid();
    // SAFETY: kill(2) of the Codex process the relay spawned.
    unsafe { libc::kill(first_pid as i32, libc::SIGKILL) };
    drop(server);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while bed.relay.status(&id).unwrap().status != SessionStatus::Error
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bed.relay.say(&id, SayInput::text("two")).await.unwrap();
    let snap = done(&bed, &id).await;
    assert_eq!(snap.status, SessionStatus::Idle, "{:?}", snap.last_error);
    assert_ne!(
        bed.relay.server().await.unwrap().pid(),
        first_pid,
        "Codex was restarted"
    );
    let requests = bed.model.requests();
    assert_eq!(requests.len(), 2);
    for r in &requests {
        assert_eq!(
            r.authorization.as_deref(),
            Some(format!("Bearer {}", jwt("me@example.com")).as_str())
        );
    }
    bed.relay.shutdown().await;
}

async fn without_a_refresher_a_401_fails_the_turn_instead_of_hanging(version: &'static str) {
    let bed = bed(
        version,
        AuthConfig::chatgpt_tokens(tokens("old@example.com")),
    )
    .await;
    // Codex may retry once it is refused fresh tokens; every attempt gets a 401.
    bed.model.allow_unscripted();
    bed.model.push((0..4).map(|_| Reply::Status {
        code: 401,
        message: "token expired".into(),
    }));
    let started = tokio::time::Instant::now();
    let (h, _) = bed.relay.create(ask(&bed, "hi")).await.unwrap();
    let snap = done(&bed, h.id()).await;
    assert_eq!(snap.status, SessionStatus::Error, "{snap:?}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the turn ended only after {:?}",
        started.elapsed()
    );
    bed.relay.shutdown().await;
}
