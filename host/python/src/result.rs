//! What calls and listings give Python: a tool's description
//! ([`ToolInfo`]) and a call's result ([`CallResult`]).

use pyo3::prelude::*;
use pyo3::types::PyList;
use toolhost::{CallToolResult, RegisteredTool, Tool};

/// A tool as callers see it.
#[pyclass(frozen, module = "toolhost", name = "ToolInfo")]
pub(crate) struct ToolInfo {
    /// As MCP describes it, under the name callers use.
    tool: Tool,
    toolset: Option<String>,
    requires_approval: bool,
}

impl ToolInfo {
    /// A registry's tool, under its namespaced name.
    pub(crate) fn of(registered: &RegisteredTool) -> Self {
        ToolInfo {
            tool: registered.exposed(),
            toolset: Some(registered.toolset.clone()),
            requires_approval: registered.requires_approval,
        }
    }

    /// A plugin's tool, under its own name.
    pub(crate) fn of_plugin(tool: &Tool) -> Self {
        ToolInfo { tool: tool.clone(), toolset: None, requires_approval: false }
    }
}

#[pymethods]
impl ToolInfo {
    /// The name to call it by (`<toolset>__<tool>` in a registry).
    #[getter]
    fn name(&self) -> &str {
        &self.tool.name
    }

    /// The toolset it belongs to (`None` for a plugin loaded on its own).
    #[getter]
    fn toolset(&self) -> Option<&str> {
        self.toolset.as_deref()
    }

    /// Its human-readable title, if it has one.
    #[getter]
    fn title(&self) -> Option<&str> {
        self.tool.title.as_deref()
    }

    /// What it does.
    #[getter]
    fn description(&self) -> Option<&str> {
        self.tool.description.as_deref()
    }

    /// The JSON Schema of its arguments.
    #[getter]
    fn input_schema<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(pythonize::pythonize(py, &self.tool.input_schema)?)
    }

    /// The JSON Schema of its structured result, if it declares one.
    #[getter]
    fn output_schema<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(pythonize::pythonize(py, &self.tool.output_schema)?)
    }

    /// Its behaviour hints (`readOnlyHint`, `destructiveHint`, ...), a dict.
    #[getter]
    fn annotations<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(pythonize::pythonize(py, &self.tool.annotations)?)
    }

    /// Whether a call goes to the approval hook first.
    #[getter]
    fn requires_approval(&self) -> bool {
        self.requires_approval
    }

    /// As MCP's `Tool`, a dict.
    fn mcp<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(pythonize::pythonize(py, &self.tool)?)
    }

    /// In the OpenAI tool format: `{"type": "function", "function": {...}}`.
    fn openai<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(pythonize::pythonize(py, &toolhost::ModelTool::of(&self.tool).openai())?)
    }

    /// In the Anthropic tool format: `{"name", "description", "input_schema"}`.
    fn anthropic<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(pythonize::pythonize(py, &toolhost::ModelTool::of(&self.tool).anthropic())?)
    }

    fn __repr__(&self) -> String {
        format!("<toolhost.ToolInfo {}>", self.tool.name)
    }
}

/// A call's result: content items, structured content, whether it is an
/// error the model should read.
#[pyclass(frozen, module = "toolhost", name = "CallResult")]
pub(crate) struct CallResult {
    pub(crate) inner: CallToolResult,
}

#[pymethods]
impl CallResult {
    /// Whether the tool reports a failure (its content says what).
    #[getter]
    fn is_error(&self) -> bool {
        self.inner.is_error == Some(true)
    }

    /// The text items' texts, one per line: what most agents show a model.
    #[getter]
    fn text(&self) -> String {
        self.inner.texts().collect::<Vec<_>>().join("\n")
    }

    /// The content items, each a typed object of `toolhost` (`TextContent`,
    /// `ImageContent`, `AudioContent`, `ResourceLink`, `EmbeddedResource`).
    #[getter]
    fn content<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let make = py.import("toolhost._content")?.getattr("content_item")?;
        let items = self
            .inner
            .content
            .iter()
            .map(|item| make.call1((pythonize::pythonize(py, item)?,)))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }

    /// The structured result (a dict), if the tool gave one.
    #[getter]
    fn structured_content<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(pythonize::pythonize(py, &self.inner.structured_content)?)
    }

    /// The result's `_meta`, if any.
    #[getter]
    fn meta<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(pythonize::pythonize(py, &self.inner.meta)?)
    }

    /// As MCP's `CallToolResult`, a dict.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(pythonize::pythonize(py, &self.inner)?)
    }

    fn __repr__(&self) -> String {
        let text = self.text();
        let shown: String = text.chars().take(60).collect();
        let more = if shown.len() < text.len() { "..." } else { "" };
        let is_error = if self.is_error() { "True" } else { "False" };
        format!("<toolhost.CallResult is_error={is_error} text={shown:?}{more}>")
    }
}

/// `ToolInfo`s of tools, for listings.
pub(crate) fn infos(py: Python<'_>, tools: impl IntoIterator<Item = ToolInfo>) -> PyResult<Bound<'_, PyList>> {
    let items = tools.into_iter().map(|info| Bound::new(py, info)).collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, items)
}
