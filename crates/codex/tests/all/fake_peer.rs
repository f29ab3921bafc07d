//! Fault injection with a scripted peer on in-process pipes (and one tiny shell process):
//! junk, overlong and unknown lines, overload retries, timeouts, unanswered server requests,
//! and a process that dies with calls pending.

use std::time::{Duration, Instant};

use codex_relay_codex::process::{CodexProcess, SpawnSpec};
use codex_relay_codex::{Peer, PeerConfig, PeerError, PeerEvent};
use codex_relay_protocol::v2::{ServerNotification, ServerRequest};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines};

/// The far end of the pipes: reads what the peer wrote, writes lines to the peer.
struct FakeCodex {
    from_peer: Lines<BufReader<DuplexStream>>,
    to_peer: DuplexStream,
}

impl FakeCodex {
    async fn send(&mut self, line: &str) {
        self.to_peer.write_all(line.as_bytes()).await.unwrap();
        self.to_peer.write_all(b"\n").await.unwrap();
    }

    async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(5), self.from_peer.next_line())
            .await
            .expect("the peer wrote something in time")
            .unwrap()
            .expect("a line");
        serde_json::from_str(&line).unwrap()
    }
}

fn pipe(config: PeerConfig) -> (Peer, FakeCodex) {
    let (peer_out, fake_in) = tokio::io::duplex(1 << 20);
    let (fake_out, peer_in) = tokio::io::duplex(1 << 20);
    let peer = Peer::spawn(peer_in, peer_out, config, None);
    (
        peer,
        FakeCodex {
            from_peer: BufReader::new(fake_in).lines(),
            to_peer: fake_out,
        },
    )
}

fn small_lines() -> PeerConfig {
    PeerConfig {
        max_line_bytes: 1024,
        ..PeerConfig::default()
    }
}

#[tokio::test]
async fn junk_overlong_and_unknown_lines_are_skipped_and_the_peer_keeps_serving() {
    let (peer, mut fake) = pipe(small_lines());
    let mut unrouted = peer.subscribe_default();
    let mut thread = peer.subscribe_thread("t1");
    let call = tokio::spawn({
        let peer = peer.clone();
        async move { peer.request("model/list", &json!({}), None).await }
    });
    let req = fake.next().await;
    assert_eq!(req["method"], "model/list");
    assert!(req.get("jsonrpc").is_none());

    fake.send("this is not json").await;
    fake.send("[1, 2, 3]").await;
    fake.send(r#"{"neither": "request nor response"}"#).await;
    fake.send(&format!(
        r#"{{"method":"item/agentMessage/delta","params":{{"delta":"{}"}}}}"#,
        "x".repeat(5000)
    ))
    .await;
    fake.send("\u{0}\u{1}binary-ish").await;
    fake.send(r#"{"method":"thread/goal/updated","params":{"threadId":"t1","goal":{"text":"ship"}},"emittedAtMs":1}"#)
        .await;
    fake.send(r#"{"method":"remoteControl/status/changed","params":{"status":"disabled"}}"#)
        .await;
    fake.send(r#"{"id": 999, "result": {}}"#).await; // an answer to nothing
    fake.send(&format!(
        r#"{{"id":{},"result":{{"data":[],"nextCursor":null}}}}"#,
        req["id"]
    ))
    .await;

    let answer = call.await.unwrap().expect("the call still gets its answer");
    assert_eq!(answer["data"], json!([]));
    // The unknown thread notification was kept, raw, for its thread.
    match thread.recv().await {
        Some(PeerEvent::Notification(n)) => match n.notification {
            ServerNotification::Unknown { method, params } => {
                assert_eq!(method, "thread/goal/updated");
                assert_eq!(params["goal"]["text"], "ship");
                assert!(n.raw.contains("emittedAtMs"));
            }
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
    // The thread-less unknown one went to the default subscriber.
    match unrouted.recv().await {
        Some(PeerEvent::Notification(n)) => {
            assert!(
                matches!(n.notification, ServerNotification::Unknown { ref method, .. } if method == "remoteControl/status/changed")
            )
        }
        other => panic!("{other:?}"),
    }
    // And the peer still serves new calls.
    let call = tokio::spawn({
        let peer = peer.clone();
        async move { peer.request("thread/list", &json!({}), None).await }
    });
    let req = fake.next().await;
    fake.send(&format!(r#"{{"id":{},"result":{{"data":[]}}}}"#, req["id"]))
        .await;
    assert!(call.await.unwrap().is_ok());
}

#[tokio::test]
async fn overloaded_answers_are_retried_with_backoff() {
    let config = PeerConfig {
        overload_base_delay: Duration::from_millis(20),
        ..PeerConfig::default()
    };
    let (peer, mut fake) = pipe(config);
    let call = tokio::spawn({
        let peer = peer.clone();
        async move { peer.request("thread/start", &json!({}), None).await }
    });
    let mut ids = Vec::new();
    for _ in 0..2 {
        let req = fake.next().await;
        ids.push(req["id"].clone());
        fake.send(&format!(
            r#"{{"id":{},"error":{{"code":-32001,"message":"Server overloaded; retry later."}}}}"#,
            req["id"]
        ))
        .await;
    }
    let req = fake.next().await;
    ids.push(req["id"].clone());
    assert_eq!(req["method"], "thread/start");
    fake.send(&format!(r#"{{"id":{},"result":{{"ok":true}}}}"#, req["id"]))
        .await;
    assert_eq!(call.await.unwrap().unwrap(), json!({"ok": true}));
    // Each attempt is a new request id.
    ids.dedup();
    assert_eq!(ids.len(), 3);
}

#[tokio::test]
async fn overload_gives_up_after_the_configured_retries() {
    let config = PeerConfig {
        overload_retries: 2,
        overload_base_delay: Duration::from_millis(5),
        ..PeerConfig::default()
    };
    let (peer, mut fake) = pipe(config);
    let call = tokio::spawn({
        let peer = peer.clone();
        async move { peer.request("turn/start", &json!({}), None).await }
    });
    for _ in 0..3 {
        let req = fake.next().await;
        fake.send(&format!(
            r#"{{"id":{},"error":{{"code":-32001,"message":"busy"}}}}"#,
            req["id"]
        ))
        .await;
    }
    match call.await.unwrap() {
        Err(PeerError::Overloaded { method, attempts }) => {
            assert_eq!((method.as_str(), attempts), ("turn/start", 3))
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_request_without_an_answer_times_out_and_a_late_answer_is_ignored() {
    let (peer, mut fake) = pipe(PeerConfig::default());
    let started = Instant::now();
    let call = tokio::spawn({
        let peer = peer.clone();
        async move {
            peer.request(
                "thread/read",
                &json!({"threadId": "t"}),
                Some(Duration::from_millis(200)),
            )
            .await
        }
    });
    let req = fake.next().await;
    match call.await.unwrap() {
        Err(PeerError::Timeout { method, after }) => {
            assert_eq!(method, "thread/read");
            assert_eq!(after, Duration::from_millis(200));
        }
        other => panic!("{other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(2));
    fake.send(&format!(r#"{{"id":{},"result":{{}}}}"#, req["id"]))
        .await;
    // Still serving.
    let call = tokio::spawn({
        let peer = peer.clone();
        async move { peer.request("model/list", &json!({}), None).await }
    });
    let req = fake.next().await;
    fake.send(&format!(r#"{{"id":{},"result":{{"data":[]}}}}"#, req["id"]))
        .await;
    assert!(call.await.unwrap().is_ok());
}

#[tokio::test]
async fn server_requests_nobody_handles_are_answered_fail_closed() {
    let (_peer, mut fake) = pipe(PeerConfig::default());
    fake.send(r#"{"id":0,"method":"item/commandExecution/requestApproval","params":{"threadId":"nobody","turnId":"u","itemId":"i","command":"rm -rf build"}}"#).await;
    let answer = fake.next().await;
    assert_eq!(answer, json!({"id": 0, "result": {"decision": "decline"}}));

    fake.send(r#"{"id":1,"method":"item/tool/call","params":{"threadId":"nobody","turnId":"u","callId":"c","tool":"t","arguments":{}}}"#).await;
    let answer = fake.next().await;
    assert_eq!(answer["id"], 1);
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no handler"),
        "{answer}"
    );

    fake.send(r#"{"id":2,"method":"attestation/generate","params":{}}"#)
        .await;
    let answer = fake.next().await;
    assert_eq!(answer["id"], 2);
    assert!(answer.get("error").is_some());
}

#[tokio::test]
async fn a_request_dropped_by_its_subscriber_is_answered_fail_closed() {
    let (peer, mut fake) = pipe(PeerConfig::default());
    let mut sub = peer.subscribe_thread("t1");
    fake.send(r#"{"id":"a","method":"item/fileChange/requestApproval","params":{"threadId":"t1","turnId":"u","itemId":"i"}}"#).await;
    match sub.recv().await {
        Some(PeerEvent::Request(req)) => {
            assert!(matches!(
                req.request(),
                ServerRequest::FileChangeApproval(_)
            ));
            drop(req);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        fake.next().await,
        json!({"id": "a", "result": {"decision": "decline"}})
    );
    // Once the subscriber is gone, its thread's requests are declined too.
    drop(sub);
    fake.send(r#"{"id":"b","method":"item/commandExecution/requestApproval","params":{"threadId":"t1","turnId":"u","itemId":"i"}}"#).await;
    assert_eq!(
        fake.next().await,
        json!({"id": "b", "result": {"decision": "decline"}})
    );
}

#[tokio::test]
async fn notifications_that_arrive_before_the_subscription_are_not_lost() {
    let (peer, mut fake) = pipe(PeerConfig::default());
    fake.send(r#"{"method":"thread/started","params":{"thread":{"id":"early"}}}"#)
        .await;
    fake.send(r#"{"method":"turn/started","params":{"threadId":"early","turn":{"id":"u1","status":"inProgress","items":[]}}}"#).await;
    // A round trip guarantees both lines were read before subscribing.
    let call = tokio::spawn({
        let peer = peer.clone();
        async move { peer.request("model/list", &json!({}), None).await }
    });
    let req = fake.next().await;
    fake.send(&format!(r#"{{"id":{},"result":{{}}}}"#, req["id"]))
        .await;
    call.await.unwrap().unwrap();
    let mut sub = peer.subscribe_thread("early");
    let mut got = Vec::new();
    while let Some(PeerEvent::Notification(n)) = sub.try_recv() {
        got.push(n.notification);
    }
    assert!(
        matches!(
            got.as_slice(),
            [
                ServerNotification::ThreadStarted(_),
                ServerNotification::TurnStarted(_)
            ]
        ),
        "{got:?}"
    );
}

#[tokio::test]
async fn a_sub_agents_thread_goes_to_the_subscriber_of_the_thread_that_spawned_it() {
    let (peer, mut fake) = pipe(PeerConfig::default());
    let mut parent = peer.subscribe_thread("p");
    // The child's first notification arrives before anyone knows whose child it is: parked.
    fake.send(r#"{"method":"warning","params":{"threadId":"c","message":"early"}}"#)
        .await;
    // The parent's spawn call names the child; from here on the child is the parent's.
    fake.send(r#"{"method":"item/completed","params":{"threadId":"p","turnId":"u","item":{"type":"collabAgentToolCall","id":"call_spawn","tool":"spawnAgent","status":"completed","senderThreadId":"p","receiverThreadIds":["c"],"agentsStates":{}}}}"#).await;
    fake.send(r#"{"id":7,"method":"item/commandExecution/requestApproval","params":{"threadId":"c","turnId":"uc","itemId":"i"}}"#).await;
    let mut order = Vec::new();
    for _ in 0..3 {
        match tokio::time::timeout(Duration::from_secs(5), parent.recv()).await {
            Ok(Some(PeerEvent::Notification(n))) => order.push(
                match n.notification {
                    ServerNotification::ItemCompleted(_) => "spawn",
                    _ => "child-early",
                }
                .to_owned(),
            ),
            Ok(Some(PeerEvent::Request(req))) => {
                assert_eq!(req.request().thread_id(), Some("c"));
                order.push("child-request".into());
                req.responder.respond(Ok(json!({"decision": "accept"})));
            }
            other => panic!("{other:?}"),
        }
    }
    // The spawn first (it says who the child is), then what was parked, then the rest.
    assert_eq!(order, ["spawn", "child-early", "child-request"]);
    assert_eq!(
        fake.next().await,
        json!({"id": 7, "result": {"decision": "accept"}})
    );
    // A grandchild announced by its own thread/started follows the same subscriber.
    fake.send(r#"{"method":"thread/started","params":{"thread":{"id":"g","source":{"subAgent":{"thread_spawn":{"parent_thread_id":"c","depth":2}}}}}}"#).await;
    match tokio::time::timeout(Duration::from_secs(5), parent.recv()).await {
        Ok(Some(PeerEvent::Notification(n))) => assert_eq!(n.notification.thread_id(), Some("g")),
        other => panic!("{other:?}"),
    }
    // When the parent's subscriber goes, its children's requests are declined, not lost.
    drop(parent);
    fake.send(r#"{"id":8,"method":"item/commandExecution/requestApproval","params":{"threadId":"g","turnId":"ug","itemId":"i"}}"#).await;
    assert_eq!(
        fake.next().await,
        json!({"id": 8, "result": {"decision": "decline"}})
    );
}

#[tokio::test]
async fn a_process_that_dies_fails_pending_calls_and_subscribers_within_a_second() {
    // A stand-in for Codex that reads requests and never answers, then is killed.
    let spec = SpawnSpec {
        binary: "sh".into(),
        args: vec!["-c".into(), "echo starting >&2; cat > /dev/null".into()],
        codex_home: None,
        cwd: None,
        env: vec![],
        stderr_tail_lines: 10,
        stderr_tail_bytes: 4096,
    };
    let (process, stdio) = CodexProcess::spawn(&spec).unwrap();
    let peer = Peer::spawn(
        stdio.stdout,
        stdio.stdin,
        PeerConfig::default(),
        Some(Box::pin(process.exit_error())),
    );
    let mut sub = peer.subscribe_thread("t");
    let calls: Vec<_> = (0..3)
        .map(|i| {
            let peer = peer.clone();
            tokio::spawn(async move { peer.request("thread/read", &json!({"n": i}), None).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let killed = Instant::now();
    // SAFETY: kill(2) of our own child.
    unsafe { libc::kill(process.pid() as i32, libc::SIGKILL) };
    for call in calls {
        match call.await.unwrap() {
            Err(PeerError::Exited {
                status,
                stderr_tail,
            }) => {
                assert_eq!(status.signal, Some(libc::SIGKILL));
                assert!(stderr_tail.contains("starting"), "{stderr_tail}");
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(matches!(
        sub.recv().await,
        Some(PeerEvent::Closed(PeerError::Exited { .. }))
    ));
    assert!(
        killed.elapsed() < Duration::from_secs(1),
        "{:?}",
        killed.elapsed()
    );
    let msg = peer.closed().unwrap().to_string();
    assert!(
        msg.contains("signal 9") && msg.contains("starting"),
        "{msg}"
    );
}
