//! Components next to Extism modules: the same tool code built both ways
//! (`calculator`, `faults`) must describe, answer, fail and be stopped the
//! same way. (Validation runs against both builds in `validation`.)

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost::{Plugin, PluginKind, Policy, Tier};
use toolhost_tests::{Flavour, json_stdout, run_toolhost};

async fn load(path: std::path::PathBuf) -> Plugin {
    Plugin::load(&path).await.unwrap_or_else(|e| panic!("load {}: {e}", path.display()))
}

#[tokio::test]
async fn both_builds_of_calculator_describe_and_answer_alike() {
    let module = load(Flavour::Extism.example("calculator")).await;
    let component = load(Flavour::Component.example("calculator")).await;
    assert_eq!(module.kind(), PluginKind::Extism);
    assert_eq!(component.kind(), PluginKind::Component);
    assert_eq!(component.name(), "calculator", "the `.component` suffix is not part of the name");
    assert_eq!(serde_json::to_value(module.describe()).unwrap(), serde_json::to_value(component.describe()).unwrap());
    for (tool, arguments) in [
        ("add", json!({"a": 2, "b": 3})),
        ("divide", json!({"a": 1, "b": 0})),
        ("multiply", json!({"a": 1e300, "b": 1e300})),
        ("subtract", json!({"a": 0.1, "b": 0.3})),
    ] {
        let ours = module.call_tool(tool, arguments.clone()).await.expect("module");
        let theirs = component.call_tool(tool, arguments.clone()).await.expect("component");
        assert_eq!(serde_json::to_value(ours).unwrap(), serde_json::to_value(theirs).unwrap(), "{tool} {arguments}");
    }
    let refused = component.call_tool("add", json!({"a": "two"})).await.unwrap_err();
    assert!(refused.is_invalid_arguments(), "{refused:?}");
    // Arguments the schema allows but the tool's type does not (unknown
    // fields are fine; a wrong type slips past a lenient call): the SDK's
    // tool error, the same from both builds.
    let args = serde_json::Map::from_iter([("a".to_owned(), json!(true)), ("b".to_owned(), json!(1))]);
    let ours = module.call_tool_unvalidated("add", args.clone()).await.expect("tool error");
    let theirs = component.call_tool_unvalidated("add", args).await.expect("tool error");
    assert!(ours.is_error() && theirs.is_error());
    assert_eq!(serde_json::to_value(ours).unwrap(), serde_json::to_value(theirs).unwrap());
}

#[test]
fn the_cli_prints_the_same_for_both_builds() {
    let call = |path: std::path::PathBuf| {
        let output = run_toolhost(&["call", path.to_str().unwrap(), "add", r#"{"a":2,"b":3}"#], None);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        json_stdout(&output)
    };
    let module = call(Flavour::Extism.example("calculator"));
    assert_eq!(module, call(Flavour::Component.example("calculator")));
    assert_eq!(module["content"][0]["text"], "5");
    let describe = |path: std::path::PathBuf| json_stdout(&run_toolhost(&["describe", path.to_str().unwrap()], None));
    assert_eq!(describe(Flavour::Extism.example("text")), describe(Flavour::Component.example("text")));
}

async fn faults(flavour: Flavour, policy: Policy) -> Plugin {
    Plugin::builder_from_file(flavour.fixture("faults")).with_policy(policy).build().await.expect("load faults")
}

fn text(result: &toolhost::CallToolResult) -> String {
    result.texts().next().unwrap_or_default().to_owned()
}

/// Every kind of fault, from either build, stopped and reported alike.
async fn faults_are_stopped_and_reported(flavour: Flavour) {
    let mut policy = Policy::default();
    policy.limits.timeout = Some(Duration::from_millis(300));
    policy.limits.memory_max_bytes = Some(32 << 20);
    let plugin = faults(flavour, policy).await;

    let started = Instant::now();
    let error = plugin.call_tool("spin", json!({})).await.unwrap_err();
    assert!(error.is_timeout(), "{error:?}");
    // Generous: it only tells "stopped" from "ran on" (the spin never ends).
    assert!(started.elapsed() < Duration::from_secs(25), "stopped: {:?}", started.elapsed());

    let error = plugin.call_tool("hog", json!({})).await.unwrap_err();
    assert!(error.is_memory_limit(), "{error:?}");

    let error = plugin.call_tool("panic", json!({})).await.unwrap_err();
    assert!(error.is_trap(), "{error:?}");
    assert!(error.to_string().contains("the faults plugin panicked on purpose"), "{error}");

    // 20 MiB of output, over the 16 MiB cap (under the default memory
    // limit: the Extism build needs room for its JSON too).
    let roomy = faults(flavour, Policy::default()).await;
    let error = roomy.call_tool("huge", json!({"mib": 20})).await.unwrap_err();
    assert!(error.is_output_too_large(), "{error:?}");

    let failed = plugin.call_tool("fail", json!({})).await.expect("a tool error is a result");
    assert!(failed.is_error());
    assert_eq!(text(&failed), "this tool always fails");

    let mut fuel = Policy::default();
    fuel.limits.fuel = Some(5_000_000);
    let error = faults(flavour, fuel).await.call_tool("spin", json!({})).await.unwrap_err();
    assert!(error.is_fuel_exhausted(), "{error:?}");
}

/// Healthy instances are reused; one that faulted is replaced.
async fn instances_are_reused_until_they_fault(flavour: Flavour) {
    let plugin = Plugin::builder_from_file(flavour.fixture("faults")).with_pool_size(1).build().await.expect("load");
    // (On Cranelift's code, which the instance then keeps.)
    assert_eq!(plugin.settled_tier().await, Tier::Optimized);
    let count = || async { text(&plugin.call_tool("counter", json!({})).await.expect("counter")) };
    assert_eq!(count().await, "1");
    assert_eq!(count().await, "2");
    assert!(plugin.call_tool("panic", json!({})).await.is_err());
    assert_eq!(count().await, "1", "a fresh instance after the fault");
    // A call given up on takes its instance with it.
    let gave_up = tokio::time::timeout(Duration::from_millis(200), plugin.call_tool("spin", json!({}))).await;
    assert!(gave_up.is_err());
    assert_eq!(count().await, "1");
}

/// Nothing is visible unless granted; config is the way in.
async fn the_sandbox_grants_nothing_by_default(flavour: Flavour) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "hello").unwrap();
    let plugin = faults(flavour, Policy::default()).await;
    let hidden = plugin.call_tool("read_file", json!({"path": "/data/a.txt"})).await.expect("tool error");
    assert!(hidden.is_error(), "{hidden:?}");
    let passwd = plugin.call_tool("read_file", json!({"path": "/etc/passwd"})).await.expect("tool error");
    assert!(passwd.is_error(), "{passwd:?}");
    assert_eq!(text(&plugin.call_tool("env", json!({"name": "HOME"})).await.unwrap()), "<unset>");
    assert_eq!(text(&plugin.call_tool("env", json!({"name": "PATH"})).await.unwrap()), "<unset>");

    let granted = Plugin::builder_from_file(flavour.fixture("faults"))
        .with_allowed_path(format!("{}:/data", dir.path().display()).parse().unwrap())
        .with_config("greeting", "hi")
        .build()
        .await
        .expect("load");
    assert_eq!(text(&granted.call_tool("read_file", json!({"path": "/data/a.txt"})).await.unwrap()), "hello");
    assert_eq!(text(&granted.call_tool("config_value", json!({"name": "greeting"})).await.unwrap()), "hi");
    assert_eq!(text(&granted.call_tool("config_value", json!({"name": "other"})).await.unwrap()), "<unset>");
}

/// One call's timeout does not stop another call on the same plugin.
async fn a_timeout_stops_only_its_own_call(flavour: Flavour) {
    let mut policy = Policy::default();
    policy.limits.timeout = Some(Duration::from_millis(500));
    let plugin = Plugin::builder_from_file(flavour.fixture("faults"))
        .with_policy(policy)
        .with_pool_size(2)
        .build()
        .await
        .expect("load");
    let spinning = {
        let plugin = plugin.clone();
        tokio::spawn(async move { plugin.call_tool("spin", json!({})).await })
    };
    let sleeping = {
        let plugin = plugin.clone();
        tokio::spawn(async move { plugin.call_tool("sleep", json!({"ms": 300})).await })
    };
    assert!(spinning.await.unwrap().unwrap_err().is_timeout());
    assert_eq!(text(&sleeping.await.unwrap().expect("the other call finishes")), "awake");
}

both_flavours!(
    faults_are_stopped_and_reported,
    instances_are_reused_until_they_fault,
    the_sandbox_grants_nothing_by_default,
    a_timeout_stops_only_its_own_call,
);

#[tokio::test]
async fn a_component_that_is_not_a_plugin_is_refused_with_a_reason() {
    let empty = Plugin::builder_from_bytes(b"(component)".to_vec()).build().await.unwrap_err();
    assert!(empty.is_load(), "{empty:?}");
    assert!(empty.to_string().contains("not a `toolhost:plugin` component"), "{empty}");

    let importer = r#"(component (import "acme:secrets/vault" (instance (export "get" (func)))))"#;
    let error = Plugin::builder_from_bytes(importer.as_bytes().to_vec()).build().await.unwrap_err();
    assert!(error.to_string().contains("acme:secrets/vault"), "{error}");

    let garbage = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00, 0xff, 0xff];
    let error = Plugin::builder_from_bytes(garbage.to_vec()).build().await.unwrap_err();
    assert!(error.to_string().contains("not a valid Wasm component"), "{error}");
}

#[test]
fn check_and_bench_run_on_components() {
    let calculator = Flavour::Component.example("calculator");
    let output = run_toolhost(&["check", calculator.to_str().unwrap(), "--json"], None);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stdout));
    let report: Value = json_stdout(&output);
    assert_eq!(report["passed"], true, "{report}");
    let output = run_toolhost(
        &["bench", calculator.to_str().unwrap(), "add", r#"{"a":1,"b":2}"#, "--calls", "200", "--json"],
        None,
    );
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let report = json_stdout(&output);
    assert_eq!(report["calls"], 200);
    assert_eq!(report["failures"], 0);
}
