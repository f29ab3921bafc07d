//! Listing sessions: this relay's own, plus every thread Codex knows in the same CODEX_HOME
//! (created by the TUI, `codex exec`, or other clients), most recent first.

use std::collections::HashMap;

use codex_relay_protocol::v2::{ThreadList, ThreadListParams};
use serde::Serialize;
use serde_json::Value;

use crate::error::RelayError;
use crate::relay::Relay;
use crate::session::SessionStatus;

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
    /// Who created it: `codex-relay`, or Codex's source (`cli`, `exec`, `vscode`, ...).
    pub source: String,
    /// Known to this relay (created, resumed or restored here).
    pub owned: bool,
    /// Loaded and attached in this relay's Codex right now.
    pub live: bool,
}

/// Filters for [`Relay::list`].
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    /// Only sessions whose working directory is this one.
    pub cwd: Option<String>,
    pub limit: Option<usize>,
}

const PAGE: u32 = 100;
/// Every creator a person may want to continue (sub-agent threads are Codex's internals).
const SOURCE_KINDS: &[&str] = &["cli", "vscode", "exec", "appServer", "unknown"];
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
        for h in self.inner.handles() {
            let snap = h.snapshot();
            let live = snap.status != SessionStatus::Closed && self.is_attached(h.id());
            rows.insert(
                snap.session_id.clone(),
                ListedSession {
                    session_id: snap.session_id,
                    cwd: snap.cwd,
                    preview: None,
                    status: Some(snap.status),
                    updated_at: snap.updated_at,
                    source: "codex-relay".into(),
                    owned: true,
                    live,
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
        self.inner.is_live(id)
    }
}
