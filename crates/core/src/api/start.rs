//! What a session starts with as the fronts take it, checked once here: the directory and
//! images exist, the shortcuts agree, the prompt says something, the output schema is a schema.

use std::path::{Path, PathBuf};

use codex_relay_protocol::v2::{ApprovalPolicy, SandboxMode};
use serde_json::{Map, Value};

use crate::relay::CreateOptions;

/// A start request from any front, before it is checked ([`StartRequest::options`]).
#[derive(Debug, Clone, Default)]
pub struct StartRequest {
    /// The first message; `None` starts the session idle.
    pub prompt: Option<String>,
    /// Directory the session works in: absolute, or relative to the relay's directory.
    pub cwd: Option<String>,
    pub model: Option<String>,
    /// Reasoning effort of its turns (`low`, `medium`, `high`, ...).
    pub effort: Option<String>,
    pub approval_policy: Option<ApprovalPolicy>,
    pub sandbox: Option<SandboxMode>,
    /// Approval policy `on-request` and sandbox `workspace-write`, unless given.
    pub full_auto: bool,
    /// Approval policy `never` and sandbox `danger-full-access`, unless given.
    pub bypass_approvals_and_sandbox: bool,
    pub profile: Option<String>,
    /// Codex config overrides, as given (see [`read_config_strings`]).
    pub config: Option<Map<String, Value>>,
    pub base_instructions: Option<String>,
    pub developer_instructions: Option<String>,
    /// Local paths (relative to `cwd`) or http(s)/data URLs.
    pub images: Vec<String>,
    /// JSON Schema the first turn's final message must follow.
    pub output_schema: Option<Value>,
    pub plan_mode: bool,
    /// Labels approval rules can match on (`labels = ["ci"]`).
    pub labels: Vec<String>,
    /// Start it on the Codex daemon the relay is attached to ([`CreateOptions::on_daemon`]).
    pub on_daemon: bool,
    /// A git worktree for the session (`repo` defaults to `cwd`; relative to the relay's
    /// directory otherwise); its directory becomes the session's.
    pub worktree: Option<crate::config::WorktreeSpec>,
}

/// Why a start request (or a message's images) cannot be taken. The text names fields as the
/// MCP and HTTP fronts do; a front with other names matches on the variant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidStart {
    #[error(
        "workingDirectory {given:?} is not a directory here ({}); pass an existing directory",
        resolved.display()
    )]
    NotADirectory { given: String, resolved: PathBuf },
    #[error(
        "image {given:?} is not a file here ({}); pass an existing file or an http(s)/data URL",
        resolved.display()
    )]
    NotAFile { given: String, resolved: PathBuf },
    #[error("fullAuto and dangerouslyBypassApprovalsAndSandbox contradict each other; pass one")]
    Contradiction,
    #[error(
        "outputSchema must be a JSON Schema object, e.g. {{\"type\": \"object\", \"properties\": {{...}}}}"
    )]
    SchemaNotAnObject,
    #[error("prompt is empty; say what Codex should do")]
    EmptyPrompt,
}

impl StartRequest {
    /// The engine options, or the first thing wrong with the request.
    pub fn options(self) -> Result<CreateOptions, InvalidStart> {
        if self.prompt.as_deref().is_some_and(|p| p.trim().is_empty()) {
            return Err(InvalidStart::EmptyPrompt);
        }
        let cwd = match &self.cwd {
            Some(dir) => {
                let abs = absolute(dir, None);
                if !abs.is_dir() {
                    return Err(InvalidStart::NotADirectory {
                        given: dir.clone(),
                        resolved: abs,
                    });
                }
                Some(abs)
            }
            None => None,
        };
        let (mut approval_policy, mut sandbox) = (self.approval_policy, self.sandbox);
        if self.bypass_approvals_and_sandbox {
            if self.full_auto {
                return Err(InvalidStart::Contradiction);
            }
            approval_policy = approval_policy.or(Some(ApprovalPolicy::Never));
            sandbox = sandbox.or(Some(SandboxMode::DangerFullAccess));
        } else if self.full_auto {
            approval_policy = approval_policy.or(Some(ApprovalPolicy::OnRequest));
            sandbox = sandbox.or(Some(SandboxMode::WorkspaceWrite));
        }
        if self.output_schema.as_ref().is_some_and(|s| !s.is_object()) {
            return Err(InvalidStart::SchemaNotAnObject);
        }
        let images = images(self.images, cwd.as_deref())?;
        Ok(CreateOptions {
            prompt: self.prompt,
            images,
            cwd: cwd.as_ref().map(|c| c.display().to_string()),
            model: self.model,
            effort: self.effort,
            approval_policy,
            sandbox,
            base_instructions: self.base_instructions,
            developer_instructions: self.developer_instructions,
            config: self.config,
            profile: self.profile,
            output_schema: self.output_schema,
            plan_mode: self.plan_mode,
            labels: self.labels,
            on_daemon: self.on_daemon,
            worktree: self.worktree.map(|mut w| {
                w.repo = match (w.repo.trim(), &cwd) {
                    ("", Some(dir)) => dir.display().to_string(),
                    ("", None) => absolute(".", None).display().to_string(),
                    (repo, _) => absolute(repo, None).display().to_string(),
                };
                // Filled in by the relay when it makes the worktree, never by a caller.
                w.repo_root = None;
                w.path = None;
                w.base_commit = None;
                w
            }),
            ..Default::default()
        })
    }
}

/// Images for Codex: URLs pass as they are; local files (relative to `cwd`) must exist and
/// become absolute paths.
pub fn images(list: Vec<String>, cwd: Option<&Path>) -> Result<Vec<String>, InvalidStart> {
    list.into_iter()
        .map(|i| {
            if ["http://", "https://", "data:"]
                .iter()
                .any(|p| i.starts_with(p))
            {
                return Ok(i);
            }
            let path = absolute(&i, cwd);
            if !path.is_file() {
                return Err(InvalidStart::NotAFile {
                    given: i,
                    resolved: path,
                });
            }
            Ok(path.display().to_string())
        })
        .collect()
}

/// `config` values the way `codex -c` reads them: a string that reads as JSON (`true`, `42`,
/// `["a"]`) is that value; other values pass as they are.
pub fn read_config_strings(config: Map<String, Value>) -> Map<String, Value> {
    config
        .into_iter()
        .map(|(k, v)| match v {
            Value::String(s) => {
                let parsed = serde_json::from_str::<Value>(&s)
                    .ok()
                    .filter(|p| !p.is_string());
                (k, parsed.unwrap_or(Value::String(s)))
            }
            other => (k, other),
        })
        .collect()
}

/// A path as Codex should see it: absolute, relative ones resolved against `base` (or the
/// relay's directory).
pub fn absolute(path: &str, base: Option<&Path>) -> PathBuf {
    let p = Path::new(path);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        match base {
            Some(b) => b.join(p),
            None => std::env::current_dir().unwrap_or_default().join(p),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn prompt(p: &str) -> StartRequest {
        StartRequest {
            prompt: Some(p.into()),
            ..Default::default()
        }
    }

    #[test]
    fn shortcuts_fill_what_is_not_given_and_refuse_each_other() {
        let o = StartRequest {
            full_auto: true,
            sandbox: Some(SandboxMode::ReadOnly),
            ..prompt("go")
        }
        .options()
        .unwrap();
        assert_eq!(o.approval_policy, Some(ApprovalPolicy::OnRequest));
        assert_eq!(o.sandbox, Some(SandboxMode::ReadOnly), "explicit wins");
        let o = StartRequest {
            bypass_approvals_and_sandbox: true,
            ..prompt("go")
        }
        .options()
        .unwrap();
        assert_eq!(o.approval_policy, Some(ApprovalPolicy::Never));
        assert_eq!(o.sandbox, Some(SandboxMode::DangerFullAccess));
        let both = StartRequest {
            full_auto: true,
            bypass_approvals_and_sandbox: true,
            ..prompt("go")
        };
        assert_eq!(both.options().unwrap_err(), InvalidStart::Contradiction);
    }

    #[test]
    fn an_empty_prompt_a_missing_directory_or_image_and_a_non_object_schema_are_refused() {
        assert_eq!(
            prompt("  ").options().unwrap_err(),
            InvalidStart::EmptyPrompt
        );
        let idle = StartRequest::default().options().unwrap();
        assert_eq!(idle.prompt, None, "no prompt starts idle");
        let e = StartRequest {
            cwd: Some("/no/such/dir".into()),
            ..prompt("go")
        }
        .options()
        .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("workingDirectory \"/no/such/dir\""),
            "{e}"
        );
        let dir = std::env::temp_dir();
        let e = StartRequest {
            cwd: Some(dir.display().to_string()),
            images: vec!["missing.png".into(), "https://x/y.png".into()],
            ..prompt("go")
        }
        .options()
        .unwrap_err();
        assert_eq!(
            e,
            InvalidStart::NotAFile {
                given: "missing.png".into(),
                resolved: dir.join("missing.png"),
            },
            "a relative image is looked up in cwd"
        );
        let e = StartRequest {
            output_schema: Some(json!("string")),
            ..prompt("go")
        }
        .options()
        .unwrap_err();
        assert_eq!(e, InvalidStart::SchemaNotAnObject);
    }

    #[test]
    fn urls_pass_and_config_strings_read_as_json() {
        let urls = vec![
            "data:image/png;base64,AA".to_owned(),
            "http://h/i.png".into(),
        ];
        assert_eq!(images(urls.clone(), None).unwrap(), urls);
        let c = read_config_strings(
            json!({"a": "true", "b": "42", "c": "low", "d": "\"q\"", "e": [1]})
                .as_object()
                .unwrap()
                .clone(),
        );
        assert_eq!(
            Value::Object(c),
            json!({"a": true, "b": 42, "c": "low", "d": "\"q\"", "e": [1]})
        );
    }
}
