//! The tool-set service's web console (`/ui`) in a real browser: Debian's
//! headless Chromium, driven over the DevTools protocol by playwright-core
//! (from npm, pinned; it downloads no browser of its own). It signs in,
//! creates a tool set, sees its tools appear and filters one out, and a
//! tool whose description is markup stays text. The SQLite run saves the
//! screenshot the book shows (written into the book when
//! `TOOLHOST_UPDATE_DOCS` is set).

use serde_json::{Value, json};

use crate::service::{ACME, mcp_tools, rest, scratch, service_config_reaching, spawn_service, upstream};

/// playwright-core, pinned.
const PLAYWRIGHT: &str = "playwright-core@1.64.1";
/// Debian's Chromium.
const CHROMIUM: &str = "/usr/bin/chromium";

fn console(store: &str, dir: &std::path::Path, screenshot: &std::path::Path) {
    assert!(
        std::path::Path::new(CHROMIUM).exists(),
        "the console test needs Debian's Chromium: apt-get install chromium"
    );
    let (_upstream, upstream_url) = upstream();
    let upstream_host = upstream_url.trim_start_matches("http://").trim_end_matches("/mcp").to_owned();
    let config = service_config_reaching(dir, store, &[&upstream_host, "127.0.0.1:9"]);
    let (_service, base) = spawn_service(&config);
    // A tool set whose tool a hostile author described with markup.
    let sets = format!("{base}/v1/tool_sets");
    let markup =
        json!({"metadata": {"name": "Markup"}, "spec": {"adapter": {"http": {"baseUrl": "http://127.0.0.1:9"}}}});
    let reply = rest("POST", &sets, Some(ACME), Some(&markup), &[]);
    assert_eq!(reply.status, 201, "{}", reply.body);
    let id = reply.body["metadata"]["id"].as_str().unwrap().to_owned();
    let hostile = "<img src=x onerror=\"window.pwned=true\">Loud";
    let tool = json!({"metadata": {"name": "shout"}, "spec": {"description": hostile,
        "parameters": {"type": "object"}, "config": {"http": {"requestMethod": "GET", "path": "/shout"}}}});
    assert_eq!(rest("POST", &format!("{sets}/{id}/tools"), Some(ACME), Some(&tool), &[]).status, 201);

    static NODE: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    let npm = NODE.get_or_init(|| toolhost_tests::npm_install("console-browser", &[PLAYWRIGHT]));
    // Beside its node_modules, where `import "playwright-core"` finds it.
    let script = npm.join("console.mjs");
    std::fs::copy(concat!(env!("CARGO_MANIFEST_DIR"), "/console/console.mjs"), &script).expect("copy the script");
    let output = std::process::Command::new("node")
        .arg(&script)
        .args([&base, ACME, &upstream_url])
        .arg(screenshot)
        .env("CHROMIUM", CHROMIUM)
        .output()
        .expect("run node");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    let report: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));

    assert!(report["wrongToken"].as_str().unwrap().contains("401 UNAUTHENTICATED"), "{report}");
    let tools: Vec<&str> = report["tools"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    for tool in ["add", "divide", "multiply", "subtract"] {
        assert!(tools.contains(&tool), "{report}");
    }
    assert!(report["summary"].as_str().unwrap().contains("MCP prefix Pocket_Calculator"), "{report}");
    assert_eq!(report["divideServed"], "no", "{report}");
    assert!(report["events"].as_array().unwrap().contains(&json!("sync_completed")), "{report}");
    // The calculator's answer, held back until the other set was shown,
    // replaced nothing.
    assert_eq!(report["afterStale"], json!(["shout"]), "{report}");
    assert_eq!(report["markup"], json!({"text": hostile, "images": 0, "ran": false}), "{report}");
    assert_eq!(report["errors"], json!([]), "{report}");
    // What the page did, the service holds, and MCP clients see.
    let listed = mcp_tools(&format!("{base}/mcp"), ACME);
    assert!(listed.contains(&"Pocket_Calculator__add".to_owned()), "{listed:?}");
    assert!(!listed.contains(&"Pocket_Calculator__divide".to_owned()), "{listed:?}");
    let png = std::fs::read(screenshot).expect("the screenshot");
    assert!(png.starts_with(b"\x89PNG") && png.len() > 20_000, "{} bytes", png.len());
}

#[test]
fn the_console_signs_in_creates_a_tool_set_and_edits_its_tools_in_chromium_on_sqlite() {
    let dir = scratch("console-sqlite");
    let screenshot = match std::env::var_os("TOOLHOST_UPDATE_DOCS") {
        Some(_) => std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/src/images/console.png"),
        None => dir.join("console.png"),
    };
    std::fs::create_dir_all(screenshot.parent().unwrap()).unwrap();
    console(&format!("sqlite://{}", dir.join("tools.db").display()), &dir, &screenshot);
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn the_console_signs_in_creates_a_tool_set_and_edits_its_tools_in_chromium_on_postgresql() {
    let postgres = toolhost_tests::Postgres::start("console");
    let dir = scratch("console-postgres");
    console(&postgres.url, &dir, &dir.join("console.png"));
    std::fs::remove_dir_all(dir).ok();
}
