//! What every call takes besides the tool and its arguments, and how a
//! call runs: blocking the calling thread (not the interpreter), or
//! awaited on the module's runtime.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use pyo3::types::PyDict;
use toolhost::{CallContext, CallToolResult};

use crate::hooks::{EVENT_LOOP, Hook, LogPump, PyClient, log_pump};
use crate::result::CallResult;

/// The keyword arguments of `call` and `call_sync`: the call's `timeout`
/// (seconds, within the toolset's own), `user_id` and `meta` (the call's
/// `_meta`), and the caller's side: `on_log(level, message)` for the
/// plugin's log lines, `on_progress(progress, total, message)`,
/// `on_request(method, params)` for elicitation, sampling and roots.
#[derive(Default)]
pub(crate) struct CallOptions {
    context: CallContext,
    /// `approved=True` (a registry's calls only): the caller had the call
    /// approved already.
    pub(crate) approved: bool,
    /// What hands the plugin's log lines to `on_log`.
    log: Option<LogPump>,
}

impl CallOptions {
    /// The keywords of a call, each checked; `approvable` says whether
    /// `approved` is one (a registry's calls). An unknown keyword is a
    /// `TypeError`, as Python's own calls make it.
    pub(crate) fn from_keywords(keywords: Option<&Bound<'_, PyDict>>, approvable: bool) -> PyResult<CallOptions> {
        let mut options = CallOptions::default();
        let Some(keywords) = keywords else {
            return Ok(options);
        };
        let (mut on_progress, mut on_request) = (None, None);
        let mut context = CallContext::new();
        for (key, value) in keywords.iter() {
            if value.is_none() {
                continue;
            }
            let key = key.extract::<String>()?;
            // A bad value says which keyword it was given for.
            let named = |error: PyErr| {
                Python::attach(|py| {
                    let kind = error.get_type(py);
                    PyErr::from_type(kind, format!("call() keyword `{key}`: {}", error.value(py)))
                })
            };
            match key.as_str() {
                "timeout" => {
                    let timeout = Duration::try_from_secs_f64(value.extract().map_err(named)?)
                        .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("timeout: {e}")))?;
                    context = context.with_timeout(timeout);
                }
                "user_id" => context = context.with_user_id(value.extract::<String>().map_err(named)?),
                "meta" => {
                    let meta = value.cast::<PyDict>().map_err(|e| named(e.into()))?;
                    context = context.with_meta(pythonize::depythonize(meta).map_err(|e| named(e.into()))?);
                }
                "on_log" => {
                    let (sink, pump) = log_pump(Hook::new(&value).map_err(named)?);
                    context = context.with_log_sink(sink);
                    options.log = Some(pump);
                }
                "on_progress" => on_progress = Some(Hook::new(&value).map_err(named)?),
                "on_request" => on_request = Some(Hook::new(&value).map_err(named)?),
                "approved" if approvable => options.approved = value.extract().map_err(named)?,
                other => {
                    return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                        "call() got an unexpected keyword argument '{other}'"
                    )));
                }
            }
        }
        if on_progress.is_some() || on_request.is_some() {
            context = context.with_client(Arc::new(PyClient { on_progress, on_request }));
        }
        options.context = context;
        Ok(options)
    }
}

/// Where plugins run: a runtime set up as the CLI's is, compiled modules
/// kept in `TOOLHOST_CACHE_DIR` (else the user's cache directory) so a
/// plugin is compiled once, not at every start, and downloads beside them.
pub(crate) fn host_runtime() -> &'static toolhost::Runtime {
    static RUNTIME: std::sync::OnceLock<toolhost::Runtime> = std::sync::OnceLock::new();
    RUNTIME.get_or_init(|| {
        let _inside = runtime().enter();
        toolhost::Runtime::builder()
            .with_module_cache(toolhost::ModuleCache::from_env())
            .with_download_cache(toolhost::DownloadCache::from_env())
            .build()
    })
}

/// The module's tokio runtime.
pub(crate) fn runtime() -> &'static tokio::runtime::Runtime {
    pyo3_async_runtimes::tokio::get_runtime()
}

/// The arguments as JSON: a dict, or none (an empty object).
pub(crate) fn arguments_of(arguments: Option<Bound<'_, PyAny>>) -> PyResult<serde_json::Value> {
    match arguments {
        None => Ok(serde_json::Value::Object(Default::default())),
        Some(arguments) if arguments.is_instance_of::<PyDict>() => Ok(pythonize::depythonize(&arguments)?),
        Some(other) => Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "arguments must be a dict, not {}",
            other.get_type().name()?
        ))),
    }
}

/// What a call came to, before it becomes Python's.
pub(crate) type Outcome = Result<CallToolResult, PyErr>;

/// How long a tool's calls have been taking lately, to choose how the next
/// one runs. A call that is over in a few microseconds is run holding the
/// GIL: releasing it and taking it back costs more than the call when other
/// threads want it (each hand-over is a futex wake-up), and an awaited one
/// would cost a trip through the event loop. A longer call releases the
/// GIL (or runs on the runtime) from its start.
///
/// Estimates are kept in a fixed table of moving averages, by a hash of the
/// plugin or registry and the tool's name: no lock, no allocation per call;
/// two tools that share a slot share an estimate.
pub(crate) struct Pace(&'static AtomicU32);

/// Calls expected to take less than this run on the caller's thread first.
const INLINE_BELOW: Duration = Duration::from_micros(15);
const SLOTS: usize = 256;
static PACES: [AtomicU32; SLOTS] = [const { AtomicU32::new(0) }; SLOTS];

impl Pace {
    /// The estimate of calls of `tool` through `owner` (a plugin or a
    /// registry, by address).
    pub(crate) fn of(owner: usize, tool: &str) -> Pace {
        use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
        let hash = BuildHasherDefault::<DefaultHasher>::default().hash_one((owner, tool));
        Pace(&PACES[(hash as usize) % SLOTS])
    }

    /// Whether the next call is expected to be over within
    /// [`INLINE_BELOW`] (a tool never called yet is).
    fn short(&self) -> bool {
        u128::from(self.0.load(Ordering::Relaxed)) < INLINE_BELOW.as_nanos()
    }

    /// Fold a call's duration into the estimate (an eighth of it).
    fn record(&self, took: Duration) {
        let took = u32::try_from(took.as_nanos()).unwrap_or(u32::MAX);
        let old = self.0.load(Ordering::Relaxed);
        let new = old - old / 8 + took / 8;
        self.0.store(new, Ordering::Relaxed);
    }
}

/// A call's future that counts the time spent polling it: the host's work
/// for the call, and the guest's, without the waits (for a host call's
/// answer, a hook, a thread to take it up). What [`Pace`] estimates.
struct Timed<F> {
    future: std::pin::Pin<Box<F>>,
    busy: Duration,
}

impl<F: Future> Future for Timed<F> {
    type Output = (F::Output, Duration);

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let start = Instant::now();
        let polled = this.future.as_mut().poll(cx);
        this.busy += start.elapsed();
        polled.map(|output| (output, this.busy))
    }
}

/// Poll `future` once on this thread, inside the module's runtime: the
/// guest runs until it is done, or until it waits (a host call, a hook) or
/// yields at the runtime's next epoch tick (at most a millisecond).
fn poll_once<F: Future + ?Sized>(future: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    let _inside = runtime().enter();
    future.poll(&mut Context::from_waker(Waker::noop()))
}

/// Run `call` (given the call's context) on this thread: a short call (see
/// [`Pace`]) first holding the GIL, anything that goes on beyond that with
/// the interpreter released. The result, or its exception.
pub(crate) fn blocking<F, Fut>(py: Python<'_>, options: CallOptions, pace: Pace, call: F) -> PyResult<CallResult>
where
    F: FnOnce(CallContext) -> Fut + Send,
    Fut: Future<Output = Outcome> + Send,
{
    let CallOptions { context, log, .. } = options;
    let pump = log.map(|pump| runtime().spawn(pump.run(None)));
    let mut future = Timed { future: Box::pin(call(context)), busy: Duration::ZERO };
    let first = if pace.short() { poll_once(std::pin::Pin::new(&mut future)) } else { Poll::Pending };
    let (outcome, busy) = match first {
        Poll::Ready(done) => {
            // With the call's context, its log sink: the pump then ends.
            drop(future);
            done
        }
        Poll::Pending => py.detach(|| runtime().block_on(interruptible(future)))?,
    };
    pace.record(busy);
    if let Some(pump) = pump {
        // Every line the call logged reaches `on_log` before it returns.
        let _ = py.detach(|| runtime().block_on(pump));
    }
    Ok(CallResult { inner: outcome? })
}

/// `future`, unless the interpreter is told to stop first (Ctrl-C, a
/// signal with a Python handler): a blocking call checks for signals every
/// tenth of a second, as Python's own blocking calls do, and a raised
/// `KeyboardInterrupt` drops the call, which stops the guest.
async fn interruptible<F: Future>(future: F) -> PyResult<F::Output> {
    let signals = async {
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if let Err(raised) = Python::attach(|py| py.check_signals()) {
                return raised;
            }
        }
    };
    tokio::select! {
        done = future => Ok(done),
        raised = signals => Err(raised),
    }
}

/// Run `call` for an awaiting task: an awaitable of the result. A short
/// call (see [`Pace`]) is first run right here, and when it is over the
/// awaitable is a finished future (no trip through the event loop); the
/// rest runs on the module's runtime. Cancelling the awaiting task drops
/// the call, which stops the guest (its cancellation token is dropped with
/// it); coroutine hooks run on the awaiting task's event loop.
pub(crate) fn awaitable<'py, F, Fut>(
    py: Python<'py>,
    options: CallOptions,
    pace: Pace,
    call: F,
) -> PyResult<Bound<'py, PyAny>>
where
    F: FnOnce(CallContext) -> Fut + Send + 'static,
    Fut: Future<Output = Outcome> + Send + 'static,
{
    let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
    let CallOptions { context, log, .. } = options;
    let token = toolhost::CancellationToken::new();
    let stop = token.clone().drop_guard();
    let mut future = Timed { future: Box::pin(call(context.with_cancellation(token))), busy: Duration::ZERO };
    // With a log hook to wait for, the call is not finished here: waiting
    // for a coroutine hook would block the loop it runs on.
    if pace.short()
        && log.is_none()
        && let Poll::Ready((outcome, busy)) =
            EVENT_LOOP.sync_scope(locals.clone(), || poll_once(std::pin::Pin::new(&mut future)))
    {
        pace.record(busy);
        let finished = locals.event_loop(py).call_method0("create_future")?;
        match outcome {
            Ok(inner) => finished.call_method1("set_result", (CallResult { inner },))?,
            Err(error) => finished.call_method1("set_exception", (error.into_value(py),))?,
        };
        return Ok(finished);
    }
    pyo3_async_runtimes::tokio::future_into_py(py, async move {
        let _stop = stop;
        let pump = log.map(|pump| tokio::spawn(pump.run(Some(locals.clone()))));
        let (outcome, busy) = EVENT_LOOP.scope(locals, future).await;
        pace.record(busy);
        if let Some(pump) = pump {
            let _ = pump.await;
        }
        Ok(CallResult { inner: outcome? })
    })
}
