//! Controls for agent builders, over MCP with the official Rust SDK (rmcp) and through the
//! library, on the real Codex (0.169 and 0.98) and the scripted model: a deadline and the idle
//! watchdog stop a turn whose command would run forever (`sleep 1000`, under the `never`
//! policy) and the status says which; a token budget stops a session at the crossing, the
//! client is told which budget, and raising it lets the next turn run; a turn's usage is the
//! sum of what the model reported for each of its requests.

use std::time::Duration;

use crate::common::{Bed, RELAY, rmcp_call};
use codex_relay::event::Ev;
use codex_relay_testkit::{Reply, ScriptedUsage, for_each_codex};
use rmcp::RoleClient;
use rmcp::ServiceExt;
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

for_each_codex!(
    a_deadline_then_the_watchdog_stop_sleep_1000_and_the_status_says_which,
    a_token_budget_stops_the_session_at_the_crossing_until_raised,
    a_turns_usage_is_the_sum_of_its_model_requests,
);

type Client = RunningService<RoleClient, ()>;

async fn mcp(bed: &Bed) -> Client {
    let mut cmd = tokio::process::Command::new(RELAY);
    cmd.arg("mcp").args(bed.args(60_000)).kill_on_drop(true);
    ().serve(TokioChildProcess::new(cmd).expect("spawn codex-relay mcp"))
        .await
        .expect("MCP initialize")
}

/// Long-polls `codex_status` until no turn runs (two minutes at most); returns that status.
async fn settled(client: &Client, id: &str) -> Value {
    let until = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let s = rmcp_call(
            client,
            "codex_status",
            json!({"sessionId": id, "waitMs": 10000, "until": "attention", "cursor": 0}),
        )
        .await;
        if !matches!(s["status"].as_str(), Some("active" | "awaiting_input")) {
            return s;
        }
        assert!(
            tokio::time::Instant::now() < until,
            "the turn never settled: {s}"
        );
    }
}

/// A tool call expected to fail: its text.
async fn refused(client: &Client, tool: &str, args: Value) -> String {
    let params = rmcp::model::CallToolRequestParams::new(tool.to_owned())
        .with_arguments(args.as_object().cloned().unwrap());
    let result = client.call_tool(params).await.expect("tools/call");
    assert_eq!(
        result.is_error,
        Some(true),
        "{tool} was not refused: {result:?}"
    );
    serde_json::to_string(&result.content).unwrap()
}

/// Whether the session's log shows the command carrying `marker` started.
fn ran(status: &Value, marker: &str) -> bool {
    status["events"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|e| e["ev"]["t"] == "tool-call-start" && e["ev"]["args"].to_string().contains(marker))
}

/// The last `turn-end` in the status's events.
fn last_end(status: &Value) -> Value {
    status["events"]
        .as_array()
        .into_iter()
        .flatten()
        .rev()
        .find(|e| e["ev"]["t"] == "turn-end")
        .map(|e| e["ev"].clone())
        .unwrap_or(Value::Null)
}

/// Waits (60 s at most: a loaded machine reaps slowly) for the processes whose command line
/// carries `marker` to go.
async fn gone(marker: &str) {
    let mut left = codex_relay_testkit::procs::pids_with_cmdline(marker);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut pause = Duration::from_millis(50);
    while tokio::time::Instant::now() < deadline {
        if left.is_empty() {
            return;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(1));
        left = codex_relay_testkit::procs::pids_with_cmdline(marker);
    }
    let tree: Vec<String> = left
        .iter()
        .map(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
            let ppid = stat.split_whitespace().nth(3).unwrap_or("?").to_owned();
            let parent = std::fs::read_to_string(format!("/proc/{ppid}/cmdline"))
                .unwrap_or_default()
                .replace('\0', " ");
            format!("{p} (parent {ppid}: {parent})")
        })
        .collect();
    panic!("the command {marker} still runs: {tree:?}");
}

/// How long Codex takes to reach the command depends on the machine: an attempt whose command
/// never started before the limit proves nothing (the reason is still checked) and is tried
/// again with twice the limit.
async fn stop_with(
    client: &Client,
    bed: &Bed,
    id: &str,
    kind: &str,
    field: &str,
    seconds: u64,
) -> Value {
    let mut secs = seconds;
    for attempt in 1..=3 {
        let marker = format!("{kind}-{}-{attempt}-{}", std::process::id(), id);
        bed.model.route(
            &marker,
            [Reply::exec(
                &format!("sleep 1000; echo {marker}"),
                &format!("call-{kind}-{attempt}"),
            )],
        );
        let said = rmcp_call(
            client,
            "codex_say",
            json!({"sessionId": id, "message": format!("{marker}: wait"), field: secs}),
        )
        .await;
        assert_eq!(said["mode"], "started", "{said}");
        let status = settled(client, id).await;
        assert_eq!(status["status"], "interrupted", "{status}");
        assert_eq!(status["stopped"]["reason"], kind, "{status}");
        let end = last_end(&status);
        assert_eq!(end["stopped"]["reason"], kind, "{end}");
        assert!(
            end["error"]
                .as_str()
                .unwrap_or_default()
                .contains(if kind == "idle" {
                    "no output"
                } else {
                    "deadline"
                }),
            "the turn's end says why: {end}"
        );
        if ran(&status, &marker) {
            gone(&marker).await;
            return status;
        }
        println!(
            "{kind}: attempt {attempt}: stopped before Codex ran the command; twice the limit"
        );
        secs *= 2;
    }
    panic!("the command never started within the {kind} limit");
}

async fn a_deadline_then_the_watchdog_stop_sleep_1000_and_the_status_says_which(
    version: &'static str,
) {
    let bed = Bed::start(version).await;
    let ws = bed.home.workspace().to_path_buf();
    bed.model.route("WARM", [Reply::text("warm")]);
    let client = mcp(&bed).await;
    let started = rmcp_call(
        &client,
        "codex_start",
        json!({"prompt": "WARM up", "workingDirectory": ws, "approvalPolicy": "never",
               "sandbox": "workspace-write"}),
    )
    .await;
    let id = started["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(settled(&client, &id).await["status"], "done");
    let status = stop_with(&client, &bed, &id, "deadline", "deadlineSeconds", 3).await;
    assert!(
        status["stopped"]["limitMs"].as_u64().unwrap() >= 3000,
        "{status}"
    );
    let status = stop_with(&client, &bed, &id, "idle", "idleSeconds", 3).await;
    assert!(
        status["stopped"]["idleMs"].as_u64().unwrap() >= 3000,
        "{status}"
    );
    client.cancel().await.expect("close the client");
    bed.assert_no_codex_left().await;
}

async fn a_token_budget_stops_the_session_at_the_crossing_until_raised(version: &'static str) {
    let bed = Bed::start(version).await;
    let ws = bed.home.workspace().to_path_buf();
    let marker = format!("BUDGET-{}-{version}", std::process::id());
    // The first request alone crosses the budget (1100 of 1000 tokens); its command would
    // run forever, so only the budget ends the turn.
    bed.model.route(
        "BUDGET-ONE",
        [Reply::exec(&format!("sleep 1000; echo {marker}"), "call-b").with_usage(900, 200)],
    );
    let client = mcp(&bed).await;
    let started = rmcp_call(
        &client,
        "codex_start",
        json!({"prompt": "BUDGET-ONE go", "workingDirectory": ws, "approvalPolicy": "never",
               "sandbox": "workspace-write", "budget": {"totalTokens": 1000}}),
    )
    .await;
    let id = started["sessionId"].as_str().unwrap().to_owned();
    let status = settled(&client, &id).await;
    assert_eq!(status["status"], "interrupted", "{status}");
    let stopped = &status["stopped"];
    assert_eq!(
        (stopped["reason"].as_str(), stopped["budget"].as_str()),
        (Some("budget"), Some("totalTokens")),
        "{status}"
    );
    assert_eq!(stopped["used"], 1100.0, "{status}");
    assert_eq!(status["budgetReached"]["budget"], "totalTokens", "{status}");
    assert_eq!(status["spent"]["usage"]["total_tokens"], 1100, "{status}");
    // Stopped at the crossing: before or after Codex started the command; either way it
    // does not outlive the turn.
    gone(&marker).await;
    // The session starts no new turn, and says which budget.
    let text = refused(
        &client,
        "codex_say",
        json!({"sessionId": id, "message": "BUDGET-TWO go"}),
    )
    .await;
    assert!(text.contains("totalTokens"), "{text}");
    // Raised, the next turn runs.
    let limits = rmcp_call(
        &client,
        "codex_limits",
        json!({"sessionId": id, "budget": {"totalTokens": 100000}}),
    )
    .await;
    assert_eq!(limits["budget"]["totalTokens"], 100000, "{limits}");
    assert!(limits["budgetReached"].is_null(), "{limits}");
    bed.model.route(
        "BUDGET-TWO",
        [Reply::text("after the raise").with_usage(100, 10)],
    );
    let said = rmcp_call(
        &client,
        "codex_say",
        json!({"sessionId": id, "message": "BUDGET-TWO go"}),
    )
    .await;
    assert_eq!(said["mode"], "started", "{said}");
    let status = settled(&client, &id).await;
    assert_eq!(status["status"], "done", "{status}");
    assert_eq!(status["result"], "after the raise");
    assert!(status["stopped"].is_null(), "{status}");
    assert_eq!(status["turnUsage"]["totalTokens"], 110, "{status}");
    assert_eq!(status["spent"]["usage"]["total_tokens"], 1210, "{status}");
    assert_eq!(status["spent"]["turns"], 2, "{status}");
    client.cancel().await.expect("close the client");
    bed.assert_no_codex_left().await;
}

fn usage(input: i64, cached: i64, output: i64, reasoning: i64) -> ScriptedUsage {
    ScriptedUsage {
        input_tokens: input,
        cached_tokens: cached,
        output_tokens: output,
        reasoning_tokens: reasoning,
    }
}

/// Three model requests in one turn (two commands, then the answer): the turn's usage, on the
/// library's result, its `turn-end` and the session's snapshot, is their sum, field by field;
/// a second turn adds to the session's.
async fn a_turns_usage_is_the_sum_of_its_model_requests(version: &'static str) {
    let bed = crate::library_support::Bed::start(version).await;
    bed.model.route(
        "USAGE-ONE",
        [
            Reply::exec("echo one", "call-u1").with_full_usage(usage(100, 10, 20, 5)),
            Reply::exec("echo two", "call-u2").with_full_usage(usage(200, 50, 30, 7)),
            Reply::text("counted").with_full_usage(usage(300, 100, 40, 9)),
        ],
    );
    bed.model.route(
        "USAGE-TWO",
        [Reply::text("again").with_full_usage(usage(1000, 0, 1, 0))],
    );
    let session = bed.client.session(bed.options()).await.unwrap();
    let run = session
        .run("USAGE-ONE count")
        .await
        .expect("the turn completes");
    assert_eq!(run.text, "counted");
    let turn = &run.usage.turn;
    assert_eq!(
        (
            turn.input_tokens,
            turn.cached_input_tokens,
            turn.output_tokens,
            turn.reasoning_output_tokens,
            turn.total_tokens
        ),
        (600, 160, 90, 21, 690),
        "{turn:?}"
    );
    let end = run
        .events
        .iter()
        .find_map(|e| match &e.ev {
            Ev::TurnEnd { usage, .. } => usage.clone(),
            _ => None,
        })
        .expect("the turn-end carries the turn's usage");
    assert_eq!(&end, turn);
    let snap = session.snapshot();
    assert_eq!(&snap.turn_usage, turn);
    assert_eq!(&snap.spent.usage, turn);
    let again = session.run("USAGE-TWO count").await.expect("second turn");
    assert_eq!(again.usage.turn.total_tokens, 1001);
    let limits = session.limits().await.unwrap();
    assert_eq!(limits.spent.usage.total_tokens, 690 + 1001);
    assert_eq!(limits.spent.usage.input_tokens, 1600);
    assert_eq!(limits.spent.turns, 2);
    bed.client.shutdown().await;
}
