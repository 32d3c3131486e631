//! # toolhost-check
//!
//! Conformance checks for plugin authors (`toolhost check`).
//!
//! A plugin that loads has already passed the describe checks (protocol,
//! schemas, names). [`check_plugin`] then calls every tool with arguments
//! generated from its `inputSchema`: valid ones, leaning to the edges of what
//! the schema allows, and invalid ones made by breaking a valid one. Each
//! call must stay within the plugin's limits and answer with a result that
//! is valid against the protocol and the tool's `outputSchema`:
//!
//! - on valid arguments the plugin must not trap, time out, hit a limit or
//!   return an invalid result (a tool error, `isError: true`, is an answer);
//! - on invalid arguments, sent past the host's own check, the plugin must
//!   answer with a result or refuse with an error, never trap: not every host
//!   validates arguments for it.
//!
//! Generation is seeded ([`CheckOptions::seed`]): the same seed, plugin and
//! toolhost version give the same calls.

#![deny(missing_docs)]

mod sample;

use std::time::{Duration, Instant};

use rand::{SeedableRng as _, rngs::StdRng, seq::SliceRandom as _};
use serde::Serialize;
use serde_json::{Map, Value};

use sample::{Sampler, Shape};
use toolhost::{Error, FaultKind, Plugin};

/// How thoroughly to check.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// Seed of the argument generator.
    pub seed: u64,
    /// Calls with valid arguments per tool (the first two at the minimal and
    /// maximal edges of the schema).
    pub valid_calls: usize,
    /// Calls with invalid arguments per tool, where the schema can be broken.
    pub invalid_calls: usize,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions { seed: 0, valid_calls: 8, invalid_calls: 4 }
    }
}

/// What [`check_plugin`] found.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckReport {
    /// The plugin's name.
    pub plugin: String,
    /// The seed the arguments were generated with.
    pub seed: u64,
    /// Whether every call of every tool passed.
    pub passed: bool,
    /// One entry per tool, in the plugin's order.
    pub tools: Vec<ToolCheck>,
}

impl CheckReport {
    /// Calls made, over all tools.
    pub fn calls(&self) -> usize {
        self.tools.iter().map(|t| t.calls).sum()
    }

    /// Failures, over all tools.
    pub fn failures(&self) -> usize {
        self.tools.iter().map(|t| t.failures.len()).sum()
    }
}

/// The check of one tool.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCheck {
    /// The tool's name.
    pub tool: String,
    /// Calls made.
    pub calls: usize,
    /// Calls that passed.
    pub passed: usize,
    /// What failed, one entry per failed call (or per thing that could not
    /// be checked).
    pub failures: Vec<CheckFailure>,
    /// What was not checked, and why.
    pub notes: Vec<String>,
    /// The longest call, in milliseconds.
    pub slowest_ms: f64,
}

/// One failure.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckFailure {
    /// The arguments of the call that failed (`null` when no call was made).
    pub arguments: Value,
    /// Whether the arguments were valid against the `inputSchema`.
    pub valid_arguments: bool,
    /// What went wrong, in one line.
    pub reason: String,
}

/// Call every tool of `plugin` with generated arguments, and report.
///
/// Calls run one after another, each under the plugin's limits, so a
/// failure names the exact arguments that caused it.
pub async fn check_plugin(plugin: &Plugin, options: &CheckOptions) -> CheckReport {
    let mut tools = Vec::new();
    for tool in plugin.tools() {
        tools.push(check_tool(plugin, &tool.name, options).await);
    }
    let passed = tools.iter().all(|t| t.failures.is_empty());
    CheckReport { plugin: plugin.name().to_owned(), seed: options.seed, passed, tools }
}

async fn check_tool(plugin: &Plugin, name: &str, options: &CheckOptions) -> ToolCheck {
    let mut check = ToolCheck {
        tool: name.to_owned(),
        calls: 0,
        passed: 0,
        failures: Vec::new(),
        notes: Vec::new(),
        slowest_ms: 0.0,
    };
    let missing = plugin.missing_secrets(name);
    if !missing.is_empty() {
        check.notes.push(format!("not called: it needs the secret {}, which is not available", missing.join(", ")));
        return check;
    }
    let (valid, invalid) = match generate(plugin, name, options) {
        Ok(generated) => generated,
        Err(reason) => {
            check.failures.push(CheckFailure {
                arguments: Value::Null,
                valid_arguments: true,
                reason: format!("uncheckable: {reason}"),
            });
            return check;
        }
    };
    if valid.is_empty() {
        check.failures.push(CheckFailure {
            arguments: Value::Null,
            valid_arguments: true,
            reason: "no arguments that satisfy the inputSchema could be generated: is the schema satisfiable?"
                .to_owned(),
        });
    }
    for arguments in valid {
        let started = Instant::now();
        let outcome = plugin.call_tool(name, Value::Object(arguments.clone())).await;
        check.record(started.elapsed(), arguments, None, outcome);
    }
    for (what, arguments) in invalid {
        let started = Instant::now();
        let outcome = plugin.call_tool_unvalidated(name, arguments.clone()).await;
        check.record(started.elapsed(), arguments, Some(what), outcome);
    }
    check
}

impl ToolCheck {
    /// Count one call: `broken` says how its arguments were made invalid
    /// (`None` for valid arguments).
    fn record(
        &mut self,
        took: Duration,
        arguments: Map<String, Value>,
        broken: Option<String>,
        outcome: Result<toolhost::CallToolResult, Error>,
    ) {
        self.calls += 1;
        self.slowest_ms = self.slowest_ms.max(took.as_secs_f64() * 1e3);
        let reason = match (&broken, outcome) {
            (_, Ok(_)) => None,
            // Refusing bad input with an error is an answer.
            (Some(_), Err(Error::PluginFailed { fault, .. })) if fault.kind == FaultKind::Error => None,
            (_, Err(error)) => Some(one_line(&describe(&error))),
        };
        match reason {
            None => self.passed += 1,
            Some(reason) => {
                let reason = match &broken {
                    None => format!("on valid arguments: {reason}"),
                    Some(what) => format!("on arguments {what}: {reason}"),
                };
                self.failures.push(CheckFailure {
                    arguments: Value::Object(arguments),
                    valid_arguments: broken.is_none(),
                    reason,
                });
            }
        }
    }
}

/// What went wrong, without the plugin's name (the report is about it).
fn describe(error: &Error) -> String {
    match error {
        Error::PluginFailed { fault, .. } => fault.to_string(),
        Error::InvalidOutput { problem, .. } => format!("the result is invalid: {problem}"),
        other => other.to_string(),
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Valid arguments (distinct, checked by the host's own validator) and
/// invalid ones (each with what was broken, refused by the validator); `Err`
/// when the schema asks for more than is generated.
#[allow(clippy::type_complexity)]
fn generate(
    plugin: &Plugin,
    name: &str,
    options: &CheckOptions,
) -> Result<(Vec<Map<String, Value>>, Vec<(String, Map<String, Value>)>), String> {
    let Some(tool) = plugin.tool(name) else {
        return Ok((Vec::new(), Vec::new()));
    };
    let schema = Value::Object(tool.input_schema.clone());
    // Each tool's own stream: adding a tool does not change another's calls.
    let mut rng = StdRng::seed_from_u64(options.seed ^ fnv1a(name.as_bytes()));
    // What all of the tool's samples may copy of its schema.
    let mut work = sample::MAX_SCHEMA_WORK;
    let accepts = |value: &Map<String, Value>| plugin.validate_arguments(name, Value::Object(value.clone())).is_ok();

    let mut valid: Vec<Map<String, Value>> = Vec::new();
    let shapes = [Shape::Minimal, Shape::Maximal].into_iter().chain(std::iter::repeat(Shape::Random));
    for shape in shapes.take(options.valid_calls) {
        // A few tries per call: generation does not know every keyword.
        for _ in 0..20 {
            let sampled = Sampler::new(&schema, &mut rng, &mut work).sample(shape)?;
            if let Some(Value::Object(arguments)) = sampled
                && accepts(&arguments)
                && !valid.contains(&arguments)
            {
                valid.push(arguments);
                break;
            }
            if shape != Shape::Random {
                break;
            }
        }
    }

    let mut invalid = Vec::new();
    if let Some(base) = valid.first().cloned() {
        let mut mutations = Sampler::new(&schema, &mut rng, &mut work).mutations(&base);
        if let Some(richest) = valid.get(1) {
            mutations.extend(Sampler::new(&schema, &mut rng, &mut work).mutations(richest));
        }
        mutations.shuffle(&mut rng);
        for (what, arguments) in mutations {
            if invalid.len() >= options.invalid_calls {
                break;
            }
            if !accepts(&arguments) && !invalid.iter().any(|(_, seen)| seen == &arguments) {
                invalid.push((what, arguments));
            }
        }
    }
    Ok((valid, invalid))
}

/// FNV-1a: a stable hash of a tool's name, to give each tool its own stream
/// of arguments.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3))
}
