//! How a run of guest code ended: what both kinds of instance return, and
//! why the host stopped one.

use serde_json::Value;

use crate::error::{Fault, OutputProblem};

/// What `call` returned: JSON to check against the protocol (an Extism
/// plugin's output), or a result typed already (a component's, or an
/// Extism plugin's of the plain shape, parsed straight into the type).
pub(crate) enum CallOutput {
    Json(Value),
    Typed(toolhost_protocol::CallToolResult),
}

/// How a run failed: the guest's code, or what it returned.
pub(crate) enum RunError {
    Fault(Fault),
    Output(OutputProblem),
}

/// Why the host stopped a guest: the payload of the error a host function or
/// the epoch callback returns, read back when the call fails.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Stop {
    /// The call's deadline passed.
    #[error("the call's deadline passed")]
    Timeout,
    /// The instance tried to use more memory than it may.
    #[error("the memory limit was reached")]
    MemoryLimit,
    /// The guest asked for a capability it was not granted.
    #[error("{0}")]
    Denied(String),
    /// A host function failed because of what the guest passed it.
    #[error("{0}")]
    Host(String),
}

/// What one run used, for the call's [`CallRecord`](crate::CallRecord).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Usage {
    /// Fuel burned, when the plugin has a fuel budget.
    pub(crate) fuel_consumed: Option<u64>,
    /// The most memory the instance held during the run.
    pub(crate) peak_memory_bytes: usize,
    /// Bytes of output the run returned.
    pub(crate) output_bytes: u64,
}
