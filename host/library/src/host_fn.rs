//! Host functions the embedding program supplies to Extism plugins: the
//! `extism:host/user` imports (Extism's `Function` / `with_function`).
//!
//! A plugin built with an Extism plugin kit declares them as
//!
//! ```rust,ignore
//! #[host_fn]
//! extern "ExtismHost" {
//!     fn lookup(key: String) -> String;
//! }
//! ```
//!
//! and passes each argument as a memory handle (an `i64`). toolhost gives
//! the function the bytes of each block and returns its answer as a new
//! block. The function is the embedder's code, but what it is given is the
//! plugin's: treat the bytes as hostile input. It runs on the call's task,
//! within the call's deadline (a slow function is stopped with the call),
//! and its answer counts against the instance's memory limit.

use std::sync::Arc;

use crate::secrets::BoxFuture;

type Handler = dyn Fn(HostCall) -> BoxFuture<'static, Result<Vec<u8>, String>> + Send + Sync;

/// A host function for plugins to import from `extism:host/user`.
///
/// ```
/// # async fn demo() -> Result<(), toolhost::Error> {
/// use toolhost::HostFunction;
/// let upper = HostFunction::new("to_upper", 1, |call| async move {
///     let text = std::str::from_utf8(call.input(0)).map_err(|e| e.to_string())?;
///     Ok(text.to_uppercase().into_bytes())
/// });
/// # let _ = upper; Ok(()) }
/// ```
#[derive(Clone)]
pub struct HostFunction {
    name: Arc<str>,
    inputs: usize,
    handler: Arc<Handler>,
}

impl std::fmt::Debug for HostFunction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostFunction").field("name", &self.name).field("inputs", &self.inputs).finish_non_exhaustive()
    }
}

impl HostFunction {
    /// The function `name`, taking `inputs` memory handles (its Wasm type
    /// is `(param i64 × inputs) (result i64)`, or no result when the plugin
    /// ignores the answer). `handler` gets their bytes and returns the
    /// answer's bytes, or an error message: the call then fails with the
    /// message as the plugin's fault.
    pub fn new<F, Fut>(name: impl Into<String>, inputs: usize, handler: F) -> Self
    where
        F: Fn(HostCall) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Vec<u8>, String>> + Send + 'static,
    {
        let name: String = name.into();
        HostFunction { name: name.into(), inputs, handler: Arc::new(move |call| Box::pin(handler(call))) }
    }

    /// A host function of JSON: one input, parsed as JSON (a plugin's bytes
    /// that are not JSON fail the call), the answer serialized.
    pub fn json<F, Fut>(name: impl Into<String>, handler: F) -> Self
    where
        F: Fn(String, serde_json::Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<serde_json::Value, String>> + Send + 'static,
    {
        let handler = Arc::new(handler);
        Self::new(name, 1, move |call: HostCall| {
            let handler = Arc::clone(&handler);
            async move {
                // Within the calling plugin's output bound, as every JSON a
                // plugin hands the host.
                let input = crate::runtime::output::parse_value(call.input(0), call.max_json_bytes)
                    .map_err(|problem| format!("its input is not usable: {problem}"))?;
                let answer = handler(call.plugin, input).await?;
                serde_json::to_vec(&answer).map_err(|e| format!("its answer cannot be serialized ({e})"))
            }
        })
    }

    /// The name plugins import it by.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How many memory handles it takes.
    pub fn inputs(&self) -> usize {
        self.inputs
    }

    pub(crate) fn run(&self, call: HostCall) -> BoxFuture<'static, Result<Vec<u8>, String>> {
        (self.handler)(call)
    }
}

/// One call of a [`HostFunction`]: the plugin that made it and the bytes it
/// passed.
#[derive(Debug)]
#[non_exhaustive]
pub struct HostCall {
    /// The calling plugin's name.
    pub plugin: String,
    /// The bytes of each handle passed, in order.
    pub inputs: Vec<Vec<u8>>,
    /// How much of the host a JSON input may take once parsed (the
    /// plugin's output limit).
    max_json_bytes: usize,
}

impl HostCall {
    pub(crate) fn new(plugin: String, inputs: Vec<Vec<u8>>, max_json_bytes: usize) -> Self {
        HostCall { plugin, inputs, max_json_bytes }
    }

    /// The bytes of input `i` (empty when there is no such input).
    pub fn input(&self, i: usize) -> &[u8] {
        self.inputs.get(i).map_or(&[], Vec::as_slice)
    }
}
