//! Command approvals, dynamic tools and output schemas against the real Codex binaries.

use crate::common::{Bed, TURN_TIMEOUT, TurnLog, run_turn};
use codex_relay_protocol::v2::{
    ApprovalDecision, ApprovalPolicy, DynamicToolSpec, ItemStatus, SandboxMode, ServerRequest,
    ThreadItem, ToolCallResponse, TurnStartParams, TurnStatus, UserInput,
};
use codex_relay_testkit::{Item, Reply, for_each_codex};
use serde_json::{Value, json};

for_each_codex!(
    approval_accept_runs_the_command,
    approval_decline_skips_the_command_and_the_turn_goes_on,
    approval_cancel_interrupts_the_turn,
    dynamic_tool_answered_in_process_reaches_the_model,
    output_schema_reaches_the_model_and_the_answer_parses,
);

/// Runs one turn in which the model wants `touch approved.txt` under the `untrusted` policy and
/// the approval is answered with `decision`. Returns the log and the commands asked about.
async fn approval_turn(
    bed: &Bed,
    decision: ApprovalDecision,
    replies: Vec<Reply>,
) -> (TurnLog, Vec<String>) {
    bed.model.push(replies);
    let (thread, mut sub) = bed
        .thread(bed.thread_params(ApprovalPolicy::Untrusted, SandboxMode::WorkspaceWrite))
        .await;
    bed.turn(&thread, "create approved.txt").await;
    let mut asked = Vec::new();
    let log = run_turn(&mut sub, TURN_TIMEOUT, |req| {
        match req.request() {
            ServerRequest::CommandApproval(p) => {
                assert_eq!(p.thread_id, thread);
                asked.push(p.command.clone().unwrap_or_default());
            }
            other => panic!("unexpected request {other:?}"),
        }
        assert!(req.responder.respond(Ok(decision.to_response())));
    })
    .await;
    (log, asked)
}

fn command_item(log: &TurnLog) -> codex_relay_protocol::v2::CommandExecutionItem {
    log.completed_items()
        .into_iter()
        .find_map(|i| match i {
            ThreadItem::CommandExecution(c) => Some(c.clone()),
            _ => None,
        })
        .expect("a completed commandExecution item")
}

async fn approval_accept_runs_the_command(version: &'static str) {
    let bed = Bed::start(version).await;
    let (log, asked) = approval_turn(
        &bed,
        ApprovalDecision::Accept,
        vec![
            Reply::exec("touch approved.txt", "call_a"),
            Reply::text("done"),
        ],
    )
    .await;
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(asked[0].contains("touch approved.txt"), "{asked:?}");
    assert_eq!(log.completed.status, TurnStatus::Completed);
    assert!(bed.home.workspace().join("approved.txt").exists());
    assert_eq!(command_item(&log).status, ItemStatus::Completed);
}

async fn approval_decline_skips_the_command_and_the_turn_goes_on(version: &'static str) {
    let bed = Bed::start(version).await;
    let (log, asked) = approval_turn(
        &bed,
        ApprovalDecision::Decline,
        vec![
            Reply::exec("touch approved.txt", "call_d"),
            Reply::text("ok, I will not"),
        ],
    )
    .await;
    assert_eq!(asked.len(), 1);
    assert_eq!(log.completed.status, TurnStatus::Completed);
    assert!(!bed.home.workspace().join("approved.txt").exists());
    assert_eq!(command_item(&log).status, ItemStatus::Declined);
    // The model was told and got to answer.
    let reqs = bed.model.requests();
    assert_eq!(reqs.len(), 2);
    assert!(reqs[1].tool_output("call_d").is_some());
}

async fn approval_cancel_interrupts_the_turn(version: &'static str) {
    let bed = Bed::start(version).await;
    let (log, asked) = approval_turn(
        &bed,
        ApprovalDecision::Cancel,
        vec![Reply::exec("touch approved.txt", "call_c")],
    )
    .await;
    assert_eq!(asked.len(), 1);
    assert_eq!(log.completed.status, TurnStatus::Interrupted);
    assert!(!bed.home.workspace().join("approved.txt").exists());
    assert_eq!(
        bed.model.requests().len(),
        1,
        "no model call after a cancel"
    );
}

async fn dynamic_tool_answered_in_process_reaches_the_model(version: &'static str) {
    let bed = Bed::start(version).await;
    bed.model.push([
        Reply::items(vec![Item::function_call(
            "lookup_weather",
            json!({"city": "Oslo"}),
            "call_w",
        )]),
        Reply::text("It is sunny in Oslo."),
    ]);
    let schema =
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
    let mut params = bed.thread_params(ApprovalPolicy::Never, SandboxMode::ReadOnly);
    params.dynamic_tools = Some(vec![DynamicToolSpec::function(
        "lookup_weather",
        "Current weather for a city",
        schema,
    )]);
    let (thread, mut sub) = bed.thread(params).await;
    bed.turn(&thread, "weather in Oslo?").await;
    let mut calls = Vec::new();
    let log = run_turn(&mut sub, TURN_TIMEOUT, |req| match req.request() {
        ServerRequest::ToolCall(call) => {
            calls.push((call.tool.clone(), call.arguments.clone()));
            let city = call.arguments["city"].as_str().unwrap_or("?").to_owned();
            let answer = ToolCallResponse::text(true, format!("sunny, 21 C in {city}"));
            assert!(
                req.responder
                    .respond(Ok(serde_json::to_value(answer).unwrap()))
            );
        }
        other => panic!("unexpected request {other:?}"),
    })
    .await;
    assert_eq!(log.completed.status, TurnStatus::Completed);
    assert_eq!(
        calls,
        vec![("lookup_weather".to_owned(), json!({"city": "Oslo"}))]
    );
    let reqs = bed.model.requests();
    assert!(
        reqs[0].tool_names().iter().any(|n| n == "lookup_weather"),
        "{:?}",
        reqs[0].tool_names()
    );
    let output = reqs[1]
        .tool_output("call_w")
        .expect("the tool's output was sent to the model");
    assert!(output.contains("sunny, 21 C in Oslo"), "{output}");
}

async fn output_schema_reaches_the_model_and_the_answer_parses(version: &'static str) {
    let bed = Bed::start(version).await;
    bed.model
        .push([Reply::text(r#"{"answer":"42","confidence":0.9}"#)]);
    let (thread, mut sub) = bed
        .thread(bed.thread_params(ApprovalPolicy::Never, SandboxMode::ReadOnly))
        .await;
    let schema = json!({
        "type": "object",
        "properties": {"answer": {"type": "string"}, "confidence": {"type": "number"}},
        "required": ["answer", "confidence"],
        "additionalProperties": false
    });
    bed.turn_with(TurnStartParams {
        thread_id: thread.clone(),
        input: vec![UserInput::text("what is the answer?")],
        output_schema: Some(schema.clone()),
        ..Default::default()
    })
    .await;
    let log = run_turn(&mut sub, TURN_TIMEOUT, |r| {
        panic!("unexpected request {:?}", r.request())
    })
    .await;
    assert_eq!(log.completed.status, TurnStatus::Completed);
    let format = bed.model.requests()[0]
        .text_format()
        .cloned()
        .expect("text.format sent");
    assert_eq!(format["type"], "json_schema");
    assert_eq!(format["schema"], schema);
    let text = log.final_text().expect("final message");
    let parsed: Value = serde_json::from_str(&text).expect("final message is JSON");
    assert_eq!(parsed["answer"], "42");
}
