//! `serve --http` in production (`cargo bench -p toolhost-tests --bench
//! production`): what authorization, rate limits and telemetry cost per
//! call, and what a second instance behind a load balancer adds.
//!
//! - `layers`: one instance, `calculator.add` from 16 kept-alive sessions,
//!   with nothing on, then each layer alone (API key, JWT, rate limits that
//!   never refuse, metrics, OTLP traces to a receiver on loopback), then all
//!   of them; rounds alternate, and each line is the median round.
//! - `balancer` (needs Debian's haproxy): 32 sessions straight to one
//!   instance, through HAProxy to one, and through HAProxy to two, in the
//!   same run.
//!
//! Each line gives calls/s and latency percentiles measured by the client.
//! Figures, not assertions. Everything (clients, servers, HAProxy, the
//! trace receiver) shares this machine's cores.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Calls per round (after a warm-up of a tenth as many);
/// `TOOLHOST_BENCH_CALLS` changes it (a quick check of the bench itself).
fn calls() -> usize {
    std::env::var("TOOLHOST_BENCH_CALLS").ok().and_then(|n| n.parse().ok()).unwrap_or(10_000)
}
/// Rounds per configuration; the median is reported.
const ROUNDS: usize = 3;

fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("toolhost-production-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch");
    dir
}

/// A `toolhost serve --http` child and its URL.
struct Server(Child, String);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(config: &Path) -> Server {
    let (child, url) = toolhost_tests::spawn_serve_http(&["--config", &config.display().to_string()], &[]);
    Server(child, url)
}

fn config(dir: &Path, name: &str, serve: Value) -> PathBuf {
    let document = json!({
        "schema": "https://schema.cjson.dev/0/toolsets/cjson-toolsets-0.1.0-SNAPSHOT.schema.json",
        "toolsets": [{"id": "calc", "kind": "uri",
            "server": {"url": toolhost_tests::example("calculator").display().to_string()}}],
        "serve": serve,
    });
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, document.to_string()).expect("write config");
    path
}

/// One MCP session over HTTP: its agent (one kept-alive connection), id and
/// bearer token.
struct Session {
    agent: ureq::Agent,
    url: String,
    id: String,
    token: Option<String>,
}

impl Session {
    fn open(url: &str, token: Option<&str>) -> Session {
        let agent: ureq::Agent = ureq::Agent::config_builder().max_idle_connections_per_host(1).build().into();
        let mut session = Session { agent, url: url.to_owned(), id: String::new(), token: token.map(str::to_owned) };
        let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "production-bench", "version": "0"}}});
        let (_, id) = session.send(&initialize);
        session.id = id.expect("a session id");
        session.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        session
    }

    fn send(&self, message: &Value) -> (String, Option<String>) {
        let mut request = self
            .agent
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", "2025-06-18");
        if !self.id.is_empty() {
            request = request.header("mcp-session-id", &self.id);
        }
        if let Some(token) = &self.token {
            request = request.header("authorization", &format!("Bearer {token}"));
        }
        let mut response = request.send(message.to_string()).expect("POST");
        let id = response.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
        (response.body_mut().read_to_string().expect("body"), id)
    }

    fn call(&self, id: usize) {
        let add = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "calc__add", "arguments": {"a": id as f64, "b": 1.0}}});
        let (body, _) = self.send(&add);
        assert!(body.contains("\"result\"") && !body.contains("\"isError\":true"), "{body}");
    }
}

/// Calls/s and latencies of `calls` calls spread over `sessions`.
fn round(sessions: &[Session], calls: usize) -> (f64, Vec<Duration>) {
    let started = Instant::now();
    let mut latencies: Vec<Duration> = std::thread::scope(|scope| {
        let workers: Vec<_> = sessions
            .iter()
            .enumerate()
            .map(|(s, session)| {
                scope.spawn(move || {
                    (0..calls / sessions.len())
                        .map(|i| {
                            let call = Instant::now();
                            session.call(s * calls + i + 1);
                            call.elapsed()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().expect("worker")).collect()
    });
    latencies.sort();
    (latencies.len() as f64 / started.elapsed().as_secs_f64(), latencies)
}

/// For each set of sessions, after a warm-up, the median of [`ROUNDS`]
/// rounds (by calls/s), the sets' rounds alternating.
fn medians(sets: &[Vec<Session>]) -> Vec<(f64, Vec<Duration>)> {
    for sessions in sets {
        round(sessions, calls() / 10);
    }
    let mut results: Vec<Vec<(f64, Vec<Duration>)>> = vec![Vec::new(); sets.len()];
    for _ in 0..ROUNDS {
        for (sessions, results) in sets.iter().zip(&mut results) {
            results.push(round(sessions, calls()));
        }
    }
    results
        .into_iter()
        .map(|mut rounds| {
            rounds.sort_by(|a, b| a.0.total_cmp(&b.0));
            rounds.swap_remove(rounds.len() / 2)
        })
        .collect()
}

fn line(name: &str, (rate, latencies): &(f64, Vec<Duration>)) {
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "{name:<34} {rate:>8.0} calls/s   p50 {:>7.0} µs   p90 {:>7.0} µs   p99 {:>7.0} µs",
        us(at(0.50)),
        us(at(0.90)),
        us(at(0.99)),
    );
}

/// An ES256 issuer: its JWKS file and a token with scope `mcp`.
fn issuer(dir: &Path) -> (PathBuf, String) {
    use base64::Engine as _;
    let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
    let point = pair.public_key_raw();
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let jwks = json!({"keys": [{"kty": "EC", "crv": "P-256", "kid": "k1", "alg": "ES256",
        "x": b64(&point[1..33]), "y": b64(&point[33..65])}]});
    let path = dir.join("jwks.json");
    std::fs::write(&path, jwks.to_string()).expect("write the JWKS");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs();
    let claims = json!({"iss": "https://issuer.test", "aud": "http://toolhost.test/mcp", "sub": "bench",
        "scope": "mcp", "exp": now + 3600});
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
    header.kid = Some("k1".to_owned());
    let key = jsonwebtoken::EncodingKey::from_ec_der(&pair.serialize_der());
    (path, jsonwebtoken::encode(&header, &claims, &key).expect("sign"))
}

fn layers(dir: &Path) {
    const SESSIONS: usize = 16;
    const KEY: &str = "bench-api-key-0123456789abcdef";
    let (jwks, jwt) = issuer(dir);
    // A receiver of the exports on loopback (what it receives is dropped).
    let (sink, _exports) = toolhost_tests::http_sink();
    let collector = format!("http://127.0.0.1:{sink}");
    let resource = "http://toolhost.test/mcp";
    let api_key = json!({"resource": resource, "auth": {"apiKeys": [{"key": KEY, "subject": "bench"}]}});
    let jwt_auth = json!({"resource": resource, "auth": {"requiredScopes": ["mcp"],
        "jwt": {"issuer": "https://issuer.test", "jwksFile": jwks.display().to_string(), "algorithms": ["ES256"]}}});
    let limits = json!({"rateLimits": {"perClient": {"perSecond": 1_000_000, "burst": 1_000_000},
        "concurrentPerClient": 10_000, "perTool": {"perSecond": 1_000_000, "burst": 1_000_000}}});
    let metrics = json!({"telemetry": {"metrics": true}});
    let otlp = json!({"telemetry": {"otlp": {"endpoint": collector}}});
    let mut all = jwt_auth.clone();
    all["rateLimits"] = limits["rateLimits"].clone();
    all["telemetry"] = json!({"metrics": true, "otlp": {"endpoint": collector}});
    let variants: [(&str, Value, Option<&str>); 7] = [
        ("nothing on", json!({}), None),
        ("API key", api_key, Some(KEY)),
        ("JWT (ES256)", jwt_auth, Some(&jwt)),
        ("rate limits (never refusing)", limits, None),
        ("metrics", metrics, None),
        ("OTLP traces", otlp, None),
        ("all on (JWT)", all, Some(&jwt)),
    ];
    let servers: Vec<(Server, Option<&str>)> = variants
        .iter()
        .map(|(name, serve, token)| {
            let file = config(dir, &name.replace([' ', '(', ')'], "-"), serve.clone());
            (self::serve(&file), *token)
        })
        .collect();
    let sessions: Vec<Vec<Session>> = servers
        .iter()
        .map(|(server, token)| (0..SESSIONS).map(|_| Session::open(&server.1, *token)).collect())
        .collect();
    let results = medians(&sessions);
    println!(
        "one instance, {SESSIONS} kept-alive sessions, {} calls a round, median of {ROUNDS} alternating rounds:",
        calls()
    );
    for ((name, ..), result) in variants.iter().zip(&results) {
        line(name, result);
    }
}

fn balancer(dir: &Path) {
    const SESSIONS: usize = 32;
    let Some(haproxy) = ["/usr/sbin/haproxy", "/usr/bin/haproxy"].into_iter().find(|p| Path::new(p).is_file()) else {
        println!("balancer: skipped (no haproxy; Debian: apt-get install haproxy)");
        return;
    };
    let file = config(dir, "plain", json!({}));
    let instances = [serve(&file), serve(&file)];
    let port_of = |url: &str| url.trim_end_matches("/mcp").rsplit(':').next().expect("port").to_owned();
    let balance = |backends: &[&Server]| {
        let port = std::net::TcpListener::bind("127.0.0.1:0").expect("port").local_addr().expect("addr").port();
        let servers: String = backends
            .iter()
            .enumerate()
            .map(|(n, s)| format!("    server t{n} 127.0.0.1:{} check\n", port_of(&s.1)))
            .collect();
        let cfg = format!(
            "global\n    maxconn 4096\ndefaults\n    mode http\n    timeout connect 2s\n    timeout client 60s\n    \
             timeout server 60s\nfrontend mcp\n    bind 127.0.0.1:{port}\n    default_backend toolhost\nbackend toolhost\n    \
             balance roundrobin\n    stick-table type string len 128 size 100k expire 30m\n    \
             stick on req.hdr(mcp-session-id)\n    stick store-response res.hdr(mcp-session-id)\n{servers}"
        );
        let path = dir.join(format!("haproxy-{port}.cfg"));
        std::fs::write(&path, cfg).expect("write the haproxy config");
        let child = Command::new(haproxy)
            .args(["-db", "-f"])
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start haproxy");
        let url = format!("http://127.0.0.1:{port}/mcp");
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "haproxy did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        (Server(child, url.clone()), url)
    };
    let (_one_lb, one_url) = balance(&[&instances[0]]);
    let (_two_lb, two_url) = balance(&[&instances[0], &instances[1]]);
    let targets = [
        ("one instance, direct", instances[0].1.clone()),
        ("one instance behind HAProxy", one_url),
        ("two instances behind HAProxy", two_url),
    ];
    let sessions: Vec<Vec<Session>> =
        targets.iter().map(|(_, url)| (0..SESSIONS).map(|_| Session::open(url, None)).collect()).collect();
    let results = medians(&sessions);
    println!("{SESSIONS} kept-alive sessions, {} calls a round, median of {ROUNDS} alternating rounds:", calls());
    for ((name, _), result) in targets.iter().zip(&results) {
        line(name, result);
    }
}

fn main() {
    // `cargo bench` passes `--bench`; a filter word picks one part.
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let wanted = |name: &str| filter.as_deref().is_none_or(|f| name.contains(f));
    let dir = scratch();
    if wanted("layers") {
        layers(&dir);
    }
    if wanted("balancer") {
        balancer(&dir);
    }
    std::fs::remove_dir_all(dir).ok();
}
