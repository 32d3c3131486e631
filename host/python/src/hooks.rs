//! Python callables as the library's hooks: approval, secrets, the
//! caller's side of a call (log lines, progress, requests), and built-in
//! tools. A hook may be a plain function or a coroutine function.
//!
//! A plain function runs on a blocking thread of the runtime (it holds the
//! GIL while it runs, never a runtime worker). A coroutine function runs on
//! the event loop of the `await registry.call(...)` that reached it; from
//! `call_sync`, which has no loop of its own to lend, it runs to completion
//! with `asyncio.run` on a blocking thread. An exception a hook raises
//! never unwinds into the library: each use below says what it means.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use pyo3::prelude::*;
use pyo3::types::PyTuple;
use pyo3_async_runtimes::TaskLocals;
use serde_json::Value;
use toolhost::{
    Approval, ApprovalRequest, Approver, BoxFuture, BuiltinCall, BuiltinError, CallClient, CallToolResult,
    ClientNotice, ClientRequest, SecretError, SecretProvider,
};

tokio::task_local! {
    /// The event loop of the awaited call being run, for coroutine hooks.
    pub(crate) static EVENT_LOOP: TaskLocals;
}

/// A Python callable and whether calling it gives a coroutine.
pub(crate) struct Hook {
    /// `None` once the garbage collector cleared it (its owner was part of
    /// a cycle nobody reaches).
    callable: std::sync::Mutex<Option<Py<PyAny>>>,
    is_async: bool,
}

impl Hook {
    /// `callable`, asking `inspect` whether it is a coroutine function.
    pub(crate) fn new(callable: &Bound<'_, PyAny>) -> PyResult<Arc<Hook>> {
        let py = callable.py();
        if !callable.is_callable() {
            return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "a hook must be callable, not {}",
                callable.get_type().name()?
            )));
        }
        let inspect = py.import("inspect")?;
        let is_async = inspect.call_method1("iscoroutinefunction", (callable,))?.is_truthy()?
            || callable
                .getattr("__call__")
                .and_then(|call| inspect.call_method1("iscoroutinefunction", (call,)))
                .and_then(|answer| answer.is_truthy())
                .unwrap_or(false);
        Ok(Arc::new(Hook { callable: std::sync::Mutex::new(Some(callable.clone().unbind())), is_async }))
    }

    /// The callable, while it has not been cleared.
    fn callable<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let held = self.callable.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match held.as_ref() {
            Some(callable) => Ok(callable.bind(py).clone()),
            None => Err(pyo3::exceptions::PyRuntimeError::new_err("the hook was collected with its owner")),
        }
    }

    /// Show the garbage collector the callable (the owner's
    /// `__traverse__`). A hook in use by another thread right now is
    /// skipped: a collection never waits.
    pub(crate) fn visit(&self, visit: &pyo3::PyVisit<'_>) -> Result<(), pyo3::PyTraverseError> {
        if let Ok(held) = self.callable.try_lock()
            && let Some(callable) = held.as_ref()
        {
            visit.call(callable)?;
        }
        Ok(())
    }

    /// Drop the callable (the owner's `__clear__`): what breaks a cycle
    /// through it.
    pub(crate) fn clear(&self) {
        let taken = self.callable.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take();
        drop(taken);
    }
}

/// Call `hook` with the arguments `args` makes, as the module says: the
/// value it returned (awaited, for a coroutine function). `event_loop` is
/// the awaiting task's loop when the caller captured it already (a tool's
/// handler runs in a task of its own); otherwise the task-local is read.
pub(crate) async fn call_hook<A>(hook: Arc<Hook>, event_loop: Option<TaskLocals>, args: A) -> PyResult<Py<PyAny>>
where
    A: FnOnce(Python<'_>) -> PyResult<Py<PyTuple>> + Send + 'static,
{
    if hook.is_async
        && let Some(locals) = event_loop.or_else(|| EVENT_LOOP.try_with(TaskLocals::clone).ok())
    {
        return on_loop(&hook, &locals, args).await;
    }
    tokio::task::spawn_blocking(move || {
        Python::attach(|py| {
            let value = hook.callable(py)?.call1(args(py)?.into_bound(py))?;
            if hook.is_async || py.import("inspect")?.call_method1("isawaitable", (&value,))?.is_truthy()? {
                Ok(py.import("asyncio")?.call_method1("run", (value,))?.unbind())
            } else {
                Ok(value.unbind())
            }
        })
    })
    .await
    .map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(format!("the hook's thread failed: {e}")))?
}

/// Run the coroutine `hook` makes as a task on the event loop of `locals`,
/// and wait for it. Dropped before it is done (the call was cancelled, or
/// ran out of time), the task is cancelled: a hook waiting on a person
/// does not go on waiting for nobody.
async fn on_loop<A>(hook: &Hook, locals: &TaskLocals, args: A) -> PyResult<Py<PyAny>>
where
    A: FnOnce(Python<'_>) -> PyResult<Py<PyTuple>>,
{
    let (sender, receiver) = tokio::sync::oneshot::channel::<PyResult<Py<PyAny>>>();
    let task = Python::attach(|py| -> PyResult<Py<PyAny>> {
        let coroutine = hook.callable(py)?.call1(args(py)?.into_bound(py))?;
        let task =
            py.import("asyncio")?.call_method1("run_coroutine_threadsafe", (coroutine, locals.event_loop(py)))?;
        let sender = std::sync::Mutex::new(Some(sender));
        let done = pyo3::types::PyCFunction::new_closure(py, None, None, move |args, _| -> PyResult<()> {
            let finished = args.get_item(0)?;
            let outcome = finished.call_method0("result").map(Bound::unbind);
            if let Some(sender) = sender.lock().ok().and_then(|mut slot| slot.take()) {
                let _ = sender.send(outcome);
            }
            Ok(())
        })?;
        task.call_method1("add_done_callback", (done,))?;
        Ok(task.unbind())
    })?;
    let guard = CancelOnDrop(Some(task));
    let outcome = receiver.await;
    guard.disarm();
    outcome.unwrap_or_else(|_| Err(pyo3::exceptions::PyRuntimeError::new_err("the hook's task went away")))
}

/// Cancels a hook's task on its event loop when dropped armed.
struct CancelOnDrop(Option<Py<PyAny>>);

impl CancelOnDrop {
    /// The task is done: nothing to cancel.
    fn disarm(mut self) {
        if let Some(task) = self.0.take() {
            Python::attach(|_| drop(task));
        }
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            Python::attach(|py| {
                let _ = task.bind(py).call_method0("cancel");
            });
        }
    }
}

/// The name of a Python exception's type, for texts that must not carry
/// its words (they may quote a secret, and a plugin may read them).
pub(crate) fn kind_of(error: &PyErr) -> String {
    Python::attach(|py| error.get_type(py).name().map(|n| n.to_string()).unwrap_or_else(|_| "Exception".into()))
}

/// `Type: message` of a Python exception, for the texts that carry it.
pub(crate) fn describe(error: &PyErr) -> String {
    let kind = kind_of(error);
    let message = Python::attach(|py| error.value(py).str().map(|s| s.to_string()).unwrap_or_default());
    if message.is_empty() { kind } else { format!("{kind}: {message}") }
}

/// The text of a `ToolError`: the words its raiser meant to be read (by a
/// model, or by the plugin it refuses); `None` for any other exception.
fn tool_error_text(py: Python<'_>, error: &PyErr) -> Option<String> {
    error
        .is_instance_of::<crate::errors::ToolError>(py)
        .then(|| error.value(py).str().map(|s| s.to_string()).unwrap_or_default())
}

/// The approval hook of one call: `hook(tool, arguments)`, where `tool` is
/// the [`ToolInfo`](crate::result::ToolInfo) and `arguments` the validated
/// arguments. `True` approves; `False` or `None` denies; a string denies
/// with that reason; an exception denies, saying so (fail closed). Without
/// a hook, a tool that requires approval is denied.
pub(crate) struct PyApprover {
    pub(crate) hook: Option<Arc<Hook>>,
    /// The caller approved the call already (an agent framework asked its
    /// own user): the hook is not asked.
    pub(crate) approved: bool,
    /// Whether it denied: the call then raises `ApprovalDeniedError`.
    pub(crate) denied: AtomicBool,
}

impl PyApprover {
    pub(crate) fn new(hook: Option<Arc<Hook>>, approved: bool) -> Self {
        PyApprover { hook, approved, denied: AtomicBool::new(false) }
    }

    pub(crate) fn denied(&self) -> bool {
        self.denied.load(Ordering::Relaxed)
    }
}

impl Approver for PyApprover {
    fn approve<'a>(&'a self, request: ApprovalRequest<'a>) -> BoxFuture<'a, Approval> {
        let tool = crate::result::ToolInfo::of(request.tool);
        let arguments = request.arguments.clone();
        Box::pin(async move {
            let answer = match &self.hook {
                _ if self.approved => Approval::Approved,
                None => Approval::Denied("it requires approval and no approval hook was given".to_owned()),
                Some(hook) => {
                    let args = move |py: Python<'_>| {
                        let tool = Bound::new(py, tool)?;
                        let arguments = pythonize::pythonize(py, &arguments)?;
                        PyTuple::new(py, [tool.into_any(), arguments]).map(Bound::unbind)
                    };
                    match call_hook(Arc::clone(hook), None, args).await {
                        Ok(answer) => Python::attach(|py| approval_of(answer.bind(py))),
                        Err(error) => Approval::Denied(format!("the approval hook failed ({})", describe(&error))),
                    }
                }
            };
            if matches!(answer, Approval::Denied(_)) {
                self.denied.store(true, Ordering::Relaxed);
            }
            answer
        })
    }
}

fn approval_of(answer: &Bound<'_, PyAny>) -> Approval {
    if let Ok(true) = answer.extract::<bool>() {
        return Approval::Approved;
    }
    if let Ok(reason) = answer.extract::<String>() {
        return Approval::Denied(reason);
    }
    Approval::Denied("the approval hook did not approve it".to_owned())
}

/// Secrets from a Python callable: `hook(name)` gives the value, or `None`
/// when there is none. An exception is a failed lookup (the call is
/// refused, naming the secret).
pub(crate) struct PySecrets {
    pub(crate) hook: Arc<Hook>,
}

impl SecretProvider for PySecrets {
    fn secret<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<String>, SecretError>> {
        let owned = name.to_owned();
        Box::pin(async move {
            let args = move |py: Python<'_>| PyTuple::new(py, [owned]).map(Bound::unbind);
            // Only the exception's type: its words may quote a secret.
            let value = call_hook(Arc::clone(&self.hook), None, args)
                .await
                .map_err(|error| SecretError(format!("the secret provider failed ({})", kind_of(&error))))?;
            Python::attach(|py| {
                let value = value.bind(py);
                if value.is_none() {
                    return Ok(None);
                }
                value.extract::<String>().map(Some).map_err(|_| {
                    SecretError(format!(
                        "the secret provider gave a {} for `{name}`, not a string",
                        value.get_type().name().map(|n| n.to_string()).unwrap_or_default()
                    ))
                })
            })
        })
    }

    fn describe(&self) -> String {
        "the Python secret provider".to_owned()
    }
}

/// The caller's side of one call: `on_progress(progress, total, message)`
/// for the plugin's progress notices, `on_request(method, params)` for
/// what it asks of the client (`elicitation/create`,
/// `sampling/createMessage`, `roots/list`: the answer is the protocol's
/// result as a dict). A `ToolError` from `on_request` is the plugin's
/// refusal, with its text; any other exception is a refusal saying only
/// that the caller failed (the plugin is the attacker: it does not read the
/// caller's exceptions), reported as unraisable. One from `on_progress` is
/// reported as unraisable and the call goes on.
pub(crate) struct PyClient {
    pub(crate) on_progress: Option<Arc<Hook>>,
    pub(crate) on_request: Option<Arc<Hook>>,
}

impl CallClient for PyClient {
    fn request(
        &self,
        request: ClientRequest,
        params: toolhost::protocol::JsonObject,
    ) -> BoxFuture<'_, Result<Value, String>> {
        Box::pin(async move {
            let Some(hook) = &self.on_request else {
                return Err(format!("the caller does not answer {}", request.method()));
            };
            let args = move |py: Python<'_>| {
                let params = pythonize::pythonize(py, &params)?;
                PyTuple::new(py, [request.method().into_pyobject(py)?.into_any(), params]).map(Bound::unbind)
            };
            let answer = call_hook(Arc::clone(hook), None, args).await.map_err(|error| {
                Python::attach(|py| {
                    tool_error_text(py, &error).unwrap_or_else(|| {
                        error.write_unraisable(py, None);
                        format!("the caller failed to answer {}", request.method())
                    })
                })
            })?;
            Python::attach(|py| pythonize::depythonize::<Value>(answer.bind(py)).map_err(|e| e.to_string()))
        })
    }

    fn notify(&self, notice: ClientNotice) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let (Some(hook), ClientNotice::Progress(params)) = (&self.on_progress, &notice) else {
                return;
            };
            let progress = params.get("progress").and_then(Value::as_f64).unwrap_or_default();
            let total = params.get("total").and_then(Value::as_f64);
            let message = params.get("message").and_then(Value::as_str).map(str::to_owned);
            let args = move |py: Python<'_>| {
                PyTuple::new(
                    py,
                    [
                        progress.into_pyobject(py)?.into_any(),
                        total.into_pyobject(py)?.into_any(),
                        message.into_pyobject(py)?.into_any(),
                    ],
                )
                .map(Bound::unbind)
            };
            if let Err(error) = call_hook(Arc::clone(hook), None, args).await {
                Python::attach(|py| error.write_unraisable(py, None));
            }
        })
    }
}

/// A built-in tool's handler calling `invoke(arguments, meta)`, the
/// package's wrapper around the Python function: it answers with the
/// result as a dict, or raises `ToolError` for an error the model reads.
/// Any other exception means the tool could not run: the call fails with
/// `PluginFaultError`, naming the exception.
pub(crate) fn builtin_handler(hook: Arc<Hook>) -> toolhost::BuiltinHandler {
    Arc::new(move |call: BuiltinCall| {
        let hook = Arc::clone(&hook);
        // Read here, in the call's task: the library runs the handler's
        // future in a task of its own, where the task-local is not set.
        let event_loop = EVENT_LOOP.try_with(TaskLocals::clone).ok();
        Box::pin(async move {
            let BuiltinCall { arguments, meta, .. } = call;
            let args = move |py: Python<'_>| {
                let arguments = pythonize::pythonize(py, &arguments)?;
                let meta = pythonize::pythonize(py, &meta)?;
                PyTuple::new(py, [arguments, meta]).map(Bound::unbind)
            };
            let answer = call_hook(hook, event_loop, args).await;
            Python::attach(|py| match answer {
                Ok(value) => pythonize::depythonize::<CallToolResult>(value.bind(py))
                    .map_err(|e| BuiltinError::Unavailable(format!("the tool's result is not a CallToolResult: {e}"))),
                Err(error) => Err(match tool_error_text(py, &error) {
                    Some(text) => BuiltinError::Tool(text),
                    None => BuiltinError::Unavailable(describe(&error)),
                }),
            })
        }) as BoxFuture<'static, Result<CallToolResult, BuiltinError>>
    })
}

/// Lines waiting for `on_log` at most: past this, a flood's further lines
/// are dropped (the library bounds what a plugin may log already).
const LOG_BACKLOG: usize = 1024;

/// The plugin's log lines for `on_log(level, message)`: the sink, which
/// only queues a line (it is called from inside the guest, where Python
/// must not run), and the pump, which calls the hook with each line in
/// order, as any hook is called. An exception it raises is reported as
/// unraisable.
pub(crate) fn log_pump(hook: Arc<Hook>) -> (impl Fn(toolhost::GuestLog<'_>) + Send + Sync + 'static, LogPump) {
    let (sender, receiver) = tokio::sync::mpsc::channel::<(String, String)>(LOG_BACKLOG);
    let sink = move |line: toolhost::GuestLog<'_>| {
        let _ = sender.try_send((line.level.to_string(), line.message.to_owned()));
    };
    (sink, LogPump { hook, receiver })
}

/// What delivers a call's log lines; run it beside the call, and wait for it
/// after (it ends when the call's sink is dropped with the call).
pub(crate) struct LogPump {
    hook: Arc<Hook>,
    receiver: tokio::sync::mpsc::Receiver<(String, String)>,
}

impl LogPump {
    pub(crate) async fn run(mut self, event_loop: Option<TaskLocals>) {
        while let Some((level, message)) = self.receiver.recv().await {
            let args = move |py: Python<'_>| (level, message).into_pyobject(py).map(Bound::unbind);
            let event_loop = event_loop.clone();
            if let Err(error) = call_hook(Arc::clone(&self.hook), event_loop, args).await {
                Python::attach(|py| error.write_unraisable(py, None));
            }
        }
    }
}
