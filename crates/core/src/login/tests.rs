//! The shared login against the testkit's fake token endpoint, without Codex: one refresh for
//! any number of concurrent asks, in one relay and across relays on one machine (file lock) or
//! on one Postgres (a row per spent token); a stale holder gets the current tokens for free;
//! an instance whose CODEX_HOME is not shared is told so instead of spending the token again.

use std::path::Path;
use std::sync::Arc;

use codex_relay_testkit::oauth::OAuthServer;

use super::*;

fn open(home: &Path, server: &OAuthServer, coordination: Coordination) -> Arc<CodexLogin> {
    let options = LoginOptions::default();
    let url = server.token_url().to_owned();
    Arc::new(CodexLogin::open(home, &options, url, coordination).expect("the login opens"))
}

fn on_disk(home: &Path) -> Tokens {
    auth_file::read(&auth_file::path_in(home))
        .unwrap()
        .expect("a login")
        .tokens
}

/// A fresh schema of the test Postgres with the store's tables; `None` (printed) if skipped.
async fn postgres_pool(test: &str) -> Option<PgPool> {
    let base = codex_relay_testkit::postgres::url(test)?;
    let schema = format!(
        "login_{}_{}",
        std::process::id(),
        auth_file::fingerprint(test)[..8].to_owned()
    );
    let pool = PgPool::connect(&base).await.expect("connect");
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP SCHEMA IF EXISTS {schema} CASCADE"
    )))
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}options=-c%20search_path%3D{schema}");
    let store = crate::store::Store::open_with(&url, Default::default())
        .await
        .expect("the store migrates");
    Some(store.postgres().expect("a Postgres store").clone())
}

#[tokio::test]
async fn concurrent_asks_cost_one_refresh_and_a_stale_holder_gets_the_current_tokens() {
    let server = OAuthServer::start().await;
    server.set_delay(Duration::from_millis(300));
    let home = tempfile::tempdir().unwrap();
    server.write_login(home.path());
    let login = open(home.path(), &server, Coordination::File);
    let (first, generation) = login.tokens();
    assert_eq!(generation, 0);
    assert_eq!(first.access_token, server.generation(0).access_token);
    assert_eq!(
        first.account_id.as_deref(),
        Some(codex_relay_testkit::oauth::ACCOUNT_ID)
    );
    assert_eq!(first.plan_type.as_deref(), Some("pro"));

    let asks = (0..5).map(|_| {
        let login = login.clone();
        tokio::spawn(async move { login.refresh(0).await })
    });
    for answer in futures::future::join_all(asks).await {
        let (tokens, generation) = answer.unwrap().expect("fresh tokens");
        assert_eq!(generation, 1);
        assert_eq!(tokens.access_token, server.generation(1).access_token);
    }
    assert_eq!(server.refreshes(), 1, "{:?}", server.records());
    assert_eq!(
        server.records()[0].client_id.as_deref(),
        Some(CODEX_CLIENT_ID)
    );
    assert_eq!(
        on_disk(home.path()).refresh_token,
        server.generation(1).refresh_token
    );

    // A process still on generation 0 (it asks late) gets generation 1 with no refresh.
    assert_eq!(login.refresh(0).await.unwrap().1, 1);
    assert_eq!(server.refreshes(), 1);
    // A 401 on the current generation refreshes again.
    assert_eq!(login.refresh(1).await.unwrap().1, 2);
    assert_eq!((server.refreshes(), server.reused()), (2, 0));
    assert_eq!((login.refreshes(), login.adopted()), (2, 0));
}

#[tokio::test]
async fn two_relays_of_one_machine_share_one_refresh_through_the_file_lock() {
    let server = OAuthServer::start().await;
    server.set_delay(Duration::from_millis(300));
    let home = tempfile::tempdir().unwrap();
    server.write_login(home.path());
    let a = open(home.path(), &server, Coordination::File);
    let b = open(home.path(), &server, Coordination::File);
    let (ra, rb) = tokio::join!(a.refresh(0), b.refresh(0));
    let (ta, tb) = (ra.expect("a refreshed"), rb.expect("b refreshed"));
    assert_eq!(ta.0.access_token, tb.0.access_token);
    assert_eq!((server.refreshes(), server.reused()), (1, 0));
    assert_eq!(a.refreshes() + b.refreshes(), 1);
    assert_eq!(
        a.adopted() + b.adopted(),
        1,
        "the other took the tokens from the file"
    );
}

#[tokio::test]
async fn a_refused_refresh_says_sign_in_again_and_quotes_no_token() {
    let server = OAuthServer::start().await;
    let home = tempfile::tempdir().unwrap();
    server.write_login(home.path());
    let login = open(home.path(), &server, Coordination::File);
    // Someone outside the relay spent the token (and kept the result to themselves).
    let other = tempfile::tempdir().unwrap();
    server.write_login(other.path());
    open(other.path(), &server, Coordination::File)
        .refresh(0)
        .await
        .unwrap();

    let err = login
        .refresh(0)
        .await
        .expect_err("the endpoint refuses the reuse");
    let text = err.to_string();
    assert!(matches!(err, LoginError::Refused { .. }), "{err:?}");
    assert!(
        text.contains("refresh_token_reused") && text.contains("codex login"),
        "{text}"
    );
    let tokens = server.generation(0);
    assert!(!text.contains(&tokens.refresh_token) && !text.contains(&tokens.access_token));
    assert_eq!(login.generation(), 0, "nothing changed");
}

#[tokio::test]
async fn instances_on_one_postgres_and_one_home_share_one_refresh() {
    let Some(pool) = postgres_pool("instances_share_one_refresh").await else {
        return;
    };
    let server = OAuthServer::start().await;
    server.set_delay(Duration::from_millis(300));
    let home = tempfile::tempdir().unwrap();
    server.write_login(home.path());
    let instance = |name: &str| Coordination::Postgres {
        pool: pool.clone(),
        instance: name.into(),
    };
    let a = open(home.path(), &server, instance("a"));
    let b = open(home.path(), &server, instance("b"));
    let (ra, rb) = tokio::join!(a.refresh(0), b.refresh(0));
    assert_eq!(ra.unwrap().0.access_token, rb.unwrap().0.access_token);
    assert_eq!((server.refreshes(), server.reused()), (1, 0));
    let (used, next, by): (String, Option<String>, String) = sqlx::query_as(
        "SELECT used_fingerprint, next_fingerprint, instance_id FROM relay_login_refreshes",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        used,
        auth_file::fingerprint(&server.generation(0).refresh_token)
    );
    assert_eq!(
        next,
        Some(auth_file::fingerprint(&server.generation(1).refresh_token))
    );
    assert_eq!(by, if a.refreshes() == 1 { "a" } else { "b" });
}

#[tokio::test]
async fn an_instance_whose_codex_home_is_not_shared_is_told_and_spends_nothing() {
    let Some(pool) = postgres_pool("an_instance_not_shared").await else {
        return;
    };
    let server = OAuthServer::start().await;
    let (home_a, home_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    server.write_login(home_a.path());
    server.write_login(home_b.path());
    let instance = |name: &str| Coordination::Postgres {
        pool: pool.clone(),
        instance: name.into(),
    };
    let a = open(home_a.path(), &server, instance("a"));
    let b = open(home_b.path(), &server, instance("b"));
    a.refresh(0).await.expect("a refreshes");
    let err = b
        .refresh(0)
        .await
        .expect_err("b's file still holds the spent token");
    assert!(
        matches!(&err, LoginError::NotShared { by, .. } if by == "a"),
        "{err:?}"
    );
    assert!(err.to_string().contains("share one CODEX_HOME"), "{err}");
    assert_eq!(
        (server.refreshes(), server.reused()),
        (1, 0),
        "b spent nothing"
    );
}
