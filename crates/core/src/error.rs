//! Errors the engine gives its fronts; each message says what to do.

use codex_relay_codex::{PeerError, StartError};

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
    /// An option beyond the operator's limits ([`crate::policy::StartPolicy`]).
    #[error("not allowed by this relay's policy: {0}")]
    Forbidden(String),
    #[error("Codex could not be started: {0}")]
    Start(#[from] StartError),
    #[error("Codex refused or failed: {0}")]
    Codex(#[from] PeerError),
    #[error("authentication: {0}")]
    Auth(#[from] crate::auth::AuthError),
    #[error("workspace refused: {0}")]
    Workspace(#[from] crate::workspace::WorkspaceError),
    #[error("store: {0}")]
    Store(#[from] crate::store::StoreError),
    /// An approval rule that cannot be taken, or is not there.
    #[error("{0}")]
    Rule(crate::rules::RuleError),
    /// An answer link that does not answer (see [`crate::links::LinkError`]).
    #[error("{0}")]
    AnswerLink(crate::links::LinkError),
    #[error(
        "Codex crashed or failed to start {crashes} times within {window:?}, so codex-relay stopped restarting it (last: {last}); it tries again in {retry_in:?}, or restart the relay after fixing the cause"
    )]
    CodexCrashLoop {
        crashes: u32,
        window: std::time::Duration,
        last: String,
        retry_in: std::time::Duration,
    },
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
        } else {
            RelayError::Codex(e)
        }
    }
}
