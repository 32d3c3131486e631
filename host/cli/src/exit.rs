//! Exit codes, a contract with scripts, and how a failure is reported.

use toolhost::Error;

use crate::terminal::escaped;

/// The tool returned `isError: true` (or the call was not approved).
pub(crate) const TOOL_ERROR: u8 = 1;
/// Usage, configuration, unknown tool, refused arguments, missing secret.
pub(crate) const USAGE: u8 = 2;
/// The plugin failed: load, trap, error, limit, invalid output.
pub(crate) const PLUGIN_FAILED: u8 = 3;

/// A failure with the exit code it maps to.
pub(crate) struct Failure {
    pub(crate) code: u8,
    pub(crate) error: anyhow::Error,
}

impl From<Error> for Failure {
    fn from(error: Error) -> Self {
        let code = match &error {
            Error::Read { .. } | Error::Policy { .. } | Error::Registry(_) => USAGE,
            e if e.is_caller_error() => USAGE,
            _ => PLUGIN_FAILED,
        };
        Failure { code, error: error.into() }
    }
}

pub(crate) fn usage(error: anyhow::Error) -> Failure {
    Failure { code: USAGE, error }
}

/// One sentence on stderr; where the error lists problems, one per line
/// below it. Each line escaped: what a plugin said cannot make lines of its
/// own.
pub(crate) fn report(error: &Error) {
    let (header, lines): (String, Vec<String>) = match error {
        Error::InvalidArguments { plugin, tool, violations, .. } => (
            format!("invalid arguments for tool `{tool}` of plugin `{plugin}`; the plugin did not run:"),
            violations.iter().map(ToString::to_string).collect(),
        ),
        Error::InvalidOutput {
            plugin,
            operation,
            problem: toolhost::OutputProblem::Invalid { violations, .. },
            ..
        } => (
            format!("plugin `{plugin}` returned invalid output from {operation}:"),
            violations.iter().map(ToString::to_string).collect(),
        ),
        Error::InvalidPlugin { plugin, problems, .. } => (
            format!(
                "plugin `{plugin}` describes its tools wrongly ({} problem{}):",
                problems.len(),
                if problems.len() == 1 { "" } else { "s" }
            ),
            problems.iter().map(ToString::to_string).collect(),
        ),
        other => (other.to_string(), Vec::new()),
    };
    eprintln!("error: {}", escaped(&header));
    for line in lines {
        eprintln!("  {}", escaped(&line));
    }
}
