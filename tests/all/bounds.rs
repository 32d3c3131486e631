//! A hostile plugin gets nothing it was not granted, and every
//! call is bounded wherever the guest is: time in host calls, tables
//! against the memory limit, open files, error messages, content items,
//! logs. Each case is a real plugin (a fixture, or WAT) and the safe
//! outcome it must get; deadlines are generous bounds, never timings.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use toolhost::{PathGrant, Plugin, Policy};
use toolhost_tests::{Flavour, fixture};

fn text_of(result: &toolhost::CallToolResult) -> String {
    result.texts().collect::<Vec<_>>().join("")
}

/// Run `call` and fail the test if it is not over within 20 s.
async fn within_20s<T>(call: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), call).await.expect("the call did not end within 20 s")
}

both_flavours!(a_guest_sleeping_an_hour_in_a_host_call_times_out);

/// The `faults` fixture with a 500 ms timeout and one instance.
async fn faults_within_500ms(flavour: Flavour) -> Plugin {
    Plugin::builder_from_file(flavour.fixture("faults"))
        .with_timeout(Duration::from_millis(500))
        .with_pool_size(1)
        .build()
        .await
        .expect("load")
}

async fn a_guest_sleeping_an_hour_in_a_host_call_times_out(flavour: Flavour) {
    let plugin = faults_within_500ms(flavour).await;
    assert_eq!(text_of(&plugin.call_tool("counter", json!({})).await.expect("counter")), "1");
    // `std::thread::sleep`: WASI `poll_oneoff` (or `monotonic-clock`'s
    // subscription) waiting on a timer, no Wasm code running.
    let error = within_20s(plugin.call_tool("nap", json!({"ms": 3_600_000}))).await.unwrap_err();
    assert!(error.is_timeout(), "{error:?}");
    assert!(error.to_string().contains("it ran longer than 500ms"), "{error}");
    // The instance was discarded and its pool slot freed: a fresh one answers.
    let next = within_20s(plugin.call_tool("counter", json!({}))).await.expect("counter");
    assert_eq!(text_of(&next), "1", "a fresh instance, not the one that slept");
}

/// A guest that sleeps (WASI 0.1's `poll_oneoff`, a component's clock
/// subscription) in an embedder's runtime that has no time driver: its nap
/// and the call's deadline wait on toolhost's own ticker, where
/// `tokio::time` would panic in the host.
#[test]
fn a_guest_sleeps_in_a_runtime_without_a_time_driver() {
    for flavour in [Flavour::Extism, Flavour::Component] {
        let (done, outcome) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().build().expect("a runtime with no drivers");
            let results = runtime.block_on(async {
                let plugin = faults_within_500ms(flavour).await;
                let rested = plugin.call_tool("nap", json!({"ms": 20})).await.map(|r| text_of(&r));
                let overslept = plugin.call_tool("nap", json!({"ms": 3_600_000})).await.map(|r| text_of(&r));
                (rested, overslept)
            });
            let _ = done.send(results);
        });
        let (rested, overslept) = outcome
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("{flavour:?}: the calls did not end, or the host panicked ({e})"));
        assert_eq!(rested.expect("a short nap"), "rested", "{flavour:?}");
        let error = overslept.expect_err("an hour's nap");
        assert!(error.is_timeout(), "{flavour:?}: {error:?}");
    }
}

#[tokio::test]
async fn an_http_server_that_never_answers_cannot_hold_a_call_past_its_timeout() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().unwrap().port();
    // Accepts, reads, and never answers (until the test process ends).
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    let plugin = Plugin::builder_from_file(fixture("hostile"))
        .with_allowed_host("127.0.0.1")
        .with_timeout(Duration::from_millis(500))
        .build()
        .await
        .expect("load");
    let error =
        within_20s(plugin.call_tool("http", json!({"url": format!("http://127.0.0.1:{port}/")}))).await.unwrap_err();
    assert!(error.is_timeout(), "{error:?}");
}

/// A hand-written Extism plugin whose module holds `tables` and whose
/// `call` runs `body` (then returns 0 with no output).
pub(crate) fn table_plugin(tables: &str, body: &str) -> Vec<u8> {
    module_plugin("", tables, body)
}

/// [`table_plugin`], importing `imports` too.
fn module_plugin(imports: &str, tables: &str, body: &str) -> Vec<u8> {
    let describe = r#"{"tools":[{"name":"t","description":"a tool","inputSchema":{"type":"object"}}]}"#;
    format!(
        r#"(module
  {imports}
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (memory (export "memory") 1)
  {tables}
  (data (i32.const 0) "{escaped}")
  (func (export "describe") (result i32)
    (local $h i64) (local $i i32)
    (local.set $h (call $alloc (i64.const {len})))
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $i) (i32.const {len})))
      (call $store_u8 (i64.add (local.get $h) (i64.extend_i32_u (local.get $i))) (i32.load8_u (local.get $i)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next)))
    (call $output_set (local.get $h) (i64.const {len}))
    (i32.const 0))
  (func (export "call") (result i32)
    {body}
    (i32.const 0)))"#,
        escaped = describe.replace('"', "\\\""),
        len = describe.len(),
    )
    .into_bytes()
}

#[tokio::test]
async fn tables_count_against_the_memory_limit() {
    // 100 tables of 2^20 funcrefs: refused at instantiation, never allocated.
    let tables: String = (0..100).map(|i| format!("(table $t{i} 1048576 funcref)\n")).collect();
    let error = Plugin::builder_from_bytes(table_plugin(&tables, ""))
        .with_memory_max_bytes(32u64 << 20)
        .build()
        .await
        .unwrap_err();
    assert!(error.is_load(), "{error:?}");
    assert!(error.to_string().contains("memory limit"), "{error}");

    // A table grown at run time, 64Ki elements at a time, until refused.
    let grow = r#"(block $done (loop $grow
      (br_if $done (i32.eq (table.grow $t (ref.null func) (i32.const 65536)) (i32.const -1)))
      (br $grow)))"#;
    let plugin = Plugin::builder_from_bytes(table_plugin("(table $t 0 funcref)", grow))
        .with_memory_max_bytes(8u64 << 20)
        .build()
        .await
        .expect("load");
    let error = plugin.call_tool("t", json!({})).await.unwrap_err();
    assert!(error.is_memory_limit(), "{error:?}");
    assert!(error.to_string().contains("8MiB"), "{error}");
}

#[tokio::test]
async fn an_http_request_body_over_16_mib_is_refused_before_the_host_copies_it() {
    let imports = r#"(import "extism:host/env" "http_request" (func $http (param i64 i64) (result i64)))"#;
    // A two-byte description, and a body of 17 MiB.
    let body = "(drop (call $http (call $alloc (i64.const 2)) (call $alloc (i64.const 17825792))))";
    let plugin = Plugin::builder_from_bytes(module_plugin(imports, "", body))
        .with_allowed_host("127.0.0.1")
        .build()
        .await
        .expect("load");
    let error = plugin.call_tool("t", json!({})).await.unwrap_err();
    let refusal = "the HTTP request body is 17825792 bytes, more than the 16777216 a plugin may pass";
    assert!(error.to_string().contains(refusal), "{error}");
}

/// A client that answers every request with nothing, counting them.
#[derive(Default)]
struct Counting(std::sync::atomic::AtomicUsize);

impl toolhost::CallClient for Counting {
    fn request(
        &self,
        _request: toolhost::ClientRequest,
        _params: serde_json::Map<String, serde_json::Value>,
    ) -> toolhost::BoxFuture<'_, Result<serde_json::Value, String>> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Box::pin(async { Ok(json!({"roots": []})) })
    }

    fn notify(&self, _notice: toolhost::ClientNotice) -> toolhost::BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

#[tokio::test]
async fn a_call_makes_at_most_64_requests_of_its_client() {
    let imports = r#"(import "extism:host/user" "list_roots" (func $roots (result i64)))"#;
    // 100 requests in a loop; each past the 64th is refused at once.
    let body = r#"(local $n i32)
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $n) (i32.const 100)))
      (drop (call $roots))
      (local.set $n (i32.add (local.get $n) (i32.const 1)))
      (br $next)))"#;
    let plugin = Plugin::builder_from_bytes(module_plugin(imports, "", body)).build().await.expect("load");
    let client = Arc::new(Counting::default());
    let context = toolhost::CallContext::new().with_client(client.clone());
    // The call's own outcome (it writes no result) is not the point.
    let _ = within_20s(plugin.call_tool_with("t", json!({}), &context)).await;
    assert_eq!(client.0.load(std::sync::atomic::Ordering::SeqCst), 64);
    // The count is the run's: the next call may ask again.
    let _ = within_20s(plugin.call_tool_with("t", json!({}), &context)).await;
    assert_eq!(client.0.load(std::sync::atomic::Ordering::SeqCst), 128);
}

both_flavours!(open_files_are_capped_per_instance);

async fn open_files_are_capped_per_instance(flavour: Flavour) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "a").unwrap();
    let grant: PathGrant = format!("{}:/data", dir.path().display()).parse().unwrap();
    let plugin = Plugin::builder_from_file(flavour.fixture("faults"))
        .with_allowed_path(grant)
        .with_pool_size(1)
        .build()
        .await
        .expect("load");
    // (The files are held by the instance: on Cranelift's code, which the
    // instance then keeps.)
    plugin.settled_tier().await;
    let open = |count: u64| {
        let plugin = plugin.clone();
        async move {
            let result = plugin.call_tool("open_many", json!({"path": "/data/a.txt", "count": count})).await;
            text_of(&result.expect("open_many answers"))
        }
    };
    let first = within_20s(open(10_000)).await;
    assert!(first.starts_with("opened 256; first error: "), "{first}");
    assert!(!first.ends_with("none"), "{first}");
    // The files are still held by the pooled instance: no more may be opened.
    let second = within_20s(open(10)).await;
    assert!(second.starts_with("opened 0; "), "{second}");
    // Other plugins, and the host, are not affected.
    let other = Plugin::builder_from_file(flavour.fixture("faults"))
        .with_allowed_path(format!("{}:/data", dir.path().display()).parse().unwrap())
        .build()
        .await
        .expect("another plugin loads");
    let read = other.call_tool("read_file", json!({"path": "/data/a.txt"})).await.expect("read_file");
    assert_eq!(text_of(&read), "a");
}

/// A component's stream of a file holds the file after its descriptor is
/// dropped: it counts against the same 256 open files.
#[tokio::test]
async fn a_components_streams_count_as_open_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "a").unwrap();
    let plugin = Plugin::builder_from_file(Flavour::Component.fixture("fetcher"))
        .with_allowed_path(format!("{}:/data", dir.path().display()).parse().unwrap())
        .build()
        .await
        .expect("load");
    let result = within_20s(plugin.call_tool("streams", json!({"name": "a.txt", "count": 300}))).await;
    let said = result.expect("streams answers").texts().next().unwrap_or_default().to_owned();
    assert!(said.starts_with("opened 256; first error: ") && said.contains("quota"), "{said}");
}

/// What a component's `wasi:http` state may hold in the host, outside its
/// memory limit: a header map 16 KiB, a body 16 KiB before it is sent, and
/// 4,096 resources in all (each kind bounded to 64 MiB; it was 16,384
/// resources of 128 KiB maps and 1 MiB bodies, some 18 GiB).
#[tokio::test]
async fn a_components_http_state_in_the_host_is_bounded() {
    let plugin = Plugin::builder_from_file(Flavour::Component.fixture("fetcher")).build().await.expect("load");
    let hoard = |what: &str, count: u32, size: u32| {
        let plugin = plugin.clone();
        let arguments = json!({"what": what, "count": count, "size": size});
        async move { within_20s(plugin.call_tool("hoard", arguments)).await }
    };
    let said = |result: Result<toolhost::CallToolResult, toolhost::Error>| {
        result.expect("hoard answers").texts().next().unwrap_or_default().to_owned()
    };
    // A map of more than 16 KiB traps, and so does a write of more than
    // 16 KiB to a body (more than `check-write` allows).
    let error = hoard("fields", 1, 17 << 10).await.expect_err("too large a map traps");
    assert!(error.to_string().contains("total size of fields exceeds limit"), "{error}");
    let error = hoard("bodies", 1, 17 << 10).await.expect_err("too large a write traps");
    assert!(error.to_string().contains("write exceeded budget"), "{error}");
    assert_eq!(said(hoard("bodies", 1, 16 << 10).await), "made 1; refused: none");
    // Past 4,096 resources the instance traps, and the next call has a new one.
    for what in ["fields", "bodies"] {
        let error = hoard(what, 5000, 8 << 10).await.expect_err("a full resource table traps");
        assert!(error.to_string().contains("resource table has no free keys"), "{what}: {error}");
    }
    assert_eq!(said(hoard("fields", 100, 8 << 10).await), "made 100; refused: none");
}

both_flavours!(a_fifo_in_a_granted_directory_cannot_hold_a_call);

/// File operations run on the calling thread, where no deadline can stop
/// them; opening a FIFO to read waits for a writer, for ever. So a special
/// file in a granted directory is refused before it is opened.
async fn a_fifo_in_a_granted_directory_cannot_hold_a_call(flavour: Flavour) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "a").unwrap();
    let fifo = dir.path().join("pipe");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().expect("run mkfifo");
    assert!(made.success(), "mkfifo failed");
    // Should the open block after all, a writer comes after 30 s: the test
    // then fails on what was read instead of hanging.
    let late = fifo.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(30));
        let _ = std::fs::write(late, "read from the FIFO");
    });
    let grant: PathGrant = format!("{}:/data", dir.path().display()).parse().unwrap();
    let plugin = Plugin::builder_from_file(flavour.fixture("faults"))
        .with_allowed_path(grant)
        .with_timeout(Duration::from_secs(5))
        .with_pool_size(1)
        .build()
        .await
        .expect("load");
    let refused = within_20s(plugin.call_tool("read_file", json!({"path": "/data/pipe"}))).await.expect("a result");
    assert!(refused.is_error(), "{refused:?}");
    assert!(text_of(&refused).to_lowercase().contains("permission denied"), "{refused:?}");
    // The plugin, its instance and the directory's files are fine.
    let read = within_20s(plugin.call_tool("read_file", json!({"path": "/data/a.txt"}))).await.expect("read");
    assert_eq!(text_of(&read), "a");
}

/// `wasmtime-wasi`, allowed to block, sleeps a relative clock on the
/// thread and only then writes its event: a guest giving a bad event
/// pointer would hold a worker thread for as long as it liked, past any
/// deadline. The host's `poll_oneoff` traps at once instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sleep_with_nowhere_to_write_its_event_traps_at_once() {
    // One relative clock of 60 s at 1024 (tag, id, flags left 0), its event
    // to be written far outside the guest's one page of memory.
    let call = r#"(i64.store (i32.const 1048) (i64.const 60000000000))
    (drop (call $poll_oneoff (i32.const 1024) (i32.const 0x7FFFFFF0) (i32.const 1) (i32.const 64)))
    (i32.const 0)"#;
    let import =
        r#"(import "wasi_snapshot_preview1" "poll_oneoff" (func $poll_oneoff (param i32 i32 i32 i32) (result i32)))"#;
    let wat =
        crate::runtime::wat_plugin(call).replacen("  (memory (export", &format!("  {import}\n  (memory (export"), 1);
    let plugin = Plugin::builder_from_bytes(wat.into_bytes())
        .with_timeout(Duration::from_secs(5))
        .build()
        .await
        .expect("load WAT");
    // On a task of its own, so that a worker held by a sleep cannot keep
    // this test's timer from firing.
    let call = tokio::spawn(async move { plugin.call_tool("t", json!({})).await });
    let error = within_20s(call).await.expect("the call's task").unwrap_err();
    assert!(!error.is_timeout(), "{error:?}");
    assert!(error.to_string().contains("poll_oneoff"), "{error}");
}

#[tokio::test]
async fn a_huge_extism_error_message_is_cut_short() {
    let plugin = Plugin::load(fixture("hostile")).await.expect("load");
    let error = plugin.call_tool("big_error", json!({"mib": 20})).await.unwrap_err();
    assert!(error.is_plugin_error_message(), "{error:?}");
    let message = error.to_string();
    assert!(message.len() < 8 << 10, "a message of {} bytes", message.len());
    assert!(message.contains("(cut: the message was 2097"), "{}", &message[message.len().saturating_sub(200)..]);
}

#[tokio::test]
async fn a_huge_component_call_error_is_cut_short() {
    let failing = |mib: usize| {
        let describe = json!({"tools": [{"name": "t", "description": "d", "inputSchema": {"type": "object"}}]});
        let failure = json!({"callError": {"kind": "failed", "message": "F".repeat(mib << 20)}});
        Plugin::builder_from_file(Flavour::Component.fixture("scripted"))
            .with_config("describe", describe.to_string())
            .with_config("result", failure.to_string())
            .build()
    };
    // 2 MiB: handed over, and cut short.
    let error = failing(2).await.expect("load").call_tool("t", json!({})).await.unwrap_err();
    assert!(error.is_plugin_error_message(), "{error:?}");
    let message = error.to_string();
    assert!(message.len() < 8 << 10, "a message of {} bytes", message.len());
    assert!(message.contains("the message was 2097152 bytes"), "{}", &message[message.len().saturating_sub(200)..]);
    // 20 MiB: more than a component may hand the host at once (its 16 MiB
    // output limit and 1 MiB), refused while wasmtime copies it out.
    let error = failing(20).await.expect("load").call_tool("t", json!({})).await.unwrap_err();
    assert!(error.is_output_too_large(), "{error:?}");
    assert!(error.to_string().contains("more than 17MiB at once"), "{error}");
}

both_flavours!(results_with_too_many_content_items_are_refused);

async fn results_with_too_many_content_items_are_refused(flavour: Flavour) {
    let plugin = Plugin::load(flavour.fixture("faults")).await.expect("load");
    let fine = plugin.call_tool("items", json!({"count": 10})).await.expect("10 items");
    assert_eq!(fine.content.len(), 10);
    let error = within_20s(plugin.call_tool("items", json!({"count": 5000}))).await.unwrap_err();
    assert!(error.is_output_too_large(), "{error:?}");
    assert!(error.to_string().contains("content items"), "{error}");
}

#[tokio::test]
async fn a_components_result_is_bounded_while_the_host_copies_it_out() {
    // 300,000 empty items: tens of MB as the guest lays them out, more as
    // the host's values. Refused while wasmtime copies them out, within
    // the output limit and 1 MiB, not once they are all in the host.
    let plugin = Plugin::load(Flavour::Component.fixture("faults")).await.expect("load");
    let error = within_20s(plugin.call_tool("items", json!({"count": 300_000}))).await.unwrap_err();
    assert!(error.is_output_too_large(), "{error:?}");
    assert!(error.to_string().contains("more than 17MiB at once"), "{error}");
    // The instance goes on.
    assert_eq!(plugin.call_tool("items", json!({"count": 3})).await.expect("3 items").content.len(), 3);
}

both_flavours!(empty_content_items_weigh_against_the_output_cap);

async fn empty_content_items_weigh_against_the_output_cap(flavour: Flavour) {
    // 2000 empty items: 52 KB of JSON (nothing at all as WIT values), but
    // far more in the host.
    let mut policy = Policy::default();
    policy.limits.max_output_bytes = 256 << 10;
    let plugin = Plugin::builder_from_file(flavour.fixture("faults")).with_policy(policy).build().await.expect("load");
    let error = plugin.call_tool("items", json!({"count": 2000})).await.unwrap_err();
    assert!(error.is_output_too_large(), "{error:?}");
    assert!(plugin.call_tool("items", json!({"count": 20})).await.is_ok());
}

#[tokio::test]
async fn three_hundred_thousand_empty_items_are_refused_while_parsing() {
    let plugin = Plugin::load(fixture("hostile")).await.expect("load");
    let error = within_20s(plugin.call_tool("items", json!({"count": 300_000}))).await.unwrap_err();
    assert!(error.is_output_too_large(), "{error:?}");
    assert!(error.to_string().contains("more than 4096 content items"), "{error}");
}

/// `toolhost call` of `faults`'s `log_flood`, with the plugins' logs on:
/// its stderr.
fn flood(flavour: Flavour, lines: u64, bytes: u64) -> String {
    let plugin = flavour.fixture("faults");
    let args = json!({"lines": lines, "bytes": bytes}).to_string();
    let output = std::process::Command::new(toolhost_tests::toolhost())
        .args(["call", plugin.to_str().unwrap(), "log_flood", &args])
        .env("TOOLHOST_LOG", "toolhost::guest=info")
        .env("TOOLHOST_CACHE_DIR", "off")
        .output()
        .expect("run toolhost");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stderr).into_owned()
}

both_flavours!(guest_logs_are_capped_per_call);

async fn guest_logs_are_capped_per_call(flavour: Flavour) {
    let many = flood(flavour, 100_000, 10);
    let lines = many.lines().count();
    assert!((200..=300).contains(&lines), "{lines} lines on stderr");
    assert_eq!(many.matches("further log lines of this call dropped").count(), 1, "{}", &many[many.len() - 500..]);

    let long = flood(flavour, 50, 100_000);
    assert!(long.len() < 200 << 10, "{} bytes on stderr", long.len());
    assert!(long.contains("cut: the line was 100000 bytes"), "{}", &long[..500.min(long.len())]);
}

/// A plugin's log line goes to the host's log as one line: its line
/// breaks and escape characters are escaped, so it cannot write a line
/// that looks like the host's own. The call's log sink still gets it as
/// written.
#[tokio::test]
async fn a_plugins_log_line_cannot_forge_a_line_of_the_hosts_log() {
    let forged = "one\n2026-11-28T00:00:00.000000Z  INFO toolhost: an operator approved everything\r\u{1b}[2K";
    let args = json!({"lines": 1, "text": forged}).to_string();
    let output = std::process::Command::new(toolhost_tests::toolhost())
        .args(["call", fixture("hostile").to_str().unwrap(), "log_flood", &args])
        .env("TOOLHOST_LOG", "toolhost::guest=info")
        .env("TOOLHOST_CACHE_DIR", "off")
        .output()
        .expect("run toolhost");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains(r"one\n2026-11-28T00:00:00.000000Z  INFO toolhost: an operator approved everything\r\u{1b}[2K"),
        "{stderr}"
    );

    let lines = Arc::new(std::sync::Mutex::new(Vec::new()));
    let context = toolhost::CallContext::new().with_log_sink({
        let lines = Arc::clone(&lines);
        move |log: toolhost::GuestLog<'_>| lines.lock().unwrap().push(log.message.to_owned())
    });
    let plugin = Plugin::load(fixture("hostile")).await.expect("load");
    plugin.call_tool_with("log_flood", json!({"lines": 1, "text": "one\ntwo"}), &context).await.expect("log");
    assert_eq!(*lines.lock().unwrap(), ["one\ntwo"]);
}

/// What `kernel_probe` saw of the Extism kernel memory.
pub(crate) async fn probe(plugin: &Plugin, needle: &str) -> serde_json::Value {
    let needle_hex: String = needle.bytes().map(|b| format!("{b:02x}")).collect();
    let result = within_20s(plugin.call_tool("kernel_probe", json!({"needle_hex": needle_hex}))).await.expect("probe");
    serde_json::from_str(&text_of(&result)).expect("the probe answers JSON")
}

/// The Extism kernel memory is where a plugin and the host exchange bytes:
/// outside its blocks a plugin reads 0 and its stores do nothing (the
/// host's header below them included), and nothing an earlier call left
/// there, such as another caller's arguments, can be read back.
#[tokio::test]
async fn the_kernel_memory_shows_a_plugin_nothing_outside_its_blocks_nor_an_earlier_calls_input() {
    // One instance, so every call runs on the same kernel memory (on
    // Cranelift's code, which the instance then keeps).
    let plugin = Plugin::builder_from_file(fixture("hostile")).with_pool_size(1).build().await.expect("load");
    plugin.settled_tier().await;
    let secret = "another caller's secret 7f3a9c";
    let earlier = json!({"secret": secret, "padding": "x".repeat(8192)});
    within_20s(plugin.call_tool("ok", earlier)).await.expect("the earlier call");

    let seen = probe(&plugin, secret).await;
    assert_eq!(seen["outside"], json!([0, 0, 0, 0, 0, 0, 0, 0, 0]), "{seen}");
    assert_eq!(seen["input_past_end"], 0, "{seen}");
    assert_eq!(seen["found"], false, "the earlier call's input was readable: {seen}");
    // The scan does see what is there: its own input.
    let own = probe(&plugin, "needle_hex").await;
    assert_eq!(own["found"], true, "{own}");
    assert!(own["nonzero_bytes"].as_u64().unwrap() < 4096, "{own}");

    // The stores outside did no harm: the instance still answers.
    assert_eq!(text_of(&within_20s(plugin.call_tool("ok", json!({}))).await.expect("ok")), "fine");
}
