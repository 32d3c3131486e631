//! The fast `tools/call` parsers, for the fuzz targets in `fuzz/`: each
//! takes a request only if rmcp's own parse takes it too, to the same
//! message. Not a stable API: the module exists only with the `fuzzing`
//! feature, which nothing else turns on.

use rmcp::model::ClientJsonRpcMessage;
use serde_json::Value;

/// One request's bytes through the fast parsers and rmcp's: what a fast
/// parser takes, rmcp takes, with the same id, name, arguments and
/// `_meta` (stdio: the same message, field for field). Panics otherwise.
pub fn tool_call(bytes: &[u8]) {
    #[cfg(feature = "stdio")]
    if let Ok(text) = std::str::from_utf8(bytes)
        && let Some(fast) = crate::jsonrpc::tool_call_message(text)
    {
        let general: ClientJsonRpcMessage = serde_json::from_slice(bytes).expect("rmcp parses what stdio's took");
        assert_eq!(as_value(&fast), as_value(&general), "stdio's fast parse gives rmcp's message");
    }
    #[cfg(feature = "http")]
    if let Some((id, call, meta)) = crate::jsonrpc::parse_tool_call(bytes) {
        let general: ClientJsonRpcMessage = serde_json::from_slice(bytes).expect("rmcp parses what HTTP's took");
        let general = as_value(&general);
        assert_eq!(general["id"], serde_json::to_value(&id).expect("an id is JSON"), "the same id");
        assert_eq!(general["method"], "tools/call");
        let params = &general["params"];
        assert_eq!(params["name"], call.name.as_ref(), "the same tool");
        let arguments = call.arguments.map(Value::Object).unwrap_or(Value::Null);
        assert_eq!(params.get("arguments").cloned().unwrap_or(Value::Null), arguments, "the same arguments");
        let meta = meta.map(Value::Object).unwrap_or(Value::Null);
        assert_eq!(params.get("_meta").cloned().unwrap_or(Value::Null), meta, "the same _meta");
    }
}

fn as_value(message: &ClientJsonRpcMessage) -> Value {
    serde_json::to_value(message).expect("a message is JSON")
}
