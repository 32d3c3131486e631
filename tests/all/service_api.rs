//! What the tool-set service's users reach for beyond the models: its
//! OpenAPI document, as the server serves it (every model the API document
//! names, field by field; every operation routed; real answers valid
//! against it), list filters and page errors, and idempotent creates.

use serde_json::{Value, json};

use crate::service::{ACME, GLOBEX, rest};

/// A validator of `model` (a name in `components.schemas`) from `document`.
fn validator(document: &Value, model: &str) -> jsonschema::Validator {
    let mut schema = document.clone();
    schema["$schema"] = json!("https://json-schema.org/draft/2020-12/schema");
    schema["$ref"] = json!(format!("#/components/schemas/{model}"));
    jsonschema::validator_for(&schema).unwrap_or_else(|e| panic!("{model} compiles: {e}"))
}

fn assert_valid(document: &Value, model: &str, value: &Value) {
    let problems: Vec<String> =
        validator(document, model).iter_errors(value).map(|e| format!("{}: {e}", e.instance_path())).collect();
    assert!(problems.is_empty(), "not a valid {model}: {problems:?}\n{value}");
}

/// The schema at `path` (`Model.member.list[].member`), references followed.
fn schema_at<'a>(document: &'a Value, path: &str) -> &'a Value {
    let follow = |mut node: &'a Value| {
        while let Some(target) = node["$ref"].as_str() {
            node = document.pointer(target.trim_start_matches('#')).unwrap_or_else(|| panic!("{target} resolves"));
        }
        node
    };
    let mut segments = path.split('.');
    let model = segments.next().unwrap();
    let mut node = follow(&document["components"]["schemas"][model]);
    for segment in segments {
        let (name, items) = match segment.strip_suffix("[]") {
            Some(name) => (name, true),
            None => (segment, false),
        };
        node = follow(&node["properties"][name]);
        if items {
            node = follow(&node["items"]);
        }
    }
    assert!(node.is_object(), "the document has no {path}");
    node
}

/// Each line of the spec's "The models, field by field" holds of the
/// served document: the properties exactly, the enums' values exactly.
fn models_as_the_spec_lists(document: &Value) {
    let spec = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/toolset-service.md")).unwrap();
    let section = spec.split("## The models, field by field").nth(1).expect("the section");
    let mut checked = 0;
    for line in section.lines().filter_map(|line| line.strip_prefix("- `")) {
        let (path, fields) = line.split_once("`: ").expect("`Model`: fields");
        let node = schema_at(document, path);
        if fields.contains(" | ") {
            let mut listed: Vec<&str> = fields.split(" | ").collect();
            let mut served: Vec<&str> =
                node["enum"].as_array().expect("an enum").iter().filter_map(Value::as_str).collect();
            listed.sort();
            served.sort();
            assert_eq!(served, listed, "{path}");
        } else {
            let mut listed: Vec<&str> = fields
                .split(['+', ','])
                .map(|field| field.trim().trim_end_matches('?'))
                .filter(|field| !field.is_empty())
                .collect();
            let mut served: Vec<&str> =
                node["properties"].as_object().expect("properties").keys().map(String::as_str).collect();
            listed.sort();
            served.sort();
            assert_eq!(served, listed, "{path}");
        }
        checked += 1;
    }
    assert!(checked >= 30, "only {checked} lines read");
}

/// Every operation the document lists is routed: asked without a token,
/// each is refused with 401 in the one error shape (an unrouted path is
/// 404, an unrouted method 405).
fn every_operation_is_routed(base: &str, document: &Value) {
    let mut operations = 0;
    for (path, item) in document["paths"].as_object().expect("paths") {
        let url = format!("{base}{}", path.replace("{toolSetId}", "toolset_x").replace("{id}", "some_id"));
        for method in item.as_object().unwrap().keys() {
            let body = json!({});
            let reply = rest(&method.to_uppercase(), &url, None, Some(&body), &[]);
            assert_eq!(reply.status, 401, "{method} {path}: {}", reply.body);
            assert_valid(document, "Error", &reply.body);
            operations += 1;
        }
    }
    assert_eq!(operations, 11);
    // What the API does not have is refused in the same shape.
    let reply = rest("GET", &format!("{base}/v1/tool_set"), Some(ACME), None, &[]);
    assert_eq!(reply.status, 404, "{}", reply.body);
    assert_valid(document, "Error", &reply.body);
    let reply = rest("PATCH", &format!("{base}/v1/tool_sets"), Some(ACME), Some(&json!({})), &[]);
    assert_eq!(reply.status, 405, "{}", reply.body);
    assert_valid(document, "Error", &reply.body);
    assert_eq!(reply.header("allow"), "GET, POST");
    assert_eq!(reply.body["error"]["status"], "UNIMPLEMENTED", "{}", reply.body);
}

/// The ids of a filtered list of tool sets, page by page.
fn listed(base: &str, query: &str, page_size: usize) -> Vec<String> {
    let mut names = Vec::new();
    let mut token = String::new();
    for _ in 0..100 {
        let url = format!("{base}/v1/tool_sets?pageSize={page_size}&{query}&pageToken={token}");
        let reply = rest("GET", &url, Some(ACME), None, &[]);
        assert_eq!(reply.status, 200, "{query}: {}", reply.body);
        for set in reply.body["toolSets"].as_array().unwrap() {
            names.push(set["metadata"]["name"].as_str().unwrap().to_owned());
        }
        match reply.body["nextPageToken"].as_str() {
            Some(next) => token = next.to_owned(),
            None => return names,
        }
    }
    panic!("{query}: the pages never end");
}

/// Lists filter by name and label selector, page through the filtered
/// items, and refuse a bad page size, page token or selector with the
/// same JSON error on every list.
fn lists(base: &str, document: &Value, upstream_url: &str) {
    let sets = format!("{base}/v1/tool_sets");
    let labelled = [
        ("lists-gold", json!({"tier": "gold", "team": "a"})),
        ("lists-silver", json!({"tier": "silver"})),
        ("lists-bare", json!({})),
        ("lists-gold-2", json!({"tier": "gold", "retired": "yes"})),
    ];
    let mut ids = Vec::new();
    for (name, labels) in &labelled {
        let body = json!({"metadata": {"name": name, "labels": labels}, "spec": {"description": "filters"}});
        let reply = rest("POST", &sets, Some(ACME), Some(&body), &[]);
        assert_eq!(reply.status, 201, "{}", reply.body);
        assert_valid(document, "ToolSet", &reply.body);
        ids.push(reply.body["metadata"]["id"].as_str().unwrap().to_owned());
    }
    let mut synced = json!({"metadata": {"name": "lists-synced"}, "spec": {"adapter": {"mcp": {"url": upstream_url}}}});
    synced["metadata"]["labels"] = json!({"tier": "bronze"});
    let reply = rest("POST", &sets, Some(ACME), Some(&synced), &[]);
    assert_eq!(reply.status, 201, "{}", reply.body);
    let synced_id = reply.body["metadata"]["id"].as_str().unwrap().to_owned();
    ids.push(synced_id.clone());

    let whole = rest("GET", &sets, Some(ACME), None, &[]);
    assert_valid(document, "ToolSetList", &whole.body);
    for (query, expected) in [
        ("labelSelector=tier%3Dgold", vec!["lists-gold", "lists-gold-2"]),
        ("labelSelector=tier%3Dgold,!retired", vec!["lists-gold"]),
        ("labelSelector=tier%20in%20(silver,%20bronze)", vec!["lists-silver", "lists-synced"]),
        ("labelSelector=tier,tier%20notin%20(gold)", vec!["lists-silver", "lists-synced"]),
        ("labelSelector=tier!%3Dgold,team", vec![]),
        ("name=lists-bare", vec!["lists-bare"]),
        ("name=lists-gold&labelSelector=team%3Da", vec!["lists-gold"]),
    ] {
        for page_size in [1, 2, 100] {
            let mut names = listed(base, query, page_size);
            names.sort();
            assert_eq!(names, expected, "{query}, pages of {page_size}");
        }
    }

    let tools = format!("{sets}/{synced_id}/tools");
    let reply = rest("GET", &format!("{tools}?name=add"), Some(ACME), None, &[]);
    assert_valid(document, "ToolList", &reply.body);
    let names: Vec<&Value> = reply.body["tools"].as_array().unwrap().iter().map(|t| &t["metadata"]["name"]).collect();
    assert_eq!(names, [&json!("add")], "{}", reply.body);
    assert_valid(document, "Tool", &reply.body["tools"][0]);
    let reply = rest("GET", &format!("{tools}?labelSelector=kind%3Dmath"), Some(ACME), None, &[]);
    assert_eq!(reply.body["tools"], json!([]), "{}", reply.body);
    let events = format!("{sets}/{synced_id}/events");
    let reply = rest("GET", &events, Some(ACME), None, &[]);
    assert_valid(document, "ToolSetEventList", &reply.body);
    assert!(!reply.body["events"].as_array().unwrap().is_empty(), "{}", reply.body);

    for list in [sets.as_str(), tools.as_str(), events.as_str()] {
        for (query, names) in [
            ("pageSize=ten", "pageSize"),
            ("pageSize=0", "pageSize"),
            ("pageSize=1001", "pageSize"),
            ("pageSize=5&pageSize=6", "pageSize"),
            ("pageToken=not-a-token", "pageToken"),
            ("pageToken=toolset_", "pageToken"),
            ("labelSelector=tier%20in%20(gold", "labelSelector"),
        ] {
            let reply = rest("GET", &format!("{list}?{query}"), Some(ACME), None, &[]);
            assert_eq!(reply.status, 400, "{list}?{query}: {}", reply.body);
            assert_valid(document, "Error", &reply.body);
            let message = reply.body["error"]["message"].as_str().unwrap();
            assert!(message.contains(names), "{list}?{query}: {message}");
        }
    }
    for id in ids {
        assert_eq!(rest("DELETE", &format!("{sets}/{id}"), Some(ACME), None, &[]).status, 204);
    }
}

/// A create sent again with its `Idempotency-Key` makes nothing twice and
/// is answered as the first was; the key with another body is refused; a
/// create refused gives its key up; keys are the workspace's own.
fn idempotent_creates(base: &str, document: &Value, upstream_url: &str) {
    let sets = format!("{base}/v1/tool_sets");
    let body = json!({"metadata": {"name": "idem"}, "spec": {"description": "once"}});
    let key = [("Idempotency-Key", "create-idem-1")];
    let first = rest("POST", &sets, Some(ACME), Some(&body), &key);
    assert_eq!(first.status, 201, "{}", first.body);
    assert_eq!(first.header("idempotent-replayed"), "");
    let again = rest("POST", &sets, Some(ACME), Some(&body), &key);
    assert_eq!(again.status, 201, "{}", again.body);
    assert_eq!(again.body, first.body);
    assert_eq!(again.header("idempotent-replayed"), "true");
    assert_eq!((again.header("location"), again.header("etag")), (first.header("location"), first.header("etag")));
    assert_eq!(listed(base, "name=idem", 100), ["idem"]);
    let other = json!({"metadata": {"name": "idem-other"}, "spec": {"description": "once"}});
    let reply = rest("POST", &sets, Some(ACME), Some(&other), &key);
    assert_eq!(reply.status, 409, "{}", reply.body);
    assert_valid(document, "Error", &reply.body);
    assert!(reply.body["error"]["message"].as_str().unwrap().contains("another request"), "{}", reply.body);
    assert_eq!(listed(base, "name=idem-other", 100), Vec::<String>::new());
    // Another workspace's key of the same text is its own.
    let theirs = rest("POST", &sets, Some(GLOBEX), Some(&body), &key);
    assert_eq!(theirs.status, 201, "{}", theirs.body);
    assert_ne!(theirs.body["metadata"]["id"], first.body["metadata"]["id"]);
    // Refused (the name is taken), the create gives its key up.
    let taken = [("Idempotency-Key", "create-idem-2")];
    let reply = rest("POST", &sets, Some(ACME), Some(&body), &taken);
    assert_eq!(reply.status, 409, "{}", reply.body);
    assert!(reply.body["error"]["message"].as_str().unwrap().contains("taken"), "{}", reply.body);
    let id = first.body["metadata"]["id"].as_str().unwrap().to_owned();
    assert_eq!(rest("DELETE", &format!("{sets}/{id}"), Some(ACME), None, &[]).status, 204);
    let reply = rest("POST", &sets, Some(ACME), Some(&body), &taken);
    assert_eq!(reply.status, 201, "{}", reply.body);
    assert_ne!(reply.body["metadata"]["id"], first.body["metadata"]["id"]);
    let id = reply.body["metadata"]["id"].as_str().unwrap().to_owned();
    assert_eq!(rest("DELETE", &format!("{sets}/{id}"), Some(ACME), None, &[]).status, 204);
    let id = theirs.body["metadata"]["id"].as_str().unwrap().to_owned();
    assert_eq!(rest("DELETE", &format!("{sets}/{id}"), Some(GLOBEX), None, &[]).status, 204);
    // A tool of an http tool set, likewise.
    let api = upstream_url.trim_end_matches("/mcp");
    let http = json!({"metadata": {"name": "idem-http"}, "spec": {"adapter": {"http": {"baseUrl": api}}}});
    let reply = rest("POST", &sets, Some(ACME), Some(&http), &[]);
    assert_eq!(reply.status, 201, "{}", reply.body);
    let set = reply.body["metadata"]["id"].as_str().unwrap().to_owned();
    let tool = json!({"metadata": {"name": "status"}, "spec": {"description": "The server's status",
        "parameters": {"type": "object"}, "config": {"http": {"requestMethod": "GET", "path": "/status"}}}});
    let key = [("Idempotency-Key", "tool-1")];
    let tools = format!("{sets}/{set}/tools");
    let first = rest("POST", &tools, Some(ACME), Some(&tool), &key);
    assert_eq!(first.status, 201, "{}", first.body);
    let again = rest("POST", &tools, Some(ACME), Some(&tool), &key);
    assert_eq!((again.status, &again.body), (201, &first.body));
    let listed = rest("GET", &tools, Some(ACME), None, &[]);
    assert_eq!(listed.body["tools"].as_array().map(Vec::len), Some(1), "{}", listed.body);
    // The same key and body on another tool set's path is another request.
    let elsewhere = format!("{sets}/{}/tools", first.body["info"]["toolSet"]["id"].as_str().unwrap().replace('0', "1"));
    let reply = rest("POST", &elsewhere, Some(ACME), Some(&tool), &key);
    assert_eq!(reply.status, 409, "{}", reply.body);
    assert!(reply.body["error"]["message"].as_str().unwrap().contains("another request"), "{}", reply.body);
    for bad in ["", &"k".repeat(256)] {
        let reply = rest("POST", &sets, Some(ACME), Some(&body), &[("Idempotency-Key", bad)]);
        assert_eq!(reply.status, 400, "{}", reply.body);
        assert!(reply.body["error"]["message"].as_str().unwrap().contains("Idempotency-Key"), "{}", reply.body);
    }
    assert_eq!(rest("DELETE", &format!("{sets}/{set}"), Some(ACME), None, &[]).status, 204);
}

/// A watch of a tool set's events: the response's status, then its
/// content type (a refusal: its body), and `(id, type)` of each event as
/// it comes.
fn watch(url: &str, last: Option<&str>) -> (u16, String, std::sync::mpsc::Receiver<(String, String)>) {
    let (sender, receiver) = std::sync::mpsc::channel();
    let mut request = ureq::get(url)
        .header("accept", "text/event-stream")
        .header("authorization", &format!("Bearer {ACME}"))
        .config()
        .http_status_as_error(false)
        .build();
    if let Some(last) = last {
        request = request.header("last-event-id", last);
    }
    let (answer, answered) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead as _;
        let Ok(mut response) = request.call() else { return };
        let status = response.status().as_u16();
        if status != 200 {
            let _ = answer.send((status, response.body_mut().read_to_string().unwrap_or_default()));
            return;
        }
        let kind = response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
        let _ = answer.send((status, kind));
        let reader = std::io::BufReader::new(response.body_mut().as_reader());
        let mut id = String::new();
        for line in reader.lines() {
            let Ok(line) = line else { return };
            // A keep-alive comment: passed on, so that a watch dropped by
            // the test ends here and closes its connection.
            if line.starts_with(':') && sender.send((String::new(), String::new())).is_err() {
                return;
            }
            if let Some(value) = line.strip_prefix("id:") {
                id = value.trim().to_owned();
            } else if let Some(kind) = line.strip_prefix("event:")
                && sender.send((id.clone(), kind.trim().to_owned())).is_err()
            {
                return;
            }
        }
    });
    let (status, text) = answered.recv_timeout(std::time::Duration::from_secs(60)).expect("the watch answers");
    (status, text, receiver)
}

fn next(events: &std::sync::mpsc::Receiver<(String, String)>) -> (String, String) {
    loop {
        let event = events.recv_timeout(std::time::Duration::from_secs(60)).expect("an event within a minute");
        if !event.1.is_empty() {
            return event;
        }
    }
}

/// `?watch=true` streams the events recorded, then each new one as it is
/// recorded; `Last-Event-ID` goes on after one; a workspace holds at most
/// 16 watches open.
fn watching_events(base: &str, document: &Value, upstream_url: &str) {
    let sets = format!("{base}/v1/tool_sets");
    let body = json!({"metadata": {"name": "watched"}, "spec": {"adapter": {"mcp": {"url": upstream_url}}}});
    let reply = rest("POST", &sets, Some(ACME), Some(&body), &[]);
    assert_eq!(reply.status, 201, "{}", reply.body);
    let id = reply.body["metadata"]["id"].as_str().unwrap().to_owned();
    let url = format!("{sets}/{id}/events?watch=true");
    let (status, kind, events) = watch(&url, None);
    assert_eq!((status, kind.as_str()), (200, "text/event-stream"));
    let first = next(&events);
    assert_eq!(first.1, "sync_started");
    let second = next(&events);
    assert_eq!(second.1, "sync_completed");
    // A change syncs again: its events come on the open stream.
    let mut changed = body.clone();
    changed["spec"]["description"] = json!("changed");
    assert_eq!(rest("PUT", &format!("{sets}/{id}"), Some(ACME), Some(&changed), &[]).status, 200);
    let third = next(&events);
    assert_eq!(third.1, "sync_started");
    assert_eq!(next(&events).1, "sync_completed");
    // Reconnecting after the second goes on from the third.
    let (status, _, resumed) = watch(&url, Some(&second.0));
    assert_eq!(status, 200);
    assert_eq!(next(&resumed), third);
    drop((events, resumed));
    // A watch is bounded per workspace: the two above may hold their
    // places until the service next writes to them, so 14 to 16 more open
    // before one is refused.
    let mut open = Vec::new();
    let refusal = loop {
        let (status, text, events) = watch(&url, None);
        if status != 200 {
            break (status, text);
        }
        open.push(events);
        assert!(open.len() <= 16, "a 17th watch was let in");
    };
    assert!(open.len() >= 14, "refused after {} watches: {}", open.len(), refusal.1);
    assert_eq!(refusal.0, 429, "{}", refusal.1);
    assert_valid(document, "Error", &serde_json::from_str(&refusal.1).expect("a JSON refusal"));
    drop(open);
    // Each closes at its next keep-alive (15 s), and the service sees it
    // at its next write.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
    loop {
        let (status, text, _) = watch(&url, None);
        if status == 200 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no watch's place came back: {text}");
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
    for list in [sets.clone(), format!("{sets}/{id}/tools")] {
        let reply = rest("GET", &format!("{list}?watch=true"), Some(ACME), None, &[]);
        assert_eq!(reply.status, 400, "{list}: {}", reply.body);
        assert!(reply.body["error"]["message"].as_str().unwrap().contains("events"), "{}", reply.body);
    }
    for (query, says) in [("watch=maybe", "watch"), ("watch=true&pageToken=event_", "pageToken")] {
        let reply = rest("GET", &format!("{sets}/{id}/events?{query}"), Some(ACME), None, &[]);
        assert_eq!(reply.status, 400, "{query}: {}", reply.body);
        assert!(reply.body["error"]["message"].as_str().unwrap().contains(says), "{}", reply.body);
    }
    let reply = rest("GET", &url, Some(ACME), None, &[("last-event-id", "nonsense")]);
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert!(reply.body["error"]["message"].as_str().unwrap().contains("Last-Event-ID"), "{}", reply.body);
    assert_eq!(rest("DELETE", &format!("{sets}/{id}"), Some(ACME), None, &[]).status, 204);
}

/// The document, as `GET /v1/openapi.json` serves it (no token needed),
/// and what it describes.
pub(crate) fn the_document_lists_and_creates(base: &str, upstream_url: &str) {
    let reply = rest("GET", &format!("{base}/v1/openapi.json"), None, None, &[]);
    assert_eq!(reply.status, 200, "{}", reply.body);
    let document = reply.body;
    assert_eq!(document["openapi"], "3.1.0");
    models_as_the_spec_lists(&document);
    every_operation_is_routed(base, &document);
    lists(base, &document, upstream_url);
    idempotent_creates(base, &document, upstream_url);
    watching_events(base, &document, upstream_url);
}

/// openapi-python-client, pinned: the generator the client test runs.
const GENERATOR: &str = "openapi-python-client==0.29.1";

/// A client generated from the document the service serves, by a
/// generator from PyPI, creates an http tool set (retried with its
/// `Idempotency-Key`), adds a tool, and reads its tools and events; a
/// hostile header comes back as the API's error with its pointer.
fn a_generated_client_drives(store: &str, dir: &std::path::Path) {
    // Made once for both tests (they run side by side).
    static VENV: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    let venv = VENV.get_or_init(|| toolhost_tests::python_venv("openapi-client-venv", &[GENERATOR]));
    let api = "127.0.0.1:9";
    let config = crate::service::service_config(dir, store, api);
    let (_service, base) = crate::service::spawn_service(&config);
    let document = rest("GET", &format!("{base}/v1/openapi.json"), None, None, &[]).body;
    let spec = dir.join("openapi.json");
    std::fs::write(&spec, document.to_string()).unwrap();
    let generated = dir.join("client");
    // With the venv's programs first on PATH: the generator formats what
    // it writes with its own ruff.
    let path = format!("{}:{}", venv.display(), std::env::var("PATH").unwrap_or_default());
    let output = std::process::Command::new(venv.join("openapi-python-client"))
        .args(["generate", "--overwrite", "--path"])
        .arg(&spec)
        .arg("--output-path")
        .arg(&generated)
        .env("PATH", &path)
        .output()
        .expect("run openapi-python-client");
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{said}");
    assert!(!said.contains("Warning"), "the generator took the document with warnings: {said}");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi/client.py");
    let output = std::process::Command::new(venv.join("python"))
        .arg(script)
        .args([&base, ACME])
        .arg(&generated)
        .arg(format!("http://{api}"))
        .output()
        .expect("run the client");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    let report: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(report["statuses"], json!([201, 201]), "{report}");
    assert_eq!((&report["replayed"], &report["sameId"]), (&json!("true"), &json!(true)), "{report}");
    assert_eq!(report["mcpName"], "Weather_API", "{report}");
    assert_eq!(report["tool"], "Weather_API__forecast", "{report}");
    assert_eq!(report["tools"], json!(["forecast"]), "{report}");
    assert_eq!(report["nextPageToken"], Value::Null, "{report}");
    let events = report["events"].as_array().expect("events");
    assert!(!events.is_empty() && events.iter().all(|e| e.as_str().unwrap().starts_with("sync_")), "{report}");
    assert_eq!(report["refused"], json!({"error": true, "pointer": "/spec/config/http/headers/Host"}), "{report}");
    // What the client made is what the service holds.
    let id = report["toolSet"].as_str().unwrap();
    let sets = rest("GET", &format!("{base}/v1/tool_sets?name=Weather%20API"), Some(ACME), None, &[]).body;
    assert_eq!(sets["toolSets"].as_array().map(Vec::len), Some(1), "{sets}");
    let tools = rest("GET", &format!("{base}/v1/tool_sets/{id}/tools"), Some(ACME), None, &[]).body;
    assert_eq!(tools["tools"][0]["spec"]["config"]["http"]["query"], "city={city}", "{tools}");
}

#[test]
fn a_client_generated_from_the_served_document_works_on_sqlite() {
    let dir = crate::service::scratch("generated-sqlite");
    a_generated_client_drives(&format!("sqlite://{}", dir.join("tools.db").display()), &dir);
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn a_client_generated_from_the_served_document_works_on_postgresql() {
    let postgres = toolhost_tests::Postgres::start("generated");
    let dir = crate::service::scratch("generated-postgres");
    a_generated_client_drives(&postgres.url, &dir);
    std::fs::remove_dir_all(dir).ok();
}
