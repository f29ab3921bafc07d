//! The store's write-ahead spool: every queued write is appended to a local file before clients
//! can see it, so a relay killed inside the writer's linger window loses nothing; the next
//! start replays what the database lacks.
//!
//! Each write is a line of JSON; a write, or a burst of one session's events, goes to the file
//! with one `write(2)`, without `fsync`: it survives the relay's death (the kernel holds it),
//! not the machine's. Files rotate at [`ROTATE_BYTES`] and are deleted
//! once everything in them is committed.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::writer::Item;
use super::{PendingRecord, SessionRecord, StoredEvent};

/// A spool file is sealed and a new one begun past this size.
const ROTATE_BYTES: u64 = 4 << 20;

/// One spooled write, as a line of JSON: borrowed from the queued write when it is appended
/// (the event pipeline copies nothing), owned when it is read back.
#[derive(Serialize, Deserialize)]
#[serde(tag = "w", rename_all = "lowercase")]
enum Line<'a> {
    Event {
        s: Cow<'a, str>,
        q: i64,
        t: i64,
        j: Cow<'a, str>,
    },
    Session(Cow<'a, SessionRecord>),
    Pending(Cow<'a, PendingRecord>),
}

impl<'a> Line<'a> {
    fn of(item: &'a Item) -> Option<Line<'a>> {
        match item {
            Item::Event(e) => Some(Line::Event {
                s: Cow::Borrowed(&e.session_id),
                q: e.seq,
                t: e.time,
                j: Cow::Borrowed(&e.json),
            }),
            Item::Session(s) => Some(Line::Session(Cow::Borrowed(s))),
            Item::Pending(p) => Some(Line::Pending(Cow::Borrowed(p))),
            // Raw Codex lines are diagnostics, kept only as far as the database has them.
            Item::Raw { .. } => None,
        }
    }

    fn into_item(self) -> Item {
        match self {
            Line::Event { s, q, t, j } => Item::Event(StoredEvent {
                session_id: s.into_owned(),
                seq: q,
                time: t,
                json: j.into_owned(),
            }),
            Line::Session(s) => Item::Session(s.into_owned()),
            Line::Pending(p) => Item::Pending(p.into_owned()),
        }
    }
}

/// Events the spool could not keep: until the database commits them, a crash loses them.
#[derive(Debug)]
pub(crate) struct Refused {
    /// Why.
    pub error: String,
    /// `(session, seq)`, in order.
    pub events: Vec<(String, i64)>,
    /// The spool number of the last of them (committed once the writer is past it).
    pub through: u64,
}

/// The spool of one store. Writes are numbered in the order they were queued; the writer
/// reports how many it has committed, and sealed files wholly below that are deleted.
pub(crate) struct Spool {
    dir: PathBuf,
    state: Mutex<State>,
    /// Held until [`Spool::release`] so two relays never share one spool directory.
    lock: Mutex<Option<File>>,
}

struct State {
    file: File,
    generation: u64,
    bytes: u64,
    /// Writes numbered so far (replayed ones included).
    written: u64,
    /// Sealed files, with the number of writes queued when each was sealed.
    sealed: VecDeque<(u64, u64)>,
    /// Set after a failed append, so the failure is logged once.
    failed: bool,
    /// Numbers (1-based, inclusive ranges) of the writes whose append failed: only the
    /// database can still keep those.
    unspooled: Vec<(u64, u64)>,
    /// The writer is done with the writes up to this number (see [`Spool::committed`]).
    committed: u64,
    /// Why the last write was not spooled.
    refused_error: String,
}

fn name(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("{generation:020}.spool"))
}

impl Spool {
    /// Opens the spool in `dir` (created if missing) and returns the writes an earlier run left
    /// uncommitted, oldest first; they count as the first writes of this spool. `None` when
    /// another live relay holds the directory.
    pub fn open(dir: &Path) -> std::io::Result<Option<(Spool, Vec<Item>)>> {
        fs::create_dir_all(dir)?;
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join("lock"))?;
        if lock.try_lock().is_err() {
            return Ok(None);
        }
        let mut generations: Vec<u64> = fs::read_dir(dir)?
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                name.strip_suffix(".spool")?.parse().ok()
            })
            .collect();
        generations.sort_unstable();
        let mut replay = Vec::new();
        let mut sealed = VecDeque::new();
        for &generation in &generations {
            let file = File::open(name(dir, generation))?;
            for line in BufReader::new(file).lines() {
                // A line cut short by the death of the process that wrote it is skipped.
                if let Ok(line) = serde_json::from_str::<Line>(&line?) {
                    replay.push(line.into_item());
                }
            }
            sealed.push_back((generation, replay.len() as u64));
        }
        let generation = generations.last().map_or(1, |g| g + 1);
        let file = create(dir, generation)?;
        let spool = Spool {
            dir: dir.to_owned(),
            state: Mutex::new(State {
                file,
                generation,
                bytes: 0,
                written: replay.len() as u64,
                sealed,
                failed: false,
                unspooled: Vec::new(),
                committed: 0,
                refused_error: String::new(),
            }),
            lock: Mutex::new(Some(lock)),
        };
        Ok(Some((spool, replay)))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends writes with one `write(2)`, then runs `queue` on each, in order, while still
    /// holding the spool, so writes reach the writer in spool order. Returns the events it
    /// could not keep (only the database can still keep them), if any.
    pub fn append_all(&self, items: Vec<Item>, mut queue: impl FnMut(Item)) -> Option<Refused> {
        let mut st = self.lock();
        let mut text = Vec::new();
        // Per write: None for a raw line (never spooled), else whether it serialized.
        let lines: Vec<Option<bool>> = items
            .iter()
            .map(|item| {
                Line::of(item).map(|line| {
                    let ok = serde_json::to_writer(&mut text, &line).is_ok();
                    text.push(b'\n');
                    ok
                })
            })
            .collect();
        // After a write it lacks, the spool takes nothing more until the writer is past that
        // write: a replay must never hold a write that follows one it lacks (the log would have
        // a hole that the next open could not see).
        let blocked = st
            .unspooled
            .last()
            .is_some_and(|&(_, end)| end > st.committed);
        // `Err(why)` when the text is not in the spool.
        let written = if text.is_empty() {
            Ok(())
        } else if blocked {
            Err(st.refused_error.clone())
        } else {
            let result = if st.failed {
                // The failed write may have left part of a line: end it, so the replay skips
                // only that part.
                st.file.write_all(&[b"\n", &text[..]].concat())
            } else {
                st.file.write_all(&text)
            };
            match result {
                Ok(()) => {
                    st.failed = false;
                    Ok(())
                }
                Err(e) => {
                    if !st.failed {
                        tracing::error!(dir = %self.dir.display(), "could not spool a write (it is still queued, but not safe from a crash): {e}");
                    }
                    st.failed = true;
                    st.refused_error = format!("the spool could not take writes: {e}");
                    Err(st.refused_error.clone())
                }
            }
        };
        st.bytes += text.len() as u64;
        let mut refused: Option<Refused> = None;
        for (item, line) in items.into_iter().zip(lines) {
            let number = st.written + 1;
            let run = st
                .unspooled
                .last_mut()
                .filter(|(_, end)| *end + 1 == number);
            if let (Some(ok), Item::Event(e)) = (line, &item)
                && !(ok && written.is_ok())
            {
                let r = refused.get_or_insert_with(|| Refused {
                    error: written
                        .clone()
                        .err()
                        .unwrap_or_else(|| "the spool could not encode a write".into()),
                    events: Vec::new(),
                    through: 0,
                });
                r.events.push((e.session_id.clone(), e.seq));
                r.through = number;
            }
            match (line, run) {
                (Some(true), _) if written.is_ok() => {}
                // Not in the spool: only the database can still keep it.
                (Some(_), Some((_, end))) => *end = number,
                (Some(_), None) => st.unspooled.push((number, number)),
                // Raw lines are never spooled; they only keep a run of failed writes in one
                // range.
                (None, Some((_, end))) => *end = number,
                (None, None) => {}
            }
            st.written += 1;
            queue(item);
        }
        if st.bytes >= ROTATE_BYTES {
            self.rotate(&mut st);
        }
        refused
    }

    fn rotate(&self, st: &mut State) {
        match create(&self.dir, st.generation + 1) {
            Ok(file) => {
                // The sealed file holds writes up to this number.
                let sealed = (st.generation, st.written);
                st.sealed.push_back(sealed);
                st.file = file;
                st.generation += 1;
                st.bytes = 0;
            }
            Err(e) => tracing::warn!("could not start a new spool file: {e}"),
        }
    }

    /// The writer committed (or gave up on, reporting them lost) the first `count` writes:
    /// delete the files that hold only those.
    pub fn committed(&self, count: u64) {
        let mut st = self.lock();
        st.committed = st.committed.max(count);
        while let Some(&(generation, end)) = st.sealed.front() {
            if end > count {
                break;
            }
            let _ = fs::remove_file(name(&self.dir, generation));
            st.sealed.pop_front();
        }
        // Everything queued is in: the current file can start over.
        if count >= st.written && st.bytes > 0 && st.file.set_len(0).is_ok() {
            st.bytes = 0;
        }
    }
}

impl Spool {
    /// Whether write number `number` (1-based, in queue order) is in the spool, so the next
    /// open replays it if the database never took it.
    pub fn holds(&self, number: u64) -> bool {
        !self
            .lock()
            .unspooled
            .iter()
            .any(|&(from, to)| (from..=to).contains(&number))
    }

    /// Whether the writer is done with every write up to `number` (committed, or given up and
    /// noted as lost).
    pub fn done_through(&self, number: u64) -> bool {
        self.lock().committed >= number
    }

    /// Where the store leaves the note of what it could not store (see `lost.rs`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// After a clean close (everything committed): lets another relay take the directory.
    pub fn release(&self) {
        let lock = self.lock.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(lock) = lock {
            let _ = lock.unlock();
        }
    }
}

fn create(dir: &Path, generation: u64) -> std::io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(name(dir, generation))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(seq: i64) -> Item {
        Item::Event(StoredEvent {
            session_id: "s".into(),
            seq,
            time: seq * 10,
            json: format!("{{\"seq\":{seq}}}"),
        })
    }

    fn seqs(items: &[Item]) -> Vec<i64> {
        items
            .iter()
            .map(|item| match item {
                Item::Event(e) => e.seq,
                _ => -1,
            })
            .collect()
    }

    /// A relay killed after spooling a burst replays the whole burst, in order, after what
    /// came before; raw lines are numbered but never spooled.
    #[test]
    fn a_burst_is_replayed_whole_and_in_order_after_a_kill() {
        let dir = tempfile::tempdir().unwrap();
        let (spool, replay) = Spool::open(dir.path()).unwrap().unwrap();
        assert!(replay.is_empty());
        let mut queued = Vec::new();
        spool.append_all(vec![event(1)], |item| queued.push(item));
        let raw = Item::Raw {
            session_id: "s".into(),
            line: "{}".into(),
        };
        spool.append_all(vec![event(2), raw, event(3), event(4)], |item| {
            queued.push(item)
        });
        assert_eq!(seqs(&queued), [1, 2, -1, 3, 4], "queued in the order given");
        let written = std::fs::read_to_string(name(dir.path(), 1)).unwrap();
        assert_eq!(written.lines().count(), 4, "{written}");
        assert!((1..=5).all(|n| spool.holds(n)));
        // Killed: nothing committed, the lock goes with the process.
        drop(spool);
        let (again, replay) = Spool::open(dir.path()).unwrap().unwrap();
        assert_eq!(seqs(&replay), [1, 2, 3, 4]);
        // The replayed writes are this spool's first; once committed, their file goes.
        again.committed(replay.len() as u64);
        assert!(!name(dir.path(), 1).exists());
    }
}
