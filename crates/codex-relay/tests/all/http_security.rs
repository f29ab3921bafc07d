//! The HTTP front's security, on by default: every API, SSE, MCP and UI request needs the token
//! (Bearer or a browser login's cookie); a foreign Host is refused (DNS rebinding); bodies
//! are limited; errors are `{"error":{"code","message"}}` with the right status; and `serve`
//! refuses `--no-auth` beyond loopback. Also: OpenAPI, health and metrics.

use crate::http_support;

use std::time::Duration;

use crate::common::{Bed, HttpRelay, RELAY};
use crate::http_support::Client;
use serde_json::json;

const NEWEST: &str = codex_relay_testkit::NEWEST;

fn code(r: &http_support::Resp) -> String {
    r.json()["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_front_needs_the_token_and_the_right_host() {
    let bed = Bed::start(NEWEST).await;
    let mut args = bed.args(120_000);
    args.extend(["--cors-origin".into(), "https://dash.example".into()]);
    let relay = HttpRelay::start(args).await;
    let anon = Client::anonymous(&relay.url);
    let bearer = Client::new(&relay.url);
    let login = http_support::login(&relay.url, codex_relay_testkit::RELAY_TEST_TOKEN).await;
    let cookie =
        Client::anonymous(&relay.url).with_header("Cookie", &format!("theme=dark; {login}"));
    let wrong = Client::anonymous(&relay.url).with_header(
        "Authorization",
        &format!("Bearer {}x", codex_relay_testkit::RELAY_TEST_TOKEN),
    );

    // No token (or a wrong one): 401 on the API, the streams, MCP and the UI.
    for c in [&anon, &wrong] {
        let r = c.get("/api/sessions").await;
        assert_eq!(
            (r.status, code(&r)),
            (401, "unauthorized".into()),
            "{}",
            r.text()
        );
        assert!(
            r.json()["error"]["message"]
                .as_str()
                .unwrap()
                .contains("Bearer")
        );
        let (status, _) = c.try_stream("/api/stream", &[]).await;
        assert_eq!(status, 401);
        let (status, _) = c.try_stream("/api/sessions/x/stream", &[]).await;
        assert_eq!(status, 401);
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}});
        let r = c
            .send(
                "POST",
                "/mcp",
                &[
                    ("Content-Type", "application/json"),
                    ("Accept", "application/json, text/event-stream"),
                ],
                init.to_string().as_bytes(),
            )
            .await;
        assert_eq!(r.status, 401, "MCP: {}", r.text());
        let r = c.send("GET", "/", &[("Accept", "text/html")], b"").await;
        assert_eq!(r.status, 401, "UI: {}", r.text());
        assert!(r.text().contains("/login"), "{}", r.text());
    }

    // The token as a Bearer header, or a browser login's cookie.
    let r = bearer.get("/api/codex/permission/pending").await;
    assert_eq!((r.status, r.json()), (200, json!([])));
    let r = cookie.get("/api/codex/permission/pending").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let mut dashboard = cookie.stream("/api/stream", &[]).await;
    assert!(
        dashboard.next(Duration::from_millis(300)).await.is_none(),
        "nothing happened yet"
    );

    // CORS only for the named origin.
    let r = bearer
        .send(
            "GET",
            "/api/codex/permission/pending",
            &[("Origin", "https://dash.example")],
            b"",
        )
        .await;
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("https://dash.example")
    );
    let r = bearer
        .send(
            "GET",
            "/api/codex/permission/pending",
            &[("Origin", "https://evil.example")],
            b"",
        )
        .await;
    assert_eq!(
        r.header("access-control-allow-origin"),
        None,
        "{:?}",
        r.headers
    );
    let r = anon
        .send(
            "OPTIONS",
            "/api/sessions",
            &[
                ("Origin", "https://dash.example"),
                ("Access-Control-Request-Method", "POST"),
                (
                    "Access-Control-Request-Headers",
                    "authorization, content-type",
                ),
            ],
            b"",
        )
        .await;
    assert!(
        r.status < 300,
        "a preflight needs no token: {} {}",
        r.status,
        r.text()
    );
    assert!(
        r.header("access-control-allow-headers")
            .is_some_and(|h| h.contains("authorization"))
    );

    // A foreign Host is refused before anything else, even with the token.
    for c in [&anon, &bearer] {
        let r = c
            .send(
                "GET",
                "/api/codex/permission/pending",
                &[("Host", "evil.example:80")],
                b"",
            )
            .await;
        assert_eq!(
            (r.status, code(&r)),
            (403, "forbidden_host".into()),
            "{}",
            r.text()
        );
        assert!(
            r.json()["error"]["message"]
                .as_str()
                .unwrap()
                .contains("--allow-host")
        );
    }

    // Oversized, malformed, misshapen and invalid bodies; unknown sessions and requests.
    let big = vec![b'x'; 3 * 1024 * 1024];
    let r = bearer
        .send(
            "POST",
            "/api/sessions",
            &[("Content-Type", "application/json")],
            &big,
        )
        .await;
    assert_eq!((r.status, code(&r)), (413, "payload_too_large".into()));
    let r = bearer
        .send(
            "POST",
            "/api/sessions",
            &[("Content-Type", "application/json")],
            b"{nope",
        )
        .await;
    assert_eq!(
        (r.status, code(&r)),
        (400, "bad_json".into()),
        "{}",
        r.text()
    );
    let r = bearer.post("/api/sessions", &json!({"prompt": 5})).await;
    assert_eq!(
        (r.status, code(&r)),
        (422, "invalid_body".into()),
        "{}",
        r.text()
    );
    let r = bearer
        .post("/api/sessions", &json!({"prompt": "go", "colour": "red"}))
        .await;
    assert_eq!(
        (r.status, code(&r)),
        (422, "invalid_body".into()),
        "{}",
        r.text()
    );
    assert!(
        r.text().contains("colour"),
        "the unknown field is named: {}",
        r.text()
    );
    let r = bearer.post("/api/sessions", &json!({"prompt": "  "})).await;
    assert_eq!((r.status, code(&r)), (422, "invalid_options".into()));
    assert!(r.text().contains("prompt is empty"), "{}", r.text());
    let r = bearer.get("/api/sessions/no-such-session").await;
    assert_eq!((r.status, code(&r)), (404, "unknown_session".into()));
    assert!(
        r.text().contains("no-such-session"),
        "the message names it: {}",
        r.text()
    );
    let (status, _) = bearer
        .try_stream("/api/sessions/no-such-session/stream", &[])
        .await;
    assert_eq!(status, 404);
    let r = bearer
        .post(
            "/api/codex/permission/respond",
            &json!({"id": "req_nope", "action": "allow"}),
        )
        .await;
    assert_eq!(
        (r.status, code(&r)),
        (404, "unknown_request".into()),
        "{}",
        r.text()
    );
    let r = bearer
        .post(
            "/api/codex/permission/respond",
            &json!({"id": "x", "action": "maybe"}),
        )
        .await;
    assert_eq!(r.status, 422, "{}", r.text());
    let r = bearer
        .post(
            "/api/sessions/no-such-session/messages",
            &json!({"text": "hi", "images": ["nope.png"]}),
        )
        .await;
    assert_eq!(
        (r.status, code(&r)),
        (422, "invalid_image".into()),
        "{}",
        r.text()
    );
    let r = bearer.get("/api/nothing-here").await;
    assert_eq!((r.status, code(&r)), (404, "not_found".into()));

    // The OpenAPI document comes from the handlers; health and metrics answer.
    let api = bearer.get("/api/openapi.json").await.json();
    for path in [
        "/api/sessions",
        "/api/sessions/{id}/stream",
        "/api/codex/permission/respond",
        "/api/stream",
    ] {
        assert!(api["paths"][path].is_object(), "{path} documented");
    }
    assert!(api["components"]["schemas"]["CreateSession"]["properties"]["planMode"].is_object());
    let health = bearer.get("/healthz").await;
    assert_eq!(health.status, 200, "{}", health.text());
    assert_eq!(health.json()["codex"]["ok"], true);
    assert_eq!(health.json()["store"]["ok"], true);
    let metrics = bearer.get("/metrics").await.text();
    for m in [
        "codex_relay_sse_subscribers 1",
        "codex_relay_events_appended_total",
        "codex_relay_store_queue_depth",
        "codex_relay_codex_restarts_total 0",
        "codex_relay_codex_recycles_total 0",
        // The health check started one app-server of the pool; it lingers, idle.
        "codex_relay_codex_processes 1",
        "codex_relay_store_commit_seconds_total",
    ] {
        assert!(metrics.contains(m), "{m} in {metrics}");
    }
    drop(dashboard);
    relay.stop().await;
    bed.assert_no_codex_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_refuses_to_listen_beyond_loopback_without_a_token() {
    let bed = Bed::start(NEWEST).await;
    let out = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::process::Command::new(RELAY)
            .arg("serve")
            .args(["--listen", "0.0.0.0:0", "--no-auth"])
            .args(bed.args(120_000))
            .env_remove("CODEX_RELAY_TOKEN")
            .output(),
    )
    .await
    .expect("it exits at once")
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("refusing to listen on 0.0.0.0"), "{stderr}");
    assert!(stderr.contains("--no-auth"), "it says how: {stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_says_when_codex_cannot_be_reached() {
    let bed = Bed::start(NEWEST).await;
    let mut args = bed.args(120_000);
    // A "codex" that is not Codex: the relay serves, but cannot start it.
    let pos = args.iter().position(|a| a == "--codex").unwrap();
    args[pos + 1] = "/bin/false".into();
    let relay = HttpRelay::start(args).await;
    let c = Client::new(&relay.url);
    let health = c.get("/healthz").await;
    assert_eq!(health.status, 503, "{}", health.text());
    let h = health.json();
    assert_eq!(
        (
            h["status"].as_str(),
            h["codex"]["ok"].as_bool(),
            h["store"]["ok"].as_bool()
        ),
        (Some("degraded"), Some(false), Some(true)),
        "{h}"
    );
    assert!(!h["codex"]["detail"].as_str().unwrap().is_empty());
    let r = c.post("/api/sessions", &json!({"prompt": "go"})).await;
    assert_eq!(
        (r.status, code(&r)),
        (503, "codex_unavailable".into()),
        "{}",
        r.text()
    );
    relay.stop().await;
}
