//! `/v1/openapi.json`: the API as an OpenAPI 3.1 document, built from what
//! the server itself uses: the paths it routes ([`OPERATIONS`], the table
//! [`routes`](super::routes) mounts) and the JSON Schema every request body
//! is checked against (`schema/toolset-service.schema.json`, whose `$defs`
//! become the document's `components.schemas` unchanged; OpenAPI 3.1's
//! schemas are JSON Schema 2020-12).

use std::sync::OnceLock;

use serde_json::{Map, Value, json};

/// The collection of tool sets.
pub(crate) const TOOL_SETS: &str = "/v1/tool_sets";
/// One tool set.
pub(crate) const TOOL_SET: &str = "/v1/tool_sets/{id}";
/// A tool set's sync events.
pub(crate) const EVENTS: &str = "/v1/tool_sets/{toolSetId}/events";
/// A tool set's tools.
pub(crate) const TOOLS: &str = "/v1/tool_sets/{toolSetId}/tools";
/// One tool of a tool set.
pub(crate) const TOOL: &str = "/v1/tool_sets/{toolSetId}/tools/{id}";
/// The document itself.
pub(crate) const DOCUMENT: &str = "/v1/openapi.json";

/// What an operation answers with on success.
#[derive(Clone, Copy)]
pub(crate) enum Answer {
    /// `200` with a list model, paged.
    Page(&'static str),
    /// `200` (or `201` for a create) with a model and its `ETag`.
    One(&'static str),
    /// `204`, no body.
    Nothing,
}

/// One operation of the API.
pub(crate) struct Operation {
    pub method: &'static str,
    pub path: &'static str,
    pub id: &'static str,
    pub summary: &'static str,
    /// The model its body is checked against.
    pub body: Option<&'static str>,
    pub answer: Answer,
    /// Whether it takes `name` and `labelSelector` list filters.
    pub filtered: bool,
}

/// Every operation the server routes.
pub(crate) const OPERATIONS: &[Operation] = &[
    Operation {
        method: "get",
        path: TOOL_SETS,
        id: "listToolSets",
        summary: "List the workspace's tool sets",
        body: None,
        answer: Answer::Page("ToolSetList"),
        filtered: true,
    },
    Operation {
        method: "post",
        path: TOOL_SETS,
        id: "createToolSet",
        summary: "Create a tool set and sync its tools",
        body: Some("ToolSet"),
        answer: Answer::One("ToolSet"),
        filtered: false,
    },
    Operation {
        method: "get",
        path: TOOL_SET,
        id: "getToolSet",
        summary: "Read a tool set",
        body: None,
        answer: Answer::One("ToolSet"),
        filtered: false,
    },
    Operation {
        method: "put",
        path: TOOL_SET,
        id: "updateToolSet",
        summary: "Replace a tool set's name, labels and spec, and sync it",
        body: Some("ToolSet"),
        answer: Answer::One("ToolSet"),
        filtered: false,
    },
    Operation {
        method: "delete",
        path: TOOL_SET,
        id: "deleteToolSet",
        summary: "Delete a tool set and its tools (its events stay)",
        body: None,
        answer: Answer::Nothing,
        filtered: false,
    },
    Operation {
        method: "get",
        path: EVENTS,
        id: "listToolSetEvents",
        summary: "List or watch a tool set's sync events, oldest first",
        body: None,
        answer: Answer::Page("ToolSetEventList"),
        filtered: false,
    },
    Operation {
        method: "get",
        path: TOOLS,
        id: "listTools",
        summary: "List a tool set's tools",
        body: None,
        answer: Answer::Page("ToolList"),
        filtered: true,
    },
    Operation {
        method: "post",
        path: TOOLS,
        id: "createTool",
        summary: "Create a tool of an http tool set",
        body: Some("Tool"),
        answer: Answer::One("Tool"),
        filtered: false,
    },
    Operation {
        method: "get",
        path: TOOL,
        id: "getTool",
        summary: "Read a tool",
        body: None,
        answer: Answer::One("Tool"),
        filtered: false,
    },
    Operation {
        method: "put",
        path: TOOL,
        id: "updateTool",
        summary: "Replace a tool (a synced tool: its status and approval)",
        body: Some("Tool"),
        answer: Answer::One("Tool"),
        filtered: false,
    },
    Operation {
        method: "delete",
        path: TOOL,
        id: "deleteTool",
        summary: "Delete a tool of an http tool set",
        body: None,
        answer: Answer::Nothing,
        filtered: false,
    },
];

/// The served document (built once).
pub(crate) fn document() -> &'static Value {
    static DOCUMENT: OnceLock<Value> = OnceLock::new();
    DOCUMENT.get_or_init(build)
}

fn schema_ref(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

/// `value` with every `#/$defs/X` reference made `#/components/schemas/X`.
fn rebased(value: Value) -> Value {
    match value {
        Value::String(text) => match text.strip_prefix("#/$defs/") {
            Some(name) => Value::from(format!("#/components/schemas/{name}")),
            None => Value::String(text),
        },
        Value::Array(items) => Value::Array(items.into_iter().map(rebased).collect()),
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, rebased(v))).collect()),
        other => other,
    }
}

fn path_parameters(path: &str) -> Vec<Value> {
    path.split('/')
        .filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}'))
        .map(|name| {
            let what = match name {
                "toolSetId" => "The tool set's id (`toolset_...`).",
                _ if path.contains("/tools/") => "The tool's id (`tool_...`).",
                _ => "The tool set's id (`toolset_...`).",
            };
            json!({"name": name, "in": "path", "required": true, "description": what, "schema": {"type": "string"}})
        })
        .collect()
}

fn operation(op: &Operation) -> Value {
    let error =
        |what: &str| json!({"description": what, "content": {"application/json": {"schema": schema_ref("Error")}}});
    let mut parameters = path_parameters(op.path);
    let mut responses = Map::new();
    let etag = json!({"ETag": {"description": "The resource version, for `If-Match`.", "schema": {"type": "string"}}});
    match op.answer {
        Answer::Page(model) => {
            parameters.push(json!({"$ref": "#/components/parameters/pageSize"}));
            parameters.push(json!({"$ref": "#/components/parameters/pageToken"}));
            if op.filtered {
                parameters.push(json!({"$ref": "#/components/parameters/name"}));
                parameters.push(json!({"$ref": "#/components/parameters/labelSelector"}));
            }
            let mut content = json!({"application/json": {"schema": schema_ref(model)}});
            if op.path == EVENTS {
                parameters.push(json!({"$ref": "#/components/parameters/watch"}));
                parameters.push(json!({"$ref": "#/components/parameters/Last-Event-ID"}));
                content["text/event-stream"] = json!({"schema": {"type": "string",
                    "description": "With `watch=true`: server-sent events, one per ToolSetEvent \
                        (`id:` its id, `event:` its type, `data:` the ToolSetEvent as JSON), \
                        those recorded already and then each as it is recorded. A watch lasts \
                        at most 30 minutes; reconnect with `Last-Event-ID` to go on."}});
            }
            responses.insert(
                "200".into(),
                json!({"description": "A page, in id order; `nextPageToken` is null on the last. \
                           (With `watch=true`, the event stream.)",
                       "content": content}),
            );
        }
        Answer::One(model) => {
            let (status, what) = match op.method {
                "post" => ("201", "Created; `Location` names it."),
                _ => ("200", "The resource as it is now."),
            };
            let mut headers = etag.clone();
            if op.method == "post" {
                headers["Location"] = json!({"description": "The new resource's path.", "schema": {"type": "string"}});
            }
            responses.insert(
                status.into(),
                json!({"description": what, "headers": headers,
                       "content": {"application/json": {"schema": schema_ref(model)}}}),
            );
        }
        Answer::Nothing => {
            responses.insert("204".into(), json!({"description": "Deleted."}));
        }
    }
    if op.method == "put" {
        parameters.push(json!({"$ref": "#/components/parameters/If-Match"}));
    }
    if op.method == "post" {
        parameters.push(json!({"$ref": "#/components/parameters/Idempotency-Key"}));
    }
    if op.answer.has_input() || op.body.is_some() {
        responses.insert("400".into(), error("The request is not valid: each problem with its JSON pointer."));
    }
    responses.insert("401".into(), error("No valid bearer token."));
    responses.insert("403".into(), error("The token's actor may not do this."));
    if op.path != TOOL_SETS {
        responses.insert("404".into(), error("No such resource in the caller's workspace."));
    }
    if op.body.is_some() {
        let conflict = match op.method {
            "post" => "The name is taken, or the `Idempotency-Key` is in use or was used for another request.",
            _ => "The version named (`If-Match`) is no longer current, or the name is taken.",
        };
        responses.insert("409".into(), error(conflict));
        responses.insert("413".into(), error("The body is larger than 1 MiB."));
    }
    responses.insert("429".into(), error("Over the workspace's request rate or a quota; `Retry-After` says when."));
    responses.insert("503".into(), error("The store cannot be reached; `Retry-After` says when to try again."));
    let mut value = json!({
        "operationId": op.id,
        "summary": op.summary,
        "tags": [if op.path.contains("/tools") { "Tools" } else if op.path.contains("/events") { "Events" } else { "Tool sets" }],
        "parameters": parameters,
        "responses": responses,
    });
    if let Some(model) = op.body {
        value["requestBody"] =
            json!({"required": true, "content": {"application/json": {"schema": schema_ref(model)}}});
    }
    value
}

impl Answer {
    /// Whether the operation reads a query or body that can be wrong.
    fn has_input(self) -> bool {
        matches!(self, Answer::Page(_))
    }
}

fn build() -> Value {
    let schema: Value = serde_json::from_str(include_str!("../../schema/toolset-service.schema.json"))
        .expect("the shipped schema is JSON");
    let schemas = rebased(schema["$defs"].clone());
    let mut paths = Map::new();
    for op in OPERATIONS {
        let item = paths.entry(op.path).or_insert_with(|| json!({}));
        item[op.method] = operation(op);
    }
    json!({
        "openapi": "3.1.0",
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "info": {
            "title": "toolhost tool-set service",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Tool sets and their tools per workspace: what the API changes is what agents see over MCP. \
                Every request carries a bearer token naming its account, workspace and profile, and sees only its workspace.",
        },
        "tags": [
            {"name": "Tool sets", "description": "Groups of tools from one source: an MCP server, an HTTP API or a Wasm plugin."},
            {"name": "Tools", "description": "A tool set's tools: synced from its source, or made through the API for an http tool set."},
            {"name": "Events", "description": "The record of each sync: started, then completed or failed."},
        ],
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}},
            "parameters": {
                "pageSize": {"name": "pageSize", "in": "query", "description": "Items per page.",
                    "schema": {"type": "integer", "minimum": 1, "maximum": super::MAX_PAGE, "default": super::PAGE}},
                "pageToken": {"name": "pageToken", "in": "query",
                    "description": "The `nextPageToken` of the page before.", "schema": {"type": "string"}},
                "name": {"name": "name", "in": "query",
                    "description": "Only the items of exactly this `metadata.name`.", "schema": {"type": "string"}},
                "labelSelector": {"name": "labelSelector", "in": "query",
                    "description": "Only the items whose `metadata.labels` match every requirement, comma-separated: \
                        `key=value` (or `==`), `key!=value`, `key` (has it), `!key` (has it not), \
                        `key in (a,b)`, `key notin (a,b)`.",
                    "schema": {"type": "string"}},
                "watch": {"name": "watch", "in": "query",
                    "description": "`true`: answer with a stream of server-sent events that stays open \
                        (at most 16 per workspace) instead of a page.",
                    "schema": {"type": "boolean", "default": false}},
                "Last-Event-ID": {"name": "Last-Event-ID", "in": "header",
                    "description": "With `watch=true`: go on after this event (what an EventSource \
                        sends when it reconnects); `pageToken` does the same.",
                    "schema": {"type": "string"}},
                "If-Match": {"name": "If-Match", "in": "header",
                    "description": "The `ETag` read: the update is refused with 409 if the resource changed since. \
                        (`metadata.resourceVersion` in the body does the same.)",
                    "schema": {"type": "string"}},
                "Idempotency-Key": {"name": "Idempotency-Key", "in": "header",
                    "description": "A key of the client's choosing (at most 255 characters): a create repeated with \
                        the same key and body within 24 hours is answered as the first was, and makes nothing twice.",
                    "schema": {"type": "string", "minLength": 1, "maxLength": 255}},
            },
            "schemas": schemas,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reference_resolves_inside_the_document() {
        let document = document();
        let mut missing = Vec::new();
        fn walk(value: &Value, document: &Value, missing: &mut Vec<String>) {
            match value {
                Value::Object(map) => {
                    if let Some(Value::String(target)) = map.get("$ref") {
                        let found = target.strip_prefix('#').and_then(|pointer| document.pointer(pointer));
                        if found.is_none() {
                            missing.push(target.clone());
                        }
                    }
                    map.values().for_each(|v| walk(v, document, missing));
                }
                Value::Array(items) => items.iter().for_each(|v| walk(v, document, missing)),
                _ => {}
            }
        }
        walk(document, document, &mut missing);
        assert!(missing.is_empty(), "{missing:?}");
        assert!(!document.to_string().contains("#/$defs/"));
    }

    #[test]
    fn every_operation_has_a_unique_id_and_every_path_parameter_is_declared() {
        let mut ids: Vec<&str> = OPERATIONS.iter().map(|op| op.id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), OPERATIONS.len());
        for op in OPERATIONS {
            let declared = document()["paths"][op.path][op.method]["parameters"].as_array().unwrap().clone();
            for name in op.path.split('/').filter_map(|s| s.strip_prefix('{')?.strip_suffix('}')) {
                assert!(declared.iter().any(|p| p["name"] == name), "{} {}: {name}", op.method, op.path);
            }
        }
    }
}
