//! Maps app-server notifications to session-protocol events (the one place that knows both).

use codex_relay_protocol::v2::{
    DeltaNotification, ItemStatus, ServerNotification, ThreadItem, TokenUsage, TurnStatus, surface,
};
use serde_json::{Value, json};

use crate::event::{Delta, Ev, Role, ToolEndStatus, TurnEndStatus, Usage};

/// What one notification becomes.
#[derive(Debug, Default, PartialEq)]
pub struct Mapped {
    /// Events for the log, each with its role and turn.
    pub events: Vec<(Role, Option<String>, Ev)>,
    /// Streaming text for live subscribers only.
    pub delta: Option<Delta>,
}

impl Mapped {
    fn one(role: Role, turn: Option<String>, ev: Ev) -> Self {
        Mapped {
            events: vec![(role, turn, ev)],
            delta: None,
        }
    }
}

/// Notifications not shown as events (Codex's bookkeeping for its own UIs, such as
/// `thread/readState/changed`): those the protocol's surface list calls quiet.
fn quiet(method: &str) -> bool {
    surface::notification(method) == Some(surface::NotificationHandling::Quiet)
}

/// Maps one notification. Pure: the caller tracks turns and statuses.
pub fn map(n: &ServerNotification) -> Mapped {
    use ServerNotification as N;
    match n {
        N::TurnStarted(t) => Mapped::one(Role::System, Some(t.turn.id.clone()), Ev::TurnStart {}),
        N::TurnCompleted(t) => {
            let status = match t.turn.status {
                TurnStatus::Completed => TurnEndStatus::Completed,
                TurnStatus::Interrupted => TurnEndStatus::Cancelled,
                TurnStatus::Failed | TurnStatus::InProgress | TurnStatus::Unknown => {
                    TurnEndStatus::Failed
                }
            };
            let error = t.turn.error.as_ref().map(error_message);
            let error_kind = t.turn.error.as_ref().and_then(error_kind);
            Mapped::one(
                Role::System,
                Some(t.turn.id.clone()),
                Ev::TurnEnd {
                    status,
                    error,
                    stopped: None,
                    usage: None,
                    error_kind,
                },
            )
        }
        N::ItemStarted(i) => match item_started(&i.item) {
            Some(ev) => Mapped::one(Role::Agent, Some(i.turn_id.clone()), ev),
            None => Mapped::default(),
        },
        N::ItemCompleted(i) => {
            let turn = Some(i.turn_id.clone());
            let events = item_completed(&i.item)
                .into_iter()
                .map(|(role, ev)| (role, turn.clone(), ev))
                .collect();
            Mapped {
                events,
                delta: None,
            }
        }
        N::TokenUsageUpdated(u) => Mapped::one(
            Role::System,
            u.turn_id.clone(),
            Ev::Usage {
                total: usage(&u.token_usage.total),
                last: usage(&u.token_usage.last),
            },
        ),
        N::TurnPlanUpdated(p) => Mapped::one(
            Role::Agent,
            Some(p.turn_id.clone()),
            Ev::Plan {
                steps: serde_json::to_value(&p.plan).unwrap_or(Value::Null),
            },
        ),
        N::Error(e) => Mapped::one(
            Role::System,
            e.turn_id.clone(),
            Ev::Error {
                message: e.message().to_owned(),
                retrying: e.will_retry,
            },
        ),
        N::AgentMessageDelta(d) => delta(d, "text"),
        N::ReasoningSummaryDelta(d) | N::ReasoningTextDelta(d) => delta(d, "thinking"),
        N::CommandOutputDelta(d) => delta(d, "output"),
        // Known, and carried elsewhere: the thread's own lifecycle (the session tracks it), the
        // running diff (the file events carry each change), and request resolution (the broker
        // records who answered).
        N::ThreadStarted(_)
        | N::ThreadStatusChanged(_)
        | N::TurnDiffUpdated(_)
        | N::ServerRequestResolved(_) => Mapped::default(),
        // Codex's own bookkeeping for its UIs, with nothing in it for a person (the raw line
        // is kept with the others).
        N::Unknown { method, .. } if quiet(method) => Mapped::default(),
        N::Unknown { method, params } => Mapped::one(
            Role::System,
            None,
            Ev::Codex {
                method: method.clone(),
                params: params.clone(),
            },
        ),
    }
}

fn delta(d: &DeltaNotification, stream: &str) -> Mapped {
    Mapped {
        events: Vec::new(),
        delta: Some(Delta {
            turn: d.turn_id.clone(),
            item: d.item_id.clone(),
            stream: stream.into(),
            delta: d.delta.clone(),
            invoke: None,
            agent: None,
        }),
    }
}

fn usage(u: &TokenUsage) -> Usage {
    Usage {
        input_tokens: u.input_tokens,
        cached_input_tokens: u.cached_input_tokens,
        output_tokens: u.output_tokens,
        reasoning_output_tokens: u.reasoning_output_tokens,
        total_tokens: u.total_tokens,
    }
}

fn error_message(e: &Value) -> String {
    e.get("message")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| e.to_string())
}

/// The kind of Codex's error (`codexErrorInfo`): its name, a string or an object's one key
/// (`{"responseStreamDisconnected": {...}}`).
fn error_kind(e: &Value) -> Option<String> {
    match e.get("codexErrorInfo")? {
        Value::String(s) => Some(s.clone()),
        Value::Object(m) => m.keys().next().cloned(),
        _ => None,
    }
}

/// A short one-line title for a command.
fn title(command: &str) -> String {
    let line = command.lines().next().unwrap_or("");
    if line.chars().count() > 80 {
        format!("{}…", line.chars().take(79).collect::<String>())
    } else {
        line.to_owned()
    }
}

fn item_started(item: &ThreadItem) -> Option<Ev> {
    match item {
        ThreadItem::CommandExecution(c) => Some(Ev::ToolCallStart {
            call: c.id.clone(),
            name: "CodexBash".into(),
            title: title(&c.command),
            description: c.command.clone(),
            args: json!({"command": c.command, "cwd": c.cwd}),
        }),
        ThreadItem::FileChange(f) => {
            let paths: Vec<&str> = f.changes.iter().map(|c| c.path.as_str()).collect();
            Some(Ev::ToolCallStart {
                call: f.id.clone(),
                name: "CodexPatch".into(),
                title: format!("edit {}", paths.join(", ")),
                description: format!("apply a patch to {} file(s)", paths.len()),
                args: json!({"paths": paths}),
            })
        }
        ThreadItem::DynamicToolCall(t) => Some(Ev::ToolCallStart {
            call: t.id.clone(),
            name: t.tool.clone(),
            title: t.tool.clone(),
            description: format!("dynamic tool {}", t.tool),
            args: t.arguments.clone(),
        }),
        ThreadItem::McpToolCall(t) => Some(Ev::ToolCallStart {
            call: t.id.clone(),
            name: format!("mcp__{}__{}", t.server, t.tool),
            title: format!("{}/{}", t.server, t.tool),
            description: format!("MCP tool {} of server {}", t.tool, t.server),
            args: t.arguments.clone(),
        }),
        ThreadItem::CollabAgentToolCall(c) => Some(Ev::ToolCallStart {
            call: c.id.clone(),
            name: "CodexAgent".into(),
            title: match c.prompt.as_deref().map(title).filter(|p| !p.is_empty()) {
                Some(prompt) => format!("{}: {prompt}", c.tool),
                None => c.tool.clone(),
            },
            description: format!("sub-agent tool {}", c.tool),
            args: json!({"tool": c.tool, "prompt": c.prompt, "model": c.model,
                "receiverThreadIds": c.receiver_thread_ids}),
        }),
        // Messages and reasoning are logged whole when they complete.
        ThreadItem::UserMessage(_)
        | ThreadItem::AgentMessage(_)
        | ThreadItem::Reasoning(_)
        | ThreadItem::Other(_) => None,
    }
}

/// Whether an item in Codex's record is over (messages always are).
pub fn item_finished(item: &ThreadItem) -> bool {
    let status = match item {
        ThreadItem::CommandExecution(i) => i.status,
        ThreadItem::FileChange(i) => i.status,
        ThreadItem::DynamicToolCall(i) => i.status,
        ThreadItem::McpToolCall(i) => i.status,
        ThreadItem::CollabAgentToolCall(i) => i.status,
        ThreadItem::UserMessage(_)
        | ThreadItem::AgentMessage(_)
        | ThreadItem::Reasoning(_)
        | ThreadItem::Other(_) => ItemStatus::Completed,
    };
    status != ItemStatus::InProgress
}

fn end_status(s: ItemStatus) -> ToolEndStatus {
    match s {
        ItemStatus::Completed => ToolEndStatus::Completed,
        ItemStatus::Declined => ToolEndStatus::Declined,
        ItemStatus::Failed | ItemStatus::InProgress | ItemStatus::Unknown => ToolEndStatus::Failed,
    }
}

fn item_completed(item: &ThreadItem) -> Vec<(Role, Ev)> {
    match item {
        ThreadItem::UserMessage(u) => {
            let mut out = Vec::new();
            for part in &u.content {
                match part.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        let text = part
                            .get("text")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_owned();
                        out.push((
                            Role::User,
                            Ev::Text {
                                text,
                                thinking: false,
                            },
                        ));
                    }
                    Some("image") => {
                        let url = part
                            .get("url")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_owned();
                        out.push((Role::User, Ev::Photo { url }));
                    }
                    Some("localImage") => {
                        let path = part.get("path").and_then(Value::as_str).unwrap_or("");
                        out.push((
                            Role::User,
                            Ev::Photo {
                                url: format!("file://{path}"),
                            },
                        ));
                    }
                    _ => {}
                }
            }
            out
        }
        ThreadItem::AgentMessage(m) => vec![(
            Role::Agent,
            Ev::Text {
                text: m.text.clone(),
                thinking: false,
            },
        )],
        ThreadItem::Reasoning(r) => {
            let text = r
                .summary
                .iter()
                .chain(r.content.iter())
                .cloned()
                .collect::<Vec<_>>()
                .join("\n\n");
            if text.is_empty() {
                Vec::new()
            } else {
                vec![(
                    Role::Agent,
                    Ev::Text {
                        text,
                        thinking: true,
                    },
                )]
            }
        }
        ThreadItem::CommandExecution(c) => vec![(
            Role::Agent,
            Ev::ToolCallEnd {
                call: c.id.clone(),
                status: end_status(c.status),
                output: c.aggregated_output.clone(),
                exit_code: c.exit_code,
            },
        )],
        ThreadItem::FileChange(f) => {
            let mut out: Vec<(Role, Ev)> = f
                .changes
                .iter()
                .map(|c| {
                    let kind = c
                        .kind
                        .get("type")
                        .and_then(Value::as_str)
                        .unwrap_or("update")
                        .to_owned();
                    (
                        Role::Agent,
                        Ev::File {
                            path: c.path.clone(),
                            kind,
                            diff: c.diff.clone(),
                        },
                    )
                })
                .collect();
            out.push((
                Role::Agent,
                Ev::ToolCallEnd {
                    call: f.id.clone(),
                    status: end_status(f.status),
                    output: None,
                    exit_code: None,
                },
            ));
            out
        }
        ThreadItem::DynamicToolCall(t) => {
            let output = t.content_items.as_ref().map(|items| {
                items
                    .iter()
                    .filter_map(|i| i.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n")
            });
            vec![(
                Role::Agent,
                Ev::ToolCallEnd {
                    call: t.id.clone(),
                    status: end_status(t.status),
                    output,
                    exit_code: None,
                },
            )]
        }
        ThreadItem::McpToolCall(t) => {
            let output = t
                .result
                .as_ref()
                .or(t.error.as_ref())
                .map(|v| v.to_string());
            vec![(
                Role::Agent,
                Ev::ToolCallEnd {
                    call: t.id.clone(),
                    status: end_status(t.status),
                    output,
                    exit_code: None,
                },
            )]
        }
        ThreadItem::CollabAgentToolCall(c) => {
            // What the agents said or where they stand, as Codex last saw them.
            let states = c.agents_states.as_object().map(|m| {
                m.iter()
                    .map(|(thread, st)| {
                        let status = st.get("status").and_then(Value::as_str).unwrap_or("?");
                        match st.get("message").and_then(Value::as_str) {
                            Some(msg) => format!("{thread}: {status}: {msg}"),
                            None => format!("{thread}: {status}"),
                        }
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            });
            vec![(
                Role::Agent,
                Ev::ToolCallEnd {
                    call: c.id.clone(),
                    status: end_status(c.status),
                    output: states.filter(|s| !s.is_empty()),
                    exit_code: None,
                },
            )]
        }
        ThreadItem::Other(v) => {
            vec![(
                Role::Agent,
                Ev::Codex {
                    method: "item/completed".into(),
                    params: v.clone(),
                },
            )]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(method: &str, params: Value) -> ServerNotification {
        ServerNotification::parse(method, params)
    }

    #[test]
    fn a_command_turn_maps_to_the_seven_kinds() {
        let start = map(&n(
            "turn/started",
            json!({"threadId": "t", "turn": {"id": "u", "status": "inProgress", "items": []}}),
        ));
        assert_eq!(
            start.events,
            vec![(Role::System, Some("u".into()), Ev::TurnStart {})]
        );
        let cmd = json!({"type": "commandExecution", "id": "c1", "command": "rm -rf build", "cwd": "/w", "status": "inProgress"});
        let began = map(&n(
            "item/started",
            json!({"threadId": "t", "turnId": "u", "item": cmd}),
        ));
        assert!(
            matches!(&began.events[0].2, Ev::ToolCallStart { name, title, .. } if name == "CodexBash" && title == "rm -rf build")
        );
        let mut done = cmd.clone();
        done["status"] = json!("declined");
        let ended = map(&n(
            "item/completed",
            json!({"threadId": "t", "turnId": "u", "item": done}),
        ));
        assert!(matches!(
            &ended.events[0].2,
            Ev::ToolCallEnd {
                status: ToolEndStatus::Declined,
                ..
            }
        ));
        let end = map(&n(
            "turn/completed",
            json!({"threadId": "t", "turn": {"id": "u", "status": "interrupted", "items": []}}),
        ));
        assert_eq!(
            end.events[0].2,
            Ev::TurnEnd {
                status: TurnEndStatus::Cancelled,
                error: None,
                stopped: None,
                usage: None,
                error_kind: None,
            }
        );
    }

    #[test]
    fn deltas_are_live_only_and_unknown_notifications_are_kept_raw() {
        let d = map(&n(
            "item/agentMessage/delta",
            json!({"threadId": "t", "turnId": "u", "itemId": "m", "delta": "he"}),
        ));
        assert!(d.events.is_empty());
        assert_eq!(d.delta.unwrap().delta, "he");
        let u = map(&n(
            "thread/goal/updated",
            json!({"threadId": "t", "goal": 1}),
        ));
        assert_eq!(
            u.events[0].2,
            Ev::Codex {
                method: "thread/goal/updated".into(),
                params: json!({"threadId": "t", "goal": 1})
            }
        );
        let other = map(&n(
            "item/completed",
            json!({"threadId": "t", "turnId": "u", "item": {"type": "webSearch", "id": "w"}}),
        ));
        assert!(
            matches!(&other.events[0].2, Ev::Codex { method, .. } if method == "item/completed")
        );
        // Codex's unread marker: nothing for a person, so no event (the raw line stays).
        let read = map(&n(
            "thread/readState/changed",
            json!({"threadId": "t", "readState": {"revision": "r"}}),
        ));
        assert_eq!(read, Mapped::default());
    }

    #[test]
    fn file_changes_become_file_events_then_the_call_end() {
        let item = json!({"type": "fileChange", "id": "f", "status": "completed",
            "changes": [{"path": "a.rs", "kind": {"type": "add"}, "diff": "+x"}]});
        let m = map(&n(
            "item/completed",
            json!({"threadId": "t", "turnId": "u", "item": item}),
        ));
        assert_eq!(
            m.events[0].2,
            Ev::File {
                path: "a.rs".into(),
                kind: "add".into(),
                diff: "+x".into()
            }
        );
        assert!(matches!(m.events[1].2, Ev::ToolCallEnd { .. }));
    }
}
