//! A scripted Responses-API model server on loopback: Codex POSTs `/v1/responses` and gets
//! the next scripted reply as an SSE stream. Every request is recorded for assertions.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};

/// One output item of a scripted response.
#[derive(Debug, Clone)]
pub enum Item {
    /// An assistant message.
    Text(String),
    /// A function tool call; `arguments` is the JSON text the model "wrote".
    FunctionCall {
        name: String,
        arguments: String,
        call_id: String,
    },
    /// A freeform (custom) tool call, e.g. `apply_patch` in freeform mode.
    CustomToolCall {
        name: String,
        input: String,
        call_id: String,
    },
    /// A reasoning item with one summary paragraph.
    Reasoning(String),
}

impl Item {
    pub fn text(s: impl Into<String>) -> Self {
        Item::Text(s.into())
    }

    /// The shell tool of Codex 0.98 and 0.169: `exec_command {"cmd": ...}`.
    pub fn exec(cmd: &str, call_id: &str) -> Self {
        Item::function_call("exec_command", json!({ "cmd": cmd }), call_id)
    }

    pub fn function_call(name: &str, arguments: Value, call_id: &str) -> Self {
        Item::FunctionCall {
            name: name.into(),
            arguments: arguments.to_string(),
            call_id: call_id.into(),
        }
    }

    fn to_json(&self, n: usize) -> Value {
        match self {
            Item::Text(text) => json!({
                "type": "message", "role": "assistant", "id": format!("msg_{n}"),
                "content": [{"type": "output_text", "text": text, "annotations": []}]
            }),
            Item::FunctionCall {
                name,
                arguments,
                call_id,
            } => json!({
                "type": "function_call", "id": format!("fc_{n}"), "name": name,
                "arguments": arguments, "call_id": call_id
            }),
            Item::CustomToolCall {
                name,
                input,
                call_id,
            } => json!({
                "type": "custom_tool_call", "id": format!("ctc_{n}"), "name": name,
                "input": input, "call_id": call_id
            }),
            Item::Reasoning(summary) => json!({
                "type": "reasoning", "id": format!("rs_{n}"),
                "summary": [{"type": "summary_text", "text": summary}]
            }),
        }
    }
}

/// Token usage reported in `response.completed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    pub input_tokens: i64,
    pub output_tokens: i64,
}

impl Default for Usage {
    fn default() -> Self {
        Usage {
            input_tokens: 120,
            output_tokens: 30,
        }
    }
}

/// One scripted answer to one `POST /v1/responses`.
#[derive(Debug, Clone)]
pub enum Reply {
    /// `response.created`, then after `delay` the items, then `response.completed`.
    Items {
        items: Vec<Item>,
        delay: Duration,
        usage: Usage,
    },
    /// `response.created`, then `response.failed` with this message.
    Failed { message: String },
    /// A plain HTTP error (401, 429, 500, ...) with a JSON error body.
    Status { code: u16, message: String },
    /// `response.created` and the items, then the connection is cut before `response.completed`.
    Drop { items: Vec<Item> },
}

impl Reply {
    pub fn items(items: Vec<Item>) -> Self {
        Reply::Items {
            items,
            delay: Duration::ZERO,
            usage: Usage::default(),
        }
    }

    pub fn text(s: impl Into<String>) -> Self {
        Reply::items(vec![Item::text(s)])
    }

    /// One `exec_command` call.
    pub fn exec(cmd: &str, call_id: &str) -> Self {
        Reply::items(vec![Item::exec(cmd, call_id)])
    }

    pub fn with_delay(mut self, d: Duration) -> Self {
        if let Reply::Items { delay, .. } = &mut self {
            *delay = d;
        }
        self
    }

    pub fn with_usage(mut self, input_tokens: i64, output_tokens: i64) -> Self {
        if let Reply::Items { usage, .. } = &mut self {
            *usage = Usage {
                input_tokens,
                output_tokens,
            };
        }
        self
    }
}

/// One request Codex sent to `/v1/responses`.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub body: Value,
}

impl RecordedRequest {
    /// Names of the tools offered to the model.
    pub fn tool_names(&self) -> Vec<String> {
        self.body["tools"]
            .as_array()
            .map(|tools| {
                tools
                    .iter()
                    .filter_map(|t| t.get("name").or_else(|| t.pointer("/function/name")))
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// `text.format`, present when an output schema was set.
    pub fn text_format(&self) -> Option<&Value> {
        self.body.pointer("/text/format")
    }

    /// The `output` of the `function_call_output` (or `custom_tool_call_output`) for `call_id`.
    pub fn tool_output(&self, call_id: &str) -> Option<String> {
        self.input_items().iter().find_map(|item| {
            let kind = item.get("type")?.as_str()?;
            if !matches!(kind, "function_call_output" | "custom_tool_call_output")
                || item.get("call_id")?.as_str()? != call_id
            {
                return None;
            }
            Some(match item.get("output")? {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
        })
    }

    pub fn input_items(&self) -> &[Value] {
        self.body["input"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// All user-message text in the input, in order.
    pub fn user_texts(&self) -> Vec<String> {
        self.input_items()
            .iter()
            .filter(|i| i.get("role").and_then(Value::as_str) == Some("user"))
            .filter_map(|i| i.get("content")?.as_array().cloned())
            .flatten()
            .filter_map(|c| c.get("text").and_then(Value::as_str).map(str::to_owned))
            .collect()
    }
}

#[derive(Default)]
struct Script {
    default: VecDeque<Reply>,
    /// Requests whose `input` contains the marker draw from its own queue.
    routes: Vec<(String, VecDeque<Reply>)>,
    requests: Vec<RecordedRequest>,
    unscripted: usize,
}

struct Shared {
    script: Mutex<Script>,
    changed: Notify,
}

/// The server; stops when dropped.
pub struct ModelServer {
    shared: Arc<Shared>,
    url: String,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl ModelServer {
    /// Binds `127.0.0.1:0` and serves in the background.
    pub async fn start() -> Self {
        let shared = Arc::new(Shared {
            script: Mutex::new(Script::default()),
            changed: Notify::new(),
        });
        let app = Router::new()
            .route("/v1/responses", post(responses))
            .route("/v1/models", get(models))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind model server");
        let addr = listener.local_addr().expect("local addr");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
        });
        Self {
            shared,
            url: format!("http://{addr}/v1"),
            _stop: stop,
        }
    }

    /// The base URL to put in Codex's provider config (`.../v1`).
    pub fn url(&self) -> &str {
        &self.url
    }

    fn script(&self) -> std::sync::MutexGuard<'_, Script> {
        self.shared.script.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends replies for requests that match no route.
    pub fn push(&self, replies: impl IntoIterator<Item = Reply>) {
        self.script().default.extend(replies);
    }

    /// Appends replies for requests whose input contains `marker` (put it in the prompt).
    pub fn route(&self, marker: &str, replies: impl IntoIterator<Item = Reply>) {
        let mut s = self.script();
        match s.routes.iter_mut().find(|(m, _)| m == marker) {
            Some((_, q)) => q.extend(replies),
            None => s
                .routes
                .push((marker.to_owned(), replies.into_iter().collect())),
        }
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.script().requests.clone()
    }

    /// Requests whose input contains `marker`.
    pub fn requests_with(&self, marker: &str) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.body["input"].to_string().contains(marker))
            .collect()
    }

    /// Requests that found no scripted reply (they were answered "script exhausted").
    pub fn unscripted(&self) -> usize {
        self.script().unscripted
    }

    /// Waits until at least `n` requests arrived; panics after `timeout`.
    pub async fn wait_for_requests(&self, n: usize, timeout: Duration) -> Vec<RecordedRequest> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.shared.changed.notified();
            let reqs = self.requests();
            if reqs.len() >= n {
                return reqs;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                panic!(
                    "the model server got {} requests, expected {n} within {timeout:?}",
                    reqs.len()
                );
            }
        }
    }
}

async fn models() -> impl IntoResponse {
    axum::Json(json!({"data": [], "models": []}))
}

async fn responses(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let reply = {
        let mut s = shared.script.lock().unwrap_or_else(|e| e.into_inner());
        let input = body["input"].to_string();
        let routed = s
            .routes
            .iter_mut()
            .find(|(m, _)| input.contains(m.as_str()))
            .and_then(|(_, q)| q.pop_front());
        let reply = routed.or_else(|| s.default.pop_front());
        if reply.is_none() {
            s.unscripted += 1;
        }
        s.requests.push(RecordedRequest { body });
        reply
    };
    shared.changed.notify_waiters();
    let n = RESPONSE_COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let reply = reply.unwrap_or_else(|| Reply::text("(the scripted model has no reply left)"));
    match reply {
        Reply::Status { code, message } => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            (
                status,
                axum::Json(
                    json!({"error": {"message": message, "type": "scripted_error", "code": code}}),
                ),
            )
                .into_response()
        }
        other => sse_response(n, other),
    }
}

static RESPONSE_COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(1);

fn sse(kind: &str, mut data: Value) -> Result<Bytes, std::io::Error> {
    data["type"] = Value::String(kind.to_owned());
    Ok(Bytes::from(format!("event: {kind}\ndata: {data}\n\n")))
}

fn sse_response(n: usize, reply: Reply) -> Response {
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(16);
    let id = format!("resp_{n}");
    tokio::spawn(async move {
        let _ = tx
            .send(sse("response.created", json!({"response": {"id": id}})))
            .await;
        let (items, delay, usage, ending) = match reply {
            Reply::Items {
                items,
                delay,
                usage,
            } => (items, delay, Some(usage), None),
            Reply::Failed { message } => (vec![], Duration::ZERO, None, Some(Ok(message))),
            Reply::Drop { items } => (items, Duration::ZERO, None, Some(Err(()))),
            Reply::Status { .. } => unreachable!("answered without a stream"),
        };
        tokio::time::sleep(delay).await;
        for (i, item) in items.iter().enumerate() {
            let item = item.to_json(n * 100 + i);
            if tx
                .send(sse(
                    "response.output_item.done",
                    json!({"output_index": i, "item": item}),
                ))
                .await
                .is_err()
            {
                return;
            }
        }
        let last = match (usage, ending) {
            (Some(u), _) => sse(
                "response.completed",
                json!({"response": {"id": id, "usage": {
                    "input_tokens": u.input_tokens, "input_tokens_details": {"cached_tokens": 0},
                    "output_tokens": u.output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
                    "total_tokens": u.input_tokens + u.output_tokens
                }}}),
            ),
            (None, Some(Ok(message))) => sse(
                "response.failed",
                json!({"response": {"id": id, "error": {"code": "server_error", "message": message}}}),
            ),
            _ => Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionReset,
                "scripted drop",
            )),
        };
        let _ = tx.send(last).await;
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (chunk, rx))
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(stream))
        .expect("valid response")
}
