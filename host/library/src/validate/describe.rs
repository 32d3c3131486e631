//! The `describe` output, checked: the protocol for the whole document,
//! unique names (regardless of case), and each tool's schemas (compiled
//! once per distinct schema), metadata and requirements.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;
use toolhost_protocol::{JsonObject, Tool};

use super::{
    CheckedDescribe, CheckedTool, Schema, SchemaProblem, ValidationOptions, compile_schema, list_tools_result,
    violations,
};
use crate::error::LoadProblem;

/// A `describe` output that is one tool object (`name` and `inputSchema`,
/// no `tools`), an early shape of the servlet interface that published
/// servlets still return, as the one-tool `ListToolsResult` it means, with
/// a warning naming the shape. Anything else is returned as it is.
pub(crate) fn one_tool_shape(raw: Value) -> (Value, Option<LoadProblem>) {
    let is_one_tool = raw.as_object().is_some_and(|object| {
        !object.contains_key("tools")
            && object.get("name").is_some_and(Value::is_string)
            && object.get("inputSchema").is_some_and(Value::is_object)
    });
    if !is_one_tool {
        return (raw, None);
    }
    let name = raw.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
    let warning = LoadProblem {
        message: format!(
            "describe returned one tool object (`{}`) instead of a ListToolsResult ({{\"tools\": [...]}}), an \
             early shape of the servlet interface; it is loaded as a list of that one tool",
            name.chars().take(64).collect::<String>()
        ),
        tool: Some(name),
        pointer: String::new(),
        rule: LoadProblem::ONE_TOOL_SHAPE.to_owned(),
    };
    (serde_json::json!({ "tools": [raw] }), Some(warning))
}

/// Check a `describe` output, compiling the validators of every valid
/// tool: the protocol for the whole document, then unique names, then each
/// tool on its own. A tool with a problem is left out, with its problems;
/// the rest load.
pub(crate) fn check_describe(raw: &Value, options: &ValidationOptions) -> CheckedDescribe {
    let raw_tools = raw.get("tools").and_then(Value::as_array);
    let label = |index: usize| tool_label(raw_tools, index);
    let (mut problems, mut bad_tools, fatal) = protocol_problems(raw, raw_tools, &label);
    let Some(raw_tools) = raw_tools.filter(|_| !fatal) else {
        return CheckedDescribe { tools: Vec::new(), problems, fatal: true };
    };
    problems.extend(duplicate_names(raw_tools, &mut bad_tools, &label));

    // Tools often share a schema (`{"type": "object"}`, one argument type
    // for several tools): each distinct one is compiled once.
    let mut tools = Vec::new();
    let mut compiled = Compiled::default();
    for (index, raw_tool) in raw_tools.iter().enumerate() {
        if bad_tools[index] {
            continue;
        }
        match check_tool(raw_tool, index, label(index), &mut compiled, options) {
            Ok(tool) => tools.push(tool),
            Err(tool_problems) => problems.extend(tool_problems),
        }
    }
    CheckedDescribe { tools, problems, fatal: false }
}

/// How a problem names a tool: its name, or `#N` when it has none.
fn tool_label(raw_tools: Option<&Vec<Value>>, index: usize) -> String {
    raw_tools
        .and_then(|tools| tools.get(index))
        .and_then(|tool| tool.get("name"))
        .and_then(Value::as_str)
        .filter(|name| !name.is_empty())
        .map_or_else(|| format!("#{index}"), str::to_owned)
}

/// The protocol, for the whole document at once: its problems, which tools
/// break it, and whether the document itself does (no tool then loads).
fn protocol_problems(
    raw: &Value,
    raw_tools: Option<&Vec<Value>>,
    label: &dyn Fn(usize) -> String,
) -> (Vec<LoadProblem>, Vec<bool>, bool) {
    let mut problems = Vec::new();
    let mut bad_tools = vec![false; raw_tools.map_or(0, Vec::len)];
    let mut fatal = false;
    for violation in violations(list_tools_result(), raw) {
        let index = tool_index(&violation.instance_path);
        match index {
            Some(i) => bad_tools[i] = true,
            None => fatal = true,
        }
        problems.push(LoadProblem {
            tool: index.map(label),
            pointer: violation.instance_path,
            rule: violation.keyword,
            message: violation.message,
        });
    }
    (problems, bad_tools, fatal)
}

/// Duplicate names, among all tools, each marked bad. Names that differ
/// only in case are duplicates too: approval and filters name tools, and
/// `Divide` must not slip past a rule about `divide`.
fn duplicate_names(raw_tools: &[Value], bad_tools: &mut [bool], label: &dyn Fn(usize) -> String) -> Vec<LoadProblem> {
    let mut problems = Vec::new();
    let mut first_seen: HashMap<String, (usize, &str)> = HashMap::new();
    for (index, raw_tool) in raw_tools.iter().enumerate() {
        let Some(name) = raw_tool.get("name").and_then(Value::as_str) else { continue };
        let folded = name.to_lowercase();
        let Some(&(first, first_name)) = first_seen.get(&folded) else {
            first_seen.insert(folded, (index, name));
            continue;
        };
        bad_tools[index] = true;
        let message = if first_name == name {
            format!("duplicate tool name `{name}` (first at /tools/{first})")
        } else {
            format!(
                "tool name `{name}` differs from `{first_name}` (at /tools/{first}) only in case; tool names must be unique regardless of case"
            )
        };
        problems.push(LoadProblem {
            tool: Some(label(index)),
            pointer: format!("/tools/{index}/name"),
            rule: "unique-name".to_owned(),
            message,
        });
    }
    problems
}

/// One tool that follows the protocol: its schemas compiled, its metadata
/// normalised, its requirements read; or every problem it has.
fn check_tool(
    raw_tool: &Value,
    index: usize,
    label: String,
    compiled: &mut Compiled,
    options: &ValidationOptions,
) -> Result<CheckedTool, Vec<LoadProblem>> {
    let at = |suffix: &str| format!("/tools/{index}{suffix}");
    let mut problems = Vec::new();
    let mut problem = |pointer: String, rule: &str, message: String| {
        problems.push(LoadProblem { tool: Some(label.clone()), pointer, rule: rule.to_owned(), message });
    };
    let mut tool: Tool = match serde_json::from_value(raw_tool.clone()) {
        Ok(tool) => tool,
        Err(error) => {
            problem(at(""), "protocol", error.to_string());
            return Err(problems);
        }
    };
    let input = compiled
        .get(&tool.input_schema, options.enforce_formats)
        .map_err(|e| problem(at(&format!("/inputSchema{}", e.pointer)), e.rule, e.message))
        .ok();
    let output = match &tool.output_schema {
        Some(schema) => compiled
            .get(schema, options.enforce_formats)
            .map(Some)
            .map_err(|e| problem(at(&format!("/outputSchema{}", e.pointer)), e.rule, e.message))
            .ok(),
        None => Some(None),
    };
    let id = match normalize_metadata(&mut tool) {
        Ok(id) => Some(id),
        Err((field, rule, message)) => {
            problem(at(&format!("/{field}")), rule, message);
            None
        }
    };
    let requirements = crate::secrets::Requirements::of(&tool)
        .map_err(|message| {
            let field = if tool.meta.as_ref().is_some_and(|m| m.contains_key("requirements")) {
                "/_meta/requirements"
            } else {
                "/requirements"
            };
            problem(at(field), "requirements", message)
        })
        .ok();
    match (input, output, id, requirements) {
        (Some(input), Some(output), Some(id), Some(requirements)) if problems.is_empty() => {
            Ok(CheckedTool { tool, id, requirements, input, output })
        }
        _ => Err(problems),
    }
}

/// The schemas of one `describe` compiled so far, by a fingerprint of
/// their JSON (then compared whole), with what came of each. The
/// fingerprint's hash is keyed at random, so a plugin cannot choose
/// schemas that all land together and make each lookup compare them all.
#[derive(Default)]
struct Compiled {
    keys: std::hash::RandomState,
    by_fingerprint: HashMap<u64, Vec<(JsonObject, CompiledSchema)>>,
}

/// A schema compiled, or why it was refused.
type CompiledSchema = Result<Arc<Schema>, SchemaProblem>;

impl Compiled {
    /// `schema` compiled ([`compile_schema`]), or its problem: once per
    /// distinct schema.
    fn get(&mut self, schema: &JsonObject, enforce_formats: bool) -> CompiledSchema {
        // serde_json's own `Hash`, which agrees with its `==` (`1` and
        // `1.0` differ, `0.0` and `-0.0` do not).
        let fingerprint = std::hash::BuildHasher::hash_one(&self.keys, schema);
        let same = self.by_fingerprint.entry(fingerprint).or_default();
        if let Some((_, compiled)) = same.iter().find(|(seen, _)| seen == schema) {
            return compiled.clone();
        }
        let compiled = compile_schema(schema, enforce_formats).map(Arc::new);
        same.push((schema.clone(), compiled.clone()));
        compiled
    }
}

/// The tool index of a pointer under `/tools/N`.
fn tool_index(pointer: &str) -> Option<usize> {
    let rest = pointer.strip_prefix("/tools/")?;
    rest.split('/').next()?.parse().ok()
}

/// Validate the optional metadata (`version`, `namespace`, `tags`), normalise
/// it in place, and return the tool's stable id (`namespace:name[:version]`,
/// or the name).
fn normalize_metadata(tool: &mut Tool) -> Result<String, (&'static str, &'static str, String)> {
    let version = match tool.extra.get("version").and_then(Value::as_str) {
        Some(raw) => {
            let version = normalize_version(raw)
                .ok_or_else(|| ("version", "semver", format!("`{raw}` is not a semantic version x.y.z")))?;
            tool.extra.insert("version".to_owned(), Value::String(version.clone()));
            Some(version)
        }
        None => None,
    };
    if let Some(Value::Array(tags)) = tool.extra.get("tags") {
        let tags = normalize_tags(tags.iter().filter_map(Value::as_str));
        tool.extra.insert("tags".to_owned(), Value::from(tags));
    }
    let id = match (tool.extra.get("namespace").and_then(Value::as_str), version) {
        (Some(namespace), Some(version)) => format!("{namespace}:{}:{version}", tool.name),
        (Some(namespace), None) => format!("{namespace}:{}", tool.name),
        (None, _) => tool.name.clone(),
    };
    Ok(id)
}

/// `x.y.z` with non-negative integers; a leading `v` is accepted and dropped.
pub(super) fn normalize_version(raw: &str) -> Option<String> {
    let version = raw.strip_prefix('v').unwrap_or(raw);
    let parts: Vec<&str> = version.split('.').collect();
    let numeric = |p: &&str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    (parts.len() == 3 && parts.iter().all(numeric)).then(|| version.to_owned())
}

/// Tags for stable search: lowercased and trimmed, whitespace runs to `-`,
/// only `[a-z0-9-_.]` kept, at most 64 characters, empty ones dropped,
/// duplicates removed in order, at most 20.
pub(super) fn normalize_tags<'a>(tags: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    const MAX_LEN: usize = 64;
    const MAX_COUNT: usize = 20;
    let mut out: Vec<String> = Vec::new();
    for tag in tags {
        let lowered = tag.trim().to_lowercase();
        let dashed = lowered.split_whitespace().collect::<Vec<_>>().join("-");
        let kept: String = dashed
            .chars()
            .filter(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.'))
            .take(MAX_LEN)
            .collect();
        if !kept.is_empty() && !out.contains(&kept) {
            out.push(kept);
        }
        if out.len() == MAX_COUNT {
            break;
        }
    }
    out
}
