//! Set-up for engine tests: the scripted model, a fresh CODEX_HOME, a store (SQLite file, or a
//! fresh Postgres schema when CODEX_RELAY_TEST_POSTGRES is set) and a Relay on the real Codex.

use std::time::Duration;

use codex_relay_codex::AppServerConfig;
use codex_relay_core::{Envelope, Ev, Relay, RelayConfig, SessionSnapshot};
use codex_relay_testkit::{CodexHome, ModelServer};

pub const WAIT: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, Debug)]
pub enum Backend {
    Sqlite,
    Postgres,
}

pub struct Env {
    pub model: ModelServer,
    pub home: CodexHome,
    pub relay: Relay,
    pub config: RelayConfig,
}

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// A store target for `backend`, or `None` (with the reason printed) when it is unavailable.
pub async fn store_target(backend: Backend, home: &CodexHome) -> Option<String> {
    match backend {
        Backend::Sqlite => Some(home.root().join("relay.db").display().to_string()),
        Backend::Postgres => {
            let base = codex_relay_testkit::postgres::url("this engine scenario on Postgres")?;
            let schema = format!(
                "engine_{}",
                std::process::id() as u64 * 1_000_000 + rand_suffix()
            );
            let pool = sqlx::PgPool::connect(&base)
                .await
                .expect("connect to the test Postgres");
            sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
                .execute(&pool)
                .await
                .expect("create schema");
            pool.close().await;
            let sep = if base.contains('?') { '&' } else { '?' };
            Some(format!("{base}{sep}options=-c%20search_path%3D{schema}"))
        }
    }
}

fn rand_suffix() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0);
    h.finish() % 1_000_000
}

impl Env {
    pub async fn start(
        version: &'static str,
        backend: Backend,
        approval_timeout: Duration,
    ) -> Option<Env> {
        Self::start_with(version, backend, approval_timeout, |_| {}).await
    }

    /// [`Env::start`] with the relay's settings changed by `tweak` before it opens.
    pub async fn start_with(
        version: &'static str,
        backend: Backend,
        approval_timeout: Duration,
        tweak: impl FnOnce(&mut RelayConfig),
    ) -> Option<Env> {
        init_tracing();
        let model = ModelServer::start().await;
        let home = CodexHome::new(model.url());
        let target = store_target(backend, &home).await?;
        let bin = codex_relay_testkit::codex_bin(version).expect("pinned Codex installs");
        let mut config =
            RelayConfig::new(AppServerConfig::new(bin).codex_home(home.path()), target);
        bare_home(&mut config, &home);
        config.approval_timeout = approval_timeout;
        // On Postgres a relay is an instance of a cluster: a relay opened again with this
        // config (a restart, or after a crash) is the same instance, and resumes its sessions
        // at once.
        config.cluster.instance_id = Some(format!("test-{}", rand_suffix()));
        tweak(&mut config);
        let relay = Relay::open(config.clone()).await.expect("relay opens");
        Some(Env {
            model,
            home,
            relay,
            config,
        })
    }

    pub fn cwd(&self) -> String {
        self.home.workspace().display().to_string()
    }

    /// Waits until `pred` holds for the session's snapshot.
    pub async fn until(
        &self,
        id: &str,
        what: &str,
        pred: impl Fn(&SessionSnapshot) -> bool,
    ) -> SessionSnapshot {
        until(&self.relay, id, what, pred).await
    }

    pub async fn all_events(&self, id: &str) -> Vec<std::sync::Arc<Envelope>> {
        self.relay.events(id, 0, 100_000).await.expect("events")
    }

    pub async fn kinds(&self, id: &str) -> Vec<String> {
        self.all_events(id)
            .await
            .iter()
            .map(|e| match &e.ev {
                Ev::Status { status } => format!("status:{status}"),
                other => other.kind().to_owned(),
            })
            .collect()
    }
}

/// Waits until `pred` holds for a session of `relay`.
pub async fn until(
    relay: &Relay,
    id: &str,
    what: &str,
    pred: impl Fn(&SessionSnapshot) -> bool,
) -> SessionSnapshot {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let snap = relay.status(id).expect("known session");
        if pred(&snap) {
            return snap;
        }
        if tokio::time::Instant::now() >= deadline {
            let events = relay.events(id, 0, 100_000).await.unwrap_or_default();
            let tail: Vec<String> = events
                .iter()
                .rev()
                .take(12)
                .map(|e| format!("{} {:?}", e.seq, e.ev))
                .collect();
            panic!(
                "timed out waiting for {what}; status {:?}, last events: {tail:#?}",
                snap.status
            );
        }
        relay
            .wait(id, snap.last_seq, Duration::from_millis(500))
            .await
            .unwrap();
    }
}

/// Waits until the session's log holds an event for which `pred` holds (a bounded wait, woken
/// by the session's changes).
pub async fn until_logged(relay: &Relay, id: &str, what: &str, pred: impl Fn(&Ev) -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let events = relay.events(id, 0, 100_000).await.unwrap();
        if events.iter().any(|e| pred(&e.ev)) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        let last = events.last().map_or(0, |e| e.seq);
        relay
            .wait(id, last, Duration::from_millis(500))
            .await
            .unwrap();
    }
}

/// Opens a relay on `config` and runs `work` with it on a runtime of its own, which is then
/// dropped: every task stops where it is and nothing is resolved or recorded on the way out —
/// what a crash leaves behind (its Codex goes too, as Codex exits when its parent's pipes
/// close). Returns what `work` returned.
pub async fn crash_after<T, F, Fut>(config: RelayConfig, work: F) -> T
where
    F: FnOnce(Relay) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = T>,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let out = rt.block_on(async move {
            let relay = Relay::open(config)
                .await
                .expect("the relay that will crash");
            work(relay).await
        });
        drop(rt);
        out
    })
    .await
    .unwrap()
}

/// Asserts the seqs are 1..=n without gaps.
pub fn assert_contiguous(events: &[std::sync::Arc<Envelope>]) {
    for (i, e) in events.iter().enumerate() {
        assert_eq!(
            e.seq,
            i as u64 + 1,
            "seq gap at index {i}: {:?}",
            events.iter().map(|e| e.seq).collect::<Vec<_>>()
        );
    }
}

/// Generates `#[tokio::test]`s for every (Codex version × store backend) for each scenario
/// `async fn name(version, backend)`.
#[macro_export]
macro_rules! matrix {
    ($($scenario:ident),* $(,)?) => {
        $(
            mod $scenario {
                use $crate::common::Backend;
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn codex_0_171_0_sqlite() { super::$scenario("0.171.0", Backend::Sqlite).await }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn codex_0_98_0_sqlite() { super::$scenario("0.98.0", Backend::Sqlite).await }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn codex_0_171_0_postgres() { super::$scenario("0.171.0", Backend::Postgres).await }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn codex_0_98_0_postgres() { super::$scenario("0.98.0", Backend::Postgres).await }
            }
        )*
    };
}

/// Starts a read-only session in `cwd` with `prompt` and returns its id.
pub async fn start_read_only(relay: &Relay, cwd: String, prompt: &str) -> String {
    let (h, _) = relay
        .create(codex_relay_core::CreateOptions {
            prompt: Some(prompt.to_owned()),
            cwd: Some(cwd),
            mode: Some(codex_relay_core::PermissionMode::ReadOnly),
            ..Default::default()
        })
        .await
        .expect("the session starts");
    h.id().to_owned()
}

/// Codex and what it runs get an empty HOME: the user's shell start-up files (pyenv's rehash
/// lock among them) stay out of the test (see CODEX-FACTS, "Processes").
pub fn bare_home(config: &mut RelayConfig, home: &CodexHome) {
    let dir = home.root().join("user-home");
    std::fs::create_dir_all(&dir).expect("an empty HOME");
    config
        .codex
        .env
        .push(("HOME".into(), Some(dir.into_os_string())));
}
