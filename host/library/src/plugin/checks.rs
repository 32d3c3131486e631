//! The checks of what crosses the boundary, and their budgets: a
//! `describe` output checked off the executor, how much checking an
//! instance may cost (inline, or on a blocking thread, or refused), and a
//! failed run as the library's error.

use super::*;

/// What a plugin's `operation` returned (its `describe` output, what it
/// offers besides tools) with the plugin's secret values redacted; past
/// the output cap, the plugin's fault.
pub(super) fn redacted_output(name: &str, operation: Operation, mut raw: Value, env: &HostEnv) -> Result<Value, Error> {
    match env.redactor.redact_json(&mut raw, env.limits.max_output_bytes) {
        Ok(found) if found.is_empty() => Ok(raw),
        Ok(found) => {
            tracing::warn!(plugin = %name, secrets = ?found, "{operation} quoted secret values; redacted");
            Ok(raw)
        }
        Err(found) => Err(Error::PluginFailed {
            plugin: name.to_owned(),
            operation,
            fault: Fault::new(
                FaultKind::OutputTooLarge,
                format!("redacting secret {} would take the output past the limit", found.join(", ")),
            ),
        }),
    }
}

/// A `describe` output, checked: the tool list (tools with problems left
/// out in lenient mode, fields other than `tools` kept) and the checked
/// tools, or the problems that refuse the plugin.
pub(super) fn check_described(
    name: &str,
    raw: Value,
    validation: &ValidationOptions,
) -> Result<(ListToolsResult, validate::CheckedDescribe), Error> {
    let (raw, shape) = validate::one_tool_shape(raw);
    let mut checked = validate::check_describe(&raw, validation);
    if !checked.problems.is_empty() && (checked.fatal || !validation.lenient) {
        return Err(Error::InvalidPlugin { plugin: name.to_owned(), problems: checked.problems });
    }
    checked.problems.splice(0..0, shape);
    let mut extra = match raw {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    };
    extra.remove("tools");
    let described = ListToolsResult { tools: checked.tools.iter().map(|t| t.tool.clone()).collect(), extra };
    Ok((described, checked))
}

/// [`check_described`] on a blocking thread: compiling and bounding a
/// plugin's schemas is work the plugin chooses the size of.
pub(super) async fn check_described_off_executor(
    name: &str,
    raw: Value,
    validation: &ValidationOptions,
) -> Result<(ListToolsResult, validate::CheckedDescribe), Error> {
    let (name, validation) = (name.to_owned(), validation.clone());
    off_executor(move || check_described(&name, raw, &validation)).await
}

/// Run a validation on a blocking thread, so that however long it takes it
/// holds no async worker: other calls, other plugins and the server go on.
pub(super) async fn off_executor<T: Send + 'static>(
    job: impl FnOnce() -> Result<T, Error> + Send + 'static,
) -> Result<T, Error> {
    tokio::task::spawn_blocking(job).await.map_err(|e| Error::Host(format!("the validating thread failed: {e}")))?
}

/// Subschema evaluations a validation may cost on the async executor (well
/// under a millisecond); a costlier one runs on a blocking thread.
pub(super) const INLINE_EVALUATIONS: u64 = 20_000;
/// Subschema evaluations one validation may cost at all (the schema's
/// bound per place times the instance's places): past this, the instance
/// is refused rather than checked for seconds.
pub(super) const MAX_CALL_EVALUATIONS: u64 = 100_000_000;
// What fits inline is within the budget: a check found to fit is not weighed again.
const _: () = assert!(INLINE_EVALUATIONS <= MAX_CALL_EVALUATIONS);

/// Whether checking `instance` against a schema of `cost` per place is
/// cheap enough for the async executor (`text`: the schema may read its
/// strings' bytes, [`validate::Schema::reads_text`]). Looks at no more of
/// the instance than that takes.
pub(super) fn fits_inline(instance: &Value, cost: u64, text: bool) -> bool {
    validate::cost::fits(instance, cost, text, INLINE_EVALUATIONS)
}

/// Fields a result may have, its own and its content items' together,
/// for its plain shape to be taken on the async executor
/// ([`validate::plain`]: a few lookups per item, and each field moved into
/// the result).
pub(super) const INLINE_PLAIN_FIELDS: usize = 1_000;

/// Whether an instance was weighed already, and found to fit the async
/// executor's budget ([`fits_inline`]; then it is [`within_budget`] too,
/// and is not weighed again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Weighed {
    /// Found to fit by [`fits_inline`].
    FitsInline,
    /// Not weighed yet.
    NotYet,
}

/// Refuse an instance whose check could cost more than
/// [`MAX_CALL_EVALUATIONS`].
pub(super) fn within_budget(instance: &Value, cost: u64, text: bool) -> Result<(), Violation> {
    if validate::cost::fits(instance, cost, text, MAX_CALL_EVALUATIONS) {
        return Ok(());
    }
    Err(Violation {
        instance_path: String::new(),
        keyword: "validationBudget".to_owned(),
        message: format!(
            "checking it against the schema could take more than {MAX_CALL_EVALUATIONS} subschema evaluations; toolhost refuses it unchecked"
        ),
    })
}

/// A failed run as the library's error.
pub(super) fn run_error(plugin: &str, operation: Operation, error: RunError) -> Error {
    match error {
        RunError::Fault(fault) => Error::PluginFailed { plugin: plugin.to_owned(), operation, fault },
        RunError::Output(problem) => Error::InvalidOutput { plugin: plugin.to_owned(), operation, problem },
    }
}
