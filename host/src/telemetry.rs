//! `tracing` spans for loads and calls.
//!
//! Every load is a `toolhost.load` span (`plugin`, `outcome`,
//! `duration_us`), every call a `toolhost.call` span (`plugin`, `tool`,
//! `call_id`, `outcome`, `duration_us`): at `info` level, so an embedder's
//! subscriber sees them and can export them (OpenTelemetry, logs). The
//! outcome is `ok`, `tool_error`, the kind of failure (`invalid_arguments`,
//! `trap`, `timeout`, ...) or `cancelled` when the call's future was
//! dropped before it finished.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use toolhost_protocol::CallToolResult;
use tracing::Instrument as _;

use crate::error::{Error, FaultKind};

/// Call ids, unique within the process.
static NEXT_CALL: AtomicU64 = AtomicU64::new(1);

/// The outcome name of a finished call.
pub(crate) fn call_outcome(outcome: &Result<CallToolResult, Error>) -> &'static str {
    match outcome {
        Ok(result) if result.is_error() => "tool_error",
        Ok(_) => "ok",
        Err(error) => error_outcome(error),
    }
}

/// The outcome name of a failure.
pub(crate) fn error_outcome(error: &Error) -> &'static str {
    match error {
        Error::UnknownTool { .. } | Error::NoSuchTool { .. } => "unknown_tool",
        Error::InvalidArguments { .. } => "invalid_arguments",
        Error::MissingSecret { .. } => "missing_secret",
        Error::InvalidOutput { .. } => "invalid_output",
        Error::InvalidPlugin { .. } => "invalid_plugin",
        Error::Read { .. } | Error::Load { .. } => "load_failed",
        Error::Policy { .. } => "policy",
        Error::Registry(_) => "registry",
        Error::Host(_) => "host_error",
        Error::PluginFailed { fault, .. } => match fault.kind {
            FaultKind::Trap => "trap",
            FaultKind::Error => "plugin_error",
            FaultKind::Exit => "exit",
            FaultKind::Timeout => "timeout",
            FaultKind::MemoryLimit => "memory_limit",
            FaultKind::FuelExhausted => "fuel_exhausted",
            FaultKind::OutputTooLarge => "output_too_large",
            FaultKind::Cancelled => "cancelled",
            FaultKind::Denied => "denied",
            FaultKind::Runtime => "runtime",
        },
    }
}

/// Records `cancelled` on a span whose future is dropped unfinished.
struct Unfinished {
    span: tracing::Span,
    started: Instant,
    done: bool,
}

impl Drop for Unfinished {
    fn drop(&mut self) {
        if !self.done {
            self.span.record("outcome", "cancelled");
            self.span.record("duration_us", self.started.elapsed().as_micros() as u64);
        }
    }
}

/// Run `call` inside a `toolhost.call` span for `tool` of `plugin`.
pub(crate) async fn traced_call(
    plugin: &str,
    tool: &str,
    call: impl Future<Output = Result<CallToolResult, Error>>,
) -> Result<CallToolResult, Error> {
    let span = tracing::info_span!(
        "toolhost.call",
        plugin = %plugin,
        tool = %tool,
        call_id = NEXT_CALL.fetch_add(1, Ordering::Relaxed),
        outcome = tracing::field::Empty,
        duration_us = tracing::field::Empty,
    );
    let mut guard = Unfinished { span: span.clone(), started: Instant::now(), done: false };
    let outcome = call.instrument(span.clone()).await;
    guard.done = true;
    span.record("outcome", call_outcome(&outcome));
    span.record("duration_us", guard.started.elapsed().as_micros() as u64);
    outcome
}

/// Run `load` inside a `toolhost.load` span for `plugin`.
pub(crate) async fn traced_load<T>(plugin: &str, load: impl Future<Output = Result<T, Error>>) -> Result<T, Error> {
    let span = tracing::info_span!(
        "toolhost.load",
        plugin = %plugin,
        outcome = tracing::field::Empty,
        duration_us = tracing::field::Empty,
    );
    let mut guard = Unfinished { span: span.clone(), started: Instant::now(), done: false };
    let outcome = load.instrument(span.clone()).await;
    guard.done = true;
    span.record("outcome", outcome.as_ref().map_or_else(error_outcome, |_| "ok"));
    span.record("duration_us", guard.started.elapsed().as_micros() as u64);
    outcome
}
