//! A broken Codex, faked with small shell scripts: a missing binary, one that is not
//! executable, one that prints garbage instead of JSON-RPC (then exits, or hangs). Each is a
//! clear error from `doctor` and from the first MCP call (`codex_start`), and repeated failed
//! starts end in the crash-loop error instead of spinning.

use std::path::{Path, PathBuf};

use crate::common::{GARBAGE, HttpRelay, RELAY, fake_codex as fake};
use crate::http_support::Client;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::json;

struct Faults {
    dir: tempfile::TempDir,
    missing: PathBuf,
    not_executable: PathBuf,
    garbage: PathBuf,
    banner_then_hang: PathBuf,
}

fn faults() -> Faults {
    let dir = tempfile::tempdir().unwrap();
    Faults {
        missing: dir.path().join("no-such-codex"),
        not_executable: fake(dir.path(), "codex-644", "exit 0", 0o644),
        garbage: fake(dir.path(), "codex-garbage", GARBAGE, 0o755),
        banner_then_hang: fake(
            dir.path(),
            "codex-banner",
            "echo 'banner'\nexec sleep 30",
            0o755,
        ),
        dir,
    }
}

fn doctor(codex: &Path, home: &Path) -> (bool, String) {
    let out = std::process::Command::new(RELAY)
        .args(["doctor", "--startup-timeout-ms", "1500", "--codex"])
        .arg(codex)
        .arg("--codex-home")
        .arg(home)
        .output()
        .expect("run codex-relay doctor");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn doctor_names_each_broken_codex_fault() {
    let f = faults();
    let home = f.dir.path();
    for (codex, expected) in [
        (
            &f.missing,
            "no such file: install the Codex codex-relay is tested with",
        ),
        (&f.not_executable, "not executable: `chmod +x` it"),
        (
            &f.garbage,
            "printed something that is not a JSON-RPC message",
        ),
        (
            &f.banner_then_hang,
            "printed something that is not a JSON-RPC message",
        ),
    ] {
        let (ok, text) = doctor(codex, home);
        assert!(!ok, "doctor fails for {}: {text}", codex.display());
        assert!(text.contains("FAILED"), "{text}");
        assert!(text.contains(expected), "{}: {text}", codex.display());
    }
    let (_, text) = doctor(&f.garbage, home);
    assert!(
        text.contains("\"Welcome to not-codex!\""),
        "the first junk line is quoted: {text}"
    );
    let (_, text) = doctor(&f.banner_then_hang, home);
    assert!(
        text.contains("did not finish the handshake within 1.5s"),
        "{text}"
    );
}

/// `codex_start`'s error text from a `codex-relay mcp` over `codex`.
async fn codex_start_errors(codex: &Path, home: &Path, calls: usize) -> Vec<String> {
    let mut cmd = tokio::process::Command::new(RELAY);
    cmd.arg("mcp")
        .arg("--codex")
        .arg(codex)
        .arg("--codex-home")
        .arg(home)
        .arg("--db")
        .arg(home.join(format!("relay-{}.db", codex.file_name().unwrap().display())))
        .env("CODEX_CRASH_LIMIT", "2")
        .kill_on_drop(true);
    let client =
        ().serve(TokioChildProcess::new(cmd).expect("spawn codex-relay mcp"))
            .await
            .expect("MCP initialize: the relay starts without Codex");
    let mut out = Vec::new();
    for _ in 0..calls {
        let params = CallToolRequestParams::new("codex_start")
            .with_arguments(json!({"prompt": "hello"}).as_object().cloned().unwrap());
        let result = client.call_tool(params).await.expect("tools/call answers");
        assert_eq!(result.is_error, Some(true), "{:?}", result.content);
        out.push(serde_json::to_string(&result.content).unwrap());
    }
    client.cancel().await.expect("close the client");
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_mcp_call_says_what_is_wrong_with_codex_then_the_crash_loop_stops_retries() {
    let f = faults();
    let home = f.dir.path();
    let missing = codex_start_errors(&f.missing, home, 1).await;
    assert!(
        missing[0].contains("no such file: install the Codex codex-relay is tested with"),
        "{missing:?}"
    );
    let not_executable = codex_start_errors(&f.not_executable, home, 1).await;
    assert!(
        not_executable[0].contains("not executable"),
        "{not_executable:?}"
    );
    // Two failed starts reach CODEX_CRASH_LIMIT=2: the third call is refused without a start.
    let garbage = codex_start_errors(&f.garbage, home, 3).await;
    for e in &garbage[..2] {
        assert!(e.contains("Welcome to not-codex!"), "{garbage:?}");
    }
    assert!(garbage[2].contains("stopped restarting"), "{garbage:?}");
    assert!(
        garbage[2].contains("Welcome to not-codex!"),
        "names the last failure: {garbage:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_shows_the_crash_loop_once_restarts_stop() {
    let f = faults();
    let home = f.dir.path();
    let db = home.join("relay-health.db");
    let relay = HttpRelay::start_with_env(
        &["--listen", "127.0.0.1:0"],
        &[
            ("PATH", std::env::var("PATH").unwrap_or_default()),
            ("CODEX_CLI_PATH", f.garbage.display().to_string()),
            ("CODEX_HOME", home.display().to_string()),
            ("CODEX_RELAY_DB", db.display().to_string()),
            ("CODEX_CRASH_LIMIT", "1".into()),
        ],
    )
    .await;
    let c = Client::new(&relay.url);
    let first = c.get("/healthz").await.json();
    let detail = first["codex"]["detail"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(detail.contains("Welcome to not-codex!"), "{first}");
    let second = c.get("/healthz").await;
    assert_eq!(second.status, 503, "{}", second.text());
    let detail = second.json()["codex"]["detail"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(detail.contains("stopped restarting"), "{detail}");
    assert!(
        detail.contains("Welcome to not-codex!"),
        "names the last failure: {detail}"
    );
}
