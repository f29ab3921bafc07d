//! One operation type for everything a session can be asked (say/steer, interrupt, close,
//! answer a request, create), each with its typed reply: the session's actor runs the ones it
//! owns, and the cluster carries the same value to the instance that runs the session. A new
//! verb is a struct here with its [`Operation`] impl, its runner, and the front that offers it.

use futures::future::BoxFuture;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::answer::Answer;
use crate::broker::Resolution;
use crate::config::CreateOptions;
use crate::decider::Decider;
use crate::error::{RelayError, WireError};
use crate::relay::Relay;
use crate::session::{SayInput, SayOutcome};

/// An operation and its reply's type.
pub(crate) trait Operation: Clone + Into<Op> + Send + 'static {
    type Reply: Serialize + DeserializeOwned + Send + 'static;

    /// Whether doing it again where the session runs now is harmless after an instance took
    /// it and was taken over before it answered: an answer (the first one recorded wins, and
    /// a request the take-over closed says by whom), an interrupt, a close. Not a message (a
    /// second turn) or a new session (a second one).
    const AGAIN_IS_HARMLESS: bool;

    /// The session it is for (`None`: a new session).
    fn session(&self) -> Option<&str>;

    /// Runs it on this instance, where its session runs (a session that moved meanwhile is
    /// refused, never passed on again).
    fn run_here(self, relay: &Relay) -> BoxFuture<'_, Result<Self::Reply, RelayError>>;
}

/// Starts a turn, or steers the running one.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Say {
    pub session: String,
    pub input: SayInput,
}

/// Interrupts the running turn; `false` when none was running.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Interrupt {
    pub session: String,
}

/// Ends the session; `force` does not wait for its running turn to stop.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Close {
    pub session: String,
    pub force: bool,
}

/// Answers one of the session's requests, as `by`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Respond {
    pub session: String,
    pub request: String,
    pub answer: Answer,
    /// As its word, as instances of earlier versions send it.
    pub by: Decider,
}

/// Sets a session's budget, turn limits or price table (e.g. raises a budget it reached).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SetLimits {
    pub session: String,
    pub change: Box<crate::limits::LimitsChange>,
}

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

/// Starts a new session (on the instance it is sent to).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Create {
    pub options: Box<CreateOptions>,
}

/// What a new session started answers.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Created {
    pub session_id: String,
    pub first: Option<SayOutcome>,
}

/// Every operation, as the cluster carries it (the same JSON as earlier versions' commands).
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub(crate) enum Op {
    Say(Say),
    Interrupt(Interrupt),
    Close(Close),
    Respond(Respond),
    Create(Create),
    SetLimits(SetLimits),
    Review(Review),
    Compact(Compact),
    Rollback(Rollback),
    SetModel(SetModel),
    Fork(Fork),
}

/// A reply as the cluster carries it.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Outcome<T> {
    Ok(T),
    Err(WireError),
}

impl<T> Outcome<T> {
    pub(crate) fn of(result: Result<T, RelayError>) -> Self {
        match result {
            Ok(v) => Outcome::Ok(v),
            Err(e) => Outcome::Err(e.to_wire()),
        }
    }

    pub(crate) fn into_result(self) -> Result<T, RelayError> {
        match self {
            Outcome::Ok(v) => Ok(v),
            Outcome::Err(w) => Err(RelayError::from_wire(w)),
        }
    }
}

impl Op {
    /// The session it is for (`None`: a new session).
    pub(crate) fn session(&self) -> Option<&str> {
        match self {
            Op::Say(o) => o.session(),
            Op::Interrupt(o) => o.session(),
            Op::Close(o) => o.session(),
            Op::Respond(o) => o.session(),
            Op::Create(o) => o.session(),
            Op::SetLimits(o) => o.session(),
            Op::Review(o) => o.session(),
            Op::Compact(o) => o.session(),
            Op::Rollback(o) => o.session(),
            Op::SetModel(o) => o.session(),
            Op::Fork(o) => o.session(),
        }
    }

    /// See [`Operation::AGAIN_IS_HARMLESS`].
    pub(crate) fn again_is_harmless(&self) -> bool {
        match self {
            Op::Say(_) => Say::AGAIN_IS_HARMLESS,
            Op::Interrupt(_) => Interrupt::AGAIN_IS_HARMLESS,
            Op::Close(_) => Close::AGAIN_IS_HARMLESS,
            Op::Respond(_) => Respond::AGAIN_IS_HARMLESS,
            Op::Create(_) => Create::AGAIN_IS_HARMLESS,
            Op::SetLimits(_) => SetLimits::AGAIN_IS_HARMLESS,
            Op::Review(_) => Review::AGAIN_IS_HARMLESS,
            Op::Compact(_) => Compact::AGAIN_IS_HARMLESS,
            Op::Rollback(_) => Rollback::AGAIN_IS_HARMLESS,
            Op::SetModel(_) => SetModel::AGAIN_IS_HARMLESS,
            Op::Fork(_) => Fork::AGAIN_IS_HARMLESS,
        }
    }

    /// Runs it here and answers its reply as the cluster carries it.
    pub(crate) async fn serve(self, relay: &Relay) -> String {
        match self {
            Op::Say(o) => carried(o.run_here(relay).await),
            Op::Interrupt(o) => carried(o.run_here(relay).await),
            Op::Close(o) => carried(o.run_here(relay).await),
            Op::Respond(o) => carried(o.run_here(relay).await),
            Op::Create(o) => carried(o.run_here(relay).await),
            Op::SetLimits(o) => carried(o.run_here(relay).await),
            Op::Review(o) => carried(o.run_here(relay).await),
            Op::Compact(o) => carried(o.run_here(relay).await),
            Op::Rollback(o) => carried(o.run_here(relay).await),
            Op::SetModel(o) => carried(o.run_here(relay).await),
            Op::Fork(o) => carried(o.run_here(relay).await),
        }
    }
}

/// An operation's reply as carried, typed.
pub(crate) fn reply_of<T: DeserializeOwned>(text: &str) -> Result<T, RelayError> {
    serde_json::from_str::<Outcome<T>>(text)
        .map_err(|e| RelayError::Remote {
            code: "remote_error".into(),
            message: format!("the owner's answer did not parse: {e}"),
        })?
        .into_result()
}

fn carried<T: Serialize>(result: Result<T, RelayError>) -> String {
    serde_json::to_string(&Outcome::of(result)).unwrap_or_default()
}

macro_rules! into_op {
    ($($name:ident),*) => {$(
        impl From<$name> for Op {
            fn from(o: $name) -> Op {
                Op::$name(o)
            }
        }
    )*};
}
into_op!(
    Say, Interrupt, Close, Respond, Create, SetLimits, Review, Compact, Rollback, SetModel, Fork
);

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

impl Operation for Respond {
    type Reply = Resolution;
    const AGAIN_IS_HARMLESS: bool = true;
    fn session(&self) -> Option<&str> {
        Some(&self.session)
    }
    fn run_here(self, relay: &Relay) -> BoxFuture<'_, Result<Resolution, RelayError>> {
        Box::pin(async move {
            relay.here(&self.session).await?;
            relay
                .decide(&self.session, &self.request, self.answer, self.by)
                .await
        })
    }
}

impl Operation for Create {
    type Reply = Created;
    const AGAIN_IS_HARMLESS: bool = false;
    fn session(&self) -> Option<&str> {
        None
    }
    fn run_here(self, relay: &Relay) -> BoxFuture<'_, Result<Created, RelayError>> {
        Box::pin(async move {
            let epoch = relay.placement_epoch();
            let (handle, first) = relay.create_here(*self.options).await?;
            // The session's row (and its first message) is committed before the caller
            // mirrors it.
            match &first {
                Some(first) => {
                    relay
                        .acknowledge_turn(&handle.shared, 0, first, epoch)
                        .await?
                }
                None => relay.confirm_stored(epoch).await?,
            }
            Ok(Created {
                session_id: handle.id().to_owned(),
                first,
            })
        })
    }
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
