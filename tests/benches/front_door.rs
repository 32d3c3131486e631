//! The MCP front door (`cargo bench -p toolhost-tests --bench front_door`):
//! `tools/call` of `calculator.add` through `toolhost serve`, next to the
//! same call in process.
//!
//! - `in-process`: `Plugin::call_tool`, 1 and 64 concurrent callers; then
//!   1 caller pausing 250 µs before each call, as a server idles between
//!   requests (what a call costs when it starts cold).
//! - `stdio`: one `toolhost serve` session on pipes, raw JSON-RPC; first one
//!   request at a time, then 16 and 64 requests kept in flight on the
//!   session. Before, the time from starting the process to the answer to
//!   its first `tools/list` (median of 10 warm starts), and after, the
//!   server's resident memory. `FRONT_DOOR_OTHER` names another stdio MCP
//!   server to drive the same way in the same run, alternating
//!   `FRONT_DOOR_ROUNDS` times (see [`StdioServer::other`]): hyper-mcp,
//!   say, side by side. Then the same against `stdio-floor`, this bench's
//!   own executable answering every request at once with a canned result
//!   (a blocking read of a line, its id, a write): what the pipes and the
//!   two processes' wake-ups cost, before any MCP.
//! - `cold-start`: `toolhost serve` of each example plugin with an empty
//!   compiled-module cache, process start to its first `tools/list` answer
//!   (median of 7 each); alternating with the `toolhost` binary that
//!   `FRONT_DOOR_BASELINE` names, if set.
//! - `http`: `toolhost serve --http`; one kept-alive session calling one
//!   request at a time, then 64 sessions (each its own kept-alive
//!   connection; the clients are tasks on one client thread, whose CPU per
//!   call is printed too) calling concurrently, at protocol 2025-06-18 (a
//!   session per client); then the same at 2026-07-28, where a client has no
//!   session and every request names its protocol version in `_meta`.
//!   Then the same parts against `http-floor`, a server that answers every
//!   request with a canned result at once (hyper, two tokio workers): what
//!   HTTP itself costs here, client and kernel included.
//! - `idle-sessions`: what an idle MCP session holds in `toolhost serve
//!   --http`: 1,000 sessions opened (`initialize`, then
//!   `notifications/initialized`), each on a connection closed once it is
//!   open, so that only the session stays; the server's resident memory
//!   before and after, and its CPU over 10 s of idleness with none and with
//!   them all (timers, the sweep that parks idle sessions). Then, once they have been idle
//!   long enough to be parked (`sessionParkSeconds`, 20 s here), 1,000 more,
//!   parked in turn: what each of those added to the server's resident
//!   memory (the first 1,000's freed memory stays with the allocator, for
//!   reuse), and the idle CPU with 2,000 parked.
//! - `paced` (only when named): 8 kept-alive clients calling open-loop at
//!   500 calls/s in all, the rate agents drive rather than saturation, with
//!   the floor in the same run; the server's CPU per call read in
//!   nanoseconds from `/proc`, its context switches, and its busiest
//!   threads (see [`paced`] for the settings). Then the same rate driven
//!   by the official SDKs' own clients (`tests/mcp/paced.mjs` and
//!   `paced.py`: the TypeScript SDK's `Client`, the Python SDK's default
//!   `Client` and its `ClientSession`), each in its own process.
//!
//! Each line gives calls/s and the latency percentiles of one call, measured
//! by the client (request written to answer read), and for `serve` the
//! server process's CPU time (user and system) per call. Figures, not
//! assertions (the current figures: docs/src/performance.md). Run it on a
//! release build (`cargo bench` builds `toolhost` in the bench's profile).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Calls per measurement (after a warm-up of a tenth as many).
const CALLS: usize = 20_000;
/// Concurrent callers (in flight on stdio, sessions on HTTP).
const CONCURRENCY: usize = 64;
/// The pause between the calls of the in-process caller that idles: about
/// the time a client on HTTP takes to send its next request.
const PAUSE: Duration = Duration::from_micros(250);

fn add(id: usize) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "add", "arguments": {"a": id as f64, "b": 1.0}}})
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "front-door-bench", "version": "0"}}})
}

fn initialized() -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
}

/// Latencies of `calls` calls that took `elapsed` in all, as one line,
/// with the server's CPU time per call if it is known.
fn report(name: &str, mut latencies: Vec<Duration>, elapsed: Duration, server_cpu: Option<f64>) {
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let cpu =
        server_cpu.map(|seconds| format!("   server CPU {:>6.1} µs/call", seconds * 1e6 / latencies.len() as f64));
    println!(
        "{name:<28} {:>9.0} calls/s   p50 {:>8.1} µs   p90 {:>8.1} µs   p99 {:>8.1} µs{}",
        latencies.len() as f64 / elapsed.as_secs_f64(),
        us(at(0.50)),
        us(at(0.90)),
        us(at(0.99)),
        cpu.unwrap_or_default(),
    );
}

/// CPU seconds (user and system) a process has used, from
/// `/proc/PID/stat` (Linux; `None` elsewhere).
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name in parentheses: state is field 3, utime 14,
    // stime 15.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    // The kernel's USER_HZ, 100 on Linux.
    Some(ticks / 100.0)
}

fn in_process() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("rt");
    let plugin = Arc::new(
        runtime
            .block_on(toolhost::Plugin::builder_from_file(toolhost_tests::example("calculator")).build())
            .expect("load"),
    );
    // Measured on Cranelift's code, not the baseline compiler's it starts on.
    runtime.block_on(plugin.settled_tier());
    // Last, one caller that pauses between calls as a server between
    // requests does: the thread sleeps, and the call after finds its caches
    // and the CPU's predictors cold (the pause is not timed).
    for (concurrency, pause) in [(1, None), (CONCURRENCY, None), (1, Some(PAUSE))] {
        let started = Instant::now();
        let latencies = runtime.block_on(async {
            let tasks: Vec<_> = (0..concurrency)
                .map(|c| {
                    let plugin = Arc::clone(&plugin);
                    tokio::spawn(async move {
                        let mut latencies = Vec::new();
                        for i in 0..CALLS / concurrency {
                            if let Some(pause) = pause {
                                // Blocking the worker on purpose: nothing
                                // else runs, as in an idle server.
                                std::thread::sleep(pause);
                            }
                            let call = Instant::now();
                            let result = plugin.call_tool("add", json!({"a": (c + i) as f64, "b": 1.0})).await;
                            assert!(result.is_ok_and(|r| !r.is_error()));
                            latencies.push(call.elapsed());
                        }
                        latencies
                    })
                })
                .collect();
            let mut all = Vec::new();
            for task in tasks {
                all.extend(task.await.expect("task"));
            }
            all
        });
        let label = match pause {
            None => format!("in-process/{concurrency}"),
            Some(pause) => format!("in-process/{concurrency} paused {} µs", pause.as_micros()),
        };
        // (Calls per second counts the pauses too.)
        report(&label, latencies, started.elapsed(), None);
    }
}

/// An MCP server spoken to over its stdio: how to start it, what to call
/// its lines, and its name for the calculator's `add`.
struct StdioServer {
    label: String,
    program: String,
    args: Vec<String>,
    /// Environment variables set for it (none but for cold starts).
    env: Vec<(String, std::path::PathBuf)>,
    tool: String,
}

impl StdioServer {
    /// `toolhost serve` on the calculator.
    fn toolhost() -> StdioServer {
        StdioServer {
            label: "stdio".to_owned(),
            program: toolhost_tests::toolhost().display().to_string(),
            args: vec!["serve".to_owned(), toolhost_tests::example("calculator").display().to_string()],
            env: Vec::new(),
            tool: "add".to_owned(),
        }
    }

    /// The floor: this bench's own executable as a stdio server that
    /// answers every request at once ([`stdio_floor_server`]).
    fn floor() -> StdioServer {
        StdioServer {
            label: "stdio-floor".to_owned(),
            program: std::env::current_exe().expect("this bench").display().to_string(),
            args: vec!["--stdio-floor-server".to_owned()],
            env: Vec::new(),
            tool: "add".to_owned(),
        }
    }

    /// Another server to drive the same way, from `FRONT_DOOR_OTHER` (its
    /// command line, split at spaces) and `FRONT_DOOR_OTHER_TOOL` (its name
    /// for `add`; `add` if unset), `FRONT_DOOR_OTHER_LABEL` naming its
    /// lines: for example hyper-mcp with a config naming the same
    /// `calculator.wasm` by `file://` URL.
    fn other() -> Option<StdioServer> {
        let line = std::env::var("FRONT_DOOR_OTHER").ok().filter(|l| !l.trim().is_empty())?;
        let mut words = line.split_whitespace().map(str::to_owned);
        let program = words.next()?;
        Some(StdioServer {
            label: std::env::var("FRONT_DOOR_OTHER_LABEL").unwrap_or_else(|_| "other".to_owned()),
            program,
            args: words.collect(),
            env: Vec::new(),
            tool: std::env::var("FRONT_DOOR_OTHER_TOOL").unwrap_or_else(|_| "add".to_owned()),
        })
    }

    /// Start it and complete the handshake (`initialize`, then
    /// `notifications/initialized`): the process, its stdin, its stdout.
    fn start(&self) -> (Child, ChildStdin, BufReader<ChildStdout>) {
        let mut child = Command::new(&self.program)
            .args(&self.args)
            .envs(self.env.iter().map(|(name, value)| (name, value)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", self.program));
        let mut input = child.stdin.take().expect("stdin");
        let mut output = BufReader::new(child.stdout.take().expect("stdout"));
        send(&mut input, &initialize());
        answer_to(&mut output, 0);
        send(&mut input, &initialized());
        (child, input, output)
    }

    /// The `tools/call` of `add` with request id `id`.
    fn add(&self, id: usize) -> Value {
        let mut call = add(id);
        call["params"]["name"] = Value::from(self.tool.as_str());
        call
    }
}

/// Send one message on a line.
fn send(input: &mut ChildStdin, message: &Value) {
    let mut bytes = message.to_string().into_bytes();
    bytes.push(b'\n');
    input.write_all(&bytes).expect("write");
    input.flush().expect("flush");
}

/// Read lines until the answer to request `id` (skipping notifications
/// and the server's own requests).
fn answer_to(output: &mut impl BufRead, id: u64) -> Value {
    let mut line = String::new();
    loop {
        line.clear();
        assert!(output.read_line(&mut line).expect("read") > 0, "the server closed its output");
        let Ok(message) = serde_json::from_str::<Value>(&line) else { continue };
        if message["id"] == json!(id) && message.get("method").is_none() {
            return message;
        }
    }
}

/// Resident memory of a process (`VmRSS`, KiB), from `/proc`.
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Start `server` and ask for its tools: the time from process start to
/// the `tools/list` answer, how many tools it named, and the process and
/// its stdin (to end it).
fn start_and_list(server: &StdioServer) -> (Duration, usize, Child, ChildStdin) {
    let started = Instant::now();
    let (child, mut input, mut output) = server.start();
    send(&mut input, &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    let listed = answer_to(&mut output, 1);
    let elapsed = started.elapsed();
    (elapsed, listed["result"]["tools"].as_array().map_or(0, Vec::len), child, input)
}

/// Start to first `tools/list` answer (process start, `initialize`,
/// `tools/list`), the median of 10 starts after one to warm the cache.
fn start_time(server: &StdioServer) {
    let mut times = Vec::new();
    let mut tools = 0;
    for round in 0..11 {
        let (elapsed, listed, mut child, input) = start_and_list(server);
        if round > 0 {
            times.push(elapsed);
        }
        tools = listed;
        drop(input);
        if round == 0 {
            // The end of its input ends it: a plugin that missed the cache
            // then has Cranelift's entry written before the process exits
            // (killed, the next starts would miss it too). Killed if it
            // lingers.
            let deadline = Instant::now() + std::time::Duration::from_secs(60);
            while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    times.sort();
    println!(
        "{:<28} start to tools/list ({tools} tools): median {:.1} ms, min {:.1} ms",
        format!("{}/start", server.label),
        times[times.len() / 2].as_secs_f64() * 1e3,
        times[0].as_secs_f64() * 1e3
    );
}

/// Cold starts: process start to the first `tools/list` answer with an
/// empty compiled-module cache (a fresh `TOOLHOST_CACHE_DIR` each time), so
/// the plugin is compiled before it can answer; the median of 7 for each
/// example named. Each process is killed once it has answered (its
/// background compile with it), before the next starts. With
/// `FRONT_DOOR_BASELINE` naming another `toolhost` binary (the build
/// before a change), its starts alternate with this build's, start by
/// start, and are reported on a line of their own.
fn cold_start() {
    let builds = builds();
    for plugin in ["calculator", "clock", "text", "doorbell", "calculator.component"] {
        let mut times = vec![Vec::new(); builds.len()];
        for _ in 0..7 {
            for ((_, binary), times) in builds.iter().zip(&mut times) {
                let mut server = StdioServer::toolhost();
                server.program = binary.display().to_string();
                server.args[1] = toolhost_tests::example(plugin).display().to_string();
                let cache = tempfile::tempdir().expect("a cache directory");
                server.env = vec![("TOOLHOST_CACHE_DIR".to_owned(), cache.path().to_owned())];
                let (elapsed, tools, mut child, _input) = start_and_list(&server);
                times.push(elapsed);
                assert!(tools > 0, "{plugin} listed no tools");
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        for ((label, _), mut times) in builds.iter().zip(times) {
            times.sort();
            let line = match label.as_str() {
                "toolhost" => format!("cold-start/{plugin}"),
                other => format!("{other}/cold-start/{plugin}"),
            };
            println!(
                "{:<28} cold start to tools/list: median {:.1} ms, min {:.1} ms (7 starts, empty cache)",
                line,
                times[times.len() / 2].as_secs_f64() * 1e3,
                times[0].as_secs_f64() * 1e3
            );
        }
    }
}

fn stdio(server: &StdioServer) {
    start_time(server);
    let (mut child, mut input, mut output) = server.start();
    let mut line = String::new();

    for in_flight in [1, 16, CONCURRENCY] {
        for (calls, measured) in [(CALLS / 10, false), (CALLS, true)] {
            let cpu_before = cpu_seconds(child.id());
            // A writer keeps `in_flight` requests outstanding; the reader
            // (this thread) takes the answers and frees a slot each.
            let (slot_tx, slot_rx) = std::sync::mpsc::sync_channel::<()>(in_flight);
            for _ in 0..in_flight {
                slot_tx.send(()).expect("slot");
            }
            let sent: Arc<std::sync::Mutex<Vec<Option<Instant>>>> =
                Arc::new(std::sync::Mutex::new(vec![None; calls + 1]));
            let started = Instant::now();
            let writer = {
                let sent = Arc::clone(&sent);
                let mut input = input;
                let calls_of: Vec<Vec<u8>> = (1..=calls)
                    .map(|id| {
                        let mut bytes = server.add(id).to_string().into_bytes();
                        bytes.push(b'\n');
                        bytes
                    })
                    .collect();
                std::thread::spawn(move || {
                    for (id, bytes) in (1..=calls).zip(calls_of) {
                        slot_rx.recv().expect("slot");
                        sent.lock().unwrap()[id] = Some(Instant::now());
                        input.write_all(&bytes).expect("write");
                    }
                    input.flush().expect("flush");
                    input
                })
            };
            let mut latencies = Vec::with_capacity(calls);
            while latencies.len() < calls {
                line.clear();
                output.read_line(&mut line).expect("answer");
                let answer: Value = serde_json::from_str(&line).expect("JSON answer");
                if answer.get("method").is_some() {
                    // A notification (a log line, say): not an answer.
                    continue;
                }
                let id = answer["id"].as_u64().expect("an answer with an id") as usize;
                assert!(
                    answer["result"]["content"].is_array() && answer["result"]["isError"] != json!(true),
                    "{answer}"
                );
                let at = sent.lock().unwrap()[id].expect("sent");
                latencies.push(at.elapsed());
                let _ = slot_tx.send(());
            }
            input = writer.join().expect("writer");
            if measured {
                let cpu = cpu_seconds(child.id()).zip(cpu_before).map(|(after, before)| after - before);
                report(&format!("{}/{in_flight} in flight", server.label), latencies, started.elapsed(), cpu);
            }
        }
    }
    if let Some(kib) = rss_kib(child.id()) {
        println!(
            "{:<28} resident memory after the calls: {:.1} MiB",
            format!("{}/memory", server.label),
            kib as f64 / 1024.0
        );
    }
    drop(input);
    let _ = child.kill();
    let _ = child.wait();
}

/// The newest protocol: no session, every request carries its context.
const STATELESS: &str = "2026-07-28";

/// One MCP client over HTTP: its own kept-alive connection (hyper's
/// HTTP/1.1 client) and its session id (none at 2026-07-28, which has no
/// sessions). The clients are tasks of one single-threaded tokio runtime,
/// as a load generator is: a thread per client (the bench's first driver,
/// `ureq`) cost the two cores it shares with the server nearly as much as
/// the server's own work.
struct Session {
    sender: hyper::client::conn::http1::SendRequest<http_body_util::Full<hyper::body::Bytes>>,
    host: String,
    stateless: bool,
    id: Option<String>,
}

impl Session {
    async fn open(addr: &str, stateless: bool) -> Session {
        let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        stream.set_nodelay(true).expect("TCP_NODELAY");
        let (sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.expect("handshake");
        tokio::spawn(connection);
        let mut session = Session { sender, host: addr.to_owned(), stateless, id: None };
        if !stateless {
            let (headers, _) = session.post(&initialize()).await;
            let id = headers.get("mcp-session-id").and_then(|v| v.to_str().ok()).expect("a session id");
            session.id = Some(id.to_owned());
            session.post(&initialized()).await;
        }
        session
    }

    async fn post(&mut self, message: &Value) -> (hyper::HeaderMap, hyper::body::Bytes) {
        use http_body_util::BodyExt as _;
        let request = hyper::Request::post("/mcp")
            .header("host", &self.host)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json");
        let request = match (&self.id, self.stateless) {
            (Some(id), _) => request.header("mcp-session-id", id).header("mcp-protocol-version", "2025-06-18"),
            // 2026-07-28 names the method and tool in headers too (SEP-2243).
            (None, true) => request
                .header("mcp-protocol-version", STATELESS)
                .header("mcp-method", message["method"].as_str().unwrap_or_default())
                .header("mcp-name", message["params"]["name"].as_str().unwrap_or_default()),
            // `initialize`, which opens a session.
            (None, false) => request,
        };
        let body = http_body_util::Full::new(hyper::body::Bytes::from(message.to_string()));
        self.sender.ready().await.expect("connection ready");
        let response = self.sender.send_request(request.body(body).expect("request")).await.expect("POST");
        let (parts, body) = response.into_parts();
        let body = body.collect().await.expect("body").to_bytes();
        assert!(parts.status.is_success(), "HTTP {}: {}", parts.status, String::from_utf8_lossy(&body));
        (parts.headers, body)
    }

    async fn call(&mut self, id: usize) {
        let mut message = add(id);
        if self.stateless {
            message["params"]["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": STATELESS,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "front-door-bench", "version": "0"},
            });
        }
        let (_, body) = self.post(&message).await;
        let body = String::from_utf8_lossy(&body);
        assert!(body.contains("\"result\"") && !body.contains("\"isError\":true"), "{body}");
    }
}

/// Each session calls `add` `each` times, all sessions at once (a task
/// each), back to back or, with `paced` (a start and each session's
/// interval), each call at its due time, the sessions' phases spread
/// evenly over the interval. Gives the sessions back, and every call's
/// latency (from its send to its answer).
async fn run_sessions(
    open: Vec<Session>,
    each: usize,
    paced: Option<(tokio::time::Instant, Duration)>,
) -> (Vec<Session>, Vec<Duration>) {
    let count = open.len();
    let tasks: Vec<_> = open
        .into_iter()
        .enumerate()
        .map(|(s, mut session)| {
            tokio::spawn(async move {
                let mut latencies = Vec::with_capacity(each);
                for i in 0..each {
                    if let Some((start, interval)) = paced {
                        let phase = interval.mul_f64(s as f64 / count as f64);
                        tokio::time::sleep_until(start + phase + interval * i as u32).await;
                    }
                    let sent = Instant::now();
                    session.call(s * each + i + 1).await;
                    latencies.push(sent.elapsed());
                }
                (session, latencies)
            })
        })
        .collect();
    let (mut back, mut all) = (Vec::new(), Vec::new());
    for task in tasks {
        let (session, latencies) = task.await.expect("client task");
        back.push(session);
        all.extend(latencies);
    }
    (back, all)
}

/// The `tools/call` result the floors answer with: what `add` of 1 and 2
/// gives.
fn canned_result() -> Value {
    json!({"content": [{"type": "text", "text": "3"}], "isError": false})
}

/// The `ADDR` of a `serve --http` URL, `http://ADDR/mcp`.
fn address_of(url: &str) -> &str {
    url.strip_prefix("http://").and_then(|rest| rest.strip_suffix("/mcp")).expect("http://ADDR/mcp")
}

/// The floor of HTTP on this machine: a server that answers every POST at
/// once with a canned `tools/call` result (and a session id), on hyper and
/// two tokio workers as `serve` is, with no MCP, no plugin and no checks.
/// It runs as this bench's own executable, `--floor-server`, so that its
/// CPU is its own; it prints its address and serves until killed.
fn floor_server() {
    use http_body_util::BodyExt as _;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("rt");
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        println!("{}", listener.local_addr().expect("address"));
        loop {
            let (stream, _) = listener.accept().await.expect("accept");
            stream.set_nodelay(true).expect("TCP_NODELAY");
            let answer = hyper::service::service_fn(|request: hyper::Request<hyper::body::Incoming>| async move {
                let body = request.into_body().collect().await?.to_bytes();
                let id = serde_json::from_slice::<Value>(&body).ok().and_then(|m| m.get("id").cloned());
                let result = json!({"jsonrpc": "2.0", "id": id, "result": canned_result()});
                Ok::<_, hyper::Error>(
                    hyper::Response::builder()
                        .header("content-type", "application/json")
                        .header("mcp-session-id", "floor")
                        .body(http_body_util::Full::new(hyper::body::Bytes::from(result.to_string())))
                        .expect("response"),
                )
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), answer),
            );
        }
    });
}

/// The floor of stdio on this machine: a process that reads a line, finds
/// its `id`, and writes a canned answer (a `tools/call` result, or one tool
/// for `tools/list`), with no runtime, no MCP, no plugin and no checks.
/// Notifications get nothing. It runs until its input ends.
fn stdio_floor_server() {
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut output = std::io::stdout().lock();
    let mut line = String::new();
    loop {
        line.clear();
        if input.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let Ok(message) = serde_json::from_str::<Value>(&line) else { continue };
        let Some(id) = message.get("id") else { continue };
        let result = if message["method"] == "tools/list" {
            json!({"tools": [{"name": "add", "inputSchema": {"type": "object"}}]})
        } else {
            canned_result()
        };
        let mut answer = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string().into_bytes();
        answer.push(b'\n');
        if output.write_all(&answer).and_then(|()| output.flush()).is_err() {
            return;
        }
    }
}

fn http() {
    let (server, url) =
        toolhost_tests::spawn_serve_http(&[&toolhost_tests::example("calculator").display().to_string()], &[]);
    drive_http("http", server, &url);
    let mut floor = Command::new(std::env::current_exe().expect("this bench"))
        .arg("--floor-server")
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the floor server");
    let mut address = String::new();
    BufReader::new(floor.stdout.take().expect("stdout")).read_line(&mut address).expect("its address");
    drive_http("http-floor", floor, &format!("http://{}/mcp", address.trim()));
}

/// The HTTP parts against `server` at `url`, each line named `label/...`.
fn drive_http(label: &str, mut server: Child, url: &str) {
    let addr = address_of(url);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("client runtime");

    for (stateless, sessions) in [(false, 1), (false, CONCURRENCY), (true, 1), (true, CONCURRENCY)] {
        let mut open: Vec<Session> = runtime.block_on(async {
            let mut open = Vec::with_capacity(sessions);
            for _ in 0..sessions {
                open.push(Session::open(addr, stateless).await);
            }
            open
        });
        for (calls, measured) in [(CALLS / 10, false), (CALLS, true)] {
            let cpu_before = cpu_seconds(server.id());
            let client_before = cpu_seconds(std::process::id());
            let started = Instant::now();
            let (sessions_back, latencies) =
                runtime.block_on(run_sessions(std::mem::take(&mut open), calls / sessions, None));
            let elapsed = started.elapsed();
            open = sessions_back;
            if measured {
                let cpu = cpu_seconds(server.id()).zip(cpu_before).map(|(after, before)| after - before);
                let client = cpu_seconds(std::process::id()).zip(client_before).map(|(after, before)| after - before);
                let who = match (stateless, sessions) {
                    (false, 1) => format!("{label}/1 session"),
                    (false, n) => format!("{label}/{n} sessions"),
                    (true, 1) => format!("{label}/1 client {STATELESS}"),
                    (true, n) => format!("{label}/{n} clients {STATELESS}"),
                };
                report(&who, latencies, elapsed, cpu);
                if let Some(client) = client {
                    println!("{:<28} client CPU {:>6.1} µs/call", "", client * 1e6 / calls as f64);
                }
            }
        }
    }
    let _ = server.kill();
    let _ = server.wait();
}

/// Sessions held open by `idle_sessions`.
const IDLE_SESSIONS: usize = 1_000;

/// How long `idle_sessions` lets a session idle before it is parked: long
/// enough to open them all and read the server's idle CPU before the
/// first is.
const IDLE_PARK_SECONDS: u64 = 20;

/// What an idle session costs `serve --http`: resident memory per session
/// and CPU while idle (see the module's doc).
fn idle_sessions() {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let config = dir.path().join("toolsets.json");
    let document = json!({
        "schema": "https://schema.cjson.dev/0/toolsets/cjson-toolsets-0.1.0-SNAPSHOT.schema.json",
        "toolsets": [{"id": "calc", "kind": "uri",
                      "server": {"url": toolhost_tests::example("calculator").display().to_string()}}],
        "serve": {"limits": {"sessions": 2 * IDLE_SESSIONS + 1, "sessionsPerClient": 2 * IDLE_SESSIONS + 1,
                             "sessionParkSeconds": IDLE_PARK_SECONDS}},
    });
    std::fs::write(&config, document.to_string()).expect("write the toolsets file");
    let (mut server, url) = toolhost_tests::spawn_serve_http(&["--config", &config.display().to_string()], &[]);
    let addr = address_of(&url).to_owned();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("client runtime");
    let open = |count: usize| {
        runtime.block_on(async {
            for _ in 0..count {
                // The connection closes when the client is dropped; the
                // session stays until deleted or idle for 5 minutes.
                drop(Session::open(&addr, false).await);
            }
        })
    };
    let idle_cpu = || {
        let before = Usage::of(server.id());
        std::thread::sleep(Duration::from_secs(10));
        Usage::of(server.id()).since(&before).cpu_ns as f64 / 10.0 / 1e3
    };
    // One first: whatever a first session makes once is not counted.
    open(1);
    std::thread::sleep(Duration::from_millis(500));
    let rss_before = rss_kib(server.id()).unwrap_or(0);
    let cpu_none = idle_cpu();
    open(IDLE_SESSIONS);
    std::thread::sleep(Duration::from_millis(500));
    let rss_after = rss_kib(server.id()).unwrap_or(0);
    let cpu_all = idle_cpu();
    println!(
        "{:<28} {IDLE_SESSIONS} idle sessions: {:.1} KiB resident each ({:.1} MiB before, {:.1} after); \
         idle CPU {cpu_none:.1} µs/s with none, {cpu_all:.1} µs/s with them",
        "http/idle-sessions",
        rss_after.saturating_sub(rss_before) as f64 / IDLE_SESSIONS as f64,
        rss_before as f64 / 1024.0,
        rss_after as f64 / 1024.0,
    );
    // Parked once idle for the park period, swept at most a third of it
    // later. What they held stays with the allocator (their records sit on
    // its pages among others'), so the cost of a parked session is read
    // from a second thousand, opened and parked once the first have been.
    let parked = || std::thread::sleep(Duration::from_secs(IDLE_PARK_SECONDS * 2));
    parked();
    let rss_first = rss_kib(server.id()).unwrap_or(0);
    open(IDLE_SESSIONS);
    parked();
    let rss_second = rss_kib(server.id()).unwrap_or(0);
    let cpu_parked = idle_cpu();
    println!(
        "{:<28} {IDLE_SESSIONS} more, parked: {:.1} KiB resident each ({:.1} MiB with the first parked, {:.1} with \
         both); idle CPU {cpu_parked:.1} µs/s with {} parked",
        "http/parked-sessions",
        rss_second.saturating_sub(rss_first) as f64 / IDLE_SESSIONS as f64,
        rss_first as f64 / 1024.0,
        rss_second as f64 / 1024.0,
        2 * IDLE_SESSIONS,
    );
    let _ = server.kill();
    let _ = server.wait();
}

/// CPU time and context switches of a process, in all, and by thread name,
/// from `/proc/PID/task/*/{comm,schedstat,status}` (Linux): CPU in
/// nanoseconds, where `/proc/PID/stat` counts 10 ms ticks.
#[derive(Default)]
struct Usage {
    cpu_ns: u64,
    switches: u64,
    by_thread: std::collections::BTreeMap<String, (u64, u64)>,
}

impl Usage {
    fn of(pid: u32) -> Usage {
        let mut usage = Usage::default();
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return usage };
        for task in tasks.flatten() {
            let path = task.path();
            let read = |file: &str| std::fs::read_to_string(path.join(file)).unwrap_or_default();
            let cpu_ns: u64 = read("schedstat").split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or(0);
            let switches: u64 = read("status")
                .lines()
                .filter(|l| l.contains("ctxt_switches:"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum();
            // Numbered threads of one kind (tokio's workers) count as one.
            let name = read("comm").trim().trim_end_matches(|c: char| c.is_ascii_digit() || c == '-').to_owned();
            usage.cpu_ns += cpu_ns;
            usage.switches += switches;
            let entry = usage.by_thread.entry(name).or_default();
            entry.0 += cpu_ns;
            entry.1 += switches;
        }
        usage
    }

    /// What was used since `before` (threads gone since are not counted).
    fn since(&self, before: &Usage) -> Usage {
        let mut used = Usage {
            cpu_ns: self.cpu_ns.saturating_sub(before.cpu_ns),
            switches: self.switches.saturating_sub(before.switches),
            by_thread: Default::default(),
        };
        for (name, (cpu, switches)) in &self.by_thread {
            let (cpu_before, switches_before) = before.by_thread.get(name).copied().unwrap_or_default();
            used.by_thread
                .insert(name.clone(), (cpu.saturating_sub(cpu_before), switches.saturating_sub(switches_before)));
        }
        used
    }
}

/// A server for the paced part: `toolhost serve --http` of the calculator
/// (this build's, or the one `FRONT_DOOR_BASELINE` names), or the floor.
struct PacedServer {
    label: String,
    child: Child,
    addr: String,
    floor: bool,
}

impl PacedServer {
    fn toolhost(label: &str, binary: &std::path::Path) -> PacedServer {
        let calculator = toolhost_tests::example("calculator").display().to_string();
        let (child, url) = toolhost_tests::spawn_serve_http_of(binary, &[&calculator], &[]);
        PacedServer { label: label.to_owned(), child, addr: address_of(&url).to_owned(), floor: false }
    }

    fn floor() -> PacedServer {
        let mut child = Command::new(std::env::current_exe().expect("this bench"))
            .arg("--floor-server")
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the floor server");
        let mut address = String::new();
        BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut address).expect("its address");
        PacedServer { label: "http-floor".to_owned(), child, addr: address.trim().to_owned(), floor: true }
    }
}

impl Drop for PacedServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One paced line: `clients` kept-alive clients (tasks of one client
/// thread) calling `add` open-loop, together `rate` calls a second, each on
/// a fixed schedule (spread evenly among the clients), for `seconds` after
/// a warm-up of 2 s. (A client whose call is late, its previous one not
/// answered yet, sends it at once: the calls/s shows a server that falls
/// behind; latency counts from the send, as tokio's timer wakes the client
/// up to a millisecond after the due time.) Returns the server's CPU per call
/// (µs) and prints the line.
fn paced_line(
    runtime: &tokio::runtime::Runtime,
    server: &PacedServer,
    stateless: bool,
    rate: f64,
    clients: usize,
    seconds: f64,
    floor_cpu: Option<f64>,
) -> f64 {
    let interval = Duration::from_secs_f64(clients as f64 / rate);
    let mut open: Vec<Session> = runtime.block_on(async {
        let mut open = Vec::with_capacity(clients);
        for _ in 0..clients {
            open.push(Session::open(&server.addr, stateless).await);
        }
        open
    });
    let mut result = 0.0;
    for (span, measured) in [(2.0, false), (seconds, true)] {
        let per_client = ((span * rate) as usize / clients).max(1);
        let server_before = Usage::of(server.child.id());
        let client_before = Usage::of(std::process::id());
        let started = Instant::now();
        let (back, latencies) = runtime.block_on(async {
            let start = tokio::time::Instant::now();
            run_sessions(std::mem::take(&mut open), per_client, Some((start, interval))).await
        });
        let elapsed = started.elapsed();
        open = back;
        if !measured {
            continue;
        }
        let calls = latencies.len() as f64;
        let used = Usage::of(server.child.id()).since(&server_before);
        let client = Usage::of(std::process::id()).since(&client_before);
        let cpu = used.cpu_ns as f64 / 1e3 / calls;
        result = cpu;
        let who = match (server.floor, stateless) {
            (true, _) => server.label.clone(),
            (false, true) => format!("{}/direct {STATELESS}", server.label),
            (false, false) => format!("{}/session 2025-06-18", server.label),
        };
        report(&format!("paced {who}"), latencies, elapsed, Some(used.cpu_ns as f64 / 1e9));
        let ratio = floor_cpu.map(|floor| format!(" ({:.2}× the floor)", cpu / floor)).unwrap_or_default();
        let mut threads: Vec<_> = used.by_thread.iter().filter(|(_, (cpu, _))| *cpu > 0).collect();
        threads.sort_by_key(|(_, (cpu, _))| std::cmp::Reverse(*cpu));
        let threads: Vec<String> = threads
            .iter()
            .take(4)
            .map(|(name, (cpu, switches))| {
                format!("{name} {:.1} µs {:.2} sw", *cpu as f64 / 1e3 / calls, *switches as f64 / calls)
            })
            .collect();
        println!(
            "{:<28} server {cpu:.1} µs/call{ratio}, {:.2} switches/call [{}]; client CPU {:.1} µs/call",
            "",
            used.switches as f64 / calls,
            threads.join(", "),
            client.cpu_ns as f64 / 1e3 / calls,
        );
    }
    result
}

/// An official SDK's client, driving a paced line from its own process.
#[derive(Clone, Copy)]
enum Sdk {
    /// The TypeScript SDK's `Client`, as it comes (a session).
    TypeScript,
    /// The Python SDK's default `Client` (2026-07-28: no session).
    Python,
    /// The Python SDK's `ClientSession`, through `initialize` (a session).
    PythonSession,
}

impl Sdk {
    fn label(self) -> &'static str {
        match self {
            Sdk::TypeScript => "typescript-sdk",
            Sdk::Python => "python-sdk",
            Sdk::PythonSession => "python-sdk session",
        }
    }

    /// The command that runs its paced client (`paced.mjs` or `paced.py`).
    fn command(self) -> Command {
        match self {
            Sdk::TypeScript => {
                let mut command = Command::new("node");
                command.arg(toolhost_tests::mcp_node_script("paced.mjs"));
                command
            }
            Sdk::Python | Sdk::PythonSession => {
                let mut command = Command::new(toolhost_tests::mcp_python());
                let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/paced.py");
                command.arg(script).arg(if matches!(self, Sdk::Python) { "default" } else { "session" });
                command
            }
        }
    }
}

/// One paced line driven by an official SDK's client in its own process
/// (its CPU is not the server's): as [`paced_line`], the server's CPU read
/// around the span the client says it measures. Returns the server's CPU
/// per call (µs) and prints the line.
fn paced_sdk_line(server: &PacedServer, sdk: Sdk, rate: f64, clients: usize, seconds: f64, floor_cpu: f64) -> f64 {
    let url = format!("http://{}/mcp", server.addr);
    let mut child = sdk
        .command()
        .args([url, rate.to_string(), clients.to_string(), seconds.to_string(), "2".to_owned()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start the {} client: {e}", sdk.label()));
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut next = || lines.next().and_then(Result::ok).unwrap_or_else(|| panic!("the {} client ended", sdk.label()));
    assert_eq!(next().trim(), "measuring", "the {} client did not start measuring", sdk.label());
    let before = Usage::of(server.child.id());
    let report: Value = serde_json::from_str(&next()).expect("the client's report");
    let used = Usage::of(server.child.id()).since(&before);
    let status = child.wait().expect("the client's exit");
    assert!(status.success(), "the {} client failed", sdk.label());
    let calls = report["calls"].as_f64().expect("calls");
    let cpu = used.cpu_ns as f64 / 1e3 / calls;
    let who = format!("paced {}/{} {}", server.label, sdk.label(), report["protocol_version"].as_str().unwrap_or("?"));
    println!(
        "{who:<52} {:>8.0} calls/s  p50 {:>7.1} µs  p99 {:>7.1} µs  server {cpu:.1} µs/call ({:.2}× the floor), {:.2} switches/call",
        calls / report["elapsed_s"].as_f64().expect("elapsed_s"),
        report["p50_us"].as_f64().expect("p50_us"),
        report["p99_us"].as_f64().expect("p99_us"),
        cpu / floor_cpu,
        used.switches as f64 / calls,
    );
    cpu
}

/// The paced part: what a call costs at the rates clients drive, not
/// saturated. `FRONT_DOOR_RATE` calls/s (500) from `FRONT_DOOR_CLIENTS`
/// kept-alive clients (8) for `FRONT_DOOR_SECONDS` (20); per round, the
/// floor, then `serve --http` with the direct path (2026-07-28) and in
/// sessions (2025-06-18), and driven by the official SDKs' clients (the
/// TypeScript SDK's, the Python SDK's default and its session); then the
/// same with the `toolhost` binary that `FRONT_DOOR_BASELINE` names, if
/// set (the build before a change, run alternating with this one);
/// `FRONT_DOOR_ROUNDS` rounds (1).
fn paced() {
    let number = |name: &str, default: f64| {
        std::env::var(name).ok().and_then(|v| v.parse::<f64>().ok()).filter(|v| *v > 0.0).unwrap_or(default)
    };
    let rate = number("FRONT_DOOR_RATE", 500.0);
    let clients = number("FRONT_DOOR_CLIENTS", 8.0) as usize;
    let seconds = number("FRONT_DOOR_SECONDS", 20.0);
    let rounds = number("FRONT_DOOR_ROUNDS", 1.0) as usize;
    println!("paced: {rate} calls/s from {clients} clients, {seconds} s a line; server CPU from /proc, per call");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("client runtime");
    for _ in 0..rounds {
        let floor = PacedServer::floor();
        let floor_cpu = paced_line(&runtime, &floor, true, rate, clients, seconds, None);
        drop(floor);
        for (label, binary) in builds() {
            let server = PacedServer::toolhost(&label, &binary);
            for stateless in [true, false] {
                paced_line(&runtime, &server, stateless, rate, clients, seconds, Some(floor_cpu));
            }
            for sdk in [Sdk::TypeScript, Sdk::Python, Sdk::PythonSession] {
                paced_sdk_line(&server, sdk, rate, clients, seconds, floor_cpu);
            }
        }
    }
}

/// The `toolhost` builds a part compares, labelled: this one, and the one
/// `FRONT_DOOR_BASELINE` names (the build before a change), if set.
fn builds() -> Vec<(String, std::path::PathBuf)> {
    let mut builds = vec![("toolhost".to_owned(), toolhost_tests::toolhost())];
    if let Some(baseline) = std::env::var_os("FRONT_DOOR_BASELINE").filter(|b| !b.is_empty()) {
        builds.push(("baseline".to_owned(), std::path::PathBuf::from(baseline)));
    }
    builds
}

fn main() {
    if std::env::args().any(|a| a == "--floor-server") {
        return floor_server();
    }
    if std::env::args().any(|a| a == "--stdio-floor-server") {
        return stdio_floor_server();
    }
    // `cargo bench` passes `--bench`; a filter word picks one part.
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let wanted = |name: &str| filter.as_deref().is_none_or(|f| name.contains(f));
    println!("calculator.add, {CALLS} calls per line (after {} warm-up calls)", CALLS / 10);
    if wanted("in-process") {
        in_process();
    }
    if wanted("cold-start") {
        cold_start();
    }
    if wanted("stdio") {
        // With another server to compare, rounds alternate between the two
        // (`FRONT_DOOR_ROUNDS`, 1 if unset), each round both servers.
        let other = StdioServer::other();
        let rounds = std::env::var("FRONT_DOOR_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(1);
        for _ in 0..rounds {
            stdio(&StdioServer::toolhost());
            if let Some(other) = &other {
                stdio(other);
            }
            stdio(&StdioServer::floor());
        }
    }
    if wanted("http") {
        http();
    }
    if wanted("idle-sessions") {
        idle_sessions();
    }
    // Only when asked for: it runs at a fixed rate, so it takes its time.
    if filter.as_deref() == Some("paced") {
        paced();
    }
}
