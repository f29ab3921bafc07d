//! What the tools show of a session, derived from the engine's snapshot and event log
//! (docs/EVENTS.md): status words, the pending question, item events and recent output.

use std::collections::HashMap;
use std::sync::Arc;

use codex_relay_core::answer::PendingKind;
use codex_relay_core::event::ToolEndStatus;
use codex_relay_core::{Envelope, Ev, PendingDetails, PendingView, Role, SessionStatus};
use serde_json::{Value, json};

use crate::outputs::{PendingQuestion, QuestionOutput, ReachOutput};

/// The status word the tools use: the engine's, except `idle`, which is `done`.
pub fn status_word(s: SessionStatus) -> &'static str {
    match s {
        SessionStatus::Idle => "done",
        other => other.as_str(),
    }
}

/// The questions a pending request asks, each with the answers it takes.
pub fn questions(p: &PendingView) -> Vec<(Option<String>, String, Vec<String>)> {
    let questions = p.questions();
    if !questions.is_empty() {
        return questions
            .iter()
            .map(|q| {
                let options = q
                    .options
                    .iter()
                    .flatten()
                    .map(|o| o.label.clone())
                    .collect();
                (Some(q.id.clone()), q.question.clone(), options)
            })
            .collect();
    }
    vec![(None, describe(p), p.options.clone())]
}

/// The request's question with the details a person needs to answer it.
pub fn describe(p: &PendingView) -> String {
    let mut text = p.question.clone();
    let given = |s: &Option<String>| s.clone().filter(|s| !s.is_empty());
    let reason_line = |text: &mut String, reason: &Option<String>| {
        if let Some(reason) = given(reason)
            && !p.question.contains(&reason)
        {
            text.push_str(&format!("\nReason: {reason}"));
        }
    };
    match &p.details {
        PendingDetails::CommandApproval { cwd, reason, .. } => {
            if let Some(cwd) = given(cwd) {
                text.push_str(&format!("\n(in {cwd})"));
            }
            reason_line(&mut text, reason);
        }
        PendingDetails::PermissionsApproval { reason, .. } => reason_line(&mut text, reason),
        PendingDetails::FileChangeApproval { changes, .. } => {
            for c in changes.iter().take(20) {
                text.push_str(&format!("\n{}", c.path));
                let lines: Vec<&str> = c.diff.lines().take(40).collect();
                if !lines.is_empty() {
                    text.push_str(&format!("\n{}", lines.join("\n")));
                }
            }
        }
        PendingDetails::Question { .. }
        | PendingDetails::ToolCall { .. }
        | PendingDetails::Elicitation { .. }
        | PendingDetails::Other { .. } => {}
    }
    if let Some(reach) = p.reach {
        text.push_str(&format!("\n{}", reach.text()));
    }
    text
}

/// `pendingQuestion`: the oldest open request, as `{id, type, questions: [{question, options}]}`.
pub fn pending_question(pending: &[PendingView]) -> Option<PendingQuestion> {
    let p = pending.iter().min_by_key(|p| p.created_at)?;
    let questions = questions(p)
        .into_iter()
        .map(|(id, question, options)| QuestionOutput {
            id,
            question,
            options,
        })
        .collect();
    let how = match p.kind {
        PendingKind::ToolCall => "answer with the tool's output, or \"error: <message>\"",
        PendingKind::Question => "answer with one option per question",
        PendingKind::Other => "answer with JSON",
        _ => "",
    };
    let how = match how {
        "" => crate::words::help(p),
        fixed => fixed.to_owned(),
    };
    Some(PendingQuestion {
        id: p.id.clone(),
        kind: p.kind.as_str().to_owned(),
        questions,
        details: serde_json::to_value(&p.details).unwrap_or_default(),
        how_to_answer: format!("codex_respond {{sessionId, id, answers}}: {how}"),
        expires_at: iso8601(p.deadline),
        more_pending: pending.len() - 1,
        agent: p.agent.as_ref().map(Into::into),
        invoke: p.invoke.clone(),
        reach: p.reach.map(|r| ReachOutput {
            kind: r.as_str().to_owned(),
            text: r.text().to_owned(),
        }),
    })
}

fn item_type(tool_name: &str) -> &'static str {
    match tool_name {
        "CodexBash" => "command_execution",
        "CodexPatch" => "file_change",
        "CodexAgent" => "collab_agent_tool_call",
        n if n.starts_with("mcp__") => "mcp_tool_call",
        _ => "dynamic_tool_call",
    }
}

fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_owned()
    } else {
        format!("{}…", s.chars().take(max - 1).collect::<String>())
    }
}

/// `itemEvents`: what the latest turn in `events` did, in order, one entry per item; items of
/// sub-agents (which run inside that turn) carry the agent's thread as `agent`.
pub fn item_events(events: &[Arc<Envelope>], max: usize) -> Vec<Value> {
    let start = events
        .iter()
        .rposition(|e| matches!(e.ev, Ev::TurnStart {}) && e.agent.is_none())
        .unwrap_or(0);
    let mut items: Vec<Value> = Vec::new();
    let mut by_call: HashMap<String, usize> = HashMap::new();
    let mut asked: HashMap<String, String> = HashMap::new();
    for e in &events[start..] {
        let before = items.len();
        match &e.ev {
            Ev::Text { text, thinking } if e.role == Role::Agent => items.push(json!({
                "itemType": if *thinking { "reasoning" } else { "agent_message" },
                "status": "completed",
                "summary": clip(text, 200),
            })),
            Ev::ToolCallStart {
                call, name, title, ..
            } => {
                by_call.insert(call.clone(), items.len());
                items.push(json!({
                    "id": call,
                    "itemType": item_type(name),
                    "status": "started",
                    "summary": clip(title, 200),
                }));
            }
            Ev::ToolCallEnd {
                call,
                status,
                exit_code,
                ..
            } => {
                let word = match status {
                    ToolEndStatus::Completed => "completed",
                    ToolEndStatus::Failed => "failed",
                    ToolEndStatus::Declined => "declined",
                };
                match by_call.get(call) {
                    Some(&i) => {
                        items[i]["status"] = json!(word);
                        if let Some(code) = exit_code {
                            items[i]["exitCode"] = json!(code);
                        }
                    }
                    None => {
                        items.push(json!({"id": call, "itemType": "tool_call", "status": word}))
                    }
                }
            }
            // Who answered each request: a person (which front), a rule, a timeout, a restart.
            Ev::RequestOpened { request } => {
                asked.insert(request.id.clone(), request.question.clone());
            }
            Ev::RequestResolved {
                id,
                decision,
                by,
                reason,
                request,
                by_user,
            } => {
                let question = request
                    .as_ref()
                    .map(|r| r.question.clone())
                    .or_else(|| asked.get(id).cloned())
                    .unwrap_or_default();
                let mut item = json!({
                    "id": id,
                    "itemType": "approval",
                    "status": decision.as_str(),
                    "summary": clip(&question, 200),
                    "answeredBy": by.as_str(),
                    "who": by.who(),
                });
                if let Some(r) = reason {
                    item["reason"] = json!(clip(r, 200));
                }
                // The signed-in person behind the front's word (name, id, role, device).
                if let Some(person) = by_user {
                    item["answeredByUser"] = json!(person);
                }
                items.push(item);
            }
            Ev::Plan { steps } => items.push(json!({
                "itemType": "todo_list",
                "status": "updated",
                "summary": clip(&steps.to_string(), 200),
            })),
            Ev::Error {
                message,
                retrying: false,
            } => items.push(json!({
                "itemType": "error",
                "status": "failed",
                "summary": clip(message, 200),
            })),
            _ => {}
        }
        if let (Some(agent), Some(item)) = (&e.agent, items.get_mut(before)) {
            item["agent"] = json!(agent.thread);
        }
    }
    let excess = items.len().saturating_sub(max);
    items.drain(..excess);
    items
}

/// `recentOutput`: the last `n` lines of what the agent said and what its commands printed
/// (each command introduced by a `$ <command>` line).
pub fn recent_output(events: &[Arc<Envelope>], n: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut commands: HashMap<&str, ()> = HashMap::new();
    for e in events {
        match &e.ev {
            Ev::Text {
                text,
                thinking: false,
            } if e.role == Role::Agent => lines.extend(text.lines().map(|l| clip(l, 2000))),
            Ev::ToolCallStart {
                call,
                name,
                description,
                ..
            } if name == "CodexBash" => {
                commands.insert(call.as_str(), ());
                lines.push(format!(
                    "$ {}",
                    clip(description.lines().next().unwrap_or(""), 2000)
                ));
            }
            Ev::ToolCallEnd {
                call,
                output: Some(output),
                ..
            } if commands.contains_key(call.as_str()) => {
                lines.extend(output.lines().map(|l| clip(l, 2000)))
            }
            _ => {}
        }
        if lines.len() > 4 * n + 64 {
            let excess = lines.len() - n;
            lines.drain(..excess);
        }
    }
    let excess = lines.len().saturating_sub(n);
    lines.drain(..excess);
    lines
}

/// Unix milliseconds as an ISO-8601 (RFC 3339) UTC timestamp.
pub use codex_relay_core::time::rfc3339_ms as iso8601;

#[cfg(test)]
mod tests {
    use super::*;

    fn env(seq: u64, role: Role, ev: Ev) -> Arc<Envelope> {
        Arc::new(Envelope {
            id: format!("s:{seq}"),
            seq,
            time: 0,
            role,
            turn: Some("t".into()),
            invoke: None,
            agent: None,
            ev,
        })
    }

    #[test]
    fn timestamps() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(1_795_338_287_754), "2026-11-22T09:04:47.754Z");
        assert_eq!(iso8601(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn items_and_output_come_from_the_latest_turn_and_the_log() {
        let events = vec![
            env(1, Role::System, Ev::TurnStart {}),
            env(
                2,
                Role::Agent,
                Ev::Text {
                    text: "old".into(),
                    thinking: false,
                },
            ),
            env(3, Role::System, Ev::TurnStart {}),
            env(
                4,
                Role::Agent,
                Ev::ToolCallStart {
                    call: "c1".into(),
                    name: "CodexBash".into(),
                    title: "ls".into(),
                    description: "ls -la".into(),
                    args: Value::Null,
                },
            ),
            env(
                5,
                Role::Agent,
                Ev::ToolCallEnd {
                    call: "c1".into(),
                    status: ToolEndStatus::Completed,
                    output: Some("a\nb".into()),
                    exit_code: Some(0),
                },
            ),
            env(
                6,
                Role::Agent,
                Ev::Text {
                    text: "done\nreally".into(),
                    thinking: false,
                },
            ),
        ];
        let items = item_events(&events, 100);
        assert_eq!(items.len(), 2, "{items:?}");
        assert_eq!(items[0]["itemType"], "command_execution");
        assert_eq!(items[0]["status"], "completed");
        assert_eq!(items[0]["exitCode"], 0);
        assert_eq!(items[1]["summary"], "done\nreally");
        assert_eq!(recent_output(&events, 4), vec!["a", "b", "done", "really"]);
        assert_eq!(recent_output(&events, 100)[0], "old");
    }

    #[test]
    fn each_answered_request_says_who_answered() {
        use codex_relay_core::{Decider, Decision, Front};
        let opened: PendingView = serde_json::from_value(json!({"id": "r1", "sessionId": "s",
            "kind": "command_approval", "question": "Run touch a?", "options": [],
            "details": {"command": "touch a"}, "createdAt": 0, "deadline": 0}))
        .unwrap();
        let ruled = PendingView {
            id: "r2".into(),
            question: "Run rm -rf b?".into(),
            ..opened.clone()
        };
        let resolved = |id: &str, by: Decider, request: Option<&PendingView>| Ev::RequestResolved {
            id: id.into(),
            decision: if request.is_some() {
                Decision::Deny
            } else {
                Decision::Approve
            },
            by,
            reason: request.map(|_| "not here".to_owned()),
            by_user: None,
            request: request.map(|r| Box::new(r.clone())),
        };
        let events = vec![
            env(1, Role::System, Ev::TurnStart {}),
            env(
                2,
                Role::System,
                Ev::RequestOpened {
                    request: Box::new(opened),
                },
            ),
            env(
                3,
                Role::System,
                resolved("r1", Decider::Person(Front::Http), None),
            ),
            env(
                4,
                Role::System,
                resolved("r2", Decider::rule("no-rm"), Some(&ruled)),
            ),
        ];
        let items = item_events(&events, 10);
        assert_eq!(
            items,
            vec![
                json!({"id": "r1", "itemType": "approval", "status": "approve",
                    "summary": "Run touch a?", "answeredBy": "http", "who": "human"}),
                json!({"id": "r2", "itemType": "approval", "status": "deny",
                    "summary": "Run rm -rf b?", "answeredBy": "rule:no-rm", "who": "rule",
                    "reason": "not here"}),
            ]
        );
    }
}
