//! Errors of what a session is set up with: its credentials (an API key, ChatGPT tokens, the
//! relay's shared ChatGPT login) and its workspace.

use std::path::PathBuf;
use std::time::Duration;

use codex_relay_codex::PeerError;
use serde_json::Value;

/// Authentication went wrong.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("Codex refused the {kind} login (account/login/start): {source}")]
    Login {
        kind: &'static str,
        #[source]
        source: PeerError,
    },
    #[error("Codex answered account/login/start with {answer}, not a {kind} login")]
    UnexpectedLogin { kind: &'static str, answer: Value },
    #[error("the relay's ChatGPT login: {0}")]
    CodexHome(#[from] LoginError),
    #[error("the relay's ChatGPT login is not open (Relay::open opens it)")]
    NotOpen,
}

/// The relay's ChatGPT login could not be read or refreshed. Never quotes a token.
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a ChatGPT login Codex wrote: {reason}")]
    Invalid { path: PathBuf, reason: String },
    #[error("{path} holds no ChatGPT login (run `codex login` with this CODEX_HOME)")]
    NoLogin { path: PathBuf },
    #[error(
        "the token endpoint refused the refresh ({code}, HTTP {status}): sign in again with `codex login`"
    )]
    Refused { code: String, status: u16 },
    #[error("the token endpoint failed: {reason}")]
    Endpoint { reason: String },
    #[error("waited {waited:?} for {what}")]
    Busy { what: String, waited: Duration },
    #[error("Postgres: {reason}")]
    Postgres { reason: String },
    #[error(
        "instance {by} already spent this login's refresh token (at {at}) and {path} still holds it: \
         every instance must share one CODEX_HOME (docs/CLUSTER.md), or log each machine in on its own"
    )]
    NotShared {
        by: String,
        at: String,
        path: PathBuf,
    },
}

/// Why a workspace was refused or could not be made. Every refusal happens before anything is
/// copied and before Codex starts.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error(
        "{host_path} is outside the allowed host roots ({}); add its directory to allowed_host_roots",
        roots.iter().map(|r| r.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    OutsideAllowedRoots {
        host_path: PathBuf,
        roots: Vec<PathBuf>,
    },
    #[error(
        "{scope} would copy at least {at_least} bytes, over its budget of {limit} bytes; exclude more or raise max_bytes"
    )]
    OverBudget {
        /// `mount <host path>` or `the workspace`.
        scope: String,
        at_least: u64,
        limit: u64,
    },
    #[error("mount path {mount_path:?} is not usable: {why}")]
    InvalidMountPath { mount_path: PathBuf, why: String },
    #[error("glob {pattern:?} is not valid: {why}")]
    InvalidGlob { pattern: String, why: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}
