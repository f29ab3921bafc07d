//! Mirrors of sessions other instances run: each is a session whose state follows the log its
//! owner commits (read from the store when a notice names a newer seq) and whose commands go to
//! the owner; every front reads it as it reads a session of its own. Adopting a session turns
//! its mirror into this instance's own, in place, so whoever follows it keeps following.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use tokio::sync::Notify;

use super::mailbox;
use crate::error::RelayError;
use crate::event::Envelope;
use crate::host::{Host, HostLink};
use crate::op::Op;
use crate::pending::PendingView;
use crate::session::{Carrier, SessionHandle, SessionShared};

/// Events read per query when a mirror catches up.
const PAGE: i64 = 1000;

/// Sessions whose mirrors have news (or that this instance does not know yet).
#[derive(Default)]
pub(crate) struct SyncQueue {
    due: Mutex<HashSet<String>>,
    wake: Notify,
}

impl SyncQueue {
    pub(crate) fn push(&self, session: &str) {
        self.due
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(session.to_owned());
        self.wake.notify_one();
    }

    fn take(&self) -> Vec<String> {
        self.due
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .collect()
    }
}

/// Catches mirrors up as notices arrive, one session at a time (so a mirror applies its
/// events in order).
pub(crate) async fn sync_task(link: HostLink) {
    loop {
        let cluster = {
            let Some(host) = link.upgrade() else { return };
            let Some(c) = host.cluster().cloned() else {
                return;
            };
            c
        };
        cluster.sync.wake.notified().await;
        let due = cluster.sync.take();
        drop(cluster);
        let Some(host) = link.upgrade() else { return };
        // Mirrors this instance has are caught up together, with one query; sessions it does
        // not know yet are loaded one by one.
        let (known, unknown): (Vec<_>, Vec<_>) =
            due.into_iter().partition(|id| host.held(id).is_some());
        if let Err(e) = catch_up_many(&host, &known).await {
            tracing::warn!("mirrors could not catch up (each retries alone): {e}");
            for id in &known {
                if let Err(e) = catch_up(&host, id).await {
                    tracing::warn!(session = %id, "a mirror could not catch up (the next notice retries): {e}");
                }
            }
        }
        for id in unknown {
            if let Err(e) = catch_up(&host, &id).await {
                tracing::warn!(session = %id, "a mirror could not catch up (the next notice retries): {e}");
            }
        }
    }
}

/// Catches up the mirrors among `ids` with one read of every new row of them, each applied in
/// seq order; a mirror left short (a full page, a gap) reads on alone.
async fn catch_up_many(host: &Host, ids: &[String]) -> Result<(), RelayError> {
    let Some(c) = host.cluster().cloned() else {
        return Ok(());
    };
    let mirrors: Vec<SessionHandle> = ids
        .iter()
        .filter_map(|id| host.held(id))
        .filter(|h| h.remote)
        .collect();
    if mirrors.is_empty() {
        return Ok(());
    }
    let sessions: Vec<String> = mirrors.iter().map(|h| h.id().to_owned()).collect();
    let after: Vec<i64> = mirrors.iter().map(|h| h.shared.last_seq() as i64).collect();
    let rows = super::sql::events_after(&c.pool, &sessions, &after, PAGE)
        .await
        .map_err(super::db("reading mirrored sessions' new events"))?;
    let mut by_session: std::collections::HashMap<String, Vec<Envelope>> = Default::default();
    for (session, json) in rows {
        if let Ok(env) = serde_json::from_str::<Envelope>(&json) {
            by_session.entry(session).or_default().push(env);
        }
    }
    for h in mirrors {
        let events = by_session.remove(h.id()).unwrap_or_default();
        let full = events.len() as i64 >= PAGE;
        if (!events.is_empty() && !h.shared.replicate(events)) || full {
            catch_up(host, h.id()).await?;
        }
    }
    Ok(())
}

/// Applies what the owner committed after the mirror's last seq; a session this instance does
/// not know yet gets a mirror. Sessions this instance runs are left alone.
pub(crate) async fn catch_up(host: &Host, id: &str) -> Result<(), RelayError> {
    let handle = match host.held(id) {
        Some(h) if h.remote => h,
        Some(_) => return Ok(()),
        None => {
            load(host, id).await?;
            return Ok(());
        }
    };
    loop {
        let after = handle.shared.last_seq() as i64;
        let page = host.store().events(id, after, PAGE).await?;
        let full = page.len() as i64 == PAGE;
        let events: Vec<Envelope> = page
            .iter()
            .filter_map(|e| serde_json::from_str(&e.json).ok())
            .collect();
        if events.is_empty() {
            return Ok(());
        }
        if !handle.shared.replicate(events) {
            tracing::warn!(session = %id, after, "the log has a gap here; the mirror waits for it");
            return Ok(());
        }
        if !full {
            return Ok(());
        }
    }
}

/// A mirror of session `id` from the store, registered in this relay; `None` while the store
/// does not have the session (its first batch is not committed yet).
pub(crate) async fn load(host: &Host, id: &str) -> Result<Option<SessionHandle>, RelayError> {
    if let Some(h) = host.held(id) {
        return Ok(Some(h));
    }
    let store = host.store();
    let Some(mut rec) = store.session(id).await? else {
        return Ok(None);
    };
    let last = store.last_seq(id).await?;
    rec.last_seq = last;
    if let Some(c) = host.cluster() {
        let (turns, status) = super::sql::head(&c.pool, id, last)
            .await
            .map_err(super::db("reading a session's head"))?;
        rec.turn_count = turns;
        rec.status = status.unwrap_or_else(|| "idle".into());
    }
    let pending: Vec<PendingView> = store
        .pending(Some(id), true)
        .await?
        .iter()
        .filter_map(|p| serde_json::from_str(&p.request).ok())
        .collect();
    let turn = store
        .events(id, last - 1, 1)
        .await?
        .first()
        .and_then(|e| serde_json::from_str::<Envelope>(&e.json).ok())
        .and_then(|e| e.turn);
    let shared = SessionShared::mirror(
        store.clone(),
        host.config().event_buffer,
        &rec,
        pending,
        turn,
    );
    let carrier = Arc::new(ToOwner(host.link()));
    Ok(Some(host.hold_mirror(shared, carrier)))
}

/// Carries a mirror's operations to the session's owner.
pub(crate) struct ToOwner(pub HostLink);

impl Carrier for ToOwner {
    fn carry(&self, op: Op) -> BoxFuture<'static, Result<String, RelayError>> {
        let inner = self.0.clone();
        Box::pin(async move {
            let session = op.session().unwrap_or_default().to_owned();
            let host = inner
                .upgrade()
                .ok_or_else(|| RelayError::Closed(session.clone()))?;
            mailbox::to_owner(&host, &session, op).await
        })
    }
}

/// Makes session `id` this instance's own after its owner was taken over: its mirror (loaded
/// if there is none) catches up with everything the old owner committed, starts writing, has
/// the turns the loss cut closed and the requests it left declined, as a restart would, and
/// gets an actor (dormant until the next `say`, which resumes the thread here).
pub(crate) async fn adopt(host: &Host, id: &str, why: &str) -> Result<(), RelayError> {
    // One at a time per session: a second comer waits for the first and finds it done.
    let _one = match host.cluster() {
        Some(c) => {
            let lock = c
                .adoptions
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(id.to_owned())
                .or_default()
                .clone();
            Some(lock.lock_owned().await)
        }
        None => None,
    };
    // Adopted under this epoch, or not at all: an instance that lost its lease would write
    // nothing of it (joining again, it adopts what it owns then).
    let Some(epoch) = host
        .cluster()
        .map(|c| c.fence.clone())
        .filter(|f| !f.is_lost())
        .map(|f| f.epoch())
    else {
        return Ok(());
    };
    let Some(handle) = load(host, id).await? else {
        // Not stored: nothing ran long enough to need adopting.
        return Ok(());
    };
    if !handle.remote {
        return Ok(());
    }
    catch_up(host, id).await?;
    let shared = handle.shared.clone();
    shared.own();
    crate::recovery::settle_adopted(host.store(), host.broker(), host.servers(), &shared, why)
        .await?;
    let adopted = host.run_here(shared.clone());
    let fence = host.cluster().map(|c| c.fence.clone());
    if fence.is_some_and(|f| f.is_lost() || f.epoch() != epoch) {
        // The lease was lost meanwhile (a take-over that waited for Postgres finished after
        // it): what the adoption wrote was dropped, and the instance may have stopped its
        // sessions before this one was among them. Undone, so that it is adopted again from
        // its log (when the instance joins again, or when next asked for).
        shared.detach();
        host.forget(id);
        drop(adopted);
        tracing::warn!(session = %id, "adopting a session was undone: this instance lost its lease meanwhile");
        return Ok(());
    }
    tracing::info!(session = %id, "adopted");
    Ok(())
}
