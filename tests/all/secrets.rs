//! Secrets: a plugin gets only what the person running toolhost granted,
//! only in the calls of the tools that declare it, and nothing it was given
//! leaves it: not through any field of a result, an error or a log line.
//! Against `secret-thief`, a plugin that tries all of that.

use std::process::Output;
use std::sync::Arc;

use base64::Engine as _;
use serde_json::{Value, json};
use toolhost::{Error, FileSecretProvider, MissingSecretReason, Plugin, SecretProvider};
use toolhost_tests::{Flavour, fixture, json_stdout, run_toolhost_with_env as run};

const KEY: &str = "AWS_SECRET_ACCESS_KEY";
/// Digits, so that a number in a result can carry it too.
const VALUE: &str = "31415926535";

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn thief() -> String {
    fixture("secret-thief").to_string_lossy().into_owned()
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("toolhost-secrets-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// Every string of a JSON document, base64-decoded where it decodes.
fn decoded_strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => {
            out.push(s.clone());
            if let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(s) {
                out.push(String::from_utf8_lossy(&bytes).into_owned());
            }
        }
        Value::Array(items) => items.iter().for_each(|v| decoded_strings(v, out)),
        Value::Object(map) => map.iter().for_each(|(k, v)| {
            out.push(k.clone());
            decoded_strings(v, out);
        }),
        Value::Number(n) => out.push(n.to_string()),
        _ => {}
    }
}

#[test]
fn a_secret_the_plugin_declares_but_nobody_granted_is_never_handed_over() {
    let env = [(KEY, VALUE)];
    // `call`: refused before the plugin runs, naming the secret and why.
    let output = run(&["call", &thief(), "steal"], None, &env);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains(&format!("needs the secret `{KEY}`, which was not granted")),
        "{}",
        stderr(&output)
    );
    assert!(!stdout(&output).contains(VALUE) && !stderr(&output).contains(VALUE));

    // `check` calls every tool: none of them gets it either.
    let output = run(&["check", &thief(), "--json"], None, &env);
    assert!(!stdout(&output).contains(VALUE) && !stderr(&output).contains(VALUE), "{}", stdout(&output));

    // `bench`: every call refused.
    let output = run(&["bench", &thief(), "steal", "--calls", "5", "--json"], None, &env);
    assert!(!stdout(&output).contains(VALUE) && !stderr(&output).contains(VALUE), "{}", stdout(&output));
    assert_ne!(output.status.code(), Some(0), "{}", stdout(&output));

    // Granted on the command line, it is handed over (and still never
    // printed: the value is redacted from what the plugin returns).
    let output = run(&["call", &thief(), "steal", "--secret", KEY], None, &env);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(json_stdout(&output)["content"][0]["text"], format!("[redacted secret {KEY}]"));

    // From a secrets directory instead of the environment.
    let dir = scratch("dir");
    std::fs::write(dir.join(KEY), format!("{VALUE}\n")).expect("secret file");
    let output = run(&["call", &thief(), "steal", "--secret", KEY, "--secrets-dir", &dir.to_string_lossy()], None, &[]);
    assert_eq!(json_stdout(&output)["content"][0]["text"], format!("[redacted secret {KEY}]"), "{}", stderr(&output));
    std::fs::remove_dir_all(dir).ok();
}

#[tokio::test]
async fn the_library_hands_over_only_granted_secrets() {
    let dir = scratch("library");
    std::fs::write(dir.join(KEY), VALUE).expect("secret file");
    let provider: Arc<dyn SecretProvider> = Arc::new(FileSecretProvider::new(&dir));

    let ungranted = Plugin::builder_from_file(fixture("secret-thief"))
        .with_secret_provider(Arc::clone(&provider))
        .build()
        .await
        .expect("load");
    assert_eq!(ungranted.missing_secret_reasons("steal"), [(KEY, MissingSecretReason::NotGranted)]);
    match ungranted.call_tool("steal", json!({})).await.unwrap_err() {
        Error::MissingSecret { secret, reason: MissingSecretReason::NotGranted, .. } => assert_eq!(secret, KEY),
        other => panic!("expected a missing secret, got {other:?}"),
    }

    let granted = Plugin::builder_from_file(fixture("secret-thief"))
        .with_secret_provider(provider)
        .grant_secret(KEY)
        .build()
        .await
        .expect("load");
    assert!(granted.missing_secrets("steal").is_empty());
    let result = granted.call_tool("steal", json!({})).await.expect("call");
    assert_eq!(result.texts().next(), Some(format!("[redacted secret {KEY}]").as_str()));
    std::fs::remove_dir_all(dir).ok();
}

#[tokio::test]
async fn a_secret_reaches_only_the_calls_of_the_tools_that_declare_it() {
    let dir = scratch("per-tool");
    std::fs::write(dir.join(KEY), VALUE).expect("secret file");
    let plugin = Plugin::builder_from_file(fixture("secret-thief"))
        .with_secret_provider(Arc::new(FileSecretProvider::new(&dir)))
        .grant_secret(KEY)
        .with_pool_size(1)
        .build()
        .await
        .expect("load");
    // The same instance (pool of one, on Cranelift's code, which it then
    // keeps) runs both tools, one after the other.
    plugin.settled_tier().await;
    for _ in 0..3 {
        let stolen = plugin.call_tool("steal", json!({})).await.expect("steal");
        assert_eq!(stolen.texts().next(), Some(format!("[redacted secret {KEY}]").as_str()));
        let peeked = plugin.call_tool("peek", json!({})).await.expect("peek");
        assert_eq!(peeked.texts().next(), Some("<none>"), "a tool that does not declare the secret read it");
    }
    std::fs::remove_dir_all(dir).ok();
}

/// Components read config through `config-get`: the same rule.
async fn a_component_reads_a_secret_only_in_calls_of_a_tool_that_declares_it(flavour: Flavour) {
    let dir = scratch(&format!("per-tool-{flavour:?}"));
    std::fs::write(dir.join("SERVICE_TOKEN"), "tok-3f9a7c").expect("secret file");
    let plugin = Plugin::builder_from_file(flavour.fixture("sdk-secrets"))
        .with_secret_provider(Arc::new(FileSecretProvider::new(&dir)))
        .grant_secret("SERVICE_TOKEN")
        .with_pool_size(1)
        .build()
        .await
        .expect("load");
    let length = plugin.call_tool("token_length", json!({})).await.expect("call");
    assert_eq!(length.texts().next(), Some("the token has 10 characters"));
    let visible = plugin.call_tool("token_visible", json!({})).await.expect("call");
    assert_eq!(visible.texts().next(), Some("false"), "a tool that does not declare the secret read it");
    std::fs::remove_dir_all(dir).ok();
}

both_flavours!(a_component_reads_a_secret_only_in_calls_of_a_tool_that_declares_it);

#[test]
fn a_granted_secret_appears_in_no_field_of_any_result_error_or_log_line() {
    let env = [(KEY, VALUE), ("TOOLHOST_LOG", "toolhost::guest=trace")];
    let granted = |tool: &str| run(&["call", &thief(), tool, "--secret", KEY], None, &env);

    let output = granted("leak_everywhere");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let result = json_stdout(&output);
    let mut strings = Vec::new();
    decoded_strings(&result, &mut strings);
    assert!(strings.iter().all(|s| !s.contains(VALUE)), "{result:#}");
    assert!(strings.iter().any(|s| s.contains(&format!("[redacted secret {KEY}]"))), "{result:#}");
    // The plugin logged the secret: the log line is there, the value is not.
    assert!(stderr(&output).contains("the secret is [redacted secret"), "{}", stderr(&output));
    assert!(!stderr(&output).contains(VALUE), "{}", stderr(&output));

    for (tool, expected) in [
        ("leak_error", "the plugin returned an error"),
        ("leak_path", "returned invalid output"),
        ("leak_stderr", "trapped"),
    ] {
        let output = granted(tool);
        assert_eq!(output.status.code(), Some(3), "{tool}: {}", stderr(&output));
        let text = format!("{}{}", stdout(&output), stderr(&output));
        assert!(text.contains(expected), "{tool}: {text}");
        assert!(text.contains(&format!("[redacted secret {KEY}]")), "{tool}: {text}");
        assert!(!text.contains(VALUE), "{tool}: {text}");
    }
}

#[test]
fn a_cut_never_leaves_a_fragment_of_a_secret() {
    // Long error messages are cut at 4 KiB, log lines at 2 KiB: the plugin
    // puts its secret across the cut.
    let env = [(KEY, VALUE), ("TOOLHOST_LOG", "toolhost::guest=trace")];
    for (tool, at) in [("cut_error", "4096"), ("cut_log", "2048")] {
        let args = format!(r#"{{"at": {at}}}"#);
        let output = run(&["call", &thief(), tool, &args, "--secret", KEY], None, &env);
        let text = format!("{}{}", stdout(&output), stderr(&output));
        assert!(text.contains("xxxxx"), "{tool}: the message or log line is missing: {text}");
        for fragment in VALUE.as_bytes().windows(5) {
            let fragment = std::str::from_utf8(fragment).unwrap();
            assert!(!text.contains(fragment), "{tool}: `{fragment}` of the secret leaked: {text}");
        }
    }
}

#[test]
fn redaction_never_takes_a_result_past_the_output_cap() {
    // A one-character secret in 2 MB of output would make ~80 MB of markers.
    let env = [(KEY, "q")];
    let output = run(&["call", &thief(), "flood", r#"{"n": 2000000}"#, "--secret", KEY], None, &env);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    assert!(stderr(&output).contains("output is too large"), "{}", stderr(&output));
    assert!(output.stdout.is_empty());

    let output = run(&["call", &thief(), "flood", r#"{"n": 3}"#, "--secret", KEY], None, &env);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(json_stdout(&output)["content"][0]["text"], format!("[redacted secret {KEY}]").repeat(3));
}

#[test]
fn toolsets_grant_secrets_per_toolset_and_redact_secret_config_values() {
    let dir = scratch("toolsets");
    let store = dir.join("store");
    std::fs::create_dir_all(&store).expect("store");
    std::fs::write(store.join(KEY), VALUE).expect("secret");
    std::fs::write(store.join("API_KEY"), "apikey-77c1e0").expect("secret");
    let doc = json!({"schema": "s", "toolsets": [
        {"id": "granted", "kind": "uri", "secrets": [KEY],
         "server": {"url": thief(), "config": {"api_key": "${secret:API_KEY}"}}},
        {"id": "ungranted", "kind": "uri", "server": {"url": thief()}},
    ]});
    let config = dir.join("toolsets.json");
    std::fs::write(&config, doc.to_string()).expect("config");
    let (config, store) = (config.to_string_lossy().into_owned(), store.to_string_lossy().into_owned());
    let call =
        |tool: &str, args: &str| run(&["call", "--config", &config, "--secrets-dir", &store, tool, args], None, &[]);

    let output = call("granted__steal", "{}");
    assert_eq!(json_stdout(&output)["content"][0]["text"], format!("[redacted secret {KEY}]"), "{}", stderr(&output));
    let output = call("ungranted__steal", "{}");
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("which was not granted"), "{}", stderr(&output));

    // A config value that came from a secret is redacted like one.
    let output = call("granted__config", r#"{"key": "api_key"}"#);
    assert_eq!(json_stdout(&output)["content"][0]["text"], "[redacted secret API_KEY]", "{}", stderr(&output));

    // `--secret` grants to a single plugin; a toolsets file grants per toolset.
    let output = run(&["call", "--config", &config, "--secret", KEY, "granted__steal"], None, &[]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("grant secrets per toolset"), "{}", stderr(&output));
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn a_remote_servers_notices_carry_no_handed_secret_into_any_log_line_at_any_level() {
    // A `kind: mcp` server is handed a secret (in its environment) and
    // sends it back in a log message and a progress notification, which
    // rmcp logs whole, as its own events, at `info`; at `trace` every
    // result is logged too. Every line passes the redaction, text or JSON.
    let dir = scratch("log-lines");
    let store = dir.join("store");
    std::fs::create_dir_all(&store).expect("store");
    const TOKEN: &str = "mcp-t0ken-5c1d9e";
    std::fs::write(store.join("MCP_TOKEN"), TOKEN).expect("secret");
    let server = toolhost_tests::mcp_python_server();
    let doc = json!({"schema": "s", "toolsets": [
        {"id": "py", "kind": "mcp", "server": {
            "command": toolhost_tests::mcp_python().display().to_string(),
            "args": [server.display().to_string(), "stdio"],
            "env": {"CHATTY": "${secret:MCP_TOKEN}"}}}
    ]});
    let config = dir.join("toolsets.json");
    std::fs::write(&config, doc.to_string()).expect("toolsets file");
    let (config, store) = (config.display().to_string(), store.display().to_string());
    for format in ["text", "json"] {
        for level in ["trace", "debug", "info"] {
            let args = [
                "call",
                "--config",
                &config,
                "--secrets-dir",
                &store,
                "--log-format",
                format,
                "py__chatty",
                r#"{"name": "CHATTY"}"#,
            ];
            let output = run(&args, None, &[("TOOLHOST_LOG", level), ("NO_COLOR", "1")]);
            let (out, err) = (stdout(&output), stderr(&output));
            assert_eq!(output.status.code(), Some(0), "{format} {level}: {out}\n{err}");
            assert!(out.contains("said"), "{format} {level}: {out}");
            // The notices were logged (so the test sees them), redacted.
            assert!(err.contains("[redacted secret MCP_TOKEN]"), "{format} {level}: nothing redacted in {err}");
            for fragment in [TOKEN, "t0ken-5c1d9e"] {
                assert!(!err.contains(fragment), "{format} {level}: `{fragment}` in the log: {err}");
            }
        }
    }
    std::fs::remove_dir_all(dir).ok();
}
