//! Validation benchmarks (`cargo bench -p toolhost-tests --bench validation`).
//!
//! - validating a small arguments object (target: ≤ 1 µs median);
//! - validating a small result;
//! - the full `calculator.add` round trip with validation on and off
//!   (target: validation adds ≤ 5 %).

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use serde_json::json;
use toolhost::{Plugin, ValidationOptions};
use toolhost_tests::example;

fn load(runtime: &tokio::runtime::Runtime, validation: ValidationOptions) -> Plugin {
    runtime
        .block_on(Plugin::builder_from_file(example("calculator")).with_validation(validation).build())
        .expect("load calculator (build it with `cargo test` or `cargo xtask build-plugins`)")
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

criterion_group!(benches, validation);
criterion_main!(benches);
