//! The relay attached to the Codex daemon the terminal uses: a thread another client of the
//! daemon starts (a plain WebSocket client standing in for the TUI, under `on-request`, with
//! an escalated command) becomes a session of the relay marked attached; its approval reaches
//! the relay, the relay's answer runs the command and the other client sees it resolved; an
//! answer from the other client withdraws the relay's request. On the real Codex daemon of
//! 0.171 and 0.169 (0.98 has none), in a temporary CODEX_HOME, stopped with its updater loop.

use std::time::Duration;

use crate::common::{Backend, Env};
use codex_relay_core::attach::AttachState;
use codex_relay_core::{Answer, Decider, Ev};
use codex_relay_testkit::daemon::{TestDaemon, TuiClient};
use codex_relay_testkit::{Item, Reply};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_answer_wins_both_ways_on_0_171() {
    first_answer_wins_both_ways(codex_relay_testkit::NEWEST).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_answer_wins_both_ways_on_0_169() {
    first_answer_wins_both_ways(codex_relay_testkit::PREVIOUS).await
}

pub(crate) fn escalated(cmd: &str, call: &str) -> Item {
    Item::function_call(
        "exec_command",
        json!({"cmd": cmd, "sandbox_permissions": "require_escalated",
               "justification": "May I run this outside the sandbox?"}),
        call,
    )
}

pub(crate) fn is(method: &'static str) -> impl Fn(&Value) -> bool {
    move |m: &Value| m["method"] == method
}

/// Waits, with backoff, until the relay has a pending request for `session`.
pub(crate) async fn relay_pending(env: &Env, session: &str) -> codex_relay_core::PendingView {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let mut wait = Duration::from_millis(20);
    loop {
        if let Some(p) = env.relay.pending(Some(session)).into_iter().next() {
            return p;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the relay never saw the approval of {session}"
        );
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_millis(500));
    }
}

/// The session's log once `done` holds for it (waited for with backoff).
pub(crate) async fn until_logged(
    env: &Env,
    session: &str,
    done: impl Fn(&[codex_relay_core::Envelope]) -> bool,
) -> Vec<codex_relay_core::Envelope> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut wait = Duration::from_millis(20);
    loop {
        let events: Vec<_> = env
            .relay
            .events(session, 0, 10_000)
            .await
            .unwrap()
            .into_iter()
            .map(|e| (*e).clone())
            .collect();
        if done(&events) {
            return events;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the relay's log of {session} never got there: {:?}",
            events.iter().map(|e| e.ev.kind()).collect::<Vec<_>>()
        );
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_millis(500));
    }
}

async fn first_answer_wins_both_ways(version: &'static str) {
    let Some(env) = Env::start(version, Backend::Sqlite, Duration::from_secs(600)).await else {
        return;
    };
    env.model.route(
        "MARK-RELAY",
        [
            Reply::items(vec![escalated("touch relay-ran.txt", "call-relay")]),
            Reply::text("the relay let it run"),
        ],
    );
    env.model.route(
        "MARK-TUI",
        [
            Reply::items(vec![escalated("touch tui-ran.txt", "call-tui")]),
            Reply::text("the terminal said no"),
        ],
    );
    env.model
        .route("MARK-OWN", [Reply::text("a session of the relay's own")]);
    // A session the relay runs in its own Codex, in the same CODEX_HOME as the daemon (which
    // lists every thread of it): never taken for the daemon's.
    let own = crate::common::start_read_only(&env.relay, env.cwd(), "MARK-OWN: hi").await;
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

    // 1. The terminal's thread asks; the relay answers; the command runs; the terminal sees it
    //    resolved.
    tui.request(
        "turn/start",
        json!({"threadId": thread, "input": [{"type": "text", "text": "MARK-RELAY: go"}]}),
    )
    .await
    .expect("turn/start");
    let asked = tui
        .until("the approval", is("item/commandExecution/requestApproval"))
        .await;
    let card = relay_pending(&env, &thread).await;
    assert_eq!(card.kind.as_str(), "command_approval", "{card:?}");
    assert!(
        card.question.contains("relay-ran.txt"),
        "the card shows the command: {}",
        card.question
    );
    let snap = env.relay.status(&thread).expect("the thread is a session");
    let attached = snap.attached.expect("marked attached");
    assert_eq!(attached.state, AttachState::Live);
    assert_eq!(attached.daemon_pid, daemon.pid());
    env.relay
        .respond(
            &thread,
            &card.id,
            Answer::approve(),
            Decider::library("test"),
        )
        .await
        .expect("the relay answers");
    let resolved = tui
        .until("serverRequest/resolved", is("serverRequest/resolved"))
        .await;
    assert_eq!(resolved["params"]["requestId"], asked["id"], "{resolved}");
    tui.until("the turn's end", is("turn/completed")).await;
    assert!(
        ws.join("relay-ran.txt").exists(),
        "the approved command ran"
    );

    // 2. The terminal answers first: the relay's request is withdrawn, nothing runs.
    tui.request(
        "turn/start",
        json!({"threadId": thread, "input": [{"type": "text", "text": "MARK-TUI: go"}]}),
    )
    .await
    .expect("turn/start");
    let asked = tui
        .until(
            "the second approval",
            is("item/commandExecution/requestApproval"),
        )
        .await;
    let card = relay_pending(&env, &thread).await;
    tui.respond(&asked["id"], json!({"decision": "decline"}))
        .await;
    tui.until("the second turn's end", is("turn/completed"))
        .await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !env.relay.pending(Some(&thread)).is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the relay's card was never withdrawn"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !ws.join("tui-ran.txt").exists(),
        "the declined command did not run"
    );
    // The thread's events came through the mapper into the same log (the relay hears the
    // turn's end on its own connection, maybe after the terminal did).
    let events = until_logged(&env, &thread, |events| {
        events
            .iter()
            .filter(|e| matches!(e.ev, Ev::TurnEnd { .. }))
            .count()
            >= 2
    })
    .await;
    let withdrawn = events.iter().find_map(|e| match &e.ev {
        Ev::RequestResolved { id, by, .. } if *id == card.id => Some(by.clone()),
        _ => None,
    });
    assert_eq!(
        withdrawn,
        Some(Decider::OtherClient),
        "recorded as answered in the terminal"
    );

    // Listed (API, MCP codex_list) as the daemon's.
    let rows = env
        .relay
        .list(codex_relay_core::ListFilter::default())
        .await
        .unwrap();
    let row = rows
        .iter()
        .find(|r| r.session_id == thread)
        .expect("listed");
    assert_eq!(row.source, "codex-daemon", "{row:?}");

    // 3. The daemon dies: the thread is shown detached and the relay stays healthy; a daemon
    //    that comes back is attached again.
    daemon.kill();
    until_attached(&env, &thread, |a| a.state == AttachState::Detached).await;
    assert!(env.relay.status(&thread).is_ok(), "the relay still answers");
    drop(daemon);
    let daemon = TestDaemon::start(version, &env.home).expect("the daemon starts again");
    let again = until_attached(&env, &thread, |a| {
        a.state != AttachState::Detached && a.daemon_pid == daemon.pid()
    })
    .await;
    assert_ne!(again.state, AttachState::Detached);
    let own = env.relay.status(&own).expect("the relay's own session");
    assert!(
        own.attached.is_none(),
        "the relay's own thread stays its own"
    );

    attachment.stop().await;
    env.relay.shutdown().await;
    daemon.stop();
}

/// The session's attachment once `done` holds for it (waited for with backoff).
pub(crate) async fn until_attached(
    env: &Env,
    session: &str,
    done: impl Fn(&codex_relay_core::attach::Attached) -> bool,
) -> codex_relay_core::attach::Attached {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    let mut wait = Duration::from_millis(20);
    loop {
        // Unknown until the relay hears of the thread.
        let attached = env.relay.status(session).ok().and_then(|s| s.attached);
        if let Some(a) = attached.as_ref().filter(|a| done(a)) {
            return a.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the attachment of {session} never got there: {attached:?}"
        );
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_millis(500));
    }
}

/// A command the daemon's Codex runs holds a connection to a port of this machine (as it
/// would to the relay's API): the relay's peer check finds it inside the daemon's tree and
/// refuses it, as it refuses its own Codex's commands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_the_daemon_runs_cannot_reach_the_relay() {
    use codex_relay_codex::platform::peers::{PeerOwner, owners};
    let Some(env) = Env::start(
        codex_relay_testkit::NEWEST,
        Backend::Sqlite,
        Duration::from_secs(600),
    )
    .await
    else {
        return;
    };
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    env.model.route(
        "MARK-CALL-HOME",
        [
            Reply::items(vec![Item::function_call(
                "exec_command",
                json!({"cmd": format!("exec 3<>/dev/tcp/127.0.0.1/{port}; sleep 30"),
                       "yield_time_ms": 500}),
                "call-home",
            )]),
            Reply::text("done"),
        ],
    );
    let daemon = TestDaemon::start(codex_relay_testkit::NEWEST, &env.home).expect("daemon");
    let attachment = env.relay.attach(daemon.socket());
    let mut tui = TuiClient::connect(&daemon.socket(), "tui-stand-in").await;
    // Wait until the relay is attached (it then knows the daemon's process).
    let started = tui
        .request(
            "thread/start",
            json!({"cwd": env.home.workspace(), "approvalPolicy": "never",
                   "sandbox": "danger-full-access"}),
        )
        .await
        .expect("thread/start");
    let thread = started["thread"]["id"].as_str().unwrap().to_owned();
    tui.request(
        "turn/start",
        json!({"threadId": thread, "input": [{"type": "text", "text": "MARK-CALL-HOME: go"}]}),
    )
    .await
    .expect("turn/start");
    let accepted = tokio::task::spawn_blocking(move || listener.accept())
        .await
        .unwrap()
        .expect("the command connects");
    let (stream, peer) = accepted;
    let local = stream.local_addr().unwrap();
    until_attached(&env, &thread, |a| a.daemon_pid.is_some()).await;
    let owner = owners(&[(peer, local)]).remove(0);
    match &owner {
        PeerOwner::Inside { why, .. } => assert!(
            why.contains("the Codex daemon this relay is attached to"),
            "{why}"
        ),
        other => panic!("a command of the daemon's Codex passed the check: {other:?}"),
    }
    drop(stream);
    attachment.stop().await;
    env.relay.shutdown().await;
    daemon.stop();
}

/// The relay dies (its runtime dropped mid-approval: nothing recorded on the way out) while
/// the terminal's command waits; a relay started again on the same store attaches again, the
/// daemon replays the request, and answering it through the new relay runs the command.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_crash_the_pending_approval_is_replayed_and_answerable() {
    let version = codex_relay_testkit::NEWEST;
    let Some(env) = Env::start(version, Backend::Sqlite, Duration::from_secs(600)).await else {
        return;
    };
    // The fixture's relay is not used: only the one that crashes, then the one after it.
    env.relay.shutdown().await;
    env.model.route(
        "MARK-CRASH",
        [
            Reply::items(vec![escalated("touch after-crash.txt", "call-crash")]),
            Reply::text("ran after the crash"),
        ],
    );
    let daemon = TestDaemon::start(version, &env.home).expect("the daemon starts");
    let socket = daemon.socket();
    let mut tui = TuiClient::connect(&socket, "tui-stand-in").await;
    let ws = env.home.workspace().to_owned();
    let started = tui
        .request(
            "thread/start",
            json!({"cwd": ws, "approvalPolicy": "on-request", "sandbox": "workspace-write"}),
        )
        .await
        .expect("thread/start");
    let thread = started["thread"]["id"].as_str().unwrap().to_owned();
    let seen = {
        let (socket, thread) = (socket.clone(), thread.clone());
        crate::common::crash_after(env.config.clone(), move |relay| async move {
            let attachment = relay.attach(socket);
            let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
            loop {
                if let Some(p) = relay.pending(Some(&thread)).into_iter().next() {
                    std::mem::forget(attachment);
                    return p.id;
                }
                assert!(tokio::time::Instant::now() < deadline, "never asked");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    tui.request(
        "turn/start",
        json!({"threadId": thread, "input": [{"type": "text", "text": "MARK-CRASH: go"}]}),
    )
    .await
    .expect("turn/start");
    let asked = tui
        .until("the approval", is("item/commandExecution/requestApproval"))
        .await;
    let before = seen.await;
    let relay = codex_relay_core::Relay::open(env.config.clone())
        .await
        .expect("the relay starts again");
    let attachment = relay.attach(socket);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let card = loop {
        if let Some(p) = relay.pending(Some(&thread)).into_iter().next() {
            break p;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the approval was not replayed to the relay started again"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_ne!(
        card.id, before,
        "a new request of the relay for the replayed one"
    );
    relay
        .respond(
            &thread,
            &card.id,
            Answer::approve(),
            Decider::library("test"),
        )
        .await
        .expect("answered after the restart");
    let resolved = tui
        .until("serverRequest/resolved", is("serverRequest/resolved"))
        .await;
    assert_eq!(resolved["params"]["requestId"], asked["id"]);
    tui.until("the turn's end", is("turn/completed")).await;
    assert!(ws.join("after-crash.txt").exists(), "the command ran");
    attachment.stop().await;
    relay.shutdown().await;
    daemon.stop();
}
