//! `toolhost toolsets`: an operator's client of a running tool-set service,
//! against a real `toolhost serve` on SQLite and on PostgreSQL: apply a
//! file (again: nothing changes; changed: an update), list with selectors,
//! get, tools, events (and following them as they are recorded), delete,
//! and the exit codes of a refusal and of a service out of reach.

use std::io::BufRead as _;

use serde_json::{Value, json};

use crate::service::{ACME, scratch, service_config, spawn_service};

/// `toolhost toolsets ARGS` against `base` as ACME: exit code, stdout, stderr.
fn toolsets(base: &str, args: &[&str], stdin: Option<&str>) -> (i32, String, String) {
    let mut full = vec!["toolsets"];
    full.extend_from_slice(args);
    let env = [("TOOLHOST_SERVICE_URL", base), ("TOOLHOST_TOKEN", ACME)];
    let output = toolhost_tests::run_toolhost_with_env(&full, stdin, &env);
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (output.status.code().unwrap_or(-1), text(&output.stdout), text(&output.stderr))
}

fn ok(base: &str, args: &[&str]) -> String {
    let (code, stdout, stderr) = toolsets(base, args, None);
    assert_eq!(code, 0, "toolsets {args:?}: {stdout}{stderr}");
    stdout
}

/// The first column of each row of a table whose first column is `first`.
fn actions(table: &str) -> Vec<(String, String)> {
    table
        .lines()
        .skip(1)
        .map(|line| {
            let cells: Vec<&str> = line.split("  ").filter(|c| !c.trim().is_empty()).map(str::trim).collect();
            (cells[0].to_owned(), cells.last().unwrap().to_string())
        })
        .collect()
}

fn file(labels: Value) -> String {
    json!({"toolSets": [
        {"metadata": {"name": "Weather API", "labels": labels},
         "spec": {"description": "Forecasts", "adapter": {"http": {"baseUrl": "http://127.0.0.1:9"}}},
         "tools": [{"metadata": {"name": "forecast"},
                    "spec": {"description": "The forecast for a city",
                             "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                             "config": {"http": {"requestMethod": "GET", "path": "/forecast", "query": "city={city}"}}}}]},
        {"metadata": {"name": "Empty", "labels": {"team": "platform"}}, "spec": {"description": "Nothing yet"}},
    ]})
    .to_string()
}

fn drive(store: &str, dir: &std::path::Path) {
    let config = service_config(dir, store, "127.0.0.1:9");
    let (_service, base) = spawn_service(&config);
    let path = dir.join("sets.json");
    std::fs::write(&path, file(json!({"team": "forecasts"}))).unwrap();
    let path = path.display().to_string();
    let applied = actions(&ok(&base, &["apply", "-f", &path]));
    let expected = |action: &str| {
        vec![
            (action.to_owned(), "Weather API".to_owned()),
            (action.to_owned(), "forecast".to_owned()),
            (action.to_owned(), "Empty".to_owned()),
        ]
    };
    assert_eq!(applied, expected("created"));
    assert_eq!(actions(&ok(&base, &["apply", "-f", &path])), expected("unchanged"));
    // From standard input, with a label changed: that tool set is updated.
    let changed = file(json!({"team": "forecasts", "tier": "gold"}));
    let (code, stdout, stderr) = toolsets(&base, &["apply", "-f", "-"], Some(&changed));
    assert_eq!(code, 0, "{stdout}{stderr}");
    let applied = actions(&stdout);
    assert_eq!(applied[0], ("updated".to_owned(), "Weather API".to_owned()), "{stdout}");
    assert_eq!(applied[1].0, "unchanged", "{stdout}");

    let listed = ok(&base, &["list"]);
    assert!(listed.starts_with("ID") && listed.contains("Weather API") && listed.contains("Empty"), "{listed}");
    assert!(listed.contains("completed (1 tools)") && listed.contains("completed (0 tools)"), "{listed}");
    let gold = ok(&base, &["list", "-l", "tier=gold"]);
    assert!(gold.contains("Weather API") && !gold.contains("Empty"), "{gold}");
    let all: Value = serde_json::from_str(&ok(&base, &["list", "--json"])).expect("JSON");
    assert_eq!(all.as_array().map(Vec::len), Some(2), "{all}");

    let got = ok(&base, &["get", "Weather API"]);
    assert!(got.contains("forecast  available  yes") && got.contains("Weather_API__forecast"), "{got}");
    let tools: Value = serde_json::from_str(&ok(&base, &["tools", "Weather API", "--json"])).expect("JSON");
    assert_eq!(tools[0]["spec"]["config"]["http"]["query"], "city={city}", "{tools}");
    let events = ok(&base, &["events", "Weather API"]);
    assert!(events.contains("sync_completed") && events.contains("alice"), "{events}");

    // Following the events: those recorded, then a change's as they come.
    let mut watcher = std::process::Command::new(toolhost_tests::toolhost())
        .args(["toolsets", "events", "Weather API", "--watch", "--json"])
        .env("TOOLHOST_SERVICE_URL", &base)
        .env("TOOLHOST_TOKEN", ACME)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the watch");
    let (sender, lines) = std::sync::mpsc::channel();
    let stdout = watcher.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            if sender.send(line).is_err() {
                return;
            }
        }
    });
    let mut seen = Vec::new();
    let wait_for = |count: usize, seen: &mut Vec<Value>| {
        while seen.len() < count {
            let line = lines.recv_timeout(std::time::Duration::from_secs(60)).expect("an event within a minute");
            seen.push(serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}")));
        }
    };
    let before = events.lines().count() - 1;
    wait_for(before, &mut seen);
    let changed = file(json!({"team": "forecasts"}));
    let (code, stdout, stderr) = toolsets(&base, &["apply", "-f", "-"], Some(&changed));
    assert_eq!(code, 0, "{stdout}{stderr}");
    wait_for(before + 2, &mut seen);
    let kinds: Vec<&Value> = seen[before..].iter().map(|e| &e["event"]["type"]).collect();
    assert_eq!(kinds, [&json!("sync_started"), &json!("sync_completed")], "{seen:?}");
    watcher.kill().ok();
    watcher.wait().ok();

    // Refusals: nothing of that name, a body the API refuses (with where),
    // a bad token; and a service out of reach.
    let (code, _, stderr) = toolsets(&base, &["get", "Nothing"], None);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("no tool set named `Nothing`"), "{stderr}");
    let hostile = json!({"metadata": {"name": "Hostile"}, "spec": {"adapter": {"http": {
        "baseUrl": "http://127.0.0.1:9", "headers": {"Host": "internal.example"}}}}});
    let (code, _, stderr) = toolsets(&base, &["create", "-f", "-"], Some(&hostile.to_string()));
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("400 INVALID_ARGUMENT") && stderr.contains("/spec/adapter/http/headers/Host: "),
        "{stderr}"
    );
    let output =
        toolhost_tests::run_toolhost_with_env(&["toolsets", "list", "--url", &base, "--token", "not-a-key"], None, &[]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("401 UNAUTHENTICATED"));
    let output = toolhost_tests::run_toolhost_with_env(
        &["toolsets", "list", "--url", "http://127.0.0.1:9", "--token", ACME],
        None,
        &[],
    );
    assert_eq!(output.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&output.stderr).contains("cannot reach the service"));

    let deleted = ok(&base, &["delete", "Empty", "Weather API"]);
    assert_eq!(deleted.lines().count(), 2, "{deleted}");
    assert!(deleted.lines().all(|l| l.starts_with("deleted toolset_")), "{deleted}");
    let all: Value = serde_json::from_str(&ok(&base, &["list", "--json"])).expect("JSON");
    assert_eq!(all, json!([]));
}

#[test]
fn the_toolsets_command_manages_a_running_service_on_sqlite() {
    let dir = scratch("cli-sqlite");
    drive(&format!("sqlite://{}", dir.join("tools.db").display()), &dir);
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn the_toolsets_command_manages_a_running_service_on_postgresql() {
    let postgres = toolhost_tests::Postgres::start("cli");
    let dir = scratch("cli-postgres");
    drive(&postgres.url, &dir);
    std::fs::remove_dir_all(dir).ok();
}

/// A service setting that is wrong is said once, with where it is.
#[test]
fn a_bad_service_setting_is_reported_once() {
    let dir = scratch("cli-bad-setting");
    let config = service_config(&dir, &format!("sqlite://{}", dir.join("tools.db").display()), "127.0.0.1:*");
    let output = toolhost_tests::run_toolhost_with_env(
        &["serve", "--http", "127.0.0.1:0", "--config", &config.display().to_string()],
        None,
        &[("ACME_KEY", ACME), ("ACME_BOT_KEY", ACME), ("GLOBEX_KEY", ACME)],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.matches("invalid host pattern `127.0.0.1:*`").count(), 1, "{stderr}");
    assert!(stderr.contains("serve.service: allowedHosts: "), "{stderr}");
    std::fs::remove_dir_all(dir).ok();
}
