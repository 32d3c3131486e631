//! Many plugins in one registry (`cargo bench -p toolhost-tests --bench
//! many_plugins`): how load time, memory, listing and routing grow from
//! 10 to 1,000 plugins (and 2,500, for 10,000 tools).
//!
//! Each size runs in a child process of its own (this binary again), so
//! that one size's memory does not count in the next. A child copies the
//! `calculator` and `text` example plugins (four tools each) to distinct
//! files, writes a toolsets file naming each copy under a distinct id,
//! fills the compiled-module cache once (a first load of every copy, not
//! timed), then, in a fresh registry:
//!
//! - `cold`: the same with an empty compiled-module cache (the load that
//!   fills it): wall time;
//! - `load`: `parse_toolsets` and `Registry::load_all` of every toolset,
//!   from the warm cache: wall time, and the memory the process gained
//!   (`/proc/self/smaps_rollup`, before and after);
//! - `list`: `ToolsSnapshot::tools` (every tool, sorted), the median of
//!   200 listings, and the same listing as MCP `tools/list` JSON;
//! - `route`: `Registry::call_with` of `calculator.add` on the first and on
//!   the last toolset (median of 2,000 calls each): the cost of finding a
//!   tool should not grow with the number of plugins.
//!
//! The copies are byte-for-byte identical by default, so they share one
//! cache entry per example: each copy is loaded on its own (its entry
//! checked and mapped, its instance, schemas and tables its own), but the
//! mapped code pages are shared, so PSS understates what as many different
//! plugins would take, while RSS (every mapping's pages counted) shows it.
//! `TOOLHOST_MANY_DISTINCT=1` gives each copy a custom section naming its
//! number, making every copy a distinct module with its own cache entry
//! (filling the cache then compiles every copy: minutes at 1,000). Memory
//! is given as RSS, PSS (which counts a page mapped by several plugins
//! once) and anonymous memory (what the kernel cannot drop and read back
//! from a file).
//!
//! Figures, printed one line per size; not assertions. `TOOLHOST_MANY`
//! (comma-separated sizes) changes the sizes.

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use toolhost::{ApproveAll, CallContext, ModuleCache, NoSecrets, Registry, Runtime};

const CHILD_ENV: &str = "TOOLHOST_MANY_PLUGINS_CHILD";

fn main() {
    if let Ok(size) = std::env::var(CHILD_ENV) {
        let size: usize = size.parse().expect("a size");
        child(size);
        return;
    }
    // `cargo bench` passes `--bench`; anything else is a filter we ignore.
    let sizes: Vec<usize> = std::env::var("TOOLHOST_MANY")
        .ok()
        .map(|list| list.split(',').map(|n| n.trim().parse().expect("a size")).collect())
        .unwrap_or_else(|| vec![10, 100, 300, 1000, 2500]);
    println!(
        "{:>7} {:>7} {:>11} {:>11} {:>8} {:>8} {:>9} {:>10} {:>12} {:>14} {:>12} {:>12}",
        "plugins",
        "tools",
        "cold (ms)",
        "load (ms)",
        "RSS MiB",
        "PSS MiB",
        "anon MiB",
        "PSS KiB/pl",
        "list (µs)",
        "list JSON (µs)",
        "route 1st",
        "route last"
    );
    let me = std::env::current_exe().expect("this binary");
    for size in sizes {
        let status = Command::new(&me).env(CHILD_ENV, size.to_string()).status().expect("run a child");
        assert!(status.success(), "the child for {size} plugins failed");
    }
}

/// Resident memory of this process, in bytes: (RSS, PSS, anonymous). PSS
/// counts a page mapped N times (a compiled module's code, mapped once per
/// plugin loading it) as 1/N; anonymous memory is what the kernel cannot
/// drop and read again from a file under memory pressure.
fn resident() -> (u64, u64, u64) {
    let rollup = std::fs::read_to_string("/proc/self/smaps_rollup").expect("smaps_rollup");
    let field = |name: &str| -> u64 {
        let line = rollup.lines().find(|l| l.starts_with(name)).expect("a field of smaps_rollup");
        line.split_whitespace().nth(1).expect("kB").parse::<u64>().expect("a number") * 1024
    };
    (field("Rss:"), field("Pss:"), field("Anonymous:"))
}

/// A Wasm custom section (id 0): appended to a module, it makes the bytes
/// (and so the compiled-module cache's key) distinct without changing
/// what the module does.
fn custom_section(name: &str, payload: &[u8]) -> Vec<u8> {
    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    let mut body = Vec::new();
    leb(name.len(), &mut body);
    body.extend_from_slice(name.as_bytes());
    body.extend_from_slice(payload);
    let mut section = vec![0];
    leb(body.len(), &mut section);
    section.extend(body);
    section
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn child(size: usize) {
    let scratch = std::env::temp_dir().join(format!("toolhost-many-plugins-{}", std::process::id()));
    let plugins = scratch.join("plugins");
    std::fs::create_dir_all(&plugins).expect("scratch");
    let toolsets = plugin_copies(&plugins, size);
    let document = json!({
        "schema": "https://schema.cjson.dev/0/toolsets/cjson-toolsets-0.1.0-SNAPSHOT.schema.json",
        "toolsets": toolsets,
    });
    let config = scratch.join("toolsets.json");
    let cache = ModuleCache::at(scratch.join("cache"));

    let tokio = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio");
    tokio.block_on(async {
        // Fill the cache (every copy is compiled once, or found by its
        // content hash), then drop everything that load held. Timed too:
        // the cold start, with an empty cache.
        let cold = Instant::now();
        {
            let registry = registry(&cache);
            let file = toolhost::parse_toolsets(&config, &document, &NoSecrets).await.expect("config");
            let report = registry.load_all(file.toolsets).await;
            assert!(report.failures.is_empty(), "{:?}", report.failures);
            // (The plugins answer on the baseline compiler's code from
            // here; Cranelift's entries are written when this is done.)
            registry.runtime().background_compiles_done().await;
        }
        let cold = cold.elapsed();

        let before = resident();
        let started = Instant::now();
        let registry = registry(&cache);
        let file = toolhost::parse_toolsets(&config, &document, &NoSecrets).await.expect("config");
        let report = registry.load_all(file.toolsets).await;
        let load = started.elapsed();
        assert!(report.failures.is_empty(), "{:?}", report.failures);
        let after = resident();
        let (rss, pss, anon) =
            (after.0.saturating_sub(before.0), after.1.saturating_sub(before.1), after.2.saturating_sub(before.2));

        let snapshot = registry.snapshot();
        let tools = snapshot.tools().len();
        let (list, list_json) = listing_times(&snapshot);

        let route = |id: usize| {
            let name = format!("calculator-{id}__add");
            let registry = &registry;
            async move {
                let context = CallContext::default();
                let mut samples = Vec::with_capacity(2000);
                for _ in 0..2200 {
                    let started = Instant::now();
                    let result =
                        registry.call_with(&name, json!({"a": 2, "b": 3}), &ApproveAll, &context).await.expect("add");
                    samples.push(started.elapsed());
                    assert_eq!(result.structured_content, Some(json!({"result": 5.0})));
                }
                median(samples.split_off(200))
            }
        };
        let first = route(0).await;
        let last_calculator = (size - 1) / 2 * 2;
        let last = route(last_calculator).await;

        let mib = |bytes: u64| bytes as f64 / (1 << 20) as f64;
        println!(
            "{size:>7} {tools:>7} {:>11.1} {:>11.1} {:>8.1} {:>8.1} {:>9.1} {:>10.0} {:>12.1} {:>14.1} {:>9.2} µs {:>9.2} µs",
            cold.as_secs_f64() * 1e3,
            load.as_secs_f64() * 1e3,
            mib(rss),
            mib(pss),
            mib(anon),
            pss as f64 / 1024.0 / size as f64,
            list.as_secs_f64() * 1e6,
            list_json.as_secs_f64() * 1e6,
            first.as_secs_f64() * 1e6,
            last.as_secs_f64() * 1e6,
        );
    });
    let _ = std::fs::remove_dir_all(&scratch);
}

/// `size` copies of the example plugins (distinct modules when
/// `TOOLHOST_MANY_DISTINCT=1`), as toolsets of a toolsets file.
fn plugin_copies(plugins: &std::path::Path, size: usize) -> Vec<serde_json::Value> {
    let examples = ["calculator", "text"];
    let distinct = std::env::var("TOOLHOST_MANY_DISTINCT").is_ok_and(|v| v == "1");
    let mut toolsets = Vec::new();
    for i in 0..size {
        let example = examples[i % examples.len()];
        let copy = plugins.join(format!("{example}-{i}.wasm"));
        let mut wasm = std::fs::read(toolhost_tests::example(example)).expect("read a plugin");
        if distinct {
            wasm.extend(custom_section("toolhost-bench-copy", i.to_string().as_bytes()));
        }
        std::fs::write(&copy, wasm).expect("copy a plugin");
        toolsets.push(json!({"id": format!("{example}-{i}"), "kind": "uri",
            "server": {"url": copy.display().to_string()}}));
    }
    toolsets
}

/// Median times to list the tools of a snapshot, and to write them as
/// `tools/list` sends them.
fn listing_times(snapshot: &toolhost::ToolsSnapshot) -> (Duration, Duration) {
    let list = median(
        (0..200)
            .map(|_| {
                let started = Instant::now();
                std::hint::black_box(snapshot.tools());
                started.elapsed()
            })
            .collect(),
    );
    let list_json = median(
        (0..50)
            .map(|_| {
                let started = Instant::now();
                // What `tools/list` sends: every tool under its exposed
                // name, as JSON.
                let listed: Vec<toolhost::Tool> = snapshot.tools().into_iter().map(|t| t.exposed()).collect();
                let mut body = b"{\"tools\":".to_vec();
                serde_json::to_writer(&mut body, &listed).expect("json");
                body.push(b'}');
                std::hint::black_box(body);
                started.elapsed()
            })
            .collect(),
    );
    (list, list_json)
}

fn registry(cache: &ModuleCache) -> Registry {
    let runtime = Runtime::builder().with_module_cache(cache.clone()).build();
    Registry::with_runtime(runtime, Arc::new(NoSecrets))
}
