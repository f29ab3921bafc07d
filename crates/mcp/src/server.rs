//! The MCP server handler: lists the seven tools, parses their arguments (bad ones become
//! `isError` results that say what the tool takes), runs them on the engine, long-polls
//! `codex_status` with progress notifications, and starts elicitation for the sessions a
//! connection uses.
// MCP logging (logging/setLevel) is deprecated by SEP-2577 but part of the 2025 revisions.
#![allow(deprecated)]

use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use codex_relay_core::{Relay, RelayError};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, LoggingLevel, LoggingMessageNotificationParam, PaginatedRequestParams,
    ProgressNotificationParam, ProtocolVersion, ServerCapabilities, ServerConfig,
    SetLevelRequestParams, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};

use crate::elicit::Elicitor;
use crate::input_required::{self, RoundState};
use crate::params::{self, StatusParams, Until};
use crate::tools::{self, ToolError};

/// How often a waiting `codex_status` reports progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(2);

const INSTRUCTIONS: &str = "codex-relay runs OpenAI Codex sessions. codex_start begins a task and \
returns a sessionId at once; codex_status {sessionId, waitMs: 30000, cursor} waits for changes and \
shows the result, recent output and any pendingQuestion (add until: \"attention\" to wait until \
the turn ends or needs an answer); answer approvals and questions with \
codex_respond (\"approve\", \"deny: <reason>\", an option); codex_say continues or steers a session; \
codex_interrupt stops a turn; codex_list shows sessions, including ones other Codex clients made.";

/// One MCP connection's server (rmcp makes one per stdio process or HTTP session).
pub struct RelayMcp {
    relay: Relay,
    tools: Arc<Vec<Tool>>,
    elicitor: Elicitor,
    /// The level a client chose with `logging/setLevel` (2025 revisions); no log
    /// notifications until it does.
    log_level: Mutex<Option<LoggingLevel>>,
    /// Per session, the last seq this connection has been shown (a `codex_status` answer's
    /// `nextCursor`, or where the session was when `codex_start`/`codex_say` ran): a wait
    /// without a cursor starts there, so what happened since is not slept through.
    seen: Mutex<std::collections::HashMap<String, u64>>,
}

/// Severity order of MCP log levels.
fn severity(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

impl RelayMcp {
    pub fn new(relay: Relay) -> Self {
        Self {
            elicitor: Elicitor::new(relay.clone()),
            relay,
            tools: Arc::new(tools::definitions()),
            log_level: Mutex::new(None),
            seen: Mutex::default(),
        }
    }

    fn note_seen(&self, session: &str, seq: u64) {
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(session.to_owned(), seq);
    }

    fn last_seen(&self, session: &str) -> Option<u64> {
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(session)
            .copied()
    }

    /// Sends a log notification if the client asked for this level or a lower one.
    async fn log(&self, context: &RequestContext<RoleServer>, level: LoggingLevel, data: Value) {
        let wanted = *self.log_level.lock().unwrap_or_else(|e| e.into_inner());
        if wanted.is_some_and(|w| severity(level) >= severity(w)) {
            let mut note = LoggingMessageNotificationParam::new(level, data);
            note.logger = Some("codex-relay".into());
            if let Err(e) = context.peer.notify_logging_message(note).await {
                tracing::debug!("log notification not sent: {e}");
            }
        }
    }

    /// Runs one tool; `Err` is a message for the caller.
    async fn run(
        &self,
        mut request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ToolError> {
        let args = request.arguments.take();
        let name = request.name.as_ref();
        let out = match name {
            tools::START => {
                let out = tools::start(&self.relay, parse(name, args)?).await?;
                // A new session: this caller has seen nothing of it yet.
                if let Some(id) = out["sessionId"].as_str() {
                    self.note_seen(id, 0);
                }
                out
            }
            tools::SAY => {
                let p: params::SayParams = parse(name, args)?;
                // What the turn logs from here on is new to this caller.
                if let Ok(snap) = self.relay.status(&p.session_id) {
                    self.note_seen(&p.session_id, snap.last_seq);
                }
                tools::say(&self.relay, p).await?
            }
            tools::STATUS => return self.status(parse(name, args)?, request, context).await,
            tools::RESPOND => {
                tools::respond(&self.relay, parse(name, args)?, person_of(context)).await?
            }
            tools::INTERRUPT => tools::interrupt(&self.relay, parse(name, args)?).await?,
            tools::LIST => tools::list(&self.relay, parse(name, args)?).await?,
            tools::LIMITS => tools::limits(&self.relay, parse(name, args)?).await?,
            crate::thread_tool::THREAD => {
                crate::thread_tool::thread(&self.relay, parse(name, args)?).await?
            }
            tools::WORKTREE => tools::worktree(&self.relay, parse(name, args)?).await?,
            _ => unreachable!("unknown tools are refused before run"),
        };
        if matches!(name, tools::START | tools::SAY) {
            self.watch(context, &out).await;
            self.log(
                context,
                LoggingLevel::Info,
                json!({"tool": name, "sessionId": out["sessionId"], "status": out["status"]}),
            )
            .await;
        }
        Ok(complete(out))
    }

    /// `codex_status`: waits if asked; for 2026-07-28 clients that can answer forms, pending
    /// requests come back as an `InputRequiredResult` (see `input_required.rs`).
    async fn status(
        &self,
        p: StatusParams,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ToolError> {
        // Any Codex thread can be inspected: ids this relay does not know are resumed.
        self.relay.session(&p.session_id).await?;
        let rounds = input_required::applies(context);
        let mut state = RoundState::parse(request.request_state.as_deref());
        if rounds {
            if let Some(responses) = request.input_responses {
                input_required::apply(&self.relay, &p.session_id, responses, person_of(context))
                    .await;
            }
            if let Some(ask) = input_required::ask(&self.relay, &p.session_id, &mut state) {
                return Ok(ask.into());
            }
        }
        self.wait(&p, context).await?;
        if rounds && let Some(ask) = input_required::ask(&self.relay, &p.session_id, &mut state) {
            return Ok(ask.into());
        }
        let out = tools::status(&self.relay, &p).await?;
        if let Some(seq) = out["nextCursor"].as_u64() {
            self.note_seen(&p.session_id, seq);
        }
        self.watch(context, &out).await;
        Ok(complete(out))
    }

    /// Forwards the session's approvals and questions to this client as elicitation forms,
    /// when it can be asked.
    async fn watch(&self, context: &RequestContext<RoleServer>, out: &Value) {
        if let Some(id) = out.get("sessionId").and_then(Value::as_str) {
            self.elicitor
                .watch(&context.peer, id, person_of(context))
                .await;
        }
    }

    /// `waitMs`: returns at once when there is nothing left to wait for (no turn running), else
    /// waits until the session logs past the cursor (or, without one, past what this caller
    /// was last shown of it) or changes status; reports progress meanwhile; stops when the
    /// client cancels the call.
    async fn wait(
        &self,
        p: &StatusParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), ToolError> {
        let Some(ms) = p.wait_ms.filter(|ms| *ms > 0) else {
            return Ok(());
        };
        let timeout = Duration::from_millis(ms).min(tools::MAX_WAIT);
        let snap = self.relay.find(&p.session_id).await?;
        if !snap.status.is_running() {
            // The turn ended (or none started): nothing would change but by another client.
            return Ok(());
        }
        let after = match p.cursor {
            Some(c) => c,
            None => self
                .last_seen(&p.session_id)
                .map_or(snap.last_seq, |seen| seen.min(snap.last_seq)),
        };
        let token = context.meta.get_progress_token();
        let started = tokio::time::Instant::now();
        let wait = settle(&self.relay, p, after, timeout);
        tokio::pin!(wait);
        let mut tick = tokio::time::interval_at(started + PROGRESS_EVERY, PROGRESS_EVERY);
        loop {
            tokio::select! {
                done = &mut wait => return done.map_err(ToolError::from),
                _ = context.ct.cancelled() => {
                    return Err(ToolError("cancelled by the client".into()));
                }
                // Without a progress token there is nothing to report: no tick.
                _ = tick.tick(), if token.is_some() => {
                    if let Some(token) = &token {
                        let waited = started.elapsed().as_millis() as f64;
                        let status = self
                            .relay
                            .status(&p.session_id)
                            .map(|s| tools::status_word(&s))
                            .unwrap_or("unknown");
                        let note = ProgressNotificationParam::new(token.clone(), waited)
                            .with_total(timeout.as_millis() as f64)
                            .with_message(format!("session {} is {status}; waiting for a change", p.session_id));
                        if let Err(e) = context.peer.notify_progress(note).await {
                            tracing::debug!("progress notification not sent: {e}");
                        }
                    }
                }
            }
        }
    }
}

/// Waits (at most `timeout`) for what `until` asks: any event after `after` or a status change,
/// or until the session needs attention (no turn running, or a request waiting for an answer).
async fn settle(
    relay: &Relay,
    p: &StatusParams,
    after: u64,
    timeout: Duration,
) -> Result<(), RelayError> {
    match p.until.unwrap_or_default() {
        Until::Change => relay.wait(&p.session_id, after, timeout).await.map(drop),
        Until::Attention => relay.wait_attention(&p.session_id, timeout).await.map(drop),
    }
}

fn parse<P: serde::de::DeserializeOwned>(
    tool: &str,
    args: Option<serde_json::Map<String, Value>>,
) -> Result<P, ToolError> {
    params::parse(tool, tools::signature(tool), args).map_err(ToolError)
}

/// A finished call: the JSON as structured content, and (compact, to spare agents' tokens)
/// as text for clients that only read text.
fn complete(value: Value) -> CallToolResponse {
    CallToolResult::structured(value).into()
}

impl ServerHandler for RelayMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_logging()
                .build(),
        )
        .with_server_info(
            Implementation::new("codex-relay", env!("CARGO_PKG_VERSION"))
                .with_title("codex-relay: OpenAI Codex sessions"),
        )
        .with_instructions(INSTRUCTIONS)
    }

    /// 2025-06-18 and 2025-11-25 with elicitation; 2026-07-28 (no server-to-client requests:
    /// approvals through `codex_respond`); older revisions for older clients.
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2026_07_28))
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        *self.log_level.lock().unwrap_or_else(|e| e.into_inner()) = Some(request.level);
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.clone();
        let name = name.as_ref();
        if !self.tools.iter().any(|t| t.name == name) {
            let known: Vec<&str> = self.tools.iter().map(|t| t.name.as_ref()).collect();
            return Err(McpError::invalid_params(
                format!("unknown tool {name:?}; the tools are {}", known.join(", ")),
                None,
            ));
        }
        match self.run(request, &context).await {
            Ok(response) => Ok(response),
            Err(e) => {
                tracing::info!(tool = name, "tool error: {e}");
                self.log(
                    &context,
                    LoggingLevel::Warning,
                    json!({"tool": name, "error": e.to_string()}),
                )
                .await;
                Ok(CallToolResult::error(vec![ContentBlock::text(e.to_string())]).into())
            }
        }
    }
}

/// The signed-in person behind a call: over HTTP the gate put them into the request; over
/// stdio there is none (the local user).
fn person_of(context: &RequestContext<RoleServer>) -> Option<codex_relay_core::people::Person> {
    context
        .extensions
        .get::<http::request::Parts>()
        .and_then(|p| p.extensions.get::<codex_relay_core::people::Person>())
        .cloned()
}
