//! Approval rules: relay-wide, kept in the store, that answer an approval before a human is
//! asked — `allow`, `deny` with a reason the model is told, or `ask` (a human decides, the
//! default). Deny beats ask beats allow; an allow rule only ever answers what a human's
//! "Approve" (once) answers, and only a request whose approval cannot leave the sandbox
//! ([`crate::reach`]) unless it says `outside_sandbox = true`, and then only commands and file
//! changes (see docs/RULES.md). The broker consults them where it opens a request.

mod file;
mod input;
pub mod shell;

use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};

pub use crate::error::RuleError;
pub use crate::glob::Pattern;
pub use file::{RulesFileError, parse_toml};
pub use input::{RuleContext, RuleInput};

/// What a rule decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Action {
    Allow,
    Deny,
    Ask,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Allow => "allow",
            Action::Deny => "deny",
            Action::Ask => "ask",
        }
    }
}

/// The kinds of request a rule can match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum RuleKind {
    Command,
    FileChange,
    Permissions,
    Elicitation,
}

/// Where a rule comes from: the `--rules` file (read again at every start; edit the file to
/// change it), or the API and UI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Source {
    File,
    Api,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::File => "file",
            Source::Api => "api",
        }
    }

    pub fn parse(s: &str) -> Self {
        if s == "file" {
            Source::File
        } else {
            Source::Api
        }
    }
}

/// A rule as written (TOML file, API body). Every condition given must hold; absent ones
/// match anything.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RuleSpec {
    /// Letters, digits, `-`, `_`, `.`; shown as who answered (`rule:<name>`).
    pub name: String,
    pub action: Action,
    /// The kinds it applies to (default: every approval kind its conditions can match).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<RuleKind>,
    /// An argv prefix: `["git", "status"]` matches `git status` and `git status -s`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub argv: Vec<String>,
    /// A glob over the command line (`cargo test *`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The working directory: a directory (it and everything under it) or a glob.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Globs over the files a patch touches (relative ones from the working directory):
    /// allow needs every file to match one, deny any file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// Labels the session must all carry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// Deny: what the model is told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Allow only: also answer command and file-change approvals that may run outside the
    /// sandbox (under `untrusted` Codex runs an approved command again without the sandbox
    /// when the sandbox blocks it; under `on-request` an approved escalation runs outside it).
    /// Without it an allow rule answers only what stays in the sandbox, or sessions with none.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub outside_sandbox: bool,
}

/// A stored rule: its spec, where it comes from, when it was made and changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Rule {
    #[serde(flatten)]
    pub spec: RuleSpec,
    pub source: Source,
    /// Unix milliseconds.
    pub created_at: i64,
    pub updated_at: i64,
}

fn invalid(name: &str, field: &'static str, message: impl Into<String>) -> RuleError {
    RuleError::Invalid {
        name: name.to_owned(),
        field,
        message: message.into(),
    }
}

/// A rule, checked and compiled.
#[derive(Debug, Clone)]
pub(crate) struct Compiled {
    pub rule: Rule,
    kinds: Vec<RuleKind>,
    command: Option<Pattern>,
    cwd: Option<Pattern>,
    cwd_dir: Option<String>,
    paths: Vec<Pattern>,
}

impl RuleSpec {
    /// Checks every field; the error names the field and says what is wrong.
    pub fn check(&self) -> Result<(), RuleError> {
        self.compile().map(|_| ())
    }

    fn compile(&self) -> Result<Compiled, RuleError> {
        let name = self.name.as_str();
        if name.is_empty()
            || name.len() > 64
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(invalid(
                name,
                "name",
                "use 1 to 64 letters, digits, `-`, `_` or `.`",
            ));
        }
        if self.argv.iter().any(|a| a.is_empty()) {
            return Err(invalid(name, "argv", "an argument is empty"));
        }
        let command = self
            .command
            .as_deref()
            .map(Pattern::command)
            .transpose()
            .map_err(|e| invalid(name, "command", e))?;
        let (cwd, cwd_dir) = match self.cwd.as_deref() {
            None => (None, None),
            Some(c) if !c.starts_with('/') => {
                return Err(invalid(name, "cwd", "give an absolute directory or glob"));
            }
            Some(c) => {
                let p = Pattern::path(c).map_err(|e| invalid(name, "cwd", e))?;
                if p.is_literal() {
                    (None, Some(c.trim_end_matches('/').to_owned()))
                } else {
                    (Some(p), None)
                }
            }
        };
        let paths = self
            .paths
            .iter()
            .map(|p| Pattern::path(p.trim_start_matches("./")))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| invalid(name, "paths", e))?;
        let kinds = if self.kinds.is_empty() {
            if !self.argv.is_empty() || command.is_some() {
                vec![RuleKind::Command]
            } else if !paths.is_empty() {
                vec![RuleKind::FileChange]
            } else if self.action == Action::Allow {
                vec![RuleKind::Command, RuleKind::FileChange]
            } else {
                vec![
                    RuleKind::Command,
                    RuleKind::FileChange,
                    RuleKind::Permissions,
                    RuleKind::Elicitation,
                ]
            }
        } else {
            self.kinds.clone()
        };
        let has_command = !self.argv.is_empty() || command.is_some();
        if has_command && kinds.iter().any(|k| *k != RuleKind::Command) {
            return Err(invalid(
                name,
                "kinds",
                "argv and command apply to command approvals only",
            ));
        }
        if !paths.is_empty() && kinds.iter().any(|k| *k != RuleKind::FileChange) {
            return Err(invalid(
                name,
                "kinds",
                "paths apply to file-change approvals only",
            ));
        }
        if self.action == Action::Allow
            && kinds
                .iter()
                .any(|k| matches!(k, RuleKind::Permissions | RuleKind::Elicitation))
        {
            return Err(invalid(
                name,
                "kinds",
                "an allow rule cannot grant permissions or answer an MCP server's form (a rule never widens the sandbox that way, even with outside_sandbox); allow command or file_change, or deny these",
            ));
        }
        if self.action != Action::Allow && self.outside_sandbox {
            return Err(invalid(
                name,
                "outside_sandbox",
                "only an allow rule can answer requests that may run outside the sandbox",
            ));
        }
        if self.action != Action::Deny && self.reason.is_some() {
            return Err(invalid(
                name,
                "reason",
                "only a deny rule has a reason (it is told to the model)",
            ));
        }
        if self.reason.as_deref().is_some_and(|r| r.trim().is_empty()) {
            return Err(invalid(name, "reason", "the reason is empty"));
        }
        if self.labels.iter().any(|l| l.trim().is_empty()) {
            return Err(invalid(name, "labels", "a label is empty"));
        }
        Ok(Compiled {
            rule: Rule {
                spec: self.clone(),
                source: Source::Api,
                created_at: 0,
                updated_at: 0,
            },
            kinds,
            command,
            cwd,
            cwd_dir,
            paths,
        })
    }
}

impl Compiled {
    pub(crate) fn new(rule: Rule) -> Result<Self, RuleError> {
        let mut c = rule.spec.compile()?;
        c.rule = rule;
        Ok(c)
    }

    /// How narrow the rule is: its argv's length, then how many conditions it has.
    fn specificity(&self) -> (usize, usize) {
        let s = &self.rule.spec;
        let conditions = usize::from(self.command.is_some())
            + usize::from(s.cwd.is_some())
            + usize::from(!s.paths.is_empty())
            + s.labels.len()
            + usize::from(!s.kinds.is_empty());
        (s.argv.len(), conditions)
    }

    /// Whether every condition holds for `input`.
    fn matches(&self, input: &RuleInput) -> bool {
        let spec = &self.rule.spec;
        if !self.kinds.contains(&input.kind) {
            return false;
        }
        if !spec.labels.iter().all(|l| input.labels.contains(l)) {
            return false;
        }
        if self.cwd.is_some() || self.cwd_dir.is_some() {
            let Some(cwd) = input.cwd.as_deref() else {
                return false;
            };
            let cwd = cwd.trim_end_matches('/');
            let ok = match (&self.cwd, &self.cwd_dir) {
                (Some(p), _) => p.matches(cwd),
                (None, Some(dir)) => {
                    cwd == dir
                        || cwd
                            .strip_prefix(dir.as_str())
                            .is_some_and(|r| r.starts_with('/'))
                }
                _ => true,
            };
            if !ok {
                return false;
            }
        }
        let allow = spec.action == Action::Allow;
        if !spec.argv.is_empty() || self.command.is_some() {
            let Some(parsed) = &input.command else {
                return false;
            };
            let prefix = |argv: &[String], loose: bool| {
                argv.len() >= spec.argv.len()
                    && argv.iter().zip(&spec.argv).enumerate().all(|(i, (a, p))| {
                        a == p || (loose && i == 0 && !p.contains('/') && shell::basename(a) == p)
                    })
            };
            let glob = |text: &str| self.command.as_ref().is_none_or(|g| g.matches(text));
            let ok = if allow {
                // Only one plain command, and Codex's own reading agrees it is one.
                match parsed.argv() {
                    Some(argv) if input.actions <= 1 => {
                        prefix(argv, false) && glob(&argv.join(" "))
                    }
                    _ => false,
                }
            } else {
                // Any command in the line (or the line itself), program names by basename.
                parsed.commands.iter().any(|argv| {
                    (spec.argv.is_empty() || prefix(argv, true))
                        && (self.command.is_none() || glob(&argv.join(" ")))
                }) || (spec.argv.is_empty() && glob(parsed.script.trim()))
                    || input.action_commands.iter().any(|c| {
                        let p = shell::parse(c);
                        p.commands.iter().any(|argv| {
                            (spec.argv.is_empty() || prefix(argv, true))
                                && (self.command.is_none() || glob(&argv.join(" ")))
                        })
                    })
            };
            if !ok {
                return false;
            }
        }
        if !self.paths.is_empty() {
            if input.paths.is_empty() {
                return false;
            }
            let hit = |path: &str| {
                let rel = input
                    .cwd
                    .as_deref()
                    .and_then(|c| path.strip_prefix(c.trim_end_matches('/')))
                    .and_then(|r| r.strip_prefix('/'));
                self.paths
                    .iter()
                    .any(|p| p.matches(path) || rel.is_some_and(|r| p.matches(r)))
            };
            let ok = if allow {
                input.paths.iter().all(|p| hit(p))
            } else {
                input.paths.iter().any(|p| hit(p))
            };
            if !ok {
                return false;
            }
        }
        true
    }
}

/// What the rules decided for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ruling {
    pub rule: String,
    pub action: Action,
    pub reason: Option<String>,
}

/// The relay's rules, in memory (the store keeps them); cheap to clone.
#[derive(Clone, Default)]
pub struct Rules {
    inner: Arc<RwLock<Vec<Compiled>>>,
    counts: Arc<Counts>,
}

/// Decisions made, for metrics.
#[derive(Debug, Default)]
pub struct Counts {
    pub allowed: std::sync::atomic::AtomicU64,
    pub denied: std::sync::atomic::AtomicU64,
    /// Requests an `ask` rule (or no rule) left to a human.
    pub asked: std::sync::atomic::AtomicU64,
}

impl Rules {
    pub(crate) fn replace(&self, rules: Vec<Compiled>) {
        let mut rules = rules;
        rules.sort_by(|a, b| a.rule.spec.name.cmp(&b.rule.spec.name));
        *self.inner.write().unwrap_or_else(|e| e.into_inner()) = rules;
    }

    pub(crate) fn put(&self, rule: Compiled) {
        let mut all = self.inner.write().unwrap_or_else(|e| e.into_inner());
        all.retain(|r| r.rule.spec.name != rule.rule.spec.name);
        all.push(rule);
        all.sort_by(|a, b| a.rule.spec.name.cmp(&b.rule.spec.name));
    }

    pub(crate) fn remove(&self, name: &str) {
        self.inner
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|r| r.rule.spec.name != name);
    }

    /// Every rule, by name.
    pub fn list(&self) -> Vec<Rule> {
        self.inner
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|c| c.rule.clone())
            .collect()
    }

    pub fn get(&self, name: &str) -> Option<Rule> {
        self.list().into_iter().find(|r| r.spec.name == name)
    }

    /// The counters of decisions made.
    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    /// What the rules say of `input`: a deny if any deny rule matches, else an ask if any ask
    /// rule does, else an allow if an allow rule does whose answer cannot take Codex out of the
    /// sandbox (or that opted in to it); `None` when no rule applies (a human is asked).
    pub fn decide(&self, input: &RuleInput) -> Option<Ruling> {
        let rules = self.inner.read().unwrap_or_else(|e| e.into_inner());
        // Of the rules of one action that match, the most specific names the decision.
        // An allow rule answers only what its approval cannot take out of the sandbox, or, when
        // it opts in, a command or file change that may run outside it: never permissions,
        // network access or an MCP server.
        let may_answer = |r: &Compiled| {
            r.rule.spec.action != Action::Allow
                || input.reach.is_some_and(|reach| {
                    !reach.widens() || (r.rule.spec.outside_sandbox && reach.leaves_sandbox())
                })
        };
        let first = |action: Action| {
            rules
                .iter()
                .filter(|r| r.rule.spec.action == action && r.matches(input) && may_answer(r))
                .max_by_key(|r| (r.specificity(), std::cmp::Reverse(&r.rule.spec.name)))
        };
        use std::sync::atomic::Ordering::Relaxed;
        let ruling = if let Some(r) = first(Action::Deny) {
            self.counts.denied.fetch_add(1, Relaxed);
            Some(Ruling {
                rule: r.rule.spec.name.clone(),
                action: Action::Deny,
                reason: r.rule.spec.reason.clone(),
            })
        } else if let Some(r) = first(Action::Ask) {
            Some(Ruling {
                rule: r.rule.spec.name.clone(),
                action: Action::Ask,
                reason: None,
            })
        } else if let Some(r) = first(Action::Allow) {
            self.counts.allowed.fetch_add(1, Relaxed);
            Some(Ruling {
                rule: r.rule.spec.name.clone(),
                action: Action::Allow,
                reason: None,
            })
        } else {
            None
        };
        if ruling.as_ref().is_none_or(|r| r.action == Action::Ask) && input.kind_is_approval {
            self.counts.asked.fetch_add(1, Relaxed);
        }
        ruling
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
