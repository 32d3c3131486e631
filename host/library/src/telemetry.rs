//! `tracing` spans for loads and calls.
//!
//! Every load is a `toolhost.load` span (`plugin`, `outcome`,
//! `duration_us`), every call a `toolhost.call` span (`plugin`, `tool`,
//! `call_id`, `outcome`, `duration_us`): at `info` level, so an embedder's
//! subscriber sees them and can export them (OpenTelemetry, logs). The
//! outcome is `ok`, `tool_error`, the kind of failure (`invalid_arguments`,
//! `trap`, `timeout`, ...) or `cancelled` when the call's future was
//! dropped before it finished.
//!
//! A [`CallObserver`] given to the [`Runtime`](crate::Runtime) gets a
//! [`CallRecord`] of every call: the same fields, and what the call used
//! (fuel, peak memory, output size), for metrics.

use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use toolhost_protocol::CallToolResult;
use tracing::Instrument as _;

use crate::error::Error;

/// Call ids, unique within the process.
static NEXT_CALL: AtomicU64 = AtomicU64::new(1);

/// The outcome name of a finished call.
pub(crate) fn call_outcome(outcome: &Result<CallToolResult, Error>) -> &'static str {
    match outcome {
        Ok(result) if result.is_error() => "tool_error",
        Ok(_) => "ok",
        Err(error) => error.outcome(),
    }
}

/// A load's or a call's span, and for a call who hears of it: finished
/// with its outcome, or, when its future is dropped first, `cancelled`.
struct Unfinished<'a> {
    span: tracing::Span,
    /// When it started; `None` when neither a subscriber wants the span
    /// nor an observer the record, so nothing needs the time.
    started: Option<Instant>,
    /// The call's observer and meter (none for a load).
    trace: Option<&'a CallTrace<'a>>,
    done: bool,
}

impl Unfinished<'_> {
    /// Record the outcome on the span and tell the observer.
    fn finish(&mut self, outcome: &'static str, error: Option<&Error>) {
        self.done = true;
        // (Neither a subscriber nor an observer: no clock to read.)
        let Some(started) = self.started else { return };
        let duration = started.elapsed();
        self.span.record("outcome", outcome);
        self.span.record("duration_us", duration.as_micros() as u64);
        let Some(trace) = self.trace else { return };
        let Some(observer) = trace.observer else { return };
        let usage = trace.meter.usage();
        observer.call_finished(&CallRecord {
            plugin: trace.plugin,
            tool: trace.tool,
            call_id: trace.call_id,
            outcome,
            error,
            duration,
            fuel_consumed: usage.fuel_consumed,
            peak_memory_bytes: usage.peak_memory_bytes,
            output_bytes: usage.output_bytes,
        });
    }
}

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.finish("cancelled", None);
        }
    }
}

/// Told about every call of the plugins of a [`Runtime`](crate::Runtime)
/// ([`RuntimeBuilder::with_observer`](crate::RuntimeBuilder::with_observer)),
/// when it has finished: for metrics (a Prometheus histogram, an
/// OpenTelemetry meter). It runs on the caller's task: keep it quick.
pub trait CallObserver: Send + Sync {
    /// A call has finished, failed, or been cancelled.
    fn call_finished(&self, record: &CallRecord<'_>);
}

/// What a [`CallObserver`] learns of one call.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct CallRecord<'a> {
    /// The plugin's name.
    pub plugin: &'a str,
    /// The tool's name (the plugin's own).
    pub tool: &'a str,
    /// The caller's id for the call, if its context gave one.
    pub call_id: Option<&'a str>,
    /// How it ended: `ok`, `tool_error`, `cancelled`, or the kind of failure
    /// (`invalid_arguments`, `trap`, `timeout`, ...), as in the span.
    pub outcome: &'static str,
    /// The error, when it failed (already redacted).
    pub error: Option<&'a Error>,
    /// From the call's start to its end, validation included.
    pub duration: Duration,
    /// Fuel the guest burned, when the plugin has a fuel budget.
    pub fuel_consumed: Option<u64>,
    /// The most memory the instance held while the guest ran (linear
    /// memories and Extism kernel memory); 0 when the guest did not run.
    pub peak_memory_bytes: usize,
    /// Bytes of output the guest returned; 0 when it did not run.
    pub output_bytes: u64,
}

/// What a call's guest used, filled in as it runs.
#[derive(Default)]
pub(crate) struct Meter(Mutex<crate::runtime::outcome::Usage>);

impl Meter {
    pub(crate) fn record(&self, usage: crate::runtime::outcome::Usage) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = usage;
    }

    fn usage(&self) -> crate::runtime::outcome::Usage {
        *self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Who hears of a call, and what it is called.
pub(crate) struct CallTrace<'a> {
    pub(crate) plugin: &'a str,
    pub(crate) tool: &'a str,
    pub(crate) call_id: Option<&'a str>,
    pub(crate) observer: Option<&'a dyn CallObserver>,
    pub(crate) meter: &'a Meter,
}

/// Run `call` inside a `toolhost.call` span, and tell the observer how it
/// ended.
pub(crate) async fn traced_call(
    trace: &CallTrace<'_>,
    call: impl Future<Output = Result<CallToolResult, Error>>,
) -> Result<CallToolResult, Error> {
    let span = tracing::info_span!(
        "toolhost.call",
        plugin = %trace.plugin,
        tool = %trace.tool,
        call_id = tracing::field::Empty,
        outcome = tracing::field::Empty,
        duration_us = tracing::field::Empty,
    );
    // The caller's id, or one unique within the process: taken only for a
    // span a subscriber records, since the counter is a cache line that
    // callers on every core would otherwise write on every call.
    // (With no subscriber ever set, `tracing`'s `log` feature, which
    // dependencies may turn on, still hands span fields to a `log` logger.)
    let recorded = !span.is_disabled() || !tracing::dispatcher::has_been_set();
    match trace.call_id {
        Some(id) => {
            span.record("call_id", id);
        }
        None if recorded => {
            span.record("call_id", NEXT_CALL.fetch_add(1, Ordering::Relaxed));
        }
        None => {}
    }
    let timed = recorded || trace.observer.is_some();
    let mut guard =
        Unfinished { span: span.clone(), started: timed.then(Instant::now), trace: Some(trace), done: false };
    let outcome = call.instrument(span).await;
    guard.finish(call_outcome(&outcome), outcome.as_ref().err());
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
    let mut guard = Unfinished { span: span.clone(), started: Some(Instant::now()), trace: None, done: false };
    let outcome = load.instrument(span).await;
    guard.finish(outcome.as_ref().map_or_else(Error::outcome, |_| "ok"), None);
    outcome
}
