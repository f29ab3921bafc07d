//! An approval's option words and the answers they give: the one mapping every front that shows
//! `PendingView::options` uses (the web UI and the HTTP API's `option`, MCP's forms and
//! `codex_respond`), so a new kind of decision reaches them all from here.

use crate::answer::{Answer, PendingKind, Scope};
use crate::pending::PendingView;

/// Approve once.
pub const APPROVE: &str = "approve";
/// Approve this and every like request of the session (Codex remembers it for the session).
pub const APPROVE_FOR_SESSION: &str = "approve for session";
/// Approve, and have Codex remember the prefix it proposed in its own execution policy
/// ([`Answer::ApproveWithCodexRule`]); offered only with a command approval that carries one.
pub const APPROVE_WITH_CODEX_RULE: &str = "approve with codex rule";
/// Refuse (a reason may go with it, passed to the model).
pub const DENY: &str = "deny";
/// Refuse and stop the turn.
pub const CANCEL: &str = "cancel";

/// The words every approval offers, in the order fronts show them.
pub fn approval_options(codex_rule: bool) -> Vec<String> {
    let mut words = vec![APPROVE, APPROVE_FOR_SESSION];
    if codex_rule {
        words.push(APPROVE_WITH_CODEX_RULE);
    }
    words.extend([DENY, CANCEL]);
    words.into_iter().map(str::to_owned).collect()
}

/// The answer an approval's option word gives (`reason` goes with a denial).
fn answer_of(word: &str, reason: Option<String>) -> Option<Answer> {
    Some(match word {
        APPROVE => Answer::Approve { scope: Scope::Once },
        APPROVE_FOR_SESSION => Answer::Approve {
            scope: Scope::Session,
        },
        APPROVE_WITH_CODEX_RULE => Answer::ApproveWithCodexRule,
        DENY => Answer::Deny {
            reason: reason
                .map(|r| r.trim().to_owned())
                .filter(|r| !r.is_empty()),
        },
        CANCEL => Answer::Cancel,
        _ => return None,
    })
}

impl PendingView {
    /// The answer option `word` of this approval gives (any case; `reason` goes with a
    /// denial). `Err` says which options it offers.
    pub fn answer_for(&self, word: &str, reason: Option<String>) -> Result<Answer, String> {
        let approval = matches!(
            self.kind,
            PendingKind::CommandApproval
                | PendingKind::FileChangeApproval
                | PendingKind::PermissionsApproval
                | PendingKind::Elicitation
        );
        let word = word.trim().to_ascii_lowercase();
        let offered = self.options.contains(&word);
        match answer_of(&word, reason) {
            Some(answer) if approval && offered => Ok(answer),
            _ => Err(format!(
                "{word:?} is not one of this request's options ({})",
                self.options.join(", ")
            )),
        }
    }

    /// Options beyond approve, approve for session, deny and cancel (a front with buttons for
    /// those shows these as buttons of their own).
    pub fn other_options(&self) -> impl Iterator<Item = &str> {
        self.options
            .iter()
            .map(String::as_str)
            .filter(|o| ![APPROVE, APPROVE_FOR_SESSION, DENY, CANCEL].contains(o))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn view(options: &[&str]) -> PendingView {
        serde_json::from_value(json!({
            "id": "req_1", "sessionId": "s1", "kind": "command_approval", "question": "q",
            "options": options, "details": {"command": "git --version"}, "turn": "t1",
            "createdAt": 0, "deadline": 1
        }))
        .unwrap()
    }

    #[test]
    fn every_offered_word_gives_its_answer_and_nothing_else_does() {
        let with = view(
            &approval_options(true)
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        );
        assert_eq!(
            with.answer_for("approve with codex rule", None),
            Ok(Answer::ApproveWithCodexRule)
        );
        assert_eq!(
            with.answer_for(" Deny ", Some(" not now ".into())),
            Ok(Answer::Deny {
                reason: Some("not now".into())
            })
        );
        assert_eq!(
            with.answer_for("approve for session", None),
            Ok(Answer::Approve {
                scope: Scope::Session
            })
        );
        assert_eq!(
            with.other_options().collect::<Vec<_>>(),
            [APPROVE_WITH_CODEX_RULE]
        );
        // Not offered without Codex's proposal, so not taken either.
        let without = view(
            &approval_options(false)
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        );
        let refused = without
            .answer_for("approve with codex rule", None)
            .unwrap_err();
        assert!(
            refused.contains("approve, approve for session, deny, cancel"),
            "{refused}"
        );
        assert!(without.answer_for("maybe", None).is_err());
        assert_eq!(without.other_options().count(), 0);
    }
}
