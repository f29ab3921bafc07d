//! Bringing a relay back after a restart: sessions and their history from the store (dormant
//! until the next `say`), turns the restart cut closed and completed from Codex's own record
//! ([`plan`]), and requests that were pending when it stopped, resolved as declined. It gets
//! narrow [`Inputs`] (the store, a broker handle, the pool, a session spawner), not the relay.

mod plan;
mod store_loss;

pub(crate) use plan::RESTARTED;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use codex_relay_protocol::v2::{ThreadRead, ThreadReadParams, Turn};
use serde_json::json;

use crate::broker::{Broker, Resolution};
use crate::error::RelayError;
use crate::event::{Ev, Role};
use crate::pool::Pool;
use crate::session::{SessionShared, SessionStatus};
use crate::store::Store;

/// What recovery needs from the relay it restores, and nothing more.
pub(crate) struct Inputs<'a> {
    pub store: &'a Store,
    /// Events per session kept in memory (EVENT_BUFFER_SIZE).
    pub event_buffer: usize,
    /// Remembers the resolutions of requests the old process left pending.
    pub broker: &'a Broker,
    /// Where Codex's record of a cut thread is read (any process with the relay's settings).
    pub servers: &'a Pool,
    /// Starts a restored session's actor: dormant, with no app-server and no slot.
    pub spawn: &'a (dyn Fn(Arc<SessionShared>) + Send + Sync),
    /// Only these sessions (those this instance of a cluster runs or adopts); all by default.
    pub only: Option<&'a std::collections::HashSet<String>>,
    /// Why the turns that were running were cut (a restart, or a lost instance).
    pub why: &'a str,
}

pub(crate) async fn restore(inputs: Inputs<'_>) -> Result<(), RelayError> {
    let store = inputs.store.clone();
    let mut restored: HashMap<String, Arc<SessionShared>> = HashMap::new();
    let mut records = store.sessions().await?;
    if let Some(only) = inputs.only {
        records.retain(|r| only.contains(&r.id));
    }
    // A loss note is this process's own: read it on a full restore only.
    let note = store.loss_note().filter(|_| inputs.only.is_none());
    for rec in &records {
        // The session row is written when the status changes; events logged after that are
        // only in the events table. Continue after the last stored event, or the events
        // appended below would reuse its seqs (and the store would keep the old ones).
        let mut rec = rec.clone();
        let stored = store.last_seq(&rec.id).await?;
        // Events shown but never stored (the last run gave them up): continue after them.
        let gap = store_loss::gap(note.as_ref(), &rec.id, stored);
        rec.last_seq = rec
            .last_seq
            .max(stored)
            .max(gap.as_ref().map_or(0, |g| g.shown));
        let state = SessionShared::restored_state(&rec);
        let restored_status = state.status;
        let shared = SessionShared::new(rec.id.clone(), store.clone(), inputs.event_buffer, state);
        (inputs.spawn)(shared.clone());
        restored.insert(rec.id.clone(), shared.clone());
        if let Some(gap) = &gap {
            shared.append_all(vec![store_loss::report(gap)]);
            shared.persist();
        }
        if Some(restored_status) != SessionStatus::parse(&rec.status) {
            // It was running when the relay stopped: close what the restart cut.
            let log = stored_log(&store, &rec.id).await?;
            let codex_turns = codex_record(inputs.servers, &rec.thread_id, &log).await;
            shared.append_all(plan::close_cut_turns(&log, &codex_turns, inputs.why));
            shared.append(
                Role::System,
                None,
                Ev::Status {
                    status: restored_status.as_str().into(),
                },
            );
            shared.persist();
        }
    }
    let why = format!("{}; the Codex process that asked is gone", inputs.why);
    for mut p in store.pending(None, true).await? {
        if inputs
            .only
            .is_some_and(|only| !only.contains(&p.session_id))
        {
            continue;
        }
        let resolution = Resolution {
            id: p.id.clone(),
            decision: crate::answer::Decision::Deny,
            by: crate::decider::Decider::RelayRestart,
            reason: Some(why.clone()),
            by_user: None,
        };
        p.resolution = Some(json!(resolution).to_string());
        store.upsert_pending(p.clone());
        if let Some(shared) = restored.get(&p.session_id) {
            shared.append(
                Role::System,
                None,
                crate::event::request_resolved(&resolution),
            );
        }
        inputs.broker.remember(resolution);
    }
    if !records.is_empty() {
        tracing::info!(sessions = records.len(), "restored sessions from the store");
    }
    if let Some(note) = &note {
        for lost in &note.sessions {
            if !records.iter().any(|r| r.id == lost.session_id) {
                tracing::error!(session = %lost.session_id, first = lost.first_seq, last = lost.last_seq,
                    "a session begun while the store failed was never stored; its events are lost");
            }
        }
        // The sessions' logs now say what the note said.
        store.flush().await?;
        store.forget_loss_note();
    }
    Ok(())
}

/// A session this instance adopted (its owner was taken over), settled as a restart settles
/// one: requests the old owner left pending are declined, and the turns the loss cut are
/// closed (completed from Codex's own record where it can be read).
pub(crate) async fn settle_adopted(
    store: &crate::store::Store,
    broker: &crate::broker::Broker,
    servers: &crate::pool::Pool,
    shared: &Arc<SessionShared>,
    why: &str,
) -> Result<(), RelayError> {
    let reason = format!("{why}; the Codex process that asked is gone");
    for mut p in store.pending(Some(&shared.id), true).await? {
        let resolution = Resolution {
            id: p.id.clone(),
            decision: crate::answer::Decision::Deny,
            by: crate::decider::Decider::RelayRestart,
            reason: Some(reason.clone()),
            by_user: None,
        };
        p.resolution = Some(json!(resolution).to_string());
        store.upsert_pending(p);
        shared.remove_pending(&resolution.id, crate::event::request_resolved(&resolution));
        broker.remember(resolution);
    }
    let log = stored_log(store, &shared.id).await?;
    if !plan::open_turns(&log).is_empty() {
        let turns = codex_record(servers, &shared.id, &log).await;
        shared.append_all(plan::close_cut_turns(&log, &turns, why));
    }
    shared.persist();
    Ok(())
}

/// A session's whole stored log.
async fn stored_log(
    store: &crate::store::Store,
    id: &str,
) -> Result<Vec<crate::event::Envelope>, RelayError> {
    let mut log = Vec::new();
    let mut after = 0;
    loop {
        let page = store.events(id, after, 10_000).await?;
        let Some(last) = page.last() else {
            return Ok(log);
        };
        after = last.seq;
        log.extend(
            page.iter()
                .filter_map(|e| serde_json::from_str(&e.json).ok()),
        );
    }
}

/// How long recovery waits for Codex's record of a cut thread before it closes the turns
/// without it.
const RECORD_WAIT: Duration = Duration::from_secs(15);

/// Codex's own record of the turns the log left open (`thread/read`), so what Codex persisted
/// and the log lacks (it was inside the store's linger window when the relay died) is
/// appended. Empty when nothing is open or Codex cannot say; the turns are closed anyway.
async fn codex_record(servers: &Pool, thread: &str, log: &[crate::event::Envelope]) -> Vec<Turn> {
    if thread.is_empty() || plan::open_turns(log).iter().all(|t| t.origin.is_some()) {
        return Vec::new();
    }
    let read = async {
        let server = servers.any().await?;
        let params = ThreadReadParams {
            thread_id: thread.to_owned(),
            include_turns: true,
        };
        server
            .call::<ThreadRead>(&params)
            .await
            .map_err(|e| RelayError::from_resume(thread, e))
    };
    match tokio::time::timeout(RECORD_WAIT, read).await {
        Ok(Ok(r)) => r.thread.turns,
        Ok(Err(e)) => {
            tracing::warn!(thread, "could not read Codex's record of a cut thread: {e}");
            Vec::new()
        }
        Err(_) => {
            tracing::warn!(thread, "Codex did not answer thread/read in time");
            Vec::new()
        }
    }
}
