//! Loading a plugin and calling its tools.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use serde_json::Value;
use toolhost_protocol::{CallToolRequest, CallToolResult, JsonObject, ListToolsResult, Tool};

use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use crate::approval::{self, Approver};
use crate::context::{CallContext, USER_ID_META_KEY};
use crate::error::{Error, Fault, FaultKind, LoadProblem, MissingSecretReason, Operation, OutputProblem, Violation};
use crate::filter::ToolApprovals;
use crate::host_fn::HostFunction;
use crate::pool::{Place, Pool};
use crate::runtime::builtin::BuiltinModule;
#[cfg(feature = "cache")]
use crate::runtime::cache::ModuleCache;
use crate::runtime::compile::{CacheStatus, CompileInfo, Compiled};
#[cfg(feature = "component")]
use crate::runtime::component::ComponentModule;
use crate::runtime::extism::user;
use crate::runtime::extism::{ExtismModule, Interface, NotAPlugin};
use crate::runtime::guest::{HostEnv, RunOptions, ToolSecrets};
use crate::runtime::instance::{Instance, Module, Payload, PluginKind};
use crate::runtime::kernel;
use crate::runtime::outcome::{CallOutput, RunError};
use crate::runtime::{Compilers, EngineKind, Engines, Runtime, Tier};
use crate::sandbox::{Limits, PathGrant, Policy};
use crate::secrets::{NoSecrets, Redacted, Redactor, SecretOutput, SecretProvider, SensitiveValues};
use crate::telemetry::{CallTrace, Meter};
use crate::tool::RegisteredTool;
use crate::validate::{self, CheckedTool, ValidationOptions, protocol_violation};

mod builder;
mod call;
mod checks;
mod compile;
mod offers;
pub(crate) mod protected;
mod sources;
mod tiers;

pub use builder::PluginBuilder;
use builder::*;
use call::*;
pub(crate) use call::{Arguments, Asking};
use checks::*;
use compile::*;

pub use offers::Offers;
use tiers::Code;

///
/// Cheap to clone (an `Arc`); clones share the compiled module and the pool.
/// Calls from several tasks run in parallel, each on its own instance.
#[derive(Clone)]
pub struct Plugin {
    inner: Arc<Inner>,
}

struct Inner {
    /// The runtime the plugin runs on.
    runtime: Runtime,
    name: String,
    /// The compiled plugin every instance is made from.
    module: Arc<Code>,
    /// What call instances are given: config, secrets, grants, limits.
    env: Arc<HostEnv>,
    /// Keeps the handed secrets and the config's secret values out of
    /// results and errors.
    redactor: Arc<Redactor>,
    /// Per tool (in `checked`'s order): the secrets its calls may read.
    tool_secrets: Vec<ToolSecrets>,
    /// Secrets a tool declares that were not handed over, and why.
    missing_secrets: std::collections::BTreeMap<String, MissingSecretReason>,
    secret_output: SecretOutput,
    described: ListToolsResult,
    checked: Vec<CheckedTool>,
    warnings: Vec<LoadProblem>,
    /// Each tool's place in `described.tools`, by name: looked up on
    /// every call (twice, with an approval rule), so hashed with foldhash
    /// (seeded per process), not SipHash, which took 330 instructions a
    /// call. Names that collided would slow only the lookups of their own
    /// plugin's tools.
    index: HashMap<String, usize, foldhash::fast::RandomState>,
    validation: ValidationOptions,
    /// Ready instances (shared with the plugin as it describes itself
    /// again).
    pool: Arc<Pool<Instance>>,
    compiled: CompileInfo,
    /// Ticks when the plugin says its tool list changed.
    changes: Arc<tokio::sync::watch::Sender<u64>>,
    /// How it was built, to describe it again.
    builder: PluginBuilder,
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("name", &self.inner.name)
            .field("tools", &self.inner.index.len())
            .finish_non_exhaustive()
    }
}

impl Plugin {
    /// Load a plugin from a `.wasm` file with default settings.
    pub async fn load(path: impl AsRef<Path>) -> Result<Plugin, Error> {
        Self::builder_from_file(path).build().await
    }

    /// Configure a plugin loaded from a `.wasm` file, on the
    /// [shared runtime](Runtime::shared).
    pub fn builder_from_file(path: impl AsRef<Path>) -> PluginBuilder {
        Runtime::shared().plugin_from_file(path)
    }

    /// Configure a plugin loaded from Wasm bytes, on the
    /// [shared runtime](Runtime::shared).
    pub fn builder_from_bytes(wasm: impl Into<Arc<[u8]>>) -> PluginBuilder {
        Runtime::shared().plugin_from_bytes(wasm)
    }

    /// The runtime the plugin runs on.
    pub fn runtime(&self) -> &Runtime {
        &self.inner.runtime
    }

    /// The plugin's name, as used in errors.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Who signed the plugin, when it came from a source whose signature
    /// was verified (`server.verify` of a toolsets file); else `None`.
    pub fn signer(&self) -> Option<&crate::Signer> {
        self.inner.builder.signer.as_ref()
    }

    /// Whether the plugin is an Extism module or a component.
    pub fn kind(&self) -> PluginKind {
        self.inner.module.kind()
    }

    /// The tools the plugin described at load, in its order.
    pub fn tools(&self) -> &[Tool] {
        &self.inner.described.tools
    }

    /// The full `describe` output, as the plugin returned it.
    pub fn describe(&self) -> &ListToolsResult {
        &self.inner.described
    }

    /// Run the plugin's `describe` export again, on a pooled instance, and
    /// check its output as at load. The tool list [`describe`](Self::describe)
    /// returns is the one read at load; this is for checking that a plugin
    /// still describes itself the same way (and for measuring `describe`).
    pub async fn describe_again(&self) -> Result<ListToolsResult, Error> {
        let inner = &self.inner;
        let outcome =
            match inner.run(Job::Describe, None).await.map_err(|e| run_error(&inner.name, Operation::Describe, e)) {
                Ok(Ran::Describe(mut raw)) => {
                    match inner.redactor.redact_json(&mut raw, inner.env.limits.max_output_bytes) {
                        Ok(_) => check_described_off_executor(&inner.name, raw, &inner.validation)
                            .await
                            .map(|(described, _)| described),
                        Err(found) => Err(Error::InvalidOutput {
                            plugin: inner.name.clone(),
                            operation: Operation::Describe,
                            problem: OutputProblem::SecretLeak { secrets: found },
                        }),
                    }
                }
                Ok(_) => Err(Error::Host("another export ran instead of `describe`".to_owned())),
                Err(error) => Err(error),
            };
        outcome.map_err(|error| inner.scrub(error))
    }

    /// A receiver that sees a new value each time the plugin says its tool
    /// list changed (hyper-mcp's `notify_tool_list_changed`). The plugin's
    /// [`tools`](Self::tools) stay those it was loaded with: read the new
    /// list with [`redescribed`](Self::redescribed). A
    /// [`Registry`](crate::Registry) does both by itself and tells its
    /// subscribers.
    pub fn tool_list_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.changes.subscribe()
    }

    /// Whether the plugin may say its tool list changed (it imports
    /// `notify_tool_list_changed`). Such a plugin keeps its state in its
    /// instance, so it has one instance: calls to it take turns.
    pub fn has_dynamic_tools(&self) -> bool {
        self.inner.module.dynamic_tools()
    }

    /// The plugin as it describes itself now: `describe` (`list_tools`)
    /// run again on its instances, the output checked as at load, the
    /// secrets of its tools looked up as at load. It shares this plugin's
    /// compiled module and, when its grants come out the same, its
    /// instances (so a plugin that keeps its tool list in memory keeps it).
    pub async fn redescribed(&self) -> Result<Plugin, Error> {
        let inner = &self.inner;
        let raw = match inner.run(Job::Describe, None).await {
            Ok(Ran::Describe(raw)) => raw,
            Ok(_) => return Err(Error::Host("another export ran instead of `describe`".to_owned())),
            Err(error) => return Err(inner.scrub(run_error(&inner.name, Operation::Describe, error))),
        };
        let base = Arc::new(HostEnv {
            secrets: Default::default(),
            keyring: Default::default(),
            redactor: Arc::new(Redactor::new(&inner.builder.sensitive)),
            ..HostEnv::clone(&inner.env)
        });
        let raw = redacted_output(&inner.name, Operation::Describe, raw, &inner.env)?;
        let reuse = Reuse::Pool(Arc::clone(&inner.env), Arc::clone(&inner.pool));
        inner
            .builder
            .clone()
            .assemble(inner.name.clone(), Arc::clone(&inner.module), inner.compiled.clone(), raw, base, reuse)
            .await
    }

    /// The tool of that name, if the plugin describes one.
    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.inner.index.get(name).map(|&i| &self.inner.described.tools[i])
    }

    /// The stable id of a tool: `namespace:name[:version]` when the tool
    /// declares a namespace, else its name.
    pub fn tool_id(&self, name: &str) -> Option<&str> {
        self.inner.index.get(name).map(|&i| self.inner.checked[i].id.as_str())
    }

    /// Problems of tools that were left out in lenient mode (empty otherwise).
    pub fn warnings(&self) -> &[LoadProblem] {
        &self.inner.warnings
    }

    /// The limits every call runs under.
    pub fn limits(&self) -> &Limits {
        &self.inner.env.limits
    }

    /// How the plugin's compiled module was obtained (compiled, or loaded
    /// from the compiled-module cache) and how long that took.
    pub fn compile_info(&self) -> &CompileInfo {
        &self.inner.compiled
    }

    /// The compiler whose code new instances run now: [`Tier::Baseline`]
    /// while Cranelift compiles a plugin that missed the cache in the
    /// background ([`Compilers::Tiered`](crate::Compilers::Tiered)),
    /// else [`Tier::Optimized`].
    pub fn tier(&self) -> Tier {
        self.inner.module.tier()
    }

    /// Wait until the plugin's background compile is over (at once when
    /// there is none) and say the tier it runs on from now on:
    /// [`Tier::Optimized`], or [`Tier::Baseline`] if Cranelift failed
    /// (logged). Its entry is then in the compiled-module cache. For a
    /// benchmark that must measure Cranelift's code, or a program that
    /// would rather wait.
    pub async fn settled_tier(&self) -> Tier {
        self.inner.module.settled_tier().await
    }

    /// Start instances now, until `instances` are ready (at most the pool
    /// size), so the first calls do not pay for instantiation. Returns how
    /// many instances are ready.
    pub async fn prewarm(&self, instances: usize) -> Result<usize, Error> {
        let inner = &self.inner;
        let wanted = instances.min(inner.pool.size());
        // Hold every instance taken until there are enough, so none is
        // counted twice; then give them all back, idle.
        let mut held = Vec::with_capacity(wanted);
        while held.len() < wanted {
            held.push(inner.checkout().await.map_err(|fault| Error::PluginFailed {
                plugin: inner.name.clone(),
                operation: Operation::Instantiate,
                fault,
            })?);
        }
        for (place, instance) in held {
            inner.pool.give_back(place, instance);
        }
        Ok(inner.pool.counts().0)
    }

    /// The instance pool now: its size, how many instances are idle and
    /// busy, and the memory the idle ones hold.
    pub fn pool_stats(&self) -> PoolStats {
        let pool = &self.inner.pool;
        let (idle, live) = pool.counts();
        PoolStats {
            size: pool.size(),
            idle,
            busy: live.saturating_sub(idle),
            idle_memory_bytes: pool.idle_sum(Instance::memory_used),
            idle_on_baseline: pool.idle_sum(|instance| usize::from(self.inner.module.on_baseline(instance))),
        }
    }
}

/// A snapshot of a plugin's instance pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolStats {
    /// Instances the plugin may have at once.
    pub size: usize,
    /// Ready instances.
    pub idle: usize,
    /// Instances running a call now.
    pub busy: usize,
    /// Bytes the idle instances hold against their memory limits (linear
    /// memories and Extism kernel memory; not wasmtime's own bookkeeping).
    pub idle_memory_bytes: usize,
    /// Of the idle instances, those running the baseline compiler's code
    /// ([`Tier`]).
    pub idle_on_baseline: usize,
}

/// The JSON Schema name of a value's type.
pub(crate) fn json_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest component there is, as text.
    const EMPTY_COMPONENT: &str = "(component)";

    /// The size of the future `make` returns, without running it.
    fn future_size<'a, F: Future>(_make: impl FnOnce(&'a Plugin, &'a CallContext) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    /// Every call moves its future (into a task, through `block_on`, into
    /// each layer that awaits it), so a call's future stays small. A future
    /// passed by value into an `async fn` is held twice (as the argument and
    /// as what is awaited): two such layers made the call's state 7.4 KB,
    /// copied on every call (`memmove` was a tenth of a call's profile).
    #[test]
    fn a_call_moves_little() {
        let call = future_size(|plugin, _| plugin.call_tool("add", Value::Null));
        let state = future_size(|plugin, context| {
            plugin.call_in_place(("p", "add"), "add", Arguments::Check(Value::Null), Asking::Nobody, context)
        });
        assert!(call <= 512, "a call's future is {call} bytes");
        assert!(state <= 2048, "a call's boxed state is {state} bytes");
    }

    /// A call cancelled before it starts never runs; one cancelled while it
    /// waits stops with the reason of the token that fired, the caller's
    /// first; one that finishes is not looked at again.
    #[tokio::test]
    async fn a_cancellable_call_stops_for_the_token_that_fired() {
        let ran = std::sync::atomic::AtomicBool::new(false);
        let work = || {
            Box::pin(async {
                ran.store(true, std::sync::atomic::Ordering::SeqCst);
                std::future::pending::<Result<(), Error>>().await
            })
        };
        let reason = |outcome: Result<(), Error>| match outcome {
            Err(Error::Cancelled { reason, .. }) => reason,
            other => panic!("not cancelled: {other:?}"),
        };
        let (caller, runtime) = (CancellationToken::new(), CancellationToken::new());
        caller.cancel();
        let outcome = Cancellable::new(work(), Some(&caller), &runtime, "p", "t").await;
        assert_eq!(reason(outcome), "its caller cancelled it");
        assert!(!ran.load(std::sync::atomic::Ordering::SeqCst), "a call cancelled before it began ran");

        for (by_caller, expected) in [(true, "its caller cancelled it"), (false, "the runtime shut down")] {
            let (caller, runtime) = (CancellationToken::new(), CancellationToken::new());
            let fire = async {
                tokio::task::yield_now().await;
                if by_caller { caller.cancel() } else { runtime.cancel() }
            };
            let (outcome, ()) = tokio::join!(Cancellable::new(work(), Some(&caller), &runtime, "p", "t"), fire);
            assert_eq!(reason(outcome), expected);
            assert!(ran.swap(false, std::sync::atomic::Ordering::SeqCst));
        }

        let runtime = CancellationToken::new();
        let done = Cancellable::new(Box::pin(async { Ok::<_, Error>(7) }), None, &runtime, "p", "t").await;
        assert_eq!(done.expect("finished"), 7);
    }

    #[test]
    fn a_call_is_encoded_as_its_request_type_serialises() {
        let arguments = serde_json::json!({"a": 2, "b": "\"x\"", "c": {"d": [null]}, "long": "0123456789".repeat(100)});
        let Value::Object(arguments) = arguments else { unreachable!() };
        let meta = serde_json::json!({"progressToken": 7, "k": "v"});
        let Value::Object(meta) = meta else { unreachable!() };
        for (name, meta) in [("add", None), ("weird \"name\"\n", Some(&meta))] {
            let mut request = CallToolRequest::new(name, Some(arguments.clone()));
            request.params.meta = meta.cloned();
            assert_eq!(encode_call(name, &arguments, meta), serde_json::to_vec(&request).expect("serialise"), "{name}");
            assert_eq!(encode_object(&arguments), serde_json::to_string(&arguments).expect("serialise"));
        }
    }

    #[cfg(not(feature = "component"))]
    #[tokio::test]
    async fn without_the_component_feature_a_component_is_refused_saying_why() {
        let error = Runtime::new().plugin_from_bytes(EMPTY_COMPONENT.as_bytes()).build().await.unwrap_err();
        assert!(matches!(error, Error::Load { .. }), "{error:?}");
        assert!(error.to_string().contains("without its `component` feature"), "{error}");
    }

    #[cfg(feature = "component")]
    #[tokio::test]
    async fn with_the_component_feature_a_component_is_compiled() {
        // It compiles, and is then refused for what it lacks (the world's
        // exports), not for being a component.
        let error = Runtime::new().plugin_from_bytes(EMPTY_COMPONENT.as_bytes()).build().await.unwrap_err();
        assert!(!error.to_string().contains("`component` feature"), "{error}");
        assert!(error.to_string().contains("`toolhost:plugin`") || error.to_string().contains("export"), "{error}");
    }
}
