//! Built-in tools: tools the embedding program provides in Rust, listed and
//! called through the same [`Registry`](crate::Registry) as Wasm plugins,
//! under the same names, filters, approvals, validation and limits (a
//! toolsets file's `kind: builtin`).
//!
//! A [`BuiltinToolset`] is a set of [`BuiltinTool`]s under an id. Each tool
//! is a name, a description, a JSON Schema of its arguments and an async
//! handler; [`BuiltinTool::typed`] (feature `schemars`) takes the schema
//! from the argument type and the output schema from the result type. The
//! host treats what a handler returns as it treats a plugin's output: its
//! arguments are checked against the input schema before it runs, its result
//! against the protocol and the output schema after, under the toolset's
//! timeout, output cap and the caller's deadline and cancellation.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;
use toolhost_protocol::{CallToolResult, JsonObject, Tool, ToolAnnotations};

use crate::secrets::BoxFuture;

/// What a built-in tool's handler is given.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct BuiltinCall {
    /// The arguments, checked against the tool's input schema already
    /// (unless the toolset's validation is off).
    pub arguments: JsonObject,
    /// The call's `_meta` as a plugin would see it: the caller's (keys
    /// under `toolhost/` removed) and `toolhost/userId` when the tool
    /// declares `requirements.user_id`.
    pub meta: Option<JsonObject>,
}

/// Why a built-in tool has no result.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuiltinError {
    /// The tool failed in a way the model should read and may act on (bad
    /// input, nothing found): a result with `isError: true` and this text.
    Tool(String),
    /// The tool could not run (the service behind it is down, answered
    /// garbage): a typed [`Error`](crate::Error) of the call
    /// (`Error::PluginFailed`), not a result.
    Unavailable(String),
}

impl From<String> for BuiltinError {
    /// A tool error.
    fn from(message: String) -> Self {
        BuiltinError::Tool(message)
    }
}

impl From<&str> for BuiltinError {
    /// A tool error.
    fn from(message: &str) -> Self {
        BuiltinError::Tool(message.to_owned())
    }
}

/// A built-in tool's handler: the result, or why there is none.
pub type BuiltinHandler =
    Arc<dyn Fn(BuiltinCall) -> BoxFuture<'static, Result<CallToolResult, BuiltinError>> + Send + Sync>;

/// One tool of the embedding program.
#[derive(Clone)]
pub struct BuiltinTool {
    pub(crate) tool: Tool,
    pub(crate) handler: BuiltinHandler,
}

impl fmt::Debug for BuiltinTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BuiltinTool").field("tool", &self.tool).finish_non_exhaustive()
    }
}

impl BuiltinTool {
    /// A tool named `name` (as a plugin's tools are: `[A-Za-z0-9_.-]`, at
    /// most 128 characters), described by `description`, taking arguments
    /// that match `input_schema` (a JSON Schema whose root is an object
    /// schema), run by `handler`.
    pub fn new<F, Fut>(name: impl Into<String>, description: impl Into<String>, input_schema: Value, handler: F) -> Self
    where
        F: Fn(BuiltinCall) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<CallToolResult, BuiltinError>> + Send + 'static,
    {
        let input_schema = match input_schema {
            Value::Object(schema) => schema,
            // Not an object: kept as the one property of an object, which
            // the load's checks then report (a schema must be an object).
            other => JsonObject::from_iter([("$invalid".to_owned(), other)]),
        };
        Self::from_tool(Tool::new(name.into(), description.into(), input_schema), handler)
    }

    /// A tool described by `tool` whole (its name, schemas, annotations,
    /// `_meta`: a remote server's listing, say), run by `handler`.
    pub fn from_tool<F, Fut>(tool: Tool, handler: F) -> Self
    where
        F: Fn(BuiltinCall) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<CallToolResult, BuiltinError>> + Send + 'static,
    {
        let handler: BuiltinHandler = Arc::new(move |call| Box::pin(handler(call)));
        BuiltinTool { tool, handler }
    }

    /// A tool whose arguments are `A` (their JSON Schema is `A`'s) and whose
    /// result is `R`: an object-shaped `R` is the result's
    /// `structuredContent` (its schema the tool's `outputSchema`) and its
    /// JSON the text; a string is the text; anything else its JSON as text.
    /// An `Err` is a tool error whose text is the error's `Display`.
    #[cfg(feature = "schemars")]
    #[cfg_attr(docsrs, doc(cfg(feature = "schemars")))]
    pub fn typed<A, R, E, F, Fut>(name: impl Into<String>, description: impl Into<String>, handler: F) -> Self
    where
        A: serde::de::DeserializeOwned + schemars::JsonSchema + Send + 'static,
        R: serde::Serialize + schemars::JsonSchema + 'static,
        E: fmt::Display + 'static,
        F: Fn(A) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<R, E>> + Send + 'static,
    {
        let handler = Arc::new(handler);
        let input_schema = schema_of::<A>();
        let output_schema = schema_of::<R>();
        let structured = output_schema.get("type").and_then(Value::as_str) == Some("object");
        let name = name.into();
        let tool_name = name.clone();
        let mut tool = BuiltinTool::new(name, description, Value::Object(input_schema), move |call: BuiltinCall| {
            let handler = Arc::clone(&handler);
            let tool_name = tool_name.clone();
            async move {
                let arguments: A = serde_json::from_value(Value::Object(call.arguments))
                    .map_err(|e| BuiltinError::Tool(format!("invalid arguments for `{tool_name}`: {e}")))?;
                let value = handler(arguments).await.map_err(|e| BuiltinError::Tool(e.to_string()))?;
                let value = serde_json::to_value(value).map_err(|e| {
                    BuiltinError::Unavailable(format!("the result of `{tool_name}` cannot be serialized: {e}"))
                })?;
                Ok(result_of(value, structured))
            }
        });
        if structured {
            tool.tool.output_schema = Some(output_schema);
        }
        tool
    }

    /// With a human-readable title.
    pub fn with_title(mut self, title: impl Into<String>) -> Self {
        self.tool.title = Some(title.into());
        self
    }

    /// With behaviour hints (`readOnlyHint`, `destructiveHint`...), which
    /// approval rules such as `ToolApprovals::from_annotations` read.
    pub fn with_annotations(mut self, annotations: ToolAnnotations) -> Self {
        self.tool.annotations = Some(annotations);
        self
    }

    /// With a JSON Schema (an object schema) for the result's
    /// `structuredContent`, which every result is then checked against.
    pub fn with_output_schema(mut self, schema: JsonObject) -> Self {
        self.tool.output_schema = Some(schema);
        self
    }

    /// With `_meta` (`{"requirements": {"user_id": true}}` makes the host
    /// call it only with a user id, which the handler finds in
    /// [`BuiltinCall::meta`]).
    pub fn with_meta(mut self, meta: JsonObject) -> Self {
        self.tool.meta = Some(meta);
        self
    }

    /// The tool as it is listed.
    pub fn tool(&self) -> &Tool {
        &self.tool
    }
}

/// The JSON Schema of `T`, as an object (`true` becomes `{}`).
#[cfg(feature = "schemars")]
fn schema_of<T: schemars::JsonSchema>() -> JsonObject {
    match serde_json::to_value(schemars::schema_for!(T)) {
        Ok(Value::Object(schema)) => schema,
        _ => JsonObject::new(),
    }
}

/// A typed tool's result from its value.
#[cfg(feature = "schemars")]
fn result_of(value: Value, structured: bool) -> CallToolResult {
    match value {
        Value::String(text) => CallToolResult::text(text),
        Value::Object(_) if structured => {
            let text = value.to_string();
            CallToolResult { structured_content: Some(value), ..CallToolResult::text(text) }
        }
        other => CallToolResult::text(other.to_string()),
    }
}

/// Tools of the embedding program under one id: a toolset of
/// `kind: builtin` ([`Registry::register_builtin`](crate::Registry::register_builtin)).
#[derive(Clone, Debug)]
pub struct BuiltinToolset {
    pub(crate) id: String,
    pub(crate) tools: Vec<BuiltinTool>,
    /// Sees a new value whenever the tools change upstream.
    pub(crate) changes: Option<tokio::sync::watch::Receiver<u64>>,
}

impl BuiltinToolset {
    /// An empty toolset with this id (its tools are listed as
    /// `<id>__<tool>`).
    pub fn new(id: impl Into<String>) -> Self {
        BuiltinToolset { id: id.into(), tools: Vec::new(), changes: None }
    }

    /// Tell the registry that these tools change over time: whenever
    /// `changes` sees a new value, the registry loads the toolset again
    /// (a connector's toolset by calling [`ToolsetConnector::connect`]
    /// again with the same configuration, which should reuse its session)
    /// and swaps the new tools in, recording the sync and telling
    /// [`Registry::subscribe`](crate::Registry::subscribe)rs. An MCP
    /// server's `notifications/tools/list_changed` arrives this way.
    pub fn with_changes(mut self, changes: tokio::sync::watch::Receiver<u64>) -> Self {
        self.changes = Some(changes);
        self
    }

    /// With one more tool (one of the same name is replaced).
    pub fn with_tool(mut self, tool: BuiltinTool) -> Self {
        self.tools.retain(|t| t.tool.name != tool.tool.name);
        self.tools.push(tool);
        self
    }

    /// With these tools too, as [`with_tool`](Self::with_tool) for each in
    /// turn (a later one of the same name replaces an earlier), in time
    /// linear in their number.
    pub fn with_tools(mut self, tools: impl IntoIterator<Item = BuiltinTool>) -> Self {
        self.tools.extend(tools);
        let mut seen = std::collections::HashSet::new();
        // Keep the last of each name, in the order of their last places.
        let mut kept: Vec<BuiltinTool> =
            self.tools.into_iter().rev().filter(|t| seen.insert(t.tool.name.clone())).collect();
        kept.reverse();
        self.tools = kept;
        self
    }

    /// Its id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Its tools.
    pub fn tools(&self) -> &[BuiltinTool] {
        &self.tools
    }
}

/// Connects toolsets of a kind the library does not run itself (`mcp`: a
/// remote MCP server, which `toolhost-mcp`'s client feature connects):
/// [`Registry::with_connector`](crate::Registry::with_connector). What it
/// returns is a [`BuiltinToolset`] whose tools forward each call, so the
/// registry lists and calls them under the same names, filters, approvals,
/// checks and limits as any other toolset.
pub trait ToolsetConnector: Send + Sync + 'static {
    /// Connect to the toolset `config` describes and list its tools; the
    /// returned toolset's id is `config.id`. A failure is the toolset's
    /// load failure, with this message.
    fn connect<'a>(&'a self, config: &'a crate::ToolsetConfig) -> BoxFuture<'a, Result<BuiltinToolset, String>>;
}
