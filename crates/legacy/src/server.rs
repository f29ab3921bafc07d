//! The MCP handler of the legacy front: lists `codex` and `codex-reply` (and any side tools the
//! binary plugs in beside them, such as the MCP front's six `codex_*` tools) and runs calls.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use codex_relay_core::Relay;
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

/// What a side tool's call returns.
pub type SideCall<'a> =
    Pin<Box<dyn Future<Output = Result<CallToolResponse, McpError>> + Send + 'a>>;

/// Tools one connection lists beside `codex` and `codex-reply`, answered by someone else. The
/// binary plugs the MCP front's `codex_*` tools in here: fronts never import one another.
pub trait SideTools: Send + Sync + 'static {
    fn tools(&self) -> Vec<Tool>;
    fn call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> SideCall<'_>;
}

/// Makes the side tools of one connection.
pub type SideToolsFactory = Arc<dyn Fn(Relay) -> Box<dyn SideTools> + Send + Sync>;

/// What the front serves besides the legacy two tools.
#[derive(Clone, Default)]
pub struct LegacyOptions {
    /// Tools listed and answered beside the legacy two.
    pub side_tools: Option<SideToolsFactory>,
}

/// One MCP connection's legacy server.
pub struct LegacyMcp {
    relay: Relay,
    tools: Arc<Vec<Tool>>,
    side_tools: Option<Box<dyn SideTools>>,
}

impl LegacyMcp {
    pub fn new(relay: Relay, options: &LegacyOptions) -> Self {
        let mut tools = schema::definitions();
        let side_tools = options.side_tools.as_ref().map(|make| make(relay.clone()));
        if let Some(side) = &side_tools {
            tools.extend(side.tools());
        }
        Self {
            side_tools,
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
            // Over HTTP the gate put the signed-in person into the request.
            person: context
                .extensions
                .get::<http::request::Parts>()
                .and_then(|p| p.extensions.get::<codex_relay_core::people::Person>())
                .cloned(),
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
                if let Some(side) = &self.side_tools
                    && self.tools.iter().any(|t| t.name == other)
                {
                    request.arguments = args;
                    return side.call(request, context).await;
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
