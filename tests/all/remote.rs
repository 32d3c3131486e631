//! Remote MCP servers as toolsets (`kind: mcp`), toolhost the client: a
//! real server on the official MCP Python SDK (`tests/mcp/server.py`) over
//! stdio and over streamable HTTP, behind the same registry, names,
//! filters, approvals, checks and redaction as Wasm plugins.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost::{ApproveAll, DenyAll, Error, FileSecretProvider, NoSecrets, Registry, SecretProvider, load_toolsets};
use toolhost_mcp::McpConnector;
use toolhost_tests::{example, mcp_python};

fn server_script() -> String {
    toolhost_tests::mcp_python_server().display().to_string()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("toolhost-remote-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// A registry that connects `mcp` toolsets, loaded from `doc`.
async fn registry_of(dir: &Path, doc: Value, secrets: Arc<dyn SecretProvider>) -> Registry {
    let path = dir.join("toolsets.json");
    std::fs::write(&path, doc.to_string()).expect("write the toolsets file");
    let file = load_toolsets(&path, secrets.as_ref()).await.unwrap_or_else(|e| panic!("{e}"));
    let registry = Registry::new(secrets).with_connector("mcp", Arc::new(McpConnector::new()));
    let report = registry.load_all(file.toolsets).await;
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    registry
}

fn text(result: &toolhost::CallToolResult) -> String {
    result.texts().next().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_mcp_server_is_a_toolset_under_the_same_policy_and_comes_back_after_dying() {
    let dir = scratch("stdio");
    let python = mcp_python().display().to_string();
    let doc = json!({"schema": "s", "toolsets": [
        {"id": "calc", "kind": "uri", "server": {"url": example("calculator").display().to_string()}},
        {"id": "py", "kind": "mcp",
         "server": {"command": python, "args": [server_script(), "stdio"], "env": {"GRANTED": "granted-value"}},
         "tools": [{"name": "echo", "requiresApproval": true}],
         "extensions": {"excludeTools": {"filters": [{"attribute": "ATTRIBUTE_NAME", "matcher": {"exact": "leak_token"}}]}}}
    ]});
    let registry = registry_of(&dir, doc, Arc::new(NoSecrets)).await;
    assert_listing_and_syncs(&registry);
    assert_calls_follow_the_policy(&registry).await;
    let before = assert_a_changed_list_is_read_again(&registry).await;
    assert_a_dead_server_comes_back(&registry, &before).await;
    std::fs::remove_dir_all(dir).ok();
}

/// The stdio server's tools under the file's names and filter, and one sync
/// of each toolset.
fn assert_listing_and_syncs(registry: &Registry) {
    let names: Vec<String> = registry.tools().into_iter().map(|t| t.name).collect();
    for name in ["calc__add", "py__add", "py__echo", "py__die", "py__pid"] {
        assert!(names.contains(&name.to_owned()), "{name} missing from {names:?}");
    }
    // The exclude filter applies to the server's tools.
    assert!(!names.contains(&"py__leak_token".to_owned()), "{names:?}");
    let leak = registry.all_tools().into_iter().find(|t| t.name == "py__leak_token").expect("known");
    assert_eq!(leak.status(), toolhost::ToolStatus::Filtered);
    // Each toolset's sync, as the service model's events.
    let events: Vec<(String, &'static str)> = registry
        .sync_events()
        .into_iter()
        .map(|e| {
            let kind = match e.event {
                toolhost::SyncEvent::SyncStarted { .. } => "started",
                toolhost::SyncEvent::SyncCompleted { .. } => "completed",
                _ => "other",
            };
            (e.tool_set_id, kind)
        })
        .collect();
    for toolset in ["calc", "py"] {
        let of: Vec<&str> = events.iter().filter(|(id, _)| id == toolset).map(|(_, k)| *k).collect();
        assert_eq!(of, ["started", "completed"], "{events:?}");
    }
    let py = registry.last_syncs().into_iter().find(|e| e.tool_set_id == "py").expect("py's sync");
    match py.event {
        toolhost::SyncEvent::SyncCompleted { tools_synced, .. } => {
            assert_eq!(tools_synced as usize, names.len() - 4 + 1)
        }
        other => panic!("{other:?}"),
    }
}

/// Calls reach the server only with valid arguments and approval, carry
/// the caller's `_meta` but no progress token, and the server has only
/// the environment it is granted.
async fn assert_calls_follow_the_policy(registry: &Registry) {
    let sum = registry.call_tool("py__add", json!({"a": 2, "b": 3}), &ApproveAll).await.expect("add");
    assert_eq!(text(&sum), "5");
    // Arguments the server's schema refuses never reach it.
    let error = registry.call_tool("py__add", json!({"a": "two", "b": 3}), &ApproveAll).await.unwrap_err();
    assert!(error.is_invalid_arguments(), "{error:?}");
    assert!(error.to_string().contains("at /a"), "{error}");
    let seen = registry.call_tool("py__calls_seen", json!({}), &ApproveAll).await.expect("calls_seen");
    assert_eq!(text(&seen), "1", "only the valid call reached the server");
    // Approval applies: denied, the server is not asked.
    let denied =
        registry.call_tool("py__echo", json!({"text": "hi"}), &DenyAll("no".to_owned())).await.expect("answer");
    assert!(denied.is_error(), "{denied:?}");
    let echoed = registry.call_tool("py__echo", json!({"text": "hi"}), &ApproveAll).await.expect("echo");
    assert_eq!(text(&echoed), "hi");
    // The caller's `_meta` goes on, but not its progress token.
    let mut meta = serde_json::Map::new();
    meta.insert("traceparent".into(), json!("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));
    meta.insert("progressToken".into(), json!(5));
    let context = toolhost::CallContext::new().with_meta(meta);
    let seen = registry.call_with("py__meta", json!({}), &ApproveAll, &context).await.expect("meta");
    let keys = text(&seen);
    assert!(keys.split(',').any(|k| k == "traceparent"), "{keys}");
    // Nor any progress token of rmcp's own (the Python SDK names the key
    // `progress_token` once it has read it).
    assert!(!keys.split(',').any(|k| k == "progressToken" || k == "progress_token"), "{keys}");
    // The server gets the environment it is granted, not toolhost's.
    let granted = registry.call_tool("py__env", json!({"name": "GRANTED"}), &ApproveAll).await.expect("env");
    assert_eq!(text(&granted), "granted-value");
    let inherited =
        registry.call_tool("py__env", json!({"name": "CARGO_MANIFEST_DIR"}), &ApproveAll).await.expect("env");
    assert_eq!(text(&inherited), "<unset>");
}

/// The server adds a tool and says so: the registry lists its tools again
/// on the same session, under the same settings. The server's process id.
async fn assert_a_changed_list_is_read_again(registry: &Registry) -> String {
    // The server adds a tool and says so (`list_changed`): the registry
    // lists its tools again, on the same session (the same process).
    let before = text(&registry.call_tool("py__pid", json!({}), &ApproveAll).await.expect("pid"));
    let mut changes = registry.subscribe();
    assert!(registry.tool("py__grown").is_none());
    let grew = registry.call_tool("py__grow", json!({}), &ApproveAll).await.expect("grow");
    assert_eq!(text(&grew), "grew");
    let deadline = Instant::now() + Duration::from_secs(60);
    while registry.tool("py__grown").is_none() {
        assert!(Instant::now() < deadline, "py__grown never appeared: {:?}", registry.sync_events());
        let _ = tokio::time::timeout(Duration::from_secs(1), changes.changed()).await;
    }
    let grown = registry.call_tool("py__grown", json!({}), &ApproveAll).await.expect("grown");
    assert_eq!(text(&grown), "grown");
    let same = text(&registry.call_tool("py__pid", json!({}), &ApproveAll).await.expect("pid"));
    assert_eq!(before, same, "the tools were listed again on a new session");
    // The settings still apply to the new list, and the reload is a sync.
    assert!(registry.tool("py__leak_token").is_some_and(|t| !t.enabled));
    let completed = registry
        .sync_events()
        .iter()
        .filter(|e| e.tool_set_id == "py" && matches!(e.event, toolhost::SyncEvent::SyncCompleted { .. }))
        .count();
    assert_eq!(completed, 2, "{:?}", registry.sync_events());
    before
}

/// The server dies mid-session: a typed error of that call, then a new
/// process answers; the Wasm toolset beside it never noticed.
async fn assert_a_dead_server_comes_back(registry: &Registry, before: &str) {
    // The server dies mid-session: a typed error of that call.
    let error = registry.call_tool("py__die", json!({}), &ApproveAll).await.unwrap_err();
    assert!(matches!(error, Error::PluginFailed { .. }), "{error:?}");
    // It comes back: a new process answers (after the backoff).
    let deadline = Instant::now() + Duration::from_secs(60);
    let after = loop {
        match registry.call_tool("py__pid", json!({}), &ApproveAll).await {
            Ok(result) => break text(&result),
            Err(error) => {
                assert!(Instant::now() < deadline, "the server did not come back: {error}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    assert_ne!(before, after, "the same process answered after it died");
    // The Wasm plugin next door never noticed.
    let calc = registry.call_tool("calc__add", json!({"a": 1, "b": 1}), &ApproveAll).await.expect("calc");
    assert_eq!(text(&calc), "2");
}

/// The server over streamable HTTP on a free loopback port; killed when
/// dropped.
struct HttpServer(std::process::Child, u16);

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn http_server(expected_token: &str) -> HttpServer {
    let (child, port) = toolhost_tests::spawn_mcp_python_http(&[("EXPECTED_TOKEN", expected_token)]);
    HttpServer(child, port)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_mcp_server_gets_its_header_from_a_secret_which_never_comes_back() {
    let dir = scratch("http");
    let secrets_dir = dir.join("secrets");
    std::fs::create_dir_all(&secrets_dir).expect("secrets dir");
    std::fs::write(secrets_dir.join("API_TOKEN"), "tok-7f3e9a1c").expect("secret");
    let server = http_server("tok-7f3e9a1c");
    let doc = json!({"schema": "s", "toolsets": [
        {"id": "remote", "kind": "mcp",
         "server": {"url": format!("http://127.0.0.1:{}/mcp", server.1)},
         "headers": {"x-token": "${secret:API_TOKEN}"}}
    ]});
    let registry = registry_of(&dir, doc, Arc::new(FileSecretProvider::new(&secrets_dir))).await;
    let ok = registry.call_tool("remote__token_ok", json!({}), &ApproveAll).await.expect("token_ok");
    assert_eq!(text(&ok), "yes", "the header reached the server");
    let sum = registry.call_tool("remote__add", json!({"a": 40, "b": 2}), &ApproveAll).await.expect("add");
    assert_eq!(text(&sum), "42");
    // The server quotes the secret: the registry redacts it.
    let leaked = registry.call_tool("remote__leak_token", json!({}), &ApproveAll).await.expect("leak_token");
    let leaked = serde_json::to_string(&leaked).expect("json");
    assert!(!leaked.contains("tok-7f3e9a1c"), "{leaked}");
    assert!(leaked.contains("[redacted secret API_TOKEN]"), "{leaked}");

    // The server goes away: a typed error, not a crash.
    drop(server);
    let error = registry.call_tool("remote__add", json!({"a": 1, "b": 1}), &ApproveAll).await.unwrap_err();
    assert!(matches!(error, Error::PluginFailed { .. }), "{error:?}");
    std::fs::remove_dir_all(dir).ok();
}

/// A TCP relay on loopback to `to`, a thread per connection and
/// direction: its port, the count of connections it accepted, and every
/// byte the server sent (kept before it is passed on).
fn counting_relay(to: u16) -> (u16, Arc<std::sync::atomic::AtomicUsize>, Arc<std::sync::Mutex<Vec<u8>>>) {
    use std::io::{Read as _, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let answers = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (count, log) = (Arc::clone(&accepted), Arc::clone(&answers));
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { return };
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let Ok(server) = std::net::TcpStream::connect(("127.0.0.1", to)) else { continue };
            let directions = [
                (client.try_clone().expect("clone"), server.try_clone().expect("clone"), None),
                (server, client, Some(Arc::clone(&log))),
            ];
            for (mut from, mut into, log) in directions {
                let _ = from.set_nodelay(true);
                std::thread::spawn(move || {
                    let mut buffer = [0u8; 16 * 1024];
                    while let Ok(read @ 1..) = from.read(&mut buffer) {
                        if let Some(log) = &log {
                            log.lock().expect("log").extend_from_slice(&buffer[..read]);
                        }
                        if into.write_all(&buffer[..read]).is_err() {
                            break;
                        }
                    }
                    let _ = into.shutdown(std::net::Shutdown::Write);
                });
            }
        }
    });
    (port, accepted, answers)
}

/// Calls to an HTTP MCP server go on connections kept alive between them
/// (rmcp's own client opens one per request), and ask for no progress, so
/// that `toolhost serve` answers each with one JSON object rather than on
/// an event stream: 40 calls in a row to `toolhost serve --http`, through
/// a relay that counts the connections made to the server and reads its
/// answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_to_an_http_mcp_server_reuse_its_connections() {
    use std::sync::atomic::Ordering;
    const CALLS: usize = 40;
    let dir = scratch("keep-alive");
    let calculator = example("calculator").display().to_string();
    let (mut server, url) = toolhost_tests::spawn_serve_http_of(&toolhost_tests::toolhost(), &[&calculator], &[]);
    let to = url.trim_start_matches("http://127.0.0.1:").trim_end_matches("/mcp").parse().expect("the server's port");
    let (port, accepted, answers) = counting_relay(to);
    let doc = json!({"schema": "s", "toolsets": [
        {"id": "remote", "kind": "mcp", "server": {"url": format!("http://127.0.0.1:{port}/mcp")}}
    ]});
    let registry = registry_of(&dir, doc, Arc::new(NoSecrets)).await;
    let before = accepted.load(Ordering::SeqCst);
    assert!(before > 0, "the registry reached the server through the relay");
    let answered_before = answers.lock().expect("log").len();
    for i in 0..CALLS {
        let sum = registry.call_tool("remote__add", json!({"a": i, "b": 1}), &ApproveAll).await.expect("add");
        assert_eq!(sum.structured_content.as_ref().map(|s| s["result"].clone()), Some(json!(i as f64 + 1.0)));
    }
    let opened = accepted.load(Ordering::SeqCst) - before;
    let answered = String::from_utf8_lossy(&answers.lock().expect("log")[answered_before..]).to_ascii_lowercase();
    let _ = server.kill();
    let _ = server.wait();
    assert!(opened <= CALLS / 2, "{CALLS} calls opened {opened} connections to the server");
    // Each call's answer is one JSON object (a call with a progress token
    // is answered on an event stream).
    let as_json = answered.matches("content-type: application/json").count();
    let start: String = answered.chars().take(2_000).collect();
    assert!(as_json >= CALLS, "{as_json} of {CALLS} calls answered as JSON; the answers began:\n{start}");
    std::fs::remove_dir_all(dir).ok();
}

#[tokio::test]
async fn an_mcp_toolset_without_a_connector_or_a_server_is_a_clear_load_failure() {
    let dir = scratch("unconnected");
    let path = dir.join("toolsets.json");
    let doc = json!({"schema": "s", "toolsets": [
        {"id": "py", "kind": "mcp", "server": {"command": "python3"}},
        {"id": "nowhere", "kind": "mcp", "server": {}}
    ]});
    std::fs::write(&path, doc.to_string()).expect("write");
    let file = load_toolsets(&path, &NoSecrets).await.expect("parse");
    // No connector: the kind is not supported by this program.
    let plain = Registry::new(Arc::new(NoSecrets));
    let report = plain.load_all(file.toolsets.clone()).await;
    assert_eq!(report.failures.len(), 2);
    assert!(report.failures[0].error.to_string().contains("kind `mcp` is not supported here"), "{:?}", report.failures);
    // With one: a server named nowhere is refused saying what is missing.
    let registry = Registry::new(Arc::new(NoSecrets)).with_connector("mcp", Arc::new(McpConnector::new()));
    let report = registry.load_all(file.toolsets[1..].to_vec()).await;
    assert_eq!(report.failures.len(), 1);
    assert!(report.failures[0].error.to_string().contains("server.url"), "{:?}", report.failures);
    let failed = registry.last_syncs().into_iter().find(|e| e.tool_set_id == "nowhere").expect("its sync");
    let json = serde_json::to_value(&failed).expect("json");
    assert_eq!(json["event"]["SyncFailed"]["errorType"], json!("LOAD_FAILED"), "{json}");
    assert_eq!(json["event"]["SyncFailed"]["error"], json!(true), "{json}");
    assert!(json["event"]["SyncFailed"]["message"].as_str().unwrap().contains("server.url"), "{json}");
    std::fs::remove_dir_all(dir).ok();
}

fn hostile_script() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp").join("hostile.py").display().to_string()
}

/// Why loading the toolset of `tests/mcp/hostile.py` in `mode` failed.
async fn hostile_load_failure(name: &str, mode: &[&str]) -> String {
    let dir = scratch(name);
    let path = dir.join("toolsets.json");
    let mut args = vec![hostile_script()];
    args.extend(mode.iter().map(|a| (*a).to_owned()));
    let doc = json!({"schema": "s", "toolsets": [
        {"id": "bad", "kind": "mcp", "server": {"command": mcp_python().display().to_string(), "args": args}}
    ]});
    std::fs::write(&path, doc.to_string()).expect("write");
    let file = load_toolsets(&path, &NoSecrets).await.expect("parse");
    let registry = Registry::new(Arc::new(NoSecrets)).with_connector("mcp", Arc::new(McpConnector::new()));
    let report = tokio::time::timeout(Duration::from_secs(60), registry.load_all(file.toolsets))
        .await
        .expect("the load ends well before the connector's own timeout");
    std::fs::remove_dir_all(dir).ok();
    assert_eq!(report.failures.len(), 1, "{mode:?} loaded");
    report.failures[0].error.to_string()
}

/// What a remote server lists is bounded like a plugin's `describe`: a
/// listing that never ends, more tools than a server may have, a name
/// twice, and an error's message of 1 MiB (kept as 1 KiB) are each a
/// clear load failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_servers_listing_is_bounded() {
    let endless = hostile_load_failure("pages", &["pages"]).await;
    assert!(endless.contains("more than 1000 pages"), "{endless}");
    let many = hostile_load_failure("many", &["many", "10001"]).await;
    assert!(many.contains("more than 10000 tools"), "{many}");
    let twice = hostile_load_failure("twice", &["twice"]).await;
    assert!(twice.contains("the tool `a` twice"), "{twice}");
    let error = hostile_load_failure("error", &["error"]).await;
    assert!(error.contains("bytes in all"), "{}", &error[..error.len().min(2000)]);
    assert!(error.len() < 4096, "an error of {} bytes", error.len());
}

/// A server that says its tools changed after every listing is listed
/// again at most once every two seconds, not as fast as it answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_always_says_its_tools_changed_is_not_listed_without_pause() {
    let dir = scratch("relist");
    let count = dir.join("listings");
    let doc = json!({"schema": "s", "toolsets": [
        {"id": "loud", "kind": "mcp",
         "server": {"command": mcp_python().display().to_string(), "args": [hostile_script(), "relist"],
                    "env": {"COUNT_FILE": count.display().to_string()}}}
    ]});
    let registry = registry_of(&dir, doc, Arc::new(NoSecrets)).await;
    assert!(registry.tools().iter().any(|t| t.name == "loud__a"));
    let told = registry.subscribe();
    // Five seconds: without the pause, hundreds of listings (each a
    // process round trip of a few milliseconds); with it, the first and at
    // most one every two seconds after.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let listings = std::fs::read_to_string(&count).expect("the server's count").lines().count();
    // The tools were the same each time: the registry's clients were not
    // told to list them again.
    let changed = told.has_changed().expect("the registry is there");
    drop(registry);
    std::fs::remove_dir_all(dir).ok();
    assert!((2..=5).contains(&listings), "{listings} listings in five seconds");
    assert!(!changed, "the registry told its clients its tools changed");
}

/// A server that asks, on every event stream, to be reconnected at once
/// (`retry: 0`) and then ends the stream is reconnected at most once a
/// second, not as fast as it answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_asks_to_be_reconnected_at_once_is_not_reconnected_without_pause() {
    use std::io::BufRead as _;
    let dir = scratch("retry0");
    let count = dir.join("gets");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp").join("hostile_http.py");
    let mut server = std::process::Command::new(mcp_python())
        .arg(script)
        .arg(&count)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start the server");
    let mut port = String::new();
    std::io::BufReader::new(server.stdout.take().expect("stdout")).read_line(&mut port).expect("its port");
    let doc = json!({"schema": "s", "toolsets": [
        {"id": "eager", "kind": "mcp", "server": {"url": format!("http://127.0.0.1:{}/mcp", port.trim())}}
    ]});
    let registry = registry_of(&dir, doc, Arc::new(NoSecrets)).await;
    assert!(registry.tools().iter().any(|t| t.name == "eager__a"));
    // Five seconds: without a floor, a reconnect per round trip (hundreds);
    // with it, one a second at most.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let gets = std::fs::read_to_string(&count).map(|text| text.lines().count()).unwrap_or(0);
    drop(registry);
    server.kill().ok();
    server.wait().ok();
    std::fs::remove_dir_all(dir).ok();
    assert!((1..=7).contains(&gets), "{gets} event streams in five seconds");
}

#[test]
fn the_cli_lists_and_calls_an_mcp_toolset_beside_a_plugin() {
    use toolhost_tests::{json_stdout, run_toolhost};
    let dir = scratch("cli");
    let path = dir.join("toolsets.json");
    let doc = json!({"schema": "s", "toolsets": [
        {"id": "calc", "kind": "uri", "server": {"url": example("calculator").display().to_string()}},
        {"id": "py", "kind": "mcp", "server": {"command": mcp_python().display().to_string(), "args": [server_script(), "stdio"]},
         "tools": [{"name": "die", "enabled": false}]}
    ]});
    std::fs::write(&path, doc.to_string()).expect("write");
    let config = path.display().to_string();
    let listed = run_toolhost(&["tools", "--config", &config], None);
    assert!(listed.status.success(), "{}", String::from_utf8_lossy(&listed.stderr));
    let table = String::from_utf8_lossy(&listed.stdout);
    assert!(table.lines().any(|l| l.starts_with("py__add ") && l.contains(" yes ")), "{table}");
    assert!(table.lines().any(|l| l.starts_with("py__die ") && l.contains("disabled by configuration")), "{table}");
    assert!(table.lines().any(|l| l.starts_with("calc__add ")), "{table}");
    assert!(table.lines().any(|l| l.starts_with("py__die ") && l.contains(" FILTERED ")), "{table}");
    assert!(table.lines().any(|l| l.starts_with("py ") && l.contains("SyncCompleted")), "{table}");
    let called = run_toolhost(&["call", "--config", &config, "py__add", r#"{"a": 20, "b": 22}"#], None);
    assert!(called.status.success(), "{}", String::from_utf8_lossy(&called.stderr));
    assert_eq!(json_stdout(&called)["content"][0]["text"], json!("42"));
    std::fs::remove_dir_all(dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_file_with_all_three_kinds_applies_the_same_filters_and_approvals_to_each() {
    let dir = scratch("all-kinds");
    let secrets_dir = dir.join("secrets");
    std::fs::create_dir_all(&secrets_dir).expect("secrets dir");
    std::fs::write(secrets_dir.join("API_TOKEN"), "tok-all-kinds").expect("secret");
    let server = http_server("tok-all-kinds");
    // The same filter and approval rule on every toolset: `echo`-like
    // tools need approval, names starting with `leak`/`die`/`sub` are out.
    let extensions = json!({
        "excludeTools": {"operator": "OPERATOR_OR", "filters": [
            {"attribute": "ATTRIBUTE_NAME", "matcher": {"startsWith": "leak"}},
            {"attribute": "ATTRIBUTE_NAME", "matcher": {"startsWith": "die"}},
            {"attribute": "ATTRIBUTE_NAME", "matcher": {"startsWith": "sub"}}]},
        "toolApprovals": {"only": {"filters": [{"attribute": "ATTRIBUTE_NAME", "matcher": {"regex": "^(echo|multiply|shout)$"}}]}}
    });
    let doc = json!({"schema": "s", "toolsets": [
        {"id": "calc", "kind": "uri", "server": {"url": example("calculator").display().to_string()}, "extensions": extensions},
        {"id": "stdio", "kind": "mcp", "server": {"command": mcp_python().display().to_string(), "args": [server_script(), "stdio"]},
         "extensions": extensions},
        {"id": "http", "kind": "mcp", "server": {"url": format!("http://127.0.0.1:{}/mcp", server.1)},
         "headers": {"x-token": "${secret:API_TOKEN}"}, "extensions": extensions},
        {"id": "host", "kind": "builtin", "extensions": extensions}
    ]});
    let path = dir.join("toolsets.json");
    std::fs::write(&path, doc.to_string()).expect("write the toolsets file");
    let secrets: Arc<dyn SecretProvider> = Arc::new(FileSecretProvider::new(&secrets_dir));
    let file = load_toolsets(&path, secrets.as_ref()).await.unwrap_or_else(|e| panic!("{e}"));
    let registry = Registry::new(secrets).with_connector("mcp", Arc::new(McpConnector::new()));
    let shout = toolhost::BuiltinTool::new(
        "shout",
        "Upper-case a text.",
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        |call: toolhost::BuiltinCall| async move {
            let text = call.arguments["text"].as_str().unwrap_or_default().to_uppercase();
            Ok(toolhost::CallToolResult::text(text))
        },
    );
    let subtract = toolhost::BuiltinTool::new(
        "subtract_all",
        "Gone.",
        json!({"type": "object"}),
        |_call: toolhost::BuiltinCall| async { Ok(toolhost::CallToolResult::text("never")) },
    );
    registry
        .register_builtin(toolhost::BuiltinToolset::new("host").with_tool(shout).with_tool(subtract))
        .await
        .expect("register");
    let report = registry.load_all(file.toolsets).await;
    assert!(report.failures.is_empty(), "{:?}", report.failures);

    // Filters: each kind loses the tools the rule names.
    let all = registry.all_tools();
    for filtered in ["calc__subtract", "stdio__leak_token", "stdio__die", "http__leak_token", "host__subtract_all"] {
        let tool = all.iter().find(|t| t.name == filtered).unwrap_or_else(|| panic!("{filtered} unknown"));
        assert_eq!(tool.status(), toolhost::ToolStatus::Filtered, "{filtered}");
    }
    // Approvals: each kind's matching tool is asked about, and a denial
    // stops it before it runs.
    for (name, arguments) in [
        ("calc__multiply", json!({"a": 2, "b": 3})),
        ("stdio__echo", json!({"text": "hi"})),
        ("http__echo", json!({"text": "hi"})),
        ("host__shout", json!({"text": "hi"})),
    ] {
        assert!(registry.tool(name).is_some_and(|t| t.requires_approval), "{name}");
        let denied = registry.call_tool(name, arguments.clone(), &DenyAll("no".to_owned())).await.expect(name);
        assert!(denied.is_error() && text(&denied).contains("not approved"), "{name}: {denied:?}");
        let approved = registry.call_tool(name, arguments, &ApproveAll).await.expect(name);
        assert!(!approved.is_error(), "{name}: {approved:?}");
    }
    // Arguments each kind's schema refuses never reach it.
    for name in ["calc__add", "stdio__add", "http__add"] {
        let error = registry.call_tool(name, json!({"a": "two", "b": 3}), &ApproveAll).await.unwrap_err();
        assert!(error.is_invalid_arguments(), "{name}: {error:?}");
    }
    let error = registry.call_tool("host__shout", json!({}), &ApproveAll).await.unwrap_err();
    assert!(error.is_invalid_arguments(), "{error:?}");
    let ok = registry.call_tool("http__token_ok", json!({}), &ApproveAll).await.expect("token_ok");
    assert_eq!(text(&ok), "yes");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn serve_relays_a_remote_servers_tools_and_its_list_changed_to_an_mcp_client() {
    let dir = scratch("serve");
    let path = dir.join("toolsets.json");
    let doc = json!({"schema": "s", "toolsets": [
        {"id": "calc", "kind": "uri", "server": {"url": example("calculator").display().to_string()}},
        {"id": "py", "kind": "mcp", "server": {"command": mcp_python().display().to_string(), "args": [server_script(), "stdio"]},
         "extensions": {"excludeTools": {"filters": [{"attribute": "ATTRIBUTE_NAME", "matcher": {"exact": "die"}}]}}}
    ]});
    std::fs::write(&path, doc.to_string()).expect("write");
    let report = toolhost_tests::mcp_python_report("relay.py", &path);
    let before: Vec<&str> = report["before"].as_array().expect("tools").iter().filter_map(Value::as_str).collect();
    assert!(before.contains(&"calc__add") && before.contains(&"py__grow"), "{report}");
    assert!(!before.contains(&"py__die") && !before.contains(&"py__grown"), "{report}");
    assert_eq!(report["calc_add"], json!("5"));
    assert_eq!(report["py_add"], json!("42"));
    assert_eq!(report["py_add_bad"]["is_error"], json!(true), "{report}");
    assert!(report["py_add_bad"]["text"].as_str().is_some_and(|t| t.contains("/a")), "{report}");
    let after: Vec<&str> = report["after"].as_array().expect("tools").iter().filter_map(Value::as_str).collect();
    assert!(after.contains(&"py__grown") && !after.contains(&"py__die"), "{report}");
    assert_eq!(report["grown"], json!("grown"));
    std::fs::remove_dir_all(dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_toolsets_limits_bound_its_calls_and_wasm_only_members_are_refused() {
    let dir = scratch("limits");
    let python = mcp_python().display().to_string();
    let doc = json!({"schema": "s", "toolsets": [
        {"id": "py", "kind": "mcp",
         "server": {"command": python, "args": [server_script(), "stdio"],
                    "limits": {"timeout": "2s", "maxOutputSize": "1MiB"}}}
    ]});
    let registry = registry_of(&dir, doc, Arc::new(NoSecrets)).await;
    // A call the server never answers ends at the toolset's 2 s, not at
    // the 30 s default: the error says which limit it ran into.
    let error = registry.call_tool("py__hang", json!({}), &ApproveAll).await.unwrap_err();
    assert!(error.is_timeout(), "{error:?}");
    assert!(error.to_string().contains("2s"), "{error}");
    // A 6 MiB answer is over the toolset's 1 MiB, under the default 16 MiB.
    let error = registry.call_tool("py__big", json!({"n": 6 * 1024 * 1024}), &ApproveAll).await.unwrap_err();
    assert!(error.is_output_too_large(), "{error:?}");
    let small = registry.call_tool("py__big", json!({"n": 10}), &ApproveAll).await.expect("a small answer");
    assert_eq!(text(&small), "xxxxxxxxxx");

    // A member that bounds or grants a Wasm guest is refused for a toolset
    // that runs none, naming it, rather than ignored.
    for (member, pointer) in [
        (json!({"limits": {"memoryLimit": "64MiB"}}), "/toolsets/0/server/limits/memoryLimit"),
        (json!({"limits": {"fuel": 1000}}), "/toolsets/0/server/limits/fuel"),
        (json!({"allowedHosts": ["example.com"]}), "/toolsets/0/server/allowedHosts"),
        (json!({"limits": {"timeout": "0s"}}), "/toolsets/0/server/limits"),
    ] {
        let mut server = json!({"command": "unused"});
        server.as_object_mut().unwrap().extend(member.as_object().unwrap().clone());
        let doc = json!({"schema": "s", "toolsets": [{"id": "py", "kind": "mcp", "server": server}]});
        let path = dir.join("refused.json");
        std::fs::write(&path, doc.to_string()).expect("write the toolsets file");
        let error = load_toolsets(&path, &NoSecrets).await.expect_err("refused");
        assert!(error.problems.iter().any(|p| p.pointer == pointer), "{pointer}: {error}");
    }
    std::fs::remove_dir_all(dir).ok();
}
