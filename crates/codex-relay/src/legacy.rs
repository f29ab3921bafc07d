//! `codex-relay mcp-server`: the legacy `codex mcp-server` contract over stdio (see
//! docs/LEGACY.md), and its HTTP endpoint for `serve` at `/mcp-server`.

use std::process::ExitCode;

use std::sync::Arc;

use codex_relay_core::Relay;
use codex_relay_legacy::{LegacyMcp, LegacyOptions, SideCall, SideTools};
use codex_relay_mcp::RelayMcp;
use rmcp::ServerHandler;
use rmcp::model::{CallToolRequestParams, Tool};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use tokio_util::sync::CancellationToken;

use crate::engine::{EngineArgs, shutdown_signal};

#[derive(clap::Args)]
pub struct LegacyArgs {
    #[command(flatten)]
    engine: EngineArgs,
    /// Also offer the six codex_* tools (codex_start, codex_status, ...) beside codex and
    /// codex-reply.
    #[arg(long)]
    with_session_tools: bool,
}

pub async fn mcp_server(args: LegacyArgs) -> anyhow::Result<ExitCode> {
    let relay = args.engine.open().await?;
    let options = options(args.with_session_tools);
    let result = tokio::select! {
        r = codex_relay_legacy::serve_stdio(relay.clone(), options) => r.map_err(anyhow::Error::from),
        _ = shutdown_signal() => Ok(()),
    };
    relay.shutdown().await;
    result.map(|()| ExitCode::SUCCESS)
}

pub fn http(
    relay: Relay,
    session_tools: bool,
    hosts: Vec<String>,
    stop: CancellationToken,
) -> StreamableHttpService<LegacyMcp, LocalSessionManager> {
    codex_relay_legacy::http_service(relay, options(session_tools), hosts, stop)
}

/// The legacy front's options: with session tools, the MCP front answers its six `codex_*`
/// tools beside `codex` and `codex-reply` on the same connection.
fn options(session_tools: bool) -> LegacyOptions {
    LegacyOptions {
        side_tools: session_tools.then(|| {
            Arc::new(|relay: Relay| {
                Box::new(SessionTools(RelayMcp::new(relay))) as Box<dyn SideTools>
            }) as codex_relay_legacy::SideToolsFactory
        }),
    }
}

/// The MCP front as the legacy front's side tools (one per connection, as on `/mcp`).
struct SessionTools(RelayMcp);

impl SideTools for SessionTools {
    fn tools(&self) -> Vec<Tool> {
        codex_relay_mcp::tools::definitions()
    }

    fn call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<rmcp::RoleServer>,
    ) -> SideCall<'_> {
        Box::pin(self.0.call_tool(request, context))
    }
}

/// The largest request body `/mcp-server` reads to narrow client answers (see
/// `codex_relay_legacy::wire`); MCP messages from clients are small.
const MAX_BODY: usize = 16 << 20;

/// Reads client answers posted to `/mcp-server` the way the legacy server read them: a result
/// with a `decision` counts by that field alone.
pub async fn narrow_answers(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(b) => b,
        Err(e) => {
            return (axum::http::StatusCode::PAYLOAD_TOO_LARGE, e.to_string()).into_response();
        }
    };
    let narrowed = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|mut v| codex_relay_legacy::wire::narrow(&mut v).then(|| v.to_string()));
    let bytes = narrowed.map(axum::body::Bytes::from).unwrap_or(bytes);
    let mut parts = parts;
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    next.run(axum::extract::Request::from_parts(
        parts,
        axum::body::Body::from(bytes),
    ))
    .await
}
