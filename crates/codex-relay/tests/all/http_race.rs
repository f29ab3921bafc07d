//! One pending request, two fronts: an MCP client (the official Node SDK) has the approval as
//! an elicitation form and accepts it while an HTTP client denies it from the SSE stream. The
//! broker takes the first answer; the other side is told "already resolved" (409 over HTTP, a
//! tool error over MCP), and the session's log holds exactly one resolution.

use std::time::Duration;

use crate::common::{Bed, Driver, HttpRelay, Sdk, Transport};
use crate::http_support::Client;
use codex_relay_testkit::Reply;
use serde_json::json;

const NEWEST: &str = codex_relay_testkit::NEWEST;
const TURN: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_answer_racing_an_mcp_elicitation_loses_or_wins_cleanly() {
    let bed = Bed::start(NEWEST).await;
    let ws = bed.home.workspace().to_path_buf();
    bed.model.push([
        Reply::exec("touch raced.txt", "call-race"),
        Reply::text("race over"),
    ]);
    let relay = HttpRelay::start(bed.args(120_000)).await;
    let http = Client::new(&relay.url);
    let mut dashboard = http.stream("/api/stream", &[]).await;
    let mut d = Driver::spawn(Sdk::Node).await;
    d.connect(Transport::Http, &[], &relay.url).await;
    d.cmd(json!({"op": "policy", "acceptWhen": "touch raced.txt", "content": {"decision": "approve"}}))
        .await;
    let started = d
        .ok(
            "codex_start",
            json!({"prompt": "race", "workingDirectory": ws, "approvalPolicy": "untrusted",
                "sandbox": "workspace-write"}),
        )
        .await;
    let session = started["sessionId"].as_str().unwrap().to_owned();

    // The HTTP side answers the moment the request shows up on the relay stream.
    let asked = dashboard
        .until(TURN, |e| e.event == "permission_request")
        .await
        .pop()
        .unwrap()
        .json();
    assert_eq!(asked["sessionId"], session.as_str());
    let r = http
        .post(
            "/api/codex/permission/respond",
            &json!({"id": asked["id"], "action": "deny", "message": "http was first"}),
        )
        .await;
    let resolved = dashboard
        .until(TURN, |e| e.event == "request_resolved")
        .await
        .pop()
        .unwrap()
        .json();
    assert_eq!(resolved["id"], asked["id"]);
    let by = resolved["by"].as_str().unwrap().to_owned();
    match r.status {
        200 => {
            assert_eq!(
                (by.as_str(), resolved["decision"].as_str()),
                ("http", Some("deny"))
            );
            // The MCP side's late answer is refused with the same words.
            let late = d
                .call(
                    "codex_respond",
                    json!({"sessionId": session, "id": asked["id"], "answers": ["approve"]}),
                )
                .await;
            assert_eq!(late["isError"], true, "{late}");
            assert!(
                late["text"].as_str().unwrap().contains("already resolved"),
                "{late}"
            );
        }
        409 => {
            assert_eq!(
                (by.as_str(), resolved["decision"].as_str()),
                ("mcp-elicitation", Some("approve"))
            );
            let body = r.json();
            assert_eq!(body["error"]["code"], "already_resolved", "{body}");
            let message = body["error"]["message"].as_str().unwrap();
            assert!(
                message.contains("already resolved (approve by mcp-elicitation)"),
                "{message}"
            );
        }
        other => panic!("unexpected {other}: {}", r.text()),
    }
    eprintln!("the race was won by {by}");
    let (done, events) = d
        .status_until(&session, TURN, |s| s["status"] == "done")
        .await;
    assert_eq!(done["result"], "race over", "{done}");
    let resolutions: Vec<_> = events
        .iter()
        .filter(|e| e["ev"]["t"] == "request-resolved")
        .collect();
    assert_eq!(
        resolutions.len(),
        1,
        "one answer took effect: {resolutions:?}"
    );
    assert_eq!(
        ws.join("raced.txt").exists(),
        by.as_str() == "mcp-elicitation"
    );
    d.close().await;
    relay.stop().await;
    bed.assert_no_codex_left().await;
}
