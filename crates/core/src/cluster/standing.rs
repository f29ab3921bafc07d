//! Whether this instance can take work now, and waiting until what it acknowledges is stored.
//! In a cluster an instance starts a session, or acts on one it runs, only while it holds its
//! lease (not lost, confirmed by Postgres within half of it) and its store takes writes; and it
//! answers only once what the action wrote is committed, so nothing a client was told
//! succeeded is lost with the instance (docs/CLUSTER.md, "Failures").

use std::time::Duration;

use super::{Cluster, Clustered};
use crate::error::RelayError;
use crate::event::Role;
use crate::host::Host;
use crate::session::{SayOutcome, SessionShared};

/// How long an acknowledgement of a new turn waits for Codex to echo the user's input.
const INPUT_ECHO: Duration = Duration::from_secs(5);

/// This instance's standing in the cluster, as it knows it without asking Postgres.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Standing {
    /// The lease is lost (taken over, refused at renewal, or not confirmed for three quarters
    /// of it) and the instance has not joined the cluster again.
    pub lost: bool,
    /// Milliseconds since Postgres last confirmed the lease.
    pub confirmed_ms_ago: u64,
    /// The lease, in milliseconds.
    pub lease_ms: u64,
    /// Why Postgres does not take this instance's writes, while it does not.
    pub store_fault: Option<String>,
}

impl Standing {
    /// Whether the instance takes new sessions and actions now.
    pub fn available(&self) -> bool {
        self.why_not("").is_none()
    }

    /// Why the instance takes no new sessions or actions now (`None` when it does).
    pub fn why_not(&self, instance: &str) -> Option<String> {
        if self.lost {
            return Some(format!(
                "instance {instance} lost its lease (another instance may run its sessions now) and has not joined the cluster again"
            ));
        }
        if self.confirmed_ms_ago.saturating_mul(2) >= self.lease_ms {
            return Some(format!(
                "instance {instance} could not confirm its lease with Postgres for {} ms (of a {} ms lease)",
                self.confirmed_ms_ago, self.lease_ms
            ));
        }
        self.store_fault.as_ref().map(|fault| {
            format!("Postgres does not take instance {instance}'s writes now ({fault})")
        })
    }
}

impl Cluster {
    /// This instance's standing in the cluster, with `store` its relay's store.
    pub(crate) fn standing(&self, store: &crate::store::Store) -> Standing {
        let c = self;
        let confirmed = c.confirmed_at();
        Standing {
            lost: c.fence.is_lost(),
            confirmed_ms_ago: u64::try_from(confirmed.elapsed().as_millis()).unwrap_or(u64::MAX),
            lease_ms: u64::try_from(c.config.lease.as_millis()).unwrap_or(u64::MAX),
            store_fault: store.stats().fault(),
        }
    }
}

impl Clustered {
    /// Refuses work this instance would have to store while it cannot: it holds no lease, or
    /// Postgres does not take its writes. Nothing to check outside a cluster (a relay alone
    /// keeps its writes and retries them, docs/STORE.md).
    pub(crate) fn check_writable(&self, host: &Host) -> Result<(), RelayError> {
        let c = &self.0;
        let standing = c.standing(host.store());
        match standing.why_not(&c.id) {
            None => Ok(()),
            Some(why) => Err(RelayError::Unavailable {
                instance: c.id.clone(),
                why: format!(
                    "{why}: it takes no new sessions or actions until it can store them; send this to another instance of the cluster, or try again in a moment"
                ),
            }),
        }
    }
    /// The error to answer for work that failed: when this instance lost its lease since
    /// `epoch` (it stopped its sessions, the one this work was for among them), that is why.
    pub(crate) fn failed_while(&self, epoch: Option<i64>, e: RelayError) -> RelayError {
        match (Some(&self.0), epoch) {
            (Some(c), Some(before)) if c.fence.is_lost() || c.fence.epoch() != before => {
                RelayError::Unavailable {
                    instance: c.id.clone(),
                    why: format!(
                        "instance {} lost its lease while doing this and stopped its sessions ({e}): send it to another instance of the cluster, or try again in a moment",
                        c.id
                    ),
                }
            }
            _ => e,
        }
    }
    /// Waits until everything this instance wrote so far is committed, before a client is told
    /// that what it asked for was done. In a cluster an instance that dies or loses its lease
    /// takes what it had not committed with it, so an answer given earlier could be a promise
    /// nobody keeps. Refused when the lease is lost first (the writes are dropped) or Postgres
    /// does not take them within a lease (they are kept and retried; the session's log shows
    /// whether they landed). Nothing to wait for outside a cluster. `since` is the epoch taken
    /// before the work was done: a write queued under it lands under it or not at all, so an
    /// instance that joined again since cannot confirm it.
    pub(crate) async fn confirm_stored(
        &self,
        host: &Host,
        since: Option<i64>,
    ) -> Result<(), RelayError> {
        let Some(c) = host.cluster().cloned() else {
            return Ok(());
        };
        let epoch = since.unwrap_or_else(|| c.fence.epoch());
        let wait: Duration = c.config.lease;
        let flushed = tokio::select! {
            r = tokio::time::timeout(wait, host.store().flush()) => Some(r),
            () = c.fence.lost() => None,
        };
        let why = match flushed {
            Some(Ok(Ok(()))) if !c.fence.is_lost() && c.fence.epoch() == epoch => return Ok(()),
            Some(Ok(Err(e))) => return Err(e.into()),
            Some(Err(_)) => format!(
                "Postgres did not store what instance {} did within {wait:?}; it is kept and retried, and the session's log shows whether it landed",
                c.id
            ),
            Some(Ok(Ok(()))) | None => format!(
                "instance {} lost its lease before Postgres stored what it did, so it may not have been kept: see the session's log",
                c.id
            ),
        };
        Err(RelayError::Unavailable {
            instance: c.id.clone(),
            why,
        })
    }
    /// Before a new turn is acknowledged: waits (at most [`INPUT_ECHO`]) until the session's
    /// log has the user's input of that turn (Codex echoes it as the turn starts; it is logged
    /// from there), then until it is stored, so the acknowledgement covers the message itself.
    /// A steered message is only waited for to be stored (Codex echoes it when it takes it).
    pub(crate) async fn acknowledge_turn(
        &self,
        host: &Host,
        shared: &SessionShared,
        after: u64,
        outcome: &SayOutcome,
        since: Option<i64>,
    ) -> Result<(), RelayError> {
        if host.cluster().is_none() {
            return Ok(());
        }
        if let SayOutcome::Started { turn_id } = outcome {
            let mut changes = shared.subscribe_changes();
            let echoed = tokio::time::timeout(INPUT_ECHO, async {
                loop {
                    let logged = shared
                        .logged_in_memory(after)
                        .iter()
                        .any(|e| e.role == Role::User && e.turn.as_deref() == Some(turn_id));
                    if logged || changes.changed().await.is_err() {
                        return;
                    }
                }
            })
            .await;
            if echoed.is_err() {
                tracing::warn!(session = %shared.id, turn = %turn_id,
                    "Codex did not echo the new turn's input within {INPUT_ECHO:?}; acknowledging it without");
            }
        }
        self.confirm_stored(host, since).await
    }
}
