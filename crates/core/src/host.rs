//! The engine as a place sees it: [`Host`] is the narrow handle a placement (the cluster,
//! behind core/placement.rs) gets of the relay it serves — its settings, store, broker and
//! pool, the sessions it holds, and the few things a place asks of it (resume, adopt, mirror,
//! run an operation here). A place never holds the relay itself; [`HostLink`] is the weak
//! reference its background tasks keep.

use std::sync::{Arc, Weak};

use futures::future::BoxFuture;

use crate::broker::Broker;
use crate::error::RelayError;
use crate::op::Op;
use crate::placement::Placement;
use crate::pool::Pool;
use crate::relay::{Relay, RelayInner};
use crate::relay_config::RelayConfig;
use crate::session::{Carrier, Door, SessionHandle, SessionShared};
use crate::store::Store;

/// What a place may ask of the engine it serves.
#[derive(Clone)]
pub(crate) struct Host(Relay);

/// A weak reference to a [`Host`]: what a place's background tasks keep, so they end with the
/// relay.
#[derive(Clone)]
pub(crate) struct HostLink(Weak<RelayInner>);

impl HostLink {
    /// The host, while the relay is open.
    pub(crate) fn upgrade(&self) -> Option<Host> {
        self.0.upgrade().map(|inner| Host(Relay { inner }))
    }
}

impl Relay {
    /// This relay as a place sees it.
    pub(crate) fn host(&self) -> Host {
        Host(self.clone())
    }
}

impl Host {
    pub(crate) fn link(&self) -> HostLink {
        HostLink(Arc::downgrade(&self.0.inner))
    }

    pub(crate) fn config(&self) -> &RelayConfig {
        &self.0.inner.config
    }

    pub(crate) fn store(&self) -> &Store {
        &self.0.inner.store
    }

    pub(crate) fn broker(&self) -> &Broker {
        &self.0.inner.broker
    }

    /// The relay's Codex processes.
    pub(crate) fn servers(&self) -> &Pool {
        &self.0.inner.servers
    }

    /// Where the relay's sessions run.
    pub(crate) fn placement(&self) -> &dyn Placement {
        self.0.placement()
    }

    /// Sets where sessions run (once, as the relay opens).
    pub(crate) fn set_placement(&self, placement: Arc<dyn Placement>) {
        self.0.set_placement(placement)
    }

    /// A session the relay holds (its own, or a mirror).
    pub(crate) fn held(&self, id: &str) -> Option<SessionHandle> {
        self.0.inner.get(id)
    }

    /// Every session the relay holds.
    pub(crate) fn held_all(&self) -> Vec<SessionHandle> {
        self.0.inner.handles()
    }

    /// Drops a session from the relay's map (its actor, if any, is left to end).
    pub(crate) fn forget(&self, id: &str) {
        self.0.inner.sessions_mut().remove(id);
    }

    /// Sessions the relay runs (not the mirrors), open or dormant.
    pub(crate) fn local_sessions(&self) -> usize {
        self.0.local_sessions()
    }

    /// A session by id, resumed here if the relay does not hold it ([`Relay::session`]).
    pub(crate) async fn resume(&self, id: &str) -> Result<SessionHandle, RelayError> {
        self.0.session(id).await
    }

    /// Runs a stored session here from now on: an actor, dormant until the next `say`.
    pub(crate) fn run_here(&self, shared: Arc<SessionShared>) -> SessionHandle {
        self.0.spawn_session(shared, None, &[], None)
    }

    /// Holds a session that runs elsewhere: shown to the feed like any session, its operations
    /// handed to `carrier`. A session already held (it became this relay's meanwhile) wins.
    pub(crate) fn hold_mirror(
        &self,
        shared: Arc<SessionShared>,
        carrier: Arc<dyn Carrier>,
    ) -> SessionHandle {
        let handle = SessionHandle {
            shared: shared.clone(),
            door: Door::Carried(carrier),
            remote: true,
        };
        let inner = &self.0.inner;
        let mut map = inner.sessions_mut();
        if let Some(existing) = map.get(handle.id()) {
            return existing.clone();
        }
        map.insert(handle.id().to_owned(), handle.clone());
        drop(map);
        shared.attach_feed(inner.feed.clone());
        inner.feed.session_created(shared.snapshot());
        handle
    }

    /// Runs an operation carried here; its reply as carried.
    pub(crate) fn serve(&self, op: Op) -> BoxFuture<'_, String> {
        Box::pin(op.serve(&self.0))
    }

    /// Reads the stored rules again, in place (another place changed them).
    pub(crate) async fn reload_rules(&self) -> Result<(), RelayError> {
        crate::approvals::reload_rules(self.store(), self.broker()).await
    }

    /// Refuses work the relay would have to store while it cannot.
    pub(crate) fn check_writable(&self) -> Result<(), RelayError> {
        self.0.check_writable()
    }
}
