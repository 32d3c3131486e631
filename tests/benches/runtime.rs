//! Runtime benchmarks (`cargo bench -p toolhost-tests --bench runtime`).
//!
//! - `roundtrip`: the validated `calculator.add` round trip through
//!   `Plugin::call_tool`, next to the raw Extism call of the same export
//!   with the same request bytes (`extism::Plugin::call("call", ..)`), on
//!   one thread. Target: toolhost ≤ 1.2× Extism.
//!   `toolhost_component_validated` is the same round trip on the
//!   component build of `calculator` (target: ≤ 5 µs median).
//! - `noop`: the smallest call (`hostile`'s `ok` tool), both ways.
//! - `io_100k`: `text.reverse` of 100 KB (100 KB in, 100 KB out), both ways.
//! - `directory_walk`: WASI file-system calls, both ways: the `raw-servlet`
//!   fixture's `search_files` (a recursive `read_dir` with each entry's
//!   metadata, as the published filesystem servlet does) over a granted tree
//!   of 1,110 entries, and its `list_directory` of one directory of 100.
//! - `throughput`: calls/s of `calculator.add` with 1 and 2 concurrent
//!   callers (tokio, 2 workers); Extism with 1 and 2 threads, each with its
//!   own instance. Target: toolhost 2 callers ≥ 1.8× 1 caller.
//!   `toolhost_two_plugins/2`: two callers on two separately loaded copies
//!   (no pool shared), to see what sharing one pool costs.
//! - `load`: `Plugin::build` of `calculator` with a warm compiled-module
//!   cache and with no cache (compiling). Target: ≤ 5 ms from the cache.
//! - `memory/idle_instance` (printed, not timed): resident memory per idle
//!   pooled instance, after a call and never called.
//! - `describe`: reading the tool list (`Plugin::describe`), and the
//!   `describe` export run again and validated (`Plugin::describe_again`)
//!   next to Extism's raw call of it.
//!
//! `RUST_BACKTRACE` slows Extism's calls (each captures a backtrace for an
//! error it throws away); run the benchmarks with and without it to see.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};
use toolhost::{ModuleCache, Plugin};
use toolhost_tests::{example, fixture};

fn tokio_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime")
}

fn load(runtime: &tokio::runtime::Runtime, path: std::path::PathBuf) -> Plugin {
    let plugin = runtime
        .block_on(Plugin::builder_from_file(path).with_pool_size(2).build())
        .expect("load the plugin (build it with `cargo test` or `cargo xtask build-plugins`)");
    // Measured on Cranelift's code, not the baseline compiler's it starts on.
    runtime.block_on(plugin.settled_tier());
    plugin
}

/// An Extism instance of a plugin, as an Extism host runs it: WASI on,
/// the same memory cap and timeout toolhost applies by default.
fn extism_plugin(path: &std::path::Path) -> extism::Plugin {
    extism::Plugin::new(extism_manifest(path), [], true).expect("extism plugin")
}

/// The manifest [`extism_plugin`] runs a plugin with, to add grants to.
fn extism_manifest(path: &std::path::Path) -> extism::Manifest {
    let wasm = std::fs::read(path).expect("read plugin");
    extism::Manifest::new([extism::Wasm::data(wasm)]).with_timeout(Duration::from_secs(30)).with_memory_max(4096)
}

/// The request bytes toolhost sends for a call.
fn request(tool: &str, arguments: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({"method": "tools/call", "params": {"name": tool, "arguments": arguments}}))
        .expect("request")
}

fn single_calls(c: &mut Criterion) {
    let runtime = tokio_runtime();
    let cases = [
        ("roundtrip", example("calculator"), "add", json!({"a": 2, "b": 3})),
        ("noop", fixture("hostile"), "ok", json!({})),
        ("io_100k", example("text"), "reverse", json!({"text": "abcdefghij".repeat(10_000)})),
    ];
    for (group_name, path, tool, arguments) in cases {
        let mut group = c.benchmark_group(group_name);
        group.measurement_time(Duration::from_secs(4));
        let plugin = load(&runtime, path.clone());
        group.bench_function("toolhost_validated", |b| {
            b.iter(|| runtime.block_on(plugin.call_tool(tool, arguments.clone())).expect("call"))
        });
        // The same tool code built as a component, where there is one.
        let component_path = path.with_extension("component.wasm");
        if component_path.is_file() {
            let component = load(&runtime, component_path);
            group.bench_function("toolhost_component_validated", |b| {
                b.iter(|| runtime.block_on(component.call_tool(tool, arguments.clone())).expect("call"))
            });
        }
        let mut raw = extism_plugin(&path);
        let bytes = request(tool, arguments.clone());
        group.bench_function("extism_raw", |b| {
            b.iter(|| {
                let out: Vec<u8> = raw.call("call", &bytes[..]).expect("extism call");
                out
            })
        });
        group.finish();
    }
}

/// WASI directory walking on a granted tree: 10 directories of 10
/// directories of 10 files.
fn directory_walk(c: &mut Criterion) {
    let runtime = tokio_runtime();
    let tree = tempfile::tempdir().expect("tempdir");
    for a in 0..10 {
        for b in 0..10 {
            let dir = tree.path().join(format!("dir{a}/sub{b}"));
            std::fs::create_dir_all(&dir).expect("mkdir");
            for f in 0..10 {
                std::fs::write(dir.join(format!("file{f}.txt")), b"x").expect("write");
            }
        }
    }
    let wide = tree.path().join("wide");
    std::fs::create_dir(&wide).expect("mkdir");
    for f in 0..100 {
        std::fs::write(wide.join(format!("entry{f}")), b"x").expect("write");
    }
    let grant = toolhost::PathGrant {
        host: tree.path().to_owned(),
        guest: Some("/data".into()),
        access: toolhost::Access::ReadOnly,
    };
    let plugin = runtime
        .block_on(
            Plugin::builder_from_file(fixture("raw-servlet"))
                .with_policy(toolhost::Policy::default().allow_path(grant))
                .with_pool_size(2)
                .build(),
        )
        .expect("load raw-servlet");
    runtime.block_on(plugin.settled_tier());
    let grant = extism_manifest(&fixture("raw-servlet")).with_allowed_path(tree.path().display().to_string(), "/data");
    let mut raw = extism::Plugin::new(grant, [], true).expect("extism plugin");
    let cases = [
        ("search_files", json!({"path": "/data", "pattern": "file7"})),
        ("list_directory", json!({"path": "/data/wide"})),
    ];
    let mut group = c.benchmark_group("directory_walk");
    group.measurement_time(Duration::from_secs(4));
    for (tool, arguments) in cases {
        let result = runtime.block_on(plugin.call_tool(tool, arguments.clone())).expect("call");
        assert!(!result.is_error(), "{result:?}");
        group.bench_function(format!("{tool}/toolhost_validated"), |b| {
            b.iter(|| runtime.block_on(plugin.call_tool(tool, arguments.clone())).expect("call"))
        });
        let bytes = request(tool, arguments.clone());
        group.bench_function(format!("{tool}/extism_raw"), |b| {
            b.iter(|| {
                let out: Vec<u8> = raw.call("call", &bytes[..]).expect("extism call");
                out
            })
        });
    }
    group.finish();
}

/// `calls` calls of `calculator.add` from `callers` concurrent tasks.
async fn toolhost_calls(plugin: &Plugin, calls: u64, callers: u64) {
    let tasks: Vec<_> = (0..callers)
        .map(|i| {
            let plugin = plugin.clone();
            let share = calls / callers + u64::from(i < calls % callers);
            tokio::spawn(async move {
                for _ in 0..share {
                    plugin.call_tool("add", json!({"a": 2, "b": 3})).await.expect("add");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("caller");
    }
}

fn throughput(c: &mut Criterion) {
    let runtime = tokio_runtime();
    let plugin = load(&runtime, example("calculator"));
    let mut group = c.benchmark_group("throughput");
    group.measurement_time(Duration::from_secs(5));
    const BATCH: u64 = 2000;
    group.throughput(Throughput::Elements(BATCH));
    for callers in [1, 2] {
        group.bench_with_input(BenchmarkId::new("toolhost", callers), &callers, |b, &callers| {
            b.iter_custom(|iterations| {
                let started = Instant::now();
                runtime.block_on(toolhost_calls(&plugin, iterations * BATCH, callers));
                started.elapsed()
            })
        });
    }
    // Two callers on two separately loaded copies of the plugin: nothing of
    // the pool is shared (the engine and compiled code still are).
    let second = load(&runtime, example("calculator"));
    group.bench_function(BenchmarkId::new("toolhost_two_plugins", 2), |b| {
        b.iter_custom(|iterations| {
            let started = Instant::now();
            runtime.block_on(async {
                let (a, b) = (plugin.clone(), second.clone());
                let share = iterations * BATCH / 2;
                let x = tokio::spawn(async move { toolhost_calls(&a, share, 1).await });
                let y = tokio::spawn(async move { toolhost_calls(&b, share, 1).await });
                x.await.expect("caller");
                y.await.expect("caller");
            });
            started.elapsed()
        })
    });
    // Extism: threads, each with an instance of its own, kept across
    // iterations (created outside the timing).
    let path = example("calculator");
    let bytes = Arc::new(request("add", json!({"a": 2, "b": 3})));
    for threads in [1usize, 2] {
        let instances: Vec<_> = (0..threads).map(|_| Arc::new(std::sync::Mutex::new(extism_plugin(&path)))).collect();
        group.bench_with_input(BenchmarkId::new("extism_threads", threads), &threads, |b, &threads| {
            b.iter_custom(|iterations| {
                let started = Instant::now();
                for _ in 0..iterations {
                    std::thread::scope(|scope| {
                        for instance in &instances {
                            let bytes = Arc::clone(&bytes);
                            scope.spawn(move || {
                                let mut instance = instance.lock().expect("instance");
                                for _ in 0..BATCH / threads as u64 {
                                    let _: Vec<u8> = instance.call("call", &bytes[..]).expect("extism call");
                                }
                            });
                        }
                    });
                }
                started.elapsed()
            })
        });
    }
    group.finish();
}

fn load_and_describe(c: &mut Criterion) {
    let runtime = tokio_runtime();
    let cache_dir = tempfile::tempdir().expect("temp dir");
    let path = example("calculator");
    let cached = ModuleCache::at(cache_dir.path());
    // Fill the cache once (Cranelift's entry is written in the background).
    let filled = runtime
        .block_on(Plugin::builder_from_file(&path).with_module_cache(cached.clone()).build())
        .expect("load calculator");
    runtime.block_on(filled.settled_tier());
    let mut group = c.benchmark_group("load");
    group.sample_size(20);
    group.bench_function("from_cache", |b| {
        b.iter(|| {
            let plugin = runtime
                .block_on(Plugin::builder_from_file(&path).with_module_cache(cached.clone()).build())
                .expect("load");
            assert_eq!(plugin.compile_info().cache, toolhost::CacheStatus::Hit);
            plugin
        })
    });
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    // A miss: to the first instance on the baseline compiler's code, and to
    // Cranelift's (what every miss cost without the baseline compiler).
    let cold = |settle: bool| {
        let (runtime, path) = (&runtime, &path);
        move |iters: u64| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                runtime.block_on(async {
                    let started = std::time::Instant::now();
                    let builder = Plugin::builder_from_file(path).with_module_cache(ModuleCache::disabled());
                    let plugin = builder.build().await.expect("load");
                    if settle {
                        plugin.settled_tier().await;
                    }
                    total += started.elapsed();
                    // (Untimed: the background compile must not run into
                    // the next load.)
                    plugin.settled_tier().await;
                })
            }
            total
        }
    };
    group.bench_function("compile", |b| b.iter_custom(cold(false)));
    group.bench_function("compile_to_cranelift", |b| b.iter_custom(cold(true)));
    group.finish();

    let plugin = load(&runtime, path.clone());
    let mut group = c.benchmark_group("describe");
    group.bench_function("tool_list", |b| b.iter(|| plugin.describe().tools.len()));
    group.bench_function("toolhost_validated_export", |b| {
        b.iter(|| runtime.block_on(plugin.describe_again()).expect("describe"))
    });
    let mut raw = extism_plugin(&path);
    group.bench_function("extism_raw_export", |b| {
        b.iter(|| {
            let out: Vec<u8> = raw.call("describe", "").expect("describe");
            out
        })
    });
    group.finish();
}

fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    statm.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok()).expect("resident pages") * 4096
}

/// Not a timing: the host memory an idle pooled instance costs, printed.
/// 64 instances of `hostile` each run one call at the same time (its
/// `sleep` tool holds them: 64 distinct instances); the growth of the
/// process's resident size is divided among them, next to what they hold
/// against their memory limits. Also 64 `calculator` instances started but
/// never called (`Plugin::prewarm`).
fn memory_per_instance(_: &mut Criterion) {
    const INSTANCES: usize = 64;
    let runtime = tokio_runtime();
    let report = |name: &str, plugin: &Plugin, before: u64, accounted_before: usize| {
        let stats = plugin.pool_stats();
        let grown = resident_bytes().saturating_sub(before);
        let added = (stats.idle.saturating_sub(1)).max(1) as u64;
        println!(
            "memory/idle_instance/{name}: {} KiB resident per idle instance ({} instances), \
             {} KiB held against the memory limit (linear memory + kernel) per instance",
            grown / added / 1024,
            stats.idle,
            (stats.idle_memory_bytes - accounted_before) as u64 / added / 1024
        );
    };

    let hostile = runtime
        .block_on(Plugin::builder_from_file(fixture("hostile")).with_pool_size(INSTANCES).build())
        .expect("load");
    runtime.block_on(hostile.settled_tier());
    let (before, accounted) = (resident_bytes(), hostile.pool_stats().idle_memory_bytes);
    runtime.block_on(async {
        let calls: Vec<_> = (0..INSTANCES)
            .map(|_| {
                let plugin = hostile.clone();
                tokio::spawn(async move { plugin.call_tool("sleep", json!({"ms": 300})).await })
            })
            .collect();
        for call in calls {
            call.await.expect("task").expect("sleep");
        }
    });
    report("hostile_after_a_call", &hostile, before, accounted);

    let calculator = runtime
        .block_on(Plugin::builder_from_file(example("calculator")).with_pool_size(INSTANCES).build())
        .expect("load");
    runtime.block_on(calculator.settled_tier());
    let (before, accounted) = (resident_bytes(), calculator.pool_stats().idle_memory_bytes);
    runtime.block_on(calculator.prewarm(INSTANCES)).expect("prewarm");
    report("calculator_started", &calculator, before, accounted);
}

criterion_group!(benches, single_calls, directory_walk, throughput, load_and_describe, memory_per_instance);
criterion_main!(benches);
