//! One operation type for everything a session can be asked (say/steer, interrupt, close,
//! answer a request, create, set limits, the thread operations), each with its typed reply: the session's actor runs
//! the ones it owns, and the cluster carries the same value to the instance that runs the
//! session. Each verb is one file here: its struct, its [`Operation`] impl, its runner on the
//! actor (when the actor runs it) and the relay's public method. A new verb is that file, its
//! name in the list below, and the front that offers it.

use futures::future::BoxFuture;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::{RelayError, WireError};
use crate::relay::Relay;

mod close;
mod create;
mod interrupt;
mod respond;
mod say;
mod set_limits;
mod thread_ops;

pub(crate) use close::Close;
pub(crate) use create::{Create, Created};
pub(crate) use interrupt::Interrupt;
pub(crate) use respond::Respond;
pub(crate) use say::Say;
pub(crate) use set_limits::SetLimits;
pub(crate) use thread_ops::{Compact, Fork, Review, Rollback, SetModel};

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

/// Every operation as the cluster carries it (tag `op`, the verb in kebab case: the same JSON as
/// earlier versions' commands), with what the relay asks of any of them.
macro_rules! operations {
    ($($verb:ident),* $(,)?) => {
        #[derive(Debug, Serialize, Deserialize)]
        #[serde(tag = "op", rename_all = "kebab-case")]
        pub(crate) enum Op {
            $($verb($verb),)*
        }

        $(impl From<$verb> for Op {
            fn from(o: $verb) -> Op {
                Op::$verb(o)
            }
        })*

        impl Op {
            /// The session it is for (`None`: a new session).
            pub(crate) fn session(&self) -> Option<&str> {
                match self {
                    $(Op::$verb(o) => o.session(),)*
                }
            }

            /// See [`Operation::AGAIN_IS_HARMLESS`].
            pub(crate) fn again_is_harmless(&self) -> bool {
                match self {
                    $(Op::$verb(_) => $verb::AGAIN_IS_HARMLESS,)*
                }
            }

            /// Runs it here and answers its reply as the cluster carries it.
            pub(crate) async fn serve(self, relay: &Relay) -> String {
                match self {
                    $(Op::$verb(o) => carried(o.run_here(relay).await),)*
                }
            }
        }
    };
}

operations!(
    Say, Interrupt, Close, Respond, Create, SetLimits, Review, Compact, Rollback, SetModel, Fork
);
