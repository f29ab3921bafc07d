//! The MCP front of codex-relay: Codex as eight tools (`codex_start`, `codex_say`,
//! `codex_status`, `codex_respond`, `codex_interrupt`, `codex_list`, `codex_limits`,
//! `codex_thread`) for any MCP client, over
//! stdio or streamable HTTP, with approvals by elicitation or by polling.
//!
//! - [`server`]: the rmcp handler (tool list, dispatch, long-poll with progress).
//! - [`tools`]: what each tool does with the engine; [`params`]: their arguments;
//!   [`outputs`]: their typed results (published as output schemas); [`thread_tool`]: the
//!   thread operations (review, fork, rollback, compact, models, model) as one tool.
//! - [`view`]: what the tools show of a session; [`elicit`]: approvals as elicitation forms
//!   pushed to clients that allow server requests; [`input_required`]: the same forms as
//!   `InputRequiredResult` rounds for 2026-07-28 clients.

pub mod elicit;
pub mod input_required;
pub mod outputs;
pub mod params;
pub mod server;
pub mod thread_tool;
pub mod tools;
pub mod view;
#[cfg(test)]
mod wire_snapshots;
pub mod words;

use std::sync::Arc;

use codex_relay_core::Relay;
use rmcp::ServiceExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

pub use server::RelayMcp;

#[derive(Debug, thiserror::Error)]
pub enum McpFrontError {
    #[error("the MCP session could not start: {0}")]
    Start(String),
    #[error("the MCP session ended with an error: {0}")]
    Run(String),
}

/// Serves MCP on this process's stdin/stdout until the client closes it.
pub async fn serve_stdio(relay: Relay) -> Result<(), McpFrontError> {
    let service = RelayMcp::new(relay)
        .serve(rmcp::transport::stdio_pipes())
        .await
        .map_err(|e| McpFrontError::Start(e.to_string()))?;
    service
        .waiting()
        .await
        .map_err(|e| McpFrontError::Run(e.to_string()))?;
    Ok(())
}

/// The streamable HTTP endpoint, to mount at `/mcp`. `allowed_hosts` are the `Host` values
/// accepted (DNS-rebinding protection); `stop` ends every MCP session.
pub fn http_service(
    relay: Relay,
    allowed_hosts: Vec<String>,
    stop: CancellationToken,
) -> StreamableHttpService<RelayMcp, LocalSessionManager> {
    let mut config = StreamableHttpServerConfig::default().with_allowed_hosts(allowed_hosts);
    config.cancellation_token = stop;
    StreamableHttpService::new(
        move || Ok(RelayMcp::new(relay.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    )
}
