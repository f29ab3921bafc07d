//! What a run gives back: the final text, the turn's events, token usage and status; the live stream of a run; a typed result.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use codex_relay_core::event::{Delta, ToolEndStatus, TurnEndStatus, Usage};
use codex_relay_core::{Envelope, Ev};
use futures::Stream;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::error::{Error, ErrorKind, Phase};

/// Token usage of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TurnUsage {
    /// This turn's tokens: the thread's totals after it minus before it.
    pub turn: Usage,
    /// The thread's totals after this turn.
    pub thread: Usage,
}

/// One tool call of a turn (a command, a file change, one of your tools, an MCP tool), put
/// together from its `tool-call-start` and `tool-call-end` events.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The call's id.
    pub call: String,
    /// The tool's name (`exec_command`-style names for Codex's own, yours for yours).
    pub name: String,
    /// The arguments the model gave.
    pub args: Value,
    /// How it ended (`None` if the turn ended first).
    pub status: Option<ToolEndStatus>,
    /// Its output, as the model saw it.
    pub output: Option<String>,
}

/// A completed run.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RunResult {
    /// The session (Codex thread) it ran in; continue it with `Client::resume`.
    pub session_id: String,
    /// The turn's id.
    pub turn_id: String,
    /// The turn's final agent message (empty if the agent said nothing).
    pub text: String,
    /// How the turn ended (`Completed` for every `Ok` run).
    pub status: TurnEndStatus,
    /// Token usage.
    pub usage: TurnUsage,
    /// The turn's events (session-protocol envelopes, docs/EVENTS.md), oldest first.
    pub events: Vec<Arc<Envelope>>,
    /// Wall time from sending the prompt to the turn's end.
    pub elapsed: Duration,
}

impl RunResult {
    /// The findings of a review run ([`crate::Session::review`]), structured.
    pub fn review(&self) -> Option<codex_relay_core::ReviewOutput> {
        self.events.iter().rev().find_map(|e| match &e.ev {
            Ev::Review { review } => Some((**review).clone()),
            _ => None,
        })
    }

    /// The turn's tool calls, in the order they started.
    pub fn tool_calls(&self) -> Vec<ToolCall> {
        let mut calls: Vec<ToolCall> = Vec::new();
        for e in &self.events {
            match &e.ev {
                Ev::ToolCallStart {
                    call, name, args, ..
                } => calls.push(ToolCall {
                    call: call.clone(),
                    name: name.clone(),
                    args: args.clone(),
                    status: None,
                    output: None,
                }),
                Ev::ToolCallEnd {
                    call,
                    status,
                    output,
                    ..
                } => {
                    if let Some(c) = calls.iter_mut().rev().find(|c| &c.call == call) {
                        c.status = Some(*status);
                        c.output = output.clone();
                    }
                }
                _ => {}
            }
        }
        calls
    }

    /// Parses the final message as `T`; on failure a `response`-phase error carrying the raw
    /// text.
    pub fn parse<T: serde::de::DeserializeOwned>(&self) -> Result<T, Error> {
        serde_json::from_str(&self.text).map_err(|e| {
            Error::new(
                Phase::Response,
                ErrorKind::InvalidOutput,
                format!("the final message does not parse into the output type: {e}"),
            )
            .with_raw_text(self.text.clone())
            .in_turn(&self.session_id, Some(&self.turn_id))
        })
    }
}

/// A typed run's value and the run it came from.
#[derive(Debug, Clone)]
pub struct Typed<T> {
    /// The final message, parsed.
    pub value: T,
    /// Everything else about the run.
    pub run: RunResult,
}

/// What a running turn streams.
#[derive(Debug, Clone)]
pub enum RunEvent {
    /// An event logged in the session (stored, numbered; see docs/EVENTS.md).
    Event(Arc<Envelope>),
    /// Live text as it is produced (agent text, reasoning, command output); not stored —
    /// the completed item follows as an [`RunEvent::Event`].
    Delta(Delta),
}

/// The live events of one run; ends when the turn ends. Then [`RunStream::finish`] gives the
/// outcome. Dropping it does not stop the turn: approvals are still answered and the deadline
/// still applies.
pub struct RunStream {
    pub(crate) rx: mpsc::UnboundedReceiver<RunEvent>,
    pub(crate) task: JoinHandle<Result<RunResult, Error>>,
}

impl RunStream {
    /// Waits for the turn to end and gives its outcome (the events not read are dropped).
    pub async fn finish(self) -> Result<RunResult, Error> {
        drop(self.rx);
        match self.task.await {
            Ok(result) => result,
            Err(e) => Err(Error::new(
                Phase::Codex,
                ErrorKind::Protocol,
                format!("the run's task ended abnormally: {e}"),
            )),
        }
    }
}

impl Stream for RunStream {
    type Item = RunEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<RunEvent>> {
        self.rx.poll_recv(cx)
    }
}
