//! The thread operations on every front, on the real Codex (0.171 and 0.169) and the scripted
//! model: over HTTP (review → the findings as the session's result; rollback and fork with the
//! log contiguous; the model list; a session's model and effort reaching the model's request;
//! clear errors), over MCP with the official Rust SDK (`codex_thread`, one tool with an `op`),
//! `codex-relay run --review` printing the findings as JSON, and the library
//! (`Session::review/fork/rollback/set_model`).

use std::time::Duration;

use crate::common::{Bed, HttpRelay, RELAY, rmcp_call, rmcp_until_done};
use crate::http_support::{Client, Event};
use codex_relay_testkit::Reply;
use rmcp::ServiceExt;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

const TURN: Duration = Duration::from_secs(120);

macro_rules! on_newer_codex {
    ($($scenario:ident),* $(,)?) => {$(
        mod $scenario {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn codex_0_171_0() {
                super::$scenario("0.171.0").await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn codex_0_169_0() {
                super::$scenario("0.169.0").await
            }
        }
    )*};
}

on_newer_codex!(
    from_the_library_review_fork_rollback_and_effort,
    over_http_review_rollback_fork_and_model,
    over_mcp_codex_thread_does_each_op,
    run_review_prints_the_findings,
);

/// The review the scripted model gives (the JSON Codex's reviewer answers with).
fn scripted_review() -> Value {
    json!({
        "findings": [{
            "title": "[P1] Unchecked index",
            "body": "`items[i + 1]` panics on the last element.",
            "confidence_score": 0.9,
            "priority": 1,
            "code_location": {"absolute_file_path": "/src/app/lib.rs", "line_range": {"start": 10, "end": 12}}
        }],
        "overall_correctness": "patch is incorrect",
        "overall_explanation": "One panic on the last element.",
        "overall_confidence_score": 0.8
    })
}

/// Codex 0.169+ reviews in a sub-agent of the thread: its request takes this reply.
fn script_review(bed: &Bed) {
    bed.model
        .route_sub_agent("", [Reply::text(scripted_review().to_string())]);
}

fn ends(turn: String) -> impl Fn(&Event) -> bool {
    move |e| e.event == "envelope" && e.json()["ev"]["t"] == "turn-end" && e.json()["turn"] == turn
}

fn git(dir: &std::path::Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The session's log: contiguous from 1.
async fn log_of(c: &Client, id: &str) -> Vec<Value> {
    let page = c
        .get(&format!("/api/sessions/{id}/events?after=0&limit=1000"))
        .await
        .json();
    let events = page["events"].as_array().cloned().unwrap_or_default();
    let seqs: Vec<u64> = events.iter().filter_map(|e| e["seq"].as_u64()).collect();
    assert_eq!(
        seqs,
        (1..=seqs.len() as u64).collect::<Vec<_>>(),
        "{id}'s log has a gap"
    );
    assert_eq!(page["lastSeq"].as_u64(), seqs.last().copied());
    events
}

async fn over_http_review_rollback_fork_and_model(version: &'static str) {
    let bed = Bed::start(version).await;
    let ws = bed.home.workspace().to_path_buf();
    bed.model.route("HTTP-ONE", [Reply::text("one")]);
    bed.model.route("HTTP-TWO", [Reply::text("two")]);
    script_review(&bed);
    let relay = HttpRelay::start(bed.args(60_000)).await;
    let c = Client::new(&relay.url);
    let created = c
        .post(
            "/api/sessions",
            &json!({"prompt": "HTTP-ONE first", "cwd": ws, "approvalPolicy": "never", "effort": "low"}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text());
    let id = created.json()["sessionId"].as_str().unwrap().to_owned();
    let first = created.json()["turnId"].as_str().unwrap().to_owned();
    let mut s = c.stream(&format!("/api/sessions/{id}/stream"), &[]).await;
    s.until(TURN, ends(first.clone())).await;
    let said = c
        .post(
            &format!("/api/sessions/{id}/messages"),
            &json!({"text": "HTTP-TWO second"}),
        )
        .await;
    let second = said.json()["turnId"].as_str().unwrap().to_owned();
    s.until(TURN, ends(second.clone())).await;

    // A review against a base branch outside a git repository: Codex says why and never ends
    // the turn; the relay ends it, failed, with Codex's reason.
    let started = c
        .post(
            &format!("/api/sessions/{id}/review"),
            &json!({"target": {"type": "baseBranch", "branch": "main"}}),
        )
        .await;
    assert_eq!(started.status, 202, "{}", started.text());
    let turn = started.json()["turnId"].as_str().unwrap().to_owned();
    let got = s.until(TURN, ends(turn)).await;
    let end = got.last().unwrap().json();
    assert_eq!(end["ev"]["status"], "failed", "{end}");
    assert!(
        end["ev"]["error"]
            .as_str()
            .unwrap_or("")
            .contains("not a git repository"),
        "{end}"
    );
    // In a git repository it runs: a turn whose end leaves the findings as the result.
    git(&ws, &["init", "-q", "-b", "main"]);
    std::fs::write(ws.join("lib.rs"), "fn main() {}\n").unwrap();
    git(&ws, &["add", "lib.rs"]);
    git(
        &ws,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "one",
        ],
    );
    let started = c
        .post(
            &format!("/api/sessions/{id}/review"),
            &json!({"target": {"type": "baseBranch", "branch": "main"}}),
        )
        .await;
    assert_eq!(started.status, 202, "{}", started.text());
    let turn = started.json()["turnId"].as_str().unwrap().to_owned();
    let got = s.until(TURN, ends(turn)).await;
    let review = got
        .iter()
        .map(Event::json)
        .find(|e| e["ev"]["t"] == "review")
        .expect("a review event on the stream");
    assert_eq!(
        review["ev"]["review"]["findings"][0]["title"],
        "[P1] Unchecked index"
    );
    let view = c.get(&format!("/api/sessions/{id}")).await.json();
    assert_eq!(
        view["result"]["findings"][0]["lines"],
        json!([10, 12]),
        "{view}"
    );
    assert_eq!(
        view["result"]["overallCorrectness"], "patch is incorrect",
        "{view}"
    );
    assert_eq!(view["effort"], "low", "{view}");
    let turns = view["turns"].as_array().cloned().unwrap();
    // Two turns and the review (Codex lists it as two turns); the failed one is not history.
    assert_eq!(turns.len(), 4, "{view}");
    // The scripted model saw the effort the session was created with.
    let asked = bed.model.requests_with("HTTP-TWO");
    assert_eq!(
        asked[0].body["reasoning"]["effort"], "low",
        "{}",
        asked[0].body
    );

    // Bad input: a clear error, nothing changed.
    let bad = c
        .post(
            &format!("/api/sessions/{id}/rollback"),
            &json!({"turns": 99}),
        )
        .await;
    assert_eq!(bad.status, 422, "{}", bad.text());
    assert!(bad.text().contains("roll back 1 to"), "{}", bad.text());
    let bad = c
        .post(
            &format!("/api/sessions/{id}/fork"),
            &json!({"turnId": "no-such-turn"}),
        )
        .await;
    assert_eq!(bad.status, 422, "{}", bad.text());
    let bad = c
        .post(
            &format!("/api/sessions/{id}/review"),
            &json!({"target": {"type": "everything"}}),
        )
        .await;
    assert_eq!(bad.status, 422, "{}", bad.text());
    let before = log_of(&c, &id).await.len();

    // Roll back the review and the second turn (a review and the turn Codex ran it in count
    // as one): the history is the first turn, the log only grew.
    assert_eq!(turns[..2], [json!(first), json!(second)], "{view}");
    let back = 2;
    let rolled = c
        .post(
            &format!("/api/sessions/{id}/rollback"),
            &json!({"turns": back}),
        )
        .await;
    assert_eq!(rolled.status, 200, "{}", rolled.text());
    assert_eq!(rolled.json()["turns"], json!([first]), "{}", rolled.text());
    let after = log_of(&c, &id).await;
    assert!(after.len() > before);
    assert!(
        after[before..]
            .iter()
            .any(|e| e["ev"]["t"] == "rolled-back")
    );

    // Fork the whole (now one-turn) history.
    let forked = c
        .post(&format!("/api/sessions/{id}/fork"), &json!({}))
        .await;
    assert_eq!(forked.status, 201, "{}", forked.text());
    let fork = forked.json()["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(forked.json()["turns"], json!([first]));
    let flog = log_of(&c, &fork).await;
    assert_eq!(flog[0]["ev"]["t"], "forked");
    let fview = c.get(&format!("/api/sessions/{fork}")).await.json();
    assert_eq!(
        fview["effort"], "low",
        "the fork keeps the source's settings: {fview}"
    );

    // The model list, and a model and effort for the source's next turn.
    let models = c.get("/api/models").await;
    assert_eq!(models.status, 200, "{}", models.text());
    let list = models.json()["models"].as_array().cloned().unwrap();
    let chosen = list
        .iter()
        .find(|m| {
            m["efforts"]
                .as_array()
                .is_some_and(|e| e.contains(&json!("high")))
        })
        .unwrap_or_else(|| panic!("no model with a high effort: {list:?}"))["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let set = c
        .post(
            &format!("/api/sessions/{id}/model"),
            &json!({"model": chosen, "effort": "high"}),
        )
        .await;
    assert_eq!(set.status, 200, "{}", set.text());
    let bad = c
        .post(
            &format!("/api/sessions/{id}/model"),
            &json!({"effort": "Very High"}),
        )
        .await;
    assert_eq!(bad.status, 422, "{}", bad.text());
    bed.model.route("HTTP-THREE", [Reply::text("three")]);
    let said = c
        .post(
            &format!("/api/sessions/{id}/messages"),
            &json!({"text": "HTTP-THREE third"}),
        )
        .await;
    let third = said.json()["turnId"].as_str().unwrap().to_owned();
    s.until(TURN, ends(third)).await;
    let asked = bed.model.requests_with("HTTP-THREE");
    assert_eq!(asked[0].body["model"], json!(chosen), "{}", asked[0].body);
    assert_eq!(
        asked[0].body["reasoning"]["effort"], "high",
        "{}",
        asked[0].body
    );
    // After the rollback the model does not see the second turn.
    assert!(!asked[0].user_texts().iter().any(|t| t.contains("HTTP-TWO")));

    // The OpenAPI document names every new endpoint.
    let doc = c.get("/api/openapi.json").await.json();
    for path in [
        "/api/sessions/{id}/review",
        "/api/sessions/{id}/fork",
        "/api/sessions/{id}/rollback",
        "/api/sessions/{id}/compact",
        "/api/sessions/{id}/model",
        "/api/models",
    ] {
        assert!(doc["paths"].get(path).is_some(), "{path} is not documented");
    }
    bed.model.assert_all_scripted();
}

async fn over_mcp_codex_thread_does_each_op(version: &'static str) {
    let bed = Bed::start(version).await;
    let ws = bed.home.workspace().display().to_string();
    bed.model.route("MCP-ONE", [Reply::text("one")]);
    bed.model.route("MCP-TWO", [Reply::text("two")]);
    script_review(&bed);
    let mut cmd = tokio::process::Command::new(RELAY);
    cmd.arg("mcp").args(bed.args(60_000)).kill_on_drop(true);
    let client =
        ().serve(TokioChildProcess::new(cmd).expect("spawn codex-relay mcp"))
            .await
            .expect("MCP initialize");
    let tools = client.list_all_tools().await.expect("tools/list");
    let thread = tools
        .iter()
        .find(|t| t.name == "codex_thread")
        .expect("codex_thread is listed");
    assert!(thread.output_schema.is_some());
    let started = rmcp_call(
        &client,
        "codex_start",
        json!({"prompt": "MCP-ONE first", "workingDirectory": ws, "approvalPolicy": "never"}),
    )
    .await;
    let id = started["sessionId"].as_str().unwrap().to_owned();
    rmcp_until_done(&client, &id).await;
    rmcp_call(
        &client,
        "codex_say",
        json!({"sessionId": id, "message": "MCP-TWO second"}),
    )
    .await;
    let done = rmcp_until_done(&client, &id).await;
    assert_eq!(done["turnCount"].as_u64().or(Some(2)), Some(2));

    let review = rmcp_call(
        &client,
        "codex_thread",
        json!({"op": "review", "sessionId": id, "review": {"type": "uncommittedChanges"}}),
    )
    .await;
    assert!(review["turnId"].is_string(), "{review}");
    let done = rmcp_until_done(&client, &id).await;
    assert_eq!(done["result"]["findings"][0]["priority"], 1, "{done}");
    assert_eq!(
        done["result"]["overallExplanation"], "One panic on the last element.",
        "{done}"
    );

    let models = rmcp_call(&client, "codex_thread", json!({"op": "models"})).await;
    assert!(
        models["models"].as_array().is_some_and(|m| !m.is_empty()),
        "{models}"
    );
    let set = rmcp_call(
        &client,
        "codex_thread",
        json!({"op": "model", "sessionId": id, "effort": "medium"}),
    )
    .await;
    assert_eq!(set["model"]["effort"], "medium", "{set}");

    let rolled = rmcp_call(
        &client,
        "codex_thread",
        json!({"op": "rollback", "sessionId": id, "turns": 1}),
    )
    .await;
    // The last turn was the review: Codex ran it in a turn of its own, and both go.
    assert_eq!(
        rolled["rolledBack"]["dropped"].as_array().map(Vec::len),
        Some(2),
        "{rolled}"
    );
    assert_eq!(
        rolled["rolledBack"]["turns"].as_array().map(Vec::len),
        Some(2),
        "{rolled}"
    );
    let forked = rmcp_call(
        &client,
        "codex_thread",
        json!({"op": "fork", "sessionId": id}),
    )
    .await;
    let fork = forked["forked"]["sessionId"]
        .as_str()
        .expect("the fork's id");
    assert_ne!(fork, id);
    assert_eq!(
        forked["forked"]["turns"], rolled["rolledBack"]["turns"],
        "{forked}"
    );
    let status = rmcp_call(&client, "codex_status", json!({"sessionId": fork})).await;
    assert_eq!(status["sessionId"], fork, "{status}");

    // Missing arguments: an error result naming what the op needs.
    let params = rmcp::model::CallToolRequestParams::new("codex_thread").with_arguments(
        json!({"op": "rollback", "sessionId": id})
            .as_object()
            .cloned()
            .unwrap(),
    );
    let refused = client.call_tool(params).await.expect("tools/call");
    assert_eq!(refused.is_error, Some(true));
    assert!(
        serde_json::to_string(&refused.content)
            .unwrap()
            .contains("needs turns")
    );
    client.cancel().await.ok();
    bed.model.assert_all_scripted();
}

async fn run_review_prints_the_findings(version: &'static str) {
    let bed = Bed::start(version).await;
    script_review(&bed);
    let out = tokio::process::Command::new(RELAY)
        .arg("run")
        .args(bed.args(60_000))
        .arg("--cwd")
        .arg(bed.home.workspace())
        .args(["--review", "commit:abc1234"])
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .expect("codex-relay run --review");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "run --review failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    assert_eq!(
        printed["findings"][0]["title"], "[P1] Unchecked index",
        "{printed}"
    );
    assert_eq!(
        printed["findings"][0]["file"], "/src/app/lib.rs",
        "{printed}"
    );
    // The review the model was asked for names the commit.
    let asked = bed.model.requests();
    assert!(
        asked.iter().any(|r| r.body.to_string().contains("abc1234")),
        "no request named the commit"
    );
    // A bad target is refused before Codex starts.
    let bad = tokio::process::Command::new(RELAY)
        .arg("run")
        .args(bed.args(60_000))
        .args(["--review", "everything"])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .expect("codex-relay run --review everything");
    assert_eq!(
        bad.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    bed.model.assert_all_scripted();
}

async fn from_the_library_review_fork_rollback_and_effort(version: &'static str) {
    let bed = crate::library_support::Bed::start(version).await;
    bed.model.route("LIB-ONE", [Reply::text("one")]);
    bed.model.route("LIB-FORK", [Reply::text("in the fork")]);
    bed.model
        .route_sub_agent("", [Reply::text(scripted_review().to_string())]);
    let session = bed
        .client
        .session(bed.options().effort("low"))
        .await
        .expect("session");
    session.run("LIB-ONE first").await.expect("first run");
    let reviewed = session
        .review(codex_relay::ReviewTarget::Custom {
            instructions: "look at the loop".into(),
        })
        .await
        .expect("the review run");
    let review = reviewed.review().expect("the run's findings");
    assert_eq!(review.findings[0].title, "[P1] Unchecked index");
    assert_eq!(review.findings[0].lines, Some((10, 12)));
    assert_eq!(session.snapshot().effort.as_deref(), Some("low"));
    let first = session.snapshot().turns[0].clone();
    let fork = session.fork(Some(&first)).await.expect("fork");
    assert_ne!(fork.id(), session.id());
    assert_eq!(fork.snapshot().turns, vec![first.clone()]);
    fork.set_model(codex_relay::ModelChoice {
        model: None,
        effort: Some("high".into()),
    })
    .await
    .expect("effort");
    let run = fork.run("LIB-FORK go on").await.expect("a run in the fork");
    assert_eq!(run.text, "in the fork");
    let asked = bed.model.requests_with("LIB-FORK");
    assert_eq!(
        asked[0].body["reasoning"]["effort"], "high",
        "{}",
        asked[0].body
    );
    // The fork's model saw the first turn, not the review.
    assert!(asked[0].user_texts().iter().any(|t| t.contains("LIB-ONE")));
    let rolled = session.rollback(1).await.expect("rollback");
    assert_eq!(rolled.turns, vec![first]);
    bed.model.assert_all_scripted();
}
