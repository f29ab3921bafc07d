//! A session's history for keeping (before retention prunes it): its snapshot, every event
//! still logged, then every request it was asked and how each was resolved, as JSON lines
//! read page by page (docs/STORE.md, "Retention").

use serde_json::json;

use crate::error::RelayError;
use crate::relay::Relay;

/// Events read from the log per page.
const PAGE: usize = 1000;

/// Where an export stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Head,
    Events,
    Requests,
    Done,
}

/// A session's history as JSON lines (NDJSON), produced a page at a time: one `session`
/// line (the snapshot at the start), one `event` line per logged event (the envelope as
/// docs/EVENTS.md shows it), one `request` line per request (its view and its resolution, or
/// `null` while it waits).
pub struct Export {
    relay: Relay,
    id: String,
    cursor: u64,
    stage: Stage,
}

impl Relay {
    /// The history of session `id` for keeping; see [`Export`]. Events already pruned are not
    /// in it (the first `event` line says from which seq the log starts).
    pub async fn export(&self, id: &str) -> Result<Export, RelayError> {
        self.find(id).await?;
        Ok(Export {
            relay: self.clone(),
            id: id.to_owned(),
            cursor: 0,
            stage: Stage::Head,
        })
    }
}

impl Export {
    /// The next lines (each ending in `\n`), or `None` once everything was given.
    pub async fn next_chunk(&mut self) -> Option<Result<String, RelayError>> {
        loop {
            match self.stage {
                Stage::Head => {
                    self.stage = Stage::Events;
                    return Some(self.relay.find(&self.id).await.map(|snapshot| {
                        line(&json!({"type": "session", "session": snapshot}).to_string())
                    }));
                }
                Stage::Events => {
                    let page = match self.relay.events(&self.id, self.cursor, PAGE).await {
                        Ok(page) => page,
                        Err(e) => return Some(Err(e)),
                    };
                    let Some(last) = page.last() else {
                        self.stage = Stage::Requests;
                        continue;
                    };
                    self.cursor = last.seq;
                    let mut out = String::new();
                    for ev in &page {
                        match serde_json::to_string(ev.as_ref()) {
                            Ok(text) => out
                                .push_str(&line(&format!(r#"{{"type":"event","event":{text}}}"#))),
                            Err(e) => {
                                tracing::warn!(session = %self.id, seq = ev.seq, "an event could not be exported: {e}")
                            }
                        }
                    }
                    return Some(Ok(out));
                }
                Stage::Requests => {
                    self.stage = Stage::Done;
                    let store = self.relay.store();
                    if let Err(e) = store.flush().await {
                        return Some(Err(e.into()));
                    }
                    let rows = match store.pending(Some(&self.id), false).await {
                        Ok(rows) => rows,
                        Err(e) => return Some(Err(e.into())),
                    };
                    let mut out = String::new();
                    for r in rows {
                        let parse = |t: &str| {
                            serde_json::from_str::<serde_json::Value>(t)
                                .unwrap_or_else(|_| serde_json::Value::String(t.to_owned()))
                        };
                        let request = json!({
                            "type": "request",
                            "id": r.id,
                            "kind": r.kind,
                            "createdAt": r.created_at,
                            "deadline": r.deadline,
                            "request": parse(&r.request),
                            "resolution": r.resolution.as_deref().map(parse),
                        });
                        out.push_str(&line(&request.to_string()));
                    }
                    return Some(Ok(out));
                }
                Stage::Done => return None,
            }
        }
    }

    /// The whole export as one string (for small sessions and tests; a front streams it).
    pub async fn collect(mut self) -> Result<String, RelayError> {
        let mut all = String::new();
        while let Some(chunk) = self.next_chunk().await {
            all.push_str(&chunk?);
        }
        Ok(all)
    }
}

fn line(text: &str) -> String {
    let mut l = String::with_capacity(text.len() + 1);
    l.push_str(text);
    l.push('\n');
    l
}
