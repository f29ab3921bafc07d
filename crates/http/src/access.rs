//! What each route and each MCP tool needs: the one table of roles (viewer, approver,
//! operator, admin), read by the gate for every request before any handler runs, with the
//! audit action each state-changing route records. A route missing from the table needs
//! admin (fail closed); a token limited to some sessions reaches only routes naming one of
//! them (or lists filtered to them).

use codex_relay_core::people::{Grant, Role};
use serde_json::Value;

/// How a route relates to sessions, for tokens limited to some.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Not about sessions (the UI's files, health, the API document, `/api/me`): anyone
    /// signed in.
    Open,
    /// The path's `{id}` is a session.
    Session,
    /// A list the handler filters to the token's sessions.
    Filtered,
    /// The whole relay (other sessions, rules, users): refused to a token limited to sessions.
    Relay,
}

/// One row of the table.
#[derive(Debug, Clone, Copy)]
pub struct Need {
    pub role: Role,
    pub scope: Scope,
    /// The audit action a successful call records (`None`: reads are not audited).
    pub action: Option<&'static str>,
}

use Role::{Admin, Approver, Operator, Viewer};
use Scope::{Filtered, Open, Relay, Session};

/// `(method, path pattern, role, scope, action)`; `{x}` matches one segment, a trailing `*`
/// the rest. The first match wins.
const ROUTES: &[(&str, &str, Role, Scope, Option<&str>)] = &[
    ("GET", "/api/sessions", Viewer, Filtered, None),
    (
        "POST",
        "/api/sessions",
        Operator,
        Relay,
        Some("session.start"),
    ),
    ("GET", "/api/sessions/{id}", Viewer, Session, None),
    (
        "DELETE",
        "/api/sessions/{id}",
        Operator,
        Session,
        Some("session.close"),
    ),
    (
        "POST",
        "/api/sessions/{id}/messages",
        Operator,
        Session,
        Some("session.message"),
    ),
    (
        "POST",
        "/api/sessions/{id}/interrupt",
        Operator,
        Session,
        Some("session.interrupt"),
    ),
    (
        "POST",
        "/api/sessions/{id}/limits",
        Operator,
        Session,
        Some("session.limits"),
    ),
    (
        "POST",
        "/api/sessions/{id}/review",
        Operator,
        Session,
        Some("session.review"),
    ),
    (
        "POST",
        "/api/sessions/{id}/fork",
        Operator,
        Session,
        Some("session.fork"),
    ),
    (
        "POST",
        "/api/sessions/{id}/rollback",
        Operator,
        Session,
        Some("session.rollback"),
    ),
    (
        "POST",
        "/api/sessions/{id}/compact",
        Operator,
        Session,
        Some("session.compact"),
    ),
    (
        "POST",
        "/api/sessions/{id}/model",
        Operator,
        Session,
        Some("session.model"),
    ),
    (
        "POST",
        "/api/sessions/{id}/worktree/export",
        Operator,
        Session,
        Some("worktree.export"),
    ),
    (
        "POST",
        "/api/sessions/{id}/worktree/merge",
        Operator,
        Session,
        Some("worktree.merge"),
    ),
    ("GET", "/api/sessions/{id}/*", Viewer, Session, None),
    ("GET", "/api/threads/{id}", Viewer, Relay, None),
    (
        "POST",
        "/api/threads/{id}/fork",
        Operator,
        Relay,
        Some("thread.fork"),
    ),
    ("GET", "/api/stream", Viewer, Relay, None),
    ("GET", "/api/models", Viewer, Open, None),
    ("GET", "/api/rate-limits", Viewer, Relay, None),
    (
        "POST",
        "/api/codex/permission/respond",
        Approver,
        Filtered,
        Some("request.answer"),
    ),
    (
        "GET",
        "/api/codex/permission/pending",
        Viewer,
        Filtered,
        None,
    ),
    ("GET", "/api/rules", Viewer, Relay, None),
    ("GET", "/api/rules/suggest", Approver, Relay, None),
    ("POST", "/api/rules", Admin, Relay, Some("rule.put")),
    (
        "DELETE",
        "/api/rules/{name}",
        Admin,
        Relay,
        Some("rule.delete"),
    ),
    ("GET", "/api/notifications", Admin, Relay, None),
    // A request's delivery trail is on its card, which viewers see.
    ("GET", "/api/requests/{id}/deliveries", Viewer, Relay, None),
    ("GET", "/api/notifications/channels", Admin, Relay, None),
    (
        "GET",
        "/api/notifications/{id}/deliveries",
        Admin,
        Relay,
        None,
    ),
    (
        "POST",
        "/api/notifications/test",
        Admin,
        Relay,
        Some("notify.test"),
    ),
    ("GET", "/api/push/key", Viewer, Open, None),
    (
        "POST",
        "/api/push/subscriptions",
        Approver,
        Relay,
        Some("push.subscribe"),
    ),
    (
        "POST",
        "/api/push/unsubscribe",
        Approver,
        Relay,
        Some("push.unsubscribe"),
    ),
    ("GET", "/api/me", Viewer, Open, None),
    ("GET", "/api/users", Admin, Relay, None),
    ("POST", "/api/users", Admin, Relay, Some("user.create")),
    ("POST", "/api/users/{id}", Admin, Relay, Some("user.update")),
    ("GET", "/api/users/{id}/identities", Admin, Relay, None),
    (
        "POST",
        "/api/users/{id}/identities",
        Admin,
        Relay,
        Some("identity.bind"),
    ),
    (
        "DELETE",
        "/api/users/{id}/identities",
        Admin,
        Relay,
        Some("identity.unbind"),
    ),
    ("GET", "/api/tokens", Admin, Relay, None),
    ("POST", "/api/tokens", Admin, Relay, Some("token.create")),
    (
        "DELETE",
        "/api/tokens/{id}",
        Admin,
        Relay,
        Some("token.revoke"),
    ),
    ("GET", "/api/invitations", Admin, Relay, None),
    (
        "POST",
        "/api/invitations",
        Admin,
        Relay,
        Some("invitation.create"),
    ),
    // Passkeys: every named user manages their own (the admin: anyone's); a step-up's
    // challenge is for those who may answer.
    ("GET", "/api/passkeys", Viewer, Open, None),
    ("POST", "/api/passkeys/register", Viewer, Open, None),
    // A step-up for a request checks the approver role itself (one for your own passkeys
    // is anyone's).
    ("POST", "/api/passkeys/step-up", Viewer, Open, None),
    (
        "POST",
        "/api/passkeys",
        Viewer,
        Open,
        Some("passkey.register"),
    ),
    (
        "DELETE",
        "/api/passkeys/{id}",
        Viewer,
        Open,
        Some("passkey.remove"),
    ),
    ("GET", "/api/audit", Admin, Relay, None),
    ("GET", "/api/audit/export", Admin, Relay, None),
    ("GET", "/api/openapi.json", Viewer, Open, None),
    ("GET", "/healthz", Viewer, Open, None),
    ("GET", "/metrics", Viewer, Relay, None),
    // MCP: POSTs are checked per message ([`mcp_need`]); its GET stream and DELETE (end of
    // the MCP session) read nothing of their own.
    ("GET", "/mcp", Viewer, Open, None),
    ("DELETE", "/mcp", Viewer, Open, None),
    // The legacy contract's `codex` tool starts sessions.
    (
        "POST",
        "/mcp-server",
        Operator,
        Relay,
        Some("mcp-legacy.call"),
    ),
    ("GET", "/mcp-server", Viewer, Open, None),
    ("DELETE", "/mcp-server", Viewer, Open, None),
    // The UI's pages and files.
    ("GET", "/", Viewer, Open, None),
    ("GET", "/ui/*", Viewer, Open, None),
    // Browsers ask for it on their own: not found, never a refusal in the audit log.
    ("GET", "/favicon.ico", Viewer, Open, None),
    ("GET", "/invite/*", Viewer, Open, None),
    // Single sign-on's round trip: open (it is how a browser gets a login), like /login.
    ("GET", "/login/oidc", Viewer, Open, None),
    ("GET", "/login/oidc/callback", Viewer, Open, None),
];

fn matches(pattern: &str, path: &str) -> bool {
    let mut p = pattern.split('/');
    let mut s = path.split('/');
    loop {
        match (p.next(), s.next()) {
            (Some("*"), Some(seg)) => return !seg.is_empty(),
            (Some(a), Some(b)) if a.starts_with('{') => {
                if b.is_empty() {
                    return false;
                }
            }
            (Some(a), Some(b)) if a == b => {}
            (None, None) => return true,
            _ => return false,
        }
    }
}

/// What `method path` needs (HEAD as GET); a route not in the table needs admin.
pub fn need(method: &str, path: &str) -> Need {
    let method = if method == "HEAD" { "GET" } else { method };
    let path = if path.len() > 1 {
        path.trim_end_matches('/')
    } else {
        path
    };
    ROUTES
        .iter()
        .find(|(m, p, ..)| *m == method && matches(p, path))
        .map(|(_, _, role, scope, action)| Need {
            role: *role,
            scope: *scope,
            action: *action,
        })
        .unwrap_or(Need {
            role: Admin,
            scope: Relay,
            action: Some("other"),
        })
}

/// The session a `/api/sessions/{id}/...` path names.
pub fn path_session(path: &str) -> Option<&str> {
    path.strip_prefix("/api/sessions/")
        .and_then(|rest| rest.split('/').next())
        .filter(|s| !s.is_empty())
}

/// What an MCP tool needs.
fn tool_role(name: &str, args: &Value) -> Role {
    match name {
        "codex_status" | "codex_list" => Viewer,
        "codex_respond" => Approver,
        "codex_worktree"
            if args
                .get("action")
                .and_then(Value::as_str)
                .is_none_or(|a| a == "diff") =>
        {
            Viewer
        }
        // With nothing to change it only reads.
        "codex_limits"
            if ["budget", "deadlineSeconds", "idleSeconds", "prices"]
                .iter()
                .all(|k| args.get(k).is_none_or(Value::is_null)) =>
        {
            Viewer
        }
        "codex_thread" if args.get("op").and_then(Value::as_str) == Some("models") => Viewer,
        "codex_start" | "codex_say" | "codex_interrupt" | "codex_limits" | "codex_worktree"
        | "codex_thread" => Operator,
        // A tool this table does not know: only the admin.
        _ => Admin,
    }
}

/// One MCP message as the table sees it: the role it needs, the tool, the session it names.
#[derive(Debug, Clone, PartialEq)]
pub struct McpCall {
    pub role: Role,
    pub tool: Option<String>,
    pub session: Option<String>,
    pub arguments: Option<Value>,
}

/// What one JSON-RPC message posted to `/mcp` needs: a tool call by its tool, an answer to an
/// elicitation (a response from the client) approver, everything else (initialize, lists,
/// pings, notifications) viewer.
pub fn mcp_need(msg: &Value) -> McpCall {
    let method = msg.get("method").and_then(Value::as_str);
    match method {
        Some("tools/call") => {
            let params = msg.get("params").cloned().unwrap_or(Value::Null);
            let name = params.get("name").and_then(Value::as_str).unwrap_or("");
            let args = params.get("arguments").cloned().unwrap_or(Value::Null);
            // A call carrying answers to an `InputRequiredResult` (codex_status's approval
            // forms, 2026-07-28 clients) answers requests: an approver's act whatever the tool.
            let answers = params.get("inputResponses").is_some_and(|v| !v.is_null());
            let role = tool_role(name, &args);
            McpCall {
                role: if answers { role.max(Approver) } else { role },
                tool: Some(name.to_owned()),
                session: args
                    .get("sessionId")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                arguments: Some(args),
            }
        }
        Some(_) => McpCall {
            role: Viewer,
            tool: None,
            session: None,
            arguments: None,
        },
        // A response: the client answering the relay's elicitation (an approval form).
        None => McpCall {
            role: Approver,
            tool: Some("elicitation".into()),
            session: None,
            arguments: None,
        },
    }
}

/// Why a grant may not do what `need` needs with `session` (the path's or the tool's), if it
/// may not: the 403 message.
pub fn refusal(grant: &Grant, need: Need, session: Option<&str>, what: &str) -> Option<String> {
    if grant.role < need.role {
        return Some(format!(
            "{what} needs the {} role; {} has {} (ask an admin for a token with that role)",
            need.role, grant.user_name, grant.role
        ));
    }
    let Some(allowed) = &grant.sessions else {
        return None;
    };
    match (need.scope, session) {
        (Scope::Open | Scope::Filtered, _) => None,
        (Scope::Session, Some(id)) if allowed.iter().any(|s| s == id) => None,
        _ => Some(format!(
            "{what} is outside this token's sessions ({}): a token limited to sessions reaches only those",
            allowed.join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_route_finds_its_row_and_unknown_ones_need_admin() {
        assert_eq!(need("POST", "/api/sessions").role, Operator);
        assert_eq!(need("GET", "/api/sessions").scope, Filtered);
        assert_eq!(need("GET", "/api/sessions/s1/stream").role, Viewer);
        assert_eq!(need("GET", "/api/sessions/s1/stream").scope, Session);
        assert_eq!(need("POST", "/api/sessions/s1/messages").role, Operator);
        assert_eq!(need("POST", "/api/codex/permission/respond").role, Approver);
        assert_eq!(need("POST", "/api/rules").role, Admin);
        assert_eq!(need("DELETE", "/api/rules/x").action, Some("rule.delete"));
        assert_eq!(need("GET", "/ui/app.js").scope, Open);
        assert_eq!(need("GET", "/favicon.ico").role, Viewer);
        assert_eq!(
            (need("GET", "/").role, need("GET", "/").scope),
            (Viewer, Open)
        );
        assert_eq!(need("GET", "/api/sessions/").scope, Filtered);
        assert_eq!(need("PUT", "/api/sessions").role, Admin);
        assert_eq!(need("GET", "/api/secret-thing").role, Admin);
        assert_eq!(need("GET", "/api/sessions//x").role, Admin);
        assert_eq!(path_session("/api/sessions/abc/messages"), Some("abc"));
        // The delivery trail: on a card (viewers), per notification and the test (admin).
        assert_eq!(need("GET", "/api/requests/r1/deliveries").role, Viewer);
        assert_eq!(need("GET", "/api/notifications/n1/deliveries").role, Admin);
        assert_eq!(
            need("POST", "/api/notifications/test").action,
            Some("notify.test")
        );
        // Passkeys: everyone their own; a step-up's challenge only for those who may answer.
        assert_eq!(need("POST", "/api/passkeys/register").role, Viewer);
        assert_eq!(
            need("POST", "/api/passkeys").action,
            Some("passkey.register")
        );
        assert_eq!(
            need("DELETE", "/api/passkeys/k1").action,
            Some("passkey.remove")
        );
        assert_eq!(need("POST", "/api/passkeys/step-up").scope, Open);
        // Single sign-on: its round trip is open (it makes the login); identities are admin's.
        assert_eq!(need("GET", "/login/oidc").scope, Open);
        assert_eq!(need("GET", "/login/oidc/callback").scope, Open);
        assert_eq!(need("POST", "/login/oidc/callback").role, Admin);
        assert_eq!(need("GET", "/api/users/u1/identities").role, Admin);
        assert_eq!(
            need("POST", "/api/users/u1/identities").action,
            Some("identity.bind")
        );
        assert_eq!(
            need("DELETE", "/api/users/u1/identities").action,
            Some("identity.unbind")
        );
    }

    #[test]
    fn mcp_messages_need_their_tools_role() {
        let call = |name: &str, args: Value| {
            mcp_need(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": name, "arguments": args}}))
        };
        assert_eq!(call("codex_start", json!({"prompt": "x"})).role, Operator);
        assert_eq!(
            call("codex_respond", json!({"sessionId": "s"})).role,
            Approver
        );
        assert_eq!(
            call("codex_status", json!({"sessionId": "s"}))
                .session
                .as_deref(),
            Some("s")
        );
        assert_eq!(
            call("codex_worktree", json!({"action": "merge"})).role,
            Operator
        );
        assert_eq!(call("codex_worktree", json!({})).role, Viewer);
        assert_eq!(call("codex_limits", json!({"sessionId": "s"})).role, Viewer);
        assert_eq!(
            call("codex_limits", json!({"budget": {"turns": 1}})).role,
            Operator
        );
        assert_eq!(call("codex_thread", json!({"op": "models"})).role, Viewer);
        assert_eq!(call("codex_thread", json!({"op": "fork"})).role, Operator);
        assert_eq!(call("codex_new_thing", json!({})).role, Admin);
        assert_eq!(
            mcp_need(&json!({"method": "tools/list", "id": 2})).role,
            Viewer
        );
        // codex_status reads, but answers to its approval forms answer requests.
        assert_eq!(call("codex_status", json!({"sessionId": "s"})).role, Viewer);
        assert_eq!(
            mcp_need(&json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                "params": {"name": "codex_status", "arguments": {"sessionId": "s"},
                           "inputResponses": {"r1": {"action": "accept"}}}}))
            .role,
            Approver
        );
        assert_eq!(
            mcp_need(&json!({"method": "tools/list", "id": 2})).role,
            Viewer
        );
        assert_eq!(
            mcp_need(&json!({"id": 3, "result": {"action": "accept"}})).role,
            Approver
        );
    }

    #[test]
    fn a_scoped_grant_reaches_only_its_sessions() {
        let g = Grant {
            token_id: "t".into(),
            user_id: "u".into(),
            user_name: "ann".into(),
            role: Operator,
            sessions: Some(vec!["s1".into()]),
        };
        let n = need("POST", "/api/sessions/s1/messages");
        assert_eq!(refusal(&g, n, Some("s1"), "this"), None);
        assert!(refusal(&g, n, Some("s2"), "this").is_some());
        assert!(refusal(&g, need("GET", "/api/stream"), None, "this").is_some());
        assert!(refusal(&g, need("POST", "/api/sessions"), None, "this").is_some());
        let r = refusal(&g, need("POST", "/api/rules"), None, "POST /api/rules").unwrap();
        assert!(
            r.contains("needs the admin role") && r.contains("ann has operator"),
            "{r}"
        );
    }
}
