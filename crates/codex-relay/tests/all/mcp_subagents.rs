//! Sub-agents over MCP, with the official Rust SDK (rmcp) as the client of `codex-relay mcp` on
//! the real Codex 0.169: the parent's model spawns a child, the child's command needs approval,
//! and the client answers it as the session's own request — by an elicitation form, or through
//! `pendingQuestion` and `codex_respond` — then the command runs and the session finishes.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::{Bed, RELAY};
use codex_relay_testkit::{Item, NEWEST, Reply};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult,
    ElicitationAction, ElicitationCapability, FormElicitationCapability, Implementation,
    ProtocolVersion,
};
use rmcp::service::{RequestContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, ErrorData as McpError, RoleClient, ServiceExt};
use serde_json::{Value, json};

/// A client that declares form elicitation (when `elicits`) and approves every form.
#[derive(Clone, Default)]
struct Client {
    elicits: bool,
    asked: Arc<Mutex<Vec<String>>>,
}

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        if self.elicits {
            let mut elicitation = ElicitationCapability::default();
            elicitation.form = Some(FormElicitationCapability::default());
            capabilities.elicitation = Some(elicitation);
        }
        ClientConfig::new(
            capabilities,
            Implementation::new("sub-agent-client", "1.0.0"),
        )
        .with_protocol_version(ProtocolVersion::V_2025_06_18)
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        if let ElicitRequestParams::FormElicitationParams { message, .. } = request {
            self.asked.lock().unwrap().push(message);
        }
        Ok(ElicitResult::new(ElicitationAction::Accept)
            .with_content(json!({"decision": "approve"})))
    }
}

async fn call(client: &RunningService<RoleClient, Client>, tool: &str, args: Value) -> Value {
    let params = CallToolRequestParams::new(tool.to_owned())
        .with_arguments(args.as_object().cloned().unwrap());
    let result = client.call_tool(params).await.expect("tools/call");
    assert_ne!(result.is_error, Some(true), "{tool}: {:?}", result.content);
    result.structured_content.expect("structured content")
}

/// Starts `codex-relay mcp` with `client`; the parent's model (marker `parent`) spawns a child
/// (marker `child`) that asks to `touch file`. Returns the client and the session id.
async fn start(
    bed: &Bed,
    client: Client,
    parent: &str,
    child: &str,
    file: &str,
) -> (RunningService<RoleClient, Client>, String) {
    bed.model.route(
        parent,
        [
            Reply::items(vec![Item::spawn_agent(
                &format!("{child}: make {file}"),
                "call_spawn",
            )]),
            Reply::text("parent done"),
        ],
    );
    bed.model.route_sub_agent(
        child,
        [
            Reply::exec(&format!("touch {file}"), "call_touch"),
            Reply::text("child done"),
        ],
    );
    let mut cmd = tokio::process::Command::new(RELAY);
    cmd.arg("mcp").args(bed.args(120_000)).kill_on_drop(true);
    let service = client
        .serve(TokioChildProcess::new(cmd).expect("spawn codex-relay mcp"))
        .await
        .expect("MCP initialize");
    let started = call(
        &service,
        "codex_start",
        json!({"prompt": format!("{parent}: delegate"), "workingDirectory": bed.home.workspace(),
               "approvalPolicy": "untrusted", "sandbox": "workspace-write"}),
    )
    .await;
    (service, started["sessionId"].as_str().unwrap().to_owned())
}

/// Long-polls until the session is done and its sub-agent too (or, with `or_question`, until
/// a question is pending); returns that status, with every event since the start.
async fn until_done(
    service: &RunningService<RoleClient, Client>,
    id: &str,
    or_question: bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let s = call(
            service,
            "codex_status",
            json!({"sessionId": id, "waitMs": 5000, "until": "attention", "cursor": 0}),
        )
        .await;
        let agents_idle = s["subAgents"]
            .as_array()
            .is_some_and(|a| !a.is_empty() && a.iter().all(|a| a["running"] == false));
        // A child adopted from the spawn call is not `running` until its first turn starts,
        // so "idle" alone can come before the child did anything: wait for its turn's end.
        let child_ended = s["events"].as_array().is_some_and(|events| {
            events
                .iter()
                .any(|e| e["agent"]["thread"].is_string() && e["ev"]["t"] == "turn-end")
        });
        if s["status"] == "done" && agents_idle && child_ended {
            return s;
        }
        assert!(Instant::now() < deadline, "no end: {s}");
        if or_question && s["pendingQuestion"].is_object() {
            return s;
        }
    }
}

fn assert_child_events(status: &Value) {
    let events = status["events"].as_array().unwrap();
    let child: Vec<&Value> = events
        .iter()
        .filter(|e| e["invoke"] == "call_spawn")
        .collect();
    let kinds: Vec<&str> = child.iter().filter_map(|e| e["ev"]["t"].as_str()).collect();
    for want in [
        "turn-start",
        "tool-call-start",
        "request-opened",
        "tool-call-end",
        "turn-end",
    ] {
        assert!(
            kinds.contains(&want),
            "the child's events lack {want}: {kinds:?}"
        );
    }
    assert!(child.iter().all(|e| e["agent"]["thread"].is_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_childs_approval_arrives_as_an_elicitation_and_approving_runs_it() {
    let bed = Bed::start(NEWEST).await;
    let client = Client {
        elicits: true,
        ..Default::default()
    };
    let (service, id) = start(&bed, client.clone(), "PARENT-E", "CHILD-E", "elicited.txt").await;
    let done = until_done(&service, &id, false).await;
    assert_eq!(done["status"], "done", "{done}");
    let asked = client.asked.lock().unwrap().clone();
    assert!(
        bed.home.workspace().join("elicited.txt").exists(),
        "the approved command did not run; forms asked: {asked:?}; status: {done}"
    );
    assert!(
        asked
            .iter()
            .any(|m| m.contains("Sub-agent") && m.contains("touch elicited.txt")),
        "the form does not say which agent asks: {asked:?}"
    );
    assert_child_events(&done);
    service.cancel().await.expect("close the client");
    bed.assert_no_codex_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_childs_approval_is_the_pending_question_and_codex_respond_runs_it() {
    let bed = Bed::start(NEWEST).await;
    let (service, id) = start(&bed, Client::default(), "PARENT-P", "CHILD-P", "polled.txt").await;
    let asking = until_done(&service, &id, true).await;
    assert_eq!(asking["status"], "awaiting_approval", "{asking}");
    let q = &asking["pendingQuestion"];
    assert_eq!(q["invoke"], "call_spawn", "{q}");
    assert!(q["agent"]["thread"].is_string(), "{q}");
    let answered = call(
        &service,
        "codex_respond",
        json!({"sessionId": id, "id": q["id"], "answers": ["approve"]}),
    )
    .await;
    assert!(answered.to_string().contains("approve"), "{answered}");
    let done = until_done(&service, &id, false).await;
    assert_eq!(done["status"], "done", "{done}");
    assert!(bed.home.workspace().join("polled.txt").exists());
    assert_child_events(&done);
    service.cancel().await.expect("close the client");
    bed.assert_no_codex_left().await;
}
