//! Plugins on the baseline compiler's code (Winch): the same bounds hold
//! there, a plugin that missed the cache moves to Cranelift's code, and
//! what Winch cannot compile, or must not swap, waits for Cranelift.

use std::time::Duration;

use serde_json::json;
use toolhost::{Compilers, ModuleCache, Policy, Runtime, Tier};
use toolhost_tests::{Flavour, example, fixture};

fn text_of(result: &toolhost::CallToolResult) -> String {
    result.texts().next().unwrap_or_default().to_owned()
}

fn runtime(compilers: Compilers) -> Runtime {
    Runtime::builder().with_compilers(compilers).build()
}

both_flavours!(a_plugin_on_the_baseline_compilers_code_is_held_to_every_bound);

/// Time, fuel and memory are kept by the code Winch emits as by
/// Cranelift's (epoch checks, fuel counting, the memory limiter), and a
/// trap is a fault like any other.
async fn a_plugin_on_the_baseline_compilers_code_is_held_to_every_bound(flavour: Flavour) {
    let runtime = runtime(Compilers::Baseline);
    let mut policy = Policy::default();
    policy.limits.timeout = Some(Duration::from_millis(300));
    policy.limits.memory_max_bytes = Some(32 << 20);
    let plugin = runtime.plugin_from_file(flavour.fixture("faults")).with_policy(policy).build().await.expect("load");
    assert_eq!(plugin.compile_info().tier, Tier::Baseline);
    assert_eq!(plugin.tier(), Tier::Baseline);

    let error = plugin.call_tool("spin", json!({})).await.unwrap_err();
    assert!(error.is_timeout(), "{error:?}");
    let error = plugin.call_tool("hog", json!({})).await.unwrap_err();
    assert!(error.is_memory_limit(), "{error:?}");
    let error = plugin.call_tool("panic", json!({})).await.unwrap_err();
    assert!(error.is_trap(), "{error:?}");
    assert!(error.to_string().contains("the faults plugin panicked on purpose"), "{error}");
    assert_eq!(text_of(&plugin.call_tool("counter", json!({})).await.expect("counter")), "1");

    let mut fuel = Policy::default();
    fuel.limits.fuel = Some(5_000_000);
    let metered = runtime.plugin_from_file(flavour.fixture("faults")).with_policy(fuel).build().await.expect("load");
    assert_eq!(metered.compile_info().tier, Tier::Baseline);
    let error = metered.call_tool("spin", json!({})).await.unwrap_err();
    assert!(error.is_fuel_exhausted(), "{error:?}");

    // Only the baseline compiler: nothing moves.
    assert_eq!(plugin.settled_tier().await, Tier::Baseline);
    assert_eq!(plugin.pool_stats().idle_on_baseline, plugin.pool_stats().idle);
}

#[tokio::test]
async fn the_hostile_plugin_on_the_baseline_compilers_code_reaches_nothing_it_was_not_granted() {
    let plugin = runtime(Compilers::Baseline).plugin_from_file(fixture("hostile")).build().await.expect("load");
    assert_eq!(plugin.compile_info().tier, Tier::Baseline);
    for name in ["PATH", "HOME"] {
        let result = plugin.call_tool("env", json!({"name": name})).await.expect("env");
        assert_eq!(text_of(&result), "<unset>", "{name} leaked");
    }
    let result = plugin.call_tool("read_file", json!({"path": "/etc/passwd"})).await.expect("a result");
    assert!(result.is_error(), "/etc/passwd was readable: {result:?}");
    assert!(!text_of(&result).contains("root:"));

    // The Extism kernel's Wasm half is Winch's code too: outside its blocks
    // a plugin reads zeros, and an earlier call's input is gone.
    let one = runtime(Compilers::Baseline).plugin_from_file(fixture("hostile")).with_pool_size(1).build().await;
    let one = one.expect("load");
    let secret = "another caller's secret 51c0de";
    one.call_tool("ok", json!({"secret": secret, "padding": "x".repeat(8192)})).await.expect("the earlier call");
    let seen = crate::bounds::probe(&one, secret).await;
    assert_eq!(seen["outside"], json!([0, 0, 0, 0, 0, 0, 0, 0, 0]), "{seen}");
    assert_eq!(seen["found"], false, "the earlier call's input was readable: {seen}");
    assert_eq!(crate::bounds::probe(&one, "needle_hex").await["found"], true);
}

#[tokio::test]
async fn a_plugin_that_missed_the_cache_moves_to_cranelifts_code_and_the_cache_keeps_that() {
    let dir = tempfile::tempdir().unwrap();
    let runtime =
        Runtime::builder().with_compilers(Compilers::Tiered).with_module_cache(ModuleCache::at(dir.path())).build();
    let load = || runtime.plugin_from_file(fixture("hostile")).with_pool_size(1).build();
    let plugin = load().await.expect("load");
    assert_eq!(plugin.compile_info().tier, Tier::Baseline);
    // The instance that ran `describe`, on Winch's code, waits in the pool.
    // Calls answer whichever code they run on.
    for _ in 0..3 {
        assert_eq!(text_of(&plugin.call_tool("ok", json!({})).await.expect("ok")), "fine");
    }
    assert_eq!(plugin.settled_tier().await, Tier::Optimized);
    assert_eq!(plugin.tier(), Tier::Optimized);
    // The next call replaces the pool's Winch instance; the counter (kept
    // in the instance) then counts on Cranelift's code.
    let first = text_of(&plugin.call_tool("counter", json!({})).await.expect("counter"));
    let second = text_of(&plugin.call_tool("counter", json!({})).await.expect("counter"));
    assert_eq!(second.parse::<u64>().unwrap(), first.parse::<u64>().unwrap() + 1);
    let stats = plugin.pool_stats();
    assert_eq!((stats.idle, stats.idle_on_baseline), (1, 0), "{stats:?}");

    // Cranelift's module is the one the cache kept: the next load starts on it.
    runtime.background_compiles_done().await;
    let again = load().await.expect("load");
    assert_eq!(again.compile_info().cache, toolhost::CacheStatus::Hit);
    assert_eq!(again.compile_info().tier, Tier::Optimized);
    assert_eq!(again.pool_stats().idle_on_baseline, 0);
}

#[tokio::test]
async fn calls_in_flight_while_the_code_is_replaced_all_answer() {
    let plugin = runtime(Compilers::Tiered)
        .plugin_from_file(example("calculator"))
        .with_pool_size(4)
        .build()
        .await
        .expect("load");
    assert_eq!(plugin.compile_info().tier, Tier::Baseline);
    // Four callers call until the plugin has moved, and a while after.
    let callers: Vec<_> = (0..4u64)
        .map(|caller| {
            let plugin = plugin.clone();
            tokio::spawn(async move {
                let mut after = 0;
                let mut n = 0u64;
                while after < 50 {
                    let result = plugin.call_tool("add", json!({"a": caller, "b": n})).await.expect("add");
                    assert_eq!(text_of(&result), (caller + n).to_string());
                    if plugin.tier() == Tier::Optimized {
                        after += 1;
                    }
                    n += 1;
                }
            })
        })
        .collect();
    let deadline = Duration::from_secs(120);
    for caller in callers {
        tokio::time::timeout(deadline, caller).await.expect("the plugin moved to Cranelift's code").expect("caller");
    }
    assert_eq!(plugin.pool_stats().idle_on_baseline, 0, "{:?}", plugin.pool_stats());
}

#[tokio::test]
async fn a_module_the_baseline_compiler_cannot_compile_waits_for_cranelift() {
    // A tail call: Winch does not compile the proposal, Cranelift does.
    let wasm = crate::bounds::table_plugin("(func $done) (func $tail (return_call $done))", "(call $tail)");
    let plugin = runtime(Compilers::Tiered).plugin_from_bytes(wasm.clone()).build().await.expect("load");
    assert_eq!(plugin.compile_info().tier, Tier::Optimized);
    assert_eq!(plugin.tier(), Tier::Optimized);
    // The tail call runs (the plugin then answers nothing, which is refused
    // as output, not as a fault).
    let ran = |error: toolhost::Error| matches!(error, toolhost::Error::InvalidOutput { .. });
    assert!(ran(plugin.call_tool("t", json!({})).await.unwrap_err()));
    // With the baseline compiler only, too.
    let plugin = runtime(Compilers::Baseline).plugin_from_bytes(wasm).build().await.expect("load");
    assert_eq!(plugin.compile_info().tier, Tier::Optimized);
    assert!(ran(plugin.call_tool("t", json!({})).await.unwrap_err()));
}

#[tokio::test]
async fn a_plugin_that_changes_its_tool_list_waits_for_cranelift() {
    // Its tool list lives in its one instance, which a move to Cranelift's
    // code would replace.
    let plugin = runtime(Compilers::Tiered).plugin_from_file(fixture("tool-list-changed")).build().await.expect("load");
    assert_eq!(plugin.compile_info().tier, Tier::Optimized);
    assert_eq!(plugin.settled_tier().await, Tier::Optimized);
}

#[tokio::test]
async fn cranelift_only_never_runs_the_baseline_compiler() {
    let plugin = runtime(Compilers::Cranelift).plugin_from_file(example("calculator")).build().await.expect("load");
    assert_eq!(plugin.compile_info().tier, Tier::Optimized);
    assert_eq!(text_of(&plugin.call_tool("add", json!({"a": 2, "b": 3})).await.expect("add")), "5");
    assert_eq!(plugin.pool_stats().idle_on_baseline, 0);
}
