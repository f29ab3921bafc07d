//! Turning a front's answer (`approve`, `deny: not in prod`, an option label, tool output) into
//! the reply Codex expects for that kind of request.

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

/// The options an approval offers, in the words fronts show.
pub const APPROVAL_OPTIONS: &[&str] = &["approve", "approve for session", "deny", "cancel"];

/// A parsed answer, ready to send.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// What goes back to Codex.
    pub result: Result<Value, RpcError>,
    /// One word for logs and events: `approve`, `deny`, `answer`, ...
    pub decision: String,
    /// The reason given with a denial; it is passed on to the model.
    pub reason: Option<String>,
}

enum Verdict {
    Approve,
    ApproveForSession,
    Deny(Option<String>),
    Cancel,
}

fn verdict(answer: &str) -> Option<Verdict> {
    let a = answer.trim();
    let (head, rest) = match a.split_once(':') {
        Some((h, r)) => (
            h.trim(),
            Some(r.trim()).filter(|r| !r.is_empty()).map(str::to_owned),
        ),
        None => (a, None),
    };
    let head = head.to_ascii_lowercase();
    match head.as_str() {
        "approve" | "approved" | "accept" | "allow" | "yes" | "y" if rest.is_none() => {
            Some(Verdict::Approve)
        }
        "approve for session"
        | "accept for session"
        | "acceptforsession"
        | "always"
        | "approved_for_session"
            if rest.is_none() =>
        {
            Some(Verdict::ApproveForSession)
        }
        "deny" | "denied" | "decline" | "reject" | "no" | "n" => Some(Verdict::Deny(rest)),
        "cancel" | "abort" | "stop" if rest.is_none() => Some(Verdict::Cancel),
        _ => None,
    }
}

const APPROVAL_HELP: &str =
    "answer with approve, approve for session, deny, deny: <reason>, or cancel";

/// Parses `answers` for `request`. `Err` is a message for the front (nothing was sent).
pub fn parse(request: &ServerRequest, answers: &[String]) -> Result<Reply, String> {
    let first = answers.first().map(String::as_str).unwrap_or("").trim();
    if first.is_empty() && !matches!(request, ServerRequest::UserInput(_)) {
        return Err("the answer is empty".into());
    }
    match request {
        ServerRequest::CommandApproval(_) | ServerRequest::FileChangeApproval(_) => {
            let v = verdict(first)
                .ok_or_else(|| format!("{first:?} is not an approval answer; {APPROVAL_HELP}"))?;
            let (decision, word, reason) = match v {
                Verdict::Approve => (ApprovalDecision::Accept, "approve", None),
                Verdict::ApproveForSession => (
                    ApprovalDecision::AcceptForSession,
                    "approve for session",
                    None,
                ),
                Verdict::Deny(r) => (ApprovalDecision::Decline, "deny", r),
                Verdict::Cancel => (ApprovalDecision::Cancel, "cancel", None),
            };
            Ok(Reply {
                result: Ok(decision.to_response()),
                decision: word.into(),
                reason,
            })
        }
        ServerRequest::PermissionsApproval(p) => {
            let v = verdict(first)
                .ok_or_else(|| format!("{first:?} is not an approval answer; {APPROVAL_HELP}"))?;
            Ok(match v {
                Verdict::Approve => ok(
                    json!({"permissions": p.permissions, "scope": "turn"}),
                    "approve",
                ),
                Verdict::ApproveForSession => ok(
                    json!({"permissions": p.permissions, "scope": "session"}),
                    "approve for session",
                ),
                Verdict::Deny(reason) => Reply {
                    reason,
                    ..ok(json!({"permissions": {}, "scope": "turn"}), "deny")
                },
                Verdict::Cancel => ok(json!({"permissions": {}, "scope": "turn"}), "cancel"),
            })
        }
        ServerRequest::McpElicitation(_) => {
            if let Some(v) = verdict(first) {
                return Ok(match v {
                    Verdict::Approve | Verdict::ApproveForSession => {
                        ok(json!({"action": "accept", "content": {}}), "approve")
                    }
                    Verdict::Deny(reason) => Reply {
                        reason,
                        ..ok(json!({"action": "decline", "content": null}), "deny")
                    },
                    Verdict::Cancel => ok(json!({"action": "cancel", "content": null}), "cancel"),
                });
            }
            // A JSON object is the form content of an accepted elicitation.
            match serde_json::from_str::<Value>(first) {
                Ok(content @ Value::Object(_)) => Ok(ok(
                    json!({"action": "accept", "content": content}),
                    "answer",
                )),
                _ => Err(format!(
                    "{first:?} is neither an approval answer nor a JSON object; {APPROVAL_HELP}"
                )),
            }
        }
        ServerRequest::UserInput(q) => {
            if let [only] = answers
                && let Some(Verdict::Deny(_) | Verdict::Cancel) = verdict(only)
                && q.questions.iter().all(|qq| !option_matches(qq, only))
            {
                return Ok(Reply {
                    result: Err(RpcError::new(
                        RpcError::INTERNAL_ERROR,
                        "the user declined to answer",
                    )),
                    decision: "deny".into(),
                    reason: None,
                });
            }
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
                                let labels: Vec<&str> =
                                    options.iter().map(|o| o.label.as_str()).collect();
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
                "answer",
            ))
        }
        ServerRequest::ToolCall(_) => {
            let joined = answers.join("\n");
            let (success, text) = match joined.strip_prefix("error:") {
                Some(rest) => (false, rest.trim().to_owned()),
                None => (true, joined),
            };
            let body =
                serde_json::to_value(ToolCallResponse::text(success, text)).expect("serializable");
            Ok(ok(body, if success { "answer" } else { "error" }))
        }
        ServerRequest::ChatgptAuthRefresh(_) | ServerRequest::Unknown { .. } => {
            match serde_json::from_str::<Value>(first) {
                Ok(v) => Ok(ok(v, "answer")),
                Err(_) => Err("this request needs a JSON answer".into()),
            }
        }
    }
}

fn option_matches(q: &codex_relay_protocol::v2::UserInputQuestion, answer: &str) -> bool {
    q.options.as_ref().is_some_and(|os| {
        os.iter()
            .any(|o| o.label.eq_ignore_ascii_case(answer.trim()))
    })
}

fn ok(v: Value, decision: &str) -> Reply {
    Reply {
        result: Ok(v),
        decision: decision.into(),
        reason: None,
    }
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
    fn approval_words() {
        let a = |s: &str| parse(&approval(), &[s.to_owned()]);
        assert_eq!(
            a("approve").unwrap().result.unwrap(),
            json!({"decision": "accept"})
        );
        assert_eq!(
            a("Approve for session").unwrap().result.unwrap(),
            json!({"decision": "acceptForSession"})
        );
        let d = a("deny: not in prod").unwrap();
        assert_eq!(d.result.unwrap(), json!({"decision": "decline"}));
        assert_eq!(d.reason.as_deref(), Some("not in prod"));
        assert_eq!(a("deny").unwrap().reason, None);
        assert_eq!(
            a("cancel").unwrap().result.unwrap(),
            json!({"decision": "cancel"})
        );
        let err = a("maybe").unwrap_err();
        assert!(
            err.contains("approve") && err.contains("deny: <reason>"),
            "{err}"
        );
        assert!(a("approve: sure").is_err());
        assert!(parse(&approval(), &[]).is_err());
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
        let r = parse(&q, &["Staging".into()]).unwrap();
        assert_eq!(
            r.result.unwrap(),
            json!({"answers": {"env": {"answers": ["staging"]}}})
        );
        let err = parse(&q, &["moon".into()]).unwrap_err();
        assert!(err.contains("staging, prod"), "{err}");
        assert!(parse(&q, &["deny".into()]).unwrap().result.is_err());
        assert!(parse(&q, &["prod".into(), "extra".into()]).is_err());
    }

    #[test]
    fn tool_call_answers_are_the_output() {
        let t = ServerRequest::parse(
            ServerRequest::TOOL_CALL,
            json!({"threadId": "t", "turnId": "u", "callId": "c", "tool": "lookup", "arguments": {}}),
        );
        let r = parse(&t, &["42 rows".into()]).unwrap();
        assert_eq!(
            r.result.unwrap(),
            json!({"success": true, "contentItems": [{"type": "inputText", "text": "42 rows"}]})
        );
        let e = parse(&t, &["error: table missing".into()]).unwrap();
        assert_eq!(e.result.unwrap()["success"], false);
    }
}
