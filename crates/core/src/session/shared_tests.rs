//! A session's status as a state machine: each change comes from what was logged or asked,
//! is logged once as a `status` event, and closed holds until an explicit reopen.

use std::sync::Arc;

use codex_relay_protocol::v2::ServerRequest;
use serde_json::json;

use super::*;
use crate::event::TurnEndStatus;

async fn session(dir: &tempfile::TempDir) -> Arc<SessionShared> {
    let store = Store::open(&dir.path().join("relay.db").display().to_string())
        .await
        .unwrap();
    SessionShared::new(
        "s1".into(),
        store,
        100,
        SessionShared::fresh_state(None, None, SessionMeta::default()),
    )
}

/// An open request of `kind` in turn `u1`.
fn request(id: &str, method: &str) -> PendingView {
    let params = match method {
        ServerRequest::COMMAND_APPROVAL => {
            json!({"threadId": "s1", "turnId": "u1", "itemId": id, "command": "make"})
        }
        _ => json!({"threadId": "s1", "turnId": "u1", "itemId": id,
            "questions": [{"id": "q", "header": "h", "question": "Which?", "options": null}]}),
    };
    crate::pending::describe(
        &ServerRequest::parse(method, params),
        id.into(),
        "s1".into(),
        0,
        1,
    )
}

/// The statuses logged so far, in order.
fn logged(s: &SessionShared) -> Vec<String> {
    s.events_in_memory(0, 1000)
        .unwrap()
        .iter()
        .filter_map(|e| match &e.ev {
            Ev::Status { status } => Some(status.clone()),
            _ => None,
        })
        .collect()
}

fn end(s: &SessionShared, status: TurnEndStatus) {
    s.append(
        Role::System,
        Some("u1".into()),
        Ev::TurnEnd {
            status,
            error: None,
            stopped: None,
            usage: None,
            error_kind: None,
        },
    );
}

#[tokio::test]
async fn a_turn_with_an_approval_and_a_question_walks_the_statuses_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let s = session(&dir).await;
    assert_eq!(s.status(), SessionStatus::Idle);
    s.turn_started("u1", false);
    assert_eq!(s.status(), SessionStatus::Active);
    s.add_pending(request("q1", ServerRequest::USER_INPUT));
    assert_eq!(s.status(), SessionStatus::AwaitingInput);
    // An approval is what a person must look at first.
    s.add_pending(request("a1", ServerRequest::COMMAND_APPROVAL));
    assert_eq!(s.status(), SessionStatus::AwaitingApproval);
    s.remove_pending("a1", Ev::Status { status: "x".into() });
    assert_eq!(s.status(), SessionStatus::AwaitingInput);
    s.remove_pending("q1", Ev::Status { status: "x".into() });
    assert_eq!(s.status(), SessionStatus::Active);
    end(&s, TurnEndStatus::Completed);
    assert_eq!(s.status(), SessionStatus::Idle);
    s.turn_started("u2", false);
    s.append(
        Role::System,
        Some("u2".into()),
        Ev::TurnEnd {
            status: TurnEndStatus::Cancelled,
            error: None,
            stopped: None,
            usage: None,
            error_kind: None,
        },
    );
    assert_eq!(s.status(), SessionStatus::Interrupted);
    s.turn_started("u3", false);
    s.append(
        Role::System,
        Some("u3".into()),
        Ev::TurnEnd {
            status: TurnEndStatus::Failed,
            error: Some("boom".into()),
            stopped: None,
            usage: None,
            error_kind: None,
        },
    );
    assert_eq!(s.status(), SessionStatus::Error);
    assert_eq!(s.snapshot().turn_count, 3);
    // Each change logged once, in order (the two `x` events are the resolutions given above).
    let words: Vec<String> = logged(&s).into_iter().filter(|w| w != "x").collect();
    assert_eq!(
        words,
        [
            "active",
            "awaiting_input",
            "awaiting_approval",
            "awaiting_input",
            "active",
            "idle",
            "active",
            "interrupted",
            "active",
            "error"
        ]
    );
}

#[tokio::test]
async fn the_end_of_an_older_turn_does_not_end_the_running_one() {
    let dir = tempfile::tempdir().unwrap();
    let s = session(&dir).await;
    s.turn_started("u1", false);
    s.turn_started("u2", false);
    end(&s, TurnEndStatus::Completed); // u1's end, late
    assert_eq!(s.status(), SessionStatus::Active);
    assert_eq!(s.current_turn().as_deref(), Some("u2"));
}

#[tokio::test]
async fn closed_holds_through_turn_events_until_an_explicit_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let s = session(&dir).await;
    s.turn_started("u1", false);
    s.close();
    assert_eq!(s.status(), SessionStatus::Closed);
    assert_eq!(s.current_turn(), None, "closing ends the turn");
    s.turn_started("u2", false);
    assert_eq!(s.status(), SessionStatus::Closed);
    s.reopen();
    assert_eq!(s.status(), SessionStatus::Active, "u2 runs");
    end(&s, TurnEndStatus::Completed);
    s.close();
    s.reopen();
    assert_eq!(s.status(), SessionStatus::Idle);
    assert_eq!(logged(&s).last().map(String::as_str), Some("idle"));
}

#[tokio::test]
async fn a_restored_session_that_was_running_comes_back_interrupted_and_closed_stays_closed() {
    let record = |status: &str| SessionRecord {
        id: "s1".into(),
        thread_id: "s1".into(),
        cwd: None,
        model: None,
        status: status.into(),
        created_at: 0,
        updated_at: 0,
        turn_count: 2,
        last_seq: 7,
        meta: "{}".into(),
    };
    let running = SessionShared::restored_state(&record("awaiting_approval"));
    assert_eq!(running.status, SessionStatus::Interrupted);
    let closed = SessionShared::restored_state(&record("closed"));
    assert_eq!(
        (closed.status, closed.closed),
        (SessionStatus::Closed, true)
    );
    let junk = SessionShared::restored_state(&record("napping"));
    assert_eq!(junk.status, SessionStatus::Idle);
    assert_eq!((junk.last_seq, junk.turn_count), (7, 2));
}
