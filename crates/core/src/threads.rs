//! Thread operations a session offers beyond its turns (docs/AGENTS.md, "Thread operations"):
//! a review, a fork (whole, or through a turn) that becomes a new session, dropping the last
//! turns, compaction, the model list, and the session's model and reasoning effort. Their
//! types, and the relay's verbs (place, then run: the operations are in op.rs, their runners in
//! session/thread_ops.rs).

use serde::{Deserialize, Serialize};

use crate::error::RelayError;
use crate::event::{Ev, Role};
use crate::relay::Relay;
use crate::session::{SayOutcome, SessionHandle, SessionShared};

/// What a review looks at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ReviewTarget {
    /// The working tree: staged, unstaged and untracked files.
    UncommittedChanges,
    /// The current branch against a base branch.
    BaseBranch { branch: String },
    /// What one commit introduced (`title`: a label for people, e.g. its subject).
    Commit {
        sha: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
    },
    /// Free-form review instructions.
    Custom { instructions: String },
}

impl ReviewTarget {
    pub(crate) fn to_wire(&self) -> codex_relay_protocol::v2::ReviewTarget {
        use codex_relay_protocol::v2::ReviewTarget as W;
        match self.clone() {
            ReviewTarget::UncommittedChanges => W::UncommittedChanges,
            ReviewTarget::BaseBranch { branch } => W::BaseBranch { branch },
            ReviewTarget::Commit { sha, title } => W::Commit { sha, title },
            ReviewTarget::Custom { instructions } => W::Custom { instructions },
        }
    }

    /// Refuses empty branch names, commits and instructions.
    pub fn check(&self) -> Result<(), RelayError> {
        let empty = match self {
            ReviewTarget::UncommittedChanges => None,
            ReviewTarget::BaseBranch { branch } => branch.trim().is_empty().then_some("branch"),
            ReviewTarget::Commit { sha, .. } => sha.trim().is_empty().then_some("sha"),
            ReviewTarget::Custom { instructions } => {
                instructions.trim().is_empty().then_some("instructions")
            }
        };
        match empty {
            Some(field) => Err(RelayError::InvalidOption(format!(
                "a review target's {field} must not be empty"
            ))),
            None => Ok(()),
        }
    }
}

/// A model Codex offers (`model/list`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ModelInfo {
    /// What to pass as a session's `model`.
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub is_default: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hidden: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_effort: Option<String>,
    /// The reasoning efforts it takes (`low`, `medium`, `high`, ...).
    pub efforts: Vec<String>,
}

/// A session's model and reasoning effort: what its next turns run with (unset: Codex's
/// configured default).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ModelChoice {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<String>,
}

impl ModelChoice {
    /// Refuses an empty model name and an effort that is not one word.
    pub fn check(&self) -> Result<(), RelayError> {
        if self.model.as_deref().is_some_and(|m| m.trim().is_empty()) {
            return Err(RelayError::InvalidOption(
                "model must not be empty (see the model list)".into(),
            ));
        }
        if let Some(e) = &self.effort
            && (e.is_empty() || !e.chars().all(|c| c.is_ascii_lowercase()))
        {
            return Err(RelayError::InvalidOption(format!(
                "reasoning effort {e:?} is not one of Codex's words (none, minimal, low, medium, high, xhigh)"
            )));
        }
        Ok(())
    }
}

/// What a rollback did: the turns it dropped, and the turns the thread's history holds now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RolledBack {
    pub session_id: String,
    pub dropped: Vec<String>,
    pub turns: Vec<String>,
}

/// The thread a fork made, before it is a session.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ForkedThread {
    pub thread_id: String,
    /// The source's turns the fork holds, in order.
    pub kept: Vec<String>,
    /// Codex names the fork's new turns as it named the source's (0.98 counts turns per
    /// thread from "0"): the copied turns are renamed `<turn>@<source>` so no two turns of
    /// the fork's log share an id.
    #[serde(default)]
    pub rename_turns: bool,
}

/// A fork: the new session, and the turns of its source it starts with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Forked {
    pub session_id: String,
    pub from: String,
    pub turns: Vec<String>,
}

/// Event kinds a fork copies from its source (the conversation; not the source's requests,
/// usage, status or notes, which were the source's).
fn copied(ev: &Ev) -> bool {
    matches!(
        ev,
        Ev::Text { .. }
            | Ev::ToolCallStart { .. }
            | Ev::ToolCallEnd { .. }
            | Ev::File { .. }
            | Ev::Photo { .. }
            | Ev::TurnStart {}
            | Ev::TurnEnd { .. }
            | Ev::Plan { .. }
            | Ev::Review { .. }
    )
}

impl Relay {
    /// Starts a review turn on the session's thread; its `review` event carries the findings,
    /// and the turn's result is that review (structured).
    pub async fn review(&self, id: &str, target: ReviewTarget) -> Result<SayOutcome, RelayError> {
        target.check()?;
        let session = id.to_owned();
        self.turn_op(id, crate::op::Review { session, target })
            .await
    }

    /// Compacts the session's thread (Codex summarizes its history; it runs as a turn).
    pub async fn compact(&self, id: &str) -> Result<(), RelayError> {
        let session = id.to_owned();
        self.place_and_run(crate::op::Compact { session }).await
    }

    /// Drops the session's last `turns` turns from the thread's history (not the files they
    /// changed). The log keeps their events and records a `rolled-back` event.
    pub async fn rollback(&self, id: &str, turns: u32) -> Result<RolledBack, RelayError> {
        if turns == 0 {
            return Err(RelayError::InvalidOption(
                "roll back at least one turn".into(),
            ));
        }
        let session = id.to_owned();
        self.place_and_run(crate::op::Rollback { session, turns })
            .await
    }

    /// Sets the model and reasoning effort of the session's next turns (the fields given;
    /// the others kept).
    pub async fn set_model(
        &self,
        id: &str,
        choice: ModelChoice,
    ) -> Result<ModelChoice, RelayError> {
        choice.check()?;
        let session = id.to_owned();
        self.place_and_run(crate::op::SetModel { session, choice })
            .await
    }

    /// The models Codex offers (hidden ones too with `include_hidden`).
    pub async fn models(&self, include_hidden: bool) -> Result<Vec<ModelInfo>, RelayError> {
        use codex_relay_protocol::v2::{ModelList, ModelListParams};
        let server = self.inner.servers.any().await?;
        let mut out = Vec::new();
        let mut cursor = None;
        // A bounded number of pages: a Codex that keeps answering a cursor ends here.
        for _ in 0..20 {
            let page = server
                .call::<ModelList>(&ModelListParams {
                    cursor: cursor.take(),
                    limit: None,
                    include_hidden: (include_hidden && server.version().has_thread_revert())
                        .then_some(true),
                })
                .await?;
            out.extend(page.data.into_iter().map(|m| {
                ModelInfo {
                    id: m.id,
                    display_name: m.display_name,
                    description: m.description,
                    is_default: m.is_default,
                    hidden: m.hidden,
                    default_effort: m.default_reasoning_effort,
                    efforts: m
                        .supported_reasoning_efforts
                        .into_iter()
                        .map(|e| e.reasoning_effort)
                        .collect(),
                }
            }));
            match page.next_cursor {
                Some(next) if !next.is_empty() => cursor = Some(next),
                _ => break,
            }
        }
        Ok(out)
    }

    /// Forks the session into a new one: all of its history, or through `through` (a turn id
    /// of its history; Codex 0.169+). The new session has the source's settings and starts
    /// with a `forked` event and a copy of the kept turns' events.
    pub async fn fork(&self, id: &str, through: Option<String>) -> Result<Forked, RelayError> {
        let session = id.to_owned();
        let source = self.known_anywhere(id).await?;
        let thread = self
            .place_and_run(crate::op::Fork {
                session,
                through: through.clone(),
            })
            .await?;
        let handle = self.adopt_fork(&source, &thread, through).await?;
        let shared = &handle.shared;
        Ok(Forked {
            session_id: handle.id().to_owned(),
            from: id.to_owned(),
            turns: shared.turns(),
        })
    }

    /// The forked thread as a session of this relay, with its source's settings, on the same
    /// Codex process as its source where that runs here.
    async fn adopt_fork(
        &self,
        source: &SessionHandle,
        thread: &ForkedThread,
        through: Option<String>,
    ) -> Result<SessionHandle, RelayError> {
        let id = thread.thread_id.clone();
        let meta = source.shared.meta();
        let opts = meta.options.clone();
        let slot = self.inner.slots.claim(&id)?;
        self.placement().claim(&self.host(), &id).await?;
        self.inner.servers.place_beside(&id, source.id());
        let undo = |e: RelayError| {
            self.inner.servers.release(&id);
            self.placement().unclaim(&id);
            e
        };
        let server = self
            .inner
            .servers
            .server_for(&id, opts.codex_home.clone().map(Into::into))
            .await
            .map_err(undo)?;
        let mut params = codex_relay_protocol::v2::ThreadResumeParams {
            thread_id: id.clone(),
            cwd: opts.cwd.clone(),
            model: opts.model.clone(),
            approval_policy: opts.approval_policy,
            sandbox: opts.sandbox,
            config: opts.config.clone(),
            base_instructions: opts.base_instructions.clone(),
            developer_instructions: opts.developer_instructions.clone(),
            ..Default::default()
        };
        server
            .version()
            .adapt_approval_policy(&mut params.approval_policy);
        let resumed = server
            .call::<codex_relay_protocol::v2::ThreadResume>(&params)
            .await
            .map_err(|e| undo(RelayError::from_resume(&id, e)))?;
        self.inner
            .config
            .policy
            .check_effective(&crate::policy::Effective::of(&resumed), &self.default_cwd())
            .map_err(undo)?;
        let fork_meta = crate::views::SessionMeta {
            options: crate::config::CreateOptions {
                prompt: None,
                images: Vec::new(),
                ..opts
            },
            tools: meta.tools.clone(),
            ..Default::default()
        };
        let snapshot = source.snapshot();
        let state = SessionShared::fresh_state(snapshot.cwd, snapshot.model, fork_meta);
        let shared = SessionShared::new(
            id.clone(),
            self.inner.store.clone(),
            self.inner.config.event_buffer,
            state,
        );
        // Its log starts with where it came from and the kept turns' events, renumbered,
        // before anything Codex says of the new thread.
        shared.append(
            Role::System,
            None,
            Ev::Forked {
                from: source.id().to_owned(),
                through,
            },
        );
        let kept: std::collections::HashSet<&str> =
            thread.kept.iter().map(String::as_str).collect();
        let mut after = 0;
        loop {
            let page = self.events(source.id(), after, 1000).await.map_err(undo)?;
            let Some(last) = page.last() else { break };
            after = last.seq;
            for e in &page {
                if e.agent.is_none()
                    && e.turn.as_deref().is_some_and(|t| kept.contains(t))
                    && copied(&e.ev)
                {
                    let turn = match &e.turn {
                        Some(t) if thread.rename_turns => Some(format!("{t}@{}", source.id())),
                        other => other.clone(),
                    };
                    shared.append(e.role, turn, e.ev.clone());
                }
            }
        }
        shared.forked_spend_reset();
        if !thread.rename_turns {
            // Codex lists the fork's turns by the source's ids: those are its history.
            shared.set_turns(thread.kept.clone());
        }
        shared.persist();
        Ok(self.spawn_session(shared, Some(server), &[], Some(slot)))
    }

    /// Runs an operation that starts a turn where the session runs, and guards that turn with
    /// the session's limits there.
    async fn turn_op<O>(&self, id: &str, op: O) -> Result<SayOutcome, RelayError>
    where
        O: crate::session::ActorOp<Reply = SayOutcome>,
    {
        let handle = self.known_anywhere(id).await?;
        if handle.remote {
            return self.place_and_run(op).await;
        }
        let said = self.place_and_run(op).await?;
        self.guard_turn(&handle.shared, &said, Default::default());
        Ok(said)
    }
}
