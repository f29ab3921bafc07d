//! Approvals the legacy way: an `elicitation/create` request with an empty form and the
//! `codex_elicitation` kind (`exec-approval`, `patch-approval`) plus the `codex_*` fields
//! legacy clients read, answered with `{decision: approved | approved_for_session | denied |
//! abort}`.

use codex_relay_core::{Answer, PendingDetails, PendingView, Scope};
use serde_json::{Value, json};

use crate::events::changes_of;
use crate::shell::split;

/// Who answers through this path, as recorded in `request-resolved`.
pub const BY: codex_relay_core::Decider =
    codex_relay_core::Decider::Person(codex_relay_core::Front::Legacy);

/// The `elicitation/create` params for a pending request, or `None` for kinds the legacy
/// server never asked about (they stay pending: the session tools or the timeout resolve them).
pub fn elicitation_params(p: &PendingView, thread_id: &str, tool_call_id: &str) -> Option<Value> {
    let event_id = p.turn.clone().unwrap_or_default();
    let (mut params, item_id, reason, grant_root) = match &p.details {
        PendingDetails::CommandApproval {
            command,
            cwd,
            reason,
            item_id,
            ..
        } => {
            let cwd = cwd.as_deref().unwrap_or("");
            (
                json!({
                    "message": format!("Allow Codex to run `{command}` in `{cwd}`?"),
                    "codex_elicitation": "exec-approval",
                    "codex_command": split(command),
                    "codex_cwd": cwd,
                    "codex_parsed_cmd": parsed(command),
                }),
                item_id,
                reason,
                &None,
            )
        }
        PendingDetails::FileChangeApproval {
            reason,
            grant_root,
            item_id,
            changes,
        } => (
            json!({
                "message": "Allow Codex to apply proposed code changes?",
                "codex_elicitation": "patch-approval",
                "codex_changes": changes_of(changes),
            }),
            item_id,
            reason,
            grant_root,
        ),
        PendingDetails::PermissionsApproval { .. }
        | PendingDetails::Question { .. }
        | PendingDetails::Elicitation { .. }
        | PendingDetails::ToolCall { .. }
        | PendingDetails::Other { .. } => return None,
    };
    params["requestedSchema"] = json!({"type": "object", "properties": {}});
    params["threadId"] = json!(thread_id);
    params["codex_mcp_tool_call_id"] = json!(tool_call_id);
    params["codex_event_id"] = json!(event_id);
    params["codex_call_id"] = json!(item_id);
    if let Some(reason) = reason {
        params["codex_reason"] = json!(reason);
    }
    if let Some(root) = grant_root {
        params["codex_grant_root"] = json!(root);
    }
    Some(params)
}

/// `codex_parsed_cmd`: the legacy server's reading of the command. codex-relay does not
/// classify commands, so it is the shell script itself, of type `unknown`.
fn parsed(command: &str) -> Value {
    let words = split(command);
    let script = match words.as_slice() {
        [_, flag, script] if flag.starts_with('-') && flag.ends_with('c') => script.clone(),
        _ => command.to_owned(),
    };
    json!([{"type": "unknown", "cmd": script}])
}

/// The engine answer for a legacy elicitation result. Like the legacy server, anything that is
/// not one of the four decisions counts as `denied`.
pub fn answer(result: &Value) -> Answer {
    match result.get("decision").and_then(Value::as_str) {
        Some("approved") => Answer::Approve { scope: Scope::Once },
        Some("approved_for_session") => Answer::Approve {
            scope: Scope::Session,
        },
        Some("abort") => Answer::Cancel,
        Some("denied") | Some(_) | None => Answer::Deny { reason: None },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(kind: &str, details: Value) -> PendingView {
        serde_json::from_value(json!({
            "id": "req_1", "sessionId": "s1", "kind": kind, "question": "q", "options": [],
            "details": details, "turn": "t1", "createdAt": 0, "deadline": 1
        }))
        .unwrap()
    }

    #[test]
    fn exec_approvals_carry_the_codex_fields() {
        let p = view(
            "command_approval",
            json!({"command": "/bin/bash -lc 'touch a'", "cwd": "/w", "itemId": "call-1", "reason": null}),
        );
        let e = elicitation_params(&p, "th", "7").unwrap();
        assert_eq!(e["codex_elicitation"], "exec-approval");
        assert_eq!(e["codex_command"], json!(["/bin/bash", "-lc", "touch a"]));
        assert_eq!(e["codex_call_id"], "call-1");
        assert_eq!(e["codex_mcp_tool_call_id"], "7");
        assert_eq!(e["codex_cwd"], "/w");
        assert_eq!(
            e["requestedSchema"],
            json!({"type": "object", "properties": {}})
        );
        assert!(e.get("codex_reason").is_none());
        assert_eq!(
            e["codex_parsed_cmd"],
            json!([{"type": "unknown", "cmd": "touch a"}])
        );
    }

    #[test]
    fn patch_approvals_announce_the_changes() {
        let p = view(
            "file_change_approval",
            json!({"itemId": "call-p", "changes": [{"path": "/w/a.txt", "kind": {"type": "add"}, "diff": "hi\n"}]}),
        );
        let e = elicitation_params(&p, "th", "7").unwrap();
        assert_eq!(e["codex_elicitation"], "patch-approval");
        assert_eq!(
            e["codex_changes"],
            json!({"/w/a.txt": {"type": "add", "content": "hi\n"}})
        );
        assert!(elicitation_params(&view("tool_call", json!({})), "th", "7").is_none());
    }

    #[test]
    fn decisions_map_like_the_legacy_server() {
        assert_eq!(answer(&json!({"decision": "approved"})), Answer::approve());
        assert_eq!(
            answer(&json!({"decision": "approved_for_session"})),
            Answer::Approve {
                scope: Scope::Session
            }
        );
        let deny = Answer::Deny { reason: None };
        assert_eq!(answer(&json!({"decision": "denied"})), deny);
        assert_eq!(answer(&json!({"decision": "abort"})), Answer::Cancel);
        assert_eq!(answer(&json!({"action": "accept", "content": {}})), deny);
    }
}
