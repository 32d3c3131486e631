//! Soak (`cargo bench -p toolhost-tests --bench soak [PART]`): long runs
//! that look for what leaks or gets lost only after many calls. Each part
//! checks every answer and fails (exit code 101) on a lost, wrong or
//! unexpected answer, or on growth past the warm-up:
//!
//! - `stdio`: `SOAK_CALLS` (1,000,000) `calculator.add` calls to
//!   `toolhost serve` on one session, 64 in flight.
//! - `http`: as many over `serve --http`, 8 clients at protocol
//!   2025-06-18, each ending its session (`DELETE`) and opening a new one
//!   every 10,000 calls.
//! - `faults`: `SOAK_FAULTS` (100,000) calls that fault, in turn a trap
//!   (`panic`), a timeout (`nap` past `--timeout 100ms`) and running out of
//!   memory (`hog` against `--memory-limit 16MiB`), 64 in flight on stdio
//!   and 16 running at once (`--pool-size 16`);
//!   each must be refused naming its fault, and `ok` must still answer.
//! - `reloads`: `SOAK_RELOADS` (10,000) reloads of a registry in process,
//!   alternating two configurations of one toolset (each a config value
//!   and a tool filter), while 4 callers call it without pause: no call
//!   may fail, and each answer must be one whole configuration's.
//!
//! - `overload`: `serve --http` with `serve.limits.calls` at 4; first 4
//!   clients, then 128, each calling `nap` (20 ms, waiting in a host call)
//!   again as soon as answered (10 ms after a `503`), for `SOAK_SECONDS`
//!   (30): every answer must be the result or a `503` with `Retry-After`,
//!   and the 4 must never be shed. Prints the answered calls' latency
//!   percentiles for both, what was shed, and the server's peak resident
//!   memory.
//!
//! Resident memory and open descriptors (of the server; of this process
//! for `reloads`) are sampled at each tenth of a run (over stdio, with no
//! call in flight). After the first
//! tenth (the warm-up), neither may grow past 5 % of its value then.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use serde_json::{Value, json};

/// Calls in flight on one stdio session.
const IN_FLIGHT: usize = 64;
/// HTTP clients.
const CLIENTS: usize = 8;
/// Calls of an HTTP client per session.
const CALLS_PER_SESSION: usize = 10_000;
/// The protocol the HTTP clients speak.
const PROTOCOL: &str = "2025-06-18";

fn count(variable: &str, default: usize) -> usize {
    std::env::var(variable).ok().and_then(|v| v.replace('_', "").parse().ok()).unwrap_or(default)
}

/// A process's resident memory (KiB) and open descriptors, from `/proc`.
fn footprint(pid: u32) -> (u64, usize) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .expect("VmRSS");
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).expect("/proc/PID/fd").count();
    (rss, fds)
}

/// The footprint of a process at each tenth of a run, and the check that
/// nothing grew past the warm-up.
struct Samples {
    part: &'static str,
    pid: u32,
    total: usize,
    taken: Vec<(usize, u64, usize)>,
    started: Instant,
}

impl Samples {
    fn new(part: &'static str, pid: u32, total: usize) -> Samples {
        Samples { part, pid, total, taken: Vec::new(), started: Instant::now() }
    }

    /// Sample when `done` reaches the next tenth.
    fn at(&mut self, done: usize) {
        let tenth = self.total.div_ceil(10).max(1);
        if done.is_multiple_of(tenth) || done == self.total {
            let (rss, fds) = footprint(self.pid);
            self.taken.push((done, rss, fds));
        }
    }

    /// Print the samples; panic if resident memory or descriptors grew
    /// more than 5 % after the first tenth.
    fn finish(self) {
        let elapsed = self.started.elapsed();
        let line: Vec<String> =
            self.taken.iter().map(|(_, rss, fds)| format!("{:.1}/{fds}", *rss as f64 / 1024.0)).collect();
        println!(
            "{}: {} in {:.1} s; MiB/fds at each tenth: {}",
            self.part,
            self.total,
            elapsed.as_secs_f64(),
            line.join(" ")
        );
        let Some(&(_, rss0, fds0)) = self.taken.first() else { return };
        let (_, rss1, fds1) = *self.taken.last().expect("a sample");
        let grew = |after: f64, before: f64| (after - before) / before * 100.0;
        println!(
            "{}: after warm-up, resident memory {:+.2} % ({:.1} → {:.1} MiB), descriptors {fds0} → {fds1}",
            self.part,
            grew(rss1 as f64, rss0 as f64),
            rss0 as f64 / 1024.0,
            rss1 as f64 / 1024.0,
        );
        for &(done, rss, fds) in &self.taken {
            assert!(
                rss as f64 <= rss0 as f64 * 1.05 && fds as f64 <= fds0 as f64 * 1.05,
                "{}: after {done} calls, {rss} KiB and {fds} descriptors, past 5 % over the warm-up's {rss0} KiB and {fds0}",
                self.part
            );
        }
    }
}

/// `toolhost serve ARGS` on pipes, past its handshake.
fn serve_stdio(args: &[&str]) -> (Child, ChildStdin, BufReader<ChildStdout>) {
    let mut child = Command::new(toolhost_tests::toolhost())
        .arg("serve")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start toolhost serve");
    let mut input = child.stdin.take().expect("stdin");
    let mut output = BufReader::new(child.stdout.take().expect("stdout"));
    let hello = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "soak", "version": "0"}}});
    writeln!(input, "{hello}").expect("write");
    let mut line = String::new();
    output.read_line(&mut line).expect("the answer to initialize");
    writeln!(input, "{}", json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).expect("write");
    (child, input, output)
}

/// Drive `total` calls through one stdio session, `IN_FLIGHT` at a time:
/// `call(n)` is the n-th request (id n + 1), `check(n, answer)` judges its
/// answer. Samples the server as it goes.
fn pipeline(
    part: &'static str,
    args: &[&str],
    total: usize,
    call: impl Fn(usize) -> Value + Send + 'static,
    check: impl Fn(usize, &Value),
) -> (Child, ChildStdin, BufReader<ChildStdout>) {
    let (child, input, mut output) = serve_stdio(args);
    let mut samples = Samples::new(part, child.id(), total);
    let (slots, slot) = std::sync::mpsc::sync_channel::<()>(IN_FLIGHT);
    for _ in 0..IN_FLIGHT {
        slots.send(()).expect("slot");
    }
    // At each tenth the writer waits until every call so far is answered,
    // so that the sample sees the server at rest, not calls in flight
    // (a plugin that grows its memory to its limit, say).
    let tenth = total.div_ceil(10).max(1);
    let (drained, wait) = std::sync::mpsc::sync_channel::<()>(1);
    let writer = std::thread::spawn(move || {
        let mut input = input;
        for n in 0..total {
            slot.recv().expect("slot");
            writeln!(input, "{}", call(n)).expect("write a call");
            if (n + 1).is_multiple_of(tenth) && n + 1 < total {
                input.flush().expect("flush");
                wait.recv().expect("drained");
            }
        }
        input.flush().expect("flush");
        input
    });
    let mut answered = vec![false; total];
    let mut line = String::new();
    for done in 1..=total {
        let answer = loop {
            line.clear();
            assert!(output.read_line(&mut line).expect("read") > 0, "{part}: the server closed its output");
            let message: Value = serde_json::from_str(&line).expect("a JSON line");
            if message.get("method").is_none() {
                break message;
            }
        };
        let n = answer["id"].as_u64().and_then(|id| id.checked_sub(1)).expect("an answer to a call") as usize;
        assert!(!std::mem::replace(&mut answered[n], true), "{part}: call {n} answered twice");
        check(n, &answer);
        samples.at(done);
        if done.is_multiple_of(tenth) && done < total {
            drained.send(()).expect("the writer waits");
        }
        let _ = slots.send(());
    }
    let input = writer.join().expect("writer");
    samples.finish();
    (child, input, output)
}

fn add(n: usize) -> Value {
    json!({"jsonrpc": "2.0", "id": n + 1, "method": "tools/call",
        "params": {"name": "add", "arguments": {"a": n as f64, "b": 1.0}}})
}

fn check_sum(n: usize, answer: &Value) {
    assert_eq!(answer["result"]["structuredContent"]["result"], json!(n as f64 + 1.0), "call {n}: {answer}");
}

fn stdio() {
    let calculator = toolhost_tests::example("calculator").display().to_string();
    let (mut child, input, _) = pipeline("stdio", &[&calculator], count("SOAK_CALLS", 1_000_000), add, check_sum);
    drop(input);
    let _ = child.kill();
    let _ = child.wait();
}

/// One HTTP client's session: POSTs with its session id, answers read
/// whether the server sends JSON or an SSE stream.
struct Session {
    agent: ureq::Agent,
    url: String,
    id: String,
}

impl Session {
    fn open(url: &str) -> Session {
        let agent: ureq::Agent = ureq::Agent::config_builder().build().into();
        let hello = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "soak", "version": "0"}}});
        let mut response = agent
            .post(url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .send(hello.to_string())
            .expect("initialize");
        let id = response.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).expect("a session id");
        let mut session = Session { agent: agent.clone(), url: url.to_owned(), id: id.to_owned() };
        let _ = response.body_mut().read_to_string();
        session.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        session
    }

    fn post(&mut self, message: &Value) -> Option<Value> {
        let mut response = self
            .agent
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-session-id", &self.id)
            .header("mcp-protocol-version", PROTOCOL)
            .send(message.to_string())
            .expect("POST");
        let body = response.body_mut().read_to_string().expect("body");
        // An event stream's answer is its last `data:` line.
        let json = body.lines().filter_map(|l| l.strip_prefix("data:")).next_back().unwrap_or(&body).trim();
        serde_json::from_str(json).ok()
    }

    fn close(self) {
        self.agent.delete(&self.url).header("mcp-session-id", &self.id).call().expect("DELETE the session");
    }
}

fn http() {
    let total = count("SOAK_CALLS", 1_000_000);
    let calculator = toolhost_tests::example("calculator").display().to_string();
    let (mut server, url) = toolhost_tests::spawn_serve_http(&[&calculator], &[]);
    let samples = Arc::new(std::sync::Mutex::new(Samples::new("http", server.id(), total)));
    let done = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (url, samples, done) = (url.clone(), Arc::clone(&samples), Arc::clone(&done));
            std::thread::spawn(move || {
                let mut session = Session::open(&url);
                for n in (c..total).step_by(CLIENTS) {
                    let answer = session.post(&add(n)).unwrap_or_else(|| panic!("call {n}: no JSON answer"));
                    check_sum(n, &answer);
                    let finished = done.fetch_add(1, Ordering::Relaxed) as usize + 1;
                    samples.lock().unwrap().at(finished);
                    if (n / CLIENTS + 1).is_multiple_of(CALLS_PER_SESSION) {
                        session.close();
                        session = Session::open(&url);
                    }
                }
                session.close();
            })
        })
        .collect();
    for client in clients {
        client.join().expect("an HTTP client");
    }
    Arc::into_inner(samples).expect("the samples").into_inner().unwrap().finish();
    let _ = server.kill();
    let _ = server.wait();
}

/// The faults, in turn: the tool, its arguments, the words its refusal may
/// name (out of memory may also run out of time first on a busy machine).
const FAULTS: [(&str, &str, &[&str]); 3] = [
    ("panic", "{}", &["trapped"]),
    ("nap", r#"{"ms": 60000}"#, &["timed out"]),
    ("hog", "{}", &["memory", "timed out"]),
];

fn faults() {
    let plugin = toolhost_tests::fixture("faults").display().to_string();
    let args = [plugin.as_str(), "--timeout", "100ms", "--memory-limit", "16MiB", "--pool-size", "16"];
    let call = |n: usize| {
        let (tool, arguments, _) = FAULTS[n % FAULTS.len()];
        let arguments: Value = serde_json::from_str(arguments).expect("arguments");
        json!({"jsonrpc": "2.0", "id": n + 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}})
    };
    let seen: [AtomicU64; 3] = Default::default();
    let check = |n: usize, answer: &Value| {
        let (tool, _, words) = FAULTS[n % FAULTS.len()];
        let text = answer.to_string();
        let refused = answer["result"]["isError"] == json!(true) || answer.get("error").is_some();
        let word = words.iter().position(|w| text.contains(w));
        assert!(refused && word.is_some(), "{tool} (call {n}) was not refused naming one of {words:?}: {answer}");
        if tool == "hog" {
            seen[word.unwrap_or(0)].fetch_add(1, Ordering::Relaxed);
        }
    };
    let (mut child, mut input, mut output) = pipeline("faults", &args, count("SOAK_FAULTS", 100_000), call, check);
    println!(
        "faults: `hog` stopped by its memory limit {} times, by its deadline first {} times",
        seen[0].load(Ordering::Relaxed),
        seen[1].load(Ordering::Relaxed)
    );
    let ok = json!({"jsonrpc": "2.0", "id": 0, "method": "tools/call", "params": {"name": "ok", "arguments": {}}});
    writeln!(input, "{ok}").expect("write");
    let mut line = String::new();
    output.read_line(&mut line).expect("the answer to ok");
    assert!(line.contains("fine"), "after the faults, ok answered {line}");
    drop(input);
    let _ = child.kill();
    let _ = child.wait();
}

/// Configuration `which` (0 or 1) of the reloaded toolset: the config value
/// `side` is `A` or `B`, and the filter lets through `config_value` and
/// `ok` (A) or `config_value` and `counter` (B).
fn configuration(which: usize, plugin: &str) -> Value {
    let (side, other) = [("A", "ok"), ("B", "counter")][which];
    json!({"schema": "soak", "toolsets": [{"id": "f", "kind": "uri",
        "server": {"url": plugin, "config": {"side": side}},
        "extensions": {"includeTools": {"operator": "OPERATOR_OR", "filters": [
            {"attribute": "ATTRIBUTE_NAME", "matcher": {"exact": "config_value"}},
            {"attribute": "ATTRIBUTE_NAME", "matcher": {"exact": other}}]}}}]})
}

fn reloads() {
    use toolhost::{ApproveAll, ModuleCache, NoSecrets, Registry, Runtime, parse_toolsets};
    let total = count("SOAK_RELOADS", 10_000);
    let plugin = toolhost_tests::fixture("faults").display().to_string();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    runtime.block_on(async {
        let path = std::path::Path::new("soak.json");
        let mut files = Vec::new();
        for which in 0..2 {
            let file = parse_toolsets(path, &configuration(which, &plugin), &NoSecrets).await.expect("toolsets");
            files.push(file.toolsets);
        }
        // With a compiled-module cache, as `serve` has: a reload maps the
        // plugin's code instead of compiling it again.
        let cache = std::env::temp_dir().join(format!("toolhost-soak-cache-{}", std::process::id()));
        let runtime = Runtime::builder().with_module_cache(ModuleCache::at(&cache)).build();
        let registry = Arc::new(Registry::with_runtime(runtime, Arc::new(NoSecrets)));
        let report = registry.sync(files[0].clone()).await;
        assert!(report.failures.is_empty(), "{:?}", report.failures);
        assert_eq!(registry.tools().len(), 2, "the first configuration's two tools");
        let stop = Arc::new(AtomicBool::new(false));
        let calls = Arc::new(AtomicU64::new(0));
        let callers: Vec<_> = (0..4)
            .map(|_| {
                let (registry, stop, calls) = (Arc::clone(&registry), Arc::clone(&stop), Arc::clone(&calls));
                tokio::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        let result = registry
                            .call_tool("f__config_value", json!({"name": "side"}), &ApproveAll)
                            .await
                            .unwrap_or_else(|e| panic!("a call during the reloads failed: {e}"));
                        let text = serde_json::to_value(&result).expect("result")["content"][0]["text"].clone();
                        assert!(text == json!("A") || text == json!("B"), "answered {text}");
                        calls.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        let mut samples = Samples::new("reloads", std::process::id(), total);
        for n in 1..=total {
            let which = n % 2;
            let report = registry.sync(files[which].clone()).await;
            assert!(report.failures.is_empty(), "reload {n}: {:?}", report.failures);
            // The listing is one configuration's, whole.
            let mut names: Vec<String> = registry.tools().into_iter().map(|t| t.name).collect();
            names.sort();
            let expected = [["f__config_value", "f__ok"], ["f__config_value", "f__counter"]][which];
            assert_eq!(names, expected, "after reload {n}");
            samples.at(n);
        }
        stop.store(true, Ordering::Relaxed);
        for caller in callers {
            caller.await.expect("a caller");
        }
        samples.finish();
        println!("reloads: {} calls answered during the reloads, none failed", calls.load(Ordering::Relaxed));
        let _ = std::fs::remove_dir_all(&cache);
    });
}

/// Clients of the overload part's flood.
const FLOOD: usize = 128;
/// Calls running at once that `serve` admits in the overload part (the
/// plugin's pool holds as many instances as the machine has cores; calls
/// past that wait for one, within the cap).
const ADMITTED: usize = 4;
/// How long a flooding client waits after a `503` before it tries again:
/// less than the `Retry-After` it was given, as an impatient client does.
const IMPATIENCE: std::time::Duration = std::time::Duration::from_millis(10);

/// `clients` clients calling `nap` (20 ms) on `url` until `until`: the
/// latencies of the answered calls, and how many were shed.
fn flood(url: &str, clients: usize, until: Instant) -> (Vec<std::time::Duration>, usize) {
    let threads: Vec<_> = (0..clients)
        .map(|c| {
            let url = url.to_owned();
            std::thread::spawn(move || {
                let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
                let (mut admitted, mut shed) = (Vec::new(), 0usize);
                let mut n = 0;
                while Instant::now() < until {
                    n += 1;
                    let call = json!({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {
                        "name": "f__nap", "arguments": {"ms": 20},
                        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                            "io.modelcontextprotocol/clientCapabilities": {},
                            "io.modelcontextprotocol/clientInfo": {"name": "soak", "version": "0"}}}});
                    let started = Instant::now();
                    let mut response = agent
                        .post(&url)
                        .header("accept", "application/json, text/event-stream")
                        .header("content-type", "application/json")
                        .header("mcp-protocol-version", "2026-07-28")
                        .header("mcp-method", "tools/call")
                        .header("mcp-name", "f__nap")
                        .send(call.to_string())
                        .expect("POST");
                    let status = response.status().as_u16();
                    let body = response.body_mut().read_to_string().unwrap_or_default();
                    match status {
                        200 => {
                            assert!(body.contains("rested"), "client {c}: {body}");
                            admitted.push(started.elapsed());
                        }
                        503 => {
                            assert!(
                                response.headers().contains_key("retry-after"),
                                "client {c}: 503 without Retry-After"
                            );
                            shed += 1;
                            std::thread::sleep(IMPATIENCE);
                        }
                        other => panic!("client {c}: HTTP {other}: {body}"),
                    }
                }
                (admitted, shed)
            })
        })
        .collect();
    let (mut admitted, mut shed) = (Vec::new(), 0);
    for thread in threads {
        let (calls, refused) = thread.join().expect("a client");
        admitted.extend(calls);
        shed += refused;
    }
    admitted.sort();
    (admitted, shed)
}

fn overload() {
    let seconds = count("SOAK_SECONDS", 30) as u64;
    let dir = std::env::temp_dir().join(format!("toolhost-soak-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let file = dir.join("overload.json");
    let plugin = toolhost_tests::fixture("faults").display().to_string();
    let document = json!({"schema": "soak", "serve": {"limits": {"calls": ADMITTED}},
        "toolsets": [{"id": "f", "kind": "uri", "server": {"url": plugin}}]});
    std::fs::write(&file, document.to_string()).expect("write the toolsets file");
    let (mut server, url) = toolhost_tests::spawn_serve_http(&["--config", &file.display().to_string()], &[]);
    let pid = server.id();
    let idle = footprint(pid).0;
    let percentiles = |calls: &[std::time::Duration]| {
        let at = |q: f64| calls[((calls.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
        format!("p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms", at(0.5), at(0.99), at(1.0))
    };
    // Within the cap first: as many clients as calls admitted.
    let (calm, shed) = flood(&url, ADMITTED, Instant::now() + std::time::Duration::from_secs(seconds.div_ceil(3)));
    assert_eq!(shed, 0, "{ADMITTED} clients are within the cap of {ADMITTED} calls");
    println!(
        "overload: {ADMITTED} clients (the cap): {} answered, {} (the tool takes 20 ms)",
        calm.len(),
        percentiles(&calm)
    );
    let until = Instant::now() + std::time::Duration::from_secs(seconds);
    let mut peak = idle;
    let (admitted, shed) = std::thread::scope(|scope| {
        let flooding = scope.spawn(|| flood(&url, FLOOD, until));
        while !flooding.is_finished() {
            peak = peak.max(footprint(pid).0);
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        flooding.join().expect("the flood")
    });
    println!(
        "overload: {FLOOD} clients, {ADMITTED} calls admitted at once, {seconds} s: {} answered ({:.0}/s), {shed} shed with 503 (each client waiting {} ms before trying again)",
        admitted.len(),
        admitted.len() as f64 / seconds as f64,
        IMPATIENCE.as_millis(),
    );
    println!(
        "overload: admitted calls {}; server resident memory idle {:.1} MiB, peak {:.1} MiB",
        percentiles(&admitted),
        idle as f64 / 1024.0,
        peak as f64 / 1024.0,
    );
    let _ = server.kill();
    let _ = server.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

fn main() {
    // `cargo bench` passes `--bench`; a word picks one part.
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let wanted = |name: &str| filter.as_deref().is_none_or(|f| name.contains(f));
    for (name, part) in
        [("stdio", stdio as fn()), ("http", http), ("faults", faults), ("reloads", reloads), ("overload", overload)]
    {
        if wanted(name) {
            part();
        }
    }
}
