//! The legacy tools' arguments (kebab-case for `codex`, `threadId`/`conversationId` for
//! `codex-reply`) and how they become engine options. Bad arguments give a message that says
//! what the tool takes.

use codex_relay_core::CreateOptions;
use codex_relay_core::api::{InvalidStart, StartRequest};
use codex_relay_protocol::v2::{ApprovalPolicy, SandboxMode};
use serde::Deserialize;
use serde_json::{Map, Value};

/// `codex` arguments.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct CodexParams {
    pub prompt: String,
    pub approval_policy: Option<String>,
    pub sandbox: Option<String>,
    pub cwd: Option<String>,
    pub model: Option<String>,
    pub profile: Option<String>,
    pub config: Option<Map<String, Value>>,
    pub base_instructions: Option<String>,
    pub developer_instructions: Option<String>,
    pub compact_prompt: Option<String>,
    /// Accepted and ignored: older clients (reference 000) still send it; Codex 0.98 already
    /// ignored it.
    #[serde(default)]
    pub include_plan_tool: Option<bool>,
}

/// `codex-reply` arguments.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplyParams {
    pub prompt: String,
    pub thread_id: Option<String>,
    pub conversation_id: Option<String>,
    /// Sent by some clients (reference 000) beside conversationId; used when neither
    /// threadId nor conversationId is given.
    pub session_id: Option<String>,
}

pub const CODEX_SIGNATURE: &str = "{prompt, approval-policy?, sandbox?, cwd?, model?, profile?, config?, base-instructions?, developer-instructions?, compact-prompt?}";
pub const REPLY_SIGNATURE: &str = "{prompt, threadId (or conversationId)}";

/// Parses `args` for a tool; the error says what the tool takes.
pub fn parse<P: serde::de::DeserializeOwned>(
    tool: &str,
    signature: &str,
    args: Option<Map<String, Value>>,
) -> Result<P, String> {
    serde_json::from_value(Value::Object(args.unwrap_or_default()))
        .map_err(|e| format!("invalid arguments for {tool}: {e}; it takes {signature}"))
}

fn approval_policy(s: &str) -> Result<ApprovalPolicy, String> {
    Ok(match s {
        "untrusted" => ApprovalPolicy::Untrusted,
        "on-failure" => ApprovalPolicy::OnFailure,
        "on-request" => ApprovalPolicy::OnRequest,
        "never" => ApprovalPolicy::Never,
        other => {
            return Err(format!(
                "approval-policy {other:?} is not one of untrusted, on-failure, on-request, never"
            ));
        }
    })
}

fn sandbox(s: &str) -> Result<SandboxMode, String> {
    Ok(match s {
        "read-only" => SandboxMode::ReadOnly,
        "workspace-write" => SandboxMode::WorkspaceWrite,
        "danger-full-access" => SandboxMode::DangerFullAccess,
        other => {
            return Err(format!(
                "sandbox {other:?} is not one of read-only, workspace-write, danger-full-access"
            ));
        }
    })
}

impl CodexParams {
    /// Engine options for a session that starts idle (the prompt is said after the client was
    /// told the session id).
    pub fn create_options(&self) -> Result<CreateOptions, String> {
        if self.prompt.trim().is_empty() {
            return Err(InvalidStart::EmptyPrompt.to_string());
        }
        let mut config = self.config.clone();
        if let Some(prompt) = &self.compact_prompt {
            config
                .get_or_insert_with(Map::new)
                .insert("compact_prompt".into(), Value::String(prompt.clone()));
        }
        StartRequest {
            prompt: None,
            cwd: self.cwd.clone(),
            model: self.model.clone(),
            approval_policy: self
                .approval_policy
                .as_deref()
                .map(approval_policy)
                .transpose()?,
            sandbox: self.sandbox.as_deref().map(sandbox).transpose()?,
            base_instructions: self.base_instructions.clone(),
            developer_instructions: self.developer_instructions.clone(),
            config,
            profile: self.profile.clone(),
            ..Default::default()
        }
        .options()
        .map_err(|e| match e {
            // This contract calls the directory `cwd`.
            InvalidStart::NotADirectory { given, resolved } => format!(
                "cwd {given:?} is not a directory here ({}); pass an existing directory",
                resolved.display()
            ),
            other => other.to_string(),
        })
    }
}

impl ReplyParams {
    /// The thread to continue: threadId, else conversationId, else sessionId.
    pub fn thread(&self) -> Result<String, String> {
        let id = [&self.thread_id, &self.conversation_id, &self.session_id]
            .into_iter()
            .flatten()
            .map(|s| s.trim())
            .find(|s| !s.is_empty());
        match id {
            Some(id) => Ok(id.to_owned()),
            None => Err(format!(
                "codex-reply needs the thread to continue: it takes {REPLY_SIGNATURE}"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn codex(v: Value) -> Result<CreateOptions, String> {
        let args = v.as_object().cloned();
        parse::<CodexParams>("codex", CODEX_SIGNATURE, args)?.create_options()
    }

    fn refused(v: Value) -> String {
        match codex(v) {
            Err(e) => e,
            Ok(_) => panic!("accepted"),
        }
    }

    #[test]
    fn kebab_case_options_become_engine_options() {
        let o = codex(
            json!({"prompt": "p", "approval-policy": "untrusted", "sandbox": "workspace-write",
            "base-instructions": "b", "developer-instructions": "d", "compact-prompt": "c",
            "config": {"model_reasoning_effort": "low"}, "include-plan-tool": true}),
        )
        .unwrap();
        assert_eq!(o.approval_policy, Some(ApprovalPolicy::Untrusted));
        assert_eq!(o.sandbox, Some(SandboxMode::WorkspaceWrite));
        assert_eq!(o.base_instructions.as_deref(), Some("b"));
        assert_eq!(o.developer_instructions.as_deref(), Some("d"));
        assert_eq!(
            Value::Object(o.config.unwrap()),
            json!({"model_reasoning_effort": "low", "compact_prompt": "c"})
        );
        assert!(
            o.prompt.is_none(),
            "the prompt is said after session_configured"
        );
    }

    #[test]
    fn bad_arguments_say_what_the_tool_takes() {
        let e = refused(json!({"prompt": "p", "sandbox": "yolo"}));
        assert!(e.contains("read-only"), "{e}");
        let e = refused(json!({"approval-policy": "never"}));
        assert!(e.contains("prompt"), "{e}");
        let e = refused(json!({"prompt": "p", "cwd": "/no/such/dir"}));
        assert!(e.contains("not a directory"), "{e}");
    }

    #[test]
    fn replies_find_their_thread_by_either_name() {
        let r = |v: Value| {
            parse::<ReplyParams>("codex-reply", REPLY_SIGNATURE, v.as_object().cloned())
                .unwrap()
                .thread()
        };
        assert_eq!(r(json!({"prompt": "p", "threadId": "t1"})).unwrap(), "t1");
        assert_eq!(
            r(json!({"prompt": "p", "conversationId": "c1"})).unwrap(),
            "c1"
        );
        assert_eq!(
            r(json!({"prompt": "p", "sessionId": "s1", "conversationId": "c1"})).unwrap(),
            "c1"
        );
        assert!(r(json!({"prompt": "p"})).unwrap_err().contains("threadId"));
    }
}
