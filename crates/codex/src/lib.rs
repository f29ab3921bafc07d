//! Talking to a real `codex app-server`: spawning it in its own process group, the JSON-RPC
//! peer over its stdio, the handshake and version detection.
//!
//! - [`process`]: the child process, its process group, its stderr tail and its exit.
//! - [`peer`]: request/response correlation, per-thread routing of notifications and server
//!   requests, a [`Responder`] that always answers, timeouts, overload retries.
//! - [`app_server`]: spawn + handshake + typed calls, the thing most callers want.
//! - [`version`]: `codex --version` and userAgent parsing, the compatibility table and the
//!   version-aware values.

pub mod app_server;
mod codec;
pub mod error;
mod flow;
pub mod peer;
pub mod process;
mod responder;
mod routes;
pub mod tree;
pub mod version;

pub use app_server::{AppServer, AppServerConfig};
pub use error::{ExitInfo, PeerError, StartError};
pub use peer::{
    IncomingRequest, Notification, Peer, PeerConfig, PeerEvent, ReadGate, Subscription,
};
pub use responder::Responder;
pub use version::{CodexVersion, Compatibility};
