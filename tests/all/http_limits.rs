//! What clients of MCP over HTTP may hold: sessions in all, connections,
//! calls running, bytes of bodies, and time for a request to arrive; past
//! each, new work is refused at once with `503` and `Retry-After`, never
//! queued. A server in this process (the library's `HttpServer` over a
//! registry of built-in tools), driven by raw HTTP; the limit per
//! authenticated client is in `production.rs`.

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
    let (runtime, registry, url, _gate) = server_with_gate(limits);
    (runtime, registry, url)
}

/// Calls of `host__hold`: how many have started, and the permits that let
/// them end (one each).
struct Gate {
    started: std::sync::atomic::AtomicUsize,
    open: tokio::sync::Semaphore,
}

/// [`server`], its registry holding `host__hold` too: a call that runs
/// until the gate lets it end.
fn server_with_gate(limits: HttpLimits) -> (tokio::runtime::Runtime, Arc<Registry>, String, Arc<Gate>) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let gate = Arc::new(Gate { started: Default::default(), open: tokio::sync::Semaphore::new(0) });
    let (registry, url) = runtime.block_on(async {
        let registry = Arc::new(Registry::new(Arc::new(NoSecrets)));
        let echo = BuiltinTool::new("echo", "Echo a text.", json!({"type": "object"}), |_call: BuiltinCall| async {
            Ok(CallToolResult::text("echo"))
        });
        let held = Arc::clone(&gate);
        let hold = BuiltinTool::new("hold", "Run until let go.", json!({"type": "object"}), move |_: BuiltinCall| {
            let gate = Arc::clone(&held);
            async move {
                gate.started.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                gate.open.acquire().await.expect("the gate stays").forget();
                Ok(CallToolResult::text("let go"))
            }
        });
        let toolset = BuiltinToolset::new("host").with_tool(echo).with_tool(hold);
        registry.register_builtin(toolset).await.expect("register");
        let mcp = McpServer::new(ToolSource::Registry(Arc::clone(&registry)), Arc::new(toolhost::ApproveAll));
        let options = HttpOptions::new("127.0.0.1:0".parse().expect("addr")).with_limits(limits);
        let http = HttpServer::bind(mcp, options).await.expect("bind");
        let url = http.url();
        tokio::spawn(http.serve(std::future::pending()));
        (registry, url)
    });
    (runtime, registry, url, gate)
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
fn connections_past_the_cap_are_refused_at_once_and_served_again_once_one_closes() {
    let limits = HttpLimits::default().with_connections(2).with_request_timeout(Duration::from_secs(300));
    let (_runtime, _registry, url) = server(limits);
    let health = |stream: &mut TcpStream| {
        stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").expect("send");
    };
    // Two connections held open, sending nothing (accepted first: the
    // listen queue is first in, first out).
    let held: Vec<TcpStream> = (0..2).map(|_| connect(&url)).collect();
    // A third is told at once, not left waiting in the backlog.
    let mut third = connect(&url);
    health(&mut third);
    let answer = read_all(&mut third);
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("Retry-After: 1\r\n"), "{answer}");
    assert!(answer.contains("the server is serving its most connections (2)"), "{answer}");
    // Once one closes, a new connection is served.
    drop(held);
    eventually("a connection served after the held ones closed", || {
        let mut fourth = connect(&url);
        health(&mut fourth);
        let answer = read_all(&mut fourth);
        answer.starts_with("HTTP/1.1 200") && answer.ends_with("ok\n")
    });
}

/// A `tools/call` of `tool` in `session`, as a JSON-RPC request.
fn call(id: u64, tool: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": {}}}).to_string()
}

#[test]
fn calls_past_the_cap_are_shed_at_once_while_the_admitted_ones_finish() {
    let (_runtime, _registry, url, gate) = server_with_gate(HttpLimits::default().with_calls(2));
    let session = http_session(&url);
    let send = Arc::new(move |id: u64, tool: &str| {
        let headers =
            [JSON_AND_SSE, JSON_BODY, ("Mcp-Session-Id", session.as_str()), ("MCP-Protocol-Version", "2025-03-26")];
        http_exchange(&url, "POST", &headers, &call(id, tool))
    });
    // Two calls that run until let go: the server's two places.
    let holders: Vec<_> = (0..2)
        .map(|i| {
            let send = Arc::clone(&send);
            std::thread::spawn(move || send(10 + i, "host__hold"))
        })
        .collect();
    eventually("both held calls running", || gate.started.load(std::sync::atomic::Ordering::SeqCst) == 2);
    // A third call is refused at once, saying when to come back.
    let (status, headers, body) = send(20, "host__echo");
    assert_eq!(status, 503, "{body}");
    assert_eq!(header(&headers, "retry-after"), Some("1"));
    let answer: Value = serde_json::from_str(&body).expect("a JSON-RPC answer");
    assert_eq!(answer["id"], 20);
    assert_eq!(answer["error"]["code"], -32029);
    assert!(answer["error"]["message"].as_str().is_some_and(|m| m.contains("most tool calls at once (2)")), "{body}");
    // The admitted calls are not harmed: let go, they answer.
    gate.open.add_permits(2);
    for holder in holders {
        let (status, _, body) = holder.join().expect("a holder");
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("let go"), "{body}");
    }
    // And there is room again.
    let (status, _, body) = send(30, "host__echo");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"text\":\"echo\""), "{body}");
}

#[test]
fn bodies_past_the_byte_budget_are_shed_at_once() {
    // (The held body has all the time it needs: its bytes stay held.)
    let limits = HttpLimits::default().with_body_bytes(1 << 20).with_request_timeout(Duration::from_secs(600));
    let (_runtime, _registry, url) = server(limits);
    let post = |length: usize, expect: bool| {
        let mut stream = connect(&url);
        let expect = if expect { "Expect: 100-continue\r\n" } else { "" };
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json, text/event-stream\r\n\
             Content-Type: application/json\r\nContent-Length: {length}\r\n{expect}Connection: close\r\n\r\n"
        );
        stream.write_all(head.as_bytes()).expect("send");
        stream
    };
    // The first answer's head on `stream` (a `100 Continue`, or the answer).
    let first_head = |stream: &mut TcpStream| {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            assert_eq!(stream.read(&mut byte).expect("an answer within 60 s"), 1, "closed unanswered: {head:?}");
            head.push(byte[0]);
        }
        String::from_utf8_lossy(&head).into_owned()
    };
    // More than the whole budget: it could never be held.
    let mut huge = post(3 << 19, false);
    let answer = read_all(&mut huge);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    // A body of 700 KB on its way holds its bytes (taken before the server
    // asks for the body: `100 Continue`); another of 400 KB would pass
    // the budget, and is refused at once.
    let mut slow = post(700_000, true);
    let go_on = first_head(&mut slow);
    assert!(go_on.starts_with("HTTP/1.1 100"), "{go_on}");
    slow.write_all(&[b' '; 1000]).expect("send");
    let refused =
        |answer: &str| answer.starts_with("HTTP/1.1 503") && answer.to_ascii_lowercase().contains("retry-after: 1\r\n");
    // A body of 400 KB, sent once the server says to go on: a refusal
    // comes before any of it is sent.
    let second = || {
        let mut stream = post(400_000, true);
        let first = first_head(&mut stream);
        if !first.starts_with("HTTP/1.1 100") {
            return first + &read_all(&mut stream);
        }
        stream.write_all(&vec![b' '; 400_000]).expect("send the body");
        read_all(&mut stream)
    };
    let answer = second();
    assert!(refused(&answer), "{answer}");
    assert!(answer.contains("the server holds its most bytes of request bodies"), "{answer}");
    // The held body goes; its bytes come back to the budget.
    drop(slow);
    eventually("a body of 400 KB read again", || !refused(&second()));
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
