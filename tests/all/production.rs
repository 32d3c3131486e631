//! `toolhost serve --http` in production (the toolsets file's `serve`
//! section): bearer tokens checked on every request (JWTs signed by an
//! issuer whose JWKS a server of the test's serves, API keys), scopes per
//! toolset, rate limits per client, and `/metrics`, driven over real HTTP
//! and with the official MCP Python SDK.

use serde_json::{Value, json};
use toolhost_tests::{example, http_sink, mcp_answer, mcp_python_run, serve_http};

use crate::serve::spawn_http_with_env;

const ISSUER: &str = "https://issuer.toolhost.test";
const RESOURCE: &str = "http://toolhost.test/mcp";
const API_KEY: &str = "key-for-ci-0123456789abcdef";

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("toolhost-production-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// A P-256 signing key and its JWKS.
struct Issuer {
    key: jsonwebtoken::EncodingKey,
    jwks: Value,
}

impl Issuer {
    fn new() -> Issuer {
        use base64::Engine as _;
        let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
        let point = pair.public_key_raw();
        assert_eq!(point.len(), 65, "an uncompressed P-256 point");
        let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
        let jwks = json!({"keys": [{
            "kty": "EC", "crv": "P-256", "kid": "k1", "use": "sig", "alg": "ES256",
            "x": b64(&point[1..33]), "y": b64(&point[33..65]),
        }]});
        Issuer { key: jsonwebtoken::EncodingKey::from_ec_der(&pair.serialize_der()), jwks }
    }

    /// A token for `sub` with `scope`, valid for `lifetime` seconds from
    /// now (negative: expired), issued for `audience`.
    fn token(&self, sub: &str, scope: &str, audience: &str, lifetime: i64) -> String {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs() as i64;
        let claims =
            json!({"iss": ISSUER, "aud": audience, "sub": sub, "scope": scope, "iat": now, "exp": now + lifetime});
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        header.kid = Some("k1".to_owned());
        jsonwebtoken::encode(&header, &claims, &self.key).expect("sign")
    }
}

/// A toolsets file with `calc` (any token) and `text` (`tools:write`), and
/// this `serve` section.
fn config(dir: &std::path::Path, serve: Value) -> std::path::PathBuf {
    let document = json!({
        "schema": "https://schema.cjson.dev/0/toolsets/cjson-toolsets-0.1.0-SNAPSHOT.schema.json",
        "toolsets": [
            {"id": "calc", "kind": "uri", "server": {"url": example("calculator").display().to_string()}},
            {"id": "text", "kind": "uri", "server": {"url": example("text").display().to_string()},
             "extensions": {"requiredScopes": ["tools:write"]}},
        ],
        "serve": serve,
    });
    let path = dir.join("toolsets.json");
    std::fs::write(&path, serde_json::to_string_pretty(&document).expect("json")).expect("write config");
    path
}

/// One HTTP exchange's status, headers and JSON answer (from a JSON body
/// or the event stream's `data:` lines).
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) headers: http::HeaderMap,
    pub(crate) body: Value,
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder().http_status_as_error(false).build().into()
}

pub(crate) fn post(url: &str, token: Option<&str>, session: Option<&str>, message: &Value) -> Answer {
    let mut request = agent()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2025-11-25");
    if let Some(token) = token {
        request = request.header("authorization", &format!("Bearer {token}"));
    }
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    let mut response = request.send(message.to_string()).expect("the server answers");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = mcp_answer(&response.body_mut().read_to_string().unwrap_or_default());
    Answer { status, headers, body }
}

pub(crate) fn get(url: &str) -> (u16, String) {
    let mut response = agent().get(url).call().expect("the server answers");
    (response.status().as_u16(), response.body_mut().read_to_string().unwrap_or_default())
}

pub(crate) fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
}

/// An initialized session (for `token`): its id.
pub(crate) fn open_session(url: &str, token: Option<&str>) -> String {
    let answer = post(url, token, None, &initialize());
    assert_eq!(answer.status, 200, "{}", answer.body);
    let session = answer.headers.get("mcp-session-id").expect("a session id").to_str().expect("ascii").to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(post(url, token, Some(&session), &initialized).status, 202);
    session
}

pub(crate) fn call(name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
}

fn header(answer: &Answer, name: &str) -> String {
    answer.headers.get(name).map(|v| v.to_str().expect("ascii").to_owned()).unwrap_or_default()
}

/// No token, tokens not valid here (expired, for another resource, badly
/// signed, neither key nor JWT) and a token without the scope every
/// request needs: each refused, saying why and where tokens come from.
fn assert_tokens_not_valid_here_are_refused(url: &str, base: &str, issuer: &Issuer) {
    let metadata_url = "http://toolhost.test/.well-known/oauth-protected-resource/mcp";
    // No token: 401, pointing at the metadata, which says where tokens come from.
    let refused = post(url, None, None, &initialize());
    assert_eq!(refused.status, 401, "{}", refused.body);
    let challenge = header(&refused, "www-authenticate");
    assert!(challenge.starts_with("Bearer "), "{challenge}");
    assert!(challenge.contains(&format!("resource_metadata=\"{metadata_url}\"")), "{challenge}");
    assert!(challenge.contains("scope=\"mcp\""), "{challenge}");
    let (status, metadata) = get(&format!("{base}/.well-known/oauth-protected-resource/mcp"));
    assert_eq!(status, 200);
    let metadata: Value = serde_json::from_str(&metadata).expect("JSON metadata");
    assert_eq!(metadata["resource"], RESOURCE);
    assert_eq!(metadata["authorization_servers"], json!([ISSUER]));
    assert_eq!(metadata["bearer_methods_supported"], json!(["header"]));

    // Tokens that are not valid here: 401 with invalid_token saying why.
    let invalid = [
        (issuer.token("alice", "mcp", RESOURCE, -600), "expired"),
        (issuer.token("alice", "mcp", "http://elsewhere.test/mcp", 600), "another resource"),
        (Issuer::new().token("alice", "mcp", RESOURCE, 600), "signature"),
        ("not-a-key-nor-a-jwt".to_owned(), "neither"),
    ];
    for (token, why) in &invalid {
        let refused = post(url, Some(token), None, &initialize());
        assert_eq!(refused.status, 401, "{why}: {}", refused.body);
        let challenge = header(&refused, "www-authenticate");
        assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
        assert!(refused.body["error_description"].as_str().is_some_and(|d| d.contains(why)), "{}", refused.body);
    }
    // A valid token without the scope every request needs: 403 naming it.
    let refused = post(url, Some(&issuer.token("alice", "tools:write", RESOURCE, 600)), None, &initialize());
    assert_eq!(refused.status, 403);
    assert!(header(&refused, "www-authenticate").contains("error=\"insufficient_scope\", scope=\"mcp\""));
}

#[test]
fn tokens_are_checked_on_every_request_and_scopes_decide_which_tools_exist() {
    let dir = scratch("auth");
    let issuer = Issuer::new();
    // The issuer's JWKS endpoint (answers the server's fetch at start, and
    // any it makes again).
    let jwks = issuer.jwks.to_string();
    // The binary first: the JWKS endpoint below serves for 20 seconds, and
    // building the binary (the first test to start it builds it) can take
    // longer than that; the server's fetch at start would find it gone.
    toolhost_tests::toolhost();
    let response = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{jwks}",
        jwks.len()
    );
    let (jwks_port, _jwks_server) = serve_http(vec![response; 8]);
    let config = config(
        &dir,
        json!({
            "resource": RESOURCE,
            "auth": {
                "authorizationServers": [ISSUER],
                "requiredScopes": ["mcp"],
                "jwt": {"issuer": ISSUER, "jwksUrl": format!("http://127.0.0.1:{jwks_port}/jwks.json")},
                "apiKeys": [{"key": "${env:TEST_API_KEY}", "subject": "ci", "scopes": ["mcp"]}],
            },
        }),
    );
    let (_server, url, _logs) =
        spawn_http_with_env(&["--config", &config.display().to_string()], &[("TEST_API_KEY", API_KEY)]);
    let base = url.trim_end_matches("/mcp");

    assert_tokens_not_valid_here_are_refused(&url, base, &issuer);

    // A reader's token: the MCP Python SDK lists calc's tools only, and calls one.
    let reader = issuer.token("alice", "mcp", RESOURCE, 600);
    let python_run = |token: &str, tool: &str, arguments: Value| {
        let args = [url.as_str(), token, tool, &arguments.to_string()];
        mcp_python_run("bearer.py", &args.map(std::ffi::OsStr::new))
    };
    let report = python_run(&reader, "calc__add", json!({"a": 2, "b": 3}));
    let tools: Vec<&str> = report["tools"].as_array().expect("tools").iter().filter_map(Value::as_str).collect();
    assert!(tools.contains(&"calc__add"), "{report}");
    assert!(!tools.iter().any(|t| t.starts_with("text__")), "a reader sees no text tool: {report}");
    assert_eq!(report["call"], json!({"is_error": false, "text": "5"}), "{report}");

    // Calling a tool it may not see: 403 naming the scope to step up to, and
    // the tool does not run.
    let session = open_session(&url, Some(&reader));
    let refused = post(&url, Some(&reader), Some(&session), &call("text__reverse", json!({"text": "abc"})));
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(
        header(&refused, "www-authenticate").contains("error=\"insufficient_scope\", scope=\"tools:write\""),
        "{}",
        header(&refused, "www-authenticate")
    );
    // The session is the reader's: another subject's token naming it is
    // told it does not exist.
    let other = issuer.token("mallory", "mcp tools:write", RESOURCE, 600);
    let hijack = post(&url, Some(&other), Some(&session), &call("calc__add", json!({"a": 1, "b": 1})));
    assert_eq!(hijack.status, 404, "{}", hijack.body);

    // A writer's token, and the API key, through the SDK.
    let report = python_run(&other, "text__reverse", json!({"text": "abc"}));
    assert_eq!(report["call"], json!({"is_error": false, "text": "cba"}), "{report}");
    assert!(report["tools"].as_array().expect("tools").contains(&json!("text__reverse")), "{report}");
    let report = python_run(API_KEY, "calc__add", json!({"a": 40, "b": 2}));
    assert_eq!(report["call"]["text"], "42", "{report}");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn a_flooding_client_is_limited_while_another_keeps_its_calls_and_metrics_count_both() {
    let dir = scratch("limits");
    // A burst of 3 and then one call a thousand seconds: what a client may
    // do does not depend on how fast this machine is.
    let config = config(
        &dir,
        json!({
            "resource": RESOURCE,
            "auth": {"apiKeys": [
                {"key": "${env:KEY_A}", "subject": "flooder", "scopes": ["tools:write"]},
                {"key": "${env:KEY_B}", "subject": "neighbour"},
            ]},
            "rateLimits": {"perClient": {"perSecond": 0.001, "burst": 3}},
            "telemetry": {"metrics": true},
            "limits": {"sessionsPerClient": 2},
        }),
    );
    let (key_a, key_b) = ("flooder-key-0123456789", "neighbour-key-0123456789");
    let (_server, url, _logs) =
        spawn_http_with_env(&["--config", &config.display().to_string()], &[("KEY_A", key_a), ("KEY_B", key_b)]);
    let base = url.trim_end_matches("/mcp");
    let flooder = open_session(&url, Some(key_a));
    let neighbour = open_session(&url, Some(key_b));
    let mut refusals = Vec::new();
    for _ in 0..50 {
        let answer = post(&url, Some(key_a), Some(&flooder), &call("calc__add", json!({"a": 1, "b": 2})));
        assert_eq!(answer.status, 200);
        if answer.body.get("error").is_some() {
            refusals.push(answer.body["error"].clone());
        }
    }
    assert_eq!(refusals.len(), 47, "3 calls in the burst, the rest refused");
    let refusal = &refusals[0];
    assert_eq!(refusal["code"], -32029, "{refusal}");
    assert!(refusal["message"].as_str().is_some_and(|m| m.contains("client `key:flooder`")), "{refusal}");
    assert_eq!(refusal["data"]["limit"], "per_client");
    assert!(refusal["data"]["retryAfterMs"].as_u64().is_some_and(|ms| ms > 1000), "{refusal}");
    // The neighbour's burst is its own.
    for n in 0..3 {
        let answer = post(&url, Some(key_b), Some(&neighbour), &call("calc__add", json!({"a": n, "b": 1})));
        assert_eq!(answer.body["result"]["structuredContent"]["result"], json!(n as f64 + 1.0), "{}", answer.body);
    }

    let (status, metrics) = get(&format!("{base}/metrics"));
    assert_eq!(status, 200);
    let sample = |prefix: &str| -> f64 {
        metrics
            .lines()
            .find(|line| line.starts_with(prefix))
            .and_then(|line| line.rsplit(' ').next())
            .and_then(|value| value.parse().ok())
            .unwrap_or_else(|| panic!("no `{prefix}` in\n{metrics}"))
    };
    assert_eq!(sample("toolhost_tool_calls_total{tool=\"calc__add\",outcome=\"ok\"}"), 6.0);
    assert_eq!(sample("toolhost_rate_limited_total{limit=\"per_client\"}"), 47.0);
    assert_eq!(sample("toolhost_tool_call_duration_seconds_count{tool=\"calc__add\"}"), 6.0);
    assert_eq!(sample("toolhost_toolset_sync{toolset=\"calc\",state=\"SyncCompleted\"}"), 1.0);
    assert!(sample("toolhost_pool_instances{toolset=\"calc\",state=\"idle\"}") >= 1.0);
    // Authorization refusals are counted too.
    assert_eq!(post(&url, None, None, &initialize()).status, 401);
    let (_, metrics) = get(&format!("{base}/metrics"));
    assert!(metrics.contains("toolhost_auth_refused_total{reason=\"missing\"} 1"), "{metrics}");

    // Sessions: two each. The flooder's third is refused; the neighbour's
    // second is not; a session the flooder ends gives its place back.
    let second = open_session(&url, Some(key_a));
    let third = post(&url, Some(key_a), None, &initialize());
    assert_eq!(third.status, 429, "{}", third.body);
    assert!(third.body["error"]["message"].as_str().is_some_and(|m| m.contains("2 sessions open")), "{}", third.body);
    open_session(&url, Some(key_b));
    let ended = agent()
        .delete(&url)
        .header("authorization", &format!("Bearer {key_a}"))
        .header("mcp-session-id", &second)
        .header("mcp-protocol-version", "2025-11-25")
        .call()
        .expect("the server answers");
    assert_eq!(ended.status().as_u16(), 204);
    open_session(&url, Some(key_a));
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn health_and_readiness_are_answered_without_a_token() {
    let dir = scratch("probes");
    let config = config(&dir, json!({"resource": RESOURCE, "auth": {"apiKeys": [{"key": API_KEY, "subject": "ci"}]}}));
    let (_server, url, _logs) = spawn_http_with_env(&["--config", &config.display().to_string()], &[]);
    let base = url.trim_end_matches("/mcp");
    assert_eq!(get(&format!("{base}/healthz")), (200, "ok\n".to_owned()));
    let (status, ready) = get(&format!("{base}/readyz"));
    assert_eq!(status, 200);
    let ready: Value = serde_json::from_str(&ready).expect("JSON");
    assert_eq!(ready, json!({"ready": true, "toolsets": {"calc": "SyncCompleted", "text": "SyncCompleted"}}));
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn a_serve_section_with_problems_is_refused_at_their_pointers() {
    let dir = scratch("invalid");
    let refused = |serve: Value, env: &[(&str, &str)]| {
        let config = config(&dir, serve);
        let args = ["serve", "--http", "127.0.0.1:0", "--config", &config.display().to_string()];
        let output = toolhost_tests::run_toolhost_with_env(&args, None, env);
        assert_eq!(output.status.code(), Some(2), "{output:?}");
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let stderr = refused(json!({"rateLimits": {"perClient": {"perSecond": 0}}}), &[]);
    assert!(stderr.contains("/serve/rateLimits/perClient/perSecond"), "{stderr}");
    let long_key = [("LONG_KEY", "0123456789abcdef0123")];
    let stderr = refused(json!({"auth": {"apiKeys": [{"key": "${env:LONG_KEY}", "subject": "ci"}]}}), &long_key);
    assert!(stderr.contains("/serve/resource"), "auth needs the resource URI: {stderr}");
    let serve = json!({"resource": RESOURCE, "auth": {"apiKeys": [{"key": "${env:SHORT_KEY}", "subject": "ci"}]}});
    let stderr = refused(serve, &[("SHORT_KEY", "hunter2")]);
    assert!(stderr.contains("/serve/auth/apiKeys/0/key"), "{stderr}");
    assert!(!stderr.contains("hunter2"), "the key's value is never printed: {stderr}");
    std::fs::remove_dir_all(dir).ok();
}

/// The spans of an OTLP/JSON export request.
fn spans_of(export: &Value) -> Vec<Value> {
    let mut spans = Vec::new();
    for resource in export["resourceSpans"].as_array().into_iter().flatten() {
        for scope in resource["scopeSpans"].as_array().into_iter().flatten() {
            spans.extend(scope["spans"].as_array().into_iter().flatten().cloned());
        }
    }
    spans
}

fn attribute(span: &Value, key: &str) -> Value {
    span["attributes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|a| a["key"] == key)
        .map(|a| a["value"]["stringValue"].clone())
        .unwrap_or(Value::Null)
}

#[test]
fn a_span_per_call_continues_the_clients_trace_and_reaches_an_otlp_collector() {
    let dir = scratch("traces");
    // An OTLP/HTTP receiver of the test's own.
    let (collector, exports) = http_sink();
    let document = json!({
        "schema": "https://schema.cjson.dev/0/toolsets/cjson-toolsets-0.1.0-SNAPSHOT.schema.json",
        "toolsets": [
            {"id": "calc", "kind": "uri", "server": {"url": example("calculator").display().to_string()}},
            {"id": "hostile", "kind": "uri", "server": {"url": toolhost_tests::fixture("hostile").display().to_string()}},
        ],
        "serve": {"telemetry": {"otlp": {"endpoint": format!("http://127.0.0.1:{collector}"), "protocol": "http/json"}}},
    });
    let config = dir.join("toolsets.json");
    std::fs::write(&config, document.to_string()).expect("write config");
    let (_server, url, _logs) =
        spawn_http_with_env(&["--config", &config.display().to_string()], &[("OTEL_BSP_SCHEDULE_DELAY", "100")]);
    let session = open_session(&url, None);
    let (trace, parent) = ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
    let traced = |name: &str, arguments: Value| {
        let mut message = call(name, arguments);
        message["params"]["_meta"] = json!({"traceparent": format!("00-{trace}-{parent}-01")});
        post(&url, None, Some(&session), &message).body
    };
    // The plugin sees the call's own span as its parent.
    let seen = traced("hostile__meta", json!({}));
    let seen: Value = serde_json::from_str(seen["result"]["content"][0]["text"].as_str().expect("text")).expect("JSON");
    let traceparent = seen["traceparent"].as_str().expect("a traceparent reaches the plugin").to_owned();
    let parts: Vec<&str> = traceparent.split('-').collect();
    assert_eq!((parts[0], parts[1]), ("00", trace), "{traceparent}");
    assert_ne!(parts[2], parent, "the plugin's parent is the call's span, not the client's");
    let answer = traced("calc__divide", json!({"a": 1, "b": 0}));
    assert_eq!(answer["result"]["isError"], true, "{answer}");

    let mut spans = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while spans.len() < 2 {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let export = exports.recv_timeout(left).expect("the spans reach the collector");
        spans.extend(spans_of(&serde_json::from_slice(&export).expect("OTLP/JSON")));
    }
    let meta = spans.iter().find(|s| s["name"] == "tools/call hostile__meta").expect("the meta call's span");
    assert_eq!(meta["traceId"], trace);
    assert_eq!(meta["parentSpanId"], parent);
    assert_eq!(meta["spanId"], parts[2], "the span the plugin was told of");
    assert_eq!(attribute(meta, "gen_ai.tool.name"), "hostile__meta");
    assert_eq!(attribute(meta, "toolhost.toolset"), "hostile");
    assert_eq!(attribute(meta, "toolhost.outcome"), "ok");
    let divide = spans.iter().find(|s| s["name"] == "tools/call calc__divide").expect("the divide call's span");
    assert_eq!(attribute(divide, "toolhost.outcome"), "tool_error");
    assert_eq!(attribute(divide, "toolhost.toolset"), "calc");
    assert_eq!(divide["status"]["code"], 2, "an error status: {divide}");
    let start: u64 = divide["startTimeUnixNano"].as_str().and_then(|t| t.parse().ok()).expect("a start");
    let end: u64 = divide["endTimeUnixNano"].as_str().and_then(|t| t.parse().ok()).expect("an end");
    assert!(end >= start, "{divide}");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn a_plugin_gets_the_callers_subject_only_when_it_asks_and_never_the_token() {
    let dir = scratch("subject");
    let document = json!({
        "schema": "https://schema.cjson.dev/0/toolsets/cjson-toolsets-0.1.0-SNAPSHOT.schema.json",
        "toolsets": [
            {"id": "hostile", "kind": "uri", "server": {"url": toolhost_tests::fixture("hostile").display().to_string()}},
        ],
        "serve": {"resource": RESOURCE, "auth": {"apiKeys": [{"key": "${env:TEST_API_KEY}", "subject": "carol"}]}},
    });
    let config = dir.join("toolsets.json");
    std::fs::write(&config, document.to_string()).expect("write config");
    let (_server, url, _logs) =
        spawn_http_with_env(&["--config", &config.display().to_string()], &[("TEST_API_KEY", API_KEY)]);
    let session = open_session(&url, Some(API_KEY));
    // `whoami` declares requirements.user_id: it gets the token's subject.
    let answer = post(&url, Some(API_KEY), Some(&session), &call("hostile__whoami", json!({})));
    assert_eq!(answer.body["result"]["content"][0]["text"], "carol", "{}", answer.body);
    // `meta` does not: its _meta has no user id, and nothing of the token.
    let answer = post(&url, Some(API_KEY), Some(&session), &call("hostile__meta", json!({})));
    let seen = answer.body["result"]["content"][0]["text"].as_str().expect("text").to_owned();
    assert!(!seen.contains("carol") && !seen.contains(API_KEY), "{seen}");
    std::fs::remove_dir_all(dir).ok();
}
