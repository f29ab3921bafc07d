//! Answers given in words (`codex_respond`'s `answers`, and `run`'s terminal prompt): `approve`,
//! `approve for session`, `deny`, `deny: <reason>`, `cancel`, a question's option labels, a
//! tool's output (or `error: <message>`), an MCP form's content as a JSON object, or JSON for a
//! request kind codex-relay does not know; read into the engine's typed [`Answer`].

use codex_relay_core::answer::PendingKind;
use codex_relay_core::{Answer, PendingView, Scope};
use serde_json::Value;

/// What a word says about an approval.
fn verdict(word: &str) -> Option<Answer> {
    let a = word.trim();
    let (head, rest) = match a.split_once(':') {
        Some((h, r)) => (
            h.trim(),
            Some(r.trim()).filter(|r| !r.is_empty()).map(str::to_owned),
        ),
        None => (a, None),
    };
    match head.to_ascii_lowercase().as_str() {
        "approve" | "approved" | "accept" | "allow" | "yes" | "y" if rest.is_none() => {
            Some(Answer::Approve { scope: Scope::Once })
        }
        "approve for session"
        | "accept for session"
        | "acceptforsession"
        | "always"
        | "approved_for_session"
            if rest.is_none() =>
        {
            Some(Answer::Approve {
                scope: Scope::Session,
            })
        }
        "deny" | "denied" | "decline" | "reject" | "no" | "n" => {
            Some(Answer::Deny { reason: rest })
        }
        "cancel" | "abort" | "stop" if rest.is_none() => Some(Answer::Cancel),
        _ => None,
    }
}

const APPROVAL_HELP: &str =
    "answer with approve, approve for session, deny, deny: <reason>, or cancel";

/// How to answer an approval: the usual words, and any other option it offers.
pub fn help(p: &PendingView) -> String {
    let others: Vec<&str> = p.other_options().collect();
    if others.is_empty() {
        APPROVAL_HELP.to_owned()
    } else {
        format!("{APPROVAL_HELP}; or {}", others.join(", or "))
    }
}

/// Reads `words` as an answer to `p`. `Err` says what `p` takes.
pub fn answer(p: &PendingView, words: &[String]) -> Result<Answer, String> {
    let first = words.first().map(String::as_str).unwrap_or("").trim();
    if first.is_empty() && p.kind != PendingKind::Question {
        return Err("the answer is empty".into());
    }
    match p.kind {
        PendingKind::CommandApproval
        | PendingKind::FileChangeApproval
        | PendingKind::PermissionsApproval => match verdict(first) {
            Some(answer) => Ok(answer),
            // Any other option the request offers, as the engine reads its words.
            None => p
                .answer_for(first, None)
                .map_err(|_| format!("{first:?} is not an approval answer; {}", help(p))),
        },
        PendingKind::Elicitation => {
            if let Some(v) = verdict(first) {
                return Ok(v);
            }
            match serde_json::from_str::<Value>(first) {
                Ok(Value::Object(content)) => Answer::form(content),
                _ => Err(format!(
                    "{first:?} is neither an approval answer nor a JSON object; {APPROVAL_HELP}"
                )),
            }
        }
        PendingKind::Question => {
            // A lone `deny` / `cancel` that is not one of the options declines to answer.
            let is_option = |w: &str| {
                p.questions().iter().any(|q| {
                    q.options
                        .iter()
                        .flatten()
                        .any(|o| o.label.eq_ignore_ascii_case(w.trim()))
                })
            };
            if let [only] = words
                && let Some(Answer::Deny { .. } | Answer::Cancel) = verdict(only)
                && !is_option(only)
            {
                return Ok(Answer::Deny { reason: None });
            }
            Ok(Answer::Answers(words.to_vec()))
        }
        PendingKind::ToolCall => {
            let joined = words.join("\n");
            Ok(match joined.strip_prefix("error:") {
                Some(rest) => Answer::ToolOutput {
                    success: false,
                    text: rest.trim().to_owned(),
                },
                None => Answer::ToolOutput {
                    success: true,
                    text: joined,
                },
            })
        }
        PendingKind::Other => match verdict(first) {
            Some(v @ (Answer::Deny { .. } | Answer::Cancel)) => Ok(v),
            _ => Ok(Answer::Raw(first.to_owned())),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn view(kind: &str, details: Value) -> PendingView {
        serde_json::from_value(json!({
            "id": "req_1", "sessionId": "s1", "kind": kind, "question": "q", "options": [],
            "details": details, "turn": "t1", "createdAt": 0, "deadline": 1
        }))
        .unwrap()
    }

    fn words(w: &[&str]) -> Vec<String> {
        w.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn approval_words() {
        let p = view("command_approval", json!({"command": "rm -rf build"}));
        let a = |w: &str| answer(&p, &words(&[w]));
        assert_eq!(
            a("approve").unwrap(),
            Answer::Approve { scope: Scope::Once }
        );
        assert_eq!(
            a("Approve for session").unwrap(),
            Answer::Approve {
                scope: Scope::Session
            }
        );
        assert_eq!(
            a("deny: not in prod").unwrap(),
            Answer::Deny {
                reason: Some("not in prod".into())
            }
        );
        assert_eq!(a("deny").unwrap(), Answer::Deny { reason: None });
        assert_eq!(a("cancel").unwrap(), Answer::Cancel);
        let err = a("maybe").unwrap_err();
        assert!(err.contains("deny: <reason>"), "{err}");
        assert!(a("approve: sure").is_err());
        assert!(answer(&p, &[]).is_err());
    }

    #[test]
    fn questions_tools_forms_and_raw_answers() {
        let q = view(
            "question",
            json!({"questions": [{"id": "env", "question": "Which?", "options": [{"label": "deny"}, {"label": "prod"}]}]}),
        );
        assert_eq!(
            answer(&q, &words(&["prod"])).unwrap(),
            Answer::Answers(words(&["prod"]))
        );
        // `deny` is one of the options here, so it is an answer, not a refusal.
        assert_eq!(
            answer(&q, &words(&["deny"])).unwrap(),
            Answer::Answers(words(&["deny"]))
        );
        assert_eq!(
            answer(&q, &words(&["cancel"])).unwrap(),
            Answer::Deny { reason: None }
        );
        let t = view("tool_call", json!({"tool": "lookup"}));
        assert_eq!(
            answer(&t, &words(&["error: table missing"])).unwrap(),
            Answer::ToolOutput {
                success: false,
                text: "table missing".into()
            }
        );
        let e = view("elicitation", json!({"message": "Name?"}));
        let Answer::Form(f) = answer(&e, &words(&[r#"{"name": "Ada", "tags": ["a"]}"#])).unwrap()
        else {
            panic!("a form");
        };
        assert_eq!(f["name"], codex_relay_core::FormValue::Text("Ada".into()));
        assert!(answer(&e, &words(&[r#"{"deep": {"x": 1}}"#])).is_err());
        let o = view("other", json!({"method": "x/y"}));
        assert_eq!(
            answer(&o, &words(&[r#"{"ok": true}"#])).unwrap(),
            Answer::Raw(r#"{"ok": true}"#.into())
        );
    }
}
