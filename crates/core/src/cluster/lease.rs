//! Joining the cluster, keeping the lease, taking over instances past theirs, and what an
//! instance that lost its lease does: it stops the sessions it no longer owns without writing
//! a thing more for them, says so, and joins again as a new epoch with none.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use super::{Cluster, ClusterConfig, db, mirror, sql};
use crate::error::RelayError;
use crate::host::{Host, HostLink};
use crate::store::Fence;

/// How long leaving the cluster at shutdown may take.
const LEAVE_WAIT: Duration = Duration::from_secs(2);

/// Joins the cluster when the store is Postgres and clustering is on: registers under a new
/// epoch, fences the store's writes with it, and claims the stored sessions nobody owns.
/// Returns the sessions this instance runs (to restore); `None` when the relay is alone.
pub(crate) async fn join(host: &Host) -> Result<Option<HashSet<String>>, RelayError> {
    let config: ClusterConfig = host.config().cluster.clone();
    let Some(pool) = host.store().postgres().cloned() else {
        return Ok(None);
    };
    if !config.enabled {
        return Ok(None);
    }
    let id = match &config.instance_id {
        Some(id) => check_id(id)?,
        None => default_instance_id(),
    };
    let channel = sql::channel(&pool)
        .await
        .map_err(db("finding the cluster's channel"))?;
    let lease_ms = config.lease.as_millis().max(1) as i64;
    let epoch = sql::register(&pool, &id, config.url.as_deref(), lease_ms)
        .await
        .map_err(db("registering this instance"))?;
    let fence = Arc::new(Fence::new(channel, id.clone(), epoch));
    host.store().set_fence(fence.clone());
    sql::claim_unowned(&pool, &id)
        .await
        .map_err(db("claiming sessions nobody runs"))?;
    let own: HashSet<String> = sql::owned_by(&pool, &id)
        .await
        .map_err(db("reading this instance's sessions"))?
        .into_iter()
        .collect();
    tracing::info!(instance = %id, epoch, sessions = own.len(), lease = ?config.lease,
        "joined the cluster");
    let cluster = Arc::new(Cluster {
        id,
        pool,
        fence,
        config,
        waiting: Default::default(),
        sync: Default::default(),
        monitor: Default::default(),
        instances_changed: Default::default(),
        confirmed: std::sync::Mutex::new(tokio::time::Instant::now()),
        taking_over: Default::default(),
        adoptions: Default::default(),
        reading_rules: Default::default(),
        stop: tokio::sync::watch::channel(false).0,
    });
    host.set_placement(Arc::new(super::placement::Clustered(cluster)));
    Ok(Some(own))
}

/// An instance id: printable, no spaces (it is part of notices), at most 100 characters.
fn check_id(id: &str) -> Result<String, RelayError> {
    let ok = !id.is_empty() && id.len() <= 100 && id.chars().all(|c| c.is_ascii_graphic());
    if ok {
        Ok(id.to_owned())
    } else {
        Err(RelayError::InvalidOption(format!(
            "instance id {id:?}: use 1 to 100 printable characters without spaces"
        )))
    }
}

/// The host name and a random suffix: the id of an instance nobody named.
pub fn default_instance_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_graphic()))
        .unwrap_or_else(|| "relay".into());
    let suffix = crate::ids::random_id("");
    format!("{host}-{}", &suffix[..8])
}

/// Starts the mirrors of other instances' sessions and the cluster's tasks.
pub(crate) async fn start(host: &Host) -> Result<(), RelayError> {
    let Some(c) = host.cluster().cloned() else {
        return Ok(());
    };
    let others = sql::others_sessions(&c.pool, &c.id)
        .await
        .map_err(db("listing other instances' sessions"))?;
    for id in others {
        if let Err(e) = mirror::load(host, &id).await {
            tracing::warn!(session = %id, "could not mirror a session of another instance: {e}");
        }
    }
    tokio::spawn(super::listen::run(host.link()));
    tokio::spawn(super::mirror::sync_task(host.link()));
    tokio::spawn(keep(host.link()));
    Ok(())
}

/// Renews the lease every quarter of it, takes over instances past theirs, and reacts to a
/// lost lease.
async fn keep(link: HostLink) {
    let mut rounds: u64 = 0;
    // The lease's own connection: renewals neither wait behind the pool's other users nor
    // inherit its growing back-off while Postgres was away (after a restart the pool took up
    // to seconds to hand out a connection); made again after any failure.
    let mut line: Option<sqlx::PgConnection> = None;
    loop {
        let (period, fence, monitor_wake) = {
            let Some(host) = link.upgrade() else { return };
            let Some(c) = host.cluster().cloned() else {
                return;
            };
            (c.config.lease / 4, c.fence.clone(), c)
        };
        tokio::select! {
            () = tokio::time::sleep(period.max(Duration::from_millis(50))) => {}
            () = monitor_wake.monitor.notified() => {}
            () = fence.lost() => {}
        }
        drop(monitor_wake);
        let Some(host) = link.upgrade() else { return };
        let Some(c) = host.cluster().cloned() else {
            return;
        };
        if *c.stop.borrow() {
            return;
        }
        rounds += 1;
        if !c.fence.is_lost() {
            renew(&host, &c, &mut line).await;
        }
        if c.fence.is_lost() {
            if rejoin(&host, &c).await {
                c.confirm(tokio::time::Instant::now());
            }
            continue;
        }
        // In its own task: adopting sessions (reading their logs, closing cut turns) must not
        // hold up the next renewal of this instance's own lease.
        // One at a time: a round while one runs skips it.
        if c.taking_over.try_lock().is_ok() {
            let taker = host.clone();
            tokio::spawn(async move { take_over_now(&taker).await });
        }
        if rounds.is_multiple_of(240)
            && let Err(e) = sql::prune_commands(&c.pool).await
        {
            tracing::debug!("pruning answered commands failed: {e}");
        }
    }
}

/// One renewal of the lease. Others may take this instance over once the lease runs out on
/// Postgres's clock, so an instance that cannot confirm it for three quarters of it stops its
/// sessions (their Codex too) and writes nothing more for them, whether or not it knows of
/// other instances: one may have joined while this one could not hear of it (a network cut
/// to Postgres lets others in), and no command may run, or answer land, on two instances.
async fn renew(host: &Host, c: &Arc<Cluster>, line: &mut Option<sqlx::PgConnection>) {
    use sqlx::Connection;
    let sessions = host.local_sessions() as i64;
    let lease_ms = c.config.lease.as_millis() as i64;
    let asked = tokio::time::Instant::now();
    // Never wait past the point where this instance must stop (below).
    let stop_at = c.confirmed_at() + c.config.lease * 3 / 4;
    let wait = (c.config.lease / 4).min(stop_at.saturating_duration_since(asked));
    let renewed = tokio::time::timeout(wait.max(Duration::from_millis(1)), async {
        // A connection that broke since the last renewal (Postgres restarted) is made again
        // at once, once.
        let mut fresh = line.is_none();
        loop {
            if line.is_none() {
                *line = Some(sqlx::PgConnection::connect_with(&c.pool.connect_options()).await?);
            }
            let conn = line.as_mut().expect("connected above");
            match sql::renew(&mut *conn, &c.id, c.fence.epoch(), lease_ms, sessions).await {
                Err(_) if !fresh => {
                    *line = None;
                    fresh = true;
                }
                done => return done,
            }
        }
    })
    .await;
    if !matches!(renewed, Ok(Ok(_))) {
        // Timed out or failed: the connection may be dead or mid-statement.
        *line = None;
    }
    match renewed {
        Ok(Ok(true)) => c.confirm(asked),
        Ok(Ok(false)) => {
            tracing::error!(instance = %c.id,
                "the lease ran out before it was renewed, or another instance took this one over");
            c.fence.mark_lost();
        }
        Ok(Err(e)) => tracing::warn!(instance = %c.id,
            "could not renew the lease (this instance stops its sessions once it has not confirmed it for three quarters of it): {e}"),
        Err(_) => tracing::warn!(instance = %c.id,
            "renewing the lease took over a quarter of it (this instance stops its sessions once it has not confirmed it for three quarters of it)"),
    }
    let unconfirmed = c.confirmed_at().elapsed();
    if !c.fence.is_lost() && unconfirmed >= c.config.lease * 3 / 4 {
        tracing::error!(instance = %c.id, ?unconfirmed,
            "could not confirm the lease with Postgres for three quarters of it: stopping this instance's sessions before another takes them over");
        c.fence.mark_lost();
    }
}

impl Cluster {
    /// When Postgres last confirmed the lease.
    pub(super) fn confirmed_at(&self) -> tokio::time::Instant {
        *self.confirmed.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Postgres confirmed the lease as asked at `at` (the lease runs from no earlier than that).
    fn confirm(&self, at: tokio::time::Instant) {
        let mut confirmed = self.confirmed.lock().unwrap_or_else(|e| e.into_inner());
        *confirmed = (*confirmed).max(at);
    }
}

/// Takes over every instance past its lease (or gone) and adopts their sessions here; the
/// keep loop runs it every round, and a caller whose session's owner holds no lease runs it
/// at once rather than waiting for the next round.
pub(crate) async fn take_over_now(host: &Host) {
    let Some(c) = host.cluster().cloned() else {
        return;
    };
    if c.fence.is_lost() {
        return;
    }
    let _one = c.taking_over.lock().await;
    match sql::take_over(&c.pool, &c.fence.channel, &c.id, c.fence.epoch()).await {
        Ok(taken) if c.fence.is_lost() => {
            // The lease was lost while Postgres took the round (it waited for Postgres):
            // joining again, this instance adopts every session recorded as its own.
            if !taken.is_empty() {
                tracing::warn!(instance = %c.id, taken = taken.len(),
                    "took over instances just as this one lost its lease: their sessions are adopted once it joins again");
            }
        }
        Ok(taken) => {
            for (dead, sessions) in taken {
                tracing::warn!(instance = %c.id, lost = %dead, sessions = sessions.len(),
                    "took over an instance that left or went silent past its lease");
                let why = format!(
                    "instance {dead} stopped running this session (it left, or went silent past its lease) while this turn was running"
                );
                for id in sessions {
                    if let Err(e) = mirror::adopt(host, &id, &why).await {
                        tracing::error!(session = %id, "adopting a session failed: {e}");
                    }
                }
            }
        }
        Err(e) => tracing::warn!("looking for instances to take over failed: {e}"),
    }
}

/// This instance lost its lease (it was paused, or cut off from Postgres, past it; or another
/// process registered the same id): another instance runs its sessions now. They are stopped
/// here without writing anything more, and the instance joins again under a new epoch.
/// Returns true once joined again.
async fn rejoin(host: &Host, c: &Arc<Cluster>) -> bool {
    let local: Vec<_> = host.held_all().into_iter().filter(|h| !h.remote).collect();
    tracing::error!(instance = %c.id, epoch = c.fence.epoch(), sessions = local.len(),
        "this instance lost its lease: other instances run its sessions now. It writes nothing more for them, stops them here, and joins again");
    for h in &local {
        h.shared.detach();
        host.forget(h.id());
        host.broker().fail_session(
            h.id(),
            crate::decider::Decider::SessionClosed,
            "this relay instance lost its lease; another instance runs the session now",
        );
    }
    for h in &local {
        let _ = tokio::time::timeout(Duration::from_secs(5), h.close(true)).await;
    }
    host.servers().shutdown(Duration::from_secs(1)).await;
    // What the stopped sessions queued is dropped by the fence, which is still lost (bounded:
    // Postgres may be out of reach).
    let _ = tokio::time::timeout(Duration::from_secs(2), host.store().flush()).await;
    match sql::holder(&c.pool, &c.id).await {
        Ok(Some(epoch)) if epoch != c.fence.epoch() => {
            // Another process registered under this id and holds its lease: joining again
            // would take it from that one in turn, and the two would fence each other forever.
            tracing::error!(instance = %c.id, theirs = epoch,
                "another process runs as this instance id (give each instance its own id): this one stays out of the cluster and writes nothing more");
            c.stop.send_replace(true);
            return false;
        }
        Ok(_) => {}
        Err(e) => {
            tracing::error!("could not read this instance's row (retrying): {e}");
            return false;
        }
    }
    let lease_ms = c.config.lease.as_millis() as i64;
    match sql::register(&c.pool, &c.id, c.config.url.as_deref(), lease_ms).await {
        Ok(epoch) => {
            c.fence.renew(epoch);
            c.confirm(tokio::time::Instant::now());
            tracing::warn!(instance = %c.id, epoch, "joined the cluster again, running no sessions");
            // Sessions still recorded as this instance's (nobody took them while it was away)
            // are adopted again, their cut turns closed as after a restart.
            let why = format!(
                "instance {} lost contact with Postgres for most of its lease and stopped this session while this turn was running",
                c.id
            );
            match sql::owned_by(&c.pool, &c.id).await {
                Ok(ids) => {
                    for id in ids {
                        if let Err(e) = mirror::adopt(host, &id, &why).await {
                            tracing::error!(session = %id, "adopting a session again failed: {e}");
                        }
                    }
                }
                Err(e) => tracing::error!("reading this instance's sessions failed: {e}"),
            }
            for h in &local {
                if let Err(e) = mirror::load(host, h.id()).await {
                    tracing::debug!(session = %h.id(), "mirroring a lost session failed: {e}");
                }
            }
            true
        }
        Err(e) => {
            tracing::error!("could not join the cluster again (retrying): {e}");
            false
        }
    }
}

/// Leaves the cluster at shutdown, after the store is flushed: another instance adopts this
/// one's sessions at once instead of after the lease.
pub(crate) async fn leave(host: &Host) {
    let Some(c) = host.cluster() else { return };
    c.stop.send_replace(true);
    if c.fence.is_lost() {
        return;
    }
    // Bounded: a relay stopping on a dead Postgres must not wait for the pool's timeout.
    let left = tokio::time::timeout(
        LEAVE_WAIT,
        sql::leave(&c.pool, &c.fence.channel, &c.id, c.fence.epoch()),
    )
    .await;
    match left {
        Ok(Ok(())) => tracing::info!(instance = %c.id, "left the cluster"),
        Ok(Err(e)) => tracing::warn!(instance = %c.id,
            "could not leave the cluster (others take over once the lease runs out): {e}"),
        Err(_) => tracing::warn!(instance = %c.id,
            "could not leave the cluster within {LEAVE_WAIT:?} (others take over once the lease runs out)"),
    }
}
