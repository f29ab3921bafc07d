//! The bed the security tests stand on: `serve` run as the ordinary test user (root only when
//! the suite itself is not root), over the real Codex. The relay process, Codex and the
//! command the model runs are all that user, so what a command cannot read or reach in the
//! other tests is what an ordinary user's session cannot.

use std::time::Duration;

use crate::common::{Bed, HttpRelay};
use crate::http_support::Client;
use codex_relay_testkit::Reply;
use codex_relay_testkit::ordinary::Ordinary;
use serde_json::json;

const TURN: Duration = Duration::from_secs(120);

/// The uid a process runs as, from `/proc/<pid>/status`.
fn uid_of(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_codex_and_the_commands_it_runs_are_the_ordinary_user() {
    let bed = match Bed::ordinary(codex_relay_testkit::NEWEST, "").await {
        Ok(bed) => bed,
        Err(why) => return codex_relay_testkit::skip::skip(why),
    };
    let user = Ordinary::get().unwrap();
    bed.model.route(
        "MARK-WHO",
        [
            Reply::exec("id -u > who.txt; id -G >> who.txt", "call-who"),
            Reply::text("noted"),
        ],
    );
    let mut args = bed.args(60_000);
    args.extend(["--listen", "127.0.0.1:0"].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let relay = HttpRelay::start_ordinary(&bed, &args, &[]).await;
    assert_eq!(uid_of(relay.pid()), Some(user.uid), "the relay's uid");
    let c = Client::new(&relay.url);
    let ws = bed.home.workspace().to_path_buf();
    let r = c
        .post(
            "/api/sessions",
            &json!({"prompt": "MARK-WHO: who are you", "cwd": ws,
                "approvalPolicy": "never", "sandbox": "workspace-write"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let mut s = c.stream(&format!("/api/sessions/{id}/stream"), &[]).await;
    s.until(TURN, |e| {
        e.event == "envelope"
            && e.json()["ev"]["t"] == "status"
            && e.json()["ev"]["status"] == "idle"
    })
    .await;
    let who = std::fs::read_to_string(ws.join("who.txt")).expect("the command ran");
    let mut lines = who.lines();
    assert_eq!(lines.next(), Some(user.uid.to_string().as_str()), "{who}");
    let groups: Vec<&str> = lines.next().unwrap_or_default().split(' ').collect();
    assert!(
        !user.switches() || !groups.contains(&"0"),
        "no supplementary group of root's is kept: {who}"
    );
    relay.stop().await;
    bed.assert_no_codex_left().await;
}
