//! The legacy `codex mcp-server` contract over the codex-relay engine, for MCP clients written
//! against the server Codex removed in 0.154: tools `codex` and `codex-reply` (a call blocks
//! until the turn ends), `codex/event` progress notifications synthesized from the engine's
//! events, and approvals as `elicitation/create` with the `codex_*` fields. See docs/LEGACY.md.
//!
//! - [`server`]: the rmcp handler (tool list, dispatch, side tools plugged in by the binary).
//! - [`call`]: one blocking call; [`events`]: the legacy event messages; [`approval`]: the
//!   legacy elicitation and its decisions; [`params`] and [`schema`]: the tools' contract.
//! - [`wire`]: client answers read as the legacy server read them.

pub mod approval;
pub mod call;
pub mod events;
pub mod params;
pub mod schema;
pub mod server;
mod shell;
pub mod wire;
#[cfg(test)]
mod wire_snapshots;

use std::sync::Arc;

use codex_relay_core::Relay;
use rmcp::ServiceExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio_util::sync::CancellationToken;

pub use server::{LegacyMcp, LegacyOptions, SideCall, SideTools, SideToolsFactory};

#[derive(Debug, thiserror::Error)]
pub enum LegacyFrontError {
    #[error("the MCP session could not start: {0}")]
    Start(String),
    #[error("the MCP session ended with an error: {0}")]
    Run(String),
}

/// Serves the legacy contract on this process's stdin/stdout until the client closes it.
pub async fn serve_stdio(relay: Relay, options: LegacyOptions) -> Result<(), LegacyFrontError> {
    // stdin passes through `wire::narrow_line` on its way to the MCP layer.
    let (client_end, server_end) = tokio::io::duplex(1 << 16);
    let (reader, _unused) = tokio::io::split(server_end);
    let (_unused_read, mut writer) = tokio::io::split(client_end);
    tokio::spawn(async move {
        let mut lines = BufReader::new(tokio::io::stdin()).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let line = wire::narrow_line(&line).unwrap_or(line);
            if writer.write_all(line.as_bytes()).await.is_err()
                || writer.write_all(b"\n").await.is_err()
            {
                break;
            }
        }
        let _ = writer.shutdown().await;
    });
    let service = LegacyMcp::new(relay, &options)
        .serve((reader, tokio::io::stdout()))
        .await
        .map_err(|e| LegacyFrontError::Start(e.to_string()))?;
    service
        .waiting()
        .await
        .map_err(|e| LegacyFrontError::Run(e.to_string()))?;
    Ok(())
}

/// The streamable HTTP endpoint, to mount at `/mcp-server`.
pub fn http_service(
    relay: Relay,
    options: LegacyOptions,
    allowed_hosts: Vec<String>,
    stop: CancellationToken,
) -> StreamableHttpService<LegacyMcp, LocalSessionManager> {
    let mut config = StreamableHttpServerConfig::default().with_allowed_hosts(allowed_hosts);
    config.cancellation_token = stop;
    StreamableHttpService::new(
        move || Ok(LegacyMcp::new(relay.clone(), &options)),
        Arc::new(LocalSessionManager::default()),
        config,
    )
}
