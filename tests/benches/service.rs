//! The tool-set service (`cargo bench -p toolhost-tests --bench service`):
//! request latency of the `/v1` API as a workspace grows to 1,000 tool
//! sets, on SQLite and (where Debian's PostgreSQL is installed) on a
//! PostgreSQL server started on loopback.
//!
//! For each store: 1,000 `http` tool sets are created one after another
//! (each create is answered after its workspace's registry is synced);
//! then, at 1,000, `GET /v1/tool_sets?pageSize=100` (the first page),
//! `?pageSize=1000` (all), `GET` of one, and `PUT` of one with `If-Match`,
//! 200 times each on tool sets picked round-robin. Each line gives p50 and
//! p99 in milliseconds, measured by the client over kept-alive HTTP.
//! Figures, not assertions; client, server and database share this
//! machine's cores.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

const KEY: &str = "bench-key-0123456789abcdef";

/// Tool sets to grow to; `TOOLHOST_BENCH_TOOL_SETS` changes it.
fn tool_sets() -> usize {
    std::env::var("TOOLHOST_BENCH_TOOL_SETS").ok().and_then(|n| n.parse().ok()).unwrap_or(1000)
}

struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn percentiles(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize].as_secs_f64() * 1000.0;
    (at(0.5), at(0.99))
}

fn request(agent: &ureq::Agent, method: &str, url: &str, body: Option<&Value>, if_match: Option<&str>) -> Value {
    let mut request = http::Request::builder()
        .method(method)
        .uri(url)
        .header("authorization", format!("Bearer {KEY}"))
        .header("content-type", "application/json");
    if let Some(version) = if_match {
        request = request.header("if-match", version);
    }
    let request = request.body(body.map(Value::to_string).unwrap_or_default()).expect("request");
    let mut response = agent.run(request).expect("the service answers");
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().expect("a body");
    assert!(status < 300, "{method} {url}: {status} {text}");
    serde_json::from_str(&text).expect("JSON")
}

fn run(store: &str, label: &str, dir: &std::path::Path) {
    let document = json!({
        "schema": "https://schema.cjson.dev/0/toolsets/cjson-toolsets-0.1.0-SNAPSHOT.schema.json",
        "toolsets": [],
        "serve": {
            "resource": "http://toolhost.test/mcp",
            "auth": {"apiKeys": [{"key": KEY, "subject": "bench", "claims": {"workspace_id": "bench"}}]},
            "service": {"store": store, "allowedHosts": ["127.0.0.1:9"], "maxToolSets": tool_sets()},
        },
    });
    let config = dir.join(format!("{label}.json"));
    std::fs::write(&config, document.to_string()).expect("write config");
    let (child, url) = toolhost_tests::spawn_serve_http(&["--config", &config.display().to_string()], &[]);
    let _server = Server(child);
    let base = url.trim_end_matches("/mcp").to_owned();
    let sets = format!("{base}/v1/tool_sets");
    let agent: ureq::Agent = ureq::Agent::config_builder().build().into();
    let n = tool_sets();
    let mut creates = Vec::with_capacity(n);
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        let body = json!({"metadata": {"name": format!("set-{i:04}")},
            "spec": {"adapter": {"http": {"baseUrl": "http://127.0.0.1:9/api"}}}});
        let started = Instant::now();
        let created = request(&agent, "POST", &sets, Some(&body), None);
        creates.push(started.elapsed());
        ids.push(created["metadata"]["id"].as_str().expect("id").to_owned());
    }
    let last = creates.split_off(n - n / 10);
    let (p50, p99) = percentiles(creates[..n / 10].to_vec());
    println!("{label:<10} create (first {:>4})          p50 {p50:>7.2} ms  p99 {p99:>7.2} ms", n / 10);
    let (p50, p99) = percentiles(last);
    println!("{label:<10} create (last {:>4}, at {n})  p50 {p50:>7.2} ms  p99 {p99:>7.2} ms", n / 10);
    let mut versions = vec![1_i64; n];
    for (what, page) in [("list pageSize=100", 100), ("list pageSize=1000", 1000)] {
        let samples: Vec<Duration> = (0..200)
            .map(|_| {
                let started = Instant::now();
                let listed = request(&agent, "GET", &format!("{sets}?pageSize={page}"), None, None);
                let took = started.elapsed();
                assert_eq!(listed["toolSets"].as_array().map(Vec::len), Some(page.min(n)));
                took
            })
            .collect();
        let (p50, p99) = percentiles(samples);
        println!("{label:<10} {what:<28} p50 {p50:>7.2} ms  p99 {p99:>7.2} ms");
    }
    let samples: Vec<Duration> = (0..200)
        .map(|i| {
            let started = Instant::now();
            request(&agent, "GET", &format!("{sets}/{}", ids[(i * 7) % n]), None, None);
            started.elapsed()
        })
        .collect();
    let (p50, p99) = percentiles(samples);
    println!("{label:<10} {:<28} p50 {p50:>7.2} ms  p99 {p99:>7.2} ms", "get one");
    let samples: Vec<Duration> = (0..200)
        .map(|i| {
            let k = (i * 13) % n;
            let body = json!({"metadata": {"name": format!("set-{k:04}"), "labels": {"round": i.to_string()}},
                "spec": {"adapter": {"http": {"baseUrl": "http://127.0.0.1:9/api"}}}});
            let started = Instant::now();
            request(&agent, "PUT", &format!("{sets}/{}", ids[k]), Some(&body), Some(&format!("\"{}\"", versions[k])));
            let took = started.elapsed();
            versions[k] += 1;
            took
        })
        .collect();
    let (p50, p99) = percentiles(samples);
    println!("{label:<10} {:<28} p50 {p50:>7.2} ms  p99 {p99:>7.2} ms", "update one (If-Match)");
}

fn main() {
    let dir = std::env::temp_dir().join(format!("toolhost-service-bench-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).expect("scratch");
    println!("tool-set service, {} tool sets in one workspace", tool_sets());
    run(&format!("sqlite://{}", dir.join("bench.db").display()), "sqlite", &dir);
    if let Some(postgres) = toolhost_tests::Postgres::start_if_installed("bench") {
        run(&postgres.url, "postgres", &dir);
    }
    std::fs::remove_dir_all(&dir).ok();
}
