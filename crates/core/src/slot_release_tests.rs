//! A session's `MAX_SESSIONS` slot comes back on every way out: a failed start, a close, and an
//! actor that crashed; the cap holds meanwhile.

use std::sync::Arc;
use std::time::Duration;

use codex_relay_codex::AppServerConfig;

use crate::error::RelayError;
use crate::relay::{CreateOptions, Relay, RelayConfig};
use crate::session::{SayInput, SessionShared};

/// A relay whose Codex cannot start (the binary does not exist), with `max` slots, on a fresh
/// SQLite file.
async fn relay(dir: &tempfile::TempDir, max: usize) -> Relay {
    let store = dir.path().join("relay.db").display().to_string();
    let mut config = RelayConfig::new(AppServerConfig::new("/nonexistent/codex"), store);
    config.max_sessions = max;
    config.crash_policy.backoff_base = Duration::from_millis(1);
    config.crash_policy.backoff_max = Duration::from_millis(1);
    Relay::open(config).await.expect("the relay opens")
}

/// A session with no Codex behind it (as recovery restores one).
fn shared(relay: &Relay, id: &str) -> Arc<SessionShared> {
    let state = SessionShared::fresh_state(None, None, Default::default());
    SessionShared::new(
        id.into(),
        relay.store().clone(),
        relay.config().event_buffer,
        state,
    )
}

#[tokio::test]
async fn a_failed_start_frees_the_slot_it_took() {
    let dir = tempfile::tempdir().unwrap();
    let relay = relay(&dir, 1).await;

    let created = relay.create(CreateOptions::default()).await;
    let created = created.err();
    assert!(matches!(created, Some(RelayError::Start(_))), "{created:?}");
    assert_eq!(relay.inner.slots.used(), 0, "create gave its slot back");

    let resumed = relay.session("019a0000-0000-7000-8000-000000000000").await;
    assert!(resumed.is_err());
    assert_eq!(relay.inner.slots.used(), 0, "a resume gave its slot back");

    // A dormant session that cannot be attached to Codex gives back the slot its `say` took.
    let dormant = relay.spawn_session(shared(&relay, "dormant"), None, &[], None);
    let said = relay.say(dormant.id(), SayInput::text("hi")).await;
    let said = said.err();
    assert!(matches!(said, Some(RelayError::Start(_))), "{said:?}");
    assert_eq!(
        relay.inner.slots.used(),
        0,
        "the failed say gave its slot back"
    );
}

#[tokio::test]
async fn closing_a_session_frees_its_slot() {
    let dir = tempfile::tempdir().unwrap();
    let relay = relay(&dir, 1).await;
    let slot = relay.inner.slots.claim("s1").unwrap();
    relay.spawn_session(shared(&relay, "s1"), None, &[], Some(slot));
    assert!(matches!(
        relay.inner.slots.claim("s2"),
        Err(RelayError::TooManySessions { max: 1 })
    ));

    relay.close("s1", true).await.unwrap();
    assert!(!relay.inner.slots.holds("s1"));
    assert!(relay.inner.slots.claim("s2").is_ok(), "the slot is free");
}

#[tokio::test]
async fn an_actor_that_crashes_frees_its_slot() {
    let dir = tempfile::tempdir().unwrap();
    let relay = relay(&dir, 1).await;
    let slot = relay.inner.slots.claim("s1").unwrap();
    let (actor, handle) = relay.session_actor(shared(&relay, "s1"), None, &[], Some(slot));
    // The actor is mid-loop when its task panics: nothing after its loop runs.
    let task = tokio::spawn(async move {
        let run = actor.run();
        tokio::pin!(run);
        tokio::select! {
            _ = &mut run => unreachable!("the actor runs until its session closes"),
            _ = tokio::time::sleep(Duration::from_millis(20)) => panic!("the actor crashed"),
        }
    });
    assert!(task.await.unwrap_err().is_panic());
    assert!(
        !relay.inner.slots.holds("s1"),
        "the crashed actor's slot is free"
    );
    assert_eq!(relay.inner.slots.used(), 0);
    // Its handle now reports the session as gone instead of hanging.
    assert!(handle.interrupt().await.is_err());
}
