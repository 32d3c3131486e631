//! Compiled plugins and their instances, of either flavour: what the
//! plugin layer above sees of the runtime.

use std::sync::Arc;

use serde_json::Value;
use toolhost_protocol::JsonObject;

use super::builtin::{BuiltinInstance, BuiltinModule};
#[cfg(feature = "component")]
use super::component::{ComponentInstance, ComponentModule};
use super::extism::{Export, ExtismInstance, ExtismModule, Interface};
use super::guest::{HostEnv, RunOptions};
use super::outcome::{CallOutput, RunError, Usage};
use super::output;
use crate::error::Fault;

/// The two flavours of plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PluginKind {
    /// A core Wasm module with the Extism `describe`/`call` interface.
    Extism,
    /// A component of the `toolhost:plugin` world (`wit/plugin.wit`).
    Component,
    /// Tools of the embedding program ([`BuiltinToolset`](crate::BuiltinToolset)).
    Builtin,
}

impl std::fmt::Display for PluginKind {
    /// `extism` or `component`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PluginKind::Extism => "extism",
            PluginKind::Component => "component",
            PluginKind::Builtin => "builtin",
        })
    }
}

impl PluginKind {
    /// Which flavour these bytes are: a component's binary header (layer 1)
    /// or text (`(component`), else a module (which compilation then checks).
    pub(crate) fn of(bytes: &[u8]) -> PluginKind {
        const COMPONENT_HEADER: [u8; 8] = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];
        if bytes.starts_with(&COMPONENT_HEADER) {
            return PluginKind::Component;
        }
        // (Lossy: the cut at 4 KiB may split a character.)
        let head = String::from_utf8_lossy(&bytes[..bytes.len().min(4096)]);
        let text = head.trim_start();
        // Skip leading `;;` line comments of a WAT file.
        let mut rest = text;
        while let Some(comment) = rest.strip_prefix(";;") {
            rest = comment.split_once('\n').map_or("", |(_, after)| after).trim_start();
        }
        if rest.starts_with("(component") { PluginKind::Component } else { PluginKind::Extism }
    }
}

/// A compiled plugin of either flavour, its imports resolved.
pub(crate) enum Module {
    Extism(ExtismModule),
    Builtin(BuiltinModule),
    #[cfg(feature = "component")]
    Component(ComponentModule),
}

/// One instance of either flavour.
pub(crate) enum Instance {
    Extism(ExtismInstance),
    Builtin(BuiltinInstance),
    #[cfg(feature = "component")]
    Component(ComponentInstance),
}

/// What a call sends, encoded for its flavour.
pub(crate) enum Payload {
    /// The `CallToolRequest` as JSON bytes.
    Extism(Vec<u8>),
    /// The tool's name, the arguments as JSON text, and the request's
    /// `_meta` as JSON text (for the `call-meta` import).
    Component { name: String, arguments: String, meta: Option<String> },
    /// The tool's name, the arguments and `_meta`, as they are.
    Builtin { name: String, arguments: JsonObject, meta: Option<JsonObject> },
}

impl Payload {
    /// Bytes sent to the plugin (for the input cap).
    pub(crate) fn len(&self) -> usize {
        match self {
            Payload::Extism(bytes) => bytes.len(),
            Payload::Component { name, arguments, meta } => {
                name.len() + arguments.len() + meta.as_ref().map_or(0, String::len)
            }
            // Not encoded: the input cap guards a guest's memory, which a
            // built-in tool does not have.
            Payload::Builtin { name, .. } => name.len(),
        }
    }
}

impl Module {
    pub(crate) fn kind(&self) -> PluginKind {
        match self {
            Module::Extism(_) => PluginKind::Extism,
            Module::Builtin(_) => PluginKind::Builtin,
            #[cfg(feature = "component")]
            Module::Component(_) => PluginKind::Component,
        }
    }

    /// Whether the plugin may say its tool list changed (it imports
    /// hyper-mcp's `notify_tool_list_changed`).
    pub(crate) fn dynamic_tools(&self) -> bool {
        match self {
            Module::Extism(module) => module.dynamic_tools(),
            _ => false,
        }
    }

    /// Whether the plugin exports `name` (one of the optional exports of
    /// what it offers besides tools; only Extism plugins have them).
    pub(crate) fn exports(&self, name: &str) -> bool {
        match self {
            Module::Extism(module) => module.exports(name),
            #[cfg(feature = "component")]
            Module::Component(module) => module.exports(name),
            Module::Builtin(_) => false,
        }
    }

    /// The interface an Extism plugin speaks (`None` for the others).
    pub(crate) fn interface(&self) -> Option<Interface> {
        match self {
            Module::Extism(module) => Some(module.interface()),
            _ => None,
        }
    }

    pub(crate) async fn instantiate(&self, env: &Arc<HostEnv>) -> Result<Instance, Fault> {
        let instance = match self {
            Module::Extism(module) => module.instantiate(env).await.map(Instance::Extism),
            Module::Builtin(module) => Ok(Instance::Builtin(module.instantiate(env))),
            #[cfg(feature = "component")]
            Module::Component(module) => module.instantiate(env).await.map(Instance::Component),
        };
        instance.map_err(output::short_fault)
    }
}

impl Instance {
    /// Run `describe`; its output as JSON (not yet validated).
    pub(crate) async fn describe(&mut self) -> Result<Value, RunError> {
        let described = match self {
            Instance::Extism(instance) => {
                let max_bytes = instance.max_output_bytes();
                let read = |output: &[u8]| output::parse_json(output, max_bytes, false);
                instance
                    .run(Export::Describe, b"", &RunOptions::default(), read)
                    .await
                    .unwrap_or_else(|fault| Err(RunError::Fault(fault)))
            }
            Instance::Builtin(instance) => instance.describe(),
            #[cfg(feature = "component")]
            Instance::Component(instance) => instance.describe().await,
        };
        described.map_err(output::short_error)
    }

    /// Run `call` as `run` says (the secrets in reach, the caller's
    /// deadline, the log sink); its output (not yet validated).
    pub(crate) async fn call(&mut self, payload: &Payload, run: &RunOptions<'_>) -> Result<CallOutput, RunError> {
        let called = match (&mut *self, payload) {
            (Instance::Extism(instance), Payload::Extism(request)) => {
                let max_bytes = instance.max_output_bytes();
                // Most results are text items: typed as they are read.
                // Anything else is parsed as JSON, for the protocol's schema
                // to check.
                let read = |output: &[u8]| match output::parse_plain_result(output, max_bytes) {
                    Some(result) => Ok(CallOutput::Typed(result)),
                    None => output::parse_json(output, max_bytes, true).map(CallOutput::Json),
                };
                instance.run(Export::Call, request, run, read).await.unwrap_or_else(|fault| Err(RunError::Fault(fault)))
            }
            #[cfg(feature = "component")]
            (Instance::Component(instance), Payload::Component { name, arguments, meta }) => {
                Box::pin(instance.call(name, arguments, meta.as_deref(), run)).await
            }
            (Instance::Builtin(instance), Payload::Builtin { name, arguments, meta }) => {
                instance.call(name, arguments.clone(), meta.clone(), run).await
            }
            _ => Err(RunError::Fault(Fault::new(
                crate::error::FaultKind::Runtime,
                "a call was encoded for the other flavour of plugin".to_owned(),
            ))),
        };
        self.release();
        called.map_err(output::short_error)
    }

    /// Run one of the optional exports (`get_prompt`, `read_resource`...)
    /// with `input`: its output as JSON (not yet checked), or JSON `null`
    /// for an export that returns nothing.
    pub(crate) async fn offer(
        &mut self,
        name: &'static str,
        input: &[u8],
        run: &RunOptions<'_>,
    ) -> Result<Value, RunError> {
        let ran = match &mut *self {
            Instance::Extism(instance) => {
                let max_bytes = instance.max_output_bytes();
                let read = |output: &[u8]| match output {
                    [] => Ok(Value::Null),
                    output => output::parse_json(output, max_bytes, false),
                };
                instance
                    .run(Export::Offer(name), input, run, read)
                    .await
                    .unwrap_or_else(|fault| Err(RunError::Fault(fault)))
            }
            #[cfg(feature = "component")]
            Instance::Component(instance) => instance.offer(name, input, run).await,
            Instance::Builtin(_) => Err(RunError::Fault(Fault::new(
                crate::error::FaultKind::Error,
                format!("built-in tools offer no `{name}`"),
            ))),
        };
        self.release();
        ran.map_err(output::short_error)
    }

    /// Let go of what the last run's caller lent it (its client, log sink,
    /// progress token, `_meta`): an idle instance holds nothing of a call.
    fn release(&mut self) {
        match self {
            Instance::Extism(instance) => instance.release(),
            Instance::Builtin(_) => {}
            #[cfg(feature = "component")]
            Instance::Component(instance) => instance.release(),
        }
    }

    /// Whether its code was compiled for `engine`.
    pub(crate) fn runs_on(&self, engine: &wasmtime::Engine) -> bool {
        match self {
            Instance::Extism(instance) => wasmtime::Engine::same(instance.engine(), engine),
            Instance::Builtin(_) => false,
            #[cfg(feature = "component")]
            Instance::Component(instance) => wasmtime::Engine::same(instance.engine(), engine),
        }
    }

    /// Bytes held against the memory limit.
    pub(crate) fn memory_used(&self) -> usize {
        match self {
            Instance::Extism(instance) => instance.memory_used(),
            Instance::Builtin(_) => 0,
            #[cfg(feature = "component")]
            Instance::Component(instance) => instance.memory_used(),
        }
    }

    /// What the last run used.
    pub(crate) fn usage(&self) -> Usage {
        match self {
            Instance::Extism(instance) => instance.usage(),
            Instance::Builtin(instance) => instance.usage(),
            #[cfg(feature = "component")]
            Instance::Component(instance) => instance.usage(),
        }
    }
}
