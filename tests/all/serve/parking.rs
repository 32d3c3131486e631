//! An idle HTTP session is parked (rmcp's session let go, its client's
//! `initialize` and settings kept) and its next request restores it as
//! it was: the same session id, its log level and subscriptions; it
//! counts towards the session cap while parked, and its client can still
//! delete it.

use std::io::BufRead;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost_tests::fixture;

use super::{
    JSON_AND_SSE, JSON_BODY, header, http_exchange, http_session, log_lines, messages_in, spawn_http_with_env,
    standalone_stream, wait_for_line,
};

const DEBUG: [(&str, &str); 2] = [("TOOLHOST_LOG", "toolhost_mcp=debug"), ("NO_COLOR", "1")];

/// A request of `session`: its status and JSON-RPC messages.
fn request(url: &str, session: &str, message: Value) -> (u16, Vec<Value>) {
    let headers = [JSON_AND_SSE, JSON_BODY, ("Mcp-Session-Id", session), ("MCP-Protocol-Version", "2025-03-26")];
    let (status, _, body) = http_exchange(url, "POST", &headers, &message.to_string());
    (status, messages_in(&body))
}

fn call(id: u64, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
}

/// The `data:` messages of session `session`'s `GET` stream, as they come,
/// on a thread of their own; and its connection (to close it).
fn standalone_messages(url: &str, session: &str) -> (std::sync::mpsc::Receiver<Value>, std::net::TcpStream) {
    let lines = standalone_stream(url, session);
    let connection = lines.get_ref().try_clone().expect("the connection again");
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in lines.lines().map_while(Result::ok) {
            let Some(data) = line.strip_prefix("data:") else { continue };
            if let Ok(message) = serde_json::from_str::<Value>(data.trim())
                && sender.send(message).is_err()
            {
                break;
            }
        }
    });
    (receiver, connection)
}

#[test]
fn an_idle_session_is_parked_and_its_next_request_finds_it_as_it_was() {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let config = dir.path().join("toolsets.json");
    let document = json!({
        "schema": "https://schema.cjson.dev/0/toolsets/cjson-toolsets-0.1.0-SNAPSHOT.schema.json",
        "toolsets": [{"id": "v2", "kind": "uri", "server": {"url": fixture("hyper-v2").display().to_string()}}],
        "serve": {"limits": {"sessions": 1, "sessionParkSeconds": 1}},
    });
    std::fs::write(&config, document.to_string()).expect("write the toolsets file");
    let (server, url, lines) = spawn_http_with_env(&["--config", &config.display().to_string()], &DEBUG);
    let logs = log_lines(lines);

    // The client asks for log messages and subscribes to a resource, then
    // says nothing.
    let session = http_session(&url);
    let level = json!({"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel", "params": {"level": "debug"}});
    assert_eq!(request(&url, &session, level).0, 200);
    let subscribe =
        json!({"jsonrpc": "2.0", "id": 3, "method": "resources/subscribe", "params": {"uri": "memo://one"}});
    assert_eq!(request(&url, &session, subscribe).0, 200);
    wait_for_line(&logs, |l| l.contains("an idle session is parked"), Duration::from_secs(60))
        .expect("the idle session was not parked");

    // Parked, it still holds its place: the cap of one is reached.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}});
    let (status, _, body) = http_exchange(&url, "POST", &[JSON_AND_SSE, JSON_BODY], &init.to_string());
    assert_eq!(status, 503, "a parked session's place was given away: {body}");

    // Its next request restores it, and is answered.
    let (status, answer) = request(&url, &session, call(4, "v2__echo", json!({"text": "back"})));
    assert_eq!(status, 200, "{answer:?}");
    let result = answer.iter().find(|m| m["id"] == 4).expect("the call's answer");
    assert_eq!(result["result"]["content"][0]["text"], "back", "{result}");
    wait_for_line(&logs, |l| l.contains("a parked session is restored"), Duration::from_secs(60))
        .expect("the session was not restored");

    // With what its client had set: a log message at warning, and the
    // update of the resource it subscribed to, reach its stream.
    let (stream, connection) = standalone_messages(&url, &session);
    let (status, _) =
        request(&url, &session, call(5, "v2__log", json!({"message": "disk almost full", "level": "warning"})));
    assert_eq!(status, 200);
    let (status, _) = request(&url, &session, call(6, "v2__changed", json!({})));
    assert_eq!(status, 200);
    let (mut logged, mut updated) = (false, false);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !(logged && updated) {
        let left = deadline.saturating_duration_since(Instant::now());
        let message = stream.recv_timeout(left).unwrap_or_else(|_| {
            panic!("within 60 s, the restored session's stream had: log message {logged}, resource update {updated}")
        });
        match message["method"].as_str() {
            Some("notifications/message") => {
                logged |= message["params"]["data"].as_str().is_some_and(|d| d.ends_with("disk almost full"))
            }
            Some("notifications/resources/updated") => updated |= message["params"]["uri"] == "memo://one",
            _ => {}
        }
    }
    // Its stream closed, the session is idle again.
    connection.shutdown(std::net::Shutdown::Both).expect("close the stream");

    // A parked session can be deleted, and is then gone.
    wait_for_line(&logs, |l| l.contains("an idle session is parked"), Duration::from_secs(60))
        .expect("the idle session was not parked again");
    let delete = [("Mcp-Session-Id", session.as_str()), ("MCP-Protocol-Version", "2025-03-26")];
    assert_eq!(http_exchange(&url, "DELETE", &delete, "").0, 204);
    assert_eq!(http_exchange(&url, "DELETE", &delete, "").0, 404);
    let (status, _) = request(&url, &session, call(7, "v2__echo", json!({"text": "gone"})));
    assert_eq!(status, 404);
    let (status, headers, body) = http_exchange(&url, "POST", &[JSON_AND_SSE, JSON_BODY], &init.to_string());
    assert_eq!(status, 200, "{body}");
    assert!(header(&headers, "mcp-session-id").is_some());
    drop(server);
}
