//! One run, start to end: send the prompt with its deadline and idle watchdog (the engine's turn guard enforces them and stops exactly this session's turn), follow the session's log, answer approvals, and turn the end into a result or a phased error.

use std::sync::Arc;
use std::time::{Duration, Instant};

use codex_relay_core::broker::PendingView;
use codex_relay_core::event::{TurnEndStatus, Usage};
use codex_relay_core::limits::{StopReason, TurnLimits};
use codex_relay_core::{
    Envelope, Ev, FollowOptions, Followed, Relay, SayInput, SessionHandle, Stopped,
};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::approval::{Approval, ApprovalRequest};
use crate::client::Servers;
use crate::error::{Error, ErrorKind, Phase};
use crate::questions::{Question, Questions};
use crate::result::{RunEvent, RunResult, TurnUsage};

/// Events read from the session log at a time.
const BATCH: usize = 1000;

/// What to run.
pub(crate) struct TurnSpec {
    pub text: String,
    pub output_schema: Option<Value>,
    pub deadline: Option<Duration>,
    /// The idle watchdog: no output for this long stops the turn.
    pub idle: Option<Duration>,
    pub grace: Duration,
    pub plan_mode: bool,
    /// A review turn (`review/start`) of this target instead of a message.
    pub review: Option<codex_relay_core::ReviewTarget>,
}

/// Everything a run needs from its session.
#[derive(Clone)]
pub(crate) struct RunCtx {
    pub relay: Relay,
    pub servers: Servers,
    pub handle: SessionHandle,
    pub approval: Approval,
    pub questions: Questions,
}

/// What the loop has seen of the turn so far.
struct Seen {
    turn: String,
    events: Vec<Arc<Envelope>>,
    text: Option<String>,
    thread_usage: Option<Usage>,
    last_error: Option<String>,
    end: Option<(TurnEndStatus, Option<String>)>,
    /// Why the engine stopped the turn, and the turn's summed usage (from its `turn-end`).
    stopped: Option<StopReason>,
    turn_usage: Option<Usage>,
}

pub(crate) async fn drive(
    ctx: RunCtx,
    spec: TurnSpec,
    tx: Option<mpsc::UnboundedSender<RunEvent>>,
) -> Result<RunResult, Error> {
    let id = ctx.handle.id().to_owned();
    let snap = ctx.handle.snapshot();
    if snap.status.is_running() {
        return Err(Error::new(
            Phase::Request,
            ErrorKind::Busy,
            format!("session {id} is running a turn already; wait for it or interrupt it"),
        )
        .in_turn(&id, ctx.handle.current_turn().as_deref()));
    }
    let before = snap.usage.unwrap_or_default();
    // Followed from before the turn starts: nothing it logs can be missed.
    let mut follow = ctx
        .relay
        .follow(
            &id,
            snap.last_seq,
            FollowOptions {
                deltas: true,
                batch: BATCH,
            },
        )
        .await
        .map_err(|e| Error::from(e).in_turn(&id, None))?;
    let started = Instant::now();
    // The engine's turn guard enforces the deadline and the idle watchdog (the same one
    // every front uses) and says on the turn's end which one stopped it.
    let say = SayInput {
        text: spec.text,
        output_schema: spec.output_schema,
        plan_mode: spec.plan_mode,
        limits: TurnLimits {
            deadline_ms: spec.deadline.map(|d| d.as_millis() as u64),
            idle_ms: spec.idle.map(|d| d.as_millis() as u64),
            grace_ms: Some(spec.grace.as_millis() as u64),
        },
        ..Default::default()
    };
    let start = async {
        match spec.review {
            Some(target) => ctx.relay.review(&id, target).await,
            None => ctx.relay.say_started(&id, say).await,
        }
    };
    let said = match spec.deadline {
        Some(limit) => tokio::time::timeout(limit, start).await.map_err(|_| {
            Error::new(
                Phase::Budget,
                ErrorKind::Deadline {
                    stopped: Stopped::NotRunning,
                },
                format!("the run's deadline ({limit:?}) passed before the turn started"),
            )
            .in_turn(&id, None)
        })?,
        None => start.await,
    };
    let turn = said
        .map_err(|e| Error::from(e).in_turn(&id, None))?
        .turn_id()
        .to_owned();
    // The app-server the turn runs on (already running: `say` attached it).
    let server = ctx.relay.server_of(&id);
    if let Some(s) = &server {
        ctx.servers.note(s);
    }
    let mut seen = Seen {
        turn: turn.clone(),
        events: Vec::new(),
        text: None,
        thread_usage: None,
        last_error: None,
        end: None,
        stopped: None,
        turn_usage: None,
    };
    while seen.end.is_none() {
        match follow.next().await {
            Some(Ok(Followed::Events(batch))) => {
                for env in batch {
                    seen.take(&env, &ctx);
                    if let Some(tx) = &tx {
                        let _ = tx.send(RunEvent::Event(env));
                    }
                }
            }
            Some(Ok(Followed::Delta(d))) => {
                if d.turn == turn
                    && d.agent.is_none()
                    && let Some(tx) = &tx
                {
                    let _ = tx.send(RunEvent::Delta(d));
                }
            }
            Some(Ok(Followed::End)) | None => break,
            Some(Err(e)) => return Err(Error::from(e).in_turn(&id, Some(&turn))),
        }
    }
    // How the engine's stop ended (interrupted, killed, closed), when it stopped the turn.
    let wait = codex_relay_codex::platform::tree::STOP_GRACE * 5;
    let how = if seen.stopped.is_some() || seen.end.is_none() {
        ctx.handle.stop_outcome(&turn, wait).await
    } else {
        None
    };
    let elapsed = started.elapsed();
    let stderr = server
        .as_ref()
        .map(|s| s.process().stderr_tail().text())
        .unwrap_or_default();
    finish(ctx, seen, how, before, elapsed, stderr)
}

impl Seen {
    fn take(&mut self, env: &Arc<Envelope>, ctx: &RunCtx) {
        if env.agent.is_some() {
            return;
        }
        if let Ev::RequestOpened { request } = &env.ev {
            answer_approval(ctx, request);
        }
        if env.turn.as_deref() != Some(self.turn.as_str()) {
            return;
        }
        self.events.push(env.clone());
        match &env.ev {
            Ev::Text {
                text,
                thinking: false,
            } => self.text = Some(text.clone()),
            Ev::Usage { total, .. } => self.thread_usage = Some(total.clone()),
            Ev::Error {
                message,
                retrying: false,
            } => self.last_error = Some(message.clone()),
            Ev::TurnEnd {
                status,
                error,
                stopped,
                usage,
                ..
            } => {
                self.end = Some((*status, error.clone()));
                self.stopped = stopped.clone();
                self.turn_usage = usage.clone();
            }
            _ => {}
        }
    }
}

/// Answers an approval, a question or an elicitation the session logged, by the run's
/// policies, on its own task.
fn answer_approval(ctx: &RunCtx, view: &PendingView) {
    let view = view.clone();
    if let Some(question) = Question::from_pending(&view) {
        answer_question(ctx, view, question);
        return;
    }
    let Some(req) = ApprovalRequest::from_pending(&view) else {
        // Tools without a handler and unknown requests: left to other fronts and to the
        // approval timeout, which declines them.
        return;
    };
    let ctx = ctx.clone();
    tokio::spawn(async move {
        let decision = ctx.approval.decide(req).await;
        let answer = decision.answer();
        match ctx
            .relay
            .respond(
                ctx.handle.id(),
                &view.id,
                answer,
                codex_relay_core::Decider::library("library"),
            )
            .await
        {
            Ok(_) => {}
            // Someone else answered first, or the turn ended: nothing to do.
            Err(e) => tracing::debug!(request = %view.id, "approval not sent: {e}"),
        }
    });
}

/// Answers a question or elicitation by the session's [`Questions`] policy. An answer that
/// does not fit the request is replaced by a decline, so nothing waits for the timeout.
fn answer_question(ctx: &RunCtx, view: PendingView, question: Question) {
    if matches!(ctx.questions, Questions::Unanswered) {
        return;
    }
    let ctx = ctx.clone();
    tokio::spawn(async move {
        let Some(answer) = ctx.questions.decide(question).await else {
            return;
        };
        let (session, id) = (ctx.handle.id(), view.id.as_str());
        let sent = match answer.engine() {
            Ok(answer) => {
                ctx.relay
                    .respond(
                        session,
                        id,
                        answer,
                        codex_relay_core::Decider::library("library"),
                    )
                    .await
            }
            Err(message) => Err(codex_relay_core::RelayError::InvalidAnswer {
                id: id.to_owned(),
                message,
            }),
        };
        match sent {
            Ok(_) => {}
            Err(codex_relay_core::RelayError::InvalidAnswer { message, .. }) => {
                tracing::warn!(request = %id, "the question callback's answer does not fit ({message}); declining");
                let decline = codex_relay_core::Answer::Deny { reason: None };
                if let Err(e) = ctx
                    .relay
                    .respond(
                        session,
                        id,
                        decline,
                        codex_relay_core::Decider::library("library"),
                    )
                    .await
                {
                    tracing::debug!(request = %id, "decline not sent: {e}");
                }
            }
            Err(e) => tracing::debug!(request = %id, "answer not sent: {e}"),
        }
    });
}

/// The raw error object of the turn's end (or its last fatal `error` notification), from the
/// raw Codex lines the session keeps.
fn raw_turn_error(ctx: &RunCtx, turn: &str) -> Option<Value> {
    let raws = ctx.handle.raw_tail();
    let mut from_error = None;
    for line in raws.iter().rev() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let params = &v["params"];
        match v["method"].as_str() {
            Some("turn/completed") if params["turn"]["id"] == turn => {
                let e = &params["turn"]["error"];
                if !e.is_null() {
                    return Some(e.clone());
                }
            }
            Some("error")
                if from_error.is_none()
                    && params["turnId"] == turn
                    && params["willRetry"] != true =>
            {
                from_error = Some(params["error"].clone());
            }
            _ => {}
        }
    }
    from_error
}

/// The error of a turn the engine stopped for `reason`, ended the way `how` says.
fn stopped_error(reason: &StopReason, how: Stopped) -> Error {
    let what = reason.message();
    let detail = match how {
        Stopped::Killed => {
            "the turn did not stop within the grace after turn/interrupt, so its Codex process group was killed (the session had it to itself)"
        }
        Stopped::Closed => {
            "the turn did not stop within the grace after turn/interrupt, and its Codex process serves other sessions, so this session was closed"
        }
        Stopped::Interrupted | Stopped::NotRunning => {
            "the turn was interrupted (turn/interrupt) and stopped within the grace"
        }
    };
    let kind = match reason {
        StopReason::Deadline { .. } => ErrorKind::Deadline { stopped: how },
        StopReason::Idle { .. } => ErrorKind::Idle { stopped: how },
        StopReason::Budget { budget, .. } => ErrorKind::Budget {
            budget: *budget,
            stopped: how,
        },
    };
    Error::new(Phase::Budget, kind, format!("{what}; {detail}"))
}

fn finish(
    ctx: RunCtx,
    seen: Seen,
    how: Option<Stopped>,
    before: Usage,
    elapsed: Duration,
    stderr: String,
) -> Result<RunResult, Error> {
    let id = ctx.handle.id().to_owned();
    let turn = seen.turn.clone();
    // The engine stopped the turn: interrupted (it ends cancelled), or past the grace its
    // process killed (it ends failed: Codex exited) or the session closed.
    if let (Some(reason), Some((status, _))) = (&seen.stopped, &seen.end)
        && *status != TurnEndStatus::Completed
    {
        return Err(stopped_error(reason, how.unwrap_or(Stopped::Interrupted))
            .with_stderr_tail(stderr)
            .in_turn(&id, Some(&turn)));
    }
    let (status, end_error) = match seen.end.clone() {
        Some(end) => end,
        None => {
            return Err(Error::new(
                Phase::Codex,
                ErrorKind::Exited,
                "the session ended before the turn did",
            )
            .with_stderr_tail(stderr)
            .in_turn(&id, Some(&turn)));
        }
    };
    let err = match status {
        TurnEndStatus::Completed => None,
        TurnEndStatus::Cancelled => Some(Error::new(
            Phase::Codex,
            ErrorKind::Interrupted,
            "the turn was interrupted by someone else",
        )),
        TurnEndStatus::Failed => {
            let fallback = end_error.or(seen.last_error.clone());
            Some(match raw_turn_error(&ctx, &turn) {
                Some(raw) => Error::turn_failed(raw, fallback.as_deref()),
                None if fallback
                    .as_deref()
                    .is_some_and(|m| m.starts_with("Codex exited")) =>
                {
                    Error::new(
                        Phase::Codex,
                        ErrorKind::Exited,
                        fallback.unwrap_or_default(),
                    )
                }
                None => Error::turn_failed(Value::Null, fallback.as_deref()),
            })
        }
    };
    if let Some(e) = err {
        return Err(e.with_stderr_tail(stderr).in_turn(&id, Some(&turn)));
    }
    let thread = seen.thread_usage.clone().unwrap_or(before.clone());
    Ok(RunResult {
        session_id: id,
        turn_id: turn,
        text: seen.text.unwrap_or_default(),
        status,
        usage: TurnUsage {
            // Summed over the turn's model requests by the engine.
            turn: seen.turn_usage.unwrap_or_else(|| thread.since(&before)),
            thread,
        },
        events: seen.events,
        elapsed,
    })
}
