//! The 2026-07-28 transport: a `tools/call` without a session, answered on
//! the connection's own task or by rmcp's service with the same answer,
//! refused where it breaks the transport's rules, cancelled when its client
//! goes away.

use std::io::Write;
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};
use toolhost_tests::{example, fixture};

use super::{
    JSON_AND_SSE, JSON_BODY, header, http_exchange, http_session, log_lines, messages_in, spawn_http,
    spawn_http_with_env, wait_for_line,
};

#[test]
fn a_call_at_2026_07_28_and_a_plain_session_call_are_answered_as_plain_json() {
    let (server, url, _logs) = spawn_http(&[&example("calculator").display().to_string()]);
    // 2026-07-28: no session; the request carries its context.
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "add", "arguments": {"a": 2, "b": 3},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"}}}});
    let headers = [
        JSON_AND_SSE,
        JSON_BODY,
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "add"),
    ];
    let (status, answer_headers, body) = http_exchange(&url, "POST", &headers, &call.to_string());
    assert_eq!(status, 200, "{body}");
    // One answer with nothing before it: the body is the JSON-RPC response
    // itself, no event stream to frame it.
    assert_eq!(header(&answer_headers, "content-type"), Some("application/json"), "{answer_headers:?}");
    let answer: Value = serde_json::from_str(&body).expect("the body is one JSON value");
    assert_eq!(answer["id"], 7);
    assert_eq!(answer["result"]["structuredContent"]["result"], 5.0, "{answer}");
    // The same members written as arrays (the body, or its params) are no
    // call, whatever the headers say: the tool does not run.
    let params = &call["params"];
    let as_arrays = [
        json!(["2.0", 9, "tools/call", params]),
        json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
            "params": [params["_meta"], "add", params["arguments"]]}),
    ];
    for body in as_arrays {
        let (status, _, answer) = http_exchange(&url, "POST", &headers, &body.to_string());
        let refused = status >= 400 || answer.contains(r#""error""#);
        assert!(refused && !answer.contains("structuredContent"), "{body} -> {status}: {answer}");
    }
    // So is a plain call of a legacy session, once it is initialized.
    let session = http_session(&url);
    let legacy = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
        "params": {"name": "add", "arguments": {"a": 1, "b": 1}}});
    let (status, answer_headers, body) = http_exchange(
        &url,
        "POST",
        &[JSON_AND_SSE, JSON_BODY, ("Mcp-Session-Id", &session), ("MCP-Protocol-Version", "2025-03-26")],
        &legacy.to_string(),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(header(&answer_headers, "content-type"), Some("application/json"), "{answer_headers:?}");
    let answers = messages_in(&body);
    assert!(answers.iter().any(|m| m["id"] == 8 && m["result"]["structuredContent"]["result"] == 2.0), "{body}");
    drop(server);
}

/// A `tools/call` at 2026-07-28 (no session), as the front door's own
/// path gets it: the headers SEP-2243 asks for, `_meta` with what the
/// protocol requires, and `more` besides. Its status, content type and
/// messages.
fn stateless_call(
    url: &str,
    id: u64,
    name: &str,
    arguments: Value,
    more: &[(&str, &str)],
) -> (u16, String, Vec<Value>) {
    stateless_call_with_meta(url, id, name, arguments, json!({}), more)
}

fn stateless_call_with_meta(
    url: &str,
    id: u64,
    name: &str,
    arguments: Value,
    meta: Value,
    more: &[(&str, &str)],
) -> (u16, String, Vec<Value>) {
    let call = stateless_body(id, name, arguments, meta);
    // The usual headers, unless `more` gives another value.
    let mut headers: Vec<(&str, &str)> = [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", name),
        JSON_BODY,
        JSON_AND_SSE,
    ]
    .into_iter()
    .filter(|(usual, _)| !more.iter().any(|(n, _)| n.eq_ignore_ascii_case(usual)))
    .collect();
    headers.extend_from_slice(more);
    let (status, answer_headers, body) = http_exchange(url, "POST", &headers, &call);
    let content_type = header(&answer_headers, "content-type").unwrap_or_default().to_owned();
    (status, content_type, messages_in(&body))
}

/// The body of a 2026-07-28 `tools/call`: `_meta` with what the protocol
/// requires, changed by `meta` (a key set to `null` is left out).
fn stateless_body(id: u64, name: &str, arguments: Value, meta: Value) -> String {
    let mut full = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"}});
    for (key, value) in meta.as_object().expect("meta is an object") {
        if value.is_null() {
            full.as_object_mut().expect("object").remove(key);
        } else {
            full[key] = value.clone();
        }
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": name, "arguments": arguments, "_meta": full}})
    .to_string()
}

/// Wait (at most a minute) for a log line containing `text`; how many
/// lines containing `counted` went by first, that one included.
fn count_until(logs: &mpsc::Receiver<String>, text: &str, counted: &str) -> usize {
    let mut count = 0;
    let seen = |line: &str| {
        count += usize::from(line.contains(counted));
        line.contains(text)
    };
    wait_for_line(logs, seen, Duration::from_secs(60))
        .unwrap_or_else(|| panic!("no log line saying `{text}` within a minute"));
    count
}

/// The same 2026-07-28 calls, answered by toolhost on the connection's
/// task and (with an `Origin` header, which sends them to rmcp's checks)
/// by rmcp's service: the same status, content type and messages, for a
/// result, a tool error, bad arguments, an unknown tool, the request's
/// `_meta` as the plugin sees it, and progress (an event stream).
#[test]
fn a_2026_07_28_call_gets_the_same_answer_whichever_path_answers_it() {
    const DIRECT: &str = "answered on its connection's task";
    let same = |url: &str, port: &str, name: &str, arguments: Value, meta: Value| {
        let origin = format!("http://127.0.0.1:{port}");
        let direct = stateless_call_with_meta(url, 3, name, arguments.clone(), meta.clone(), &[]);
        let through_rmcp = stateless_call_with_meta(url, 3, name, arguments, meta, &[("Origin", &origin)]);
        assert_eq!(direct, through_rmcp, "{name}");
        assert!(direct.2.last().is_some_and(|m| m["id"] == 3), "{direct:?}");
        direct
    };
    let port_of = |url: &str| url.trim_start_matches("http://127.0.0.1:").trim_end_matches("/mcp").to_owned();
    let env = [("TOOLHOST_LOG", "toolhost_mcp=debug"), ("NO_COLOR", "1")];

    let (server, url, lines) = spawn_http_with_env(&[&fixture("hostile").display().to_string()], &env);
    let (port, logs) = (port_of(&url), log_lines(lines));
    let (status, content_type, messages) = same(
        &url,
        &port,
        "meta",
        json!({}),
        json!({"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}),
    );
    assert_eq!((status, content_type.as_str()), (200, "application/json"));
    let seen: Value = serde_json::from_str(messages[0]["result"]["content"][0]["text"].as_str().expect("text"))
        .expect("the plugin's _meta as JSON");
    assert_eq!(seen["io.modelcontextprotocol/clientInfo"]["name"], "raw", "{seen}");
    assert_eq!(seen["traceparent"], "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "{seen}");
    let (status, _, messages) = same(&url, &port, "error", json!({}), json!({}));
    assert_eq!(status, 200);
    assert_eq!(messages[0]["result"]["isError"], true, "{messages:?}");
    let (status, _, messages) = same(&url, &port, "no_such_tool", json!({}), json!({}));
    assert_eq!(status, 200);
    assert_eq!(messages[0]["error"]["code"], -32602, "{messages:?}");
    // Each call was made both ways; only the three without an Origin
    // header (and this last one) took the direct path.
    stateless_call(&url, 9, "ok", json!({}), &[]);
    assert_eq!(count_until(&logs, "tool=ok", DIRECT), 3 + 1, "the direct path was not taken as often as expected");
    drop(server);

    let (server, url, lines) = spawn_http_with_env(&[&example("calculator").display().to_string()], &env);
    let (port, _logs) = (port_of(&url), log_lines(lines));
    let (_, _, messages) = same(&url, &port, "add", json!({"a": 2, "b": 3}), json!({}));
    assert_eq!(messages[0]["result"]["structuredContent"]["result"], 5.0, "{messages:?}");
    let (_, _, messages) = same(&url, &port, "add", json!({"a": "two", "b": 3}), json!({}));
    assert_eq!(messages[0]["result"]["isError"], true, "{messages:?}");
    drop(server);

    // Told something before the answer: an event stream, progress first.
    let (server, url, lines) = spawn_http_with_env(&[&fixture("hyper-v2").display().to_string()], &env);
    let (port, _logs) = (port_of(&url), log_lines(lines));
    let (status, content_type, messages) =
        same(&url, &port, "progress", json!({"steps": 3}), json!({"progressToken": "p-1"}));
    assert_eq!((status, content_type.as_str()), (200, "text/event-stream"));
    let progress: Vec<&Value> = messages.iter().filter(|m| m["method"] == "notifications/progress").collect();
    assert_eq!(progress.len(), 3, "{messages:?}");
    assert!(progress.iter().all(|m| m["params"]["progressToken"] == "p-1"), "{messages:?}");
    assert_eq!(messages.last().expect("an answer")["result"]["content"][0]["text"], "3 steps", "{messages:?}");
    drop(server);
}

/// A 2026-07-28 call that breaks a rule of the transport is refused as
/// rmcp refuses it, whichever path would have answered it.
#[test]
fn a_2026_07_28_call_that_breaks_the_transports_rules_is_refused() {
    let (server, url, _logs) = spawn_http(&[&example("calculator").display().to_string()]);
    let add = json!({"a": 1, "b": 2});
    // Mcp-Name names another tool than the body: a header mismatch.
    let (status, _, messages) = stateless_call(&url, 1, "add", add.clone(), &[("Mcp-Name", "sub")]);
    assert_eq!(status, 400, "{messages:?}");
    assert_eq!(messages[0]["error"]["code"], -32020, "{messages:?}");
    // _meta without the client's capabilities.
    let (status, _, messages) = stateless_call_with_meta(
        &url,
        2,
        "add",
        add.clone(),
        json!({"io.modelcontextprotocol/clientCapabilities": null}),
        &[],
    );
    assert_eq!(status, 400, "{messages:?}");
    assert_eq!(messages[0]["error"]["code"], -32602, "{messages:?}");
    // _meta naming another version than the header.
    let (status, _, _) = stateless_call_with_meta(
        &url,
        3,
        "add",
        add.clone(),
        json!({"io.modelcontextprotocol/protocolVersion": "2025-11-25"}),
        &[],
    );
    assert_eq!(status, 400);
    // A client that does not take event streams.
    let (status, _, _) = stateless_call(&url, 4, "add", add.clone(), &[("Accept", "application/json")]);
    assert_eq!(status, 406);
    // A host name the server does not answer to (DNS rebinding).
    let (status, _, _) = stateless_call(&url, 5, "add", add.clone(), &[("Host", "evil.example")]);
    assert_eq!(status, 403);
    // And the same call, well formed, is answered.
    let (status, _, messages) = stateless_call(&url, 6, "add", add, &[]);
    assert_eq!(status, 200, "{messages:?}");
    assert_eq!(messages[0]["result"]["structuredContent"]["result"], 3.0, "{messages:?}");
    drop(server);
}

/// A client that goes away while its 2026-07-28 call runs: the call is
/// cancelled (its guest stopped), and the server goes on serving.
#[test]
fn a_2026_07_28_call_whose_client_goes_away_is_cancelled() {
    let env = [("TOOLHOST_LOG", "toolhost_mcp=debug"), ("NO_COLOR", "1")];
    let (server, url, lines) = spawn_http_with_env(&[&fixture("hostile").display().to_string()], &env);
    let logs = log_lines(lines);
    let authority = url.trim_start_matches("http://").trim_end_matches("/mcp").to_owned();
    let call = stateless_body(1, "spin", json!({}), json!({}));
    let mut stream = std::net::TcpStream::connect(&authority).expect("connect");
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: spin\r\nContent-Length: {}\r\n\r\n{call}",
        call.len()
    )
    .expect("send the call");
    let minute = Duration::from_secs(60);
    wait_for_line(&logs, |l| l.contains("answered on its connection's task"), minute).expect("the call started");
    drop(stream);
    wait_for_line(&logs, |l| l.contains("call cancelled: the client went away"), minute).expect("the call cancelled");
    let (status, _, messages) = stateless_call(&url, 2, "ok", json!({}), &[]);
    assert_eq!(status, 200, "{messages:?}");
    drop(server);
}
