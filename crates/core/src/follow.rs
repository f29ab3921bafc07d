//! Following a session: its logged events after a seq (history from memory or the store, then
//! live, with no gap or repeat at the seam), its live deltas, and its end. Every front that
//! streams a session reads it through this one call; it is the seam a multi-instance relay
//! fills from Postgres.

use std::sync::Arc;

use tokio::sync::{broadcast, watch};

use crate::error::RelayError;
use crate::event::{Delta, Envelope};
use crate::relay::Relay;
use crate::session::{SessionShared, SessionStatus};

/// How to follow.
#[derive(Debug, Clone, Copy)]
pub struct FollowOptions {
    /// Also yield the session's live deltas (streaming text and output; not logged).
    pub deltas: bool,
    /// The most events one [`Followed::Events`] holds.
    pub batch: usize,
}

impl Default for FollowOptions {
    fn default() -> Self {
        Self {
            deltas: true,
            batch: 256,
        }
    }
}

/// What following yields.
#[derive(Debug, Clone)]
pub enum Followed {
    /// Logged events after the previous ones, in seq order, without gaps.
    Events(Vec<Arc<Envelope>>),
    /// A live delta (a preview: the logged event that follows carries the whole text).
    Delta(Delta),
    /// The session is closed and every event was yielded; nothing more comes.
    End,
}

/// A position in one session's log. Each [`Follow::next`] is cancel-safe: a call dropped
/// before it returns changes nothing.
pub struct Follow {
    relay: Relay,
    shared: Arc<SessionShared>,
    changes: watch::Receiver<u64>,
    deltas: Option<broadcast::Receiver<Delta>>,
    cursor: u64,
    batch: usize,
    /// Read the log before waiting (at the start, after a change, after a full batch).
    read_now: bool,
    ended: bool,
}

impl Relay {
    /// Follows session `id` from after seq `after` (0: from its first event). Unknown ids that
    /// Codex knows are resumed, as [`Relay::session`] does.
    pub async fn follow(
        &self,
        id: &str,
        after: u64,
        opts: FollowOptions,
    ) -> Result<Follow, RelayError> {
        let handle = self.session(id).await?;
        let shared = handle.shared.clone();
        // Subscribe first, read second: nothing appended after this point can be missed.
        Ok(Follow {
            changes: shared.subscribe_changes(),
            deltas: opts.deltas.then(|| shared.subscribe_deltas()),
            shared,
            relay: self.clone(),
            cursor: after,
            batch: opts.batch.max(1),
            read_now: true,
            ended: false,
        })
    }
}

impl Follow {
    /// The seq of the last event yielded (or the starting point).
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// The session's id.
    pub fn session_id(&self) -> &str {
        &self.shared.id
    }

    /// The session's status now.
    pub fn status(&self) -> SessionStatus {
        self.shared.status()
    }

    /// The events after the cursor: from memory when they are there, else from the store.
    async fn read(&self) -> Result<Vec<Arc<Envelope>>, RelayError> {
        if let Some(events) = self.shared.events_in_memory(self.cursor, self.batch) {
            return Ok(events);
        }
        self.relay
            .events(&self.shared.id, self.cursor, self.batch)
            .await
    }

    /// The next thing that happens: logged events after the cursor (at once when there are
    /// some), else a delta or, once the session is closed and drained, [`Followed::End`].
    /// `Err` when the log cannot be read; `None` after the end.
    pub async fn next(&mut self) -> Option<Result<Followed, RelayError>> {
        if self.ended {
            return None;
        }
        loop {
            if self.read_now {
                let batch = match self.read().await {
                    Ok(b) => b,
                    Err(e) => return Some(Err(e)),
                };
                if let Some(last) = batch.last().map(|e| e.seq) {
                    self.cursor = last;
                    // A full batch: more may be there. Otherwise the next read waits for a
                    // change (one made after this read is pending on `changes`).
                    self.read_now = batch.len() == self.batch;
                    return Some(Ok(Followed::Events(batch)));
                }
                self.read_now = false;
            }
            // Stopped here after this instance lost its lease: the stream ends (without an
            // `end`: the session is not closed), and the reader finds it where it runs now.
            if self.shared.is_frozen() && self.cursor >= self.shared.shown_seq() {
                self.ended = true;
                return None;
            }
            if self.shared.status() == SessionStatus::Closed
                && self.cursor >= self.shared.shown_seq()
            {
                self.ended = true;
                return Some(Ok(Followed::End));
            }
            let delta = async {
                match &mut self.deltas {
                    Some(rx) => rx.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                changed = self.changes.changed() => {
                    if changed.is_err() {
                        // The session's state is gone (the relay shut down): read what is left.
                        self.ended = true;
                        return None;
                    }
                    self.read_now = true;
                }
                d = delta => match d {
                    Ok(d) => return Some(Ok(Followed::Delta(d))),
                    // Deltas are a preview; the logged events carry the full text.
                    Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => self.deltas = None,
                },
            }
        }
    }
}
