//! Wire types of the toolhost plugin interface.
//!
//! A plugin exports two functions (see `spec/plugin-interface.md`):
//!
//! - `describe`: no input, returns a [`ListToolsResult`];
//! - `call`: takes a [`CallToolRequest`], returns a [`CallToolResult`].
//!
//! Both sides speak JSON through Extism's memory. These types use the field
//! names of the interface exactly (`inputSchema`, `isError`, `mimeType`, ...),
//! add what the newer tool protocol defines (`title`, `outputSchema`,
//! `annotations`, `structuredContent`, `_meta`, `audio`, `resource_link` and
//! embedded `resource` content), and keep every field they do not know in an
//! `extra` map, so a value survives a round trip through them unchanged.
//!
//! The protocol is also shipped as JSON Schema documents in [`schema`]; the
//! host validates plugin output against them.
//!
//! This crate is shared by the host (`toolhost`) and the guest SDK
//! (`toolhost-plugin-sdk`), so it depends on `serde` and `serde_json` only and
//! builds for Wasm.

#![deny(missing_docs)]

use serde::{Deserialize, Serialize};
pub use serde_json::{Map, Value};

pub mod json;
#[macro_use]
mod shapes;
mod offers;
pub use offers::{
    CompleteResult, Completion, CompletionReference, GetPromptResult, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, Prompt, PromptArgument, PromptMessage, ReadResourceResult, Resource, ResourceTemplate,
    match_uri_template,
};

/// A JSON object: the type of schemas, arguments and `_meta` maps.
pub type JsonObject = Map<String, Value>;

/// The names of the two exports every plugin provides.
pub mod exports {
    /// The export that returns a [`ListToolsResult`](crate::ListToolsResult).
    pub const DESCRIBE: &str = "describe";
    /// The export that takes a [`CallToolRequest`](crate::CallToolRequest) and
    /// returns a [`CallToolResult`](crate::CallToolResult).
    pub const CALL: &str = "call";
}

/// The protocol as JSON Schema (dialect 2020-12) documents.
pub mod schema {
    /// Schema of the `describe` output, a [`ListToolsResult`](crate::ListToolsResult).
    pub const LIST_TOOLS_RESULT: &str = include_str!("../schema/list-tools-result.schema.json");
    /// Schema of the `call` input, a [`CallToolRequest`](crate::CallToolRequest).
    pub const CALL_TOOL_REQUEST: &str = include_str!("../schema/call-tool-request.schema.json");
    /// Schema of the `call` output, a [`CallToolResult`](crate::CallToolResult).
    pub const CALL_TOOL_RESULT: &str = include_str!("../schema/call-tool-result.schema.json");
}

/// The output of `describe`: every tool the plugin exposes.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ListToolsResult {
    /// The tools, in the plugin's order.
    pub tools: Vec<Tool>,
    /// Fields this crate does not know, kept for the round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// One tool: its name, what it does and the schema of its arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    /// Programmatic name, unique within the plugin (`[A-Za-z0-9_.-]{1,128}`).
    pub name: String,
    /// Display name for people; preferred over `name` in user interfaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What the tool does, for people and models. The plugin interface lists
    /// it as required; the newer tool protocol makes it optional, and so does
    /// this type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of the arguments; its root is `type: "object"`.
    #[serde(rename = "inputSchema")]
    pub input_schema: JsonObject,
    /// JSON Schema of `structuredContent` in the tool's results, if it returns
    /// structured output.
    #[serde(rename = "outputSchema", default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<JsonObject>,
    /// Behaviour hints for clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<ToolAnnotations>,
    /// Free-form metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
    /// Fields this crate does not know (`namespace`, `version`, `tags`,
    /// `icons`, ...), kept for the round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl Tool {
    /// A tool with a name, a description and an input schema.
    pub fn new(name: impl Into<String>, description: impl Into<String>, input_schema: JsonObject) -> Self {
        Tool {
            name: name.into(),
            title: None,
            description: Some(description.into()),
            input_schema,
            output_schema: None,
            annotations: None,
            meta: None,
            extra: JsonObject::new(),
        }
    }
}

/// Hints about a tool's behaviour. Clients must treat them as untrusted
/// unless they trust the plugin.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ToolAnnotations {
    /// Display name (the tool's own `title` wins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The tool does not change its environment.
    #[serde(rename = "readOnlyHint", default, skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    /// The tool may make destructive updates (meaningful when not read-only).
    #[serde(rename = "destructiveHint", default, skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    /// Calling the tool again with the same arguments has no further effect.
    #[serde(rename = "idempotentHint", default, skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    /// The tool interacts with an open world of external entities.
    #[serde(rename = "openWorldHint", default, skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
    /// Fields this crate does not know, kept for the round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The input of `call`: which tool to run, with which arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallToolRequest {
    /// Optional method name; hosts send `tools/call`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// The tool and its arguments.
    pub params: CallToolParams,
    /// Fields this crate does not know, kept for the round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl CallToolRequest {
    /// The request a host sends to call `name` with `arguments`.
    pub fn new(name: impl Into<String>, arguments: Option<JsonObject>) -> Self {
        CallToolRequest {
            method: Some("tools/call".to_owned()),
            params: CallToolParams { name: name.into(), arguments, meta: None, extra: JsonObject::new() },
            extra: JsonObject::new(),
        }
    }
}

/// The `params` of a [`CallToolRequest`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallToolParams {
    /// The name of the tool to invoke.
    pub name: String,
    /// Argument names to values; may be omitted or `null`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<JsonObject>,
    /// Free-form metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
    /// Fields this crate does not know, kept for the round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The output of `call`.
///
/// A tool that fails in a way the caller (or model) should see returns a
/// normal result with `isError: true`; that is not a host error.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CallToolResult {
    /// What the tool returned, in order.
    pub content: Vec<Content>,
    /// Whether the call ended in a tool error; absent means `false`.
    #[serde(rename = "isError", default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// Structured output, valid against the tool's `outputSchema`.
    #[serde(rename = "structuredContent", default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
    /// Free-form metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
    /// Fields this crate does not know, kept for the round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl CallToolResult {
    /// A successful result with the given content.
    pub fn success(content: Vec<Content>) -> Self {
        CallToolResult { content, ..Default::default() }
    }

    /// A successful result holding one text item.
    pub fn text(text: impl Into<String>) -> Self {
        Self::success(vec![Content::text(text)])
    }

    /// A tool error (`isError: true`) whose one text item says what went wrong.
    pub fn error(message: impl Into<String>) -> Self {
        CallToolResult { content: vec![Content::text(message)], is_error: Some(true), ..Default::default() }
    }

    /// Whether the result is a tool error (`isError: true`).
    pub fn is_error(&self) -> bool {
        self.is_error == Some(true)
    }

    /// The text items of the content, in order.
    pub fn texts(&self) -> impl Iterator<Item = &str> {
        self.content.iter().filter_map(|c| match c {
            Content::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
    }
}

/// One piece of content in a [`CallToolResult`], tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Content {
    /// `type: "text"`.
    #[serde(rename = "text")]
    Text(TextContent),
    /// `type: "image"`: base64 data with a MIME type.
    #[serde(rename = "image")]
    Image(BinaryContent),
    /// `type: "audio"`: base64 data with a MIME type.
    #[serde(rename = "audio")]
    Audio(BinaryContent),
    /// `type: "resource"`: an embedded resource.
    #[serde(rename = "resource")]
    Resource(EmbeddedResource),
    /// `type: "resource_link"`: a link to a resource the client may fetch.
    #[serde(rename = "resource_link")]
    ResourceLink(ResourceLink),
}

impl Content {
    /// A text item.
    pub fn text(text: impl Into<String>) -> Self {
        Content::Text(TextContent { text: text.into(), annotations: None, meta: None, extra: JsonObject::new() })
    }

    /// An image item from already base64-encoded data.
    pub fn image(data_base64: impl Into<String>, mime_type: impl Into<String>) -> Self {
        Content::Image(BinaryContent::new(data_base64, mime_type))
    }

    /// An audio item from already base64-encoded data.
    pub fn audio(data_base64: impl Into<String>, mime_type: impl Into<String>) -> Self {
        Content::Audio(BinaryContent::new(data_base64, mime_type))
    }

    /// An embedded resource item.
    pub fn resource(resource: ResourceContents) -> Self {
        Content::Resource(EmbeddedResource { resource, annotations: None, meta: None, extra: JsonObject::new() })
    }

    /// The value of this item's `type` field.
    pub fn kind(&self) -> &'static str {
        match self {
            Content::Text(_) => "text",
            Content::Image(_) => "image",
            Content::Audio(_) => "audio",
            Content::Resource(_) => "resource",
            Content::ResourceLink(_) => "resource_link",
        }
    }
}

/// The fields of a text item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextContent {
    /// The text.
    pub text: String,
    /// Audience and priority hints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// Free-form metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
    /// Fields this crate does not know, kept for the round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The fields of an image or audio item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BinaryContent {
    /// Base64-encoded bytes.
    pub data: String,
    /// MIME type of the bytes, for example `image/png`.
    #[serde(rename = "mimeType")]
    pub mime_type: String,
    /// Audience and priority hints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// Free-form metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
    /// Fields this crate does not know, kept for the round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl BinaryContent {
    /// Binary content from already base64-encoded data.
    pub fn new(data_base64: impl Into<String>, mime_type: impl Into<String>) -> Self {
        BinaryContent {
            data: data_base64.into(),
            mime_type: mime_type.into(),
            annotations: None,
            meta: None,
            extra: JsonObject::new(),
        }
    }
}

/// The fields of an embedded `resource` item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmbeddedResource {
    /// The resource itself.
    pub resource: ResourceContents,
    /// Audience and priority hints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// Free-form metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
    /// Fields this crate does not know, kept for the round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The contents of a resource: a URI with either `text` or base64 `blob`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceContents {
    /// The URI of the resource.
    pub uri: String,
    /// MIME type, if known.
    #[serde(rename = "mimeType", default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Text of a textual resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Base64-encoded bytes of a binary resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
    /// Free-form metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
    /// Fields this crate does not know, kept for the round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl ResourceContents {
    /// A textual resource.
    pub fn text(uri: impl Into<String>, text: impl Into<String>) -> Self {
        ResourceContents {
            uri: uri.into(),
            mime_type: None,
            text: Some(text.into()),
            blob: None,
            meta: None,
            extra: JsonObject::new(),
        }
    }

    /// A binary resource from already base64-encoded data.
    pub fn blob(uri: impl Into<String>, blob_base64: impl Into<String>) -> Self {
        ResourceContents {
            uri: uri.into(),
            mime_type: None,
            text: None,
            blob: Some(blob_base64.into()),
            meta: None,
            extra: JsonObject::new(),
        }
    }

    /// The same resource with a MIME type.
    pub fn with_mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.mime_type = Some(mime_type.into());
        self
    }
}

resource_shape! {
    /// The fields of a `resource_link` item.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct ResourceLink {
        /// The URI of the resource.
        pub uri: String,
        ..
        /// Size in bytes, if known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub size: Option<u64>,
        ..
        /// Fields this crate does not know, kept for the round trip.
        #[serde(flatten)]
        pub extra: JsonObject,
    }
}

/// Who a piece of content is for and how much it matters
/// (`TextAnnotation` in the plugin interface).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Annotations {
    /// Intended recipients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<Vec<Role>>,
    /// 0.0 (least important) to 1.0 (most important).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<f64>,
    /// ISO 8601 time of the last modification.
    #[serde(rename = "lastModified", default, skip_serializing_if = "Option::is_none")]
    pub last_modified: Option<String>,
    /// Fields this crate does not know, kept for the round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// A recipient of content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The model.
    Assistant,
    /// The person.
    User,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round_trip<T: Serialize + serde::de::DeserializeOwned>(value: Value) {
        let typed: T = serde_json::from_value(value.clone()).expect("deserializes");
        assert_eq!(serde_json::to_value(&typed).expect("serializes"), value);
    }

    #[test]
    fn list_tools_result_round_trips_with_unknown_fields() {
        round_trip::<ListToolsResult>(json!({
            "tools": [{
                "name": "add",
                "title": "Add",
                "description": "Adds.",
                "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}}},
                "outputSchema": {"type": "object"},
                "annotations": {"readOnlyHint": true, "idempotentHint": true, "x-custom": 1},
                "_meta": {"requirements": {"secrets": [{"id": "KEY"}]}},
                "version": "1.0.0",
                "tags": ["math"]
            }],
            "nextCursor": "abc"
        }));
    }

    #[test]
    fn call_tool_result_round_trips_every_content_type() {
        round_trip::<CallToolResult>(json!({
            "content": [
                {"type": "text", "text": "hi", "annotations": {"audience": ["user"], "priority": 0.5}},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"},
                {"type": "audio", "data": "AAAA", "mimeType": "audio/wav", "x": true},
                {"type": "resource", "resource": {"uri": "file:///a", "text": "t", "mimeType": "text/plain"}},
                {"type": "resource", "resource": {"uri": "file:///b", "blob": "AAAA"}},
                {"type": "resource_link", "uri": "file:///c", "name": "c", "size": 3}
            ],
            "isError": false,
            "structuredContent": {"result": 5},
            "_meta": {"k": "v"},
            "unknown": [1, 2]
        }));
    }

    #[test]
    fn call_tool_request_uses_interface_field_names() {
        let request = CallToolRequest::new("add", Some(json!({"a": 1}).as_object().unwrap().clone()));
        assert_eq!(
            serde_json::to_value(&request).unwrap(),
            json!({"method": "tools/call", "params": {"name": "add", "arguments": {"a": 1}}})
        );
        round_trip::<CallToolRequest>(json!({"params": {"name": "x", "arguments": {}, "extra": 1}, "id": 3}));
        let null_args: CallToolRequest =
            serde_json::from_value(json!({"params": {"name": "x", "arguments": null}})).unwrap();
        assert_eq!(null_args.params.arguments, None);
    }

    #[test]
    fn unknown_content_type_is_rejected() {
        let err = serde_json::from_value::<CallToolResult>(json!({"content": [{"type": "video"}]})).unwrap_err();
        assert!(err.to_string().contains("video"), "{err}");
    }

    #[test]
    fn shipped_schemas_are_json() {
        for text in [schema::LIST_TOOLS_RESULT, schema::CALL_TOOL_REQUEST, schema::CALL_TOOL_RESULT] {
            let value: Value = serde_json::from_str(text).expect("schema is JSON");
            assert_eq!(value["$schema"], "https://json-schema.org/draft/2020-12/schema");
        }
    }
}
