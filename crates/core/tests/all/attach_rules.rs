//! The relay's rules answer an attached thread's requests: a thread another client of the
//! daemon runs asks to run `touch ruled.txt` outside the sandbox, a rule of the relay allows
//! it (nobody is asked, the log names the rule), the daemon's Codex runs the command and the
//! other client sees the request resolved. Then the other client runs a turn with
//! `approvalPolicy: never` (as `codex exec --remote` does, for every client afterwards): the
//! relay's log says the thread no longer asks for approval and by whom, and its view shows the
//! policy. On the real Codex daemon of 0.171 and 0.169.

use std::time::Duration;

use crate::attach::{escalated, is, until_logged};
use crate::common::{Backend, Env};
use codex_relay_core::Ev;
use codex_relay_core::rules::RuleSpec;
use codex_relay_testkit::Reply;
use codex_relay_testkit::daemon::{TestDaemon, TuiClient};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_answers_an_attached_request_and_a_never_policy_is_flagged_on_0_171() {
    a_rule_answers_an_attached_request(codex_relay_testkit::NEWEST).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_answers_an_attached_request_and_a_never_policy_is_flagged_on_0_169() {
    a_rule_answers_an_attached_request(codex_relay_testkit::PREVIOUS).await
}

async fn a_rule_answers_an_attached_request(version: &'static str) {
    let Some(env) = Env::start(version, Backend::Sqlite, Duration::from_secs(600)).await else {
        return;
    };
    // The command asks to leave the sandbox: a rule answers that only when it says so.
    let rule: RuleSpec = serde_json::from_value(json!({
        "name": "allow-touch", "action": "allow", "argv": ["touch"],
        "outside_sandbox": true}))
    .unwrap();
    env.relay.put_rule(rule).await.expect("the rule is saved");
    env.model.route(
        "MARK-RULED",
        [
            Reply::items(vec![escalated("touch ruled.txt", "call-ruled")]),
            Reply::text("the rule let it run"),
        ],
    );
    let daemon = TestDaemon::start(version, &env.home).expect("the daemon starts");
    let attachment = env.relay.attach(daemon.socket());
    let mut tui = TuiClient::connect(&daemon.socket(), "tui-stand-in").await;
    let ws = env.home.workspace().to_owned();
    let started = tui
        .request(
            "thread/start",
            json!({"cwd": ws, "approvalPolicy": "on-request", "sandbox": "workspace-write"}),
        )
        .await
        .expect("thread/start");
    let thread = started["thread"]["id"].as_str().unwrap().to_owned();
    tui.request(
        "turn/start",
        json!({"threadId": thread, "input": [{"type": "text", "text": "MARK-RULED: go"}]}),
    )
    .await
    .expect("turn/start");
    let asked = tui
        .until("the approval", is("item/commandExecution/requestApproval"))
        .await;
    // The terminal does not answer: the relay's rule does.
    let resolved = tui
        .until("serverRequest/resolved", is("serverRequest/resolved"))
        .await;
    assert_eq!(resolved["params"]["requestId"], asked["id"], "{resolved}");
    tui.until("the turn's end", is("turn/completed")).await;
    assert!(ws.join("ruled.txt").exists(), "the ruled command ran");
    let events = until_logged(&env, &thread, |events| {
        events
            .iter()
            .any(|e| matches!(e.ev, Ev::RequestResolved { .. }))
    })
    .await;
    let by: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.ev {
            Ev::RequestResolved { by, decision, .. } => {
                Some((by.as_str().to_owned(), decision.as_str().to_owned()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        by,
        vec![("rule:allow-touch".to_owned(), "approve".to_owned())],
        "the rule answered, nobody else"
    );
    assert!(
        env.relay.pending(Some(&thread)).is_empty(),
        "nobody was left asked"
    );
    let attached = env.relay.status(&thread).unwrap().attached.unwrap();
    assert_eq!(attached.approval_policy.as_deref(), Some("on-request"));
    assert!(attached.asks() && attached.policy_changed_by.is_none());

    // The terminal's next turn sets `never` (as `codex exec --remote` does): Codex stops
    // asking anyone, the relay included. The relay says so in the log and in its view.
    env.model.route(
        "MARK-NEVER",
        [
            Reply::items(vec![escalated("touch unasked.txt", "call-never")]),
            Reply::text("nobody was asked"),
        ],
    );
    tui.request(
        "turn/start",
        json!({"threadId": thread, "approvalPolicy": "never",
               "input": [{"type": "text", "text": "MARK-NEVER: go"}]}),
    )
    .await
    .expect("turn/start");
    tui.until("the unasked turn's end", is("turn/completed"))
        .await;
    let events = until_logged(&env, &thread, |events| {
        events.iter().any(|e| matches!(&e.ev, Ev::Note { .. }))
    })
    .await;
    let note = events
        .iter()
        .find_map(|e| match &e.ev {
            Ev::Note { message } => Some(message.clone()),
            _ => None,
        })
        .unwrap();
    assert!(
        note.contains("no longer asks for approval")
            && note.contains("another client of the Codex daemon")
            && note.contains("`never` (was `on-request`)"),
        "{note}"
    );
    let attached = env.relay.status(&thread).unwrap().attached.unwrap();
    assert_eq!(attached.approval_policy.as_deref(), Some("never"));
    assert!(!attached.asks());
    assert_eq!(
        attached.policy_changed_by.as_deref(),
        Some("another client of the Codex daemon")
    );
    attachment.stop().await;
    env.relay.shutdown().await;
    daemon.stop();
}
