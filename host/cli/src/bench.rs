//! `toolhost bench`: a load generator for plugin authors. Calls one tool
//! many times from concurrent callers through the validating host, and
//! reports throughput and latency percentiles.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use toolhost::Plugin;

use crate::args::{PluginOptions, SecretOptions, default_pool_size};
use crate::call::read_arguments;
use crate::exit::{Failure, usage};
use crate::output::print_json;
use crate::terminal::escaped;
use crate::{bench, exit};

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use serde::Serialize;

/// What one run measured.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BenchReport {
    /// The plugin's name.
    pub plugin: String,
    /// The tool called.
    pub tool: String,
    /// Calls made (after warm-up).
    pub calls: usize,
    /// Concurrent callers.
    pub concurrency: usize,
    /// Wall-clock time of all calls, in seconds.
    pub seconds: f64,
    /// Calls per second.
    pub calls_per_second: f64,
    /// Latency percentiles and extremes, in microseconds.
    pub latency_us: Latency,
    /// Calls that answered with `isError: true`.
    pub tool_errors: usize,
    /// Calls that failed (the host's typed errors).
    pub failures: usize,
    /// The first failure's message, if any.
    pub first_failure: Option<String>,
    /// Time to load the plugin (read, compile or cache load, `describe`,
    /// validation), in seconds.
    pub load_seconds: f64,
    /// How the compiled module was obtained: `hit`, `miss`, `rebuilt` or
    /// `disabled`.
    pub module_cache: String,
    /// The compiler whose code the load started on: `baseline` (a cache
    /// miss, Cranelift compiling in the background) or `optimized`.
    pub load_tier: String,
    /// From the start of the load until the plugin ran Cranelift's code,
    /// in seconds (the load's own time when it started there). The calls
    /// are measured after it, on Cranelift's code.
    pub optimized_seconds: f64,
    /// Idle pooled instances after the run.
    pub idle_instances: usize,
    /// Memory each idle instance holds against its limit (linear memory and
    /// Extism kernel memory), in bytes, on average.
    pub instance_memory_bytes: u64,
}

/// Latency figures, in microseconds.
#[derive(Debug, Serialize)]
pub struct Latency {
    /// Fastest call.
    pub min: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Slowest call.
    pub max: f64,
    /// Mean.
    pub mean: f64,
}

/// Calls a caller claims at a time.
const CLAIM: usize = 32;

/// Per-caller tallies (the latencies go in one table the callers share).
#[derive(Default)]
struct Tally {
    tool_errors: usize,
    failures: usize,
    first_failure: Option<String>,
}

/// Call `tool` `calls` times from `concurrency` callers. Before timing, each
/// caller makes one call, so the pool holds ready instances and the plugin's
/// own first-call costs are not counted.
pub async fn run(plugin: Arc<Plugin>, tool: &str, arguments: Value, calls: usize, concurrency: usize) -> BenchReport {
    let warm: Vec<_> = (0..concurrency)
        .map(|_| {
            let plugin = Arc::clone(&plugin);
            let (tool, arguments) = (tool.to_owned(), arguments.clone());
            tokio::spawn(async move { plugin.call_tool(&tool, arguments).await })
        })
        .collect();
    for task in warm {
        let _ = task.await;
    }

    let next = Arc::new(AtomicUsize::new(0));
    // Each call's latency, in nanoseconds, in the slot of its number: made
    // whole before timing, so that no caller grows (copies, faults in) a
    // list of its own while it measures (a faster caller takes more calls
    // than its share, and a list sized for the share grew mid-run).
    let latencies: Arc<[AtomicU64]> = (0..calls).map(|_| AtomicU64::new(0)).collect();
    let started = Instant::now();
    let callers: Vec<_> = (0..concurrency)
        .map(|_| {
            let caller = Caller {
                plugin: Arc::clone(&plugin),
                tool: tool.to_owned(),
                arguments: arguments.clone(),
                next: Arc::clone(&next),
                latencies: Arc::clone(&latencies),
            };
            tokio::spawn(caller.run())
        })
        .collect();
    let mut all = Tally::default();
    for caller in callers {
        if let Ok(tally) = caller.await {
            all.tool_errors += tally.tool_errors;
            all.failures += tally.failures;
            if all.first_failure.is_none() {
                all.first_failure = tally.first_failure;
            }
        }
    }
    let elapsed = started.elapsed();
    // (Empty slots are calls a caller that panicked did not make.)
    let mut latencies: Vec<Duration> = latencies
        .iter()
        .map(|nanos| nanos.load(Ordering::Relaxed))
        .filter(|&n| n > 0)
        .map(Duration::from_nanos)
        .collect();
    latencies.sort_unstable();
    let stats = plugin.pool_stats();
    let count = latencies.len();
    BenchReport {
        plugin: plugin.name().to_owned(),
        tool: tool.to_owned(),
        calls: count,
        concurrency,
        seconds: elapsed.as_secs_f64(),
        calls_per_second: count as f64 / elapsed.as_secs_f64().max(f64::MIN_POSITIVE),
        latency_us: Latency::of_sorted(&latencies),
        tool_errors: all.tool_errors,
        failures: all.failures,
        first_failure: all.first_failure,
        load_seconds: 0.0,
        module_cache: plugin.compile_info().cache.to_string(),
        load_tier: plugin.compile_info().tier.to_string(),
        optimized_seconds: 0.0,
        idle_instances: stats.idle,
        instance_memory_bytes: (stats.idle_memory_bytes / stats.idle.max(1)) as u64,
    }
}

/// One of the bench's concurrent callers.
struct Caller {
    plugin: Arc<Plugin>,
    tool: String,
    arguments: Value,
    /// The number of the next call to claim, shared by all callers.
    next: Arc<AtomicUsize>,
    /// Each call's latency, in nanoseconds, by its number.
    latencies: Arc<[AtomicU64]>,
}

impl Caller {
    /// Claim and make calls until all are claimed, recording each latency.
    async fn run(self) -> Tally {
        let calls = self.latencies.len();
        let mut tally = Tally::default();
        // Callers claim calls in small batches: a faster caller takes more,
        // and the shared counter is not written on every call.
        loop {
            let first = self.next.fetch_add(CLAIM, Ordering::Relaxed);
            if first >= calls {
                break;
            }
            for number in first..(first + CLAIM).min(calls) {
                let call_started = Instant::now();
                let outcome = self.plugin.call_tool(&self.tool, self.arguments.clone()).await;
                // (At least 1: an empty slot is a call not made.)
                let nanos = u64::try_from(call_started.elapsed().as_nanos()).unwrap_or(u64::MAX).max(1);
                self.latencies[number].store(nanos, Ordering::Relaxed);
                match outcome {
                    Ok(result) if result.is_error() => tally.tool_errors += 1,
                    Ok(_) => {}
                    Err(error) => {
                        tally.failures += 1;
                        tally.first_failure.get_or_insert_with(|| error.to_string());
                    }
                }
            }
        }
        tally
    }
}

impl Latency {
    /// The figures of latencies sorted from fastest to slowest.
    fn of_sorted(latencies: &[Duration]) -> Latency {
        let micros = |d: Duration| d.as_secs_f64() * 1e6;
        let percentile = |p: f64| -> f64 {
            if latencies.is_empty() {
                return 0.0;
            }
            let rank = ((p / 100.0) * latencies.len() as f64).ceil() as usize;
            micros(latencies[rank.clamp(1, latencies.len()) - 1])
        };
        let total: Duration = latencies.iter().sum();
        let count = latencies.len();
        Latency {
            min: latencies.first().copied().map_or(0.0, micros),
            p50: percentile(50.0),
            p90: percentile(90.0),
            p99: percentile(99.0),
            max: latencies.last().copied().map_or(0.0, micros),
            mean: if count == 0 { 0.0 } else { micros(total) / count as f64 },
        }
    }
}

/// A duration in microseconds, in the unit that reads best.
pub fn human(micros: f64) -> String {
    if micros >= 1e6 {
        format!("{:.2} s", micros / 1e6)
    } else if micros >= 1e3 {
        format!("{:.2} ms", micros / 1e3)
    } else {
        format!("{micros:.1} µs")
    }
}

/// A byte count in the unit that reads best.
pub fn human_bytes(bytes: u64) -> String {
    let bytes = bytes as f64;
    if bytes >= (1u64 << 30) as f64 {
        format!("{:.1} GiB", bytes / (1u64 << 30) as f64)
    } else if bytes >= (1u64 << 20) as f64 {
        format!("{:.1} MiB", bytes / (1u64 << 20) as f64)
    } else if bytes >= 1024.0 {
        format!("{:.0} KiB", bytes / 1024.0)
    } else {
        format!("{bytes} B")
    }
}
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The plugin's .wasm file
    pub(crate) plugin: PathBuf,
    /// The tool to call
    pub(crate) tool: String,
    /// The arguments, a JSON object [default: {}]
    #[arg(value_name = "ARGS_JSON")]
    pub(crate) arguments: Option<String>,
    /// Calls to make, after a warm-up
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) calls: u32,
    /// Concurrent callers
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub(crate) concurrency: u16,
    /// Run in N processes at once
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub(crate) processes: u16,
    /// Print the figures as JSON
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) secrets: SecretOptions,
    #[command(flatten)]
    pub(crate) options: PluginOptions,
}

/// Set in the processes `--processes` starts: load, say `ready` on stdout,
/// and measure once a line comes on stdin (all of them start together).
const BARRIER: &str = "TOOLHOST_BENCH_BARRIER";

pub(crate) async fn command(args: Args) -> Result<u8, Failure> {
    if args.processes > 1 {
        return processes(usize::from(args.processes), args.json).await;
    }
    let Args { plugin, tool, arguments, calls, concurrency, json, secrets, mut options, .. } = args;
    let (pairs, _) = options.config(Some("bench")).map_err(usage)?;
    let concurrency = usize::from(concurrency);
    // Enough idle instances for every caller, unless told otherwise.
    options.pool_size.get_or_insert(concurrency.max(default_pool_size()));
    let arguments = read_arguments(arguments.as_deref(), None).map_err(usage)?;
    let started = std::time::Instant::now();
    let plugin = Arc::new(options.load(&plugin, pairs, Some(&secrets)).await?);
    let load_seconds = started.elapsed().as_secs_f64();
    // The calls are measured on the code the plugin runs from then on.
    plugin.settled_tier().await;
    let optimized_seconds = started.elapsed().as_secs_f64();
    // Refuse bad arguments once, not on every call.
    plugin.validate_arguments(&tool, arguments.clone())?;
    if std::env::var_os(BARRIER).is_some() {
        use tokio::io::AsyncBufReadExt;
        println!("ready");
        std::io::Write::flush(&mut std::io::stdout())
            .map_err(|e| harness(format!("cannot wait for the other processes: {e}")))?;
        let mut go = String::new();
        tokio::io::BufReader::new(tokio::io::stdin())
            .read_line(&mut go)
            .await
            .map_err(|e| harness(format!("cannot wait for the other processes: {e}")))?;
    }
    let mut report = bench::run(Arc::clone(&plugin), &tool, arguments, calls as usize, concurrency).await;
    report.load_seconds = load_seconds;
    report.optimized_seconds = optimized_seconds;
    if json {
        print_json(&report)?;
    } else {
        let l = &report.latency_us;
        let h = bench::human;
        println!(
            "{}.{}: {} calls from {} concurrent caller{} in {:.2} s",
            escaped(&report.plugin),
            escaped(&report.tool),
            report.calls,
            report.concurrency,
            if report.concurrency == 1 { "" } else { "s" },
            report.seconds
        );
        println!("  throughput:  {:.0} calls/s", report.calls_per_second);
        println!(
            "  latency:     p50 {}  p90 {}  p99 {}  (min {}, mean {}, max {})",
            h(l.p50),
            h(l.p90),
            h(l.p99),
            h(l.min),
            h(l.mean),
            h(l.max)
        );
        println!("  tool errors: {}  failures: {}", report.tool_errors, report.failures);
        if let Some(failure) = &report.first_failure {
            println!("  first failure: {}", escaped(failure));
        }
        println!(
            "  load:        {} (compiled-module cache: {}), describe included",
            h(report.load_seconds * 1e6),
            report.module_cache
        );
        if report.load_tier != "optimized" {
            println!(
                "               on the {} compiler's code; Cranelift's after {}, where the calls were measured",
                report.load_tier,
                h(report.optimized_seconds * 1e6)
            );
        }
        println!(
            "  instances:   {} idle, {} each held against the memory limit",
            report.idle_instances,
            bench::human_bytes(report.instance_memory_bytes)
        );
    }
    Ok(if report.failures == 0 { 0 } else { exit::PLUGIN_FAILED })
}

/// What `--processes` measured: each process's report, and their calls
/// over the longest one's time.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ProcessesReport {
    processes: usize,
    /// Calls made by all of them.
    calls: u64,
    /// The longest process's time, in seconds (they start together).
    seconds: f64,
    /// All calls over the longest time.
    calls_per_second: f64,
    failures: u64,
    reports: Vec<Value>,
}

/// A failure of `--processes`' own machinery (not of a plugin's run).
fn harness(what: String) -> Failure {
    Failure { code: exit::PLUGIN_FAILED, error: anyhow::anyhow!(what) }
}

/// `--processes N`: this command again, N times, without `--processes`
/// and with `--json`, each started at once after all have loaded.
async fn processes(count: usize, json: bool) -> Result<u8, Failure> {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
    let exe = std::env::current_exe().map_err(|e| harness(format!("cannot find this program to run it again: {e}")))?;
    let args = arguments_again();
    let mut children = Vec::with_capacity(count);
    for _ in 0..count {
        let child = tokio::process::Command::new(&exe)
            .args(&args)
            .env(BARRIER, "1")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| harness(format!("cannot start a measuring process: {e}")))?;
        children.push(child);
    }
    // Every process loaded and ready, then all told to go at once.
    let mut outputs = Vec::with_capacity(count);
    for child in &mut children {
        let mut out = tokio::io::BufReader::new(child.stdout.take().expect("piped"));
        let mut line = String::new();
        out.read_line(&mut line).await.map_err(|e| harness(format!("a measuring process: {e}")))?;
        if line.trim() != "ready" {
            let status = child.wait().await.ok().and_then(|s| s.code()).unwrap_or(-1);
            return Err(Failure {
                code: u8::try_from(status).unwrap_or(exit::PLUGIN_FAILED),
                error: anyhow::anyhow!("a measuring process ended before measuring (exit {status})"),
            });
        }
        outputs.push(out);
    }
    for child in &mut children {
        let mut stdin = child.stdin.take().expect("piped");
        stdin.write_all(b"go\n").await.map_err(|e| harness(format!("a measuring process: {e}")))?;
    }
    let mut reports = Vec::with_capacity(count);
    let mut code = 0;
    for (child, mut out) in children.iter_mut().zip(outputs) {
        let mut text = String::new();
        out.read_to_string(&mut text).await.map_err(|e| harness(format!("a measuring process: {e}")))?;
        let status = child.wait().await.map_err(|e| harness(format!("a measuring process: {e}")))?;
        code = code.max(status.code().and_then(|c| u8::try_from(c).ok()).unwrap_or(exit::PLUGIN_FAILED));
        let report: Value = serde_json::from_str(&text)
            .map_err(|e| harness(format!("a measuring process printed no report ({e}): {text}")))?;
        reports.push(report);
    }
    let sum = |key: &str| reports.iter().filter_map(|r| r[key].as_u64()).sum::<u64>();
    let seconds = reports.iter().filter_map(|r| r["seconds"].as_f64()).fold(0.0, f64::max);
    let calls = sum("calls");
    let together = ProcessesReport {
        processes: count,
        calls,
        seconds,
        calls_per_second: if seconds > 0.0 { calls as f64 / seconds } else { 0.0 },
        failures: sum("failures"),
        reports,
    };
    if json {
        print_json(&together)?;
    } else {
        print_processes(&together);
    }
    Ok(code)
}

/// This command's own arguments, for a measuring process: without
/// `--processes`, with `--json`.
fn arguments_again() -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = Vec::new();
    let mut given = std::env::args_os().skip(1);
    while let Some(arg) = given.next() {
        match arg.to_str() {
            Some("--processes") => {
                given.next();
            }
            Some(a) if a.starts_with("--processes=") => {}
            _ => args.push(arg),
        }
    }
    if !args.iter().any(|a| a == "--json") {
        args.push("--json".into());
    }
    args
}

/// `--processes`' figures, as text.
fn print_processes(together: &ProcessesReport) {
    let first = &together.reports[0];
    println!(
        "{}.{}: {} processes at once, {} calls each from {} concurrent caller{}",
        escaped(first["plugin"].as_str().unwrap_or_default()),
        escaped(first["tool"].as_str().unwrap_or_default()),
        together.processes,
        first["calls"],
        first["concurrency"],
        if first["concurrency"] == 1 { "" } else { "s" },
    );
    println!(
        "  throughput:  {:.0} calls/s together (all calls over the longest run, {:.2} s)",
        together.calls_per_second, together.seconds
    );
    let each: Vec<String> =
        together.reports.iter().map(|r| format!("{:.0}", r["callsPerSecond"].as_f64().unwrap_or(0.0))).collect();
    println!("  each:        {} calls/s", each.join(", "));
    println!("  failures:    {}", together.failures);
}
