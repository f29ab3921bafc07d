//! The actor's runners of the thread operations (threads.rs): a review turn, compaction,
//! dropping the last turns, the model and effort of the next turns, a fork; and what a review
//! turn's notifications carry of its findings.

use std::sync::Arc;

use codex_relay_codex::AppServer;
use codex_relay_protocol::v2::{
    ReviewStart, ReviewStartParams, ServerNotification, ThreadCompactStart, ThreadFork,
    ThreadForkParams, ThreadIdParams, ThreadItem, ThreadRevert, ThreadRevertParams, ThreadRollback,
    ThreadRollbackParams,
};

use super::actor::Actor;
use super::{Logged, SayOutcome};
use crate::error::RelayError;
use crate::event::{Ev, ReviewOutput, Role};
use crate::op::Review;
use crate::threads::{ForkedThread, RolledBack};

impl Actor {
    /// The session's thread loaded in a live Codex of the relay's (a dormant session claims
    /// its slot first), for an operation on it; not for a thread of the Codex daemon.
    async fn loaded(&mut self, what: &str) -> Result<Arc<AppServer>, RelayError> {
        if crate::attach::lives_on_daemon(&self.shared) {
            return Err(RelayError::Unsupported(format!(
                "session {} lives on the Codex daemon the terminal uses; {what} it from there",
                self.shared.id
            )));
        }
        let claimed = match self.slot {
            Some(_) => None,
            None => Some(self.slots.claim(&self.shared.id)?),
        };
        let server = self.attach().await?;
        if claimed.is_some() {
            self.slot = claimed;
        }
        Ok(server)
    }

    /// As [`Actor::loaded`], for an operation that needs the session between turns.
    async fn between_turns(&mut self, what: &str) -> Result<Arc<AppServer>, RelayError> {
        let server = self.loaded(what).await?;
        if let Some(turn) = self.shared.current_turn() {
            return Err(RelayError::Busy(format!(
                "session {} is running turn {turn}; interrupt it or wait for it to end, then {what} it",
                self.shared.id
            )));
        }
        Ok(server)
    }

    pub(crate) async fn review(&mut self, op: Review) -> Result<SayOutcome, RelayError> {
        let server = self.between_turns("review").await?;
        if let Some(reason) = self.shared.budget_reached(true) {
            return Err(RelayError::BudgetReached {
                session: self.shared.id.clone(),
                reason,
            });
        }
        let params = ReviewStartParams {
            thread_id: self.shared.id.clone(),
            target: op.target.to_wire(),
            delivery: None,
        };
        let turn = server.call::<ReviewStart>(&params).await?.turn;
        self.servers.turn_started(&self.shared.id);
        self.shared.review_started(&turn.id);
        self.shared.persist();
        Ok(SayOutcome::Started { turn_id: turn.id })
    }

    pub(crate) async fn compact(&mut self) -> Result<(), RelayError> {
        let server = self.between_turns("compact").await?;
        let params = ThreadIdParams {
            thread_id: self.shared.id.clone(),
        };
        server.call::<ThreadCompactStart>(&params).await?;
        self.servers.turn_started(&self.shared.id);
        Ok(())
    }

    pub(crate) async fn rollback(&mut self, n: u32) -> Result<RolledBack, RelayError> {
        let server = self.between_turns("roll back").await?;
        // Codex 0.169+ names turns as thread/read does: its list is the history (a review
        // is two turns there); 0.98 names them afresh, so the session's own list is.
        let turns = if server.version().has_thread_revert() {
            codex_turns(&server, &self.shared.id).await?
        } else {
            self.shared.turns()
        };
        let n = n as usize;
        let Some(dropped) = self.shared.last_turns(&turns, n).filter(|_| n > 0) else {
            return Err(RelayError::InvalidOption(format!(
                "session {} has {} turn(s) in its history; roll back 1 to {}",
                self.shared.id,
                turns.len(),
                turns.len()
            )));
        };
        let thread_id = self.shared.id.clone();
        if server.version().has_thread_revert() {
            let params = ThreadRevertParams {
                thread_id,
                before_turn_id: dropped[0].clone(),
            };
            server.call::<ThreadRevert>(&params).await?;
        } else {
            let params = ThreadRollbackParams {
                thread_id,
                num_turns: dropped.len() as u32,
            };
            server.call::<ThreadRollback>(&params).await?;
        }
        self.shared.append(
            Role::System,
            None,
            Ev::RolledBack {
                turns: dropped.clone(),
            },
        );
        self.shared
            .set_turns(turns[..turns.len() - dropped.len()].to_vec());
        self.shared.persist();
        Ok(RolledBack {
            session_id: self.shared.id.clone(),
            dropped,
            turns: self.shared.turns(),
        })
    }

    pub(crate) async fn fork(
        &mut self,
        through: Option<String>,
    ) -> Result<ForkedThread, RelayError> {
        let server = self.loaded("fork").await?;
        let turns = if server.version().has_thread_revert() {
            codex_turns(&server, &self.shared.id).await?
        } else {
            self.shared.turns()
        };
        let running = self.shared.current_turn();
        let kept: Vec<String> = match &through {
            Some(t) => {
                let Some(at) = turns.iter().position(|x| x == t) else {
                    return Err(RelayError::InvalidOption(format!(
                        "turn {t:?} is not in session {}'s history (its turns: {turns:?})",
                        self.shared.id
                    )));
                };
                if running.as_deref() == Some(t.as_str()) {
                    return Err(RelayError::Busy(format!(
                        "turn {t} is still running; fork through an ended turn"
                    )));
                }
                turns[..=at].to_vec()
            }
            None => turns
                .iter()
                .filter(|t| Some(*t) != running.as_ref())
                .cloned()
                .collect(),
        };
        let whole = kept.len() == turns.len() && running.is_none();
        let by_turn = server.version().has_thread_revert();
        if through.is_some() && !by_turn && !whole {
            return Err(RelayError::Unsupported(format!(
                "Codex {} forks whole threads only (forking through a turn needs 0.169 or later)",
                server.version()
            )));
        }
        let opts = self.shared.meta().options;
        let mut params = ThreadForkParams {
            thread_id: self.shared.id.clone(),
            last_turn_id: through.filter(|_| by_turn),
            model: opts.model,
            cwd: opts.cwd,
            approval_policy: opts.approval_policy,
            sandbox: opts.sandbox,
            config: opts.config,
            base_instructions: opts.base_instructions,
            developer_instructions: opts.developer_instructions,
            ..Default::default()
        };
        server
            .version()
            .adapt_approval_policy(&mut params.approval_policy);
        let forked = server.call::<ThreadFork>(&params).await?;
        Ok(ForkedThread {
            thread_id: forked.thread.id,
            kept,
            rename_turns: !by_turn,
        })
    }

    /// What a notification of the session's own thread says of a running review: the
    /// reviewing model's JSON is kept, and the end of review mode logs the `review` event.
    pub(super) fn on_review_item(&self, n: &ServerNotification, events: &mut Vec<Logged>) {
        if !self.shared.in_review() {
            return;
        }
        if let ServerNotification::Error(e) = n
            && !e.will_retry
        {
            return self.review_failed(e, events);
        }
        let (ServerNotification::ItemStarted(i) | ServerNotification::ItemCompleted(i)) = n else {
            return;
        };
        match &i.item {
            ThreadItem::AgentMessage(m) => {
                if let Some(found) = ReviewOutput::from_model_json(&m.text) {
                    self.shared.review_draft(found);
                }
            }
            ThreadItem::Other(v)
                if matches!(n, ServerNotification::ItemCompleted(_))
                    && v.get("type").and_then(|t| t.as_str()) == Some("exitedReviewMode") =>
            {
                let mut review = self.shared.take_review_draft().unwrap_or_default();
                review.text = v
                    .get("review")
                    .and_then(|t| t.as_str())
                    .unwrap_or_default()
                    .to_owned();
                events.push(Logged {
                    role: Role::Agent,
                    turn: Some(i.turn_id.clone()),
                    ev: Ev::Review {
                        review: Box::new(review),
                    },
                    origin: None,
                });
            }
            _ => {}
        }
    }
}

/// The turns of `thread`'s history as Codex lists them (`thread/read`).
async fn codex_turns(server: &AppServer, thread: &str) -> Result<Vec<String>, RelayError> {
    let read = server
        .call::<codex_relay_protocol::v2::ThreadRead>(&codex_relay_protocol::v2::ThreadReadParams {
            thread_id: thread.to_owned(),
            include_turns: true,
        })
        .await?;
    Ok(read.thread.turns.into_iter().map(|t| t.id).collect())
}

impl Actor {
    /// Codex could not start the review (e.g. a base branch outside a git repository): it
    /// says so with an error and never ends the turn. The relay ends it, failed, with Codex's
    /// reason, and asks Codex to interrupt what is left of it.
    fn review_failed(
        &self,
        e: &codex_relay_protocol::v2::ErrorNotification,
        events: &mut Vec<Logged>,
    ) {
        let Some(turn) = self.shared.current_turn() else {
            return;
        };
        if e.turn_id.as_deref().is_some_and(|t| t != turn) {
            return;
        }
        let message = e.error["message"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| e.error.to_string());
        events.push(Logged {
            role: Role::System,
            turn: Some(turn.clone()),
            ev: Ev::TurnEnd {
                status: crate::event::TurnEndStatus::Failed,
                error: Some(format!("the review could not run: {message}")),
                error_kind: None,
                stopped: None,
                usage: None,
            },
            origin: None,
        });
        if let Some(server) = self.server.clone() {
            let thread = self.shared.id.clone();
            tokio::spawn(async move {
                let _ = server.turn_interrupt(&thread, &turn).await;
            });
        }
    }
}
