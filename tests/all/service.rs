//! The tool-set service (`toolhost serve --http --store URL`): its `/v1`
//! API driven with real HTTP requests against a real `toolhost serve`
//! process on a real SQLite file, an MCP tool set synced from a real MCP
//! server (another `toolhost serve`), its tools called over MCP as the
//! workspace's token, hidden from another workspace's, and all of it found
//! again after a restart.

use serde_json::{Value, json};
use toolhost_tests::{example, spawn_serve_http};

use crate::production::{call, open_session, post};
use crate::serve::Server;

pub(crate) const ACME: &str = "acme-user-key-0123456789abcdef";
pub(crate) const ACME_BOT: &str = "acme-bot-key-0123456789abcdef";
pub(crate) const GLOBEX: &str = "globex-key-0123456789abcdef";

pub(crate) fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("toolhost-service-{name}-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// A toolsets file whose `serve` section runs the service on `store`,
/// letting tenants reach `upstream` (host:port).
pub(crate) fn service_config(dir: &std::path::Path, store: &str, upstream: &str) -> std::path::PathBuf {
    service_config_reaching(dir, store, &[upstream])
}

/// [`service_config`], letting tenants reach the hosts of these patterns.
pub(crate) fn service_config_reaching(dir: &std::path::Path, store: &str, hosts: &[&str]) -> std::path::PathBuf {
    let document = json!({
        "schema": "https://schema.cjson.dev/0/toolsets/cjson-toolsets-0.1.0-SNAPSHOT.schema.json",
        "toolsets": [],
        "serve": {
            "resource": "http://toolhost.test/mcp",
            "auth": {"apiKeys": [
                {"key": "${env:ACME_KEY}", "subject": "alice",
                 "claims": {"workspace_id": "acme", "account_id": "acct-1", "profile_type": "PROFILE_TYPE_USER",
                            "email": "alice@acme.test"}},
                {"key": "${env:ACME_BOT_KEY}", "subject": "deploy-bot",
                 "claims": {"workspace_id": "acme", "account_id": "acct-1"}},
                {"key": "${env:GLOBEX_KEY}", "subject": "bob", "claims": {"workspace_id": "globex"}},
            ]},
            "service": {"store": store, "allowedHosts": hosts, "pollMillis": 200},
        },
    });
    let path = dir.join("service.json");
    std::fs::write(&path, serde_json::to_string_pretty(&document).expect("json")).expect("write config");
    path
}

/// `toolhost serve` running the service: the process and its base URL.
pub(crate) fn spawn_service(config: &std::path::Path) -> (Server, String) {
    let env = [("ACME_KEY", ACME), ("ACME_BOT_KEY", ACME_BOT), ("GLOBEX_KEY", GLOBEX)];
    let (child, url) = spawn_serve_http(&["--config", &config.display().to_string()], &env);
    (Server(child), url.trim_end_matches("/mcp").to_owned())
}

/// An MCP server to sync from: `toolhost serve --http` of the calculator.
pub(crate) fn upstream() -> (Server, String) {
    let (child, url) = spawn_serve_http(&[&example("calculator").display().to_string()], &[]);
    (Server(child), url)
}

/// One REST exchange: status, headers, JSON body.
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) headers: http::HeaderMap,
    pub(crate) body: Value,
}

impl Reply {
    pub(crate) fn header(&self, name: &str) -> String {
        self.headers.get(name).map(|v| v.to_str().expect("ascii").to_owned()).unwrap_or_default()
    }
}

pub(crate) fn rest(
    method: &str,
    url: &str,
    token: Option<&str>,
    body: Option<&Value>,
    headers: &[(&str, &str)],
) -> Reply {
    let (status, headers, text) = exchange(method, url, token, body, headers).expect("the service answers");
    let body = if text.is_empty() { Value::Null } else { serde_json::from_str(&text).expect("a JSON body") };
    Reply { status, headers, body }
}

/// One REST exchange that may find the service gone: its status, headers
/// and body text, or `None` when no whole answer came.
pub(crate) fn exchange(
    method: &str,
    url: &str,
    token: Option<&str>,
    body: Option<&Value>,
    headers: &[(&str, &str)],
) -> Option<(u16, http::HeaderMap, String)> {
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let mut request = http::Request::builder().method(method).uri(url).header("content-type", "application/json");
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request.body(body.map(Value::to_string).unwrap_or_default()).expect("request");
    let mut response = agent.run(request).ok()?;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.body_mut().read_to_string().ok()?;
    Some((status, headers, text))
}

/// What the service answers a POST to `url` announcing a body of `length`
/// bytes (and asking to be told to send it) before any of it is sent: the
/// head of its answer.
fn announced_body(url: &str, token: Option<&str>, length: usize) -> String {
    use std::io::{Read, Write};
    let rest = url.trim_start_matches("http://");
    let (authority, path) = rest.split_once('/').expect("a path");
    let mut stream = std::net::TcpStream::connect(authority).expect("connect");
    stream.set_read_timeout(Some(std::time::Duration::from_secs(60))).expect("timeout");
    let mut request = format!(
        "POST /{path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
         Content-Length: {length}\r\nExpect: 100-continue\r\nConnection: close\r\n"
    );
    if let Some(token) = token {
        request.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).expect("send");
    // The heads up to the final one (a `100 Continue` may come first);
    // no byte of the body is ever sent.
    let mut heads = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        match stream.read(&mut byte) {
            Ok(1) => heads.push(byte[0]),
            other => panic!("no final head ({other:?}): {}", String::from_utf8_lossy(&heads)),
        }
        let text = String::from_utf8_lossy(&heads);
        if text.ends_with("\r\n\r\n")
            && !text.trim_end().rsplit("\r\n\r\n").next().is_some_and(|h| h.starts_with("HTTP/1.1 100"))
        {
            return text.into_owned();
        }
    }
}

fn mcp_tool_set(name: &str, upstream: &str, exclude: Option<&str>) -> Value {
    let mut mcp = json!({"url": upstream});
    if let Some(tool) = exclude {
        mcp["excludeTools"] = json!({"operator": "OPERATOR_OR",
            "filters": [{"attribute": "ATTRIBUTE_NAME", "matcher": {"exact": tool}}]});
    }
    json!({"metadata": {"name": name, "labels": {"environment": "production"}},
           "spec": {"description": "Arithmetic", "adapter": {"mcp": mcp}}})
}

fn statuses(base: &str, token: &str, id: &str) -> Vec<(String, String)> {
    let reply = rest("GET", &format!("{base}/v1/tool_sets/{id}/tools"), Some(token), None, &[]);
    assert_eq!(reply.status, 200, "{}", reply.body);
    let mut all: Vec<(String, String)> = reply.body["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| (t["metadata"]["name"].as_str().unwrap().to_owned(), t["spec"]["status"].as_str().unwrap().to_owned()))
        .collect();
    all.sort();
    all
}

fn event_names(base: &str, token: &str, id: &str) -> Vec<String> {
    let reply = rest("GET", &format!("{base}/v1/tool_sets/{id}/events"), Some(token), None, &[]);
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.body["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| {
            // `type` names the one member set, as the API document says.
            let kind = e["event"]["type"].as_str().expect("a type").to_owned();
            let member = match kind.as_str() {
                "sync_started" => "syncStarted",
                "sync_completed" => "syncCompleted",
                "sync_failed" => "syncFailed",
                other => panic!("an event of type {other}: {e}"),
            };
            assert!(e["event"][member].is_object(), "{e}");
            assert_eq!(e["event"].as_object().unwrap().len(), 2, "{e}");
            kind
        })
        .collect()
}

pub(crate) fn mcp_tools(mcp: &str, token: &str) -> Vec<String> {
    let session = open_session(mcp, Some(token));
    let answer = post(mcp, Some(token), Some(&session), &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    assert_eq!(answer.status, 200, "{}", answer.body);
    let mut names: Vec<String> = answer.body["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().expect("name").to_owned())
        .collect();
    names.sort();
    names
}

/// The whole API against a store: refusals, a tool set created and
/// changed, called over MCP, unseen by another workspace, kept over a
/// restart, deleted.
pub(crate) fn drive(store: &str, dir: &std::path::Path) {
    let (_upstream, upstream_url) = upstream();
    let upstream_host = upstream_url.trim_start_matches("http://").trim_end_matches("/mcp").to_owned();
    let config = service_config(dir, store, &upstream_host);
    let (service, base) = spawn_service(&config);
    refusals(&base, &upstream_url);
    crate::service_api::the_document_lists_and_creates(&base, &upstream_url);
    let (id, change, after) = create_and_change(&base, &upstream_url);
    as_the_document_says(&base, &id);
    isolation(&base, &id, &change);
    drop(service);
    restart_and_delete(&config, &id, &after);
    let (_service, base) = spawn_service(&config);
    an_adapter_given_later(&base, &upstream_url);
    names_for_people(&base, &upstream_url);
    a_failed_sync_shows(&base, &upstream_url, _upstream);
}

/// A tool set's name is for people ("Email Tool"): its tools are offered
/// over MCP under the name derived from it (`info.mcpName`), and a second
/// tool set whose name gives the same MCP name is refused, saying which.
fn names_for_people(base: &str, upstream_url: &str) {
    let sets = format!("{base}/v1/tool_sets");
    let reply = rest("POST", &sets, Some(ACME), Some(&mcp_tool_set("Pocket Calculator", upstream_url, None)), &[]);
    assert_eq!(reply.status, 201, "{}", reply.body);
    assert_eq!(reply.body["metadata"]["name"], "Pocket Calculator", "{}", reply.body);
    assert_eq!(reply.body["info"]["mcpName"], "Pocket_Calculator", "{}", reply.body);
    let id = reply.body["metadata"]["id"].as_str().expect("id").to_owned();
    let listed = mcp_tools(&format!("{base}/mcp"), ACME);
    assert!(listed.contains(&"Pocket_Calculator__add".to_owned()), "{listed:?}");
    let tools = rest("GET", &format!("{sets}/{id}/tools"), Some(ACME), None, &[]).body;
    let add = tools["tools"].as_array().unwrap().iter().find(|t| t["metadata"]["name"] == "add").expect("add");
    assert_eq!(add["info"]["mcpName"], "Pocket_Calculator__add", "{add}");
    assert_eq!(add["info"]["served"], true, "{add}");
    let reply = rest("POST", &sets, Some(ACME), Some(&mcp_tool_set("Pocket: Calculator!", upstream_url, None)), &[]);
    assert_eq!(reply.status, 409, "{}", reply.body);
    let message = reply.body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("`Pocket_Calculator`") && message.contains(&id), "{}", reply.body);
    let reply = rest("POST", &sets, Some(ACME), Some(&mcp_tool_set("Pocket Calculator", upstream_url, None)), &[]);
    assert_eq!(reply.status, 409, "{}", reply.body);
    assert!(reply.body["error"]["message"].as_str().unwrap_or_default().contains("is taken"), "{}", reply.body);
    // Another workspace may use the same name.
    let reply = rest("POST", &sets, Some(GLOBEX), Some(&mcp_tool_set("Pocket Calculator", upstream_url, None)), &[]);
    assert_eq!(reply.status, 201, "{}", reply.body);
    assert_eq!(rest("DELETE", &format!("{sets}/{id}"), Some(ACME), None, &[]).status, 204);
}

/// `adapter` is optional, as the API document has it: a tool set made
/// without one has no tools until an update gives it one. A filter's
/// `ATTRIBUTE_UNSPECIFIED` tests the tool's name.
fn an_adapter_given_later(base: &str, upstream_url: &str) {
    let sets = format!("{base}/v1/tool_sets");
    let bare = json!({"metadata": {"name": "later"}, "spec": {"description": "Not connected yet"}});
    let reply = rest("POST", &sets, Some(ACME), Some(&bare), &[]);
    assert_eq!(reply.status, 201, "{}", reply.body);
    let id = reply.body["metadata"]["id"].as_str().expect("id").to_owned();
    // Nothing to load is not a failure: its sync completes with no tools.
    let last = &reply.body["info"]["lastSyncEvent"]["event"];
    assert_eq!(last["type"], "sync_completed", "{}", reply.body);
    assert_eq!(last["syncCompleted"]["toolsSynced"], 0, "{}", reply.body);
    let mcp = format!("{base}/mcp");
    assert!(!mcp_tools(&mcp, ACME).iter().any(|name| name.starts_with("later__")));
    let mut given = mcp_tool_set("later", upstream_url, None);
    given["spec"]["adapter"]["mcp"]["excludeTools"] = json!({"filters": [
        {"attribute": "ATTRIBUTE_UNSPECIFIED", "matcher": {"startsWith": "div"}}]});
    let reply = rest("PUT", &format!("{sets}/{id}"), Some(ACME), Some(&given), &[]);
    assert_eq!(reply.status, 200, "{}", reply.body);
    let listed = mcp_tools(&mcp, ACME);
    assert!(listed.contains(&"later__add".to_owned()) && !listed.contains(&"later__divide".to_owned()), "{listed:?}");
    assert!(statuses(base, ACME, &id).contains(&("divide".to_owned(), "TOOL_STATUS_FILTERED".to_owned())));
    // Its kind, once given, stays.
    let reply = rest("PUT", &format!("{sets}/{id}"), Some(ACME), Some(&bare), &[]);
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert_eq!(reply.body["error"]["details"][0]["pointer"], "/spec/adapter", "{}", reply.body);
    assert_eq!(rest("DELETE", &format!("{sets}/{id}"), Some(ACME), None, &[]).status, 204);
}

/// The shapes the API document gives: events (`type` and its member,
/// `metadata.profileId`, `info.createdBy` and `info.toolSet`), profiles
/// (`metadata.name` and `profileId`), synced tools made by whoever made
/// their tool set, and each tool's `info.served` as MCP clients see it.
fn as_the_document_says(base: &str, id: &str) {
    let sets = format!("{base}/v1/tool_sets");
    let tool_set = rest("GET", &format!("{sets}/{id}"), Some(ACME), None, &[]).body;
    let creator = &tool_set["info"]["createdBy"];
    assert_eq!(
        creator["metadata"],
        json!({"id": "alice", "accountId": "acct-1", "name": "alice", "profileId": "alice", "workspaceId": "acme"}),
        "{tool_set}"
    );
    assert!(tool_set["info"].get("agentCount").is_none(), "{tool_set}");
    let events = rest("GET", &format!("{sets}/{id}/events"), Some(ACME), None, &[]).body;
    for event in events["events"].as_array().expect("events") {
        // Alice's changes caused every sync of this tool set.
        assert_eq!(event["metadata"]["profileId"], "alice", "{event}");
        assert_eq!(&event["info"]["createdBy"], creator, "{event}");
        assert_eq!(event["info"]["toolSet"]["id"], id, "{event}");
        assert_eq!(event["info"]["toolSet"]["name"], "calc", "{event}");
        if event["event"]["type"] == "sync_started" {
            // Its message is the time the sync began; what began is its detail.
            assert_eq!(event["event"]["syncStarted"]["message"], event["metadata"]["createdAt"], "{event}");
            let detail = event["event"]["syncStarted"]["detail"].as_str().unwrap_or_default();
            assert!(detail.starts_with("connecting to http://"), "{event}");
        }
    }
    let listed = mcp_tools(&format!("{base}/mcp"), ACME);
    let tools = rest("GET", &format!("{sets}/{id}/tools"), Some(ACME), None, &[]).body;
    for tool in tools["tools"].as_array().expect("tools") {
        assert_eq!(&tool["info"]["createdBy"], creator, "{tool}");
        let name = format!("calc__{}", tool["metadata"]["name"].as_str().expect("a name"));
        assert_eq!(tool["info"]["served"], listed.contains(&name), "{tool} and {listed:?}");
    }
}

/// A sync that fails shows in the tool set's state (`info.lastSyncEvent`
/// of type `sync_failed`, saying why) and in its tools' (`info.served` is
/// what MCP clients are offered, whatever the registry kept).
fn a_failed_sync_shows(base: &str, upstream_url: &str, upstream: Server) {
    let sets = format!("{base}/v1/tool_sets");
    let reply = rest("POST", &sets, Some(ACME), Some(&mcp_tool_set("flaky", upstream_url, None)), &[]);
    assert_eq!(reply.status, 201, "{}", reply.body);
    assert_eq!(reply.body["info"]["lastSyncEvent"]["event"]["type"], "sync_completed", "{}", reply.body);
    let id = reply.body["metadata"]["id"].as_str().expect("id").to_owned();
    let mcp = format!("{base}/mcp");
    assert!(mcp_tools(&mcp, ACME).contains(&"flaky__add".to_owned()));
    // The MCP server goes away; a change of how to reach it makes the
    // service connect again.
    drop(upstream);
    let mut change = mcp_tool_set("flaky", upstream_url, None);
    change["spec"]["adapter"]["mcp"]["headers"] = json!({"x-tenant": "acme"});
    let reply = rest("PUT", &format!("{sets}/{id}"), Some(ACME), Some(&change), &[]);
    assert_eq!(reply.status, 200, "{}", reply.body);
    let last = &reply.body["info"]["lastSyncEvent"];
    assert_eq!(last["event"]["type"], "sync_failed", "{}", reply.body);
    assert_eq!(last["event"]["syncFailed"]["error"], true, "{}", reply.body);
    assert!(!last["event"]["syncFailed"]["message"].as_str().unwrap_or_default().is_empty(), "{}", reply.body);
    assert_eq!(reply.body["info"]["lastSync"], last["metadata"]["createdAt"], "{}", reply.body);
    let listed = mcp_tools(&mcp, ACME);
    let tools = rest("GET", &format!("{sets}/{id}/tools"), Some(ACME), None, &[]).body;
    assert!(!tools["tools"].as_array().expect("tools").is_empty(), "{tools}");
    for tool in tools["tools"].as_array().expect("tools") {
        let name = format!("flaky__{}", tool["metadata"]["name"].as_str().expect("a name"));
        assert_eq!(tool["info"]["served"], listed.contains(&name), "{tool} and {listed:?}");
    }
    let names = event_names(base, ACME, &id);
    assert_eq!(names.last().map(String::as_str), Some("sync_failed"), "{names:?}");
}

/// What the API refuses before it stores anything: no token, bodies too
/// large or announced so, bad bodies (each problem with its pointer), an
/// upstream at an address not allowed.
fn refusals(base: &str, upstream_url: &str) {
    let sets = format!("{base}/v1/tool_sets");
    // No token: 401, pointing at the protected-resource metadata.
    let reply = rest("GET", &sets, None, None, &[]);
    assert_eq!(reply.status, 401, "{}", reply.body);
    assert!(reply.header("www-authenticate").contains("resource_metadata="), "{}", reply.header("www-authenticate"));

    // A body is read only once its sender is known: without a token, the
    // refusal comes before the body is asked for (no `100 Continue`);
    // with one, a body over 1 MiB is refused by its announced length.
    let refused = announced_body(&sets, None, 2 << 20);
    assert!(refused.starts_with("HTTP/1.1 401"), "{refused}");
    let too_large = announced_body(&sets, Some(ACME), 2 << 20);
    assert!(too_large.contains("HTTP/1.1 413"), "{too_large}");

    // Bad bodies: 400 with the pointer of each problem (a name is for
    // people, but has no control characters).
    let mut bad = mcp_tool_set("calc\nx", upstream_url, None);
    bad["spec"]["adapter"]["mcp"]["headers"] = json!({"x-key": "${env:HOME}"});
    let reply = rest("POST", &sets, Some(ACME), Some(&bad), &[]);
    assert_eq!(reply.status, 400, "{}", reply.body);
    let pointers: Vec<&str> =
        reply.body["error"]["details"].as_array().unwrap().iter().map(|d| d["pointer"].as_str().unwrap()).collect();
    assert!(pointers.contains(&"/metadata/name"), "{pointers:?}");
    assert!(pointers.contains(&"/spec/adapter/mcp/headers/x-key"), "{pointers:?}");
    // A body of a hundred thousand bad strings: the first 50 problems, in a
    // short answer (it was one problem each, megabytes).
    let mut flood = mcp_tool_set("calc", upstream_url, None);
    flood["metadata"]["labels"] = json!({"many": vec!["${"; 100_000]});
    let reply = rest("POST", &sets, Some(ACME), Some(&flood), &[]);
    assert_eq!(reply.status, 400);
    assert_eq!(reply.body["error"]["details"].as_array().map(Vec::len), Some(50));
    assert_eq!(reply.body["error"]["message"], "the body has 50 problems or more");
    assert!(reply.body.to_string().len() < 64 << 10, "{} bytes", reply.body.to_string().len());
    let elsewhere = mcp_tool_set("calc", "http://169.254.169.254/mcp", None);
    let reply = rest("POST", &sets, Some(ACME), Some(&elsewhere), &[]);
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert_eq!(reply.body["error"]["details"][0]["pointer"], "/spec/adapter/mcp/url", "{}", reply.body);
}

/// A tool set created (synced at once, its events and tools recorded), then
/// its filter changed: its id, the changed body and the tools' statuses.
fn create_and_change(base: &str, upstream_url: &str) -> (String, Value, Vec<(String, String)>) {
    let sets = format!("{base}/v1/tool_sets");
    // Create: synced at once, its events and tools recorded.
    let reply = rest("POST", &sets, Some(ACME), Some(&mcp_tool_set("calc", upstream_url, None)), &[]);
    assert_eq!(reply.status, 201, "{}", reply.body);
    let id = reply.body["metadata"]["id"].as_str().expect("id").to_owned();
    assert!(id.starts_with("toolset_01") && id.len() == "toolset_".len() + 26, "{id}");
    assert_eq!(reply.header("location"), format!("/v1/tool_sets/{id}"));
    assert_eq!(reply.header("etag"), "\"1\"");
    assert_eq!(reply.body["metadata"]["workspaceId"], "acme");
    assert_eq!(reply.body["metadata"]["accountId"], "acct-1");
    assert_eq!(reply.body["info"]["createdBy"]["spec"]["type"], "PROFILE_TYPE_USER");
    assert_eq!(reply.body["info"]["createdBy"]["spec"]["email"], "alice@acme.test");
    assert!(reply.body["info"]["lastSyncEvent"]["event"]["syncCompleted"].is_object(), "{}", reply.body);
    let last_sync = reply.body["info"]["lastSync"].as_str().expect("lastSync is the time of the last sync");
    assert_eq!(last_sync, reply.body["info"]["lastSyncEvent"]["metadata"]["createdAt"], "{}", reply.body);
    let tools = reply.body["info"]["toolCount"].as_i64().expect("a tool count");
    assert!(tools >= 2, "{}", reply.body);
    assert_eq!(event_names(base, ACME, &id), ["sync_started", "sync_completed"]);
    let before = statuses(base, ACME, &id);
    assert!(before.iter().all(|(_, status)| status == "TOOL_STATUS_AVAILABLE"), "{before:?}");
    assert!(before.iter().any(|(name, _)| name == "divide"), "{before:?}");
    // The same name again: 409.
    let reply = rest("POST", &sets, Some(ACME), Some(&mcp_tool_set("calc", upstream_url, None)), &[]);
    assert_eq!(reply.status, 409, "{}", reply.body);

    // Change a filter: `divide` becomes FILTERED. A stale version: 409.
    let change = mcp_tool_set("calc", upstream_url, Some("divide"));
    let reply = rest("PUT", &format!("{sets}/{id}"), Some(ACME), Some(&change), &[("if-match", "\"7\"")]);
    assert_eq!(reply.status, 409, "{}", reply.body);
    let reply = rest("PUT", &format!("{sets}/{id}"), Some(ACME), Some(&change), &[("if-match", "\"1\"")]);
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.header("etag"), "\"2\"");
    let after = statuses(base, ACME, &id);
    for (name, status) in &after {
        let wanted = if name == "divide" { "TOOL_STATUS_FILTERED" } else { "TOOL_STATUS_AVAILABLE" };
        assert_eq!(status, wanted, "{after:?}");
    }
    assert_eq!(event_names(base, ACME, &id), ["sync_started", "sync_completed", "sync_started", "sync_completed"]);

    // The adapter's kind cannot change; an unknown page token is an error,
    // not the first page.
    let mut other_kind = change.clone();
    other_kind["spec"]["adapter"] = json!({"http": {"baseUrl": upstream_url}});
    let reply = rest("PUT", &format!("{sets}/{id}"), Some(ACME), Some(&other_kind), &[]);
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert_eq!(reply.body["error"]["details"][0]["pointer"], "/spec/adapter", "{}", reply.body);
    let reply = rest("GET", &format!("{sets}/{id}/events?pageToken=event_nope"), Some(ACME), None, &[]);
    assert_eq!(reply.status, 400, "{}", reply.body);
    // The probes name no tenant's tool set.
    let (status, ready) = crate::production::get(&format!("{base}/readyz"));
    assert_eq!(status, 200, "{ready}");
    assert!(!ready.contains("calc") && ready.contains("\"workspaces\""), "{ready}");
    (id, change, after)
}

/// The tool set's tools over MCP for its workspace, and nothing of it for
/// another workspace.
fn isolation(base: &str, id: &str, change: &Value) {
    let sets = format!("{base}/v1/tool_sets");
    // Call a tool over MCP as the workspace: `calc__add` is there,
    // `calc__divide` is not.
    let mcp = format!("{base}/mcp");
    let listed = mcp_tools(&mcp, ACME);
    assert!(listed.contains(&"calc__add".to_owned()) && !listed.contains(&"calc__divide".to_owned()), "{listed:?}");
    let session = open_session(&mcp, Some(ACME));
    let answer = post(&mcp, Some(ACME), Some(&session), &call("calc__add", json!({"a": 2, "b": 3})));
    assert_eq!(answer.body["result"]["content"][0]["text"], "5", "{}", answer.body);

    // Another workspace sees none of it: not over the API, not over MCP.
    let reply = rest("GET", &format!("{sets}/{id}"), Some(GLOBEX), None, &[]);
    assert_eq!(reply.status, 404, "{}", reply.body);
    let reply = rest("GET", &format!("{sets}/{id}/tools"), Some(GLOBEX), None, &[]);
    assert_eq!(reply.status, 404, "{}", reply.body);
    let reply = rest("PUT", &format!("{sets}/{id}"), Some(GLOBEX), Some(change), &[]);
    assert_eq!(reply.status, 404, "{}", reply.body);
    let reply = rest("DELETE", &format!("{sets}/{id}"), Some(GLOBEX), None, &[]);
    assert_eq!(reply.status, 404, "{}", reply.body);
    assert_eq!(rest("GET", &sets, Some(GLOBEX), None, &[]).body["toolSets"], json!([]));
    assert_eq!(mcp_tools(&mcp, GLOBEX), Vec::<String>::new());
    let session = open_session(&mcp, Some(GLOBEX));
    let answer = post(&mcp, Some(GLOBEX), Some(&session), &call("calc__add", json!({"a": 2, "b": 3})));
    assert!(answer.body["error"].is_object(), "{}", answer.body);
}

/// A restart on the same store keeps everything (and records no new
/// sync); a delete removes the tool set from the API and MCP, its events
/// stay.
fn restart_and_delete(config: &std::path::Path, id: &str, after: &[(String, String)]) {
    // Restart on the same store: everything is there, and callable.
    let (_service, base) = spawn_service(config);
    let reply = rest("GET", &format!("{base}/v1/tool_sets/{id}"), Some(ACME), None, &[]);
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["metadata"]["resourceVersion"], "2");
    assert_eq!(reply.body["metadata"]["labels"]["environment"], "production");
    assert_eq!(statuses(&base, ACME, id), after);
    let events = event_names(&base, ACME, id);
    // Reloading what it had is no sync to record.
    assert_eq!(events, ["sync_started", "sync_completed", "sync_started", "sync_completed"]);
    let mcp = format!("{base}/mcp");
    let session = open_session(&mcp, Some(ACME));
    let answer = post(&mcp, Some(ACME), Some(&session), &call("calc__add", json!({"a": 20, "b": 22})));
    assert_eq!(answer.body["result"]["content"][0]["text"], "42", "{}", answer.body);

    // Delete: gone from the API and from MCP; its events stay.
    let reply = rest("DELETE", &format!("{base}/v1/tool_sets/{id}"), Some(ACME), None, &[("if-match", "\"2\"")]);
    assert_eq!(reply.status, 204, "{}", reply.body);
    assert_eq!(rest("GET", &format!("{base}/v1/tool_sets/{id}"), Some(ACME), None, &[]).status, 404);
    assert_eq!(mcp_tools(&mcp, ACME), Vec::<String>::new());
    assert!(event_names(&base, ACME, id).len() >= 4);
}

#[test]
fn the_api_manages_an_mcp_tool_set_per_workspace_and_a_restart_keeps_it_all_on_sqlite() {
    let dir = scratch("sqlite");
    drive(&format!("sqlite://{}", dir.join("tools.db").display()), &dir);
    std::fs::remove_dir_all(dir).ok();
}

/// A poll that reads the store between a change's write and the change's
/// own sync does not apply the change first and record its outcome with no
/// `sync_started` before it. With the store polled every millisecond, each
/// of a dozen changes records one `sync_started` and then one
/// `sync_completed`.
#[test]
fn a_change_is_recorded_once_however_often_the_store_is_polled() {
    let dir = scratch("polled");
    let (_upstream, upstream_url) = upstream();
    let upstream_host = upstream_url.trim_start_matches("http://").trim_end_matches("/mcp").to_owned();
    let config = service_config(&dir, &format!("sqlite://{}", dir.join("tools.db").display()), &upstream_host);
    let mut document: Value = serde_json::from_str(&std::fs::read_to_string(&config).expect("config")).expect("json");
    document["serve"]["service"]["pollMillis"] = json!(1);
    std::fs::write(&config, document.to_string()).expect("write config");
    let (_service, base) = spawn_service(&config);
    let sets = format!("{base}/v1/tool_sets");

    let reply = rest("POST", &sets, Some(ACME), Some(&mcp_tool_set("calc", &upstream_url, None)), &[]);
    assert_eq!(reply.status, 201, "{}", reply.body);
    let id = reply.body["metadata"]["id"].as_str().expect("id").to_owned();
    let changes = 12;
    for version in 1..=changes {
        let exclude = (version % 2 == 1).then_some("divide");
        let change = mcp_tool_set("calc", &upstream_url, exclude);
        let etag = format!("\"{version}\"");
        let reply = rest("PUT", &format!("{sets}/{id}"), Some(ACME), Some(&change), &[("if-match", &etag)]);
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
    let wanted: Vec<&str> = ["sync_started", "sync_completed"].repeat(changes + 1);
    assert_eq!(event_names(&base, ACME, &id), wanted);
    std::fs::remove_dir_all(dir).ok();
}

/// An upstream MCP server and a service on SQLite in `dir` allowed to
/// reach it: both processes, the upstream's URL, the service's base URL.
fn on_sqlite(dir: &std::path::Path) -> (Server, String, Server, String) {
    let (upstream, upstream_url) = upstream();
    let upstream_host = upstream_url.trim_start_matches("http://").trim_end_matches("/mcp").to_owned();
    let config = service_config(dir, &format!("sqlite://{}", dir.join("tools.db").display()), &upstream_host);
    let (service, base) = spawn_service(&config);
    (upstream, upstream_url, service, base)
}

#[test]
fn concurrent_updates_of_one_version_let_exactly_one_through() {
    let dir = scratch("concurrent");
    let (_upstream, upstream_url, _service, base) = on_sqlite(&dir);
    let sets = format!("{base}/v1/tool_sets");
    let reply = rest("POST", &sets, Some(ACME), Some(&mcp_tool_set("calc", &upstream_url, None)), &[]);
    assert_eq!(reply.status, 201, "{}", reply.body);
    let id = reply.body["metadata"]["id"].as_str().expect("id").to_owned();
    let writers: Vec<_> = (0..8)
        .map(|i| {
            let (url, upstream_url) = (format!("{sets}/{id}"), upstream_url.clone());
            std::thread::spawn(move || {
                let mut change = mcp_tool_set("calc", &upstream_url, None);
                change["metadata"]["labels"] = json!({"writer": i.to_string()});
                rest("PUT", &url, Some(ACME), Some(&change), &[("if-match", "\"1\"")]).status
            })
        })
        .collect();
    let mut codes: Vec<u16> = writers.into_iter().map(|w| w.join().expect("writer")).collect();
    codes.sort();
    assert_eq!(codes, [200, 409, 409, 409, 409, 409, 409, 409]);
    let reply = rest("GET", &format!("{sets}/{id}"), Some(ACME), None, &[]);
    assert_eq!(reply.body["metadata"]["resourceVersion"], "2", "{}", reply.body);
    assert!(reply.body["metadata"]["labels"]["writer"].is_string(), "{}", reply.body);
    assert_eq!(rest("GET", &sets, Some(ACME), None, &[]).body["toolSets"].as_array().map(Vec::len), Some(1));
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn a_managed_tool_sets_tools_are_changed_only_by_api_key_actors() {
    let dir = scratch("managed");
    let (_upstream, upstream_url, _service, base) = on_sqlite(&dir);
    let sets = format!("{base}/v1/tool_sets");
    let mut managed = mcp_tool_set("calc", &upstream_url, None);
    managed["spec"]["managed"] = json!(true);
    // A person cannot make one; the API key can.
    assert_eq!(rest("POST", &sets, Some(ACME), Some(&managed), &[]).status, 403);
    let reply = rest("POST", &sets, Some(ACME_BOT), Some(&managed), &[]);
    assert_eq!(reply.status, 201, "{}", reply.body);
    assert_eq!(reply.body["info"]["createdBy"]["spec"]["type"], "PROFILE_TYPE_API_KEY");
    let id = reply.body["metadata"]["id"].as_str().expect("id").to_owned();
    let tools = rest("GET", &format!("{sets}/{id}/tools"), Some(ACME), None, &[]);
    let divide = tools.body["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["metadata"]["name"] == "divide")
        .expect("divide")
        .clone();
    let tool_url = format!("{sets}/{id}/tools/{}", divide["metadata"]["id"].as_str().expect("tool id"));
    let mut filtered = divide.clone();
    filtered["spec"]["status"] = json!("TOOL_STATUS_FILTERED");
    // A person may read its tools but not change them.
    let reply = rest("PUT", &tool_url, Some(ACME), Some(&filtered), &[]);
    assert_eq!(reply.status, 403, "{}", reply.body);
    assert!(reply.body["error"]["message"].as_str().unwrap().contains("managed"), "{}", reply.body);
    let reply = rest("PUT", &tool_url, Some(ACME_BOT), Some(&filtered), &[]);
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["spec"]["status"], "TOOL_STATUS_FILTERED", "{}", reply.body);
    assert!(!mcp_tools(&format!("{base}/mcp"), ACME).contains(&"calc__divide".to_owned()));
    // Nobody deletes a synced tool: it comes from its server.
    assert_eq!(rest("DELETE", &tool_url, Some(ACME_BOT), None, &[]).status, 409);
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn the_api_manages_an_mcp_tool_set_per_workspace_and_a_restart_keeps_it_all_on_postgresql() {
    let postgres = toolhost_tests::Postgres::start("scenario");
    let dir = scratch("postgres");
    drive(&postgres.url, &dir);
    std::fs::remove_dir_all(dir).ok();
}

/// Wait (at most a generous minute) until `check` holds.
pub(crate) fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !check() {
        assert!(std::time::Instant::now() < deadline, "never happened: {what}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// An MCP session's event stream (GET): its notifications' methods, as they
/// come.
fn notifications(mcp: &str, token: &str, session: &str) -> std::sync::mpsc::Receiver<String> {
    let (sender, receiver) = std::sync::mpsc::channel();
    let request = ureq::get(mcp)
        .header("accept", "text/event-stream")
        .header("authorization", &format!("Bearer {token}"))
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-11-25");
    std::thread::spawn(move || {
        use std::io::BufRead as _;
        let Ok(mut response) = request.call() else { return };
        let reader = std::io::BufReader::new(response.body_mut().as_reader());
        for line in reader.lines() {
            let Ok(line) = line else { return };
            if let Some(data) = line.strip_prefix("data:")
                && let Ok(message) = serde_json::from_str::<Value>(data.trim())
                && let Some(method) = message["method"].as_str()
                && sender.send(method.to_owned()).is_err()
            {
                return;
            }
        }
    });
    receiver
}

#[test]
fn two_instances_on_one_postgresql_share_tool_sets_and_record_each_sync_once() {
    let postgres = toolhost_tests::Postgres::start("two");
    let dir = scratch("two");
    let (_upstream, upstream_url) = upstream();
    let upstream_host = upstream_url.trim_start_matches("http://").trim_end_matches("/mcp").to_owned();
    let config = service_config(&dir, &postgres.url, &upstream_host);
    let (_a, base_a) = spawn_service(&config);
    let (_b, base_b) = spawn_service(&config);
    // A client of instance B, listening for tools/list_changed.
    let mcp_b = format!("{base_b}/mcp");
    let session = open_session(&mcp_b, Some(ACME));
    let changes = notifications(&mcp_b, ACME, &session);
    assert_eq!(mcp_tools(&mcp_b, ACME), Vec::<String>::new());

    // Created through A: B serves it, and tells its client.
    let reply = rest(
        "POST",
        &format!("{base_a}/v1/tool_sets"),
        Some(ACME),
        Some(&mcp_tool_set("calc", &upstream_url, None)),
        &[],
    );
    assert_eq!(reply.status, 201, "{}", reply.body);
    let id = reply.body["metadata"]["id"].as_str().expect("id").to_owned();
    eventually("B serves calc__add", || mcp_tools(&mcp_b, ACME).contains(&"calc__add".to_owned()));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match changes.recv_timeout(left) {
            Ok(method) if method == "notifications/tools/list_changed" => break,
            Ok(_) => continue,
            Err(e) => panic!("B's client was not told the tools changed: {e}"),
        }
    }
    let answer = post(&mcp_b, Some(ACME), Some(&session), &call("calc__add", json!({"a": 1, "b": 2})));
    assert_eq!(answer.body["result"]["content"][0]["text"], "3", "{}", answer.body);
    let reply = rest("GET", &format!("{base_b}/v1/tool_sets/{id}"), Some(ACME), None, &[]);
    assert_eq!(reply.status, 200, "{}", reply.body);

    // Changed through B: A serves the change; the sync is recorded once.
    let change = mcp_tool_set("calc", &upstream_url, Some("add"));
    let reply =
        rest("PUT", &format!("{base_b}/v1/tool_sets/{id}"), Some(ACME), Some(&change), &[("if-match", "\"1\"")]);
    assert_eq!(reply.status, 200, "{}", reply.body);
    let mcp_a = format!("{base_a}/mcp");
    eventually("A stops serving calc__add", || !mcp_tools(&mcp_a, ACME).contains(&"calc__add".to_owned()));
    assert_eq!(event_names(&base_a, ACME, &id), ["sync_started", "sync_completed", "sync_started", "sync_completed"]);
    // Both write at once: one wins, on whichever instance.
    let writers: Vec<_> = [base_a.clone(), base_b.clone()]
        .into_iter()
        .map(|base| {
            let (url, change) = (format!("{base}/v1/tool_sets/{id}"), change.clone());
            std::thread::spawn(move || rest("PUT", &url, Some(ACME), Some(&change), &[("if-match", "\"2\"")]).status)
        })
        .collect();
    let mut codes: Vec<u16> = writers.into_iter().map(|w| w.join().expect("writer")).collect();
    codes.sort();
    assert_eq!(codes, [200, 409]);

    // Renamed through A, and its old name taken at once through B: when B
    // applies the rename, the new tool set keeps the name it holds.
    let mut renamed = change.clone();
    renamed["metadata"]["name"] = json!("arith");
    let reply =
        rest("PUT", &format!("{base_a}/v1/tool_sets/{id}"), Some(ACME), Some(&renamed), &[("if-match", "\"3\"")]);
    assert_eq!(reply.status, 200, "{}", reply.body);
    let reply = rest(
        "POST",
        &format!("{base_b}/v1/tool_sets"),
        Some(ACME),
        Some(&mcp_tool_set("calc", &upstream_url, None)),
        &[],
    );
    assert_eq!(reply.status, 201, "{}", reply.body);
    eventually("B serves the renamed tool set", || mcp_tools(&mcp_b, ACME).contains(&"arith__divide".to_owned()));
    let listed = mcp_tools(&mcp_b, ACME);
    assert!(listed.contains(&"calc__add".to_owned()), "the new `calc` lost its toolset: {listed:?}");
    assert!(!listed.contains(&"arith__add".to_owned()), "{listed:?}");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn an_http_tool_set_calls_its_tools_as_checked_http_requests() {
    let dir = scratch("http");
    let answer = |body: &str| {
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    let (port, recorded) = toolhost_tests::serve_http_recording_for(
        vec![answer(r#"{"city":"São Paulo","high":27}"#), answer(r#"{"filed":true}"#)],
        std::time::Duration::from_secs(300),
    );
    let config =
        service_config(&dir, &format!("sqlite://{}", dir.join("tools.db").display()), &format!("127.0.0.1:{port}"));
    let (_service, base) = spawn_service(&config);
    let sets = format!("{base}/v1/tool_sets");
    let tool_set = json!({"metadata": {"name": "weather"}, "spec": {"adapter": {"http": {
        "baseUrl": format!("http://127.0.0.1:{port}/api"), "headers": {"x-tenant": "acme"}}}}});
    let reply = rest("POST", &sets, Some(ACME), Some(&tool_set), &[]);
    assert_eq!(reply.status, 201, "{}", reply.body);
    let id = reply.body["metadata"]["id"].as_str().expect("id").to_owned();
    let forecast = json!({"metadata": {"name": "forecast"}, "spec": {
        "description": "The forecast for a city",
        "parameters": {"type": "object", "required": ["city"], "additionalProperties": false,
                       "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}}},
        "config": {"http": {"requestMethod": "GET", "path": "/forecast/{city}", "query": "days={days}"}}}});
    let reply = rest("POST", &format!("{sets}/{id}/tools"), Some(ACME), Some(&forecast), &[]);
    assert_eq!(reply.status, 201, "{}", reply.body);
    assert_eq!(reply.body["spec"]["status"], "TOOL_STATUS_AVAILABLE", "{}", reply.body);
    assert_eq!(reply.body["info"]["toolSet"]["id"], id.as_str());
    let report = json!({"metadata": {"name": "report"}, "spec": {
        "description": "File a weather report",
        "parameters": {"type": "object", "required": ["note"], "properties": {"note": {"type": "string"}}},
        "config": {"http": {"requestMethod": "POST", "path": "/report",
                            "requestBodyTemplate": "{\"text\": {note}, \"by\": \"toolhost\"}"}}}});
    assert_eq!(rest("POST", &format!("{sets}/{id}/tools"), Some(ACME), Some(&report), &[]).status, 201);
    // A tool without the fields the API document requires is refused,
    // naming the field, and the tool set's other tools stay served.
    for missing in ["description", "parameters", "config"] {
        let mut incomplete = report.clone();
        incomplete["metadata"]["name"] = json!("incomplete");
        incomplete["spec"].as_object_mut().unwrap().remove(missing);
        let reply = rest("POST", &format!("{sets}/{id}/tools"), Some(ACME), Some(&incomplete), &[]);
        assert_eq!(reply.status, 400, "{}", reply.body);
        assert_eq!(reply.body["error"]["details"][0]["pointer"], "/spec", "{}", reply.body);
        let message = reply.body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(&format!("\"{missing}\"")), "{}", reply.body);
    }
    // A tool without its request is refused where it is wrong.
    let mut incomplete = report.clone();
    incomplete["metadata"]["name"] = json!("other");
    incomplete["spec"]["config"] = json!({});
    let reply = rest("POST", &format!("{sets}/{id}/tools"), Some(ACME), Some(&incomplete), &[]);
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert_eq!(reply.body["error"]["details"][0]["pointer"], "/spec/config/http", "{}", reply.body);
    // A tenant sets neither `Host` (a virtual host behind the allowed
    // address that allowedHosts does not name) nor the transport's own
    // headers: on the tool set or on a tool, refused where it is set.
    let mut hosted = report.clone();
    hosted["metadata"]["name"] = json!("hosted");
    hosted["spec"]["config"]["http"]["headers"] = json!({"Host": "admin.internal.example"});
    let reply = rest("POST", &format!("{sets}/{id}/tools"), Some(ACME), Some(&hosted), &[]);
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert_eq!(reply.body["error"]["details"][0]["pointer"], "/spec/config/http/headers/Host", "{}", reply.body);
    for header in ["host", "Transfer-Encoding", "connection"] {
        let set = json!({"metadata": {"name": "hosted"}, "spec": {"adapter": {"http": {
            "baseUrl": format!("http://127.0.0.1:{port}/api"), "headers": {header: "x"}}}}});
        let reply = rest("POST", &sets, Some(ACME), Some(&set), &[]);
        assert_eq!(reply.status, 400, "{header}: {}", reply.body);
        let pointer = format!("/spec/adapter/http/headers/{header}");
        assert_eq!(reply.body["error"]["details"][0]["pointer"], pointer.as_str(), "{}", reply.body);
        let mut set = mcp_tool_set("hosted", &format!("http://127.0.0.1:{port}/mcp"), None);
        set["spec"]["adapter"]["mcp"]["headers"] = json!({header: "x"});
        let reply = rest("POST", &sets, Some(ACME), Some(&set), &[]);
        assert_eq!(reply.status, 400, "{header}: {}", reply.body);
    }

    // A tool's name is for people too; its MCP name is its toolName, else
    // derived from its name, and two tools may not share one.
    let mut named = report.clone();
    named["metadata"]["name"] = json!("Report: the weather");
    let reply = rest("POST", &format!("{sets}/{id}/tools"), Some(ACME), Some(&named), &[]);
    assert_eq!(reply.status, 201, "{}", reply.body);
    assert_eq!(reply.body["info"]["mcpName"], "weather__Report_the_weather", "{}", reply.body);
    let named_id = reply.body["metadata"]["id"].as_str().expect("id").to_owned();
    let mut twin = named.clone();
    twin["metadata"]["name"] = json!("Report the weather");
    let reply = rest("POST", &format!("{sets}/{id}/tools"), Some(ACME), Some(&twin), &[]);
    assert_eq!(reply.status, 409, "{}", reply.body);
    assert!(reply.body["error"]["message"].as_str().unwrap_or_default().contains(&named_id), "{}", reply.body);
    twin["spec"]["config"]["http"]["toolName"] = json!("report_again");
    let reply = rest("POST", &format!("{sets}/{id}/tools"), Some(ACME), Some(&twin), &[]);
    assert_eq!(reply.status, 201, "{}", reply.body);
    assert_eq!(reply.body["info"]["mcpName"], "weather__report_again", "{}", reply.body);
    let twin_id = reply.body["metadata"]["id"].as_str().expect("id").to_owned();
    let mcp = format!("{base}/mcp");
    let listed = mcp_tools(&mcp, ACME);
    assert!(listed.contains(&"weather__Report_the_weather".to_owned()), "{listed:?}");
    assert!(listed.contains(&"weather__report_again".to_owned()), "{listed:?}");
    for tool in [named_id, twin_id] {
        let reply = rest("DELETE", &format!("{sets}/{id}/tools/{tool}"), Some(ACME), None, &[]);
        assert_eq!(reply.status, 204, "{}", reply.body);
    }
    assert_eq!(mcp_tools(&mcp, ACME), ["weather__forecast", "weather__report"]);
    let tools = rest("GET", &format!("{sets}/{id}/tools"), Some(ACME), None, &[]).body;
    assert!(tools["tools"].as_array().unwrap().iter().all(|t| t["info"]["served"] == true), "{tools}");
    let forecast = tools["tools"].as_array().unwrap().iter().find(|t| t["metadata"]["name"] == "forecast").unwrap();
    assert_eq!(forecast["spec"]["config"]["http"]["query"], "days={days}", "{forecast}");
    let session = open_session(&mcp, Some(ACME));
    // Arguments that break the tool's parameters never reach the server.
    let answer = post(&mcp, Some(ACME), Some(&session), &call("weather__forecast", json!({"days": 0})));
    assert_eq!(answer.body["result"]["isError"], true, "{}", answer.body);
    let answer =
        post(&mcp, Some(ACME), Some(&session), &call("weather__forecast", json!({"city": "São Paulo", "days": 2})));
    assert_eq!(answer.body["result"]["structuredContent"]["high"], 27, "{}", answer.body);
    let answer = post(&mcp, Some(ACME), Some(&session), &call("weather__report", json!({"note": "sunny \"all\" day"})));
    assert_eq!(answer.body["result"]["structuredContent"]["filed"], true, "{}", answer.body);
    let requests = recorded.join().expect("the server's requests");
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert!(requests[0].starts_with("GET /api/forecast/S%C3%A3o%20Paulo?days=2 HTTP/1.1\r\n"), "{}", requests[0]);
    assert!(requests[0].to_ascii_lowercase().contains("x-tenant: acme"), "{}", requests[0]);
    assert!(requests[1].starts_with("POST /api/report HTTP/1.1\r\n"), "{}", requests[1]);
    assert!(requests[1].contains(r#"{"text": "sunny \"all\" day", "by": "toolhost"}"#), "{}", requests[1]);
    std::fs::remove_dir_all(dir).ok();
}

/// A tenant's tool sets reach an allowed host name only at public
/// addresses, or at addresses `allowedHosts` names too: `*host:PORT` allows
/// the name `localhost` on that port, but not the loopback address it
/// resolves to, so neither an `http` tool's request nor an `mcp` tool set's
/// connection is made (a name a tenant's server's owner points at the
/// service's own network: DNS rebinding). Each says why.
#[test]
fn a_tenants_allowed_name_does_not_reach_an_address_that_is_not_allowed() {
    let dir = scratch("rebinding");
    let (port, _recorded) = toolhost_tests::serve_http_recording_for(
        vec!["HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}".to_owned()],
        std::time::Duration::from_secs(300),
    );
    let store = format!("sqlite://{}", dir.join("tools.db").display());
    let config = service_config_reaching(&dir, &store, &[&format!("*host:{port}")]);
    let (_service, base) = spawn_service(&config);
    let sets = format!("{base}/v1/tool_sets");

    let tool_set = json!({"metadata": {"name": "weather"}, "spec": {"adapter": {"http": {
        "baseUrl": format!("http://localhost:{port}/api")}}}});
    let reply = rest("POST", &sets, Some(ACME), Some(&tool_set), &[]);
    assert_eq!(reply.status, 201, "{}", reply.body);
    let id = reply.body["metadata"]["id"].as_str().expect("id").to_owned();
    let forecast = json!({"metadata": {"name": "forecast"}, "spec": {
        "description": "The forecast", "parameters": {"type": "object"},
        "config": {"http": {"requestMethod": "GET", "path": "/forecast"}}}});
    assert_eq!(rest("POST", &format!("{sets}/{id}/tools"), Some(ACME), Some(&forecast), &[]).status, 201);
    let mcp = format!("{base}/mcp");
    let session = open_session(&mcp, Some(ACME));
    let answer = post(&mcp, Some(ACME), Some(&session), &call("weather__forecast", json!({})));
    let text = answer.body.to_string();
    assert!(text.contains("`localhost` resolves to") && text.contains("127.0.0.1"), "{text}");

    let reply = rest(
        "POST",
        &sets,
        Some(ACME),
        Some(&mcp_tool_set("calc", &format!("http://localhost:{port}/mcp"), None)),
        &[],
    );
    let text = reply.body.to_string();
    assert!(text.contains("`localhost` resolves to") && text.contains("127.0.0.1"), "{} {text}", reply.status);
    assert!(!mcp_tools(&mcp, ACME).iter().any(|name| name.starts_with("calc__")));
    std::fs::remove_dir_all(dir).ok();
}

/// The service on SQLite in `dir`, loading tenants' plugins from the
/// example plugins' directory, with `maxTools` if given: the process and
/// its base URL.
fn uri_service(dir: &std::path::Path, max_tools: Option<u64>) -> (Server, String) {
    let config = service_config(dir, &format!("sqlite://{}", dir.join("tools.db").display()), "127.0.0.1:1");
    let mut document: Value = serde_json::from_slice(&std::fs::read(&config).expect("config")).expect("json");
    let plugins = example("calculator").parent().expect("the plugins' directory").to_path_buf();
    document["serve"]["service"]["pluginDirs"] = json!([plugins.display().to_string()]);
    if let Some(max) = max_tools {
        document["serve"]["service"]["maxTools"] = json!(max);
    }
    std::fs::write(&config, document.to_string()).expect("write config");
    spawn_service(&config)
}

/// A tool set `wasm` of the example plugin `name`.
fn uri_tool_set(name: &str) -> Value {
    json!({"metadata": {"name": "wasm"}, "spec": {"adapter": {"uri": {
        "url": format!("file://{}", example(name).display())}}}})
}

#[test]
fn a_uri_tool_set_loads_a_plugin_from_an_allowed_directory_and_archives_tools_that_go() {
    let dir = scratch("uri");
    let (_service, base) = uri_service(&dir, None);
    let sets = format!("{base}/v1/tool_sets");
    let plugin = uri_tool_set;
    // A file outside the allowed directories is refused at its pointer.
    let outside = json!({"metadata": {"name": "wasm"}, "spec": {"adapter": {"uri": {"url": "file:///etc/passwd"}}}});
    let reply = rest("POST", &sets, Some(ACME), Some(&outside), &[]);
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert_eq!(reply.body["error"]["details"][0]["pointer"], "/spec/adapter/uri/url", "{}", reply.body);

    let reply = rest("POST", &sets, Some(ACME), Some(&plugin("calculator")), &[]);
    assert_eq!(reply.status, 201, "{}", reply.body);
    let id = reply.body["metadata"]["id"].as_str().expect("id").to_owned();
    let mcp = format!("{base}/mcp");
    let session = open_session(&mcp, Some(ACME));
    let answer = post(&mcp, Some(ACME), Some(&session), &call("wasm__multiply", json!({"a": 6, "b": 7})));
    assert_eq!(answer.body["result"]["content"][0]["text"], "42", "{}", answer.body);

    // Point it at another plugin: the calculator's tools are archived
    // (kept, not offered), the text plugin's are available.
    let reply = rest("PUT", &format!("{sets}/{id}"), Some(ACME), Some(&plugin("text")), &[]);
    assert_eq!(reply.status, 200, "{}", reply.body);
    let all = statuses(&base, ACME, &id);
    assert!(all.contains(&("multiply".to_owned(), "TOOL_STATUS_ARCHIVED".to_owned())), "{all:?}");
    assert!(all.iter().any(|(_, status)| status == "TOOL_STATUS_AVAILABLE"), "{all:?}");
    let listed = mcp_tools(&mcp, ACME);
    assert!(!listed.contains(&"wasm__multiply".to_owned()) && !listed.is_empty(), "{listed:?}");
    assert_eq!(reply.body["info"]["toolCount"].as_i64(), Some(listed.len() as i64), "{}", reply.body);
    std::fs::remove_dir_all(dir).ok();
}

/// Tools a sync no longer finds are archived, and a tool set keeps at most
/// `maxTools` of them (the most recently archived): a server that renamed
/// its tools at every listing grew the store without end.
#[test]
fn a_tool_set_keeps_at_most_its_quota_of_archived_tools() {
    let dir = scratch("archived");
    let (_service, base) = uri_service(&dir, Some(1));
    let sets = format!("{base}/v1/tool_sets");
    let plugin = uri_tool_set;
    let reply = rest("POST", &sets, Some(ACME), Some(&plugin("calculator")), &[]);
    assert_eq!(reply.status, 201, "{}", reply.body);
    let id = reply.body["metadata"]["id"].as_str().expect("id").to_owned();
    let calculator = statuses(&base, ACME, &id);
    assert!(calculator.len() > 1, "{calculator:?}");
    for (swap, went) in [("text", "calculator"), ("calculator", "text")] {
        let reply = rest("PUT", &format!("{sets}/{id}"), Some(ACME), Some(&plugin(swap)), &[]);
        assert_eq!(reply.status, 200, "{}", reply.body);
        let all = statuses(&base, ACME, &id);
        let archived = all.iter().filter(|(_, status)| status == "TOOL_STATUS_ARCHIVED").count();
        assert_eq!(archived, 1, "the {went} plugin's tools, archived: {all:?}");
        assert!(all.iter().any(|(_, status)| status == "TOOL_STATUS_AVAILABLE"), "{all:?}");
    }
    std::fs::remove_dir_all(dir).ok();
}

/// The operator's quotas hold: a workspace has at most `maxToolSets` tool
/// sets and an http tool set at most `maxTools` tools; past them a create
/// is refused with 429 and nothing is stored; another workspace has its
/// own quota; a delete makes room.
fn quotas(store: &str, dir: &std::path::Path) {
    let config = service_config(dir, store, "127.0.0.1:9");
    let mut document: Value = serde_json::from_str(&std::fs::read_to_string(&config).expect("config")).expect("json");
    document["serve"]["service"]["maxToolSets"] = json!(2);
    document["serve"]["service"]["maxTools"] = json!(1);
    std::fs::write(&config, document.to_string()).expect("write config");
    let (_service, base) = spawn_service(&config);
    let sets = format!("{base}/v1/tool_sets");
    let http_set = |name: &str| json!({"metadata": {"name": name}, "spec": {"adapter": {"http": {"baseUrl": "http://127.0.0.1:9"}}}});
    // Six creates at once against a quota of two: exactly two pass.
    let creates: Vec<_> = (0..6)
        .map(|i| {
            let (sets, body) = (sets.clone(), http_set(&format!("set-{i}")));
            std::thread::spawn(move || rest("POST", &sets, Some(ACME), Some(&body), &[]))
        })
        .collect();
    let replies: Vec<Reply> = creates.into_iter().map(|c| c.join().expect("creator")).collect();
    let mut codes: Vec<u16> = replies.iter().map(|r| r.status).collect();
    codes.sort();
    assert_eq!(codes, [201, 201, 429, 429, 429, 429]);
    let ids: Vec<String> = (replies.iter().filter(|r| r.status == 201))
        .map(|r| r.body["metadata"]["id"].as_str().expect("id").to_owned())
        .collect();
    let reply = rest("POST", &sets, Some(ACME), Some(&http_set("three")), &[]);
    assert_eq!(reply.status, 429, "{}", reply.body);
    assert_eq!(reply.body["error"]["status"], "RESOURCE_EXHAUSTED", "{}", reply.body);
    assert!(reply.body["error"]["message"].as_str().unwrap().contains("2 tool sets"), "{}", reply.body);
    assert_eq!(rest("GET", &sets, Some(ACME), None, &[]).body["toolSets"].as_array().map(Vec::len), Some(2));
    // Another workspace's quota is its own.
    assert_eq!(rest("POST", &sets, Some(GLOBEX), Some(&http_set("three")), &[]).status, 201);

    let tool = |name: &str| {
        json!({"metadata": {"name": name}, "spec": {"description": "d", "parameters": {"type": "object"},
               "config": {"http": {"requestMethod": "GET", "path": "/x"}}}})
    };
    let tools = format!("{sets}/{}/tools", ids[0]);
    assert_eq!(rest("POST", &tools, Some(ACME), Some(&tool("a")), &[]).status, 201);
    let reply = rest("POST", &tools, Some(ACME), Some(&tool("b")), &[]);
    assert_eq!(reply.status, 429, "{}", reply.body);
    assert!(reply.body["error"]["message"].as_str().unwrap().contains("1 tools"), "{}", reply.body);
    assert_eq!(rest("GET", &tools, Some(ACME), None, &[]).body["tools"].as_array().map(Vec::len), Some(1));

    // A delete makes room.
    assert_eq!(rest("DELETE", &format!("{sets}/{}", ids[1]), Some(ACME), None, &[]).status, 204);
    assert_eq!(rest("POST", &sets, Some(ACME), Some(&http_set("three")), &[]).status, 201);
}

#[test]
fn quotas_bound_tool_sets_per_workspace_and_tools_per_tool_set_on_sqlite() {
    let dir = scratch("quotas");
    quotas(&format!("sqlite://{}", dir.join("tools.db").display()), &dir);
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn quotas_bound_tool_sets_per_workspace_and_tools_per_tool_set_on_postgresql() {
    let postgres = toolhost_tests::Postgres::start("quotas");
    let dir = scratch("quotas-pg");
    quotas(&postgres.url, &dir);
    std::fs::remove_dir_all(dir).ok();
}

/// `perWorkspace` bounds each workspace's requests, all its tokens
/// together: past the burst, 429 with `Retry-After`, while another
/// workspace goes on.
#[test]
fn a_workspace_over_its_request_rate_is_refused_and_others_are_not() {
    let dir = scratch("rate");
    let config = service_config(&dir, &format!("sqlite://{}", dir.join("tools.db").display()), "127.0.0.1:9");
    let mut document: Value = serde_json::from_str(&std::fs::read_to_string(&config).expect("config")).expect("json");
    // One request per 100 s after a burst of 3: the fourth is refused
    // however slowly the requests go.
    document["serve"]["service"]["perWorkspace"] = json!({"perSecond": 0.01, "burst": 3});
    std::fs::write(&config, document.to_string()).expect("write config");
    let (_service, base) = spawn_service(&config);
    let sets = format!("{base}/v1/tool_sets");
    // Two tokens of one workspace share its rate.
    for token in [ACME, ACME_BOT, ACME] {
        assert_eq!(rest("GET", &sets, Some(token), None, &[]).status, 200);
    }
    let reply = rest("GET", &sets, Some(ACME_BOT), None, &[]);
    assert_eq!(reply.status, 429, "{}", reply.body);
    assert_eq!(reply.body["error"]["status"], "RESOURCE_EXHAUSTED", "{}", reply.body);
    assert!(reply.body["error"]["message"].as_str().unwrap().contains("this workspace"), "{}", reply.body);
    let wait: u64 = reply.header("retry-after").parse().expect("Retry-After in seconds");
    assert!(wait >= 1, "{wait}");
    assert_eq!(rest("GET", &sets, Some(GLOBEX), None, &[]).status, 200);
    std::fs::remove_dir_all(dir).ok();
}
