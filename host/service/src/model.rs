//! The models of the tool-set service (`../shared/spec/toolset-service.md`),
//! as its API sends them: `ToolSet`, `Tool`, `ToolSetEvent`, `Profile`,
//! `ResourceMetadata`. Request bodies are checked against the JSON Schemas
//! in `host/service/schema/` before they are read into these types.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What every resource carries: its prefixed ULID, where it lives
/// (account, workspace), who made it, when, and the version an update must
/// name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceMetadata {
    /// `toolset_01H...`, `tool_01H...`, `event_01H...`.
    pub id: String,
    /// The account of the workspace.
    pub account_id: String,
    /// The workspace it belongs to.
    pub workspace_id: String,
    /// The profile that created it.
    pub profile_id: String,
    /// Its name, unique among its siblings.
    pub name: String,
    /// When it was created (RFC 3339, UTC).
    pub created_at: String,
    /// When it last changed.
    pub updated_at: String,
    /// An id in the caller's own system.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_id: Option<String>,
    /// Free labels (`{"environment": "production"}`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// The version to name in `If-Match` (also the `ETag`).
    pub resource_version: String,
}

/// A tool set: a group of tools from one adapter.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSet {
    /// Who, where, when.
    pub metadata: ResourceMetadata,
    /// What it is.
    pub spec: ToolSetSpec,
    /// What the service knows of it.
    pub info: ToolSetInfo,
}

/// What a tool set is: its adapter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ToolSetSpec {
    /// Where its tools come from (one adapter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapter: Option<ToolSetAdapter>,
    /// What it is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its tools may be changed only by API-key actors.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub managed: bool,
}

/// Where a tool set's tools come from: exactly one of these.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ToolSetAdapter {
    /// Tools defined through the API, each an HTTP call against `baseUrl`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpAdapter>,
    /// Tools synced from a remote MCP server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<McpAdapter>,
    /// Tools of a toolhost Wasm plugin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<UriAdapter>,
}

/// `spec.adapter.http`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct HttpAdapter {
    /// What every tool's path is relative to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// Headers sent with every call.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
}

/// `spec.adapter.mcp`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct McpAdapter {
    /// The server's streamable HTTP endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Headers sent with every request.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Only tools matching this `McpToolFilter` are available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_tools: Option<Value>,
    /// Tools matching this `McpToolFilter` are filtered out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude_tools: Option<Value>,
    /// Which synced tools require approval (`{always?, only?}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_approvals: Option<Value>,
}

/// `spec.adapter.uri`: a Wasm plugin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct UriAdapter {
    /// `https://...` (with `digest`), `oci://...@sha256:...`, or a
    /// `file://` path inside a directory the operator allows.
    pub url: String,
    /// The module's SHA-256 (`sha256:...`), required for `https://`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// The plugin's configuration (its `config`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<BTreeMap<String, String>>,
    /// Only tools matching this `McpToolFilter` are available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_tools: Option<Value>,
    /// Tools matching this `McpToolFilter` are filtered out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude_tools: Option<Value>,
    /// Which tools require approval (`{always?, only?}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_approvals: Option<Value>,
}

impl ToolSetAdapter {
    /// `http`, `mcp` or `uri`.
    pub fn kind(&self) -> Option<&'static str> {
        match (&self.http, &self.mcp, &self.uri) {
            (Some(_), None, None) => Some("http"),
            (None, Some(_), None) => Some("mcp"),
            (None, None, Some(_)) => Some("uri"),
            _ => None,
        }
    }
}

/// What the service knows of a tool set.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ToolSetInfo {
    /// Who created it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_by: Option<Profile>,
    /// Its last sync's outcome (`SyncCompleted` or `SyncFailed`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_sync: Option<ToolSetEvent>,
    /// How many tools it has (any status but archived).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_count: Option<i64>,
}

/// A tool of a tool set.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    /// Who, where, when.
    pub metadata: ResourceMetadata,
    /// What it is.
    pub spec: ToolSpec,
    /// What the service knows of it.
    pub info: ToolInfo,
}

/// What a tool is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ToolSpec {
    /// How it is called.
    #[serde(default)]
    pub config: ToolSpecConfig,
    /// What it does (shown to the model).
    #[serde(default)]
    pub description: String,
    /// The JSON Schema of its arguments.
    #[serde(default)]
    pub parameters: serde_json::Map<String, Value>,
    /// `TOOL_STATUS_AVAILABLE`, `TOOL_STATUS_FILTERED` or
    /// `TOOL_STATUS_ARCHIVED`.
    #[serde(default)]
    pub status: ToolStatus,
    /// A person must approve each call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requires_approval: Option<bool>,
}

/// The adapter a tool is called through.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ToolSpecConfig {
    /// An HTTP call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<ConfigHttp>,
    /// A tool of the tool set's MCP server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<ConfigMcp>,
}

/// `config.http`: the request a call makes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ConfigHttp {
    /// `GET`, `POST`, `PUT`, `PATCH` or `DELETE`.
    pub request_method: String,
    /// Headers of this tool's requests (on top of the tool set's).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// The path under the tool set's `baseUrl`; `{name}` is an argument.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Query parameters; `{name}` in a value is an argument.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub query: BTreeMap<String, String>,
    /// The body's content type (default `application/json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_body_content_type: Option<String>,
    /// The body (POST, PUT, PATCH); `{name}` is an argument.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_body_template: Option<String>,
    /// The operation id (default: the tool's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
}

/// `config.mcp`: the MCP server's own tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMcp {
    /// Its description on the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_description: Option<String>,
    /// Its name on the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// Its title on the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_title: Option<String>,
}

/// A tool's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum ToolStatus {
    /// Not said (read as available).
    #[default]
    #[serde(rename = "TOOL_STATUS_UNSPECIFIED")]
    Unspecified,
    /// Agents see it and may call it.
    #[serde(rename = "TOOL_STATUS_AVAILABLE")]
    Available,
    /// Known, not offered (a filter, or set so).
    #[serde(rename = "TOOL_STATUS_FILTERED")]
    Filtered,
    /// Gone from its source (kept, not offered).
    #[serde(rename = "TOOL_STATUS_ARCHIVED")]
    Archived,
}

/// What the service knows of a tool.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ToolInfo {
    /// Who created it (the syncing system, for synced tools).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_by: Option<Profile>,
    /// The tool set it belongs to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_set: Option<ResourceMetadata>,
}

/// Who acted: a person, an API key, or the system itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Profile {
    /// The profile's id, account and workspace.
    pub metadata: ProfileMetadata,
    /// What kind of profile.
    pub spec: ProfileSpec,
}

/// A profile's metadata.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProfileMetadata {
    /// The profile's id.
    pub id: String,
    /// Its account.
    pub account_id: String,
    /// Its workspace.
    pub workspace_id: String,
}

/// A profile's kind and names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProfileSpec {
    /// `PROFILE_TYPE_USER`, `PROFILE_TYPE_API_KEY` or `PROFILE_TYPE_SYSTEM`.
    #[serde(rename = "type")]
    pub kind: ProfileType,
    /// A person's email.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// A display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// The kinds of profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProfileType {
    /// A person.
    #[serde(rename = "PROFILE_TYPE_USER")]
    User,
    /// An API key (may change managed tool sets' tools).
    #[serde(rename = "PROFILE_TYPE_API_KEY")]
    ApiKey,
    /// The service itself (syncs).
    #[serde(rename = "PROFILE_TYPE_SYSTEM")]
    System,
}

/// One sync event of a tool set (append-only).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSetEvent {
    /// Its id (`event_01H...`), account, workspace and time.
    pub metadata: EventMetadata,
    /// `{"SyncStarted": {...}}`, `{"SyncCompleted": {...}}` or
    /// `{"SyncFailed": {...}}`.
    pub event: Value,
    /// Which instance synced.
    pub info: Value,
    /// The tool set's id.
    pub tool_set_id: String,
}

/// An event's metadata.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventMetadata {
    /// `event_01H...`.
    pub id: String,
    /// The account.
    pub account_id: String,
    /// The workspace.
    pub workspace_id: String,
    /// When it happened.
    pub created_at: String,
}
