//! `toolhost serve` asks the client's user before a tool that requires
//! approval runs (MCP elicitation; at 2026-07-28 an `input_required`
//! result), and runs it only on an explicit yes. Driven by the official
//! Python SDK (legacy handshake and the default discover-first `Client`)
//! and TypeScript SDK, over stdio and streamable HTTP.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use toolhost_tests::{mcp_python, toolhost};

use crate::serve::spawn_http;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("toolhost-approval-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// The calculator, whose `divide` requires approval.
fn write_config(dir: &Path) -> String {
    let calculator = toolhost_tests::example("calculator");
    let config = json!({"schema": "s", "toolsets": [{
        "id": "calc", "kind": "uri", "server": {"url": calculator.display().to_string()},
        "tools": [{"name": "divide", "requiresApproval": true}]
    }]});
    let path = dir.join("toolsets.json");
    std::fs::write(&path, config.to_string()).expect("config");
    path.display().to_string()
}

fn last_json_line(output: std::process::Output, what: &str) -> Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{what} failed:\n{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{what}'s report is not JSON ({e}): {stdout}"))
}

fn python(mode: &str, answer: &str, transport: &[String]) -> Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp").join("approval.py");
    let output =
        Command::new(mcp_python()).arg(script).args([mode, answer]).args(transport).output().expect("run python");
    last_json_line(output, &format!("the Python client ({mode}, {answer})"))
}

fn stdio(config: &str, extra: &[&str]) -> Vec<String> {
    let mut args = vec!["stdio".to_owned(), toolhost().display().to_string(), "--config".to_owned(), config.to_owned()];
    args.extend(extra.iter().map(|a| a.to_string()));
    args
}

/// The question names the tool and shows the validated arguments; the form
/// is one required yes/no.
fn assert_asked_once(report: &Value) {
    let asked = report["asked"].as_array().expect("asked");
    assert_eq!(asked.len(), 1, "{report}");
    let message = asked[0]["message"].as_str().expect("message");
    assert!(message.starts_with("Allow the tool `calc__divide` to run?"), "{message}");
    assert!(message.contains("\"a\": 1") && message.contains("\"b\": 4"), "{message}");
    assert_eq!(asked[0]["schema"]["required"], json!(["approve"]), "{report}");
}

fn assert_ran(report: &Value) {
    assert_eq!(report["divide"], json!({"is_error": false, "text": "0.25"}), "{report}");
}

fn assert_refused(report: &Value, reason: &str) {
    assert_eq!(report["divide"]["is_error"], true, "{report}");
    let text = report["divide"]["text"].as_str().unwrap_or_default();
    assert!(text.starts_with("the call to `calc__divide` was not approved: "), "{text}");
    assert!(text.contains(reason), "expected `{reason}` in: {text}");
}

#[test]
fn the_python_sdk_is_asked_and_the_tool_runs_only_on_yes() {
    let dir = scratch("python");
    let config = write_config(&dir);

    // Legacy handshake over stdio: the server sends elicitation/create.
    let yes = python("legacy", "accept", &stdio(&config, &[]));
    assert_asked_once(&yes);
    assert_ran(&yes);
    assert_eq!(yes["add"], json!({"is_error": false, "text": "5"}), "a tool without approval is not asked about");

    // The discover-first Client speaks 2026-07-28 on stdio: the question
    // comes back as an input_required result, the answer with the retry.
    let auto = python("auto", "accept", &stdio(&config, &[]));
    assert_eq!(auto["protocol_version"], "2026-07-28", "{auto}");
    assert_asked_once(&auto);
    assert_ran(&auto);

    let (server, url, _logs) = spawn_http(&["--config", &config]);
    let http = |mode: &str, answer: &str| python(mode, answer, &["http".to_owned(), url.clone()]);
    let declined = http("legacy", "decline");
    assert_asked_once(&declined);
    assert_refused(&declined, "the user declined");
    let said_no = http("auto", "no");
    assert_asked_once(&said_no);
    assert_refused(&said_no, "the user said no");
    let cancelled = http("legacy", "cancel");
    assert_refused(&cancelled, "the user cancelled");
    let auto_yes = http("auto", "accept");
    assert_ran(&auto_yes);
    drop(server);

    // A client that cannot ask: refused, saying how to approve unattended.
    let nobody = python("legacy", "none", &stdio(&config, &[]));
    assert_eq!(nobody["asked"], json!([]));
    assert_refused(&nobody, "cannot ask its user");
    assert_refused(&nobody, "--yes");

    // No answer in time: refused (the user's late yes changes nothing).
    let slow = python("legacy", "slow", &stdio(&config, &["--approval-timeout", "1s"]));
    assert_refused(&slow, "did not answer within");

    // --yes: nobody is asked.
    let unattended = python("legacy", "decline", &stdio(&config, &["--yes"]));
    assert_eq!(unattended["asked"], json!([]));
    assert_ran(&unattended);
    std::fs::remove_dir_all(dir).ok();
}

fn typescript(answer: &str, transport: &[String]) -> Value {
    let output = Command::new("node")
        .arg(toolhost_tests::mcp_node_script("approval.mjs"))
        .arg(answer)
        .args(transport)
        .output()
        .expect("run node");
    last_json_line(output, &format!("the TypeScript client ({answer})"))
}

#[test]
fn the_typescript_sdk_is_asked_and_the_tool_runs_only_on_yes() {
    let dir = scratch("typescript");
    let config = write_config(&dir);
    let yes = typescript("accept", &stdio(&config, &[]));
    assert_asked_once(&yes);
    assert_ran(&yes);
    let (server, url, _logs) = spawn_http(&["--config", &config]);
    let declined = typescript("decline", &["http".to_owned(), url.clone()]);
    assert_asked_once(&declined);
    assert_refused(&declined, "the user declined");
    let http_yes = typescript("accept", &["http".to_owned(), url]);
    assert_ran(&http_yes);
    drop(server);
    std::fs::remove_dir_all(dir).ok();
}
