//! The tools' parameters (camelCase on the wire), their JSON schemas, and lenient parsing with
//! errors that say what each tool takes.

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

/// `approvalPolicy`: when Codex stops to ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalPolicyParam {
    Untrusted,
    OnFailure,
    OnRequest,
    Never,
}

/// `sandbox`: what model-generated commands may touch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxParam {
    ReadOnly,
    WorkspaceWrite,
    DangerFullAccess,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StartParams {
    /// The task for Codex (the first message of the session).
    pub prompt: String,
    /// Directory the session works in (absolute, or relative to the relay's own directory).
    /// Default: Codex's default (the relay's directory).
    pub working_directory: Option<String>,
    /// Model override, e.g. "gpt-5-codex" (codex_thread op models lists them). Default:
    /// Codex's configured model.
    pub model: Option<String>,
    /// Reasoning effort of the session's turns: "low", "medium", "high", ... (what the model
    /// takes; see codex_thread op models). Default: Codex's configured effort.
    pub effort: Option<String>,
    /// When Codex stops to ask for approval. "on-failure" only exists before Codex 0.153 and
    /// becomes "on-request" on newer versions. Default: Codex's configured policy.
    pub approval_policy: Option<ApprovalPolicyParam>,
    /// Sandbox for model-generated commands. Default: Codex's configured sandbox.
    pub sandbox: Option<SandboxParam>,
    /// Shortcut for approvalPolicy "on-request" + sandbox "workspace-write" (explicit
    /// approvalPolicy / sandbox win).
    pub full_auto: Option<bool>,
    /// A Codex profile for this session: the settings of `$CODEX_HOME/<profile>.config.toml`
    /// (as `codex --profile` reads them), or `[profiles.<profile>]` on older Codex.
    pub profile: Option<String>,
    /// Codex config overrides, like `codex -c key=value`, e.g.
    /// {"model_reasoning_effort": "low"}. String values that read as JSON (true, 42, ["a"])
    /// are passed as that value, as `-c` does with TOML.
    pub config: Option<Map<String, Value>>,
    /// Replaces Codex's base instructions.
    pub base_instructions: Option<String>,
    /// Images to attach to the prompt: local paths (relative ones are resolved against
    /// workingDirectory) or http(s)/data URLs.
    pub images: Option<Vec<String>>,
    /// Accepted for compatibility with `codex exec`; the app-server Codex that codex-relay
    /// drives has no git-repository check, so it changes nothing.
    pub skip_git_repo_check: Option<bool>,
    /// No approvals and no sandbox (approvalPolicy "never" + sandbox "danger-full-access").
    /// Only for isolated environments.
    pub dangerously_bypass_approvals_and_sandbox: Option<bool>,
    /// JSON Schema the first turn's final message must follow; codex_status then returns the
    /// parsed JSON as `result`.
    pub output_schema: Option<Value>,
    /// Every turn of this session is interrupted this many seconds after it started
    /// (codex_say may set its own). Default: the relay's (`--turn-deadline`), if any.
    pub deadline_seconds: Option<f64>,
    /// Idle watchdog: a turn with no output (items, text, command output) for this many
    /// seconds is interrupted; waiting for an approval does not count. Default: the relay's
    /// (`--idle-timeout`), if any.
    pub idle_seconds: Option<f64>,
    /// The session's budget: {inputTokens?, cachedInputTokens?, outputTokens?,
    /// reasoningOutputTokens?, totalTokens?, turns?, wallSeconds?, costUsd?}, summed over the
    /// session's life. Reaching one interrupts the turn and the session starts no new turn
    /// until codex_limits raises it.
    pub budget: Option<codex_relay_core::limits::Budget>,
    /// Work in a git worktree made for this session: {repo?, base?, branch?, keep?}. repo
    /// (default: workingDirectory) is a directory in the repository; base (default: its current
    /// branch) the branch or commit to start from; branch (default codex/<id>) the new branch;
    /// keep leaves the worktree when the session closes (else it is removed, its uncommitted
    /// work committed to its branch first). codex_worktree shows the diff, exports, merges.
    pub worktree: Option<WorktreeParam>,
}

#[derive(Debug, Default, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorktreeParam {
    pub repo: Option<String>,
    pub base: Option<String>,
    pub branch: Option<String>,
    pub keep: Option<bool>,
}

/// `codex_worktree`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorktreeParams {
    /// The session id (a session started with worktree).
    pub session_id: String,
    /// "diff" (default): the changes against the base, file list and unified diff;
    /// "export": as a branch (committed; with `to`, pushed to that repository, as `name`) or,
    /// with as: "patch", one patch; "merge": into `into` (default: the base branch).
    pub action: Option<String>,
    /// For export: "branch" (default) or "patch".
    #[serde(rename = "as")]
    pub export_as: Option<String>,
    /// For a branch export: an absolute path to a repository or an https/ssh URL to push to.
    pub to: Option<String>,
    /// For a branch export with `to`: the branch name there (default: the worktree's branch).
    pub name: Option<String>,
    /// For merge: the branch to merge into (default: the base the worktree started from).
    pub into: Option<String>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SayParams {
    /// The session id (a Codex thread id; any thread from codex_list works).
    pub session_id: String,
    /// The message. Starts a new turn when the session is idle, or is added to the running turn.
    pub message: String,
    /// Images to attach: local paths or http(s)/data URLs.
    pub images: Option<Vec<String>>,
    /// This turn is interrupted this many seconds after it started (ignored when steering).
    pub deadline_seconds: Option<f64>,
    /// This turn's idle watchdog, in seconds (ignored when steering).
    pub idle_seconds: Option<f64>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LimitsParams {
    /// The session id.
    pub session_id: String,
    /// Budget limits to set (each one named replaces the old one; the others stay), e.g.
    /// {"totalTokens": 200000} raises a token budget the session reached.
    pub budget: Option<codex_relay_core::limits::Budget>,
    /// The deadline of the session's later turns, in seconds.
    pub deadline_seconds: Option<f64>,
    /// The idle watchdog of the session's later turns, in seconds.
    pub idle_seconds: Option<f64>,
    /// The price table of the estimated cost: US dollars per million tokens,
    /// {input, cachedInput, output}.
    pub prices: Option<codex_relay_core::limits::Prices>,
}

/// Seconds as given to a tool, as milliseconds; refused unless positive and finite.
pub fn millis(name: &str, seconds: Option<f64>) -> Result<Option<u64>, String> {
    match seconds {
        None => Ok(None),
        Some(s) if s.is_finite() && s > 0.0 && s < 1e9 => Ok(Some((s * 1000.0).ceil() as u64)),
        Some(s) => Err(format!(
            "{name} must be a positive number of seconds, not {s}"
        )),
    }
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StatusParams {
    /// The session id.
    pub session_id: String,
    /// How many recent output lines to return in recentOutput (default 50, at most 1000).
    pub output_lines: Option<u32>,
    /// Return the session's `events` (docs/EVENTS.md) with a sequence number after this one,
    /// at most 500 per call: 0 reads from the start, the previous call's nextCursor reads only
    /// what is new. Without a cursor no events are returned.
    pub cursor: Option<u64>,
    /// Wait up to this many milliseconds (at most 60000) for something new before answering:
    /// an event after `cursor` (or, without a cursor, after what this connection was last shown
    /// of the session) or a status change. Returns at once when no turn is running. Progress
    /// notifications are sent meanwhile when the request has a progressToken.
    pub wait_ms: Option<u64>,
    /// What `waitMs` waits for: "change" (default: any new event or status change) or
    /// "attention" (only until no turn is running or the session waits for an answer: the turn
    /// ended, was interrupted or failed, or an approval or question is pending), so one call
    /// covers a whole turn.
    pub until: Option<Until>,
}

/// `until` of codex_status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Until {
    #[default]
    Change,
    Attention,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RespondParams {
    /// The session id.
    pub session_id: String,
    /// The request id: pendingQuestion.id from codex_status.
    pub id: String,
    /// One answer per question. Approvals: "approve", "approve for session", "deny",
    /// "deny: <reason>" (the reason is passed to the model) or "cancel". Questions: one of the
    /// options shown. Tool calls: the tool's output (or "error: <message>").
    #[serde(deserialize_with = "one_or_many")]
    pub answers: Vec<String>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InterruptParams {
    /// The session id.
    pub session_id: String,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListParams {
    /// Only sessions whose working directory is this one. Default: all.
    pub working_directory: Option<String>,
    /// At most this many sessions, most recent first (default 50, at most 500).
    pub limit: Option<u32>,
}

/// A string or an array of strings (a single answer given without brackets).
fn one_or_many<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    match OneOrMany::deserialize(d) {
        Ok(OneOrMany::One(s)) => Ok(vec![s]),
        Ok(OneOrMany::Many(v)) => Ok(v),
        Err(_) => Err(serde::de::Error::custom(
            "answers must be an array of strings, e.g. [\"approve\"] or [\"deny: too risky\"]",
        )),
    }
}

/// Parses a tool's arguments; the error says what went wrong and what the tool takes.
pub fn parse<P: DeserializeOwned>(
    tool: &str,
    signature: &str,
    arguments: Option<Map<String, Value>>,
) -> Result<P, String> {
    serde_json::from_value(Value::Object(arguments.unwrap_or_default()))
        .map_err(|e| format!("{tool}: invalid arguments: {e}. {tool} takes {signature}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(v: Value) -> Option<Map<String, Value>> {
        v.as_object().cloned()
    }

    #[test]
    fn errors_name_the_problem_and_the_signature() {
        let err =
            parse::<StatusParams>("codex_status", "{sessionId}", args(json!({"sessionId": 5})))
                .unwrap_err();
        assert!(
            err.contains("invalid type: integer `5`, expected a string"),
            "{err}"
        );
        assert!(err.contains("codex_status takes {sessionId}"), "{err}");
        let err = parse::<StatusParams>("codex_status", "{}", args(json!({}))).unwrap_err();
        assert!(err.contains("missing field `sessionId`"), "{err}");
        let err =
            parse::<ListParams>("codex_list", "{}", args(json!({"workingDir": "/x"}))).unwrap_err();
        assert!(err.contains("unknown field `workingDir`"), "{err}");
        let err = parse::<StartParams>(
            "codex_start",
            "{}",
            args(json!({"prompt": "p", "approvalPolicy": "sometimes"})),
        )
        .unwrap_err();
        assert!(err.contains("on-request"), "{err}");
    }

    #[test]
    fn a_single_answer_may_be_a_string() {
        let p: RespondParams = parse(
            "codex_respond",
            "",
            args(json!({"sessionId": "s", "id": "r", "answers": "approve"})),
        )
        .unwrap();
        assert_eq!(p.answers, vec!["approve".to_owned()]);
        let err = parse::<RespondParams>(
            "codex_respond",
            "",
            args(json!({"sessionId": "s", "id": "r", "answers": 1})),
        )
        .unwrap_err();
        assert!(err.contains("array of strings"), "{err}");
    }
}
