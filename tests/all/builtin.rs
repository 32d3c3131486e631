//! Built-in toolsets (`kind: builtin`): the program's own tools behind the
//! same registry as Wasm plugins, with the same names, filters, approvals,
//! validation and limits.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::json;
use toolhost::{
    ApproveAll, BuiltinCall, BuiltinTool, BuiltinToolset, CallContext, CallToolResult, DenyAll, NoSecrets, Registry,
    load_toolsets,
};
use toolhost_tests::example;

/// The arguments of `add`.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Add {
    /// The first addend.
    a: f64,
    /// The second.
    b: f64,
}

/// What `add` answers.
#[derive(serde::Serialize, schemars::JsonSchema)]
struct Sum {
    sum: f64,
}

/// The program's tools: a typed `add`, a `wipe` that says it is
/// destructive, a `liar` whose result breaks its output schema, a `sleep`
/// that takes its time and a `boom` that panics. `runs` counts the calls
/// that reached a handler.
fn host_tools(runs: Arc<AtomicUsize>) -> BuiltinToolset {
    let counted = |runs: &Arc<AtomicUsize>| {
        let runs = Arc::clone(runs);
        move || {
            runs.fetch_add(1, Ordering::SeqCst);
        }
    };
    let count_add = counted(&runs);
    let count_wipe = counted(&runs);
    BuiltinToolset::new("host")
        .with_tool(BuiltinTool::typed("add", "Add two numbers.", move |Add { a, b }| {
            count_add();
            async move { Ok::<_, String>(Sum { sum: a + b }) }
        }))
        .with_tool(
            BuiltinTool::new(
                "wipe",
                "Deletes everything.",
                json!({"type": "object", "properties": {}}),
                move |_call: BuiltinCall| {
                    count_wipe();
                    async { Ok(CallToolResult::text("wiped")) }
                },
            )
            .with_annotations(toolhost::protocol::ToolAnnotations {
                destructive_hint: Some(true),
                ..Default::default()
            }),
        )
        .with_tool(
            BuiltinTool::new("liar", "Breaks its output schema.", json!({"type": "object"}), |_call| async {
                Ok(CallToolResult {
                    structured_content: Some(json!({"n": "not a number"})),
                    ..CallToolResult::text("{}")
                })
            })
            .with_output_schema(
                json!({"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]})
                    .as_object()
                    .unwrap()
                    .clone(),
            ),
        )
        .with_tool(BuiltinTool::new("sleep", "Sleeps an hour.", json!({"type": "object"}), |_call| async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(CallToolResult::text("rested"))
        }))
        .with_tool(BuiltinTool::new("boom", "Panics.", json!({"type": "object"}), |_call| async {
            panic!("the handler blew up");
        }))
}

/// A toolsets file: the calculator plugin, and the program's `host`
/// toolset with an exclude filter, approval for tools not marked harmless
/// and `boom` disabled by a tool override.
fn toolsets_file(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("toolsets.json");
    let doc = json!({"schema": "s", "toolsets": [
        {"id": "calc", "kind": "uri", "server": {"url": example("calculator").display().to_string()}},
        {"id": "host", "kind": "builtin",
         "tools": [{"name": "boom", "enabled": false}],
         "extensions": {
             "excludeTools": {"filters": [{"attribute": "ATTRIBUTE_NAME", "matcher": {"exact": "never_there"}}]},
             "toolApprovals": {"fromAnnotations": true}}}
    ]});
    std::fs::write(&path, doc.to_string()).expect("write the toolsets file");
    path
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("toolhost-builtin-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

#[tokio::test]
async fn builtin_tools_share_the_registry_with_plugins_under_the_same_policy() {
    let dir = scratch("policy");
    let runs = Arc::new(AtomicUsize::new(0));
    let registry = Registry::new(Arc::new(NoSecrets));
    registry.register_builtin(host_tools(Arc::clone(&runs))).await.expect("register");
    let file = load_toolsets(&toolsets_file(&dir), &NoSecrets).await.expect("toolsets file");
    let report = registry.sync(file.toolsets).await;
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    let names: Vec<String> = registry.tools().into_iter().map(|t| t.name).collect();
    for name in ["calc__add", "host__add", "host__wipe", "host__liar", "host__sleep"] {
        assert!(names.contains(&name.to_owned()), "{name} missing from {names:?}");
    }
    // A tool override of the file applies.
    assert!(!names.contains(&"host__boom".to_owned()), "{names:?}");
    let boom = registry.all_tools().into_iter().find(|t| t.name == "host__boom").expect("known");
    assert_eq!(boom.disabled_reason.as_deref(), Some("disabled by configuration"));

    // The typed tool's schemas come from its types.
    let add = registry.tool("host__add").expect("host__add");
    assert_eq!(add.tool.input_schema["required"], json!(["a", "b"]));
    assert_eq!(add.tool.output_schema.as_ref().expect("output schema")["properties"]["sum"]["type"], json!("number"));
    let result = registry.call_tool("host__add", json!({"a": 2, "b": 3.5}), &ApproveAll).await.expect("add");
    assert_eq!(result.structured_content, Some(json!({"sum": 5.5})));
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    // Arguments the schema refuses never reach the handler.
    let error = registry.call_tool("host__add", json!({"a": "two"}), &ApproveAll).await.unwrap_err();
    assert!(error.is_invalid_arguments(), "{error:?}");
    assert!(error.to_string().contains("at /a"), "{error}");
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the handler ran on invalid arguments");

    // The approval rule (tools not marked harmless) applies: denied, the
    // handler does not run.
    assert!(registry.tool("host__wipe").expect("wipe").requires_approval);
    let denied = registry.call_tool("host__wipe", json!({}), &DenyAll("not now".to_owned())).await.expect("an answer");
    assert!(denied.is_error(), "{denied:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 1, "a denied tool ran");
    let wiped = registry.call_tool("host__wipe", json!({}), &ApproveAll).await.expect("wipe");
    assert_eq!(wiped.texts().next(), Some("wiped"));

    // A result that breaks the tool's output schema is refused.
    let error = registry.call_tool("host__liar", json!({}), &ApproveAll).await.unwrap_err();
    assert!(error.is_invalid_output(), "{error:?}");
    assert!(error.to_string().contains("/structuredContent/n"), "{error}");

    // The caller's deadline stops a handler; a panic is a fault of that call.
    let context = CallContext::new().with_timeout(Duration::from_millis(200));
    let error = registry.call_with("host__sleep", json!({}), &ApproveAll, &context).await.unwrap_err();
    assert!(error.is_timeout(), "{error:?}");
    assert!(error.to_string().contains("caller's deadline"), "{error}");
    registry.register_builtin(host_tools(Arc::clone(&runs))).await.expect("register again");
    let mut tools = registry.all_tools();
    tools.retain(|t| t.name == "host__boom");
    assert!(!tools[0].enabled, "registering again keeps the file's settings");

    // The plugin next door is unaffected by all of this.
    let sum = registry.call_tool("calc__add", json!({"a": 1, "b": 1}), &ApproveAll).await.expect("calc");
    assert_eq!(sum.texts().next(), Some("2"));
    std::fs::remove_dir_all(dir).ok();
}

#[tokio::test]
async fn a_panicking_handler_is_a_fault_of_that_call_only() {
    let registry = Registry::new(Arc::new(NoSecrets));
    registry.register_builtin(host_tools(Arc::new(AtomicUsize::new(0)))).await.expect("register");
    let error = registry.call_tool("host__boom", json!({}), &ApproveAll).await.unwrap_err();
    assert!(error.to_string().contains("the handler blew up"), "{error}");
    let result = registry.call_tool("host__add", json!({"a": 1, "b": 2}), &ApproveAll).await.expect("add");
    assert_eq!(result.structured_content, Some(json!({"sum": 3.0})));
}

#[tokio::test]
async fn a_builtin_toolset_the_program_did_not_register_is_a_clear_error() {
    let dir = scratch("unregistered");
    let registry = Registry::new(Arc::new(NoSecrets));
    let file = load_toolsets(&toolsets_file(&dir), &NoSecrets).await.expect("toolsets file");
    let report = registry.load_all(file.toolsets).await;
    assert_eq!(report.failures.len(), 1, "{:?}", report.failures);
    let failure = &report.failures[0];
    assert_eq!(failure.toolset, "host");
    let message = failure.error.to_string();
    assert!(message.contains("registered no built-in toolset `host`"), "{message}");
    // The plugin loaded all the same.
    assert_eq!(registry.toolset_ids(), ["calc"]);
    // Registered afterwards, it joins with default settings (no file names it yet).
    registry.register_builtin(host_tools(Arc::new(AtomicUsize::new(0)))).await.expect("register");
    assert!(registry.tool("host__boom").is_some_and(|t| t.enabled));
    std::fs::remove_dir_all(dir).ok();
}

#[tokio::test]
async fn a_program_registered_toolset_survives_a_sync_that_does_not_name_it() {
    let registry = Registry::new(Arc::new(NoSecrets));
    registry.register_builtin(host_tools(Arc::new(AtomicUsize::new(0)))).await.expect("register");
    let report = registry.sync(Vec::new()).await;
    assert!(report.failures.is_empty());
    assert_eq!(registry.toolset_ids(), ["host"]);
    // A bad definition is refused at registration, and nothing changes.
    let bad = BuiltinToolset::new("host").with_tool(BuiltinTool::new(
        "broken",
        "Its schema is not an object schema.",
        json!({"type": "string"}),
        |_call| async { Ok(CallToolResult::text("")) },
    ));
    let error = registry.register_builtin(bad).await.unwrap_err();
    assert!(error.to_string().contains("broken"), "{error}");
    assert!(registry.tool("host__add").is_some());
}

/// Connects toolset `t` with one more tool each time (`v0`, then `v0` and
/// `v1`...), each load following `changes`; the second connect waits for
/// `gate`.
struct Gated {
    connects: AtomicUsize,
    gate: tokio::sync::Mutex<Option<tokio::sync::oneshot::Receiver<()>>>,
    changes: tokio::sync::watch::Sender<u64>,
}

impl toolhost::ToolsetConnector for Gated {
    fn connect<'a>(
        &'a self,
        config: &'a toolhost::ToolsetConfig,
    ) -> toolhost::BoxFuture<'a, Result<BuiltinToolset, String>> {
        Box::pin(async move {
            let n = self.connects.fetch_add(1, Ordering::SeqCst);
            if n == 1
                && let Some(gate) = self.gate.lock().await.take()
            {
                let _ = gate.await;
            }
            let mut toolset = BuiltinToolset::new(config.id.clone()).with_changes(self.changes.subscribe());
            for i in 0..=n {
                toolset = toolset.with_tool(BuiltinTool::new(
                    format!("v{i}"),
                    "A tool.",
                    json!({"type": "object"}),
                    |_| async { Ok(CallToolResult::text("ok")) },
                ));
            }
            Ok(toolset)
        })
    }
}

/// A reload on an upstream change that a change of the toolset overtakes
/// is dropped with its outcome: the toolset's last sync stays that of the
/// toolset there (before, the dropped reload's outcome was recorded last,
/// and a service recording the registry's syncs would have recorded it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_overtaken_by_a_change_leaves_the_last_sync_to_what_is_there() {
    let (open, gate) = tokio::sync::oneshot::channel();
    let connector = Arc::new(Gated {
        connects: AtomicUsize::new(0),
        gate: tokio::sync::Mutex::new(Some(gate)),
        changes: tokio::sync::watch::Sender::new(0),
    });
    let registry = Registry::new(Arc::new(NoSecrets)).with_connector("gated", Arc::clone(&connector) as _);
    let config = toolhost::ToolsetConfig { kind: "gated".to_owned(), ..toolhost::ToolsetConfig::builtin("t") };
    let report = registry.sync(vec![config.clone()]).await;
    assert!(report.failures.is_empty(), "{:?}", report.failures);

    // Upstream changes: the reload (the second connect) waits at the gate.
    connector.changes.send_modify(|n| *n += 1);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while connector.connects.load(Ordering::SeqCst) < 2 {
        assert!(std::time::Instant::now() < deadline, "the change was not followed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Meanwhile the toolset changes (the third connect), then the reload
    // finishes, overtaken.
    let changed = toolhost::ToolsetConfig { version: Some("2".to_owned()), ..config };
    let report = registry.sync(vec![changed]).await;
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    open.send(()).expect("the reload waits");
    // The overtaken reload's task ends, and with it the first load and
    // the reload's toolset: what is left subscribed is the changed
    // toolset's (its connection's receiver, the registry's copy, its
    // follow task's).
    while connector.changes.receiver_count() > 3 {
        assert!(std::time::Instant::now() < deadline, "the overtaken reload did not end");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let names: Vec<String> = registry.tools().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["t__v0", "t__v1", "t__v2"]);
    let last = registry.last_sync("t").expect("a sync");
    assert_eq!(
        serde_json::to_value(&last.event).expect("json"),
        json!({"SyncCompleted": {"message": "3 tools, 3 available", "toolsSynced": 3}}),
    );
}
