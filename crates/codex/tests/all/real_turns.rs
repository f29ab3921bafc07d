//! Turns against the real Codex binaries (0.169.0 and 0.98.0) and the scripted model.

use crate::common::{Bed, TURN_TIMEOUT, run_turn};
use codex_relay_protocol::v2::{
    ApprovalPolicy, ItemStatus, SandboxMode, ServerNotification, ThreadItem, TurnStatus,
};
use codex_relay_testkit::{Reply, for_each_codex};

for_each_codex!(
    handshake_reports_the_pinned_version,
    exec_command_writes_a_file
);

async fn handshake_reports_the_pinned_version(version: &'static str) {
    let bed = Bed::start(version).await;
    assert_eq!(bed.server.version().to_string(), version);
    assert!(
        bed.server
            .initialize_response()
            .user_agent
            .starts_with("codex-relay/")
    );
    assert_eq!(
        bed.server.version().compatibility(),
        codex_relay_codex::Compatibility::Tested
    );
}

async fn exec_command_writes_a_file(version: &'static str) {
    let bed = Bed::start(version).await;
    bed.model.push([
        Reply::exec("echo hello > out.txt", "call_1"),
        Reply::text("wrote it"),
    ]);
    let (thread, mut sub) = bed
        .thread(bed.thread_params(ApprovalPolicy::Never, SandboxMode::WorkspaceWrite))
        .await;
    let started = bed.turn(&thread, "write hello into out.txt").await;
    assert_eq!(started.status, TurnStatus::InProgress);

    let log = run_turn(&mut sub, TURN_TIMEOUT, |r| {
        panic!("unexpected server request {:?}", r.request())
    })
    .await;
    assert_eq!(
        log.completed.status,
        TurnStatus::Completed,
        "{:?}",
        log.completed.error
    );
    assert_eq!(log.completed.id, started.id);
    let written =
        std::fs::read_to_string(bed.home.workspace().join("out.txt")).expect("out.txt exists");
    assert_eq!(written.trim(), "hello");

    let methods = log.methods();
    assert!(methods.contains(&"turn/started"), "{methods:?}");
    assert!(
        methods.contains(&"thread/tokenUsage/updated"),
        "{methods:?}"
    );
    let command = log.completed_items().into_iter().find_map(|i| match i {
        ThreadItem::CommandExecution(c) => Some(c.clone()),
        _ => None,
    });
    let command = command.expect("a completed commandExecution item");
    assert_eq!(command.status, ItemStatus::Completed);
    assert_eq!(command.exit_code, Some(0));
    assert!(
        command.command.contains("echo hello"),
        "{}",
        command.command
    );
    let usage = log.notifications.iter().rev().find_map(|n| match n {
        ServerNotification::TokenUsageUpdated(u) => Some(u.token_usage.total.clone()),
        _ => None,
    });
    assert!(usage.expect("usage").total_tokens >= 150);
    assert_eq!(log.final_text().as_deref(), Some("wrote it"));
    // The command's output went back to the model.
    let reqs = bed.model.requests();
    assert_eq!(reqs.len(), 2);
    assert!(
        reqs[0].tool_names().iter().any(|n| n == "exec_command"),
        "{:?}",
        reqs[0].tool_names()
    );
    assert!(reqs[1].tool_output("call_1").is_some());
}
