//! The `toolhost` command line: output, exit codes and messages.

use std::process::Output;

use toolhost_tests::{example, fixture, json_stdout, run_toolhost as run, run_toolhost_with_env};

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn path(p: std::path::PathBuf) -> String {
    p.to_string_lossy().into_owned()
}

/// `toolhost --help` and every command's help fit a terminal (at most 50
/// lines of at most 100 columns), and `--help` says no more than `-h`: the
/// long prose is in the book.
#[test]
fn help_fits_a_terminal() {
    let commands = ["describe", "call", "serve", "check", "bench", "new", "build", "tools"];
    for command in std::iter::once(None).chain(commands.map(Some)) {
        let args = |flag: &'static str| -> Vec<&str> { command.into_iter().chain([flag]).collect() };
        let long = run(&args("--help"), None);
        assert_eq!(long.status.code(), Some(0), "{}", stderr(&long));
        let text = String::from_utf8_lossy(&long.stdout).into_owned();
        let widest = text.lines().map(|line| line.chars().count()).max().unwrap_or(0);
        assert!(text.lines().count() <= 50 && widest <= 100, "toolhost {command:?} --help is too big:\n{text}");
        let short = run(&args("-h"), None);
        assert_eq!(String::from_utf8_lossy(&short.stdout), text, "toolhost {command:?}: -h and --help differ");
    }
}

/// `--version` names the version and the features built in; `-V` the
/// version alone.
#[test]
fn version_names_the_features() {
    let long = run(&["--version"], None);
    assert_eq!(long.status.code(), Some(0), "{}", stderr(&long));
    let text = String::from_utf8_lossy(&long.stdout);
    let version = format!("toolhost {}", env!("CARGO_PKG_VERSION"));
    assert!(text.starts_with(&format!("{version}\n")), "{text}");
    for feature in [
        "library features: component, http, wasi-http, https, oci, signatures, cache",
        "mcp features: stdio, http, client",
    ] {
        assert!(text.contains(feature), "`{feature}` missing from:\n{text}");
    }
    let short = run(&["-V"], None);
    assert_eq!(String::from_utf8_lossy(&short.stdout), format!("{version}\n"));
}

#[test]
fn describe_prints_the_list_tools_result() {
    let output = run(&["describe", &path(example("calculator"))], None);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let described = json_stdout(&output);
    let names: Vec<&str> =
        described["tools"].as_array().expect("tools").iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["add", "subtract", "multiply", "divide"]);
    assert_eq!(described["tools"][0]["inputSchema"]["type"], "object");
}

#[test]
fn call_prints_the_result_and_exits_0() {
    let output = run(&["call", &path(example("calculator")), "add", r#"{"a":2,"b":3}"#], None);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let result = json_stdout(&output);
    assert_eq!(result["content"][0], serde_json::json!({"type": "text", "text": "5"}));
    assert_eq!(result["structuredContent"]["result"], 5.0);
}

#[test]
fn arguments_come_from_a_file_or_stdin() {
    let dir = std::env::temp_dir().join(format!("toolhost-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("args.json");
    std::fs::write(&file, r#"{"a": 10, "b": 4}"#).expect("write args");
    let calculator = path(example("calculator"));

    let from_file = run(&["call", &calculator, "subtract", "--args-file", &path(file)], None);
    assert_eq!(json_stdout(&from_file)["content"][0]["text"], "6");
    let from_stdin = run(&["call", &calculator, "multiply", "-"], Some(r#"{"a": 10, "b": 4}"#));
    assert_eq!(json_stdout(&from_stdin)["content"][0]["text"], "40");
    let from_stdin_flag = run(&["call", &calculator, "divide", "--args-file", "-"], Some(r#"{"a": 10, "b": 4}"#));
    assert_eq!(json_stdout(&from_stdin_flag)["content"][0]["text"], "2.5");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn a_tool_error_exits_1_and_still_prints_the_result() {
    let output = run(&["call", &path(example("calculator")), "divide", r#"{"a":1,"b":0}"#], None);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let result = json_stdout(&output);
    assert_eq!(result["isError"], true);
    assert_eq!(result["content"][0]["text"], "cannot divide by zero");
}

#[test]
fn an_unknown_tool_exits_2_naming_it_and_the_tools_that_exist() {
    let output = run(&["call", &path(example("calculator")), "modulo", "{}"], None);
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
    let message = stderr(&output);
    assert!(message.contains("no tool `modulo`"), "{message}");
    assert!(message.contains("`add`, `divide`, `multiply`, `subtract`"), "{message}");
}

#[test]
fn usage_errors_exit_2() {
    let calculator = path(example("calculator"));
    let bad_json = run(&["call", &calculator, "add", "{not json"], None);
    assert_eq!(bad_json.status.code(), Some(2));
    assert!(stderr(&bad_json).contains("not valid JSON"), "{}", stderr(&bad_json));

    let not_object = run(&["call", &calculator, "add", "[1,2]"], None);
    assert_eq!(not_object.status.code(), Some(2));
    assert!(stderr(&not_object).contains("must be a JSON object"), "{}", stderr(&not_object));

    let missing_file = run(&["describe", "/nonexistent/plugin.wasm"], None);
    assert_eq!(missing_file.status.code(), Some(2));
    assert!(stderr(&missing_file).contains("cannot read plugin file"), "{}", stderr(&missing_file));

    let no_command = run(&[], None);
    assert_eq!(no_command.status.code(), Some(2));
}

#[test]
fn a_plugin_that_traps_exits_3_and_says_so() {
    let output = run(&["call", &path(fixture("hostile")), "panic"], None);
    assert_eq!(output.status.code(), Some(3));
    assert!(output.stdout.is_empty());
    let message = stderr(&output);
    assert!(message.contains("plugin `hostile` failed in tool `panic`: the plugin trapped"), "{message}");
    assert_eq!(message.lines().count(), 1, "{message}");
}

#[test]
fn invalid_plugin_output_exits_3() {
    let output = run(&["call", &path(fixture("hostile")), "not_json"], None);
    assert_eq!(output.status.code(), Some(3));
    assert!(stderr(&output).contains("returned invalid output"), "{}", stderr(&output));
}

#[test]
fn arguments_that_break_the_schema_exit_2_naming_each_pointer() {
    let output = run(&["call", &path(example("calculator")), "add", r#"{"a":"two"}"#], None);
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
    let message = stderr(&output);
    let lines: Vec<&str> = message.lines().collect();
    assert_eq!(lines.len(), 3, "{message}");
    assert!(lines[0].contains("invalid arguments for tool `add`") && lines[0].contains("did not run"), "{message}");
    assert!(lines[1].contains("at /a:") && lines[1].contains("(type)"), "{message}");
    assert!(lines[2].contains("at /b:") && lines[2].contains("(required)"), "{message}");
}

fn scripted_tool(output_schema: &str) -> String {
    format!(
        r#"describe={{"tools":[{{"name":"t","description":"d","inputSchema":{{"type":"object"}},"outputSchema":{output_schema}}}]}}"#
    )
}

#[test]
fn output_that_breaks_the_output_schema_exits_3_with_the_pointer() {
    let describe = scripted_tool(r#"{"type":"object","properties":{"count":{"type":"integer"}}}"#);
    let result = r#"result={"content":[],"structuredContent":{"count":"many"}}"#;
    let output = run(&["call", "--set", &describe, "--set", result, &path(fixture("scripted")), "t"], None);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(message.starts_with("error: plugin `scripted` returned invalid output from tool `t`:"), "{message}");
    assert!(message.contains("at /structuredContent/count: \"many\" is not of type \"integer\" (type)"), "{message}");
}

#[test]
fn a_describe_with_three_problems_lists_all_three() {
    let describe = r#"describe={"tools":[
        {"name":"bad name","description":"d","inputSchema":{"type":"object"}},
        {"name":"t","description":"d","inputSchema":{"type":"string"}},
        {"name":"u","description":"d","inputSchema":{"type":"object","properties":{"a":{"$ref":"https://example.com/a.json"}}}}
    ]}"#;
    let output = run(&["describe", "--set", describe, &path(fixture("scripted"))], None);
    assert_eq!(output.status.code(), Some(3));
    let message = stderr(&output);
    let lines: Vec<&str> = message.lines().collect();
    assert_eq!(lines[0], "error: plugin `scripted` describes its tools wrongly (3 problems):", "{message}");
    assert_eq!(lines.len(), 4, "{message}");
    assert!(lines[1].contains("tool `bad name`: at /tools/0/name"), "{message}");
    assert!(lines[2].contains("tool `t`: at /tools/1/inputSchema/type"), "{message}");
    assert!(
        lines[3].contains("tool `u`: at /tools/2/inputSchema: external $ref to `https://example.com/a.json` refused"),
        "{message}"
    );

    // --lenient loads what is valid and warns about the rest.
    let lenient = run(&["describe", "--lenient", "--set", describe, &path(fixture("scripted"))], None);
    assert_eq!(lenient.status.code(), Some(0), "{}", stderr(&lenient));
    assert_eq!(json_stdout(&lenient)["tools"], serde_json::json!([]));
    assert_eq!(stderr(&lenient).lines().filter(|l| l.starts_with("warning: ")).count(), 3);
}

#[test]
fn a_spinning_plugin_is_stopped_at_the_timeout_and_exits_3() {
    // Build the binary (when the test run has not) before the clock starts.
    toolhost_tests::toolhost();
    let start = std::time::Instant::now();
    let output = run(&["call", "--timeout", "500ms", &path(fixture("hostile")), "spin", "{}"], None);
    let elapsed = start.elapsed();
    assert_eq!(output.status.code(), Some(3));
    let message = stderr(&output);
    assert!(message.contains("plugin `hostile` failed in tool `spin`: the call timed out"), "{message}");
    // Generous: it only tells "stopped" from "ran on" (the spin never ends).
    assert!(elapsed < std::time::Duration::from_secs(25), "took {elapsed:?}");
}

#[test]
fn a_memory_hog_hits_the_limit_and_exits_3() {
    let output = run(&["call", "--memory-limit", "32MiB", &path(fixture("hostile")), "hog", "{}"], None);
    assert_eq!(output.status.code(), Some(3));
    let message = stderr(&output);
    assert!(message.contains("tool `hog`: the memory limit was hit"), "{message}");
}

#[test]
fn grants_come_from_flags_and_bad_values_are_refused_at_start_up() {
    let dir = std::env::temp_dir().join(format!("toolhost-cli-grant-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("a.txt"), "granted").expect("write");
    let hostile = path(fixture("hostile"));
    let grant = format!("{}:/data:ro", dir.display());
    let inside = run(&["call", "--allow-path", &grant, &hostile, "read_file", r#"{"path":"/data/a.txt"}"#], None);
    assert_eq!(json_stdout(&inside)["content"][0]["text"], "granted");
    let outside = run(&["call", &hostile, "read_file", r#"{"path":"/etc/passwd"}"#], None);
    assert_eq!(outside.status.code(), Some(1), "the plugin's own read error is a tool error");
    std::fs::remove_dir_all(&dir).ok();

    for bad in [
        vec!["--timeout", "soon"],
        vec!["--timeout", "0s"],
        vec!["--memory-limit", "lots"],
        vec!["--allow-path", "/nonexistent-toolhost-dir"],
        vec!["--allow-host", "https://example.com/"],
        vec!["--set", "novalue"],
        vec!["--set", "=v"],
    ] {
        let mut args = vec!["call"];
        args.extend(bad.iter().copied());
        args.extend([hostile.as_str(), "ok"]);
        let output = run(&args, None);
        assert_eq!(output.status.code(), Some(2), "{bad:?}: {}", stderr(&output));
        assert!(stderr(&output).contains(bad[1]), "{bad:?}: {}", stderr(&output));
    }
    let tiny = run(&["call", "--memory-limit", "1KiB", &hostile, "ok"], None);
    assert_eq!(tiny.status.code(), Some(2), "{}", stderr(&tiny));
    assert!(stderr(&tiny).contains("at least one Wasm page"), "{}", stderr(&tiny));
}

#[test]
fn http_to_an_ungranted_host_names_the_host() {
    let output = run(&["call", &path(fixture("hostile")), "http", r#"{"url":"http://127.0.0.1:9/"}"#], None);
    assert_eq!(output.status.code(), Some(3));
    let message = stderr(&output);
    assert!(message.contains("HTTP request to http://127.0.0.1:9/ is not allowed"), "{message}");
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("toolhost-cli-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

#[test]
fn tools_lists_the_effective_tools_of_a_configuration() {
    let dir = scratch("tools");
    let config = path(toolhost_tests::example_config(&dir));
    let table = run(&["tools", "--config", &config], None);
    assert_eq!(table.status.code(), Some(0), "{}", stderr(&table));
    let text = String::from_utf8_lossy(&table.stdout).into_owned();
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("TOOL")
            && lines[0].contains("ENABLED")
            && lines[0].contains("APPROVAL")
            && lines[0].contains("SOURCE"),
        "{text}"
    );
    // The tools (a header and 12 rows), a blank line, then each toolset's
    // sync (a header and 3 rows).
    assert_eq!(lines.len(), 13 + 1 + 4, "{text}");
    assert!(lines[13].is_empty() && lines[14].starts_with("TOOLSET") && lines[14].contains("SYNC"), "{text}");
    assert!(lines[15..].iter().all(|l| l.contains("SyncCompleted (4 tools synced)")), "{text}");
    assert!(lines.iter().any(|l| l.starts_with("text__reverse ") && l.contains(" FILTERED ")), "{text}");
    assert!(
        lines.iter().any(|l| l.starts_with("calc__divide ") && l.contains(" yes ") && l.contains("#/toolsets/0")),
        "{text}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("text__reverse ") && l.contains("no (matched by excludeTools)")),
        "{text}"
    );

    let json = run(&["tools", "--config", &config, "--json"], None);
    let rows = json_stdout(&json);
    let enabled: Vec<&str> = rows
        .as_array()
        .expect("rows")
        .iter()
        .filter(|r| r["enabled"] == true)
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert_eq!(
        enabled,
        [
            "calc__add",
            "calc__divide",
            "calc__multiply",
            "calc__subtract",
            "text__change_case",
            "text__slugify",
            "text__word_count",
            "words__word_count"
        ]
    );
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn approval_is_refused_without_a_terminal_and_given_with_yes() {
    let dir = scratch("approve");
    let config = path(toolhost_tests::example_config(&dir));
    let refused = run(&["call", "--config", &config, "calc__divide", r#"{"a":1,"b":4}"#], None);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    let text = json_stdout(&refused)["content"][0]["text"].as_str().unwrap_or_default().to_owned();
    assert!(text.contains("was not approved") && text.contains("no terminal") && text.contains("--yes"), "{text}");

    let approved = run(&["call", "--yes", "--config", &config, "calc__divide", r#"{"a":1,"b":4}"#], None);
    assert_eq!(approved.status.code(), Some(0), "{}", stderr(&approved));
    assert_eq!(json_stdout(&approved)["content"][0]["text"], "0.25");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn a_tool_that_needs_a_missing_secret_is_refused_naming_it() {
    let dir = scratch("secret");
    let config = dir.join("t.json");
    let doc = serde_json::json!({"schema": "s", "toolsets": [{"id": "svc", "kind": "uri",
        "secrets": ["SERVICE_TOKEN", "NOBODY_HAS_THIS"], "server": {"url": path(fixture("sdk-secrets"))}}]});
    std::fs::write(&config, doc.to_string()).expect("config");
    let store = dir.join("secrets");
    std::fs::create_dir_all(&store).expect("store");
    std::fs::write(store.join("SERVICE_TOKEN"), "abc").expect("secret");
    let config = path(config);
    let store = path(store);

    let missing = run(&["call", "--config", &config, "--secrets-dir", &store, "svc__needs_missing"], None);
    assert_eq!(missing.status.code(), Some(2), "{}", stderr(&missing));
    assert!(
        stderr(&missing).contains("needs the secret `NOBODY_HAS_THIS`, which was granted but is not available"),
        "{}",
        stderr(&missing)
    );

    let present = run(&["call", "--config", &config, "--secrets-dir", &store, "svc__token_length"], None);
    assert_eq!(json_stdout(&present)["content"][0]["text"], "the token has 3 characters", "{}", stderr(&present));
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn an_invalid_configuration_names_the_file_the_pointer_and_the_problem() {
    let dir = scratch("badconfig");
    let config = dir.join("bad.yaml");
    std::fs::write(&config, "schema: s\ntoolsets:\n  - id: calc\n    kind: uri\n    server:\n      url: x.wasm\n      limits: { memoryLimit: lots }\n").expect("config");
    let output = run(&["tools", "--config", &path(config.clone())], None);
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(message.starts_with(&format!("error: invalid configuration {}:", config.display())), "{message}");
    assert!(message.contains("at /toolsets/0/server: invalid size `lots`"), "{message}");

    std::fs::write(&config, "schema: s\ntoolsets: [ {id: 1").expect("config");
    let output = run(&["tools", "--config", &path(config)], None);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("not valid YAML"), "{}", stderr(&output));
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn bench_reports_throughput_and_latency() {
    let plugin = path(example("calculator"));
    let output =
        run(&["bench", &plugin, "add", r#"{"a":1,"b":2}"#, "--calls", "300", "--concurrency", "2", "--json"], None);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let report = json_stdout(&output);
    assert_eq!(report["calls"], 300, "{report}");
    assert_eq!(report["concurrency"], 2);
    assert_eq!(report["failures"], 0);
    assert!(report["callsPerSecond"].as_f64().is_some_and(|c| c > 0.0), "{report}");
    let latency = &report["latencyUs"];
    let p = |k: &str| latency[k].as_f64().unwrap_or(f64::NAN);
    assert!(p("min") <= p("p50") && p("p50") <= p("p90") && p("p90") <= p("p99") && p("p99") <= p("max"), "{latency}");

    let text = run(&["bench", &plugin, "add", r#"{"a":1,"b":2}"#, "--calls", "50"], None);
    assert_eq!(text.status.code(), Some(0), "{}", stderr(&text));
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(
        stdout.starts_with("calculator.add: 50 calls from 1 concurrent caller") && stdout.contains("p99"),
        "{stdout}"
    );
}

#[test]
fn bench_runs_separate_processes_at_once_to_measure_the_ceiling() {
    let plugin = path(example("calculator"));
    let output =
        run(&["bench", &plugin, "add", r#"{"a":1,"b":2}"#, "--calls", "200", "--processes", "2", "--json"], None);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let report = json_stdout(&output);
    assert_eq!(report["processes"], 2, "{report}");
    assert_eq!(report["calls"], 400, "{report}");
    assert_eq!(report["failures"], 0, "{report}");
    let each = report["reports"].as_array().expect("a report per process");
    assert_eq!(each.len(), 2, "{report}");
    assert!(each.iter().all(|r| r["calls"] == 200 && r["concurrency"] == 1), "{report}");
    let longest = each.iter().filter_map(|r| r["seconds"].as_f64()).fold(0.0, f64::max);
    assert_eq!(report["seconds"].as_f64(), Some(longest), "{report}");

    let text = run(&["bench", &plugin, "add", r#"{"a":1,"b":2}"#, "--calls", "50", "--processes", "2"], None);
    assert_eq!(text.status.code(), Some(0), "{}", stderr(&text));
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(stdout.starts_with("calculator.add: 2 processes at once, 50 calls each"), "{stdout}");

    // Processes that cannot measure: their exit code, and why.
    let output = run(&["bench", &plugin, "add", r#"{"a":"one"}"#, "--processes", "2"], None);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("invalid arguments for tool `add`"), "{}", stderr(&output));
    assert!(stderr(&output).contains("ended before measuring"), "{}", stderr(&output));
}

#[test]
fn bench_refuses_bad_arguments_once_and_counts_failures() {
    let output = run(&["bench", &path(example("calculator")), "add", r#"{"a":"one"}"#, "--calls", "10"], None);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("invalid arguments for tool `add`"), "{}", stderr(&output));

    let output = run(&["bench", &path(fixture("hostile")), "error", "--calls", "20", "--json"], None);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let report = json_stdout(&output);
    assert_eq!(report["failures"], 20, "{report}");
    assert!(report["firstFailure"].as_str().is_some_and(|f| f.contains("returned an error")), "{report}");
}

/// What a plugin chose reaches human output escaped: no ESC, no carriage
/// return, no line of its own. JSON output stays exact.
#[test]
fn plugin_chosen_text_is_escaped_for_the_terminal() {
    let scripted = path(fixture("scripted"));
    let no_raw_controls = |text: &str, what: &str| {
        assert!(!text.contains('\u{1b}') && !text.contains('\r') && !text.contains('\u{202e}'), "{what}: {text:?}");
    };

    // A tool name with a colour, a carriage return and a bidi override.
    let evil_name = "evil\u{1b}[31m\rforged\u{202e}";
    let describe = serde_json::json!({"tools": [{"name": evil_name, "inputSchema": {"type": "object"}}]}).to_string();
    let output = run(&["describe", "--set", &format!("describe={describe}"), &scripted], None);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let text = stderr(&output);
    no_raw_controls(&text, "describe");
    assert!(text.contains(r"tool `evil\u001b[31m\rforged\u202e`: at /tools/0/name"), "{text}");
    let lenient = run(&["describe", "--lenient", "--set", &format!("describe={describe}"), &scripted], None);
    let text = stderr(&lenient);
    no_raw_controls(&text, "lenient warning");
    assert!(text.contains(r"warning: left out tool `evil\u001b[31m\rforged\u202e`"), "{text}");

    // A result whose property name forges a line of the error report.
    let describe = serde_json::json!({"tools": [{
        "name": "t",
        "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object", "additionalProperties": {"type": "integer"}}
    }]})
    .to_string();
    let result =
        serde_json::json!({"content": [], "structuredContent": {"x\n  at /forged: all is well\u{1b}[0m": "v"}})
            .to_string();
    let config = [format!("describe={describe}"), format!("result={result}")];
    let output = run(&["call", "--set", &config[0], "--set", &config[1], &scripted, "t"], None);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let text = stderr(&output);
    no_raw_controls(&text, "call");
    assert_eq!(text.lines().count(), 2, "one header and one violation, no forged line: {text}");
    assert!(text.contains(r"at /structuredContent/x\n  at ~1forged: all is well\u001b[0m"), "{text}");

    let output = run(&["check", "--set", &config[0], "--set", &config[1], &scripted], None);
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    no_raw_controls(&text, "check");
    // (`check` puts each reason on one line: whitespace runs become a space.)
    assert!(text.contains(r"x at ~1forged: all is well\u001b[0m"), "{text}");

    // JSON output is the exact JSON.
    let output = run(&["check", "--json", "--set", &config[0], "--set", &config[1], &scripted], None);
    let report = json_stdout(&output);
    let reason = report["tools"][0]["failures"][0]["reason"].as_str().expect("a failure");
    assert!(reason.contains("x at ~1forged: all is well\u{1b}[0m"), "{reason:?}");
}

/// `--config FILE` is a toolsets file on every command that reads one;
/// plugin config values are `--set KEY=VALUE`, and the old `--config
/// KEY=VALUE` still works, with a warning that names the new flag.
#[test]
fn config_names_a_toolsets_file_and_set_a_plugin_value() {
    let scripted = path(fixture("scripted"));
    let describe = r#"describe={"tools":[{"name":"t","description":"d","inputSchema":{"type":"object"}}]}"#;
    let result = r#"result={"content":[{"type":"text","text":"scripted"}]}"#;

    let new = run(&["call", "--set", describe, "--set", result, &scripted, "t"], None);
    assert_eq!(new.status.code(), Some(0), "{}", stderr(&new));
    assert!(!stderr(&new).contains("deprecated"), "{}", stderr(&new));

    let old = run(&["call", "--config", describe, "--config", result, &scripted, "t"], None);
    assert_eq!(old.status.code(), Some(0), "{}", stderr(&old));
    assert_eq!(json_stdout(&old), json_stdout(&new), "the old spelling sets the same values");
    let warning = stderr(&old);
    assert_eq!(warning.matches("is deprecated: use `--set describe=").count(), 1, "{warning}");
    assert_eq!(warning.matches("is deprecated: use `--set result=").count(), 1, "{warning}");

    // describe reads a toolsets file too: the tools as `serve` lists them.
    let dir = scratch("describe-config");
    let config = path(toolhost_tests::example_config(&dir));
    let listed = run(&["describe", "--config", &config], None);
    assert_eq!(listed.status.code(), Some(0), "{}", stderr(&listed));
    let names: Vec<String> = json_stdout(&listed)["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().expect("name").to_owned())
        .collect();
    assert!(names.contains(&"calc__add".to_owned()), "{names:?}");
    assert!(names.iter().all(|n| n.contains("__")), "namespaced names only: {names:?}");

    // check and bench take a plugin, and say so.
    for command in ["check", "bench"] {
        let mut args = vec![command, "--config", config.as_str(), scripted.as_str()];
        if command == "bench" {
            args.push("t");
        }
        let refused = run(&args, None);
        assert_eq!(refused.status.code(), Some(2), "{command}: {}", stderr(&refused));
        assert!(stderr(&refused).contains("takes a plugin file, not a toolsets file"), "{}", stderr(&refused));
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// `--allow-path DIR:rw` over the compiled-module cache exits 2 naming the
/// grant and the cache, and runs nothing; with the cache elsewhere
/// (`TOOLHOST_CACHE_DIR` unset here) the same grant works.
#[test]
fn a_read_write_grant_over_the_module_cache_exits_2() {
    let home = std::env::temp_dir().join(format!("toolhost-cli-protected-{}", std::process::id()));
    let cache = home.join("cache");
    std::fs::create_dir_all(&cache).expect("dir");
    let grant = format!("{}:/home:rw", home.display());
    let hostile = path(fixture("hostile"));
    let args = ["call", &hostile, "write_file", r#"{"path": "/home/x.txt", "text": "x"}"#, "--allow-path", &grant];

    let refused = run_toolhost_with_env(&args, None, &[("TOOLHOST_CACHE_DIR", &path(cache.clone()))]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(refused.stdout.is_empty());
    let message = stderr(&refused);
    assert!(message.contains(&format!("invalid path grant `{grant}`")), "{message}");
    assert!(message.contains("compiled-module cache") && message.contains("TOOLHOST_CACHE_DIR"), "{message}");
    assert!(!home.join("x.txt").exists());

    // (The suite's own cache, which the other CLI tests have filled.)
    let allowed = run(&args, None);
    assert_eq!(allowed.status.code(), Some(0), "{}", stderr(&allowed));
    assert_eq!(std::fs::read_to_string(home.join("x.txt")).expect("written"), "x");
    std::fs::remove_dir_all(&home).ok();
}
