//! Turns the relay ends itself (Codex died, or did not stop when asked): each open tool call
//! ended first, then the session's and its sub-agents' turns.

use super::*;

impl SessionShared {
    /// Ends the running turns (the session's and its sub-agents') that Codex will not end
    /// itself (Codex died): logged as failed.
    pub(crate) fn abandon_turn(&self, why: &str) {
        self.end_turns(TurnEndStatus::Failed, why);
    }

    /// Ends the running turns that the relay gave up on (a deadline past its grace): logged as
    /// cancelled.
    pub(crate) fn end_turn_cancelled(&self, why: &str) {
        self.end_turns(TurnEndStatus::Cancelled, why);
    }

    /// The session's own thread and its sub-agents'.
    pub(crate) fn all_threads(&self) -> Vec<String> {
        let mut threads = vec![self.id.clone()];
        threads.extend(self.agent_threads());
        threads
    }

    fn end_turns(&self, status: TurnEndStatus, why: &str) {
        let (turn, agents, calls) = {
            let s = self.lock();
            let agents = s.agents.running();
            let turns: Vec<&str> = s
                .turn
                .iter()
                .chain(agents.iter().map(|(_, t)| t))
                .map(String::as_str)
                .collect();
            let calls = crate::session::open_calls::end_open_calls(&s.events, &turns, why);
            (s.turn.clone(), agents, calls)
        };
        let end = || Ev::TurnEnd {
            status,
            error: Some(why.into()),
            stopped: None,
            usage: None,
            error_kind: None,
        };
        let mut events = calls;
        events.extend(agents.into_iter().map(|(agent, turn)| Logged {
            role: Role::System,
            turn: Some(turn),
            ev: end(),
            origin: Some(Arc::new(self.origin(&agent.agent.thread))),
        }));
        if let Some(turn) = turn {
            events.push(Logged {
                role: Role::System,
                turn: Some(turn),
                ev: end(),
                origin: None,
            });
        }
        self.append_all(events);
    }
}
