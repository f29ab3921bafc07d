//! A front's answer, typed (approve for a scope, deny with a reason, cancel, a question's
//! answers, an MCP form's content, a tool's output), and the reply Codex expects for each kind
//! of request. Fronts that take words (MCP's `codex_respond`, `run`'s terminal prompt) parse
//! them into an [`Answer`] themselves.

use std::collections::BTreeMap;

use codex_relay_protocol::RpcError;
use codex_relay_protocol::v2::{
    ApprovalDecision, ServerRequest, ToolCallResponse, UserInputAnswer, UserInputResponse,
};
use serde_json::{Value, json};

/// What a pending request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PendingKind {
    CommandApproval,
    FileChangeApproval,
    PermissionsApproval,
    Question,
    Elicitation,
    ToolCall,
    Other,
}

impl PendingKind {
    pub fn of(request: &ServerRequest) -> Self {
        match request {
            ServerRequest::CommandApproval(_) => PendingKind::CommandApproval,
            ServerRequest::FileChangeApproval(_) => PendingKind::FileChangeApproval,
            ServerRequest::PermissionsApproval(_) => PendingKind::PermissionsApproval,
            ServerRequest::UserInput(_) => PendingKind::Question,
            ServerRequest::McpElicitation(_) => PendingKind::Elicitation,
            ServerRequest::ToolCall(_) => PendingKind::ToolCall,
            ServerRequest::ChatgptAuthRefresh(_) | ServerRequest::Unknown { .. } => {
                PendingKind::Other
            }
        }
    }

    /// Approvals make a session `awaiting_approval`; the rest `awaiting_input`.
    pub fn is_approval(self) -> bool {
        matches!(
            self,
            PendingKind::CommandApproval
                | PendingKind::FileChangeApproval
                | PendingKind::PermissionsApproval
                | PendingKind::Elicitation
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PendingKind::CommandApproval => "command_approval",
            PendingKind::FileChangeApproval => "file_change_approval",
            PendingKind::PermissionsApproval => "permissions_approval",
            PendingKind::Question => "question",
            PendingKind::Elicitation => "elicitation",
            PendingKind::ToolCall => "tool_call",
            PendingKind::Other => "other",
        }
    }
}

/// The options every approval offers, in the words fronts show (a command approval with a prefix
/// Codex proposed also offers `approve with codex rule`: see [`crate::options`]).
pub const APPROVAL_OPTIONS: &[&str] = &["approve", "approve for session", "deny", "cancel"];

/// For how long an approval holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scope {
    /// This request only.
    Once,
    /// This and every like request of the session (Codex remembers it).
    Session,
}

/// One value of an accepted MCP elicitation form (MCP forms hold primitives only).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FormValue {
    Text(String),
    Number(f64),
    Bool(bool),
    /// A multi-select field.
    Choices(Vec<String>),
}

impl FormValue {
    fn to_json(&self) -> Value {
        match self {
            Self::Text(s) => json!(s),
            Self::Number(n) => json!(n),
            Self::Bool(b) => json!(b),
            Self::Choices(c) => json!(c),
        }
    }
}

/// A front's answer to a pending request (serialized only between instances of a cluster).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "answer", content = "value", rename_all = "kebab-case")]
pub enum Answer {
    /// Allow it (approvals; an elicitation accepted with an empty form).
    Approve { scope: Scope },
    /// Refuse it; the reason is passed to the model. For a question: decline to answer; for a
    /// tool call: a failed call whose output is the reason.
    Deny { reason: Option<String> },
    /// Refuse it and stop the turn.
    Cancel,
    /// A command approval on Codex 0.169: approve it and have Codex remember the prefix it
    /// proposed (`proposedExecpolicyAmendment`) in its own execution policy, so matching
    /// commands then run without asking — and outside the sandbox — in every session of
    /// that `CODEX_HOME`. A person's choice only; rules never send it.
    ApproveWithCodexRule,
    /// A question's answers, one per question, in order: an option label or free text.
    Answers(Vec<String>),
    /// An MCP elicitation accepted with this form content.
    Form(BTreeMap<String, FormValue>),
    /// A dynamic tool's result.
    ToolOutput { success: bool, text: String },
    /// The JSON result for a request kind codex-relay does not know (passed to Codex as is).
    Raw(String),
}

impl Answer {
    pub fn approve() -> Self {
        Self::Approve { scope: Scope::Once }
    }

    pub fn deny(reason: impl Into<String>) -> Self {
        let reason = reason.into();
        Self::Deny {
            reason: Some(reason.trim().to_owned()).filter(|r| !r.is_empty()),
        }
    }

    /// An accepted MCP form from its JSON content (primitives, or a list of strings for a
    /// multi-select field); `Err` names a value a form cannot hold.
    pub fn form(content: serde_json::Map<String, Value>) -> Result<Self, String> {
        let mut out = BTreeMap::new();
        for (k, v) in content {
            let value = match v {
                Value::String(s) => FormValue::Text(s),
                Value::Bool(b) => FormValue::Bool(b),
                Value::Number(n) => FormValue::Number(n.as_f64().unwrap_or_default()),
                Value::Array(items) => FormValue::Choices(
                    items
                        .into_iter()
                        .map(|i| match i {
                            Value::String(s) => Ok(s),
                            other => Err(format!("{k}: a list holds strings only, not {other}")),
                        })
                        .collect::<Result<_, _>>()?,
                ),
                other => {
                    return Err(format!(
                        "{k}: a form value is text, a number, a boolean or a list of strings, not {other}"
                    ));
                }
            };
            out.insert(k, value);
        }
        Ok(Self::Form(out))
    }
}

/// How a request was decided; serialized as the words docs/EVENTS.md lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Approve,
    ApproveForSession,
    /// Approved, and Codex remembers the command's prefix in its execution policy.
    ApproveWithCodexRule,
    Deny,
    Cancel,
    /// A question answered, a form filled, a tool's output given, JSON for an unknown request.
    Answer,
    /// A tool call answered with an error, or a request failed closed with an error.
    Error,
    /// A decision word this version does not know (from a newer relay's store), kept.
    Other(String),
}

impl Decision {
    pub fn parse(s: &str) -> Self {
        match s {
            "approve" => Self::Approve,
            "approve for session" => Self::ApproveForSession,
            "approve with codex rule" => Self::ApproveWithCodexRule,
            "deny" => Self::Deny,
            "cancel" => Self::Cancel,
            "answer" => Self::Answer,
            "error" => Self::Error,
            other => Self::Other(other.to_owned()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            Self::Approve => "approve",
            Self::ApproveForSession => "approve for session",
            Self::ApproveWithCodexRule => "approve with codex rule",
            Self::Deny => "deny",
            Self::Cancel => "cancel",
            Self::Answer => "answer",
            Self::Error => "error",
            Self::Other(s) => s,
        }
    }
}

/// A reply ready to send to Codex.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// What goes back to Codex.
    pub result: Result<Value, RpcError>,
    pub decision: Decision,
    /// The reason given with a denial; it is passed on to the model.
    pub reason: Option<String>,
}

fn ok(v: Value, decision: Decision) -> Reply {
    Reply {
        result: Ok(v),
        decision,
        reason: None,
    }
}

const APPROVAL_HELP: &str = "this request takes an approval: approve (once or for the session), deny (with a reason) or cancel";

/// The reply for `answer` to `request`. `Err` says why the answer does not fit (nothing was
/// sent).
pub fn reply(request: &ServerRequest, answer: Answer) -> Result<Reply, String> {
    match request {
        ServerRequest::CommandApproval(p) if answer == Answer::ApproveWithCodexRule => {
            let Some(prefix) = p
                .proposed_execpolicy_amendment
                .as_ref()
                .filter(|a| !a.is_empty())
            else {
                return Err("Codex proposed no rule of its own for this command (it does so on 0.169 for some commands); approve it once or for the session".into());
            };
            Ok(ok(
                json!({"decision": {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": prefix}}}),
                Decision::ApproveWithCodexRule,
            ))
        }
        ServerRequest::CommandApproval(_) | ServerRequest::FileChangeApproval(_) => {
            let (decision, word, reason) = match answer {
                Answer::Approve { scope: Scope::Once } => {
                    (ApprovalDecision::Accept, Decision::Approve, None)
                }
                Answer::Approve {
                    scope: Scope::Session,
                } => (
                    ApprovalDecision::AcceptForSession,
                    Decision::ApproveForSession,
                    None,
                ),
                Answer::Deny { reason } => (ApprovalDecision::Decline, Decision::Deny, reason),
                Answer::Cancel => (ApprovalDecision::Cancel, Decision::Cancel, None),
                _ => return Err(APPROVAL_HELP.into()),
            };
            Ok(Reply {
                result: Ok(decision.to_response()),
                decision: word,
                reason,
            })
        }
        ServerRequest::PermissionsApproval(p) => Ok(match answer {
            Answer::Approve { scope } => {
                let (scope, word) = match scope {
                    Scope::Once => ("turn", Decision::Approve),
                    Scope::Session => ("session", Decision::ApproveForSession),
                };
                ok(json!({"permissions": p.permissions, "scope": scope}), word)
            }
            Answer::Deny { reason } => Reply {
                reason,
                ..ok(json!({"permissions": {}, "scope": "turn"}), Decision::Deny)
            },
            Answer::Cancel => ok(
                json!({"permissions": {}, "scope": "turn"}),
                Decision::Cancel,
            ),
            _ => return Err(APPROVAL_HELP.into()),
        }),
        ServerRequest::McpElicitation(_) => Ok(match answer {
            Answer::Approve { .. } => ok(
                json!({"action": "accept", "content": {}}),
                Decision::Approve,
            ),
            Answer::Form(content) => {
                let content: serde_json::Map<String, Value> = content
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_json()))
                    .collect();
                ok(
                    json!({"action": "accept", "content": content}),
                    Decision::Answer,
                )
            }
            Answer::Deny { reason } => Reply {
                reason,
                ..ok(
                    json!({"action": "decline", "content": null}),
                    Decision::Deny,
                )
            },
            Answer::Cancel => ok(
                json!({"action": "cancel", "content": null}),
                Decision::Cancel,
            ),
            _ => {
                return Err(
                    "an MCP server's form takes approve, the form's content, deny or cancel".into(),
                );
            }
        }),
        ServerRequest::UserInput(q) => match answer {
            Answer::Deny { .. } | Answer::Cancel => Ok(Reply {
                result: Err(RpcError::new(
                    RpcError::INTERNAL_ERROR,
                    "the user declined to answer",
                )),
                decision: Decision::Deny,
                reason: None,
            }),
            Answer::Answers(answers) => question_reply(q, &answers),
            _ => {
                Err("a question takes one answer per question (an option or text), or deny".into())
            }
        },
        ServerRequest::ToolCall(_) => {
            let (success, text) = match answer {
                Answer::ToolOutput { success, text } => (success, text),
                Answer::Deny { reason } => (
                    false,
                    reason.unwrap_or_else(|| "the user refused this tool call".into()),
                ),
                Answer::Cancel => (false, "the user cancelled this tool call".into()),
                _ => return Err("a tool call takes the tool's output (or an error)".into()),
            };
            let body =
                serde_json::to_value(ToolCallResponse::text(success, text)).expect("serializable");
            Ok(ok(
                body,
                if success {
                    Decision::Answer
                } else {
                    Decision::Error
                },
            ))
        }
        ServerRequest::ChatgptAuthRefresh(_) | ServerRequest::Unknown { .. } => match answer {
            Answer::Raw(json) => match serde_json::from_str::<Value>(&json) {
                Ok(v) => Ok(ok(v, Decision::Answer)),
                Err(e) => Err(format!("this request needs a JSON answer ({e})")),
            },
            Answer::Deny { .. } | Answer::Cancel => Ok(Reply {
                result: request.fail_closed("declined"),
                decision: Decision::Deny,
                reason: None,
            }),
            _ => Err("this request needs a JSON answer".into()),
        },
    }
}

fn question_reply(
    q: &codex_relay_protocol::v2::UserInputParams,
    answers: &[String],
) -> Result<Reply, String> {
    if answers.len() != q.questions.len() {
        return Err(format!(
            "{} question(s) were asked and {} answer(s) given",
            q.questions.len(),
            answers.len()
        ));
    }
    let mut response = UserInputResponse::default();
    for (question, answer) in q.questions.iter().zip(answers) {
        let answer = answer.trim();
        let chosen = match &question.options {
            Some(options) if !options.is_empty() => {
                match options
                    .iter()
                    .find(|o| o.label.eq_ignore_ascii_case(answer))
                {
                    Some(o) => o.label.clone(),
                    None if question.is_other => answer.to_owned(),
                    None => {
                        let labels: Vec<&str> = options.iter().map(|o| o.label.as_str()).collect();
                        return Err(format!(
                            "{answer:?} is not an option of {:?}; choose one of: {}",
                            question.question,
                            labels.join(", ")
                        ));
                    }
                }
            }
            _ => answer.to_owned(),
        };
        response.answers.insert(
            question.id.clone(),
            UserInputAnswer {
                answers: vec![chosen],
            },
        );
    }
    Ok(ok(
        serde_json::to_value(response).expect("serializable"),
        Decision::Answer,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn approval() -> ServerRequest {
        ServerRequest::parse(
            ServerRequest::COMMAND_APPROVAL,
            json!({"threadId": "t", "turnId": "u", "itemId": "i", "command": "rm -rf build"}),
        )
    }

    #[test]
    fn approvals_take_approvals() {
        let a = |answer| reply(&approval(), answer);
        assert_eq!(
            a(Answer::approve()).unwrap().result.unwrap(),
            json!({"decision": "accept"})
        );
        let s = a(Answer::Approve {
            scope: Scope::Session,
        })
        .unwrap();
        assert_eq!(s.result.unwrap(), json!({"decision": "acceptForSession"}));
        assert_eq!(s.decision, Decision::ApproveForSession);
        let d = a(Answer::deny("not in prod")).unwrap();
        assert_eq!(d.result.unwrap(), json!({"decision": "decline"}));
        assert_eq!(d.reason.as_deref(), Some("not in prod"));
        assert_eq!(a(Answer::deny("  ")).unwrap().reason, None);
        assert_eq!(
            a(Answer::Cancel).unwrap().result.unwrap(),
            json!({"decision": "cancel"})
        );
        let err = a(Answer::Answers(vec!["yes".into()])).unwrap_err();
        assert!(err.contains("approve") && err.contains("deny"), "{err}");
    }

    #[test]
    fn question_answers_must_match_an_option() {
        let q = ServerRequest::parse(
            ServerRequest::USER_INPUT,
            json!({"threadId": "t", "turnId": "u", "itemId": "i", "questions": [
                {"id": "env", "header": "Env", "question": "Which environment?",
                 "options": [{"label": "staging", "description": ""}, {"label": "prod", "description": ""}]}
            ]}),
        );
        let r = reply(&q, Answer::Answers(vec!["Staging".into()])).unwrap();
        assert_eq!(
            r.result.unwrap(),
            json!({"answers": {"env": {"answers": ["staging"]}}})
        );
        let err = reply(&q, Answer::Answers(vec!["moon".into()])).unwrap_err();
        assert!(err.contains("staging, prod"), "{err}");
        assert!(
            reply(&q, Answer::Deny { reason: None })
                .unwrap()
                .result
                .is_err()
        );
        assert!(reply(&q, Answer::Answers(vec!["prod".into(), "extra".into()])).is_err());
        assert!(reply(&q, Answer::approve()).is_err());
    }

    #[test]
    fn tool_calls_take_their_output_and_forms_their_content() {
        let t = ServerRequest::parse(
            ServerRequest::TOOL_CALL,
            json!({"threadId": "t", "turnId": "u", "callId": "c", "tool": "lookup", "arguments": {}}),
        );
        let r = reply(
            &t,
            Answer::ToolOutput {
                success: true,
                text: "42 rows".into(),
            },
        )
        .unwrap();
        assert_eq!(
            r.result.unwrap(),
            json!({"success": true, "contentItems": [{"type": "inputText", "text": "42 rows"}]})
        );
        let e = reply(&t, Answer::deny("table missing")).unwrap();
        assert_eq!(e.decision, Decision::Error);
        assert_eq!(
            e.result.unwrap()["contentItems"][0]["text"],
            "table missing"
        );
        let el = ServerRequest::parse(
            ServerRequest::MCP_ELICITATION,
            json!({"threadId": "t", "turnId": "u", "serverName": "s", "message": "Name?"}),
        );
        let mut form = BTreeMap::new();
        form.insert("name".to_owned(), FormValue::Text("Ada".into()));
        form.insert("age".to_owned(), FormValue::Number(36.0));
        let r = reply(&el, Answer::Form(form)).unwrap();
        assert_eq!(
            r.result.unwrap(),
            json!({"action": "accept", "content": {"name": "Ada", "age": 36.0}})
        );
        assert!(
            reply(
                &el,
                Answer::ToolOutput {
                    success: true,
                    text: "x".into()
                }
            )
            .is_err()
        );
    }

    #[test]
    fn decisions_keep_their_words() {
        for word in [
            "approve",
            "approve for session",
            "approve with codex rule",
            "deny",
            "cancel",
            "answer",
            "error",
            "maybe",
        ] {
            assert_eq!(Decision::parse(word).as_str(), word);
        }
    }
}
