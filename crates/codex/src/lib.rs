//! Talking to a real `codex app-server`: spawning it in its own process group, the JSON-RPC
//! peer over its stdio, the handshake and version detection.
//!
//! - [`process`]: the child process, its process group, its stderr tail and its exit.
//! - [`peer`]: request/response correlation, per-thread routing of notifications and server
//!   requests, a [`Responder`] that always answers, timeouts, overload retries.
//! - [`app_server`]: spawn + handshake + typed calls, the thing most callers want.
//! - [`platform`]: what the relay asks of the operating system (process groups and trees,
//!   the owner of a local connection), behind one documented contract.
//! - [`daemon`]: attaching to the Codex daemon the terminal uses (its socket checked, WebSocket
//!   over it, the same peer).
//! - [`locate`]: which Codex runs when none is named (PATH, then the pinned one in the
//!   cache), and install and login advice that names commands that work.
//! - [`version`]: `codex --version` and userAgent parsing, the compatibility table and the
//!   version-aware values.

pub mod app_server;
mod backoff;
mod codec;
pub mod daemon;
pub mod error;
mod flow;
pub mod locate;
pub mod peer;
pub mod platform;
pub mod process;
mod responder;
mod routes;
pub mod version;

pub use app_server::{AppServer, AppServerConfig};
pub use error::{ExitInfo, PeerError, StartError};
pub use peer::{
    IncomingRequest, Notification, Peer, PeerConfig, PeerEvent, ReadGate, Subscription,
};
pub use responder::Responder;
pub use version::{CodexVersion, Compatibility};

/// Where the process-tree helpers used to live.
pub use platform::tree;
