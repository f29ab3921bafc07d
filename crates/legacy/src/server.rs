//! The MCP handler of the legacy front: lists `codex` and `codex-reply` (and, with session
//! tools, the six `codex_*` tools of the MCP front beside them) and runs calls.

use std::borrow::Cow;
use std::sync::Arc;

use codex_relay_core::Relay;
use codex_relay_mcp::RelayMcp;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig,
    Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};

use crate::call::Call;
use crate::params::{self, CODEX_SIGNATURE, CodexParams, REPLY_SIGNATURE, ReplyParams};
use crate::schema::{self, CODEX, REPLY};

/// What the front serves besides the legacy two tools.
#[derive(Debug, Clone, Copy, Default)]
pub struct LegacyOptions {
    /// Also list the six `codex_*` tools of the MCP front.
    pub session_tools: bool,
}

/// One MCP connection's legacy server.
pub struct LegacyMcp {
    relay: Relay,
    tools: Arc<Vec<Tool>>,
    /// The MCP front, answering the `codex_*` tools when they are enabled.
    session_tools: Option<RelayMcp>,
}

impl LegacyMcp {
    pub fn new(relay: Relay, options: LegacyOptions) -> Self {
        let mut tools = schema::definitions();
        if options.session_tools {
            tools.extend(codex_relay_mcp::tools::definitions());
        }
        Self {
            session_tools: options.session_tools.then(|| RelayMcp::new(relay.clone())),
            relay,
            tools: Arc::new(tools),
        }
    }
}

impl ServerHandler for LegacyMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_server_info(
            Implementation::new("codex-mcp-server", env!("CARGO_PKG_VERSION"))
                .with_title("Codex (codex-relay, legacy mcp-server contract)"),
        )
    }

    /// Up to 2025-11-25: the legacy contract needs server-to-client requests (elicitation).
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.to_string();
        let call = Call {
            peer: context.peer.clone(),
            request_id: context.id.clone(),
            ct: context.ct.clone(),
        };
        let args = request.arguments.take();
        let result = match name.as_str() {
            CODEX => match params::parse::<CodexParams>(CODEX, CODEX_SIGNATURE, args) {
                Ok(p) => call.codex(&self.relay, p).await,
                Err(e) => Err(e),
            },
            REPLY => match params::parse::<ReplyParams>(REPLY, REPLY_SIGNATURE, args) {
                Ok(p) => call.reply(&self.relay, p).await,
                Err(e) => Err(e),
            },
            other => {
                if let Some(inner) = &self.session_tools
                    && self.tools.iter().any(|t| t.name == other)
                {
                    request.arguments = args;
                    return inner.call_tool(request, context).await;
                }
                let known: Vec<&str> = self.tools.iter().map(|t| t.name.as_ref()).collect();
                return Err(McpError::invalid_params(
                    format!("unknown tool {other:?}; the tools are {}", known.join(", ")),
                    None,
                ));
            }
        };
        Ok(match result {
            Ok(r) => r.into(),
            Err(e) => {
                tracing::info!(tool = %name, "legacy tool error: {e}");
                CallToolResult::error(vec![ContentBlock::text(e)]).into()
            }
        })
    }
}
