//! Notifications over the real Codex (0.169) and the scripted model, to a receiver running in
//! the test: a pending request produces one signed Standard Webhook (its signature checks
//! against the secret) plus the ntfy and Slack shapes; with the receiver down for 30 s it
//! arrives afterwards, once, while a session run meanwhile is not slowed; a turn's end is
//! told too. The notification's answer link approves exactly its request, once; an altered,
//! reused, expired or other request's link is refused.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use codex_relay_codex::AppServerConfig;
use codex_relay_core::links::LinkError;
use codex_relay_core::{Answer, CreateOptions, Relay, RelayConfig, SessionSnapshot, SessionStatus};
use codex_relay_notify::{Notifier, NotifyConfig, standard};
use codex_relay_protocol::v2::{ApprovalPolicy, SandboxMode};
use codex_relay_testkit::{CodexHome, ModelServer, Reply};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

pub(crate) const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
pub(crate) const WAIT: Duration = Duration::from_secs(90);

#[derive(Debug, Clone)]
pub(crate) struct Hit {
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Hit {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

/// An HTTP/1.1 receiver on a fixed port that can go away and come back.
pub(crate) struct Receiver {
    pub port: u16,
    hits: Arc<Mutex<Vec<Hit>>>,
    task: Option<tokio::task::JoinHandle<()>>,
    /// The status every request gets (200 unless told).
    status: Arc<std::sync::atomic::AtomicU16>,
}

impl Receiver {
    pub async fn start() -> Receiver {
        Self::answering(200).await
    }

    /// A receiver that answers every request with `status`.
    pub async fn answering(status: u16) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut r = Receiver {
            port,
            hits: Arc::default(),
            task: None,
            status: Arc::new(status.into()),
        };
        r.serve(listener);
        r
    }

    fn serve(&mut self, listener: TcpListener) {
        let hits = self.hits.clone();
        let status = self.status.clone();
        self.task = Some(tokio::spawn(async move {
            loop {
                let Ok((mut sock, _)) = listener.accept().await else {
                    return;
                };
                let hits = hits.clone();
                // Served inline: the task's abort then closes everything.
                let mut buf = Vec::new();
                let mut chunk = [0u8; 8192];
                let (head_end, len) = loop {
                    let Ok(n) = sock.read(&mut chunk).await else {
                        break (0, 0);
                    };
                    if n == 0 {
                        break (0, 0);
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buf[..i]).to_lowercase();
                        let len = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse().ok())
                            .unwrap_or(0usize);
                        break (i + 4, len);
                    }
                };
                if head_end == 0 {
                    continue;
                }
                while buf.len() < head_end + len {
                    match sock.read(&mut chunk).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
                let mut lines = head.lines();
                let path = lines
                    .next()
                    .and_then(|l| l.split(' ').nth(1))
                    .unwrap_or_default()
                    .to_owned();
                let headers = lines
                    .filter_map(|l| l.split_once(':'))
                    .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
                    .collect();
                hits.lock().unwrap().push(Hit {
                    path,
                    headers,
                    body: buf[head_end..].to_vec(),
                });
                let code = status.load(std::sync::atomic::Ordering::Relaxed);
                let _ = sock
                    .write_all(
                        format!(
                            "HTTP/1.1 {code} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                        )
                        .as_bytes(),
                    )
                    .await;
            }
        }));
    }

    /// Closes the port: connections are refused until [`up`](Self::up).
    fn down(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }

    async fn up(&mut self) {
        let listener = TcpListener::bind(("127.0.0.1", self.port))
            .await
            .expect("the receiver's port is free again");
        self.serve(listener);
    }

    /// What the receiver answers from now on.
    pub fn set_status(&self, status: u16) {
        self.status
            .store(status, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn hits(&self) -> Vec<Hit> {
        self.hits.lock().unwrap().clone()
    }

    pub async fn until(&self, what: &str, pred: impl Fn(&[Hit]) -> bool) -> Vec<Hit> {
        let deadline = Instant::now() + WAIT;
        loop {
            let hits = self.hits();
            if pred(&hits) {
                return hits;
            }
            assert!(
                Instant::now() < deadline,
                "no {what} within {WAIT:?}: {hits:#?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

pub(crate) async fn until(
    relay: &Relay,
    id: &str,
    what: &str,
    pred: impl Fn(&SessionSnapshot) -> bool,
) -> SessionSnapshot {
    let deadline = Instant::now() + WAIT;
    loop {
        let snap = relay.status(id).unwrap();
        if pred(&snap) {
            return snap;
        }
        assert!(
            Instant::now() < deadline,
            "no {what} within {WAIT:?}: {snap:?}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

pub(crate) fn session(cwd: &str, prompt: &str, policy: ApprovalPolicy) -> CreateOptions {
    CreateOptions {
        prompt: Some(prompt.into()),
        cwd: Some(cwd.into()),
        approval_policy: Some(policy),
        sandbox: Some(SandboxMode::WorkspaceWrite),
        ..Default::default()
    }
}

/// A turn with one command that needs no approval: create → idle, timed.
async fn timed_turn(relay: &Relay, cwd: &str, marker: &str) -> (String, Duration) {
    let t = Instant::now();
    let (h, _) = relay
        .create(session(
            cwd,
            &format!("{marker}: make a file"),
            ApprovalPolicy::Never,
        ))
        .await
        .unwrap();
    let id = h.id().to_owned();
    until(relay, &id, "the turn's end", |s| {
        s.status == SessionStatus::Idle && s.turn_count == 1
    })
    .await;
    (id, t.elapsed())
}

fn token_of(url: &str) -> String {
    url.split("t=")
        .nth(1)
        .unwrap()
        .split('&')
        .next()
        .unwrap()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_request_is_notified_once_after_the_receiver_was_down_and_its_link_answers_once()
{
    let model = ModelServer::start().await;
    let home = CodexHome::new(model.url());
    let ws = home.workspace().display().to_string();
    for (m, file) in [("MARK-B1", "b1"), ("MARK-B2", "b2")] {
        model.route(
            m,
            [
                Reply::exec(&format!("touch {file}.txt"), "cb"),
                Reply::text("made it"),
            ],
        );
    }
    model.route(
        "MARK-A",
        [Reply::exec("touch a.txt", "ca"), Reply::text("a done")],
    );
    model.route(
        "MARK-C",
        [Reply::exec("touch c.txt", "cc"), Reply::text("c done")],
    );
    let mut rx = Receiver::start().await;
    let base = format!("http://127.0.0.1:{}", rx.port);
    let bin =
        codex_relay_testkit::codex_bin(codex_relay_testkit::NEWEST).expect("pinned Codex installs");
    let mut config = RelayConfig::new(
        AppServerConfig::new(bin).codex_home(home.path()),
        home.root().join("relay.db").display().to_string(),
    );
    config.approval_timeout = Duration::from_secs(300);
    // An empty HOME: the user's shell start-up files stay out of the commands Codex runs.
    let user_home = home.root().join("user-home");
    std::fs::create_dir_all(&user_home).unwrap();
    config
        .codex
        .env
        .push(("HOME".into(), Some(user_home.into_os_string())));
    let relay = Relay::open(config).await.unwrap();
    let notify = NotifyConfig::parse(
        "notify.toml",
        &format!(
            r#"
public_url = "https://relay.example.test"
answer_links = true
retry_max_delay_secs = 4
push = false
[[webhook]]
name = "std"
url = "{base}/std"
secret = "{SECRET}"
events = ["request", "turn-completed"]
[[webhook]]
name = "phone"
url = "{base}/ntfy"
format = "ntfy"
[[webhook]]
name = "chat"
url = "{base}/slack"
format = "slack"
"#
        ),
    )
    .unwrap();
    let notifier = Notifier::start(relay.clone(), notify, "http://unused", None).unwrap();

    // A session while the receiver is up: its turn's end is told (and timed, as a baseline).
    let (b1, baseline) = timed_turn(&relay, &ws, "MARK-B1").await;
    let hits = rx
        .until("b1's turn.completed", |h| {
            h.iter()
                .any(|h| h.json()["data"]["sessionId"] == b1.as_str())
        })
        .await;
    assert_eq!(
        hits.len(),
        1,
        "turn ends go only to the target that asked: {hits:#?}"
    );
    assert_eq!(hits[0].json()["type"], "turn.completed");

    // The receiver goes away; a request opens and waits; another session runs meanwhile.
    rx.down();
    let down_at = Instant::now();
    let (a, _) = relay
        .create(session(&ws, "MARK-A: make a", ApprovalPolicy::Untrusted))
        .await
        .unwrap();
    let a = a.id().to_owned();
    let snap = until(&relay, &a, "a's request", |s| !s.pending.is_empty()).await;
    let request = snap.pending[0].id.clone();
    let (_, during) = timed_turn(&relay, &ws, "MARK-B2").await;
    eprintln!("a turn took {baseline:?} with the receiver up and {during:?} with it down");
    assert!(
        during < baseline * 2 + Duration::from_secs(2),
        "a session was slowed while the receiver was down: {during:?} against {baseline:?}"
    );
    // Attempts failed meanwhile and are recorded.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let rows = relay.store().notifications(50).await.unwrap();
    let std_row = rows
        .iter()
        .find(|r| r.request_id.as_deref() == Some(&request) && r.target == "std")
        .expect("the request's notification is in the outbox");
    assert_eq!(std_row.state, "pending");
    assert!(
        std_row.attempts >= 1 && std_row.last_error.is_some(),
        "{std_row:?}"
    );
    assert!(
        notifier
            .stats()
            .failed_attempts
            .load(std::sync::atomic::Ordering::Relaxed)
            >= 3
    );

    // 30 s later it comes back and gets each notification once.
    tokio::time::sleep(Duration::from_secs(30).saturating_sub(down_at.elapsed())).await;
    rx.up().await;
    let up_at = Instant::now();
    let is_a = |h: &Hit| {
        h.body
            .windows(request.len())
            .any(|w| w == request.as_bytes())
    };
    rx.until("the three notifications of a's request", |h| {
        h.iter()
            .filter(|h| is_a(h) || h.path == "/ntfy" || h.path == "/slack")
            .count()
            >= 3
    })
    .await;
    let delivered_after = up_at.elapsed();
    // Longer than the retry cap: a duplicate would have shown by now.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let hits = rx.hits();
    eprintln!(
        "delivered {delivered_after:?} after the receiver came back (down {:?})",
        up_at - down_at
    );
    let std: Vec<&Hit> = hits
        .iter()
        .filter(|h| h.path == "/std" && is_a(h))
        .collect();
    assert_eq!(std.len(), 1, "once: {std:#?}");
    let hit = std[0];
    let id = hit.header("webhook-id").unwrap();
    let ts: i64 = hit.header("webhook-timestamp").unwrap().parse().unwrap();
    let key = standard::secret_bytes(SECRET).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    standard::verify(
        &key,
        id,
        ts,
        &hit.body,
        hit.header("webhook-signature").unwrap(),
        now,
        300,
    )
    .expect("the signature checks against the secret");
    assert!(
        standard::verify(
            &key,
            id,
            ts,
            b"{}",
            hit.header("webhook-signature").unwrap(),
            now,
            300
        )
        .is_err()
    );
    let body = hit.json();
    assert_eq!(body["type"], "request.opened");
    // The open link goes through the relay (`/n/<message id>?k=<token>`), which records
    // that it was opened and sends the browser on to the request's card.
    let open = body["data"]["openUrl"].as_str().unwrap();
    assert!(
        open.starts_with(&format!("https://relay.example.test/n/{id}?k=")),
        "{open}"
    );
    assert!(
        body["data"]["text"]
            .as_str()
            .unwrap()
            .contains("touch a.txt"),
        "{body}"
    );
    assert_eq!(hits.iter().filter(|h| h.path == "/ntfy").count(), 1);
    assert_eq!(hits.iter().filter(|h| h.path == "/slack").count(), 1);
    let ntfy = hits.iter().find(|h| h.path == "/ntfy").unwrap();
    assert_eq!(ntfy.header("Title"), Some("Codex asks to run a command"));
    assert!(
        ntfy.header("Actions").unwrap().contains("view, Approve…"),
        "{ntfy:?}"
    );
    let slack = hits.iter().find(|h| h.path == "/slack").unwrap().json();
    // Each target's notification has an open link of its own.
    assert!(
        slack["blocks"][1]["elements"][0]["url"]
            .as_str()
            .unwrap()
            .starts_with(&format!(
                "https://relay.example.test/n/msg_{request}_chat?k="
            )),
        "{slack}"
    );
    let b2_end = hits
        .iter()
        .filter(|h| h.path == "/std" && h.json()["type"] == "turn.completed")
        .count();
    assert_eq!(
        b2_end, 2,
        "the turn that ended while the receiver was down was told too, once"
    );
    let rows = relay.store().notifications(50).await.unwrap();
    let row = rows.iter().find(|r| r.id == id).unwrap();
    assert_eq!(row.state, "delivered");
    assert!(
        row.attempts >= 4,
        "retried while the receiver was down: {row:?}"
    );
    // Its delivery trail: queued, each failed attempt with the reason, then sent.
    let trail = relay.store().deliveries_for_notification(id).await.unwrap();
    let statuses: Vec<&str> = trail.iter().map(|d| d.status.as_str()).collect();
    assert_eq!(statuses.first(), Some(&"queued"), "{trail:#?}");
    assert_eq!(statuses.last(), Some(&"sent"), "{trail:#?}");
    let failed: Vec<_> = trail.iter().filter(|d| d.status == "failed").collect();
    assert_eq!(failed.len() as i64, row.attempts - 1, "{trail:#?}");
    assert!(
        failed.iter().all(|d| d
            .detail
            .as_deref()
            .is_some_and(|t| t.contains("retrying in"))),
        "{trail:#?}"
    );
    assert_eq!(
        trail.last().unwrap().detail.as_deref(),
        Some("the receiver answered 200 OK")
    );

    // The answer link: bound to its request, single-use, expiring, unforgeable.
    let approve = body["data"]["answer"]["approveUrl"].as_str().unwrap();
    assert!(
        approve.starts_with(&format!("https://relay.example.test/answer/{request}?t=")),
        "{approve}"
    );
    let token = token_of(approve);
    let (c, _) = relay
        .create(session(&ws, "MARK-C: make c", ApprovalPolicy::Untrusted))
        .await
        .unwrap();
    let c = c.id().to_owned();
    let other = until(&relay, &c, "c's request", |s| !s.pending.is_empty())
        .await
        .pending[0]
        .id
        .clone();
    let approve_once = || Answer::approve();
    assert_eq!(
        relay
            .answer_by_link(&other, &token, approve_once())
            .await
            .unwrap_err(),
        LinkError::Invalid,
        "another request"
    );
    let mut altered = token.clone().into_bytes();
    let last = altered.len() - 1;
    altered[last] = if altered[last] == b'A' { b'B' } else { b'A' };
    let altered = String::from_utf8(altered).unwrap();
    assert_eq!(
        relay
            .answer_by_link(&request, &altered, approve_once())
            .await
            .unwrap_err(),
        LinkError::Invalid,
        "altered"
    );
    assert_eq!(
        relay
            .answer_by_link(
                &request,
                &token,
                Answer::Approve {
                    scope: codex_relay_core::Scope::Session
                }
            )
            .await
            .unwrap_err(),
        LinkError::Invalid,
        "a link approves once, never for the session"
    );
    let short = relay
        .mint_answer_link(&other, Duration::from_millis(1))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(
        relay
            .answer_by_link(&other, &short, approve_once())
            .await
            .unwrap_err(),
        LinkError::Expired
    );
    assert_eq!(
        relay.status(&c).unwrap().pending.len(),
        1,
        "nothing answered c's request"
    );
    let r = relay
        .answer_by_link(&request, &token, approve_once())
        .await
        .unwrap();
    assert_eq!(
        (r.decision.as_str(), r.by.as_str()),
        ("approve", "answer-link")
    );
    assert_eq!(
        relay
            .answer_by_link(&request, &token, approve_once())
            .await
            .unwrap_err(),
        LinkError::Used,
        "reused"
    );
    until(&relay, &a, "a's turn end", |s| {
        s.status == SessionStatus::Idle
    })
    .await;
    assert!(
        home.workspace().join("a.txt").exists(),
        "the link's approval ran the command"
    );
    // c's request, answered by a person, makes its pending notifications moot.
    relay
        .respond(
            &c,
            &other,
            Answer::deny("not now"),
            codex_relay_core::Decider::library("test"),
        )
        .await
        .unwrap();
    until(&relay, &c, "c's turn end", |s| {
        s.status == SessionStatus::Idle
    })
    .await;
    drop(notifier);
    relay.shutdown().await;
}
