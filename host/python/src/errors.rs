//! The library's errors as Python exceptions, one class per kind, each
//! carrying the library's message and the text a model is shown.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyDict;

create_exception!(toolhost, ToolhostError, PyException, "A failure of toolhost or of a plugin.");
create_exception!(toolhost, LoadError, ToolhostError, "The plugin or toolsets file could not be loaded.");
create_exception!(toolhost, UnknownToolError, ToolhostError, "There is no tool of that name.");
create_exception!(
    toolhost,
    InvalidArgumentsError,
    ToolhostError,
    "The arguments do not match the tool's input schema; the tool did not run. `violations` lists each problem \
     with the JSON pointer of the offending value."
);
create_exception!(
    toolhost,
    MissingSecretError,
    ToolhostError,
    "The tool declares a secret that was not granted or that the secret provider does not have; it did not run."
);
create_exception!(
    toolhost,
    ApprovalDeniedError,
    ToolhostError,
    "The tool requires approval and the approval hook did not give it; the tool did not run."
);
create_exception!(toolhost, CallTimeoutError, ToolhostError, "The call ran past its timeout and was stopped.");
create_exception!(
    toolhost,
    PluginFaultError,
    ToolhostError,
    "The tool failed: it trapped, hit a limit, or answered with invalid output."
);
create_exception!(
    toolhost,
    OutputTooLargeError,
    PluginFaultError,
    "The tool's output was larger than its toolset's output limit."
);

/// The library's error as the Python exception of its kind, with the
/// library's message, and `model_text` (what a model is shown: the
/// library's own words), `outcome` (its short label) and, for invalid
/// arguments, `violations`.
pub(crate) fn to_py(py: Python<'_>, error: &toolhost::Error) -> PyErr {
    let message = error.to_string();
    let exception = if error.is_unknown_tool() {
        UnknownToolError::new_err(message)
    } else if error.is_invalid_arguments() {
        InvalidArgumentsError::new_err(message)
    } else if error.is_missing_secret() {
        MissingSecretError::new_err(message)
    } else if error.is_timeout() {
        CallTimeoutError::new_err(message)
    } else if error.is_output_too_large() {
        OutputTooLargeError::new_err(message)
    } else if error.is_load() {
        LoadError::new_err(message)
    } else if error.is_plugin_error() || error.fault().is_some() {
        PluginFaultError::new_err(message)
    } else {
        ToolhostError::new_err(message)
    };
    let value = exception.value(py);
    // Setting attributes on a fresh exception cannot fail in practice; if
    // it did, the exception still says what went wrong.
    let _ = value.setattr("model_text", error.model_text());
    let _ = value.setattr("outcome", error.outcome());
    let _ = value.setattr("violations", violations(py, error));
    exception
}

/// Each problem of refused arguments: `pointer`, `keyword`, `message`.
fn violations<'py>(py: Python<'py>, error: &toolhost::Error) -> Vec<Bound<'py, PyDict>> {
    let toolhost::Error::InvalidArguments { violations, .. } = error else {
        return Vec::new();
    };
    violations
        .iter()
        .filter_map(|violation| {
            let item = PyDict::new(py);
            item.set_item("pointer", &violation.instance_path).ok()?;
            item.set_item("keyword", &violation.keyword).ok()?;
            item.set_item("message", &violation.message).ok()?;
            Some(item)
        })
        .collect()
}

/// A denial by the approval hook, as an exception: the model text is the
/// denial's result text.
pub(crate) fn denied(py: Python<'_>, text: String) -> PyErr {
    let exception = ApprovalDeniedError::new_err(text.clone());
    let value = exception.value(py);
    let _ = value.setattr("model_text", text);
    let _ = value.setattr("outcome", "not_approved");
    let _ = value.setattr("violations", Vec::<String>::new());
    exception
}

/// Add the exception classes to the module.
pub(crate) fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    module.add("ToolhostError", py.get_type::<ToolhostError>())?;
    module.add("LoadError", py.get_type::<LoadError>())?;
    module.add("UnknownToolError", py.get_type::<UnknownToolError>())?;
    module.add("InvalidArgumentsError", py.get_type::<InvalidArgumentsError>())?;
    module.add("MissingSecretError", py.get_type::<MissingSecretError>())?;
    module.add("ApprovalDeniedError", py.get_type::<ApprovalDeniedError>())?;
    module.add("CallTimeoutError", py.get_type::<CallTimeoutError>())?;
    module.add("PluginFaultError", py.get_type::<PluginFaultError>())?;
    module.add("OutputTooLargeError", py.get_type::<OutputTooLargeError>())?;
    module.add("ToolError", py.get_type::<ToolError>())?;
    Ok(())
}

create_exception!(
    toolhost,
    ToolError,
    PyException,
    "Raised by a built-in tool written in Python: the call's result is an error (`is_error`) with this text, \
     which the model reads."
);
