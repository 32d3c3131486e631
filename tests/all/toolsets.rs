//! Many plugins from one configuration: the toolsets file, namespacing,
//! filters, approval, secrets, and a registry that changes at run time.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use toolhost::{
    Approval, ApprovalRequest, ApproveAll, Approver, BoxFuture, DenyAll, Error, FileSecretProvider, NoSecrets,
    OutputProblem, Registry, SecretProvider, load_toolsets, parse_toolsets,
};
use toolhost_tests::{example, example_config, fixture};

/// [`parse_toolsets`] from a test that is not async.
fn parse_now(
    path: &std::path::Path,
    document: &Value,
    secrets: &dyn SecretProvider,
) -> Result<toolhost::ToolsetsFile, toolhost::ConfigError> {
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    runtime.block_on(parse_toolsets(path, document, secrets))
}

/// A scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("toolhost-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

async fn registry_from(path: &std::path::Path, secrets: Arc<dyn SecretProvider>) -> (Registry, toolhost::LoadReport) {
    let file = load_toolsets(path, secrets.as_ref()).await.unwrap_or_else(|e| panic!("{e}"));
    let registry = Registry::new(secrets);
    let report = registry.load_all(file.toolsets).await;
    (registry, report)
}

#[tokio::test]
async fn the_example_configuration_lists_exactly_the_expected_tools() {
    let dir = scratch("example");
    let (registry, report) = registry_from(&example_config(&dir), Arc::new(NoSecrets)).await;
    assert!(report.failures.is_empty() && report.warnings.is_empty(), "{report:?}");
    let available: Vec<(String, bool)> = registry.tools().into_iter().map(|t| (t.name, t.requires_approval)).collect();
    let expected = [
        ("calc__add", false),
        ("calc__divide", true),
        ("calc__multiply", false),
        ("calc__subtract", false),
        ("text__change_case", false),
        ("text__slugify", false),
        ("text__word_count", false),
        ("words__word_count", true),
    ];
    assert_eq!(available, expected.map(|(n, a)| (n.to_owned(), a)));
    // Filtered-out tools are known, with the reason, but not available.
    let all = registry.all_tools();
    let reverse = all.iter().find(|t| t.name == "text__reverse").expect("listed");
    assert_eq!(reverse.disabled_reason.as_deref(), Some("matched by excludeTools"));
    let error = registry.call_tool("text__reverse", json!({"text": "x"}), &ApproveAll).await.unwrap_err();
    assert!(error.is_unknown_tool(), "{error:?}");
    // Calls route to the right plugin, under the namespaced name.
    let sum = registry.call_tool("calc__add", json!({"a": 2, "b": 3}), &ApproveAll).await.expect("add");
    assert_eq!(sum.texts().next(), Some("5"));
    assert_eq!(registry.tool("calc__add").expect("tool").exposed().name, "calc__add");
    // The borrowing lookups agree: a filtered-out tool is known but not
    // available, an unknown one is neither.
    assert!(registry.has_tool("calc__add") && !registry.has_tool("text__reverse") && !registry.has_tool("calc__nope"));
    assert_eq!(registry.with_tool("text__reverse", |t| t.enabled), Some(false));
    assert_eq!(registry.with_tool("calc__divide", |t| t.requires_approval), Some(true));
    assert_eq!(registry.with_tool("nope", |t| t.enabled), None);
    std::fs::remove_dir_all(dir).ok();
}

#[tokio::test]
async fn yaml_json_and_toml_say_the_same() {
    let dir = scratch("formats");
    let calculator = example("calculator").display().to_string();
    let json_doc = json!({"schema": "s", "toolsets": [{"id": "calc", "kind": "uri", "server": {"url": calculator},
        "toolsetDefaults": {"requiresApproval": true}, "tools": [{"name": "add", "requiresApproval": false}]}]});
    std::fs::write(dir.join("t.json"), json_doc.to_string()).expect("json");
    std::fs::write(dir.join("t.yaml"), serde_norway_yaml(&json_doc)).expect("yaml");
    std::fs::write(
        dir.join("t.toml"),
        format!("schema = \"s\"\n[[toolsets]]\nid = \"calc\"\nkind = \"uri\"\nserver = {{ url = \"{calculator}\" }}\ntoolsetDefaults = {{ requiresApproval = true }}\n[[toolsets.tools]]\nname = \"add\"\nrequiresApproval = false\n"),
    )
    .expect("toml");
    for file in ["t.json", "t.yaml", "t.toml"] {
        let (registry, report) = registry_from(&dir.join(file), Arc::new(NoSecrets)).await;
        assert!(report.failures.is_empty(), "{file}: {report:?}");
        let approval: Vec<(String, bool)> =
            registry.tools().into_iter().map(|t| (t.name, t.requires_approval)).collect();
        assert_eq!(
            approval,
            [("calc__add", false), ("calc__divide", true), ("calc__multiply", true), ("calc__subtract", true)]
                .map(|(n, a)| (n.to_owned(), a)),
            "{file}"
        );
    }
    std::fs::remove_dir_all(dir).ok();
}

/// YAML for a JSON value (JSON is YAML; this keeps the test free of a YAML writer).
fn serde_norway_yaml(value: &Value) -> String {
    format!("# comment\n{}\n", serde_json::to_string_pretty(value).expect("json"))
}

fn problems(error: toolhost::ConfigError) -> Vec<(String, String)> {
    error.problems.into_iter().map(|p| (p.pointer, p.message)).collect()
}

#[test]
fn invalid_configurations_name_the_file_the_pointer_and_the_problem() {
    let file = std::path::Path::new("/etc/toolhost/bad.yaml");
    let check = |doc: Value| problems(parse_now(file, &doc, &NoSecrets).expect_err("invalid"));

    let found = check(json!({"toolsets": [{"id": "x", "kind": "wasm"}]}));
    assert!(found.iter().any(|(p, m)| p == "/schema" && m.contains("required")), "{found:?}");
    assert!(found.iter().any(|(p, m)| p == "/toolsets/0/kind" && m.contains("wasm")), "{found:?}");

    let found = check(json!({"schema": "s", "toolsets": [{"id": "x", "kind": "uri"}]}));
    assert_eq!(found.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(), ["/toolsets/0/server"], "{found:?}");

    let found = check(
        json!({"schema": "s", "toolsets": [{"id": "x", "kind": "uri", "server": {"url": "a.wasm", "limits": {"timeout": "soon"}}}]}),
    );
    assert!(found.iter().any(|(p, m)| p == "/toolsets/0/server" && m.contains("invalid duration `soon`")), "{found:?}");

    let found = check(
        json!({"schema": "s", "toolsets": [{"id": "x", "kind": "uri", "server": {"url": "a.wasm", "config": {"k": "${env:TOOLHOST_TEST_SURELY_UNSET}"}}}]}),
    );
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, "/toolsets/0/server/config/k");
    assert!(found[0].1.contains("${env:TOOLHOST_TEST_SURELY_UNSET}"), "{found:?}");

    let found = check(
        json!({"schema": "s", "toolsets": [{"id": "x", "kind": "uri", "server": {"url": "a.wasm", "tokne": "t"}}]}),
    );
    assert!(found.iter().any(|(p, m)| p == "/toolsets/0/server" && m.contains("tokne")), "{found:?}");

    let found = check(json!({"schema": "s", "toolsets": [
        {"id": "x", "kind": "uri", "server": {"url": "a.wasm"}},
        {"id": "x", "kind": "uri", "server": {"url": "b.wasm"}}
    ]}));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].0 == "/toolsets/1/id" && found[0].1.contains("duplicate toolset id `x` (first at /toolsets/0)"),
        "{found:?}"
    );
    let found = check(json!({"schema": "s", "toolsets": [{"id": "a__b", "kind": "uri", "server": {"url": "c.wasm"}}]}));
    assert_eq!(found.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(), ["/toolsets/0/id"], "{found:?}");

    let found = check(json!({"schema": "s", "toolsets": [{"id": "x", "kind": "uri", "server": {"url": "a.wasm"},
        "extensions": {"includeTools": {"filters": [{"attribute": "ATTRIBUTE_NAME", "matcher": {"regex": "("}}]}}}]}));
    assert!(
        found.iter().any(|(p, m)| p == "/toolsets/0/extensions/includeTools" && m.contains("invalid regex")),
        "{found:?}"
    );

    let error = parse_now(file, &json!({"toolsets": 1}), &NoSecrets).unwrap_err();
    assert!(error.to_string().starts_with("invalid configuration /etc/toolhost/bad.yaml: "), "{error}");
}

#[test]
fn secret_values_never_appear_in_configuration_errors() {
    let dir = scratch("secret-errors");
    std::fs::write(dir.join("TIMEOUT"), "hunter2-timeout").expect("secret");
    let provider = FileSecretProvider::new(&dir);
    let doc = json!({"schema": "s", "toolsets": [{"id": "x", "kind": "uri",
        "server": {"url": "a.wasm", "limits": {"timeout": "${secret:TIMEOUT}"}}}]});
    let error = parse_now(std::path::Path::new("c.json"), &doc, &provider).unwrap_err();
    let text = error.to_string();
    assert!(!text.contains("hunter2"), "{text}");
    assert!(text.contains("[secret TIMEOUT]"), "{text}");
    std::fs::remove_dir_all(dir).ok();
}

fn secrets_config(dir: &std::path::Path, secret_output: &str, flavour: toolhost_tests::Flavour) -> PathBuf {
    let doc = json!({"schema": "s", "toolsets": [{"id": "svc", "kind": "uri",
        "secrets": ["SERVICE_TOKEN", "UNDECLARED_SECRET"],
        "server": {"url": flavour.fixture("sdk-secrets").display().to_string(), "secretOutput": secret_output}}]});
    let path = dir.join(format!("secrets-{secret_output}.json"));
    std::fs::write(&path, doc.to_string()).expect("config");
    path
}

/// (Against both builds of the fixture: a component reads its secrets
/// through `config-get`, an Extism module through `config_get`.)
async fn secrets_reach_only_the_tools_that_declare_them_and_never_leave(flavour: toolhost_tests::Flavour) {
    let dir = scratch(&format!("secrets-{flavour:?}"));
    let store = dir.join("store");
    std::fs::create_dir_all(&store).expect("store");
    std::fs::write(store.join("SERVICE_TOKEN"), "tok-3f9a7c\n").expect("secret");
    std::fs::write(store.join("UNDECLARED_SECRET"), "nope").expect("secret");
    let provider: Arc<dyn SecretProvider> = Arc::new(FileSecretProvider::new(&store));

    let (registry, report) = registry_from(&secrets_config(&dir, "redact", flavour), Arc::clone(&provider)).await;
    assert!(report.failures.is_empty(), "{report:?}");
    let length = registry.call_tool("svc__token_length", json!({}), &ApproveAll).await.expect("call");
    assert_eq!(length.texts().next(), Some("the token has 10 characters"));

    let hidden = registry.call_tool("svc__undeclared_visible", json!({}), &ApproveAll).await.expect("call");
    assert_eq!(hidden.texts().next(), Some("false"), "a secret no tool declares reached the plugin");

    let missing = registry.call_tool("svc__needs_missing", json!({}), &ApproveAll).await.unwrap_err();
    assert!(missing.is_missing_secret(), "{missing:?}");
    assert!(missing.to_string().contains("`NOBODY_HAS_THIS`"), "{missing}");

    let leaked = registry.call_tool("svc__leak_token", json!({"prefix": "x"}), &ApproveAll).await.expect("redacted");
    let text = serde_json::to_string(&leaked).expect("json");
    assert!(!text.contains("tok-3f9a7c"), "{text}");
    assert_eq!(leaked.texts().next(), Some("token: [redacted secret SERVICE_TOKEN]"));
    assert_eq!(leaked.structured_content, Some(json!({"token": "x[redacted secret SERVICE_TOKEN]"})));

    let (strict, _) = registry_from(&secrets_config(&dir, "refuse", flavour), provider).await;
    let refused = strict.call_tool("svc__leak_token", json!({"prefix": "x"}), &ApproveAll).await.unwrap_err();
    match &refused {
        Error::InvalidOutput { problem: OutputProblem::SecretLeak { secrets, .. }, .. } => {
            assert_eq!(secrets, &["SERVICE_TOKEN"])
        }
        other => panic!("expected a refused leak, got {other:?}"),
    }
    assert!(!refused.to_string().contains("tok-3f9a7c"), "{refused}");
    std::fs::remove_dir_all(dir).ok();
}

/// Records what it was asked, and answers as told.
struct Recording {
    answer: Approval,
    seen: Mutex<Vec<(String, Value, Option<bool>)>>,
}

impl Approver for Recording {
    fn approve<'a>(&'a self, request: ApprovalRequest<'a>) -> BoxFuture<'a, Approval> {
        let read_only = request.annotations().and_then(|a| a.read_only_hint);
        self.seen.lock().expect("lock").push((request.tool.name.clone(), request.arguments.clone(), read_only));
        let answer = self.answer.clone();
        Box::pin(async move { answer })
    }
}

#[tokio::test]
async fn approval_is_asked_with_validated_arguments_and_a_denial_never_runs_the_plugin() {
    let dir = scratch("approval");
    let (registry, _) = registry_from(&example_config(&dir), Arc::new(NoSecrets)).await;

    let deny = Recording { answer: Approval::Denied("not today".to_owned()), seen: Mutex::new(Vec::new()) };
    let denied = registry.call_tool("calc__divide", json!({"a": 1, "b": 0}), &deny).await.expect("a result");
    assert!(denied.is_error());
    assert_eq!(denied.texts().next(), Some("the call to `calc__divide` was not approved: not today"));
    assert_eq!(*deny.seen.lock().expect("lock"), [("calc__divide".to_owned(), json!({"a": 1, "b": 0}), Some(true))]);

    // Invalid arguments are refused before anyone is asked.
    let invalid = registry.call_tool("calc__divide", json!({"a": "x"}), &deny).await.unwrap_err();
    assert!(invalid.is_invalid_arguments());
    assert_eq!(deny.seen.lock().expect("lock").len(), 1);

    // Tools that need no approval never reach the hook.
    let add = registry.call_tool("calc__add", json!({"a": 1, "b": 1}), &DenyAll("no".to_owned())).await.expect("add");
    assert!(!add.is_error());

    let approve = Recording { answer: Approval::Approved, seen: Mutex::new(Vec::new()) };
    let divided = registry.call_tool("calc__divide", json!({"a": 1, "b": 4}), &approve).await.expect("divide");
    assert_eq!(divided.texts().next(), Some("0.25"));
    std::fs::remove_dir_all(dir).ok();
}

#[tokio::test]
async fn a_broken_plugin_is_reported_and_the_others_load() {
    let dir = scratch("broken");
    let doc = json!({"schema": "s", "toolsets": [
        {"id": "calc", "kind": "uri", "server": {"url": example("calculator").display().to_string()}},
        {"id": "gone", "kind": "uri", "server": {"url": "does-not-exist.wasm"}},
        // A host that cannot resolve (`.invalid` is reserved for that).
        {"id": "remote", "kind": "uri",
         "server": {"url": "https://toolhost.invalid/p.wasm", "digest": format!("sha256:{}", "0".repeat(64))}},
        {"id": "mcp", "kind": "mcp"},
        {"id": "calc2", "kind": "uri", "server": {"url": example("calculator").display().to_string()},
         "tools": [{"name": "modulo", "enabled": false}]}
    ]});
    let path = dir.join("t.json");
    std::fs::write(&path, doc.to_string()).expect("config");
    let (registry, report) = registry_from(&path, Arc::new(NoSecrets)).await;
    let failed: Vec<&str> = report.failures.iter().map(|f| f.toolset.as_str()).collect();
    assert_eq!(failed, ["gone", "remote", "mcp"]);
    assert!(report.failures[1].error.to_string().contains("download failed"), "{}", report.failures[1].error);
    assert_eq!(report.warnings.len(), 1, "{:?}", report.warnings);
    assert!(report.warnings[0].contains("`modulo`"), "{:?}", report.warnings);
    assert_eq!(registry.toolset_ids(), ["calc", "calc2"]);
    assert_eq!(registry.tools().len(), 8);
    std::fs::remove_dir_all(dir).ok();
}

#[tokio::test]
async fn toolsets_come_and_go_without_disturbing_calls_in_flight() {
    let dir = scratch("runtime");
    let doc = json!({"schema": "s", "toolsets": [
        {"id": "slow", "kind": "uri", "server": {"url": fixture("hostile").display().to_string()}}
    ]});
    let path = dir.join("t.json");
    std::fs::write(&path, doc.to_string()).expect("config");
    let file = load_toolsets(&path, &NoSecrets).await.expect("config");
    let registry = Arc::new(Registry::new(Arc::new(NoSecrets)));
    registry.add(file.toolsets[0].clone()).await.expect("add");
    let duplicate = registry.add(file.toolsets[0].clone()).await.unwrap_err();
    assert!(duplicate.to_string().contains("already loaded"), "{duplicate}");

    let in_flight = {
        let registry = Arc::clone(&registry);
        tokio::spawn(async move { registry.call_tool("slow__sleep", json!({"ms": 400}), &ApproveAll).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(registry.remove("slow"));
    let done = in_flight.await.expect("task").expect("the call in flight finishes");
    assert_eq!(done.texts().next(), Some("awake"));
    assert!(registry.call_tool("slow__ok", json!({}), &ApproveAll).await.unwrap_err().is_unknown_tool());
    std::fs::remove_dir_all(dir).ok();
}

both_flavours!(secrets_reach_only_the_tools_that_declare_them_and_never_leave);

/// One new configuration is one change: `sync` builds the new set aside and
/// swaps it in, so a subscriber is told once and a list taken at any moment
/// is either all old or all new, never a mix.
#[tokio::test]
async fn a_new_configuration_is_swapped_in_at_once_and_announced_once() {
    let dir = scratch("atomic-sync");
    let path = dir.join("t.json");
    let write = |toolsets: Value| {
        std::fs::write(&path, json!({"schema": "s", "toolsets": toolsets}).to_string()).expect("config");
        let path = path.clone();
        async move { load_toolsets(&path, &NoSecrets).await.expect("config").toolsets }
    };
    let calc = json!({"id": "calc", "kind": "uri", "server": {"url": example("calculator").display().to_string()}});
    let text = json!({"id": "text", "kind": "uri", "server": {"url": example("text").display().to_string()}});
    let registry = Arc::new(Registry::new(Arc::new(NoSecrets)));
    let first = registry.sync(write(json!([calc.clone(), text.clone()])).await).await;
    assert!(first.failures.is_empty(), "{:?}", first.failures);
    let before: Vec<String> = registry.tools().into_iter().map(|t| t.name).collect();

    // Every list taken while the new configuration loads is the old or the
    // new one: record each distinct list a busy reader sees.
    let seen = Arc::new(Mutex::new(std::collections::BTreeSet::new()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (registry, seen, stop) = (Arc::clone(&registry), Arc::clone(&seen), Arc::clone(&stop));
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let names: Vec<String> = registry.tools().into_iter().map(|t| t.name).collect();
                seen.lock().unwrap().insert(names);
            }
        })
    };
    let mut changes = registry.subscribe();
    changes.borrow_and_update();
    let count = *changes.borrow();
    // Both toolsets change (a new limit each), one is removed, one is added.
    let mut calc2 = calc.clone();
    calc2["server"]["limits"] = json!({"timeout": "20s"});
    let hostile = json!({"id": "bad", "kind": "uri", "server": {"url": fixture("hostile").display().to_string()}});
    let report = registry.sync(write(json!([calc2, hostile])).await).await;
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    reader.join().expect("reader");

    assert_eq!(*changes.borrow(), count + 1, "one configuration, one notification");
    let after: Vec<String> = registry.tools().into_iter().map(|t| t.name).collect();
    assert!(after.iter().any(|n| n == "bad__ok") && after.iter().any(|n| n == "calc__add"), "{after:?}");
    assert!(!after.iter().any(|n| n.starts_with("text__")), "{after:?}");
    for list in seen.lock().unwrap().iter() {
        assert!(*list == before || *list == after, "a mixed list was visible: {list:?}");
    }
    // The same configuration again changes nothing and says nothing.
    let again = registry.sync(load_toolsets(&path, &NoSecrets).await.expect("config").toolsets).await;
    assert!(again.failures.is_empty());
    assert_eq!(*changes.borrow(), count + 1);
    std::fs::remove_dir_all(dir).ok();
}

/// `sync_some` touches only the toolsets it names: the one given is
/// reloaded, the one named removed, the rest kept as they were (the same
/// loaded instance), with one notification.
#[tokio::test]
async fn syncing_some_toolsets_leaves_the_others_as_they_were() {
    let dir = scratch("sync-some");
    let path = dir.join("t.json");
    let toolset = |id: &str, plugin: &str| json!({"id": id, "kind": "uri", "server": {"url": example(plugin).display().to_string()}});
    let load = |toolsets: Value| {
        std::fs::write(&path, json!({"schema": "s", "toolsets": toolsets}).to_string()).expect("config");
        let path = path.clone();
        async move { load_toolsets(&path, &NoSecrets).await.expect("config").toolsets }
    };
    let registry = Registry::new(Arc::new(NoSecrets));
    let all =
        load(json!([toolset("calc", "calculator"), toolset("text", "text"), toolset("kept", "calculator")])).await;
    assert!(registry.sync(all).await.failures.is_empty());
    let kept_before = registry.tools_of("kept");
    let events_before = registry.last_sync("kept").expect("kept was loaded");
    let mut changes = registry.subscribe();
    changes.borrow_and_update();
    let count = *changes.borrow();

    let mut calc = toolset("calc", "calculator");
    calc["tools"] = json!([{"name": "divide", "enabled": false}]);
    let report = registry.sync_some(load(json!([calc])).await, &["text".to_owned()]).await;
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    assert_eq!(registry.toolset_ids(), ["calc", "kept"]);
    let divide = registry.tools_of("calc").into_iter().find(|t| t.name == "calc__divide").expect("divide");
    assert!(!divide.enabled, "the named toolset was reloaded with its new settings");
    assert!(registry.tools_of("text").is_empty());
    assert_eq!(registry.last_sync("kept").map(|e| e.at), Some(events_before.at), "the other was not reloaded");
    assert_eq!(registry.tools_of("kept").len(), kept_before.len());
    assert_eq!(*changes.borrow(), count + 1, "one call, one notification");
    std::fs::remove_dir_all(dir).ok();
}

#[tokio::test]
async fn the_watcher_applies_a_changed_file_and_keeps_the_old_set_when_the_new_one_is_broken() {
    use toolhost::{ToolsetsWatcher, WatchEvent};
    let dir = scratch("watcher");
    let path = dir.join("toolsets.json");
    let toolset = |id: &str, plugin: &str| json!({"id": id, "kind": "uri", "server": {"url": example(plugin).display().to_string()}});
    let write = |toolsets: Value| {
        std::fs::write(&path, serde_json::to_string_pretty(&json!({"schema": "s", "toolsets": toolsets})).unwrap())
            .expect("write the toolsets file")
    };
    write(json!([toolset("calc", "calculator")]));
    let secrets: Arc<dyn SecretProvider> = Arc::new(NoSecrets);
    let (registry, report) = registry_from(&path, Arc::clone(&secrets)).await;
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    let registry = Arc::new(registry);
    let names = |registry: &Registry| -> Vec<String> { registry.tools().into_iter().map(|t| t.name).collect() };
    assert!(names(&registry).iter().all(|n| n.starts_with("calc__")));

    let (events, mut received) = tokio::sync::mpsc::unbounded_channel();
    let watching = ToolsetsWatcher::new(&path, secrets, Arc::clone(&registry))
        .with_interval(Duration::from_millis(50))
        .on_event(move |event| {
            let _ = events.send(event);
        })
        .spawn();
    let next = async |received: &mut tokio::sync::mpsc::UnboundedReceiver<WatchEvent>| {
        tokio::time::timeout(Duration::from_secs(60), received.recv())
            .await
            .expect("the watcher saw the change within a minute")
            .expect("the watcher is running")
    };

    // A toolset added: applied.
    write(json!([toolset("calc", "calculator"), toolset("text", "text")]));
    match next(&mut received).await {
        WatchEvent::Applied(report) => assert!(report.failures.is_empty(), "{:?}", report.failures),
        other => panic!("expected the file applied, got {other:?}"),
    }
    assert!(names(&registry).iter().any(|n| n.starts_with("text__")), "{:?}", names(&registry));

    // A broken file: rejected, and the registry keeps what it had.
    std::fs::write(&path, "{ not json").expect("write");
    match next(&mut received).await {
        WatchEvent::Rejected(error) => assert!(error.to_string().contains("JSON"), "{error}"),
        other => panic!("expected the file rejected, got {other:?}"),
    }
    assert!(names(&registry).iter().any(|n| n.starts_with("text__")), "{:?}", names(&registry));

    // Stopped: a change is no longer applied.
    watching.stop();
    write(json!([toolset("calc", "calculator")]));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(received.try_recv().is_err(), "no event after the watcher stopped");
    assert!(names(&registry).iter().any(|n| n.starts_with("text__")));
    std::fs::remove_dir_all(dir).ok();
}

/// A toolset may not be granted, read-write, the files that say what the
/// toolsets run: its toolsets file (it could grant itself anything, and a
/// watched file is applied at once), or another toolset's plugin file (it
/// could run as that toolset, with its grants and secrets). Such a toolset
/// is refused, naming its grant and the file; the others load. A toolset
/// added later whose plugin file a loaded toolset may write is refused too.
#[tokio::test]
async fn a_toolset_may_not_write_its_toolsets_file_or_another_toolsets_plugin() {
    let dir = scratch("protected-files");
    let plugins = dir.join("plugins");
    let data = dir.join("data");
    std::fs::create_dir_all(&plugins).expect("dir");
    std::fs::create_dir_all(&data).expect("dir");
    std::fs::copy(fixture("hostile"), plugins.join("victim.wasm")).expect("copy");
    let hostile = fixture("hostile").display().to_string();
    let grant = |host: &std::path::Path, access: &str| json!({"host": host.display().to_string(), "access": access});
    let uri = |id: &str, url: &str, grants: Vec<Value>| json!({"id": id, "kind": "uri", "server": {"url": url, "allowedPaths": grants}});
    let path = dir.join("toolsets.json");
    let doc = json!({"schema": "s", "toolsets": [
        uri("editor", &hostile, vec![grant(&dir, "rw")]),
        uri("patcher", &hostile, vec![grant(&plugins, "rw")]),
        uri("reader", &hostile, vec![grant(&dir, "ro")]),
        uri("victim", "plugins/victim.wasm", vec![]),
        uri("worker", &hostile, vec![grant(&data, "rw")]),
    ]});
    std::fs::write(&path, doc.to_string()).expect("config");
    let (registry, report) = registry_from(&path, Arc::new(NoSecrets)).await;

    let failed: Vec<&str> = report.failures.iter().map(|f| f.toolset.as_str()).collect();
    assert_eq!(failed, ["editor", "patcher"], "{report:?}");
    let editor = report.failures[0].error.to_string();
    assert!(matches!(report.failures[0].error, Error::Policy { .. }), "{editor}");
    assert!(editor.contains(&format!("{}:{}:rw", dir.display(), dir.display())), "{editor}");
    assert!(editor.contains("toolsets.json") && editor.contains("the toolsets file"), "{editor}");
    let patcher = report.failures[1].error.to_string();
    assert!(patcher.contains("victim.wasm") && patcher.contains("toolset `victim`"), "{patcher}");
    // The others loaded, the writer beside the plugins included.
    for tool in ["reader__ok", "victim__ok", "worker__ok"] {
        let result = registry.call_tool(tool, json!({}), &ApproveAll).await.expect(tool);
        assert_eq!(result.texts().next(), Some("fine"), "{tool}");
    }
    let write = registry
        .call_tool(
            "worker__write_file",
            json!({"path": format!("{}/out.txt", data.display()), "text": "x"}),
            &ApproveAll,
        )
        .await
        .expect("write");
    assert!(!write.is_error(), "{write:?}");

    // Added later, a plugin file in reach of the loaded `worker`'s grant.
    std::fs::copy(fixture("hostile"), data.join("late.wasm")).expect("copy");
    let late = json!({"schema": "s", "toolsets": [uri("late", "data/late.wasm", vec![])]});
    std::fs::write(&path, late.to_string()).expect("config");
    let config = load_toolsets(&path, &NoSecrets).await.expect("config").toolsets.remove(0);
    let error = registry.add(config).await.expect_err("a plugin file `worker` may write");
    let message = error.to_string();
    assert!(matches!(error, Error::Policy { .. }), "{message}");
    assert!(message.contains("toolset `worker`") && message.contains("late.wasm"), "{message}");
    assert!(registry.call_tool("late__ok", json!({}), &ApproveAll).await.unwrap_err().is_unknown_tool());
    std::fs::remove_dir_all(dir).ok();
}
