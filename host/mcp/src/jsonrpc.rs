//! What both transports share: JSON-RPC error answers, the checks rmcp
//! does not make, and the limits.

// Without a transport, only the limits are used.
#![cfg_attr(not(any(feature = "stdio", feature = "http")), allow(dead_code))]

use std::time::Duration;

#[cfg(feature = "stdio")]
use rmcp::model::{ClientJsonRpcMessage, ClientRequest};
#[cfg(feature = "stdio")]
use serde::Deserialize as _;
use serde_json::{Value, json};

/// The JSON-RPC error code of a request refused by a limit (a rate, or the
/// calls a server runs at once), in the range JSON-RPC leaves to servers.
pub(crate) const LIMITED: i32 = -32029;

/// The tools/call requests a server answers at once unless told
/// (`McpServer::with_max_calls`, `HttpLimits::calls`).
pub(crate) const DEFAULT_MAX_CALLS: usize = 1024;

/// The seconds a client refused for want of room (calls, bodies,
/// connections) is told to wait before it tries again (`Retry-After`,
/// `retryAfterMs`).
pub(crate) const SHED_RETRY_SECONDS: u64 = 1;

/// What a client is told of a call refused because `max` are running.
pub(crate) fn calls_refusal_text(max: usize) -> String {
    format!("the server is running its most tool calls at once ({max}); try again shortly")
}

/// The longest JSON-RPC message (one line on stdio, one POST body on HTTP)
/// the server reads: rmcp's own limit.
pub const MAX_LINE: usize = 16 * 1024 * 1024;

/// The most messages one JSON-RPC batch may hold. Each gets an answer the
/// server builds and keeps until the batch is done: 16 MiB of `[0,0,…]`
/// was eight million error answers, gigabytes, from one request.
pub const MAX_BATCH: usize = 64;

/// The refusal of a batch of `len` messages, more than [`MAX_BATCH`].
pub(crate) fn batch_too_long(len: usize) -> Value {
    error_response(
        Value::Null,
        -32600,
        format!("a batch of {len} messages is more than the {MAX_BATCH} one request may hold"),
    )
}

/// How long a shutdown waits for connections to close before serving ends
/// anyway.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// A JSON-RPC error response.
pub(crate) fn error_response(id: Value, code: i64, message: impl Into<String>) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}})
}

/// The `-32602` answer rmcp would not give (it says `-32601`): a
/// `tools/call` request without params, with a name that is not a string,
/// or with arguments that are not an object.
pub(crate) fn malformed_call(message: &Value) -> Option<Value> {
    if message.get("method").and_then(Value::as_str) != Some("tools/call") {
        return None;
    }
    let id = message.get("id")?.clone();
    let problem = match message.get("params") {
        None | Some(Value::Null) => "tools/call needs params: {name, arguments}",
        Some(Value::Object(params)) => match (params.get("name"), params.get("arguments")) {
            (Some(Value::String(_)), None | Some(Value::Null | Value::Object(_))) => return None,
            (Some(Value::String(_)), Some(_)) => "the arguments of tools/call must be an object",
            _ => "tools/call needs a tool name (a string) in params.name",
        },
        Some(_) => "the params of tools/call must be an object",
    };
    Some(error_response(id, -32602, problem))
}

/// Check one parsed message (not a batch): forward it or answer it.
pub(crate) fn check_message(mut message: Value) -> Result<Value, Value> {
    if !message.is_object() {
        return Err(error_response(Value::Null, -32600, "a JSON-RPC message must be an object"));
    }
    accept_unversioned_client(&mut message);
    match malformed_call(&message) {
        Some(answer) => Err(answer),
        None => Ok(message),
    }
}

/// An `initialize` whose `clientInfo` has no `version` is taken, as the
/// reference SDKs take it, with an empty version (rmcp's types require
/// one, and its refusal spoke of another protocol version's `_meta`).
/// Whether the message was changed.
pub(crate) fn accept_unversioned_client(message: &mut Value) -> bool {
    if message.get("method").and_then(Value::as_str) != Some("initialize") {
        return false;
    }
    match message.pointer_mut("/params/clientInfo") {
        Some(Value::Object(info)) if !info.contains_key("version") => {
            info.insert("version".to_owned(), Value::from(""));
            true
        }
        _ => false,
    }
}

/// The protocol versions whose sessions may send JSON-RPC batches: those
/// before 2025-06-18, which removed them.
const BATCHING_VERSIONS: [&str; 2] = ["2024-11-05", "2025-03-26"];

/// Whether a session of protocol `version` may send a batch.
pub(crate) fn batches_allowed(version: &str) -> bool {
    BATCHING_VERSIONS.contains(&version)
}

/// The refusal of a batch in a session (or request) of protocol `version`.
pub(crate) fn batch_not_in_version(version: &str) -> Value {
    error_response(
        Value::Null,
        -32600,
        format!(
            "JSON-RPC batches are not part of protocol version {version} (they were removed after \
             2025-03-26): send each message on its own"
        ),
    )
}

/// A well-formed `tools/call` request as rmcp's message, built without
/// rmcp's untagged parse (which tries every other request type first).
/// `None` for anything else, which then takes the general path.
#[cfg(feature = "stdio")]
pub(crate) fn tool_call(message: &Value) -> Option<ClientJsonRpcMessage> {
    CallBody::deserialize(message).ok().map(CallBody::into_message)
}

/// A `tools/call` request as [`parse_tool_call`] and [`tool_call`] take
/// it: the four members of a JSON-RPC request and nothing else, each once.
///
/// Read by hand ([`CallBody::deserialize`]), not derived: serde's derive
/// also reads a struct from a JSON array, member by member in order, so
/// `["2.0",1,"tools/call",{…}]` (a batch of four invalid messages to
/// everyone else) would have been run as a call.
#[cfg(any(feature = "stdio", feature = "http"))]
struct CallBody {
    id: rmcp::model::RequestId,
    params: CallParams,
}

/// The `params` of a [`CallBody`], as rmcp reads them: `_meta` apart,
/// members it does not know read as JSON and dropped.
#[cfg(any(feature = "stdio", feature = "http"))]
struct CallParams {
    meta: Option<rmcp::model::JsonObject>,
    name: String,
    arguments: Option<rmcp::model::JsonObject>,
    input_responses: Option<rmcp::model::InputResponses>,
    request_state: Option<String>,
}

/// The members of a [`CallBody`]; any other is an error.
#[cfg(any(feature = "stdio", feature = "http"))]
#[derive(serde::Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum BodyMember {
    Jsonrpc,
    Id,
    Method,
    Params,
}

/// The members of [`CallParams`], and any other.
#[cfg(any(feature = "stdio", feature = "http"))]
#[derive(serde::Deserialize)]
#[serde(field_identifier, rename_all = "camelCase")]
enum ParamsMember {
    #[serde(rename = "_meta")]
    Meta,
    Name,
    Arguments,
    InputResponses,
    RequestState,
    #[serde(other)]
    Other,
}

/// Fill `slot` with the map's next value, once: a member named twice is
/// an error, as serde's derive makes it.
#[cfg(any(feature = "stdio", feature = "http"))]
fn once<'de, A: serde::de::MapAccess<'de>, T: serde::Deserialize<'de>>(
    map: &mut A,
    slot: &mut Option<T>,
    name: &'static str,
) -> Result<(), A::Error> {
    if slot.is_some() {
        return Err(serde::de::Error::duplicate_field(name));
    }
    *slot = Some(map.next_value()?);
    Ok(())
}

#[cfg(any(feature = "stdio", feature = "http"))]
impl<'de> serde::Deserialize<'de> for CallBody {
    /// Only from a JSON object (`deserialize_map`), never an array.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Body;
        impl<'de> serde::de::Visitor<'de> for Body {
            type Value = CallBody;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON-RPC request object")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<CallBody, A::Error> {
                let mut jsonrpc: Option<rmcp::model::JsonRpcVersion2_0> = None;
                let mut method: Option<rmcp::model::CallToolRequestMethod> = None;
                let (mut id, mut params) = (None, None);
                while let Some(member) = map.next_key()? {
                    match member {
                        BodyMember::Jsonrpc => once(&mut map, &mut jsonrpc, "jsonrpc")?,
                        BodyMember::Id => once(&mut map, &mut id, "id")?,
                        BodyMember::Method => once(&mut map, &mut method, "method")?,
                        BodyMember::Params => once(&mut map, &mut params, "params")?,
                    }
                }
                use serde::de::Error as _;
                jsonrpc.ok_or_else(|| A::Error::missing_field("jsonrpc"))?;
                method.ok_or_else(|| A::Error::missing_field("method"))?;
                Ok(CallBody {
                    id: id.ok_or_else(|| A::Error::missing_field("id"))?,
                    params: params.ok_or_else(|| A::Error::missing_field("params"))?,
                })
            }
        }
        deserializer.deserialize_map(Body)
    }
}

#[cfg(any(feature = "stdio", feature = "http"))]
impl<'de> serde::Deserialize<'de> for CallParams {
    /// Only from a JSON object. A member rmcp does not know is read as a
    /// `Value` and dropped, so it is checked as the general path's parse
    /// checks it (numbers in range, escapes, UTF-8, depth), not skipped.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Params;
        impl<'de> serde::de::Visitor<'de> for Params {
            type Value = CallParams;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("the params of a tools/call, an object")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<CallParams, A::Error> {
                // Each optional member: absent, `null` or a value.
                let (mut meta, mut name, mut arguments) = (None::<Option<_>>, None, None::<Option<_>>);
                let (mut input_responses, mut request_state) = (None::<Option<_>>, None::<Option<_>>);
                while let Some(member) = map.next_key()? {
                    match member {
                        ParamsMember::Meta => once(&mut map, &mut meta, "_meta")?,
                        ParamsMember::Name => once(&mut map, &mut name, "name")?,
                        ParamsMember::Arguments => once(&mut map, &mut arguments, "arguments")?,
                        ParamsMember::InputResponses => once(&mut map, &mut input_responses, "inputResponses")?,
                        ParamsMember::RequestState => once(&mut map, &mut request_state, "requestState")?,
                        ParamsMember::Other => {
                            map.next_value::<Value>()?;
                        }
                    }
                }
                use serde::de::Error as _;
                Ok(CallParams {
                    meta: meta.flatten(),
                    name: name.ok_or_else(|| A::Error::missing_field("name"))?,
                    arguments: arguments.flatten(),
                    input_responses: input_responses.flatten(),
                    request_state: request_state.flatten(),
                })
            }
        }
        deserializer.deserialize_map(Params)
    }
}

/// An id, params and `_meta` (which rmcp keeps apart from the params).
#[cfg(any(feature = "stdio", feature = "http"))]
pub(crate) type CallParts =
    (rmcp::model::RequestId, rmcp::model::CallToolRequestParams, Option<rmcp::model::JsonObject>);

#[cfg(any(feature = "stdio", feature = "http"))]
impl CallBody {
    /// Its id, params and `_meta`, as rmcp's types.
    fn into_parts(self) -> CallParts {
        let CallBody { id, params } = self;
        let mut call = rmcp::model::CallToolRequestParams::new(params.name);
        call.arguments = params.arguments;
        call.input_responses = params.input_responses;
        call.request_state = params.request_state;
        (id, call, params.meta)
    }

    /// As rmcp's message, `_meta` in the request's extensions.
    #[cfg(feature = "stdio")]
    fn into_message(self) -> ClientJsonRpcMessage {
        let (id, params, meta) = self.into_parts();
        let mut request = rmcp::model::CallToolRequest::new(params);
        if let Some(meta) = meta {
            request.extensions.insert(rmcp::model::RequestMetaObject::from(meta));
        }
        ClientJsonRpcMessage::request(ClientRequest::CallToolRequest(request), id)
    }
}

/// A `tools/call` request parsed straight from its bytes into rmcp's
/// types, as rmcp's parse would make them: its id, params, and `_meta`.
/// No `Value` first, and not rmcp's parse, whose flattened `params` are
/// buffered and parsed a second time. `None` for anything else, or
/// anything unusual (another method, a duplicate member, a name that is not
/// a string...), which then takes the general path.
///
/// The bytes are checked as UTF-8 once, in one pass, and then parsed as
/// text: serde's parse of bytes checks every string it reads on its own, a
/// call at a time (and bytes that are not UTF-8 are no request either way).
#[cfg(any(feature = "stdio", feature = "http"))]
pub(crate) fn parse_tool_call(bytes: &[u8]) -> Option<CallParts> {
    parse_tool_call_text(std::str::from_utf8(bytes).ok()?)
}

/// [`parse_tool_call`] of a line already read as text.
#[cfg(any(feature = "stdio", feature = "http"))]
pub(crate) fn parse_tool_call_text(text: &str) -> Option<CallParts> {
    serde_json::from_str::<CallBody>(text).ok().map(CallBody::into_parts)
}

/// A `tools/call` request parsed straight from its text, as rmcp's
/// message (see [`parse_tool_call`]).
#[cfg(feature = "stdio")]
pub(crate) fn tool_call_message(text: &str) -> Option<ClientJsonRpcMessage> {
    serde_json::from_str::<CallBody>(text).ok().map(CallBody::into_message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_tool_calls_are_invalid_params() {
        for params in [None, Some(json!([1])), Some(json!({"name": 3})), Some(json!({"name": "a", "arguments": [1]}))] {
            let mut message = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call"});
            if let Some(params) = params {
                message["params"] = params;
            }
            let answer = malformed_call(&message).expect("an answer");
            assert_eq!(answer["error"]["code"], -32602);
            assert_eq!(answer["id"], 7);
        }
        let fine = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "a", "arguments": {}}});
        assert!(malformed_call(&fine).is_none());
    }

    #[test]
    #[cfg(feature = "stdio")]
    fn a_tool_call_is_built_as_rmcp_parses_it() {
        let message = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "add", "arguments": {"a": 1}, "_meta": {"progressToken": "p"}}});
        let general =
            serde_json::to_value(ClientJsonRpcMessage::deserialize(&message).expect("rmcp parses it")).unwrap();
        let fast = tool_call(&message).expect("a tool call");
        assert_eq!(serde_json::to_value(&fast).unwrap(), general);
        // Anything unusual takes rmcp's own parse.
        for other in [
            json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"}),
            json!({"jsonrpc": "1.0", "id": 7, "method": "tools/call", "params": {"name": "add"}}),
            json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "add"}, "result": {}}),
            json!({"jsonrpc": "2.0", "id": [7], "method": "tools/call", "params": {"name": "add"}}),
            json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "add", "requestState": 3}}),
        ] {
            assert!(tool_call(&other).is_none(), "{other}");
        }
    }

    #[cfg(feature = "stdio")]
    /// What rmcp's own parse makes of `body`, as JSON: the message, with
    /// `_meta` back among the params.
    fn as_rmcp_parses(body: &serde_json::Value) -> serde_json::Value {
        let message: rmcp::model::ClientJsonRpcMessage = serde_json::from_value(body.clone()).expect("rmcp parses it");
        serde_json::to_value(message).expect("rmcp serialises it")
    }

    #[cfg(feature = "stdio")]
    /// The same, of what [`tool_call_message`] made.
    fn as_parsed(message: ClientJsonRpcMessage) -> serde_json::Value {
        serde_json::to_value(message).expect("serialises")
    }

    #[test]
    #[cfg(feature = "stdio")]
    fn a_tool_call_is_parsed_from_its_bytes_as_rmcp_parses_it() {
        let meta = serde_json::json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
            "io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1"},
            "progressToken": "p", "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"});
        for body in [
            serde_json::json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
                "name": "add", "arguments": {"a": 1, "b": [2.5, "x", null, {"c": true}]}, "_meta": meta}}),
            serde_json::json!({"jsonrpc": "2.0", "id": "seven", "method": "tools/call", "params": {"name": "add"}}),
            serde_json::json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
                "name": "add", "arguments": null, "_meta": null, "requestState": "s", "inputResponses": {}}}),
            // A member of params rmcp does not know: ignored by both.
            serde_json::json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
                "name": "add", "task": {"ttl": 1}, "_meta": meta}}),
        ] {
            let parsed = tool_call_message(&body.to_string()).unwrap_or_else(|| panic!("not parsed: {body}"));
            assert_eq!(as_parsed(parsed), as_rmcp_parses(&body), "{body}");
        }
        // Anything else (or anything unusual) is left to rmcp.
        for other in [
            r#"{"jsonrpc": "2.0", "id": 7, "method": "tools/list"}"#,
            r#"{"jsonrpc": "1.0", "id": 7, "method": "tools/call", "params": {"name": "add"}}"#,
            r#"{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "add"}, "result": {}}"#,
            r#"{"jsonrpc": "2.0", "id": [7], "method": "tools/call", "params": {"name": "add"}}"#,
            r#"{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": 3}}"#,
            r#"{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "add", "arguments": [1]}}"#,
            r#"{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "add", "requestState": 3}}"#,
            r#"{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "a"}, "params": {"name": "b"}}"#,
            r#"{"jsonrpc": "2.0", "id": 7, "method": "tools/call"}"#,
            r#"[{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "add"}}]"#,
            r#"{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "add"}"#,
            // Arrays where the protocol has objects: serde's derive would
            // read a struct from one, member by member.
            r#"["2.0", 7, "tools/call", {"name": "add", "arguments": {"a": 1}}]"#,
            r#"{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": [null, "add", {"a": 1}]}"#,
            r#"{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "add", "_meta": [], "x": 1}}"#,
            r#"{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "add", "name": "b"}}"#,
            r#"{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "add", "_meta": null, "_meta": {}}}"#,
        ] {
            assert!(tool_call_message(other).is_none(), "{other}");
        }
        // A member rmcp does not know, whose value the general parse refuses
        // (a number out of range, a lone surrogate, nesting past its depth,
        // bytes that are not UTF-8): the body is refused here too, not run.
        let deep = format!(
            r#"{{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {{"name": "add", "x": {}{}}}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        let mut not_utf8 =
            br#"{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "add", "x": "#.to_vec();
        not_utf8.extend_from_slice(b"\"\xff\"}}");
        let out_of_range =
            br#"{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "add", "x": 1e999}}"#;
        let surrogate =
            br#"{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "add", "x": "\udc00"}}"#;
        for body in [out_of_range.to_vec(), surrogate.to_vec(), deep.into_bytes(), not_utf8] {
            assert!(serde_json::from_slice::<Value>(&body).is_err(), "{}", String::from_utf8_lossy(&body));
            assert!(parse_tool_call(&body).is_none(), "{}", String::from_utf8_lossy(&body));
        }
        // From a parsed `Value` (a batch's element), the same: no array.
        let array = serde_json::json!(["2.0", 7, "tools/call", {"name": "add"}]);
        assert!(tool_call(&array).is_none());
    }
}
