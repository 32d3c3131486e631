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
    let output = Command::new(mcp_python())
        .arg(mcp_client_script())
        .args(args)
        .output()
        .expect("run the MCP Python client");
    assert!(output.status.success(), "the MCP client failed:\n{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("client report is not JSON ({e}): {stdout}"))
}

fn assert_scenario(report: &Value) {
    assert_eq!(report["server"], "toolhost");
    assert_eq!(report["list_changed"], true);
    let tools: Vec<&str> = report["tools"].as_array().expect("tools").iter().filter_map(Value::as_str).collect();
    assert!(tools.contains(&"calc__add") && tools.contains(&"bad__panic") && tools.len() == 21, "{tools:?}");
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
    assert!(report["unknown"]["message"].as_str().unwrap_or_default().contains("calc__modulo"), "{}", report["unknown"]);
}

#[test]
fn the_python_sdk_lists_and_calls_tools_over_stdio() {
    let dir = scratch("stdio");
    let config = write_config(&dir, None);
    let report = run_client(&[
        "stdio".to_owned(),
        toolhost().display().to_string(),
        "--config".to_owned(),
        config.display().to_string(),
    ]);
    assert_scenario(&report);
    std::fs::remove_dir_all(dir).ok();
}

/// A `toolhost serve` child; killed when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_python_sdk_lists_and_calls_tools_over_streamable_http() {
    let dir = scratch("http");
    let config = write_config(&dir, None);
    let mut child = Command::new(toolhost())
        .args(["serve", "--http", "127.0.0.1:0", "--config"])
        .arg(&config)
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
    let report = run_client(&["http".to_owned(), url]);
    assert_scenario(&report);
    drop(server);
    std::fs::remove_dir_all(dir).ok();
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
        Session::spawn(args, false)
    }

    /// A session whose server logs at debug level; see `wait_for_log`.
    fn start_logging(args: &[&str]) -> Session {
        Session::spawn(args, true)
    }

    fn spawn(args: &[&str], logging: bool) -> Session {
        let mut command = Command::new(toolhost());
        command.arg("serve").args(args).stdin(Stdio::piped()).stdout(Stdio::piped());
        if logging {
            command.env("TOOLHOST_LOG", "toolhost=debug").env("NO_COLOR", "1").stderr(Stdio::piped());
        } else {
            command.stderr(Stdio::null());
        }
        let mut child = command.spawn().expect("spawn toolhost serve");
        let logs = child.stderr.take().map(|stderr| {
            let (sender, logs) = mpsc::channel();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    if sender.send(line).is_err() {
                        break;
                    }
                }
            });
            logs
        });
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (sender, messages) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                // Every line on stdout must be a JSON-RPC message: logs go to stderr.
                let message: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON-RPC on stdout ({e}): {line}"));
                if sender.send(message).is_err() {
                    break;
                }
            }
        });
        let mut session = Session { _server: Server(child), stdin, messages, logs };
        session.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}));
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
    fn wait_for_log(&self, wanted: impl Fn(&str) -> bool, within: Duration) -> Option<String> {
        let logs = self.logs.as_ref().expect("a session started with start_logging");
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
}

#[test]
fn cancellation_from_the_client_stops_the_call() {
    // Events, not timing: the server's debug log says when the call started
    // and when its guest was stopped (a busy machine may run the spin slowly,
    // but never out of this order).
    let dir = scratch("cancel");
    let config = write_config(&dir, None);
    let mut session = Session::start_logging(&["--config", &config.display().to_string()]);
    session.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "bad__spin", "arguments": {}}}));
    session.wait_for_log(|l| l.contains("call started") && l.contains("tool=\"spin\""), Duration::from_secs(60)).expect("the spin started");

    session.send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2, "reason": "test"}}));
    session
        .wait_for_log(|l| l.contains("call cancelled: the guest was stopped") && l.contains("tool=\"spin\""), Duration::from_secs(60))
        .expect("the cancelled call's guest was stopped");
    session.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "bad__ok", "arguments": {}}}));
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
    assert_eq!(before["result"]["tools"].as_array().map(Vec::len), Some(21));

    // Modification times have a coarse grain on some file systems.
    std::thread::sleep(Duration::from_millis(1100));
    write_config(&dir, Some(json!({"id": "text", "kind": "uri", "server": {"url": example("text").display().to_string()}})));
    let notified = session.wait_for(|m| m["method"] == "notifications/tools/list_changed", Duration::from_secs(15));
    assert!(notified.is_some(), "no list_changed notification");

    session.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}));
    let after = session.wait_for(|m| m["id"] == 3, Duration::from_secs(10)).expect("tools/list");
    let names: Vec<&str> = after["result"]["tools"].as_array().expect("tools").iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names.len(), 25, "{names:?}");
    assert!(names.contains(&"text__slugify"), "{names:?}");
    drop(session);
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn a_single_plugin_is_served_under_its_own_tool_names() {
    let mut session = Session::start(&[&example("calculator").display().to_string()]);
    session.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let listed = session.wait_for(|m| m["id"] == 2, Duration::from_secs(10)).expect("tools/list");
    let names: Vec<&str> = listed["result"]["tools"].as_array().expect("tools").iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["add", "divide", "multiply", "subtract"]);
    session.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "multiply", "arguments": {"a": 6, "b": 7}}}));
    let product = session.wait_for(|m| m["id"] == 3, Duration::from_secs(10)).expect("tools/call");
    assert_eq!(product["result"]["structuredContent"]["result"], 42.0);
}
