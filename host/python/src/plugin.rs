//! `toolhost.Plugin`: one plugin, loaded with the grants its arguments
//! give, its tools and calls to them.

use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::call::{CallOptions, Pace, arguments_of, awaitable, blocking, host_runtime, runtime};
use crate::errors::{LoadError, to_py};
use crate::result::{CallResult, ToolInfo, infos};

/// A loaded plugin: its tools, and calls to them.
#[pyclass(frozen, subclass, module = "toolhost")]
pub(crate) struct Plugin {
    inner: Arc<toolhost::Plugin>,
    /// Its secret provider, when it is Python's: shown to the garbage
    /// collector, as a provider may refer back to the plugin.
    secrets: Option<Arc<crate::hooks::Hook>>,
}

#[pymethods]
impl Plugin {
    /// Load the plugin at `path`, granting it what the arguments say and
    /// nothing else: `timeout` seconds per call, `memory_mb` of memory,
    /// `allow_hosts` (patterns, `api.example.com`, `*.example.com:443`) it
    /// may reach, `allow_paths` (`HOST[:GUEST][:ro|rw]`) it may see,
    /// `config` values, and the secrets `grant_secrets` names, read from
    /// `secrets` (a callable `name -> str | None`, sync or async; the
    /// package takes a mapping too) or else the environment. `max_output_size` (bytes, or `"16MiB"`)
    /// caps a call's output, `fuel` its instructions, and `pool_size` says
    /// how many instances run calls at once.
    #[new]
    #[pyo3(signature = (path, *, timeout=None, memory_mb=None, allow_hosts=Vec::new(), allow_paths=Vec::new(), config=None, grant_secrets=Vec::new(), secrets=None, max_output_size=None, fuel=None, pool_size=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: std::path::PathBuf,
        timeout: Option<f64>,
        memory_mb: Option<u64>,
        allow_hosts: Vec<String>,
        allow_paths: Vec<String>,
        config: Option<std::collections::BTreeMap<String, String>>,
        grant_secrets: Vec<String>,
        secrets: Option<Bound<'_, PyAny>>,
        max_output_size: Option<Bound<'_, PyAny>>,
        fuel: Option<u64>,
        pool_size: Option<usize>,
    ) -> PyResult<Plugin> {
        let mut limits = toolhost::Limits::default();
        if let Some(seconds) = timeout {
            limits.timeout = Some(
                Duration::try_from_secs_f64(seconds)
                    .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("timeout: {e}")))?,
            );
        }
        if let Some(megabytes) = memory_mb {
            limits.memory_max_bytes = Some(megabytes.saturating_mul(1024 * 1024));
        }
        if let Some(size) = max_output_size {
            let bytes = match size.extract::<u64>() {
                Ok(bytes) => bytes,
                Err(_) => toolhost::parse_size(&size.extract::<String>()?)
                    .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("max_output_size: {e}")))?,
            };
            limits.max_output_bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
        }
        limits.fuel = fuel;
        let mut builder =
            host_runtime().plugin_from_file(&path).with_granted_secrets(grant_secrets).with_limits(limits);
        if let Some(size) = pool_size {
            builder = builder.with_pool_size(size);
        }
        let secrets = secrets.map(|provider| crate::hooks::Hook::new(&provider)).transpose()?;
        if let Some(hook) = &secrets {
            builder = builder.with_secret_provider(Arc::new(crate::hooks::PySecrets { hook: Arc::clone(hook) }));
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
        let plugin = py.detach(|| runtime().block_on(builder.build())).map_err(|e| to_py(py, &e))?;
        Ok(Plugin { inner: Arc::new(plugin), secrets })
    }

    /// The plugin's name.
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    /// Its tools (`ToolInfo`), checked at load.
    fn tools<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        infos(py, self.inner.tools().iter().map(ToolInfo::of_plugin))
    }

    /// Call `name` with `arguments` (a dict), blocking this thread (not
    /// the interpreter) until the result. The keywords: `timeout`
    /// (seconds), `user_id`, `meta` (the call's `_meta`), `on_log(level,
    /// message)`, `on_progress(progress, total, message)`,
    /// `on_request(method, params)`.
    #[pyo3(signature = (name, arguments=None, **options))]
    fn call_sync<'py>(
        &self,
        py: Python<'py>,
        name: String,
        arguments: Option<Bound<'py, PyAny>>,
        options: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<CallResult> {
        let arguments = arguments_of(arguments)?;
        let options = CallOptions::from_keywords(options, false)?;
        let plugin = Arc::clone(&self.inner);
        blocking(py, options, Pace::of(Arc::as_ptr(&self.inner) as usize, &name), |context| async move {
            plugin.call_tool_with(&name, arguments, &context).await.map_err(|e| Python::attach(|py| to_py(py, &e)))
        })
    }

    /// Call `name` with `arguments`: an awaitable of the result, to await
    /// on a running event loop (the package's `async def call` does).
    /// Cancelling the awaiting task stops the call.
    #[pyo3(signature = (name, arguments=None, **options))]
    fn _call<'py>(
        &self,
        py: Python<'py>,
        name: String,
        arguments: Option<Bound<'py, PyAny>>,
        options: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let arguments = arguments_of(arguments)?;
        let options = CallOptions::from_keywords(options, false)?;
        let plugin = Arc::clone(&self.inner);
        awaitable(py, options, Pace::of(Arc::as_ptr(&self.inner) as usize, &name), |context| async move {
            plugin.call_tool_with(&name, arguments, &context).await.map_err(|e| Python::attach(|py| to_py(py, &e)))
        })
    }

    /// Its instances: `size` (at most at once), `idle`, `busy` (running a
    /// call now), `idle_memory_bytes`.
    fn pool_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        pool_stats(py, &self.inner.pool_stats())
    }

    /// Call `name` with `arguments` `iterations` times from Rust, the
    /// interpreter released: the seconds the calls took. What the
    /// benchmark compares Python's calls with (the Rust library's own
    /// call, in the same process and run).
    #[pyo3(signature = (name, arguments, iterations))]
    fn _rust_call_loop(
        &self,
        py: Python<'_>,
        name: String,
        arguments: Bound<'_, PyAny>,
        iterations: u64,
    ) -> PyResult<f64> {
        let arguments = arguments_of(Some(arguments))?;
        let plugin = Arc::clone(&self.inner);
        py.detach(|| {
            runtime().block_on(async {
                let start = std::time::Instant::now();
                for _ in 0..iterations {
                    plugin.call_tool(&name, arguments.clone()).await?;
                }
                Ok::<_, toolhost::Error>(start.elapsed().as_secs_f64())
            })
        })
        .map_err(|e| to_py(py, &e))
    }

    fn __traverse__(&self, visit: pyo3::PyVisit<'_>) -> Result<(), pyo3::PyTraverseError> {
        match &self.secrets {
            Some(hook) => hook.visit(&visit),
            None => Ok(()),
        }
    }

    fn __clear__(&self) {
        if let Some(hook) = &self.secrets {
            hook.clear();
        }
    }

    fn __repr__(&self) -> String {
        format!("<toolhost.Plugin {} ({} tools)>", self.inner.name(), self.inner.tools().len())
    }
}

/// A pool's figures as a dict.
pub(crate) fn pool_stats<'py>(py: Python<'py>, stats: &toolhost::PoolStats) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("size", stats.size)?;
    dict.set_item("idle", stats.idle)?;
    dict.set_item("busy", stats.busy)?;
    dict.set_item("idle_memory_bytes", stats.idle_memory_bytes)?;
    Ok(dict)
}
