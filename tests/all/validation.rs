//! Validation at the plugin boundary: the describe output at load, the
//! arguments before each call, the result after it. The broken plugins are
//! the `scripted` fixture fed with broken JSON from here.

use serde_json::{Value, json};
use toolhost::{Error, LoadProblem, OutputProblem, Plugin, ValidationOptions, Violation};
use toolhost_tests::{Flavour, doubling_schema};

/// Load the scripted fixture with this describe output (and call result).
async fn scripted(
    flavour: Flavour,
    describe: &Value,
    result: Option<&Value>,
    validation: ValidationOptions,
) -> Result<Plugin, Error> {
    let mut builder = Plugin::builder_from_file(flavour.fixture("scripted"))
        .with_validation(validation)
        .with_config("describe", describe.to_string());
    if let Some(result) = result {
        builder = builder.with_config("result", result.to_string());
    }
    builder.build().await
}

fn load_problems(error: Error) -> Vec<LoadProblem> {
    match error {
        Error::InvalidPlugin { problems, .. } => problems,
        other => panic!("expected an invalid plugin, got {other:?}"),
    }
}

/// (tool, pointer, rule) of each problem, for exact comparison.
fn summary(problems: &[LoadProblem]) -> Vec<(Option<&str>, &str, &str)> {
    problems.iter().map(|p| (p.tool.as_deref(), p.pointer.as_str(), p.rule.as_str())).collect()
}

fn tool(name: &str, input_schema: Value) -> Value {
    json!({"name": name, "description": "A tool.", "inputSchema": input_schema})
}

fn object() -> Value {
    json!({"type": "object"})
}

async fn refused(flavour: Flavour, describe: Value) -> Vec<LoadProblem> {
    load_problems(scripted(flavour, &describe, None, ValidationOptions::default()).await.expect_err("must be refused"))
}

async fn tool_names_must_be_1_to_128_characters_of_the_allowed_set(flavour: Flavour) {
    let long = "n".repeat(129);
    let problems = refused(
        flavour,
        json!({"tools": [
            tool("ok.name-1_2", object()),
            tool("bad name!", object()),
            tool("", object()),
            tool(&long, object()),
        ]}),
    )
    .await;
    assert_eq!(
        summary(&problems),
        [
            (Some("bad name!"), "/tools/1/name", "pattern"),
            (Some("#2"), "/tools/2/name", "minLength"),
            (Some(long.as_str()), "/tools/3/name", "maxLength"),
        ]
    );
}

async fn duplicate_names_are_refused(flavour: Flavour) {
    let problems =
        refused(flavour, json!({"tools": [tool("a", object()), tool("b", object()), tool("a", object())]})).await;
    assert_eq!(summary(&problems), [(Some("a"), "/tools/2/name", "unique-name")]);
    assert!(problems[0].message.contains("first at /tools/0"), "{}", problems[0].message);
}

async fn names_that_differ_only_in_case_are_refused(flavour: Flavour) {
    // Approval is per tool name: `Divide` must not sit next to a gated `divide`.
    let problems =
        refused(flavour, json!({"tools": [tool("divide", object()), tool("add", object()), tool("Divide", object())]}))
            .await;
    assert_eq!(summary(&problems), [(Some("Divide"), "/tools/2/name", "unique-name")]);
    let message = &problems[0].message;
    assert!(message.contains("`Divide`") && message.contains("`divide`") && message.contains("/tools/0"), "{message}");
    assert!(message.contains("only in case"), "{message}");
}

async fn input_schemas_must_be_objects_with_an_object_root(flavour: Flavour) {
    let problems = refused(flavour, json!({"tools": [
        tool("string_root", json!({"type": "string"})),
        tool("not_an_object", json!("object")),
        {"name": "missing", "description": "No schema."},
        {"name": "bad_output", "description": "x", "inputSchema": {"type": "object"}, "outputSchema": {"type": "array"}},
    ]}))
    .await;
    assert_eq!(
        summary(&problems),
        [
            (Some("string_root"), "/tools/0/inputSchema/type", "const"),
            (Some("not_an_object"), "/tools/1/inputSchema", "type"),
            // WIT requires a schema: the component sends `null` for none.
            match flavour {
                Flavour::Extism => (Some("missing"), "/tools/2/inputSchema", "required"),
                Flavour::Component => (Some("missing"), "/tools/2/inputSchema", "type"),
            },
            (Some("bad_output"), "/tools/3/outputSchema", "anyOf"),
        ]
    );
}

async fn schemas_must_compile(flavour: Flavour) {
    let problems = refused(
        flavour,
        json!({"tools": [
            tool("typo", json!({"type": "object", "properties": {"a": {"type": "strnig"}}})),
            tool("bad_pattern", json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "(["}}})),
        ]}),
    )
    .await;
    assert_eq!(
        summary(&problems),
        [(Some("typo"), "/tools/0/inputSchema", "schema"), (Some("bad_pattern"), "/tools/1/inputSchema", "schema")]
    );
    assert!(problems[0].message.contains("strnig"), "{}", problems[0].message);
}

async fn external_refs_are_refused_never_fetched(flavour: Flavour) {
    for target in ["https://example.com/schema.json", "file:///etc/passwd", "other.json"] {
        let schema = json!({"type": "object", "properties": {"a": {"$ref": target}}});
        let problems = refused(flavour, json!({"tools": [tool("ext", schema)]})).await;
        assert_eq!(summary(&problems), [(Some("ext"), "/tools/0/inputSchema", "schema")], "{target}");
        assert!(problems[0].message.contains("refused"), "{target}: {}", problems[0].message);
    }
}

async fn pathological_schemas_are_refused_at_load_with_a_pointer(flavour: Flavour) {
    let mut output = tool("out", object());
    output["outputSchema"] = doubling_schema(30);
    let multiplying = json!({"type": "object", "anyOf": [
        {"properties": {"a": {"$ref": "#"}}},
        {"properties": {"a": {"$ref": "#"}}, "required": []}
    ]});
    let endless = json!({"type": "object", "anyOf": [{"$ref": "#"}]});
    let mut deep = json!({"type": "string"});
    for _ in 0..40 {
        deep = json!({"type": "object", "properties": {"x": deep}});
    }
    let wide = json!({"type": "object", "anyOf": vec![json!({"required": ["a"]}); 300]});
    let problems = refused(
        flavour,
        json!({"tools": [
            tool("fan_out", doubling_schema(30)),
            output,
            tool("multiplying", multiplying),
            tool("endless", endless),
            tool("deep", deep),
            tool("wide", wide),
            tool("fine", doubling_schema(6)),
        ]}),
    )
    .await;
    let rules: Vec<(Option<&str>, &str)> = problems.iter().map(|p| (p.tool.as_deref(), p.rule.as_str())).collect();
    assert_eq!(
        rules,
        [
            (Some("fan_out"), "schema-limit"),
            (Some("out"), "schema-limit"),
            (Some("multiplying"), "schema-limit"),
            (Some("endless"), "schema-limit"),
            (Some("deep"), "schema-limit"),
            (Some("wide"), "schema-limit"),
        ],
        "{problems:#?}"
    );
    let pointer = |i: usize| problems[i].pointer.as_str();
    assert!(pointer(0).starts_with("/tools/0/inputSchema/$defs/d"), "{:?}", problems[0]);
    assert!(pointer(1).starts_with("/tools/1/outputSchema/$defs/d"), "{:?}", problems[1]);
    assert!(problems[0].message.contains("more than 10000 subschema evaluations"), "{}", problems[0].message);
    assert!(problems[2].message.contains("at depth"), "{}", problems[2].message);
    assert!(problems[3].message.contains("endless recursion"), "{}", problems[3].message);
    assert!(pointer(4).starts_with("/tools/4/inputSchema/properties/x"), "{:?}", problems[4]);
    assert!(problems[4].message.contains("nests deeper than 64"), "{}", problems[4].message);
    assert_eq!(pointer(5), "/tools/5/inputSchema/anyOf", "{:?}", problems[5]);
}

async fn patterns_run_on_a_linear_time_engine(flavour: Flavour) {
    // Lookaround and backreferences need a backtracking engine: refused.
    for pattern in ["^(?=(a+)+b)", "^(a+)\\1$"] {
        let schema = json!({"type": "object", "properties": {"s": {"type": "string", "pattern": pattern}}});
        let problems = refused(flavour, json!({"tools": [tool("t", schema)]})).await;
        assert_eq!(summary(&problems), [(Some("t"), "/tools/0/inputSchema", "schema")], "{pattern}");
        assert!(problems[0].message.contains("without lookaround or backreferences"), "{}", problems[0].message);
    }
    // A pattern that backtracks exponentially elsewhere is linear here.
    let schema = json!({"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a|a)*(a+)+$"}}});
    let plugin = scripted(flavour, &json!({"tools": [tool("t", schema)]}), None, ValidationOptions::default())
        .await
        .expect("loads");
    let evil = format!("{}!", "a".repeat(50_000));
    assert_eq!(pointers(&plugin.validate_arguments("t", json!({"s": evil})).unwrap_err()), [("/s", "pattern")]);
}

async fn an_instance_too_costly_for_its_schema_is_refused_unchecked(flavour: Flavour) {
    // Each item costs about 2^11 evaluations (within the bound per place);
    // 20,000 of them would cost more than 10^8.
    let mut schema = doubling_schema(11);
    schema["properties"] = json!({"a": {"type": "array", "items": {"$ref": "#/$defs/d0"}}});
    let plugin = scripted(flavour, &json!({"tools": [tool("t", schema)]}), None, ValidationOptions::default())
        .await
        .expect("loads");
    plugin.validate_arguments("t", json!({"a": vec!["x"; 10]})).expect("a few items are checked");
    let error = plugin.call_tool("t", json!({"a": vec![0; 20_000]})).await.unwrap_err();
    assert_eq!(pointers(&error), [("", "validationBudget")]);
}

/// A long string weighs one place against a schema that reads no
/// string's bytes, so it is checked inline; but a schema can report
/// thousands of violations at one place (every branch of nested
/// `allOf`s), and jsonschema quotes the value in each message. The list is
/// made from a copy with long strings cut short, and bounded: neither a
/// caller's argument nor a plugin's result can make the host print a long
/// string thousands of times.
async fn many_violations_at_a_long_string_are_listed_short_and_bounded(flavour: Flavour) {
    let branches: Vec<Value> = (0..20).map(|_| json!({"allOf": vec![json!({"type": "number"}); 100]})).collect();
    let wide = json!({"type": "object", "properties": {"s": {"allOf": branches}}});
    let mut out = tool("out", object());
    out["outputSchema"] = wide.clone();
    let long = "x".repeat(256 * 1024);
    let result = json!({"content": [], "structuredContent": {"s": long}});
    let plugin =
        scripted(flavour, &json!({"tools": [tool("in", wide), out]}), Some(&result), ValidationOptions::default())
            .await
            .expect("loads");
    let bounded = |error: &Error, prefix: &str| {
        let found = pointers(error);
        assert_eq!(found.len(), 101, "100 listed and one saying how many more: {found:?}");
        assert_eq!(found[..100], vec![(format!("{prefix}/s").as_str(), "type"); 100][..], "{found:?}");
        assert_eq!(found[100], (prefix, "violations"));
        let text = error.to_string();
        assert!(text.contains("1900 more violations not listed"), "{}", &text[..text.len().min(2000)]);
        // Each message quotes the string's first 64 bytes, not all of them.
        assert!(text.contains(&format!("\"{}…\"", "x".repeat(64))), "{}", &text[..text.len().min(2000)]);
        assert!(text.len() < 100 * 300, "{} bytes", text.len());
    };
    let refused = plugin.call_tool("in", json!({"s": long})).await.unwrap_err();
    assert!(matches!(refused, Error::InvalidArguments { .. }), "{refused}");
    bounded(&refused, "");
    let refused = plugin.call_tool("out", json!({})).await.unwrap_err();
    assert!(matches!(refused, Error::InvalidOutput { .. }), "{refused}");
    bounded(&refused, "/structuredContent");

    // A schema that reads strings sees them whole; when listing its errors
    // could copy a long one too often (each failed `anyOf` branch copies
    // it), only the verdict is reported.
    let branches: Vec<Value> = (0..200).map(|i| json!({"maxLength": i})).collect();
    let reading = json!({"type": "object", "properties": {"s": {"anyOf": branches}}});
    let plugin = scripted(flavour, &json!({"tools": [tool("in", reading)]}), None, ValidationOptions::default())
        .await
        .expect("loads");
    let refused = plugin.call_tool("in", json!({"s": "x".repeat(1 << 20)})).await.unwrap_err();
    assert_eq!(pointers(&refused), [("", "validationBudget")]);
    let listed = plugin.call_tool("in", json!({"s": "x".repeat(300)})).await.unwrap_err();
    assert_eq!(pointers(&listed), [("/s", "anyOf")]);
}

/// A plugin with a pathological schema is refused at load while another
/// plugin's calls go on, on the same single-threaded executor: nothing of
/// it runs on the executor for long. (Before the bounds, loading succeeded
/// and validating `{"a": 0}` held the only thread for minutes.)
#[tokio::test]
async fn a_pathological_schema_never_delays_another_plugin() {
    let calculator = Plugin::load(Flavour::Extism.example("calculator")).await.expect("load calculator");
    let mut output = tool("out", object());
    output["outputSchema"] = doubling_schema(30);
    let describe = json!({"tools": [tool("fan_out", doubling_schema(30)), output]});
    let result = json!({"content": [], "structuredContent": {"a": 0}});
    let hostile = tokio::spawn(async move {
        let plugin = scripted(Flavour::Extism, &describe, Some(&result), ValidationOptions::default()).await?;
        // Only reached without the bounds: each of these takes minutes.
        plugin.call_tool("fan_out", json!({"a": 0})).await?;
        plugin.call_tool("out", json!({})).await
    });
    let calls = async {
        let mut worst = std::time::Duration::ZERO;
        for i in 0..200 {
            let started = std::time::Instant::now();
            let sum = calculator.call_tool("add", json!({"a": i, "b": 1})).await.expect("add");
            worst = worst.max(started.elapsed());
            assert_eq!(sum.texts().next(), Some((i + 1).to_string().as_str()));
            tokio::task::yield_now().await;
        }
        worst
    };
    // Generous: 200 calls take milliseconds; the unbounded schema, minutes.
    // The worst single call is reported (`--nocapture`), never asserted.
    let worst = tokio::time::timeout(std::time::Duration::from_secs(20), calls)
        .await
        .expect("the calculator's calls were held up");
    eprintln!("slowest of 200 calculator calls beside the pathological plugin: {worst:?}");
    let refused = tokio::time::timeout(std::time::Duration::from_secs(20), hostile)
        .await
        .expect("the hostile plugin's load was held up")
        .expect("task")
        .expect_err("the pathological schemas must be refused");
    let problems = load_problems(refused);
    assert_eq!(
        summary(&problems).iter().map(|p| p.2).collect::<Vec<_>>(),
        ["schema-limit", "schema-limit"],
        "{problems:#?}"
    );
}

async fn local_refs_work_in_2020_12(flavour: Flavour) {
    let schema = json!({
        "type": "object",
        "$defs": {"positive": {"type": "integer", "minimum": 1}},
        "properties": {"n": {"$ref": "#/$defs/positive"}},
        "required": ["n"]
    });
    let plugin = scripted(flavour, &json!({"tools": [tool("t", schema)]}), None, ValidationOptions::default())
        .await
        .expect("loads");
    plugin.validate_arguments("t", json!({"n": 3})).expect("valid");
    let error = plugin.validate_arguments("t", json!({"n": 0})).unwrap_err();
    assert_eq!(pointers(&error), [("/n", "minimum")]);
}

async fn draft_07_is_honoured_when_declared(flavour: Flavour) {
    // Tuple `items` is draft-07; 2020-12 spells it `prefixItems`.
    let schema = json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "definitions": {"word": {"type": "string"}},
        "properties": {"pair": {"type": "array", "items": [{"$ref": "#/definitions/word"}, {"type": "integer"}]}}
    });
    let plugin = scripted(flavour, &json!({"tools": [tool("t", schema)]}), None, ValidationOptions::default())
        .await
        .expect("loads");
    plugin.validate_arguments("t", json!({"pair": ["a", 1]})).expect("valid");
    let error = plugin.validate_arguments("t", json!({"pair": [1, "b"]})).unwrap_err();
    assert_eq!(pointers(&error), [("/pair/0", "type"), ("/pair/1", "type")]);
}

async fn other_dialects_are_a_clear_error(flavour: Flavour) {
    let schema = json!({"$schema": "http://json-schema.org/draft-04/schema#", "type": "object"});
    let problems = refused(flavour, json!({"tools": [tool("old", schema)]})).await;
    assert_eq!(summary(&problems), [(Some("old"), "/tools/0/inputSchema", "schema")]);
    assert!(problems[0].message.contains("unsupported JSON Schema dialect"), "{}", problems[0].message);
}

async fn metadata_versions_namespaces_and_tags(flavour: Flavour) {
    let mut with_meta = tool("search", object());
    with_meta["namespace"] = json!("web");
    with_meta["version"] = json!("v1.2.3");
    with_meta["tags"] = json!(["  Web Search ", "web-search", "HTTP(S)"]);
    let mut bare = tool("plain", object());
    bare["namespace"] = json!("web");
    let plugin = scripted(
        flavour,
        &json!({"tools": [with_meta, bare, tool("none", object())]}),
        None,
        ValidationOptions::default(),
    )
    .await
    .expect("loads");
    assert_eq!(plugin.tool_id("search"), Some("web:search:1.2.3"));
    assert_eq!(plugin.tool_id("plain"), Some("web:plain"));
    assert_eq!(plugin.tool_id("none"), Some("none"));
    let search = plugin.tool("search").expect("search");
    assert_eq!(search.extra["version"], "1.2.3");
    assert_eq!(search.extra["tags"], json!(["web-search", "https"]));

    let mut bad = tool("bad", object());
    bad["version"] = json!("1.2");
    let mut colon = tool("colon", object());
    colon["namespace"] = json!("a:b");
    let problems = refused(flavour, json!({"tools": [bad, colon]})).await;
    assert_eq!(
        summary(&problems),
        [(Some("colon"), "/tools/1/namespace", "pattern"), (Some("bad"), "/tools/0/version", "semver")]
    );
}

async fn a_describe_with_three_problems_reports_all_three(flavour: Flavour) {
    let problems = refused(
        flavour,
        json!({"tools": [
            tool("fine", object()),
            tool("has space", object()),
            tool("fine", object()),
            tool("ext", json!({"type": "object", "properties": {"a": {"$ref": "https://example.com/x"}}})),
        ]}),
    )
    .await;
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert_eq!(
        summary(&problems),
        [
            (Some("has space"), "/tools/1/name", "pattern"),
            (Some("fine"), "/tools/2/name", "unique-name"),
            (Some("ext"), "/tools/3/inputSchema", "schema"),
        ]
    );
}

async fn lenient_mode_loads_the_valid_tools_and_warns_about_the_rest(flavour: Flavour) {
    let describe = json!({"tools": [tool("good", object()), tool("bad name", object())]});
    let lenient = ValidationOptions::default().with_lenient(true);
    let plugin = scripted(flavour, &describe, None, lenient).await.expect("lenient load");
    let names: Vec<&str> = plugin.tools().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["good"]);
    assert_eq!(summary(plugin.warnings()), [(Some("bad name"), "/tools/1/name", "pattern")]);
}

#[tokio::test]
async fn a_describe_document_wrong_as_a_whole_is_refused_even_leniently() {
    // (A component's `describe` returns a typed list: it has no such form.)
    let lenient = ValidationOptions::default().with_lenient(true);
    let error = scripted(Flavour::Extism, &json!({"tool": []}), None, lenient).await.unwrap_err();
    assert_eq!(summary(&load_problems(error)), [(None, "/tools", "required")]);
}

fn pointers(error: &Error) -> Vec<(&str, &str)> {
    let violations: &[Violation] = match error {
        Error::InvalidArguments { violations, .. } => violations,
        Error::InvalidOutput { problem: OutputProblem::Invalid { violations, .. }, .. } => violations,
        other => panic!("expected violations, got {other:?}"),
    };
    violations.iter().map(|v| (v.instance_path.as_str(), v.keyword.as_str())).collect()
}

async fn arguments_are_checked_before_the_plugin_runs(flavour: Flavour) {
    let plugin = Plugin::load(flavour.example("calculator")).await.expect("load");
    let error = plugin.call_tool("add", json!({"a": "two"})).await.unwrap_err();
    assert!(error.is_invalid_arguments(), "{error:?}");
    assert_eq!(pointers(&error), [("/a", "type"), ("/b", "required")]);
    let message = error.to_string();
    assert!(message.contains("\"two\" is not of type \"number\""), "{message}");

    // Missing and null arguments mean `{}`.
    for none in [Value::Null, json!({})] {
        assert_eq!(
            pointers(&plugin.call_tool("add", none).await.unwrap_err()),
            [("/a", "required"), ("/b", "required")]
        );
    }
}

async fn the_plugin_does_not_run_when_arguments_are_refused(flavour: Flavour) {
    // `hostile.panic` would trap if it ran; a schema it fails keeps it from running.
    let describe = json!({"tools": [tool("t", json!({"type": "object", "required": ["x"]}))]});
    let result = json!({"content": [{"type": "text", "text": "ran"}]});
    let plugin = scripted(flavour, &describe, Some(&result), ValidationOptions::default()).await.expect("load");
    let error = plugin.call_tool("t", json!({})).await.unwrap_err();
    assert_eq!(pointers(&error), [("/x", "required")]);
    let ran = plugin.call_tool("t", json!({"x": 1})).await.expect("runs");
    assert_eq!(ran.texts().next(), Some("ran"));
}

async fn formats_are_annotations_by_default_and_enforced_on_request(flavour: Flavour) {
    let schema = json!({"type": "object", "properties": {"when": {"type": "string", "format": "date-time"}}});
    let describe = json!({"tools": [tool("t", schema)]});
    let args = json!({"when": "next tuesday"});
    let plugin = scripted(flavour, &describe, None, ValidationOptions::default()).await.expect("load");
    plugin.validate_arguments("t", args.clone()).expect("format is an annotation");
    let strict = ValidationOptions::default().with_enforce_formats(true);
    let plugin = scripted(flavour, &describe, None, strict).await.expect("load");
    assert_eq!(pointers(&plugin.validate_arguments("t", args).unwrap_err()), [("/when", "format")]);
}

/// Call tool `t` of a scripted plugin that returns `result`.
async fn call_returning(
    flavour: Flavour,
    result: Value,
    output_schema: Option<Value>,
) -> Result<toolhost::CallToolResult, Error> {
    let mut t = tool("t", object());
    if let Some(schema) = output_schema {
        t["outputSchema"] = schema;
    }
    let plugin =
        scripted(flavour, &json!({"tools": [t]}), Some(&result), ValidationOptions::default()).await.expect("load");
    plugin.call_tool("t", json!({})).await
}

/// The Extism flavour's results are JSON the plugin wrote; a component's
/// are WIT values, which cannot have these mistakes.
#[tokio::test]
async fn results_must_follow_the_protocol() {
    let flavour = Flavour::Extism;
    let cases = [
        (json!({"contents": []}), vec![("/content", "required")]),
        (json!({"content": [{"type": "video", "url": "x"}]}), vec![("/content/0/type", "enum")]),
        (json!({"content": [{"type": "text"}]}), vec![("/content/0/text", "required")]),
        (json!({"content": [{"type": "text", "text": 5}]}), vec![("/content/0/text", "type")]),
        (json!({"content": [{"type": "image", "data": "AAAA"}]}), vec![("/content/0/mimeType", "required")]),
        (
            json!({"content": [{"type": "audio", "data": "not base64!", "mimeType": "audio/wav"}]}),
            vec![("/content/0/data", "pattern")],
        ),
        (
            json!({"content": [{"type": "image", "data": "AAA", "mimeType": "image/png"}]}),
            vec![("/content/0/data", "pattern")],
        ),
        (
            json!({"content": [{"type": "resource", "resource": {"text": "t"}}]}),
            vec![("/content/0/resource/uri", "required")],
        ),
        (
            json!({"content": [{"type": "resource", "resource": {"uri": "file:///x"}}]}),
            vec![("/content/0/resource", "anyOf")],
        ),
        (
            json!({"content": [{"type": "resource", "resource": {"uri": "file:///x", "blob": "%%"}}]}),
            vec![("/content/0/resource/blob", "pattern")],
        ),
        (json!({"content": [{"type": "resource_link", "uri": "file:///x"}]}), vec![("/content/0/name", "required")]),
        (json!({"content": [], "isError": "yes"}), vec![("/isError", "type")]),
    ];
    for (result, expected) in cases {
        let error = call_returning(flavour, result.clone(), None).await.expect_err(&result.to_string());
        assert!(error.is_invalid_output(), "{result}: {error:?}");
        assert_eq!(pointers(&error), expected, "{result}");
    }
}

async fn valid_results_of_every_content_type_pass(flavour: Flavour) {
    let result = json!({"content": [
        {"type": "text", "text": "t", "annotations": null, "mimeType": null},
        {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png", "annotations": {"audience": ["user"], "priority": 0.5}},
        {"type": "audio", "data": "", "mimeType": "audio/wav"},
        {"type": "resource", "resource": {"uri": "file:///a", "text": "a"}},
        {"type": "resource", "resource": {"uri": "file:///b", "blob": "YWI=", "mimeType": "application/octet-stream"}},
        {"type": "resource_link", "uri": "file:///c", "name": "c"}
    ], "isError": false});
    let ok = call_returning(flavour, result, None).await.expect("valid");
    assert_eq!(ok.content.len(), 6);
}

async fn structured_content_must_match_the_output_schema(flavour: Flavour) {
    let schema = json!({"type": "object", "properties": {"result": {"type": "number"}}, "required": ["result"]});
    let good = json!({"content": [], "structuredContent": {"result": 1}});
    call_returning(flavour, good, Some(schema.clone())).await.expect("valid");

    let wrong = json!({"content": [], "structuredContent": {"result": "one"}});
    let error = call_returning(flavour, wrong, Some(schema.clone())).await.unwrap_err();
    assert_eq!(pointers(&error), [("/structuredContent/result", "type")]);

    let missing = json!({"content": [{"type": "text", "text": "1"}]});
    let error = call_returning(flavour, missing, Some(schema.clone())).await.unwrap_err();
    assert_eq!(pointers(&error), [("/structuredContent", "outputSchema")]);

    // A tool error is passed through, not judged against the output schema.
    let tool_error = json!({"content": [{"type": "text", "text": "no"}], "isError": true});
    assert!(call_returning(flavour, tool_error, Some(schema)).await.expect("passed through").is_error());
}

async fn with_validation_off_results_pass_unchecked(flavour: Flavour) {
    let describe = json!({"tools": [tool("t", json!({"type": "object", "required": ["x"]}))]});
    let result = json!({"content": [{"type": "image", "data": "not base64", "mimeType": "image/png"}]});
    let plugin = scripted(flavour, &describe, Some(&result), ValidationOptions::off()).await.expect("load");
    let passed = plugin.call_tool("t", json!({})).await.expect("unchecked");
    assert_eq!(passed.content.len(), 1);
}

/// A component's JSON text fields that are not JSON are named by pointer;
/// its call errors become a failure or, for arguments, a tool error.
#[tokio::test]
async fn component_json_fields_and_call_errors() {
    let flavour = Flavour::Component;
    // (The scripted component passes a string `structuredContent` on as
    // the JSON text itself.)
    let error = call_returning(flavour, json!({"content": [], "structuredContent": "{oops"}), None).await.unwrap_err();
    match &error {
        Error::InvalidOutput { problem: OutputProblem::NotJson { message, .. }, .. } => {
            assert!(message.contains("/structuredContent"), "{message}");
        }
        other => panic!("expected output that is not JSON, got {other:?}"),
    }

    // JSON, but not an object: the pointer and keyword the protocol schema
    // gives for an Extism plugin's result.
    let error = call_returning(flavour, json!({"content": [], "structuredContent": "[1, 2]"}), None).await.unwrap_err();
    assert_eq!(pointers(&error), [("/structuredContent", "type")]);
    let error =
        call_returning(Flavour::Extism, json!({"content": [], "structuredContent": [1, 2]}), None).await.unwrap_err();
    assert_eq!(pointers(&error), [("/structuredContent", "type")]);

    let failed = call_returning(flavour, json!({"callError": {"kind": "failed", "message": "it broke"}}), None).await;
    let failed = failed.unwrap_err();
    assert!(failed.is_plugin_error_message() && failed.to_string().contains("it broke"), "{failed:?}");
    let args =
        call_returning(flavour, json!({"callError": {"kind": "invalid-arguments", "message": "x is odd"}}), None)
            .await
            .expect("a tool error");
    assert!(args.is_error());
    assert!(args.texts().next().unwrap().contains("x is odd"));
    let unknown = call_returning(flavour, json!({"callError": {"kind": "unknown-tool", "message": "t"}}), None).await;
    assert!(unknown.unwrap_err().to_string().contains("says it has no tool `t`"));
}

both_flavours!(
    tool_names_must_be_1_to_128_characters_of_the_allowed_set,
    duplicate_names_are_refused,
    names_that_differ_only_in_case_are_refused,
    pathological_schemas_are_refused_at_load_with_a_pointer,
    patterns_run_on_a_linear_time_engine,
    an_instance_too_costly_for_its_schema_is_refused_unchecked,
    many_violations_at_a_long_string_are_listed_short_and_bounded,
    input_schemas_must_be_objects_with_an_object_root,
    schemas_must_compile,
    external_refs_are_refused_never_fetched,
    local_refs_work_in_2020_12,
    draft_07_is_honoured_when_declared,
    other_dialects_are_a_clear_error,
    metadata_versions_namespaces_and_tags,
    a_describe_with_three_problems_reports_all_three,
    lenient_mode_loads_the_valid_tools_and_warns_about_the_rest,
    arguments_are_checked_before_the_plugin_runs,
    the_plugin_does_not_run_when_arguments_are_refused,
    formats_are_annotations_by_default_and_enforced_on_request,
    valid_results_of_every_content_type_pass,
    structured_content_must_match_the_output_schema,
    with_validation_off_results_pass_unchecked,
);

/// mcp.run's published wolfram-alpha servlet returns one tool object from
/// `describe`, an early shape of the interface: it loads as a one-tool
/// list, with a warning naming the shape, and is validated as any list.
#[tokio::test]
async fn a_describe_of_one_tool_object_loads_as_a_one_tool_list_with_a_warning() {
    let one = json!({"name": "ask", "description": "Ask a question.",
        "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}});
    let result = json!({"content": [{"type": "text", "text": "42"}]});
    let plugin = scripted(Flavour::Extism, &one, Some(&result), ValidationOptions::default()).await.expect("loads");
    let names: Vec<&str> = plugin.tools().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["ask"]);
    let warnings = plugin.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0].rule, LoadProblem::ONE_TOOL_SHAPE);
    assert!(warnings[0].as_warning().contains("one tool object (`ask`) instead of a ListToolsResult"), "{warnings:?}");
    // Its arguments are checked as any tool's.
    let error = plugin.call_tool("ask", json!({})).await.unwrap_err();
    assert!(error.is_invalid_arguments(), "{error:?}");
    let answer = plugin.call_tool("ask", json!({"q": "life"})).await.expect("call");
    assert_eq!(answer.texts().next(), Some("42"));
    // The one tool is held to the rules: a bad schema still refuses it.
    let bad = json!({"name": "ask", "inputSchema": {"type": "object", "properties": {"q": {"type": 7}}}});
    let error = scripted(Flavour::Extism, &bad, None, ValidationOptions::default()).await.unwrap_err();
    assert!(!load_problems(error).is_empty());
}
