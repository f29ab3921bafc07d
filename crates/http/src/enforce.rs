//! After the gate knows who a request is: the role check against [`crate::access`]'s table
//! (for `/mcp`, per message: the gate reads the posted JSON-RPC to find the tool), a 403 that
//! names the role needed, the [`Person`] put into the request for the handlers, and, once the
//! handler succeeded, the audit entry of what was done (with what the handler noted in an
//! [`AuditNote`]).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use codex_relay_core::people::{AuditEntry, Person, Role};
use serde_json::{Value, json};

use crate::access::{self, McpCall, Need, Scope};
use crate::auth::{Principal, Via};
use crate::error::ApiError;
use crate::gate::{Client, Gate};

/// What a handler adds to the audit entry of its call (put into the response's extensions).
#[derive(Debug, Clone, Default)]
pub struct AuditNote {
    pub session: Option<String>,
    pub request: Option<String>,
    pub decision: Option<String>,
    pub rule: Option<String>,
    /// The passkey a risky approval was stepped up with, by name.
    pub step_up: Option<String>,
}

impl AuditNote {
    /// `res` with this note.
    pub fn on(self, mut res: Response) -> Response {
        res.extensions_mut().insert(self);
        res
    }
}

fn front_of(path: &str, via: Via) -> &'static str {
    if path == "/mcp-server" || path.starts_with("/mcp-server/") {
        "mcp-legacy"
    } else if path == "/mcp" || path.starts_with("/mcp/") {
        "mcp"
    } else if via == Via::Cookie {
        "ui"
    } else {
        "http"
    }
}

/// The MCP messages of a POST body (one, or a batch), with what each needs.
fn mcp_calls(body: &[u8]) -> Vec<McpCall> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Array(msgs)) => msgs.iter().map(access::mcp_need).collect(),
        Ok(msg) => vec![access::mcp_need(&msg)],
        // Not JSON: the MCP front refuses it itself.
        Err(_) => Vec::new(),
    }
}

fn forbidden(message: String) -> Response {
    ApiError::new(StatusCode::FORBIDDEN, "forbidden_role", message).into_response()
}

/// Checks the principal's role for the request, runs it, and audits what it did.
pub async fn authorize(
    gate: &Arc<Gate>,
    principal: Principal,
    via: Via,
    client: Client,
    req: Request,
    next: Next,
) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let front = front_of(&path, via);
    let device = req
        .headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let person = match &principal {
        Principal::User(g) => g.person(front),
        _ => Person::admin_token(front),
    }
    .with_device(device.as_deref());
    let mut need = access::need(method.as_str(), &path);
    let mut session = access::path_session(&path).map(str::to_owned);
    let mut calls = Vec::new();
    let (parts, body) = req.into_parts();
    let is_mcp_post = method == Method::POST && front == "mcp";
    let body = if is_mcp_post {
        // The MCP front reads the same bytes after us; the body limit holds here too.
        let bytes = match axum::body::to_bytes(body, gate.body_limit).await {
            Ok(b) => b,
            Err(_) => {
                return ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "payload_too_large",
                    format!("the body is over {} bytes", gate.body_limit),
                )
                .into_response();
            }
        };
        calls = mcp_calls(&bytes);
        let role = calls.iter().map(|c| c.role).max().unwrap_or(Role::Viewer);
        let tool_call = calls.iter().find(|c| c.tool.is_some());
        session = tool_call.and_then(|c| c.session.clone());
        need = Need {
            role,
            scope: match tool_call {
                Some(c) if c.session.is_some() => Scope::Session,
                Some(_) => Scope::Relay,
                None => Scope::Open,
            },
            action: None,
        };
        Body::from(bytes)
    } else {
        body
    };
    let what = match calls.iter().find_map(|c| c.tool.as_deref()) {
        Some(tool) => format!("the MCP tool {tool}"),
        None => format!("{method} {path}"),
    };
    if let Principal::User(grant) = &principal
        && let Some(why) = access::refusal(grant, need, session.as_deref(), &what)
    {
        tracing::info!(target: "codex_relay::security", user = %grant.user_name, %what, "refused: {why}");
        let mut entry = AuditEntry::new(person, "access.denied");
        entry.ip = Some(client.ip.to_string());
        entry.session = session;
        entry.detail = Some(json!({"what": what, "needs": need.role, "has": grant.role}));
        audit(gate, &entry).await;
        return forbidden(why);
    }
    // An MCP approval of a risky request that needs a passkey check: refused before it runs.
    for c in calls
        .iter()
        .filter(|c| c.tool.as_deref() == Some("codex_respond"))
    {
        if let Some(refusal) =
            crate::passkeys::mcp_refusal(&gate.credentials, &principal, c.arguments.as_ref()).await
        {
            tracing::info!(target: "codex_relay::security", %what, "refused: an MCP approval without the step-up it needs");
            return refusal.into_response();
        }
    }
    let mut req = Request::from_parts(parts, body);
    req.extensions_mut().insert(principal);
    req.extensions_mut().insert(via);
    req.extensions_mut().insert(client);
    req.extensions_mut().insert(person.clone());
    let res = next.run(req).await;
    let tool_call = calls.iter().find(|c| c.tool.is_some());
    let action = match (need.action, tool_call) {
        (Some(a), _) => a.to_owned(),
        (None, Some(c)) if !is_read_tool(c) => format!("mcp.{}", c.tool.as_deref().unwrap_or("")),
        _ => return res,
    };
    if !res.status().is_success() && !res.status().is_redirection() {
        return res;
    }
    let note = res
        .extensions()
        .get::<AuditNote>()
        .cloned()
        .unwrap_or_default();
    let mut entry = AuditEntry::new(person, action);
    entry.ip = Some(client.ip.to_string());
    entry.session = note.session.or(session);
    entry.request = note.request.or_else(|| {
        tool_call
            .and_then(|c| c.arguments.as_ref()?.get("id")?.as_str().map(str::to_owned))
            .filter(|_| tool_call.and_then(|c| c.tool.as_deref()) == Some("codex_respond"))
    });
    entry.decision = note.decision.or_else(|| {
        let c = tool_call.filter(|c| c.tool.as_deref() == Some("codex_respond"))?;
        let answers = c.arguments.as_ref()?.get("answers")?;
        Some(match answers {
            Value::Array(a) => a
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join("; "),
            other => other.to_string(),
        })
    });
    entry.rule = note.rule;
    let mut detail =
        json!({"method": method.as_str(), "path": path, "status": res.status().as_u16()});
    if let Some(passkey) = note.step_up {
        detail["stepUp"] = json!({"passkey": passkey, "userVerified": true});
    }
    entry.detail = Some(detail);
    audit(gate, &entry).await;
    res
}

/// MCP tools that only read (not audited).
fn is_read_tool(c: &McpCall) -> bool {
    c.role == Role::Viewer
}

async fn audit(gate: &Gate, entry: &AuditEntry) {
    let Some(people) = gate.credentials.people() else {
        return;
    };
    if let Err(e) = people.audit(entry).await {
        tracing::warn!(action = %entry.action, "the audit log did not take an entry: {e}");
    }
}
