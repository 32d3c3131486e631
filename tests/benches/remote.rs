//! Remote MCP toolsets (`cargo bench -p toolhost-tests --bench remote`):
//! what toolhost adds over calling the server directly.
//!
//! The server is `tests/mcp/server.py` (the official Python SDK) over
//! stdio, its tool `add`. Side by side, on the same machine, in one run:
//!
//! - `direct`: an rmcp client of the bench's own, `tools/call` on the
//!   server;
//! - `registry`: `Registry::call_tool("py__add")` through `McpConnector`:
//!   argument validation against the server's schema, the call forwarded
//!   on rmcp, the result checked against the protocol and the output
//!   schema, redaction, limits, telemetry.
//!
//! And the sync: connecting, initializing and listing every tool, directly
//! and as a registry's `load_all` of a toolsets file. Figures, not
//! assertions; calls are sequential (one in flight), so each latency is
//! the client's view of one call.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::json;
use toolhost::{ApproveAll, NoSecrets, Registry, load_toolsets};
use toolhost_mcp::McpConnector;

const CALLS: usize = 2_000;
const SYNCS: usize = 10;

fn server_script() -> String {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp").join("server.py").display().to_string()
}

fn report(name: &str, mut latencies: Vec<Duration>) -> Duration {
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "{name:<22} n={:<5} p50 {:>9.1} µs   p90 {:>9.1} µs   p99 {:>9.1} µs",
        latencies.len(),
        us(at(0.50)),
        us(at(0.90)),
        us(at(0.99))
    );
    at(0.50)
}

async fn direct_calls(python: &str) -> Vec<Duration> {
    let mut command = tokio::process::Command::new(python);
    command.args([server_script(), "stdio".to_owned()]);
    let (transport, _) =
        TokioChildProcess::builder(command).stderr(std::process::Stdio::null()).spawn().expect("server");
    let client = ().serve(transport).await.expect("initialize");
    let mut latencies = Vec::with_capacity(CALLS);
    for i in 0..CALLS + CALLS / 10 {
        let mut params = CallToolRequestParams::new("add");
        params.arguments = Some(json!({"a": i, "b": 1}).as_object().expect("object").clone());
        let started = Instant::now();
        let result = client.call_tool(params).await.expect("call");
        let took = started.elapsed();
        assert_ne!(result.is_error, Some(true));
        if i >= CALLS / 10 {
            latencies.push(took);
        }
    }
    let _ = client.cancel().await;
    latencies
}

async fn direct_sync(python: &str) -> Duration {
    let started = Instant::now();
    let mut command = tokio::process::Command::new(python);
    command.args([server_script(), "stdio".to_owned()]);
    let (transport, _) =
        TokioChildProcess::builder(command).stderr(std::process::Stdio::null()).spawn().expect("server");
    let client = ().serve(transport).await.expect("initialize");
    let tools = client.list_all_tools().await.expect("list");
    let took = started.elapsed();
    assert!(!tools.is_empty());
    let _ = client.cancel().await;
    took
}

fn config(dir: &std::path::Path, python: &str) -> std::path::PathBuf {
    let path = dir.join("toolsets.json");
    let doc = json!({"schema": "s", "toolsets": [
        {"id": "py", "kind": "mcp", "server": {"command": python, "args": [server_script(), "stdio"]}}
    ]});
    std::fs::write(&path, doc.to_string()).expect("write");
    path
}

async fn registry_sync(path: &std::path::Path) -> (Duration, Registry) {
    let started = Instant::now();
    let file = load_toolsets(path, &NoSecrets).await.expect("config");
    let registry = Registry::new(Arc::new(NoSecrets)).with_connector("mcp", Arc::new(McpConnector::new()));
    let report = registry.load_all(file.toolsets).await;
    let took = started.elapsed();
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    (took, registry)
}

async fn registry_calls(registry: &Registry) -> Vec<Duration> {
    let mut latencies = Vec::with_capacity(CALLS);
    for i in 0..CALLS + CALLS / 10 {
        let started = Instant::now();
        let result = registry.call_tool("py__add", json!({"a": i, "b": 1}), &ApproveAll).await.expect("call");
        let took = started.elapsed();
        assert!(!result.is_error());
        if i >= CALLS / 10 {
            latencies.push(took);
        }
    }
    latencies
}

fn main() {
    // `cargo bench` passes flags (`--bench`); this bench takes none.
    let python = toolhost_tests::mcp_python().display().to_string();
    let dir = std::env::temp_dir().join(format!("toolhost-remote-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch");
    let path = config(&dir, &python);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("rt");
    runtime.block_on(async {
        println!("remote MCP toolset over stdio (tests/mcp/server.py, Python SDK), sequential calls");
        let mut direct_syncs = Vec::new();
        let mut registry_syncs = Vec::new();
        let mut kept = None;
        // Alternate, so drift in the machine's load hits both alike.
        for _ in 0..SYNCS {
            direct_syncs.push(direct_sync(&python).await);
            let (took, registry) = registry_sync(&path).await;
            registry_syncs.push(took);
            kept = Some(registry);
        }
        let direct_sync = report("sync direct", direct_syncs);
        let registry_sync = report("sync registry", registry_syncs);
        let registry = kept.expect("a registry");
        let direct = report("call direct", direct_calls(&python).await);
        let through = report("call registry", registry_calls(&registry).await);
        println!(
            "added by toolhost (p50): sync {:+.1} ms, call {:+.1} µs",
            (registry_sync.as_secs_f64() - direct_sync.as_secs_f64()) * 1e3,
            (through.as_secs_f64() - direct.as_secs_f64()) * 1e6
        );
    });
    std::fs::remove_dir_all(&dir).ok();
}
