//! Recovery as a pure step: from a cut session's stored log (and Codex's own record of its
//! thread, when it could be read) to the events that complete the log.

use std::collections::HashSet;
use std::sync::Arc;

use codex_relay_protocol::v2::{
    ItemNotification, ServerNotification, Turn, TurnNotification, TurnStatus,
};

use crate::event::{Envelope, Ev, Role, ToolEndStatus, TurnEndStatus};
use crate::mapper;
use crate::session::{Logged, Origin};

/// What recovery tells a cut turn's `turn-end` and the session's `error` after a restart.
pub(crate) const RESTARTED: &str = "the relay restarted while this turn was running";

/// A turn the log opened (`turn-start`) and never closed (`turn-end`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct OpenTurn {
    pub id: String,
    /// Set for a sub-agent's turn.
    pub origin: Option<Arc<Origin>>,
}

/// The turns of `log` left open, in the order they opened.
pub(crate) fn open_turns(log: &[Envelope]) -> Vec<OpenTurn> {
    let mut open: Vec<OpenTurn> = Vec::new();
    for e in log {
        let Some(turn) = e.turn.as_deref() else {
            continue;
        };
        match &e.ev {
            Ev::TurnStart {} if !open.iter().any(|t| t.id == turn) => open.push(OpenTurn {
                id: turn.to_owned(),
                origin: e.agent.clone().map(|agent| {
                    Arc::new(Origin {
                        invoke: e.invoke.clone(),
                        agent,
                    })
                }),
            }),
            Ev::TurnEnd { .. } => open.retain(|t| t.id != turn),
            _ => {}
        }
    }
    open
}

/// What identifies an event when the log and Codex's record are compared: a tool call by its
/// call id and phase, anything else by its whole content, within its turn.
fn key(turn: &str, ev: &Ev) -> String {
    match ev {
        Ev::ToolCallStart { call, .. } => format!("{turn}\0start\0{call}"),
        Ev::ToolCallEnd { call, .. } => format!("{turn}\0end\0{call}"),
        other => format!(
            "{turn}\0{}",
            serde_json::to_string(other).unwrap_or_default()
        ),
    }
}

/// The plan for one cut session: the events Codex persisted that the log lacks (for the
/// session's own open turns found in `codex_turns`), then a `turn-end` for every open turn
/// (Codex's own end when its record has one, else cancelled), then an `error` naming the
/// restart. `codex_turns` is empty when Codex's record could not be read.
pub(crate) fn close_cut_turns(log: &[Envelope], codex_turns: &[Turn], why: &str) -> Vec<Logged> {
    let open = open_turns(log);
    let mut seen: HashSet<String> = log
        .iter()
        .filter_map(|e| Some(key(e.turn.as_deref()?, &e.ev)))
        .collect();
    let mut out = Vec::new();
    let mut cancelled = 0;
    for turn in &open {
        let record = turn
            .origin
            .is_none()
            .then(|| codex_turns.iter().find(|t| t.id == turn.id))
            .flatten();
        if let Some(record) = record {
            for ev in record_events(record) {
                if seen.insert(key(&turn.id, &ev.1)) {
                    out.push(logged(ev.0, turn, ev.1));
                }
            }
        }
        // Every tool call the turn started ends, so no client waits for it.
        let started: Vec<String> = log
            .iter()
            .map(|e| (e.turn.as_deref(), &e.ev))
            .chain(out.iter().map(|l| (l.turn.as_deref(), &l.ev)))
            .filter(|(t, _)| *t == Some(turn.id.as_str()))
            .filter_map(|(_, ev)| match ev {
                Ev::ToolCallStart { call, .. } => Some(call.clone()),
                _ => None,
            })
            .collect();
        for call in started {
            let end = Ev::ToolCallEnd {
                call,
                status: ToolEndStatus::Failed,
                output: Some(why.into()),
                exit_code: None,
            };
            if seen.insert(key(&turn.id, &end)) {
                out.push(logged(Role::Agent, turn, end));
            }
        }
        let end = match record.map(|r| r.status) {
            Some(TurnStatus::Completed | TurnStatus::Failed) => {
                let n = ServerNotification::TurnCompleted(TurnNotification {
                    thread_id: String::new(),
                    turn: record.expect("some").clone(),
                });
                mapper::map(&n).events.into_iter().next().map(|e| e.2)
            }
            _ => None,
        };
        let end = end.unwrap_or_else(|| {
            cancelled += 1;
            Ev::TurnEnd {
                status: TurnEndStatus::Cancelled,
                error: Some(why.into()),
                stopped: None,
                usage: None,
                error_kind: None,
            }
        });
        out.push(logged(Role::System, turn, end));
    }
    if cancelled > 0 || open.is_empty() {
        out.push(Logged {
            role: Role::System,
            turn: open.first().map(|t| t.id.clone()),
            ev: Ev::Error {
                message: format!("{why}; say something to resume the session"),
                retrying: false,
            },
            origin: None,
        });
    }
    out
}

fn logged(role: Role, turn: &OpenTurn, ev: Ev) -> Logged {
    Logged {
        role,
        turn: Some(turn.id.clone()),
        ev,
        origin: turn.origin.clone(),
    }
}

/// The events Codex's record of one turn maps to (the mapper's view of its items, as if they
/// had arrived live), without the turn's start and end.
fn record_events(turn: &Turn) -> Vec<(Role, Ev)> {
    let mut out = Vec::new();
    for item in &turn.items {
        let note = || ItemNotification {
            thread_id: String::new(),
            turn_id: turn.id.clone(),
            item: item.clone(),
        };
        let mut notes = vec![ServerNotification::ItemStarted(note())];
        if mapper::item_finished(item) {
            notes.push(ServerNotification::ItemCompleted(note()));
        }
        for n in &notes {
            out.extend(mapper::map(n).events.into_iter().map(|(r, _, ev)| (r, ev)));
        }
    }
    out
}
