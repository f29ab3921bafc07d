//! Set limits: changes a session's budget, its turns' limits or its price table.

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use super::Operation;
use crate::error::RelayError;
use crate::relay::Relay;
use crate::session::{Actor, ActorOp, Flow, Replier};

/// Sets a session's budget, turn limits or price table (e.g. raises a budget it reached).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SetLimits {
    pub session: String,
    pub change: Box<crate::limits::LimitsChange>,
}

impl Operation for SetLimits {
    type Reply = crate::limits::LimitsView;
    const AGAIN_IS_HARMLESS: bool = true;
    fn session(&self) -> Option<&str> {
        Some(&self.session)
    }
    fn run_here(self, relay: &Relay) -> BoxFuture<'_, Result<Self::Reply, RelayError>> {
        Box::pin(async move { relay.here(&self.session).await?.run(self).await })
    }
}

impl ActorOp for SetLimits {
    fn on_actor(
        self,
        actor: &mut Actor,
        reply: Replier<crate::limits::LimitsView>,
    ) -> BoxFuture<'_, Flow> {
        let c = *self.change;
        actor.shared.set_limits(c.budget, c.limits, c.prices);
        let _ = reply.send(Ok(actor.shared.limits_view()));
        Box::pin(std::future::ready(Flow::Continue))
    }
}

impl Relay {
    /// Changes a session's budget (the limits `change` names; raising one it reached lets it
    /// start turns again), its turns' limits or its price table, where the session runs.
    pub async fn set_limits(
        &self,
        id: &str,
        change: crate::limits::LimitsChange,
    ) -> Result<crate::limits::LimitsView, crate::error::RelayError> {
        change
            .check()
            .map_err(crate::error::RelayError::InvalidOption)?;
        let session = id.to_owned();
        let change = Box::new(change);
        self.place_and_run(crate::op::SetLimits { session, change })
            .await
    }
}
