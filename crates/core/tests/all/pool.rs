//! The pool of app-servers on the real Codex (0.169, SQLite): with two sessions per process and
//! six sessions running a command each, SIGKILLing one app-server interrupts only its two
//! sessions; the other four finish their turns; the two continue on a restarted process of their
//! own slot. Sessions with another CODEX_HOME get another process; a process with no session
//! left stops after the linger; after a relay restart the sessions spread over the pool again.

use crate::common;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use crate::common::{Backend, Env, assert_contiguous};
use codex_relay_core::event::TurnEndStatus;
use codex_relay_core::{
    CreateOptions, Envelope, Ev, PermissionMode, Relay, RelayConfig, SayInput, SessionStatus,
};
use codex_relay_testkit::{CodexHome, NEWEST, Reply, procs};

const LONG: Duration = Duration::from_secs(300);

/// The fixture's relay is closed and a pooled one opened on the same store and Codex.
async fn pooled(per: usize) -> (Env, Relay, RelayConfig) {
    let env = Env::start(NEWEST, Backend::Sqlite, LONG).await.unwrap();
    env.relay.shutdown().await;
    let mut config = env.config.clone();
    config.sessions_per_codex = per;
    config.codex_idle_linger = Duration::from_millis(300);
    let relay = Relay::open(config.clone()).await.expect("pooled relay");
    (env, relay, config)
}

fn read_only(env: &Env, prompt: &str) -> CreateOptions {
    CreateOptions {
        prompt: Some(prompt.into()),
        cwd: Some(env.cwd()),
        mode: Some(PermissionMode::ReadOnly),
        ..Default::default()
    }
}

async fn events(relay: &Relay, id: &str) -> Vec<Arc<Envelope>> {
    relay.events(id, 0, 100_000).await.expect("events")
}

fn errors(events: &[Arc<Envelope>]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.ev {
            Ev::Error { message, .. } => Some(message.clone()),
            _ => None,
        })
        .collect()
}

fn turn_ends(events: &[Arc<Envelope>]) -> Vec<TurnEndStatus> {
    events
        .iter()
        .filter_map(|e| match &e.ev {
            Ev::TurnEnd { status, .. } => Some(*status),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_one_app_server_interrupts_only_its_sessions() {
    let (env, relay, _) = pooled(2).await;
    for i in 0..6 {
        env.model.route(
            &format!("POOL-{i}"),
            [
                Reply::exec("sleep 6", &format!("call_{i}")),
                Reply::text(format!("done {i}")),
            ],
        );
    }
    let mut ids = Vec::new();
    for i in 0..6 {
        let (h, _) = relay
            .create(read_only(&env, &format!("POOL-{i} sleep a bit")))
            .await
            .unwrap();
        ids.push(h.id().to_owned());
    }
    // Six sessions on three processes, two each.
    let procs_now = relay.codex_processes();
    assert_eq!(procs_now.len(), 3, "{procs_now:?}");
    assert!(
        procs_now.iter().all(|p| p.sessions.len() == 2),
        "{procs_now:?}"
    );

    // Every session is running its command.
    let deadline = tokio::time::Instant::now() + common::WAIT;
    for id in &ids {
        while !events(&relay, id).await.iter().any(|e| {
            matches!(&e.ev, Ev::ToolCallStart { description, .. } if description.contains("sleep 6"))
        }) {
            assert!(tokio::time::Instant::now() < deadline, "no command in {id}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let pids: HashMap<&String, u32> = ids
        .iter()
        .map(|id| (id, relay.codex_pid(id).expect("a running process")))
        .collect();
    let victim = pids[&ids[0]];
    let (hit, spared): (Vec<&String>, Vec<&String>) = ids.iter().partition(|id| pids[id] == victim);
    assert_eq!(hit.len(), 2, "{pids:?}");
    let pgid = victim; // the app-server leads its own process group
    // SAFETY: kill(2) of an app-server this relay spawned.
    unsafe { libc::kill(victim as i32, libc::SIGKILL) };

    for id in &hit {
        let snap = common::until(&relay, id, "the killed process's session fails", |s| {
            s.status == SessionStatus::Error
        })
        .await;
        assert!(
            snap.last_error
                .as_deref()
                .unwrap_or("")
                .contains("Codex exited"),
            "{snap:?}"
        );
    }
    for (i, id) in ids.iter().enumerate() {
        if !spared.contains(&id) {
            continue;
        }
        let snap = common::until(&relay, id, "a spared session finishes", |s| {
            s.status == SessionStatus::Idle
        })
        .await;
        assert_eq!(snap.result, Some(serde_json::json!(format!("done {i}"))));
        let log = events(&relay, id).await;
        assert!(errors(&log).is_empty(), "{:?}", errors(&log));
        assert_eq!(turn_ends(&log), [TurnEndStatus::Completed]);
        assert_eq!(relay.codex_pid(id), Some(pids[id]), "kept its process");
    }
    assert!(
        procs::wait_group_gone(pgid, Duration::from_secs(5))
            .await
            .is_empty(),
        "the killed app-server's group (its `sleep 6`) survived"
    );

    // The two continue, both on one restarted process of their own slot.
    for (i, id) in ids.iter().enumerate() {
        if hit.contains(&id) {
            relay
                .say(id, SayInput::text(format!("POOL-{i} again")))
                .await
                .unwrap();
        }
    }
    let mut new_pids = BTreeSet::new();
    for (i, id) in ids.iter().enumerate() {
        if !hit.contains(&id) {
            continue;
        }
        let snap = common::until(&relay, id, "the killed session continues", |s| {
            s.status == SessionStatus::Idle
        })
        .await;
        assert_eq!(snap.result, Some(serde_json::json!(format!("done {i}"))));
        let log = events(&relay, id).await;
        assert_eq!(
            turn_ends(&log),
            [TurnEndStatus::Failed, TurnEndStatus::Completed]
        );
        assert_contiguous(&log);
        new_pids.insert(relay.codex_pid(id).expect("running again"));
    }
    assert_eq!(new_pids.len(), 1, "one restarted process: {new_pids:?}");
    assert!(!new_pids.contains(&victim));
    assert_eq!(relay.codex_processes().len(), 3);
    assert_eq!(relay.codex_restarts(), 1);
    for id in &spared {
        assert_eq!(
            relay.codex_pid(id),
            Some(pids[id]),
            "untouched by the restart"
        );
    }

    // Closing every session stops every process after the linger.
    let all: Vec<u32> = relay
        .codex_processes()
        .iter()
        .filter_map(|p| p.pid)
        .collect();
    for id in &ids {
        relay.close(id, true).await.unwrap();
    }
    for pid in all {
        assert!(
            procs::wait_group_gone(pid, Duration::from_secs(10))
                .await
                .is_empty(),
            "an idle app-server kept running"
        );
    }
    assert!(relay.codex_processes().is_empty());
    relay.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_codex_home_gets_its_own_process_and_restarts_spread_again() {
    let (env, relay, config) = pooled(0).await;
    let other = CodexHome::new(env.model.url());
    // Each session runs one turn: Codex keeps no record of a thread without one, and the
    // sessions are resumed after the restart below.
    let with_turn = |i: usize, home: Option<&CodexHome>| {
        env.model
            .route(&format!("HOME-{i}"), [Reply::text(format!("home {i}"))]);
        CreateOptions {
            codex_home: home.map(|h| h.path().display().to_string()),
            ..read_only(&env, &format!("HOME-{i} hi"))
        }
    };
    let (a, _) = relay.create(with_turn(0, None)).await.unwrap();
    let (b, _) = relay.create(with_turn(1, None)).await.unwrap();
    let (c, _) = relay.create(with_turn(2, Some(&other))).await.unwrap();
    for (i, h) in [&a, &b, &c].iter().enumerate() {
        let snap = common::until(&relay, h.id(), "the first turn", |s| {
            s.status == SessionStatus::Idle && s.turn_count == 1
        })
        .await;
        assert_eq!(snap.result, Some(serde_json::json!(format!("home {i}"))));
    }
    let pid = |h: &codex_relay_core::SessionHandle| relay.codex_pid(h.id()).unwrap();
    assert_eq!(pid(&a), pid(&b), "0 per process: one shared process");
    assert_ne!(pid(&a), pid(&c), "another CODEX_HOME, another process");
    let environ = std::fs::read_to_string(format!("/proc/{}/environ", pid(&c))).unwrap();
    assert!(
        environ.contains(&format!("CODEX_HOME={}", other.path().display())),
        "the process runs with the session's CODEX_HOME"
    );
    let ids: Vec<String> = [&a, &b, &c].iter().map(|h| h.id().to_owned()).collect();
    relay.shutdown().await;
    drop(relay);

    // After a restart with one per process, the sessions come back and spread over the pool;
    // the third resumes in a process with its own CODEX_HOME (its thread is only there).
    let mut config = config;
    config.sessions_per_codex = 1;
    let relay = Relay::open(config).await.unwrap();
    for (i, id) in ids.iter().enumerate() {
        env.model
            .route(&format!("BACK-{i}"), [Reply::text(format!("back {i}"))]);
        relay
            .say(id, SayInput::text(format!("BACK-{i} hello")))
            .await
            .unwrap();
    }
    for (i, id) in ids.iter().enumerate() {
        let snap = common::until(&relay, id, "the turn after the restart", |s| {
            s.status == SessionStatus::Idle && s.turn_count == 2
        })
        .await;
        assert_eq!(snap.result, Some(serde_json::json!(format!("back {i}"))));
    }
    let pids: BTreeSet<u32> = ids.iter().filter_map(|id| relay.codex_pid(id)).collect();
    assert_eq!(pids.len(), 3, "one session per process after the restart");
    let environ = std::fs::read_to_string(format!(
        "/proc/{}/environ",
        relay.codex_pid(&ids[2]).unwrap()
    ))
    .unwrap();
    assert!(environ.contains(&format!("CODEX_HOME={}", other.path().display())));
    relay.shutdown().await;
}

/// Codex takes longer to start than the linger (here by a wrapper that waits 2 s; a loaded
/// machine once took 30 s): the process is not stopped under the call that asked for it. The
/// linger counts from when it is up, and it still stops once nothing uses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_codex_slower_to_start_than_the_linger_serves_the_call_that_asked_for_it() {
    let env = Env::start(NEWEST, Backend::Sqlite, LONG).await.unwrap();
    env.relay.shutdown().await;
    let dir = tempfile::tempdir().unwrap();
    let wrapper = dir.path().join("slow-codex");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nsleep 2\nexec '{}' \"$@\"\n",
            env.config.codex.binary.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let mut config = env.config.clone();
    config.codex.binary = wrapper;
    config.codex_idle_linger = Duration::from_millis(300);
    let relay = Relay::open(config).await.expect("relay");

    let listed = relay.list(Default::default()).await;
    assert!(listed.is_ok(), "listing threads: {listed:?}");
    let server = relay.server().await.expect("a running app-server");
    assert!(
        server.peer().closed().is_none(),
        "the app-server was stopped under its caller"
    );
    let pid = server.pid();
    drop(server);
    assert!(
        procs::wait_group_gone(pid, Duration::from_secs(30))
            .await
            .is_empty(),
        "the idle app-server kept running after the linger"
    );
    relay.shutdown().await;
}
