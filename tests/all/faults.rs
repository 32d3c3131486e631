//! Broken and hostile plugins: every way a plugin can fail becomes a typed
//! error, and the host (and the plugin's next call) carries on.

use serde_json::json;
use toolhost::{Error, FaultKind, OutputProblem, Plugin, Tier};
use toolhost_tests::fixture;

async fn hostile() -> Plugin {
    Plugin::load(fixture("hostile")).await.expect("load hostile fixture")
}

fn fault_kind(error: &Error) -> FaultKind {
    error.fault().unwrap_or_else(|| panic!("expected a fault, got {error:?}")).kind
}

#[tokio::test]
async fn a_panic_is_a_trap() {
    let error = hostile().await.call_tool("panic", json!({})).await.unwrap_err();
    assert!(error.is_trap() && error.is_plugin_error(), "{error:?}");
    let message = error.to_string();
    assert!(
        message.contains("`hostile`") && message.contains("tool `panic`") && message.contains("trapped"),
        "{message}"
    );
}

#[tokio::test]
async fn a_trap_keeps_wasmtimes_error_with_its_backtrace_as_the_source() {
    use std::error::Error as _;
    let error = hostile().await.call_tool("panic", json!({})).await.unwrap_err();
    // The chain: the library's error, its fault, then what wasmtime said.
    let fault = error.source().expect("the fault is the source");
    assert_eq!(fault.to_string(), error.fault().expect("a fault").to_string());
    let wasmtime = fault.source().expect("wasmtime's error is the fault's source");
    let mut chain = wasmtime.to_string();
    let mut next = wasmtime.source();
    while let Some(cause) = next {
        chain.push_str(&format!(": {cause}"));
        next = cause.source();
    }
    assert!(chain.contains("wasm backtrace"), "{chain}");
    assert!(chain.contains("unreachable"), "{chain}");
    // A fault of the plugin's own making (an Extism error) has no source.
    let error = hostile().await.call_tool("error", json!({})).await.unwrap_err();
    assert!(error.source().and_then(|fault| fault.source()).is_none(), "{error:?}");
}

#[tokio::test]
async fn an_abort_is_a_trap() {
    let error = hostile().await.call_tool("abort", json!({})).await.unwrap_err();
    assert_eq!(fault_kind(&error), FaultKind::Trap, "{error}");
}

#[tokio::test]
async fn an_extism_error_carries_the_plugins_message() {
    let error = hostile().await.call_tool("error", json!({})).await.unwrap_err();
    assert!(error.is_plugin_error_message(), "{error:?}");
    assert_eq!(error.fault().map(|f| f.message.as_str()), Some("the hostile plugin failed on purpose"));
}

#[tokio::test]
async fn a_wasi_exit_is_reported_with_its_code() {
    let error = hostile().await.call_tool("exit", json!({})).await.unwrap_err();
    assert_eq!(fault_kind(&error), FaultKind::Exit, "{error}");
    assert!(error.to_string().contains("exit code 7"), "{error}");
}

#[tokio::test]
async fn output_that_is_not_utf8_json_or_a_result_is_invalid_output() {
    let plugin = hostile().await;
    let problem = |error: Error| match error {
        Error::InvalidOutput { problem, .. } => problem,
        other => panic!("expected invalid output, got {other:?}"),
    };
    let not_utf8 = problem(plugin.call_tool("non_utf8", json!({})).await.unwrap_err());
    assert!(matches!(not_utf8, OutputProblem::NotUtf8 { valid_up_to: 0, .. }), "{not_utf8:?}");
    let not_json = problem(plugin.call_tool("not_json", json!({})).await.unwrap_err());
    assert!(matches!(not_json, OutputProblem::NotJson { .. }), "{not_json:?}");
    let not_result = problem(plugin.call_tool("not_a_result", json!({})).await.unwrap_err());
    let OutputProblem::Invalid { violations, .. } = not_result else { panic!("{not_result:?}") };
    assert!(violations.iter().any(|v| v.message.contains("content")), "{violations:?}");
}

#[tokio::test]
async fn a_faulted_instance_is_discarded_and_the_plugin_keeps_working() {
    // One idle instance at most, so every call after a fault must get a new one.
    let plugin = Plugin::builder_from_file(fixture("hostile")).with_max_idle_instances(1).build().await.expect("load");
    // (On Cranelift's code, which the instances then keep.)
    assert_eq!(plugin.settled_tier().await, Tier::Optimized);
    let counter = |plugin: &Plugin| {
        let plugin = plugin.clone();
        async move {
            let result = plugin.call_tool("counter", json!({})).await.expect("counter");
            result.texts().next().expect("text").to_owned()
        }
    };
    // The counter lives in the instance: healthy instances are reused.
    assert_eq!(counter(&plugin).await, "1");
    assert_eq!(counter(&plugin).await, "2");
    for tool in ["panic", "error", "exit", "abort"] {
        assert!(plugin.call_tool(tool, json!({})).await.is_err(), "{tool}");
        // The faulted instance is gone: the next call starts from a fresh one.
        assert_eq!(counter(&plugin).await, "1", "after {tool}");
        assert_eq!(plugin.call_tool("ok", json!({})).await.expect("ok").texts().next(), Some("fine"));
    }
}

#[tokio::test]
async fn files_that_are_not_plugins_fail_to_load_with_a_reason() {
    let missing = Plugin::load("/nonexistent/plugin.wasm").await.unwrap_err();
    assert!(matches!(missing, Error::Read { .. }) && missing.is_load(), "{missing:?}");

    let garbage = Plugin::builder_from_bytes(b"not wasm at all".to_vec()).build().await.unwrap_err();
    assert!(matches!(garbage, Error::Load { .. }), "{garbage:?}");
    assert!(garbage.to_string().contains("not a valid Wasm module"), "{garbage}");

    let wat = r#"(module (memory (export "memory") 1) (func (export "describe") (result i32) i32.const 0))"#;
    let no_call = Plugin::builder_from_bytes(wat.as_bytes().to_vec()).with_name("half").build().await.unwrap_err();
    assert!(no_call.to_string().contains("does not export `call`"), "{no_call}");
}
