//! Validation of everything that crosses the plugin boundary.
//!
//! - At load: the `describe` output against the protocol and the tool rules
//!   of `tool-schemas.md` (names, duplicates, schemas that compile, metadata).
//! - Before a call: the arguments against the tool's `inputSchema`.
//! - After a call: the result against the protocol, and `structuredContent`
//!   against the tool's `outputSchema`.
//!
//! Every validator is compiled once, at load; a call only runs them. A
//! schema is the plugin's choice, so it is bounded before it is used
//! ([`cost`]): size, nesting, regular expressions, and the worst-case
//! number of subschema evaluations per place of an instance. Patterns run
//! on a linear-time regex engine.

pub(crate) mod cost;
/// The `describe` output: the protocol, unique names, each tool's schemas
/// and metadata.
mod describe;
pub(crate) mod plain;

pub(crate) use describe::{check_describe, one_tool_shape};

use std::sync::{Arc, OnceLock};

use jsonschema::{Draft, ValidationError, Validator};
use serde_json::Value;
use toolhost_protocol::{CallToolResult, JsonObject, Tool, schema};

use crate::error::{LoadProblem, Violation};

/// How strictly a plugin is validated.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ValidationOptions {
    /// Check each call's arguments against the tool's `inputSchema` before the
    /// plugin runs. Default: on.
    pub arguments: bool,
    /// Check each result against the protocol and the tool's `outputSchema`.
    /// Default: on.
    pub results: bool,
    /// Enforce `format` (`date-time`, `email`, ...) instead of treating it as
    /// an annotation. Default: off, as JSON Schema 2020-12 says.
    pub enforce_formats: bool,
    /// Load the valid tools of a plugin whose `describe` output has problems,
    /// reporting the problems as warnings, instead of refusing the plugin.
    /// Default: off.
    pub lenient: bool,
}

impl Default for ValidationOptions {
    fn default() -> Self {
        ValidationOptions { arguments: true, results: true, enforce_formats: false, lenient: false }
    }
}

impl ValidationOptions {
    /// No validation at all: arguments and results pass through unchecked
    /// (the describe output is still checked at load). For benchmarks and
    /// trusted plugins.
    pub fn off() -> Self {
        ValidationOptions { arguments: false, results: false, ..Self::default() }
    }

    /// With [`lenient`](Self::lenient) set.
    pub fn with_lenient(mut self, lenient: bool) -> Self {
        self.lenient = lenient;
        self
    }

    /// With [`enforce_formats`](Self::enforce_formats) set.
    pub fn with_enforce_formats(mut self, enforce: bool) -> Self {
        self.enforce_formats = enforce;
        self
    }
}

/// A tool that passed validation, with its compiled validators.
pub(crate) struct CheckedTool {
    pub tool: Tool,
    pub id: String,
    pub requirements: crate::secrets::Requirements,
    /// Shared by the tools whose schema is the same (compiled once).
    pub input: Arc<Schema>,
    pub output: Option<Arc<Schema>>,
}

/// A compiled schema and its worst-case cost: subschema evaluations per
/// place of an instance.
pub(crate) struct Schema {
    pub validator: Validator,
    pub cost: u64,
    /// Whether its check may read a string's bytes ([`cost::reads_text`]):
    /// then a long string weighs more than one place.
    pub reads_text: bool,
}

/// Why a tool's schema is refused: where in the schema, which rule, what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SchemaProblem {
    /// JSON pointer within the schema (empty for the schema as a whole).
    pub pointer: String,
    /// `schema` (it does not compile) or `schema-limit` (it is too costly).
    pub rule: &'static str,
    pub message: String,
}

/// The outcome of checking a `describe` output.
pub(crate) struct CheckedDescribe {
    pub tools: Vec<CheckedTool>,
    pub problems: Vec<LoadProblem>,
    /// Problems that concern the document as a whole: no tool can be loaded.
    pub fatal: bool,
}

/// A shipped protocol schema, parsed.
fn protocol_schema(text: &str) -> Value {
    serde_json::from_str(text).expect("the shipped protocol schema is JSON")
}

/// A shipped protocol schema, compiled.
fn compile_protocol(schema: &Value) -> Validator {
    jsonschema::options()
        .with_draft(Draft::Draft202012)
        .with_pattern_options(linear_time_patterns())
        .build(schema)
        .expect("the shipped protocol schema compiles")
}

/// The protocol's `ListToolsResult`, which every `describe` is checked
/// against (its cost is not needed: a `describe` is always checked on a
/// blocking thread). Compiled on first use (or by [`prepare`]).
fn list_tools_result() -> &'static Validator {
    static SCHEMA: OnceLock<Validator> = OnceLock::new();
    SCHEMA.get_or_init(|| compile_protocol(&protocol_schema(schema::LIST_TOOLS_RESULT)))
}

/// The protocol's `CallToolResult`, which a result that is not plain
/// ([`plain`]) is checked against. Compiled on its first use: most
/// results never need it, so no start pays for it.
fn call_tool_result() -> &'static Validator {
    static SCHEMA: OnceLock<Validator> = OnceLock::new();
    SCHEMA.get_or_init(|| compile_protocol(&protocol_schema(schema::CALL_TOOL_RESULT)))
}

/// Compile what checking plugins needs and every process compiles alike:
/// JSON Schema 2020-12's meta-schema (every tool's schemas are checked
/// against it; jsonschema compiles it on first use, ~1 ms) and the
/// protocol's `ListToolsResult`, in the order a load needs them; then ask
/// the core count a plugin's pool is sized by (std reads it from the
/// cgroup's files, every time). Each is made once per process; a check
/// that needs one still being made waits for it rather than making it
/// again, so running this beside a load only moves work off the load's
/// path.
pub(crate) fn prepare() {
    let _ = jsonschema::draft202012::meta::validator();
    let _ = list_tools_result();
    let _ = crate::pool::cores();
}

/// Start [`prepare`] on a thread of its own, once per process (a no-op
/// after the first call): called when a runtime is built, so that the
/// first load's set-up, module lookup and instantiation run meanwhile.
/// Should the thread not start, each check compiles what it needs itself.
pub(crate) fn prepare_in_background() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        let _ = std::thread::Builder::new().name("toolhost-prepare".to_owned()).spawn(prepare);
    });
}

/// The worst-case cost of checking a result against the protocol, per
/// place of the result (which decides where a result is checked): worked
/// out from the schema itself, without compiling it.
pub(crate) fn protocol_result_cost() -> u64 {
    static COST: OnceLock<u64> = OnceLock::new();
    *COST.get_or_init(|| {
        cost::evaluations(&protocol_schema(schema::CALL_TOOL_RESULT))
            .expect("the shipped protocol schema is within the bounds")
    })
}

/// `pattern` and `patternProperties` run on the `regex` crate's engine,
/// whose matching time is linear in the input (no backtracking, so no
/// ReDoS); lookaround and backreferences, which need backtracking, do not
/// compile. Compiled size is capped per pattern.
fn linear_time_patterns() -> jsonschema::PatternOptions<jsonschema::Regex> {
    const PATTERN_BYTES: usize = 1 << 20;
    jsonschema::PatternOptions::regex().size_limit(PATTERN_BYTES).dfa_size_limit(PATTERN_BYTES)
}

/// Refuses every external `$ref`: toolhost never fetches schemas.
struct RefuseExternal;

impl jsonschema::Retrieve for RefuseExternal {
    fn retrieve(&self, uri: &jsonschema::Uri<String>) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        Err(format!("external $ref to `{uri}` refused: toolhost never fetches schemas").into())
    }
}

const DRAFT_2020_12: &[&str] =
    &["https://json-schema.org/draft/2020-12/schema", "http://json-schema.org/draft/2020-12/schema"];
const DRAFT_07: &[&str] = &["http://json-schema.org/draft-07/schema", "https://json-schema.org/draft-07/schema"];

/// The dialect a schema declares: 2020-12 when `$schema` is absent.
fn dialect(schema: &JsonObject) -> Result<Draft, String> {
    match schema.get("$schema") {
        None => Ok(Draft::Draft202012),
        Some(Value::String(uri)) => {
            let uri = uri.trim_end_matches('#');
            if DRAFT_2020_12.contains(&uri) {
                Ok(Draft::Draft202012)
            } else if DRAFT_07.contains(&uri) {
                Ok(Draft::Draft7)
            } else {
                Err(format!(
                    "unsupported JSON Schema dialect `{uri}`; toolhost supports 2020-12 (the default) and draft-07"
                ))
            }
        }
        Some(other) => Err(format!("`$schema` must be a URI string, not {other}")),
    }
}

/// Compile a tool's schema and bound its cost, or say why it is refused:
/// first its size and nesting (cheap), then whether it compiles, then the
/// worst-case evaluations per place of an instance.
pub(crate) fn compile_schema(schema: &JsonObject, enforce_formats: bool) -> Result<Schema, SchemaProblem> {
    let document = Value::Object(schema.clone());
    let too_costly =
        |e: cost::TooCostly| SchemaProblem { pointer: e.pointer, rule: "schema-limit", message: e.message };
    cost::check_document(&document).map_err(too_costly)?;
    let not_compiling = |message: String| SchemaProblem { pointer: String::new(), rule: "schema", message };
    let draft = dialect(schema).map_err(not_compiling)?;
    let validator = jsonschema::options()
        .with_draft(draft)
        .with_retriever(RefuseExternal)
        // A base URI, so that relative references resolve to something the
        // retriever can refuse by name.
        .with_base_uri("toolhost:///")
        .with_pattern_options(linear_time_patterns())
        .should_validate_formats(enforce_formats)
        .build(&document)
        .map_err(|error| {
            let message = error.to_string();
            // The retriever's own sentence says it best.
            if let Some(start) = message.find("external $ref to `") {
                return not_compiling(message[start..].to_owned());
            }
            let path = error.instance_path().as_str();
            let mut message = if path.is_empty() { message } else { format!("{message} (at {path} in the schema)") };
            if matches!(error.kind(), jsonschema::error::ValidationErrorKind::Format { format } if format == "regex") {
                message.push_str("; toolhost matches patterns in linear time, without lookaround or backreferences");
            }
            not_compiling(message)
        })?;
    let cost = cost::evaluations(&document).map_err(too_costly)?;
    Ok(Schema { validator, cost, reads_text: cost::reads_text(&document) })
}

/// A JSON value that does not deserialize into the protocol type.
pub(crate) fn protocol_violation(error: &serde_json::Error) -> Violation {
    Violation { instance_path: String::new(), keyword: "protocol".to_owned(), message: error.to_string() }
}

/// Violations listed at most; past them, one more says how many were left
/// out. (A schema may report thousands at one place: every branch of an
/// `allOf`.)
const MAX_VIOLATIONS: usize = 100;
/// Bytes of a violation's message kept at most (jsonschema quotes the
/// offending value in it).
const MAX_MESSAGE: usize = 1024;
/// Bytes of a string kept when it is shortened for listing violations
/// against a schema that does not read strings ([`schema_violations`]).
const SHORTENED: usize = 64;

/// Every violation of `instance` against `validator` (at most
/// [`MAX_VIOLATIONS`], each message at most [`MAX_MESSAGE`] bytes). The
/// fast `is_valid` check runs first; errors are only collected for invalid
/// instances.
pub(crate) fn violations(validator: &Validator, instance: &Value) -> Vec<Violation> {
    if validator.is_valid(instance) {
        return Vec::new();
    }
    list_violations(validator, instance)
}

/// [`violations`] of `instance` against a tool's `schema`. Listing what is
/// wrong can cost far more than checking: jsonschema quotes the offending
/// value in every message, and copies it for each failed branch of an
/// `anyOf`, so a long string at a place with many errors would be copied
/// and printed thousands of times. A schema that reads no string's bytes
/// ([`Schema::reads_text`]) gives the same verdicts on a copy whose long
/// strings are cut short, so the list is made from that copy; the
/// instance's weight, which decided where and whether it is checked,
/// counted such strings as one place each.
pub(crate) fn schema_violations(schema: &Schema, instance: &Value) -> Vec<Violation> {
    if schema.validator.is_valid(instance) {
        return Vec::new();
    }
    if !has_long_string(instance) {
        return list_violations(&schema.validator, instance);
    }
    if !schema.reads_text {
        return list_violations(&schema.validator, &shortened(instance));
    }
    // A schema that reads strings must see them whole. The copies its
    // errors may make are bounded like a check (a place per 64 bytes, times
    // the schema's cost), but more tightly.
    if !cost::fits(instance, schema.cost, true, MAX_LISTING) {
        return vec![Violation {
            instance_path: String::new(),
            keyword: "validationBudget".to_owned(),
            message: format!(
                "the value is invalid; listing its violations could copy its long strings more than \
                 {MAX_LISTING} times 64 bytes, so toolhost reports only that it is invalid"
            ),
        }];
    }
    list_violations(&schema.validator, instance)
}

/// What listing the violations of an instance with long strings against
/// a schema that reads them may cost, in places of 64 bytes times the
/// schema's cost (each error may quote or copy the value at its place):
/// 64 MiB at most.
const MAX_LISTING: u64 = 1 << 20;

/// The errors of an instance known to be invalid, as violations in the
/// instance's document order, bounded.
fn list_violations(validator: &Validator, instance: &Value) -> Vec<Violation> {
    let mut found: Vec<Violation> = validator.iter_errors(instance).map(|error| to_violation(&error)).collect();
    // In document order of the instance, whatever order the schema checks in.
    found.sort_by(|a, b| a.instance_path.cmp(&b.instance_path));
    if found.len() > MAX_VIOLATIONS {
        let left_out = found.len() - MAX_VIOLATIONS;
        found.truncate(MAX_VIOLATIONS);
        found.push(Violation {
            instance_path: String::new(),
            keyword: "violations".to_owned(),
            message: format!("{left_out} more violations not listed"),
        });
    }
    found
}

/// Whether a string of `instance` is longer than [`SHORTENED`] bytes.
fn has_long_string(instance: &Value) -> bool {
    let mut stack = vec![instance];
    while let Some(value) = stack.pop() {
        match value {
            Value::String(text) if text.len() > SHORTENED => return true,
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.values()),
            _ => {}
        }
    }
    false
}

/// `instance` with every string longer than [`SHORTENED`] bytes cut to
/// its first ones (at a character boundary) and `…`. Object keys are
/// kept: a schema looks them up.
fn shortened(instance: &Value) -> Value {
    match instance {
        Value::String(text) if text.len() > SHORTENED => Value::String(format!("{}…", cut(text, SHORTENED))),
        Value::Array(items) => Value::Array(items.iter().map(shortened).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(key, value)| (key.clone(), shortened(value))).collect()),
        other => other.clone(),
    }
}

/// The longest start of `text` of at most `bytes` bytes that ends on a
/// character boundary.
fn cut(text: &str, bytes: usize) -> &str {
    &text[..text.floor_char_boundary(bytes)]
}

fn to_violation(error: &ValidationError<'_>) -> Violation {
    let mut instance_path = error.instance_path().as_str().to_owned();
    // Point at the missing property itself, not at its parent object.
    if let jsonschema::error::ValidationErrorKind::Required { property } = error.kind()
        && let Some(name) = property.as_str()
    {
        instance_path.push('/');
        instance_path.push_str(&name.replace('~', "~0").replace('/', "~1"));
    }
    // A long string at the error is quoted by its start, not whole (the
    // message is made, then cut, so it would be printed whole first).
    let mut message = match error.instance().as_ref() {
        Value::String(text) if text.len() > SHORTENED => {
            let start = Value::String(format!("{}…", cut(text, SHORTENED)));
            error.masked_with(start.to_string()).to_string()
        }
        _ => error.to_string(),
    };
    if message.len() > MAX_MESSAGE {
        message = format!("{}…", cut(&message, MAX_MESSAGE));
    }
    Violation { instance_path, keyword: error.kind().keyword().to_owned(), message }
}

/// Check a call's result: the protocol, then the tool's `outputSchema`.
/// The common shape (text items) is recognised by hand ([`plain`]); any
/// other goes through the protocol's schema, which says what is wrong where.
pub(crate) fn check_result(raw: Value, output: Option<&Schema>) -> Result<CallToolResult, Vec<Violation>> {
    let result = match plain::plain_result(raw) {
        Ok(result) => result,
        Err(raw) => {
            let problems = violations(call_tool_result(), &raw);
            if !problems.is_empty() {
                return Err(problems);
            }
            serde_json::from_value(raw).map_err(|error| vec![protocol_violation(&error)])?
        }
    };
    check_structured(&result, output)?;
    Ok(result)
}

/// Check a result that is typed already (a component's, or an Extism
/// plugin's parsed straight into the type): what its types do not
/// guarantee (`structuredContent` an object, priorities between 0 and 1),
/// with the pointers the protocol schema would give, then the tool's
/// `outputSchema`.
pub(crate) fn check_typed_result(result: &CallToolResult, output: Option<&Schema>) -> Result<(), Vec<Violation>> {
    let mut problems = Vec::new();
    if let Some(structured) = &result.structured_content
        && !structured.is_object()
    {
        problems.push(Violation {
            instance_path: "/structuredContent".to_owned(),
            keyword: "type".to_owned(),
            message: format!("{structured} is not of types \"null\", \"object\""),
        });
    }
    for (index, item) in result.content.iter().enumerate() {
        let annotations = match item {
            toolhost_protocol::Content::Text(c) => c.annotations.as_ref(),
            toolhost_protocol::Content::Image(c) | toolhost_protocol::Content::Audio(c) => c.annotations.as_ref(),
            toolhost_protocol::Content::Resource(c) => c.annotations.as_ref(),
            toolhost_protocol::Content::ResourceLink(c) => c.annotations.as_ref(),
        };
        if let Some(priority) = annotations.and_then(|a| a.priority)
            && !(0.0..=1.0).contains(&priority)
        {
            problems.push(Violation {
                instance_path: format!("/content/{index}/annotations/priority"),
                keyword: if priority < 0.0 { "minimum" } else { "maximum" }.to_owned(),
                message: format!("{priority} is outside 0..1"),
            });
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    check_structured(result, output)
}

/// A successful result of a tool with an `outputSchema` carries
/// `structuredContent` valid against it (a tool error is passed through).
fn check_structured(result: &CallToolResult, output: Option<&Schema>) -> Result<(), Vec<Violation>> {
    if let (Some(output), false) = (output, result.is_error()) {
        match &result.structured_content {
            None => {
                return Err(vec![Violation {
                    instance_path: "/structuredContent".to_owned(),
                    keyword: "outputSchema".to_owned(),
                    message: "the tool declares an outputSchema, so a successful result must carry structuredContent"
                        .to_owned(),
                }]);
            }
            Some(structured) => {
                let problems: Vec<Violation> = schema_violations(output, structured)
                    .into_iter()
                    .map(|mut v| {
                        v.instance_path.insert_str(0, "/structuredContent");
                        v
                    })
                    .collect();
                if !problems.is_empty() {
                    return Err(problems);
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::describe::{normalize_tags, normalize_version};
    use super::*;
    use serde_json::json;

    #[test]
    fn long_strings_are_cut_at_a_character_boundary_for_listing() {
        assert_eq!(cut("abc", 2), "ab");
        assert_eq!(cut("abc", 9), "abc");
        // "é" is two bytes: a cut inside it goes back before it.
        assert_eq!(cut("aé", 2), "a");
        let long = "é".repeat(100);
        let short = shortened(&json!({"k": [long.clone(), "short", 1]}));
        assert_eq!(short, json!({"k": [format!("{}…", "é".repeat(32)), "short", 1]}));
        assert!(has_long_string(&json!([{"k": long}])));
        assert!(!has_long_string(&json!([{"k": "short"}])));
    }

    #[test]
    fn a_long_string_is_quoted_by_its_start_in_a_message() {
        let Value::Object(schema) = json!({"type": "object", "properties": {"s": {"pattern": "^y", "maxLength": 3}}})
        else {
            unreachable!()
        };
        let schema = compile_schema(&schema, false).unwrap();
        assert!(schema.reads_text);
        let found = schema_violations(&schema, &json!({"s": "x".repeat(1_000_000)}));
        let preview = format!("\"{}…\"", "x".repeat(64));
        assert_eq!(found.len(), 2, "{found:?}");
        for violation in &found {
            assert!(violation.message.starts_with(&preview), "{}", violation.message);
            assert!(violation.message.len() < 200, "{}", violation.message);
        }
    }

    #[test]
    fn violations_that_would_copy_long_strings_too_often_are_not_listed() {
        // 200 bounds that all fail at one place, each error copying the
        // string for `anyOf`.
        let branches: Vec<Value> = (0..200).map(|i| json!({"maxLength": i})).collect();
        let Value::Object(schema) = json!({"type": "object", "properties": {"s": {"anyOf": branches}}}) else {
            unreachable!()
        };
        let schema = compile_schema(&schema, false).unwrap();
        // 4 KiB: listed (200 copies of 4 KiB).
        let listed = schema_violations(&schema, &json!({"s": "x".repeat(4_096)}));
        assert_eq!((listed.len(), listed[0].keyword.as_str()), (1, "anyOf"), "{listed:?}");
        // 1 MiB: 200 copies of it would pass the listing budget.
        let refused = schema_violations(&schema, &json!({"s": "x".repeat(1 << 20)}));
        assert_eq!((refused.len(), refused[0].keyword.as_str()), (1, "validationBudget"), "{refused:?}");
        assert!(refused[0].message.contains("reports only that it is invalid"));
    }

    #[test]
    fn the_protocol_schemas_are_within_the_bounds_plugin_schemas_are_held_to() {
        // `ListToolsResult`'s cost is not computed at run time (nothing
        // weighs it); it must be bounded all the same.
        for text in [schema::LIST_TOOLS_RESULT, schema::CALL_TOOL_RESULT] {
            let schema = protocol_schema(text);
            cost::check_document(&schema).expect("within the document limits");
            cost::evaluations(&schema).expect("within the evaluation bound");
        }
    }

    #[test]
    fn preparing_beside_the_first_checks_changes_nothing_they_find() {
        // The first checks of the process race the preparation for the
        // same compiled schemas: each must see complete ones.
        let background = std::thread::spawn(prepare);
        let raw = json!({"tools": [
            {"name": "ok", "inputSchema": {"type": "object"}},
            {"name": 3, "inputSchema": {"type": "object"}},
        ]});
        let checked = check_describe(&raw, &ValidationOptions::default());
        let bad = check_result(json!({"content": [{"type": "text"}]}), None);
        background.join().expect("prepare");
        assert_eq!(checked.tools.iter().map(|t| t.tool.name.as_str()).collect::<Vec<_>>(), ["ok"]);
        assert_eq!(checked.problems.iter().map(|p| p.pointer.as_str()).collect::<Vec<_>>(), ["/tools/1/name"]);
        let violations = bad.expect_err("a text block without text");
        assert!(violations.iter().any(|v| v.instance_path == "/content/0/text"), "{violations:?}");
        // And after it, the same.
        assert_eq!(check_describe(&raw, &ValidationOptions::default()).tools.len(), 1);
    }

    #[test]
    fn tools_that_share_a_schema_share_its_compiled_validator_and_each_hears_of_its_problems() {
        let object = json!({"type": "object", "properties": {"a": {"type": "number"}}});
        let bad = json!({"type": "object", "properties": {"a": {"type": 7}}});
        let raw = json!({"tools": [
            {"name": "one", "inputSchema": object, "outputSchema": object},
            {"name": "two", "inputSchema": object},
            {"name": "three", "inputSchema": {"type": "object", "properties": {"a": {"type": "number", "minimum": 1}}}},
            {"name": "four", "inputSchema": bad},
            {"name": "five", "inputSchema": bad},
            // Equal as JSON numbers are not (1 and 1.0): not shared.
            {"name": "six", "inputSchema": {"type": "object", "maxProperties": 1}},
            {"name": "seven", "inputSchema": {"type": "object", "maxProperties": 1.0}},
            // Equal as JSON numbers are (0.0 and -0.0): shared.
            {"name": "eight", "inputSchema": {"type": "object", "minProperties": 0.0}},
            {"name": "nine", "inputSchema": {"type": "object", "minProperties": -0.0}},
        ]});
        let checked = check_describe(&raw, &ValidationOptions::default());
        let tools = &checked.tools;
        let names: Vec<&str> = tools.iter().map(|t| t.tool.name.as_str()).collect();
        assert_eq!(names, ["one", "two", "three", "six", "seven", "eight", "nine"]);
        assert!(Arc::ptr_eq(&tools[0].input, &tools[1].input));
        assert!(Arc::ptr_eq(&tools[0].input, tools[0].output.as_ref().unwrap()));
        assert!(!Arc::ptr_eq(&tools[0].input, &tools[2].input));
        assert!(!Arc::ptr_eq(&tools[3].input, &tools[4].input));
        assert!(Arc::ptr_eq(&tools[5].input, &tools[6].input));
        // Each sharing tool hears of the problem at its own place.
        let pointers: Vec<&str> = checked.problems.iter().map(|p| p.pointer.as_str()).collect();
        assert_eq!(pointers.len(), 2, "{:?}", checked.problems);
        assert!(pointers[0].starts_with("/tools/3/inputSchema") && pointers[1].starts_with("/tools/4/inputSchema"));
        assert_eq!(checked.problems[0].message, checked.problems[1].message);
        // The shared validator is the schema's own.
        assert!(tools[1].input.validator.is_valid(&json!({"a": 1})));
        assert!(!tools[1].input.validator.is_valid(&json!({"a": "x"})));
        assert!(!tools[2].input.validator.is_valid(&json!({"a": 0})));
    }

    #[test]
    fn versions() {
        assert_eq!(normalize_version("1.2.3").as_deref(), Some("1.2.3"));
        assert_eq!(normalize_version("v10.0.7").as_deref(), Some("10.0.7"));
        for bad in ["1.2", "1.2.3.4", "a.b.c", "1..3", "vv1.2.3", "", "1.2.3-beta"] {
            assert_eq!(normalize_version(bad), None, "{bad}");
        }
    }

    #[test]
    fn tags_are_normalised_as_tool_schemas_md_says() {
        let long = "x".repeat(70);
        let tags = normalize_tags(["  Data  Science ", "data-science", "C++ & Rust!", "ünïcode", "", &long, "a_b.c"]);
        assert_eq!(tags, ["data-science", "c--rust", "ncode", &"x".repeat(64), "a_b.c"]);
        let many: Vec<String> = (0..30).map(|i| format!("t{i}")).collect();
        assert_eq!(normalize_tags(many.iter().map(String::as_str)).len(), 20);
    }

    #[test]
    fn the_protocol_result_schema_is_cheap() {
        let cost = protocol_result_cost();
        assert!((1..100).contains(&cost), "{cost}");
    }

    #[test]
    fn dialects() {
        let obj = |v: Value| v.as_object().unwrap().clone();
        assert_eq!(dialect(&obj(json!({}))), Ok(Draft::Draft202012));
        assert_eq!(dialect(&obj(json!({"$schema": "http://json-schema.org/draft-07/schema#"}))), Ok(Draft::Draft7));
        assert!(
            dialect(&obj(json!({"$schema": "http://json-schema.org/draft-04/schema#"})))
                .unwrap_err()
                .contains("draft-04")
        );
    }

    #[test]
    fn required_points_at_the_missing_property() {
        let validator = compile_schema(
            json!({"type": "object", "required": ["a/b"], "properties": {"x": {"type": "string"}}})
                .as_object()
                .unwrap(),
            false,
        )
        .unwrap()
        .validator;
        let found = violations(&validator, &json!({"x": 1}));
        let mut pointers: Vec<&str> = found.iter().map(|v| v.instance_path.as_str()).collect();
        pointers.sort();
        assert_eq!(pointers, ["/a~1b", "/x"]);
    }

    #[test]
    fn formats_are_annotations_unless_enforced() {
        let schema = json!({"type": "object", "properties": {"when": {"type": "string", "format": "date-time"}}});
        let schema = schema.as_object().unwrap();
        let args = json!({"when": "yesterday"});
        assert!(violations(&compile_schema(schema, false).unwrap().validator, &args).is_empty());
        let enforced = violations(&compile_schema(schema, true).unwrap().validator, &args);
        assert_eq!(enforced.len(), 1);
        assert_eq!((enforced[0].instance_path.as_str(), enforced[0].keyword.as_str()), ("/when", "format"));
    }
}
