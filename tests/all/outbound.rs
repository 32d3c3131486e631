//! HTTP from plugins written with the SDK's portable `http` module, the
//! same code in both flavours: Extism's `http_request` in a module,
//! `wasi:http/outgoing-handler` in a component, under the same grants
//! (every redirect hop checked) and deadline. Against `fetcher` and a
//! server on loopback.

use serde_json::json;
use toolhost::{Error, FaultKind, Plugin};
use toolhost_tests::{Flavour, serve_http_recording};

fn text(result: &toolhost::CallToolResult) -> String {
    result.texts().next().unwrap_or_default().to_owned()
}

/// A refused request: the module's host function stops the call (as
/// Extism does); a component's request gets `http-request-denied`, which
/// the SDK reports as the tool's error.
fn assert_refused(flavour: Flavour, outcome: Result<toolhost::CallToolResult, Error>) {
    match (flavour, outcome) {
        (Flavour::Extism, Err(Error::PluginFailed { fault, .. })) => {
            assert_eq!(fault.kind, FaultKind::Denied, "{fault}")
        }
        (Flavour::Component, Ok(result)) => {
            assert!(result.is_error(), "{result:?}");
            assert!(text(&result).contains("HttpRequestDenied"), "{}", text(&result));
        }
        (_, other) => panic!("{flavour:?}: {other:?}"),
    }
}

async fn the_sdk_fetches_from_granted_hosts_only(flavour: Flavour) {
    let (port, server) = serve_http_recording(vec![
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello".to_owned(),
        "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: close\r\n\r\nsent".to_owned(),
        "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.2:{port}/elsewhere\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            .to_owned(),
    ]);
    let plugin = Plugin::builder_from_file(flavour.fixture("fetcher"))
        .with_allowed_host(format!("127.0.0.1:{port}"))
        .build()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let got = plugin.call_tool("fetch", json!({"url": format!("http://127.0.0.1:{port}/data")})).await.expect("fetch");
    assert_eq!(text(&got), "200 hello");
    let posted = plugin
        .call_tool("fetch", json!({"url": format!("http://127.0.0.1:{port}/post"), "body": "payload"}))
        .await
        .expect("post");
    assert_eq!(text(&posted), "200 sent");
    // A redirect to a host that is not granted is not followed.
    let redirected = plugin.call_tool("fetch", json!({"url": format!("http://127.0.0.1:{port}/moved")})).await;
    assert_refused(flavour, redirected);
    // A host that is not granted is refused before anything is sent.
    let other = plugin.call_tool("fetch", json!({"url": format!("http://127.0.0.2:{port}/secret")})).await;
    assert_refused(flavour, other);
    let requests = server.join().expect("the server");
    assert_eq!(requests.len(), 3, "{requests:?}");
    assert!(requests[0].starts_with("GET /data"), "{requests:?}");
    assert!(requests[0].to_ascii_lowercase().contains("x-fixture: fetcher"), "{requests:?}");
    assert!(requests[1].starts_with("POST /post"), "{requests:?}");
}

both_flavours!(the_sdk_fetches_from_granted_hosts_only);

#[tokio::test]
async fn a_component_with_no_grant_reaches_nothing() {
    let plugin = Plugin::load(Flavour::Component.fixture("fetcher")).await.expect("load");
    let refused = plugin.call_tool("fetch", json!({"url": "http://127.0.0.1:9/"})).await;
    assert_refused(Flavour::Component, refused);
}

/// A component that starts requests without end (never finishing their
/// bodies, keeping every one) gets four in flight at once; the fifth is
/// refused, and nothing more is held for it.
#[tokio::test]
async fn a_component_has_at_most_four_requests_in_flight() {
    let plugin = Plugin::builder_from_file(Flavour::Component.fixture("fetcher"))
        .with_allowed_host("127.0.0.1")
        .build()
        .await
        .expect("load");
    let flood = plugin.call_tool("flood", json!({"url": "http://127.0.0.1:9/", "count": 5})).await.expect("flood");
    let said = text(&flood);
    assert!(said.contains("refused") && said.contains("4 HTTP requests are in flight already"), "{said}");
}

/// A request whose response the guest drops goes on on its thread until
/// its deadline, and keeps its place among the four in flight: dropping
/// futures does not start more (each took a thread of the pool every
/// plugin's HTTP waits on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_that_drops_its_requests_still_has_at_most_four_in_flight() {
    use std::time::{Duration, Instant};
    // A server that takes connections and never answers, for five seconds.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        listener.set_nonblocking(true).unwrap();
        let until = Instant::now() + Duration::from_secs(5);
        let mut held = Vec::new();
        while Instant::now() < until {
            match listener.accept() {
                Ok((stream, _)) => held.push(stream),
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
        held.len()
    });
    let plugin = Plugin::builder_from_file(Flavour::Component.fixture("fetcher"))
        .with_allowed_host(format!("127.0.0.1:{port}"))
        .build()
        .await
        .expect("load");
    let url = format!("http://127.0.0.1:{port}/");
    let flood = plugin.call_tool("flood", json!({"url": url, "count": 20, "drop": true})).await.expect("flood");
    assert_eq!(text(&flood), "started 20");
    let connections = tokio::task::spawn_blocking(move || server.join().expect("server")).await.expect("join");
    assert!((1..=4).contains(&connections), "{connections} requests reached the server");
}

/// A component's requests read at once share the room its instance has
/// for responses (64 MiB), counted as each is read: four responses of
/// 40 MB, all kept, cannot all come (each saw the whole room before, and
/// the instance held 160 MB).
#[tokio::test]
async fn a_components_responses_read_at_once_share_its_room() {
    const SIZE: usize = 40_000_000;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).is_ok_and(|n| n == 1) {
                    head.push(byte[0]);
                }
                let _ = write!(stream, "HTTP/1.1 200 OK\r\nContent-Length: {SIZE}\r\nConnection: close\r\n\r\n");
                let chunk = vec![b'x'; 1 << 16];
                let mut sent = 0;
                while sent < SIZE && stream.write_all(&chunk[..(SIZE - sent).min(chunk.len())]).is_ok() {
                    sent += chunk.len();
                }
            });
        }
    });
    let plugin = Plugin::builder_from_file(Flavour::Component.fixture("fetcher"))
        .with_allowed_host(format!("127.0.0.1:{port}"))
        .with_timeout(std::time::Duration::from_secs(120))
        .build()
        .await
        .expect("load");
    let url = format!("http://127.0.0.1:{port}/");
    let result = plugin.call_tool("fetch_many", json!({"url": url, "count": 4})).await.expect("fetch_many");
    let said = text(&result);
    let came: usize = said
        .strip_prefix("came ")
        .and_then(|rest| rest.split(';').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{said}"));
    assert!(came <= 1, "{said}");
    assert!(said.contains("does not fit in what is left of the 67108864 bytes the instance may hold"), "{said}");
}

/// A response a component gave up on while the host was still reading it
/// gives its count back when it is dropped on its thread: counted as read
/// and then left there, an abandoned 50 MB response took 50 of the
/// instance's 64 MiB for good, and a 20 MB response no longer fit.
#[tokio::test]
async fn a_response_a_component_gave_up_on_is_not_counted_for_ever() {
    use std::time::{Duration, Instant};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let port = listener.local_addr().unwrap().port();
    let (sent, all_sent) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let sent = sent.clone();
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).is_ok_and(|n| n == 1) {
                    head.push(byte[0]);
                }
                // `/medium`: 20 MB at once. Else 50 MB: a megabyte, a pause
                // (the guest gives up meanwhile), the rest.
                let medium = head.starts_with(b"GET /medium");
                let size: usize = if medium { 20_000_000 } else { 50_000_000 };
                let _ = write!(stream, "HTTP/1.1 200 OK\r\nContent-Length: {size}\r\nConnection: close\r\n\r\n");
                let chunk = vec![b'x'; 1 << 20];
                let mut written = 0;
                while written < size && stream.write_all(&chunk[..(size - written).min(chunk.len())]).is_ok() {
                    written += chunk.len();
                    if written == chunk.len() && !medium {
                        std::thread::sleep(Duration::from_secs(3));
                    }
                }
                if !medium {
                    let _ = sent.send(written >= size);
                }
            });
        }
    });
    let plugin = Plugin::builder_from_file(Flavour::Component.fixture("fetcher"))
        .with_allowed_host(format!("127.0.0.1:{port}"))
        .with_pool_size(1)
        .build()
        .await
        .expect("load");
    let flood = json!({"url": format!("http://127.0.0.1:{port}/"), "count": 1, "drop": true});
    assert_eq!(text(&plugin.call_tool("flood", flood).await.expect("flood")), "started 1");
    let whole = tokio::task::spawn_blocking(move || all_sent.recv_timeout(Duration::from_secs(60)));
    assert_eq!(whole.await.expect("join").ok(), Some(true), "the server sent all of the response");
    // Once the host has read it to the end (on its thread) and let it go,
    // the instance has its whole room again.
    let medium = json!({"url": format!("http://127.0.0.1:{port}/medium"), "count": 1});
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let said = text(&plugin.call_tool("fetch_many", medium.clone()).await.expect("fetch_many"));
        if said.starts_with("came 1") {
            break;
        }
        assert!(Instant::now() < deadline, "the instance still has no room: {said}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
