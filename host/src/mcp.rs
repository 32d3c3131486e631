//! An MCP server (on `rmcp`) in front of a plugin or a registry.
//!
//! `tools/list` shows every available tool (title, description, inputSchema,
//! outputSchema, annotations); `tools/call` goes through the validating host.
//! Following the MCP specification, an unknown tool is a protocol error
//! (`-32602`), while arguments that break the tool's schema and failures of
//! the plugin are tool execution errors (`isError: true`) whose text says
//! what happened, so a model can correct itself. A client's cancellation
//! stops the call's guest; a change of the registry's tools is announced
//! with `notifications/tools/list_changed`.

use std::sync::Arc;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, InitializeResult, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer};
use serde_json::Value;

use crate::error::Error;
use crate::plugin::Plugin;
use crate::registry::{Approver, Registry};

/// What the server exposes.
#[derive(Clone)]
pub enum ToolSource {
    /// One plugin, its tools under their own names.
    Plugin(Plugin),
    /// A registry, its tools under namespaced names.
    Registry(Arc<Registry>),
}

/// The MCP server handler: one per connection (cheap to clone).
#[derive(Clone)]
pub struct McpServer {
    source: ToolSource,
    approver: Arc<dyn Approver>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer").finish_non_exhaustive()
    }
}

impl McpServer {
    /// A server for these tools. `approver` decides on tools that require
    /// approval (registry sources only).
    pub fn new(source: ToolSource, approver: Arc<dyn Approver>) -> Self {
        McpServer { source, approver }
    }

    /// The tools as MCP `Tool` values (JSON), sorted by name.
    pub fn tool_list(&self) -> Vec<toolhost_protocol::Tool> {
        match &self.source {
            ToolSource::Plugin(plugin) => {
                let mut tools = plugin.tools().to_vec();
                tools.sort_by(|a, b| a.name.cmp(&b.name));
                tools
            }
            ToolSource::Registry(registry) => registry.tools().iter().map(|t| t.exposed()).collect(),
        }
    }

    async fn call(&self, name: &str, arguments: Value) -> Result<toolhost_protocol::CallToolResult, Error> {
        match &self.source {
            ToolSource::Plugin(plugin) => plugin.call_tool(name, arguments).await,
            ToolSource::Registry(registry) => registry.call_tool(name, arguments, self.approver.as_ref()).await,
        }
    }
}

/// Convert between our protocol types and rmcp's: both are the same JSON.
fn convert<T: serde::Serialize, U: serde::de::DeserializeOwned>(value: &T) -> Result<U, McpError> {
    serde_json::to_value(value)
        .and_then(serde_json::from_value)
        .map_err(|e| McpError::internal_error(format!("cannot convert a protocol value: {e}"), None))
}

/// A tool execution error: `isError: true` with one text item.
fn tool_error(message: String) -> Result<CallToolResponse, McpError> {
    convert::<_, rmcp::model::CallToolResult>(&toolhost_protocol::CallToolResult::error(message))
        .map(CallToolResponse::from)
}

impl rmcp::ServerHandler for McpServer {
    fn get_info(&self) -> InitializeResult {
        let capabilities = ServerCapabilities::builder().enable_tools().enable_tool_list_changed().build();
        let mut info = InitializeResult::new(capabilities);
        info.server_info = Implementation::new("toolhost", env!("CARGO_PKG_VERSION"));
        info.instructions = Some("Tools run as sandboxed WebAssembly plugins; arguments and results are validated against each tool's schemas.".to_owned());
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let tools = self.tool_list().iter().map(convert).collect::<Result<Vec<_>, _>>()?;
        Ok(ListToolsResult { tools, ..Default::default() })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.to_string();
        let arguments = request.arguments.map(Value::Object).unwrap_or(Value::Null);
        // Dropping the call's future (on cancellation) stops its guest.
        let outcome = tokio::select! {
            outcome = self.call(&name, arguments) => outcome,
            () = context.ct.cancelled() => {
                tracing::info!(tool = %name, "call cancelled by the client");
                return Err(McpError::internal_error("the call was cancelled", None));
            }
        };
        match outcome {
            Ok(result) => convert::<_, rmcp::model::CallToolResult>(&result).map(CallToolResponse::from),
            Err(error @ (Error::UnknownTool { .. } | Error::NoSuchTool { .. })) => {
                Err(McpError::invalid_params(error.to_string(), None))
            }
            Err(Error::InvalidArguments { tool, violations, .. }) => {
                let lines: Vec<String> = violations.iter().map(ToString::to_string).collect();
                tool_error(format!("invalid arguments for `{tool}`; the tool did not run: {}", lines.join("; ")))
            }
            Err(error) => {
                tracing::warn!(tool = %name, "call failed: {error}");
                tool_error(error.to_string())
            }
        }
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let ToolSource::Registry(registry) = &self.source else { return };
        let mut changes = registry.subscribe();
        let peer = context.peer.clone();
        tokio::spawn(async move {
            while changes.changed().await.is_ok() {
                if peer.notify_tool_list_changed().await.is_err() {
                    break;
                }
            }
        });
    }
}
