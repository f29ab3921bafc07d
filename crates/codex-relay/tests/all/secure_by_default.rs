//! `serve` is safe on a shared machine and in a browser without any flag: it makes a token
//! (kept only as a hash), logs the UI in through a one-time link, gives browsers a login cookie
//! that is not the token (with an expiry and a logout), throttles guessing, keeps `next` on
//! this relay, refuses cross-site requests, bounds chunked bodies on every endpoint, caps
//! event streams, and refuses settings that would undo all that (a token on the command line,
//! a short one, `*` or `null` as a CORS origin).

use crate::http_support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use crate::common::{Bed, HttpRelay, RELAY};
use crate::http_support::Client;
use serde_json::json;

fn code(r: &http_support::Resp) -> String {
    r.json()["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The engine flags with `data` as the data directory, plus `extra`.
fn args(bed: &Bed, data: &Path, extra: &[&str]) -> Vec<String> {
    let mut args = bed.args(60_000);
    let pos = args.iter().position(|a| a == "--data-dir").unwrap();
    args[pos + 1] = data.display().to_string();
    args.extend(["--listen".into(), "127.0.0.1:0".into()]);
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

fn base_env() -> Vec<(&'static str, String)> {
    let mut env: Vec<(&str, String)> = ["PATH", "HOME", "TMPDIR"]
        .into_iter()
        .filter_map(|k| Some((k, std::env::var(k).ok()?)))
        .collect();
    env.push(("LOG_LEVEL", "info".into()));
    env
}

/// `serve` with no token given: it settles its own.
async fn serve_without_a_token(bed: &Bed, data: &Path) -> HttpRelay {
    let args = args(bed, data, &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut env = base_env();
    // Empty counts as not set (the harness would otherwise pass the tests' token).
    env.push(("CODEX_RELAY_TOKEN", String::new()));
    HttpRelay::start_with_env(&args, &env).await
}

/// The banner line that contains `marker`, once it is there.
async fn banner_line(relay: &HttpRelay, marker: &str) -> String {
    for _ in 0..100 {
        if let Some(line) = relay
            .log_text()
            .lines()
            .find(|l| l.contains(marker))
            .map(str::to_owned)
        {
            return line;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no {marker:?} in the banner:\n{}", relay.log_text())
}

/// The path and query of the one-time login link `serve` printed.
async fn once_link(relay: &HttpRelay) -> String {
    let line = banner_line(relay, "one-time login link").await;
    let url = line.split_whitespace().last().unwrap().to_owned();
    assert!(url.starts_with("http://127.0.0.1:"), "{line}");
    url.split_once("127.0.0.1:")
        .and_then(|(_, rest)| rest.split_once('/'))
        .map(|(_, path)| format!("/{path}"))
        .unwrap()
}

fn cookie_of(r: &http_support::Resp) -> String {
    r.header("set-cookie")
        .unwrap_or_else(|| panic!("no cookie: {:?}", r.headers))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_serve_makes_a_token_keeps_only_its_hash_and_logs_the_ui_in_once() {
    let bed = Bed::start(codex_relay_testkit::NEWEST).await;
    let data = bed.home.root().join("data");
    let relay = serve_without_a_token(&bed, &data).await;
    let line = banner_line(&relay, "API token (shown only now").await;
    let token = line.split_whitespace().last().unwrap().to_owned();
    assert!(token.len() >= 32, "{line}");
    let kept = data.join("serve-token.sha256");
    let text = std::fs::read_to_string(&kept).unwrap();
    assert!(
        text.starts_with("sha256:") && !text.contains(&token),
        "{text}"
    );
    assert_eq!(
        std::fs::metadata(&kept).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(
        banner_line(&relay, "MCP over HTTP")
            .await
            .contains("Authorization"),
        "MCP clients are told how to send it"
    );

    // Nothing without it, on loopback too.
    let anon = Client::anonymous(&relay.url);
    let r = anon.get("/api/sessions").await;
    assert_eq!((r.status, code(&r)), (401, "unauthorized".into()));
    let bearer =
        Client::anonymous(&relay.url).with_header("Authorization", &format!("Bearer {token}"));
    assert_eq!(bearer.get("/api/sessions").await.status, 200);

    // The one-time link logs a browser in: a cookie that is not the token, with an expiry.
    let link = once_link(&relay).await;
    let r = anon.get(&link).await;
    assert_eq!(r.status, 303, "{}", r.text());
    let set = cookie_of(&r);
    for attr in ["HttpOnly", "SameSite=Strict", "Max-Age=", "Path=/"] {
        assert!(set.contains(attr), "{attr} in {set}");
    }
    assert!(!set.contains(&token), "the cookie is not the token: {set}");
    let cookie = set.split(';').next().unwrap().to_owned();
    let browser = Client::anonymous(&relay.url).with_header("Cookie", &cookie);
    assert_eq!(browser.get("/api/sessions").await.status, 200);
    // Used: the link is dead.
    let again = anon.get(&link).await;
    assert_eq!(again.status, 401, "{}", again.text());
    assert!(again.text().contains("already used"), "{}", again.text());

    // A restart keeps the token (and the login); it is not shown again; a new link works.
    relay.stop().await;
    let relay = serve_without_a_token(&bed, &data).await;
    let line = banner_line(&relay, "API token").await;
    assert!(!line.contains(&token), "shown only once: {line}");
    let bearer =
        Client::anonymous(&relay.url).with_header("Authorization", &format!("Bearer {token}"));
    assert_eq!(bearer.get("/api/sessions").await.status, 200);
    let browser = Client::anonymous(&relay.url).with_header("Cookie", &cookie);
    assert_eq!(
        browser.get("/api/sessions").await.status,
        200,
        "the login survives a restart"
    );
    let link = once_link(&relay).await;
    let anon = Client::anonymous(&relay.url);
    let fresh = anon.get(&link).await;
    assert_eq!(fresh.status, 303);

    // Logging out ends that login.
    let host = browser.addr.clone();
    let r = browser
        .send(
            "POST",
            "/logout",
            &[("Origin", &format!("http://{host}"))],
            b"",
        )
        .await;
    assert_eq!(r.status, 303, "{}", r.text());
    assert!(cookie_of(&r).contains("Max-Age=0"));
    assert_eq!(browser.get("/api/sessions").await.status, 401);
    relay.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_come_from_the_environment_or_a_file_never_the_command_line() {
    let bed = Bed::start(codex_relay_testkit::NEWEST).await;
    let data = bed.home.root().join("data");
    let run = |extra: Vec<String>, env: Vec<(&'static str, String)>| {
        let mut cmd = tokio::process::Command::new(RELAY);
        cmd.arg("serve")
            .args(args(&bed, &data, &[]))
            .args(extra)
            .env_clear();
        for (k, v) in env {
            cmd.env(k, v);
        }
        async move {
            let out = tokio::time::timeout(Duration::from_secs(30), cmd.output())
                .await
                .expect("it exits at once")
                .unwrap();
            assert!(!out.status.success());
            String::from_utf8_lossy(&out.stderr).into_owned()
        }
    };
    let err = run(
        vec!["--token".into(), "a-long-enough-token-value".into()],
        base_env(),
    )
    .await;
    assert!(
        err.contains("/proc/<pid>/cmdline") && err.contains("--token-file"),
        "{err}"
    );
    // A database password on the command line is refused for the same reason.
    let mut with_password = args(&bed, &data, &[]);
    let db = with_password.iter().position(|a| a == "--db").unwrap() + 1;
    with_password[db] = "postgres://relay:s3cret@127.0.0.1:1/relay".into();
    let out = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::process::Command::new(RELAY)
            .arg("serve")
            .args(with_password)
            .env_clear()
            .envs(base_env())
            .env("CODEX_RELAY_TOKEN", "a-long-enough-token-value")
            .output(),
    )
    .await
    .expect("it exits at once")
    .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("/proc/<pid>/cmdline") && err.contains("CODEX_RELAY_DB"),
        "{err}"
    );
    let mut env = base_env();
    env.push(("CODEX_RELAY_TOKEN", "short".into()));
    let err = run(vec![], env).await;
    assert!(err.contains("at least 16"), "{err}");
    let mut env = base_env();
    env.push(("CODEX_RELAY_TOKEN", "a-long-enough-token-value".into()));
    let err = run(vec!["--no-auth".into()], env).await;
    assert!(err.contains("contradict"), "{err}");
    for (origin, says) in [
        ("*", "every website"),
        ("null", "sandboxed"),
        ("https://a.example/x", "no path"),
    ] {
        let err = run(vec!["--cors-origin".into(), origin.into()], base_env()).await;
        assert!(
            err.contains(says) && !err.contains("panicked"),
            "{origin}: {err}"
        );
    }

    // From a file (what a secret store writes): that token, and no hash file is made.
    let file = bed.home.root().join("token");
    std::fs::write(&file, "from-a-file-0123456789abcdef\n").unwrap();
    let a = args(&bed, &data, &["--token-file", file.to_str().unwrap()]);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let mut env = base_env();
    env.push(("CODEX_RELAY_TOKEN", String::new()));
    let relay = HttpRelay::start_with_env(&a, &env).await;
    let c = Client::anonymous(&relay.url)
        .with_header("Authorization", "Bearer from-a-file-0123456789abcdef");
    assert_eq!(c.get("/api/sessions").await.status, 200);
    assert!(!data.join("serve-token.sha256").exists());
    relay.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guessing_is_throttled_and_next_stays_on_this_relay() {
    let bed = Bed::start(codex_relay_testkit::NEWEST).await;
    let relay = HttpRelay::start(bed.args(60_000)).await;
    let anon = Client::anonymous(&relay.url);
    let origin = format!("http://{}", anon.addr);
    let form = |token: &str, next: &str| format!("token={token}&next={next}");
    let post = |body: String| {
        let anon = anon.clone();
        let origin = origin.clone();
        async move {
            anon.send(
                "POST",
                "/login",
                &[
                    ("Content-Type", "application/x-www-form-urlencoded"),
                    ("Origin", &origin),
                ],
                body.as_bytes(),
            )
            .await
        }
    };
    // `next` is parsed as a browser would: a tab or a backslash never leads off this relay.
    for next in [
        "/%09/evil.example",
        "//evil.example",
        "/%5Cevil.example",
        "https://evil.example/",
    ] {
        let r = post(form(codex_relay_testkit::RELAY_TEST_TOKEN, next)).await;
        assert_eq!(r.status, 303);
        assert_eq!(r.header("location"), Some("/"), "next={next}");
    }
    let r = post(form(codex_relay_testkit::RELAY_TEST_TOKEN, "/%23/s/abc")).await;
    assert_eq!(r.header("location"), Some("/#/s/abc"));

    // Ten wrong guesses a minute, then 429 with Retry-After, for the form and for Bearer; the
    // right token still gets in (http_abuse.rs: from the whole loopback range).
    for i in 0..10 {
        let r = post(form(&format!("wrong-guess-{i:02}-0123456789"), "/")).await;
        assert_eq!(r.status, 401, "guess {i}");
    }
    let r = post(form("wrong-guess-10-0123456789", "/")).await;
    assert_eq!(r.status, 429, "{}", r.text());
    assert!(r.header("retry-after").is_some());
    let r = Client::anonymous(&relay.url)
        .with_header("Authorization", "Bearer wrong-guess-11-0123456789")
        .get("/api/sessions")
        .await;
    assert_eq!((r.status, code(&r)), (429, "too_many_attempts".into()));
    let r = post(form(codex_relay_testkit::RELAY_TEST_TOKEN, "/")).await;
    assert_eq!(r.status, 303, "{}", r.text());
    assert_eq!(
        Client::new(&relay.url).get("/api/sessions").await.status,
        200
    );
    relay.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_websites_cannot_change_anything_through_a_browser() {
    let bed = Bed::start(codex_relay_testkit::NEWEST).await;
    let relay = HttpRelay::start(bed.args(60_000)).await;
    let login = http_support::login(&relay.url, codex_relay_testkit::RELAY_TEST_TOKEN).await;
    let browser = Client::anonymous(&relay.url).with_header("Cookie", &login);
    let ours = format!("http://{}", browser.addr);
    // A plain HTML form on another site posting to interrupt (no body, no preflight).
    for headers in [
        vec![("Origin", "https://evil.example")],
        vec![("Origin", "null")],
        vec![("Sec-Fetch-Site", "cross-site")],
        // Another port of the same host is same-site, not same-origin.
        vec![
            ("Origin", "http://127.0.0.1:1"),
            ("Sec-Fetch-Site", "same-site"),
        ],
    ] {
        let mut h = headers.clone();
        h.push(("Content-Type", "application/x-www-form-urlencoded"));
        let r = browser
            .send("POST", "/api/sessions/some-session/interrupt", &h, b"")
            .await;
        assert_eq!(
            (r.status, code(&r)),
            (403, "cross_site".into()),
            "{headers:?}: {}",
            r.text()
        );
    }
    // This relay's own page gets through (to the unknown session).
    let r = browser
        .send(
            "POST",
            "/api/sessions/some-session/interrupt",
            &[("Origin", &ours), ("Sec-Fetch-Site", "same-origin")],
            b"",
        )
        .await;
    assert_eq!(r.status, 404, "{}", r.text());
    // A Bearer client is not a browser page: no Origin check.
    let r = Client::new(&relay.url)
        .send(
            "POST",
            "/api/sessions/some-session/interrupt",
            &[("Origin", "https://evil.example")],
            b"",
        )
        .await;
    assert_eq!(r.status, 404, "{}", r.text());
    relay.stop().await;

    // Without a token (--no-auth) the check still holds.
    let mut args = bed.args(60_000);
    args.push("--no-auth".into());
    let relay = HttpRelay::start(args).await;
    assert!(
        relay.log_text().contains("WARNING: --no-auth") || {
            tokio::time::sleep(Duration::from_millis(300)).await;
            relay.log_text().contains("WARNING: --no-auth")
        }
    );
    let anon = Client::anonymous(&relay.url);
    let r = anon
        .send(
            "POST",
            "/api/sessions/some-session/interrupt",
            &[("Origin", "https://evil.example")],
            b"",
        )
        .await;
    assert_eq!((r.status, code(&r)), (403, "cross_site".into()));
    relay.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunked_bodies_are_bounded_on_every_endpoint_and_mcp_server_needs_the_token() {
    let bed = Bed::start(codex_relay_testkit::NEWEST).await;
    let mut args = bed.args(60_000);
    args.extend(["--max-body-bytes".into(), "65536".into()]);
    let relay = HttpRelay::start(args).await;
    let c = Client::new(&relay.url);
    let big = vec![b' '; 1024 * 1024];
    let mcp = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    for path in ["/mcp", "/mcp-server", "/api/sessions"] {
        let r = c.post_chunked(path, &mcp, &big).await;
        assert_eq!(
            (r.status, code(&r)),
            (413, "payload_too_large".into()),
            "{path}: {}",
            r.text()
        );
    }
    // Small chunked bodies still work.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}});
    let r = c
        .post_chunked("/mcp-server", &mcp, init.to_string().as_bytes())
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    // The legacy endpoint is behind the token like every other.
    let r = Client::anonymous(&relay.url)
        .send("POST", "/mcp-server", &mcp, init.to_string().as_bytes())
        .await;
    assert_eq!((r.status, code(&r)), (401, "unauthorized".into()));
    relay.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_streams_are_capped_per_caller_and_in_all() {
    let bed = Bed::start(codex_relay_testkit::NEWEST).await;
    let mut args = bed.args(60_000);
    args.extend([
        "--max-streams-per-caller".into(),
        "2".into(),
        "--max-streams".into(),
        "3".into(),
    ]);
    let relay = HttpRelay::start(args).await;
    let token = Client::new(&relay.url);
    let a = token.stream("/api/stream", &[]).await;
    let _b = token.stream("/api/stream", &[]).await;
    let (status, _) = token.try_stream("/api/stream", &[]).await;
    assert_eq!(status, 429, "past the caller's share");
    let login = http_support::login(&relay.url, codex_relay_testkit::RELAY_TEST_TOKEN).await;
    let browser = Client::anonymous(&relay.url).with_header("Cookie", &login);
    let _c = browser.stream("/api/stream", &[]).await;
    let (status, _) = browser.try_stream("/api/stream", &[]).await;
    assert_eq!(status, 503, "past the total");
    drop(a);
    // The closed stream's place is free again (the relay notices on its next write).
    let mut freed = false;
    for _ in 0..100 {
        let (status, s) = browser.try_stream("/api/stream", &[]).await;
        if status == 200 {
            drop(s);
            freed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(freed, "a closed stream gives its place back");
    relay.stop().await;
}
