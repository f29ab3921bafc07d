//! Commands for a session's owner from the instance a client called: queued in the command
//! table with a notice, taken once by the owner, run there as if its own client had asked, and
//! answered with the result (or the error, as the variant the fronts map). A notice can be
//! missed (the listener reconnecting), so senders also poll, and owners sweep what is waiting.

use std::time::Duration;

use futures::future::BoxFuture;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{db, sql};
use crate::answer::Answer;
use crate::error::{RelayError, WireError};
use crate::relay::{CreateOptions, Relay};
use crate::session::SayInput;

/// How often a sender looks for its answer when no notice came.
const POLL: Duration = Duration::from_millis(500);

/// A command for the instance that runs a session (or, for `create`, the one chosen to).
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub(crate) enum Remote {
    Say {
        session: String,
        input: SayInput,
    },
    Interrupt {
        session: String,
    },
    Close {
        session: String,
        force: bool,
    },
    Respond {
        session: String,
        request: String,
        answer: Answer,
        by: String,
    },
    Create {
        options: Box<CreateOptions>,
    },
}

/// A command's answer as stored.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Outcome {
    Ok(Value),
    Err(WireError),
}

/// What a new session started elsewhere answers.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Created {
    pub session_id: String,
    pub first: Option<crate::session::SayOutcome>,
}

/// Runs `op` on the instance that owns `session` (here, if it is this one) and reads the
/// answer as `T`.
pub(crate) async fn to_owner_as<T: DeserializeOwned>(
    relay: &Relay,
    session: &str,
    op: Remote,
) -> Result<T, RelayError> {
    let value = to_owner(relay, session, op).await?;
    serde_json::from_value(value).map_err(|e| RelayError::Remote {
        code: "remote_error".into(),
        message: format!("the owner's answer did not parse: {e}"),
    })
}

async fn to_owner(relay: &Relay, session: &str, op: Remote) -> Result<Value, RelayError> {
    let Some(c) = relay.cluster() else {
        return execute(relay, op).await;
    };
    let Some((owner, live)) = sql::owner_of(&c.pool, session)
        .await
        .map_err(db("finding the session's owner"))?
    else {
        return Err(RelayError::UnknownSession(session.to_owned()));
    };
    if owner == c.id {
        return execute(relay, op).await;
    }
    if !live {
        // Its owner left or went silent: adopt its sessions now instead of at the next round.
        let c = c.clone();
        super::take_over_now(relay).await;
        if let Ok(Some((now, _))) = sql::owner_of(&c.pool, session).await
            && now == c.id
        {
            return execute(relay, op).await;
        }
        return Err(RelayError::Owner {
            session: session.to_owned(),
            owner,
            why: format!(
                "it holds no lease; a live instance adopts its sessions within {:?}, then try again",
                c.config.lease / 4
            ),
        });
    }
    call(relay, &owner, op)
        .await
        .map_err(|why| RelayError::Owner {
            session: session.to_owned(),
            owner: owner.clone(),
            why,
        })?
}

/// Sends `op` to instance `target` and waits for its answer: `Err(why)` when none came.
pub(crate) async fn call(
    relay: &Relay,
    target: &str,
    op: Remote,
) -> Result<Result<Value, RelayError>, String> {
    let c = relay.cluster().ok_or("not in a cluster")?.clone();
    let body = serde_json::to_string(&op).map_err(|e| e.to_string())?;
    let id = sql::send_command(&c.pool, &c.fence.channel, target, &body)
        .await
        .map_err(|e| format!("queueing the command: {e}"))?;
    let (tx, mut rx) = tokio::sync::oneshot::channel();
    c.waiting
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(id, tx);
    let deadline = tokio::time::Instant::now() + c.config.command_timeout;
    let answer = loop {
        match sql::command_result(&c.pool, id).await {
            Ok(Some(text)) => break Ok(text),
            Ok(None) => {}
            Err(e) => tracing::debug!(id, "reading a command's answer failed (retrying): {e}"),
        }
        if tokio::time::Instant::now() >= deadline {
            break Err(format!("no answer within {:?}", c.config.command_timeout));
        }
        tokio::select! {
            _ = &mut rx => {}
            () = tokio::time::sleep(POLL) => {}
        }
    };
    c.waiting
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&id);
    let text = answer?;
    match serde_json::from_str::<Outcome>(&text) {
        Ok(Outcome::Ok(v)) => Ok(Ok(v)),
        Ok(Outcome::Err(w)) => Ok(Err(RelayError::from_wire(w))),
        Err(e) => Err(format!("its answer did not parse: {e}")),
    }
}

/// Serves command `id` if it is for this instance and nobody took it yet.
pub(crate) async fn serve(relay: Relay, id: i64) {
    let Some(c) = relay.cluster().cloned() else {
        return;
    };
    let body = match sql::take_command(&c.pool, &c.id, id).await {
        Ok(Some(body)) => body,
        Ok(None) => return,
        Err(e) => {
            tracing::warn!(id, "taking a command failed (the sweep retries): {e}");
            return;
        }
    };
    let result = match serde_json::from_str::<Remote>(&body) {
        Ok(op) => execute(&relay, op).await,
        Err(e) => Err(RelayError::Remote {
            code: "remote_error".into(),
            message: format!("a command this version does not understand: {e}"),
        }),
    };
    let outcome = match result {
        Ok(v) => Outcome::Ok(v),
        Err(e) => Outcome::Err(e.to_wire()),
    };
    let text = serde_json::to_string(&outcome).unwrap_or_default();
    if let Err(e) = sql::finish_command(&c.pool, &c.fence.channel, id, &text).await {
        tracing::warn!(id, "answering a command failed (its sender times out): {e}");
    }
}

/// The session, if it runs on this instance.
async fn here(relay: &Relay, session: &str) -> Result<crate::session::SessionHandle, RelayError> {
    let h = relay.session(session).await?;
    if h.remote {
        return Err(RelayError::Owner {
            session: session.to_owned(),
            owner: relay.instance_id().unwrap_or_default().to_owned(),
            why: "the session moved to another instance; try again".into(),
        });
    }
    Ok(h)
}

/// Runs a command here, where the session runs. A session that is not this instance's (it
/// moved meanwhile) is refused rather than passed on again.
fn execute(relay: &Relay, op: Remote) -> BoxFuture<'_, Result<Value, RelayError>> {
    Box::pin(async move {
        let value = |v: Result<Value, serde_json::Error>| {
            v.map_err(|e| RelayError::Remote {
                code: "remote_error".into(),
                message: e.to_string(),
            })
        };
        match op {
            Remote::Say { session, input } => {
                here(relay, &session).await?;
                value(serde_json::to_value(relay.say(&session, input).await?))
            }
            Remote::Interrupt { session } => value(serde_json::to_value(
                here(relay, &session).await?.interrupt().await?,
            )),
            Remote::Close { session, force } => {
                here(relay, &session).await?;
                relay.close(&session, force).await?;
                Ok(Value::Null)
            }
            Remote::Respond {
                session,
                request,
                answer,
                by,
            } => {
                here(relay, &session).await?;
                value(serde_json::to_value(
                    relay.respond(&session, &request, answer, &by).await?,
                ))
            }
            Remote::Create { options } => {
                let (handle, first) = relay.create_here(*options).await?;
                // The session's row is committed before the caller mirrors it.
                relay.store().flush().await?;
                value(serde_json::to_value(Created {
                    session_id: handle.id().to_owned(),
                    first,
                }))
            }
        }
    })
}
