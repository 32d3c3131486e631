//! hyper-mcp's plugin interfaces run unchanged: its "v2" exports
//! (`list_tools`, `call_tool`, ... taking `{"request", "context"}`) and its
//! host functions in `extism:host/user`, which let a plugin talk back to
//! the client of a call. Against `hyper-v2` (every export and host
//! function) and `tool-list-changed` (a servlet whose tool list grows, as
//! the published plugin of that name does).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value, json};
use toolhost::{
    BoxFuture, CallClient, CallContext, ClientNotice, ClientRequest, Error, FaultKind, LogLevel, Plugin, Registry,
    SecretError, SecretProvider, parse_toolsets,
};
use toolhost_tests::fixture;

use crate::runtime::WAT_EMIT;

fn text(result: &toolhost::CallToolResult) -> String {
    result.texts().next().unwrap_or_default().to_owned()
}

async fn v2() -> Plugin {
    Plugin::load(fixture("hyper-v2")).await.unwrap_or_else(|e| panic!("{e}"))
}

/// Secrets from a map.
struct Secrets(Vec<(&'static str, &'static str)>);

impl SecretProvider for Secrets {
    fn secret<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<String>, SecretError>> {
        let value = self.0.iter().find(|(n, _)| *n == name).map(|(_, v)| (*v).to_owned());
        Box::pin(async move { Ok(value) })
    }

    fn describe(&self) -> String {
        "a test map".to_owned()
    }
}

/// A client that records what it is asked and told, and answers each
/// request with `answer` (or never, when `None`).
#[derive(Default)]
struct Recorder {
    asked: Mutex<Vec<(ClientRequest, Map<String, Value>)>>,
    told: Mutex<Vec<ClientNotice>>,
    answer: Option<Value>,
}

impl CallClient for Recorder {
    fn request(&self, request: ClientRequest, params: Map<String, Value>) -> BoxFuture<'_, Result<Value, String>> {
        self.asked.lock().unwrap().push((request, params));
        let answer = self.answer.clone();
        Box::pin(async move {
            match answer {
                Some(answer) => Ok(answer),
                None => std::future::pending().await,
            }
        })
    }

    fn notify(&self, notice: ClientNotice) -> BoxFuture<'_, ()> {
        self.told.lock().unwrap().push(notice);
        Box::pin(async {})
    }
}

#[tokio::test]
async fn a_v2_plugin_lists_and_calls_its_tools_validated_as_any() {
    let plugin = v2().await;
    let names: Vec<&str> = plugin.tools().iter().map(|t| t.name.as_str()).collect();
    for name in
        ["echo", "context", "elicit", "elicit_url", "sample", "roots", "log", "progress", "changed", "keyring", "token"]
    {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    let echoed = plugin.call_tool("echo", json!({"text": "hi"})).await.expect("echo");
    assert_eq!(text(&echoed), "hi");
    // Arguments are checked against the tool's schema before the plugin runs.
    let refused = plugin.call_tool("echo", json!({"text": 7})).await.expect_err("a number is no text");
    assert!(matches!(refused, Error::InvalidArguments { .. }), "{refused}");
    // `call_tool` gets the request and a context with the call's id and `_meta`.
    let mut meta = Map::new();
    meta.insert("trace".into(), json!("t-1"));
    let context = CallContext::new().with_call_id("req-9").with_meta(meta);
    let seen = plugin.call_tool_with("context", json!({}), &context).await.expect("context");
    let seen: Value = serde_json::from_str(&text(&seen)).expect("JSON");
    assert_eq!(seen, json!({"id": "req-9", "_meta": {"trace": "t-1"}}));
    // Without a call id or `_meta`, the context is still there.
    let bare = plugin.call_tool("context", json!({})).await.expect("context");
    let bare: Value = serde_json::from_str(&text(&bare)).expect("JSON");
    assert_eq!(bare["_meta"], json!({}), "{bare}");
    assert!(bare["id"].is_string(), "{bare}");
}

#[tokio::test]
async fn without_a_client_a_plugin_that_asks_is_refused_in_the_answers_shape() {
    let plugin = v2().await;
    let elicited = plugin.call_tool("elicit", json!({"message": "Who?"})).await.expect("elicit");
    let elicited: Value = serde_json::from_str(&text(&elicited)).expect("JSON");
    assert_eq!(elicited["action"], "decline", "{elicited}");
    assert!(elicited["content"]["error"].as_str().unwrap().contains("without a client"), "{elicited}");
    let sampled = plugin.call_tool("sample", json!({"prompt": "2+2?"})).await.expect("sample");
    let sampled: Value = serde_json::from_str(&text(&sampled)).expect("JSON");
    assert_eq!(sampled["stopReason"], "error", "{sampled}");
    assert!(sampled["content"]["text"].as_str().unwrap().contains("sampling/createMessage"), "{sampled}");
    let roots = plugin.call_tool("roots", json!({})).await.expect("roots");
    assert_eq!(serde_json::from_str::<Value>(&text(&roots)).unwrap(), json!({"roots": []}));
    // Notices go nowhere, and the calls go on.
    assert_eq!(text(&plugin.call_tool("progress", json!({"steps": 3})).await.expect("progress")), "3 steps");
    assert_eq!(text(&plugin.call_tool("changed", json!({})).await.expect("changed")), "announced");
    // No OAuth here: no token, said plainly to the plugin.
    assert_eq!(text(&plugin.call_tool("token", json!({})).await.expect("token")), "null");
}

#[tokio::test]
async fn a_client_gets_what_the_plugin_asks_and_tells_checked() {
    let plugin = v2().await;
    let client = Arc::new(Recorder {
        answer: Some(json!({"action": "accept", "content": {"name": "Ada"}})),
        ..Recorder::default()
    });
    let mut meta = Map::new();
    meta.insert("progressToken".into(), json!("tok-1"));
    let context = CallContext::new().with_client(client.clone()).with_meta(meta);

    let elicited = plugin.call_tool_with("elicit", json!({"message": "Who?"}), &context).await.expect("elicit");
    assert_eq!(serde_json::from_str::<Value>(&text(&elicited)).unwrap()["content"]["name"], "Ada");
    let (request, params) = client.asked.lock().unwrap().pop().expect("asked");
    assert_eq!(request, ClientRequest::Elicitation);
    assert_eq!(params["message"], "Who?");
    assert!(params["requestedSchema"].is_object(), "{params:?}");
    // The plugin's own `timeout` bounds the wait; it is not the protocol's.
    assert!(!params.contains_key("timeout"), "{params:?}");

    plugin.call_tool_with("elicit_url", json!({"url": "https://auth.example/x"}), &context).await.expect("url");
    let (_, params) = client.asked.lock().unwrap().pop().expect("asked");
    assert_eq!((params["mode"].as_str(), params["url"].as_str()), (Some("url"), Some("https://auth.example/x")));
    let completed = client.told.lock().unwrap().pop().expect("told");
    assert_eq!(
        completed,
        ClientNotice::ElicitationComplete(json!({"elicitationId": "fixture-elicitation"}).as_object().unwrap().clone())
    );

    plugin.call_tool_with("sample", json!({"prompt": "2+2?"}), &context).await.expect("sample");
    let (request, params) = client.asked.lock().unwrap().pop().expect("asked");
    assert_eq!(request, ClientRequest::Sampling);
    assert_eq!(params["maxTokens"], 64);
    plugin.call_tool_with("roots", json!({}), &context).await.expect("roots");
    assert_eq!(client.asked.lock().unwrap().pop().expect("asked").0, ClientRequest::Roots);

    // Progress carries the call's own token, never the one the plugin wrote.
    client.told.lock().unwrap().clear();
    plugin.call_tool_with("progress", json!({"steps": 3}), &context).await.expect("progress");
    let told = std::mem::take(&mut *client.told.lock().unwrap());
    assert_eq!(told.len(), 3, "{told:?}");
    for (i, notice) in told.iter().enumerate() {
        let ClientNotice::Progress(params) = notice else { panic!("{notice:?}") };
        assert_eq!(params["progressToken"], "tok-1");
        assert_eq!(params["progress"], i + 1);
        assert_eq!(params["total"], 3);
    }
    // Notices are bounded in bytes as well as in number: 100 of 100 KB
    // each are 10 MB, and only the first megabyte's worth go.
    plugin.call_tool_with("progress", json!({"steps": 100, "pad": 100_000}), &context).await.expect("progress");
    let told = std::mem::take(&mut *client.told.lock().unwrap());
    assert!((5..=10).contains(&told.len()), "{} notices of 100 KB told", told.len());
    // Without a progress token, the client asked for no progress.
    let no_token = CallContext::new().with_client(client.clone());
    plugin.call_tool_with("progress", json!({"steps": 2}), &no_token).await.expect("progress");
    assert!(client.told.lock().unwrap().is_empty());

    plugin.call_tool_with("changed", json!({}), &context).await.expect("changed");
    let told = std::mem::take(&mut *client.told.lock().unwrap());
    assert_eq!(
        told,
        vec![
            ClientNotice::PromptListChanged,
            ClientNotice::ResourceListChanged,
            ClientNotice::ResourceUpdated(json!({"uri": "memo://one"}).as_object().unwrap().clone()),
        ]
    );
}

#[tokio::test]
async fn a_client_that_never_answers_is_stopped_with_the_call() {
    let plugin = v2().await;
    let silent = Arc::new(Recorder::default());
    let context = CallContext::new().with_client(silent.clone()).with_timeout(Duration::from_millis(500));
    let error = plugin.call_tool_with("sample", json!({"prompt": "?"}), &context).await.expect_err("no answer");
    let Error::PluginFailed { fault, .. } = &error else { panic!("{error}") };
    assert_eq!(fault.kind, FaultKind::Timeout, "{error}");
    assert_eq!(silent.asked.lock().unwrap().len(), 1);
    // The plugin goes on.
    assert_eq!(text(&plugin.call_tool("echo", json!({"text": "again"})).await.expect("echo")), "again");
}

#[tokio::test]
async fn log_messages_reach_the_calls_log_sink() {
    let plugin = v2().await;
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    let context = CallContext::new().with_log_sink(move |line| {
        sink.lock().unwrap().push((line.plugin.to_owned(), line.level, line.message.to_owned()))
    });
    plugin
        .call_tool_with("log", json!({"message": "disk almost full", "level": "warning"}), &context)
        .await
        .expect("log");
    let lines = lines.lock().unwrap().clone();
    assert_eq!(lines, vec![("hyper-v2".to_owned(), LogLevel::Warn, "hyper-v2: disk almost full".to_owned())]);
    // A level the protocol does not have is the plugin's error.
    let error = plugin.call_tool("log", json!({"message": "x", "level": "loud"})).await.expect_err("bad level");
    assert!(error.to_string().contains("notify_logging_message"), "{error}");
}

/// What a plugin hands a host function is parsed within its output bound:
/// a message the plugin makes as large as it likes is refused, not parsed
/// into the host at many times its size.
#[tokio::test]
async fn a_host_functions_json_is_bounded_like_output() {
    let plugin = Plugin::builder_from_file(fixture("hyper-v2"))
        .with_limits(toolhost::Limits::default().with_max_output_bytes(64 << 10))
        .build()
        .await
        .expect("load");
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    let context = CallContext::new().with_log_sink(move |line| sink.lock().unwrap().push(line.message.len()));
    let big = "x".repeat(200 << 10);
    let error = plugin
        .call_tool_with("log", json!({"message": big, "level": "info"}), &context)
        .await
        .expect_err("a message over the bound");
    let message = error.to_string();
    assert!(message.contains("notify_logging_message") && message.contains("output limit"), "{message}");
    assert!(lines.lock().unwrap().is_empty(), "nothing was logged");
    // Within the bound, the same message goes.
    plugin
        .call_tool_with("log", json!({"message": "x".repeat(10 << 10), "level": "info"}), &context)
        .await
        .expect("a message within the bound");
    assert_eq!(lines.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_keyring_secret_is_handed_only_when_granted_and_never_leaves() {
    const VALUE: &str = "kr-5ecret-value";
    let secrets = Arc::new(Secrets(vec![("CONTEXT7_KEY", VALUE), ("OTHER", "other-value")]));
    let plugin = Plugin::builder_from_file(fixture("hyper-v2"))
        .with_secret_provider(secrets.clone())
        .grant_keyring_entry("context7", "api_key", "CONTEXT7_KEY")
        .build()
        .await
        .expect("load");
    let granted =
        plugin.call_tool("keyring", json!({"service": "context7", "user": "api_key"})).await.expect("keyring");
    // Handed (its length is right), and redacted from the result.
    let shown = text(&granted);
    assert!(shown.starts_with(&format!("{} bytes: ", VALUE.len())), "{shown}");
    assert!(!shown.contains(VALUE), "{shown}");
    // An entry not granted is answered empty: the provider has `OTHER`,
    // but nothing grants it.
    let other = plugin.call_tool("keyring", json!({"service": "context7", "user": "OTHER"})).await.expect("keyring");
    assert_eq!(text(&other), "empty");
    // What the plugin sends the client is redacted too.
    let client = Arc::new(Recorder { answer: Some(json!({"action": "decline"})), ..Recorder::default() });
    let context = CallContext::new().with_client(client.clone());
    plugin.call_tool_with("elicit", json!({"message": format!("my key is {VALUE}")}), &context).await.expect("elicit");
    let (_, params) = client.asked.lock().unwrap().pop().expect("asked");
    assert!(!params["message"].as_str().unwrap().contains(VALUE), "{params:?}");
}

#[tokio::test]
async fn keyring_entries_are_granted_in_a_toolsets_file() {
    let secrets = Arc::new(Secrets(vec![("CONTEXT7_KEY", "kr-value-2")]));
    let doc = json!({"schema": "s", "toolsets": [{
        "id": "v2", "kind": "uri", "server": {"url": fixture("hyper-v2").display().to_string()},
        "keyring": [{"service": "context7", "user": "api_key", "secret": "CONTEXT7_KEY"}]
    }]});
    let file = parse_toolsets(std::path::Path::new("toolsets.json"), &doc, secrets.as_ref()).await.expect("parse");
    let registry = Registry::new(secrets);
    let report = registry.load_all(file.toolsets).await;
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    let result = registry
        .call_tool("v2__keyring", json!({"service": "context7", "user": "api_key"}), &toolhost::ApproveAll)
        .await
        .expect("keyring");
    assert!(text(&result).starts_with("10 bytes: "), "{}", text(&result));
    // A malformed entry is refused where it is.
    let bad = json!({"schema": "s", "toolsets": [{
        "id": "v2", "kind": "uri", "server": {"url": fixture("hyper-v2").display().to_string()},
        "keyring": [{"service": "context7"}]
    }]});
    let error = parse_toolsets(std::path::Path::new("t.json"), &bad, &toolhost::NoSecrets).await.expect_err("bad");
    assert!(error.to_string().contains("/toolsets/0/keyring/0"), "{error}");
}

#[tokio::test]
async fn a_plugin_whose_tool_list_grows_is_followed_on_the_same_instance() {
    let plugin = Plugin::load(fixture("tool-list-changed")).await.expect("load");
    assert!(plugin.has_dynamic_tools());
    assert_eq!(plugin.pool_stats().size, 1, "a plugin that keeps its list in memory has one instance");
    let mut changes = plugin.tool_list_changes();
    let added = plugin.call_tool("add_tool", json!({})).await.expect("add");
    assert_eq!(text(&added), "added tool_1");
    tokio::time::timeout(Duration::from_secs(30), changes.changed()).await.expect("a change").expect("open");
    // The plugin's own list stays what it was loaded with; described again,
    // on the same instance, it has the new tool.
    assert!(plugin.tool("tool_1").is_none());
    let now = plugin.redescribed().await.expect("described again");
    assert!(now.tool("tool_1").is_some(), "{:?}", now.tools());
    assert_eq!(text(&now.call_tool("tool_1", json!({})).await.expect("tool_1")), "tool 1 called");
}

/// A registry of one toolset, `grow`, of a plugin whose tool list grows
/// (`server` as the toolsets file has it), loaded.
async fn growing_registry(server: Value) -> Registry {
    let doc = json!({"schema": "s", "toolsets": [{"id": "grow", "kind": "uri", "server": server}]});
    let file = parse_toolsets(std::path::Path::new("toolsets.json"), &doc, &toolhost::NoSecrets).await.expect("parse");
    let registry = Registry::new(Arc::new(toolhost::NoSecrets));
    let report = registry.load_all(file.toolsets).await;
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    registry
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_follows_a_plugins_tool_list_and_tells_its_subscribers() {
    let registry = growing_registry(json!({"url": fixture("tool-list-changed").display().to_string()})).await;
    let mut changes = registry.subscribe();
    changes.borrow_and_update();
    for n in 1..=2 {
        let added = registry.call_tool("grow__add_tool", json!({}), &toolhost::ApproveAll).await.expect("add");
        assert_eq!(text(&added), format!("added tool_{n}"));
        let name = format!("grow__tool_{n}");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while registry.tool(&name).is_none() {
            tokio::time::timeout_at(deadline, changes.changed()).await.expect("a change in time").expect("open");
        }
        let called = registry.call_tool(&name, json!({}), &toolhost::ApproveAll).await.expect("call the new tool");
        assert_eq!(text(&called), format!("tool {n} called"));
    }
    let syncs: Vec<_> = registry.sync_events().into_iter().filter(|e| e.tool_set_id == "grow").collect();
    assert!(syncs.len() >= 4, "a sync per change: {syncs:?}");
}

/// A plugin that announces a change from `describe` itself: the registry
/// reads its list again once per change a call announces, never in a loop
/// (each reading would announce again, and every client would hear it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_announcing_changes_from_describe_makes_no_loop() {
    let registry = growing_registry(json!({
        "url": fixture("tool-list-changed").display().to_string(),
        "config": {"announce_in_describe": "yes"},
    }))
    .await;
    let mut changes = registry.subscribe();
    changes.borrow_and_update();
    let added = registry.call_tool("grow__add_tool", json!({}), &toolhost::ApproveAll).await.expect("add");
    assert_eq!(text(&added), "added tool_1");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while registry.tool("grow__tool_1").is_none() {
        tokio::time::timeout_at(deadline, changes.changed()).await.expect("a change in time").expect("open");
    }
    changes.borrow_and_update();
    // Nothing more was announced by a call, so nothing more changes (a loop
    // reads the list again at once, over and over).
    let more = tokio::time::timeout(Duration::from_secs(3), changes.changed()).await;
    assert!(more.is_err(), "the registry changed again with no call: a loop");
    let syncs = registry.sync_events().into_iter().filter(|e| e.tool_set_id == "grow").count();
    assert!(syncs <= 4, "{syncs} syncs for one load and one change");
}

#[tokio::test]
async fn an_unknown_user_import_is_refused_naming_what_is_served() {
    let wat = r#"(module
        (import "extism:host/user" "steal_everything" (func (param i64) (result i64)))
        (func (export "list_tools") (result i32) i32.const 0))"#;
    let error = Plugin::builder_from_bytes(wat.as_bytes().to_vec()).build().await.expect_err("refused");
    let message = error.to_string();
    assert!(message.contains("steal_everything") && message.contains("hyper-mcp"), "{message}");
    // A served function imported with the wrong type is refused too.
    let wat = r#"(module
        (import "extism:host/user" "notify_progress" (func (param i32)))
        (func (export "call_tool") (result i32) i32.const 0))"#;
    let error = Plugin::builder_from_bytes(wat.as_bytes().to_vec()).build().await.expect_err("refused");
    assert!(error.to_string().contains("notify_progress"), "{error}");
    // A module with neither interface says what a plugin exports.
    let wat = r#"(module (func (export "hello") (result i32) i32.const 0))"#;
    let error = Plugin::builder_from_bytes(wat.as_bytes().to_vec()).build().await.expect_err("refused");
    assert!(error.to_string().contains("list_tools"), "{error}");
}

#[test]
fn serve_relays_what_plugins_ask_and_tell_to_a_real_mcp_client() {
    let dir = std::env::temp_dir().join(format!("toolhost-talkback-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let path = dir.join("toolsets.json");
    let doc = json!({"schema": "s", "toolsets": [
        {"id": "v2", "kind": "uri", "server": {"url": fixture("hyper-v2").display().to_string()}},
        {"id": "grow", "kind": "uri", "server": {"url": fixture("tool-list-changed").display().to_string()}}
    ]});
    std::fs::write(&path, doc.to_string()).expect("write");
    let report = toolhost_tests::mcp_python_report("talkback.py", &path);
    assert_eq!(report["protocol"], "2025-11-25", "{report}");
    // Elicitation: the user's answer reaches the plugin.
    assert_eq!(report["elicit"], json!({"action": "accept", "content": {"name": "Ada"}}), "{report}");
    assert_eq!(report["elicited"][0]["message"], "Who?", "{report}");
    assert_eq!(report["elicit_url"]["action"], "accept", "{report}");
    assert_eq!(report["elicited"][1]["mode"], "url", "{report}");
    // Sampling and roots.
    assert_eq!(report["sample"]["content"]["text"], "4", "{report}");
    assert_eq!(report["sample"]["model"], "test-model", "{report}");
    assert_eq!(report["sampled"][0], json!({"max_tokens": 64, "text": "2+2?"}), "{report}");
    assert_eq!(report["roots"]["roots"][0]["uri"], "file:///work", "{report}");
    // A log message, from the plugin, under its toolset's name.
    let logs = report["logs"].as_array().expect("logs");
    assert!(
        logs.iter()
            .any(|l| l["logger"] == "v2" && l["level"] == "warning" && l["data"] == "hyper-v2: disk almost full"),
        "{report}"
    );
    // Progress for this call's token, in order.
    assert_eq!(report["steps"], "3 steps");
    let progress: Vec<f64> =
        report["progress"].as_array().expect("progress").iter().filter_map(|p| p["progress"].as_f64()).collect();
    assert_eq!(progress, vec![1.0, 2.0, 3.0], "{report}");
    assert_eq!(report["progress"][2]["message"], "step 3", "{report}");
    // List changes and a resource update; the URL elicitation's completion.
    let notices: Vec<&str> = report["notices"].as_array().expect("notices").iter().filter_map(Value::as_str).collect();
    for method in [
        "notifications/prompts/list_changed",
        "notifications/resources/list_changed",
        "notifications/resources/updated",
        "notifications/elicitation/complete",
    ] {
        assert!(notices.contains(&method), "{method} missing from {notices:?}");
    }
    // A plugin whose tool list grows: the client is told, and the new tool
    // is listed and callable.
    assert_eq!(report["before"], json!(["grow__add_tool"]), "{report}");
    assert_eq!(report["add"], "added tool_1");
    assert_eq!(report["after"], json!(["grow__add_tool", "grow__tool_1"]), "{report}");
    assert_eq!(report["tool_1"], "tool 1 called");
    // Prompts (namespaced), resources and templates (their own URIs), reads
    // routed to the toolset that lists the URI or matches it, completions.
    assert_eq!(report["prompts"], json!(["v2__greeting"]), "{report}");
    assert_eq!(report["prompt"], "Hello, Ada!", "{report}");
    assert_eq!(report["resources"], json!(["memo://one"]), "{report}");
    assert_eq!(report["templates"], json!(["memo://{id}"]), "{report}");
    assert_eq!(report["read"], "memo one", "{report}");
    assert_eq!(report["read_template"], "memo seven", "{report}");
    assert_eq!(report["read_missing"]["code"], -32002, "{report}");
    assert_eq!(report["completion"], json!(["bob"]), "{report}");
    std::fs::remove_dir_all(dir).ok();
}

#[tokio::test]
async fn a_v2_plugins_prompts_resources_and_completions_are_checked_and_served() {
    use toolhost::protocol::CompletionReference;
    let plugin = v2().await;
    let offers = plugin.offers();
    assert!(offers.prompts && offers.resources && offers.resource_templates && offers.completions, "{offers:?}");
    let context = CallContext::new();

    let prompts = plugin.list_prompts(&context).await.expect("prompts");
    assert_eq!(prompts.prompts.len(), 1);
    assert_eq!(prompts.prompts[0].name, "greeting");
    assert_eq!(prompts.prompts[0].arguments.as_ref().unwrap()[0].required, Some(true));
    let mut arguments = Map::new();
    arguments.insert("name".into(), json!("Ada"));
    let prompt = plugin.get_prompt("greeting", Some(arguments), &context).await.expect("prompt");
    assert_eq!(serde_json::to_value(&prompt.messages[0]).unwrap()["content"]["text"], "Hello, Ada!");
    // A prompt the plugin does not have: its error, typed.
    let error = plugin.get_prompt("farewell", None, &context).await.expect_err("no such prompt");
    assert!(matches!(error, Error::PluginFailed { .. }), "{error}");
    assert!(error.to_string().contains("prompt `farewell`"), "{error}");

    let resources = plugin.list_resources(&context).await.expect("resources");
    assert_eq!(resources.resources[0].uri, "memo://one");
    let templates = plugin.list_resource_templates(&context).await.expect("templates");
    assert_eq!(templates.resource_templates[0].uri_template, "memo://{id}");
    let read = plugin.read_resource("memo://seven", &context).await.expect("read");
    assert_eq!(read.contents[0].text.as_deref(), Some("memo seven"));

    let reference = CompletionReference::Prompt { name: "greeting".into() };
    let completed = plugin.complete(&reference, ("name", "a"), None, &context).await.expect("complete");
    assert_eq!(completed.completion.values, vec!["alice"]);
    plugin.roots_list_changed(&context).await.expect("roots changed");

    // A plugin that offers nothing besides tools lists nothing, and
    // refuses to read.
    let servlet = Plugin::load(fixture("raw-servlet")).await.expect("load");
    assert!(!servlet.offers().any());
    assert!(servlet.list_prompts(&context).await.expect("none").prompts.is_empty());
    let error = servlet.read_resource("memo://one", &context).await.expect_err("no resources");
    assert!(error.to_string().contains("read_resource"), "{error}");
}

/// A v2 plugin in WAT whose every export in `outputs` returns that JSON.
fn v2_wat(outputs: &[(&str, &str)]) -> String {
    let mut data = String::new();
    let mut exports = String::new();
    let mut at = 0usize;
    for (export, json) in outputs {
        data.push_str(&format!("  (data (i32.const {at}) \"{}\")\n", json.replace('\\', "\\\\").replace('"', "\\\"")));
        exports.push_str(&format!(
            "  (func (export \"{export}\") (result i32)\n    (call $output_set (call $emit (i32.const {at}) (i32.const {len})) (i64.const {len}))\n    (i32.const 0))\n",
            len = json.len()
        ));
        at += json.len().next_multiple_of(16) + 16;
    }
    format!(
        r#"(module
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (memory (export "memory") 1)
{data}
{WAT_EMIT}
{exports})"#
    )
}

#[tokio::test]
async fn what_a_plugin_offers_besides_tools_is_checked_against_the_protocol() {
    let context = CallContext::new();
    let wat = v2_wat(&[
        ("list_tools", r#"{"tools":[]}"#),
        ("list_prompts", r#"{"prompts":[{"title":"no name"}]}"#),
        ("get_prompt", r#"{"messages":[{"role":"narrator","content":{"type":"text","text":"x"}}]}"#),
        ("list_resources", r#"{"resources":[{"uri":"a://b","name":"b"}]}"#),
        ("read_resource", r#"{"contents":[{"uri":"a://b","text":"t","blob":"AAAA"}]}"#),
        ("complete", &format!(r#"{{"completion":{{"values":[{}]}}}}"#, vec!["\"v\""; 101].join(","))),
    ]);
    let plugin = Plugin::builder_from_bytes(wat.into_bytes()).with_name("liar").build().await.expect("load");
    let invalid = |error: Error| match error {
        Error::InvalidOutput { problem: toolhost::OutputProblem::Invalid { violations, .. }, .. } => violations,
        other => panic!("{other}"),
    };
    let violations = invalid(plugin.list_prompts(&context).await.expect_err("no name"));
    assert!(violations[0].message.contains("name"), "{violations:?}");
    let violations = invalid(plugin.get_prompt("p", None, &context).await.expect_err("bad role"));
    assert!(violations[0].message.contains("narrator"), "{violations:?}");
    let violations = invalid(plugin.read_resource("a://b", &context).await.expect_err("text and blob"));
    assert_eq!(violations[0].instance_path, "/contents/0/text");
    let reference = toolhost::protocol::CompletionReference::Prompt { name: "p".into() };
    let violations = invalid(plugin.complete(&reference, ("a", ""), None, &context).await.expect_err("101 values"));
    assert_eq!(violations[0].instance_path, "/completion/values");
    // What is right still reads.
    assert_eq!(plugin.list_resources(&context).await.expect("resources").resources[0].uri, "a://b");
}

#[test]
fn the_cli_describes_and_calls_hyper_mcp_plugins() {
    use toolhost_tests::{json_stdout, run_toolhost};
    let v2 = fixture("hyper-v2").display().to_string();
    let described = run_toolhost(&["describe", &v2], None);
    assert!(described.status.success(), "{}", String::from_utf8_lossy(&described.stderr));
    let names: Vec<String> = json_stdout(&described)["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(names.contains(&"echo".to_owned()) && names.contains(&"keyring".to_owned()), "{names:?}");
    let called = run_toolhost(&["call", &v2, "echo", r#"{"text":"hi"}"#], None);
    assert!(called.status.success(), "{}", String::from_utf8_lossy(&called.stderr));
    assert_eq!(json_stdout(&called)["content"][0]["text"], "hi");
    let grow = fixture("tool-list-changed").display().to_string();
    let added = run_toolhost(&["call", &grow, "add_tool", "{}"], None);
    assert!(added.status.success(), "{}", String::from_utf8_lossy(&added.stderr));
    assert_eq!(json_stdout(&added)["content"][0]["text"], "added tool_1");
}
