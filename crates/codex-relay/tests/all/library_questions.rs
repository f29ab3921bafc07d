//! Questions through the library on the real Codex (0.169 and 0.98) and the scripted model: in plan mode the model asks with `request_user_input`; a `Questions::callback` sees the question and its options and its answer reaches the model; the `Decline` policy and a callback that panics decline at once (long before the approval timeout) and the turn completes; with nobody answering, the approval timeout declines the question and the turn completes.

use crate::library_support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use codex_relay::event::Ev;
use codex_relay::{
    Answer, Approval, ApprovalDecision, ApprovalKind, ApprovalRequest, Client, Question,
    QuestionKind, Questions, SessionOptions,
};
use codex_relay_testkit::{CodexHome, Item, ModelServer, Reply, for_each_codex};
use serde_json::json;

for_each_codex!(
    a_question_callback_sees_the_options_and_its_answer_reaches_the_model,
    a_declined_or_panicking_answer_fails_closed_at_once,
    an_unanswered_question_is_declined_at_the_approval_timeout,
    an_mcp_elicitation_is_answered_by_the_callback,
);

struct Bed {
    model: ModelServer,
    home: CodexHome,
    client: Client,
}

async fn bed(version: &str, approval_timeout: Duration) -> Bed {
    let model = ModelServer::start().await;
    let home = CodexHome::new(model.url());
    let client = library_support::builder(version, &home)
        .approval_timeout(approval_timeout)
        .build()
        .await
        .unwrap();
    Bed {
        model,
        home,
        client,
    }
}

/// The model asks where to deploy, then answers whatever it was told.
fn script(model: &ModelServer) {
    let args = json!({"questions": [{"id": "env", "header": "Env", "question": "Which environment?",
        "options": [{"label": "staging", "description": "safe"}, {"label": "prod", "description": "live"}]}]});
    model.push([
        Reply::items(vec![Item::function_call(
            "request_user_input",
            args,
            "call_q",
        )]),
        Reply::text("deploying"),
    ]);
}

impl Bed {
    fn options(&self, questions: Questions) -> SessionOptions {
        SessionOptions::new()
            .cwd(self.home.workspace().display().to_string())
            .questions(questions)
    }

    /// Runs the question turn; the final text and how the question was resolved (decision, by).
    async fn ask(&self, questions: Questions) -> (String, (String, String), Duration) {
        script(&self.model);
        let session = self.client.session(self.options(questions)).await.unwrap();
        let started = Instant::now();
        let run = session
            .prompt("ask me where to deploy")
            .plan_mode()
            .run()
            .await
            .expect("the turn completes");
        let took = started.elapsed();
        let events = self
            .client
            .relay()
            .events(session.id(), 0, 10_000)
            .await
            .unwrap();
        let resolved = events
            .iter()
            .find_map(|e| match &e.ev {
                Ev::RequestResolved { decision, by, .. } => {
                    Some((decision.as_str().to_owned(), by.as_str().to_owned()))
                }
                _ => None,
            })
            .expect("the question was resolved");
        (run.text, resolved, took)
    }
}

async fn a_question_callback_sees_the_options_and_its_answer_reaches_the_model(
    version: &'static str,
) {
    let bed = bed(version, Duration::from_secs(120)).await;
    let seen: Arc<Mutex<Vec<Question>>> = Arc::default();
    let record = seen.clone();
    let questions = Questions::callback(move |q: Question| {
        record.lock().unwrap().push(q);
        async { Answer::one("Prod") }
    });
    let (text, resolved, _) = bed.ask(questions).await;
    assert_eq!(text, "deploying");
    assert_eq!(resolved, ("answer".to_owned(), "library".to_owned()));
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].kind, QuestionKind::Question);
    assert_eq!(seen[0].questions[0].question, "Which environment?");
    assert_eq!(seen[0].questions[0].options, ["staging", "prod"]);
    let output = bed.model.requests()[1]
        .tool_output("call_q")
        .expect("the answer reached the model");
    assert!(
        output.contains(r#"["prod"]"#),
        "the option's label: {output}"
    );
    bed.client.shutdown().await;
}

async fn a_declined_or_panicking_answer_fails_closed_at_once(version: &'static str) {
    let bed = bed(version, Duration::from_secs(120)).await;
    let (text, resolved, took) = bed.ask(Questions::Decline).await;
    assert_eq!(text, "deploying");
    assert_eq!(resolved, ("deny".to_owned(), "library".to_owned()));
    assert!(took < Duration::from_secs(60), "{took:?}");
    let output = bed.model.requests()[1]
        .tool_output("call_q")
        .unwrap_or_default();
    assert!(
        !output.contains("staging") && !output.contains(r#"["prod"]"#),
        "{output}"
    );

    let panicking = Questions::callback(|_q: Question| async {
        panic!("the callback has a bug");
        #[allow(unreachable_code)]
        Answer::Decline
    });
    let (text, resolved, took) = bed.ask(panicking).await;
    assert_eq!(text, "deploying");
    assert_eq!(resolved, ("deny".to_owned(), "library".to_owned()));
    assert!(
        took < Duration::from_secs(60),
        "declined at once, not at the timeout: {took:?}"
    );
    bed.client.shutdown().await;
}

async fn an_unanswered_question_is_declined_at_the_approval_timeout(version: &'static str) {
    let bed = bed(version, Duration::from_secs(2)).await;
    let (text, resolved, took) = bed.ask(Questions::Unanswered).await;
    assert_eq!(text, "deploying");
    assert_eq!(resolved.1, "timeout", "{resolved:?}");
    assert!(took >= Duration::from_secs(2), "{took:?}");
    bed.client.shutdown().await;
}

/// Codex uses a small MCP server (tests/fakes/eliciting-mcp-server) whose `deploy` tool asks
/// for a form with `elicitation/create`; Codex 0.169 passes it on as
/// `mcpServer/elicitation/request`. Codex first asks to call the MCP tool at all, also as an
/// elicitation (`_meta.codex_approval_kind`): that one goes to the approval policy.
async fn an_mcp_elicitation_is_answered_by_the_callback(version: &'static str) {
    if version == "0.98.0" {
        eprintln!(
            "skipped on Codex 0.98: it does not pass MCP elicitations on (its schema has no mcpServer/elicitation/request; the server's elicitation/create goes unanswered until Codex's 60 s tool timeout)"
        );
        return;
    }
    let server =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fakes/eliciting-mcp-server");
    let model = ModelServer::start().await;
    let home = CodexHome::with_options(
        model.url(),
        &codex_relay_testkit::HomeOptions {
            extra_toml: format!(
                "[mcp_servers.deployer]\ncommand = \"python3\"\nargs = [{:?}]\n",
                server.display().to_string()
            ),
            ..Default::default()
        },
    );
    let client = library_support::builder(version, &home)
        .approval_timeout(Duration::from_secs(120))
        .build()
        .await
        .unwrap();
    let seen: Arc<Mutex<Vec<Question>>> = Arc::default();
    let record = seen.clone();
    let questions = Questions::callback(move |q: Question| {
        record.lock().unwrap().push(q);
        async { Answer::Accept(json!({"env": "staging"})) }
    });
    let approvals: Arc<Mutex<Vec<ApprovalRequest>>> = Arc::default();
    let asked = approvals.clone();
    let approval = Approval::callback(move |req: ApprovalRequest| {
        asked.lock().unwrap().push(req);
        async { ApprovalDecision::Approve }
    });
    let session = client
        .session(
            SessionOptions::new()
                .cwd(home.workspace().display().to_string())
                .approval(approval)
                .questions(questions),
        )
        .await
        .unwrap();
    // Codex starts MCP servers in the background: turns before the server is up do not offer
    // its tools.
    let mut ready = false;
    for _ in 0..40 {
        model.push([Reply::text("warming up")]);
        session.run("are you ready?").await.unwrap();
        let last = model.requests().last().cloned().unwrap();
        if last.tool_names().iter().any(|t| t == "mcp__deployer") {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(ready, "Codex offers the MCP server's tools");
    let before = model.requests().len();
    model.push([
        Reply::items(vec![Item::NamespacedCall {
            namespace: "mcp__deployer".into(),
            name: "deploy".into(),
            arguments: "{}".into(),
            call_id: "call_e".into(),
        }]),
        Reply::text("deployed"),
    ]);
    let run = session.run("deploy it").await.expect("the turn completes");
    assert_eq!(run.text, "deployed");
    let approvals = approvals.lock().unwrap().clone();
    assert_eq!(approvals.len(), 1, "{approvals:?}");
    assert_eq!(approvals[0].kind, ApprovalKind::McpToolCall);
    assert!(
        approvals[0]
            .reason
            .as_deref()
            .unwrap_or("")
            .contains("deploy"),
        "{approvals:?}"
    );
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "only the server's own form: {seen:?}");
    assert_eq!(seen[0].kind, QuestionKind::Elicitation);
    assert_eq!(seen[0].server.as_deref(), Some("deployer"));
    assert_eq!(
        seen[0].message.as_deref(),
        Some("Deploy to which environment?")
    );
    assert_eq!(
        seen[0].requested_schema.as_ref().unwrap()["properties"]["env"]["enum"],
        json!(["staging", "prod"])
    );
    let output = model.requests()[before + 1]
        .tool_output("call_e")
        .expect("the tool's result reached the model");
    assert!(
        output.contains(r#"\"action\": \"accept\""#)
            && output.contains(r#"\"content\": {\"env\": \"staging\"}"#),
        "the form content reached the MCP server: {output}"
    );
    client.shutdown().await;
}
