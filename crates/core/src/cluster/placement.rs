//! The cluster as a [`Placement`]: a session runs on the instance that owns it, and is a mirror
//! everywhere else; operations go to the owner through the command table. Each method is one
//! of the cluster's own (route.rs, standing.rs, answers.rs, mailbox.rs).

use std::any::Any;
use std::sync::Arc;

use futures::future::BoxFuture;

use super::Cluster;
use crate::config::CreateOptions;
use crate::decider::Decider;
use crate::error::RelayError;
use crate::host::Host;
use crate::op::Op;
use crate::placement::{Placed, Placement};
use crate::session::{SayOutcome, SessionHandle, SessionShared};

/// This instance's part of the cluster, as where its sessions run.
pub(crate) struct Clustered(pub Arc<Cluster>);

impl Placement for Clustered {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn readers_see_committed(&self) -> bool {
        true
    }

    fn locate<'a>(
        &'a self,
        host: &'a Host,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<SessionHandle>, RelayError>> {
        Box::pin(self.locate(host, id))
    }

    fn find<'a>(
        &'a self,
        host: &'a Host,
        id: &'a str,
    ) -> BoxFuture<'a, Result<SessionHandle, RelayError>> {
        Box::pin(self.find(host, id))
    }

    fn place_new<'a>(
        &'a self,
        host: &'a Host,
        opts: &'a CreateOptions,
    ) -> BoxFuture<'a, Result<Option<Placed>, RelayError>> {
        Box::pin(self.place_new(host, opts))
    }

    fn claim<'a>(&'a self, host: &'a Host, id: &'a str) -> BoxFuture<'a, Result<(), RelayError>> {
        Box::pin(self.claim(host, id))
    }

    fn unclaim(&self, id: &str) {
        self.unclaim(id)
    }

    fn check_writable(&self, host: &Host) -> Result<(), RelayError> {
        self.check_writable(host)
    }

    fn epoch(&self) -> Option<i64> {
        Some(self.0.fence.epoch())
    }

    fn failed_while(&self, epoch: Option<i64>, e: RelayError) -> RelayError {
        self.failed_while(epoch, e)
    }

    fn confirm_stored<'a>(
        &'a self,
        host: &'a Host,
        since: Option<i64>,
    ) -> BoxFuture<'a, Result<(), RelayError>> {
        Box::pin(self.confirm_stored(host, since))
    }

    fn acknowledge_turn<'a>(
        &'a self,
        host: &'a Host,
        shared: &'a SessionShared,
        after: u64,
        outcome: &'a SayOutcome,
        since: Option<i64>,
    ) -> BoxFuture<'a, Result<(), RelayError>> {
        Box::pin(self.acknowledge_turn(host, shared, after, outcome, since))
    }

    fn here<'a>(
        &'a self,
        host: &'a Host,
        id: &'a str,
    ) -> BoxFuture<'a, Result<SessionHandle, RelayError>> {
        Box::pin(self.here(host, id))
    }

    fn carry<'a>(&'a self, host: &'a Host, op: Op) -> BoxFuture<'a, Result<String, RelayError>> {
        Box::pin(async move {
            let session = op.session().unwrap_or_default().to_owned();
            super::mailbox::to_owner(host, &session, op).await
        })
    }

    fn claim_answer<'a>(
        &'a self,
        host: &'a Host,
        session: &'a str,
        request: &'a str,
        by: &'a Decider,
    ) -> BoxFuture<'a, Result<(), RelayError>> {
        Box::pin(self.claim_answer(host, session, request, by))
    }

    fn stored_request<'a>(
        &'a self,
        request: &'a str,
        wait: bool,
    ) -> BoxFuture<'a, Option<(String, Option<crate::broker::Resolution>)>> {
        Box::pin(self.stored_request(request, wait))
    }

    fn catch_up<'a>(
        &'a self,
        host: &'a Host,
        id: &'a str,
    ) -> BoxFuture<'a, Result<(), RelayError>> {
        Box::pin(super::mirror::catch_up(host, id))
    }

    fn rules_changed(&self) -> BoxFuture<'_, ()> {
        Box::pin(super::rules_changed(&self.0))
    }

    fn stop(&self) {
        self.0.stop.send_replace(true);
    }

    fn leave<'a>(&'a self, host: &'a Host) -> BoxFuture<'a, ()> {
        Box::pin(super::lease::leave(host))
    }
}
