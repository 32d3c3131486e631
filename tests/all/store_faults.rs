//! The tool-set service's store under faults. `kill -9` of the service in
//! the middle of a stream of writes, again and again, on SQLite and on
//! PostgreSQL: after each restart the store opens cleanly, every write
//! the service answered is there, and nothing is half-written (each tool
//! set reads back whole, as it was answered or as the write that was cut
//! short left it). PostgreSQL stopped under the service: requests fail at
//! once with `503` and `Retry-After`, and the service recovers by itself
//! once it is back.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};

use crate::service::{ACME, eventually, exchange, rest, scratch, service_config, spawn_service};

/// What the service answered of one tool set: its id, the description it
/// acknowledged last, and the one of an update that was on its way when
/// the service went (which may or may not have been made).
#[derive(Debug, Clone)]
struct Answered {
    id: String,
    description: String,
    in_flight: Option<String>,
}

/// A tool set `name` described as `description`, whose server is an
/// address that refuses connections (its sync fails at once, and is
/// recorded as failed: the writes are what is under test).
fn tool_set(name: &str, description: &str) -> Value {
    json!({"metadata": {"name": name},
           "spec": {"description": description, "adapter": {"mcp": {"url": "http://127.0.0.1:1/mcp"}}}})
}

/// A write as ACME that may find the service gone: its status and JSON
/// body, or `None`.
fn try_write(method: &str, url: &str, body: &Value, if_match: Option<&str>) -> Option<(u16, Value)> {
    let headers: Vec<(&str, &str)> = if_match.map(|version| ("if-match", version)).into_iter().collect();
    let (status, _, text) = exchange(method, url, Some(ACME), Some(body), &headers)?;
    Some((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
}

/// Create tool sets `r{round}-{i}`, and update every third once, until the
/// service stops answering: what it answered, by name. `acknowledged`
/// counts the answered writes as they come.
fn write_until_gone(base: &str, round: usize, acknowledged: &AtomicUsize) -> BTreeMap<String, Answered> {
    let sets = format!("{base}/v1/tool_sets");
    let mut answered: BTreeMap<String, Answered> = BTreeMap::new();
    for i in 0.. {
        let name = format!("r{round}-{i}");
        let description = format!("{name} as created");
        match try_write("POST", &sets, &tool_set(&name, &description), None) {
            Some((201, body)) => {
                let id = body["metadata"]["id"].as_str().expect("an id").to_owned();
                answered.insert(name.clone(), Answered { id, description, in_flight: None });
                acknowledged.fetch_add(1, Ordering::SeqCst);
            }
            Some((status, body)) => panic!("a create answered {status}: {body}"),
            None => return answered,
        }
        if i % 3 != 0 {
            continue;
        }
        let changed = format!("{name} as changed");
        let entry = answered.get_mut(&name).expect("just created");
        entry.in_flight = Some(changed.clone());
        let url = format!("{sets}/{}", entry.id);
        match try_write("PUT", &url, &tool_set(&name, &changed), Some("\"1\"")) {
            Some((200, _)) => {
                entry.description = changed;
                entry.in_flight = None;
                acknowledged.fetch_add(1, Ordering::SeqCst);
            }
            Some((status, body)) => panic!("an update answered {status}: {body}"),
            None => return answered,
        }
    }
    unreachable!()
}

/// Rounds of writes, each ended by `kill -9` of the service after a
/// different number of answered writes, on `store`; then every answered
/// write is checked on the restarted service.
fn kill_and_check(store: &str, dir: &std::path::Path) {
    let config = service_config(dir, store, "127.0.0.1:1");
    let mut all: BTreeMap<String, Answered> = BTreeMap::new();
    for round in 0..5 {
        let (mut service, base) = spawn_service(&config);
        let acknowledged = Arc::new(AtomicUsize::new(0));
        let writer = {
            let (base, acknowledged) = (base.clone(), Arc::clone(&acknowledged));
            std::thread::spawn(move || write_until_gone(&base, round, &acknowledged))
        };
        // Killed after 3 to 15 answered writes (a write is on its way
        // then, most often: the writer never waits).
        let target = 3 + (round * 7) % 13;
        eventually("writes answered before the kill", || acknowledged.load(Ordering::SeqCst) >= target);
        service.0.kill().expect("kill -9 the service");
        service.0.wait().expect("reap it");
        let answered = writer.join().expect("the writer");
        assert!(answered.len() >= target.div_ceil(2), "round {round}: {answered:?}");
        all.extend(answered);
        // Restarted on the same store: it opens, and everything answered
        // so far (in every round) reads back whole.
        let (_service, base) = spawn_service(&config);
        check_all(&base, &all, round);
    }
}

/// Every answered tool set reads back as answered (or as the write that
/// was cut short left it), and the list holds them all.
fn check_all(base: &str, all: &BTreeMap<String, Answered>, round: usize) {
    for (name, answered) in all {
        let reply = rest("GET", &format!("{base}/v1/tool_sets/{}", answered.id), Some(ACME), None, &[]);
        assert_eq!(reply.status, 200, "round {round}: {name} lost: {}", reply.body);
        assert_eq!(reply.body["metadata"]["name"], name.as_str(), "{}", reply.body);
        let description = reply.body["spec"]["description"].as_str().expect("a description");
        let allowed = [Some(answered.description.as_str()), answered.in_flight.as_deref()];
        assert!(allowed.contains(&Some(description)), "round {round}: {name} reads {description:?}: {answered:?}");
    }
    let mut listed = 0;
    let mut page = String::new();
    loop {
        let url = format!("{base}/v1/tool_sets?pageSize=100{page}");
        let reply = rest("GET", &url, Some(ACME), None, &[]);
        assert_eq!(reply.status, 200, "{}", reply.body);
        listed += reply.body["toolSets"].as_array().map_or(0, Vec::len);
        match reply.body["nextPageToken"].as_str().filter(|t| !t.is_empty()) {
            Some(token) => page = format!("&pageToken={token}"),
            None => break,
        }
    }
    assert!(listed >= all.len(), "round {round}: {listed} listed of {} answered", all.len());
}

#[test]
fn no_answered_write_is_lost_when_the_service_is_killed_on_sqlite() {
    let dir = scratch("kill-sqlite");
    kill_and_check(&format!("sqlite://{}", dir.join("tools.db").display()), &dir);
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn no_answered_write_is_lost_when_the_service_is_killed_on_postgresql() {
    let postgres = toolhost_tests::Postgres::start("kill");
    let dir = scratch("kill-postgres");
    kill_and_check(&postgres.url, &dir);
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn a_stopped_postgresql_is_answered_503_with_retry_after_and_the_service_recovers() {
    let postgres = toolhost_tests::Postgres::start("restart");
    let dir = scratch("pg-restart");
    let config = service_config(&dir, &postgres.url, "127.0.0.1:1");
    let (_service, base) = spawn_service(&config);
    let sets = format!("{base}/v1/tool_sets");
    let reply = rest("POST", &sets, Some(ACME), Some(&tool_set("before", "made before the outage")), &[]);
    assert_eq!(reply.status, 201, "{}", reply.body);
    let id = reply.body["metadata"]["id"].as_str().expect("an id").to_owned();

    postgres.stop();
    for (method, body) in [("GET", None), ("POST", Some(tool_set("during", "made during the outage")))] {
        let reply = rest(method, &sets, Some(ACME), body.as_ref(), &[]);
        assert_eq!(reply.status, 503, "{method} while PostgreSQL is down: {}", reply.body);
        assert_eq!(reply.header("retry-after"), "1", "{method}");
        let message = reply.body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("the store cannot be reached"), "{}", reply.body);
    }

    postgres.start_again();
    // Back by itself: no restart of the service, no request refused for
    // ever after.
    eventually("the service reading its store again", || {
        rest("GET", &format!("{sets}/{id}"), Some(ACME), None, &[]).status == 200
    });
    let reply = rest("POST", &sets, Some(ACME), Some(&tool_set("after", "made after the outage")), &[]);
    assert_eq!(reply.status, 201, "{}", reply.body);
    std::fs::remove_dir_all(dir).ok();
}
