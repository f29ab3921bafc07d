//! Following a session's sub-agents in Codex: the app-server sends a thread's notifications only
//! to connections subscribed to it, so when a sub-agent becomes known the actor subscribes with
//! `thread/resume` and logs what the answer shows it missed; each event is logged once.

use std::collections::HashSet;

use codex_relay_protocol::v2::{
    ServerNotification, ThreadResume, ThreadResumeParams, ThreadStartResponse,
};

use super::actor::Actor;
use crate::error::RelayError;

/// A sub-agent's `thread/resume` answer, back in the actor.
pub(crate) struct AgentResumed {
    pub thread: String,
    pub result: Result<ThreadStartResponse, RelayError>,
}

/// Which lifecycle events of sub-agents were logged already (turn starts and ends, item starts
/// and completions), so an event that arrives both live and in a `thread/resume` answer is
/// logged once.
#[derive(Default)]
pub(crate) struct Seen(HashSet<String>);

impl Seen {
    /// False when this notification of `thread` was already logged.
    pub fn first_time(&mut self, thread: &str, n: &ServerNotification) -> bool {
        let key = match n {
            ServerNotification::TurnStarted(t) => format!("{thread}/turn/{}", t.turn.id),
            ServerNotification::TurnCompleted(t) => format!("{thread}/end/{}", t.turn.id),
            ServerNotification::ItemStarted(i) => match i.item.id() {
                Some(id) => format!("{thread}/item/{id}"),
                None => return true,
            },
            ServerNotification::ItemCompleted(i) => match i.item.id() {
                Some(id) => format!("{thread}/done/{id}"),
                None => return true,
            },
            _ => return true,
        };
        self.0.insert(key)
    }
}

impl Actor {
    /// Subscribes this connection to a sub-agent's thread (in the background; the answer comes
    /// back to the actor's loop).
    pub(super) fn subscribe_agent(&self, thread: String) {
        let Some(server) = self.server.clone() else {
            return;
        };
        let tx = self.agent_tx.clone();
        tokio::spawn(async move {
            let params = ThreadResumeParams {
                thread_id: thread.clone(),
                ..Default::default()
            };
            let result = server
                .call::<ThreadResume>(&params)
                .await
                .map_err(|e| RelayError::from_resume(&thread, e));
            let _ = tx.send(AgentResumed { thread, result }).await;
        });
    }

    /// The sub-agent's thread as Codex knows it when the subscription began: its nickname and
    /// role, and the turns and items it had already, logged if they were missed.
    pub(super) fn on_agent_resumed(&mut self, resumed: AgentResumed) {
        let thread = match resumed.result {
            Ok(r) => r.thread,
            Err(e) => {
                tracing::warn!(session = %self.shared.id, agent = %resumed.thread,
                    "could not subscribe to a sub-agent's thread: {e}");
                return;
            }
        };
        self.shared.adopt(&thread);
        let mut events = Vec::new();
        for turn in &thread.turns {
            self.replay_turn(&thread.id, turn, true, &mut events);
        }
        self.flush(Vec::new(), events, false);
    }
}
