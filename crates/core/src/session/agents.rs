//! A session's sub-agents: which Codex threads belong to it, which tool call spawned each, and
//! which of them run a turn now. Bookkeeping for the actor; no IO.

use std::collections::BTreeMap;

use codex_relay_protocol::v2::{CollabAgentToolCallItem, SubAgentSpawn, Thread};

use crate::event::AgentRef;
pub use crate::views::AgentInfo;

/// Every sub-agent of one session, at any depth.
#[derive(Debug, Default)]
pub(crate) struct Agents {
    by_thread: BTreeMap<String, AgentInfo>,
}

impl Agents {
    pub fn new(known: Vec<AgentInfo>) -> Self {
        Self {
            by_thread: known
                .into_iter()
                .map(|a| (a.agent.thread.clone(), a))
                .collect(),
        }
    }

    /// True for the session's own thread (`root`) and for threads of its sub-agents.
    pub fn owns(&self, root: &str, thread: &str) -> bool {
        thread == root || self.by_thread.contains_key(thread)
    }

    pub fn get(&self, thread: &str) -> Option<&AgentInfo> {
        self.by_thread.get(thread)
    }

    fn depth_below(&self, parent: &str) -> i64 {
        self.by_thread.get(parent).map_or(1, |p| p.agent.depth + 1)
    }

    /// A collab tool call seen in one of the session's threads (`root` is the session's own).
    /// A spawn that names its new thread makes that thread a sub-agent, invoked by the call.
    /// Returns the threads adopted just now.
    pub fn on_collab_call(&mut self, root: &str, call: &CollabAgentToolCallItem) -> Vec<String> {
        if call.tool != "spawnAgent" || !self.owns(root, &call.sender_thread_id) {
            return Vec::new();
        }
        let depth = self.depth_below(&call.sender_thread_id);
        let mut adopted = Vec::new();
        for thread in call.receiver_thread_ids.iter().filter(|t| *t != root) {
            let agent = self.by_thread.entry(thread.clone()).or_insert_with(|| {
                adopted.push(thread.clone());
                AgentInfo {
                    agent: AgentRef {
                        thread: thread.clone(),
                        parent: call.sender_thread_id.clone(),
                        depth,
                        nickname: None,
                        role: None,
                    },
                    invoke: None,
                    turn: None,
                }
            });
            agent.invoke.get_or_insert_with(|| call.id.clone());
        }
        adopted
    }

    /// What Codex says of a thread (`thread/started`, `thread/resume`): a thread one of the
    /// session's threads spawned becomes (or stays) a sub-agent, with its nickname and role.
    /// Returns true when it was adopted just now.
    pub fn on_thread(&mut self, root: &str, thread: &Thread) -> bool {
        let Some(spawn): Option<SubAgentSpawn> = thread.spawned_by() else {
            return false;
        };
        if thread.id == root || !self.owns(root, &spawn.parent_thread_id) {
            return false;
        }
        let depth = self.depth_below(&spawn.parent_thread_id);
        let mut adopted = false;
        let agent = self.by_thread.entry(thread.id.clone()).or_insert_with(|| {
            adopted = true;
            AgentInfo {
                agent: AgentRef {
                    thread: thread.id.clone(),
                    parent: spawn.parent_thread_id.clone(),
                    depth,
                    nickname: None,
                    role: None,
                },
                invoke: None,
                turn: None,
            }
        });
        if agent.agent.nickname.is_none() {
            agent.agent.nickname = spawn.agent_nickname;
        }
        if agent.agent.role.is_none() {
            agent.agent.role = spawn.agent_role;
        }
        adopted
    }

    /// A sub-agent's turn started (`Some`) or ended (`None`).
    pub fn set_turn(&mut self, thread: &str, turn: Option<String>) {
        if let Some(agent) = self.by_thread.get_mut(thread) {
            agent.turn = turn;
        }
    }

    /// Sub-agents running a turn now, with that turn.
    pub fn running(&self) -> Vec<(AgentInfo, String)> {
        self.by_thread
            .values()
            .filter_map(|a| Some((a.clone(), a.turn.clone()?)))
            .collect()
    }

    pub fn is_running(&self) -> bool {
        self.by_thread.values().any(|a| a.turn.is_some())
    }

    pub fn all(&self) -> Vec<AgentInfo> {
        self.by_thread.values().cloned().collect()
    }

    /// After Codex went away (or the session closed) nothing runs any more.
    pub fn stop_all(&mut self) {
        for agent in self.by_thread.values_mut() {
            agent.turn = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use codex_relay_protocol::v2::ItemStatus;
    use serde_json::json;

    fn spawn(id: &str, sender: &str, receivers: &[&str]) -> CollabAgentToolCallItem {
        CollabAgentToolCallItem {
            id: id.into(),
            tool: "spawnAgent".into(),
            status: ItemStatus::Completed,
            sender_thread_id: sender.into(),
            receiver_thread_ids: receivers.iter().map(|s| s.to_string()).collect(),
            prompt: None,
            model: None,
            agents_states: json!({}),
        }
    }

    #[test]
    fn a_spawn_that_names_its_thread_adopts_it_at_any_depth() {
        let mut a = Agents::new(vec![]);
        assert!(
            a.on_collab_call("root", &spawn("call_1", "root", &[]))
                .is_empty()
        );
        assert_eq!(
            a.on_collab_call("root", &spawn("call_1", "root", &["c1"])),
            ["c1"]
        );
        // Seen again (item/completed after item/started): nothing new.
        assert!(
            a.on_collab_call("root", &spawn("call_1", "root", &["c1"]))
                .is_empty()
        );
        a.on_collab_call("root", &spawn("call_2", "c1", &["g1"]));
        let grand = a.get("g1").unwrap();
        assert_eq!(
            (grand.agent.depth, grand.invoke.as_deref()),
            (2, Some("call_2"))
        );
        assert_eq!(grand.agent.parent, "c1");
        // Codex's word on the thread adds its nickname and role.
        let t: Thread = serde_json::from_value(json!({"id": "c1", "parentThreadId": "root",
            "agentNickname": "Ada", "agentRole": "explorer"}))
        .unwrap();
        assert!(!a.on_thread("root", &t));
        let c1 = a.get("c1").unwrap();
        assert_eq!(c1.agent.label(), "Ada");
        assert_eq!(c1.invoke.as_deref(), Some("call_1"));
        assert!(a.owns("root", "g1") && a.owns("root", "root") && !a.owns("root", "other"));
    }

    #[test]
    fn threads_of_other_sessions_and_plain_threads_are_not_adopted() {
        let mut a = Agents::new(vec![]);
        assert!(
            a.on_collab_call("root", &spawn("x", "someone-else", &["c9"]))
                .is_empty()
        );
        let other: Thread = serde_json::from_value(json!({"id": "x", "source":
            {"subAgent": {"thread_spawn": {"parent_thread_id": "someone-else", "depth": 1}}}}))
        .unwrap();
        assert!(!a.on_thread("root", &other));
        let plain: Thread = serde_json::from_value(json!({"id": "p", "source": "cli"})).unwrap();
        assert!(!a.on_thread("root", &plain));
        let child: Thread = serde_json::from_value(json!({"id": "c1", "source":
            {"subAgent": {"thread_spawn": {"parent_thread_id": "root", "depth": 1}}}}))
        .unwrap();
        assert!(a.on_thread("root", &child));
        a.set_turn("c1", Some("t1".into()));
        assert!(a.is_running());
        assert_eq!(a.running()[0].1, "t1");
        a.stop_all();
        assert!(a.running().is_empty());
    }
}
