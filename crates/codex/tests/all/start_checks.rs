//! `AppServer::start` asks `codex --version` when the handshake is slow: a binary too old for
//! app-server v2 is still refused, at once, and what it started is stopped (no process left).

use std::time::{Duration, Instant};

use codex_relay_codex::{AppServer, AppServerConfig, StartError};
use codex_relay_testkit::procs;

#[tokio::test]
async fn an_unsupported_binary_is_refused_and_leaves_no_process() {
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("codex");
    // Old enough to be refused; as a server it would just hang.
    std::fs::write(
        &fake,
        "#!/bin/sh\ncase \"$*\" in *--version*) echo 'codex-cli 0.40.0';; *) exec sleep 30;; esac\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let marker = format!("START_CHECKS_MARKER={}", std::process::id());
    let mut config = AppServerConfig::new(&fake);
    config.env.push((
        "START_CHECKS_MARKER".into(),
        Some(std::process::id().to_string().into()),
    ));
    let started = Instant::now();
    let err = match AppServer::start(config).await {
        Ok(_) => panic!("an unsupported binary was started"),
        Err(e) => e,
    };
    assert!(matches!(err, StartError::Unsupported { .. }), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "refused only after {:?}",
        started.elapsed()
    );
    let left = procs::wait_env_gone(&marker, Duration::from_secs(5)).await;
    assert!(left.is_empty(), "left running: {left:?}");
}
