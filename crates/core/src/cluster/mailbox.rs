//! Operations (op/) for a session's owner from the instance a client called: queued in the
//! command table with a notice, taken once by the owner, run there as if its own client had
//! asked, and answered with the typed reply (or the error, as the variant the fronts map). A notice can be
//! missed (the listener reconnecting), so senders also poll, and owners sweep what is waiting.

use std::time::Duration;

use super::{Clustered, db, sql};
use crate::error::RelayError;
use crate::host::Host;
use crate::op::{Op, Outcome};

/// How often a sender looks for its answer when no notice came.
const POLL: Duration = Duration::from_millis(500);

/// How many times a command follows its session to a new owner (each move is a take-over).
const MOVES: usize = 3;

/// Runs `op` on the instance that owns `session` (here, if it is this one); its reply as
/// carried.
pub(crate) async fn to_owner(host: &Host, session: &str, op: Op) -> Result<String, RelayError> {
    let Some(c) = host.cluster().cloned() else {
        return Ok(host.serve(op).await);
    };
    let mut op = op;
    let mut moves = 0;
    loop {
        let Some((owner, live)) = sql::owner_of(&c.pool, session)
            .await
            .map_err(db("finding the session's owner"))?
        else {
            return Err(RelayError::UnknownSession(session.to_owned()));
        };
        if owner == c.id {
            return Ok(host.serve(op).await);
        }
        if !live {
            // Its owner left or went silent: adopt its sessions now instead of at the next
            // round, then go where the session is.
            super::take_over_now(host).await;
            let now = sql::owner_of(&c.pool, session).await.ok().flatten();
            if moves < MOVES
                && let Some((now, true)) = now
                    .filter(|(now, _)| *now != owner)
                    .map(|(now, live)| (now.clone(), live || now == c.id))
            {
                tracing::debug!(session, from = %owner, to = %now, "the session moved; following it");
                moves += 1;
                continue;
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
        match call(host, &owner, op).await {
            Ok(result) => return Ok(result),
            Err(Undelivered::Withdrawn(back)) if moves < MOVES => {
                // Its owner was taken over before it took the command: nothing was done, and
                // the command goes where the session runs now.
                moves += 1;
                op = back;
            }
            Err(Undelivered::Withdrawn(_)) => {
                return Err(RelayError::Owner {
                    session: session.to_owned(),
                    owner,
                    why: "the session kept moving between instances; try again".into(),
                });
            }
            Err(Undelivered::Unanswered(why)) => {
                return Err(RelayError::Owner {
                    session: session.to_owned(),
                    owner,
                    why,
                });
            }
        }
    }
}

/// Why a command got no answer from the instance it was sent to.
pub(crate) enum Undelivered {
    /// That instance was taken over (or left) before it took the command: the command was
    /// withdrawn, nothing of it was done, and here it is back.
    Withdrawn(Op),
    /// No answer, for this reason; whether the command was done is not known (see the
    /// session's log).
    Unanswered(String),
}

/// Sends `op` to instance `target` and waits for its answer. While it waits, a target that
/// holds no lease any more is taken over (by this instance, or seen taken over by another):
/// a command it had not taken is withdrawn and handed back; one it took and did not answer
/// is handed back too if doing it again is harmless (an answer: the first one recorded wins;
/// an interrupt; a close), else it is unanswered, at once rather than after the timeout.
pub(crate) async fn call(host: &Host, target: &str, op: Op) -> Result<String, Undelivered> {
    let unanswered = |why: String| Undelivered::Unanswered(why);
    let c = host
        .cluster()
        .ok_or_else(|| unanswered("not in a cluster".into()))?
        .clone();
    let body = serde_json::to_string(&op).map_err(|e| unanswered(e.to_string()))?;
    let id = sql::send_command(&c.pool, &c.fence.channel, target, &body)
        .await
        .map_err(|e| unanswered(format!("queueing the command: {e}")))?;
    let (tx, mut rx) = tokio::sync::oneshot::channel();
    c.waiting
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(id, tx);
    let deadline = tokio::time::Instant::now() + c.config.command_timeout;
    let mut op = Some(op);
    let answer = loop {
        // Registered before the state is read, so a take-over noticed meanwhile wakes this.
        let changed = c.instances_changed.notified();
        match sql::command_state(&c.pool, id).await {
            Ok(Some(state)) if state.result.is_some() => {
                break Ok(state.result.unwrap_or_default());
            }
            Ok(Some(state)) if state.target_gone => {
                if !state.taken && sql::withdraw_command(&c.pool, id).await.unwrap_or(false) {
                    break Err(Undelivered::Withdrawn(op.take().expect("handed back once")));
                }
                if state.taken
                    && op.as_ref().is_some_and(Op::again_is_harmless)
                    && let Some(back) = op.take()
                {
                    break Err(Undelivered::Withdrawn(back));
                }
                if state.taken {
                    break Err(unanswered(
                        "it stopped running the session (another instance took it over) after it took this command and before it answered; whether it was done shows in the session's log".into(),
                    ));
                }
                // Taken just now, by the instance that registered again under that id: wait.
            }
            Ok(Some(state)) if !state.target_leased => {
                // Past its lease: take it over now rather than at the next round (nothing when
                // this instance holds no lease itself), then look again at once.
                super::take_over_now(host).await;
                if sql::command_state(&c.pool, id)
                    .await
                    .ok()
                    .flatten()
                    .is_some_and(|s| s.target_gone || s.result.is_some())
                {
                    continue;
                }
            }
            Ok(_) => {}
            Err(e) => tracing::debug!(id, "reading a command's answer failed (retrying): {e}"),
        }
        if tokio::time::Instant::now() >= deadline {
            break Err(unanswered(format!(
                "no answer within {:?}",
                c.config.command_timeout
            )));
        }
        tokio::select! {
            _ = &mut rx => {}
            () = changed => {}
            () = tokio::time::sleep(POLL) => {}
        }
    };
    c.waiting
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&id);
    answer
}

/// Serves command `id` if it is for this instance and nobody took it yet.
pub(crate) async fn serve(host: Host, id: i64) {
    let Some(c) = host.cluster().cloned() else {
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
    let text = match serde_json::from_str::<Op>(&body) {
        Ok(op) => host.serve(op).await,
        Err(e) => serde_json::to_string(&Outcome::<()>::Err(
            RelayError::Remote {
                code: "remote_error".into(),
                message: format!("a command this version does not understand: {e}"),
            }
            .to_wire(),
        ))
        .unwrap_or_default(),
    };
    if let Err(e) = sql::finish_command(&c.pool, &c.fence.channel, id, &text).await {
        tracing::warn!(id, "answering a command failed (its sender times out): {e}");
    }
}

impl Clustered {
    /// The session, if it runs on this instance. One this instance owns and holds only as a
    /// mirror (it just took it over, or is taking it back) is adopted first, or its adoption
    /// running now is waited for, so the command meets the session as adopted: its log caught
    /// up, its cut turn closed, its requests declined.
    pub(crate) async fn here(
        &self,
        host: &Host,
        session: &str,
    ) -> Result<crate::session::SessionHandle, RelayError> {
        let me = self.0.id.clone();
        let h = host.resume(session).await?;
        if !h.remote {
            return Ok(h);
        }
        let ours = match host.cluster() {
            Some(c) => sql::owner_of(&c.pool, session)
                .await
                .map_err(db("finding the session's owner"))?
                .is_some_and(|(owner, _)| owner == me),
            None => false,
        };
        if ours {
            let why =
                format!("instance {me} stopped running this session while this turn was running");
            super::mirror::adopt(host, session, &why).await?;
            if let Some(h) = host.held(session).filter(|h| !h.remote) {
                return Ok(h);
            }
        }
        Err(RelayError::Owner {
            session: session.to_owned(),
            owner: me,
            why: "the session moved to another instance; try again".into(),
        })
    }
}
