//! A session letting go of its app-server so the pool can recycle the process (recycle/): only
//! while idle, and holding its operations until the recycle is done or given up, so no turn
//! can start on the process being stopped.

use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::{oneshot, watch};

use super::actor::{Actor, Flow, Job};
use super::{Door, SessionHandle, SessionStatus};

/// The longest a session holds its operations for a recycle.
const HOLD_AT_MOST: Duration = Duration::from_secs(60);

struct Detach {
    /// Turns true when the recycle is done (or given up).
    released: watch::Receiver<bool>,
    reply: oneshot::Sender<bool>,
}

impl Actor {
    fn idle_for_recycle(&self) -> bool {
        self.shared.current_turn().is_none()
            && self.running_turns().is_empty()
            && self.broker.pending(Some(&self.shared.id)).is_empty()
            && !matches!(
                self.shared.status(),
                SessionStatus::Active
                    | SessionStatus::AwaitingApproval
                    | SessionStatus::AwaitingInput
            )
    }
}

impl Job for Detach {
    fn run(self: Box<Self>, actor: &mut Actor) -> BoxFuture<'_, Flow> {
        let Detach {
            mut released,
            reply,
        } = *self;
        Box::pin(async move {
            // Given up before this session's turn came, or busy: nothing to let go of.
            if *released.borrow() || !actor.idle_for_recycle() {
                let _ = reply.send(false);
                return Flow::Continue;
            }
            actor.sub = None;
            actor.server = None;
            if reply.send(true).is_err() {
                return Flow::Continue;
            }
            let _ = tokio::time::timeout(HOLD_AT_MOST, released.wait_for(|done| *done)).await;
            Flow::Continue
        })
    }
}

impl SessionHandle {
    /// Asks the session's actor to let go of its app-server; `false` when it is busy (or not
    /// run here). Once it said yes it runs no operation until `released` turns true.
    pub(crate) async fn detach(&self, released: watch::Receiver<bool>) -> bool {
        let Door::Actor(jobs) = &self.door else {
            return false;
        };
        let (reply, answer) = oneshot::channel();
        if jobs
            .send(Box::new(Detach { released, reply }))
            .await
            .is_err()
        {
            return false;
        }
        answer.await.unwrap_or(false)
    }
}
