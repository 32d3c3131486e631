//! The describe/call path through the host library, on the example plugins
//! and on a plugin written with extism-pdk only.

use serde_json::{Value, json};
use toolhost::{Content, Error, Plugin, ValidationOptions};
use toolhost_tests::{example, fixture};

async fn load(path: std::path::PathBuf) -> Plugin {
    Plugin::load(&path).await.unwrap_or_else(|e| panic!("loading {}: {e}", path.display()))
}

/// Loaded with argument and result validation off, to see what the plugin
/// itself does with input the host would refuse.
async fn load_unvalidated(path: std::path::PathBuf) -> Plugin {
    Plugin::builder_from_file(&path)
        .with_validation(ValidationOptions::off())
        .build()
        .await
        .unwrap_or_else(|e| panic!("loading {}: {e}", path.display()))
}

fn only_text(result: &toolhost::CallToolResult) -> &str {
    let texts: Vec<&str> = result.texts().collect();
    assert_eq!(texts.len(), 1, "expected one text item in {result:?}");
    texts[0]
}

#[tokio::test]
async fn calculator_describes_its_four_tools_with_schemas_from_types() {
    let plugin = load(example("calculator")).await;
    let names: Vec<&str> = plugin.tools().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["add", "subtract", "multiply", "divide"]);

    let add = plugin.tool("add").expect("add");
    assert_eq!(add.description.as_deref(), Some("Add two numbers: a + b."));
    assert_eq!(add.title.as_deref(), Some("Add"));
    assert_eq!(add.input_schema["type"], "object");
    assert_eq!(add.input_schema["required"], json!(["a", "b"]));
    assert_eq!(add.input_schema["properties"]["a"]["type"], "number");
    assert_eq!(add.input_schema["properties"]["a"]["description"], "The first operand.");
    let output = add.output_schema.as_ref().expect("add has an outputSchema");
    assert_eq!(output["type"], "object");
    assert_eq!(output["properties"]["result"]["type"], "number");
    let hints = add.annotations.as_ref().expect("annotations");
    assert_eq!((hints.read_only_hint, hints.idempotent_hint), (Some(true), Some(true)));
}

#[tokio::test]
async fn calculator_computes_with_structured_output() {
    let plugin = load(example("calculator")).await;
    for (tool, expected) in [("add", 5.0), ("subtract", -1.0), ("multiply", 6.0), ("divide", 2.0 / 3.0)] {
        let result = plugin.call_tool(tool, json!({"a": 2, "b": 3})).await.expect(tool);
        assert!(!result.is_error(), "{tool}: {result:?}");
        assert_eq!(only_text(&result), expected.to_string(), "{tool}");
        assert_eq!(result.structured_content, Some(json!({"result": expected})), "{tool}");
    }
}

#[tokio::test]
async fn division_by_zero_is_a_tool_error_not_a_host_error() {
    let plugin = load(example("calculator")).await;
    let result = plugin.call_tool("divide", json!({"a": 1, "b": 0})).await.expect("a result");
    assert!(result.is_error());
    assert_eq!(only_text(&result), "cannot divide by zero");
    assert_eq!(result.structured_content, None);
}

#[tokio::test]
async fn arguments_the_sdk_cannot_deserialize_are_a_tool_error_naming_the_problem() {
    let plugin = load_unvalidated(example("calculator")).await;
    let result = plugin.call_tool("add", json!({"a": "two", "b": 3})).await.expect("a result");
    assert!(result.is_error());
    let text = only_text(&result);
    assert!(text.contains("invalid arguments for tool `add`") && text.contains("string \"two\""), "{text}");
}

#[tokio::test]
async fn unknown_tool_is_refused_before_the_plugin_runs() {
    let plugin = load(example("calculator")).await;
    let error = plugin.call_tool("modulo", json!({})).await.unwrap_err();
    assert!(error.is_unknown_tool() && error.is_caller_error(), "{error:?}");
    match &error {
        Error::UnknownTool { tool, available, .. } => {
            assert_eq!(tool, "modulo");
            assert_eq!(available, &["add", "divide", "multiply", "subtract"]);
        }
        other => panic!("unexpected {other:?}"),
    }
    let message = error.to_string();
    assert!(message.contains("`modulo`") && message.contains("`add`, `divide`"), "{message}");
}

#[tokio::test]
async fn arguments_must_be_an_object_and_null_means_none() {
    let plugin = load(example("clock")).await;
    let error = plugin.call_tool("now", json!([1, 2])).await.unwrap_err();
    assert!(error.is_invalid_arguments(), "{error:?}");
    assert!(error.to_string().contains("must be a JSON object, not an array"), "{error}");

    let result = plugin.call_tool("now", Value::Null).await.expect("null arguments");
    assert!(!result.is_error(), "{result:?}");
}

#[tokio::test]
async fn clock_returns_an_rfc3339_timestamp() {
    let plugin = load(example("clock")).await;
    let tool = plugin.tool("now").expect("now");
    assert_eq!(tool.input_schema, *json!({"type": "object", "additionalProperties": false}).as_object().unwrap());
    let result = plugin.call_tool("now", json!({})).await.expect("now");
    let timestamp = only_text(&result);
    // 2026-11-23T00:36:04.885905696Z
    let bytes = timestamp.as_bytes();
    assert!(timestamp.len() >= 20 && timestamp.ends_with('Z'), "{timestamp}");
    assert_eq!((bytes[4], bytes[7], bytes[10], bytes[13], bytes[16]), (b'-', b'-', b'T', b':', b':'), "{timestamp}");
    let structured = result.structured_content.as_ref().expect("structured");
    assert_eq!(structured["timestamp"], timestamp);
    assert!(structured["unix_seconds"].as_i64().is_some_and(|s| s > 1_700_000_000));

    let refused = plugin.call_tool("now", json!({"zone": "UTC"})).await.unwrap_err();
    assert!(refused.is_invalid_arguments(), "{refused:?}");
    // Without the host's check, the SDK refuses them itself.
    let unvalidated = load_unvalidated(example("clock")).await;
    let refused = unvalidated.call_tool("now", json!({"zone": "UTC"})).await.expect("a result");
    assert!(refused.is_error() && only_text(&refused).contains("takes no arguments"), "{refused:?}");
}

#[tokio::test]
async fn doorbell_rings_with_no_output() {
    let plugin = load(example("doorbell")).await;
    let tool = plugin.tool("ring").expect("ring");
    assert_eq!(tool.output_schema, None);
    assert_eq!(tool.input_schema["properties"]["doorbell_id"]["minLength"], 1);
    let result = plugin.call_tool("ring", json!({"doorbell_id": "front-door"})).await.expect("ring");
    assert!(!result.is_error() && result.content.is_empty(), "{result:?}");
    let blank = plugin.call_tool("ring", json!({"doorbell_id": "  "})).await.expect("ring");
    assert!(blank.is_error(), "{blank:?}");
}

#[tokio::test]
async fn text_tools() {
    let plugin = load(example("text")).await;
    let call = |tool: &'static str, args: Value| {
        let plugin = plugin.clone();
        async move { plugin.call_tool(tool, args).await.expect(tool) }
    };
    let counts = call("word_count", json!({"text": "one two  three\nfour"})).await;
    assert_eq!(counts.structured_content, Some(json!({"words": 4, "characters": 19, "lines": 2})));
    assert_eq!(only_text(&call("reverse", json!({"text": "héllo"})).await), "olléh");
    // ASCII only (its own path), and characters of two, three and four bytes.
    assert_eq!(only_text(&call("reverse", json!({"text": "stressed 2026"})).await), "6202 desserts");
    assert_eq!(only_text(&call("reverse", json!({"text": "añ€🦀z"})).await), "z🦀€ña");
    assert_eq!(only_text(&call("slugify", json!({"text": "Hello, World! 2026"})).await), "hello-world-2026");
    assert!(call("slugify", json!({"text": "!!!"})).await.is_error());
    assert_eq!(only_text(&call("change_case", json!({"text": "hello wORLD", "case": "title"})).await), "Hello World");
    let schema = &plugin.tool("change_case").expect("change_case").input_schema;
    let case = serde_json::to_string(schema).expect("json");
    assert!(case.contains("\"upper\"") && case.contains("\"lower\"") && case.contains("\"title\""), "{case}");
}

#[tokio::test]
async fn a_plugin_written_with_extism_pdk_only_runs_unchanged() {
    let plugin = load(fixture("raw-servlet")).await;
    let names: Vec<&str> = plugin.tools().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["greet", "count_vowels", "list_directory", "search_files"]);

    let greeting = plugin.call_tool("greet", json!({"name": "Ada"})).await.expect("greet");
    assert!(!greeting.is_error());
    assert_eq!(only_text(&greeting), "Hello, Ada!");
    // Its `null` optional fields survive as they were sent.
    let Content::Text(item) = &greeting.content[0] else { panic!("text item") };
    assert_eq!(item.extra.get("mimeType"), Some(&Value::Null));

    let vowels = plugin.call_tool("count_vowels", json!({"text": "Extism plugins"})).await.expect("count");
    assert_eq!(only_text(&vowels), "4");

    // The host refuses arguments that break the plugin's schema...
    let refused = plugin.call_tool("greet", json!({})).await.unwrap_err();
    assert!(refused.is_invalid_arguments(), "{refused:?}");
    // ...and the plugin's own `isError` answer is a normal result.
    let unvalidated = load_unvalidated(fixture("raw-servlet")).await;
    let missing = unvalidated.call_tool("greet", json!({})).await.expect("a result");
    assert!(missing.is_error());
    assert_eq!(only_text(&missing), "missing argument: name");
}

#[tokio::test]
async fn plugins_load_from_bytes_and_calls_run_in_parallel() {
    let bytes = std::fs::read(example("calculator")).expect("read");
    let plugin = Plugin::builder_from_bytes(bytes).with_name("calc").build().await.expect("load from bytes");
    assert_eq!(plugin.name(), "calc");
    let calls = (0..16).map(|i| {
        let plugin = plugin.clone();
        tokio::spawn(async move { plugin.call_tool("add", json!({"a": i, "b": 1})).await })
    });
    for (i, call) in calls.enumerate() {
        let result = call.await.expect("task").expect("call");
        assert_eq!(result.structured_content, Some(json!({"result": (i + 1) as f64})));
    }
}
