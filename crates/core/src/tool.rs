//! Caller-defined (dynamic) tools: offered to the model at thread start and answered in-process
//! by a handler, or through the broker when there is none.

use std::sync::Arc;

use codex_relay_protocol::v2::DynamicToolSpec;
use futures::future::BoxFuture;
use serde_json::Value;

/// A caller-defined tool answered in-process.
pub trait ToolHandler: Send + Sync {
    /// Runs the tool; `Err` is reported to the model as a failed call.
    fn call(&self, arguments: Value) -> BoxFuture<'static, Result<String, String>>;
}

/// A dynamic tool: offered to the model; answered by `handler`, or (without one) through the
/// broker like any other pending request.
#[derive(Clone)]
pub struct DynamicTool {
    pub spec: DynamicToolSpec,
    pub handler: Option<Arc<dyn ToolHandler>>,
}

impl std::fmt::Debug for DynamicTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynamicTool")
            .field("name", &self.spec.name)
            .field("handler", &self.handler.is_some())
            .finish()
    }
}
