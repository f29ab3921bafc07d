//! Errors the engine gives its fronts; each message says what to do.

mod answers;
mod setup;
mod store;

use codex_relay_codex::{PeerError, StartError};

pub use answers::{LinkError, RuleError};
pub use setup::{AuthError, LoginError, WorkspaceError};
pub use store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    #[error("unknown session {0:?}: use a session id from codex_list (or a Codex thread id)")]
    UnknownSession(String),
    #[error(
        "unknown request {request:?} in session {session:?}: it may belong to another session; see the session's pending requests"
    )]
    UnknownRequest { session: String, request: String },
    #[error("request {id} was already resolved ({decision} by {by})")]
    AlreadyResolved {
        id: String,
        decision: String,
        by: String,
    },
    #[error("that answer does not fit request {id}: {message}")]
    InvalidAnswer { id: String, message: String },
    #[error("{max} sessions are already open (MAX_SESSIONS); close one, or raise the limit")]
    TooManySessions { max: usize },
    #[error("session {0} is closed")]
    Closed(String),
    #[error("invalid option: {0}")]
    InvalidOption(String),
    /// The session cannot do that now (e.g. a rollback while a turn runs); the message says
    /// what to wait for.
    #[error("{0}")]
    Busy(String),
    /// The Codex the session runs on does not offer that (e.g. forking from a turn on 0.98).
    #[error("{0}")]
    Unsupported(String),
    /// An option beyond the operator's limits ([`crate::policy::StartPolicy`]).
    #[error("not allowed by this relay's policy: {0}")]
    Forbidden(String),
    #[error("Codex could not be started: {0}")]
    Start(#[from] StartError),
    #[error("Codex refused or failed: {0}")]
    Codex(#[from] PeerError),
    #[error("authentication: {0}")]
    Auth(#[from] AuthError),
    /// Codex's model provider needs OpenAI credentials and Codex holds none: the message
    /// names the command that logs it in.
    #[error("{0}")]
    NotLoggedIn(String),
    #[error("workspace refused: {0}")]
    Workspace(#[from] WorkspaceError),
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// An approval rule that cannot be taken, or is not there.
    #[error("{0}")]
    Rule(RuleError),
    /// An answer link that does not answer (see [`LinkError`]).
    #[error("{0}")]
    AnswerLink(LinkError),
    #[error(
        "Codex crashed or failed to start {crashes} times within {window:?}, so codex-relay stopped restarting it (last: {last}); it tries again in {retry_in:?}, or restart the relay after fixing the cause"
    )]
    CodexCrashLoop {
        crashes: u32,
        window: std::time::Duration,
        last: String,
        retry_in: std::time::Duration,
    },
    /// The instance that runs the session (another instance of the cluster) could not be
    /// reached, or did not answer in time.
    #[error("session {session} runs on instance {owner}, which did not answer: {why}")]
    Owner {
        session: String,
        owner: String,
        why: String,
    },
    /// Another Codex app-server writes the thread (Codex: "already has an active writer"):
    /// which process (read from `/proc`), and what works instead (`explanation` says it all).
    #[error("{explanation}")]
    ActiveWriter {
        session: String,
        /// `(pid, command line)` of each process holding the thread.
        holders: Vec<(u32, String)>,
        explanation: String,
    },
    /// In a cluster: this instance cannot store what it is asked to do now (it holds no lease,
    /// or Postgres does not take its writes), or could not confirm that it stored it.
    #[error("{why}")]
    Unavailable { instance: String, why: String },
    /// The session reached a budget: it starts no turn until the budget is raised.
    #[error("session {session} starts no new turn: {}", reason.message())]
    BudgetReached {
        session: String,
        reason: crate::limits::StopReason,
    },
    /// A session's git worktree could not be made, read, exported or merged (the text says
    /// why: an invalid branch name, not a repository, a merge conflict, ...).
    #[error("worktree: {0}")]
    Worktree(String),
    /// A rate limit is hit and the turn could not wait for it: the queue is full, the limit
    /// resets later than a turn may wait, or the turn waited that long.
    #[error("session {session} starts no new turn now: {why}")]
    RateLimited { session: String, why: String },
    /// An error the owning instance returned, of a kind that has no fields worth keeping here
    /// (its [`RelayError::code`] and text are kept).
    #[error("{message}")]
    Remote { code: String, message: String },
}

/// A [`RelayError`] as it travels between instances of a cluster.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WireError {
    pub code: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<usize>,
    /// The budget a session reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::limits::StopReason>,
}

impl From<crate::crash_loop::GaveUp> for RelayError {
    fn from(g: crate::crash_loop::GaveUp) -> Self {
        RelayError::CodexCrashLoop {
            crashes: g.crashes,
            window: g.window,
            last: g.last,
            retry_in: g.retry_in,
        }
    }
}

impl RelayError {
    /// A stable word for the kind of error, as the HTTP front's error codes name it.
    pub fn code(&self) -> &str {
        match self {
            RelayError::UnknownSession(_) => "unknown_session",
            RelayError::UnknownRequest { .. } => "unknown_request",
            RelayError::AlreadyResolved { .. } => "already_resolved",
            RelayError::InvalidAnswer { .. } => "invalid_answer",
            RelayError::TooManySessions { .. } => "too_many_sessions",
            RelayError::Closed(_) => "session_closed",
            RelayError::InvalidOption(_) => "invalid_option",
            RelayError::Busy(_) => "session_busy",
            RelayError::Unsupported(_) => "unsupported_by_codex",
            RelayError::Forbidden(_) => "forbidden_option",
            RelayError::Start(_) => "codex_unavailable",
            RelayError::Codex(_) => "codex_error",
            RelayError::Auth(_) => "codex_auth_failed",
            RelayError::NotLoggedIn(_) => "codex_not_logged_in",
            RelayError::Workspace(_) => "workspace_refused",
            RelayError::Store(_) => "store_unavailable",
            RelayError::CodexCrashLoop { .. } => "codex_crash_loop",
            RelayError::Owner { .. } => "owner_unreachable",
            RelayError::Unavailable { .. } => "instance_unavailable",
            RelayError::ActiveWriter { .. } => "active_writer",
            RelayError::Remote { code, .. } => code,
            RelayError::BudgetReached { .. } => "budget_reached",
            RelayError::RateLimited { .. } => "rate_limited",
            RelayError::Worktree(_) => "worktree_failed",
            RelayError::Rule(r) => match r {
                RuleError::Invalid { .. } => "invalid_rule",
                RuleError::Unknown(_) => "unknown_rule",
                RuleError::FromFile(_) => "rule_from_file",
                RuleError::Store(_) => "store_unavailable",
            },
            RelayError::AnswerLink(l) => match l {
                LinkError::Invalid | LinkError::OtherRequest => "invalid_link",
                LinkError::Expired => "link_expired",
                LinkError::Used => "link_used",
                LinkError::AlreadyAnswered { .. } => "already_resolved",
                LinkError::Gone => "request_gone",
                LinkError::Store(_) => "store_unavailable",
                LinkError::NotTaken(_) => "answer_not_taken",
            },
        }
    }

    /// The error as another instance receives it.
    pub fn to_wire(&self) -> WireError {
        let mut w = WireError {
            code: self.code().to_owned(),
            message: self.to_string(),
            session: None,
            request: None,
            decision: None,
            by: None,
            max: None,
            budget: None,
        };
        match self {
            RelayError::UnknownSession(s) | RelayError::Closed(s) => w.session = Some(s.clone()),
            RelayError::UnknownRequest { session, request } => {
                w.session = Some(session.clone());
                w.request = Some(request.clone());
            }
            RelayError::AlreadyResolved { id, decision, by } => {
                w.request = Some(id.clone());
                w.decision = Some(decision.clone());
                w.by = Some(by.clone());
            }
            RelayError::InvalidAnswer { id, message } => {
                w.request = Some(id.clone());
                w.message = message.clone();
            }
            RelayError::InvalidOption(m)
            | RelayError::Forbidden(m)
            | RelayError::Busy(m)
            | RelayError::Unsupported(m)
            | RelayError::Worktree(m) => w.message = m.clone(),
            RelayError::TooManySessions { max } => w.max = Some(*max),
            RelayError::BudgetReached { session, reason } => {
                w.session = Some(session.clone());
                w.budget = Some(reason.clone());
            }
            RelayError::RateLimited { session, why } => {
                w.session = Some(session.clone());
                w.message = why.clone();
            }
            _ => {}
        }
        w
    }

    /// The error another instance returned, as the variant it was there where that matters to
    /// the fronts (404, 409, 422 and their fields); others keep their code and text.
    pub fn from_wire(w: WireError) -> Self {
        let text = |o: Option<String>| o.unwrap_or_default();
        match w.code.as_str() {
            "unknown_session" => RelayError::UnknownSession(text(w.session)),
            "session_closed" => RelayError::Closed(text(w.session)),
            "unknown_request" => RelayError::UnknownRequest {
                session: text(w.session),
                request: text(w.request),
            },
            "already_resolved" => RelayError::AlreadyResolved {
                id: text(w.request),
                decision: text(w.decision),
                by: text(w.by),
            },
            "invalid_answer" => RelayError::InvalidAnswer {
                id: text(w.request),
                message: w.message,
            },
            "invalid_option" => RelayError::InvalidOption(w.message),
            "session_busy" => RelayError::Busy(w.message),
            "unsupported_by_codex" => RelayError::Unsupported(w.message),
            "forbidden_option" => RelayError::Forbidden(w.message),
            "too_many_sessions" => RelayError::TooManySessions {
                max: w.max.unwrap_or_default(),
            },
            "budget_reached" if w.budget.is_some() => RelayError::BudgetReached {
                session: text(w.session),
                reason: w
                    .budget
                    .unwrap_or(crate::limits::StopReason::Idle { idle_ms: 0 }),
            },
            "worktree_failed" => RelayError::Worktree(w.message),
            "rate_limited" => RelayError::RateLimited {
                session: text(w.session),
                why: w.message,
            },
            _ => RelayError::Remote {
                code: w.code,
                message: w.message,
            },
        }
    }

    /// A failed `thread/resume`: Codex does not know the id (→ `UnknownSession`), or
    /// something else went wrong (kept as the Codex error).
    pub(crate) fn from_resume(id: &str, e: PeerError) -> Self {
        let text = e.to_string().to_ascii_lowercase();
        let unknown = [
            "no rollout",
            "not found",
            "invalid thread",
            "invalid session id",
            "unknown thread",
            "no thread",
        ];
        if matches!(e, PeerError::Rpc { .. }) && unknown.iter().any(|u| text.contains(u)) {
            RelayError::UnknownSession(id.to_owned())
        } else if matches!(e, PeerError::Rpc { .. }) && text.contains("active writer") {
            active_writer(id)
        } else {
            RelayError::Codex(e)
        }
    }
}

/// The active-writer conflict explained: who holds the thread, and the offers that work.
fn active_writer(id: &str) -> RelayError {
    use codex_relay_codex::platform::writers::holders_of_thread;
    let holders = holders_of_thread(id);
    let who = if holders.is_empty() {
        "another Codex app-server (not one this user can see in /proc)".to_owned()
    } else {
        holders
            .iter()
            .map(|h| format!("process {} (`{}`)", h.pid, h.command))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut offers = Vec::new();
    if holders.iter().any(|h| h.is_daemon()) {
        offers.push(
            "attach to that Codex daemon (`codex-relay serve --attach`): its threads, this one included, become sessions here"
                .to_owned(),
        );
    } else {
        offers.push(
            "stop that process (end its `codex` session), or run Codex as the daemon (`codex app-server daemon start`) and attach to it (`codex-relay serve --attach`)"
                .to_owned(),
        );
    }
    offers.push(format!(
        "read it without writing (Codex's thread/read: `Relay::read_thread`, GET /api/threads/{id})"
    ));
    offers.push(format!(
        "fork it into a new session of this relay (Codex's thread/fork: `Relay::fork_thread`, POST /api/threads/{id}/fork)"
    ));
    let explanation = format!(
        "thread {id} already has an active writer: {who} holds it, and Codex lets one app-server write a thread at a time. What works: {}.",
        offers.join("; or ")
    );
    RelayError::ActiveWriter {
        session: id.to_owned(),
        holders: holders.into_iter().map(|h| (h.pid, h.command)).collect(),
        explanation,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_cross_instances_as_the_variant_the_fronts_map() {
        let cases = [
            RelayError::UnknownSession("s".into()),
            RelayError::Closed("s".into()),
            RelayError::UnknownRequest {
                session: "s".into(),
                request: "r".into(),
            },
            RelayError::AlreadyResolved {
                id: "r".into(),
                decision: "deny".into(),
                by: "timeout".into(),
            },
            RelayError::InvalidAnswer {
                id: "r".into(),
                message: "no such option".into(),
            },
            RelayError::InvalidOption("bad".into()),
            RelayError::Forbidden("outside roots".into()),
            RelayError::TooManySessions { max: 3 },
            RelayError::RateLimited {
                session: "s".into(),
                why: "64 turns already wait".into(),
            },
            RelayError::BudgetReached {
                session: "s".into(),
                reason: crate::limits::StopReason::Budget {
                    budget: crate::limits::BudgetKind::OutputTokens,
                    limit: 10.0,
                    used: 12.0,
                },
            },
        ];
        for e in cases {
            let back = RelayError::from_wire(e.to_wire());
            assert_eq!(back.to_string(), e.to_string());
            assert_eq!(back.code(), e.code());
        }
        let crash = RelayError::Owner {
            session: "s".into(),
            owner: "a".into(),
            why: "no answer within 30s".into(),
        };
        let back = RelayError::from_wire(crash.to_wire());
        assert_eq!(
            (back.code(), back.to_string()),
            (crash.code(), crash.to_string())
        );
    }
}
