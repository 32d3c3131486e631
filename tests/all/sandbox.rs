//! The sandbox: nothing unless granted, every call bounded, every fault
//! isolated. Timings are generous bounds, not benchmarks.

use std::time::{Duration, Instant};

use serde_json::json;
use toolhost::{FaultKind, PathGrant, Plugin, Policy};
use toolhost_tests::{example, fixture};

async fn hostile_with(policy: Policy) -> Plugin {
    Plugin::builder_from_file(fixture("hostile")).with_policy(policy).build().await.expect("load hostile")
}

fn policy_with_timeout(timeout: Duration) -> Policy {
    let mut policy = Policy::default();
    policy.limits.timeout = Some(timeout);
    policy
}

fn text_of(result: &toolhost::CallToolResult) -> String {
    result.texts().collect::<Vec<_>>().join("")
}

#[tokio::test]
async fn an_endless_loop_is_stopped_at_the_timeout() {
    let plugin = hostile_with(policy_with_timeout(Duration::from_millis(300))).await;
    let start = Instant::now();
    let error = plugin.call_tool("spin", json!({})).await.unwrap_err();
    let elapsed = start.elapsed();
    assert!(error.is_timeout(), "{error:?}");
    assert!(error.to_string().contains("timed out"), "{error}");
    assert!(elapsed >= Duration::from_millis(300), "stopped early: {elapsed:?}");
    assert!(elapsed < Duration::from_secs(3), "stopped late: {elapsed:?}");
    // The plugin is still usable.
    assert_eq!(text_of(&plugin.call_tool("ok", json!({})).await.expect("ok")), "fine");
}

#[tokio::test]
async fn unbounded_allocation_hits_the_memory_limit() {
    let mut policy = Policy::default();
    policy.limits.memory_max_bytes = Some(32 << 20);
    let plugin = hostile_with(policy).await;
    let error = plugin.call_tool("hog", json!({})).await.unwrap_err();
    assert!(error.is_memory_limit(), "{error:?}");
    assert!(error.to_string().contains("32MiB"), "{error}");
    assert_eq!(text_of(&plugin.call_tool("ok", json!({})).await.expect("ok")), "fine");
}

#[tokio::test]
async fn output_over_the_cap_is_refused() {
    // 200 MiB of output needs room for the buffer and its copy, and time:
    // on a busy machine a debug build's kernel takes a while to store it.
    let mut policy = policy_with_timeout(Duration::from_secs(600));
    policy.limits.memory_max_bytes = Some(1 << 30);
    let plugin = hostile_with(policy).await;
    let error = plugin.call_tool("huge", json!({})).await.unwrap_err();
    assert!(error.is_output_too_large(), "{error:?}");
    assert!(error.to_string().contains("209715200 bytes of output, over the limit of 16MiB"), "{error}");

    // Under the default memory cap the same tool is stopped by the memory limit.
    let error = hostile_with(policy_with_timeout(Duration::from_secs(600)))
        .await
        .call_tool("huge", json!({}))
        .await
        .unwrap_err();
    assert!(error.is_memory_limit(), "{error:?}");
}

#[tokio::test]
async fn a_fuel_budget_stops_a_loop() {
    let mut policy = policy_with_timeout(Duration::from_secs(30));
    policy.limits.fuel = Some(10_000_000);
    let plugin = hostile_with(policy).await;
    let error = plugin.call_tool("spin", json!({})).await.unwrap_err();
    assert!(error.is_fuel_exhausted(), "{error:?}");
    assert_eq!(text_of(&plugin.call_tool("ok", json!({})).await.expect("ok")), "fine");
}

#[tokio::test]
async fn no_file_is_visible_unless_granted() {
    let plugin = hostile_with(Policy::default()).await;
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".to_owned());
    for path in ["/etc/passwd".to_owned(), format!("{home}/.bashrc"), home.clone(), "/".to_owned()] {
        let result = plugin.call_tool("read_file", json!({"path": path})).await.expect("a result");
        assert!(result.is_error(), "{path} was readable: {result:?}");
        assert!(!text_of(&result).contains("root:"), "{path}");
    }
}

#[tokio::test]
async fn a_granted_directory_is_visible_read_only_unless_rw() {
    let dir = std::env::temp_dir().join(format!("toolhost-grant-{}", std::process::id()));
    let outside = std::env::temp_dir().join(format!("toolhost-outside-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::create_dir_all(&outside).expect("dir");
    std::fs::write(dir.join("note.txt"), "inside").expect("write");
    std::fs::write(outside.join("secret.txt"), "outside").expect("write");

    let grant: PathGrant = format!("{}:/data", dir.display()).parse().expect("grant");
    let plugin = Plugin::builder_from_file(fixture("hostile")).with_allowed_path(grant).build().await.expect("load");
    let read = plugin.call_tool("read_file", json!({"path": "/data/note.txt"})).await.expect("read");
    assert_eq!(text_of(&read), "inside");
    for path in [
        format!("{}/secret.txt", outside.display()),
        "/data/../secret.txt".to_owned(),
        format!("{}/note.txt", dir.display()),
    ] {
        let result = plugin.call_tool("read_file", json!({"path": path})).await.expect("a result");
        assert!(result.is_error(), "{path} was readable: {result:?}");
    }
    let write = plugin.call_tool("write_file", json!({"path": "/data/new.txt", "text": "x"})).await.expect("a result");
    assert!(write.is_error(), "a read-only grant allowed a write: {write:?}");
    assert!(!dir.join("new.txt").exists());

    let rw: PathGrant = format!("{}:/data:rw", dir.display()).parse().expect("grant");
    let plugin = Plugin::builder_from_file(fixture("hostile")).with_allowed_path(rw).build().await.expect("load");
    let write = plugin.call_tool("write_file", json!({"path": "/data/new.txt", "text": "x"})).await.expect("write");
    assert!(!write.is_error(), "{write:?}");
    assert_eq!(std::fs::read_to_string(dir.join("new.txt")).expect("written"), "x");
    std::fs::remove_dir_all(&dir).ok();
    std::fs::remove_dir_all(&outside).ok();
}

#[tokio::test]
async fn host_environment_variables_are_invisible_and_config_is_the_way_in() {
    let plugin =
        Plugin::builder_from_file(fixture("hostile")).with_config("greeting", "hi").build().await.expect("load");
    for name in ["HOME", "PATH", "RUST_BACKTRACE"] {
        let result = plugin.call_tool("env", json!({"name": name})).await.expect("env");
        assert_eq!(text_of(&result), "<unset>", "{name} leaked");
    }
    // Config reaches a plugin (the scripted fixture answers with its config).
    let describe = json!({"tools": [{"name": "t", "description": "d", "inputSchema": {"type": "object"}}]});
    let scripted = Plugin::builder_from_file(fixture("scripted"))
        .with_config("describe", describe.to_string())
        .build()
        .await
        .expect("config reaches the plugin");
    assert_eq!(scripted.tools()[0].name, "t");
}

/// A one-shot HTTP server on 127.0.0.1 that answers `hello` to each request,
/// serving at most `requests` requests and stopping by itself.
fn serve_hello(requests: usize) -> (String, std::thread::JoinHandle<usize>) {
    let hello = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello".to_owned();
    let (port, handle) = toolhost_tests::serve_http(vec![hello; requests]);
    (format!("http://127.0.0.1:{port}/"), handle)
}

#[tokio::test]
async fn http_is_refused_unless_the_host_is_granted() {
    let (url, server) = serve_hello(1);
    let refused = hostile_with(Policy::default()).await.call_tool("http", json!({"url": url})).await.unwrap_err();
    assert!(refused.is_denied(), "{refused:?}");
    assert!(refused.to_string().contains("127.0.0.1"), "{refused}");

    let other =
        Plugin::builder_from_file(fixture("hostile")).with_allowed_host("*.example.com").build().await.expect("load");
    assert!(other.call_tool("http", json!({"url": url})).await.unwrap_err().is_denied());

    let granted =
        Plugin::builder_from_file(fixture("hostile")).with_allowed_host("127.0.0.1").build().await.expect("load");
    let result = granted.call_tool("http", json!({"url": url})).await.expect("granted request");
    assert_eq!(text_of(&result), "hello");
    assert_eq!(server.join().expect("server"), 1, "exactly the granted request reached the server");
}

/// A plugin may not choose the `Host` header, nor the transport's own:
/// with `Host`, a request to a granted address would reach a virtual host
/// behind it that was never granted (a proxy's, a CDN's, localhost's).
#[tokio::test]
async fn a_plugin_may_not_set_the_host_header() {
    let hello = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello".to_owned();
    let (port, server) = toolhost_tests::serve_http_recording(vec![hello]);
    let granted = Plugin::builder_from_file(fixture("hostile"))
        .with_allowed_host(format!("127.0.0.1:{port}"))
        .build()
        .await
        .expect("load");
    let url = format!("http://127.0.0.1:{port}/");
    for (headers, named) in [
        (json!({"Host": "internal.example"}), "host"),
        (json!({"host": "localhost"}), "host"),
        (json!({"X-Ok": "1", "Transfer-Encoding": "chunked"}), "transfer-encoding"),
        (json!({"Connection": "Upgrade", "Upgrade": "h2c"}), "connection"),
        (json!({"PROXY-AUTHORIZATION": "Basic eDp5"}), "proxy-authorization"),
    ] {
        let refused = granted.call_tool("http", json!({"url": url, "headers": headers})).await.unwrap_err();
        assert!(refused.is_denied(), "{headers}: {refused:?}");
        assert!(refused.to_string().contains(&format!("may not set the `{named}` header")), "{headers}: {refused}");
    }
    // Any other header goes, and the server sees the URL's host.
    let result = granted
        .call_tool("http", json!({"url": url, "headers": {"X-Fixture": "hostile", "User-Agent": "probe"}}))
        .await
        .expect("an allowed request");
    assert_eq!(text_of(&result), "hello");
    let requests = server.join().expect("server");
    assert_eq!(requests.len(), 1, "only the allowed request reached the server: {requests:?}");
    let head = requests[0].to_ascii_lowercase();
    assert!(head.contains(&format!("\r\nhost: 127.0.0.1:{port}\r\n")), "{head}");
    assert!(head.contains("x-fixture: hostile") && head.contains("user-agent: probe"), "{head}");
}

/// A server on 127.0.0.1 that answers one request with a body of `bytes`
/// bytes, written until the client stops taking them. Returns the port, and
/// how many bytes of the body went out.
fn serve_large_body(bytes: usize) -> (u16, std::thread::JoinHandle<usize>) {
    use std::io::{Read as _, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let port = listener.local_addr().unwrap().port();
    let handle = std::thread::spawn(move || {
        listener.set_nonblocking(true).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut stream = loop {
            match listener.accept() {
                Ok((stream, _)) => break stream,
                Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
                Err(_) => return 0,
            }
        };
        stream.set_nonblocking(false).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        stream.set_write_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut head = Vec::new();
        let mut buffer = [0u8; 4096];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut buffer) {
                Ok(0) | Err(_) => return 0,
                Ok(n) => head.extend_from_slice(&buffer[..n]),
            }
        }
        let answer = format!("HTTP/1.1 200 OK\r\nContent-Length: {bytes}\r\nConnection: close\r\n\r\n");
        stream.write_all(answer.as_bytes()).unwrap();
        let chunk = vec![b'x'; 64 << 10];
        let mut sent = 0;
        while sent < bytes {
            match stream.write(&chunk[..chunk.len().min(bytes - sent)]) {
                Ok(n) => sent += n,
                Err(_) => break,
            }
        }
        sent
    });
    (port, handle)
}

/// The host reads a response only as far as the plugin's memory has room
/// for it (the body goes there): not 48 MB, up to Extism's 50 MiB, held
/// outside the memory limit before the copy failed.
#[tokio::test]
async fn a_response_is_read_only_as_far_as_the_plugins_memory_has_room() {
    let (port, server) = serve_large_body(48 << 20);
    let mut policy = Policy::default();
    policy.limits.memory_max_bytes = Some(8 << 20);
    let plugin = Plugin::builder_from_file(fixture("hostile"))
        .with_policy(policy)
        .with_allowed_host(format!("127.0.0.1:{port}"))
        .build()
        .await
        .expect("load");
    let error = plugin.call_tool("http", json!({"url": format!("http://127.0.0.1:{port}/")})).await.unwrap_err();
    assert!(error.to_string().contains("more than the plugin's memory limit leaves room for"), "{error}");
    let sent = server.join().expect("server");
    // At most the room (under 8 MiB) and what the sockets' buffers took.
    assert!(sent < 32 << 20, "the host read {sent} bytes of a response it had no room for");
}

/// Extism variables are kept between calls: each costs its bytes and its
/// place in the host's map against the 1 MiB store, so a flood of tiny
/// variables cannot hold tens of MiB of host memory in an idle instance.
#[tokio::test]
async fn variables_are_counted_with_what_they_cost_the_host() {
    let plugin = Plugin::builder_from_file(fixture("hostile")).with_pool_size(1).build().await.expect("load");
    let some = plugin.call_tool("vars", json!({"count": 100, "bytes": 1024})).await.expect("100 variables of 1 KiB");
    assert_eq!(text_of(&some), "set");
    // 100,000 one-byte variables are 0.6 MB of keys and values, but far
    // more in the host.
    let error = plugin.call_tool("vars", json!({"count": 100_000, "bytes": 1})).await.unwrap_err();
    assert!(error.to_string().contains("the variable store is full"), "{error}");
}

/// A request description (URL and headers) is parsed and its host
/// matched against the grants inside the host call, where no deadline
/// reaches: one larger than 64 KiB is refused before any of that.
#[tokio::test]
async fn an_http_request_description_is_bounded() {
    let granted =
        Plugin::builder_from_file(fixture("hostile")).with_allowed_host("127.0.0.1").build().await.expect("load");
    let long_host = format!("http://{}.example/", "a".repeat(100_000));
    let headers: serde_json::Map<String, serde_json::Value> =
        (0..5_000).map(|n| (format!("x-header-{n}"), json!("value of a header"))).collect();
    for arguments in [json!({"url": long_host}), json!({"url": "http://127.0.0.1:9/", "headers": headers})] {
        let error = granted.call_tool("http", arguments).await.unwrap_err();
        assert!(error.to_string().contains("more than the 65536 a plugin may pass"), "{error}");
    }
}

#[tokio::test]
async fn a_host_grant_with_a_port_allows_that_port_only() {
    let (url, server) = serve_hello(1);
    let port: u16 = url.trim_end_matches('/').rsplit(':').next().unwrap().parse().unwrap();
    let other_port = if port == 65535 { port - 1 } else { port + 1 };
    let elsewhere = Plugin::builder_from_file(fixture("hostile"))
        .with_allowed_host(format!("127.0.0.1:{other_port}"))
        .build()
        .await
        .expect("load");
    let refused = elsewhere.call_tool("http", json!({"url": url})).await.unwrap_err();
    assert!(refused.is_denied(), "{refused:?}");

    let granted = Plugin::builder_from_file(fixture("hostile"))
        .with_allowed_host(format!("127.0.0.1:{port}"))
        .build()
        .await
        .expect("load");
    let result = granted.call_tool("http", json!({"url": url})).await.expect("the granted port");
    assert_eq!(text_of(&result), "hello");
    assert_eq!(server.join().expect("server"), 1, "exactly the granted request reached the server");

    // The CLI takes the same patterns; a bad port is refused at start-up.
    let hostile = fixture("hostile");
    let output = toolhost_tests::run_toolhost(
        &["call", "--allow-host", "127.0.0.1:0", hostile.to_str().unwrap(), "ok", "{}"],
        None,
    );
    assert_eq!(output.status.code(), Some(2), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("a port is a number"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test]
async fn healthy_calls_complete_while_a_spinning_call_is_being_stopped() {
    // The spin never ends by itself and its timeout is far off: whatever the
    // machine's load, it is still running when the healthy calls are done.
    let hostile = hostile_with(policy_with_timeout(Duration::from_secs(120))).await;
    let calculator = Plugin::load(example("calculator")).await.expect("load");
    let spinning = {
        let hostile = hostile.clone();
        tokio::spawn(async move { hostile.call_tool("spin", json!({})).await })
    };
    // Wait for the event, not for a time: the spin holds an instance.
    let deadline = Instant::now() + Duration::from_secs(60);
    while hostile.pool_stats().busy == 0 {
        assert!(Instant::now() < deadline, "the spin never started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for i in 0..20 {
        let same_plugin = hostile.call_tool("ok", json!({})).await.expect("the same plugin answers");
        assert_eq!(text_of(&same_plugin), "fine");
        let other_plugin = calculator.call_tool("add", json!({"a": i, "b": 1})).await.expect("another plugin answers");
        assert!(!other_plugin.is_error());
    }
    assert!(!spinning.is_finished(), "the spinning call ended before the healthy ones");
    // Stopping it (the caller gives up) frees its instance.
    spinning.abort();
    assert!(spinning.await.unwrap_err().is_cancelled());
    let deadline = Instant::now() + Duration::from_secs(60);
    while hostile.pool_stats().busy != 0 {
        assert!(Instant::now() < deadline, "the spinning instance was never released");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(text_of(&hostile.call_tool("ok", json!({})).await.expect("answers")), "fine");
}

// Each call on a thread of its own, and every busy wait far inside the
// timeout (a second or more to spare): on one thread, or with a few hundred
// milliseconds to spare, a busy machine made the short call itself time out.
#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn a_timeout_on_one_call_does_not_stop_another_on_the_same_plugin() {
    let plugin = hostile_with(policy_with_timeout(Duration::from_secs(2))).await;
    let spin = tokio::spawn({
        let plugin = plugin.clone();
        async move { plugin.call_tool("spin", json!({})).await }
    });
    let slow = plugin.call_tool("sleep", json!({"ms": 300})).await;
    // A call that busy-waits past the moment the spinning one times out
    // (about 2 s after it started).
    let slow2 = tokio::spawn({
        let plugin = plugin.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            plugin.call_tool("sleep", json!({"ms": 600})).await
        }
    });
    assert_eq!(text_of(&slow.expect("the slow call finishes")), "awake");
    assert!(spin.await.expect("task").unwrap_err().is_timeout());
    assert_eq!(text_of(&slow2.await.expect("task").expect("the overlapping call survives the timeout")), "awake");
}

fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).expect("resident pages");
    pages * 4096
}

/// The measurement of [`the_host_survives_1000_faulting_calls_with_bounded_memory`],
/// run in a process of its own (other tests running in parallel would move
/// the resident size). Prints `grown=<bytes>`.
#[tokio::test]
#[ignore = "run by the_host_survives_1000_faulting_calls_with_bounded_memory in its own process"]
async fn fault_memory_probe() {
    let plugin = hostile_with(Policy::default()).await;
    let kinds = ["panic", "error", "abort", "non_utf8"];
    for tool in kinds.iter().cycle().take(50) {
        assert!(plugin.call_tool(tool, json!({})).await.is_err());
    }
    let before = resident_bytes();
    for (i, tool) in kinds.iter().cycle().take(1000).enumerate() {
        let error = plugin.call_tool(tool, json!({})).await.expect_err(tool);
        assert!(error.is_plugin_error(), "call {i}: {error:?}");
    }
    let grown = resident_bytes().saturating_sub(before);
    assert_eq!(text_of(&plugin.call_tool("ok", json!({})).await.expect("ok")), "fine");
    println!("grown={grown}");
}

#[test]
fn the_host_survives_1000_faulting_calls_with_bounded_memory() {
    let exe = std::env::current_exe().expect("test binary");
    let output = std::process::Command::new(exe)
        .args(["--ignored", "--exact", "sandbox::fault_memory_probe", "--nocapture", "--test-threads=1"])
        .output()
        .expect("run the probe");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    let grown: u64 = stdout
        .lines()
        .find_map(|l| l.split("grown=").nth(1))
        .and_then(|n| n.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no figure in the probe's output: {stdout}"));
    eprintln!("1000 faulting calls: resident memory grew by {} KiB", grown >> 10);
    assert!(grown < 16 << 20, "resident memory grew by {} MiB over 1000 faults", grown >> 20);
}

#[tokio::test]
async fn each_fault_has_its_own_kind() {
    let plugin = hostile_with(Policy::default()).await;
    for (tool, kind) in
        [("panic", FaultKind::Trap), ("abort", FaultKind::Trap), ("error", FaultKind::Error), ("exit", FaultKind::Exit)]
    {
        let error = plugin.call_tool(tool, json!({})).await.unwrap_err();
        assert_eq!(error.fault().map(|f| f.kind), Some(kind), "{tool}: {error}");
        let message = error.to_string();
        assert!(message.contains("`hostile`") && message.contains(&format!("tool `{tool}`")), "{message}");
    }
    for tool in ["non_utf8", "not_json", "not_a_result"] {
        assert!(plugin.call_tool(tool, json!({})).await.unwrap_err().is_invalid_output(), "{tool}");
    }
}

/// A read-write grant may not hold toolhost's compiled-module cache: an
/// entry there is machine code toolhost runs outside the sandbox, and its
/// name and checksum are no secret, so a plugin that could write one would
/// run native code at its next load. The load is refused, naming the grant
/// and the cache; a read-only grant, or a read-write one beside the cache,
/// loads.
#[tokio::test]
async fn a_read_write_grant_may_not_hold_the_compiled_module_cache() {
    let home = std::env::temp_dir().join(format!("toolhost-protected-{}", std::process::id()));
    let cache = home.join(".cache").join("toolhost");
    let work = home.join("work");
    std::fs::create_dir_all(&cache).expect("dir");
    std::fs::create_dir_all(&work).expect("dir");
    let runtime = toolhost::Runtime::builder().with_module_cache(toolhost::ModuleCache::at(&cache)).build();
    let load = |grant: String| {
        let runtime = runtime.clone();
        async move {
            let grant: PathGrant = grant.parse().expect("grant");
            runtime.plugin_from_file(fixture("hostile")).with_allowed_path(grant).build().await
        }
    };

    let error = load(format!("{}:/home:rw", home.display())).await.expect_err("a grant holding the cache");
    assert!(matches!(error, toolhost::Error::Policy { .. }), "{error:?}");
    let message = error.to_string();
    assert!(message.contains(&format!("{}:/home:rw", home.display())), "{message}");
    assert!(message.contains(&cache.display().to_string()) && message.contains("compiled-module cache"), "{message}");
    // The cache itself, through a path with `..` in it.
    let roundabout = format!("{}:/c:rw", work.join("..").join(".cache").display());
    assert!(matches!(load(roundabout).await, Err(toolhost::Error::Policy { .. })));
    // Nothing was compiled into the cache for the refused loads.
    assert_eq!(std::fs::read_dir(&cache).expect("cache").count(), 0);

    // Read-only, it loads, and the cache stays out of the plugin's reach.
    let reader = load(format!("{}:/home", home.display())).await.expect("a read-only grant");
    let write = (reader.call_tool("write_file", json!({"path": "/home/.cache/toolhost/x.cwasm", "text": "x"})).await)
        .expect("a result");
    assert!(write.is_error(), "{write:?}");
    assert!(!cache.join("x.cwasm").exists());
    // Read-write beside the cache, it loads and writes.
    let writer = load(format!("{}:/work:rw", work.display())).await.expect("a grant beside the cache");
    let write = writer.call_tool("write_file", json!({"path": "/work/out.txt", "text": "x"})).await.expect("write");
    assert!(!write.is_error(), "{write:?}");
    assert_eq!(std::fs::read_to_string(work.join("out.txt")).expect("written"), "x");
    std::fs::remove_dir_all(&home).ok();
}

/// Where secrets are read from may not be granted at all: a plugin that
/// could read the secrets directory would have every secret in it, granted
/// or not. A grant holding it, read-only too, is refused; a grant beside it
/// loads, and the secret file stays out of reach.
#[tokio::test]
async fn no_grant_may_hold_the_secrets_directory() {
    let home = std::env::temp_dir().join(format!("toolhost-secrets-dir-{}", std::process::id()));
    let secrets = home.join("secrets");
    let work = home.join("work");
    std::fs::create_dir_all(&secrets).expect("dir");
    std::fs::create_dir_all(&work).expect("dir");
    std::fs::write(secrets.join("API_KEY"), "s3cr3t-value").expect("secret");
    let load = |grant: String| {
        let secrets = secrets.clone();
        async move {
            let grant: PathGrant = grant.parse().expect("grant");
            Plugin::builder_from_file(fixture("hostile"))
                .with_secret_provider(std::sync::Arc::new(toolhost::FileSecretProvider::new(secrets)))
                .with_allowed_path(grant)
                .build()
                .await
        }
    };
    for grant in [format!("{}:/home", home.display()), format!("{}:/s:rw", secrets.display())] {
        let error = load(grant.clone()).await.expect_err("a grant holding the secrets");
        assert!(matches!(error, toolhost::Error::Policy { .. }), "{error:?}");
        let message = error.to_string();
        assert!(message.contains(&grant) && message.contains("where secrets are read from"), "{message}");
        assert!(!message.contains("s3cr3t"), "{message}");
    }
    let beside = load(format!("{}:/home/work", work.display())).await.expect("a grant beside the secrets");
    for path in ["/home/work/../secrets/API_KEY", "/home/secrets/API_KEY"] {
        let read = beside.call_tool("read_file", json!({"path": path})).await.expect("a result");
        assert!(read.is_error() && !text_of(&read).contains("s3cr3t"), "{path}: {read:?}");
    }
    std::fs::remove_dir_all(&home).ok();
}
