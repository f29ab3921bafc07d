//! The `plan` event kind (docs/EVENTS.md: `turn/plan/updated` → `{t: "plan", steps}`) on the
//! real Codex 0.98, whose model is offered the `update_plan` tool (0.169 does not offer it
//! to this model; the other kinds are proven over MCP in codex-relay's tests/all/mcp_contract.rs).

use std::time::Duration;

use crate::common::{Backend, Env};
use codex_relay_core::{CreateOptions, Ev, PermissionMode, SessionStatus};
use codex_relay_testkit::{OLDEST, Reply};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_update_is_a_plan_event_with_its_steps() {
    let env = Env::start(OLDEST, Backend::Sqlite, Duration::from_secs(300))
        .await
        .unwrap();
    let plan = json!({"plan": [
        {"step": "look around", "status": "completed"},
        {"step": "answer", "status": "in_progress"}
    ]});
    env.model.push([
        Reply::items(vec![codex_relay_testkit::Item::function_call(
            "update_plan",
            plan,
            "call-plan",
        )]),
        Reply::text("planned"),
    ]);
    let (h, _) = env
        .relay
        .create(CreateOptions {
            prompt: Some("make a plan".into()),
            cwd: Some(env.cwd()),
            mode: Some(PermissionMode::ReadOnly),
            ..Default::default()
        })
        .await
        .unwrap();
    let id = h.id().to_owned();
    env.until(&id, "the turn", |s| s.status == SessionStatus::Idle)
        .await;
    let steps: Vec<_> = env
        .all_events(&id)
        .await
        .iter()
        .filter_map(|e| match &e.ev {
            Ev::Plan { steps } => Some(steps.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(steps.len(), 1, "one plan event: {steps:?}");
    assert_eq!(steps[0][0]["step"], "look around");
    assert_eq!(steps[0][1]["step"], "answer");
    assert_eq!(steps[0][1]["status"], "inProgress");
}
