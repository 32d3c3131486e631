//! The parts of the tool-set service's models
//! (`spec/toolset-service.md`) that toolhost reads: a tool set's
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
    /// Query parameters; `{name}` in a value is an argument. The API
    /// document gives them as a query string (`q={query}&limit=10`); an
    /// object of names and values is taken too.
    #[serde(default, skip_serializing_if = "Query::is_empty")]
    pub query: Query,
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

/// `config.http.query`: the query's parameters, in order, each a name and
/// a template.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Query(pub Vec<(String, String)>);

impl Query {
    /// Whether it has no parameter.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for Query {
    /// As a query string, the API document's form.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut text = url::form_urlencoded::Serializer::new(String::new());
        for (name, template) in &self.0 {
            text.append_pair(name, template);
        }
        // `{` and `}` mark arguments: kept readable.
        serializer.serialize_str(&text.finish().replace("%7B", "{").replace("%7D", "}"))
    }
}

impl<'de> Deserialize<'de> for Query {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Query, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Given {
            Text(String),
            Map(BTreeMap<String, String>),
        }
        Ok(match Given::deserialize(deserializer)? {
            Given::Text(text) => Query(
                url::form_urlencoded::parse(text.trim_start_matches('?').as_bytes())
                    .map(|(name, template)| (name.into_owned(), template.into_owned()))
                    .collect(),
            ),
            Given::Map(map) => Query(map.into_iter().collect()),
        })
    }
}

/// The longest MCP name derived from a name.
const MAX_MCP_NAME: usize = 64;

/// The MCP name of a resource named `name` (the API document's names are
/// for people: "Email Tool"): letters, digits and `-` kept, every run of
/// anything else one `_` (`Email_Tool`), no `_` or `-` first and no `_`
/// last, at most 64 characters. A name that keeps nothing (only
/// punctuation or other scripts) gives `set_` and the last 8 characters of
/// `id`, lowercased. A name that was already an MCP name is unchanged.
pub(crate) fn mcp_name_of(name: &str, id: &str) -> String {
    let mut out = String::with_capacity(name.len().min(MAX_MCP_NAME));
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || c == '-' {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('_') {
            out.push('_');
        }
        if out.len() >= MAX_MCP_NAME {
            break;
        }
    }
    // (At most MAX_MCP_NAME long already: the loop stops there.)
    let out = out.trim_start_matches(['_', '-']).trim_end_matches('_');
    if out.is_empty() {
        let tail = &id[id.len().saturating_sub(8)..];
        format!("set_{}", tail.to_ascii_lowercase())
    } else {
        out.to_owned()
    }
}

/// The name a tool is offered under in its toolset (after its tool set's
/// MCP name and `__`): a synced tool's own; an http tool's
/// `config.http.toolName`, else [`mcp_name_of`] its name.
pub(crate) fn tool_mcp_name(tool: &crate::store::ToolRow) -> String {
    if tool.origin != "api" {
        return tool.name.clone();
    }
    match tool.spec.pointer("/config/http/toolName").and_then(Value::as_str) {
        Some(name) if !name.is_empty() => name.to_owned(),
        _ => mcp_name_of(&tool.name, &tool.id),
    }
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

impl Profile {
    /// As resources and events record it (`createdBy`).
    pub(crate) fn json(&self) -> Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

/// A profile's metadata.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProfileMetadata {
    /// The profile's id.
    pub id: String,
    /// Its account.
    pub account_id: String,
    /// Its display name: the token's `name` claim, else its id.
    #[serde(default)]
    pub name: String,
    /// The profile that made it: itself (a profile comes from its token).
    #[serde(default)]
    pub profile_id: String,
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

/// The metadata every stored resource has, borrowed.
pub(crate) struct Metadata<'a> {
    pub(crate) id: &'a str,
    pub(crate) account_id: &'a str,
    pub(crate) workspace_id: &'a str,
    pub(crate) profile_id: &'a str,
    pub(crate) name: &'a str,
    pub(crate) created_at: &'a str,
    pub(crate) updated_at: &'a str,
    pub(crate) external_id: &'a Option<String>,
    pub(crate) labels: &'a std::collections::BTreeMap<String, String>,
    pub(crate) version: i64,
}

impl Metadata<'_> {
    /// As the API shows it.
    pub(crate) fn json(&self) -> Value {
        let mut metadata = json!({
            "id": self.id,
            "accountId": self.account_id,
            "workspaceId": self.workspace_id,
            "profileId": self.profile_id,
            "name": self.name,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
            "resourceVersion": self.version.to_string(),
        });
        if let Some(external) = self.external_id {
            metadata["externalId"] = Value::from(external.clone());
        }
        if !self.labels.is_empty() {
            metadata["labels"] = json!(self.labels);
        }
        metadata
    }
}

/// The metadata of a stored row (a tool set's or a tool's: the same
/// columns).
macro_rules! metadata_of {
    ($row:expr) => {
        $crate::model::Metadata {
            id: &$row.id,
            account_id: &$row.account_id,
            workspace_id: &$row.workspace_id,
            profile_id: &$row.profile_id,
            name: &$row.name,
            created_at: &$row.created_at,
            updated_at: &$row.updated_at,
            external_id: &$row.external_id,
            labels: &$row.labels,
            version: $row.version,
        }
        .json()
    };
}
pub(crate) use metadata_of;

/// A tool set's `metadata`, as the API shows it.
pub(crate) fn tool_set_metadata(row: &crate::store::ToolSetRow) -> Value {
    metadata_of!(row)
}

/// The service's own profile in a workspace: the actor of the syncs it
/// starts itself.
pub(crate) fn system_profile(account_id: &str, workspace_id: &str) -> Profile {
    Profile {
        metadata: ProfileMetadata {
            id: "system".to_owned(),
            account_id: account_id.to_owned(),
            name: "toolhost".to_owned(),
            profile_id: "system".to_owned(),
            workspace_id: workspace_id.to_owned(),
        },
        spec: ProfileSpec { kind: ProfileType::System, email: None, name: Some("toolhost".to_owned()) },
    }
}

/// A profile as recorded (`createdBy`), as the API shows it: one recorded
/// before profiles carried `name` and `profileId` gets them (its display
/// name or id, and its id).
pub(crate) fn profile_json(recorded: &Value) -> Value {
    let mut profile = recorded.clone();
    if let Some(metadata) = profile.get_mut("metadata").and_then(Value::as_object_mut) {
        let id = metadata.get("id").cloned().unwrap_or_default();
        let name = recorded.pointer("/spec/name").cloned().unwrap_or_else(|| id.clone());
        for (member, value) in [("profileId", id), ("name", name)] {
            if metadata.get(member).is_none_or(|v| v.as_str().is_none_or(str::is_empty)) {
                metadata.insert(member.to_owned(), value);
            }
        }
    }
    profile
}

/// The kinds of sync event: as the store and the registry name them, as
/// the API's member names them, and as its `type` does.
const EVENT_KINDS: [(&str, &str, &str); 3] = [
    ("SyncStarted", "syncStarted", "sync_started"),
    ("SyncCompleted", "syncCompleted", "sync_completed"),
    ("SyncFailed", "syncFailed", "sync_failed"),
];

/// A recorded outcome (`{"SyncStarted": {...}}`) as the API's
/// `ToolSetEventData`: `{"syncStarted": {...}, "type": "sync_started"}`. A
/// `syncStarted`'s `message` is the time the sync began (`at`); what it
/// began to do is its `detail`.
pub(crate) fn event_data(recorded: &Value, at: &str) -> Value {
    for (stored, member, kind) in EVENT_KINDS {
        let Some(data) = recorded.get(stored) else { continue };
        let mut data = data.clone();
        if stored == "SyncStarted"
            && let Some(fields) = data.as_object_mut()
        {
            if let Some(detail) = fields.remove("message") {
                fields.insert("detail".to_owned(), detail);
            }
            fields.insert("message".to_owned(), Value::from(at));
        }
        return json!({member: data, "type": kind});
    }
    recorded.clone()
}

/// An event as a tool set's `last_sync` column keeps it: its outcome as
/// recorded (`{"SyncCompleted": ...}`, what syncs compare), read back by
/// [`stored_event`].
pub(crate) fn storable_event(event: &EventRow) -> Value {
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

/// The event a `last_sync` column keeps ([`storable_event`]).
pub(crate) fn stored_event(kept: &Value) -> EventRow {
    let text = |pointer: &str| kept.pointer(pointer).and_then(Value::as_str).unwrap_or_default().to_owned();
    EventRow {
        id: text("/metadata/id"),
        tool_set_id: text("/toolSetId"),
        account_id: text("/metadata/accountId"),
        workspace_id: text("/metadata/workspaceId"),
        event: kept.get("event").cloned().unwrap_or_default(),
        info: kept.get("info").cloned().unwrap_or_default(),
        created_at: text("/metadata/createdAt"),
    }
}

/// An event as the API shows it. Its `metadata.profileId` and
/// `info.createdBy` are the actor whose change caused it (the service's
/// own profile for a sync it started itself); `info.toolSet` is the tool
/// set's metadata when the event was recorded (`tool_set` for an event
/// recorded before events kept it).
pub(crate) fn event_json(event: &EventRow, tool_set: Option<&Value>) -> Value {
    let created_by = match event.info.get("createdBy") {
        Some(profile) => profile_json(profile),
        None => profile_json(&system_profile(&event.account_id, &event.workspace_id).json()),
    };
    let profile_id = created_by.pointer("/metadata/id").cloned().unwrap_or_default();
    let mut info = json!({"createdBy": created_by});
    if let Some(set) = event.info.get("toolSet").or(tool_set) {
        info["toolSet"] = set.clone();
    }
    if let Some(instance) = event.info.get("instance") {
        info["instance"] = instance.clone();
    }
    json!({
        "metadata": {
            "id": event.id,
            "accountId": event.account_id,
            "workspaceId": event.workspace_id,
            "profileId": profile_id,
            "createdAt": event.created_at,
        },
        "event": event_data(&event.event, &event.created_at),
        "info": info,
        "toolSetId": event.tool_set_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_mcp_name_keeps_letters_digits_and_dashes_and_joins_the_rest() {
        let id = "toolset_01M93A2X8E0GYYCRXV3A4AD70X";
        assert_eq!(mcp_name_of("Email Tool", id), "Email_Tool");
        assert_eq!(mcp_name_of("  Email  -- Tool! ", id), "Email_--_Tool");
        assert_eq!(mcp_name_of("calc", id), "calc");
        assert_eq!(mcp_name_of("my-tools_2", id), "my-tools_2");
        assert_eq!(mcp_name_of("a__b", id), "a_b", "`__` separates a prefix from a tool");
        assert_eq!(mcp_name_of("Café résumé", id), "Caf_r_sum");
        assert_eq!(mcp_name_of("_-x", id), "x");
        assert_eq!(mcp_name_of("計算", id), "set_3a4ad70x");
        assert_eq!(mcp_name_of("!!!", "t"), "set_t");
        let long = mcp_name_of(&"ab ".repeat(100), id);
        assert!(long.len() <= MAX_MCP_NAME && !long.ends_with('_'), "{long}");
    }
}
