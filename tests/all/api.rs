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
