//! One ChatGPT login, many Codex processes, on the real Codex against a fake OAuth token
//! endpoint that rotates refresh tokens and refuses a spent one: with the relay's refresher,
//! three app-servers whose access token expired cost exactly one refresh and all their turns
//! complete (one relay; and two relays on one Postgres and one CODEX_HOME); without it (each
//! Codex refreshing from auth.json itself) the same load spends the refresh token more than
//! once and the endpoint refuses the reuse.

use crate::common;

use std::time::Duration;

use codex_relay_codex::AppServerConfig;
use codex_relay_core::auth::AuthConfig;
use codex_relay_core::login::LoginOptions;
use codex_relay_core::{
    CreateOptions, PermissionMode, Relay, RelayConfig, SayInput, SessionSnapshot, SessionStatus,
};
use codex_relay_testkit::oauth::OAuthServer;
use codex_relay_testkit::{CodexHome, HomeOptions, ModelServer, Reply};
use serde_json::Value;

const SESSIONS: usize = 3;

struct Bed {
    model: ModelServer,
    oauth: OAuthServer,
    home: CodexHome,
    /// `last_refresh` as the login was written.
    written_refresh: Value,
}

/// A CODEX_HOME logged in to ChatGPT (generation 0 of the fake endpoint's tokens), a provider
/// that wants OpenAI credentials (so Codex sends the access token as its bearer) and a model
/// that accepts only the access tokens the endpoint considers valid.
async fn bed() -> Bed {
    bed_aged(Duration::from_secs(60)).await
}

/// The same with a login last refreshed `age` ago.
async fn bed_aged(age: Duration) -> Bed {
    common::init_tracing();
    let model = ModelServer::start().await;
    let oauth = OAuthServer::start().await;
    model.require_access(oauth.access_check());
    let opts = HomeOptions {
        provider_toml: "requires_openai_auth = true".into(),
        ..Default::default()
    };
    let home = CodexHome::with_options(model.url(), &opts);
    oauth.write_login_aged(home.path(), age);
    // Overlapping refreshes, as against the real endpoint.
    oauth.set_delay(Duration::from_millis(700));
    let bed = Bed {
        model,
        oauth,
        home,
        written_refresh: Value::Null,
    };
    Bed {
        written_refresh: bed.auth_json()["last_refresh"].clone(),
        ..bed
    }
}

impl Bed {
    /// A relay config with one session per Codex process; `auth` decides who refreshes.
    fn config(&self, version: &'static str, store: String, auth: AuthConfig) -> RelayConfig {
        let bin = codex_relay_testkit::codex_bin(version).expect("pinned Codex installs");
        let mut codex = AppServerConfig::new(bin).codex_home(self.home.path());
        codex.env.push(("OPENAI_API_KEY".into(), None));
        codex.env.push(("CODEX_API_KEY".into(), None));
        codex.env.push((
            "CODEX_REFRESH_TOKEN_URL_OVERRIDE".into(),
            Some(self.oauth.token_url().into()),
        ));
        let mut config = RelayConfig::new(codex, store);
        config.sessions_per_codex = 1;
        config.auth = auth;
        config
    }

    fn ask(&self, marker: &str) -> CreateOptions {
        CreateOptions {
            prompt: Some(format!("{marker} first")),
            cwd: Some(self.home.workspace().display().to_string()),
            mode: Some(PermissionMode::ReadOnly),
            ..Default::default()
        }
    }

    fn auth_json(&self) -> Value {
        let text = std::fs::read_to_string(self.home.path().join("auth.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    }
}

async fn ended(relay: &Relay, id: &str) -> SessionSnapshot {
    common::until(relay, id, "the turn to end", |s| {
        matches!(s.status, SessionStatus::Idle | SessionStatus::Error)
    })
    .await
}

/// Starts one session per marker on `relay` (each on its own Codex) and waits for their first
/// turns, which the generation-0 token serves.
async fn start_sessions(bed: &Bed, relay: &Relay, markers: &[String]) -> Vec<String> {
    let mut ids = Vec::new();
    for m in markers {
        bed.model.route(
            m,
            [
                Reply::text(format!("{m}: first answer")),
                Reply::text(format!("{m}: second answer")),
            ],
        );
        let (h, _) = relay.create(bed.ask(m)).await.expect("create");
        ids.push(h.id().to_owned());
    }
    for id in &ids {
        let snap = ended(relay, id).await;
        assert_eq!(snap.status, SessionStatus::Idle, "{:?}", snap.last_error);
    }
    ids
}

/// Says the second message to every session at once and returns how each turn ended.
async fn second_turns(sessions: &[(Relay, String)]) -> Vec<SessionSnapshot> {
    let says = sessions.iter().map(|(relay, id)| async move {
        relay.say(id, SayInput::text("second")).await.expect("say");
        ended(relay, id).await
    });
    futures::future::join_all(says).await
}

fn markers(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-session-{i}")).collect()
}

/// The relay's refresher, given the token endpoint directly (as Codex would be).
fn relay_login(bed: &Bed) -> AuthConfig {
    AuthConfig::codex_home_login(LoginOptions {
        token_url: Some(bed.oauth.token_url().to_owned()),
        // Codex may reach the endpoint too: a refresh of its own would be counted.
        codex_refresh_url: Some(bed.oauth.token_url().to_owned()),
        ..Default::default()
    })
}

/// Asserts that every second turn completed on the newest tokens and auth.json holds them.
fn assert_one_refresh_served_all(bed: &Bed, ends: &[SessionSnapshot]) {
    for s in ends {
        assert_eq!(s.status, SessionStatus::Idle, "{:?}", s.last_error);
        assert!(
            s.result
                .as_ref()
                .and_then(Value::as_str)
                .is_some_and(|r| r.ends_with("second answer")),
            "{:?}",
            s.result
        );
    }
    assert_eq!(
        (bed.oauth.refreshes(), bed.oauth.reused()),
        (1, 0),
        "{:?}",
        bed.oauth.records()
    );
    let newest = bed.oauth.generation(1);
    let file = bed.auth_json();
    assert_eq!(
        file["tokens"]["refresh_token"],
        Value::from(newest.refresh_token)
    );
    assert_eq!(
        file["tokens"]["access_token"],
        Value::from(newest.access_token.clone())
    );
    assert_ne!(
        file["last_refresh"], bed.written_refresh,
        "last_refresh was updated"
    );
    // Every 401 was on the expired token; every retried request carried the new one.
    let bearer = format!("Bearer {}", newest.access_token);
    let served = bed.model.requests();
    let second: Vec<_> = served
        .iter()
        .filter(|r| r.user_texts().iter().any(|t| t == "second"))
        .collect();
    assert_eq!(
        second.len(),
        ends.len(),
        "one served request per second turn"
    );
    assert!(
        second
            .iter()
            .all(|r| r.authorization.as_deref() == Some(bearer.as_str()))
    );
    let old = bed.oauth.generation(0).access_token;
    assert!(bed.model.unauthorized().iter().all(|t| *t == old));
    assert!(
        bed.model.unauthorized().len() >= ends.len(),
        "every process met the 401"
    );
}

/// Scenario A: one relay, three Codex processes, the access token expires: one refresh.
async fn one_relay_three_processes_one_refresh(version: &'static str) {
    let bed = bed().await;
    let store = bed.home.root().join("relay.db").display().to_string();
    let relay = Relay::open(bed.config(version, store, relay_login(&bed)))
        .await
        .expect("relay opens");
    let ids = start_sessions(&bed, &relay, &markers("one-relay", SESSIONS)).await;
    assert_eq!(
        relay.codex_processes().len(),
        SESSIONS,
        "one Codex per session"
    );
    assert_eq!(
        bed.oauth.refreshes(),
        0,
        "the first turns needed no refresh"
    );

    bed.oauth.expire_access_tokens();
    let sessions: Vec<_> = ids.iter().map(|id| (relay.clone(), id.clone())).collect();
    let ends = second_turns(&sessions).await;
    assert_one_refresh_served_all(&bed, &ends);
    let login = relay
        .config()
        .auth
        .codex_login()
        .expect("the relay's login")
        .clone();
    assert_eq!(
        (login.refreshes(), login.adopted(), login.generation()),
        (1, 0, 1)
    );
    relay.shutdown().await;
}

/// Scenario B: two relays (instances of a cluster) on one Postgres schema and one CODEX_HOME,
/// two Codex processes each: one refresh in total.
async fn two_instances_on_one_postgres_one_refresh(version: &'static str) {
    let bed = bed().await;
    let Some(store) = common::store_target(common::Backend::Postgres, &bed.home).await else {
        return;
    };
    let mut relays = Vec::new();
    for name in ["a", "b"] {
        let mut config = bed.config(version, store.clone(), relay_login(&bed));
        config.cluster.instance_id = Some(format!("login-{name}-{}", std::process::id()));
        relays.push(Relay::open(config).await.expect("relay opens"));
    }
    let mut sessions = Vec::new();
    for (n, relay) in relays.iter().enumerate() {
        for id in start_sessions(&bed, relay, &markers(&format!("instance-{n}"), 2)).await {
            sessions.push((relay.clone(), id));
        }
        assert_eq!(relay.codex_processes().len(), 2);
    }
    bed.oauth.expire_access_tokens();
    let ends = second_turns(&sessions).await;
    assert_one_refresh_served_all(&bed, &ends);
    let logins: Vec<_> = relays
        .iter()
        .map(|r| r.config().auth.codex_login().expect("login").clone())
        .collect();
    let refreshed: u64 = logins.iter().map(|l| l.refreshes()).sum();
    let adopted: u64 = logins.iter().map(|l| l.adopted()).sum();
    assert_eq!(
        (refreshed, adopted),
        (1, 1),
        "one refreshed, the other took its tokens"
    );
    for relay in relays {
        relay.shutdown().await;
    }
}

/// A login last refreshed ten days ago, which Codex 0.98 would refresh on its own as each
/// process starts: the relay refreshes it once before the first Codex starts, and no Codex
/// refreshes at all (they may reach the endpoint: any refresh of theirs would be counted).
async fn a_login_due_at_start_is_refreshed_once_before_any_codex(version: &'static str) {
    let bed = bed_aged(Duration::from_secs(10 * 86_400)).await;
    let store = bed.home.root().join("relay.db").display().to_string();
    let relay = Relay::open(bed.config(version, store, relay_login(&bed)))
        .await
        .expect("relay opens");
    start_sessions(&bed, &relay, &markers("due", SESSIONS)).await;
    assert_eq!(relay.codex_processes().len(), SESSIONS);
    assert_eq!(
        (bed.oauth.refreshes(), bed.oauth.reused()),
        (1, 0),
        "{:?}",
        bed.oauth.records()
    );
    let login = relay.config().auth.codex_login().expect("login").clone();
    assert_eq!(login.refreshes(), 1, "the one refresh was the relay's");
    let bearer = format!("Bearer {}", bed.oauth.generation(1).access_token);
    let served = bed.model.requests();
    assert!(
        served
            .iter()
            .all(|r| r.authorization.as_deref() == Some(bearer.as_str()))
    );
    assert!(bed.model.unauthorized().is_empty(), "no request met a 401");
    let file = bed.auth_json();
    assert_eq!(
        file["tokens"]["refresh_token"],
        Value::from(bed.oauth.generation(1).refresh_token)
    );
    relay.shutdown().await;
}

codex_relay_testkit::for_each_codex!(
    one_relay_three_processes_one_refresh,
    two_instances_on_one_postgres_one_refresh,
    a_login_due_at_start_is_refreshed_once_before_any_codex,
);

/// The hazard, shown: the same three processes with no refresher of the relay, each Codex
/// refreshing the shared auth.json's refresh token itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_relays_refresher_codex_processes_spend_the_refresh_token_more_than_once() {
    let bed = bed().await;
    let store = bed.home.root().join("relay.db").display().to_string();
    let relay = Relay::open(bed.config(codex_relay_testkit::NEWEST, store, AuthConfig::default()))
        .await
        .expect("relay opens");
    let ids = start_sessions(&bed, &relay, &markers("control", SESSIONS)).await;
    assert_eq!(
        relay.codex_processes().len(),
        SESSIONS,
        "one Codex per session"
    );
    assert_eq!(bed.oauth.refreshes(), 0);

    bed.oauth.expire_access_tokens();
    let sessions: Vec<_> = ids.iter().map(|id| (relay.clone(), id.clone())).collect();
    let ends = second_turns(&sessions).await;
    let failed = ends
        .iter()
        .filter(|s| s.status == SessionStatus::Error)
        .count();
    eprintln!(
        "control: {} refresh requests, {} refused as reused, {failed} of {SESSIONS} turns failed; errors: {:?}",
        bed.oauth.refreshes(),
        bed.oauth.reused(),
        ends.iter()
            .map(|s| s.last_error.clone())
            .collect::<Vec<_>>()
    );
    assert!(
        bed.oauth.refreshes() > 1 && bed.oauth.reused() >= 1,
        "{:?}",
        bed.oauth.records()
    );
    let _ = bed.auth_json();
    relay.shutdown().await;
}
