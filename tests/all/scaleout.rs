//! Several `toolhost serve --http` instances behind a real load balancer
//! (HAProxy, from Debian's packages), and graceful shutdown.
//!
//! 2026-07-28 clients need no session, so any instance answers any request;
//! older clients' sessions live on one instance, which HAProxy keeps them on
//! by their `Mcp-Session-Id`. An instance is killed mid-run: every call
//! either succeeds or fails where the client sees it, and the calls go on.

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost_tests::{example, fixture, mcp_python};

use crate::production::{call, open_session, post};
use crate::serve::{Server, spawn_http};

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("toolhost-scaleout-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// Debian's HAProxy: the test fails, naming the package, without it.
fn haproxy() -> std::path::PathBuf {
    toolhost_tests::required_program(&["/usr/sbin/haproxy", "/usr/bin/haproxy"], "HAProxy", "haproxy")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("addr").port()
}

fn get(url: &str) -> Option<(u16, String)> {
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let mut response = agent.get(url).call().ok()?;
    Some((response.status().as_u16(), response.body_mut().read_to_string().unwrap_or_default()))
}

/// The calls an instance answered, from its `/metrics`.
fn calls_answered(base: &str) -> f64 {
    let (_, metrics) = get(&format!("{base}/metrics")).expect("metrics");
    metrics
        .lines()
        .filter(|line| line.starts_with("toolhost_tool_calls_total{"))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Wait (generously) until `ready` holds.
fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready() {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The shipped `deploy/haproxy.cfg`, listening on `port` in front of
/// `backends` on loopback.
fn balancer_config(port: u16, backends: &[u16]) -> String {
    let shipped =
        std::fs::read_to_string(std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/haproxy.cfg"))
            .expect("deploy/haproxy.cfg");
    assert!(shipped.contains("    bind *:8000\n"), "{shipped}");
    let mut config: String = shipped
        .replace("    bind *:8000\n", &format!("    bind 127.0.0.1:{port}\n"))
        .lines()
        .filter(|line| !line.trim_start().starts_with("server "))
        .map(|line| format!("{line}\n"))
        .collect();
    for (n, backend) in backends.iter().enumerate() {
        config.push_str(&format!("    server toolhost{n} 127.0.0.1:{backend} check\n"));
    }
    config
}

/// HAProxy on a free port in front of `backends`, once it answers: the
/// process and its port.
fn start_balancer(haproxy: &std::path::Path, dir: &std::path::Path, backends: &[u16]) -> (Killed, u16) {
    let port = free_port();
    let balancer_file = dir.join("haproxy.cfg");
    std::fs::write(&balancer_file, balancer_config(port, backends)).expect("write the haproxy config");
    let balancer = Killed(
        Command::new(haproxy)
            .args(["-db", "-f"])
            .arg(&balancer_file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start haproxy"),
    );
    wait_for("the balancer to answer", || {
        get(&format!("http://127.0.0.1:{port}/readyz")).is_some_and(|(status, _)| status == 200)
    });
    (balancer, port)
}

#[test]
fn two_instances_behind_haproxy_serve_clients_across_both_and_survive_losing_one() {
    let haproxy = haproxy();
    let dir = scratch("haproxy");
    let config = dir.join("toolsets.json");
    let document = json!({
        "schema": "https://schema.cjson.dev/0/toolsets/cjson-toolsets-0.1.0-SNAPSHOT.schema.json",
        "toolsets": [{"id": "calc", "kind": "uri", "server": {"url": example("calculator").display().to_string()}}],
    });
    std::fs::write(&config, document.to_string()).expect("write config");
    let config = config.display().to_string();
    let (first, first_url, _first_logs) = spawn_http(&["--config", &config, "--metrics"]);
    let (_second, second_url, _second_logs) = spawn_http(&["--config", &config, "--metrics"]);
    let backend = |url: &str| url.trim_end_matches("/mcp").to_owned();
    let (first_base, second_base) = (backend(&first_url), backend(&second_url));
    let port_of = |base: &str| base.rsplit(':').next().expect("port").parse::<u16>().expect("a port");

    let (_balancer, port) = start_balancer(&haproxy, &dir, &[port_of(&first_base), port_of(&second_base)]);
    let url = format!("http://127.0.0.1:{port}/mcp");

    const CALLS: usize = 40;
    let client = |mode: &str| {
        let script = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp/balanced.py");
        Killed(
            Command::new(mcp_python())
                .arg(script)
                .args([url.as_str(), mode, &CALLS.to_string()])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("start the Python client"),
        )
    };
    let mut clients = [client("stateless"), client("session")];
    let mut outputs: Vec<_> =
        clients.iter_mut().map(|client| BufReader::new(client.0.stdout.take().expect("stdout")).lines()).collect();
    for output in &mut outputs {
        assert_eq!(output.next().expect("a line").expect("text"), "halfway");
    }
    // Both instances have answered calls.
    let (before_first, before_second) = (calls_answered(&first_base), calls_answered(&second_base));
    assert!(before_first > 0.0 && before_second > 0.0, "calls answered: {before_first} and {before_second}");

    // One instance dies mid-run.
    let mut first = first;
    first.0.kill().expect("kill an instance");
    first.0.wait().expect("reap it");
    for client in &mut clients {
        writeln!(client.0.stdin.as_mut().expect("stdin"), "go").expect("tell the client to go on");
    }
    let reports: Vec<Value> = outputs
        .iter_mut()
        .map(|output| {
            let line = output.next().expect("a report").expect("text");
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
        })
        .collect();
    let (stateless, session) = (&reports[0], &reports[1]);
    eprintln!("stateless client: {stateless}\nsession client: {session}");
    let count = |report: &Value, key: &str| match &report[key] {
        Value::Array(items) => items.len() as u64,
        other => other.as_u64().unwrap_or(0),
    };
    for report in &reports {
        // No call lost: each one succeeded, or its client saw it fail.
        assert_eq!(
            count(report, "ok") + count(report, "failed") + count(report, "interrupted"),
            CALLS as u64,
            "{report}"
        );
    }
    // Needing no session, every call of the 2026-07-28 client succeeded,
    // the second half on the instance left.
    assert_eq!(stateless["protocol_version"], "2026-07-28");
    assert_eq!(count(stateless, "ok"), CALLS as u64, "{stateless}");
    // The session client lost at most the calls of the session that died
    // with its instance, and went on in a new one.
    assert!(count(session, "second_half_ok") >= (CALLS / 2 - 1) as u64, "{session}");
    assert!(calls_answered(&second_base) > before_second, "the instance left answered the second half");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn sigterm_drains_a_running_call_to_its_end_and_says_not_ready_meanwhile() {
    let (server, url, _logs) = spawn_http(&[&fixture("faults").display().to_string(), "--metrics"]);
    let base = url.trim_end_matches("/mcp").to_owned();
    let session = open_session(&url, None);
    let call = {
        let (url, session) = (url.clone(), session.clone());
        std::thread::spawn(move || post(&url, None, Some(&session), &call("nap", json!({"ms": 8000}))))
    };
    wait_for("the call to be running", || {
        get(&format!("{base}/metrics")).is_some_and(|(_, m)| m.lines().any(|l| l == "toolhost_tool_calls_running 1"))
    });
    let signalled = Command::new("kill").args(["-TERM", &server.0.id().to_string()]).status().expect("run kill");
    assert!(signalled.success());
    // Draining: still answering, and telling balancers to send no more.
    wait_for("/readyz to say 503", || get(&format!("{base}/readyz")).is_some_and(|(status, _)| status == 503));
    let answer = call.join().expect("the call's thread");
    assert_eq!(answer.status, 200);
    assert_eq!(answer.body["result"]["content"][0]["text"], "rested", "the running call finished: {}", answer.body);
    let mut server: Server = server;
    wait_for("the server to exit", || server.0.try_wait().expect("wait").is_some());
    assert!(server.0.wait().expect("status").success());
}
