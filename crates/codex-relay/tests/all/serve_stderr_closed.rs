//! `codex-relay serve` whose stderr reader goes away (`serve 2>&1 | head -1`, a supervisor that
//! stopped reading): at info level every later log line meets a broken pipe, and the relay
//! still runs a turn with the real Codex and stops cleanly.

use std::process::Stdio;
use std::time::Duration;

use crate::common::{Bed, Driver, RELAY, Sdk, Transport};
use codex_relay_testkit::{NEWEST, Reply};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reader_of_stderr_leaves_after_the_first_line_and_a_turn_still_runs() {
    let bed = Bed::start(NEWEST).await;
    bed.model.route("DEAF", [Reply::text("still here")]);
    let mut child = tokio::process::Command::new(RELAY)
        .arg("serve")
        .args(["--listen", "127.0.0.1:0"])
        .args(bed.args(60_000))
        .env("LOG_LEVEL", "info")
        .env("CODEX_RELAY_TOKEN", codex_relay_testkit::RELAY_TEST_TOKEN)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // Read only up to the line with the address, as `head -1` would, then close the pipe.
    let url = {
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                let line = lines.next_line().await.unwrap().expect("serve listens");
                if let Some(url) = line.split("MCP at ").nth(1) {
                    break url.trim().to_owned();
                }
            }
        })
        .await
        .expect("serve listens within 30 s")
    };

    let mut d = Driver::spawn(Sdk::Node).await;
    d.connect(Transport::Http, &[], &url).await;
    let s = d
        .ok(
            "codex_start",
            json!({"prompt": "DEAF: are you there?", "workingDirectory": bed.home.workspace(),
                   "approvalPolicy": "never", "sandbox": "read-only"}),
        )
        .await;
    let s = s["sessionId"].as_str().unwrap().to_owned();
    let (done, _) = d
        .status_until(&s, Duration::from_secs(90), |s| s["status"] == "done")
        .await;
    assert_eq!(done["result"], "still here", "{done}");
    d.close().await;

    // SIGTERM: a clean exit, and no Codex left behind.
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id().unwrap() as i32, libc::SIGTERM) };
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("serve stops within 10 s of SIGTERM")
        .unwrap();
    assert!(status.success(), "serve exited with {status}");
    bed.assert_no_codex_left().await;
}
