//! A session: a Codex thread plus our state, run by its own actor. [`SessionHandle`] is the
//! cheap handle fronts use; [`SessionShared`] holds the log and the status they read.

mod actor;
mod agent_sync;
mod agents;
mod catch_up;
mod detach;
mod open_calls;
mod shared;
mod spend;
mod status;
mod thread_ops;

use std::sync::Arc;
use std::time::Duration;

use codex_relay_protocol::v2::UserInput;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

pub(crate) use actor::{Actor, ActorOp, Asked, Flow, Job, Replier};
pub use agents::AgentInfo;
pub(crate) use catch_up::CaughtUp;
pub(crate) use shared::Logged;
pub(crate) use shared::RAW_CHUNK;
pub(crate) use shared::{Origin, SessionShared};
pub use shared::{SessionSnapshot, SessionStatus};

use crate::error::RelayError;

/// What `say` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "camelCase")]
pub enum SayOutcome {
    /// The session was idle: a new turn started.
    #[serde(rename_all = "camelCase")]
    Started { turn_id: String },
    /// A turn was running: the message was added to it (`turn/steer`).
    #[serde(rename_all = "camelCase")]
    Steered { turn_id: String },
    /// A rate limit is hit: the turn waits in the relay's queue (1 is next) and starts when
    /// the limit clears (`crate::rate_limits`). It has no id yet.
    #[serde(rename_all = "camelCase")]
    Queued {
        position: usize,
        limit_id: String,
        /// When the limit resets (Unix seconds), when Codex said.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resets_at: Option<i64>,
    },
}

impl SayOutcome {
    /// The turn's id; empty for a queued turn (it has none yet).
    pub fn turn_id(&self) -> &str {
        match self {
            SayOutcome::Started { turn_id } | SayOutcome::Steered { turn_id } => turn_id,
            SayOutcome::Queued { .. } => "",
        }
    }
}

/// One message to a session.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SayInput {
    pub text: String,
    /// Image URLs (`http(s):`, `data:`) or local paths.
    pub images: Vec<String>,
    /// JSON schema for this turn's final message (ignored when steering).
    pub output_schema: Option<Value>,
    /// Run this turn in Codex's plan collaboration mode, where the model may ask the user
    /// questions (`request_user_input`) that arrive as pending `question` requests.
    pub plan_mode: bool,
    /// This turn's deadline, idle watchdog and grace (unset: the session's, then the relay's).
    #[serde(skip_serializing_if = "crate::limits::TurnLimits::is_empty")]
    pub limits: crate::limits::TurnLimits,
}

impl SayInput {
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            ..Default::default()
        }
    }

    pub(crate) fn to_input(&self) -> Vec<UserInput> {
        let mut out = vec![UserInput::text(self.text.clone())];
        for img in &self.images {
            if img.starts_with("http://") || img.starts_with("https://") || img.starts_with("data:")
            {
                out.push(UserInput::Image { url: img.clone() });
            } else {
                out.push(UserInput::LocalImage { path: img.clone() });
            }
        }
        out
    }
}

/// Carries an operation to the instance that runs its session (the cluster, for a mirror)
/// and answers its reply as carried ([`crate::op::Outcome`] JSON).
pub(crate) trait Carrier: Send + Sync {
    fn carry(
        &self,
        op: crate::op::Op,
    ) -> futures::future::BoxFuture<'static, Result<String, RelayError>>;
}

/// Where a handle's operations go.
#[derive(Clone)]
pub(crate) enum Door {
    /// This instance's actor runs them.
    Actor(mpsc::Sender<Box<dyn Job>>),
    /// A mirror of a session another instance runs: they are carried there.
    Carried(Arc<dyn Carrier>),
}

/// A cheap handle to one session's actor and state.
#[derive(Clone)]
pub struct SessionHandle {
    pub(crate) shared: Arc<SessionShared>,
    pub(crate) door: Door,
    /// A mirror of a session another instance of the cluster runs: its operations go there.
    pub(crate) remote: bool,
}

impl SessionHandle {
    pub fn id(&self) -> &str {
        &self.shared.id
    }

    /// Runs `op` where the session runs: this instance's actor, or, for a mirror, the
    /// instance that runs the session.
    pub(crate) async fn run<O: ActorOp>(&self, op: O) -> Result<O::Reply, RelayError> {
        let closed = || RelayError::Closed(self.id().to_owned());
        match &self.door {
            Door::Actor(jobs) => {
                let (reply, rx) = oneshot::channel();
                jobs.send(Box::new(Asked { op, reply }))
                    .await
                    .map_err(|_| closed())?;
                rx.await.map_err(|_| closed())?
            }
            Door::Carried(carrier) => {
                crate::op::reply_of::<O::Reply>(&carrier.carry(op.into()).await?)
            }
        }
    }

    /// Starts a turn, or steers the running one.
    pub async fn say(&self, input: SayInput) -> Result<SayOutcome, RelayError> {
        let session = self.id().to_owned();
        self.run(crate::op::Say { session, input }).await
    }

    /// Interrupts the running turn; `false` when none was running. The session stays usable.
    pub async fn interrupt(&self) -> Result<bool, RelayError> {
        let session = self.id().to_owned();
        self.run(crate::op::Interrupt { session }).await
    }

    /// Ends the session: interrupts a running turn (or, with `force`, does not wait for it),
    /// resolves its pending requests fail-closed, and stops its actor.
    pub async fn close(&self, force: bool) -> Result<(), RelayError> {
        let session = self.id().to_owned();
        self.run(crate::op::Close { session, force }).await
    }

    /// How the relay's own stop of `turn` (its deadline, the idle watchdog, a budget) ended:
    /// waits at most `limit` for it; `None` when the relay did not stop that turn.
    pub async fn stop_outcome(&self, turn: &str, limit: Duration) -> Option<crate::Stopped> {
        self.shared.stop_outcome(turn, limit).await
    }

    /// The turn running now, if any.
    pub fn current_turn(&self) -> Option<String> {
        self.shared.current_turn()
    }

    /// The last raw Codex lines this session kept (for error details).
    pub fn raw_tail(&self) -> Vec<Arc<String>> {
        self.shared.raw_tail()
    }

    pub fn snapshot(&self) -> SessionSnapshot {
        self.shared.snapshot()
    }

    /// Waits until the log grows past `after_seq` (or the status changes), at most `timeout`.
    /// Returns true if something changed.
    pub async fn wait(&self, after_seq: u64, timeout: Duration) -> bool {
        let mut rx = self.shared.subscribe_changes();
        let status = self.shared.status();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if self.shared.shown_seq() > after_seq || self.shared.status() != status {
                return true;
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => continue,
                Ok(Err(_)) | Err(_) => return self.shared.shown_seq() > after_seq,
            }
        }
    }

    /// Waits until the session needs attention: no turn running, or a request waiting for an
    /// answer (any status but `active`), at most `timeout`. It wakes on status changes only,
    /// not on every logged event. Returns whether the session needs attention.
    pub async fn wait_attention(&self, timeout: Duration) -> bool {
        let mut rx = self.shared.subscribe_status();
        let needs = |s: &SessionStatus| *s != SessionStatus::Active;
        let reached = matches!(
            tokio::time::timeout(timeout, rx.wait_for(needs)).await,
            Ok(Ok(_))
        );
        reached || needs(&rx.borrow())
    }
}
