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
use crate::op::Op;
use crate::placement::{Placed, Placement};
use crate::relay::Relay;
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
        relay: &'a Relay,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<SessionHandle>, RelayError>> {
        Box::pin(self.locate(relay, id))
    }

    fn find<'a>(
        &'a self,
        relay: &'a Relay,
        id: &'a str,
    ) -> BoxFuture<'a, Result<SessionHandle, RelayError>> {
        Box::pin(self.find(relay, id))
    }

    fn place_new<'a>(
        &'a self,
        relay: &'a Relay,
        opts: &'a CreateOptions,
    ) -> BoxFuture<'a, Result<Option<Placed>, RelayError>> {
        Box::pin(self.place_new(relay, opts))
    }

    fn claim<'a>(&'a self, relay: &'a Relay, id: &'a str) -> BoxFuture<'a, Result<(), RelayError>> {
        Box::pin(self.claim(relay, id))
    }

    fn unclaim(&self, id: &str) {
        self.unclaim(id)
    }

    fn check_writable(&self, relay: &Relay) -> Result<(), RelayError> {
        self.check_writable(relay)
    }

    fn epoch(&self) -> Option<i64> {
        Some(self.0.fence.epoch())
    }

    fn failed_while(&self, epoch: Option<i64>, e: RelayError) -> RelayError {
        self.failed_while(epoch, e)
    }

    fn confirm_stored<'a>(
        &'a self,
        relay: &'a Relay,
        since: Option<i64>,
    ) -> BoxFuture<'a, Result<(), RelayError>> {
        Box::pin(self.confirm_stored(relay, since))
    }

    fn acknowledge_turn<'a>(
        &'a self,
        relay: &'a Relay,
        shared: &'a SessionShared,
        after: u64,
        outcome: &'a SayOutcome,
        since: Option<i64>,
    ) -> BoxFuture<'a, Result<(), RelayError>> {
        Box::pin(self.acknowledge_turn(relay, shared, after, outcome, since))
    }

    fn here<'a>(
        &'a self,
        relay: &'a Relay,
        id: &'a str,
    ) -> BoxFuture<'a, Result<SessionHandle, RelayError>> {
        Box::pin(self.here(relay, id))
    }

    fn carry<'a>(&'a self, relay: &'a Relay, op: Op) -> BoxFuture<'a, Result<String, RelayError>> {
        Box::pin(async move {
            let session = op.session().unwrap_or_default().to_owned();
            super::mailbox::to_owner(relay, &session, op).await
        })
    }

    fn claim_answer<'a>(
        &'a self,
        relay: &'a Relay,
        session: &'a str,
        request: &'a str,
        by: &'a Decider,
    ) -> BoxFuture<'a, Result<(), RelayError>> {
        Box::pin(self.claim_answer(relay, session, request, by))
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
        relay: &'a Relay,
        id: &'a str,
    ) -> BoxFuture<'a, Result<(), RelayError>> {
        Box::pin(super::mirror::catch_up(relay, id))
    }

    fn rules_changed(&self) -> BoxFuture<'_, ()> {
        Box::pin(super::rules_changed(&self.0))
    }

    fn stop(&self) {
        self.0.stop.send_replace(true);
    }

    fn leave<'a>(&'a self, relay: &'a Relay) -> BoxFuture<'a, ()> {
        Box::pin(super::lease::leave(relay))
    }
}
