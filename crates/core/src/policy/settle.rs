//! The sandbox and approval policy a session gets when the operator limits them: what the
//! request asked for (already checked), else what Codex would take from its own config,
//! else Codex's default, each brought down to the limit. Codex is then told both explicitly,
//! so nothing the relay did not read (a project's `.codex/config.toml`, a permission profile,
//! a later edit of `config.toml`) can choose a wider one.

use std::path::Path;

use codex_relay_protocol::v2::{ApprovalPolicy, SandboxMode};
use serde_json::{Map, Value};

use super::{StartPolicy, approval_rank, sandbox_rank};

/// The parts of Codex's own config (its `config.toml` and the `-c` overrides the relay starts
/// it with) that decide a session's sandbox and approval policy when nobody asked.
#[derive(Debug, Default, Clone)]
pub struct CodexConfig {
    table: toml::Table,
}

impl CodexConfig {
    /// `$CODEX_HOME/config.toml` with `overrides` (`key=value`, as `codex -c` takes them) on
    /// top. A missing or unreadable file reads as empty: Codex then starts with its defaults,
    /// or not at all.
    pub fn read(codex_home: Option<&Path>, overrides: &[String]) -> Self {
        let mut table = codex_home
            .and_then(|h| std::fs::read_to_string(h.join("config.toml")).ok())
            .and_then(|text| toml::from_str::<toml::Table>(&text).ok())
            .unwrap_or_default();
        for kv in overrides {
            let Some((key, raw)) = kv.split_once('=') else {
                continue;
            };
            let value = toml::from_str::<toml::Table>(&format!("v = {raw}"))
                .ok()
                .and_then(|mut t| t.remove("v"))
                .unwrap_or_else(|| toml::Value::String(raw.trim().to_owned()));
            table.insert(key.trim().to_owned(), value);
        }
        Self { table }
    }

    /// A top-level key, or the same key of the profile `config.toml` selects (Codex 0.98 reads
    /// `profile = "<name>"` and its `[profiles.<name>]` table, which wins over the top level).
    fn get(&self, key: &str) -> Option<&str> {
        let profile = self
            .table
            .get("profile")
            .and_then(toml::Value::as_str)
            .and_then(|p| self.table.get("profiles")?.get(p)?.get(key));
        profile
            .or_else(|| self.table.get(key))
            .and_then(toml::Value::as_str)
    }

    /// Whether `config.toml` records a trust decision for `cwd` (or the git repository it is
    /// in): Codex's default sandbox is then `workspace-write`, else `read-only`.
    fn has_trust_decision(&self, cwd: &Path) -> bool {
        let Some(projects) = self.table.get("projects").and_then(toml::Value::as_table) else {
            return false;
        };
        let decided = |dir: &Path| {
            projects
                .get(&dir.display().to_string())
                .and_then(|p| p.get("trust_level"))
                .is_some()
        };
        let cwd = cwd.canonicalize().unwrap_or_else(|_| cwd.to_path_buf());
        if decided(&cwd) {
            return true;
        }
        cwd.ancestors()
            .find(|dir| dir.join(".git").exists())
            .is_some_and(decided)
    }
}

/// What a session asked for, for [`StartPolicy::settle`].
#[derive(Debug, Clone, Copy)]
pub struct Wanted<'a> {
    /// The request's own options (a permission mode's included).
    pub sandbox: Option<SandboxMode>,
    pub approval: Option<ApprovalPolicy>,
    /// The overrides Codex will get: the profile's settings and the request's `config`.
    pub overrides: Option<&'a Map<String, Value>>,
    /// Where the session works.
    pub cwd: &'a Path,
}

impl StartPolicy {
    /// The sandbox and approval policy to tell Codex, within the limits. Whatever the request
    /// asked for is already checked ([`StartPolicy::check`]); what comes from Codex's own
    /// config or defaults is brought down to the limit rather than refused, since the client
    /// did not ask for it.
    pub fn settle(
        &self,
        wanted: &Wanted<'_>,
        codex: &CodexConfig,
    ) -> (SandboxMode, ApprovalPolicy) {
        let from_overrides = |key: &str| {
            wanted
                .overrides
                .and_then(|o| o.get(key))
                .and_then(Value::as_str)
        };
        let sandbox = wanted
            .sandbox
            .or_else(|| from_overrides("sandbox_mode").and_then(|s| s.parse().ok()))
            .or_else(|| codex.get("sandbox_mode").and_then(|s| s.parse().ok()))
            .unwrap_or(if codex.has_trust_decision(wanted.cwd) {
                SandboxMode::WorkspaceWrite
            } else {
                SandboxMode::ReadOnly
            });
        let sandbox = if sandbox_rank(sandbox) > sandbox_rank(self.max_sandbox) {
            self.max_sandbox
        } else {
            sandbox
        };
        let approval = wanted
            .approval
            .or_else(|| from_overrides("approval_policy").and_then(|s| s.parse().ok()))
            .or_else(|| codex.get("approval_policy").and_then(|s| s.parse().ok()))
            .unwrap_or(ApprovalPolicy::OnRequest);
        let approval = if approval_rank(approval) > approval_rank(self.max_approval)
            && !(approval == ApprovalPolicy::Never && sandbox == SandboxMode::ReadOnly)
        {
            self.max_approval
        } else {
            approval
        };
        (sandbox, approval)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn limited() -> StartPolicy {
        StartPolicy {
            max_sandbox: SandboxMode::WorkspaceWrite,
            max_approval: ApprovalPolicy::OnRequest,
            ..Default::default()
        }
    }

    fn nothing(cwd: &Path) -> Wanted<'_> {
        Wanted {
            sandbox: None,
            approval: None,
            overrides: None,
            cwd,
        }
    }

    fn config(text: &str, overrides: &[&str]) -> CodexConfig {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("config.toml"), text).unwrap();
        let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
        CodexConfig::read(Some(home.path()), &overrides)
    }

    #[test]
    fn codex_config_beyond_the_limit_is_brought_down_to_it() {
        let cwd = tempfile::tempdir().unwrap();
        let wide = config(
            "sandbox_mode = \"danger-full-access\"\napproval_policy = \"never\"\n",
            &[],
        );
        let wanted = nothing(cwd.path());
        assert_eq!(
            limited().settle(&wanted, &wide),
            (SandboxMode::WorkspaceWrite, ApprovalPolicy::OnRequest)
        );
        // Within the limit, Codex's own choice stands.
        let narrow = config("sandbox_mode = \"read-only\"\n", &[]);
        assert_eq!(
            limited().settle(&wanted, &narrow),
            (SandboxMode::ReadOnly, ApprovalPolicy::OnRequest)
        );
        // `never` with nothing writable is not beyond an `on-request` limit.
        let quiet = config(
            "sandbox_mode = \"read-only\"\napproval_policy = \"never\"\n",
            &[],
        );
        assert_eq!(
            limited().settle(&wanted, &quiet),
            (SandboxMode::ReadOnly, ApprovalPolicy::Never)
        );
        // The operator's `-c` overrides and the profile config.toml selects count as Codex's.
        let flagged = config("", &["sandbox_mode=\"danger-full-access\""]);
        assert_eq!(
            limited().settle(&wanted, &flagged).0,
            SandboxMode::WorkspaceWrite
        );
        let profiled = config(
            "profile = \"full\"\nsandbox_mode = \"read-only\"\n[profiles.full]\napproval_policy = \"never\"\nsandbox_mode = \"danger-full-access\"\n",
            &[],
        );
        assert_eq!(
            limited().settle(&wanted, &profiled),
            (SandboxMode::WorkspaceWrite, ApprovalPolicy::OnRequest)
        );
    }

    #[test]
    fn what_the_request_says_comes_first_and_codex_defaults_last() {
        let cwd = tempfile::tempdir().unwrap();
        let wide = config("sandbox_mode = \"workspace-write\"\n", &[]);
        let asked = Wanted {
            sandbox: Some(SandboxMode::ReadOnly),
            approval: Some(ApprovalPolicy::Untrusted),
            ..nothing(cwd.path())
        };
        assert_eq!(
            limited().settle(&asked, &wide),
            (SandboxMode::ReadOnly, ApprovalPolicy::Untrusted)
        );
        let overrides = json!({"sandbox_mode": "read-only"});
        let via_config = Wanted {
            overrides: overrides.as_object(),
            ..nothing(cwd.path())
        };
        assert_eq!(
            limited().settle(&via_config, &wide).0,
            SandboxMode::ReadOnly
        );
        // Nothing anywhere: Codex's defaults, read-only until the directory has a trust
        // decision.
        let none = nothing(cwd.path());
        assert_eq!(
            limited().settle(&none, &config("", &[])),
            (SandboxMode::ReadOnly, ApprovalPolicy::OnRequest)
        );
        let real = cwd.path().canonicalize().unwrap();
        let trusted = config(
            &format!(
                "[projects.{:?}]\ntrust_level = \"trusted\"\n",
                real.display().to_string()
            ),
            &[],
        );
        assert_eq!(
            limited().settle(&none, &trusted).0,
            SandboxMode::WorkspaceWrite
        );
        // A read-only limit holds over a trusted directory too.
        let strict = StartPolicy {
            max_sandbox: SandboxMode::ReadOnly,
            ..limited()
        };
        assert_eq!(strict.settle(&none, &trusted).0, SandboxMode::ReadOnly);
    }
}
