//! A session's sub-agents as its shared state knows them: threads it adopts, spawns seen in
//! collab calls, and the origin stamped on their events.

use super::*;

impl SessionShared {
    /// What Codex says of a thread: if one of this session's threads spawned it, it is a
    /// sub-agent of the session. New ones are written to the session row at once, so a
    /// restarted relay still knows them. Returns true for a new one.
    pub(crate) fn adopt(&self, thread: &codex_relay_protocol::v2::Thread) -> bool {
        let mut s = self.lock();
        let adopted = s.agents.on_thread(&self.id, thread);
        if s.agents.get(&thread.id).is_some()
            && let Some(store) = self.writer()
        {
            store.upsert_session(self.record(&s));
        }
        adopted
    }

    /// A collab tool call seen in one of the session's threads; returns the sub-agent threads
    /// it made known (a spawn naming its new thread).
    pub(crate) fn on_collab_call(
        &self,
        call: &codex_relay_protocol::v2::CollabAgentToolCallItem,
    ) -> Vec<String> {
        let mut s = self.lock();
        let adopted = s.agents.on_collab_call(&self.id, call);
        if !adopted.is_empty()
            && let Some(store) = self.writer()
        {
            store.upsert_session(self.record(&s));
        }
        adopted
    }

    /// The origin of an event of `thread`: the sub-agent (and the call that spawned it).
    pub(crate) fn origin(&self, thread: &str) -> Origin {
        let s = self.lock();
        match s.agents.get(thread) {
            Some(a) => Origin {
                invoke: a.invoke.clone(),
                agent: a.agent.clone(),
            },
            // Routed here, so spawned by one of ours, but its start was not seen.
            None => Origin {
                invoke: None,
                agent: AgentRef {
                    thread: thread.to_owned(),
                    parent: self.id.clone(),
                    depth: 1,
                    nickname: None,
                    role: None,
                },
            },
        }
    }

    /// Sub-agents running a turn now, with that turn.
    pub(crate) fn running_agents(&self) -> Vec<(AgentInfo, String)> {
        self.lock().agents.running()
    }

    /// Every sub-agent thread of this session.
    pub(crate) fn agent_threads(&self) -> Vec<String> {
        self.lock()
            .agents
            .all()
            .into_iter()
            .map(|a| a.agent.thread)
            .collect()
    }
}
