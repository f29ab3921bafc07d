//! Who may start what: with the operator's limits (`--allow-cwd`, `--max-sandbox`,
//! `--max-approval-policy`, `--allow-config-overrides no`) a request beyond them is refused
//! with a clear error on every front (HTTP 403 `forbidden_option`, an MCP tool error over
//! `/mcp`, the legacy `codex` tool's error over `/mcp-server`) and logged, before Codex sees
//! it; a request within them runs on the real Codex. `serve` beyond loopback is strict without
//! any flag.

use crate::http_support;

use crate::common::{Bed, Driver, HttpRelay, Sdk, Transport};
use crate::http_support::Client;
use crate::legacy_support::LegacyDriver;
use codex_relay_testkit::Reply;
use serde_json::{Value, json};

fn code(r: &http_support::Resp) -> String {
    r.json()["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_beyond_the_operators_limits_are_refused_on_every_front() {
    let bed = Bed::start(codex_relay_testkit::NEWEST).await;
    let ws = bed.home.workspace().to_path_buf();
    bed.model
        .route("MARK-WITHIN", [Reply::text("within the limits")]);
    let mut args = bed.args(60_000);
    args.extend(
        [
            "--allow-cwd",
            ws.to_str().unwrap(),
            "--max-sandbox",
            "workspace-write",
            "--max-approval-policy",
            "on-request",
            "--allow-config-overrides",
            "no",
        ]
        .map(String::from),
    );
    let relay = HttpRelay::start(args).await;
    let c = Client::new(&relay.url);
    let outside = bed.home.root().to_path_buf();

    // HTTP: each limit, named in the refusal.
    let refusals = [
        (json!({"prompt": "p", "cwd": "/"}), "outside"),
        (json!({"prompt": "p", "cwd": outside}), "outside"),
        (
            json!({"prompt": "p", "cwd": ws, "sandbox": "danger-full-access"}),
            "danger-full-access",
        ),
        (
            json!({"prompt": "p", "cwd": ws, "approvalPolicy": "never"}),
            "never",
        ),
        (
            json!({"prompt": "p", "cwd": ws, "dangerouslyBypassApprovalsAndSandbox": true}),
            "beyond",
        ),
        (
            json!({"prompt": "p", "cwd": ws, "config": {"model_reasoning_effort": "low"}}),
            "config overrides",
        ),
        (
            json!({"prompt": "p", "cwd": ws, "profile": "fast"}),
            "profiles",
        ),
        (
            json!({"prompt": "p", "cwd": ws, "images": ["/etc/hostname"]}),
            "image",
        ),
    ];
    for (body, says) in &refusals {
        let r = c.post("/api/sessions", body).await;
        assert_eq!(
            (r.status, code(&r)),
            (403, "forbidden_option".into()),
            "{body}: {}",
            r.text()
        );
        assert!(r.text().contains(says), "{body}: {}", r.text());
    }
    assert!(
        relay.log_text().contains("refused: "),
        "refusals are logged"
    );
    assert!(
        c.get("/api/sessions").await.json()["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["owned"] == false),
        "nothing was started"
    );

    // Within the limits, the session runs on the real Codex.
    let r = c
        .post(
            "/api/sessions",
            &json!({"prompt": "MARK-WITHIN go", "cwd": ws, "sandbox": "workspace-write",
                "approvalPolicy": "on-request"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());

    // MCP over HTTP: the same refusal as a tool error.
    let mut mcp = Driver::spawn(Sdk::Node).await;
    mcp.connect(Transport::Http, &[], &relay.url).await;
    let answer = mcp
        .call(
            "codex_start",
            json!({"prompt": "p", "workingDirectory": "/", "sandbox": "read-only"}),
        )
        .await;
    assert_eq!(answer["isError"], true, "{answer}");
    assert!(
        text_of(&answer).contains("not allowed by this relay's policy"),
        "{answer}"
    );
    mcp.close().await;

    // The legacy contract at /mcp-server: its `codex` tool refuses the same way.
    let mut legacy = LegacyDriver::spawn().await;
    legacy
        .cmd(json!({"op": "connect", "url": format!("{}-server", relay.url), "elicitation": true,
            "headers": {"Authorization": format!("Bearer {}", codex_relay_testkit::RELAY_TEST_TOKEN)}}))
        .await;
    let answer = legacy
        .call(
            "codex",
            json!({"prompt": "p", "cwd": ws, "sandbox": "danger-full-access"}),
            &[],
            json!({"timeoutMs": 30000, "settleMs": 0}),
        )
        .await;
    let said = answer.to_string();
    assert!(
        said.contains("not allowed by this relay's policy") && said.contains("danger-full-access"),
        "{answer}"
    );
    legacy.close().await;
    relay.stop().await;
    bed.assert_no_codex_left().await;
}

fn text_of(answer: &Value) -> String {
    answer["text"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_beyond_loopback_is_strict_without_any_flag() {
    let bed = Bed::start(codex_relay_testkit::NEWEST).await;
    let ws = bed.home.workspace().to_path_buf();
    let mut args = bed.args(60_000);
    args.extend(["--listen".into(), "0.0.0.0:0".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let env: Vec<(&str, String)> = ["PATH", "HOME", "TMPDIR"]
        .into_iter()
        .filter_map(|k| Some((k, std::env::var(k).ok()?)))
        .collect();
    let relay = HttpRelay::start_with_env(&args, &env).await;
    let c = Client::new(&relay.url);
    // The relay's own directory is the only root (the tests run in the crate's directory).
    for (body, says) in [
        (json!({"prompt": "p", "cwd": ws}), "outside"),
        (
            json!({"prompt": "p", "sandbox": "danger-full-access"}),
            "danger-full-access",
        ),
        (json!({"prompt": "p", "approvalPolicy": "never"}), "never"),
        (
            json!({"prompt": "p", "config": {"a": 1}}),
            "config overrides",
        ),
    ] {
        let r = c.post("/api/sessions", &body).await;
        assert_eq!(
            (r.status, code(&r)),
            (403, "forbidden_option".into()),
            "{body}: {}",
            r.text()
        );
        assert!(r.text().contains(says), "{body}: {}", r.text());
    }
    relay.stop().await;
}
