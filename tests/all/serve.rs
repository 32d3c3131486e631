//! `toolhost serve`: an MCP server, driven by the official MCP Python SDK
//! over stdio and streamable HTTP, and by raw JSON-RPC for cancellation and
//! list-changed notifications.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost_tests::{example, fixture, mcp_client_script, mcp_python, toolhost};

mod parking;
mod sessions;
/// Calls at 2026-07-28, without a session.
mod stateless;
mod stdio_calls;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("toolhost-serve-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// calc__* (the calculator, its component build: one registry serves both
/// kinds) and bad__* (the hostile fixture, an Extism module, with a long
/// timeout so that only cancellation can stop a spin).
fn write_config(dir: &Path, extra: Option<Value>) -> PathBuf {
    let calculator = toolhost_tests::Flavour::Component.example("calculator");
    let mut toolsets = vec![
        json!({"id": "calc", "kind": "uri", "server": {"url": calculator.display().to_string()}}),
        json!({"id": "bad", "kind": "uri", "server": {"url": fixture("hostile").display().to_string(), "limits": {"timeout": "60s"}}}),
    ];
    toolsets.extend(extra);
    let path = dir.join("toolsets.json");
    std::fs::write(&path, json!({"schema": "s", "toolsets": toolsets}).to_string()).expect("config");
    path
}

fn run_client(args: &[String]) -> Value {
    let output =
        Command::new(mcp_python()).arg(mcp_client_script()).args(args).output().expect("run the MCP Python client");
    assert!(output.status.success(), "the MCP client failed:\n{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("client report is not JSON ({e}): {stdout}"))
}

fn assert_scenario(report: &Value) {
    assert_eq!(report["server"], "toolhost");
    assert_eq!(report["list_changed"], true);
    let tools: Vec<&str> = report["tools"].as_array().expect("tools").iter().filter_map(Value::as_str).collect();
    // The hostile fixture's tools come and go as attacks are added; the
    // calculator's are fixed.
    let calc: Vec<&str> = tools.iter().copied().filter(|t| t.starts_with("calc__")).collect();
    assert_eq!(calc, ["calc__add", "calc__divide", "calc__multiply", "calc__subtract"]);
    assert!(tools.contains(&"bad__panic") && tools.contains(&"bad__spin"), "{tools:?}");
    assert_eq!(
        report["add_tool"],
        json!({"title": "Add", "description": "Add two numbers: a + b.", "input_type": "object", "output_type": "object", "read_only": true})
    );
    assert_eq!(report["add"], json!({"is_error": false, "text": "5", "structured": {"result": 5.0}}));
    assert_eq!(report["bad_arguments"]["is_error"], true);
    let bad = report["bad_arguments"]["text"].as_str().unwrap_or_default();
    assert!(bad.contains("at /a:") && bad.contains("at /b:") && bad.contains("did not run"), "{bad}");
    assert_eq!(report["failing"]["is_error"], true);
    let failing = report["failing"]["text"].as_str().unwrap_or_default();
    assert!(failing.contains("tool `panic`") && failing.contains("trapped"), "{failing}");
    assert_eq!(report["tool_error"], json!({"is_error": true, "text": "cannot divide by zero"}));
    assert_eq!(report["unknown"]["raised"], true);
    assert_eq!(report["unknown"]["code"], -32602);
    assert!(
        report["unknown"]["message"].as_str().unwrap_or_default().contains("calc__modulo"),
        "{}",
        report["unknown"]
    );
}

fn stdio_scenario(mode: &str, name: &str) -> Value {
    let dir = scratch(name);
    let config = write_config(&dir, None);
    let report = run_client(&[
        mode.to_owned(),
        toolhost().display().to_string(),
        "--config".to_owned(),
        config.display().to_string(),
    ]);
    assert_scenario(&report);
    std::fs::remove_dir_all(dir).ok();
    report
}

#[test]
fn the_python_sdk_lists_and_calls_tools_over_stdio() {
    let report = stdio_scenario("stdio", "stdio");
    assert_eq!(report["protocol_version"], "2025-11-25");
}

/// The SDK's default `Client` probes `server/discover` and speaks
/// 2026-07-28, where every result must carry `resultType`.
#[test]
fn the_python_sdks_default_client_speaks_2026_07_28_over_stdio() {
    let report = stdio_scenario("auto-stdio", "auto-stdio");
    assert_eq!(report["protocol_version"], "2026-07-28");
}

/// A `toolhost serve` child; killed when dropped.
pub(crate) struct Server(pub(crate) Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `toolhost serve --http 127.0.0.1:0 ARGS...` and the URL it printed.
pub(crate) fn spawn_http(args: &[&str]) -> (Server, String, std::io::Lines<BufReader<std::process::ChildStderr>>) {
    spawn_http_with_env(args, &[])
}

/// [`spawn_http`] with these environment variables set.
pub(crate) fn spawn_http_with_env(
    args: &[&str],
    env: &[(&str, &str)],
) -> (Server, String, std::io::Lines<BufReader<std::process::ChildStderr>>) {
    let mut child = Command::new(toolhost())
        .args(["serve", "--http", "127.0.0.1:0"])
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn toolhost serve --http");
    let stderr = child.stderr.take().expect("stderr");
    let server = Server(child);
    let mut lines = BufReader::new(stderr).lines();
    let url = loop {
        let line = lines.next().expect("the server printed its address").expect("stderr line");
        if let Some(at) = line.find("http://") {
            break line[at..].trim().to_owned();
        }
    };
    assert!(url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"), "{url}");
    (server, url, lines)
}

fn http_scenario(mode: &str, name: &str) -> Value {
    let dir = scratch(name);
    let config = write_config(&dir, None);
    let (server, url, _logs) = spawn_http(&["--config", &config.display().to_string()]);
    let report = run_client(&[mode.to_owned(), url]);
    assert_scenario(&report);
    drop(server);
    std::fs::remove_dir_all(dir).ok();
    report
}

#[test]
fn the_python_sdk_lists_and_calls_tools_over_streamable_http() {
    let report = http_scenario("http", "http");
    assert_eq!(report["protocol_version"], "2025-11-25");
}

#[test]
fn the_python_sdks_default_client_speaks_2026_07_28_over_streamable_http() {
    let report = http_scenario("auto-http", "auto-http");
    assert_eq!(report["protocol_version"], "2026-07-28");
}

/// A raw JSON-RPC session over the server's stdio.
struct Session {
    /// Held for its `Drop`, which stops the server.
    _server: Server,
    stdin: ChildStdin,
    messages: mpsc::Receiver<Value>,
    /// The server's log lines (with `start_logging`).
    logs: Option<mpsc::Receiver<String>>,
}

impl Session {
    fn start(args: &[&str]) -> Session {
        Session::spawn(args, false, "2025-06-18")
    }

    /// A session initialized at protocol `version`.
    fn start_at(args: &[&str], version: &str) -> Session {
        Session::spawn(args, false, version)
    }

    /// A session whose server logs at debug level; see `wait_for_log`.
    fn start_logging(args: &[&str]) -> Session {
        Session::spawn(args, true, "2025-06-18")
    }

    fn spawn(args: &[&str], logging: bool, version: &str) -> Session {
        let mut command = Command::new(toolhost());
        command.arg("serve").args(args).stdin(Stdio::piped()).stdout(Stdio::piped());
        if logging {
            command.env("TOOLHOST_LOG", "toolhost=debug").env("NO_COLOR", "1").stderr(Stdio::piped());
        } else {
            command.stderr(Stdio::null());
        }
        let mut child = command.spawn().expect("spawn toolhost serve");
        let logs = child.stderr.take().map(|stderr| log_lines(BufReader::new(stderr).lines()));
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (sender, messages) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                // Every line on stdout must be a JSON-RPC message: logs go to stderr.
                let message: Value =
                    serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON-RPC on stdout ({e}): {line}"));
                if sender.send(message).is_err() {
                    break;
                }
            }
        });
        let mut session = Session { _server: Server(child), stdin, messages, logs };
        session.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}));
        session.wait_for(|m| m["id"] == 1, Duration::from_secs(30)).expect("initialize answered");
        session.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        session
    }

    fn send(&mut self, message: Value) {
        writeln!(self.stdin, "{message}").expect("write to the server");
        self.stdin.flush().expect("flush");
    }

    fn wait_for(&self, wanted: impl Fn(&Value) -> bool, within: Duration) -> Option<Value> {
        let deadline = Instant::now() + within;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.messages.recv_timeout(left) {
                Ok(message) if wanted(&message) => return Some(message),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
        None
    }

    /// The first log line of the server's that `wanted` accepts.
    fn wait_for_log(&self, wanted: impl FnMut(&str) -> bool, within: Duration) -> Option<String> {
        wait_for_line(self.logs.as_ref().expect("a session started with start_logging"), wanted, within)
    }
}

/// `toolhost serve` of the calculator over stdio, with nothing sent yet:
/// the server (killed when dropped), its input and its output.
fn raw_stdio_calculator() -> (Server, ChildStdin, BufReader<std::process::ChildStdout>) {
    let mut child = Command::new(toolhost())
        .arg("serve")
        .arg(example("calculator"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn toolhost serve");
    let stdin = child.stdin.take().expect("stdin");
    let stdout = BufReader::new(child.stdout.take().expect("stdout"));
    (Server(child), stdin, stdout)
}

/// [`raw_stdio_calculator`], its session initialized (at 2025-06-18).
fn initialized_stdio_calculator() -> (Server, ChildStdin, BufReader<std::process::ChildStdout>) {
    let (server, mut stdin, mut stdout) = raw_stdio_calculator();
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}});
    writeln!(stdin, "{initialize}").expect("write");
    let mut line = String::new();
    stdout.read_line(&mut line).expect("the answer to initialize");
    writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).expect("write");
    (server, stdin, stdout)
}

/// A client that sends requests and does not read its answers is not read
/// from either, once 1,024 are pending: its own pipe fills, not the
/// server's memory (rmcp ran a task for every request, and the answers
/// waited in memory). Once it reads, every answer comes.
#[test]
fn a_client_that_does_not_read_its_answers_is_not_read_from_either() {
    const PINGS: usize = 10_000;
    let (_server, mut stdin, stdout) = initialized_stdio_calculator();
    // Pings, written without reading a single answer.
    let writer = std::thread::spawn(move || {
        for id in 1..=PINGS {
            writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "id": id, "method": "ping"})).expect("write");
        }
        stdin
    });
    // Not all written while nothing is read (this only waits: a slow
    // machine cannot make it pass wrongly in the other direction).
    std::thread::sleep(Duration::from_secs(3));
    assert!(!writer.is_finished(), "the server took all {PINGS} requests while its answers went unread");
    // Read, and every answer comes.
    let (sender, answers) = mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines() {
            let Ok(line) = line else { break };
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    let mut answered = 0;
    while answered < PINGS {
        let line = answers.recv_timeout(Duration::from_secs(60)).expect("the answers come once read");
        if line.contains("\"result\"") {
            answered += 1;
        }
    }
    drop(writer.join().expect("the writer ends"));
}

/// The context switches of a process's thread named `name`, from
/// `/proc/PID/task/*/status`: how often it has slept and woken.
#[cfg(target_os = "linux")]
fn switches_of_thread(pid: u32, name: &str) -> Option<u64> {
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()?.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim() != name {
            continue;
        }
        let status = std::fs::read_to_string(task.path().join("status")).ok()?;
        let switches = status
            .lines()
            .filter(|l| l.contains("ctxt_switches:"))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum();
        return Some(switches);
    }
    None
}

/// After calls, a server that gets no more stops waking its epoch ticker:
/// the thread parks (it no longer switches at all), and the next call
/// unparks it and is answered. A ticker that never parked would wake every
/// 10 ms, and this would wait out its deadline.
#[cfg(target_os = "linux")]
#[test]
fn an_idle_servers_epoch_ticker_parks_and_the_next_call_wakes_it() {
    let (server, mut stdin, mut stdout) = initialized_stdio_calculator();
    let pid = server.0.id();
    let mut call = |id: u64| {
        let add = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "add", "arguments": {"a": 1, "b": 2}}});
        writeln!(stdin, "{add}").expect("write");
        let mut answer = String::new();
        stdout.read_line(&mut answer).expect("an answer");
        let answer: Value = serde_json::from_str(&answer).expect("JSON");
        assert_eq!(answer["id"], id, "{answer}");
        assert_eq!(answer["result"]["content"][0]["text"], "3", "{answer}");
    };
    for id in 1..=20 {
        call(id);
    }
    // Parked: no switch in a whole second (watching, it would switch about
    // a hundred times).
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = switches_of_thread(pid, "toolhost-epoch").expect("an epoch ticker thread");
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let now = switches_of_thread(pid, "toolhost-epoch").expect("the epoch ticker thread");
        if now == last {
            break;
        }
        assert!(Instant::now() < deadline, "the epoch ticker still wakes after 60 s without a call");
        last = now;
    }
    // The next call unparks it (it runs again), and is answered.
    call(21);
    let deadline = Instant::now() + Duration::from_secs(60);
    while switches_of_thread(pid, "toolhost-epoch") == Some(last) {
        assert!(Instant::now() < deadline, "a call did not unpark the epoch ticker");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn cancellation_from_the_client_stops_the_call() {
    // Events, not timing: the server's debug log says when the call started
    // and when its guest was stopped (a busy machine may run the spin slowly,
    // but never out of this order).
    let dir = scratch("cancel");
    let config = write_config(&dir, None);
    let mut session = Session::start_logging(&["--config", &config.display().to_string()]);
    session.send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "bad__spin", "arguments": {}}}),
    );
    session
        .wait_for_log(|l| l.contains("call started") && l.contains("tool=\"spin\""), Duration::from_secs(60))
        .expect("the spin started");

    session.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2, "reason": "test"}}),
    );
    session
        .wait_for_log(
            |l| l.contains("call cancelled: the guest was stopped") && l.contains("tool=\"spin\""),
            Duration::from_secs(60),
        )
        .expect("the cancelled call's guest was stopped");
    session.send(
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "bad__ok", "arguments": {}}}),
    );
    let ok = session.wait_for(|m| m["id"] == 3, Duration::from_secs(60)).expect("a later call is answered");
    assert_eq!(ok["result"]["content"][0]["text"], "fine");
    // The cancelled request itself is never answered.
    assert!(session.wait_for(|m| m["id"] == 2, Duration::from_millis(200)).is_none());
    drop(session);
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn a_changed_configuration_is_announced_with_list_changed() {
    let dir = scratch("changed");
    let config = write_config(&dir, None);
    let mut session = Session::start(&["--config", &config.display().to_string()]);
    session.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let before = session.wait_for(|m| m["id"] == 2, Duration::from_secs(10)).expect("tools/list");
    let before = before["result"]["tools"].as_array().map(Vec::len).expect("tools");

    // Modification times have a coarse grain on some file systems.
    std::thread::sleep(Duration::from_millis(1100));
    write_config(
        &dir,
        Some(json!({"id": "text", "kind": "uri", "server": {"url": example("text").display().to_string()}})),
    );
    let notified = session.wait_for(|m| m["method"] == "notifications/tools/list_changed", Duration::from_secs(15));
    assert!(notified.is_some(), "no list_changed notification");

    session.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}));
    let after = session.wait_for(|m| m["id"] == 3, Duration::from_secs(10)).expect("tools/list");
    let names: Vec<&str> =
        after["result"]["tools"].as_array().expect("tools").iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names.len(), before + 4, "{names:?}");
    assert!(names.contains(&"text__slugify"), "{names:?}");
    drop(session);
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn a_single_plugin_is_served_under_its_own_tool_names() {
    let mut session = Session::start(&[&example("calculator").display().to_string()]);
    session.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let listed = session.wait_for(|m| m["id"] == 2, Duration::from_secs(10)).expect("tools/list");
    let names: Vec<&str> =
        listed["result"]["tools"].as_array().expect("tools").iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["add", "divide", "multiply", "subtract"]);
    session.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "multiply", "arguments": {"a": 6, "b": 7}}}));
    let product = session.wait_for(|m| m["id"] == 3, Duration::from_secs(10)).expect("tools/call");
    assert_eq!(product["result"]["structuredContent"]["result"], 42.0);
}

/// One raw HTTP/1.1 exchange on a connection of its own: the status, the
/// headers (names lowercased) and the body (chunked encoding undone).
pub(crate) fn http_exchange(
    url: &str,
    method: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Vec<(String, String)>, String) {
    use std::io::Read;
    let authority = url.trim_start_matches("http://").split('/').next().expect("authority").to_owned();
    let mut stream = std::net::TcpStream::connect(&authority).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(60))).ok();
    let mut request = format!("{method} /mcp HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    if !headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("host")) {
        request.push_str(&format!("Host: {authority}\r\n"));
    }
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).expect("send");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read the response");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines.next().and_then(|l| l.split(' ').nth(1)).and_then(|c| c.parse().ok()).expect("status line");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let chunked = headers.iter().any(|(n, v)| n == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked {
        let mut body = String::new();
        let mut rest = rest;
        while let Some((size, after)) = rest.split_once("\r\n") {
            let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if size == 0 || after.len() < size {
                break;
            }
            body.push_str(&after[..size]);
            rest = after[size..].trim_start_matches("\r\n");
        }
        body
    } else {
        rest.to_owned()
    };
    (status, headers, body)
}

/// Open session `session`'s `GET` stream (answered `200`): the stream,
/// past its status line.
pub(crate) fn standalone_stream(url: &str, session: &str) -> BufReader<std::net::TcpStream> {
    let authority = url.trim_start_matches("http://").trim_end_matches("/mcp").to_owned();
    let mut stream = std::net::TcpStream::connect(&authority).expect("connect");
    write!(
        stream,
        "GET /mcp HTTP/1.1\r\nHost: {authority}\r\nAccept: text/event-stream\r\nMcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-03-26\r\n\r\n"
    )
    .expect("send the GET");
    let mut stream = BufReader::new(stream);
    let mut status = String::new();
    stream.read_line(&mut status).expect("the stream's status line");
    assert!(status.contains(" 200 "), "{status}");
    stream
}

pub(crate) fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
}

/// The JSON-RPC messages of a response body: a JSON document, or the
/// `data:` lines of an event stream.
fn messages_in(body: &str) -> Vec<Value> {
    if let Ok(value) = serde_json::from_str::<Value>(body) {
        return vec![value];
    }
    body.lines().filter_map(|l| l.strip_prefix("data:")).filter_map(|d| serde_json::from_str(d.trim()).ok()).collect()
}

pub(crate) const JSON_AND_SSE: (&str, &str) = ("Accept", "application/json, text/event-stream");
pub(crate) const JSON_BODY: (&str, &str) = ("Content-Type", "application/json");

/// Initialize a legacy (2025-03-26) session over HTTP; its id.
pub(crate) fn http_session(url: &str) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}});
    let (status, headers, body) = http_exchange(url, "POST", &[JSON_AND_SSE, JSON_BODY], &init.to_string());
    assert_eq!(status, 200, "{body}");
    let session = header(&headers, "mcp-session-id").expect("a session id").to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    let (status, _, _) = http_exchange(
        url,
        "POST",
        &[JSON_AND_SSE, JSON_BODY, ("Mcp-Session-Id", &session), ("MCP-Protocol-Version", "2025-03-26")],
        &initialized,
    );
    assert_eq!(status, 202);
    session
}

/// Log lines of a server, read on a thread of their own.
fn log_lines(lines: std::io::Lines<BufReader<std::process::ChildStderr>>) -> mpsc::Receiver<String> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    receiver
}

/// The first line of `logs` that is `wanted`, if one comes `within`.
fn wait_for_line(
    logs: &mpsc::Receiver<String>,
    mut wanted: impl FnMut(&str) -> bool,
    within: Duration,
) -> Option<String> {
    let deadline = Instant::now() + within;
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match logs.recv_timeout(left) {
            Ok(line) if wanted(&line) => return Some(line),
            Ok(_) => {}
            Err(_) => return None,
        }
    }
    None
}

#[test]
fn a_foreign_origin_is_refused_and_allowed_ones_are_served() {
    let (server, url, _logs) =
        spawn_http(&["--allow-origin", "https://app.example", &example("calculator").display().to_string()]);
    let port = url.trim_start_matches("http://127.0.0.1:").trim_end_matches("/mcp").to_owned();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
    .to_string();
    let with_origin =
        |origin: &str| http_exchange(&url, "POST", &[JSON_AND_SSE, JSON_BODY, ("Origin", origin)], &init).0;
    assert_eq!(with_origin("http://evil.example"), 403);
    assert_eq!(with_origin(&format!("http://localhost:{port}.evil.example")), 403);
    assert_eq!(with_origin(&format!("http://127.0.0.1:{port}")), 200);
    assert_eq!(with_origin(&format!("http://localhost:{port}")), 200);
    assert_eq!(with_origin("https://app.example"), 200);
    // No Origin at all: not a browser, served.
    assert_eq!(http_exchange(&url, "POST", &[JSON_AND_SSE, JSON_BODY], &init).0, 200);
    drop(server);
}

#[test]
fn sigint_stops_the_http_server_while_a_client_holds_the_sse_stream() {
    let (server, url, logs) = spawn_http(&[&example("calculator").display().to_string()]);
    let session = http_session(&url);
    // Open the GET stream, as the TypeScript SDK always does, and hold it.
    let stream = standalone_stream(&url, &session);

    let pid = server.0.id().to_string();
    let killed = Command::new("kill").args(["-INT", &pid]).status().expect("run kill");
    assert!(killed.success());
    let mut server = server;
    let status = wait_exit(&mut server.0, Duration::from_secs(60))
        .expect("the server exited after SIGINT although a client held the SSE stream");
    assert!(status.success(), "{status}");
    let said: Vec<String> = logs.map_while(Result::ok).collect();
    assert!(said.iter().any(|l| l.contains("shutting down")), "{said:?}");
    drop(stream);
}

#[test]
fn json_rpc_errors_over_http_follow_the_specification() {
    let (server, url, _logs) = spawn_http(&[&example("calculator").display().to_string()]);
    // Malformed JSON: 400 with a parse error whose id is null.
    let (status, _, body) = http_exchange(&url, "POST", &[JSON_AND_SSE, JSON_BODY], "{\"jsonrpc\": \"2.0\", ");
    assert_eq!(status, 400, "{body}");
    let answer: Value = serde_json::from_str(&body).expect("a JSON-RPC error");
    assert_eq!(answer["error"]["code"], -32700);
    assert_eq!(answer["id"], Value::Null);

    let session = http_session(&url);
    let in_session =
        [JSON_AND_SSE, JSON_BODY, ("Mcp-Session-Id", session.as_str()), ("MCP-Protocol-Version", "2025-03-26")];
    // tools/call without params, or with arguments that are not an object.
    for (id, params) in [(2, None), (3, Some(json!({"name": "add", "arguments": [1, 2]})))] {
        let mut call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call"});
        if let Some(params) = params {
            call["params"] = params;
        }
        let (_, _, body) = http_exchange(&url, "POST", &in_session, &call.to_string());
        let answer =
            messages_in(&body).into_iter().find(|m| m["id"] == id).unwrap_or_else(|| panic!("no answer: {body}"));
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
    }
    // A cursor the server never handed out.
    let list = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {"cursor": "bogus"}});
    let (_, _, body) = http_exchange(&url, "POST", &in_session, &list.to_string());
    let answer = messages_in(&body).into_iter().find(|m| m["id"] == 4).unwrap_or_else(|| panic!("no answer: {body}"));
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    // A batch (2025-03-26): one answer per request, none for the notification.
    let batch = json!([
        {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 2, "b": 3}}},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}},
        {"jsonrpc": "2.0", "id": 6, "method": "tools/list"}
    ]);
    let (status, _, body) = http_exchange(&url, "POST", &in_session, &batch.to_string());
    assert_eq!(status, 200, "{body}");
    let answers: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("not a JSON array ({e}): {body}"));
    let answers = answers.as_array().expect("an array of answers");
    assert_eq!(answers.len(), 2, "{answers:?}");
    let add = answers.iter().find(|a| a["id"] == 5).expect("the call's answer");
    assert_eq!(add["result"]["structuredContent"]["result"], 5.0);
    assert!(answers.iter().any(|a| a["id"] == 6 && a["result"]["tools"].is_array()));
    // A batch of more than 64 messages is refused whole, in a short
    // answer (a megabyte of `[0,0,…]` was half a million error answers).
    let zeros = format!("[{}0]", "0,".repeat(500_000));
    let (status, _, body) = http_exchange(&url, "POST", &in_session, &zeros);
    assert_eq!(status, 400, "{}", &body[..body.len().min(300)]);
    assert!(body.len() < 1024 && body.contains("a batch of 500001 messages is more than the 64"), "{body}");
    // DELETE: a live session is closed (204), an ended one does not exist (404).
    let delete = [("Mcp-Session-Id", session.as_str()), ("MCP-Protocol-Version", "2025-03-26")];
    assert_eq!(http_exchange(&url, "DELETE", &delete, "").0, 204);
    assert_eq!(http_exchange(&url, "DELETE", &delete, "").0, 404);
    drop(server);
}

#[test]
fn json_rpc_errors_over_stdio_follow_the_specification() {
    let mut session = Session::start(&[&example("calculator").display().to_string()]);
    // An unparsable line: -32700 with id null.
    writeln!(session.stdin, "{{\"jsonrpc\": \"2.0\", \"id\": 2, ").expect("write");
    let parse = session.wait_for(|m| m.get("error").is_some(), Duration::from_secs(30)).expect("an answer to garbage");
    assert_eq!(parse["error"]["code"], -32700);
    assert_eq!(parse["id"], Value::Null);
    // tools/call without params, with arguments that are not an object.
    session.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call"}));
    let answer = session.wait_for(|m| m["id"] == 3, Duration::from_secs(30)).expect("answered");
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    session.send(
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "add", "arguments": "a=1"}}),
    );
    let answer = session.wait_for(|m| m["id"] == 4, Duration::from_secs(30)).expect("answered");
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    // A bogus cursor.
    session.send(json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {"cursor": "bogus"}}));
    let answer = session.wait_for(|m| m["id"] == 5, Duration::from_secs(30)).expect("answered");
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    // A line over 16 MiB: an error, not silence; the session goes on.
    let huge = format!(
        "{{\"jsonrpc\": \"2.0\", \"id\": 6, \"method\": \"tools/list\", \"params\": {{\"pad\": \"{}\"}}}}",
        "x".repeat(17 << 20)
    );
    writeln!(session.stdin, "{huge}").expect("write");
    let answer =
        session.wait_for(|m| m.get("error").is_some(), Duration::from_secs(60)).expect("an answer to a huge line");
    assert!(answer["error"]["message"].as_str().unwrap_or_default().contains("larger than"), "{answer}");
    // JSON-RPC that is no MCP message: -32600 with its id, saying why.
    session.send(json!({"jsonrpc": "2.0", "id": 10, "method": 5}));
    let answer = session.wait_for(|m| m["id"] == 10, Duration::from_secs(30)).expect("answered");
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert!(answer["error"]["message"].as_str().is_some_and(|m| m.starts_with("Invalid request: ")), "{answer}");
    // A malformed notification is not answered (notifications never are):
    // the next answer is the ping's.
    session.send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": "soon"}));
    session.send(json!({"jsonrpc": "2.0", "id": 11, "method": "ping"}));
    let next = session.wait_for(|m| m.get("id").is_some(), Duration::from_secs(30)).expect("answered");
    assert!(next["id"] == 11 && next.get("result").is_some(), "{next}");
    // 2025-06-18 has no batches: one refusal, saying so.
    session.send(json!([{"jsonrpc": "2.0", "id": 14, "method": "ping"}]));
    let refused = session.wait_for(|m| m.get("error").is_some(), Duration::from_secs(30)).expect("refused");
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("not part of protocol version 2025-06-18"), "{refused}");
    let mut session = Session::start_at(&[&example("calculator").display().to_string()], "2025-03-26");
    // A batch (2025-03-26): one array with an answer per request.
    session.send(json!([
        {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}}},
        {"jsonrpc": "2.0", "id": 8, "method": "tools/call"},
        {"jsonrpc": "2.0", "id": 9, "method": "tools/list"}
    ]));
    let batch = session.wait_for(Value::is_array, Duration::from_secs(30)).expect("the batch's answers");
    let answers = batch.as_array().expect("array");
    assert_eq!(answers.len(), 3, "{answers:?}");
    assert!(answers.iter().any(|a| a["id"] == 7 && a["result"]["structuredContent"]["result"] == 3.0), "{answers:?}");
    assert!(answers.iter().any(|a| a["id"] == 8 && a["error"]["code"] == -32602), "{answers:?}");
    assert!(answers.iter().any(|a| a["id"] == 9 && a["result"]["tools"].is_array()), "{answers:?}");
    // A request of a batch that the client cancels is not waited for: the
    // batch's other answers come.
    session.send(json!([
        {"jsonrpc": "2.0", "id": 15, "method": "tools/list"},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 15}},
        {"jsonrpc": "2.0", "id": 16, "method": "ping"}
    ]));
    let batch = session.wait_for(Value::is_array, Duration::from_secs(30)).expect("the batch's answers");
    assert!(batch.as_array().is_some_and(|a| a.iter().any(|m| m["id"] == 16)), "{batch}");
    // A call's members written as an array is a batch of four messages
    // that are not requests, and a call's params as an array are invalid:
    // neither runs the tool.
    session.send(json!(["2.0", 12, "tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}]));
    let batch = session.wait_for(Value::is_array, Duration::from_secs(30)).expect("the batch's answers");
    let answers = batch.as_array().expect("array");
    assert!(answers.len() == 4 && answers.iter().all(|a| a["error"]["code"] == -32600), "{answers:?}");
    session
        .send(json!({"jsonrpc": "2.0", "id": 13, "method": "tools/call", "params": [null, "add", {"a": 1, "b": 2}]}));
    let answer = session.wait_for(|m| m["id"] == 13, Duration::from_secs(30)).expect("answered");
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    // More than 64 messages: one short refusal.
    session.send(Value::Array(vec![json!(0); 65]));
    let refused = session.wait_for(|m| m.get("error").is_some(), Duration::from_secs(30)).expect("refused");
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(refused["error"]["message"].as_str().is_some_and(|m| m.contains("more than the 64")), "{refused}");
}

fn assert_typescript_report(report: &Value) {
    assert_eq!(report["server"], "toolhost");
    let tools: Vec<&str> = report["tools"].as_array().expect("tools").iter().filter_map(Value::as_str).collect();
    assert!(tools.contains(&"calc__add") && tools.contains(&"bad__panic"), "{tools:?}");
    assert_eq!(report["add"]["is_error"], false);
    assert_eq!(report["add"]["structured"]["result"].as_f64(), Some(5.0), "{}", report["add"]);
    assert_eq!(report["unknown"], json!({"raised": true, "code": -32602}));
}

/// `node client.mjs ARGS...` with its stdout piped.
fn typescript_client(args: &[&str]) -> Child {
    Command::new("node")
        .arg(toolhost_tests::mcp_node_client())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run node")
}

#[test]
fn the_typescript_sdk_lists_and_calls_tools_over_stdio_and_http() {
    let dir = scratch("typescript");
    let config = write_config(&dir, None);
    let config = config.display().to_string();
    let bin = toolhost().display().to_string();
    let stdio = typescript_client(&["stdio", &bin, "--config", &config]).wait_with_output().expect("node");
    assert!(stdio.status.success(), "the TypeScript client failed over stdio");
    let report: Value = serde_json::from_slice(&stdio.stdout).expect("a JSON report");
    assert_typescript_report(&report);

    let (server, url, _logs) = spawn_http(&["--config", &config]);
    let http = typescript_client(&["http", &url]).wait_with_output().expect("node");
    assert!(http.status.success(), "the TypeScript client failed over HTTP");
    let report: Value = serde_json::from_slice(&http.stdout).expect("a JSON report");
    assert_typescript_report(&report);
    drop(server);
    std::fs::remove_dir_all(dir).ok();
}

/// Wait for a child to exit; `None` if it has not within `within`.
fn wait_exit(child: &mut Child, within: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return Some(status);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn ctrl_c_stops_the_server_while_the_typescript_sdk_holds_its_stream() {
    let dir = scratch("typescript-hold");
    let config = write_config(&dir, None);
    let (mut server, url, _logs) = spawn_http(&["--config", &config.display().to_string()]);
    let mut client = typescript_client(&["http", &url, "--hold"]);
    let mut out = BufReader::new(client.stdout.take().expect("stdout")).lines();
    let report: Value = serde_json::from_str(&out.next().expect("a report").expect("a line")).expect("JSON");
    assert_typescript_report(&report);
    assert_eq!(out.next().expect("holding").expect("a line"), "holding");

    let killed = Command::new("kill").args(["-INT", &server.0.id().to_string()]).status().expect("run kill");
    assert!(killed.success());
    let status = wait_exit(&mut server.0, Duration::from_secs(60)).expect("the server exited on SIGINT");
    assert!(status.success(), "{status}");
    let _ = client.kill();
    let _ = client.wait();
    std::fs::remove_dir_all(dir).ok();
}

/// An `initialize` whose `clientInfo` has no `version` is taken, on both
/// transports, as the reference SDKs take it; and a batch in a 2025-06-18
/// request over HTTP is refused, saying why, as over stdio.
#[test]
fn an_unversioned_client_is_taken_and_batches_belong_to_2025_03_26_on_both_transports() {
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "no version"}}});
    let (_server, mut stdin, mut stdout) = raw_stdio_calculator();
    writeln!(stdin, "{initialize}").expect("write");
    let mut line = String::new();
    stdout.read_line(&mut line).expect("the answer");
    let answer: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
    assert_eq!(answer["result"]["protocolVersion"], "2025-06-18", "{answer}");

    let (server, url, _logs) = spawn_http(&[&example("calculator").display().to_string()]);
    let (status, headers, body) = http_exchange(&url, "POST", &[JSON_AND_SSE, JSON_BODY], &initialize.to_string());
    assert_eq!(status, 200, "{body}");
    let answer = messages_in(&body).into_iter().find(|m| m["id"] == 1).unwrap_or_else(|| panic!("{body}"));
    assert_eq!(answer["result"]["protocolVersion"], "2025-06-18", "{answer}");
    let session = headers
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case("mcp-session-id"))
        .map(|(_, value)| value.clone())
        .expect("a session id");
    let in_session =
        [JSON_AND_SSE, JSON_BODY, ("Mcp-Session-Id", session.as_str()), ("MCP-Protocol-Version", "2025-06-18")];
    let batch = json!([{"jsonrpc": "2.0", "id": 2, "method": "ping"}]).to_string();
    let (status, _, body) = http_exchange(&url, "POST", &in_session, &batch);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("not part of protocol version 2025-06-18"), "{body}");
    drop(server);
}
