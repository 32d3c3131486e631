//! The embedder's handles: a `Runtime` of its own (default limits, the
//! call observer, shutdown with calls in flight), the per-call
//! `CallContext` (cancellation, deadline, user id, `_meta`, log sink) and
//! host functions it supplies.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolhost::{CallContext, CallObserver, CallRecord, HostFunction, Limits, Plugin, PluginBuilder, Registry, Runtime};
use toolhost_tests::fixture;

/// Wait (polling, with a generous deadline) until `runtime` counts `n`
/// calls in flight.
async fn until_in_flight(runtime: &Runtime, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while runtime.calls_in_flight() != n {
        assert!(Instant::now() < deadline, "{} calls in flight, waited for {n}", runtime.calls_in_flight());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn hostile(runtime: &Runtime) -> Plugin {
    runtime.plugin_from_file(fixture("hostile")).with_pool_size(4).build().await.expect("load hostile")
}

#[test]
fn the_handles_can_be_shared_between_threads() {
    fn shared<T: Send + Sync + 'static>() {}
    shared::<Runtime>();
    shared::<Plugin>();
    shared::<PluginBuilder>();
    shared::<Registry>();
    shared::<CallContext>();
    shared::<HostFunction>();
    shared::<toolhost::Error>();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_waits_for_calls_that_finish_in_time() {
    let runtime = Runtime::new();
    let plugin = hostile(&runtime).await;
    // Two calls that wait in a host call (WASI sleep), then answer.
    let naps: Vec<_> = (0..2)
        .map(|_| {
            let plugin = plugin.clone();
            tokio::spawn(async move { plugin.call_tool("nap", json!({"ms": 200})).await })
        })
        .collect();
    until_in_flight(&runtime, 2).await;
    let report = runtime.shutdown(Duration::from_secs(600)).await;
    assert_eq!((report.in_flight, report.cancelled), (2, 0), "{report:?}");
    for nap in naps {
        let result = nap.await.expect("task").expect("the nap finished");
        assert!(!result.is_error());
    }
    assert_eq!(runtime.calls_in_flight(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_cancels_calls_still_running_after_the_grace_period() {
    let runtime = Runtime::new();
    let plugin = hostile(&runtime).await;
    let spin = {
        let plugin = plugin.clone();
        tokio::spawn(async move { plugin.call_tool("spin", json!({})).await })
    };
    let nap = {
        let plugin = plugin.clone();
        tokio::spawn(async move { plugin.call_tool("nap", json!({"ms": 600_000})).await })
    };
    until_in_flight(&runtime, 2).await;
    let report = runtime.shutdown(Duration::from_millis(100)).await;
    assert_eq!((report.in_flight, report.cancelled), (2, 2), "{report:?}");
    for call in [spin, nap] {
        let error = call.await.expect("task").unwrap_err();
        assert!(error.is_cancelled(), "{error:?}");
        assert!(error.to_string().contains("the runtime shut down"), "{error}");
    }
    assert!(runtime.is_shut_down());
    // Nothing new runs or loads on it, whatever else the call's context
    // says.
    let error = plugin.call_tool("ok", json!({})).await.unwrap_err();
    assert!(error.is_shut_down(), "{error:?}");
    let token = CancellationToken::new();
    token.cancel();
    let context = CallContext::new().with_cancellation(token);
    let error = plugin.call_tool_with("ok", json!({}), &context).await.unwrap_err();
    assert!(error.is_shut_down(), "{error:?}");
    let error = runtime.plugin_from_file(fixture("hostile")).build().await.unwrap_err();
    assert!(error.is_shut_down(), "{error:?}");
    // Its plugins can still be listed.
    assert!(plugin.tool("spin").is_some());
    // Another runtime is not affected.
    let other = hostile(&Runtime::new()).await;
    assert_eq!(other.call_tool("ok", json!({})).await.expect("ok").texts().next(), Some("fine"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_token_stops_the_call_and_the_plugin_goes_on() {
    let runtime = Runtime::new();
    let plugin = hostile(&runtime).await;
    let token = CancellationToken::new();
    let context = CallContext::new().with_cancellation(token.clone());
    let spin = {
        let plugin = plugin.clone();
        tokio::spawn(async move { plugin.call_tool_with("spin", json!({}), &context).await })
    };
    until_in_flight(&runtime, 1).await;
    token.cancel();
    let error = spin.await.expect("task").unwrap_err();
    assert!(error.is_cancelled(), "{error:?}");
    assert!(error.to_string().contains("its caller cancelled it"), "{error}");
    assert_eq!(runtime.calls_in_flight(), 0);
    // The spinning instance was discarded; a fresh one answers.
    let result = plugin.call_tool("counter", json!({})).await.expect("counter");
    assert_eq!(result.texts().next(), Some("1"));
}

#[tokio::test]
async fn a_context_deadline_stops_a_call_the_plugin_would_let_run() {
    let plugin = hostile(&Runtime::new()).await;
    assert_eq!(plugin.limits().timeout, Limits::default().timeout);
    let context = CallContext::new().with_timeout(Duration::from_millis(200));
    let error = plugin.call_tool_with("spin", json!({}), &context).await.unwrap_err();
    assert!(error.is_timeout(), "{error:?}");
    // The message names what stopped it: the caller's deadline, not the
    // plugin's own timeout.
    assert!(error.to_string().contains("its caller's deadline"), "{error}");
    // Waiting in a host call is bounded too.
    let error = plugin.call_tool_with("nap", json!({"ms": 600_000}), &context).await.unwrap_err();
    assert!(error.is_timeout(), "{error:?}");
    assert!(error.to_string().contains("its caller's deadline"), "{error}");
}

#[tokio::test]
async fn the_runtimes_default_limits_apply_to_its_plugins() {
    let limits = Limits::default().with_timeout(Some(Duration::from_millis(250)));
    let runtime = Runtime::builder().with_default_limits(limits).build();
    let plugin = hostile(&runtime).await;
    assert_eq!(plugin.limits().timeout, Some(Duration::from_millis(250)));
    let error = plugin.call_tool("spin", json!({})).await.unwrap_err();
    assert!(error.is_timeout(), "{error:?}");
    assert!(error.to_string().contains("it ran longer than 250ms"), "{error}");
    // A builder's own limits replace them.
    let own = runtime.plugin_from_file(fixture("hostile")).with_timeout(Duration::from_secs(7)).build().await;
    assert_eq!(own.expect("load").limits().timeout, Some(Duration::from_secs(7)));
}

#[tokio::test]
async fn only_a_tool_that_declares_it_gets_the_user_id() {
    let plugin = hostile(&Runtime::new()).await;
    // Without a user, a tool that acts for one is refused before it runs.
    let error = plugin.call_tool("whoami", json!({})).await.unwrap_err();
    assert!(error.is_caller_error(), "{error:?}");
    assert!(error.to_string().contains("needs a user id"), "{error}");
    let alice = CallContext::new().with_user_id("alice");
    let result = plugin.call_tool_with("whoami", json!({}), &alice).await.expect("whoami");
    assert_eq!(result.texts().next(), Some("alice"));

    // The caller's `_meta` reaches the plugin; toolhost's own keys do not
    // come from the caller, and a tool that does not act for a user never
    // sees the user id.
    let mut meta = serde_json::Map::new();
    meta.insert("progressToken".into(), json!(7));
    meta.insert("toolhost/userId".into(), json!("mallory"));
    let context = alice.clone().with_meta(meta);
    let result = plugin.call_tool_with("meta", json!({}), &context).await.expect("meta");
    let seen: Value = serde_json::from_str(result.texts().next().unwrap()).unwrap();
    assert_eq!(seen, json!({"progressToken": 7}));
    let result = plugin.call_tool_with("whoami", json!({}), &context).await.expect("whoami");
    assert_eq!(result.texts().next(), Some("alice"), "the caller's toolhost/userId is not the user id");
    // No `_meta` at all when there is nothing to pass.
    let result = plugin.call_tool("meta", json!({})).await.expect("meta");
    assert_eq!(result.texts().next(), Some("null"));
}

/// The SDK's `#[tool(user_id)]`, `user_id()` and `call_meta()`: the same
/// context reaches an Extism module (in the request) and a component
/// (through the `call-meta` import).
async fn an_sdk_tool_reads_the_user_id_and_meta_in_either_flavour(flavour: toolhost_tests::Flavour) {
    let plugin = Plugin::load(flavour.fixture("sdk-secrets")).await.expect("load");
    let whoami = plugin.tools().iter().find(|t| t.name == "whoami").expect("whoami");
    assert_eq!(whoami.meta.as_ref().and_then(|m| m.get("requirements")), Some(&json!({"user_id": true})));
    let error = plugin.call_tool("whoami", json!({})).await.unwrap_err();
    assert!(error.to_string().contains("needs a user id"), "{error}");
    let mut meta = serde_json::Map::new();
    meta.insert("traceparent".into(), json!("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));
    meta.insert("toolhost/userId".into(), json!("mallory"));
    let context = CallContext::new().with_user_id("bob").with_meta(meta);
    let result = plugin.call_tool_with("whoami", json!({}), &context).await.expect("whoami");
    assert_eq!(result.texts().next(), Some("bob"));
    let result = plugin.call_tool_with("show_meta", json!({}), &context).await.expect("show_meta");
    let seen: Value = serde_json::from_str(result.texts().next().unwrap()).unwrap();
    assert_eq!(seen, json!({"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}));
    // The next call on the same instance sees its own context, not the last one's.
    let result = plugin.call_tool("show_meta", json!({})).await.expect("show_meta");
    assert_eq!(result.texts().next(), Some("null"));
}

both_flavours!(an_sdk_tool_reads_the_user_id_and_meta_in_either_flavour);

#[tokio::test]
async fn the_log_sink_gets_the_calls_log_lines() {
    let plugin = hostile(&Runtime::new()).await;
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = {
        let lines = Arc::clone(&lines);
        move |log: toolhost::GuestLog<'_>| {
            lines.lock().unwrap().push((log.plugin.to_owned(), log.level, log.message.to_owned()));
        }
    };
    let context = CallContext::new().with_log_sink(sink);
    plugin.call_tool_with("log_flood", json!({"lines": 3, "bytes": 10}), &context).await.expect("log_flood");
    let lines = lines.lock().unwrap().clone();
    assert_eq!(lines.len(), 3, "{lines:?}");
    for (plugin, level, message) in &lines {
        assert_eq!((plugin.as_str(), *level, message.len()), ("hostile", toolhost::LogLevel::Info, 10));
    }
    // A flood is cut at the call's log budget, for the sink as for tracing.
    let counted = Arc::new(Mutex::new(0usize));
    let context = CallContext::new().with_log_sink({
        let counted = Arc::clone(&counted);
        move |_| *counted.lock().unwrap() += 1
    });
    plugin.call_tool_with("log_flood", json!({"lines": 100_000, "bytes": 100}), &context).await.expect("flood");
    let counted = *counted.lock().unwrap();
    assert!(counted > 0 && counted < 100_000, "{counted} lines reached the sink");
}

#[tokio::test]
async fn a_secret_the_plugin_logs_reaches_the_log_sink_redacted() {
    const KEY: &str = "AWS_SECRET_ACCESS_KEY";
    const VALUE: &str = "31415926535";
    let dir = std::env::temp_dir().join(format!("toolhost-sink-secret-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    std::fs::write(dir.join(KEY), VALUE).expect("secret file");
    let plugin = Runtime::new()
        .plugin_from_file(fixture("secret-thief"))
        .with_secret_provider(Arc::new(toolhost::FileSecretProvider::new(&dir)))
        .grant_secret(KEY)
        .build()
        .await
        .expect("load secret-thief");
    let lines = Arc::new(Mutex::new(Vec::new()));
    let context = CallContext::new().with_log_sink({
        let lines = Arc::clone(&lines);
        move |log: toolhost::GuestLog<'_>| lines.lock().unwrap().push(log.message.to_owned())
    });
    plugin.call_tool_with("leak_everywhere", json!({}), &context).await.expect("leak_everywhere");
    plugin.call_tool_with("cut_log", json!({"at": 200}), &context).await.expect("cut_log");
    std::fs::remove_dir_all(dir).ok();
    let lines = lines.lock().unwrap().clone();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].contains(&format!("[redacted secret {KEY}]")), "{lines:?}");
    for line in &lines {
        assert!(!line.contains(VALUE), "the secret reached the sink: {line}");
    }
}

/// A record, kept: tool, outcome, call id, fuel, peak memory, output bytes.
type Row = (String, String, Option<String>, Option<u64>, usize, u64);

/// Keeps every record it is told about.
#[derive(Default)]
struct Records(Mutex<Vec<Row>>);

impl CallObserver for Records {
    fn call_finished(&self, record: &CallRecord<'_>) {
        self.0.lock().unwrap().push((
            record.tool.to_owned(),
            record.outcome.to_owned(),
            record.call_id.map(str::to_owned),
            record.fuel_consumed,
            record.peak_memory_bytes,
            record.output_bytes,
        ));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_observer_hears_of_every_call_and_what_it_used() {
    let records = Arc::new(Records::default());
    let runtime = Runtime::builder()
        .with_observer(records.clone())
        .with_default_limits(Limits::default().with_fuel(Some(10_000_000_000)))
        .build();
    let plugin = hostile(&runtime).await;
    let context = CallContext::new().with_call_id("req-1");
    plugin.call_tool_with("ok", json!({}), &context).await.expect("ok");
    plugin.call_tool("error", json!({})).await.unwrap_err();
    plugin.call_tool("no_such_tool", json!({})).await.unwrap_err();
    let token = CancellationToken::new();
    let spin = {
        let (plugin, context) = (plugin.clone(), CallContext::new().with_cancellation(token.clone()));
        tokio::spawn(async move { plugin.call_tool_with("spin", json!({}), &context).await })
    };
    until_in_flight(&runtime, 1).await;
    token.cancel();
    spin.await.expect("task").unwrap_err();

    let records = records.0.lock().unwrap().clone();
    let outcomes: Vec<(&str, &str)> = records.iter().map(|r| (r.0.as_str(), r.1.as_str())).collect();
    assert_eq!(
        outcomes,
        [("ok", "ok"), ("error", "plugin_error"), ("no_such_tool", "unknown_tool"), ("spin", "cancelled")]
    );
    let ok = &records[0];
    assert_eq!(ok.2.as_deref(), Some("req-1"));
    assert!(ok.3.is_some_and(|fuel| fuel > 0), "fuel: {:?}", ok.3);
    assert!(ok.4 > 0, "peak memory");
    assert!(ok.5 > 0, "output bytes");
    // A call refused before the guest ran used nothing.
    assert_eq!((records[2].4, records[2].5), (0, 0));
}

/// A hand-written Extism plugin (`runtime::wat_plugin`) whose `call` asks
/// the host function `lookup`, imported as `import` says, about the bytes
/// "greeting" and returns its answer.
fn asks_the_host(import: &str) -> String {
    let call = r#"(local.set $h (call $lookup (call $emit (i32.const 8192) (i32.const 8))))
    (call $output_set (local.get $h) (call $length (local.get $h)))
    (i32.const 0)"#;
    crate::runtime::wat_plugin(call).replacen("  (memory (export", &format!("  {import}\n  (memory (export"), 1)
}

const LOOKUP: &str = r#"(import "extism:host/user" "lookup" (func $lookup (param i64) (result i64)))"#;

#[tokio::test]
async fn a_host_function_the_embedder_supplies_answers_the_plugin() {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let lookup = {
        let asked = Arc::clone(&asked);
        HostFunction::new("lookup", 1, move |call| {
            let asked = Arc::clone(&asked);
            async move {
                let key = String::from_utf8(call.input(0).to_vec()).map_err(|e| e.to_string())?;
                asked.lock().unwrap().push((call.plugin.clone(), key.clone()));
                let answer = json!({"content": [{"type": "text", "text": format!("hello for {key}")}]});
                Ok(answer.to_string().into_bytes())
            }
        })
    };
    let plugin = Plugin::builder_from_bytes(asks_the_host(LOOKUP).into_bytes())
        .with_name("asker")
        .with_host_function(lookup)
        .build()
        .await
        .expect("load");
    let result = plugin.call_tool("t", json!({})).await.expect("call");
    assert_eq!(result.texts().next(), Some("hello for greeting"));
    assert_eq!(asked.lock().unwrap().as_slice(), [("asker".to_owned(), "greeting".to_owned())]);

    // A failing host function fails the call, with its message.
    let failing = HostFunction::new("lookup", 1, |_| async { Err("the directory is down".to_owned()) });
    let plugin = Plugin::builder_from_bytes(asks_the_host(LOOKUP).into_bytes())
        .with_host_function(failing)
        .build()
        .await
        .expect("load");
    let error = plugin.call_tool("t", json!({})).await.unwrap_err();
    assert!(error.is_plugin_error(), "{error:?}");
    assert!(error.to_string().contains("the directory is down"), "{error}");

    // A slow one is stopped with the call, at the call's deadline.
    let slow = HostFunction::new("lookup", 1, |_| async {
        tokio::time::sleep(Duration::from_secs(600)).await;
        Ok(Vec::new())
    });
    let plugin = Plugin::builder_from_bytes(asks_the_host(LOOKUP).into_bytes())
        .with_host_function(slow)
        .with_timeout(Duration::from_millis(200))
        .build()
        .await
        .expect("load");
    let error = plugin.call_tool("t", json!({})).await.unwrap_err();
    assert!(error.is_timeout(), "{error:?}");
}

#[tokio::test]
async fn a_plugin_cannot_abuse_a_host_function() {
    let echo = HostFunction::new("lookup", 1, |call| async move { Ok(call.input(0).to_vec()) });
    // A handle to no block: the call fails, naming the function; nothing
    // of the host's is read.
    let forged = asks_the_host(LOOKUP)
        .replace("(call $lookup (call $emit (i32.const 8192) (i32.const 8)))", "(call $lookup (i64.const 99999999))");
    let plugin = Plugin::builder_from_bytes(forged.into_bytes()).with_host_function(echo).build().await.expect("load");
    let error = plugin.call_tool("t", json!({})).await.unwrap_err();
    assert!(error.is_plugin_error(), "{error:?}");
    assert!(
        error.to_string().contains("invalid memory handle 99999999 passed to the host function `lookup`"),
        "{error}"
    );

    // An answer larger than the plugin may hold is refused at its memory
    // limit, not handed over.
    let generous = HostFunction::new("lookup", 1, |_| async { Ok(vec![b'x'; 64 << 20]) });
    let plugin = Plugin::builder_from_bytes(asks_the_host(LOOKUP).into_bytes())
        .with_host_function(generous)
        .with_memory_max_bytes(16u64 << 20)
        .build()
        .await
        .expect("load");
    let error = plugin.call_tool("t", json!({})).await.unwrap_err();
    assert!(error.is_memory_limit(), "{error:?}");
}

#[tokio::test]
async fn a_host_function_import_of_another_type_or_name_is_refused_at_load() {
    let lookup = HostFunction::new("lookup", 1, |_| async { Ok(Vec::new()) });
    let cases = [
        (r#"(import "extism:host/user" "lookup" (func $lookup (param i32) (result i64)))"#, "takes 1 memory handle"),
        (r#"(import "extism:host/user" "lookup" (func $lookup (param i64) (result f32)))"#, "returns one or nothing"),
        (r#"(import "extism:host/user" "find" (func $lookup (param i64) (result i64)))"#, "it supplies lookup"),
    ];
    for (import, expected) in cases {
        let wasm = format!(
            r#"(module {import}
                 (func (export "describe") (result i32) i32.const 0)
                 (func (export "call") (result i32) i32.const 0))"#
        );
        let error =
            Plugin::builder_from_bytes(wasm.into_bytes()).with_host_function(lookup.clone()).build().await.unwrap_err();
        assert!(error.is_load(), "{error:?}");
        assert!(error.to_string().contains(expected), "{expected}: {error}");
    }
}
