//! Catching up on a thread the session starts following late (a daemon thread another client
//! runs): Codex answers `thread/resume` with the thread as it stands and sends only later
//! events live, so what the answer shows and the log lacks is logged from it, before any live
//! event that came after (those wait in the subscription until then).

use codex_relay_protocol::v2::{
    ItemNotification, ServerNotification, Thread, ThreadItem, Turn, TurnNotification, TurnStatus,
};
use futures::future::BoxFuture;

use super::Logged;
use super::actor::{Actor, Flow, Job};
use crate::event::{Ev, Role};

/// At most this many turns of a thread's history are logged when a session that knows none
/// of it catches up; older ones are named in a note.
const HISTORY_TURNS: usize = 50;

/// What the session's log lacks of a thread's turns.
#[derive(Debug, PartialEq)]
pub(crate) enum Missed<'a> {
    /// A turn it never logged: its start, its items, its end if it ended.
    Whole(&'a Turn),
    /// The turn it logged as running has ended meanwhile.
    End(&'a Turn),
    /// Older turns of the history left out.
    Skipped(usize),
}

/// Compares `turns` (the answer's) with what the log holds: `known`, the turn ids it logged,
/// in order, and `open`, the turn it shows running. A log that knows none of the thread's
/// turns takes the history (its last [`HISTORY_TURNS`]); one that knows some takes the turns
/// after the last it knows; one whose turns the answer does not list (rolled back, say) takes
/// only a turn running now.
pub(crate) fn missed<'a>(
    known: &[String],
    open: Option<&str>,
    turns: &'a [Turn],
) -> Vec<Missed<'a>> {
    let last_known = turns.iter().rposition(|t| known.contains(&t.id));
    let mut out = Vec::new();
    match last_known {
        Some(at) => {
            let turn = &turns[at];
            if open == Some(turn.id.as_str()) && turn.status != TurnStatus::InProgress {
                out.push(Missed::End(turn));
            }
            out.extend(turns[at + 1..].iter().map(Missed::Whole));
        }
        None if known.is_empty() => {
            let skip = turns.len().saturating_sub(HISTORY_TURNS);
            if skip > 0 {
                out.push(Missed::Skipped(skip));
            }
            out.extend(turns[skip..].iter().map(Missed::Whole));
        }
        None => out.extend(
            turns
                .last()
                .filter(|t| t.status == TurnStatus::InProgress)
                .map(Missed::Whole),
        ),
    }
    out
}

/// The `thread/resume` answer of a session's own thread, back in the actor; `None` when the
/// resume failed (live events flow again all the same).
pub(crate) struct CaughtUp(pub Option<Thread>);

impl Job for CaughtUp {
    fn run(self: Box<Self>, actor: &mut Actor) -> BoxFuture<'_, Flow> {
        if let Some(thread) = &self.0 {
            actor.catch_up(thread);
        }
        actor.catching_up = false;
        Box::pin(std::future::ready(Flow::Continue))
    }
}

impl Actor {
    /// Logs what `thread` (a `thread/resume` answer of the session's own thread) shows and the
    /// log lacks.
    fn catch_up(&mut self, thread: &Thread) {
        let (known, open) = self
            .shared
            .with_state(|s| (s.meta.turns.clone(), s.turn.clone()));
        let mut events = Vec::new();
        for m in missed(&known, open.as_deref(), &thread.turns) {
            match m {
                Missed::Whole(turn) => self.replay_turn(&thread.id, turn, true, &mut events),
                Missed::End(turn) => self.replay_turn(&thread.id, turn, false, &mut events),
                Missed::Skipped(n) => events.push(Logged {
                    role: Role::System,
                    turn: None,
                    ev: Ev::Note {
                        message: format!(
                            "{n} earlier turn(s) of this thread ran before the relay followed it; they are not in this log"
                        ),
                    },
                    origin: None,
                }),
            }
        }
        if !events.is_empty() {
            self.flush(Vec::new(), events, true);
        }
    }

    /// Maps one turn as `thread/resume` shows it into `events`, as if its notifications had
    /// come live: its start and items when `whole`, then its end unless it still runs.
    pub(super) fn replay_turn(
        &mut self,
        thread: &str,
        turn: &Turn,
        whole: bool,
        events: &mut Vec<Logged>,
    ) {
        let as_turn = |n: fn(TurnNotification) -> ServerNotification| {
            n(TurnNotification {
                thread_id: thread.to_owned(),
                turn: turn.clone(),
            })
        };
        if whole {
            self.on_notification(&as_turn(ServerNotification::TurnStarted), events);
            for item in &turn.items {
                let note = |item: &ThreadItem| ItemNotification {
                    thread_id: thread.to_owned(),
                    turn_id: turn.id.clone(),
                    item: item.clone(),
                };
                self.on_notification(&ServerNotification::ItemStarted(note(item)), events);
                if crate::mapper::item_finished(item) {
                    self.on_notification(&ServerNotification::ItemCompleted(note(item)), events);
                }
            }
        }
        if turn.status != TurnStatus::InProgress {
            self.on_notification(&as_turn(ServerNotification::TurnCompleted), events);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(id: &str, status: TurnStatus) -> Turn {
        Turn {
            id: id.into(),
            status,
            error: None,
            items: Vec::new(),
        }
    }

    fn ids(m: &[Missed<'_>]) -> Vec<String> {
        m.iter()
            .map(|m| match m {
                Missed::Whole(t) => format!("whole {}", t.id),
                Missed::End(t) => format!("end {}", t.id),
                Missed::Skipped(n) => format!("skipped {n}"),
            })
            .collect()
    }

    #[test]
    fn a_restarted_relay_takes_the_turns_after_the_last_it_logged() {
        let turns = [
            turn("t1", TurnStatus::Completed),
            turn("t2", TurnStatus::Completed),
            turn("t3", TurnStatus::InProgress),
        ];
        let known = ["t1".to_owned()];
        assert_eq!(ids(&missed(&known, None, &turns)), ["whole t2", "whole t3"]);
    }

    #[test]
    fn the_turn_it_shows_running_gets_its_end_when_it_ended() {
        let turns = [turn("t1", TurnStatus::Interrupted)];
        let known = ["t1".to_owned()];
        assert_eq!(ids(&missed(&known, Some("t1"), &turns)), ["end t1"]);
        // Still running: nothing to add, live events carry on.
        let turns = [turn("t1", TurnStatus::InProgress)];
        assert!(missed(&known, Some("t1"), &turns).is_empty());
        // Ended, and the log already shows it ended: nothing.
        let turns = [turn("t1", TurnStatus::Completed)];
        assert!(missed(&known, None, &turns).is_empty());
    }

    #[test]
    fn a_new_session_takes_the_recent_history_and_names_what_it_left_out() {
        let turns: Vec<Turn> = (0..HISTORY_TURNS + 3)
            .map(|i| turn(&format!("t{i}"), TurnStatus::Completed))
            .collect();
        let m = missed(&[], None, &turns);
        assert_eq!(m.len(), HISTORY_TURNS + 1);
        assert_eq!(m[0], Missed::Skipped(3));
        assert_eq!(m[1], Missed::Whole(&turns[3]));
    }

    #[test]
    fn turns_it_cannot_place_give_only_the_one_running_now() {
        let known = ["gone".to_owned()];
        let turns = [
            turn("t1", TurnStatus::Completed),
            turn("t2", TurnStatus::InProgress),
        ];
        assert_eq!(ids(&missed(&known, None, &turns)), ["whole t2"]);
        let turns = [turn("t1", TurnStatus::Completed)];
        assert!(missed(&known, None, &turns).is_empty());
    }
}
