//! Interrupt: stops the running turn (and its sub-agents' turns); `false` when none ran.

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use super::Operation;
use crate::error::RelayError;
use crate::relay::Relay;
use crate::session::{Actor, ActorOp, Flow, Replier};

/// Interrupts the running turn; `false` when none was running.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Interrupt {
    pub session: String,
}

impl Operation for Interrupt {
    type Reply = bool;
    const AGAIN_IS_HARMLESS: bool = true;
    fn session(&self) -> Option<&str> {
        Some(&self.session)
    }
    fn run_here(self, relay: &Relay) -> BoxFuture<'_, Result<bool, RelayError>> {
        Box::pin(async move { relay.here(&self.session).await?.run(self).await })
    }
}

impl ActorOp for Interrupt {
    fn on_actor(self, actor: &mut Actor, reply: Replier<bool>) -> BoxFuture<'_, Flow> {
        // Answered from its own task: a Codex slow to answer `turn/interrupt` must not hold
        // up the session's operations (a close, say) and events meanwhile.
        let asked = actor.interrupt();
        tokio::spawn(async move {
            let _ = reply.send(asked.await);
        });
        Box::pin(std::future::ready(Flow::Continue))
    }
}

impl Relay {
    /// Interrupts the running turn; `false` when none was running.
    pub async fn interrupt(&self, id: &str) -> Result<bool, RelayError> {
        let session = id.to_owned();
        self.place_and_run(crate::op::Interrupt { session }).await
    }
}
