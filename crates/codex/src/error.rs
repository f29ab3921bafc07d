//! Typed errors of the Codex layer.

use std::time::Duration;

use codex_relay_protocol::RpcError;

/// How a Codex process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitInfo {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

impl std::fmt::Display for ExitInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.code, self.signal) {
            (Some(c), _) => write!(f, "exit code {c}"),
            (None, Some(s)) => write!(f, "signal {s}"),
            (None, None) => write!(f, "unknown status"),
        }
    }
}

/// Why a call on the peer failed. Cheap to clone: every pending call and subscriber gets one.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PeerError {
    #[error("codex app-server exited ({status}){}", tail_suffix(.stderr_tail))]
    Exited {
        status: ExitInfo,
        stderr_tail: String,
    },
    #[error("the connection to codex app-server closed: {0}")]
    Disconnected(String),
    #[error("the peer was shut down")]
    Shutdown,
    #[error("{method} got no answer within {after:?}")]
    Timeout { method: String, after: Duration },
    #[error("{method} failed: {error}")]
    Rpc { method: String, error: RpcError },
    #[error("{method} was refused as overloaded {attempts} times; giving up")]
    Overloaded { method: String, attempts: u32 },
    #[error("{method} is not supported by this Codex ({detail})")]
    Unsupported { method: String, detail: String },
    #[error("the answer to {method} did not have the expected shape: {detail}")]
    Decode { method: String, detail: String },
    #[error("could not encode {method}: {detail}")]
    Encode { method: String, detail: String },
}

fn tail_suffix(tail: &str) -> String {
    if tail.trim().is_empty() {
        String::new()
    } else {
        format!("; last stderr:\n{tail}")
    }
}

impl PeerError {
    /// True when the process or connection is gone (as opposed to one call failing).
    pub fn is_closed(&self) -> bool {
        matches!(
            self,
            PeerError::Exited { .. } | PeerError::Disconnected(_) | PeerError::Shutdown
        )
    }
}

/// Why `codex app-server` could not be started.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("could not run {binary}: {source}{}", spawn_hint(.source))]
    Spawn {
        binary: String,
        source: std::io::Error,
    },
    /// The program wrote something that is not JSON-RPC to stdout before answering
    /// `initialize`: not Codex's app-server, or a wrapper that prints to stdout.
    #[error(
        "{binary} app-server printed something that is not a JSON-RPC message before answering initialize: {first_line:?} (is it really Codex, or a wrapper printing to stdout?); then: {then}"
    )]
    NotAppServer {
        binary: String,
        first_line: String,
        then: String,
    },
    #[error("`{binary} --version` failed: {detail}")]
    VersionProbe { binary: String, detail: String },
    #[error(
        "Codex {found} is not supported: codex-relay needs the app-server v2 protocol \
         (Codex {min_supported} or newer; tested with {tested})"
    )]
    Unsupported {
        found: String,
        min_supported: String,
        tested: String,
    },
    #[error("codex app-server did not finish the handshake within {after:?}{}", tail_suffix(.stderr_tail))]
    HandshakeTimeout {
        after: Duration,
        stderr_tail: String,
    },
    #[error("the initialize handshake failed: {0}")]
    Handshake(#[source] PeerError),
}

fn spawn_hint(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => format!(
            " (no such file: install the Codex codex-relay is tested with, `npm install -g @openai/codex@{}`, or point CODEX_CLI_PATH / --codex at one)",
            crate::version::NEWEST_TESTED
        ),
        std::io::ErrorKind::PermissionDenied => {
            " (not executable: `chmod +x` it, or point CODEX_CLI_PATH / --codex at the real codex)"
                .into()
        }
        _ => String::new(),
    }
}
