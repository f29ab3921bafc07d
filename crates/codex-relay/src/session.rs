//! A session: one Codex thread; each prompt is a run (a turn) that ends in a result, a typed value, or a phased error.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use codex_relay_core::workspace::Workspace;
use codex_relay_core::{Relay, SessionHandle, SessionSnapshot};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::approval::Approval;
use crate::client::Servers;
use crate::error::Error;
use crate::options::SessionOptions;
use crate::questions::Questions;
use crate::result::{RunResult, RunStream, Typed};
use crate::run::{RunCtx, TurnSpec, drive};

/// One Codex thread opened by a [`crate::Client`]. Runs in it happen one at a time; each
/// continues the conversation. An open session holds one of the client's `max_sessions`
/// slots until [`Session::close`].
///
/// ```no_run
/// # async fn demo(client: codex_relay::Client) -> Result<(), codex_relay::Error> {
/// use std::time::Duration;
/// use codex_relay::SessionOptions;
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Review { approve: bool, comments: Vec<String> }
///
/// let session = client.session(SessionOptions::new().cwd("/path/to/repo")).await?;
/// let review = session.run_typed::<Review>("Review the last commit.").await?;
/// println!("approve: {}, {} comments", review.value.approve, review.value.comments.len());
/// let follow_up = session
///     .prompt("Fix the first comment.")
///     .deadline(Duration::from_secs(600))
///     .run()
///     .await?;
/// println!("{}", follow_up.text);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Session {
    relay: Relay,
    servers: Servers,
    handle: SessionHandle,
    approval: Approval,
    questions: Questions,
    deadline: Option<Duration>,
    idle: Option<Duration>,
    grace: Duration,
    /// The isolated copy the session works in; removed when the last clone goes.
    workspace: Option<Arc<Workspace>>,
}

impl Session {
    pub(crate) fn new(
        relay: Relay,
        servers: Servers,
        handle: SessionHandle,
        options: SessionOptions,
        workspace: Option<Workspace>,
    ) -> Self {
        Self {
            relay,
            servers,
            handle,
            approval: options.approval,
            questions: options.questions,
            deadline: options.deadline,
            idle: options.idle,
            grace: options.grace,
            workspace: workspace.map(Arc::new),
        }
    }

    /// The isolated copy this session works in (its `cwd`), with
    /// [`SessionOptions::workspace`] or a resumed isolated session; `None` otherwise.
    pub fn workspace(&self) -> Option<&Path> {
        self.workspace.as_deref().map(Workspace::path)
    }

    /// The session's id (its Codex thread id): `Client::resume`, `codex-relay run --resume`,
    /// MCP and HTTP all take it.
    pub fn id(&self) -> &str {
        self.handle.id()
    }

    /// Status, usage, last result and pending requests, as every front sees them.
    pub fn snapshot(&self) -> SessionSnapshot {
        self.handle.snapshot()
    }

    /// A run to configure before starting it (deadline, output schema).
    pub fn prompt(&self, text: impl Into<String>) -> Prompt<'_> {
        Prompt {
            session: self,
            text: text.into(),
            output_schema: None,
            deadline: self.deadline,
            idle: self.idle,
            grace: self.grace,
            plan_mode: false,
            review: None,
        }
    }

    /// Changes the session's budget (the limits `change.budget` names; raising one it
    /// reached lets it run turns again), its turns' limits or its price table; answers the
    /// limits now in force and what the session spent.
    pub async fn set_limits(
        &self,
        change: codex_relay_core::limits::LimitsChange,
    ) -> Result<codex_relay_core::limits::LimitsView, Error> {
        Ok(self.relay.set_limits(self.id(), change).await?)
    }

    /// The session's limits and what it spent (token usage summed over every model request,
    /// turns, wall time, estimated cost).
    pub async fn limits(&self) -> Result<codex_relay_core::limits::LimitsView, Error> {
        Ok(self.relay.limits(self.id()).await?)
    }

    /// Reviews `target` (uncommitted changes, against a base branch, a commit, or custom
    /// instructions) as one turn and waits for its end: [`RunResult::review`] holds the
    /// findings, structured. Runs with the session's deadline, idle watchdog and budget.
    pub async fn review(&self, target: codex_relay_core::ReviewTarget) -> Result<RunResult, Error> {
        self.prompt(String::new()).review(target).run().await
    }

    /// Forks the session into a new one with its settings: all of its history, or through
    /// `through` (one of [`SessionSnapshot::turns`]; Codex 0.169+). The fork is a session of
    /// its own, with this session's approval handling and limits.
    pub async fn fork(&self, through: Option<&str>) -> Result<Session, Error> {
        let forked = self
            .relay
            .fork(self.id(), through.map(str::to_owned))
            .await?;
        let handle = self.relay.session(&forked.session_id).await?;
        Ok(Session {
            handle,
            workspace: None,
            ..self.clone()
        })
    }

    /// Drops the last `turns` turns from the thread's history (files they changed stay
    /// changed); answers what was dropped and the history left.
    pub async fn rollback(&self, turns: u32) -> Result<codex_relay_core::RolledBack, Error> {
        Ok(self.relay.rollback(self.id(), turns).await?)
    }

    /// Compacts the thread's history (Codex runs it as a turn; the next run waits for it).
    pub async fn compact(&self) -> Result<(), Error> {
        Ok(self.relay.compact(self.id()).await?)
    }

    /// Sets the model and reasoning effort of the session's next runs (the fields given;
    /// [`crate::Client::models`] lists them).
    pub async fn set_model(
        &self,
        choice: codex_relay_core::ModelChoice,
    ) -> Result<codex_relay_core::ModelChoice, Error> {
        Ok(self.relay.set_model(self.id(), choice).await?)
    }

    /// The diff of the session's worktree against its base (committed and uncommitted
    /// changes, new files included).
    pub async fn worktree_diff(&self) -> Result<codex_relay_core::worktree::WorktreeDiff, Error> {
        Ok(self.relay.worktree_diff(self.id()).await?)
    }

    /// Exports the session's worktree: as its branch (committed; pushed to a repository when
    /// `to` is given) or as one patch.
    pub async fn export_worktree(
        &self,
        how: codex_relay_core::worktree::ExportAs,
    ) -> Result<codex_relay_core::worktree::Exported, Error> {
        Ok(self.relay.export_worktree(self.id(), how).await?)
    }

    /// Merges the session's worktree branch into `into` (default: its base branch).
    pub async fn merge_worktree(
        &self,
        into: Option<String>,
    ) -> Result<codex_relay_core::worktree::Merged, Error> {
        Ok(self.relay.merge_worktree(self.id(), into).await?)
    }

    /// Runs `prompt` as one turn and waits for its end.
    pub async fn run(&self, prompt: impl Into<String>) -> Result<RunResult, Error> {
        self.prompt(prompt).run().await
    }

    /// Runs `prompt` with `T`'s schema as the turn's output schema and parses the answer.
    /// An answer that does not parse is a `response`-phase error carrying the raw text.
    pub async fn run_typed<T: DeserializeOwned + JsonSchema>(
        &self,
        prompt: impl Into<String>,
    ) -> Result<Typed<T>, Error> {
        self.prompt(prompt).run_typed().await
    }

    /// Runs `prompt` and streams its events and live deltas as they happen.
    pub async fn stream(&self, prompt: impl Into<String>) -> Result<RunStream, Error> {
        Ok(self.prompt(prompt).stream())
    }

    /// Interrupts the running turn (`false` when none runs). The session stays usable.
    pub async fn interrupt(&self) -> Result<bool, Error> {
        Ok(self.handle.interrupt().await?)
    }

    /// Ends the session in this client and frees its slot. Its thread stays in the store and
    /// in Codex: another client or process (`codex-relay run --resume`, MCP, HTTP) can
    /// continue it; this client cannot. An isolated copy is removed once no clone of this
    /// session is left.
    pub async fn close(self) -> Result<(), Error> {
        Ok(self.relay.close(self.handle.id(), false).await?)
    }

    fn ctx(&self) -> RunCtx {
        RunCtx {
            relay: self.relay.clone(),
            servers: self.servers.clone(),
            handle: self.handle.clone(),
            approval: self.approval.clone(),
            questions: self.questions.clone(),
        }
    }
}

/// One run being configured: [`Session::prompt`], then `.deadline(..)`, then [`Prompt::run`],
/// [`Prompt::run_typed`] or [`Prompt::stream`].
#[must_use = "a prompt does nothing until it is run"]
pub struct Prompt<'a> {
    session: &'a Session,
    text: String,
    output_schema: Option<Value>,
    deadline: Option<Duration>,
    idle: Option<Duration>,
    grace: Duration,
    plan_mode: bool,
    review: Option<codex_relay_core::ReviewTarget>,
}

impl Prompt<'_> {
    /// Runs this turn in Codex's plan collaboration mode, where the model may ask questions
    /// (`request_user_input`); they go to [`crate::SessionOptions::questions`].
    pub fn plan_mode(mut self) -> Self {
        self.plan_mode = true;
        self
    }

    /// This run's deadline: at expiry the turn is interrupted; if it has not stopped after
    /// the grace, Codex's process group is killed. Either way the run fails in the `budget`
    /// phase with [`crate::ErrorKind::Deadline`] saying which happened.
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// This run's idle watchdog: with no output for this long the turn is interrupted and the
    /// run fails with [`crate::ErrorKind::Idle`].
    pub fn idle_timeout(mut self, idle: Duration) -> Self {
        self.idle = Some(idle);
        self
    }

    /// How long the interrupted turn may take to stop before the kill.
    pub fn interrupt_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Makes this run a review of `target` (`review/start`) instead of a message: the text
    /// is not sent, and [`RunResult::review`] holds the findings.
    pub fn review(mut self, target: codex_relay_core::ReviewTarget) -> Self {
        self.review = Some(target);
        self
    }

    /// A JSON schema for the final message, sent as the turn's `outputSchema` as given (see
    /// [`crate::make_strict`] to make a hand-written schema strict-compatible).
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }

    fn spec(self) -> (RunCtx, TurnSpec) {
        (
            self.session.ctx(),
            TurnSpec {
                text: self.text,
                output_schema: self.output_schema,
                deadline: self.deadline,
                idle: self.idle,
                grace: self.grace,
                plan_mode: self.plan_mode,
                review: self.review,
            },
        )
    }

    /// Runs the turn and waits for its end.
    pub async fn run(self) -> Result<RunResult, Error> {
        let (ctx, spec) = self.spec();
        drive(ctx, spec, None).await
    }

    /// Runs the turn with `T`'s strict schema as output schema and parses the answer.
    pub async fn run_typed<T: DeserializeOwned + JsonSchema>(mut self) -> Result<Typed<T>, Error> {
        self.output_schema = Some(crate::schema::output_schema::<T>()?);
        let run = self.run().await?;
        let value = run.parse::<T>()?;
        Ok(Typed { value, run })
    }

    /// Starts the turn and streams its events and live deltas; [`RunStream::finish`] gives
    /// the outcome.
    pub fn stream(self) -> RunStream {
        let (ctx, spec) = self.spec();
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(drive(ctx, spec, Some(tx)));
        RunStream { rx, task }
    }
}
