//! The web UI as `codex-relay serve` serves it: compiled-in files with ETags and 304s, and the
//! login form whose cookie (not the token) then opens the UI, the API and the streams.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use codex_relay_testkit::{NEWEST, codex_bin};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

const RELAY: &str = env!("CARGO_BIN_EXE_codex-relay");
const TOKEN: &str = "s3cret-token-0123456789";

/// A response: status, headers (lower-case names), body.
struct Res {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Res {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One HTTP/1.1 request on its own connection (`Connection: close`).
async fn http(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Res {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut raw))
        .await
        .expect("a response within 10 s")
        .unwrap();
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Res {
        status,
        headers,
        body: body.to_owned(),
    }
}

/// `serve --demo` (kept in a data directory of its own, removed with the returned guard) with
/// `extra` flags and `token` in CODEX_RELAY_TOKEN; returns the child and address.
async fn serve(
    codex: &Path,
    extra: &[&str],
    token: &str,
) -> (tokio::process::Child, String, tempfile::TempDir) {
    let data = tempfile::Builder::new()
        .prefix("ui-serving-")
        .tempdir_in(codex_relay_testkit::install::cache_root())
        .unwrap();
    let mut child = tokio::process::Command::new(RELAY)
        .args(["serve", "--demo", "--listen", "127.0.0.1:0", "--codex"])
        .arg(codex)
        .arg("--data-dir")
        .arg(data.path())
        .args(extra)
        .env("CODEX_RELAY_TOKEN", token)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn codex-relay serve");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let echo = codex_relay_testkit::echo::Echo::new("relay");
    let addr = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            echo.line(&line);
            if let Some(rest) = line.split("web UI and API at http://").nth(1) {
                return rest.split('/').next().unwrap().to_owned();
            }
        }
        panic!("serve exited before listening")
    })
    .await
    .expect("serve listens within 60 s");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, addr, data)
}

#[tokio::test]
async fn ui_files_carry_etags_and_answer_304_when_unchanged() {
    let codex = codex_bin(NEWEST).expect("the pinned Codex");
    // The files, not the login: served without a token.
    let (_relay, addr, _data) = serve(&codex, &["--no-auth"], "").await;
    let page = http(&addr, "GET", "/", &[], "").await;
    assert_eq!(page.status, 200);
    assert!(
        page.header("content-type")
            .unwrap()
            .starts_with("text/html")
    );
    assert!(page.body.contains("/ui/app.js"), "{}", page.body);
    let script = http(&addr, "GET", "/ui/app.js", &[], "").await;
    assert_eq!(script.status, 200);
    assert!(
        script
            .header("content-type")
            .unwrap()
            .contains("javascript")
    );
    let etag = script.header("etag").expect("an ETag").to_owned();
    assert_ne!(
        Some(etag.as_str()),
        page.header("etag"),
        "one ETag per content"
    );
    let again = http(&addr, "GET", "/ui/app.js", &[("If-None-Match", &etag)], "").await;
    assert_eq!(again.status, 304);
    assert!(again.body.is_empty());
    let stale = http(
        &addr,
        "GET",
        "/ui/app.js",
        &[("If-None-Match", "\"0\"")],
        "",
    )
    .await;
    assert_eq!(stale.status, 200);
    let missing = http(&addr, "GET", "/ui/nope.js", &[], "").await;
    assert_eq!(missing.status, 404);
    assert!(missing.body.contains("\"error\""), "{}", missing.body);
}

#[tokio::test]
async fn with_a_token_the_login_form_sets_the_cookie_the_ui_and_streams_accept() {
    let codex = codex_bin(NEWEST).expect("the pinned Codex");
    let (_relay, addr, _data) = serve(&codex, &[], TOKEN).await;
    let html = [("Accept", "text/html")];
    let page = http(&addr, "GET", "/", &html, "").await;
    assert_eq!(page.status, 401, "the UI needs the token");
    assert!(page.body.contains("/login"), "{}", page.body);
    assert_eq!(http(&addr, "GET", "/ui/app.js", &[], "").await.status, 401);
    let form = http(&addr, "GET", "/login?next=/%23/new", &html, "").await;
    assert_eq!(form.status, 200);
    assert!(form.body.contains("name=\"token\""), "{}", form.body);

    let origin = format!("http://{addr}");
    let urlencoded = [
        ("Content-Type", "application/x-www-form-urlencoded"),
        ("Origin", origin.as_str()),
    ];
    let wrong = http(&addr, "POST", "/login", &urlencoded, "token=nope&next=%2F").await;
    assert_eq!(wrong.status, 401);
    assert!(wrong.header("set-cookie").is_none());
    assert!(wrong.body.contains("not this relay"), "{}", wrong.body);

    let body = format!("token={TOKEN}&next=%2F%23%2Fnew");
    let ok = http(&addr, "POST", "/login", &urlencoded, &body).await;
    assert_eq!(ok.status, 303);
    assert_eq!(ok.header("location"), Some("/#/new"));
    let cookie = ok.header("set-cookie").expect("a cookie").to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    assert!(
        !cookie.contains(TOKEN),
        "the cookie is not the token: {cookie}"
    );
    let cookie = cookie.split(';').next().unwrap().to_owned();
    let with = [("Cookie", cookie.as_str())];
    assert_eq!(http(&addr, "GET", "/", &with, "").await.status, 200);
    assert_eq!(
        http(&addr, "GET", "/ui/session.js", &with, "").await.status,
        200
    );
    assert_eq!(
        http(&addr, "GET", "/api/sessions", &with, "").await.status,
        200
    );
    // The relay-wide stream (EventSource sends only the cookie) opens with it.
    let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let req = format!(
        "GET /api/stream HTTP/1.1\r\nHost: {addr}\r\nCookie: {cookie}\r\nAccept: text/event-stream\r\n\r\n"
    );
    stream.write_all(req.as_bytes()).await.unwrap();
    let mut first = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut first))
        .await
        .expect("the stream answers")
        .unwrap();
    let head = String::from_utf8_lossy(&first[..n]);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
}
