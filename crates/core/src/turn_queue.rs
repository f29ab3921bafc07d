//! The turn queue: while Codex reports a rate limit hit (`crate::rate_limits`), a message that
//! would start a new turn waits here instead of failing, visible on every front, and starts
//! when the limit clears (Codex reports it below 100 %, or its reset time passes). Bounded: a
//! full queue, or a limit that resets later than a turn may wait, refuses the message with
//! `RelayError::RateLimited`; a turn that waited that long is dropped with an error in its
//! session's log. Steering a running turn never waits.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::oneshot;

use crate::error::RelayError;
use crate::event::{Ev, Role};
use crate::rate_limits::{QueueRefusal, RateLimitGate, RateLimitHold, RateLimitsView};
use crate::relay::Relay;
use crate::session::{SayInput, SayOutcome, SessionHandle, SessionStatus};

/// Told when a waiting turn started (or was dropped).
pub(crate) type Started = oneshot::Sender<Result<SayOutcome, RelayError>>;

/// One waiting message, and who waits for its turn to start.
type Message = (SayInput, Option<Started>);

/// The messages each waiting session holds: the first starts the turn, the others steer it.
#[derive(Default)]
pub(crate) struct Waiting(Mutex<HashMap<String, Vec<Message>>>);

impl Waiting {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<Message>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What the gate decided for one message.
pub(crate) enum Gate {
    /// No limit is hit (or a turn runs, to steer): say it now.
    Go(SayInput),
    /// It waits in the queue.
    Queued(SayOutcome),
}

fn refused(session: &str, hold: &RateLimitHold, r: QueueRefusal) -> RelayError {
    RelayError::RateLimited {
        session: session.to_owned(),
        why: match r {
            QueueRefusal::Full { max_queued } => format!(
                "the {} rate limit is hit and {max_queued} turns already wait (the queue's bound); try later",
                hold.limit_id
            ),
            QueueRefusal::TooLong { max_wait_ms } => format!(
                "the {} rate limit is hit and resets at {} (Unix seconds), later than a turn may wait ({} s); try later",
                hold.limit_id,
                hold.resets_at.unwrap_or_default(),
                max_wait_ms / 1000
            ),
        },
    }
}

impl Relay {
    fn gate(&self) -> &RateLimitGate {
        &self.inner.feed.rate_limits
    }

    /// The account's rate limits as Codex last reported them, the hold and the queue.
    pub fn rate_limits(&self) -> RateLimitsView {
        self.gate().view()
    }

    /// Where `session`'s waiting turn stands in the queue (1 is next), if one waits.
    pub fn queued_position(&self, session: &str) -> Option<usize> {
        self.gate().position(session)
    }

    /// Queues the message when it would start a new turn while a limit is hit, or while other
    /// turns wait (first come, first started); else hands it back to be said now.
    pub(crate) fn gate_turn(
        &self,
        handle: &SessionHandle,
        input: SayInput,
        started: Option<Started>,
    ) -> Result<Gate, RelayError> {
        let id = handle.shared.id.clone();
        let gate = self.gate();
        if handle.shared.current_turn().is_some() {
            return Ok(Gate::Go(input));
        }
        if let Some(position) = gate.position(&id) {
            // A later message of a session that waits: said with its turn.
            self.inner
                .waiting
                .map()
                .entry(id.clone())
                .or_default()
                .push((input, started));
            return Ok(Gate::Queued(self.queued(position)));
        }
        let hold = match gate.hold() {
            Some(hold) => hold,
            None if gate.view().queued.is_empty() => return Ok(Gate::Go(input)),
            None => RateLimitHold {
                limit_id: "queue".into(),
                window: "queue".into(),
                used_percent: 0.0,
                resets_at: None,
            },
        };
        let position = gate
            .enqueue(&id, &hold)
            .map_err(|r| refused(&id, &hold, r))?;
        self.inner
            .waiting
            .map()
            .insert(id.clone(), vec![(input, started)]);
        handle.shared.append(
            Role::System,
            None,
            Ev::Note {
                message: format!(
                    "the {} rate limit is hit ({} window at {}%): the new turn waits in the queue (position {position})",
                    hold.limit_id, hold.window, hold.used_percent
                ),
            },
        );
        tracing::info!(session = %id, position, limit = %hold.limit_id, "turn queued for a rate limit");
        let relay = self.clone();
        tokio::spawn(async move { relay.wait_turn(id).await });
        Ok(Gate::Queued(self.queued(position)))
    }

    /// For a new session with a first prompt: refused before its thread starts when that
    /// turn could not wait in the queue.
    pub(crate) fn check_queue_room(&self) -> Result<(), RelayError> {
        let gate = self.gate();
        match gate.hold() {
            Some(hold) => match gate.would_refuse(&hold) {
                Some(r) => {
                    gate.refused();
                    Err(refused("(new)", &hold, r))
                }
                None => Ok(()),
            },
            None => Ok(()),
        }
    }

    fn queued(&self, position: usize) -> SayOutcome {
        let hold = self.gate().hold();
        SayOutcome::Queued {
            position,
            limit_id: hold
                .as_ref()
                .map(|h| h.limit_id.clone())
                .unwrap_or_else(|| "queue".into()),
            resets_at: hold.and_then(|h| h.resets_at),
        }
    }

    /// Waits until the session's turn is first and no limit is hit, then says its messages;
    /// drops them past the bound, or when the session closed.
    async fn wait_turn(self, id: String) {
        let gate = self.gate();
        let mut changes = gate.subscribe();
        let until = tokio::time::Instant::now() + gate.bounds().max_wait();
        loop {
            let closed = self
                .inner
                .get(&id)
                .is_none_or(|h| h.shared.status() == SessionStatus::Closed);
            if closed {
                gate.leave(&id);
                self.finish_waiting(&id, || RelayError::Closed(id.clone()));
                return;
            }
            if gate.is_first(&id) && gate.hold().is_none() {
                break;
            }
            if tokio::time::Instant::now() >= until {
                gate.dropped(&id);
                let why = format!(
                    "the turn waited {} s for the rate limit to clear (the queue's bound) and was dropped",
                    gate.bounds().max_wait_ms / 1000
                );
                if let Some(h) = self.inner.get(&id) {
                    h.shared.append(
                        Role::System,
                        None,
                        Ev::Error {
                            message: why.clone(),
                            retrying: false,
                        },
                    );
                }
                self.finish_waiting(&id, || RelayError::RateLimited {
                    session: id.clone(),
                    why: why.clone(),
                });
                return;
            }
            let wake = gate
                .hold_resets_in()
                .map(|d| tokio::time::Instant::now() + d)
                .unwrap_or(until)
                .min(until);
            tokio::select! {
                _ = changes.changed() => {}
                _ = tokio::time::sleep_until(wake) => {}
                // A closed session is noticed without a rate-limit update.
                _ = tokio::time::sleep(std::time::Duration::from_secs(5)) => {}
            }
        }
        let messages = self.inner.waiting.map().remove(&id).unwrap_or_default();
        gate.leave(&id);
        tracing::info!(session = %id, "the rate limit cleared: the queued turn starts");
        for (input, started) in messages {
            let said = self.say_now(&id, input).await;
            if let Err(e) = &said {
                tracing::warn!(session = %id, "the queued turn could not start: {e}");
            }
            if let Some(tx) = started {
                let _ = tx.send(said);
            }
        }
    }

    /// Says it now, past the turn queue (a queued turn whose limit cleared).
    async fn say_now(&self, id: &str, input: SayInput) -> Result<SayOutcome, RelayError> {
        self.check_writable()?;
        let handle = self.session(id).await?;
        if handle.shared.status() == SessionStatus::Closed {
            return Err(RelayError::Closed(id.to_owned()));
        }
        self.say_now_on(&handle, input).await
    }

    fn finish_waiting(&self, id: &str, error: impl Fn() -> RelayError) {
        let messages = self.inner.waiting.map().remove(id).unwrap_or_default();
        for (_, started) in messages {
            if let Some(tx) = started {
                let _ = tx.send(Err(error()));
            }
        }
    }

    /// As [`Relay::say`], but a turn that has to wait in the queue is waited for: returns
    /// when it started (for callers that follow the turn: the library, `run`, the legacy front).
    pub async fn say_started(&self, id: &str, input: SayInput) -> Result<SayOutcome, RelayError> {
        let (tx, rx) = oneshot::channel();
        match self.say_gated(id, input, Some(tx)).await? {
            SayOutcome::Queued { .. } => rx.await.unwrap_or_else(|_| {
                Err(RelayError::RateLimited {
                    session: id.to_owned(),
                    why: "the queued turn was dropped".into(),
                })
            }),
            said => Ok(said),
        }
    }
}
