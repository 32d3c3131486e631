//! `toolhost.Registry`: toolsets of every kind toolhost runs (Wasm
//! plugins from files, `https://` and `oci://`; remote MCP servers; tools
//! written in Python) under one set of names, filters, approvals, secrets
//! and limits.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use toolhost::{BuiltinTool, BuiltinToolset, SecretProvider, Tool};

use crate::call::{CallOptions, Pace, arguments_of, awaitable, blocking, host_runtime, runtime};
use crate::errors::{LoadError, denied, to_py};
use crate::hooks::{Hook, PyApprover, PySecrets, builtin_handler};
use crate::plugin::pool_stats;
use crate::result::{CallResult, ToolInfo, infos};

/// Toolsets and their tools, under namespaced names (`<toolset>__<tool>`).
#[pyclass(frozen, subclass, module = "toolhost")]
pub(crate) struct Registry {
    inner: Arc<toolhost::Registry>,
    secrets: Arc<dyn SecretProvider>,
    approve: Option<Arc<Hook>>,
    /// Every Python callable it holds (the approval hook, the secret
    /// provider, each built-in toolset's tools, by toolset), for the
    /// garbage collector: a hook or tool that refers back to its registry
    /// makes a cycle it can then see, and break.
    held: std::sync::Mutex<std::collections::BTreeMap<String, Vec<Arc<Hook>>>>,
}

#[pymethods]
impl Registry {
    /// An empty registry. `secrets` is where plugins' declared secrets
    /// come from: a callable `secrets(name) -> str | None` (sync or async);
    /// else `secrets_dir`, a directory of files named after the secrets;
    /// else the environment. `approve(tool, arguments) -> bool | str` (sync
    /// or async) decides on calls of tools that require approval; without
    /// it they are denied.
    #[new]
    #[pyo3(signature = (*, secrets=None, secrets_dir=None, approve=None))]
    fn new(
        secrets: Option<Bound<'_, PyAny>>,
        secrets_dir: Option<std::path::PathBuf>,
        approve: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Registry> {
        let mut held = std::collections::BTreeMap::new();
        let secrets: Arc<dyn SecretProvider> = match (secrets, secrets_dir) {
            (Some(_), Some(_)) => {
                return Err(pyo3::exceptions::PyValueError::new_err("give `secrets` or `secrets_dir`, not both"));
            }
            (Some(hook), None) => {
                let hook = Hook::new(&hook)?;
                held.insert(String::new(), vec![Arc::clone(&hook)]);
                Arc::new(PySecrets { hook })
            }
            (None, Some(dir)) => Arc::new(toolhost::FileSecretProvider::new(dir)),
            (None, None) => Arc::new(toolhost::EnvSecretProvider::new()),
        };
        let approve = approve.map(|hook| Hook::new(&hook)).transpose()?;
        held.entry(String::new()).or_insert_with(Vec::new).extend(approve.clone());
        // Built inside the module's runtime: the registry's background
        // work (following MCP servers' list changes) is spawned there.
        let inner = runtime().block_on(async {
            toolhost::Registry::with_runtime(host_runtime().clone(), Arc::clone(&secrets))
                .with_connector("mcp", Arc::new(toolhost_mcp::McpConnector::new()))
        });
        Ok(Registry { inner: Arc::new(inner), secrets, approve, held: std::sync::Mutex::new(held) })
    }

    /// Load the toolsets file at `path` (YAML, JSON or TOML: every kind of
    /// toolset), adding its toolsets to those loaded: a dict of `failures`
    /// (each `toolset`, `source`, `error`) and `warnings`. A file that is
    /// not a valid toolsets file raises `LoadError` naming each problem.
    fn load<'py>(&self, py: Python<'py>, path: std::path::PathBuf) -> PyResult<Bound<'py, PyDict>> {
        let (registry, secrets) = (Arc::clone(&self.inner), Arc::clone(&self.secrets));
        let report = py.detach(|| {
            runtime().block_on(async move {
                let parsed = toolhost::load_toolsets(&path, secrets.as_ref()).await.map_err(|e| e.to_string())?;
                Ok::<_, String>(registry.load_all(parsed.toolsets).await)
            })
        });
        let report = report.map_err(LoadError::new_err)?;
        let failures = PyList::empty(py);
        for failure in &report.failures {
            let item = PyDict::new(py);
            item.set_item("toolset", &failure.toolset)?;
            item.set_item("source", &failure.source)?;
            item.set_item("error", failure.error.to_string())?;
            failures.append(item)?;
        }
        let out = PyDict::new(py);
        out.set_item("failures", failures)?;
        out.set_item("warnings", &report.warnings)?;
        Ok(out)
    }

    /// Add (or replace) the built-in toolset `toolset` of tools written in
    /// Python: each a dict of MCP's `Tool` (`name`, `description`,
    /// `inputSchema`, ...) and an `invoke(arguments, meta)` callable. The
    /// package's `Registry.add_tools` makes these from plain functions.
    /// Returns warnings.
    fn _add_builtin(
        &self,
        py: Python<'_>,
        toolset: String,
        tools: Vec<(Bound<'_, PyDict>, Bound<'_, PyAny>)>,
    ) -> PyResult<Vec<String>> {
        let mut set = BuiltinToolset::new(toolset.clone());
        let mut hooks = Vec::new();
        for (description, invoke) in tools {
            let tool: Tool = pythonize::depythonize(&description)
                .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("not a tool description: {e}")))?;
            let hook = Hook::new(&invoke)?;
            hooks.push(Arc::clone(&hook));
            let handler = builtin_handler(hook);
            set = set.with_tool(BuiltinTool::from_tool(tool, move |call| handler(call)));
        }
        let registry = Arc::clone(&self.inner);
        let warnings = py.detach(|| runtime().block_on(registry.register_builtin(set))).map_err(|e| to_py(py, &e))?;
        // Keyed "py:<id>": "" holds the registry's own hooks.
        self.held.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).insert(format!("py:{toolset}"), hooks);
        Ok(warnings)
    }

    /// Remove the toolset `toolset`: whether there was one.
    fn remove(&self, toolset: &str) -> bool {
        self.inner.remove(toolset)
    }

    /// The ids of its toolsets.
    fn toolsets(&self) -> Vec<String> {
        self.inner.toolset_ids()
    }

    /// The tools callers see (`ToolInfo`): enabled and not filtered out.
    fn tools<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        infos(py, self.inner.tools().iter().map(ToolInfo::of))
    }

    /// The tools in the OpenAI tool format.
    fn openai<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let tools = self.inner.tools();
        let shapes: Vec<_> = tools.iter().map(|tool| tool.for_model().openai()).collect();
        Ok(pythonize::pythonize(py, &shapes)?)
    }

    /// The tools in the Anthropic tool format.
    fn anthropic<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let tools = self.inner.tools();
        let shapes: Vec<_> = tools.iter().map(|tool| tool.for_model().anthropic()).collect();
        Ok(pythonize::pythonize(py, &shapes)?)
    }

    /// The tools as MCP's `tools/list` result: `{"tools": [...]}`.
    fn mcp<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let tools: Vec<Tool> = self.inner.tools().iter().map(|tool| tool.exposed()).collect();
        Ok(pythonize::pythonize(py, &serde_json::json!({ "tools": tools }))?)
    }

    /// Call the tool `name` (namespaced) with `arguments`, blocking this
    /// thread (not the interpreter) until the result. `approved=True` says
    /// the caller has had the call approved already (an agent framework's
    /// own confirmation): the approval hook is not asked.
    #[pyo3(signature = (name, arguments=None, **options))]
    fn call_sync<'py>(
        &self,
        py: Python<'py>,
        name: String,
        arguments: Option<Bound<'py, PyAny>>,
        options: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<CallResult> {
        let arguments = arguments_of(arguments)?;
        let options = CallOptions::from_keywords(options, true)?;
        let (registry, approver) = (Arc::clone(&self.inner), PyApprover::new(self.approve.clone(), options.approved));
        blocking(py, options, Pace::of(Arc::as_ptr(&self.inner) as usize, &name), move |context| {
            call(registry, approver, name, arguments, context)
        })
    }

    /// Call the tool `name` with `arguments`: an awaitable of the result,
    /// to await on a running event loop (the package's `async def call`
    /// does). Cancelling the awaiting task stops the call.
    #[pyo3(signature = (name, arguments=None, **options))]
    fn _call<'py>(
        &self,
        py: Python<'py>,
        name: String,
        arguments: Option<Bound<'py, PyAny>>,
        options: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let arguments = arguments_of(arguments)?;
        let options = CallOptions::from_keywords(options, true)?;
        let (registry, approver) = (Arc::clone(&self.inner), PyApprover::new(self.approve.clone(), options.approved));
        awaitable(py, options, Pace::of(Arc::as_ptr(&self.inner) as usize, &name), move |context| {
            call(registry, approver, name, arguments, context)
        })
    }

    /// Each toolset's instances: `{toolset: {size, idle, busy, idle_memory_bytes}}`.
    fn pool_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        for (toolset, stats) in self.inner.pool_stats() {
            out.set_item(toolset, pool_stats(py, &stats)?)?;
        }
        Ok(out)
    }

    fn __traverse__(&self, visit: pyo3::PyVisit<'_>) -> Result<(), pyo3::PyTraverseError> {
        // Never wait in a collection: a registry being changed right now is
        // looked at in the next one.
        if let Ok(held) = self.held.try_lock() {
            for hook in held.values().flatten() {
                hook.visit(&visit)?;
            }
        }
        Ok(())
    }

    fn __clear__(&self) {
        let held = std::mem::take(&mut *self.held.lock().unwrap_or_else(|poisoned| poisoned.into_inner()));
        for hook in held.values().flatten() {
            hook.clear();
        }
    }

    fn __repr__(&self) -> String {
        format!("<toolhost.Registry {} toolsets, {} tools>", self.inner.toolset_ids().len(), self.inner.tools().len())
    }
}

/// One call through the registry, with an approver of its own that
/// remembers whether it denied: a denial raises `ApprovalDeniedError` with
/// the text the library gives the model.
async fn call(
    registry: Arc<toolhost::Registry>,
    approver: PyApprover,
    name: String,
    arguments: serde_json::Value,
    context: toolhost::CallContext,
) -> crate::call::Outcome {
    let result = registry.call_with(&name, arguments, &approver, &context).await;
    // The GIL only for an exception: a result needs none here.
    match result {
        Ok(result) if approver.denied() && result.is_error == Some(true) => {
            let text = result.texts().next().unwrap_or_default().to_owned();
            Err(Python::attach(|py| denied(py, text)))
        }
        Ok(result) => Ok(result),
        Err(error) => Err(Python::attach(|py| to_py(py, &error))),
    }
}
