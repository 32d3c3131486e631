//! Built-in toolsets as the third flavour of plugin: the embedding program's
//! own async handlers in place of a guest, so everything around a call
//! (argument checks, approval, result checks, redaction, spans, the
//! observer, the pool) is the plugins' own.
//!
//! What a guest's sandbox bounds does not apply to host code (memory, fuel,
//! files, the network): a handler is as trusted as the program that
//! registered it. What does apply: the timeout and the caller's deadline (a
//! handler still running then is dropped), cancellation, the output cap and
//! every check of the result. A handler runs on its own tokio task, so a
//! panic in it is a fault of that call, not of the caller's task; dropping
//! the call aborts the task.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};
use toolhost_protocol::{CallToolResult, JsonObject};

use super::guest::{self, HostEnv, RunOptions};
use super::outcome::{CallOutput, RunError, Stop, Usage};
use crate::builtin::{BuiltinCall, BuiltinError, BuiltinToolset};
use crate::error::{Fault, FaultKind};

/// A built-in toolset, ready to be instantiated.
pub(crate) struct BuiltinModule {
    toolset: Arc<BuiltinToolset>,
}

impl BuiltinModule {
    pub(crate) fn new(toolset: Arc<BuiltinToolset>) -> Self {
        BuiltinModule { toolset }
    }

    /// An "instance": the toolset and the plugin's limits.
    pub(crate) fn instantiate(&self, env: &Arc<HostEnv>) -> BuiltinInstance {
        BuiltinInstance { toolset: Arc::clone(&self.toolset), env: Arc::clone(env), usage: Usage::default() }
    }
}

/// A built-in toolset with the limits of its calls.
pub(crate) struct BuiltinInstance {
    toolset: Arc<BuiltinToolset>,
    env: Arc<HostEnv>,
    usage: Usage,
}

/// Aborts its task when dropped (a call dropped, timed out or cancelled).
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl BuiltinInstance {
    /// The tools, as `describe` would list them.
    pub(crate) fn describe(&mut self) -> Result<Value, RunError> {
        let tools: Vec<Value> =
            self.toolset.tools.iter().map(|t| serde_json::to_value(&t.tool).unwrap_or(Value::Null)).collect();
        Ok(json!({ "tools": tools }))
    }

    /// Run the tool's handler under the plugin's timeout (or the caller's
    /// earlier deadline); its result as JSON, for the checks every result
    /// gets.
    pub(crate) async fn call(
        &mut self,
        name: &str,
        arguments: JsonObject,
        meta: Option<JsonObject>,
        run: &RunOptions<'_>,
    ) -> Result<CallOutput, RunError> {
        self.usage = Usage::default();
        let Some(tool) = self.toolset.tools.iter().find(|t| t.tool.name == name) else {
            return Err(RunError::Fault(Fault::new(FaultKind::Error, format!("the toolset has no tool `{name}`"))));
        };
        let limits = &self.env.limits;
        let own = limits.timeout.map(|t| Instant::now() + t);
        let (deadline, callers) = match (own, run.deadline) {
            (Some(own), Some(callers)) => (Some(own.min(callers)), callers < own),
            (None, Some(callers)) => (Some(callers), true),
            (own, None) => (own, false),
        };
        let handler = Arc::clone(&tool.handler);
        let task = AbortOnDrop(tokio::spawn(handler(BuiltinCall { arguments, meta })));
        let ticker = &self.env.ticker;
        let _running = ticker.running();
        let joined = guest::bounded(ticker, deadline, async {
            let mut task = task;
            (&mut task.0).await.map_err(|e| {
                wasmtime::Error::new(Stop::Host(if e.is_panic() {
                    let panic = e.into_panic();
                    let said = panic
                        .downcast_ref::<&str>()
                        .map(|s| (*s).to_owned())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "no message".to_owned());
                    format!("the built-in tool panicked: {said}")
                } else {
                    "the built-in tool's task was cancelled".to_owned()
                }))
            })
        })
        .await;
        let result = match joined {
            Ok(Ok(result)) => result,
            Ok(Err(BuiltinError::Tool(message))) => CallToolResult::error(message),
            Ok(Err(BuiltinError::Unavailable(message))) => {
                return Err(RunError::Fault(Fault::new(FaultKind::Error, message)));
            }
            Err(error) => {
                let fault = match error.downcast_ref::<Stop>() {
                    Some(Stop::Timeout) if callers => {
                        Fault::new(FaultKind::Timeout, "it ran past its caller's deadline")
                    }
                    Some(Stop::Timeout) => {
                        let limit = limits.timeout.map_or_else(|| "its limit".to_owned(), |t| format!("{t:?}"));
                        Fault::new(FaultKind::Timeout, format!("it ran longer than {limit}"))
                    }
                    Some(Stop::Host(message)) => Fault::new(FaultKind::Runtime, message.clone()),
                    _ => Fault::new(FaultKind::Runtime, error.to_string()),
                };
                return Err(RunError::Fault(fault));
            }
        };
        let bytes = serde_json::to_vec(&result).map_err(|e| {
            RunError::Fault(Fault::new(FaultKind::Runtime, format!("the result cannot be encoded: {e}")))
        })?;
        self.usage.output_bytes = bytes.len() as u64;
        if bytes.len() > limits.max_output_bytes {
            return Err(RunError::Fault(Fault::new(
                FaultKind::OutputTooLarge,
                format!("{} bytes, over the limit of {} bytes", bytes.len(), limits.max_output_bytes),
            )));
        }
        serde_json::from_slice(&bytes)
            .map(CallOutput::Json)
            .map_err(|e| RunError::Fault(Fault::new(FaultKind::Runtime, format!("the result cannot be read: {e}"))))
    }

    /// What the last call used (only its output: host code has no fuel or
    /// guest memory).
    pub(crate) fn usage(&self) -> Usage {
        self.usage
    }
}
