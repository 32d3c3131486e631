//! A `tools/call` over stdio, answered beside rmcp's serve loop once the
//! session's handshake is over: the answer rmcp gives, and every call sent
//! before the input ends answered before the server exits.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost_tests::{example, fixture};

use super::Session;

/// What the server logs of a call answered beside rmcp's serve loop.
const BESIDE: &str = "answered beside rmcp's serve loop";

const MINUTE: Duration = Duration::from_secs(60);

/// A `tools/call` of `name`: its answer.
fn call(session: &mut Session, id: u64, name: &str, arguments: &Value, meta: Option<Value>) -> Value {
    let mut params = json!({"name": name, "arguments": arguments});
    if let Some(meta) = meta {
        params["_meta"] = meta;
    }
    session.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}));
    session.wait_for(|m| m["id"] == id, MINUTE).unwrap_or_else(|| panic!("{name} (id {id}) was not answered"))
}

/// The same calls of one session, answered beside rmcp and (naming
/// `_meta.protocolVersion`, which sends them to rmcp's checks) by rmcp's
/// serve loop: the same JSON-RPC answers, for a result, a tool error, bad
/// arguments and an unknown tool; and the server's log shows that exactly
/// the calls without the version took the direct path.
#[test]
fn a_stdio_call_gets_the_answer_rmcp_gives_it_beside_the_serve_loop() {
    for (plugin, calls) in [
        (fixture("hostile"), vec![("error", json!({})), ("no_such_tool", json!({})), ("ok", json!({}))]),
        (example("calculator"), vec![("add", json!({"a": 2, "b": 3})), ("add", json!({"a": "two", "b": 3}))]),
    ] {
        let mut session = Session::start_logging(&[&plugin.display().to_string()]);
        let mut id = 10;
        for (name, arguments) in &calls {
            id += 2;
            let direct = call(&mut session, id, name, arguments, None);
            let through_rmcp =
                call(&mut session, id + 1, name, arguments, Some(json!({"protocolVersion": "2025-06-18"})));
            let without_id = |mut answer: Value| {
                answer.as_object_mut().expect("an object").remove("id");
                answer
            };
            assert_eq!(without_id(direct.clone()), without_id(through_rmcp), "{name} {arguments}");
            assert!(direct.get("result").is_some() || direct.get("error").is_some(), "{direct}");
        }
        // A last call, of a tool no other call named, is the n-th logged
        // as answered beside rmcp.
        call(&mut session, 99, "marker", &json!({}), None);
        let mut direct = 0;
        session
            .wait_for_log(
                |line| {
                    direct += usize::from(line.contains(BESIDE));
                    line.contains(BESIDE) && line.contains("tool=marker")
                },
                MINUTE,
            )
            .expect("the marked call was answered beside rmcp");
        assert_eq!(direct, calls.len() + 1, "{}", plugin.display());
    }
    // What the answers say, once.
    let mut session = Session::start_logging(&[&example("calculator").display().to_string()]);
    let answer = call(&mut session, 1, "add", &json!({"a": 2, "b": 3}), None);
    assert_eq!(answer["result"]["structuredContent"]["result"], 5.0, "{answer}");
    assert!(answer["result"].get("resultType").is_none(), "a 2026-07-28 member in a 2025-06-18 session: {answer}");
    let answer = call(&mut session, 2, "nope", &json!({}), None);
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
}

/// Calls still running when the client closes its input are answered,
/// each once, before the server exits (as rmcp's own are).
#[test]
fn calls_running_when_the_input_ends_are_answered_before_the_server_exits() {
    const CALLS: u64 = 8;
    let mut session = Session::start_logging(&[&fixture("hostile").display().to_string()]);
    for id in 1..=CALLS {
        let params = json!({"name": "sleep", "arguments": {"ms": 200}});
        session.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}));
    }
    session.wait_for_log(|line| line.contains(BESIDE) && line.contains("tool=sleep"), MINUTE).expect("a call started");
    let Session { _server: mut server, stdin, messages, .. } = session;
    drop(stdin);
    let mut answered = std::collections::BTreeSet::new();
    while let Ok(message) = messages.recv_timeout(MINUTE) {
        assert_eq!(message["result"]["content"][0]["text"], "awake", "{message}");
        assert!(answered.insert(message["id"].as_u64().expect("a numeric id")), "answered twice: {message}");
    }
    assert_eq!(answered, (1..=CALLS).collect(), "every call is answered once");
    let deadline = Instant::now() + MINUTE;
    let status = loop {
        if let Some(status) = server.0.try_wait().expect("the server's status") {
            break status;
        }
        assert!(Instant::now() < deadline, "the server did not exit once its input ended");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status}");
}
