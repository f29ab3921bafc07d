//! The crash and restart contract of docs/EVENTS.md on the real Codex: the relay dies while a
//! turn runs a command with nothing pending; after the restart the session shows
//! `interrupted`, an `error` event says the relay restarted, no Codex of the dead relay is left,
//! a second restart in a row changes nothing, and `say` continues the thread. And the cut turn
//! is closed: even when the relay dies before its store committed what clients were shown, the
//! log afterwards holds the command's `tool-call-start` (from Codex's own record of the
//! thread), a cancelled `turn-end` and an `error`, then the next turn. In both cases every
//! event a client was shown comes back under the seq it was shown with (docs/STORE.md: the
//! spool covers what the store had not committed), and nothing is numbered twice.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use crate::common::{Backend, Env, assert_contiguous};
use codex_relay_core::event::{ToolEndStatus, TurnEndStatus};
use codex_relay_core::{
    CreateOptions, Envelope, Ev, PermissionMode, Relay, RelayConfig, SayInput, SayOutcome,
    SessionStatus,
};
use codex_relay_testkit::{Reply, for_each_codex, procs};

for_each_codex!(a_crash_mid_command_then_two_restarts);
for_each_codex!(a_crash_before_the_store_committed_the_command);

const LONG: Duration = Duration::from_secs(300);

async fn a_crash_mid_command_then_two_restarts(version: &'static str) {
    scenario(version, Crash::AfterCommit).await
}

async fn a_crash_before_the_store_committed_the_command(version: &'static str) {
    scenario(version, Crash::AtOnce).await
}

/// When the relay dies: after its store committed what clients were shown, or at once (the
/// last events still inside the store's linger window).
#[derive(Clone, Copy, PartialEq)]
enum Crash {
    AfterCommit,
    AtOnce,
}

/// Runs a relay on a runtime of its own until a `sleep 30` command runs, then drops the
/// runtime: every task stops where it is, nothing is recorded on the way out (a crash).
async fn crash_mid_command(
    config: RelayConfig,
    cwd: String,
    crash: Crash,
) -> (String, Vec<Arc<Envelope>>) {
    common::crash_after(config, move |relay| async move {
        let (h, _) = relay
            .create(CreateOptions {
                prompt: Some("RESTART-ME sleep a while".into()),
                cwd: Some(cwd),
                mode: Some(PermissionMode::ReadOnly),
                ..Default::default()
            })
            .await
            .unwrap();
        let id = h.id().to_owned();
        let deadline = tokio::time::Instant::now() + common::WAIT;
        loop {
            let events = relay.events(&id, 0, 10_000).await.unwrap();
            if events.iter().any(|e| matches!(&e.ev, Ev::ToolCallStart { description, .. } if description.contains("sleep 30"))) {
                assert!(relay.status(&id).unwrap().pending.is_empty());
                assert_eq!(relay.status(&id).unwrap().status, SessionStatus::Active);
                if crash == Crash::AfterCommit {
                    relay.store().flush().await.unwrap();
                }
                return (id, events);
            }
            assert!(tokio::time::Instant::now() < deadline, "the command never started");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
}

fn restart_errors(events: &[Arc<Envelope>]) -> usize {
    events
        .iter()
        .filter(
            |e| matches!(&e.ev, Ev::Error { message, .. } if message.contains("relay restarted")),
        )
        .count()
}

async fn scenario(version: &'static str, crash: Crash) {
    let env = Env::start(version, Backend::Sqlite, LONG).await.unwrap();
    // The fixture's own relay is not used: close it so only the crashing one runs Codex.
    env.relay.shutdown().await;
    env.model
        .route("RESTART-ME", [Reply::exec("sleep 30", "call_sleep")]);
    let (id, before) = crash_mid_command(env.config.clone(), env.cwd(), crash).await;

    // Nothing of the dead relay is left running: Codex and its `sleep 30` are gone.
    let entry = format!("CODEX_HOME={}", env.home.path().display());
    let left = procs::wait_env_gone(&entry, Duration::from_secs(5)).await;
    assert!(
        left.is_empty(),
        "processes left by the crashed relay: {left:?}"
    );

    // First restart: interrupted, and an error event says why; the history before is intact.
    let relay2 = Relay::open(env.config.clone()).await.expect("reopen");
    let snap = relay2.status(&id).unwrap();
    assert_eq!(snap.status, SessionStatus::Interrupted, "{snap:?}");
    let after = relay2.events(&id, 0, 10_000).await.unwrap();
    // What clients were shown comes back whole, each event under the seq it was shown with:
    // committed before the crash, or replayed from the spool when the relay died inside the
    // store's linger window (Crash::AtOnce). The restart's own events come after them.
    assert!(!before.is_empty());
    for shown in &before {
        let stored = after.iter().find(|e| e.seq == shown.seq);
        assert_eq!(
            stored.map(|e| &**e),
            Some(&**shown),
            "shown as seq {} before the crash, not so after it\n{after:#?}",
            shown.seq
        );
    }
    assert_contiguous(&after);
    assert_eq!(restart_errors(&after), 1, "{after:#?}");
    // Closing the cut turn from Codex's record adds what the log lacks, nothing twice.
    let starts = after
        .iter()
        .filter(|e| matches!(&e.ev, Ev::ToolCallStart { description, .. } if description.contains("sleep 30")))
        .count();
    assert_eq!(starts, 1, "{after:#?}");
    // The command's start, then the cut turn's end, then the error, then the status.
    let at = |what: &str, f: &dyn Fn(&Ev) -> bool| {
        after
            .iter()
            .position(|e| f(&e.ev))
            .unwrap_or_else(|| panic!("no {what}: {after:#?}"))
    };
    let start = at(
        "tool-call-start",
        &|ev| matches!(ev, Ev::ToolCallStart { description, .. } if description.contains("sleep 30")),
    );
    let end = at("cancelled turn-end", &|ev| {
        matches!(
            ev,
            Ev::TurnEnd {
                status: TurnEndStatus::Cancelled,
                ..
            }
        )
    });
    let error = at(
        "restart error",
        &|ev| matches!(ev, Ev::Error { message, .. } if message.contains("relay restarted")),
    );
    let status = at(
        "interrupted status",
        &|ev| matches!(ev, Ev::Status { status } if status == "interrupted"),
    );
    assert!(start < end && end < error && error < status, "{after:#?}");
    assert!(
        after.iter().any(|e| matches!(
            &e.ev,
            Ev::ToolCallEnd {
                status: ToolEndStatus::Failed,
                ..
            }
        )),
        "the cut command ends too: {after:#?}"
    );
    relay2.store().flush().await.unwrap();
    drop(relay2);

    // Second restart in a row, with nothing running: the same state, no new error.
    let relay3 = Relay::open(env.config.clone()).await.expect("reopen again");
    assert_eq!(
        relay3.status(&id).unwrap().status,
        SessionStatus::Interrupted
    );
    let again = relay3.events(&id, 0, 10_000).await.unwrap();
    assert_eq!(again, after, "a restart with nothing running adds nothing");

    // And the session continues: the model sees the thread so far.
    env.model.route("RESTART-ME", [Reply::text("awake again")]);
    let out = relay3
        .say(&id, SayInput::text("RESTART-ME are you there?"))
        .await
        .unwrap();
    assert!(matches!(out, SayOutcome::Started { .. }), "{out:?}");
    let snap = common::until(&relay3, &id, "the turn after the restarts", |s| {
        s.status == SessionStatus::Idle
    })
    .await;
    assert_eq!(snap.result, Some(serde_json::json!("awake again")));
    let input = env.model.requests_with("RESTART-ME").pop().unwrap().body["input"].to_string();
    assert!(input.contains("sleep a while"), "{input}");
    let last = relay3.events(&id, 0, 10_000).await.unwrap();
    assert_contiguous(&last);
    let next = last[after.len()..]
        .iter()
        .position(|e| matches!(e.ev, Ev::TurnStart {}));
    assert!(next.is_some(), "then the next turn: {last:#?}");
    relay3.shutdown().await;
}
