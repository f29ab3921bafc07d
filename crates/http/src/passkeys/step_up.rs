//! Step-up for risky approvals: which requests are risky (what approving them lets Codex do, or
//! a command the admin named), who must step up (`--step-up off | passkey-users | all`), and the
//! check of the fresh passkey assertion an approval of a risky request carries: user verified,
//! made for this one request within its ceremony's five minutes, used once.

use codex_relay_core::glob::Pattern;
use codex_relay_core::{PendingDetails, PendingView, Reach};

/// Who must step up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StepUpMode {
    /// Nobody: a session cookie or token approves anything its role allows.
    Off,
    /// Every named user with a passkey registered (by cookie or by their token: the cookie is
    /// their token); users without one, the relay's token and its logins approve as before.
    /// Answer links of risky requests need a passkey as soon as anyone has registered one.
    #[default]
    PasskeyUsers,
    /// Everyone: a risky approval needs a passkey; the relay's token, its logins and users
    /// without a passkey cannot approve risky requests (they can still decline).
    All,
}

impl StepUpMode {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "off" => Some(Self::Off),
            "passkey-users" => Some(Self::PasskeyUsers),
            "all" => Some(Self::All),
            _ => None,
        }
    }
}

/// What reaches are risky unless told: leaving the sandbox (at once or on a retry without it),
/// no sandbox at all, more permissions, network access.
pub const RISKY_REACHES: [Reach; 4] = [
    Reach::NoSandbox,
    Reach::Outside,
    Reach::MorePermissions,
    Reach::Network,
];

/// The step-up policy.
#[derive(Debug, Clone)]
pub struct StepUpPolicy {
    pub mode: StepUpMode,
    /// Approving a request of one of these reaches is risky.
    pub reaches: Vec<Reach>,
    /// Commands (glob patterns, as in rules) whose approval is risky whatever their reach.
    pub commands: Vec<Pattern>,
}

impl Default for StepUpPolicy {
    fn default() -> Self {
        Self {
            mode: StepUpMode::default(),
            reaches: RISKY_REACHES.to_vec(),
            commands: Vec::new(),
        }
    }
}

impl StepUpPolicy {
    /// Whether approving `p` is risky: its reach is one of [`Self::reaches`], or it is a
    /// command matching one of [`Self::commands`].
    pub fn risky(&self, p: &PendingView) -> bool {
        if p.reach.is_some_and(|r| self.reaches.contains(&r)) {
            return true;
        }
        match &p.details {
            PendingDetails::CommandApproval { command, .. } => {
                self.commands.iter().any(|c| c.matches(command))
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use codex_relay_core::answer::PendingKind;

    fn command(cmd: &str, reach: Option<Reach>) -> PendingView {
        PendingView {
            id: "r1".into(),
            session_id: "s1".into(),
            kind: PendingKind::CommandApproval,
            question: "?".into(),
            options: vec![],
            details: PendingDetails::CommandApproval {
                command: cmd.into(),
                cwd: None,
                reason: None,
                item_id: None,
                codex_rule: None,
            },
            turn: None,
            created_at: 0,
            deadline: 0,
            agent: None,
            invoke: None,
            reach,
        }
    }

    #[test]
    fn leaving_the_sandbox_network_and_permissions_are_risky_staying_in_is_not() {
        let p = StepUpPolicy::default();
        for r in [
            Reach::Outside,
            Reach::NoSandbox,
            Reach::MorePermissions,
            Reach::Network,
        ] {
            assert!(p.risky(&command("ls", Some(r))), "{r:?}");
        }
        for r in [Reach::Sandboxed, Reach::OutsideIfBlocked, Reach::McpServer] {
            assert!(!p.risky(&command("ls", Some(r))), "{r:?}");
        }
        assert!(!p.risky(&command("ls", None)), "not an approval");
    }

    #[test]
    fn a_command_the_admin_names_is_risky_whatever_its_reach() {
        let p = StepUpPolicy {
            commands: vec![Pattern::command("git push*").unwrap()],
            ..Default::default()
        };
        assert!(p.risky(&command("git push origin main", Some(Reach::Sandboxed))));
        assert!(!p.risky(&command("git status", Some(Reach::Sandboxed))));
        let only_network = StepUpPolicy {
            reaches: vec![Reach::Network],
            ..Default::default()
        };
        assert!(!only_network.risky(&command("curl x", Some(Reach::Outside))));
        assert!(only_network.risky(&command("curl x", Some(Reach::Network))));
    }

    #[test]
    fn an_mcp_answer_approves_unless_it_plainly_declines() {
        use crate::passkeys::mcp_answer_approves as approves;
        use serde_json::json;
        assert!(approves(Some(&json!("approve"))));
        assert!(approves(Some(&json!("approve for session"))));
        assert!(
            approves(Some(&json!(0))),
            "an option's index is held to the step-up"
        );
        assert!(approves(Some(&json!(["deny", "approve"]))));
        assert!(approves(None));
        assert!(!approves(Some(&json!("deny"))));
        assert!(!approves(Some(&json!(" Cancel"))));
        assert!(!approves(Some(&json!(["decline"]))));
    }

    #[test]
    fn modes_have_words() {
        assert_eq!(StepUpMode::parse("off"), Some(StepUpMode::Off));
        assert_eq!(
            StepUpMode::parse("passkey-users"),
            Some(StepUpMode::PasskeyUsers)
        );
        assert_eq!(StepUpMode::parse("all"), Some(StepUpMode::All));
        assert_eq!(StepUpMode::parse("on"), None);
    }
}
