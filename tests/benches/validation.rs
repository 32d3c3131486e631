//! Validation benchmarks (`cargo bench -p toolhost-tests --bench validation`).
//!
//! - validating a small arguments object (target: ≤ 1 µs median);
//! - validating a small result;
//! - the full `calculator.add` round trip with validation on and off
//!   (target: validation adds ≤ 5 %);
//! - a plugin with a pathological schema (`anyOf` of two `$ref`s, 30 deep:
//!   2^30 evaluations unbounded) refused at load, and the `calculator.add`
//!   round trip while such a plugin is loaded over and over beside it
//!   (target: the same as without it; never 100 ms).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use serde_json::json;
use toolhost::{Plugin, ValidationOptions};
use toolhost_tests::{doubling_schema, example, fixture};

fn load(runtime: &tokio::runtime::Runtime, validation: ValidationOptions) -> Plugin {
    let plugin = runtime
        .block_on(Plugin::builder_from_file(example("calculator")).with_validation(validation).build())
        .expect("load calculator (build it with `cargo test` or `cargo xtask build-plugins`)");
    // Measured on Cranelift's code, not the baseline compiler's it starts on.
    runtime.block_on(plugin.settled_tier());
    plugin
}

fn validation(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let validated = load(&runtime, ValidationOptions::default());
    let unvalidated = load(&runtime, ValidationOptions::off());

    let args = json!({"a": 2, "b": 3});
    c.bench_function("validate/arguments_small", |b| {
        b.iter_batched(|| args.clone(), |args| validated.validate_arguments("add", args), BatchSize::SmallInput)
    });
    let result = json!({"content": [{"type": "text", "text": "5"}], "structuredContent": {"result": 5.0}});
    c.bench_function("validate/result_small", |b| {
        b.iter_batched(|| result.clone(), |result| validated.validate_result("add", result), BatchSize::SmallInput)
    });

    let mut group = c.benchmark_group("call/calculator.add");
    group.bench_function("validated", |b| {
        b.iter(|| runtime.block_on(validated.call_tool("add", json!({"a": 2, "b": 3}))).expect("add"))
    });
    group.bench_function("unvalidated", |b| {
        b.iter(|| runtime.block_on(unvalidated.call_tool("add", json!({"a": 2, "b": 3}))).expect("add"))
    });
    group.finish();
}

fn pathological(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let calculator = load(&runtime, ValidationOptions::default());
    let describe = json!({"tools": [{"name": "t", "inputSchema": doubling_schema(30)}]}).to_string();
    let hostile = move || {
        Plugin::builder_from_file(fixture("scripted"))
            .with_config("describe", describe.clone())
            .with_pool_size(1)
            .build()
    };
    c.bench_function("validate/pathological_schema_refused_at_load", |b| {
        b.iter(|| runtime.block_on(hostile()).expect_err("refused"))
    });

    // The same plugin loaded (and refused) over and over on the same
    // runtime while the calculator is called.
    let stop = Arc::new(AtomicBool::new(false));
    let background = {
        let stop = Arc::clone(&stop);
        runtime.spawn(async move {
            let mut refused = 0u64;
            while !stop.load(Ordering::Relaxed) {
                hostile().await.expect_err("refused");
                refused += 1;
            }
            refused
        })
    };
    c.bench_function("call/calculator.add_beside_a_pathological_plugin", |b| {
        b.iter(|| runtime.block_on(calculator.call_tool("add", json!({"a": 2, "b": 3}))).expect("add"))
    });
    stop.store(true, Ordering::Relaxed);
    let refused = runtime.block_on(background).expect("background loads");
    assert!(refused > 0, "the pathological plugin was loaded beside the calls");
}

criterion_group!(benches, validation, pathological);
criterion_main!(benches);
