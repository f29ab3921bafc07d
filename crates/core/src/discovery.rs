//! Listing sessions (this relay's own, plus every thread Codex knows in the same CODEX_HOME,
//! created by the TUI, `codex exec`, or other clients; most recent first) and reading a
//! session's history (events, raw Codex lines).

use std::sync::Arc;

use crate::event::Envelope;
use std::collections::HashMap;

use codex_relay_protocol::v2::{ThreadList, ThreadListParams};
use serde::Serialize;
use serde_json::Value;

use crate::error::RelayError;
use crate::relay::Relay;
use crate::session::{AgentInfo, SessionStatus};

/// One row of a listing.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListedSession {
    pub session_id: String,
    pub cwd: Option<String>,
    /// The first user message, when Codex has one.
    pub preview: Option<String>,
    /// Our status, for sessions of this relay.
    pub status: Option<SessionStatus>,
    /// Unix milliseconds.
    pub updated_at: i64,
    /// Who created it: `codex-relay`, `codex-daemon` (a thread of the Codex daemon the relay
    /// attached to, docs/ATTACH.md), or Codex's source (`cli`, `exec`, `vscode`, ...).
    pub source: String,
    /// Known to this relay (created, resumed or restored here).
    pub owned: bool,
    /// Loaded and attached in this relay's Codex right now.
    pub live: bool,
    /// Its sub-agents (threads it spawned, at any depth): listed here, never as sessions of
    /// their own.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<AgentInfo>,
}

/// Filters for [`Relay::list`].
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    /// Only sessions whose working directory is this one.
    pub cwd: Option<String>,
    pub limit: Option<usize>,
}

/// The source of a session that lives on the Codex daemon the relay attached to.
pub const ATTACHED_SOURCE: &str = "codex-daemon";

const PAGE: u32 = 100;
/// Every creator a person may want to continue, and spawned sub-agents (nested under the
/// session that spawned them).
const SOURCE_KINDS: &[&str] = &[
    "cli",
    "vscode",
    "exec",
    "appServer",
    "unknown",
    "subAgentThreadSpawn",
];
const MAX_PAGES: usize = 10;

fn same_dir(a: &str, b: &str) -> bool {
    let canon = |p: &str| {
        std::fs::canonicalize(p)
            .map(|c| c.display().to_string())
            .unwrap_or_else(|_| p.trim_end_matches('/').to_owned())
    };
    canon(a) == canon(b)
}

fn source_name(v: &Option<Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Object(m)) => m.keys().next().cloned().unwrap_or_else(|| "unknown".into()),
        _ => "unknown".into(),
    }
}

impl Relay {
    /// This relay's sessions ∪ Codex's `thread/list`, filtered by cwd, newest first.
    pub async fn list(&self, filter: ListFilter) -> Result<Vec<ListedSession>, RelayError> {
        let limit = filter.limit.unwrap_or(50).max(1);
        let mut rows: HashMap<String, ListedSession> = HashMap::new();
        // Sub-agent threads Codex lists, and the thread that spawned each.
        let mut spawned: Vec<(String, AgentInfo)> = Vec::new();
        for h in self.inner.handles() {
            let snap = h.snapshot();
            // A thread of the Codex daemon the relay attached to: live while followed.
            let (live, source) = match &snap.attached {
                Some(a) => (a.state == crate::attach::AttachState::Live, ATTACHED_SOURCE),
                None => (
                    snap.status != SessionStatus::Closed && self.is_attached(h.id()),
                    "codex-relay",
                ),
            };
            rows.insert(
                snap.session_id.clone(),
                ListedSession {
                    session_id: snap.session_id,
                    cwd: snap.cwd,
                    preview: None,
                    status: Some(snap.status),
                    updated_at: snap.updated_at,
                    source: source.into(),
                    owned: true,
                    live,
                    agents: snap.agents,
                },
            );
        }
        let server = self.server().await?;
        let mut cursor = None;
        for _ in 0..MAX_PAGES {
            let params = ThreadListParams {
                cursor: cursor.take(),
                limit: Some(PAGE),
                source_kinds: Some(SOURCE_KINDS.iter().map(|s| s.to_string()).collect()),
                ..Default::default()
            };
            let page = server.call::<ThreadList>(&params).await?;
            for t in page.data {
                if let Some(spawn) = t.spawned_by() {
                    let agent = crate::event::AgentRef {
                        thread: t.id.clone(),
                        parent: spawn.parent_thread_id.clone(),
                        depth: spawn.depth,
                        nickname: spawn.agent_nickname,
                        role: spawn.agent_role,
                    };
                    spawned.push((
                        spawn.parent_thread_id,
                        AgentInfo {
                            agent,
                            invoke: None,
                            turn: None,
                        },
                    ));
                    continue;
                }
                let updated = t.updated_at.or(t.created_at).unwrap_or(0) * 1000;
                match rows.get_mut(&t.id) {
                    Some(row) => {
                        row.preview = t.preview.clone().filter(|p| !p.is_empty());
                        row.cwd = row.cwd.clone().or(t.cwd.clone());
                    }
                    None => {
                        rows.insert(
                            t.id.clone(),
                            ListedSession {
                                session_id: t.id.clone(),
                                cwd: t.cwd.clone(),
                                preview: t.preview.clone().filter(|p| !p.is_empty()),
                                status: None,
                                updated_at: updated,
                                source: source_name(&t.source),
                                owned: false,
                                live: false,
                                agents: Vec::new(),
                            },
                        );
                    }
                }
            }
            match page.next_cursor {
                Some(c) if rows.len() < limit * 4 => cursor = Some(c),
                _ => break,
            }
        }
        nest(&mut rows, spawned);
        let mut out: Vec<ListedSession> = rows
            .into_values()
            .filter(|r| match (&filter.cwd, &r.cwd) {
                (Some(want), Some(have)) => same_dir(want, have),
                (Some(_), None) => false,
                (None, _) => true,
            })
            .collect();
        out.sort_by(|a, b| {
            b.updated_at
                .cmp(&a.updated_at)
                .then_with(|| a.session_id.cmp(&b.session_id))
        });
        out.truncate(limit);
        Ok(out)
    }

    fn is_attached(&self, id: &str) -> bool {
        self.inner.slots.holds(id)
    }
}

/// Puts each listed sub-agent under the top-level session that spawned it (through any number
/// of sub-agents), unless that session already knows it; sub-agents of sessions not listed are
/// left out.
fn nest(rows: &mut HashMap<String, ListedSession>, spawned: Vec<(String, AgentInfo)>) {
    let parents: HashMap<String, String> = spawned
        .iter()
        .map(|(parent, a)| (a.agent.thread.clone(), parent.clone()))
        .collect();
    for (parent, agent) in spawned {
        let mut top = parent;
        for _ in 0..parents.len() {
            match parents.get(&top) {
                Some(up) if !rows.contains_key(&top) => top = up.clone(),
                _ => break,
            }
        }
        if let Some(row) = rows.get_mut(&top)
            && !row
                .agents
                .iter()
                .any(|a| a.agent.thread == agent.agent.thread)
        {
            row.agents.push(agent);
        }
    }
}

impl Relay {
    /// Events with `seq > after`, oldest first, from memory or the store. Shared, not copied:
    /// many fronts can read the same log cheaply.
    pub async fn events(
        &self,
        id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<Arc<Envelope>>, RelayError> {
        let handle = self.known_anywhere(id).await?;
        if let Some(events) = handle.shared.events_in_memory(after, limit) {
            return Ok(events);
        }
        // Older than the in-memory window: the store has them, unless they are still queued.
        let wanted = (after + limit as u64).min(handle.shared.shown_seq());
        let mut rows = self
            .inner
            .store
            .events(id, after as i64, limit as i64)
            .await?;
        if rows.last().map_or(0, |r| r.seq as u64) < wanted {
            self.inner.store.flush().await?;
            rows = self
                .inner
                .store
                .events(id, after as i64, limit as i64)
                .await?;
        }
        Ok(rows
            .into_iter()
            .filter_map(|r| serde_json::from_str(&r.json).ok().map(Arc::new))
            .collect())
    }

    /// The newest raw Codex lines of a session (at most `limit`), oldest first, from the store
    /// (kept bounded; see docs/STORE.md), for re-normalizing history.
    pub async fn raw_lines(&self, id: &str, limit: usize) -> Result<Vec<String>, RelayError> {
        self.known_anywhere(id).await?;
        self.inner.store.flush().await?;
        let chunks = self
            .inner
            .store
            .raw_lines(
                id,
                limit.div_ceil(crate::session::RAW_CHUNK).max(1) as i64 + 1,
            )
            .await?;
        let mut lines: Vec<String> = chunks
            .iter()
            .flat_map(|c| c.split('\n'))
            .map(str::to_owned)
            .collect();
        let excess = lines.len().saturating_sub(limit);
        lines.drain(..excess);
        Ok(lines)
    }
}
