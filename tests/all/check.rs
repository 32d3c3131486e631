//! `toolhost check`: conformance of plugins, with generated arguments.

use std::process::Output;

use serde_json::Value;
use toolhost_tests::{example, fixture, json_stdout, run_toolhost};

fn check(plugin: std::path::PathBuf, extra: &[&str]) -> Output {
    let plugin = plugin.to_string_lossy().into_owned();
    let mut args = vec!["check", plugin.as_str()];
    args.extend_from_slice(extra);
    run_toolhost(&args, None)
}

fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// The tool's entry of a `--json` report.
fn tool<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["tools"]
        .as_array()
        .and_then(|tools| tools.iter().find(|t| t["tool"] == name))
        .unwrap_or_else(|| panic!("no tool {name} in {report}"))
}

#[test]
fn every_example_plugin_passes() {
    for name in ["calculator", "clock", "doorbell", "text"] {
        let output = check(example(name), &[]);
        assert_eq!(output.status.code(), Some(0), "{name}: {}", text(&output));
        assert!(String::from_utf8_lossy(&output.stdout).contains("\npassed: "), "{name}: {}", text(&output));

        let report = json_stdout(&check(example(name), &["--json"]));
        assert_eq!(report["passed"], true, "{name}: {report}");
        for entry in report["tools"].as_array().expect("tools") {
            let calls = entry["calls"].as_u64().expect("calls");
            assert!(calls >= 1, "{name}: a tool was not called: {entry}");
            assert_eq!(entry["passed"].as_u64(), Some(calls), "{name}: {entry}");
        }
    }
}

#[test]
fn the_calculator_gets_valid_and_invalid_arguments() {
    let report = json_stdout(&check(example("calculator"), &["--json", "--samples", "6"]));
    // 6 valid calls and 3 invalid ones (missing `a`, missing `b`, wrong
    // types...) per tool.
    assert_eq!(tool(&report, "add")["calls"], 9, "{report}");
}

#[test]
fn a_trap_on_valid_input_and_a_broken_output_schema_fail_the_check() {
    let output = check(fixture("nonconforming"), &[]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("mean: on valid arguments: the plugin trapped")
            && stdout.contains(r#"arguments: {"values":[]}"#),
        "{stdout}"
    );
    assert!(
        stdout.contains("stats: on valid arguments: the result is invalid: at /structuredContent/count:"),
        "{stdout}"
    );
    assert!(
        stdout.contains("shout: on arguments without the required property `text`: the plugin trapped"),
        "{stdout}"
    );
    assert!(stdout.contains("FAILED: "), "{stdout}");

    let report = json_stdout(&check(fixture("nonconforming"), &["--json"]));
    assert_eq!(report["passed"], false);
    assert_eq!(tool(&report, "echo")["failures"], serde_json::json!([]), "{report}");
    let mean = tool(&report, "mean")["failures"].as_array().expect("failures").clone();
    assert_eq!(mean.len(), 1, "only the empty list traps: {mean:?}");
    assert_eq!(mean[0]["arguments"], serde_json::json!({"values": []}));
    assert_eq!(mean[0]["validArguments"], true);
    let stats = tool(&report, "stats");
    assert_eq!(stats["passed"], 0, "every stats result breaks the outputSchema: {stats}");
    let shout = tool(&report, "shout")["failures"].as_array().expect("failures").clone();
    assert!(!shout.is_empty() && shout.iter().all(|f| f["validArguments"] == false), "{shout:?}");
}

#[test]
fn the_seed_makes_the_check_reproducible() {
    // `stats` fails on every call, so its failures list every call's
    // arguments.
    let arguments = |seed: &str| -> Vec<Value> {
        let report = json_stdout(&check(fixture("nonconforming"), &["--json", "--seed", seed]));
        tool(&report, "stats")["failures"]
            .as_array()
            .expect("failures")
            .iter()
            .map(|f| f["arguments"].clone())
            .collect()
    };
    let first = arguments("7");
    assert_eq!(first, arguments("7"));
    assert_ne!(first, arguments("8"));
}

#[test]
fn a_plugin_that_does_not_load_fails_with_exit_3() {
    // `scripted` describes itself from config: without it, describe fails.
    let output = check(fixture("scripted"), &[]);
    assert_eq!(output.status.code(), Some(3), "{}", text(&output));
    assert!(text(&output).contains("config key `describe` is not set"), "{}", text(&output));

    let bad = serde_json::json!({"tools": [{"name": "bad name!", "inputSchema": {"type": "object"}}]}).to_string();
    let output = check(fixture("scripted"), &["--json", "--set", &format!("describe={bad}")]);
    assert_eq!(output.status.code(), Some(3), "{}", text(&output));
    let report = json_stdout(&output);
    assert_eq!(report["passed"], false);
    assert!(report["problems"][0].as_str().is_some_and(|p| p.contains("/tools/0/name")), "{report}");
}

/// A schema that asks for 10^15 items or characters makes its tool
/// uncheckable, with a clear message; it does not abort the process.
#[test]
fn huge_minimums_make_a_tool_uncheckable_not_a_crash() {
    let describe = serde_json::json!({"tools": [
        {"name": "long", "inputSchema": {"type": "object", "properties": {"s": {"type": "string", "minLength": 1_000_000_000_000_000u64}}, "required": ["s"]}},
        {"name": "many", "inputSchema": {"type": "object", "properties": {"xs": {"type": "array", "minItems": 1_000_000_000_000_000u64}}, "required": ["xs"]}},
        {"name": "fine", "inputSchema": {"type": "object"}}
    ]})
    .to_string();
    let config = [format!("describe={describe}"), r#"result={"content":[]}"#.to_owned()];
    let output = check(fixture("scripted"), &["--set", &config[0], "--set", &config[1]]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("long: uncheckable: the inputSchema asks for `minLength` 1000000000000000, more than toolhost check generates (65536 characters)"),
        "{stdout}"
    );
    assert!(stdout.contains("many: uncheckable: the inputSchema asks for `minItems` 1000000000000000"), "{stdout}");

    let report = json_stdout(&check(fixture("scripted"), &["--json", "--set", &config[0], "--set", &config[1]]));
    assert_eq!(tool(&report, "long")["calls"], 0, "{report}");
    assert_eq!(tool(&report, "fine")["failures"], serde_json::json!([]), "{report}");
    assert!(tool(&report, "fine")["calls"].as_u64().is_some_and(|n| n > 0), "{report}");
}
