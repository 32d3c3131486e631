//! `toolhost._toolhost`: the library's plugins, for Python. The package
//! `toolhost` (`python/toolhost/`) wraps this module in Python terms.
//!
//! Calls run on one tokio runtime of the module's own; the GIL is released
//! while a call runs (a blocking call detaches from the interpreter, an
//! awaited one runs on the runtime), so calls from many threads and tasks
//! run side by side. Arguments and results cross as Python objects
//! (`pythonize`), checked by the library as every call is.

use std::sync::Arc;
use std::time::Duration;

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyDict;

create_exception!(_toolhost, ToolhostError, PyException, "A failure of toolhost or of a plugin.");
create_exception!(_toolhost, LoadError, ToolhostError, "The plugin could not be loaded.");
create_exception!(_toolhost, UnknownToolError, ToolhostError, "The plugin has no tool of that name.");
create_exception!(
    _toolhost,
    InvalidArgumentsError,
    ToolhostError,
    "The arguments do not match the tool's input schema; the plugin did not run."
);
create_exception!(_toolhost, CallTimeoutError, ToolhostError, "The call ran past its timeout and was stopped.");
create_exception!(
    _toolhost,
    PluginFaultError,
    ToolhostError,
    "The plugin failed: it trapped, hit a limit, or answered with invalid output."
);

/// The library's error as the Python exception of its kind, with the
/// library's own message (the text a model is shown).
fn to_py(error: toolhost::Error) -> PyErr {
    let message = error.to_string();
    if error.is_unknown_tool() {
        UnknownToolError::new_err(message)
    } else if error.is_invalid_arguments() {
        InvalidArgumentsError::new_err(message)
    } else if error.is_timeout() {
        CallTimeoutError::new_err(message)
    } else if error.is_load() {
        LoadError::new_err(message)
    } else if error.is_trap() || error.is_memory_limit() || error.is_invalid_output() {
        PluginFaultError::new_err(message)
    } else {
        ToolhostError::new_err(message)
    }
}

fn runtime() -> &'static tokio::runtime::Runtime {
    pyo3_async_runtimes::tokio::get_runtime()
}

/// A loaded plugin: its tools, and calls to them.
#[pyclass(frozen, module = "toolhost._toolhost")]
struct Plugin {
    inner: Arc<toolhost::Plugin>,
}

#[pymethods]
impl Plugin {
    /// Load the plugin at `path`, granting it what the arguments say and
    /// nothing else: `timeout` seconds per call, `memory_mb` of memory,
    /// `allow_hosts` (patterns, `api.example.com`, `*.example.com:443`) it
    /// may reach, `allow_paths` (`HOST[:GUEST][:ro|rw]`) it may see, and
    /// `config` values.
    #[staticmethod]
    #[pyo3(signature = (path, *, timeout=None, memory_mb=None, allow_hosts=Vec::new(), allow_paths=Vec::new(), config=None))]
    fn load(
        py: Python<'_>,
        path: std::path::PathBuf,
        timeout: Option<f64>,
        memory_mb: Option<u64>,
        allow_hosts: Vec<String>,
        allow_paths: Vec<String>,
        config: Option<std::collections::BTreeMap<String, String>>,
    ) -> PyResult<Plugin> {
        let mut builder = toolhost::Plugin::builder_from_file(&path);
        if let Some(seconds) = timeout {
            let timeout = Duration::try_from_secs_f64(seconds)
                .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("timeout: {e}")))?;
            builder = builder.with_timeout(timeout);
        }
        if let Some(megabytes) = memory_mb {
            builder = builder.with_memory_max_bytes(megabytes.saturating_mul(1024 * 1024));
        }
        for host in allow_hosts {
            builder = builder.with_allowed_host(host);
        }
        for grant in allow_paths {
            let grant: toolhost::PathGrant =
                grant.parse().map_err(|e: toolhost::PolicyError| LoadError::new_err(e.to_string()))?;
            builder = builder.with_allowed_path(grant);
        }
        for (key, value) in config.unwrap_or_default() {
            builder = builder.with_config(key, value);
        }
        let plugin = py.detach(|| runtime().block_on(builder.build())).map_err(to_py)?;
        Ok(Plugin { inner: Arc::new(plugin) })
    }

    /// The plugin's name.
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    /// Its tools, each a dict as MCP's `Tool` (name, title, description,
    /// inputSchema, outputSchema, annotations), checked at load.
    fn tools<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        self.inner.tools().iter().map(|tool| Ok(pythonize::pythonize(py, tool)?)).collect()
    }

    /// Call `name` with `arguments` (a dict), blocking this thread (not
    /// the interpreter) until the result: a dict as MCP's `CallToolResult`.
    #[pyo3(signature = (name, arguments=None))]
    fn call_sync<'py>(
        &self,
        py: Python<'py>,
        name: String,
        arguments: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let arguments = arguments_of(arguments)?;
        let plugin = Arc::clone(&self.inner);
        let result = py.detach(|| runtime().block_on(plugin.call_tool(&name, arguments))).map_err(to_py)?;
        Ok(pythonize::pythonize(py, &result)?)
    }

    /// Call `name` with `arguments`: an awaitable of the result. Cancelling
    /// the awaiting task stops the call.
    #[pyo3(signature = (name, arguments=None))]
    fn call<'py>(
        &self,
        py: Python<'py>,
        name: String,
        arguments: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let arguments = arguments_of(arguments)?;
        let plugin = Arc::clone(&self.inner);
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            // Dropped with this future, which a cancelled task drops: the
            // guest is stopped as a Rust caller's would be.
            let token = toolhost::CancellationToken::new();
            let _stop = token.clone().drop_guard();
            let context = toolhost::CallContext::default().with_cancellation(token);
            let result = plugin.call_tool_with(&name, arguments, &context).await.map_err(to_py)?;
            Python::attach(|py| Ok(pythonize::pythonize(py, &result)?.unbind()))
        })
    }

    /// Its instances: `size` (at most at once), `idle`, `busy` (running a
    /// call now), `idle_memory_bytes`.
    fn pool_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let stats = self.inner.pool_stats();
        let dict = PyDict::new(py);
        dict.set_item("size", stats.size)?;
        dict.set_item("idle", stats.idle)?;
        dict.set_item("busy", stats.busy)?;
        dict.set_item("idle_memory_bytes", stats.idle_memory_bytes)?;
        Ok(dict)
    }

    fn __repr__(&self) -> String {
        format!("<toolhost.Plugin {} ({} tools)>", self.inner.name(), self.inner.tools().len())
    }
}

fn arguments_of(arguments: Option<Bound<'_, PyAny>>) -> PyResult<serde_json::Value> {
    match arguments {
        None => Ok(serde_json::Value::Object(Default::default())),
        Some(arguments) if arguments.is_instance_of::<PyDict>() => Ok(pythonize::depythonize(&arguments)?),
        Some(other) => Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "arguments must be a dict, not {}",
            other.get_type().name()?
        ))),
    }
}

/// The native half of the `toolhost` package.
#[pymodule]
fn _toolhost(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    module.add_class::<Plugin>()?;
    module.add("ToolhostError", py.get_type::<ToolhostError>())?;
    module.add("LoadError", py.get_type::<LoadError>())?;
    module.add("UnknownToolError", py.get_type::<UnknownToolError>())?;
    module.add("InvalidArgumentsError", py.get_type::<InvalidArgumentsError>())?;
    module.add("CallTimeoutError", py.get_type::<CallTimeoutError>())?;
    module.add("PluginFaultError", py.get_type::<PluginFaultError>())?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
