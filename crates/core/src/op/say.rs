//! Say: starts a turn, or steers the running one; the relay checks what it may and acknowledges
//! the turn once its input is stored.

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use super::Operation;
use crate::error::RelayError;
use crate::relay::Relay;
use crate::session::SessionStatus;
use crate::session::{Actor, ActorOp, Flow, Replier, SayInput, SayOutcome, SessionHandle};

/// Starts a turn, or steers the running one.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Say {
    pub session: String,
    pub input: SayInput,
}

impl Operation for Say {
    type Reply = SayOutcome;
    const AGAIN_IS_HARMLESS: bool = false;
    fn session(&self) -> Option<&str> {
        Some(&self.session)
    }
    fn run_here(self, relay: &Relay) -> BoxFuture<'_, Result<SayOutcome, RelayError>> {
        Box::pin(async move {
            relay.here(&self.session).await?;
            relay.say(&self.session, self.input).await
        })
    }
}

impl ActorOp for Say {
    fn on_actor(self, actor: &mut Actor, reply: Replier<SayOutcome>) -> BoxFuture<'_, Flow> {
        Box::pin(async move {
            let _ = reply.send(actor.say(self.input).await);
            Flow::Continue
        })
    }
}

impl Relay {
    /// Idle: starts a turn. Running: steers it. Unknown ids that Codex knows are resumed.
    /// While a rate limit is hit, a message that would start a turn waits in the queue
    /// ([`SayOutcome::Queued`]; see turn_queue.rs).
    pub async fn say(&self, id: &str, input: SayInput) -> Result<SayOutcome, RelayError> {
        self.say_gated(id, input, None).await
    }

    pub(crate) async fn say_gated(
        &self,
        id: &str,
        input: SayInput,
        started: Option<crate::turn_queue::Started>,
    ) -> Result<SayOutcome, RelayError> {
        // A place that cannot store its work takes none, for any session.
        self.check_writable()?;
        let handle = self.session(id).await?;
        if handle.remote {
            // Checked and run where the session runs.
            return handle.say(input).await;
        }
        let policy = &self.inner.config.policy;
        if !input.images.is_empty() && !policy.is_open() {
            let cwd = handle.snapshot().cwd;
            policy.check(
                &crate::policy::Asked {
                    cwd: cwd.as_deref(),
                    images: &input.images,
                    ..Default::default()
                },
                &self.default_cwd(),
            )?;
        }
        if handle.shared.status() == SessionStatus::Closed {
            // Closed is final here; the thread itself can still be continued by other clients.
            return Err(RelayError::Closed(id.to_owned()));
        }
        let input = match self.gate_turn(&handle, input, started)? {
            crate::turn_queue::Gate::Go(input) => input,
            crate::turn_queue::Gate::Queued(queued) => return Ok(queued),
        };
        self.say_now_on(&handle, input).await
    }

    pub(crate) async fn say_now_on(
        &self,
        handle: &SessionHandle,
        input: SayInput,
    ) -> Result<SayOutcome, RelayError> {
        // An isolated session whose copy is gone (its run ended) gets a fresh one.
        self.renew_isolated_copy(handle)?;
        // A restored (dormant) session's actor claims its slot when it is used again.
        let before = handle.shared.last_seq();
        let epoch = self.placement_epoch();
        let limits = input.limits;
        let said = handle
            .say(input)
            .await
            .map_err(|e| self.failed_while(epoch, e))?;
        self.guard_turn(&handle.shared, &said, limits);
        // Told to the caller only once the message is stored.
        self.acknowledge_turn(&handle.shared, before, &said, epoch)
            .await?;
        Ok(said)
    }
}
