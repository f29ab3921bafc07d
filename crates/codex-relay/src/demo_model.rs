//! The model behind `serve --demo`: a tiny Responses-API server on loopback that answers Codex
//! from the conversation it is sent (no state of its own), so any number of demo sessions walk
//! through the same short task: think, plan, write a file (a diff), run it (an approval), report.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// The file the demo writes, and what running it prints.
const FILE: &str = "hello.py";
const GREETING: &str = "Hello from the codex-relay demo!";
/// The first option of the demo's question.
const KEEP: &str = "Keep it";
/// A pause before each answer and between streamed words, so a person can watch it happen.
const THINK: Duration = Duration::from_millis(700);
const WORD: Duration = Duration::from_millis(25);

/// Serves the demo model on `127.0.0.1:0` until `stop` resolves; returns its `/v1` URL.
pub async fn start(
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<String> {
    let app = axum::Router::new()
        .route("/v1/responses", post(responses))
        .route(
            "/v1/models",
            get(|| async { axum::Json(json!({"data": [], "models": []})) }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(stop)
            .await;
    });
    Ok(format!("http://{addr}/v1"))
}

/// One output item the demo model produces.
#[derive(Debug, Clone, PartialEq)]
enum Out {
    Reasoning(String),
    Text(String),
    Call { name: String, args: Value },
}

/// What the conversation so far looks like to the demo model.
#[derive(Debug, Default)]
struct Conversation {
    /// The person's messages (Codex's own context blocks left out).
    said: Vec<String>,
    /// Tool outputs since the person's last message, in order.
    outputs: Vec<String>,
    /// Tools Codex offered.
    tools: Vec<String>,
    /// Codex offers `request_user_input` but says it works in plan mode only, and this turn is
    /// not in it (Codex would answer a question itself: "unavailable in Default mode").
    questions_refused: bool,
}

impl Conversation {
    fn read(body: &Value) -> Self {
        let mut c = Conversation::default();
        for item in body["input"].as_array().into_iter().flatten() {
            match item["type"].as_str().unwrap_or("message") {
                "message" if item["role"] == "user" => {
                    let text: String = item["content"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|p| p["text"].as_str())
                        .collect();
                    // Codex sends its environment and instructions as user messages in tags,
                    // and (0.98) a warning after a patch given to exec_command.
                    let from_codex = text.trim_start().starts_with('<')
                        || text.starts_with("# AGENTS.md")
                        || text.starts_with("Warning: apply_patch was requested");
                    if !from_codex {
                        c.said.push(text);
                        c.outputs.clear();
                    }
                }
                "function_call_output" | "custom_tool_call_output" => {
                    c.outputs.push(match &item["output"] {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    });
                }
                _ => {}
            }
        }
        c.tools = body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect();
        let plan_only = body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|t| t["name"] == "request_user_input")
            .filter_map(|t| t["description"].as_str())
            .any(|d| d.contains("only available in Plan mode"));
        let in_plan_mode = body["input"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|item| item["role"] == "developer")
            .flat_map(|item| item["content"].as_array().into_iter().flatten())
            .filter_map(|p| p["text"].as_str())
            .any(|t| t.contains("Collaboration Mode: Plan"));
        c.questions_refused = plan_only && !in_plan_mode;
        c
    }

    /// Whether a question would reach a person.
    fn can_ask(&self) -> bool {
        self.offers("request_user_input") && !self.questions_refused
    }

    fn offers(&self, tool: &str) -> bool {
        self.tools.iter().any(|t| t == tool)
    }
}

fn plan(steps: [&str; 3], done: usize) -> Value {
    let plan: Vec<Value> = steps
        .iter()
        .enumerate()
        .map(|(i, step)| {
            let status = match i.cmp(&done) {
                std::cmp::Ordering::Less => "completed",
                std::cmp::Ordering::Equal => "in_progress",
                std::cmp::Ordering::Greater => "pending",
            };
            json!({"step": step, "status": status})
        })
        .collect();
    json!({ "plan": plan })
}

const STEPS: [&str; 3] = [
    "Write a small Python script",
    "Run it",
    "Report what it printed",
];

fn exec(cmd: &str) -> Out {
    Out::Call {
        name: "exec_command".into(),
        args: json!({ "cmd": cmd }),
    }
}

/// The demo model's next answer to this conversation.
fn next(c: &Conversation) -> Vec<Out> {
    let Some(last) = c.said.last() else {
        return vec![Out::Text("Hello! Tell me what to do.".into())];
    };
    let quoted: String = last.chars().take(200).collect();
    // How codex-relay hands the model a person's reason for a denial.
    if let Some(reason) = last
        .strip_prefix("I denied this request")
        .and_then(|rest| rest.split("Reason:").nth(1))
    {
        return vec![Out::Text(format!(
            "Understood, I will leave it. Your reason reached me: \"{}\"",
            reason.trim()
        ))];
    }
    if c.said.len() > 1 {
        // A follow-up (or a message steered into the running turn): look, then answer.
        return match c.outputs.len() {
            0 => vec![
                Out::Reasoning(format!(
                    "The user added: \"{quoted}\". A look at the workspace first."
                )),
                exec("ls -la"),
            ],
            _ => vec![Out::Text(format!(
                "You said: \"{quoted}\". The workspace now holds:\n\n{}\n\n(This is the codex-relay demo model: it follows a script and does not really understand you.)",
                c.outputs[0].trim()
            ))],
        };
    }
    let patch = format!(
        "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: {FILE}\n+\"\"\"Written by the codex-relay demo.\"\"\"\n+\n+def main():\n+    print(\"{GREETING}\")\n+\n+\n+if __name__ == \"__main__\":\n+    main()\n*** End Patch\nEOF\n"
    );
    let planned = c.offers("update_plan");
    let mut script = Vec::new();
    if planned {
        script.push(Step::Plan(0));
    }
    script.extend([Step::Patch, Step::Run]);
    if c.can_ask() {
        script.push(Step::Ask);
    }
    if planned {
        script.push(Step::Plan(STEPS.len()));
    }
    let output_of = |step: Step| {
        let at = script.iter().position(|s| *s == step)?;
        c.outputs.get(at).cloned()
    };
    match script.get(c.outputs.len()) {
        Some(Step::Plan(0)) => vec![
            Out::Reasoning(format!(
                "The user asked: \"{quoted}\". This demo shows the whole loop: a plan, a file \
                 written as a patch, a command that needs approval, and a report."
            )),
            Out::Call {
                name: "update_plan".into(),
                args: plan(STEPS, 0),
            },
        ],
        Some(Step::Plan(done)) => vec![Out::Call {
            name: "update_plan".into(),
            args: plan(STEPS, *done),
        }],
        Some(Step::Patch) => {
            let mut outs = Vec::new();
            if !planned {
                outs.push(Out::Reasoning(format!(
                    "The user asked: \"{quoted}\". This demo shows the whole loop: a file \
                     written as a patch, a command that needs approval, and a report."
                )));
            }
            outs.push(Out::Text(format!("First, a small script: `{FILE}`.")));
            outs.push(exec(&patch));
            outs
        }
        Some(Step::Run) => vec![
            Out::Text("Now I'd like to run it; that needs your approval.".into()),
            exec(&format!("python3 {FILE}")),
        ],
        Some(Step::Ask) => vec![Out::Call {
            name: "request_user_input".into(),
            args: json!({"questions": [{
                "id": "next", "header": "Next", "question": "Keep the script?",
                "options": [
                    {"label": KEEP, "description": "Leave hello.py in the workspace"},
                    {"label": "Show it again", "description": "Print it once more in the report"}
                ]
            }]}),
        }],
        None => {
            let ran = output_of(Step::Run).unwrap_or_default();
            let mut report = if ran.contains(GREETING) {
                format!("Done. I wrote `{FILE}` and ran it; it printed:\n\n{GREETING}")
            } else {
                format!(
                    "I wrote `{FILE}` but running it did not work out:\n\n{}",
                    ran.trim()
                )
            };
            // An answer that picks nothing (declined, or timed out) goes unmentioned.
            if let Some(answer) = output_of(Step::Ask)
                && let Some(picked) = [KEEP, "Show it again"]
                    .into_iter()
                    .find(|o| answer.contains(o))
            {
                report.push_str(&format!("\n\nYou picked \"{picked}\"."));
            }
            vec![Out::Text(report)]
        }
    }
}

/// The steps of the demo's first turn, one model answer each.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Step {
    /// An `update_plan` call with this many steps done.
    Plan(usize),
    Patch,
    Run,
    /// A question with two options (`request_user_input`).
    Ask,
}

async fn responses(body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let conversation = Conversation::read(&body);
    tracing::debug!(tools = ?conversation.tools, said = conversation.said.len(), outputs = conversation.outputs.len(), "demo model request");
    let outs = next(&conversation);
    let input_tokens = (body.to_string().len() / 4) as i64;
    stream(outs, input_tokens).into_response()
}

fn event(kind: &str, mut data: Value) -> Bytes {
    data["type"] = Value::String(kind.to_owned());
    Bytes::from(format!("event: {kind}\ndata: {data}\n\n"))
}

static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn stream(outs: Vec<Out>, input_tokens: i64) -> Response {
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(64);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    tokio::spawn(async move {
        let send = |b: Bytes| {
            let tx = tx.clone();
            async move { tx.send(Ok(b)).await.is_ok() }
        };
        let id = format!("resp_demo_{n}");
        if !send(event("response.created", json!({"response": {"id": id}}))).await {
            return;
        }
        tokio::time::sleep(THINK).await;
        let mut output_tokens = 0i64;
        for (i, out) in outs.iter().enumerate() {
            let item_id = format!("item_demo_{n}_{i}");
            let item = match out {
                Out::Reasoning(summary) => json!({
                    "type": "reasoning", "id": item_id,
                    "summary": [{"type": "summary_text", "text": summary}]
                }),
                Out::Text(text) => {
                    output_tokens += (text.len() / 4) as i64;
                    let empty = json!({"type": "message", "role": "assistant", "id": item_id, "content": []});
                    if !send(event(
                        "response.output_item.added",
                        json!({"output_index": i, "item": empty}),
                    ))
                    .await
                    {
                        return;
                    }
                    for word in text.split_inclusive(' ') {
                        tokio::time::sleep(WORD).await;
                        let delta = json!({"item_id": item_id, "output_index": i, "content_index": 0, "delta": word});
                        if !send(event("response.output_text.delta", delta)).await {
                            return;
                        }
                    }
                    json!({
                        "type": "message", "role": "assistant", "id": item_id,
                        "content": [{"type": "output_text", "text": text, "annotations": []}]
                    })
                }
                Out::Call { name, args } => json!({
                    "type": "function_call", "id": item_id, "name": name,
                    "arguments": args.to_string(), "call_id": format!("call_demo_{n}_{i}")
                }),
            };
            let done = event(
                "response.output_item.done",
                json!({"output_index": i, "item": item}),
            );
            if !send(done).await {
                return;
            }
        }
        let usage = json!({
            "input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output_tokens + 20, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens + 20
        });
        let _ = send(event(
            "response.completed",
            json!({"response": {"id": id, "usage": usage}}),
        ))
        .await;
    });
    let body = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (chunk, rx))
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(body))
        .expect("a valid response")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> Value {
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
    }

    fn output(text: &str) -> Value {
        json!({"type": "function_call_output", "call_id": "c", "output": text})
    }

    fn answer(input: Vec<Value>, tools: &[&str]) -> Vec<Out> {
        let tools: Vec<Value> = tools.iter().map(|t| json!({"name": t})).collect();
        next(&Conversation::read(
            &json!({"input": input, "tools": tools}),
        ))
    }

    fn command(outs: &[Out]) -> Option<String> {
        outs.iter().find_map(|o| match o {
            Out::Call { name, args } if name == "exec_command" => {
                args["cmd"].as_str().map(str::to_owned)
            }
            _ => None,
        })
    }

    #[test]
    fn the_first_turn_writes_the_file_then_asks_to_run_it_then_reports() {
        let env = user("<environment_context>cwd</environment_context>");
        let first = answer(vec![env.clone(), user("go")], &["exec_command"]);
        assert!(command(&first).unwrap().starts_with("apply_patch <<'EOF'"));
        let second = answer(
            vec![env.clone(), user("go"), output("Success")],
            &["exec_command"],
        );
        assert_eq!(command(&second).unwrap(), "python3 hello.py");
        let last = answer(
            vec![env, user("go"), output("Success"), output(GREETING)],
            &["exec_command"],
        );
        assert!(command(&last).is_none());
        assert!(
            matches!(&last[..], [Out::Text(t)] if t.contains(GREETING)),
            "{last:?}"
        );
    }

    #[test]
    fn with_the_plan_tool_the_turn_starts_and_ends_with_a_plan() {
        let tools = ["exec_command", "update_plan"];
        let first = answer(vec![user("go")], &tools);
        assert!(
            matches!(&first[..], [Out::Reasoning(_), Out::Call { name, args }]
            if name == "update_plan" && args["plan"][0]["status"] == "in_progress")
        );
        let done = answer(
            vec![
                user("go"),
                output("ok"),
                output("Success"),
                output(GREETING),
            ],
            &tools,
        );
        assert!(matches!(&done[..], [Out::Call { args, .. }]
            if args["plan"].as_array().unwrap().iter().all(|s| s["status"] == "completed")));
    }

    #[test]
    fn when_codex_offers_questions_the_turn_asks_one_before_the_report() {
        let tools = ["exec_command", "request_user_input"];
        let ask = answer(
            vec![user("go"), output("Success"), output(GREETING)],
            &tools,
        );
        assert!(
            matches!(&ask[..], [Out::Call { name, args }]
                if name == "request_user_input" && args["questions"][0]["options"][0]["label"] == KEEP),
            "{ask:?}"
        );
        let answered = r#"{"answers":{"next":{"answers":["Keep it"]}}}"#;
        let report = answer(
            vec![
                user("go"),
                output("Success"),
                output(GREETING),
                output(answered),
            ],
            &tools,
        );
        assert!(
            matches!(&report[..], [Out::Text(t)] if t.contains(GREETING) && t.contains("You picked \"Keep it\"")),
            "{report:?}"
        );
    }

    #[test]
    fn a_question_codex_would_refuse_outside_plan_mode_is_not_asked() {
        let tools = vec![
            json!({"name": "exec_command"}),
            json!({"name": "request_user_input", "description": "Request user input. This tool is only available in Plan mode."}),
        ];
        let input = vec![user("go"), output("Success"), output(GREETING)];
        let report = next(&Conversation::read(
            &json!({"input": input, "tools": tools}),
        ));
        assert!(
            matches!(&report[..], [Out::Text(t)] if t.contains(GREETING) && !t.contains("question")),
            "{report:?}"
        );
        let mut planned = input.clone();
        planned.insert(0, json!({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "# Collaboration Mode: Plan"}]}));
        let ask = next(&Conversation::read(
            &json!({"input": planned, "tools": tools}),
        ));
        assert!(
            matches!(&ask[..], [Out::Call { name, .. }] if name == "request_user_input"),
            "{ask:?}"
        );
    }

    #[test]
    fn a_reason_for_a_denial_is_acknowledged_without_another_command() {
        let outs = answer(
            vec![
                user("go"),
                user("and now?"),
                user("I denied this request (Allow Codex to run `ls`?). Reason: not today"),
            ],
            &["exec_command"],
        );
        assert!(
            matches!(&outs[..], [Out::Text(t)] if t.contains("\"not today\"")),
            "{outs:?}"
        );
    }

    #[test]
    fn a_declined_run_is_reported_as_such() {
        let outs = answer(
            vec![user("go"), output("Success"), output("rejected by user")],
            &["exec_command"],
        );
        assert!(
            matches!(&outs[..], [Out::Text(t)] if t.contains("rejected by user")),
            "{outs:?}"
        );
    }

    #[test]
    fn a_follow_up_looks_at_the_workspace_and_quotes_the_person() {
        let outs = answer(
            vec![
                user("go"),
                output("Success"),
                output(GREETING),
                user("and now?"),
            ],
            &["exec_command"],
        );
        assert_eq!(command(&outs).unwrap(), "ls -la");
        let outs = answer(
            vec![user("go"), user("and now?"), output("hello.py")],
            &["exec_command"],
        );
        assert!(
            matches!(&outs[..], [Out::Text(t)] if t.contains("and now?") && t.contains("hello.py"))
        );
    }
}
