//! Remote MCP toolsets (`cargo bench -p toolhost-tests --bench remote`):
//! what toolhost adds over calling the server directly.
//!
//! Four upstream servers, each called `add` sequentially (one call in
//! flight, so each latency is the client's view of one call):
//!
//! - `python-stdio`: `tests/mcp/server.py` (the official Python SDK) over
//!   stdio;
//! - `python-http`: the same over streamable HTTP (uvicorn);
//! - `toolhost-stdio`: `toolhost serve` of the calculator plugin over
//!   stdio, an upstream fast enough that what the registry adds shows;
//! - `toolhost-http`: the same over streamable HTTP.
//!
//! Side by side, alternating in rounds so that drift in the machine's load
//! hits both alike:
//!
//! - `direct`: an rmcp client of the bench's own, `tools/call` on the
//!   server, asking for no progress (over HTTP, its connections kept alive
//!   between calls): what the registry's connector asks of the server;
//! - `fresh` (HTTP upstreams): rmcp's own client as it comes, which opens
//!   a connection for every request and puts a progress token on each;
//! - `registry`: `Registry::call_tool` through `McpConnector`: argument
//!   validation against the server's schema, the call forwarded on rmcp,
//!   the result checked against the protocol and the output schema,
//!   redaction, limits, telemetry.
//!
//! Each line gives the latency and the CPU this process (the client side)
//! spends per call, read from its threads' `schedstat` (nanoseconds); the
//! upstream's own CPU is its process's, not counted. Then the sync:
//! connecting, initializing and listing every tool of the Python server,
//! directly and as a registry's `load_all` of a toolsets file. Figures,
//! not assertions.
//!
//! `REMOTE_UPSTREAMS` names the upstreams to run (comma-separated labels,
//! all four by default; the sync runs with `python-stdio`),
//! `REMOTE_CALLS` the calls per round and way (1,000), and `REMOTE_WAYS`
//! one way alone (`direct`, `registry` or `fresh`), which is how a
//! profiler sees one way's cost.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use serde_json::{Value, json};
use toolhost::{ApproveAll, NoSecrets, Registry, load_toolsets};
use toolhost_mcp::{McpConnector, WithoutProgressTokens};

/// Calls per round and way (unless `REMOTE_CALLS` says), after a warm-up
/// of a tenth as many.
const CALLS: usize = 1_000;
const ROUNDS: usize = 4;
const SYNCS: usize = 10;

/// Calls per round and way: `REMOTE_CALLS`, else [`CALLS`].
fn calls() -> usize {
    std::env::var("REMOTE_CALLS").ok().and_then(|n| n.parse().ok()).filter(|n| *n > 0).unwrap_or(CALLS)
}

/// Whether `name` runs: the environment variable `list` is unset, or names
/// it among its comma-separated entries (`REMOTE_WAYS`, `REMOTE_UPSTREAMS`).
fn runs(list: &str, name: &str) -> bool {
    std::env::var(list).map_or(true, |names| names.split(',').any(|n| n.trim() == name))
}

fn server_script() -> String {
    toolhost_tests::mcp_python_server().display().to_string()
}

/// The CPU this process's threads have used (`/proc/self/task/*/schedstat`,
/// nanoseconds; a thread that has exited no longer counts, and the
/// runtime's threads live for the whole run).
fn process_cpu() -> Duration {
    let mut total = 0;
    for task in std::fs::read_dir("/proc/self/task").expect("/proc/self/task").flatten() {
        let Ok(text) = std::fs::read_to_string(task.path().join("schedstat")) else { continue };
        total += text.split_whitespace().next().and_then(|ns| ns.parse::<u64>().ok()).unwrap_or(0);
    }
    Duration::from_nanos(total)
}

/// A quantile of sorted latencies.
fn at(sorted: &[Duration], q: f64) -> Duration {
    sorted[((sorted.len() as f64 * q) as usize).min(sorted.len() - 1)]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// What one way of calling measured over all its rounds.
#[derive(Default)]
struct Way {
    latencies: Vec<Duration>,
    cpu: Duration,
    calls: usize,
}

impl Way {
    /// Print its line; its p50 and CPU per call.
    fn report(&mut self, name: &str) -> (Duration, f64) {
        self.latencies.sort();
        let cpu = us(self.cpu) / self.calls as f64;
        println!(
            "{name:<28} n={:<5} p50 {:>8.1} µs   p90 {:>8.1} µs   p99 {:>8.1} µs   client CPU {cpu:>6.1} µs/call",
            self.latencies.len(),
            us(at(&self.latencies, 0.50)),
            us(at(&self.latencies, 0.90)),
            us(at(&self.latencies, 0.99)),
        );
        (at(&self.latencies, 0.50), cpu)
    }
}

/// An upstream MCP server the registry reaches as a `kind: mcp` toolset.
enum Upstream {
    PythonStdio(String),
    ToolhostStdio(String),
    /// A server over streamable HTTP (killed when dropped): its label, its
    /// process and its URL.
    Http(&'static str, std::process::Child, String),
}

impl Drop for Upstream {
    fn drop(&mut self) {
        if let Upstream::Http(_, child, _) = self {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Upstream {
    fn label(&self) -> &'static str {
        match self {
            Upstream::PythonStdio(_) => "python-stdio",
            Upstream::ToolhostStdio(_) => "toolhost-stdio",
            Upstream::Http(label, ..) => label,
        }
    }

    /// The command that starts a stdio upstream.
    fn command(&self) -> Option<tokio::process::Command> {
        let (program, args) = match self {
            Upstream::PythonStdio(python) => (python.clone(), vec![server_script(), "stdio".to_owned()]),
            Upstream::ToolhostStdio(toolhost) => {
                let calculator = toolhost_tests::example("calculator").display().to_string();
                (toolhost.clone(), vec!["serve".to_owned(), calculator])
            }
            Upstream::Http(..) => return None,
        };
        let mut command = tokio::process::Command::new(program);
        command.args(args);
        Some(command)
    }

    /// The `server` member of its toolset.
    fn server(&self) -> Value {
        match self {
            Upstream::Http(_, _, url) => json!({"url": url}),
            _ => {
                let command = self.command().expect("a stdio upstream");
                let std = command.as_std();
                let args: Vec<String> = std.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
                json!({"command": std.get_program().to_string_lossy(), "args": args})
            }
        }
    }

    /// A client of rmcp's own HTTP client (a connection per request),
    /// initialized: `None` for a stdio upstream.
    async fn fresh_client(&self) -> Option<RunningService<RoleClient, ()>> {
        let Upstream::Http(_, _, url) = self else { return None };
        Some(().serve(StreamableHttpClientTransport::from_uri(url.as_str())).await.expect("initialize"))
    }

    /// A client of the bench's own, initialized. Like the registry's
    /// connector, it sends no progress token (`WithoutProgressTokens`), so
    /// that the two ask the same of the upstream.
    async fn client(&self) -> RunningService<RoleClient, ()> {
        match self {
            Upstream::Http(_, _, url) => {
                use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
                // rmcp's own client (`from_uri`) opens a connection per
                // call; the registry's keeps them, and so does this one.
                let http = reqwest::Client::builder()
                    .pool_idle_timeout(Duration::from_secs(4))
                    .build()
                    .expect("an HTTP client");
                let config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
                let transport = StreamableHttpClientTransport::with_client(http, config);
                ().serve(WithoutProgressTokens(transport)).await.expect("initialize")
            }
            _ => {
                let (transport, _) = TokioChildProcess::builder(self.command().expect("a stdio upstream"))
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .expect("server");
                ().serve(WithoutProgressTokens(transport)).await.expect("initialize")
            }
        }
    }

    /// A registry of one toolset, `up`, of this server.
    async fn registry(&self, dir: &std::path::Path) -> Registry {
        let path = dir.join(format!("{}.json", self.label()));
        let doc = json!({"schema": "s", "toolsets": [{"id": "up", "kind": "mcp", "server": self.server()}]});
        std::fs::write(&path, doc.to_string()).expect("write");
        load_registry(&path).await.1
    }
}

async fn load_registry(path: &std::path::Path) -> (Duration, Registry) {
    let started = Instant::now();
    let file = load_toolsets(path, &NoSecrets).await.expect("config");
    let registry = Registry::new(Arc::new(NoSecrets)).with_connector("mcp", Arc::new(McpConnector::new()));
    let report = registry.load_all(file.toolsets).await;
    let took = started.elapsed();
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    (took, registry)
}

/// `calls` sequential calls, each way's `call` timed; the first `warm_up`
/// are not counted.
async fn run<F: Future<Output = ()>>(way: &mut Way, warm_up: usize, mut call: impl FnMut(usize) -> F) {
    for i in 0..warm_up {
        call(i).await;
    }
    let calls = calls();
    let cpu = process_cpu();
    for i in 0..calls {
        let started = Instant::now();
        call(i).await;
        way.latencies.push(started.elapsed());
    }
    way.cpu += process_cpu().saturating_sub(cpu);
    way.calls += calls;
}

/// Both ways against one upstream, alternating rounds.
async fn compare(upstream: &Upstream, dir: &std::path::Path) {
    let client = upstream.client().await;
    let fresh_client = upstream.fresh_client().await;
    let registry = upstream.registry(dir).await;
    let (mut direct, mut through, mut fresh) = (Way::default(), Way::default(), Way::default());
    let call = |client: &RunningService<RoleClient, ()>, i: usize| {
        let mut params = CallToolRequestParams::new("add");
        params.arguments = Some(json!({"a": i, "b": 1}).as_object().expect("object").clone());
        let peer = client.peer().clone();
        async move {
            let result = peer.call_tool(params).await.expect("call");
            assert_ne!(result.is_error, Some(true));
        }
    };
    for round in 0..ROUNDS {
        let warm_up = if round == 0 { calls() / 10 } else { 0 };
        if runs("REMOTE_WAYS", "direct") {
            run(&mut direct, warm_up, |i| call(&client, i)).await;
        }
        if let Some(fresh_client) = fresh_client.as_ref().filter(|_| runs("REMOTE_WAYS", "fresh")) {
            run(&mut fresh, warm_up, |i| call(fresh_client, i)).await;
        }
        if runs("REMOTE_WAYS", "registry") {
            run(&mut through, warm_up, |i| {
                let registry = &registry;
                async move {
                    let result =
                        registry.call_tool("up__add", json!({"a": i, "b": 1}), &ApproveAll).await.expect("call");
                    assert!(!result.is_error());
                }
            })
            .await;
        }
    }
    // Each way that ran (`REMOTE_WAYS` may leave one out).
    let label = upstream.label();
    let direct = (direct.calls > 0).then(|| direct.report(&format!("{label}/direct")));
    let through = (through.calls > 0).then(|| through.report(&format!("{label}/registry")));
    let fresh = (fresh.calls > 0).then(|| fresh.report(&format!("{label}/fresh")));
    // What the connector's way of calling (connections kept alive, no
    // progress token) saves over rmcp's client as it comes, and what the
    // registry adds.
    let difference = |name: &str, from: Option<(Duration, f64)>, to: Option<(Duration, f64)>| {
        if let (Some((from_p50, from_cpu)), Some((to_p50, to_cpu))) = (from, to) {
            println!(
                "{:<28} p50 {:+.1} µs, client CPU {:+.1} µs/call",
                format!("{label}/{name}"),
                us(to_p50) - us(from_p50),
                to_cpu - from_cpu
            );
        }
    };
    difference("saved", fresh, direct);
    difference("added", direct, through);
    let _ = client.cancel().await;
    if let Some(fresh_client) = fresh_client {
        let _ = fresh_client.cancel().await;
    }
}

async fn direct_sync(python: &str) -> Duration {
    let started = Instant::now();
    let client = Upstream::PythonStdio(python.to_owned()).client().await;
    let tools = client.list_all_tools().await.expect("list");
    let took = started.elapsed();
    assert!(!tools.is_empty());
    let _ = client.cancel().await;
    took
}

fn main() {
    // `cargo bench` passes flags (`--bench`); this bench takes none.
    // (The direct HTTP client's TLS, which it builds though it speaks
    // plain HTTP here, as toolhost's own clients do.)
    let _ = rustls::crypto::ring::default_provider().install_default();
    let python = toolhost_tests::mcp_python().display().to_string();
    let toolhost = toolhost_tests::toolhost();
    let dir = std::env::temp_dir().join(format!("toolhost-remote-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch");
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("rt");
    runtime.block_on(async {
        println!("remote MCP toolsets: `add`, sequential calls, {ROUNDS} rounds of {} each way, alternating", calls());
        let mut upstreams =
            vec![Upstream::PythonStdio(python.clone()), Upstream::ToolhostStdio(toolhost.display().to_string())];
        // (An HTTP server is started only when it is to be called.)
        if runs("REMOTE_UPSTREAMS", "python-http") {
            let (child, port) = toolhost_tests::spawn_mcp_python_http(&[]);
            upstreams.push(Upstream::Http("python-http", child, format!("http://127.0.0.1:{port}/mcp")));
        }
        if runs("REMOTE_UPSTREAMS", "toolhost-http") {
            let calculator = toolhost_tests::example("calculator").display().to_string();
            let (child, url) = toolhost_tests::spawn_serve_http_of(&toolhost, &[&calculator], &[]);
            upstreams.push(Upstream::Http("toolhost-http", child, url));
        }
        for upstream in upstreams.iter().filter(|upstream| runs("REMOTE_UPSTREAMS", upstream.label())) {
            compare(upstream, &dir).await;
        }
        drop(upstreams);
        if !runs("REMOTE_UPSTREAMS", "python-stdio") {
            return;
        }

        println!("sync: start, initialize and list the Python server's tools, {SYNCS} times each way, alternating");
        let path = dir.join("python-stdio.json");
        let mut direct = Way::default();
        let mut through = Way::default();
        for _ in 0..SYNCS {
            direct.latencies.push(direct_sync(&python).await);
            through.latencies.push(load_registry(&path).await.0);
        }
        direct.latencies.sort();
        through.latencies.sort();
        let (direct, through) = (at(&direct.latencies, 0.5), at(&through.latencies, 0.5));
        println!("sync direct   p50 {:>7.1} ms", direct.as_secs_f64() * 1e3);
        println!("sync registry p50 {:>7.1} ms", through.as_secs_f64() * 1e3);
        println!("sync added    p50 {:+.1} ms", (through.as_secs_f64() - direct.as_secs_f64()) * 1e3);
    });
    std::fs::remove_dir_all(&dir).ok();
}
