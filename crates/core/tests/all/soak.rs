//! Soak over the real Codex (issue 11): Codex SIGKILLed again and again across live sessions,
//! and the relay itself killed mid-approval and started again, many times in a row. After
//! each: no process of the dead Codex (or dead relay) is left, `seq` is contiguous, every open
//! approval is resolved (`codex-exit` / `relay-restart`), and every session continues.
//!
//! CI runs a modest count (`SOAK_CODEX_KILLS` = 12 over 4 sessions, `SOAK_RELAY_KILLS` = 4);
//! the figures are `SOAK_CODEX_KILLS=100 SOAK_SESSIONS=10 SOAK_RELAY_KILLS=20
//! cargo test -p codex-relay-core --test all soak -- --nocapture`.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use crate::common::{Backend, Env, assert_contiguous};
use codex_relay_core::{
    CreateOptions, Envelope, Ev, PermissionMode, Relay, SayInput, SessionStatus,
};
use codex_relay_testkit::{NEWEST, Reply, procs};

const LONG: Duration = Duration::from_secs(600);

fn knob(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

async fn log(relay: &Relay, id: &str) -> Vec<Arc<Envelope>> {
    relay.events(id, 0, 1_000_000).await.expect("events")
}

/// Every `request-opened` of the log has its `request-resolved`.
fn assert_all_resolved(log: &[Arc<Envelope>]) {
    let opened: Vec<String> = log
        .iter()
        .filter_map(|e| match &e.ev {
            Ev::RequestOpened { request } => Some(request.id.clone()),
            _ => None,
        })
        .collect();
    for id in opened {
        assert!(
            log.iter()
                .any(|e| matches!(&e.ev, Ev::RequestResolved { id: r, .. } if *r == id)),
            "request {id} was never resolved"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_killed_again_and_again_across_live_sessions() {
    let kills = knob("SOAK_CODEX_KILLS", 12);
    let sessions = knob("SOAK_SESSIONS", 4);
    let env = Env::start(NEWEST, Backend::Sqlite, LONG).await.unwrap();
    env.relay.shutdown().await;
    let mut config = env.config.clone();
    // Every kill here is deliberate: the crash-loop guard must not give up on them.
    config.crash_policy.max_crashes = u32::MAX;
    config.crash_policy.window = Duration::from_millis(1);
    let relay = Relay::open(config).await.unwrap();
    // Every turn runs a command long enough to be killed during it: one per kill of the session
    // and one for its first turn (killed with the shared app-server before the session's own
    // turn came, or lost with Codex before it reached the model). The last turn of each session
    // has a marker of its own, routed first, so what earlier turns left unused never delays it.
    for i in 0..sessions {
        env.model
            .route(&format!("SOAK-END-{i}:"), [Reply::text("still here")]);
    }
    for i in 0..sessions {
        let turns = (0..kills).filter(|k| k % sessions == i).count() + 1;
        let replies: Vec<Reply> = (0..turns)
            .map(|t| Reply::exec("sleep 20", &format!("call_soak_{i}_{t}")))
            .collect();
        env.model.route(&format!("SOAK-{i}:"), replies);
    }
    let mut ids = Vec::new();
    for i in 0..sessions {
        let (h, _) = relay
            .create(CreateOptions {
                prompt: Some(format!("SOAK-{i}: start")),
                cwd: Some(env.cwd()),
                mode: Some(PermissionMode::ReadOnly),
                ..Default::default()
            })
            .await
            .unwrap();
        ids.push(h.id().to_owned());
    }
    for k in 0..kills {
        let id = &ids[k % sessions];
        // The session is running its command (start it again when the last kill ended it).
        if relay.status(id).unwrap().status != SessionStatus::Active {
            relay
                // The marker again: when Codex was killed before it stored the session's
                // first prompt, the thread's history does not have it.
                .say(
                    id,
                    SayInput::text(format!("SOAK-{}: again {k}", k % sessions)),
                )
                .await
                .unwrap();
        }
        let deadline = tokio::time::Instant::now() + common::WAIT;
        let running = loop {
            let log = log(&relay, id).await;
            let starts = log
                .iter()
                .filter(|e| matches!(e.ev, Ev::ToolCallStart { .. }))
                .count();
            let ends = log
                .iter()
                .filter(|e| matches!(e.ev, Ev::ToolCallEnd { .. }))
                .count();
            if starts > ends {
                break relay.codex_pid(id);
            }
            if tokio::time::Instant::now() >= deadline {
                let tail: Vec<String> = log
                    .iter()
                    .rev()
                    .take(12)
                    .map(|e| serde_json::to_string(&e.ev).unwrap_or_default())
                    .collect();
                panic!(
                    "kill {k}: no command runs in {id} ({:?}); model requests for it: {}; unscripted: {:?}; newest events first: {tail:#?}",
                    relay.status(id).map(|s| s.status),
                    env.model
                        .requests_with(&format!("SOAK-{}:", k % sessions))
                        .len(),
                    env.model.unscripted(),
                );
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        };
        let pid = running.expect("a running app-server");
        // SAFETY: kill(2) of an app-server this relay spawned.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        common::until(&relay, id, "the session sees Codex die", |s| {
            s.status == SessionStatus::Error
        })
        .await;
        assert!(
            procs::wait_group_gone(pid, Duration::from_secs(10))
                .await
                .is_empty(),
            "kill {k}: the dead app-server's group survived"
        );
        for id in &ids {
            let log = log(&relay, id).await;
            assert_contiguous(&log);
            assert_all_resolved(&log);
        }
    }
    // Every session continues: one more turn each completes.
    for (i, id) in ids.iter().enumerate() {
        if relay.status(id).unwrap().status == SessionStatus::Active {
            relay.interrupt(id).await.unwrap();
            common::until(&relay, id, "interrupted", |s| {
                s.status != SessionStatus::Active
            })
            .await;
        }
        relay
            .say(id, SayInput::text(format!("SOAK-END-{i}: done")))
            .await
            .unwrap();
        let snap = common::until(&relay, id, "the last turn", |s| {
            s.status == SessionStatus::Idle
        })
        .await;
        assert_eq!(snap.result, Some(serde_json::json!("still here")));
        assert_contiguous(&log(&relay, id).await);
    }
    eprintln!(
        "soak: Codex SIGKILLed {kills} times across {sessions} sessions; every session continued"
    );
    relay.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_killed_mid_approval_again_and_again() {
    let kills = knob("SOAK_RELAY_KILLS", 4);
    let env = Env::start(NEWEST, Backend::Sqlite, LONG).await.unwrap();
    env.relay.shutdown().await;
    // Each turn asks to run a command; nobody answers before the relay dies. Then one answer.
    let mut replies: Vec<Reply> = (0..kills)
        .map(|k| Reply::exec("touch soak.txt", &format!("call_ask_{k}")))
        .collect();
    replies.push(Reply::text("back for good"));
    env.model.route("SOAK-R", replies);
    let config = env.config.clone();
    let cwd = env.cwd();
    let mut id: Option<String> = None;
    for k in 0..kills {
        let cwd = cwd.clone();
        let known = id.clone();
        let (sid, pending) = common::crash_after(config.clone(), move |relay| async move {
            let sid = match known {
                None => {
                    let (h, _) = relay
                        .create(CreateOptions {
                            prompt: Some("SOAK-R ask".into()),
                            cwd: Some(cwd),
                            mode: Some(PermissionMode::Default),
                            ..Default::default()
                        })
                        .await
                        .unwrap();
                    h.id().to_owned()
                }
                Some(sid) => {
                    relay
                        .say(&sid, SayInput::text(format!("SOAK-R ask again {k}")))
                        .await
                        .unwrap();
                    sid
                }
            };
            let snap = common::until(&relay, &sid, "the approval", |s| {
                s.status == SessionStatus::AwaitingApproval
            })
            .await;
            (sid, snap.pending[0].id.clone())
        })
        .await;
        // Nothing of the dead relay is left running.
        let entry = format!("CODEX_HOME={}", env.home.path().display());
        let left = procs::wait_env_gone(&entry, Duration::from_secs(10)).await;
        let what: Vec<String> = left
            .iter()
            .map(|p| {
                std::fs::read_to_string(format!("/proc/{p}/cmdline"))
                    .unwrap_or_default()
                    .replace('\0', " ")
            })
            .collect();
        assert!(
            left.is_empty(),
            "kill {k}: processes left: {left:?} {what:?}"
        );
        let relay = Relay::open(config.clone()).await.expect("reopen");
        let log = log(&relay, &sid).await;
        assert_contiguous(&log);
        assert!(
            log.iter().any(|e| matches!(&e.ev,
                Ev::RequestResolved { id, by, .. } if *id == pending && by.as_str() == "relay-restart")),
            "kill {k}: the open approval is resolved relay-restart"
        );
        assert_all_resolved(&log);
        assert_eq!(
            relay.status(&sid).unwrap().status,
            SessionStatus::Interrupted
        );
        relay.shutdown().await;
        drop(relay);
        id = Some(sid);
    }
    // And the session continues after the last restart.
    let sid = id.unwrap();
    let relay = Relay::open(config).await.unwrap();
    relay
        .say(&sid, SayInput::text("SOAK-R wake"))
        .await
        .unwrap();
    let snap = common::until(&relay, &sid, "the turn after the restarts", |s| {
        s.status == SessionStatus::Idle
    })
    .await;
    assert_eq!(snap.result, Some(serde_json::json!("back for good")));
    assert_contiguous(&log(&relay, &sid).await);
    eprintln!("soak: relay killed {kills} times mid-approval; the session continued");
    relay.shutdown().await;
}
