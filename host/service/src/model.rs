//! The parts of the tool-set service's models
//! (`../shared/spec/toolset-service.md`) that toolhost reads: a tool set's
//! spec and adapters, a tool's HTTP request, profiles. Every model, as the
//! API sends and takes it, is a JSON Schema in
//! `host/service/schema/toolset-service.schema.json`; request bodies are
//! checked against it before they are read into these types.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::store::EventRow;

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
    /// Which of its tools are offered, and which need approval.
    #[serde(flatten)]
    pub filters: ToolFilters,
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
    /// Which of its tools are offered, and which need approval.
    #[serde(flatten)]
    pub filters: ToolFilters,
}

/// An adapter's filters, as a toolsets file's `extensions` has them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ToolFilters {
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

/// An event as the API shows it.
pub(crate) fn event_json(event: &EventRow) -> Value {
    json!({
        "metadata": {
            "id": event.id,
            "accountId": event.account_id,
            "workspaceId": event.workspace_id,
            "createdAt": event.created_at,
        },
        "event": event.event,
        "info": event.info,
        "toolSetId": event.tool_set_id,
    })
}
