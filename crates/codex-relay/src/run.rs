//! One run, start to end: send the prompt, follow the session's log, answer approvals, enforce the deadline (interrupt, grace, kill), and turn the end into a result or a phased error.

use std::sync::Arc;
use std::time::{Duration, Instant};

use codex_relay_codex::AppServer;
use codex_relay_core::broker::PendingView;
use codex_relay_core::event::{TurnEndStatus, Usage};
use codex_relay_core::{Envelope, Ev, Relay, SayInput, SessionHandle};
use serde_json::Value;
use tokio::sync::{broadcast, mpsc};

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
    pub grace: Duration,
    pub plan_mode: bool,
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

/// The deadline's progress.
enum Deadline {
    Armed(tokio::time::Instant),
    Interrupted(tokio::time::Instant),
    Killed,
    Off,
}

/// What the loop has seen of the turn so far.
struct Seen {
    turn: String,
    events: Vec<Arc<Envelope>>,
    text: Option<String>,
    thread_usage: Option<Usage>,
    last_error: Option<String>,
    end: Option<(TurnEndStatus, Option<String>)>,
}

pub(crate) async fn drive(
    ctx: RunCtx,
    spec: TurnSpec,
    tx: Option<mpsc::UnboundedSender<RunEvent>>,
) -> Result<RunResult, Error> {
    let id = ctx.handle.id().to_owned();
    let shared = ctx.handle.shared().clone();
    if shared.status().is_running() {
        return Err(Error::new(
            Phase::Request,
            ErrorKind::Busy,
            format!("session {id} is running a turn already; wait for it or interrupt it"),
        )
        .in_turn(&id, shared.current_turn().as_deref()));
    }
    let mut changes = shared.subscribe_changes();
    let mut deltas = shared.subscribe_deltas();
    let before = shared.snapshot().usage.unwrap_or_default();
    let mut cursor = shared.last_seq();
    let started = Instant::now();
    let say = SayInput {
        text: spec.text,
        output_schema: spec.output_schema,
        plan_mode: spec.plan_mode,
        ..Default::default()
    };
    let said = match spec.deadline {
        Some(limit) => tokio::time::timeout(limit, ctx.handle.say(say))
            .await
            .map_err(|_| {
                Error::new(
                    Phase::Budget,
                    ErrorKind::Deadline { killed: false },
                    format!("the run's deadline ({limit:?}) passed before the turn started"),
                )
                .in_turn(&id, None)
            })?,
        None => ctx.handle.say(say).await,
    };
    let turn = said
        .map_err(|e| Error::from(e).in_turn(&id, None))?
        .turn_id()
        .to_owned();
    // The app-server the turn runs on (already running: `say` attached it).
    let server = ctx.relay.server().await.ok();
    if let Some(s) = &server {
        ctx.servers.note(s);
    }
    let mut deadline = match spec.deadline {
        Some(d) => Deadline::Armed(tokio::time::Instant::from_std(started + d)),
        None => Deadline::Off,
    };
    let mut seen = Seen {
        turn: turn.clone(),
        events: Vec::new(),
        text: None,
        thread_usage: None,
        last_error: None,
        end: None,
    };
    let mut killed_waits = 0u32;
    loop {
        let batch = ctx
            .relay
            .events(&id, cursor, BATCH)
            .await
            .map_err(|e| Error::from(e).in_turn(&id, Some(&turn)))?;
        let full = batch.len() == BATCH;
        for env in batch {
            cursor = env.seq;
            seen.take(&env, &ctx);
            if let Some(tx) = &tx {
                let _ = tx.send(RunEvent::Event(env));
            }
        }
        if seen.end.is_some() {
            break;
        }
        if full {
            // More is logged already: read on before waiting.
            continue;
        }
        if let Deadline::Killed = deadline {
            // Codex is gone; the session logs its exit as the turn's end shortly (bounded).
            killed_waits += 1;
            tokio::time::sleep(Duration::from_millis(20)).await;
            if shared.current_turn().as_deref() != Some(turn.as_str()) || killed_waits > 100 {
                break;
            }
            continue;
        }
        let wake = match deadline {
            Deadline::Armed(at) | Deadline::Interrupted(at) => Some(at),
            Deadline::Killed | Deadline::Off => None,
        };
        tokio::select! {
            changed = changes.changed() => {
                if changed.is_err() {
                    break;
                }
            }
            delta = deltas.recv() => match delta {
                Ok(d) if d.turn == turn && d.agent.is_none() => {
                    if let Some(tx) = &tx {
                        let _ = tx.send(RunEvent::Delta(d));
                    }
                }
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => break,
            },
            _ = sleep_until(wake), if wake.is_some() => {
                deadline = on_deadline(&ctx, deadline, spec.grace, server.as_deref()).await;
            }
        }
    }
    let elapsed = started.elapsed();
    if let (Deadline::Interrupted(_), Some(server)) = (&deadline, &server) {
        stop_background_terminals(server, &id, spec.grace).await;
    }
    let stderr = server
        .as_ref()
        .map(|s| s.process().stderr_tail().text())
        .unwrap_or_default();
    finish(ctx, seen, deadline, before, elapsed, stderr, spec.deadline)
}

/// After a deadline's interrupt: Codex 0.169 keeps the turn's commands running as background
/// terminals of the thread (a `sleep 30` outlives the interrupted turn); they are stopped too.
/// Older Codex stops them with the turn and does not know the method.
async fn stop_background_terminals(server: &AppServer, thread: &str, grace: Duration) {
    let params = serde_json::json!({ "threadId": thread });
    match server
        .peer()
        .request("thread/backgroundTerminals/clean", &params, Some(grace))
        .await
    {
        Ok(_) => {}
        Err(codex_relay_codex::PeerError::Unsupported { .. }) => {}
        Err(e) => tracing::warn!(
            thread,
            "stopping the turn's background terminals failed: {e}"
        ),
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The deadline passed (`Armed`): interrupt and give the turn `grace` to stop. The grace
/// passed too (`Interrupted`): kill Codex's process group.
async fn on_deadline(
    ctx: &RunCtx,
    state: Deadline,
    grace: Duration,
    server: Option<&AppServer>,
) -> Deadline {
    match state {
        Deadline::Armed(_) => {
            let until = tokio::time::Instant::now() + grace;
            tracing::info!(
                session = ctx.handle.id(),
                "run deadline passed; interrupting the turn"
            );
            let handle = ctx.handle.clone();
            // The interrupt's answer is not awaited past the grace: the loop keeps watching.
            tokio::spawn(async move {
                if let Err(e) = tokio::time::timeout(grace, handle.interrupt()).await {
                    tracing::warn!("turn/interrupt did not answer within the grace: {e}");
                }
            });
            Deadline::Interrupted(until)
        }
        Deadline::Interrupted(_) => {
            tracing::warn!(
                session = ctx.handle.id(),
                "the turn did not stop within the grace; killing Codex's process group"
            );
            match server {
                Some(s) => {
                    // Codex 0.169's sandbox helper runs commands in a session of its own,
                    // outside the group: the whole tree goes.
                    use codex_relay_codex::platform::tree;
                    let procs = tree::descendants(s.pid());
                    tree::stop(s.pid(), None, &procs, tree::STOP_GRACE);
                }
                None => ctx.relay.shutdown().await,
            }
            Deadline::Killed
        }
        other => other,
    }
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
            Ev::TurnEnd { status, error } => self.end = Some((*status, error.clone())),
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
            .respond(ctx.handle.id(), &view.id, answer, "library")
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
            Ok(answer) => ctx.relay.respond(session, id, answer, "library").await,
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
                if let Err(e) = ctx.relay.respond(session, id, decline, "library").await {
                    tracing::debug!(request = %id, "decline not sent: {e}");
                }
            }
            Err(e) => tracing::debug!(request = %id, "answer not sent: {e}"),
        }
    });
}

fn minus(after: &Usage, before: &Usage) -> Usage {
    Usage {
        input_tokens: after.input_tokens - before.input_tokens,
        cached_input_tokens: after.cached_input_tokens - before.cached_input_tokens,
        output_tokens: after.output_tokens - before.output_tokens,
        reasoning_output_tokens: after.reasoning_output_tokens - before.reasoning_output_tokens,
        total_tokens: after.total_tokens - before.total_tokens,
    }
}

/// The raw error object of the turn's end (or its last fatal `error` notification), from the
/// raw Codex lines the session keeps.
fn raw_turn_error(ctx: &RunCtx, turn: &str) -> Option<Value> {
    let raws = ctx.handle.shared().raw_tail();
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

fn finish(
    ctx: RunCtx,
    seen: Seen,
    deadline: Deadline,
    before: Usage,
    elapsed: Duration,
    stderr: String,
    limit: Option<Duration>,
) -> Result<RunResult, Error> {
    let id = ctx.handle.id().to_owned();
    let turn = seen.turn.clone();
    let limit = limit.unwrap_or_default();
    let (status, end_error) = match seen.end.clone() {
        Some(end) => end,
        None if matches!(deadline, Deadline::Killed) => (TurnEndStatus::Failed, None),
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
    let err = match (status, &deadline) {
        (_, Deadline::Killed) => Some(Error::new(
            Phase::Budget,
            ErrorKind::Deadline { killed: true },
            format!(
                "the run's deadline ({limit:?}) passed; the turn did not stop within the grace after turn/interrupt, so Codex's process group was killed"
            ),
        )),
        (TurnEndStatus::Completed, _) => None,
        (TurnEndStatus::Cancelled, Deadline::Interrupted(_)) => Some(Error::new(
            Phase::Budget,
            ErrorKind::Deadline { killed: false },
            format!(
                "the run's deadline ({limit:?}) passed; the turn was interrupted (turn/interrupt) and stopped within the grace"
            ),
        )),
        (TurnEndStatus::Cancelled, _) => Some(Error::new(
            Phase::Codex,
            ErrorKind::Interrupted,
            "the turn was interrupted by someone else",
        )),
        (TurnEndStatus::Failed, _) => {
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
            turn: minus(&thread, &before),
            thread,
        },
        events: seen.events,
        elapsed,
    })
}
