//! A `tools/call` in a session (2025-03-26 to 2025-11-25): answered on the
//! connection's own task once the session is initialized, with the answer
//! rmcp's session gives, cancelled by the client's `notifications/cancelled`,
//! and refused once the session has ended.

use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};
use toolhost_tests::{example, fixture};

use super::{
    JSON_AND_SSE, JSON_BODY, header, http_exchange, http_session, log_lines, messages_in, spawn_http_with_env,
    wait_for_line,
};

/// What the server logs of a call answered on its connection's task.
const DIRECT: &str = "answered on its connection's task";
const DEBUG: [(&str, &str); 2] = [("TOOLHOST_LOG", "toolhost_mcp=debug"), ("NO_COLOR", "1")];

/// A `tools/call` in `session`, with `more` headers: the status, content
/// type and JSON-RPC messages of its answer.
fn session_call(
    url: &str,
    session: &str,
    id: u64,
    name: &str,
    arguments: Value,
    more: &[(&str, &str)],
) -> (u16, String, Vec<Value>) {
    let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": name, "arguments": arguments}});
    let mut headers =
        vec![JSON_AND_SSE, JSON_BODY, ("Mcp-Session-Id", session), ("MCP-Protocol-Version", "2025-03-26")];
    headers.extend_from_slice(more);
    let (status, answer_headers, body) = http_exchange(url, "POST", &headers, &call.to_string());
    let content_type = header(&answer_headers, "content-type").unwrap_or_default().to_owned();
    (status, content_type, messages_in(&body))
}

/// How many log lines saying a call took the direct path go by until one
/// naming `tool` (that one included), waiting at most a minute.
fn direct_until(logs: &mpsc::Receiver<String>, tool: &str) -> usize {
    let mut count = 0;
    let seen = |line: &str| {
        count += usize::from(line.contains(DIRECT));
        line.contains(DIRECT) && line.contains(&format!("tool={tool}"))
    };
    wait_for_line(logs, seen, Duration::from_secs(60)).expect("the marked call was answered");
    count
}

/// The same calls of one session, answered on the connection's task and
/// (with an `Origin` header, which sends them to rmcp's checks) by rmcp's
/// session: the same JSON-RPC answers, for a result, a tool error, bad
/// arguments and an unknown tool; the direct one as one JSON object.
#[test]
fn a_session_call_gets_the_answer_rmcp_gives_it_on_the_connections_task() {
    for (plugin, calls) in [
        (
            fixture("hostile"),
            vec![("meta", json!({})), ("error", json!({})), ("no_such_tool", json!({})), ("ok", json!({}))],
        ),
        (example("calculator"), vec![("add", json!({"a": 2, "b": 3})), ("add", json!({"a": "two", "b": 3}))]),
    ] {
        let (server, url, lines) = spawn_http_with_env(&[&plugin.display().to_string()], &DEBUG);
        let logs = log_lines(lines);
        let port = url.trim_start_matches("http://127.0.0.1:").trim_end_matches("/mcp").to_owned();
        let origin = format!("http://127.0.0.1:{port}");
        let session = http_session(&url);
        for (id, (name, arguments)) in (1..).zip(&calls) {
            let direct = session_call(&url, &session, id, name, arguments.clone(), &[]);
            let through_rmcp = session_call(&url, &session, id, name, arguments.clone(), &[("Origin", &origin)]);
            assert_eq!(direct.0, 200, "{name}: {direct:?}");
            assert_eq!(direct.1, "application/json", "{name}: {direct:?}");
            assert_eq!(through_rmcp.1, "text/event-stream", "{name}: {through_rmcp:?}");
            assert_eq!(direct.2, through_rmcp.2, "{name} {arguments}");
            assert_eq!(direct.2.len(), 1, "{direct:?}");
        }
        // Every call without an Origin header took the direct path, and only
        // those: a last one, of a tool no other call named, is the n-th
        // direct one logged.
        let (status, _, _) = session_call(&url, &session, 99, "marker", json!({}), &[]);
        assert_eq!(status, 200);
        assert_eq!(direct_until(&logs, "marker"), calls.len() + 1, "{}", plugin.display());
        drop(server);
    }
    // What the answers say, once.
    let (server, url, _lines) = spawn_http_with_env(&[&example("calculator").display().to_string()], &DEBUG);
    let session = http_session(&url);
    let (_, _, messages) = session_call(&url, &session, 1, "add", json!({"a": 2, "b": 3}), &[]);
    assert_eq!(messages[0]["result"]["structuredContent"]["result"], 5.0, "{messages:?}");
    assert!(messages[0]["result"].get("resultType").is_none(), "a 2026-07-28 member in a session: {messages:?}");
    let (_, _, messages) = session_call(&url, &session, 2, "nope", json!({}), &[]);
    assert_eq!(messages[0]["error"]["code"], -32602, "{messages:?}");
    drop(server);
}

/// A session's call answered on its connection's task is cancelled by the
/// client's `notifications/cancelled` (its guest stopped, its answer an
/// error), and the session goes on; once the session is deleted, its
/// calls are refused as rmcp refuses them (`404`).
#[test]
fn a_session_call_is_cancelled_by_its_client_and_refused_once_the_session_ends() {
    let (server, url, lines) = spawn_http_with_env(&[&fixture("hostile").display().to_string()], &DEBUG);
    let logs = log_lines(lines);
    let session = http_session(&url);
    let spinning = {
        let (url, session) = (url.clone(), session.clone());
        std::thread::spawn(move || session_call(&url, &session, 7, "spin", json!({}), &[]))
    };
    let minute = Duration::from_secs(60);
    wait_for_line(&logs, |l| l.contains(DIRECT) && l.contains("tool=spin"), minute).expect("the call started");
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}});
    let headers =
        [JSON_AND_SSE, JSON_BODY, ("Mcp-Session-Id", session.as_str()), ("MCP-Protocol-Version", "2025-03-26")];
    let (status, _, body) = http_exchange(&url, "POST", &headers, &cancel.to_string());
    assert_eq!(status, 202, "{body}");
    wait_for_line(&logs, |l| l.contains("call cancelled by the client"), minute).expect("the call was cancelled");
    let (status, content_type, messages) = spinning.join().expect("the spinning call's client");
    assert_eq!((status, content_type.as_str()), (200, "application/json"), "{messages:?}");
    assert_eq!(messages[0]["id"], 7, "{messages:?}");
    assert!(messages[0]["error"]["message"].as_str().is_some_and(|m| m.contains("cancelled")), "{messages:?}");
    // The session goes on.
    let (status, _, messages) = session_call(&url, &session, 8, "ok", json!({}), &[]);
    assert_eq!(status, 200, "{messages:?}");
    assert_eq!(messages[0]["id"], 8, "{messages:?}");
    assert!(messages[0].get("result").is_some(), "{messages:?}");
    // Deleted: its calls are refused, whichever path would have taken them.
    let (status, _, _) = http_exchange(&url, "DELETE", &[("Mcp-Session-Id", session.as_str())], "");
    assert_eq!(status, 204);
    let (status, _, messages) = session_call(&url, &session, 9, "ok", json!({}), &[]);
    assert_eq!(status, 404, "{messages:?}");
    drop(server);
}
