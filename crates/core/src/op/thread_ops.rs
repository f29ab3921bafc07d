//! The thread operations (threads.rs says what each does): review, compact, rollback, the
//! model and effort of the next turns, fork. Their values and their runners on the actor are
//! here; what the actor does for each is in session/thread_ops.rs.

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use super::Operation;
use crate::error::RelayError;
use crate::relay::Relay;
use crate::session::{Actor, ActorOp, Flow, Replier, SayOutcome};
use crate::threads::{ForkedThread, ModelChoice, RolledBack};

/// Starts a review turn (threads.rs).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Review {
    pub session: String,
    pub target: crate::threads::ReviewTarget,
}

/// Compacts the session's thread.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Compact {
    pub session: String,
}

/// Drops the session's last `turns` turns from its thread's history.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Rollback {
    pub session: String,
    pub turns: u32,
}

/// Sets the model and reasoning effort of the session's next turns.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SetModel {
    pub session: String,
    pub choice: crate::threads::ModelChoice,
}

/// Forks the session's thread (through a turn, or whole); the caller makes it a session.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Fork {
    pub session: String,
    pub through: Option<String>,
}

impl Operation for Review {
    type Reply = SayOutcome;
    const AGAIN_IS_HARMLESS: bool = false;
    fn session(&self) -> Option<&str> {
        Some(&self.session)
    }
    fn run_here(self, relay: &Relay) -> BoxFuture<'_, Result<SayOutcome, RelayError>> {
        Box::pin(async move {
            let handle = relay.here(&self.session).await?;
            let said = handle.run(self).await?;
            // Guarded where it runs, as a message's turn is.
            relay.guard_turn(&handle.shared, &said, Default::default());
            Ok(said)
        })
    }
}

/// The operations the session's actor runs as they are.
macro_rules! on_the_actor {
    ($($name:ident => $reply:ty, $again:expr;)*) => {$(
        impl Operation for $name {
            type Reply = $reply;
            const AGAIN_IS_HARMLESS: bool = $again;
            fn session(&self) -> Option<&str> {
                Some(&self.session)
            }
            fn run_here(self, relay: &Relay) -> BoxFuture<'_, Result<Self::Reply, RelayError>> {
                Box::pin(async move { relay.here(&self.session).await?.run(self).await })
            }
        }
    )*};
}
on_the_actor! {
    Compact => (), false;
    Rollback => crate::threads::RolledBack, false;
    SetModel => crate::threads::ModelChoice, true;
    Fork => crate::threads::ForkedThread, false;
}

macro_rules! runs {
    ($($op:ident => $reply:ty, |$o:ident, $a:ident| $body:expr;)*) => {$(
        impl ActorOp for $op {
            fn on_actor(self, actor: &mut Actor, reply: Replier<$reply>) -> BoxFuture<'_, Flow> {
                Box::pin(async move {
                    let $o = self;
                    let $a = actor;
                    let _ = reply.send($body);
                    Flow::Continue
                })
            }
        }
    )*};
}

runs! {
    Review => SayOutcome, |op, actor| actor.review(op).await;
    Compact => (), |_op, actor| actor.compact().await;
    Rollback => RolledBack, |op, actor| actor.rollback(op.turns).await;
    Fork => ForkedThread, |op, actor| actor.fork(op.through).await;
    SetModel => ModelChoice, |op, actor| {
        actor.shared.set_model(&op.choice);
        let o = actor.shared.meta().options;
        Ok(ModelChoice { model: o.model, effort: o.effort })
    };
}
