//! Thread operations on the real Codex (0.171 and 0.169; 0.98 where it degrades): a review
//! returns the scripted review's findings as structured output; a rollback and a fork keep the
//! log's seq contiguous and the session's history what Codex's `thread/read` lists; the model
//! list and a session's model and effort reach the model's requests.

use std::time::Duration;

use codex_relay_codex::CodexVersion;
use codex_relay_core::{
    CreateOptions, Ev, ModelChoice, PermissionMode, Relay, RelayError, ReviewTarget, SayInput,
    SessionStatus,
};
use codex_relay_protocol::v2::{ThreadItem, ThreadRead, ThreadReadParams};
use codex_relay_testkit::Reply;
use serde_json::json;

use crate::common::{Backend, Env};

const LONG: Duration = Duration::from_secs(300);

macro_rules! on_codex {
    ($($scenario:ident: $($version:ident = $v:literal),*;)*) => {$(
        mod $scenario {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $version() {
                    super::$scenario($v).await
                }
            )*
        }
    )*};
}

on_codex! {
    review_gives_the_findings_structured: codex_0_171_0 = "0.171.0", codex_0_169_0 = "0.169.0", codex_0_98_0 = "0.98.0";
    rollback_and_fork_keep_the_log_and_history_consistent: codex_0_171_0 = "0.171.0", codex_0_169_0 = "0.169.0", codex_0_98_0 = "0.98.0";
    model_and_effort_reach_the_model: codex_0_171_0 = "0.171.0", codex_0_169_0 = "0.169.0";
}

fn newer(version: &str) -> bool {
    CodexVersion::parse(version).unwrap().has_thread_revert()
}

async fn session(env: &Env) -> String {
    let (h, _) = env
        .relay
        .create(CreateOptions {
            cwd: Some(env.cwd()),
            mode: Some(PermissionMode::ReadOnly),
            ..Default::default()
        })
        .await
        .unwrap();
    h.id().to_owned()
}

async fn turn(env: &Env, id: &str, text: &str) {
    let before = env.relay.status(id).unwrap().turn_count;
    env.relay.say(id, SayInput::text(text)).await.unwrap();
    env.until(id, text, |s| {
        s.turn_count > before && s.status == SessionStatus::Idle
    })
    .await;
}

/// Codex's own history of a thread: `(turn id, user texts)` per turn.
async fn codex_history(relay: &Relay, id: &str) -> Vec<(String, Vec<String>)> {
    let server = relay.server_of(id).expect("the session's Codex runs");
    let read = server
        .call::<ThreadRead>(&ThreadReadParams {
            thread_id: id.to_owned(),
            include_turns: true,
        })
        .await
        .expect("thread/read");
    read.thread
        .turns
        .iter()
        .map(|t| {
            let texts = t
                .items
                .iter()
                .filter_map(|i| match i {
                    ThreadItem::UserMessage(u) => Some(
                        u.content
                            .iter()
                            .filter_map(|c| c.get("text")?.as_str().map(str::to_owned))
                            .collect::<Vec<_>>()
                            .join(""),
                    ),
                    _ => None,
                })
                .collect();
            (t.id.clone(), texts)
        })
        .collect()
}

/// The session's history as its log tells it: per turn still in its history, the user's texts.
async fn our_history(env: &Env, id: &str) -> Vec<(String, Vec<String>)> {
    let turns = env.relay.status(id).unwrap().turns;
    let events = env.all_events(id).await;
    turns
        .iter()
        .map(|t| {
            let texts = events
                .iter()
                .filter(|e| e.turn.as_deref() == Some(t) && e.role == codex_relay_core::Role::User)
                .filter_map(|e| match &e.ev {
                    Ev::Text { text, .. } => Some(text.clone()),
                    _ => None,
                })
                .collect();
            (t.clone(), texts)
        })
        .collect()
}

/// The log's seq runs 1, 2, 3, ... without a gap.
async fn assert_contiguous(env: &Env, id: &str) {
    let seqs: Vec<u64> = env.all_events(id).await.iter().map(|e| e.seq).collect();
    let want: Vec<u64> = (1..=seqs.len() as u64).collect();
    assert_eq!(seqs, want, "session {id}'s log is not contiguous");
}

/// The same history: on 0.169+ the same turn ids; on 0.98 (whose `thread/read` names turns
/// afresh) the same turns in the same order.
fn assert_same_history(
    version: &str,
    ours: &[(String, Vec<String>)],
    codex: &[(String, Vec<String>)],
) {
    if newer(version) {
        assert_eq!(
            ours, codex,
            "the session's history differs from thread/read's"
        );
    } else {
        let texts = |h: &[(String, Vec<String>)]| h.iter().map(|t| t.1.clone()).collect::<Vec<_>>();
        assert_eq!(
            texts(ours),
            texts(codex),
            "the session's history differs from thread/read's"
        );
    }
}

async fn review_gives_the_findings_structured(version: &'static str) {
    let Some(env) = Env::start(version, Backend::Sqlite, LONG).await else {
        return;
    };
    let review = json!({
        "findings": [{
            "title": "[P1] Off-by-one in the loop",
            "body": "The loop skips the last element.",
            "confidence_score": 0.8,
            "priority": 1,
            "code_location": {"absolute_file_path": "/src/app/lib.rs", "line_range": {"start": 3, "end": 5}}
        }, {
            "title": "[P3] Unused import",
            "body": "`std::fmt` is never used.",
            "confidence_score": 0.5,
            "priority": 3,
            "code_location": {"absolute_file_path": "/src/app/main.rs", "line_range": {"start": 1, "end": 1}}
        }],
        "overall_correctness": "patch is incorrect",
        "overall_explanation": "One real bug.",
        "overall_confidence_score": 0.7
    });
    env.model.push([Reply::text("done")]);
    // 0.169+ runs the review as a sub-agent of the thread; 0.98 in the thread itself.
    if newer(version) {
        env.model
            .route_sub_agent("", [Reply::text(review.to_string())]);
    } else {
        env.model.push([Reply::text(review.to_string())]);
    }
    let id = session(&env).await;
    turn(&env, &id, "write the loop").await;
    let started = env
        .relay
        .review(&id, ReviewTarget::UncommittedChanges)
        .await
        .unwrap();
    assert!(matches!(
        started,
        codex_relay_core::SayOutcome::Started { .. }
    ));
    let done = env
        .until(&id, "the review", |s| {
            s.status == SessionStatus::Idle && s.current_turn.is_none() && s.turn_count >= 2
        })
        .await;
    let logged = env
        .all_events(&id)
        .await
        .into_iter()
        .find_map(|e| match &e.ev {
            Ev::Review { review } => Some((**review).clone()),
            _ => None,
        })
        .expect("a review event");
    assert_eq!(logged.findings.len(), 2, "{logged:?}");
    assert_eq!(logged.findings[0].title, "[P1] Off-by-one in the loop");
    assert_eq!(logged.findings[0].priority, Some(1));
    assert_eq!(logged.findings[0].file.as_deref(), Some("/src/app/lib.rs"));
    assert_eq!(logged.findings[0].lines, Some((3, 5)));
    assert_eq!(logged.findings[1].body, "`std::fmt` is never used.");
    assert_eq!(
        logged.overall_correctness.as_deref(),
        Some("patch is incorrect")
    );
    assert!(logged.text.contains("Off-by-one"), "{}", logged.text);
    // The turn's result is the review, structured.
    let result = done.result.expect("the review's result");
    assert_eq!(result["findings"][1]["title"], "[P3] Unused import");
    assert_eq!(result["overallExplanation"], "One real bug.");
    // The history is what Codex lists (0.169+ runs the review in a turn of its own, listed
    // just before the one review/start answered).
    if newer(version) {
        let codex: Vec<String> = codex_history(&env.relay, &id)
            .await
            .into_iter()
            .map(|t| t.0)
            .collect();
        assert_eq!(env.relay.status(&id).unwrap().turns, codex);
        assert_eq!(codex.len(), 3, "{codex:?}");
    }
    // An empty target is refused before Codex is asked.
    let bad = env
        .relay
        .review(&id, ReviewTarget::BaseBranch { branch: " ".into() })
        .await
        .unwrap_err();
    assert!(matches!(bad, RelayError::InvalidOption(_)), "{bad}");
    assert_contiguous(&env, &id).await;
    env.model.assert_all_scripted();
}

async fn rollback_and_fork_keep_the_log_and_history_consistent(version: &'static str) {
    let Some(env) = Env::start(version, Backend::Sqlite, LONG).await else {
        return;
    };
    env.model.push([
        Reply::text("one"),
        Reply::text("two"),
        Reply::text("three"),
        Reply::text("four"),
        Reply::text("fork one"),
    ]);
    let id = session(&env).await;
    for text in ["first", "second", "third"] {
        turn(&env, &id, text).await;
    }
    let before = env.relay.status(&id).unwrap().turns;
    assert_eq!(before.len(), 3);
    assert_same_history(
        version,
        &our_history(&env, &id).await,
        &codex_history(&env.relay, &id).await,
    );

    // Drop the last turn: the log keeps its events, the history loses it.
    let rolled = env.relay.rollback(&id, 1).await.unwrap();
    assert_eq!(rolled.dropped, vec![before[2].clone()]);
    assert_eq!(rolled.turns, before[..2].to_vec());
    let ours = our_history(&env, &id).await;
    assert_eq!(ours.len(), 2);
    assert_same_history(version, &ours, &codex_history(&env.relay, &id).await);
    assert!(env.kinds(&id).await.contains(&"rolled-back".to_owned()));
    // Too many turns, or none: refused.
    let too_many = env.relay.rollback(&id, 3).await.unwrap_err();
    assert!(
        matches!(too_many, RelayError::InvalidOption(_)),
        "{too_many}"
    );
    assert!(env.relay.rollback(&id, 0).await.is_err());

    // The session goes on from the shorter history: the model sees no "third".
    turn(&env, &id, "fourth").await;
    let last = env.model.requests().last().cloned().unwrap();
    let seen = last.user_texts();
    assert!(seen.iter().any(|t| t.contains("fourth")), "{seen:?}");
    assert!(!seen.iter().any(|t| t.contains("third")), "{seen:?}");
    assert_same_history(
        version,
        &our_history(&env, &id).await,
        &codex_history(&env.relay, &id).await,
    );
    assert_contiguous(&env, &id).await;

    // Fork through the first turn (0.169+), or whole (0.98 forks whole threads only).
    let first = before[0].clone();
    let forked = if newer(version) {
        env.relay.fork(&id, Some(first.clone())).await.unwrap()
    } else {
        let refused = env.relay.fork(&id, Some(first.clone())).await.unwrap_err();
        assert!(matches!(refused, RelayError::Unsupported(_)), "{refused}");
        env.relay.fork(&id, None).await.unwrap()
    };
    assert_ne!(forked.session_id, id);
    let fork_id = forked.session_id.clone();
    let fork_history = our_history(&env, &fork_id).await;
    if newer(version) {
        assert_eq!(forked.turns, vec![first.clone()]);
        assert_eq!(
            fork_history,
            vec![(first.clone(), vec!["first".to_owned()])]
        );
    } else {
        assert_eq!(fork_history.len(), 3);
    }
    assert_same_history(
        version,
        &fork_history,
        &codex_history(&env.relay, &fork_id).await,
    );
    assert_contiguous(&env, &fork_id).await;
    let events = env.all_events(&fork_id).await;
    assert!(
        matches!(&events[0].ev, Ev::Forked { from, .. } if *from == id),
        "{:?}",
        events.iter().take(4).map(|e| &e.ev).collect::<Vec<_>>()
    );
    // The fork spent nothing yet, and runs turns of its own with the source's settings.
    let snap = env.relay.status(&fork_id).unwrap();
    assert_eq!(snap.spent.turns, 0);
    assert_eq!(snap.cwd.as_deref(), Some(env.cwd().as_str()));
    turn(&env, &fork_id, "fork turn").await;
    assert_same_history(
        version,
        &our_history(&env, &fork_id).await,
        &codex_history(&env.relay, &fork_id).await,
    );
    assert_contiguous(&env, &fork_id).await;
    // The source is untouched by its fork.
    assert_eq!(env.relay.status(&id).unwrap().turns.len(), 3);
    env.model.assert_all_scripted();
}

async fn model_and_effort_reach_the_model(version: &'static str) {
    let Some(env) = Env::start(version, Backend::Sqlite, LONG).await else {
        return;
    };
    let models = env.relay.models(false).await.unwrap();
    // A model of the list that takes a high effort (Codex's bundled catalogue has some).
    let chosen = models
        .iter()
        .find(|m| m.efforts.iter().any(|e| e == "high"))
        .unwrap_or_else(|| panic!("no model with a high effort in {models:?}"))
        .clone();
    env.model
        .push([Reply::text("default"), Reply::text("chosen")]);
    let id = session(&env).await;
    turn(&env, &id, "before").await;
    let set = env
        .relay
        .set_model(
            &id,
            ModelChoice {
                model: Some(chosen.id.clone()),
                effort: Some("high".into()),
            },
        )
        .await
        .unwrap();
    assert_eq!(set.model.as_deref(), Some(chosen.id.as_str()));
    let snap = env.relay.status(&id).unwrap();
    assert_eq!(snap.model.as_deref(), Some(chosen.id.as_str()));
    assert_eq!(snap.effort.as_deref(), Some("high"));
    turn(&env, &id, "after").await;
    let requests = env.model.requests();
    let last = &requests.last().unwrap().body;
    assert_eq!(last["model"], json!(chosen.id), "{last}");
    assert_eq!(
        last["reasoning"]["effort"],
        json!("high"),
        "{}",
        last["reasoning"]
    );
    let first = &requests[0].body;
    assert_ne!(first["model"], json!(chosen.id));
    // A bad effort is refused before Codex is asked.
    let bad = env
        .relay
        .set_model(
            &id,
            ModelChoice {
                model: None,
                effort: Some("Very High".into()),
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(bad, RelayError::InvalidOption(_)), "{bad}");
    env.model.assert_all_scripted();
}
