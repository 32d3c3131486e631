//! The runtime under the plugins: compatibility with Extism itself, the
//! Extism ABI from a hand-written module, the instance pool, the
//! compiled-module cache, what a guest prints, redirects.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost::{CacheStatus, CallToolResult, ModuleCache, Plugin, Policy, Tier};
use toolhost_tests::{Flavour, example, fixture, serve_http, serve_http_recording};

/// The plugin's raw output for an export, on Extism itself.
fn on_extism(path: &std::path::Path, export: &str, input: &[u8]) -> Value {
    let wasm = std::fs::read(path).expect("read plugin");
    let manifest = extism::Manifest::new([extism::Wasm::data(wasm)]);
    let mut plugin = extism::Plugin::new(&manifest, [], true).expect("extism loads it");
    let output: Vec<u8> = plugin.call(export, input).expect("extism call");
    serde_json::from_slice(&output).expect("JSON from extism")
}

fn request(tool: &str, arguments: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({"method": "tools/call", "params": {"name": tool, "arguments": arguments}})).unwrap()
}

/// Normalise a result the way toolhost reads it (the protocol type), so
/// both sides compare as values.
fn as_result(value: Value) -> Value {
    let result: CallToolResult = serde_json::from_value(value).expect("a CallToolResult");
    serde_json::to_value(result).unwrap()
}

#[tokio::test]
async fn plugins_answer_exactly_as_they_do_on_extism() {
    type Case<'a> = (&'a str, std::path::PathBuf, &'a [(&'a str, Value)]);
    let cases: &[Case] = &[
        (
            "calculator",
            example("calculator"),
            &[
                ("add", json!({"a": 2, "b": 3})),
                ("divide", json!({"a": 1, "b": 0})),
                ("multiply", json!({"a": -1.5, "b": 1e300})),
            ],
        ),
        (
            "text",
            example("text"),
            &[
                ("reverse", json!({"text": "héllo wörld"})),
                ("word_count", json!({"text": "one two  three\nfour"})),
                ("reverse", json!({"text": "x".repeat(100_000)})),
            ],
        ),
        (
            "raw-servlet",
            fixture("raw-servlet"),
            &[
                ("greet", json!({"name": "Ada"})),
                ("greet", json!({})),
                ("count_vowels", json!({"text": "Extism and toolhost"})),
            ],
        ),
    ];
    for (name, path, calls) in cases {
        let plugin = Plugin::load(path).await.expect("toolhost loads it");
        let described = serde_json::to_value(plugin.describe_again().await.expect("describe")).unwrap();
        let reference = on_extism(path, "describe", b"");
        assert_eq!(
            described["tools"].as_array().map(Vec::len),
            reference["tools"].as_array().map(Vec::len),
            "{name}: describe"
        );
        for (tool, arguments) in calls.iter() {
            let ours = plugin.call_tool_unvalidated(tool, arguments.as_object().unwrap().clone()).await;
            let theirs = as_result(on_extism(path, "call", &request(tool, arguments.clone())));
            let ours = serde_json::to_value(ours.expect("toolhost call")).unwrap();
            assert_eq!(ours, theirs, "{name}.{tool}({arguments})");
        }
    }
}

#[tokio::test]
async fn directory_walks_answer_exactly_as_they_do_on_extism() {
    // A small tree: nested directories, files, names in mixed case.
    let tree = tempfile::tempdir().expect("tempdir");
    for dir in ["alpha/Beta", "alpha/gamma", "delta"] {
        std::fs::create_dir_all(tree.path().join(dir)).expect("mkdir");
    }
    for file in ["alpha/Beta/notes.txt", "alpha/gamma/BETA.md", "alpha/one.txt", "delta/two.rs", "three"] {
        std::fs::write(tree.path().join(file), file).expect("write");
    }
    let grant = toolhost::PathGrant {
        host: tree.path().to_owned(),
        guest: Some("/data".into()),
        access: toolhost::Access::ReadOnly,
    };
    let plugin = Plugin::builder_from_file(fixture("raw-servlet"))
        .with_policy(Policy::default().allow_path(grant))
        .build()
        .await
        .expect("load");
    let listing = plugin.call_tool("list_directory", json!({"path": "/data/alpha"})).await.expect("list");
    assert_eq!(listing.texts().collect::<String>(), "[DIR] Beta\n[DIR] gamma\n[FILE] one.txt");
    let found = plugin.call_tool("search_files", json!({"path": "/data", "pattern": "beta"})).await.expect("search");
    assert_eq!(found.texts().collect::<String>(), "/data/alpha/Beta\n/data/alpha/gamma/BETA.md");
    // Outside the grant there is nothing to walk.
    let outside = plugin.call_tool("search_files", json!({"path": "/etc", "pattern": "a"})).await.expect("search");
    assert!(outside.is_error(), "{outside:?}");

    let calls = [
        ("list_directory", json!({"path": "/data"})),
        ("list_directory", json!({"path": "/data/alpha/Beta"})),
        ("search_files", json!({"path": "/data", "pattern": "t"})),
        ("search_files", json!({"path": "/data/delta", "pattern": "nothing"})),
        ("search_files", json!({"path": "/etc", "pattern": "a"})),
    ];
    // Extism's WASI blocks on a runtime of its own: run it off this one.
    let host_dir = tree.path().display().to_string();
    let on_extism = calls.clone();
    let theirs = std::thread::spawn(move || {
        let wasm = std::fs::read(fixture("raw-servlet")).expect("read plugin");
        let manifest = extism::Manifest::new([extism::Wasm::data(wasm)]).with_allowed_path(host_dir, "/data");
        let mut extism = extism::Plugin::new(&manifest, [], true).expect("extism loads it");
        on_extism
            .iter()
            .map(|(tool, arguments)| {
                let output: Vec<u8> = extism.call("call", &request(tool, arguments.clone())[..]).expect("extism call");
                as_result(serde_json::from_slice(&output).expect("JSON"))
            })
            .collect::<Vec<_>>()
    })
    .join()
    .expect("extism thread");
    for ((tool, arguments), theirs) in calls.into_iter().zip(theirs) {
        let ours = plugin.call_tool_unvalidated(tool, arguments.as_object().unwrap().clone()).await.expect("call");
        assert_eq!(serde_json::to_value(ours).unwrap(), theirs, "{tool}({arguments})");
    }
}

/// A WAT function `$emit (ptr, len) -> handle` that copies guest memory
/// `[ptr, ptr+len)` into a new kernel block, through the imports `$alloc`
/// and `$store_u8`.
pub(crate) const WAT_EMIT: &str = r#"  ;; copy guest memory [ptr, ptr+len) into a new kernel block
  (func $emit (param $ptr i32) (param $len i32) (result i64)
    (local $h i64) (local $i i32)
    (local.set $h (call $alloc (i64.extend_i32_u (local.get $len))))
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $i) (local.get $len)))
      (call $store_u8 (i64.add (local.get $h) (i64.extend_i32_u (local.get $i)))
                      (i32.load8_u (i32.add (local.get $ptr) (local.get $i))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next)))
    (local.get $h))"#;

/// A plugin written by hand in WAT against `extism:host/env`: no plugin kit,
/// so every kernel function it uses is exercised as the ABI defines it.
pub(crate) fn wat_plugin(call_body: &str) -> String {
    let describe = r#"{"tools":[{"name":"t","description":"a tool","inputSchema":{"type":"object"}}]}"#;
    let escaped = describe.replace('"', "\\\"");
    format!(
        r#"(module
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "length" (func $length (param i64) (result i64)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (import "extism:host/env" "load_u8" (func $load_u8 (param i64) (result i32)))
  (import "extism:host/env" "input_length" (func $input_length (result i64)))
  (import "extism:host/env" "input_load_u8" (func $input_load_u8 (param i64) (result i32)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (import "extism:host/env" "error_set" (func $error_set (param i64)))
  (import "extism:host/env" "config_get" (func $config_get (param i64) (result i64)))
  (memory (export "memory") 1)
  (data (i32.const 0) "{escaped}")
  (data (i32.const 4096) "deliberate failure")
  (data (i32.const 8192) "greeting")
{WAT_EMIT}
  (func (export "describe") (result i32)
    (call $output_set (call $emit (i32.const 0) (i32.const {len})) (i64.const {len}))
    (i32.const 0))
  (func (export "call") (result i32)
    (local $h i64) (local $n i64)
    {call_body})
)"#,
        len = describe.len(),
    )
}

#[tokio::test]
async fn a_hand_written_module_speaks_the_extism_abi() {
    // `call` answers with its own input, copied byte by byte through the
    // kernel: the request toolhost sent comes back.
    let echo = wat_plugin(
        r#"(local.set $n (call $input_length))
    (local.set $h (call $alloc (local.get $n)))
    (call $copy_input (local.get $h) (local.get $n))
    (call $output_set (local.get $h) (call $length (local.get $h)))
    (i32.const 0))
  (func $copy_input (param $h i64) (param $n i64)
    (local $i i64)
    (block $done (loop $next
      (br_if $done (i64.ge_u (local.get $i) (local.get $n)))
      (call $store_u8 (i64.add (local.get $h) (local.get $i)) (call $input_load_u8 (local.get $i)))
      (local.set $i (i64.add (local.get $i) (i64.const 1)))
      (br $next)))"#,
    );
    // The module's `call` does not return a CallToolResult: the host says so,
    // quoting what came back, which is the request it sent.
    let plugin = Plugin::builder_from_bytes(echo.into_bytes()).with_name("echo").build().await.expect("load WAT");
    assert_eq!(plugin.tools()[0].name, "t");
    let error = plugin.call_tool("t", json!({"k": "v"})).await.unwrap_err();
    assert!(error.is_invalid_output(), "{error:?}");
    assert!(error.to_string().contains("content"), "{error}");

    // `error_set` with a message: an Extism error carrying it.
    let failing = wat_plugin(
        r#"(call $error_set (call $emit (i32.const 4096) (i32.const 18)))
    (i32.const 1)"#,
    );
    let plugin = Plugin::builder_from_bytes(failing.into_bytes()).build().await.expect("load WAT");
    let error = plugin.call_tool("t", json!({})).await.unwrap_err();
    assert!(error.is_plugin_error_message(), "{error:?}");
    assert!(error.to_string().contains("deliberate failure"), "{error}");

    // A non-zero return without a message is still an error, and says so.
    let silent = wat_plugin("(i32.const 3)");
    let plugin = Plugin::builder_from_bytes(silent.into_bytes()).build().await.expect("load WAT");
    let error = plugin.call_tool("t", json!({})).await.unwrap_err();
    assert!(error.to_string().contains("returned 3"), "{error}");

    // `config_get`: the value comes back as a block; echoed as the output
    // it is not JSON, and the host quotes that.
    let config = wat_plugin(
        r#"(local.set $h (call $config_get (call $emit (i32.const 8192) (i32.const 8))))
    (call $output_set (local.get $h) (call $length (local.get $h)))
    (i32.const 0)"#,
    );
    let plugin = Plugin::builder_from_bytes(config.into_bytes())
        .with_config("greeting", "{\"content\":[{\"type\":\"text\",\"text\":\"from config\"}]}")
        .build()
        .await
        .expect("load WAT");
    let result = plugin.call_tool("t", json!({})).await.expect("config value as result");
    assert_eq!(result.texts().next(), Some("from config"));
}

#[tokio::test]
async fn kernel_memory_counts_against_the_memory_limit() {
    let greedy = wat_plugin(
        r#"(local.set $h (call $alloc (i64.const 1073741824)))
    (i32.const 0)"#,
    );
    let plugin = Plugin::builder_from_bytes(greedy.into_bytes())
        .with_memory_max_bytes(32u64 << 20)
        .build()
        .await
        .expect("load WAT");
    let error = plugin.call_tool("t", json!({})).await.unwrap_err();
    assert!(error.is_memory_limit(), "{error:?}");
}

#[tokio::test]
async fn imports_the_host_does_not_provide_are_named_at_load() {
    let cases = [
        (r#"(import "extism:host/user" "lookup" (func (param i64) (result i64)))"#, "extism:host/user::lookup"),
        (r#"(import "extism:host/env" "teleport" (func))"#, "extism:host/env::teleport"),
        (r#"(import "extism:host/env" "alloc" (func (param i32) (result i32)))"#, "with the type"),
        (r#"(import "env" "abort" (func))"#, "env::abort"),
    ];
    for (import, expected) in cases {
        let wat = format!(
            r#"(module {import}
                 (func (export "describe") (result i32) i32.const 0)
                 (func (export "call") (result i32) i32.const 0))"#
        );
        let error = Plugin::builder_from_bytes(wat.into_bytes()).build().await.unwrap_err();
        assert!(error.is_load(), "{error:?}");
        assert!(error.to_string().contains(expected), "{expected}: {error}");
    }
}

#[tokio::test]
async fn a_panic_message_reaches_the_error() {
    let plugin = Plugin::load(fixture("hostile")).await.expect("load");
    let error = plugin.call_tool("panic", json!({})).await.unwrap_err();
    assert!(error.is_trap(), "{error:?}");
    assert!(error.to_string().contains("the hostile plugin panicked on purpose"), "{error}");
}

#[tokio::test]
async fn calls_beyond_the_pool_size_wait_for_the_one_instance() {
    let plugin = Plugin::builder_from_file(fixture("hostile")).with_pool_size(1).build().await.expect("load");
    // (The counter lives in the instance: on Cranelift's code, which the
    // instance keeps.)
    assert_eq!(plugin.settled_tier().await, Tier::Optimized);
    let calls: Vec<_> = (0..6)
        .map(|_| {
            let plugin = plugin.clone();
            tokio::spawn(async move { plugin.call_tool("counter", json!({})).await })
        })
        .collect();
    let mut counts = Vec::new();
    for call in calls {
        let result = call.await.expect("task").expect("counter");
        counts.push(result.texts().next().unwrap().parse::<u32>().unwrap());
    }
    counts.sort();
    // One instance served them all, one after the other.
    assert_eq!(counts, [1, 2, 3, 4, 5, 6]);
    let stats = plugin.pool_stats();
    assert_eq!((stats.size, stats.idle, stats.busy), (1, 1, 0));
    assert!(stats.idle_memory_bytes > 0);
}

#[tokio::test]
async fn a_dropped_call_frees_its_instance_for_the_next() {
    let plugin = Plugin::builder_from_file(fixture("hostile")).with_pool_size(1).build().await.expect("load");
    // Give up on a long call: its instance is discarded, its permit freed.
    let spin = tokio::time::timeout(Duration::from_millis(200), plugin.call_tool("spin", json!({}))).await;
    assert!(spin.is_err(), "the spin call should still have been running");
    let started = Instant::now();
    let result = plugin.call_tool("counter", json!({})).await.expect("counter");
    assert_eq!(result.texts().next(), Some("1"), "a fresh instance, not the abandoned one");
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// On a multi-threaded runtime a load looks a cache hit up on its own
/// thread (`block_in_place`) rather than a blocking one: the same module,
/// for both flavours, and loads joined in one task each get theirs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_hit_on_a_multi_threaded_runtime_loads_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let cache = ModuleCache::at(dir.path());
    for path in [example("calculator"), Flavour::Component.example("calculator")] {
        let load = || Plugin::builder_from_file(&path).with_module_cache(cache.clone()).build();
        let first = load().await.expect("first load");
        assert_eq!(first.compile_info().cache, CacheStatus::Miss, "{}", path.display());
        assert_eq!(first.settled_tier().await, Tier::Optimized);
        let (second, third) = tokio::join!(load(), load());
        for plugin in [second.expect("second load"), third.expect("third load")] {
            assert_eq!(plugin.compile_info().cache, CacheStatus::Hit, "{}", path.display());
            assert_eq!(plugin.compile_info().tier, Tier::Optimized);
            let result = plugin.call_tool("add", json!({"a": 2, "b": 3})).await.expect("add");
            assert_eq!(result.texts().next(), Some("5"));
        }
    }
}

#[tokio::test]
async fn the_second_load_comes_from_the_compiled_module_cache() {
    let dir = tempfile::tempdir().unwrap();
    let cache = ModuleCache::at(dir.path());
    let load = || Plugin::builder_from_file(example("calculator")).with_module_cache(cache.clone()).build();
    let first = load().await.expect("first load");
    assert_eq!(first.compile_info().cache, CacheStatus::Miss);
    // It started on the baseline compiler's code; Cranelift's, compiled
    // in the background, is what the cache keeps.
    assert_eq!(first.compile_info().tier, Tier::Baseline);
    assert_eq!(first.call_tool("add", json!({"a": 2, "b": 2})).await.expect("add").texts().next(), Some("4"));
    assert_eq!(first.settled_tier().await, Tier::Optimized);
    assert_eq!(first.tier(), Tier::Optimized);
    assert_eq!(first.call_tool("add", json!({"a": 2, "b": 1})).await.expect("add").texts().next(), Some("3"));
    let second = load().await.expect("second load");
    assert_eq!(second.compile_info().cache, CacheStatus::Hit);
    assert_eq!(second.compile_info().tier, Tier::Optimized);
    let result = second.call_tool("add", json!({"a": 2, "b": 3})).await.expect("add");
    assert_eq!(result.texts().next(), Some("5"));

    let disabled = Plugin::builder_from_file(example("calculator"))
        .with_module_cache(ModuleCache::disabled())
        .build()
        .await
        .expect("load");
    assert_eq!(disabled.compile_info().cache, CacheStatus::Disabled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_module_loaded_many_times_at_once_is_compiled_once() {
    let dir = tempfile::tempdir().unwrap();
    let cache = ModuleCache::at(dir.path());
    let loads: Vec<_> = (0..8)
        .map(|i| {
            let cache = cache.clone();
            tokio::spawn(async move {
                Plugin::builder_from_file(example("calculator"))
                    .with_name(format!("calculator-{i}"))
                    .with_module_cache(cache)
                    .build()
                    .await
            })
        })
        .collect();
    let mut plugins = Vec::new();
    for load in loads {
        plugins.push(load.await.expect("task").expect("load"));
    }
    // (Each load's background compile is over: Cranelift's entry is written.)
    for plugin in &plugins {
        assert_eq!(plugin.settled_tier().await, Tier::Optimized);
    }
    let compiled = plugins.iter().filter(|p| p.compile_info().cache == CacheStatus::Miss).count();
    let shared = plugins.iter().filter(|p| p.compile_info().cache == CacheStatus::Hit).count();
    assert_eq!((compiled, shared), (1, 7), "one load compiles; the others get its module or its cache entry");
    for plugin in &plugins {
        let result = plugin.call_tool("add", json!({"a": 2, "b": 3})).await.expect("add");
        assert_eq!(result.texts().next(), Some("5"));
    }
    assert_eq!(cache_entries(dir.path()).len(), 1);
}

/// How many times this process maps code from files under `dir`: the
/// executable regions (an instance's linear memory may map its data
/// segments from the entry too, copy-on-write, but that is the instance's).
fn mappings_under(dir: &std::path::Path) -> usize {
    let dir = dir.to_str().expect("a UTF-8 temporary directory");
    let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
    maps.lines().filter(|l| l.contains(dir) && l.split_whitespace().nth(1) == Some("r-xp")).count()
}

#[tokio::test]
async fn a_module_loaded_again_shares_the_mapping_a_plugin_holds() {
    for plugin in [example("calculator"), example("calculator").with_extension("component.wasm")] {
        let dir = tempfile::tempdir().unwrap();
        let cache = ModuleCache::at(dir.path());
        let load =
            |name: &str| Plugin::builder_from_file(&plugin).with_name(name).with_module_cache(cache.clone()).build();
        // The first load compiles (its module is in memory, not mapped) and
        // writes the entry.
        let first = load("first").await.expect("load");
        assert_eq!(first.settled_tier().await, Tier::Optimized);
        drop(first);
        assert_eq!(mappings_under(dir.path()), 0, "{}", plugin.display());

        let a = load("a").await.expect("load");
        assert_eq!(a.compile_info().cache, CacheStatus::Hit);
        let once = mappings_under(dir.path());
        assert!(once > 0, "the entry is mapped: {}", plugin.display());
        let b = load("b").await.expect("load");
        assert_eq!(b.compile_info().cache, CacheStatus::Hit);
        assert_eq!(mappings_under(dir.path()), once, "the second load maps nothing more: {}", plugin.display());
        for plugin in [&a, &b] {
            let result = plugin.call_tool("add", json!({"a": 2, "b": 3})).await.expect("add");
            assert_eq!(result.texts().next(), Some("5"));
        }
        // The mapping goes with the last plugin that holds it.
        drop(a);
        assert_eq!(mappings_under(dir.path()), once, "{}", plugin.display());
        drop(b);
        assert_eq!(mappings_under(dir.path()), 0, "{}", plugin.display());
        let c = load("c").await.expect("load");
        assert_eq!(mappings_under(dir.path()), once, "{}", plugin.display());
        let result = c.call_tool("add", json!({"a": 2, "b": 3})).await.expect("add");
        assert_eq!(result.texts().next(), Some("5"));
    }
}

fn cache_entries(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "cwasm"))
        .collect()
}

#[tokio::test]
async fn a_corrupt_or_truncated_cache_entry_is_rebuilt_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let cache = ModuleCache::at(dir.path());
    let load = || async {
        // Each load's background compile over, its entry written.
        let plugin = Plugin::builder_from_file(example("calculator")).with_module_cache(cache.clone()).build().await?;
        plugin.settled_tier().await;
        Ok::<_, toolhost::Error>(plugin)
    };
    load().await.expect("fill the cache");
    let entries = cache_entries(dir.path());
    assert_eq!(entries.len(), 1, "{entries:?}");
    let entry = &entries[0];

    // Flip one byte of the machine code.
    let mut bytes = std::fs::read(entry).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(entry, &bytes).unwrap();
    let rebuilt = load().await.expect("load despite the corrupt entry");
    match &rebuilt.compile_info().cache {
        CacheStatus::Rebuilt(reason) => assert!(reason.contains("checksum"), "{reason}"),
        other => panic!("expected a rebuild, got {other:?}"),
    }
    assert_eq!(rebuilt.call_tool("add", json!({"a": 1, "b": 1})).await.unwrap().texts().next(), Some("2"));
    assert_eq!(load().await.unwrap().compile_info().cache, CacheStatus::Hit, "the entry was rewritten");

    // Cut it short.
    let bytes = std::fs::read(entry).unwrap();
    std::fs::write(entry, &bytes[..40]).unwrap();
    assert!(matches!(load().await.unwrap().compile_info().cache, CacheStatus::Rebuilt(_)));

    // A well-formed entry (its own key, from a sound entry's trailer:
    // key, length, CRC-32, magic) whose payload is not a module wasmtime
    // accepts.
    load().await.expect("a sound entry again");
    let sound = std::fs::read(entry).unwrap();
    let key = sound[sound.len() - 60..sound.len() - 28].to_vec();
    let payload = b"\x7fELF and then nothing useful";
    let mut forged = payload.to_vec();
    forged.extend_from_slice(&key);
    forged.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    forged.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    forged.extend_from_slice(b"toolhost-cwasm\n\x04");
    std::fs::write(entry, forged).unwrap();
    match &load().await.unwrap().compile_info().cache {
        CacheStatus::Rebuilt(reason) => assert!(reason.contains("wasmtime refused"), "{reason}"),
        other => panic!("expected a rebuild, got {other:?}"),
    }
}

#[tokio::test]
async fn a_cache_entry_copied_under_another_plugins_key_is_rebuilt_not_run() {
    let dir = tempfile::tempdir().unwrap();
    let cache = ModuleCache::at(dir.path());
    let load = |name: &str| {
        let builder = Plugin::builder_from_file(example(name)).with_module_cache(cache.clone());
        async move {
            let plugin = builder.build().await?;
            plugin.settled_tier().await;
            Ok::<_, toolhost::Error>(plugin)
        }
    };
    load("calculator").await.expect("fill the cache");
    let calculator_entry = cache_entries(dir.path()).pop().unwrap();
    load("text").await.expect("fill the cache");
    let text_entry = cache_entries(dir.path()).into_iter().find(|e| *e != calculator_entry).unwrap();
    // The calculator's machine code under the text plugin's name.
    std::fs::copy(&calculator_entry, &text_entry).unwrap();
    let text = load("text").await.expect("load text");
    match &text.compile_info().cache {
        CacheStatus::Rebuilt(reason) => assert!(reason.contains("another plugin"), "{reason}"),
        other => panic!("expected a rebuild, got {other:?}"),
    }
    assert!(text.tools().iter().any(|t| t.name == "reverse"), "the text plugin runs its own code");
    let reversed = text.call_tool("reverse", json!({"text": "abc"})).await.expect("reverse");
    assert_eq!(reversed.texts().next(), Some("cba"));
    assert_eq!(load("text").await.unwrap().compile_info().cache, CacheStatus::Hit, "the entry was rewritten");
}

#[cfg(unix)]
#[tokio::test]
async fn a_cache_directory_other_users_may_write_is_not_used() {
    use std::os::unix::fs::PermissionsExt as _;
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("modules");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let load = || async {
        let plugin =
            Plugin::builder_from_file(example("calculator")).with_module_cache(ModuleCache::at(&dir)).build().await?;
        plugin.settled_tier().await;
        Ok::<_, toolhost::Error>(plugin)
    };
    for _ in 0..2 {
        let plugin = load().await.expect("loads by compiling");
        match &plugin.compile_info().cache {
            CacheStatus::Unsafe(reason) => assert!(reason.contains("written by other users"), "{reason}"),
            other => panic!("expected the cache refused, got {other:?}"),
        }
        assert_eq!(plugin.call_tool("add", json!({"a": 2, "b": 3})).await.unwrap().texts().next(), Some("5"));
    }
    assert!(cache_entries(&dir).is_empty(), "nothing was written to it");

    // Private again, but owned by another user (only root can arrange that).
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    if std::os::unix::fs::chown(&dir, Some(65534), None).is_ok() {
        match &load().await.unwrap().compile_info().cache {
            CacheStatus::Unsafe(reason) => assert!(reason.contains("owned by another user"), "{reason}"),
            other => panic!("expected the cache refused, got {other:?}"),
        }
    }
}

#[test]
fn the_cli_fills_and_then_uses_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = example("text");
    let run_with = |cache: &std::ffi::OsStr, compilers: &str| {
        let output = std::process::Command::new(toolhost_tests::toolhost())
            .args(["describe", plugin.to_str().unwrap()])
            .env("TOOLHOST_CACHE_DIR", cache)
            .env("TOOLHOST_LOG", "toolhost=debug")
            .env("TOOLHOST_COMPILERS", compilers)
            .output()
            .expect("run toolhost");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let run = |cache: &std::ffi::OsStr| run_with(cache, "");
    let first = run(dir.path().as_os_str());
    assert!(first.contains("cache=miss") && first.contains("tier=baseline"), "{first}");
    // Cranelift's entry for the plugin (written by the background compile
    // before the process ended), and the Extism kernel's for each compiler.
    assert_eq!(cache_entries(dir.path()).len(), 3);
    let second = run(dir.path().as_os_str());
    assert!(second.contains("cache=hit"), "{second}");
    // `off` turns it off.
    let off = run("off".as_ref());
    assert!(off.contains("cache=disabled"), "{off}");
    // `TOOLHOST_COMPILERS=cranelift`: a miss waits for Cranelift.
    let fresh = tempfile::tempdir().unwrap();
    let cranelift = run_with(fresh.path().as_os_str(), "cranelift");
    assert!(cranelift.contains("cache=miss") && cranelift.contains("tier=optimized"), "{cranelift}");
    assert!(!cranelift.contains("tier=baseline"), "{cranelift}");
    let unknown = run_with("off".as_ref(), "fastest");
    assert!(unknown.contains("TOOLHOST_COMPILERS=fastest is not"), "{unknown}");
}

#[tokio::test]
async fn redirects_are_followed_only_to_granted_hosts() {
    let redirect =
        |to: &str| format!("HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    let hello = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello".to_owned();
    let granted = Policy::default().allow_host("127.0.0.1");
    let plugin = Plugin::builder_from_file(fixture("hostile")).with_policy(granted).build().await.expect("load");

    // Same host: followed.
    let (port, server) = serve_http(vec![redirect("/next"), hello.clone()]);
    let result = plugin.call_tool("http", json!({"url": format!("http://127.0.0.1:{port}/")})).await.expect("http");
    assert_eq!(result.texts().next(), Some("hello"));
    assert_eq!(server.join().unwrap(), 2);

    // Another host (`localhost` is not granted, though it is the same
    // machine): refused before the second request is sent.
    let (port, server) = serve_http(vec![redirect("http://localhost:{port}/"), hello]);
    let error = plugin.call_tool("http", json!({"url": format!("http://127.0.0.1:{port}/")})).await.unwrap_err();
    assert!(error.is_denied(), "{error:?}");
    assert!(error.to_string().contains("localhost"), "{error}");
    drop(server); // it waits for a second request that never comes
}

/// A grant of a name reaches the public addresses it resolves to, and no
/// other unless a grant names that address too: a name's owner cannot
/// point it at the host's own services (DNS rebinding). `*host` matches the
/// name `localhost` without naming an address; `localhost` resolves to
/// loopback addresses, which are not public.
#[tokio::test]
async fn a_granted_name_does_not_reach_an_address_that_is_not_granted() {
    let hello = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello".to_owned();
    let by_name = Policy::default().allow_host("*host");
    let plugin = Plugin::builder_from_file(fixture("hostile")).with_policy(by_name).build().await.expect("load");
    let (port, server) = serve_http(vec![hello.clone()]);
    let error = plugin.call_tool("http", json!({"url": format!("http://localhost:{port}/")})).await.unwrap_err();
    assert!(error.is_denied(), "{error:?}");
    let message = error.to_string();
    assert!(message.contains("`localhost` resolves to") && message.contains("127.0.0.1"), "{message}");
    assert!(message.contains("not a public address") || message.contains("none of them a public address"), "{message}");
    drop(server); // nothing was sent: it waits for a request that never comes

    // The address granted as well: reached (by the name, at that address).
    let both = Policy::default().allow_host("*host").allow_host("127.0.0.1");
    let plugin = Plugin::builder_from_file(fixture("hostile")).with_policy(both).build().await.expect("load");
    let (port, server) = serve_http(vec![hello]);
    let result = plugin.call_tool("http", json!({"url": format!("http://localhost:{port}/")})).await.expect("http");
    assert_eq!(result.texts().next(), Some("hello"));
    assert_eq!(server.join().unwrap(), 1);
}

#[tokio::test]
async fn credentials_are_not_sent_on_to_another_origin() {
    let redirect =
        |to: &str| format!("HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    let hello = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello".to_owned();
    let granted = Policy::default().allow_host("127.0.0.1").allow_host("localhost");
    let plugin = Plugin::builder_from_file(fixture("hostile")).with_policy(granted).build().await.expect("load");
    // (`Proxy-Authorization` is refused outright: `sandbox.rs`,
    // `a_plugin_may_not_set_the_host_header`.)
    let headers = json!({"Authorization": "Bearer s3cret", "cookie": "session=s3cret", "X-Plain": "kept"});

    // Same origin: the credentials go along.
    let (port, server) = serve_http_recording(vec![redirect("/next"), hello.clone()]);
    let url = format!("http://127.0.0.1:{port}/");
    let result = plugin.call_tool("http", json!({"url": url, "headers": headers})).await.expect("http");
    assert_eq!(result.texts().next(), Some("hello"));
    let requests = server.join().unwrap();
    assert_eq!(requests.len(), 2);
    assert!(requests[1].to_ascii_lowercase().contains("authorization: bearer s3cret"), "{}", requests[1]);

    // Another host (granted too): the first request has them, the
    // redirected one does not.
    let (port, server) = serve_http_recording(vec![redirect("http://localhost:{port}/next"), hello]);
    let url = format!("http://127.0.0.1:{port}/");
    let result = plugin.call_tool("http", json!({"url": url, "headers": headers})).await.expect("http");
    assert_eq!(result.texts().next(), Some("hello"));
    let requests = server.join().unwrap();
    assert_eq!(requests.len(), 2);
    assert!(requests[0].contains("s3cret"), "{}", requests[0]);
    assert!(requests[1].starts_with("GET /next"), "{}", requests[1]);
    assert!(!requests[1].contains("s3cret"), "credentials went to another origin: {}", requests[1]);
    assert!(requests[1].to_ascii_lowercase().contains("x-plain: kept"), "{}", requests[1]);
}
