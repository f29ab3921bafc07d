//! The legacy `codex/event` messages, synthesized from the engine's session events: task
//! start/complete, user and agent messages (and deltas), exec and patch begin/end, approval
//! requests, token counts, aborted turns and errors. Stateful only to pair a tool call's end
//! with its start and a patch's end with its file changes.

use std::collections::HashMap;

use codex_relay_core::event::{Delta, ToolEndStatus, TurnEndStatus, Usage};
use codex_relay_core::{Envelope, Ev, PendingDetails, PendingView, Role};
use codex_relay_protocol::v2::FileUpdateChange;
use serde_json::{Map, Value, json};

use crate::shell::split;

/// What one session event means to the call that follows it.
#[derive(Debug, Default, PartialEq)]
pub struct Translated {
    /// Legacy messages (`msg` of `codex/event`), in order.
    pub msgs: Vec<Value>,
    /// A request Codex opened (to ask the client).
    pub request: Option<PendingView>,
    /// The turn ended (completed, cancelled or failed).
    pub end: Option<(TurnEndStatus, Option<String>)>,
}

struct Call {
    name: String,
    args: Value,
}

/// Translates one session's events for one call.
#[derive(Default)]
pub struct Translator {
    calls: HashMap<String, Call>,
    /// File changes seen for a patch call (legacy `changes` shape), keyed by call id.
    changes: Map<String, Value>,
    /// The last agent message of the turn (the tool's `content`).
    pub last_agent_message: Option<String>,
}

/// A file change in the legacy shape: `{type: add, content}`, `{type: delete, content}`,
/// `{type: update, unified_diff, move_path}`.
pub fn legacy_change(kind: &str, diff: &str, move_path: Option<&Value>) -> Value {
    match kind {
        "add" => json!({"type": "add", "content": diff}),
        "delete" => json!({"type": "delete", "content": diff}),
        _ => {
            json!({"type": "update", "unified_diff": diff, "move_path": move_path.cloned().unwrap_or(Value::Null)})
        }
    }
}

fn token_usage(u: &Usage) -> Value {
    json!({
        "input_tokens": u.input_tokens,
        "cached_input_tokens": u.cached_input_tokens,
        "output_tokens": u.output_tokens,
        "reasoning_output_tokens": u.reasoning_output_tokens,
        "total_tokens": u.total_tokens,
    })
}

/// The legacy `changes` map of a file-change approval (path → change).
pub fn changes_of(changes: &[FileUpdateChange]) -> Map<String, Value> {
    let mut out = Map::new();
    for c in changes {
        let kind = c.kind["type"].as_str().unwrap_or("update");
        out.insert(
            c.path.clone(),
            legacy_change(kind, &c.diff, c.kind.get("move_path")),
        );
    }
    out
}

impl Translator {
    /// The legacy messages for one session event.
    pub fn event(&mut self, env: &Envelope) -> Translated {
        let turn = env.turn.clone().unwrap_or_default();
        let mut out = Translated::default();
        match &env.ev {
            Ev::TurnStart {} => out.msgs.push(json!({"type": "task_started", "model_context_window": null})),
            Ev::Text { text, thinking } => match (env.role, thinking) {
                (_, true) => out.msgs.push(json!({"type": "agent_reasoning", "text": text})),
                (Role::User, false) => out.msgs.push(
                    json!({"type": "user_message", "message": text, "images": []}),
                ),
                (Role::Agent | Role::System, false) => {
                    self.last_agent_message = Some(text.clone());
                    out.msgs.push(json!({"type": "agent_message", "message": text}));
                }
            },
            Ev::ToolCallStart {
                call, name, args, ..
            } => {
                self.calls.insert(
                    call.clone(),
                    Call {
                        name: name.clone(),
                        args: args.clone(),
                    },
                );
                match name.as_str() {
                    "CodexBash" => {
                        let command = args["command"].as_str().unwrap_or("");
                        out.msgs.push(json!({
                            "type": "exec_command_begin", "call_id": call, "turn_id": turn,
                            "command": split(command), "cwd": args["cwd"],
                        }));
                    }
                    "CodexPatch" => {
                        let changes: Map<String, Value> = args["paths"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(Value::as_str)
                            .map(|p| (p.to_owned(), json!({"type": "update"})))
                            .collect();
                        out.msgs.push(json!({
                            "type": "patch_apply_begin", "call_id": call, "turn_id": turn,
                            "auto_approved": false, "changes": changes,
                        }));
                    }
                    _ => out.msgs.push(json!({
                        "type": "mcp_tool_call_begin", "call_id": call,
                        "invocation": {"tool": name, "arguments": args},
                    })),
                }
            }
            Ev::File { path, kind, diff } => {
                self.changes
                    .insert(path.clone(), legacy_change(kind, diff, None));
            }
            Ev::ToolCallEnd {
                call,
                status,
                output,
                exit_code,
            } => {
                // A call that never started (a command declined before it ran) has no
                // end in the legacy stream either.
                let Some(started) = self.calls.remove(call) else {
                    return out;
                };
                let name = started.name.as_str();
                let output = output.clone().unwrap_or_default();
                match name {
                    "CodexBash" => {
                        let args = started.args;
                        let command = args["command"].as_str().unwrap_or("");
                        let code = exit_code.unwrap_or(match status {
                            ToolEndStatus::Completed => 0,
                            ToolEndStatus::Failed | ToolEndStatus::Declined => -1,
                        });
                        out.msgs.push(json!({
                            "type": "exec_command_end", "call_id": call, "turn_id": turn,
                            "command": split(command), "cwd": args["cwd"],
                            "stdout": output, "stderr": "", "aggregated_output": output,
                            "formatted_output": output, "exit_code": code,
                        }));
                    }
                    "CodexPatch" => {
                        let changes = std::mem::take(&mut self.changes);
                        out.msgs.push(json!({
                            "type": "patch_apply_end", "call_id": call, "turn_id": turn,
                            "stdout": output, "stderr": "",
                            "success": *status == ToolEndStatus::Completed, "changes": changes,
                        }));
                    }
                    _ => out.msgs.push(json!({
                        "type": "mcp_tool_call_end", "call_id": call,
                        "result": {"output": output, "success": *status == ToolEndStatus::Completed},
                    })),
                }
            }
            Ev::TurnEnd { status, error, .. } => {
                match status {
                    TurnEndStatus::Completed => out.msgs.push(json!({
                        "type": "task_complete", "last_agent_message": self.last_agent_message,
                    })),
                    TurnEndStatus::Cancelled => out
                        .msgs
                        .push(json!({"type": "turn_aborted", "reason": "interrupted"})),
                    TurnEndStatus::Failed => out.msgs.push(json!({
                        "type": "error",
                        "message": error.clone().unwrap_or_else(|| "the turn failed".into()),
                    })),
                }
                out.end = Some((*status, error.clone()));
            }
            Ev::Usage { total, last } => out.msgs.push(json!({
                "type": "token_count",
                "info": {"total_token_usage": token_usage(total), "last_token_usage": token_usage(last), "model_context_window": null},
                "rate_limits": null,
            })),
            Ev::Error { message, retrying } => out.msgs.push(if *retrying {
                json!({"type": "stream_error", "message": message})
            } else {
                json!({"type": "error", "message": message})
            }),
            Ev::Plan { steps } => out
                .msgs
                .push(json!({"type": "plan_update", "explanation": null, "plan": steps})),
            Ev::RequestOpened { request } => {
                match &request.details {
                    PendingDetails::CommandApproval {
                        command,
                        cwd,
                        reason,
                        item_id,
                        ..
                    } => out.msgs.push(json!({
                        "type": "exec_approval_request", "call_id": item_id,
                        "turn_id": turn, "command": split(command),
                        "cwd": cwd, "reason": reason,
                    })),
                    PendingDetails::FileChangeApproval {
                        reason,
                        grant_root,
                        item_id,
                        changes,
                    } => out.msgs.push(json!({
                        "type": "apply_patch_approval_request", "call_id": item_id,
                        "turn_id": turn, "changes": changes_of(changes),
                        "reason": reason, "grant_root": grant_root,
                    })),
                    PendingDetails::PermissionsApproval { .. }
                    | PendingDetails::Question { .. }
                    | PendingDetails::Elicitation { .. }
                    | PendingDetails::ToolCall { .. }
                    | PendingDetails::Other { .. } => {}
                }
                out.request = Some((**request).clone());
            }
            // Carried elsewhere or not part of the legacy stream: the relay's own status and
            // resolutions, images, and raw Codex notifications the engine does not map.
            // Who answered, as a background event (the legacy stream has no message of its
            // own for it) when it was not this client: a rule (the only word a legacy client
            // gets of it), another front, a timeout, a restart. Its own answers keep the
            // stream exactly as the legacy server's.
            Ev::RequestResolved {
                decision,
                by,
                reason,
                request,
                ..
            } if *by != crate::approval::BY => {
                let what = request
                    .as_ref()
                    .map(|r| format!("{}: ", r.question))
                    .unwrap_or_default();
                let why = reason
                    .as_ref()
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default();
                out.msgs.push(json!({"type": "background_event",
                    "message": format!("{what}{} by {}{why}", decision.as_str(), by.as_str())}));
            }
            // The legacy stream's word for a notice that is not part of the conversation.
            Ev::Note { message } => out
                .msgs
                .push(json!({"type": "background_event", "message": message})),
            // A review's findings as the legacy stream's notice (the review turn ends with
            // its rendered text as the agent's message too).
            Ev::Review { review } => out
                .msgs
                .push(json!({"type": "background_event", "message": review.text})),
            Ev::RequestResolved { .. }
            | Ev::Photo { .. }
            | Ev::Status { .. }
            | Ev::Codex { .. }
            | Ev::RolledBack { .. }
            | Ev::Forked { .. } => {}
        }
        out
    }

    /// The legacy message for a live delta.
    pub fn delta(&self, d: &Delta) -> Option<Value> {
        match d.stream.as_str() {
            "text" => Some(json!({"type": "agent_message_delta", "delta": d.delta})),
            "thinking" => Some(json!({"type": "agent_reasoning_delta", "delta": d.delta})),
            // Command output deltas are base64 chunks in the legacy stream; the end event
            // carries the whole output.
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(role: Role, ev: Value) -> Envelope {
        serde_json::from_value(
            json!({"id": "s:1", "seq": 1, "time": 0, "role": role, "turn": "u", "ev": ev}),
        )
        .unwrap()
    }

    fn types(tr: &mut Translator, evs: &[(Role, Value)]) -> Vec<String> {
        evs.iter()
            .flat_map(|(r, e)| tr.event(&env(*r, e.clone())).msgs)
            .map(|m| m["type"].as_str().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn a_command_turn_reads_like_the_legacy_stream() {
        let mut tr = Translator::default();
        let seq = types(
            &mut tr,
            &[
                (Role::System, json!({"t": "turn-start"})),
                (Role::User, json!({"t": "text", "text": "go"})),
                (
                    Role::Agent,
                    json!({"t": "tool-call-start", "call": "c1", "name": "CodexBash", "title": "t",
                    "description": "d", "args": {"command": "/bin/bash -lc 'ls'", "cwd": "/w"}}),
                ),
                (
                    Role::Agent,
                    json!({"t": "tool-call-end", "call": "c1", "status": "completed", "output": "a\n", "exit_code": 0}),
                ),
                (Role::Agent, json!({"t": "text", "text": "done"})),
                (Role::System, json!({"t": "status", "status": "idle"})),
                (
                    Role::System,
                    json!({"t": "turn-end", "status": "completed"}),
                ),
            ],
        );
        assert_eq!(
            seq,
            [
                "task_started",
                "user_message",
                "exec_command_begin",
                "exec_command_end",
                "agent_message",
                "task_complete"
            ]
        );
        assert_eq!(tr.last_agent_message.as_deref(), Some("done"));
    }

    #[test]
    fn a_declined_command_that_never_started_has_no_end_and_aborts_read_as_such() {
        let mut tr = Translator::default();
        let end = tr.event(&env(
            Role::Agent,
            json!({"t": "tool-call-end", "call": "c9", "status": "declined"}),
        ));
        assert!(end.msgs.is_empty());
        let aborted = tr.event(&env(
            Role::System,
            json!({"t": "turn-end", "status": "cancelled"}),
        ));
        assert_eq!(
            aborted.msgs,
            vec![json!({"type": "turn_aborted", "reason": "interrupted"})]
        );
        assert_eq!(aborted.end, Some((TurnEndStatus::Cancelled, None)));
    }

    #[test]
    fn a_resolution_this_client_did_not_make_is_told_as_a_background_event() {
        let mut tr = Translator::default();
        let ruled = json!({"t": "request-resolved", "id": "r1", "decision": "deny",
            "by": "rule:no-rm", "reason": "keep it",
            "request": {"id": "r1", "sessionId": "s", "kind": "command_approval",
                "question": "Run rm -rf b?", "options": [], "details": {"command": "rm -rf b"},
                "createdAt": 0, "deadline": 0}});
        let msgs = tr.event(&env(Role::System, ruled)).msgs;
        assert_eq!(
            msgs,
            vec![json!({"type": "background_event",
                "message": "Run rm -rf b?: deny by rule:no-rm (keep it)"})]
        );
        let own = json!({"t": "request-resolved", "id": "r2", "decision": "approve",
            "by": crate::approval::BY.as_str()});
        assert!(tr.event(&env(Role::System, own)).msgs.is_empty());
        let timeout = json!({"t": "request-resolved", "id": "r3", "decision": "deny",
            "by": "timeout"});
        assert_eq!(
            types(&mut tr, &[(Role::System, timeout)]),
            vec!["background_event"]
        );
    }
}
