//! Wire types spoken between codex-relay and Codex; pure data, no IO.
//!
//! - [`jsonrpc`]: the line framing of `codex app-server` (JSON-RPC 2.0 without the
//!   `"jsonrpc"` member) and the classification of one incoming line.
//! - [`v2`]: the subset of the app-server v2 protocol codex-relay uses: client requests with
//!   their responses, server→client requests, notifications and thread items.
//! - [`v1`]: the one v1 method still needed (`sendUserMessage`, steering on Codex 0.98).
//! - [`exec`]: the JSONL events of `codex exec --json`.
//!
//! Every type here is tolerant: unknown fields are ignored, and unknown methods or item kinds
//! are kept as raw JSON instead of failing to parse.

pub mod exec;
pub mod jsonrpc;
pub mod v1;
pub mod v2;

pub use jsonrpc::{Incoming, ParamsError, RequestId, RpcError};
