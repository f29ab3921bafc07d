//! Where a session runs, as a seam: [`Placement`] resolves a session to where it runs (here, or
//! another instance of a cluster; later, a Codex the user attached) and carries operations
//! there. A relay alone uses [`Alone`]; the cluster implements it too (cluster/placement.rs).
//! The relay's verbs place, then run: they name nothing of the cluster.

use std::any::Any;
use std::sync::Arc;

use futures::future::BoxFuture;

use crate::config::CreateOptions;
use crate::decider::Decider;
use crate::error::RelayError;
use crate::host::Host;
use crate::op::Op;
use crate::relay::Relay;
use crate::relay_config::RelayConfig;
use crate::session::{ActorOp, SayOutcome, SessionHandle, SessionShared};

/// A session placed elsewhere, and the first turn it started (for a new one).
pub(crate) type Placed = (SessionHandle, Option<SayOutcome>);

/// Resolves sessions to where they run. Every method has the answer of a relay alone (all
/// sessions run here, every write is kept and retried) as its default.
pub(crate) trait Placement: Send + Sync + 'static {
    fn as_any(&self) -> &dyn Any;

    /// Whether readers see only what the store committed (others read it from there).
    fn readers_see_committed(&self) -> bool {
        false
    }

    /// A session the relay does not hold: `Some` when it runs elsewhere (a mirror) or was
    /// taken back here (adopted from its log); `None` when it is this place's to resume.
    fn locate<'a>(
        &'a self,
        _host: &'a Host,
        _id: &'a str,
    ) -> BoxFuture<'a, Result<Option<SessionHandle>, RelayError>> {
        Box::pin(async { Ok(None) })
    }

    /// A stored session the relay does not hold, that runs elsewhere (mirrored from then on).
    fn find<'a>(
        &'a self,
        _host: &'a Host,
        id: &'a str,
    ) -> BoxFuture<'a, Result<SessionHandle, RelayError>> {
        Box::pin(async move { Err(RelayError::UnknownSession(id.to_owned())) })
    }

    /// Where a new session starts: `Some` when another place started it.
    fn place_new<'a>(
        &'a self,
        _host: &'a Host,
        _opts: &'a CreateOptions,
    ) -> BoxFuture<'a, Result<Option<Placed>, RelayError>> {
        Box::pin(async { Ok(None) })
    }

    /// Records a session this place just started (or resumes) as its own.
    fn claim<'a>(&'a self, _host: &'a Host, _id: &'a str) -> BoxFuture<'a, Result<(), RelayError>> {
        Box::pin(async { Ok(()) })
    }

    /// Gives up a claim made for a thread that could not be resumed here.
    fn unclaim(&self, _id: &str) {}

    /// Refuses work this place would have to store while it cannot.
    fn check_writable(&self, _host: &Host) -> Result<(), RelayError> {
        Ok(())
    }

    /// The place's epoch now (see [`Placement::failed_while`]).
    fn epoch(&self) -> Option<i64> {
        None
    }

    /// The error to answer for work that failed: the place's own failure since `epoch`, when
    /// that is why.
    fn failed_while(&self, _epoch: Option<i64>, e: RelayError) -> RelayError {
        e
    }

    /// Waits until what this place wrote is stored, before a client is told it was done.
    /// `since` is the place's epoch taken before the work ([`Placement::epoch`]): a write queued
    /// under it lands under it or not at all, so a place that joined again since cannot confirm it.
    fn confirm_stored<'a>(
        &'a self,
        _host: &'a Host,
        _since: Option<i64>,
    ) -> BoxFuture<'a, Result<(), RelayError>> {
        Box::pin(async { Ok(()) })
    }

    /// Before a new turn is acknowledged: its input is logged and stored.
    fn acknowledge_turn<'a>(
        &'a self,
        _host: &'a Host,
        _shared: &'a SessionShared,
        _after: u64,
        _outcome: &'a SayOutcome,
        _since: Option<i64>,
    ) -> BoxFuture<'a, Result<(), RelayError>> {
        Box::pin(async { Ok(()) })
    }

    /// A carried operation's session, held here (adopted first if this place owns it but
    /// mirrors it); refused when it moved elsewhere.
    fn here<'a>(
        &'a self,
        host: &'a Host,
        id: &'a str,
    ) -> BoxFuture<'a, Result<SessionHandle, RelayError>> {
        Box::pin(host.resume(id))
    }

    /// Carries `op` to where its session runs; its reply as carried.
    fn carry<'a>(&'a self, host: &'a Host, op: Op) -> BoxFuture<'a, Result<String, RelayError>> {
        Box::pin(async move { Ok(host.serve(op).await) })
    }

    /// Records `by`'s answer to `request` as the one that counts across places.
    fn claim_answer<'a>(
        &'a self,
        _host: &'a Host,
        _session: &'a str,
        _request: &'a str,
        _by: &'a Decider,
    ) -> BoxFuture<'a, Result<(), RelayError>> {
        Box::pin(async { Ok(()) })
    }

    /// A request as the store has it: its session, and how it ended if it did (see
    /// by_id.rs). `None` alone: the broker has every request.
    fn stored_request<'a>(
        &'a self,
        _request: &'a str,
        _wait: bool,
    ) -> BoxFuture<'a, Option<(String, Option<crate::broker::Resolution>)>> {
        Box::pin(async { None })
    }

    /// Catches a mirror up with what its owner committed.
    fn catch_up<'a>(
        &'a self,
        _host: &'a Host,
        _id: &'a str,
    ) -> BoxFuture<'a, Result<(), RelayError>> {
        Box::pin(async { Ok(()) })
    }

    /// Tells the other places that the rules changed (each reads them again from the store).
    fn rules_changed(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }

    /// Stops the place's tasks (shutdown without the database).
    fn stop(&self) {}

    /// Leaves, handing this place's sessions on.
    fn leave<'a>(&'a self, _host: &'a Host) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }
}

/// A relay alone: every session runs here.
pub(crate) struct Alone;

impl Placement for Alone {
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The store's settings for a relay with this config (a cluster's commits linger less).
pub(crate) fn store_options(config: &RelayConfig) -> crate::store::StoreOptions {
    crate::cluster::store_options(config)
}

/// Takes the relay's place: joins the cluster when the config asks for one. `Some(ids)`: the
/// sessions this place runs (the others are mirrored), when it is not alone.
pub(crate) async fn join(
    relay: &Relay,
) -> Result<Option<std::collections::HashSet<String>>, RelayError> {
    crate::cluster::join(&relay.host()).await
}

/// Starts the place's tasks once the relay restored its sessions.
pub(crate) async fn start(relay: &Relay) -> Result<(), RelayError> {
    crate::cluster::start(&relay.host()).await
}

impl Relay {
    /// This instance's standing in the cluster; `None` when the relay is not part of one.
    pub fn cluster_standing(&self) -> Option<crate::cluster::Standing> {
        let host = self.host();
        Some(host.cluster()?.standing(host.store()))
    }

    /// The cluster as this instance sees it, its own standing first (known without Postgres)
    /// and the instances as the database records them, read within `wait` (with Postgres out
    /// of reach the view says why they are missing); `None` when the relay is not part of one.
    pub async fn cluster_view(
        &self,
        wait: std::time::Duration,
    ) -> Option<crate::cluster::ClusterView> {
        let host = self.host();
        let c = host.cluster()?;
        Some(c.view(c.standing(host.store()), wait).await)
    }

    /// This instance's id, when the relay is part of a cluster.
    pub fn instance_id(&self) -> Option<&str> {
        let placed = self
            .placement()
            .as_any()
            .downcast_ref::<crate::cluster::Clustered>()?;
        Some(placed.0.id.as_str())
    }

    /// Where this relay's sessions run.
    pub(crate) fn placement(&self) -> &dyn Placement {
        match self.inner.placement.get() {
            Some(p) => p.as_ref(),
            None => &Alone,
        }
    }

    /// Sets where sessions run (once, as the relay opens).
    pub(crate) fn set_placement(&self, placement: Arc<dyn Placement>) {
        let _ = self.inner.placement.set(placement);
    }

    pub(crate) fn check_writable(&self) -> Result<(), RelayError> {
        self.placement().check_writable(&self.host())
    }

    pub(crate) fn placement_epoch(&self) -> Option<i64> {
        self.placement().epoch()
    }

    pub(crate) fn failed_while(&self, epoch: Option<i64>, e: RelayError) -> RelayError {
        self.placement().failed_while(epoch, e)
    }

    /// Waits until what was written since the place's epoch `since` (taken before the work)
    /// is stored, before the caller is told the work was done.
    pub(crate) async fn confirm_stored(&self, since: Option<i64>) -> Result<(), RelayError> {
        self.placement().confirm_stored(&self.host(), since).await
    }

    pub(crate) async fn acknowledge_turn(
        &self,
        shared: &SessionShared,
        after: u64,
        outcome: &SayOutcome,
        since: Option<i64>,
    ) -> Result<(), RelayError> {
        self.placement()
            .acknowledge_turn(&self.host(), shared, after, outcome, since)
            .await
    }

    /// A session of this relay, or one stored that runs elsewhere (mirrored here from then
    /// on). A place can be asked about a session before it heard of it.
    pub(crate) async fn known_anywhere(&self, id: &str) -> Result<SessionHandle, RelayError> {
        if let Some(h) = self.inner.get(id) {
            return Ok(h);
        }
        self.placement().find(&self.host(), id).await
    }

    /// [`Relay::status`] of a session that runs anywhere (see [`Relay::known_anywhere`]); on
    /// one relay, the same as `status`.
    pub async fn find(&self, id: &str) -> Result<crate::session::SessionSnapshot, RelayError> {
        Ok(self.known_anywhere(id).await?.snapshot())
    }

    /// Place, then run: a session verb's whole path when it needs nothing more. The place must
    /// be able to store the work; the session is found wherever it runs, the operation runs
    /// there (this instance's actor, or carried to the owner), and the caller hears of it once
    /// what it wrote is stored. A new verb's public method (in its file in op/) calls this.
    pub(crate) async fn place_and_run<O: ActorOp>(&self, op: O) -> Result<O::Reply, RelayError> {
        self.check_writable()?;
        let handle = self
            .known_anywhere(op.session().unwrap_or_default())
            .await?;
        // What the operation writes is acknowledged only as stored under this epoch.
        let epoch = self.placement_epoch();
        let reply = handle.run(op).await?;
        if !handle.remote {
            self.confirm_stored(epoch).await?;
        }
        Ok(reply)
    }

    /// Runs a carried operation's session here (see [`Placement::here`]).
    pub(crate) async fn here(&self, id: &str) -> Result<SessionHandle, RelayError> {
        self.placement().here(&self.host(), id).await
    }
}
