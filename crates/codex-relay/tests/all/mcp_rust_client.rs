//! Elicitation on protocol 2025-06-18, with the official Rust SDK (rmcp) as the client over
//! stdio: Codex asks to run `touch approved-0618.txt`, the client approves the form, the command
//! runs and the turn completes.

use std::sync::{Arc, Mutex};

use crate::common::{Bed, RELAY, rmcp_call, rmcp_until_done};
use codex_relay_testkit::{NEWEST, Reply};
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationCapability, FormElicitationCapability, Implementation, ProtocolVersion,
};
use rmcp::service::RequestContext;
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, ErrorData as McpError, RoleClient, ServiceExt};
use serde_json::{Value, json};

/// A client that declares form elicitation on 2025-06-18 and approves every form.
#[derive(Clone, Default)]
struct Approver {
    asked: Arc<Mutex<Vec<String>>>,
}

impl ClientHandler for Approver {
    fn get_info(&self) -> ClientConfig {
        let mut elicitation = ElicitationCapability::default();
        elicitation.form = Some(FormElicitationCapability::default());
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(elicitation);
        ClientConfig::new(
            capabilities,
            Implementation::new("codex-relay-rust-client", "1.0.0"),
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elicitation_on_2025_06_18_approves_a_command() {
    let bed = Bed::start(NEWEST).await;
    let ws = bed.home.workspace().to_path_buf();
    bed.model.route(
        "MARK-0618",
        [
            Reply::exec("touch approved-0618.txt", "call-0618"),
            Reply::text("touched"),
        ],
    );
    let mut cmd = tokio::process::Command::new(RELAY);
    cmd.arg("mcp").args(bed.args(60_000)).kill_on_drop(true);
    let approver = Approver::default();
    let client = approver
        .clone()
        .serve(TokioChildProcess::new(cmd).expect("spawn codex-relay mcp"))
        .await
        .expect("MCP initialize");
    assert_eq!(
        client.peer_info().expect("server info").protocol_version,
        ProtocolVersion::V_2025_06_18
    );
    let started = rmcp_call(
        &client,
        "codex_start",
        json!({"prompt": "MARK-0618: touch a file", "workingDirectory": ws,
               "approvalPolicy": "untrusted", "sandbox": "workspace-write"}),
    )
    .await;
    let id = started["sessionId"].as_str().unwrap().to_owned();
    let done = rmcp_until_done(&client, &id).await;
    assert_eq!(done["result"], "touched", "{done}");
    assert!(
        ws.join("approved-0618.txt").exists(),
        "the approved command ran"
    );
    let asked = approver.asked.lock().unwrap().clone();
    assert!(
        asked.iter().any(|m| m.contains("touch approved-0618.txt")),
        "{asked:?}"
    );
    let resolved: Vec<&Value> = done["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ev"]["t"] == "request-resolved")
        .collect();
    assert_eq!(resolved.len(), 1, "{resolved:?}");
    assert_eq!(resolved[0]["ev"]["by"], "mcp-elicitation");
    client.cancel().await.expect("close the client");
    bed.assert_no_codex_left().await;
}
