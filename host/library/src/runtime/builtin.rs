//! Built-in toolsets as the third flavour of plugin: the embedding program's
//! own async handlers in place of a guest, so everything around a call
//! (argument checks, approval, result checks, redaction, spans, the
//! observer, the pool) is the plugins' own.
//!
//! What a guest's sandbox bounds does not apply to host code (memory, fuel,
//! files, the network): a handler is as trusted as the program that
//! registered it. What does apply: the timeout and the caller's deadline (a
//! handler still running then is dropped), cancellation, the output cap and
//! every check of the result. A handler runs on the calling task (a task of
//! its own cost each call a spawn and a wake-up across threads); a panic in
//! it is caught there, a fault of that call, not of the caller's task, and
//! dropping the call drops the handler's future.

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

/// A handler's future, a panic in its poll caught as the call's fault.
struct CatchPanic<F>(F);

impl<F: Future + Unpin> Future for CatchPanic<F> {
    type Output = Result<F::Output, String>;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        let future = std::pin::Pin::new(&mut self.0);
        // A future that panicked is not polled again: the call ends here
        // with its fault, and the future is dropped with the call.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| future.poll(cx))) {
            Ok(poll) => poll.map(Ok),
            Err(panic) => std::task::Poll::Ready(Err(panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".to_owned()))),
        }
    }
}

/// Counts the bytes written to it (a result's encoded size, without the
/// encoding).
struct Counted(usize);

impl std::io::Write for Counted {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 += bytes.len();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
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
        let handled = CatchPanic(handler(BuiltinCall { arguments, meta }));
        // Host code: no epoch to advance, so the ticker is not asked to
        // tick; it keeps the deadline's alarm, which costs it no wake-up
        // unless the deadline comes before its next look.
        let joined = guest::bounded(&self.env.ticker, deadline, async {
            handled
                .await
                .map_err(|said| wasmtime::Error::new(Stop::Host(format!("the built-in tool panicked: {said}"))))
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
        // Weighed as its encoding (without writing it out), then checked as
        // a typed result, as a component's is: a Rust value has the
        // protocol's shape by its type, so what is left to check is what
        // the type does not guarantee, and the output schema.
        let mut size = Counted(0);
        serde_json::to_writer(&mut size, &result).map_err(|e| {
            RunError::Fault(Fault::new(FaultKind::Runtime, format!("the result cannot be encoded: {e}")))
        })?;
        self.usage.output_bytes = size.0 as u64;
        if size.0 > limits.max_output_bytes {
            return Err(RunError::Fault(Fault::new(
                FaultKind::OutputTooLarge,
                format!("{} bytes, over the limit of {} bytes", size.0, limits.max_output_bytes),
            )));
        }
        Ok(CallOutput::Typed(result))
    }

    /// What the last call used (only its output: host code has no fuel or
    /// guest memory).
    pub(crate) fn usage(&self) -> Usage {
        self.usage
    }
}
