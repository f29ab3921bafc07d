//! `codex_thread`: the thread operations as one tool with an `op` (review, fork, rollback,
//! compact, models, model), so a client's tool list stays short.

use codex_relay_core::{Forked, ModelChoice, ModelInfo, Relay, ReviewTarget, RolledBack};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::outputs;
use crate::tools::ToolError;

pub const THREAD: &str = "codex_thread";
pub const SIGNATURE: &str = "{op: \"review\"|\"fork\"|\"rollback\"|\"compact\"|\"models\"|\"model\", sessionId?, review?, turnId?, turns?, model?, effort?, includeHidden?}";
pub const TITLE: &str = "Thread operations of a Codex session";
pub const DESCRIPTION: &str = "Operations on a session's thread, by `op`:\n\
- review {sessionId, review: {type: uncommittedChanges} | {type: baseBranch, branch} | {type: commit, sha} | {type: custom, instructions}}: starts a review turn; wait for it with codex_status (waitMs), whose result is then the findings as JSON ({findings: [{title, body, priority, file, lines}], overallCorrectness, overallExplanation}).\n\
- fork {sessionId, turnId?}: a new session starting from a copy of this one's history (through turnId, one of the session's `turns`; Codex 0.169+), with its settings; answers the new sessionId.\n\
- rollback {sessionId, turns}: drops the last `turns` turns from the thread's history (files they changed stay changed); not while a turn runs.\n\
- compact {sessionId}: Codex summarizes the thread's history to free context; runs as a turn.\n\
- models {includeHidden?}: the models Codex offers, with the reasoning efforts each takes.\n\
- model {sessionId, model?, effort?}: the model and reasoning effort of the session's next turns.";

/// The operation.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ThreadOp {
    Review,
    Fork,
    Rollback,
    Compact,
    Models,
    Model,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ThreadParams {
    /// What to do (see the tool's description).
    pub op: ThreadOp,
    /// The session (every op but `models`).
    pub session_id: Option<String>,
    /// `review`: what to review.
    pub review: Option<ReviewTarget>,
    /// `fork`: fork through this turn (one of the session's `turns`); absent: all of it.
    pub turn_id: Option<String>,
    /// `rollback`: how many of the last turns to drop.
    pub turns: Option<u32>,
    /// `model`: the model of the next turns (see `models`).
    pub model: Option<String>,
    /// `model`: the reasoning effort of the next turns (`low`, `medium`, `high`, ...).
    pub effort: Option<String>,
    /// `models`: hidden models too.
    pub include_hidden: Option<bool>,
}

/// `codex_thread`: the part of it the op filled in.
#[derive(Debug, Default, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadOutput {
    pub op: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// `review`, `compact`: the turn it started, when Codex said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forked: Option<Forked>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rolled_back: Option<RolledBack>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub models: Option<Vec<ModelInfo>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelChoice>,
    pub note: String,
}

fn need<T>(v: Option<T>, what: &str, op: &str) -> Result<T, ToolError> {
    v.ok_or_else(|| {
        ToolError(format!(
            "op {op} needs {what}; codex_thread takes {SIGNATURE}"
        ))
    })
}

pub async fn thread(relay: &Relay, p: ThreadParams) -> Result<Value, ToolError> {
    let session = || need(p.session_id.clone(), "sessionId", op_name(p.op));
    let mut out = ThreadOutput {
        op: op_name(p.op).into(),
        session_id: p.session_id.clone(),
        ..Default::default()
    };
    match p.op {
        ThreadOp::Review => {
            let id = session()?;
            let target = need(p.review, "review: {type: ...}", "review")?;
            let started = relay.review(&id, target).await?;
            out.turn_id = Some(started.turn_id().to_owned());
            out.note = "the review runs as a turn; codex_status with waitMs waits for its findings (its result)".into();
        }
        ThreadOp::Fork => {
            let id = session()?;
            let forked = relay.fork(&id, p.turn_id).await?;
            out.note = format!(
                "session {} is the fork; continue it with codex_say",
                forked.session_id
            );
            out.forked = Some(forked);
        }
        ThreadOp::Rollback => {
            let id = session()?;
            let n = need(p.turns, "turns (how many to drop)", "rollback")?;
            let rolled = relay.rollback(&id, n).await?;
            out.note = format!(
                "dropped {} turn(s) from the thread's history; files they changed are as they were left",
                rolled.dropped.len()
            );
            out.rolled_back = Some(rolled);
        }
        ThreadOp::Compact => {
            let id = session()?;
            relay.compact(&id).await?;
            out.note =
                "Codex compacts the history as a turn; codex_status shows when it ends".into();
        }
        ThreadOp::Models => {
            let models = relay.models(p.include_hidden == Some(true)).await?;
            out.note = format!("{} model(s); set one with op model", models.len());
            out.models = Some(models);
        }
        ThreadOp::Model => {
            let id = session()?;
            if p.model.is_none() && p.effort.is_none() {
                return Err(ToolError(format!(
                    "op model needs model or effort; codex_thread takes {SIGNATURE}"
                )));
            }
            let set = relay
                .set_model(
                    &id,
                    ModelChoice {
                        model: p.model,
                        effort: p.effort,
                    },
                )
                .await?;
            out.note = "the session's next turns run with this".into();
            out.model = Some(set);
        }
    }
    Ok(outputs::value(out))
}

fn op_name(op: ThreadOp) -> &'static str {
    match op {
        ThreadOp::Review => "review",
        ThreadOp::Fork => "fork",
        ThreadOp::Rollback => "rollback",
        ThreadOp::Compact => "compact",
        ThreadOp::Models => "models",
        ThreadOp::Model => "model",
    }
}
