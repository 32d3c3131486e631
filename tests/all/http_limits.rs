//! What clients of MCP over HTTP may hold: sessions in all, connections,
//! and time for a request to arrive. A server in this process (the
//! library's `HttpServer` over a registry of one built-in tool), driven by
//! raw HTTP; the limit per authenticated client is in `production.rs`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost::{BuiltinCall, BuiltinTool, BuiltinToolset, CallToolResult, NoSecrets, Registry};
use toolhost_mcp::{HttpLimits, HttpOptions, HttpServer, McpServer, ToolSource};

use crate::serve::{JSON_AND_SSE, JSON_BODY, header, http_exchange, http_session};

/// A server with `limits` of a registry holding `host__echo`, on its own
/// runtime (the tests' blocking HTTP runs beside it): the runtime, the
/// registry and the MCP URL.
fn server(limits: HttpLimits) -> (tokio::runtime::Runtime, Arc<Registry>, String) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let (registry, url) = runtime.block_on(async {
        let registry = Arc::new(Registry::new(Arc::new(NoSecrets)));
        let echo = BuiltinTool::new("echo", "Echo a text.", json!({"type": "object"}), |_call: BuiltinCall| async {
            Ok(CallToolResult::text("echo"))
        });
        registry.register_builtin(BuiltinToolset::new("host").with_tool(echo)).await.expect("register");
        let mcp = McpServer::new(ToolSource::Registry(Arc::clone(&registry)), Arc::new(toolhost::ApproveAll));
        let options = HttpOptions::new("127.0.0.1:0".parse().expect("addr")).with_limits(limits);
        let http = HttpServer::bind(mcp, options).await.expect("bind");
        let url = http.url();
        tokio::spawn(http.serve(std::future::pending()));
        (registry, url)
    });
    (runtime, registry, url)
}

/// Wait (60 s at most) until `done` holds.
fn eventually(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "{what} did not happen within 60 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn initialize(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
}

#[test]
fn sessions_are_bounded_in_all_and_what_a_session_started_ends_with_it() {
    let (_runtime, registry, url) = server(HttpLimits::default().with_sessions(3, 64));
    let before = registry.followers();
    let sessions: Vec<String> = (0..3).map(|_| http_session(&url)).collect();
    // Each initialized session follows the registry's changes (to tell
    // its client `list_changed`).
    eventually("three sessions following the registry", || registry.followers() == before + 3);

    // However often a client says it is initialized, its session follows
    // the registry once (each notice started another follower).
    let in_session =
        [JSON_AND_SSE, JSON_BODY, ("Mcp-Session-Id", sessions[1].as_str()), ("MCP-Protocol-Version", "2025-03-26")];
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    for _ in 0..5 {
        assert_eq!(http_exchange(&url, "POST", &in_session, &initialized).0, 202);
    }
    let ping = json!({"jsonrpc": "2.0", "id": 9, "method": "ping"}).to_string();
    let (status, _, body) = http_exchange(&url, "POST", &in_session, &ping);
    assert_eq!(status, 200, "{body}");
    assert_eq!(registry.followers(), before + 3, "one follower per session");

    // A session id that is not ASCII is refused, not taken for none (an
    // `initialize` so marked opened a session past the cap).
    let marked = [JSON_AND_SSE, JSON_BODY, ("Mcp-Session-Id", "é")];
    let (status, _, body) = http_exchange(&url, "POST", &marked, &initialize(3).to_string());
    assert_eq!(status, 400, "{body}");

    // A fourth is refused, saying why, until one of them ends.
    let (status, headers, body) = http_exchange(&url, "POST", &[JSON_AND_SSE, JSON_BODY], &initialize(4).to_string());
    assert_eq!(status, 503, "{body}");
    assert_eq!(header(&headers, "retry-after"), Some("30"));
    let answer: Value = serde_json::from_str(&body).expect("a JSON-RPC error");
    assert_eq!(answer["id"], 4, "{answer}");
    let message = answer["error"]["message"].as_str().expect("a message");
    assert!(message.contains("3 sessions open, its most"), "{message}");

    // A session cannot be opened in a batch either: its id would be lost
    // with the answers' headers, and the session would only take a place.
    let batch = json!([initialize(5)]);
    let (status, _, body) = http_exchange(&url, "POST", &[JSON_AND_SSE, JSON_BODY], &batch.to_string());
    let answers: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{status} ({e}): {body}"));
    let refused = answers.as_array().and_then(|a| a.iter().find(|m| m["id"] == 5)).expect("the initialize's answer");
    assert!(refused["error"]["message"].as_str().is_some_and(|m| m.contains("cannot be batched")), "{refused}");

    // Ending a session frees its place, and what it followed lets go of
    // it at once (not at the registry's next change, which never comes).
    let delete = [("Mcp-Session-Id", sessions[0].as_str()), ("MCP-Protocol-Version", "2025-03-26")];
    assert_eq!(http_exchange(&url, "DELETE", &delete, "").0, 204);
    eventually("the ended session's follower to go", || registry.followers() == before + 2);
    let (status, headers, body) = http_exchange(&url, "POST", &[JSON_AND_SSE, JSON_BODY], &initialize(7).to_string());
    assert_eq!(status, 200, "{body}");
    assert!(header(&headers, "mcp-session-id").is_some());
}

/// A raw connection to the server of `url`.
fn connect(url: &str) -> TcpStream {
    let authority = url.trim_start_matches("http://").split('/').next().expect("authority");
    let stream = TcpStream::connect(authority).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(60))).expect("read timeout");
    stream
}

/// What the server sends before it closes `stream` (60 s at most).
fn read_all(stream: &mut TcpStream) -> String {
    let mut raw = Vec::new();
    match stream.read_to_end(&mut raw) {
        Ok(_) => String::from_utf8_lossy(&raw).into_owned(),
        Err(error) => panic!("the server neither answered nor closed within 60 s ({error}); got {raw:?}"),
    }
}

#[test]
fn a_client_that_sends_slowly_or_not_at_all_is_let_go_after_the_request_timeout() {
    let (_runtime, _registry, url) = server(HttpLimits::default().with_request_timeout(Duration::from_secs(1)));
    // Connected, and nothing sent: closed (an idle kept-alive connection
    // likewise, its next request's head not coming).
    let mut silent = connect(&url);
    assert_eq!(read_all(&mut silent), "", "a connection that sent nothing gets no answer, only closed");
    // Half a head.
    let mut half = connect(&url);
    half.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-").expect("send");
    assert_eq!(read_all(&mut half), "");
    // The whole head, and a tenth of the body it announced.
    let mut slow = connect(&url);
    let head = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json, text/event-stream\r\n\
                Content-Type: application/json\r\nContent-Length: 100\r\nConnection: close\r\n\r\n{\"jsonrpc\"";
    slow.write_all(head.as_bytes()).expect("send");
    let answer = read_all(&mut slow);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("the request body did not arrive within 1s"), "{answer}");
}

#[test]
fn connections_past_the_cap_wait_until_one_closes() {
    let (_runtime, _registry, url) = server(HttpLimits::default().with_connections(2));
    let health = |stream: &mut TcpStream| {
        stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").expect("send");
    };
    // Two connections held open, sending nothing.
    let held: Vec<TcpStream> = (0..2).map(|_| connect(&url)).collect();
    let mut third = connect(&url);
    health(&mut third);
    // Not served while the two are held (this only waits; a slow machine
    // cannot make it pass wrongly in the other direction).
    third.set_read_timeout(Some(Duration::from_secs(3))).expect("read timeout");
    let mut byte = [0u8; 1];
    match third.read(&mut byte) {
        Err(error) if matches!(error.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
        other => panic!("a third connection was served past the cap of 2: {other:?}"),
    }
    drop(held);
    third.set_read_timeout(Some(Duration::from_secs(60))).expect("read timeout");
    let answer = read_all(&mut third);
    assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("ok\n"), "{answer}");
}

#[test]
fn a_session_takes_a_message_as_large_as_stdio_does() {
    let (_runtime, _registry, url) = server(HttpLimits::default());
    let session = http_session(&url);
    // 6 MiB of arguments: past rmcp's own 4 MiB, within the 16 MiB a
    // message may have on every transport.
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "host__echo", "arguments": {"text": "x".repeat(6 << 20)}}});
    let headers =
        [JSON_AND_SSE, JSON_BODY, ("Mcp-Session-Id", session.as_str()), ("MCP-Protocol-Version", "2025-03-26")];
    let (status, _, body) = http_exchange(&url, "POST", &headers, &call.to_string());
    assert_eq!(status, 200, "{}", &body[..body.len().min(300)]);
    assert!(body.contains("\"text\":\"echo\""), "{body}");
}
