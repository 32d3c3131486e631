//! The library as an embedder sees it: handles that cross threads and
//! tasks, futures that can be spawned.

use serde_json::json;
use toolhost::{ApproveAll, Error, Plugin, Registry};

fn send_sync<T: Send + Sync + 'static>() {}

fn send<T: Send>(_: &T) {}

/// Checked by the compiler: a handle or future that stops being `Send`
/// (or `Sync`) fails the build of this test.
#[test]
fn handles_are_send_and_sync_and_calls_can_be_spawned() {
    send_sync::<Plugin>();
    send_sync::<Registry>();
    send_sync::<Error>();
    send_sync::<toolhost::LoadReport>();
    send_sync::<toolhost::RegisteredTool>();
    send_sync::<toolhost::Policy>();
    send_sync::<toolhost::ModuleCache>();
    send_sync::<toolhost_mcp::McpServer>();

    fn futures(plugin: &Plugin, registry: &Registry) {
        send(&Plugin::load("p.wasm"));
        send(&plugin.call_tool("t", json!({})));
        send(&registry.call_tool("t", json!({}), &ApproveAll));
        send(&registry.load_all(Vec::new()));
    }
    let _ = futures;
}

/// A call runs on a spawned task of a multi-threaded runtime, and the
/// plugin handle is shared between tasks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_is_shared_between_spawned_tasks() {
    let plugin = std::sync::Arc::new(Plugin::load(toolhost_tests::example("calculator")).await.expect("load"));
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let plugin = std::sync::Arc::clone(&plugin);
            tokio::spawn(async move { plugin.call_tool("add", json!({"a": i, "b": 1})).await })
        })
        .collect();
    for (i, task) in tasks.into_iter().enumerate() {
        let result = task.await.expect("task").expect("call");
        assert_eq!(result.texts().next(), Some((i + 1).to_string().as_str()));
    }
}

/// An approver that records what it was asked and answers as told.
struct Recording {
    answer: toolhost::Approval,
    asked: std::sync::Mutex<Vec<(String, serde_json::Value, Option<bool>)>>,
}

impl toolhost::Approver for Recording {
    fn approve<'a>(&'a self, request: toolhost::ApprovalRequest<'a>) -> toolhost::BoxFuture<'a, toolhost::Approval> {
        let read_only = request.annotations().and_then(|a| a.read_only_hint);
        self.asked.lock().unwrap().push((request.tool.name.clone(), request.arguments.clone(), read_only));
        let answer = self.answer.clone();
        Box::pin(async move { answer })
    }
}

/// A single plugin asks for approval too: with `fromAnnotations`, a tool
/// that does not say it is harmless goes to the approver (with its
/// validated arguments), a read-only one does not; a denial means the
/// plugin does not run, and invalid arguments are refused before anyone is
/// asked.
#[tokio::test]
async fn a_single_plugin_asks_for_approval_by_its_annotations() {
    let describe = json!({"tools": [
        {"name": "wipe", "description": "d", "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}}},
        {"name": "peek", "description": "d", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}}
    ]});
    let ran = json!({"content": [{"type": "text", "text": "the plugin ran"}]});
    let plugin = Plugin::builder_from_file(toolhost_tests::fixture("scripted"))
        .with_config("describe", describe.to_string())
        .with_config("result", ran.to_string())
        .build()
        .await
        .expect("load");
    let rules = toolhost::ToolApprovals::from_annotations();
    let deny = Recording { answer: toolhost::Approval::Denied("not today".into()), asked: Default::default() };

    let denied = plugin.call_tool_approved("wipe", json!({"n": 1}), &rules, &deny).await.expect("an answer");
    assert!(denied.is_error());
    assert_eq!(denied.texts().next(), Some("the call to `wipe` was not approved: not today"));
    assert_eq!(*deny.asked.lock().unwrap(), [("wipe".to_owned(), json!({"n": 1}), None)]);

    let peek = plugin.call_tool_approved("peek", json!({}), &rules, &deny).await.expect("read-only runs");
    assert_eq!(peek.texts().next(), Some("the plugin ran"));
    assert_eq!(deny.asked.lock().unwrap().len(), 1, "a read-only tool is not asked about");

    let invalid = plugin.call_tool_approved("wipe", json!({"n": "x"}), &rules, &deny).await.unwrap_err();
    assert!(invalid.is_invalid_arguments(), "{invalid:?}");
    assert_eq!(deny.asked.lock().unwrap().len(), 1, "invalid arguments are refused before asking");

    let allow = Recording { answer: toolhost::Approval::Approved, asked: Default::default() };
    let approved = plugin.call_tool_approved("wipe", json!({"n": 2}), &rules, &allow).await.expect("approved");
    assert_eq!(approved.texts().next(), Some("the plugin ran"));
    assert_eq!(allow.asked.lock().unwrap().len(), 1);
}

/// The text a model reads for a failed call says what was wrong and where.
#[tokio::test]
async fn errors_have_a_text_for_the_model() {
    let plugin = Plugin::load(toolhost_tests::example("calculator")).await.expect("load");
    let error = plugin.call_tool("add", json!({"a": "two"})).await.unwrap_err();
    let text = error.model_text();
    assert!(text.starts_with("invalid arguments for `add`; the tool did not run: "), "{text}");
    assert!(text.contains("at /a:") && text.contains("at /b:"), "{text}");
    let result = error.to_tool_result();
    assert!(result.is_error());
    assert_eq!(result.texts().next(), Some(text.as_str()));
    let unknown = plugin.call_tool("modulo", json!({})).await.unwrap_err().model_text();
    assert!(unknown.contains("no tool `modulo`") && unknown.contains("add"), "{unknown}");
}

/// `toolApprovals.fromAnnotations` in a toolsets file: the calculator's
/// tools say they are read-only, a scripted tool without annotations does
/// not, so only the latter needs approval.
#[tokio::test]
async fn toolsets_derive_approvals_from_annotations_when_asked() {
    let describe = json!({"tools": [{"name": "wipe", "description": "d", "inputSchema": {"type": "object"}}]});
    let document = json!({"schema": "s", "toolsets": [
        {"id": "calc", "kind": "uri", "server": {"url": toolhost_tests::example("calculator").display().to_string()},
         "extensions": {"toolApprovals": {"fromAnnotations": true}}},
        {"id": "script", "kind": "uri",
         "server": {"url": toolhost_tests::fixture("scripted").display().to_string(), "config": {"describe": describe.to_string()}},
         "extensions": {"toolApprovals": {"fromAnnotations": true}}}
    ]});
    let parsed = toolhost::parse_toolsets(std::path::Path::new("inline.json"), &document, &toolhost::NoSecrets)
        .await
        .expect("a valid toolsets document");
    let registry = Registry::new(std::sync::Arc::new(toolhost::NoSecrets));
    let report = registry.load_all(parsed.toolsets).await;
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    let approval: Vec<(String, bool)> = registry.tools().into_iter().map(|t| (t.name, t.requires_approval)).collect();
    assert!(approval.contains(&("calc__add".to_owned(), false)), "{approval:?}");
    assert!(approval.contains(&("script__wipe".to_owned(), true)), "{approval:?}");
}

/// A secret store that answers asynchronously (as a vault or a KMS does)
/// and counts its lookups.
struct Vault {
    lookups: std::sync::atomic::AtomicUsize,
}

impl toolhost::SecretProvider for Vault {
    fn secret<'a>(&'a self, name: &'a str) -> toolhost::BoxFuture<'a, Result<Option<String>, toolhost::SecretError>> {
        Box::pin(async move {
            // A lookup that waits (for the network, in a real store).
            tokio::task::yield_now().await;
            self.lookups.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok((name == "SERVICE_TOKEN").then(|| "tok-from-the-vault".to_owned()))
        })
    }

    fn describe(&self) -> String {
        "vault".to_owned()
    }
}

/// Secrets come from an asynchronous provider: a plugin's granted secret,
/// and a toolsets file's `${secret:..}` references (each name looked up
/// once, however often it is used).
#[tokio::test]
async fn secrets_come_from_an_asynchronous_provider() {
    let vault = std::sync::Arc::new(Vault { lookups: Default::default() });
    let plugin = Plugin::builder_from_file(toolhost_tests::fixture("sdk-secrets"))
        .with_secret_provider(vault.clone())
        .grant_secret("SERVICE_TOKEN")
        .build()
        .await
        .expect("load");
    let result = plugin.call_tool("token_length", json!({})).await.expect("call");
    assert_eq!(result.texts().next(), Some("the token has 18 characters"));
    let after_plugin = vault.lookups.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(after_plugin, 1);

    let document = json!({"schema": "s", "toolsets": [{"id": "calc", "kind": "uri", "server": {
        "url": toolhost_tests::example("calculator").display().to_string(),
        "config": {"a": "${secret:SERVICE_TOKEN}", "b": "x-${secret:SERVICE_TOKEN}"}}}]});
    let parsed = toolhost::parse_toolsets(std::path::Path::new("inline.json"), &document, vault.as_ref())
        .await
        .expect("a valid toolsets document");
    assert_eq!(vault.lookups.load(std::sync::atomic::Ordering::SeqCst), after_plugin + 1, "one lookup per name");
    let config = &parsed.toolsets[0].policy.config;
    assert_eq!(config.get("b").map(String::as_str), Some("x-tok-from-the-vault"));

    let missing = json!({"schema": "s", "toolsets": [{"id": "calc", "kind": "uri", "server": {
        "url": "a.wasm", "config": {"a": "${secret:NOPE}"}}}]});
    let error =
        toolhost::parse_toolsets(std::path::Path::new("inline.json"), &missing, vault.as_ref()).await.unwrap_err();
    assert!(error.to_string().contains("the secret provider (vault) has no secret NOPE"), "{error}");
}
