//! Answer links through `serve --notify` on the real Codex (0.169) with the scripted model: a
//! waiting request's signed webhook carries a link; opened without a login, the page shows the
//! request and answers nothing; posted from the page it approves exactly that request, once;
//! an altered link, the link on another request, a reused one and a cross-site post are
//! refused, and the log says `answer-link` answered.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::{Bed, HttpRelay};
use crate::http_support::Client;
use codex_relay_testkit::Reply;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const WAIT: Duration = Duration::from_secs(90);

/// Bodies POSTed to a receiver on loopback.
pub(crate) async fn receiver() -> (String, Arc<Mutex<Vec<Value>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let got: Arc<Mutex<Vec<Value>>> = Arc::default();
    let kept = got.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 8192];
            while let Ok(n) = sock.read(&mut chunk).await {
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&chunk[..n]);
                if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&buf[..i]).to_lowercase();
                    let len: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    if buf.len() >= i + 4 + len {
                        if let Ok(v) = serde_json::from_slice(&buf[i + 4..i + 4 + len]) {
                            kept.lock().unwrap().push(v);
                        }
                        break;
                    }
                }
            }
            let _ = sock
                .write_all(b"HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n")
                .await;
        }
    });
    (url, got)
}

pub(crate) async fn until_hook(got: &Arc<Mutex<Vec<Value>>>, request: &str) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(v) = got
            .lock()
            .unwrap()
            .iter()
            .find(|v| v["data"]["requestId"] == request)
        {
            return v.clone();
        }
        assert!(Instant::now() < deadline, "no webhook for {request}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub(crate) async fn pending_of(c: &Client, session: &str) -> Option<String> {
    let snap = c.get(&format!("/api/sessions/{session}")).await.json();
    snap["pending"][0]["id"].as_str().map(str::to_owned)
}

pub(crate) async fn wait_pending(c: &Client, session: &str) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(id) = pending_of(c, session).await {
            return id;
        }
        assert!(Instant::now() < deadline, "no request in {session}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The path and query of a link.
pub(crate) fn path_of(url: &str) -> String {
    let rest = url.split_once("://").unwrap().1;
    rest[rest.find('/').unwrap()..].to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_link_approves_its_request_once_without_a_login() {
    let bed = Bed::start(codex_relay_testkit::NEWEST).await;
    let ws = bed.home.workspace().to_path_buf();
    bed.model.route(
        "MARK-LINK-A",
        [Reply::exec("touch a.txt", "ca"), Reply::text("a done")],
    );
    bed.model.route(
        "MARK-LINK-B",
        [Reply::exec("touch b.txt", "cb"), Reply::text("b done")],
    );
    let (hook, got) = receiver().await;
    let notify = bed.home.root().join("notify.toml");
    std::fs::write(
        &notify,
        format!(
            "answer_links = true\npush = false\n[[webhook]]\nname = \"ops\"\nurl = \"{hook}\"\nsecret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"\n"
        ),
    )
    .unwrap();
    let mut args = bed.args(120_000);
    args.extend(["--notify".into(), notify.display().to_string()]);
    let relay = HttpRelay::start(args).await;
    let c = Client::new(&relay.url);
    let anon = Client::anonymous(&relay.url);
    let start = |m: &str| {
        json!({"prompt": format!("{m}: make a file"), "cwd": ws,
            "approvalPolicy": "untrusted", "sandbox": "workspace-write"})
    };
    let a = c.post("/api/sessions", &start("MARK-LINK-A")).await.json()["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let b = c.post("/api/sessions", &start("MARK-LINK-B")).await.json()["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let ra = wait_pending(&c, &a).await;
    let rb = wait_pending(&c, &b).await;
    let hook_a = until_hook(&got, &ra).await;
    let approve = hook_a["data"]["answer"]["approveUrl"].as_str().unwrap();
    let link = path_of(approve);
    assert!(link.starts_with(&format!("/answer/{ra}?t=v1.")), "{link}");
    let token = link.split("t=").nth(1).unwrap().split('&').next().unwrap();

    // Opened without a login: the request and the buttons; nothing answered.
    let page = anon.get(&link).await;
    assert_eq!(page.status, 200, "{}", page.text());
    assert!(page.text().contains("touch a.txt") && page.text().contains("Approve once"));
    assert_eq!(page.header("referrer-policy"), Some("no-referrer"));
    assert_eq!(pending_of(&c, &a).await.as_deref(), Some(ra.as_str()));
    // The API itself still wants the token.
    assert_eq!(anon.get("/api/sessions").await.status, 401);

    let form = |t: &str| format!("t={t}&a=approve");
    let post = |path: String, body: String, site: &'static str| {
        let anon = &anon;
        async move {
            anon.send(
                "POST",
                &path,
                &[
                    ("content-type", "application/x-www-form-urlencoded"),
                    ("sec-fetch-site", site),
                ],
                body.as_bytes(),
            )
            .await
        }
    };
    // Altered: one character of the signature.
    let mut altered = token.to_owned();
    let last = altered.pop().unwrap();
    altered.push(if last == 'A' { 'B' } else { 'A' });
    let r = post(format!("/answer/{ra}"), form(&altered), "same-origin").await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert!(r.text().contains("invalid_link"));
    // The link on the other request.
    let r = post(format!("/answer/{rb}"), form(token), "same-origin").await;
    assert_eq!(r.status, 403, "{}", r.text());
    // From another site's page.
    let r = post(format!("/answer/{ra}"), form(token), "cross-site").await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert!(r.text().contains("cross_site"), "{}", r.text());
    assert_eq!(pending_of(&c, &a).await.as_deref(), Some(ra.as_str()));
    assert_eq!(pending_of(&c, &b).await.as_deref(), Some(rb.as_str()));

    // From the page: approved, once.
    let r = post(format!("/answer/{ra}"), form(token), "same-origin").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        r.text().contains("data-decision=\"approve\""),
        "{}",
        r.text()
    );
    let r = post(format!("/answer/{ra}"), form(token), "same-origin").await;
    assert_eq!(r.status, 410, "{}", r.text());
    assert!(r.text().contains("link_used"));
    let deadline = Instant::now() + WAIT;
    while !ws.join("a.txt").exists() {
        assert!(
            Instant::now() < deadline,
            "the approved command did not run"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let events = c
        .get(&format!("/api/sessions/{a}/events?after=0&limit=1000"))
        .await
        .json();
    let by: Vec<&Value> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ev"]["t"] == "request-resolved")
        .map(|e| &e["ev"]["by"])
        .collect();
    assert_eq!(by, vec![&json!("answer-link")]);
    assert!(
        !ws.join("b.txt").exists(),
        "the other request was not answered"
    );
    assert_eq!(pending_of(&c, &b).await.as_deref(), Some(rb.as_str()));
    relay.stop().await;
    bed.assert_no_codex_left().await;
}
