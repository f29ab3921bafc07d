//! A scripted Responses-API model server on loopback: Codex POSTs `/v1/responses` and gets
//! the next scripted reply as an SSE stream. Every request is recorded for assertions.
//!
//! Strict: a request with no scripted reply left is answered HTTP 400 (which Codex does not
//! retry) and recorded, and the server panics when dropped (outside an unwinding panic) if any
//! such request came, so a misrouted or extra model call fails the test that made it.

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
    /// A function call of a namespaced tool set, e.g. the sub-agent tools of Codex 0.169
    /// (`multi_agent_v1`) or an MCP server's tools (`mcp__<server>`).
    NamespacedCall {
        namespace: String,
        name: String,
        arguments: String,
        call_id: String,
    },
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

    /// The sub-agent tool `multi_agent_v1.spawn_agent {"message": ...}` (Codex 0.169).
    pub fn spawn_agent(message: &str, call_id: &str) -> Self {
        Item::sub_agent_tool("spawn_agent", json!({ "message": message }), call_id)
    }

    /// Any tool of Codex 0.169's sub-agent set (`spawn_agent`, `send_input`, `wait_agent`,
    /// `close_agent`, `resume_agent`).
    pub fn sub_agent_tool(name: &str, arguments: Value, call_id: &str) -> Self {
        Item::NamespacedCall {
            namespace: "multi_agent_v1".into(),
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
            Item::NamespacedCall {
                namespace,
                name,
                arguments,
                call_id,
            } => json!({
                "type": "function_call", "id": format!("fc_{n}"), "namespace": namespace,
                "name": name, "arguments": arguments, "call_id": call_id
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
    /// Of the input tokens, how many were cached (`input_tokens_details.cached_tokens`).
    pub cached_tokens: i64,
    pub output_tokens: i64,
    /// Of the output tokens, how many were reasoning (`output_tokens_details.reasoning_tokens`).
    pub reasoning_tokens: i64,
}

impl Default for Usage {
    fn default() -> Self {
        Usage {
            input_tokens: 120,
            cached_tokens: 0,
            output_tokens: 30,
            reasoning_tokens: 0,
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
    /// A plain HTTP error with this exact JSON body (e.g. OpenAI's `usage_limit_reached`).
    StatusBody { code: u16, body: Value },
    /// Another reply, answered only once the test releases `gate` (the request stays open
    /// until then, headers unsent): a step of the test that must happen before it.
    Gated {
        gate: Arc<tokio::sync::Semaphore>,
        reply: Box<Reply>,
    },
    /// Another reply sent with these extra HTTP response headers (e.g. the `x-codex-*`
    /// rate-limit headers Codex reads; see [`crate::rate_limits`]).
    Headed {
        headers: Vec<(String, String)>,
        reply: Box<Reply>,
    },
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

    pub fn with_usage(self, input_tokens: i64, output_tokens: i64) -> Self {
        self.with_full_usage(Usage {
            input_tokens,
            cached_tokens: 0,
            output_tokens,
            reasoning_tokens: 0,
        })
    }

    /// Reports this usage (every field) in `response.completed`.
    pub fn with_full_usage(mut self, u: Usage) -> Self {
        match &mut self {
            Reply::Items { usage, .. } => *usage = u,
            Reply::Headed { reply, .. } => **reply = (**reply).clone().with_full_usage(u),
            _ => {}
        }
        self
    }

    /// Answered only after `gate` gets a permit (`gate.add_permits(1)`); see [`Reply::Gated`].
    pub fn after(self, gate: &Arc<tokio::sync::Semaphore>) -> Self {
        Reply::Gated {
            gate: gate.clone(),
            reply: Box::new(self),
        }
    }

    /// Sends these HTTP response headers with the reply (added to any it has).
    pub fn with_headers<K: Into<String>, V: Into<String>>(
        self,
        extra: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        let extra = extra.into_iter().map(|(k, v)| (k.into(), v.into()));
        match self {
            Reply::Headed { mut headers, reply } => {
                headers.extend(extra);
                Reply::Headed { headers, reply }
            }
            other => Reply::Headed {
                headers: extra.collect(),
                reply: Box::new(other),
            },
        }
    }
}

/// One request Codex sent to `/v1/responses`.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub body: Value,
    /// `x-codex-parent-thread-id`: set when a sub-agent's model call made the request.
    pub parent_thread: Option<String>,
    /// The `Authorization` header (`Bearer ...`), when Codex sent one.
    pub authorization: Option<String>,
    /// The `chatgpt-account-id` header, sent with ChatGPT tokens.
    pub account_id: Option<String>,
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

/// Requests whose `input` contains `marker` (and that come from a sub-agent, or not, as
/// `sub_agent` says) draw from `queue`.
struct Route {
    marker: String,
    sub_agent: bool,
    queue: VecDeque<Reply>,
}

#[derive(Default)]
struct Script {
    /// For requests of top-level threads that match no route.
    default: VecDeque<Reply>,
    routes: Vec<Route>,
    requests: Vec<RecordedRequest>,
    /// The last user text of each request that found no reply (for the failure message).
    unscripted: Vec<String>,
    /// Set by `allow_unscripted`: such requests are still answered 400 but do not fail the test.
    lenient: bool,
    /// Set by `require_access`: requests whose bearer token it refuses are answered 401.
    access: Option<AccessCheck>,
    /// Bearer tokens (without `Bearer `) of the requests answered 401 by that check.
    unauthorized: Vec<String>,
}

type AccessCheck = Arc<dyn Fn(&str) -> bool + Send + Sync>;

struct Shared {
    script: Mutex<Script>,
    changed: Notify,
}

/// The server; stops when dropped, and then fails the test if a request was unscripted.
pub struct ModelServer {
    shared: Arc<Shared>,
    url: String,
    _serving: crate::loopback::Serving,
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
        let serving = crate::loopback::serve(app, "model server").await;
        let addr = serving.addr;
        Self {
            shared,
            url: format!("http://{addr}/v1"),
            _serving: serving,
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

    /// Appends replies for requests of top-level threads whose input contains `marker` (put
    /// it in the prompt).
    pub fn route(&self, marker: &str, replies: impl IntoIterator<Item = Reply>) {
        self.add_route(marker, false, replies);
    }

    /// Appends replies for requests of sub-agents (they carry `x-codex-parent-thread-id`) whose
    /// input contains `marker` (put it in the spawn message). A sub-agent's request that
    /// matches no such route is unscripted: it never takes a top-level thread's reply.
    pub fn route_sub_agent(&self, marker: &str, replies: impl IntoIterator<Item = Reply>) {
        self.add_route(marker, true, replies);
    }

    fn add_route(&self, marker: &str, sub_agent: bool, replies: impl IntoIterator<Item = Reply>) {
        let mut s = self.script();
        match s
            .routes
            .iter_mut()
            .find(|r| r.marker == marker && r.sub_agent == sub_agent)
        {
            Some(r) => r.queue.extend(replies),
            None => s.routes.push(Route {
                marker: marker.to_owned(),
                sub_agent,
                queue: replies.into_iter().collect(),
            }),
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

    /// Requests that found no scripted reply (they were answered HTTP 400).
    pub fn unscripted(&self) -> usize {
        self.script().unscripted.len()
    }

    /// For a test that provokes unscripted requests on purpose: they are still refused with
    /// HTTP 400, but dropping the server does not fail the test.
    pub fn allow_unscripted(&self) {
        self.script().lenient = true;
    }

    /// Accept only requests whose bearer token `check` accepts; the others are answered HTTP
    /// 401 (as OpenAI answers an expired or unknown token), take no scripted reply and are
    /// counted in [`unauthorized`](Self::unauthorized), not in [`requests`](Self::requests).
    pub fn require_access(&self, check: Arc<dyn Fn(&str) -> bool + Send + Sync>) {
        self.script().access = Some(check);
    }

    /// The bearer tokens of the requests answered 401 by the [`require_access`](Self::require_access) check.
    pub fn unauthorized(&self) -> Vec<String> {
        self.script().unauthorized.clone()
    }

    /// Panics if a request found no scripted reply (also done on drop).
    pub fn assert_all_scripted(&self) {
        let s = self.script();
        if !s.unscripted.is_empty() && !s.lenient {
            let got = s.unscripted.clone();
            drop(s);
            panic!(
                "the scripted model got {} request(s) it had no reply for (answered HTTP 400); last user text of each: {got:?}",
                got.len()
            );
        }
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

impl Drop for ModelServer {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            self.assert_all_scripted();
        }
    }
}

async fn models() -> impl IntoResponse {
    axum::Json(json!({"data": [], "models": []}))
}

async fn responses(
    State(shared): State<Arc<Shared>>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let parent_thread = headers
        .get("x-codex-parent-thread-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let bearer = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim_start_matches("Bearer ").to_owned())
        .unwrap_or_default();
    let refused = {
        let mut s = shared.script.lock().unwrap_or_else(|e| e.into_inner());
        let refused = s.access.as_ref().is_some_and(|check| !check(&bearer));
        if refused {
            s.unauthorized.push(bearer);
        }
        refused
    };
    if refused {
        shared.changed.notify_waiters();
        return (
            StatusCode::UNAUTHORIZED,
            axum::Json(json!({"error": {
                "message": "Your authentication token has expired. Please try signing in again.",
                "type": "invalid_request_error", "code": "token_expired", "param": null
            }})),
        )
            .into_response();
    }
    let reply = {
        let mut s = shared.script.lock().unwrap_or_else(|e| e.into_inner());
        let input = body["input"].to_string();
        let sub_agent = parent_thread.is_some();
        let routed = s
            .routes
            .iter_mut()
            .filter(|r| r.sub_agent == sub_agent && !r.queue.is_empty())
            .find(|r| input.contains(r.marker.as_str()))
            .and_then(|r| r.queue.pop_front());
        let reply = match (routed, sub_agent) {
            (Some(r), _) => Some(r),
            (None, false) => s.default.pop_front(),
            (None, true) => None,
        };
        let header = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let request = RecordedRequest {
            body,
            parent_thread,
            authorization: header("authorization"),
            account_id: header("chatgpt-account-id"),
        };
        if reply.is_none() {
            let last = request.user_texts().pop().unwrap_or_default();
            s.unscripted.push(last);
        }
        s.requests.push(request);
        reply
    };
    shared.changed.notify_waiters();
    let n = RESPONSE_COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let Some(mut reply) = reply else {
        return unscripted();
    };
    while let Reply::Gated { gate, reply: inner } = reply {
        if let Ok(permit) = gate.acquire().await {
            permit.forget();
        }
        reply = *inner;
    }
    let (headers, reply) = match reply {
        Reply::Headed { headers, reply } => (headers, *reply),
        other => (Vec::new(), other),
    };
    let mut response = reply_response(n, reply);
    for (name, value) in headers {
        if let (Ok(name), Ok(value)) = (
            axum::http::HeaderName::from_bytes(name.as_bytes()),
            axum::http::HeaderValue::from_str(&value),
        ) {
            response.headers_mut().append(name, value);
        }
    }
    response
}

fn unscripted() -> Response {
    (
        StatusCode::BAD_REQUEST,
        axum::Json(json!({"error": {
            "message": "the scripted model has no reply for this request",
            "type": "invalid_request_error", "code": "unscripted"
        }})),
    )
        .into_response()
}

fn reply_response(n: usize, reply: Reply) -> Response {
    match reply {
        Reply::StatusBody { code, body } => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            (status, axum::Json(body)).into_response()
        }
        Reply::Headed { reply, .. } | Reply::Gated { reply, .. } => reply_response(n, *reply),
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
            Reply::Status { .. }
            | Reply::StatusBody { .. }
            | Reply::Headed { .. }
            | Reply::Gated { .. } => {
                unreachable!("answered without a stream, or unwrapped before")
            }
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
                    "input_tokens": u.input_tokens, "input_tokens_details": {"cached_tokens": u.cached_tokens},
                    "output_tokens": u.output_tokens, "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
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

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;
