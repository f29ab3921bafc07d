//! `codex-relay mcp` stops on SIGTERM and on Ctrl-C while it waits for input on a stdin it reads through a blocking thread (stdout to a file, or a terminal): dropping the runtime used to wait for that read, so the relay ran on until the next line or EOF.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::{Bed, RELAY};
use codex_relay_testkit::{NEWEST, procs};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const INITIALIZE: &str = concat!(
    r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","#,
    r#""capabilities":{},"clientInfo":{"name":"stdin-test","version":"1"}}}"#,
    "\n"
);

/// Polls `read` until it holds the answer to `initialize`: the server then waits on stdin.
async fn until_initialized(mut read: impl FnMut() -> String) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = read();
        if text.contains(r#""id":1"#) && text.contains("protocolVersion") {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no answer to initialize: {text:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_mcp_whose_stdout_is_a_file() {
    let bed = Bed::start(NEWEST).await;
    let out_path = bed.home.root().join("mcp.out");
    let mut child = tokio::process::Command::new(RELAY)
        .arg("mcp")
        .args(bed.args(60_000))
        .stdin(Stdio::piped())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // Kept open: the relay must not need EOF to stop.
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(INITIALIZE.as_bytes()).await.unwrap();
    until_initialized(|| std::fs::read_to_string(&out_path).unwrap_or_default()).await;
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id().unwrap() as i32, libc::SIGTERM) };
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("mcp stops within 10 s of SIGTERM, stdin still open")
        .unwrap();
    assert!(status.success(), "{status}");
    drop(stdin);
    bed.assert_no_codex_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_on_a_terminal_stops_mcp() {
    let bed = Bed::start(NEWEST).await;
    let quote = |s: String| format!("'{}'", s.replace('\'', r"'\''"));
    let mut line = vec!["exec".into(), quote(RELAY.into()), "mcp".into()];
    line.extend(bed.args(60_000).into_iter().map(quote));
    // `script` gives the relay a terminal as stdin and stdout; what is written to script's
    // stdin is typed on it.
    let mut child = tokio::process::Command::new("script")
        .args(["-qec", &line.join(" "), "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("script starts");
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = seen.clone();
    tokio::spawn(async move {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf).await {
            if n == 0 {
                break;
            }
            kept.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    stdin.write_all(INITIALIZE.as_bytes()).await.unwrap();
    // The terminal echoes what is typed: the answer is the second line with `"id":1`.
    until_initialized(|| {
        let text = String::from_utf8_lossy(&seen.lock().unwrap()).into_owned();
        text.split_once("clientInfo")
            .map(|(_, rest)| rest.to_owned())
            .unwrap_or_default()
    })
    .await;
    let db = bed.home.root().join("relay.db").display().to_string();
    assert!(!procs::pids_with_cmdline(&db).is_empty(), "the relay runs");
    // Ctrl-C: the terminal sends SIGINT to its foreground process group.
    stdin.write_all(b"\x03").await.unwrap();
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("mcp stops within 10 s of Ctrl-C")
        .unwrap();
    assert!(status.success(), "{status}");
    assert!(
        procs::pids_with_cmdline(&db).is_empty(),
        "the relay is gone"
    );
    bed.assert_no_codex_left().await;
}
