//! Close: ends a session (its sub-agents' too) and frees its slot; the thread stays in Codex.

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use super::Operation;
use crate::error::RelayError;
use crate::relay::Relay;
use std::time::Duration;

use crate::session::{Actor, ActorOp, Flow, Replier};

/// Ends the session; `force` does not wait for its running turn to stop.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Close {
    pub session: String,
    pub force: bool,
}

impl Operation for Close {
    type Reply = ();
    const AGAIN_IS_HARMLESS: bool = true;
    fn session(&self) -> Option<&str> {
        Some(&self.session)
    }
    fn run_here(self, relay: &Relay) -> BoxFuture<'_, Result<(), RelayError>> {
        Box::pin(async move {
            relay.here(&self.session).await?;
            relay.close(&self.session, self.force).await
        })
    }
}

impl ActorOp for Close {
    fn on_actor(self, actor: &mut Actor, reply: Replier<()>) -> BoxFuture<'_, Flow> {
        Box::pin(async move {
            // Closing a session closes its sub-agents: their turns are interrupted and their
            // requests resolved with the session's.
            if let Some(peer) = actor.attached.take() {
                // Only the relay stops following: the thread and its turn go on in the daemon.
                let thread = actor.shared.id.clone();
                tokio::spawn(async move {
                    let _ = peer
                        .request(
                            "thread/unsubscribe",
                            &serde_json::json!({"threadId": thread}),
                            None,
                        )
                        .await;
                });
            } else if !self.force {
                let _ = tokio::time::timeout(Duration::from_secs(3), actor.interrupt()).await;
            } else if let Some(server) = &actor.server {
                for (thread, turn) in actor.running_turns() {
                    let server = server.clone();
                    tokio::spawn(async move { server.turn_interrupt(&thread, &turn).await });
                }
            }
            actor.broker.fail_session(
                &actor.shared.id,
                crate::decider::Decider::SessionClosed,
                "the session was closed",
            );
            actor.shared.close();
            actor.sub = None;
            // Freed before the reply, so the caller can open another session at once.
            actor.slot = None;
            let _ = reply.send(Ok(()));
            Flow::Stop
        })
    }
}

impl Relay {
    /// Ends a session; `force` does not wait for the running turn to stop.
    pub async fn close(&self, id: &str, force: bool) -> Result<(), RelayError> {
        self.check_writable()?;
        let handle = self.known_anywhere(id).await?;
        // What the close writes is acknowledged only as stored under this epoch.
        let epoch = self.placement_epoch();
        // The actor frees the session's slot as it closes.
        let closed = handle.close(force).await;
        self.inner
            .copies
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
        closed?;
        // Its worktree goes with it (its uncommitted work committed to its branch first).
        if !handle.remote
            && let Some(w) = handle.snapshot().worktree
            && let Err(e) = crate::worktree::close(&w).await
        {
            tracing::warn!(session = id, "removing the session's worktree failed: {e}");
        }
        if !handle.remote {
            self.confirm_stored(epoch).await?;
        }
        Ok(())
    }
}
