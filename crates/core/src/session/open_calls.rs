//! The tool calls a turn started and never ended: when the relay ends a turn itself (Codex
//! exited, the relay stopped, a deadline), each gets its end first, so no command that never
//! ran shows `running` forever (after a restart too: the turn is closed, and recovery only
//! completes turns left open).

use std::sync::Arc;

use crate::event::{Envelope, Ev, Role, ToolEndStatus};

use super::{Logged, Origin};

/// A `tool-call-end` (failed, with `why` as its output) for every call of `turns` that
/// `events` started and did not end, in the order they started.
pub(crate) fn end_open_calls<'a>(
    events: impl IntoIterator<Item = &'a Arc<Envelope>>,
    turns: &[&str],
    why: &str,
) -> Vec<Logged> {
    let mut open: Vec<(String, String, Option<Arc<Origin>>)> = Vec::new();
    for e in events {
        let Some(turn) = e.turn.as_deref().filter(|t| turns.contains(t)) else {
            continue;
        };
        match &e.ev {
            Ev::ToolCallStart { call, .. } => open.push((
                turn.to_owned(),
                call.clone(),
                e.agent.clone().map(|agent| {
                    Arc::new(Origin {
                        invoke: e.invoke.clone(),
                        agent,
                    })
                }),
            )),
            Ev::ToolCallEnd { call, .. } => open.retain(|(t, c, _)| !(t == turn && c == call)),
            _ => {}
        }
    }
    open.into_iter()
        .map(|(turn, call, origin)| Logged {
            role: Role::Agent,
            turn: Some(turn),
            ev: Ev::ToolCallEnd {
                call,
                status: ToolEndStatus::Failed,
                output: Some(why.to_owned()),
                exit_code: None,
            },
            origin,
        })
        .collect()
}
