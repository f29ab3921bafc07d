//! The engine API of approvals beyond answering: the relay's rules (list, put, delete; loaded
//! at open with the `--rules` file's), a rule suggested from a pending request, and answer
//! links (made for notifications, checked and used by the link's page).

use std::time::Duration;

use crate::answer::Answer;
use crate::broker::{Broker, PendingView, Resolution};
use crate::decider::Decider;
use crate::error::RelayError;
use crate::ids::now_ms;
use crate::links::LinkError;
use crate::pending::PendingDetails;
use crate::relay::Relay;
use crate::rules::{Action, Compiled, Rule, RuleError, RuleSpec, Rules, Source};
use crate::store::{RuleRecord, Store};

fn record(rule: &Rule) -> RuleRecord {
    RuleRecord {
        name: rule.spec.name.clone(),
        spec: serde_json::to_string(&rule.spec).unwrap_or_default(),
        source: rule.source.as_str().to_owned(),
        created_at: rule.created_at,
        updated_at: rule.updated_at,
    }
}

/// The stored rules, with the file's (when given) in place of what a file gave before.
pub(crate) async fn load_rules(
    store: &Store,
    file: Option<&[RuleSpec]>,
) -> Result<Rules, RelayError> {
    let rules = Rules::default();
    rules.replace(compile_rules(store, file).await?);
    Ok(rules)
}

/// Reads the stored rules again, in place: another instance of the cluster changed them.
pub(crate) async fn reload_rules(store: &Store, broker: &Broker) -> Result<(), RelayError> {
    let fresh = compile_rules(store, None).await?;
    broker.rules().replace(fresh);
    Ok(())
}

async fn compile_rules(
    store: &Store,
    file: Option<&[RuleSpec]>,
) -> Result<Vec<Compiled>, RelayError> {
    let now = now_ms();
    let mut kept = Vec::new();
    for row in store.rules().await? {
        let source = Source::parse(&row.source);
        if file.is_some() && source == Source::File {
            // The file says what file rules there are now.
            if !file.is_some_and(|f| f.iter().any(|s| s.name == row.name)) {
                store.delete_rule(&row.name).await?;
                tracing::info!(rule = %row.name, "rule removed: no longer in the rules file");
            }
            continue;
        }
        let spec: RuleSpec = match serde_json::from_str(&row.spec) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(rule = %row.name, "a stored rule does not load and is ignored: {e}");
                continue;
            }
        };
        let rule = Rule {
            spec,
            source,
            created_at: row.created_at,
            updated_at: row.updated_at,
        };
        match Compiled::new(rule) {
            Ok(c) => kept.push(c),
            Err(e) => tracing::error!(rule = %row.name, "a stored rule is ignored: {e}"),
        }
    }
    for spec in file.unwrap_or_default() {
        if let Some(i) = kept.iter().position(|c| c.rule.spec.name == spec.name) {
            tracing::warn!(rule = %spec.name, "the rules file replaces the rule of the same name made over the API");
            kept.remove(i);
        }
        let rule = Rule {
            spec: spec.clone(),
            source: Source::File,
            created_at: now,
            updated_at: now,
        };
        let compiled = Compiled::new(rule).map_err(RelayError::Rule)?;
        store.upsert_rule(&record(&compiled.rule)).await?;
        kept.push(compiled);
    }
    Ok(kept)
}

impl Relay {
    /// The relay's rules, by name.
    pub fn rules(&self) -> Vec<Rule> {
        self.inner.broker.rules().list()
    }

    /// The rules' counters (decisions made since the relay opened).
    pub fn rule_counts(&self) -> &crate::rules::Counts {
        self.inner.broker.rules().counts()
    }

    /// Creates or replaces a rule made over the API (a rule from the file cannot be changed
    /// this way); it applies to requests that open from now on.
    pub async fn put_rule(&self, spec: RuleSpec) -> Result<Rule, RelayError> {
        spec.check().map_err(RelayError::Rule)?;
        let rules = self.inner.broker.rules();
        let before = rules.get(&spec.name);
        if before.as_ref().is_some_and(|r| r.source == Source::File) {
            return Err(RelayError::Rule(RuleError::FromFile(spec.name)));
        }
        let now = now_ms();
        let rule = Rule {
            spec,
            source: Source::Api,
            created_at: before.map_or(now, |b| b.created_at),
            updated_at: now,
        };
        self.inner.store.upsert_rule(&record(&rule)).await?;
        rules.put(Compiled::new(rule.clone()).map_err(RelayError::Rule)?);
        self.placement().rules_changed().await;
        tracing::info!(rule = %rule.spec.name, action = rule.spec.action.as_str(), "rule saved");
        Ok(rule)
    }

    /// Deletes a rule made over the API.
    pub async fn delete_rule(&self, name: &str) -> Result<(), RelayError> {
        let rules = self.inner.broker.rules();
        match rules.get(name) {
            None => Err(RelayError::Rule(RuleError::Unknown(name.to_owned()))),
            Some(r) if r.source == Source::File => {
                Err(RelayError::Rule(RuleError::FromFile(name.to_owned())))
            }
            Some(_) => {
                self.inner.store.delete_rule(name).await?;
                rules.remove(name);
                self.placement().rules_changed().await;
                tracing::info!(rule = %name, "rule deleted");
                Ok(())
            }
        }
    }

    /// A rule for requests like `request` (open or resolved): "always `action` this command
    /// (Codex's proposed prefix when it offers one, else the command's own words) in this
    /// directory", or these files. The caller may change it before saving.
    pub fn suggest_rule(&self, request: &PendingView, action: Action) -> Option<RuleSpec> {
        let cwd = self.status(&request.session_id).ok().and_then(|s| s.cwd);
        let base = |name: String| RuleSpec {
            name,
            action,
            kinds: Vec::new(),
            argv: Vec::new(),
            command: None,
            cwd: cwd.clone(),
            paths: Vec::new(),
            labels: Vec::new(),
            reason: (action == Action::Deny).then(|| "not allowed by the operator".to_owned()),
            // Never suggested: a person opts in, knowing what it grants.
            outside_sandbox: false,
        };
        match &request.details {
            PendingDetails::CommandApproval {
                command,
                cwd: at,
                codex_rule,
                ..
            } => {
                let parsed = crate::rules::shell::parse(command);
                let argv: Vec<String> = match (codex_rule, parsed.argv()) {
                    (Some(prefix), _) => prefix.clone(),
                    (None, Some(argv)) => argv.iter().take(2).cloned().collect(),
                    (None, None) => parsed.commands.first()?.iter().take(2).cloned().collect(),
                };
                let name = format!("{}-{}", action.as_str(), slug(&argv.join("-")));
                Some(RuleSpec {
                    argv,
                    cwd: at.clone().or(cwd.clone()),
                    ..base(name)
                })
            }
            PendingDetails::FileChangeApproval { changes, .. } if !changes.is_empty() => {
                let root = cwd.clone().unwrap_or_default();
                let paths = changes
                    .iter()
                    .map(|c| {
                        c.path
                            .strip_prefix(&format!("{}/", root.trim_end_matches('/')))
                            .unwrap_or(&c.path)
                            .to_owned()
                    })
                    .collect::<Vec<_>>();
                let name = format!("{}-files-{}", action.as_str(), slug(&paths.join("-")));
                Some(RuleSpec {
                    paths,
                    ..base(name)
                })
            }
            _ => None,
        }
    }

    /// A new answer link for an open request, usable once within `ttl`.
    pub async fn mint_answer_link(
        &self,
        request_id: &str,
        ttl: Duration,
    ) -> Result<String, RelayError> {
        let p = self
            .pending_by_id(request_id)
            .ok_or_else(|| RelayError::AnswerLink(LinkError::Gone))?;
        let expires = now_ms() + ttl.as_millis() as i64;
        self.inner
            .links
            .mint(&self.inner.store, &p.session_id, request_id, expires)
            .await
    }

    /// The request an answer link answers, if the link is good (it is not used by this).
    pub async fn check_answer_link(
        &self,
        request_id: &str,
        token: &str,
    ) -> Result<PendingView, LinkError> {
        let row = self
            .inner
            .links
            .check(&self.inner.store, request_id, token)
            .await?;
        self.open_request(request_id, &row.session_id)
    }

    fn open_request(&self, request_id: &str, session: &str) -> Result<PendingView, LinkError> {
        match self.pending_by_id(request_id) {
            Some(p) if p.session_id == session => Ok(p),
            Some(_) => Err(LinkError::OtherRequest),
            None => Err(match self.inner.broker.resolution(request_id) {
                Some(r) => LinkError::AlreadyAnswered {
                    decision: r.decision.as_str().to_owned(),
                    by: r.by.as_str().to_owned(),
                },
                None => LinkError::Gone,
            }),
        }
    }

    /// Answers the request an answer link is for, using the link up (once). Only approve
    /// (once) and deny are taken: a link never approves for the session.
    pub async fn answer_by_link(
        &self,
        request_id: &str,
        token: &str,
        answer: Answer,
    ) -> Result<Resolution, LinkError> {
        self.answer_by_link_as(request_id, token, answer, None)
            .await
    }

    /// [`Self::answer_by_link`], naming the person who answered when the front knows them (a
    /// risky approval stepped up with their passkey).
    pub async fn answer_by_link_as(
        &self,
        request_id: &str,
        token: &str,
        answer: Answer,
        person: Option<crate::person::Person>,
    ) -> Result<Resolution, LinkError> {
        if !matches!(
            answer,
            Answer::Approve {
                scope: crate::answer::Scope::Once
            } | Answer::Deny { .. }
        ) {
            return Err(LinkError::Invalid);
        }
        let row = self
            .inner
            .links
            .check(&self.inner.store, request_id, token)
            .await?;
        self.open_request(request_id, &row.session_id)?;
        // Through the door like any answer: carried to the session's owner in a cluster. The
        // request takes one answer, so the link is marked used once its answer was taken; an
        // answer not confirmed (the store down, the owner silent: it may still take it later)
        // leaves it usable, and using it again answers or says who answered, never twice.
        let by = Decider::AnswerLink;
        let resolution = self
            .decide(&row.session_id, request_id, answer, by, person)
            .await
            .map_err(|e| match e {
                RelayError::AlreadyResolved { decision, by, .. } => {
                    LinkError::AlreadyAnswered { decision, by }
                }
                RelayError::UnknownRequest { .. } | RelayError::UnknownSession(_) => {
                    LinkError::Gone
                }
                RelayError::InvalidAnswer { .. } => LinkError::Invalid,
                other => LinkError::NotTaken(other.to_string()),
            })?;
        match self.inner.links.consume(&self.inner.store, token).await {
            Ok(true) => {}
            // Used by a racing post whose answer lost to this one: the request is answered.
            Ok(false) => {}
            Err(e) => tracing::warn!(
                request = %request_id,
                "an answer link answered but could not be marked used (its request is answered, so it answers nothing more): {e}"
            ),
        }
        Ok(resolution)
    }

    /// Forgets answer links that expired over a day ago (their requests are long resolved).
    pub async fn prune_answer_links(&self) -> Result<u64, RelayError> {
        Ok(self
            .inner
            .store
            .prune_answer_links(now_ms() - 24 * 3600 * 1000)
            .await?)
    }
}

/// A rule name from free text: lower-case letters, digits and `-`, at most 40.
fn slug(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let s: String = out.trim_matches('-').chars().take(40).collect();
    if s.is_empty() {
        "rule".into()
    } else {
        s.trim_end_matches('-').to_owned()
    }
}
