//! The eight tools: their definitions (names, descriptions, input schemas) and what each one does
//! with the engine. Every failure is a [`ToolError`] whose message says what to do next.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use codex_relay_core::api::start::{self, InvalidStart, StartRequest};
use codex_relay_core::{
    Envelope, ListFilter, Relay, RelayError, SayInput, SessionSnapshot, SessionStatus,
};
use codex_relay_protocol::v2::{ApprovalPolicy, SandboxMode};
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use schemars::JsonSchema;
use serde_json::{Value, json};

use crate::outputs::{
    self, InterruptOutput, LimitsOutput, ListOutput, ListedOutput, RespondOutput, SayOutput,
    StartOutput, StatusOutput, WorktreeOutput,
};
use crate::params::{
    ApprovalPolicyParam, InterruptParams, LimitsParams, ListParams, RespondParams, SandboxParam,
    SayParams, StartParams, StatusParams, WorktreeParams, millis,
};
use crate::view;

/// Who answers through `codex_respond`, as recorded in `request-resolved`.
pub const RESPOND_BY: codex_relay_core::Decider =
    codex_relay_core::Decider::Person(codex_relay_core::Front::Mcp);

/// A tool call that did not work; shown to the caller as an `isError` result.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ToolError(pub String);

impl From<RelayError> for ToolError {
    fn from(e: RelayError) -> Self {
        ToolError(e.to_string())
    }
}

pub const START: &str = "codex_start";
pub const SAY: &str = "codex_say";
pub const STATUS: &str = "codex_status";
pub const RESPOND: &str = "codex_respond";
pub const INTERRUPT: &str = "codex_interrupt";
pub const LIST: &str = "codex_list";
pub const LIMITS: &str = "codex_limits";
pub const WORKTREE: &str = "codex_worktree";

/// What each tool takes, for error messages.
pub fn signature(tool: &str) -> &'static str {
    match tool {
        START => {
            "{prompt, workingDirectory?, model?, effort?, approvalPolicy?, sandbox?, fullAuto?, profile?, config?, baseInstructions?, images?, skipGitRepoCheck?, dangerouslyBypassApprovalsAndSandbox?, outputSchema?, deadlineSeconds?, idleSeconds?, budget?, worktree?}"
        }
        SAY => "{sessionId, message, images?, deadlineSeconds?, idleSeconds?}",
        LIMITS => "{sessionId, budget?, deadlineSeconds?, idleSeconds?, prices?}",
        WORKTREE => {
            "{sessionId, action?: \"diff\"|\"export\"|\"merge\", as?: \"branch\"|\"patch\", to?, name?, into?}"
        }
        STATUS => "{sessionId, outputLines?, cursor?, waitMs?, until?: \"change\"|\"attention\"}",
        RESPOND => "{sessionId, id, answers: [string]}",
        INTERRUPT => "{sessionId}",
        LIST => "{workingDirectory?, limit?}",
        crate::thread_tool::THREAD => crate::thread_tool::SIGNATURE,
        _ => "",
    }
}

fn schema_of<T: JsonSchema>() -> Arc<JsonObject> {
    let settings = schemars::generate::SchemaSettings::draft2020_12().with(|s| {
        s.inline_subschemas = true;
    });
    let schema = settings.into_generator().into_root_schema_for::<T>();
    let mut object = match serde_json::to_value(schema) {
        Ok(Value::Object(o)) => o,
        _ => JsonObject::new(),
    };
    object.remove("$schema");
    object.remove("title");
    Arc::new(object)
}

/// Drops schemars' Rust-specific integer formats (`uint64`, `int64`, ...), which JSON Schema
/// validators do not know and warn about.
fn portable(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if m.get("format")
                .and_then(Value::as_str)
                .is_some_and(|f| f.starts_with("int") || f.starts_with("uint"))
            {
                m.remove("format");
            }
            m.values_mut().for_each(portable);
        }
        Value::Array(a) => a.iter_mut().for_each(portable),
        _ => {}
    }
}

/// A tool taking `P` and returning `O` as structured content (its published output schema).
fn tool<P: JsonSchema, O: JsonSchema>(name: &'static str, title: &str, description: &str) -> Tool {
    let mut output = Value::Object((*schema_of::<O>()).clone());
    portable(&mut output);
    let output = match output {
        Value::Object(o) => Arc::new(o),
        _ => Arc::default(),
    };
    Tool::new(name, description.to_owned(), schema_of::<P>())
        .with_title(title)
        .with_raw_output_schema(output)
}

/// The tool list, in the order clients show them.
pub fn definitions() -> Vec<Tool> {
    vec![
        tool::<StartParams, StartOutput>(
            START,
            "Start a Codex session",
            "Start a new Codex session on a task and return at once with its sessionId; the session \
             runs in the background. Follow it with codex_status (use waitMs to wait for changes), \
             answer approvals with codex_respond. Optional settings reach Codex only when given.",
        )
        .with_annotations(ToolAnnotations::new().destructive(true).open_world(true)),
        tool::<SayParams, SayOutput>(
            SAY,
            "Send a message to a Codex session",
            "Send a message to a session: it starts a new turn when the session is idle, or is \
             added to the running turn (steering) when one is active; the answer says which. Any \
             Codex thread id (see codex_list) can be continued.",
        )
        .with_annotations(ToolAnnotations::new().destructive(true).open_world(true)),
        tool::<StatusParams, StatusOutput>(
            STATUS,
            "Status of a Codex session",
            "The status of a session (active, awaiting_approval, awaiting_input, done, \
             interrupted, error, closed), its result (the final message, parsed JSON with an \
             outputSchema), recent output, the pending question to answer with codex_respond, \
             the items of the latest turn, token usage, and its events after `cursor`. With \
             waitMs it waits until something changes, so there is no need to poll in a loop.",
        )
        .with_annotations(ToolAnnotations::new().read_only(true)),
        tool::<RespondParams, RespondOutput>(
            RESPOND,
            "Answer a Codex approval or question",
            "Answer a pending approval or question (pendingQuestion.id from codex_status): \
             \"approve\", \"approve for session\", \"deny\", \"deny: <reason>\" (the reason is \
             passed to the model) or \"cancel\" (also stops the turn), or any other of the \
             request's options (\"approve with codex rule\" where Codex offers one); for \
             questions, one of the options per question. The first answer wins.",
        )
        .with_annotations(ToolAnnotations::new().destructive(true)),
        tool::<InterruptParams, InterruptOutput>(
            INTERRUPT,
            "Interrupt a Codex session",
            "Stop the running turn of a session. The session stays usable: codex_say continues it.",
        )
        .with_annotations(ToolAnnotations::new().destructive(false).idempotent(true)),
        tool::<ListParams, ListOutput>(
            LIST,
            "List Codex sessions",
            "Sessions most recent first: this relay's and those other Codex clients (the TUI, \
             codex exec, IDEs) created in the same CODEX_HOME. Any of them can be continued with \
             codex_say.",
        )
        .with_annotations(ToolAnnotations::new().read_only(true)),
        tool::<LimitsParams, LimitsOutput>(
            LIMITS,
            "Budget and limits of a Codex session",
            "Read or change a session's budget (tokens, turns, wall time, estimated cost), its \
             turns' deadline and idle watchdog, and its price table; answers what the session \
             spent (token usage summed over every model request). A session that reached a \
             budget starts no new turn until this raises it.",
        )
        .with_annotations(ToolAnnotations::new().destructive(false).idempotent(true)),
        tool::<crate::thread_tool::ThreadParams, crate::thread_tool::ThreadOutput>(
            crate::thread_tool::THREAD,
            crate::thread_tool::TITLE,
            crate::thread_tool::DESCRIPTION,
        )
        .with_annotations(ToolAnnotations::new().destructive(true).open_world(true)),
        tool::<WorktreeParams, WorktreeOutput>(
            WORKTREE,
            "A session's git worktree: diff, export, merge",
            "For a session started with worktree: action diff (default) lists the changed files \
             and the unified diff against the base; export commits the work to the session's \
             branch (with to, also pushes it to that repository) or, with as: patch, returns one \
             patch; merge merges the branch into its base branch (or into).",
        )
        .with_annotations(ToolAnnotations::new().destructive(false)),
    ]
}

impl From<InvalidStart> for ToolError {
    fn from(e: InvalidStart) -> Self {
        ToolError(e.to_string())
    }
}

impl From<ApprovalPolicyParam> for ApprovalPolicy {
    fn from(a: ApprovalPolicyParam) -> Self {
        match a {
            ApprovalPolicyParam::Untrusted => ApprovalPolicy::Untrusted,
            ApprovalPolicyParam::OnFailure => ApprovalPolicy::OnFailure,
            ApprovalPolicyParam::OnRequest => ApprovalPolicy::OnRequest,
            ApprovalPolicyParam::Never => ApprovalPolicy::Never,
        }
    }
}

impl From<SandboxParam> for SandboxMode {
    fn from(s: SandboxParam) -> Self {
        match s {
            SandboxParam::ReadOnly => SandboxMode::ReadOnly,
            SandboxParam::WorkspaceWrite => SandboxMode::WorkspaceWrite,
            SandboxParam::DangerFullAccess => SandboxMode::DangerFullAccess,
        }
    }
}

/// `codex_start`'s parameters as the engine's start request (checked by the engine).
pub fn start_request(p: StartParams) -> StartRequest {
    StartRequest {
        prompt: Some(p.prompt),
        cwd: p.working_directory,
        model: p.model,
        effort: p.effort,
        approval_policy: p.approval_policy.map(Into::into),
        sandbox: p.sandbox.map(Into::into),
        full_auto: p.full_auto == Some(true),
        bypass_approvals_and_sandbox: p.dangerously_bypass_approvals_and_sandbox == Some(true),
        profile: p.profile,
        config: p.config.map(start::read_config_strings),
        base_instructions: p.base_instructions,
        images: p.images.unwrap_or_default(),
        output_schema: p.output_schema,
        worktree: p
            .worktree
            .map(|w| codex_relay_core::worktree::WorktreeSpec {
                repo: w.repo.unwrap_or_default(),
                base: w.base,
                branch: w.branch,
                keep: w.keep == Some(true),
                ..Default::default()
            }),
        ..Default::default()
    }
}

pub async fn worktree(relay: &Relay, p: WorktreeParams) -> Result<Value, ToolError> {
    use codex_relay_core::worktree::ExportAs;
    let action = p.action.clone().unwrap_or_else(|| "diff".into());
    let result = match action.as_str() {
        "diff" => json!(relay.worktree_diff(&p.session_id).await?),
        "export" => {
            let how = match p.export_as.as_deref().unwrap_or("branch") {
                "branch" => ExportAs::Branch {
                    to: p.to,
                    name: p.name,
                },
                "patch" => ExportAs::Patch,
                other => {
                    return Err(ToolError(format!(
                        "as {other:?} is not an export: give \"branch\" or \"patch\""
                    )));
                }
            };
            json!(relay.export_worktree(&p.session_id, how).await?)
        }
        "merge" => json!(relay.merge_worktree(&p.session_id, p.into).await?),
        other => {
            return Err(ToolError(format!(
                "action {other:?} is not one of diff, export, merge"
            )));
        }
    };
    Ok(outputs::value(WorktreeOutput {
        session_id: p.session_id,
        action,
        result,
    }))
}

/// The turn limits a tool call gives.
fn turn_limits(
    deadline: Option<f64>,
    idle: Option<f64>,
) -> Result<codex_relay_core::limits::TurnLimits, ToolError> {
    Ok(codex_relay_core::limits::TurnLimits {
        deadline_ms: millis("deadlineSeconds", deadline).map_err(ToolError)?,
        idle_ms: millis("idleSeconds", idle).map_err(ToolError)?,
        grace_ms: None,
    })
}

/// The status word the tools use (the reference contract's `done` for a finished turn).
pub fn status_word(s: &SessionSnapshot) -> &'static str {
    match s.status {
        SessionStatus::Idle if s.turn_count == 0 => "idle",
        other => view::status_word(other),
    }
}

pub async fn start(relay: &Relay, mut p: StartParams) -> Result<Value, ToolError> {
    let limits = turn_limits(p.deadline_seconds.take(), p.idle_seconds.take())?;
    let budget = p.budget.take().unwrap_or_default();
    budget.check().map_err(ToolError)?;
    let mut opts = start_request(p).options()?;
    opts.limits = limits;
    opts.budget = budget;
    let (handle, first) = relay.create(opts).await?;
    let snap = handle.snapshot();
    Ok(outputs::value(StartOutput {
        status: status_word(&snap).into(),
        turn_id: first
            .as_ref()
            .map(|f| f.turn_id().to_owned())
            .filter(|t| !t.is_empty()),
        session_id: snap.session_id,
        cwd: snap.cwd,
        model: snap.model,
    }))
}

pub async fn say(relay: &Relay, p: SayParams) -> Result<Value, ToolError> {
    if p.message.trim().is_empty() {
        return Err(ToolError(
            "message is empty; say what Codex should do".into(),
        ));
    }
    let cwd = relay
        .status(&p.session_id)
        .ok()
        .and_then(|s| s.cwd)
        .map(PathBuf::from);
    let images = start::images(p.images.unwrap_or_default(), cwd.as_deref())?;
    let outcome = relay
        .say(
            &p.session_id,
            SayInput {
                text: p.message,
                images,
                limits: turn_limits(p.deadline_seconds, p.idle_seconds)?,
                ..Default::default()
            },
        )
        .await?;
    let snap = relay.status(&p.session_id)?;
    let (mode, note) = match &outcome {
        codex_relay_core::SayOutcome::Started { .. } => ("started", "a new turn started".into()),
        codex_relay_core::SayOutcome::Steered { .. } => (
            "steered",
            "a turn was running: the message was added to it".into(),
        ),
        codex_relay_core::SayOutcome::Queued {
            position, limit_id, ..
        } => (
            "queued",
            format!(
                "the {limit_id} rate limit is hit: the turn waits in the queue (position {position}) and starts when it clears; codex_status shows it"
            ),
        ),
    };
    Ok(outputs::value(SayOutput {
        session_id: p.session_id,
        status: status_word(&snap).into(),
        mode: mode.into(),
        turn_id: outcome.turn_id().to_owned(),
        note,
    }))
}

/// Events returned by one `codex_status` call at most; `nextCursor` continues.
pub const EVENTS_PER_CALL: usize = 500;
/// The longest `waitMs` honoured.
pub const MAX_WAIT: Duration = Duration::from_secs(60);

/// `codex_status`, after any waiting (see `server.rs`).
pub async fn status(relay: &Relay, p: &StatusParams) -> Result<Value, ToolError> {
    let snap = relay.find(&p.session_id).await?;
    let lines = p.output_lines.unwrap_or(50).min(1000) as usize;
    // The latest turn's items and the recent output come from the newest part of the log.
    let window = relay.config().event_buffer.clamp(100, 2000);
    let recent: Vec<Arc<Envelope>> = relay
        .events(
            &p.session_id,
            snap.last_seq.saturating_sub(window as u64),
            window,
        )
        .await?;
    // Without a cursor no events are sent (they would flood an agent's context); nextCursor
    // is where a reader starts.
    let events = match p.cursor {
        Some(cursor) => relay.events(&p.session_id, cursor, EVENTS_PER_CALL).await?,
        None => Vec::new(),
    };
    let next_cursor = events
        .last()
        .map_or(p.cursor.unwrap_or(snap.last_seq).min(snap.last_seq), |e| {
            e.seq
        });
    let limits = relay.rate_limits();
    let queued = relay
        .queued_position(&p.session_id)
        .map(|position| json!({"position": position, "hold": limits.hold}));
    Ok(outputs::value(StatusOutput {
        status: if queued.is_some() {
            "queued".into()
        } else {
            status_word(&snap).into()
        },
        queued,
        rate_limits: limits.limits.iter().map(|l| json!(l)).collect(),
        error: if snap.status == SessionStatus::Error {
            snap.last_error.clone()
        } else {
            None
        },
        recent_output: view::recent_output(&recent, lines),
        pending_question: view::pending_question(&snap.pending),
        item_events: view::item_events(&recent, 200),
        usage: snap.usage.as_ref().map(Into::into),
        turn_usage: (&snap.turn_usage).into(),
        spent: snap.spent.clone(),
        budget: snap.budget,
        budget_reached: snap.budget_reached.clone(),
        stopped: snap.stopped.clone(),
        turn_count: snap.turn_count,
        events: events.iter().map(|e| json!(e)).collect(),
        next_cursor,
        more_events: next_cursor < snap.last_seq,
        session_id: snap.session_id,
        result: snap.result,
        cwd: snap.cwd,
        model: snap.model,
        sub_agents: snap.agents.iter().map(Into::into).collect(),
        store_fault: snap.store_fault.as_ref().map(Into::into),
    }))
}

pub async fn respond(
    relay: &Relay,
    p: RespondParams,
    person: Option<codex_relay_core::people::Person>,
) -> Result<Value, ToolError> {
    if p.answers.is_empty() {
        return Err(ToolError(
            "answers is empty; give one answer per question, e.g. [\"approve\"] or [\"deny: too risky\"]"
                .into(),
        ));
    }
    let answer = match relay
        .pending(Some(&p.session_id))
        .iter()
        .find(|v| v.id == p.id)
    {
        Some(view) => {
            crate::words::answer(view, &p.answers).map_err(|message| RelayError::InvalidAnswer {
                id: p.id.clone(),
                message,
            })?
        }
        // Not open (any more): the engine says whether it was resolved or never existed.
        None => codex_relay_core::Answer::Cancel,
    };
    let resolution = relay
        .respond_as(&p.session_id, &p.id, answer, RESPOND_BY, person)
        .await?;
    let snap = relay.status(&p.session_id)?;
    Ok(outputs::value(RespondOutput {
        session_id: p.session_id,
        id: resolution.id,
        decision: resolution.decision.as_str().to_owned(),
        reason: resolution.reason,
        answered_by_user: resolution.by_user,
        status: status_word(&snap).into(),
        pending_question: view::pending_question(&snap.pending),
    }))
}

/// How long `codex_interrupt` waits for Codex to end the turn before it answers.
const INTERRUPT_SETTLE: Duration = Duration::from_secs(5);

pub async fn interrupt(relay: &Relay, p: InterruptParams) -> Result<Value, ToolError> {
    let before = relay.find(&p.session_id).await?;
    let was_running = relay.interrupt(&p.session_id).await?;
    if was_running {
        // Codex ends the turn shortly after acknowledging: answer with the settled status.
        let deadline = tokio::time::Instant::now() + INTERRUPT_SETTLE;
        let mut seen = before.last_seq;
        while relay.status(&p.session_id)?.status.is_running()
            && tokio::time::Instant::now() < deadline
        {
            let left = deadline - tokio::time::Instant::now();
            relay.wait(&p.session_id, seen, left).await?;
            seen = relay.status(&p.session_id)?.last_seq;
        }
    }
    let snap = relay.status(&p.session_id)?;
    Ok(outputs::value(InterruptOutput {
        session_id: p.session_id,
        status: status_word(&snap).into(),
        interrupted: was_running,
        note: if was_running {
            "the turn was stopped; codex_say continues the session"
        } else {
            "no turn was running"
        }
        .into(),
    }))
}

pub async fn limits(relay: &Relay, p: LimitsParams) -> Result<Value, ToolError> {
    let limits = turn_limits(p.deadline_seconds, p.idle_seconds)?;
    let change = codex_relay_core::limits::LimitsChange {
        budget: p.budget,
        limits: (!limits.is_empty()).then_some(limits),
        prices: p.prices,
    };
    let view = if change == Default::default() {
        relay.limits(&p.session_id).await?
    } else {
        relay.set_limits(&p.session_id, change).await?
    };
    Ok(outputs::value(LimitsOutput {
        session_id: view.session_id,
        budget: view.budget,
        limits: view.limits,
        prices: view.prices,
        spent: view.spent,
        budget_reached: view.budget_reached,
    }))
}

pub async fn list(relay: &Relay, p: ListParams) -> Result<Value, ToolError> {
    let cwd = p
        .working_directory
        .map(|d| start::absolute(&d, None).display().to_string());
    let rows = relay
        .list(ListFilter {
            cwd,
            limit: Some(p.limit.unwrap_or(50).clamp(1, 500) as usize),
        })
        .await?;
    let sessions = rows
        .into_iter()
        .map(|r| ListedOutput {
            timestamp: view::iso8601(r.updated_at),
            active_status: r.status.map(|s| view::status_word(s).to_owned()),
            session_id: r.session_id,
            directory: r.cwd,
            summary: r.preview,
            is_active: r.live,
            source: r.source,
            owned_by_relay: r.owned,
            sub_agents: r.agents.iter().map(Into::into).collect(),
        })
        .collect();
    Ok(outputs::value(ListOutput {
        sessions,
        store_fault: relay.store_health().fault.as_ref().map(Into::into),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use codex_relay_core::CreateOptions;

    fn start(v: Value) -> Result<CreateOptions, ToolError> {
        let p: StartParams = serde_json::from_value(v).unwrap();
        Ok(start_request(p).options()?)
    }

    /// The message of a refused start.
    fn refused(v: Value) -> String {
        match start(v) {
            Err(e) => e.0,
            Ok(_) => panic!("accepted"),
        }
    }

    #[test]
    fn shortcuts_fill_only_what_was_not_given() {
        let o = start(json!({"prompt": "p", "fullAuto": true})).unwrap();
        assert_eq!(o.approval_policy, Some(ApprovalPolicy::OnRequest));
        assert_eq!(o.sandbox, Some(SandboxMode::WorkspaceWrite));
        let o = start(json!({"prompt": "p", "fullAuto": true, "sandbox": "read-only"})).unwrap();
        assert_eq!(o.sandbox, Some(SandboxMode::ReadOnly));
        let o =
            start(json!({"prompt": "p", "dangerouslyBypassApprovalsAndSandbox": true})).unwrap();
        assert_eq!(o.approval_policy, Some(ApprovalPolicy::Never));
        assert_eq!(o.sandbox, Some(SandboxMode::DangerFullAccess));
        let o = start(json!({"prompt": "p"})).unwrap();
        assert_eq!((o.approval_policy, o.sandbox, o.config), (None, None, None));
        let err = refused(
            json!({"prompt": "p", "fullAuto": true, "dangerouslyBypassApprovalsAndSandbox": true}),
        );
        assert!(err.contains("contradict"), "{err}");
    }

    #[test]
    fn every_tool_publishes_the_schema_of_its_result() {
        for t in definitions() {
            let schema = t.output_schema.as_ref().expect("an output schema");
            assert_eq!(schema["type"], "object", "{}", t.name);
            let props = schema["properties"].as_object().unwrap();
            let key = if t.name == LIST {
                "sessions"
            } else {
                "sessionId"
            };
            assert!(props.contains_key(key), "{} has {key}: {schema:?}", t.name);
            assert!(
                !Value::Object((**schema).clone())
                    .to_string()
                    .contains("uint")
            );
        }
        // What a tool returns fits what it publishes.
        let out = outputs::value(StartOutput {
            session_id: "s".into(),
            status: "active".into(),
            turn_id: None,
            cwd: None,
            model: None,
        });
        assert_eq!(
            out,
            json!({"sessionId": "s", "status": "active", "turnId": null, "cwd": null, "model": null})
        );
    }

    #[test]
    fn config_strings_that_read_as_json_are_values() {
        let o = start(json!({"prompt": "p", "config": {
            "a": "true", "b": "42", "c": "low", "d": "[\"x\"]", "e": 7
        }}))
        .unwrap();
        assert_eq!(
            Value::Object(o.config.unwrap()),
            json!({"a": true, "b": 42, "c": "low", "d": ["x"], "e": 7})
        );
    }

    #[test]
    fn bad_values_are_refused_before_codex_is_asked() {
        let err = refused(json!({"prompt": "p", "workingDirectory": "/no/such/dir"}));
        assert!(err.contains("not a directory"), "{err}");
        let err = refused(json!({"prompt": "  "}));
        assert!(err.contains("prompt is empty"), "{err}");
        let err = refused(json!({"prompt": "p", "outputSchema": "json"}));
        assert!(err.contains("JSON Schema object"), "{err}");
        let err = refused(json!({"prompt": "p", "images": ["/no/such.png"]}));
        assert!(err.contains("not a file"), "{err}");
        let o = start(json!({"prompt": "p", "images": ["https://example.com/a.png"]})).unwrap();
        assert_eq!(o.images, vec!["https://example.com/a.png".to_owned()]);
    }
}
