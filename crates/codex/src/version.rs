//! Codex version detection, the compatibility table, and values that depend on the version.

use std::fmt;

use codex_relay_protocol::v2::ApprovalPolicy;

/// A Codex release number, `major.minor.patch` (pre-release suffixes are kept for display).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CodexVersion {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
    pub pre: String,
}

impl CodexVersion {
    pub const fn new(major: u64, minor: u64, patch: u64) -> Self {
        Self {
            major,
            minor,
            patch,
            pre: String::new(),
        }
    }

    /// Parses `0.169.0`, `0.170.0-alpha.3`, or the first such token of a longer text such as
    /// `codex-cli 0.169.0` or a userAgent `name/0.169.0 (Debian 12; x86_64) ...`.
    pub fn find_in(text: &str) -> Option<Self> {
        text.split(|c: char| c.is_whitespace() || c == '/' || c == '(' || c == ')')
            .find_map(Self::parse)
    }

    pub fn parse(token: &str) -> Option<Self> {
        let token = token.strip_prefix('v').unwrap_or(token);
        let (core, pre) = match token.split_once('-') {
            Some((c, p)) => (c, p.to_owned()),
            None => (token, String::new()),
        };
        let mut parts = core.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        let patch = parts.next()?.parse().ok()?;
        if parts.next().is_some() {
            return None;
        }
        Some(Self {
            major,
            minor,
            patch,
            pre,
        })
    }

    fn triple(&self) -> (u64, u64, u64) {
        (self.major, self.minor, self.patch)
    }

    pub fn compatibility(&self) -> Compatibility {
        let v = self.triple();
        if v < MIN_SUPPORTED.triple() {
            Compatibility::Unsupported
        } else if v >= OLDEST_TESTED.triple() && v <= NEWEST_TESTED.triple() {
            Compatibility::Tested
        } else {
            Compatibility::Untested
        }
    }

    /// `on-failure` was removed upstream around 0.153. Asked of a newer Codex, it becomes
    /// `on-request` (the closest policy: the model may still ask to leave the sandbox), and the
    /// second value says so.
    pub fn approval_policy(&self, wanted: ApprovalPolicy) -> (ApprovalPolicy, Option<String>) {
        if wanted == ApprovalPolicy::OnFailure && self.triple() >= ON_FAILURE_REMOVED.triple() {
            let note = format!(
                "approval policy on-failure does not exist in Codex {self} (removed in {ON_FAILURE_REMOVED}); using on-request"
            );
            return (ApprovalPolicy::OnRequest, Some(note));
        }
        (wanted, None)
    }

    /// Rewrites an approval policy for this version in place, logging what changed.
    pub fn adapt_approval_policy(&self, policy: &mut Option<ApprovalPolicy>) {
        if let Some(p) = *policy {
            let (adapted, note) = self.approval_policy(p);
            if let Some(note) = note {
                tracing::warn!("{note}");
            }
            *policy = Some(adapted);
        }
    }

    /// `turn/steer`: missing from 0.98.0 (steering there goes through the v1 `sendUserMessage`),
    /// present in 0.169.0. Versions in between are assumed to have it; a Codex without it
    /// answers "unknown method", which the peer reports as `PeerError::Unsupported`.
    pub fn has_turn_steer(&self) -> bool {
        self.triple() > OLDEST_TESTED.triple()
    }

    /// `thread/status/changed` and `serverRequest/resolved` notifications (0.169, not 0.98).
    pub fn has_thread_status_notifications(&self) -> bool {
        self.triple() > OLDEST_TESTED.triple()
    }

    /// `thread/revert` (drop the turns from one on) and `thread/fork` up to a turn
    /// (`lastTurnId`); 0.98 has `thread/rollback` (drop the last N turns) and forks whole
    /// threads only.
    pub fn has_thread_revert(&self) -> bool {
        self.triple() > OLDEST_TESTED.triple()
    }

    /// The legacy `codex mcp-server` was removed in 0.154.
    pub fn has_legacy_mcp_server(&self) -> bool {
        self.triple() < LEGACY_MCP_SERVER_REMOVED.triple()
    }
}

impl fmt::Display for CodexVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        if !self.pre.is_empty() {
            write!(f, "-{}", self.pre)?;
        }
        Ok(())
    }
}

/// Oldest release the test suite runs against.
pub const OLDEST_TESTED: CodexVersion = CodexVersion::new(0, 98, 0);
/// Newest release the test suite runs against.
pub const NEWEST_TESTED: CodexVersion = CodexVersion::new(0, 171, 0);
/// The app-server v2 thread/turn methods landed upstream in November 2025 (around 0.58);
/// older releases only speak the v1 conversation API and are refused.
pub const MIN_SUPPORTED: CodexVersion = CodexVersion::new(0, 58, 0);
pub const ON_FAILURE_REMOVED: CodexVersion = CodexVersion::new(0, 153, 0);
pub const LEGACY_MCP_SERVER_REMOVED: CodexVersion = CodexVersion::new(0, 154, 0);

/// Where a version stands in the compatibility table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compatibility {
    /// Inside the tested range.
    Tested,
    /// Has app-server v2 but is outside the tested range: starts, with a warning.
    Untested,
    /// Has no app-server v2: refused.
    Unsupported,
}

impl Compatibility {
    /// A sentence for logs and `doctor`.
    pub fn describe(self, v: &CodexVersion) -> String {
        match self {
            Compatibility::Tested => {
                format!("Codex {v} is in the tested range {OLDEST_TESTED}..={NEWEST_TESTED}")
            }
            Compatibility::Untested => format!(
                "Codex {v} is outside the tested range {OLDEST_TESTED}..={NEWEST_TESTED}; it should work, but expect surprises"
            ),
            Compatibility::Unsupported => format!(
                "Codex {v} has no app-server v2 protocol; codex-relay supports {MIN_SUPPORTED} and newer (tested {OLDEST_TESTED}..={NEWEST_TESTED})"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cli_output_and_user_agent() {
        assert_eq!(
            CodexVersion::find_in("codex-cli 0.169.0\n"),
            Some(CodexVersion::new(0, 169, 0))
        );
        let ua = "codex-relay/0.98.0 (Debian 12.0.0; x86_64) xterm (codex-relay; 0.1.0)";
        assert_eq!(CodexVersion::find_in(ua), Some(CodexVersion::new(0, 98, 0)));
        let pre = CodexVersion::find_in("codex-cli 0.170.0-alpha.2").unwrap();
        assert_eq!(pre.to_string(), "0.170.0-alpha.2");
        assert_eq!(CodexVersion::find_in("no version here"), None);
    }

    #[test]
    fn compatibility_table() {
        assert_eq!(
            CodexVersion::new(0, 98, 0).compatibility(),
            Compatibility::Tested
        );
        assert_eq!(
            CodexVersion::new(0, 169, 0).compatibility(),
            Compatibility::Tested
        );
        assert_eq!(
            CodexVersion::new(0, 120, 3).compatibility(),
            Compatibility::Tested
        );
        assert_eq!(
            CodexVersion::new(0, 171, 0).compatibility(),
            Compatibility::Tested
        );
        assert_eq!(
            CodexVersion::new(0, 172, 0).compatibility(),
            Compatibility::Untested
        );
        assert_eq!(
            CodexVersion::new(0, 60, 0).compatibility(),
            Compatibility::Untested
        );
        assert_eq!(
            CodexVersion::new(0, 45, 0).compatibility(),
            Compatibility::Unsupported
        );
        let msg = Compatibility::Unsupported.describe(&CodexVersion::new(0, 45, 0));
        assert!(
            msg.contains("0.58.0") && msg.contains("0.98.0..=0.171.0"),
            "{msg}"
        );
    }

    #[test]
    fn on_failure_only_below_0_153() {
        let old = CodexVersion::new(0, 98, 0);
        assert_eq!(
            old.approval_policy(ApprovalPolicy::OnFailure),
            (ApprovalPolicy::OnFailure, None)
        );
        let new = CodexVersion::new(0, 169, 0);
        let (p, note) = new.approval_policy(ApprovalPolicy::OnFailure);
        assert_eq!(p, ApprovalPolicy::OnRequest);
        assert!(note.unwrap().contains("on-failure"));
        assert_eq!(
            new.approval_policy(ApprovalPolicy::Never),
            (ApprovalPolicy::Never, None)
        );
    }
}
