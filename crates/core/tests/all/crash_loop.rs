//! Codex in a crash loop, over the real Codex: the relay restarts it with growing waits, and
//! after the limit of crashes within the window it stops restarting and every call fails at
//! once with a typed `CodexCrashLoop` error naming the last crash.

use crate::common;

use std::time::{Duration, Instant};

use codex_relay_codex::AppServerConfig;
use codex_relay_core::crash_loop::CrashPolicy;
use codex_relay_core::{CreateOptions, Relay, RelayConfig, RelayError};
use codex_relay_testkit::{CodexHome, ModelServer};

async fn killed(server: &codex_relay_codex::AppServer) {
    // SAFETY: kill(2) of the Codex process the relay spawned.
    unsafe { libc::kill(server.pid() as i32, libc::SIGKILL) };
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.peer().closed().is_none() {
        assert!(Instant::now() < deadline, "the relay saw Codex die");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_sigkilled_repeatedly_is_given_up_after_the_limit_with_a_typed_error() {
    common::init_tracing();
    let model = ModelServer::start().await;
    let home = CodexHome::new(model.url());
    let bin =
        codex_relay_testkit::codex_bin(codex_relay_testkit::NEWEST).expect("pinned Codex installs");
    let mut config = RelayConfig::new(
        AppServerConfig::new(bin).codex_home(home.path()),
        home.root().join("relay.db").display().to_string(),
    );
    config.crash_policy = CrashPolicy {
        max_crashes: 3,
        window: Duration::from_secs(120),
        backoff_base: Duration::from_millis(300),
        backoff_max: Duration::from_secs(2),
    };
    let relay = Relay::open(config).await.expect("relay opens");

    let mut pids = Vec::new();
    for crash in 0..3u32 {
        let asked = Instant::now();
        let server = relay
            .server()
            .await
            .expect("Codex (re)starts below the limit");
        if crash > 0 {
            // The wait doubles with each recent crash: 300 ms, then 600 ms.
            let wait = Duration::from_millis(300) * (1 << (crash - 1));
            assert!(asked.elapsed() >= wait, "restart {crash} waited {wait:?}");
        }
        pids.push(server.pid());
        killed(&server).await;
    }
    assert_eq!(relay.feed().codex_starts(), 3);
    assert_eq!(pids.len(), 3);

    let asked = Instant::now();
    let Err(err) = relay.server().await else {
        panic!("no fourth start");
    };
    assert!(asked.elapsed() < Duration::from_secs(1), "refused at once");
    match &err {
        RelayError::CodexCrashLoop { crashes, last, .. } => {
            assert_eq!(*crashes, 3);
            assert!(
                last.contains("signal 9") || last.contains("SIGKILL"),
                "{last}"
            );
        }
        other => panic!("expected CodexCrashLoop, got {other:?}"),
    }
    let said = err.to_string();
    assert!(said.contains("stopped restarting"), "{said}");
    assert_eq!(relay.feed().codex_starts(), 3, "nothing was started");
    assert!(
        relay.codex_crash_loop().is_some(),
        "status shows the give-up"
    );

    // The first call of a client (create a session) gets the same error.
    let create = relay.create(CreateOptions::default()).await;
    assert!(
        matches!(create, Err(RelayError::CodexCrashLoop { .. })),
        "{:?}",
        create.err().map(|e| e.to_string())
    );
}
