//! What a closing store could not store: the events it gave up on a database that would not
//! take them, written down as a note beside the store (or in a fallback directory when that
//! filesystem refuses too), so the next open can tell each session exactly what is missing.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::open::{Target, classify};

/// The events of one session that clients were shown but the store never kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LostEvents {
    pub session_id: String,
    /// The lowest seq given up.
    pub first_seq: i64,
    /// The highest seq given up: the session's log went on to here.
    pub last_seq: i64,
    /// How many events between the two were given up.
    pub count: usize,
}

/// What the last run of a store could not store, as the next open finds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LossNote {
    /// Which store: the SQLite file, or the Postgres URL without its password.
    pub store: String,
    /// The database's error when the writes were given up.
    pub fault: String,
    /// Unix milliseconds.
    pub at: i64,
    pub sessions: Vec<LostEvents>,
}

/// Events given up so far by this run's writer (at close, on a database that would not take
/// them and a spool that does not hold them).
#[derive(Debug, Default)]
pub(crate) struct Losses {
    by_session: BTreeMap<String, LostEvents>,
    pub fault: Option<String>,
}

impl Losses {
    pub fn event(&mut self, session_id: &str, seq: i64) {
        let e = self
            .by_session
            .entry(session_id.to_owned())
            .or_insert_with(|| LostEvents {
                session_id: session_id.to_owned(),
                first_seq: seq,
                last_seq: seq,
                count: 0,
            });
        e.first_seq = e.first_seq.min(seq);
        e.last_seq = e.last_seq.max(seq);
        e.count += 1;
    }

    /// Events given up, over all sessions.
    pub fn events(&self) -> usize {
        self.by_session.values().map(|e| e.count).sum()
    }

    pub fn note(&self, store: &str) -> LossNote {
        LossNote {
            store: store.to_owned(),
            fault: self.fault.clone().unwrap_or_default(),
            at: crate::ids::now_ms(),
            sessions: self.by_session.values().cloned().collect(),
        }
    }
}

/// Events shown while neither the spool nor the database kept them. They are noted beside the
/// store as they happen, so a relay killed before the database takes them leaves the note a
/// closing one would (the next open tells each session which seqs it lacks); once the writer
/// is past them, the note goes.
#[derive(Debug, Default)]
pub(crate) struct AtRisk {
    pub losses: Losses,
    /// The spool number of the last of them.
    pub through: u64,
    /// Set once a note could not be written (logged once).
    pub unwritable: bool,
}

/// Where the note of one store lives: `lost.json` in its spool directory, else
/// `<hash of the store>.json` in the fallback directory.
#[derive(Debug, Clone)]
pub(crate) struct NotePlaces {
    key: String,
    places: Vec<PathBuf>,
}

impl NotePlaces {
    /// `None` for an in-memory database (nothing outlives it, so there is nothing to note).
    pub fn new(target: &str, spool: Option<&Path>, fallback: Option<PathBuf>) -> Option<Self> {
        let key = match classify(target).ok()? {
            Target::SqlitePath(path) => std::path::absolute(path)
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| path.to_owned()),
            Target::SqliteUrl(url) if url.contains(":memory:") || url.contains("mode=memory") => {
                return None;
            }
            Target::SqliteUrl(url) => url.to_owned(),
            Target::Postgres(url) => super::error::redact(url),
        };
        // FNV-1a: the same name from every build (std's hasher may change between releases).
        let hash = key.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        let file = format!("{hash:016x}.json");
        let places = spool
            .map(|d| d.join("lost.json"))
            .into_iter()
            .chain(fallback.or_else(default_fallback).map(|d| d.join(file)))
            .collect();
        Some(NotePlaces { key, places })
    }

    /// The store this note is about.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The note the last run left, if any (merged when it is in both places).
    pub fn read(&self) -> Option<LossNote> {
        let mut found: Option<LossNote> = None;
        for place in &self.places {
            let Ok(text) = std::fs::read_to_string(place) else {
                continue;
            };
            match serde_json::from_str::<LossNote>(&text) {
                Ok(note) if note.store == self.key => match &mut found {
                    Some(f) => f.sessions.extend(note.sessions),
                    None => found = Some(note),
                },
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(place = %place.display(), "unreadable store loss note: {e}")
                }
            }
        }
        found
    }

    /// Writes the note to the first place that takes it; returns that place. `sync`: fsync it
    /// (a note of events given up at close), or not (a note that only has to outlive the
    /// relay, rewritten as events come, like the spool).
    pub fn write(&self, note: &LossNote, sync: bool) -> Result<PathBuf, String> {
        let text = serde_json::to_vec_pretty(note).map_err(|e| e.to_string())?;
        let mut errors = Vec::new();
        for place in &self.places {
            let tmp = place.with_extension("json.tmp");
            let written = (|| {
                if let Some(dir) = place.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                let mut f = std::fs::File::create(&tmp)?;
                f.write_all(&text)?;
                if sync {
                    f.sync_all()?;
                }
                std::fs::rename(&tmp, place)
            })();
            match written {
                Ok(()) => return Ok(place.clone()),
                Err(e) => {
                    let _ = std::fs::remove_file(&tmp);
                    errors.push(format!("{}: {e}", place.display()));
                }
            }
        }
        Err(errors.join("; "))
    }

    /// Forgets the note (once the sessions' logs say what it said).
    pub fn remove(&self) {
        for place in &self.places {
            let _ = std::fs::remove_file(place);
        }
    }
}

/// `$XDG_STATE_HOME/codex-relay/lost`, else `~/.local/state/codex-relay/lost`.
fn default_fallback() -> Option<PathBuf> {
    let state = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".local/state"))
        })?;
    Some(state.join("codex-relay").join("lost"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_falls_back_when_the_spool_directory_refuses_it_and_is_read_back() {
        let dir = tempfile::tempdir().unwrap();
        // A "directory" that is a file: nothing can be written under it.
        let blocked = dir.path().join("blocked");
        std::fs::write(&blocked, "").unwrap();
        let fallback = dir.path().join("fallback");
        let db = dir.path().join("relay.db").display().to_string();
        let places = NotePlaces::new(&db, Some(&blocked), Some(fallback.clone())).unwrap();
        let mut losses = Losses::default();
        for seq in [7, 5, 6] {
            losses.event("s1", seq);
        }
        losses.fault = Some("disk I/O error".into());
        assert_eq!(losses.events(), 3);
        let at = places.write(&losses.note(places.key()), true).unwrap();
        assert!(at.starts_with(&fallback), "written to the fallback: {at:?}");
        let note = places.read().expect("the note is found again");
        assert_eq!(note.fault, "disk I/O error");
        assert_eq!(
            note.sessions,
            vec![LostEvents {
                session_id: "s1".into(),
                first_seq: 5,
                last_seq: 7,
                count: 3
            }]
        );
        // Another store's note in the same fallback is not this store's.
        let other = dir.path().join("other.db").display().to_string();
        let other = NotePlaces::new(&other, None, Some(fallback)).unwrap();
        assert_eq!(other.read(), None);
        places.remove();
        assert_eq!(places.read(), None);
        assert!(NotePlaces::new("sqlite::memory:", None, None).is_none());
    }
}
