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

mod offers;
pub(crate) mod protected;
mod sources;
mod tiers;

pub use offers::Offers;
use tiers::Code;

/// Where a plugin's Wasm comes from.
#[derive(Debug, Clone)]
enum Source {
    File(PathBuf),
    Bytes(Arc<[u8]>),
    /// Not Wasm: tools of the embedding program.
    Builtin(Arc<crate::builtin::BuiltinToolset>),
}

/// Configures and loads a [`Plugin`].
///
/// ```no_run
/// # async fn demo() -> Result<(), toolhost::Error> {
/// use std::time::Duration;
/// let plugin = toolhost::Plugin::builder_from_file("target/plugins/calculator.wasm")
///     .with_timeout(Duration::from_secs(5))
///     .build()
///     .await?;
/// let result = plugin.call_tool("add", serde_json::json!({"a": 2, "b": 3})).await?;
/// assert_eq!(result.texts().next(), Some("5"));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct PluginBuilder {
    runtime: Runtime,
    source: Source,
    name: Option<String>,
    policy: Policy,
    validation: ValidationOptions,
    secrets: Arc<dyn SecretProvider>,
    granted: BTreeSet<String>,
    sensitive: SensitiveValues,
    secret_output: SecretOutput,
    pool_size: usize,
    #[cfg(feature = "cache")]
    cache: Option<ModuleCache>,
    host_functions: Vec<HostFunction>,
    keyring: Vec<KeyringGrant>,
    protected: Vec<protected::Protected>,
}

/// A keyring entry granted to a plugin: hyper-mcp's `get_keyring_secret`
/// of (`service`, `user`) answers the secret `secret`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct KeyringGrant {
    service: String,
    user: String,
    secret: String,
}

impl std::fmt::Debug for PluginBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut f = f.debug_struct("PluginBuilder");
        #[cfg(feature = "cache")]
        f.field("cache", &self.cache);
        f.field("source", &self.source)
            .field("name", &self.name)
            .field("policy", &self.policy)
            .field("validation", &self.validation)
            .field("secrets", &self.secrets.describe())
            .field("granted", &self.granted)
            .field("sensitive", &self.sensitive)
            .field("secret_output", &self.secret_output)
            .field("pool_size", &self.pool_size)
            .field("host_functions", &self.host_functions)
            .field("keyring", &self.keyring)
            .field("protected", &self.protected)
            .finish_non_exhaustive()
    }
}

impl PluginBuilder {
    pub(crate) fn from_file(runtime: Runtime, path: &Path) -> Self {
        Self::new(runtime, Source::File(path.to_path_buf()))
    }

    pub(crate) fn from_bytes(runtime: Runtime, wasm: Arc<[u8]>) -> Self {
        Self::new(runtime, Source::Bytes(wasm))
    }

    pub(crate) fn from_builtin(runtime: Runtime, toolset: Arc<crate::builtin::BuiltinToolset>) -> Self {
        Self::new(runtime, Source::Builtin(toolset))
    }

    fn new(runtime: Runtime, source: Source) -> Self {
        let policy = Policy::default().with_limits(runtime.default_limits().clone());
        PluginBuilder {
            runtime,
            source,
            name: None,
            policy,
            validation: ValidationOptions::default(),
            secrets: Arc::new(NoSecrets),
            granted: BTreeSet::new(),
            sensitive: SensitiveValues::new(),
            secret_output: SecretOutput::default(),
            pool_size: crate::pool::cores(),
            #[cfg(feature = "cache")]
            cache: None,
            host_functions: Vec::new(),
            keyring: Vec::new(),
            protected: Vec::new(),
        }
    }

    /// How strictly to validate the plugin's tools, arguments and results.
    pub fn with_validation(mut self, validation: ValidationOptions) -> Self {
        self.validation = validation;
        self
    }

    /// Where the values of granted secrets come from (by default nowhere).
    ///
    /// A provider alone hands nothing over: a secret reaches the plugin only
    /// when it is granted ([`grant_secret`](Self::grant_secret)) *and* one of
    /// its tools declares it (`requirements.secrets`), and then only during
    /// calls of the tools that declare it, as a config value keyed by the
    /// secret's id. The plugin never chooses what it gets: a declared secret
    /// that was not granted is reported missing, and the provider is never
    /// asked for it.
    pub fn with_secret_provider(mut self, secrets: Arc<dyn SecretProvider>) -> Self {
        self.secrets = secrets;
        self
    }

    /// Grant the secret `name`: the tools that declare it may have it.
    pub fn grant_secret(mut self, name: impl Into<String>) -> Self {
        self.granted.insert(name.into());
        self
    }

    /// Grant several secrets at once (see [`grant_secret`](Self::grant_secret)).
    pub fn with_granted_secrets<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.granted.extend(names.into_iter().map(Into::into));
        self
    }

    /// Values the plugin gets some other way than as a declared secret (a
    /// config value read from a secret store, say) that must never leave it:
    /// they are redacted from its results, errors and log lines as handed
    /// secrets are.
    pub fn with_sensitive_values(mut self, values: SensitiveValues) -> Self {
        for (name, value) in values.pairs() {
            self.sensitive.push(name, value);
        }
        self
    }

    /// What to do with a result that contains a secret handed to the plugin:
    /// redact it (the default) or refuse the result.
    pub fn with_secret_output(mut self, policy: SecretOutput) -> Self {
        self.secret_output = policy;
        self
    }

    /// Everything the plugin is granted, and its limits, at once.
    pub fn with_policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// A config value the plugin can read through Extism's config mechanism.
    pub fn with_config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.policy.config.insert(key.into(), value.into());
        self
    }

    /// Make a host directory visible to the plugin.
    pub fn with_allowed_path(mut self, grant: PathGrant) -> Self {
        self.policy.allowed_paths.push(grant);
        self
    }

    /// Refuse to load the plugin if one of its read-write directory grants
    /// holds `path`: a file or directory of the program that the plugin must
    /// not change (its configuration, say). `what` says what it is, in the
    /// error: "the toolsets file this plugin is configured in".
    ///
    /// The compiled-module caches the plugin is loaded through are always
    /// protected so: their machine code runs outside the sandbox. A
    /// [`Registry`](crate::Registry) protects the toolsets file and the
    /// other toolsets' plugin files. Paths are compared with symbolic links
    /// resolved; a read-only grant may hold them.
    pub fn with_protected_path(mut self, path: impl Into<PathBuf>, what: impl Into<String>) -> Self {
        self.protected.push(protected::Protected { path: path.into(), what: what.into(), unreadable: false });
        self
    }

    /// Let the plugin send HTTP requests to hosts matching this pattern
    /// (`api.example.com`, `*.example.com`), at the public addresses they
    /// resolve to ([`Policy::allowed_hosts`](crate::Policy::allowed_hosts)).
    pub fn with_allowed_host(mut self, pattern: impl Into<String>) -> Self {
        self.policy.allowed_hosts.push(pattern.into());
        self
    }

    /// The name used in errors and logs. Defaults to the file's stem, or
    /// `plugin` for bytes.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// All limits at once.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.policy.limits = limits;
        self
    }

    /// Wall-clock limit per call; `None` for none.
    pub fn with_timeout(mut self, timeout: impl Into<Option<Duration>>) -> Self {
        self.policy.limits.timeout = timeout.into();
        self
    }

    /// Memory cap per instance in bytes; `None` for none.
    pub fn with_memory_max_bytes(mut self, bytes: impl Into<Option<u64>>) -> Self {
        self.policy.limits.memory_max_bytes = bytes.into();
        self
    }

    /// Instruction (fuel) budget per call; `None` for none.
    pub fn with_fuel_limit(mut self, fuel: impl Into<Option<u64>>) -> Self {
        self.policy.limits.fuel = fuel.into();
        self
    }

    /// How many instances the plugin may have at once: calls beyond that
    /// wait for one to come free. Instances are made when first needed and
    /// kept between calls. Defaults to the number of cores.
    pub fn with_pool_size(mut self, n: usize) -> Self {
        self.pool_size = n;
        self
    }

    /// The same as [`with_pool_size`](Self::with_pool_size) (its earlier
    /// name).
    pub fn with_max_idle_instances(self, n: usize) -> Self {
        self.with_pool_size(n)
    }

    /// Where compiled modules are cached between processes. Defaults to
    /// the runtime's cache ([`Runtime::module_cache`]; none for
    /// [`Runtime::shared`]).
    #[cfg(feature = "cache")]
    #[cfg_attr(docsrs, doc(cfg(feature = "cache")))]
    pub fn with_module_cache(mut self, cache: ModuleCache) -> Self {
        self.cache = Some(cache);
        self
    }

    /// Grant a keyring entry: a plugin that asks for (`service`, `user`)
    /// with hyper-mcp's `get_keyring_secret` gets the value of the secret
    /// `secret` from the [secret provider](Self::with_secret_provider),
    /// during its tool calls (never during `describe`). The grant is the
    /// whole permission: an entry not granted is answered empty, and the
    /// provider is never asked for it. The value is redacted from the
    /// plugin's results, errors and logs like any handed secret.
    pub fn grant_keyring_entry(
        mut self,
        service: impl Into<String>,
        user: impl Into<String>,
        secret: impl Into<String>,
    ) -> Self {
        self.keyring.push(KeyringGrant { service: service.into(), user: user.into(), secret: secret.into() });
        self
    }

    /// Grant several keyring entries at once (a toolset's `keyring:`; see
    /// [`grant_keyring_entry`](Self::grant_keyring_entry)).
    pub fn with_keyring_entries(mut self, entries: impl IntoIterator<Item = crate::KeyringEntry>) -> Self {
        for entry in entries {
            self = self.grant_keyring_entry(entry.service, entry.user, entry.secret);
        }
        self
    }

    /// Supply a host function the plugin may import from
    /// `extism:host/user` ([`HostFunction`]). A plugin that imports one the
    /// host does not supply, or with another type, is refused at load.
    /// (Extism plugins only: a component's imports are its WIT world's.)
    pub fn with_host_function(mut self, function: HostFunction) -> Self {
        self.host_functions.retain(|f| f.name() != function.name());
        self.host_functions.push(function);
        self
    }

    /// Compile the plugin (or load it from the compiled-module cache), call
    /// `describe` and keep its tools.
    ///
    /// Reading and compiling run on a blocking thread, never on a tokio
    /// worker; `describe` runs as every call does.
    pub async fn build(self) -> Result<Plugin, Error> {
        let name = match (&self.name, &self.source) {
            (Some(name), _) => name.clone(),
            (None, Source::File(path)) => {
                let stem = path.file_stem().map_or_else(|| "plugin".to_owned(), |s| s.to_string_lossy().into_owned());
                // `calculator.component.wasm` is the component build of `calculator`.
                stem.strip_suffix(".component").filter(|s| !s.is_empty()).map(str::to_owned).unwrap_or(stem)
            }
            (None, Source::Bytes(_)) => "plugin".to_owned(),
            (None, Source::Builtin(toolset)) => toolset.id.clone(),
        };
        crate::telemetry::traced_load(&name.clone(), self.build_named(name)).await
    }

    /// Refuse a grant that holds a protected path: a read-write one that
    /// holds a compiled-module cache this load goes through, or what the
    /// program protected ([`with_protected_path`](Self::with_protected_path));
    /// any that holds where the secret provider reads secrets from
    /// ([`SecretProvider::files`]).
    fn check_grants(&self) -> Result<(), crate::error::PolicyError> {
        if self.policy.allowed_paths.is_empty() {
            return Ok(());
        }
        let secrets = self.secrets.files().into_iter().map(|path| protected::Protected {
            path,
            what: "where secrets are read from (the plugin would read every secret there, granted or not)".to_owned(),
            unreadable: true,
        });
        #[cfg(feature = "cache")]
        let caches: Vec<&Path> = [self.cache.as_ref(), Some(self.runtime.module_cache())]
            .into_iter()
            .flatten()
            .filter_map(ModuleCache::dir)
            .collect();
        #[cfg(not(feature = "cache"))]
        let caches: Vec<&Path> = Vec::new();
        let protected: Vec<protected::Protected> = (caches.into_iter().map(protected::Protected::module_cache))
            .chain(secrets)
            .chain(self.protected.iter().cloned())
            .collect();
        protected::check(&self.policy.allowed_paths, &protected)
    }

    /// [`build`](Self::build), the plugin's name settled.
    async fn build_named(self, name: String) -> Result<Plugin, Error> {
        self.runtime.check_open(&name)?;
        self.policy.check().map_err(|source| Error::Policy { plugin: name.clone(), source })?;
        self.check_grants().map_err(|source| Error::Policy { plugin: name.clone(), source })?;
        let kind = if self.policy.limits.fuel.is_some() { EngineKind::Fuel } else { EngineKind::Plain };
        let engines =
            self.runtime.engines(kind).map_err(|e| Error::Host(format!("cannot create the Wasm engine: {e}")))?;
        // (The engine is made even for built-in tools: it starts the
        // runtime's ticker, which keeps every call's deadline.)
        let engine = engines.engine.clone();
        if let Source::Builtin(toolset) = &self.source {
            let module =
                Arc::new(Code::settled(Module::Builtin(BuiltinModule::new(Arc::clone(toolset))), Tier::Optimized));
            let compiled =
                CompileInfo { cache: CacheStatus::Disabled, elapsed: std::time::Duration::ZERO, tier: Tier::Optimized };
            return self.described(name, module, compiled).await;
        }
        #[cfg(feature = "cache")]
        let cache = self.cache.clone().unwrap_or_else(|| self.runtime.module_cache().clone());
        #[cfg(not(feature = "cache"))]
        let cache = NoCache;
        // The kernel belongs to the runtime: it goes in the runtime's cache,
        // whichever cache this plugin was given.
        #[cfg(feature = "cache")]
        let kernel_cache = self.runtime.module_cache().clone();
        #[cfg(not(feature = "cache"))]
        let kernel_cache = NoCache;
        let compilers = self.runtime.compilers();
        // A warm load finds its module on this thread: see `cached`.
        let hit = if tokio::runtime::Handle::current().runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread {
            let (runtime, kernel_cache) = (&self.runtime, &kernel_cache);
            tokio::task::block_in_place(|| {
                let found = cached(&self.source, &cache, &engine, compilers)?;
                // (A kernel that cannot be made: the lookup below says why.)
                let kernel = found.compiled.module().is_none()
                    || ready_kernel(runtime, kind, found.info.tier, kernel_cache).is_ok();
                kernel.then_some(found)
            })
        } else {
            None
        };
        let found = match hit {
            Some(found) => found,
            None => {
                let (source, loading, runtime) = (self.source.clone(), name.clone(), self.runtime.clone());
                let (cache, kernel_cache) = (cache.clone(), kernel_cache.clone());
                let lookup = tokio::task::spawn_blocking(move || {
                    // Made only when a plugin is compiled on it: a cache hit
                    // needs no second engine.
                    let baseline = || runtime.baseline_engines(kind).map(|engines| &engines.engine);
                    // On a miss, the baseline compiler's kernel (when it is not
                    // cached either) compiles beside the plugin, not after it.
                    let kernel = || drop(ready_kernel(&runtime, kind, Tier::Baseline, &kernel_cache));
                    let found = compile(&loading, &source, &cache, &engine, (compilers, &baseline), &kernel)?;
                    if found.compiled.module().is_some() {
                        ready_kernel(&runtime, kind, found.info.tier, &kernel_cache)?;
                    }
                    Ok::<_, Error>(found)
                });
                lookup.await.map_err(|e| Error::Host(format!("the loading thread failed: {e}")))??
            }
        };
        let Found { compiled: module, info: mut compiled, wasm, flavour } = found;
        let tier = compiled.tier;
        tracing::debug!(plugin = %name, cache = %compiled.cache, elapsed = ?compiled.elapsed, %tier, "compiled module ready");
        let engines = self.runtime.tier_engines(kind, tier).map_err(Error::Host)?;
        let module = module_from(&name, module, engines, &self.host_functions)?;
        let (code, background) = match wasm {
            Some(wasm) => {
                let optimize = {
                    let (name, runtime, host_functions) =
                        (name.clone(), self.runtime.clone(), self.host_functions.clone());
                    // Cranelift's compile (or the cache's entry, if another
                    // load wrote it meanwhile), as a miss without the
                    // baseline compiler would have done it.
                    move || {
                        let engines = runtime.engines(kind).map_err(Error::Host)?;
                        let (compiled, info) = cache
                            .load_or_compile(&engines.engine, &wasm, flavour)
                            .map_err(|e| compile_error(&name, flavour, e))?;
                        ready_kernel(&runtime, kind, Tier::Optimized, &kernel_cache)?;
                        Ok::<_, Error>((module_from(&name, compiled, engines, &host_functions)?, info))
                    }
                };
                if module.dynamic_tools() {
                    // Its tool list lives in its one instance, which must
                    // not be replaced: it waits for Cranelift.
                    let (module, info) = tokio::task::spawn_blocking(optimize)
                        .await
                        .map_err(|e| Error::Host(format!("the loading thread failed: {e}")))??;
                    compiled = info;
                    (Arc::new(Code::settled(module, Tier::Optimized)), None)
                } else {
                    (Arc::new(Code::baseline(module, engines.engine.clone())), Some(optimize))
                }
            }
            None => (Arc::new(Code::settled(module, tier)), None),
        };
        let runtime = self.runtime.clone();
        let plugin = self.described(name.clone(), Arc::clone(&code), compiled).await?;
        // Cranelift compiles once the load is done, so that the load's own
        // work (`describe`, its checks) has the cores first; a plugin whose
        // load failed costs no second compile.
        if let Some(optimize) = background {
            let settling = tiers::Settling(Arc::downgrade(&code));
            drop(code);
            let counted = runtime.background_compile();
            tokio::task::spawn_blocking(move || {
                let _counted = counted;
                let optimized = optimize();
                // (A plugin dropped meanwhile still had its entry written
                // to the cache.)
                let Some(code) = settling.0.upgrade() else { return };
                match optimized {
                    Ok((module, info)) => {
                        tracing::debug!(plugin = %name, cache = %info.cache, elapsed = ?info.elapsed, "Cranelift's code is ready");
                        code.upgrade(module);
                    }
                    Err(error) => {
                        tracing::warn!(plugin = %name, "Cranelift cannot compile it ({error}); it stays on the baseline compiler's code");
                    }
                }
            });
        }
        Ok(plugin)
    }

    /// [`build`](Self::build), the module ready: call `describe`, check
    /// what it says and keep the tools.
    async fn described(self, name: String, module: Arc<Code>, compiled: CompileInfo) -> Result<Plugin, Error> {
        let load_error = |message: String| Error::Load { plugin: name.clone(), message, source: None };
        let describe_env = Arc::new(HostEnv {
            name: name.clone(),
            config: self.policy.config.clone(),
            secrets: Default::default(),
            redactor: Arc::new(Redactor::new(&self.sensitive)),
            allowed_hosts: self.policy.allowed_hosts.clone(),
            allowed_paths: self.policy.allowed_paths.clone(),
            limits: self.policy.limits.clone(),
            ticker: self.runtime.ticker().clone(),
            keyring: Default::default(),
            changes: Arc::new(tokio::sync::watch::channel(0).0),
        });
        // `describe` runs with no secret in reach, but the config may hold
        // secret values: what it says is redacted like any output.
        let redact_error = |mut error: Error| {
            describe_env.redactor.redact_error(&mut error);
            error
        };
        let mut instance = module
            .instantiate(&describe_env)
            .await
            .map_err(|fault| redact_error(load_error(format!("it cannot be started: {fault}"))))?;
        let raw = instance.describe().await.map_err(|e| redact_error(run_error(&name, Operation::Describe, e)))?;
        let raw = redacted_output(&name, Operation::Describe, raw, &describe_env)?;
        let reuse = Reuse::Fresh(instance);
        self.assemble(name, module, compiled, raw, describe_env, reuse).await
    }

    /// The plugin from its checked `describe` output: the secrets its
    /// tools may have looked up, its pool made (or, when it described
    /// itself again, kept).
    async fn assemble(
        self,
        name: String,
        module: Arc<Code>,
        compiled: CompileInfo,
        raw: Value,
        describe_env: Arc<HostEnv>,
        reuse: Reuse,
    ) -> Result<Plugin, Error> {
        let redact_error = |mut error: Error| {
            describe_env.redactor.redact_error(&mut error);
            error
        };
        let (described, checked) =
            check_described_off_executor(&name, raw, &self.validation).await.map_err(redact_error)?;
        for warning in &checked.problems {
            tracing::warn!(plugin = %name, "{}", warning.as_warning());
        }
        let index = described.tools.iter().enumerate().map(|(i, tool)| (tool.name.clone(), i)).collect();

        // A secret is handed over when it is granted and declared, and
        // then only to the calls of the tools that declare it. The plugin's
        // declaration alone gets it nothing: the provider is not even asked.
        // `describe` ran without any.
        let mut secrets = std::collections::BTreeMap::new();
        let mut missing_secrets = std::collections::BTreeMap::new();
        let declared: BTreeSet<&str> =
            checked.tools.iter().flat_map(|t| t.requirements.secrets.iter().map(|s| s.id.as_str())).collect();
        for id in declared {
            if !self.granted.contains(id) {
                missing_secrets.insert(id.to_owned(), MissingSecretReason::NotGranted);
                continue;
            }
            match self.secrets.secret(id).await {
                Ok(Some(value)) => {
                    crate::log_secrets::remember_secret(id, &value);
                    secrets.insert(id.to_owned(), value);
                }
                Ok(None) => {
                    missing_secrets.insert(id.to_owned(), MissingSecretReason::NotAvailable);
                }
                Err(error) => {
                    tracing::warn!(plugin = %name, secret = id, "cannot look the secret up: {error}");
                    missing_secrets.insert(id.to_owned(), MissingSecretReason::NotAvailable);
                }
            }
        }
        // Granted keyring entries (hyper-mcp's `get_keyring_secret`): the
        // grant alone hands them over, to tool calls.
        let mut keyring = std::collections::BTreeMap::new();
        for grant in &self.keyring {
            match self.secrets.secret(&grant.secret).await {
                Ok(Some(value)) => {
                    crate::log_secrets::remember_secret(&grant.secret, &value);
                    keyring.insert((grant.service.clone(), grant.user.clone()), value);
                }
                Ok(None) => {
                    tracing::warn!(plugin = %name, secret = %grant.secret, "the secret of a granted keyring entry is not available")
                }
                Err(error) => {
                    tracing::warn!(plugin = %name, secret = %grant.secret, "cannot look the secret up: {error}")
                }
            }
        }
        let tool_secrets: Vec<ToolSecrets> = checked
            .tools
            .iter()
            .map(|t| {
                t.requirements
                    .secrets
                    .iter()
                    .map(|s| s.id.clone())
                    .filter(|id| secrets.contains_key(id))
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect()
            })
            .collect();
        let env = if secrets.is_empty() && keyring.is_empty() {
            describe_env
        } else {
            let mut sensitive = self.sensitive.clone();
            for (id, value) in &secrets {
                sensitive.push(id.clone(), value.clone());
            }
            for ((service, user), value) in &keyring {
                sensitive.push(format!("keyring {service}/{user}"), value.clone());
            }
            Arc::new(HostEnv {
                secrets,
                keyring,
                redactor: Arc::new(Redactor::new(&sensitive)),
                ..HostEnv::clone(&describe_env)
            })
        };

        // A plugin that says its tool list changes keeps its state in its
        // instance: it gets one, so every call and listing sees the same.
        let dynamic = module.dynamic_tools();
        let pool_size = if dynamic { 1 } else { self.pool_size.max(1) };
        let (env, pool, fresh) = match reuse {
            Reuse::Fresh(instance) => (env, Arc::new(Pool::new(pool_size)), Some(instance)),
            // Described again: the same grants keep the same instances.
            Reuse::Pool(old_env, pool) if old_env.secrets == env.secrets && old_env.keyring == env.keyring => {
                (old_env, pool, None)
            }
            Reuse::Pool(..) => (env, Arc::new(Pool::new(pool_size)), None),
        };
        let changes = Arc::clone(&env.changes);
        let inner = Inner {
            runtime: self.runtime.clone(),
            name,
            module,
            redactor: Arc::clone(&env.redactor),
            env,
            tool_secrets,
            missing_secrets,
            secret_output: self.secret_output,
            described,
            checked: checked.tools,
            warnings: checked.problems,
            index,
            validation: self.validation.clone(),
            pool,
            compiled,
            changes,
            builder: self,
        };
        // The describe instance is a healthy call instance unless the calls
        // get secrets it was made without.
        if let Some(instance) = fresh
            && inner.env.secrets.is_empty()
            && inner.env.keyring.is_empty()
        {
            // The pool is new: this is its first place, with no idle instance.
            let (place, _) = inner.pool.take().await;
            inner.pool.give_back(place, instance);
        }
        Ok(Plugin { inner: Arc::new(inner) })
    }
}

/// How [`PluginBuilder::assemble`] gets its instances.
enum Reuse {
    /// A new plugin: a new pool, starting with the instance that ran
    /// `describe`.
    Fresh(Instance),
    /// Described again: the plugin's environment and pool, kept if the
    /// grants come out the same.
    Pool(Arc<HostEnv>, Arc<Pool<Instance>>),
}

/// What a plugin's `operation` returned (its `describe` output, what it
/// offers besides tools) with the plugin's secret values redacted; past
/// the output cap, the plugin's fault.
fn redacted_output(name: &str, operation: Operation, mut raw: Value, env: &HostEnv) -> Result<Value, Error> {
    match env.redactor.redact_json(&mut raw, env.limits.max_output_bytes) {
        Ok(found) if found.is_empty() => Ok(raw),
        Ok(found) => {
            tracing::warn!(plugin = %name, secrets = ?found, "{operation} quoted secret values; redacted");
            Ok(raw)
        }
        Err(found) => Err(Error::PluginFailed {
            plugin: name.to_owned(),
            operation,
            fault: Fault::new(
                FaultKind::OutputTooLarge,
                format!("redacting secret {} would take the output past the limit", found.join(", ")),
            ),
        }),
    }
}

/// A `describe` output, checked: the tool list (tools with problems left
/// out in lenient mode, fields other than `tools` kept) and the checked
/// tools, or the problems that refuse the plugin.
fn check_described(
    name: &str,
    raw: Value,
    validation: &ValidationOptions,
) -> Result<(ListToolsResult, validate::CheckedDescribe), Error> {
    let (raw, shape) = validate::one_tool_shape(raw);
    let mut checked = validate::check_describe(&raw, validation);
    if !checked.problems.is_empty() && (checked.fatal || !validation.lenient) {
        return Err(Error::InvalidPlugin { plugin: name.to_owned(), problems: checked.problems });
    }
    checked.problems.splice(0..0, shape);
    let mut extra = match raw {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    };
    extra.remove("tools");
    let described = ListToolsResult { tools: checked.tools.iter().map(|t| t.tool.clone()).collect(), extra };
    Ok((described, checked))
}

/// [`check_described`] on a blocking thread: compiling and bounding a
/// plugin's schemas is work the plugin chooses the size of.
async fn check_described_off_executor(
    name: &str,
    raw: Value,
    validation: &ValidationOptions,
) -> Result<(ListToolsResult, validate::CheckedDescribe), Error> {
    let (name, validation) = (name.to_owned(), validation.clone());
    off_executor(move || check_described(&name, raw, &validation)).await
}

/// Run a validation on a blocking thread, so that however long it takes it
/// holds no async worker: other calls, other plugins and the server go on.
async fn off_executor<T: Send + 'static>(job: impl FnOnce() -> Result<T, Error> + Send + 'static) -> Result<T, Error> {
    tokio::task::spawn_blocking(job).await.map_err(|e| Error::Host(format!("the validating thread failed: {e}")))?
}

/// Subschema evaluations a validation may cost on the async executor (well
/// under a millisecond); a costlier one runs on a blocking thread.
const INLINE_EVALUATIONS: u64 = 20_000;
/// Subschema evaluations one validation may cost at all (the schema's
/// bound per place times the instance's places): past this, the instance
/// is refused rather than checked for seconds.
const MAX_CALL_EVALUATIONS: u64 = 100_000_000;
// What is cheap is within the budget: a check found cheap is not weighed again.
const _: () = assert!(INLINE_EVALUATIONS <= MAX_CALL_EVALUATIONS);

/// Whether checking `instance` against a schema of `cost` per place is
/// cheap enough for the async executor (`text`: the schema may read its
/// strings' bytes, [`validate::Schema::reads_text`]). Looks at no more of
/// the instance than that takes.
fn cheap(instance: &Value, cost: u64, text: bool) -> bool {
    validate::cost::fits(instance, cost, text, INLINE_EVALUATIONS)
}

/// Fields a result may have, its own and its content items' together,
/// for its plain shape to be taken on the async executor
/// ([`validate::plain`]: a few lookups per item, and each field moved into
/// the result).
const INLINE_PLAIN_FIELDS: usize = 1_000;

/// Whether an instance was weighed already, and found [`cheap`] (then it
/// is [`within_budget`] too, and is not weighed again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Weighed {
    /// Found cheap by [`cheap`].
    Cheap,
    /// Not weighed yet.
    No,
}

/// Refuse an instance whose check could cost more than
/// [`MAX_CALL_EVALUATIONS`].
fn within_budget(instance: &Value, cost: u64, text: bool) -> Result<(), Violation> {
    if validate::cost::fits(instance, cost, text, MAX_CALL_EVALUATIONS) {
        return Ok(());
    }
    Err(Violation {
        instance_path: String::new(),
        keyword: "validationBudget".to_owned(),
        message: format!(
            "checking it against the schema could take more than {MAX_CALL_EVALUATIONS} subschema evaluations; toolhost refuses it unchecked"
        ),
    })
}

/// A failed run as the library's error.
fn run_error(plugin: &str, operation: Operation, error: RunError) -> Error {
    match error {
        RunError::Fault(fault) => Error::PluginFailed { plugin: plugin.to_owned(), operation, fault },
        RunError::Output(problem) => Error::InvalidOutput { plugin: plugin.to_owned(), operation, problem },
    }
}

/// The compiled-module cache loads go through.
#[cfg(feature = "cache")]
type Cache = ModuleCache;
#[cfg(not(feature = "cache"))]
type Cache = NoCache;

/// Without the `cache` feature: every load compiles.
#[cfg(not(feature = "cache"))]
#[derive(Clone)]
struct NoCache;

#[cfg(not(feature = "cache"))]
impl NoCache {
    fn load_or_compile(
        &self,
        engine: &wasmtime::Engine,
        wasm: &[u8],
        kind: PluginKind,
    ) -> wasmtime::Result<(Compiled, CompileInfo)> {
        Compiled::compile_uncached(engine, wasm, kind)
    }

    fn find(
        &self,
        _engine: &wasmtime::Engine,
        _wasm: &[u8],
        _kind: PluginKind,
    ) -> Result<(Compiled, CompileInfo), CacheStatus> {
        Err(CacheStatus::Disabled)
    }

    fn compile_baseline(
        &self,
        engine: &wasmtime::Engine,
        wasm: &[u8],
        kind: PluginKind,
    ) -> wasmtime::Result<(Compiled, bool)> {
        Ok((Compiled::compile(engine, wasm, kind)?, true))
    }
}

/// What a load's lookup found.
struct Found {
    compiled: Compiled,
    /// How it was obtained, and which compiler made it.
    info: CompileInfo,
    /// On the baseline: the Wasm, for Cranelift to compile next.
    wasm: Option<Arc<[u8]>>,
    flavour: PluginKind,
}

/// The cache's entry for a plugin, if it has one the load can use as it
/// is (the default tiered compilers; not an Extism plugin that changes its
/// tool list, which waits for Cranelift), or `None` (a miss, an error:
/// [`compile`] then does the whole lookup, and reports what went wrong).
///
/// A load on a multi-threaded runtime runs this on its own thread, through
/// `block_in_place`, not on a blocking thread as [`compile`] is: a hit
/// takes under a millisecond, and in warm starts of `serve` on two cores
/// the blocking pool's new thread began a median of 1.0 ms after it was
/// asked for (40 starts; placed behind the runtime's schema compile on the
/// other core). tokio hands the worker's other tasks to another thread
/// meanwhile; only futures joined with the load in its own task wait for
/// the hit. (A current-thread runtime cannot block in place: its loads
/// take the blocking thread.)
fn cached(source: &Source, cache: &Cache, engine: &wasmtime::Engine, compilers: Compilers) -> Option<Found> {
    if compilers != Compilers::Tiered {
        return None;
    }
    let wasm = wasm_of(source).ok()?;
    let flavour = flavour_of("", &wasm).ok()?;
    if !takes_hit_at_once(compilers, flavour, &wasm) {
        return None;
    }
    let (compiled, info) = cache.find(engine, &wasm, flavour).ok()?;
    Some(Found { compiled, info, wasm: None, flavour })
}

/// A plugin's Wasm: read from its file, or as it was given.
fn wasm_of(source: &Source) -> Result<std::borrow::Cow<'_, [u8]>, Error> {
    match source {
        Source::File(path) => {
            std::fs::read(path).map(Into::into).map_err(|source| Error::Read { path: path.clone(), source })
        }
        Source::Bytes(bytes) => Ok(std::borrow::Cow::Borrowed(bytes)),
        Source::Builtin(_) => Err(Error::Host("a built-in toolset has no Wasm to compile".to_owned())),
    }
}

/// Which flavour of plugin `wasm` is, if this build can run it.
fn flavour_of(name: &str, wasm: &[u8]) -> Result<PluginKind, Error> {
    let flavour = PluginKind::of(wasm);
    if cfg!(not(feature = "component")) && flavour == PluginKind::Component {
        return Err(Error::Load {
            plugin: name.to_owned(),
            message: "it is a Wasm component, and this toolhost was built without its `component` feature".to_owned(),
            source: None,
        });
    }
    Ok(flavour)
}

/// Whether a load takes its cache entry as it is, before anything is
/// compiled: with the tiered compilers, unless it is an Extism plugin that
/// changes its tool list ([`imports_tool_list_changes`]).
fn takes_hit_at_once(compilers: Compilers, flavour: PluginKind, wasm: &[u8]) -> bool {
    compilers == Compilers::Tiered && !(flavour == PluginKind::Extism && imports_tool_list_changes(wasm))
}

/// Read and compile (or load from the cache) a plugin: an Extism module or
/// a component, told apart by its first bytes. With [`Compilers::Tiered`],
/// a plugin not in the cache is compiled by the baseline compiler and
/// Cranelift's compile is left to the caller; with [`Compilers::Baseline`],
/// the baseline compiler's module is what the cache keeps. The baseline
/// compiler's engine is asked of `baseline` when it is needed (`None`: it
/// cannot run here, and Cranelift compiles). A module the baseline compiler
/// cannot compile is Cranelift's either way. `baseline_kernel` readies the
/// baseline engine's Extism kernel: run beside the baseline compile of an
/// Extism plugin.
fn compile<'e>(
    name: &str,
    source: &Source,
    cache: &Cache,
    engine: &wasmtime::Engine,
    (compilers, baseline): (Compilers, &dyn Fn() -> Option<&'e wasmtime::Engine>),
    baseline_kernel: &(dyn Fn() + Sync),
) -> Result<Found, Error> {
    let wasm = wasm_of(source)?;
    let wasm: &[u8] = &wasm;
    let flavour = flavour_of(name, wasm)?;
    let optimized = |(compiled, info)| Found { compiled, info, wasm: None, flavour };
    if compilers == Compilers::Baseline
        && let Some(baseline) = baseline()
    {
        match cache.load_or_compile(baseline, wasm, flavour) {
            Ok((compiled, info)) => {
                let info = CompileInfo { tier: Tier::Baseline, ..info };
                return Ok(Found { compiled, info, wasm: None, flavour });
            }
            Err(error) => {
                tracing::debug!(
                    plugin = name,
                    "the baseline compiler cannot compile it ({error}); compiling with Cranelift"
                );
            }
        }
    } else if takes_hit_at_once(compilers, flavour, wasm)
        // A hit is the load's at once; a miss goes to the baseline
        // compiler, if it runs here (else Cranelift compiles, below).
        && let status = match cache.find(engine, wasm, flavour) {
            Ok(hit) => return Ok(optimized(hit)),
            Err(status) => status,
        }
        && let Some(baseline) = baseline()
    {
        let started = std::time::Instant::now();
        // An Extism plugin runs with the kernel of its engine: made
        // meanwhile on a thread of its own (its errors are the load's
        // to report, when it asks for the kernel again; without a thread,
        // the kernel is made after the plugin, as the load asks for it).
        let compiled = std::thread::scope(|scope| {
            let kernel = (flavour == PluginKind::Extism)
                .then(|| {
                    std::thread::Builder::new()
                        .name("toolhost-kernel".to_owned())
                        .spawn_scoped(scope, baseline_kernel)
                        .ok()
                })
                .flatten();
            let compiled = cache.compile_baseline(baseline, wasm, flavour);
            drop(kernel.map(|kernel| kernel.join()));
            compiled
        });
        match compiled {
            Ok((compiled, here)) => {
                let cache = if here { status } else { CacheStatus::Hit };
                return Ok(Found {
                    compiled,
                    info: CompileInfo { cache, elapsed: started.elapsed(), tier: Tier::Baseline },
                    wasm: Some(Arc::from(wasm)),
                    flavour,
                });
            }
            // (Cranelift says what is wrong with a module that is invalid.)
            Err(error) => {
                tracing::debug!(
                    plugin = name,
                    "the baseline compiler cannot compile it ({error}); waiting for Cranelift"
                );
            }
        }
    }
    let compiled = cache.load_or_compile(engine, wasm, flavour).map_err(|e| compile_error(name, flavour, e))?;
    Ok(optimized(compiled))
}

/// Whether an Extism module imports hyper-mcp's `notify_tool_list_changed`,
/// read from its import section before anything is compiled: such a plugin
/// keeps its tool list in its one instance, which a move from Winch's code
/// to Cranelift's would replace, so it is compiled by Cranelift at once.
/// (Bytes that are not a binary module say no; compiling them says what
/// they are.)
fn imports_tool_list_changes(wasm: &[u8]) -> bool {
    for payload in wasmparser::Parser::new(0).parse_all(wasm) {
        match payload {
            Ok(wasmparser::Payload::ImportSection(imports)) => {
                return imports.into_imports().any(|import| {
                    import.is_ok_and(|i| i.module == user::USER && i.name == user::NOTIFY_TOOL_LIST_CHANGED)
                });
            }
            Ok(wasmparser::Payload::CodeSectionStart { .. }) | Err(_) => return false,
            Ok(_) => {}
        }
    }
    false
}

fn compile_error(name: &str, flavour: PluginKind, e: wasmtime::Error) -> Error {
    Error::Load {
        plugin: name.to_owned(),
        message: match flavour {
            PluginKind::Component => format!("it is not a valid Wasm component ({e})"),
            _ => format!("it is not a valid Wasm module ({e})"),
        },
        source: Some(e.into_boxed_dyn_error()),
    }
}

/// Make the Extism kernel's Wasm half on the engines of `kind` and `tier`,
/// once per engine, through the runtime's cache (an entry per compiler).
fn ready_kernel(runtime: &Runtime, kind: EngineKind, tier: Tier, cache: &Cache) -> Result<(), Error> {
    runtime
        .tier_engines(kind, tier)
        .map_err(Error::Host)?
        .extism_kernel(|engine| {
            let (compiled, info) = cache
                .load_or_compile(engine, kernel::wat().as_bytes(), PluginKind::Extism)
                .map_err(|e| e.to_string())?;
            tracing::debug!(cache = %info.cache, elapsed = ?info.elapsed, %tier, "the Extism kernel is ready");
            compiled.module().cloned().ok_or_else(|| "it is not a core module".to_owned())
        })
        .map_err(Error::Host)?;
    Ok(())
}

/// The plugin's module, its imports resolved against `engines`' linker (and
/// the kernel [`ready_kernel`] made).
fn module_from(
    name: &str,
    compiled: Compiled,
    engines: &Engines,
    host_functions: &[HostFunction],
) -> Result<Module, Error> {
    let load_error = |message: String| Error::Load { plugin: name.to_owned(), message, source: None };
    Ok(match compiled {
        Compiled::Module(module, mapping) => {
            let linker = engines.extism_linker().map_err(|e| Error::Host(e.to_string()))?;
            let kernel = engines
                .extism_kernel(|_| Err("it was not compiled when the plugin was".to_owned()))
                .map_err(Error::Host)?;
            Module::Extism(
                ExtismModule::new(linker, kernel, module, host_functions)
                    .map_err(|NotAPlugin(message)| load_error(message))?
                    .keeping(mapping),
            )
        }
        #[cfg(feature = "component")]
        Compiled::Component(component, mapping) => {
            let linker = engines.component_linker().map_err(|e| Error::Host(e.to_string()))?;
            Module::Component(ComponentModule::new(linker, component).map_err(load_error)?.keeping(mapping))
        }
    })
}

/// A loaded plugin: its tools, and a pool of instances to call them on.
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
    index: HashMap<String, usize>,
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

    /// Call a tool.
    ///
    /// `arguments` must be a JSON object, or `null` for none (the same as
    /// `{}`). A tool the plugin does not describe is refused before the plugin
    /// runs. A tool error is `Ok` with `isError: true`; everything else that
    /// goes wrong is a typed [`Error`].
    ///
    /// The guest runs on an instance of its own, taken from the plugin's pool
    /// (waiting for one if all are busy); an instance that faults is
    /// discarded. It runs on the calling task, in slices of at most one epoch
    /// tick (1 ms) between which it yields to the executor: it never holds a
    /// tokio worker for long, and no thread hand-off is paid per call.
    ///
    /// Dropping the returned future (a cancelled request, a `select!` that
    /// went the other way) stops the guest at once: its instance is
    /// discarded.
    pub async fn call_tool(&self, name: &str, arguments: Value) -> Result<CallToolResult, Error> {
        self.call(name, Arguments::Check(arguments), Asking::Nobody, &CallContext::default()).await
    }

    /// Call a tool as [`call_tool`](Self::call_tool) does, in a context:
    /// the caller's deadline, cancellation token, call id, user id, `_meta`
    /// and log sink ([`CallContext`]).
    pub async fn call_tool_with(
        &self,
        name: &str,
        arguments: Value,
        context: &CallContext,
    ) -> Result<CallToolResult, Error> {
        self.call(name, Arguments::Check(arguments), Asking::Nobody, context).await
    }

    /// Call a tool with arguments that are *not* checked against its
    /// `inputSchema`: the plugin gets them as they are. The result is checked
    /// as [`call_tool`](Self::call_tool) checks it.
    ///
    /// This is for testing how a plugin copes with bad input (as
    /// `toolhost check` does): a plugin must answer arguments it cannot use
    /// with a tool error, not a crash, since not every host validates them.
    pub async fn call_tool_unvalidated(&self, name: &str, arguments: JsonObject) -> Result<CallToolResult, Error> {
        self.call(name, Arguments::Unchecked(arguments), Asking::Nobody, &CallContext::default()).await
    }

    /// Every call: counted by the runtime (refused once it is shutting
    /// down), in a `toolhost.call` span (named by `label`, the tool's name
    /// by default) and reported to the runtime's observer; its arguments
    /// checked, approval asked, the guest run; stopped when the caller or
    /// the runtime cancels it.
    pub(crate) async fn call(
        &self,
        name: &str,
        arguments: Arguments,
        asking: Asking<'_>,
        context: &CallContext,
    ) -> Result<CallToolResult, Error> {
        self.call_labelled((&self.inner.name, name), name, arguments, asking, context).await
    }

    /// [`call`](Self::call), the span naming the call `label` (toolset and
    /// namespaced name, for a registry).
    pub(crate) async fn call_labelled(
        &self,
        label: (&str, &str),
        name: &str,
        arguments: Arguments,
        asking: Asking<'_>,
        context: &CallContext,
    ) -> Result<CallToolResult, Error> {
        // The call's state (the guest run, the checks, the span) lives on
        // the heap from here on, so that moving the caller's future (into a
        // task, through `block_on`) copies a pointer, not it.
        Box::pin(self.call_in_place(label, name, arguments, asking, context)).await
    }

    /// [`call_labelled`](Self::call_labelled)'s work.
    async fn call_in_place(
        &self,
        label: (&str, &str),
        name: &str,
        arguments: Arguments,
        asking: Asking<'_>,
        context: &CallContext,
    ) -> Result<CallToolResult, Error> {
        let inner = &self.inner;
        let meter = Meter::default();
        // What the guest used is measured only for an observer.
        let metered = inner.runtime.observer().is_some().then_some(&meter);
        let trace = CallTrace {
            plugin: label.0,
            tool: label.1,
            call_id: context.call_id(),
            observer: inner.runtime.observer().map(|o| &**o),
            meter: &meter,
        };
        // Boxed: a future passed by value into an `async fn` is held twice
        // in it (as the argument, and as what it awaits), and `traced_call`
        // is such a layer. Unboxed, the call's state was 7.4 KB, copied
        // into place on every call; boxed, the layers around it move a
        // pointer.
        let work = Box::pin(async {
            let index = self.index_of(name)?;
            let arguments = match arguments {
                Arguments::Check(arguments) => self.checked_arguments(index, name, arguments).await?,
                Arguments::Unchecked(arguments) => arguments,
            };
            if let Some(denied) = asking.ask(self, name, &arguments).await {
                return Ok(denied);
            }
            self.run_call(index, name, arguments, context, metered).await
        });
        let work = Cancellable::new(work, context.cancellation(), inner.runtime.cancellation(), &inner.name, name);
        crate::telemetry::traced_call(&trace, async {
            // Counted first: a runtime shut down refuses the call before a
            // cancelled caller's token is looked at.
            let _counted = inner.runtime.enter(&inner.name)?;
            work.await
        })
        .await
    }

    /// Encode the request, run `call` of the tool at `index`, check and
    /// scrub the result. The arguments are not checked here: callers have
    /// done so, or mean not to.
    async fn run_call(
        &self,
        index: usize,
        name: &str,
        arguments: JsonObject,
        context: &CallContext,
        meter: Option<&Meter>,
    ) -> Result<CallToolResult, Error> {
        let request = self.prepare_call(index, name, arguments, context)?;
        let run = RunOptions::for_call(context, Some(&self.inner.tool_secrets[index]));
        let outcome = match self.inner.call_unchecked(name, &request, &run, meter).await {
            Ok(output) => self.checked_output(index, name, output).await,
            Err(error) => Err(error),
        };
        self.inner.scrubbed(name, outcome)
    }

    /// [`validate_arguments`](Self::validate_arguments), on a blocking
    /// thread when the arguments are large for their schema.
    async fn checked_arguments(&self, index: usize, name: &str, arguments: Value) -> Result<JsonObject, Error> {
        let arguments = self.arguments_object(name, arguments)?;
        let schema = &self.inner.checked[index].input;
        if !self.inner.validation.arguments || cheap(&arguments, schema.cost, schema.reads_text) {
            return self.inner.check_arguments(index, name, arguments, Weighed::Cheap);
        }
        let (inner, name) = (Arc::clone(&self.inner), name.to_owned());
        off_executor(move || inner.check_arguments(index, &name, arguments, Weighed::No)).await
    }

    /// A call's output, checked as the options say: on a blocking thread
    /// when it is large for its schemas.
    async fn checked_output(&self, index: usize, tool: &str, output: CallOutput) -> Result<CallToolResult, Error> {
        let inner = &self.inner;
        if !inner.validation.results || inner.output_is_cheap(index, &output) {
            return inner.check_call_output(tool, Some(index), output, Weighed::Cheap);
        }
        let (inner, tool) = (Arc::clone(&self.inner), tool.to_owned());
        off_executor(move || inner.check_call_output(&tool, Some(index), output, Weighed::No)).await
    }

    /// Check arguments for a tool as [`call_tool`](Self::call_tool) does
    /// before the plugin runs, without calling it: the tool must exist, the
    /// arguments must be an object (or `null`) valid against its
    /// `inputSchema`. Returns the arguments as an object.
    pub fn validate_arguments(&self, name: &str, arguments: Value) -> Result<JsonObject, Error> {
        let index = self.index_of(name)?;
        let arguments = self.arguments_object(name, arguments)?;
        self.inner.check_arguments(index, name, arguments, Weighed::No)
    }

    /// The arguments if they are an object (`null` is `{}`).
    fn arguments_object(&self, name: &str, arguments: Value) -> Result<Value, Error> {
        match arguments {
            Value::Null => Ok(Value::Object(JsonObject::new())),
            object @ Value::Object(_) => Ok(object),
            other => Err(self.inner.invalid_arguments(
                name,
                vec![Violation {
                    instance_path: String::new(),
                    keyword: "type".to_owned(),
                    message: format!("arguments must be a JSON object, not {}", json_type_name(&other)),
                }],
            )),
        }
    }

    /// Check a result as [`call_tool`](Self::call_tool) checks what a tool
    /// returns: against the protocol and the tool's `outputSchema`.
    pub fn validate_result(&self, name: &str, result: Value) -> Result<CallToolResult, Error> {
        self.inner.check_output(name, self.inner.index.get(name).copied(), result, Weighed::No)
    }

    /// The secrets a tool declares that were not handed over: not granted,
    /// or not available from the provider. Its calls are refused.
    pub fn missing_secrets(&self, name: &str) -> Vec<&str> {
        self.missing_secret_reasons(name).into_iter().map(|(id, _)| id).collect()
    }

    /// [`missing_secrets`](Self::missing_secrets), each with why it is missing.
    pub fn missing_secret_reasons(&self, name: &str) -> Vec<(&str, MissingSecretReason)> {
        self.inner.index.get(name).map(|&i| self.missing_secrets_at(i).collect()).unwrap_or_default()
    }

    /// The missing secrets of the tool at `index`, with why.
    fn missing_secrets_at(&self, index: usize) -> impl Iterator<Item = (&str, MissingSecretReason)> {
        self.inner.checked[index]
            .requirements
            .secrets
            .iter()
            .filter_map(|s| self.inner.missing_secrets.get_key_value(&s.id))
            .map(|(id, reason)| (id.as_str(), *reason))
    }

    /// The position of a tool the plugin describes, or `UnknownTool`.
    fn index_of(&self, name: &str) -> Result<usize, Error> {
        self.inner.index.get(name).copied().ok_or_else(|| {
            let mut available: Vec<String> = self.inner.index.keys().cloned().collect();
            available.sort();
            Error::UnknownTool { plugin: self.inner.name.clone(), tool: name.to_owned(), available }
        })
    }

    /// Check the tool's secrets, its user id and the request's size, and
    /// encode it: with the caller's `_meta` (toolhost's own keys dropped),
    /// and the user id for a tool that declares it needs one.
    fn prepare_call(
        &self,
        index: usize,
        name: &str,
        arguments: JsonObject,
        context: &CallContext,
    ) -> Result<Payload, Error> {
        if let Some((secret, reason)) = self.missing_secrets_at(index).next() {
            return Err(Error::MissingSecret {
                plugin: self.inner.name.clone(),
                tool: name.to_owned(),
                secret: secret.to_owned(),
                reason,
            });
        }
        let user_id = if self.inner.checked[index].requirements.user_id {
            let Some(user) = context.user_id() else {
                return Err(Error::MissingUserId { plugin: self.inner.name.clone(), tool: name.to_owned() });
            };
            Some(user)
        } else {
            None
        };
        let invalid = |violations| self.inner.invalid_arguments(name, violations);
        let encoding = |e: serde_json::Error| Error::Host(format!("cannot encode the request: {e}"));
        // The `_meta` the plugin sees: the caller's, less the host's keys,
        // and the user id when the tool asks for it.
        // (Borrowed, not copied, unless it changes.)
        let meta = match (context.plugin_meta(), user_id) {
            (meta, None) => meta,
            (meta, Some(user)) => {
                let mut meta = meta.map(std::borrow::Cow::into_owned).unwrap_or_default();
                meta.insert(USER_ID_META_KEY.to_owned(), Value::String(user.to_owned()));
                Some(std::borrow::Cow::Owned(meta))
            }
        };
        let meta = meta.filter(|meta| !meta.is_empty());
        let payload = match self.inner.module.kind() {
            PluginKind::Component => Payload::Component {
                name: name.to_owned(),
                arguments: encode_object(&arguments),
                meta: meta.as_deref().map(encode_object),
            },
            PluginKind::Builtin => {
                Payload::Builtin { name: name.to_owned(), arguments, meta: meta.map(std::borrow::Cow::into_owned) }
            }
            _ if self.inner.module.interface() == Some(Interface::V2) => {
                // hyper-mcp v2: `{"request": params, "context": {"id", "_meta"}}`.
                let meta = meta.map(std::borrow::Cow::into_owned);
                let mut params = CallToolRequest::new(name, Some(arguments)).params;
                params.meta = meta.clone();
                let context = serde_json::json!({
                    "id": context.call_id().unwrap_or("toolhost-call"),
                    "_meta": meta.map(Value::Object).unwrap_or_else(|| Value::Object(JsonObject::new())),
                });
                let input = serde_json::json!({"request": params, "context": context});
                Payload::Extism(serde_json::to_vec(&input).map_err(encoding)?)
            }
            _ => Payload::Extism(encode_call(name, &arguments, meta.as_deref())),
        };
        if payload.len() > self.inner.env.limits.max_input_bytes {
            return Err(invalid(vec![Violation {
                instance_path: String::new(),
                keyword: "maxInputBytes".to_owned(),
                message: format!(
                    "the request is {} bytes, over the limit of {} bytes",
                    payload.len(),
                    self.inner.env.limits.max_input_bytes
                ),
            }]));
        }
        Ok(payload)
    }
}

impl Plugin {
    /// Call a tool as [`call_tool`](Self::call_tool) does, asking
    /// `approver` first when `rules` require approval for it (e.g.
    /// [`ToolApprovals::from_annotations`] for tools that do not say they
    /// are harmless). A denial is an `isError` result naming the reason;
    /// the plugin does not run.
    pub async fn call_tool_approved(
        &self,
        name: &str,
        arguments: Value,
        rules: &ToolApprovals,
        approver: &dyn Approver,
    ) -> Result<CallToolResult, Error> {
        self.call(name, Arguments::Check(arguments), Asking::Rules(rules, approver), &CallContext::default()).await
    }
}

/// A call's arguments, as the caller hands them over.
pub(crate) enum Arguments {
    /// To be checked against the tool's `inputSchema`.
    Check(Value),
    /// Not to be checked.
    Unchecked(JsonObject),
}

/// Whom a call asks for approval, once its arguments are checked.
pub(crate) enum Asking<'a> {
    /// Nobody.
    Nobody,
    /// `approver`, when the rules require approval for the tool.
    Rules(&'a ToolApprovals, &'a dyn Approver),
    /// `approver`, about this registry tool (which requires approval).
    Registered(&'a RegisteredTool, &'a dyn Approver),
}

impl Asking<'_> {
    /// `None` to go on, or the `isError` result of a denial.
    async fn ask(&self, plugin: &Plugin, name: &str, arguments: &JsonObject) -> Option<CallToolResult> {
        match self {
            Asking::Nobody => None,
            // (Boxed, as the rarer paths of a call are.)
            Asking::Registered(tool, approver) => Box::pin(approval::ask(*approver, tool, arguments)).await,
            Asking::Rules(rules, approver) => {
                let tool = plugin.tool(name).filter(|tool| rules.requires_approval(tool))?;
                let registered = RegisteredTool {
                    name: tool.name.clone(),
                    toolset: plugin.name().to_owned(),
                    source: plugin.name().to_owned(),
                    tool: tool.clone(),
                    enabled: true,
                    disabled_reason: None,
                    requires_approval: true,
                    required_scopes: Vec::new(),
                };
                Box::pin(approval::ask(*approver, &registered, arguments)).await
            }
        }
    }
}

/// Run `work` unless the caller's token or the runtime's is cancelled
/// first: then it is dropped (its guest stopped where it is, its instance
/// discarded) and the call is [`Error::Cancelled`]. A call cancelled before
/// it starts does not start. The tokens are waited on only once the work
/// waits: a call that finishes in one poll (most do) builds no waiter.
///
/// Written out rather than as `tokio::select!` over the three futures,
/// which builds both waiters for every call and holds them in its state,
/// copied into each layer that awaits it.
struct Cancellable<'a, W> {
    work: Pin<Box<W>>,
    caller: Option<&'a CancellationToken>,
    runtime: &'a CancellationToken,
    plugin: &'a str,
    tool: &'a str,
    started: bool,
    /// The tokens' waiters (the caller's, if it has a token, and the
    /// runtime's), made once the work first waits.
    waiting: Option<(Option<Waiter<'a>>, Waiter<'a>)>,
}

/// A token's waiter, pinned where it is made.
type Waiter<'a> = Pin<Box<WaitForCancellationFuture<'a>>>;

impl<'a, W> Cancellable<'a, W> {
    fn new(
        work: Pin<Box<W>>,
        caller: Option<&'a CancellationToken>,
        runtime: &'a CancellationToken,
        plugin: &'a str,
        tool: &'a str,
    ) -> Self {
        Cancellable { work, caller, runtime, plugin, tool, started: false, waiting: None }
    }

    fn cancelled(&self, reason: &str) -> Error {
        Error::Cancelled { plugin: self.plugin.to_owned(), tool: self.tool.to_owned(), reason: reason.to_owned() }
    }
}

impl<T, W: Future<Output = Result<T, Error>>> Future for Cancellable<'_, W> {
    type Output = Result<T, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<Self::Output> {
        // (Unpin: the work and the waiters are pinned in their boxes.)
        let this = self.get_mut();
        if !this.started {
            this.started = true;
            if this.caller.is_some_and(CancellationToken::is_cancelled) {
                return Poll::Ready(Err(this.cancelled("its caller cancelled it")));
            }
        }
        // The work first, then the caller, then the runtime.
        if let Poll::Ready(outcome) = this.work.as_mut().poll(cx) {
            return Poll::Ready(outcome);
        }
        let (caller, runtime) = (this.caller, this.runtime);
        let (by_caller, by_runtime) = this
            .waiting
            .get_or_insert_with(|| (caller.map(|token| Box::pin(token.cancelled())), Box::pin(runtime.cancelled())));
        if by_caller.as_mut().is_some_and(|waiter| waiter.as_mut().poll(cx).is_ready()) {
            return Poll::Ready(Err(this.cancelled("its caller cancelled it")));
        }
        if by_runtime.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(this.cancelled("the runtime shut down")));
        }
        Poll::Pending
    }
}

impl Inner {
    /// Redact the sensitive values (handed-out secrets, secret config
    /// values) from a finished call's result, or refuse it as the policy
    /// says; and from its error.
    fn scrubbed(&self, tool: &str, outcome: Result<CallToolResult, Error>) -> Result<CallToolResult, Error> {
        let result = outcome.map_err(|error| self.scrub(error))?;
        let leak = |secrets: Vec<String>| Error::InvalidOutput {
            plugin: self.name.clone(),
            operation: Operation::Tool(tool.to_owned()),
            problem: OutputProblem::SecretLeak { secrets },
        };
        let found = match self.secret_output {
            SecretOutput::Refuse => {
                let found = self.redactor.scan_result(&result);
                if found.is_empty() {
                    return Ok(result);
                }
                tracing::warn!(plugin = %self.name, tool, secrets = ?found, "a result contained secret values; refused");
                return Err(leak(found));
            }
            SecretOutput::Redact => match self.redactor.redact_result(result, self.env.limits.max_output_bytes) {
                Redacted::Clean(result) => return Ok(result),
                Redacted::Replaced(result, found) => {
                    tracing::warn!(plugin = %self.name, tool, secrets = ?found, "a result contained secret values; redacted");
                    return Ok(result);
                }
                Redacted::TooLarge(found) => {
                    return Err(Error::PluginFailed {
                        plugin: self.name.clone(),
                        operation: Operation::Tool(tool.to_owned()),
                        fault: Fault::new(
                            FaultKind::OutputTooLarge,
                            format!(
                                "redacting secret {} would take the output past the limit of {} bytes",
                                found.join(", "),
                                self.env.limits.max_output_bytes
                            ),
                        ),
                    });
                }
                Redacted::Unusable(found) => found,
            },
        };
        tracing::warn!(plugin = %self.name, tool, secrets = ?found, "a result contained secret values where redacting them breaks it; refused");
        Err(leak(found))
    }

    /// An error with every sensitive value replaced: a plugin's error
    /// message, its stderr, a violation's message or path may quote what it
    /// returned.
    fn scrub(&self, mut error: Error) -> Error {
        let found = self.redactor.redact_error(&mut error);
        if !found.is_empty() {
            tracing::warn!(plugin = %self.name, secrets = ?found, "an error quoted secret values; redacted");
        }
        error
    }

    /// Run `call` with the tool's secrets in reach: its output, not yet
    /// checked.
    async fn call_unchecked(
        &self,
        tool: &str,
        payload: &Payload,
        run: &RunOptions<'_>,
        meter: Option<&Meter>,
    ) -> Result<CallOutput, Error> {
        tracing::debug!(plugin = %self.name, tool, "call started");
        let mut running = Running { plugin: &self.name, tool, finished: false };
        let output = self.run(Job::Call(payload, run), meter).await;
        running.finished = true;
        let output = output.map_err(|e| run_error(&self.name, Operation::Tool(tool.to_owned()), e))?;
        match output {
            Ran::Call(output) => Ok(output),
            _ => Err(Error::Host("another export ran instead of `call`".to_owned())),
        }
    }

    fn invalid_arguments(&self, tool: &str, violations: Vec<Violation>) -> Error {
        Error::InvalidArguments { plugin: self.name.clone(), tool: tool.to_owned(), violations }
    }

    /// Check an arguments object against the tool's `inputSchema` (when the
    /// options say so), within the validation budget.
    fn check_arguments(
        &self,
        index: usize,
        tool: &str,
        arguments: Value,
        weighed: Weighed,
    ) -> Result<JsonObject, Error> {
        if self.validation.arguments {
            let schema = &self.checked[index].input;
            if weighed == Weighed::No {
                within_budget(&arguments, schema.cost, schema.reads_text)
                    .map_err(|v| self.invalid_arguments(tool, vec![v]))?;
            }
            let violations = validate::schema_violations(schema, &arguments);
            if !violations.is_empty() {
                return Err(self.invalid_arguments(tool, violations));
            }
        }
        match arguments {
            Value::Object(map) => Ok(map),
            _ => Err(Error::Host("arguments that are not an object reached the check".to_owned())),
        }
    }

    /// The worst-case cost of checking a result of the tool at `index`
    /// (`None`: not one the plugin describes), per place: the protocol and
    /// the tool's `outputSchema`.
    fn output_cost(&self, index: Option<usize>) -> u64 {
        validate::protocol_result_cost() + self.output_schema(index).map_or(0, |schema| schema.cost)
    }

    /// Whether checking `output` of the tool at `index` is [`cheap`]. A
    /// result of the plain shape (text items; [`validate::plain`]) is
    /// taken by hand, its texts unread, so only its `structuredContent`
    /// is weighed, against the `outputSchema`; any other result is checked
    /// against the protocol's schema, which matches base64 data with a
    /// `pattern`, and is weighed whole, strings by their length. A typed
    /// result (a component's, or a plain one read straight into the type)
    /// is checked by its types, and its `structuredContent` against the
    /// `outputSchema`.
    fn output_is_cheap(&self, index: usize, output: &CallOutput) -> bool {
        let schema = self.output_schema(Some(index));
        let reads_text = schema.is_some_and(|schema| schema.reads_text);
        let structured = |result: Option<&Value>| {
            result.is_none_or(|structured| cheap(structured, self.output_cost(Some(index)), reads_text))
        };
        match output {
            CallOutput::Json(raw) if validate::plain::is_plain_within(raw, INLINE_PLAIN_FIELDS) => {
                structured(raw.get("structuredContent").filter(|value| !value.is_null()))
            }
            CallOutput::Json(raw) => cheap(raw, self.output_cost(Some(index)), true),
            CallOutput::Typed(result) => structured(result.structured_content.as_ref()),
        }
    }

    /// The `outputSchema` of the tool at `index`, compiled, if it has one.
    fn output_schema(&self, index: Option<usize>) -> Option<&validate::Schema> {
        index.and_then(|i| self.checked[i].output.as_deref())
    }

    /// Check what the tool `tool`, at `index` (`None`: not one the plugin
    /// describes), returned.
    fn check_call_output(
        &self,
        tool: &str,
        index: Option<usize>,
        output: CallOutput,
        weighed: Weighed,
    ) -> Result<CallToolResult, Error> {
        match output {
            CallOutput::Json(raw) => self.check_output(tool, index, raw, weighed),
            CallOutput::Typed(result) => self.check_typed(tool, index, result, weighed),
        }
    }

    /// A place in the pool and an instance for it: an idle one, or a new
    /// one (waiting while the pool is full and busy). The fault is the new
    /// instance's start-up failing; its place is freed then.
    async fn checkout(&self) -> Result<(Place<'_, Instance>, Instance), Fault> {
        // Once the plugin has moved to Cranelift's code, the idle instances
        // of the old code go at once (each holds its memory and keeps the
        // old module alive), not only as they are next taken.
        if self.module.sweep_due() {
            self.pool.retain_idle(|instance| !self.module.outdated(instance));
        }
        let (place, idle) = self.pool.take().await;
        let instance = match idle {
            // (An idle instance of code since replaced is dropped: its
            // place gets an instance of the new code.)
            Some(instance) if !self.module.outdated(&instance) => instance,
            // Boxed: instantiating is rare and its future large, and every
            // call's future would otherwise be as large.
            _ => Box::pin(self.module.instantiate(&self.env)).await?,
        };
        Ok((place, instance))
    }

    /// Run an entry point on a pooled instance and put the instance back
    /// only if the run succeeded (a result the host then refuses is the
    /// plugin's fault, not its instance's). If this future is dropped
    /// mid-run, the instance goes with it.
    async fn run(&self, job: Job<'_>, meter: Option<&Meter>) -> Result<Ran, RunError> {
        let (place, mut instance) = self.checkout().await.map_err(|fault| {
            RunError::Fault({
                let message = format!("a new instance could not be started: {fault}");
                Fault { message, ..fault }
            })
        })?;
        let output = match job {
            // (The rarer jobs boxed, so that a call's future is no larger
            // than a call needs.)
            Job::Describe => Box::pin(instance.describe()).await.map(Ran::Describe),
            Job::Call(payload, run) => instance.call(payload, run).await.map(Ran::Call),
            Job::Offer(name, input, run) => Box::pin(instance.offer(name, input, run)).await.map(Ran::Offer),
        };
        if let Some(meter) = meter {
            meter.record(instance.usage());
        }
        // A sound instance goes back to the pool, unless its code has
        // been replaced by Cranelift's (then its place is freed for an
        // instance of the new code).
        let keep = |instance: &Instance| !self.module.outdated(instance);
        match output {
            Ok(value) => {
                if keep(&instance) {
                    self.pool.give_back(place, instance);
                }
                Ok(value)
            }
            // The guest returned, but with something unusable: the
            // instance itself is sound.
            Err(RunError::Output(problem)) => {
                if keep(&instance) {
                    self.pool.give_back(place, instance);
                }
                Err(RunError::Output(problem))
            }
            // A fault: the instance is dropped and its place freed.
            Err(fault) => Err(fault),
        }
    }

    /// Check a tool's output as the options say.
    fn check_output(
        &self,
        tool: &str,
        index: Option<usize>,
        raw: Value,
        weighed: Weighed,
    ) -> Result<CallToolResult, Error> {
        let invalid = |violations| Error::InvalidOutput {
            plugin: self.name.clone(),
            operation: Operation::Tool(tool.to_owned()),
            problem: OutputProblem::Invalid { violations },
        };
        if !self.validation.results {
            return serde_json::from_value(raw).map_err(|e| invalid(vec![protocol_violation(&e)]));
        }
        if weighed == Weighed::No {
            within_budget(&raw, self.output_cost(index), true).map_err(|v| invalid(vec![v]))?;
        }
        validate::check_result(raw, self.output_schema(index)).map_err(invalid)
    }

    /// Check a typed result (a component's, or a plain one) as the options
    /// say.
    fn check_typed(
        &self,
        tool: &str,
        index: Option<usize>,
        result: CallToolResult,
        weighed: Weighed,
    ) -> Result<CallToolResult, Error> {
        if !self.validation.results {
            return Ok(result);
        }
        let invalid = |violations| Error::InvalidOutput {
            plugin: self.name.clone(),
            operation: Operation::Tool(tool.to_owned()),
            problem: OutputProblem::Invalid { violations },
        };
        if let Some(structured) = &result.structured_content
            && weighed == Weighed::No
        {
            let reads_text = self.output_schema(index).is_some_and(|schema| schema.reads_text);
            within_budget(structured, self.output_cost(index), reads_text).map_err(|v| invalid(vec![v]))?;
        }
        validate::check_typed_result(&result, self.output_schema(index)).map_err(invalid)?;
        Ok(result)
    }
}

/// Notes a call dropped before it finished (its caller cancelled it): its
/// guest was stopped there and then, and its instance discarded.
struct Running<'a> {
    plugin: &'a str,
    tool: &'a str,
    finished: bool,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if !self.finished {
            tracing::debug!(plugin = %self.plugin, tool = self.tool, "call cancelled: the guest was stopped and its instance discarded");
        }
    }
}

/// The input of an Extism plugin's `call`: what `CallToolRequest` (method
/// `tools/call`, no other fields) serialises to, written from borrowed
/// parts rather than built first, its strings escaped a word at a time
/// ([`toolhost_protocol::json`]).
fn encode_call(name: &str, arguments: &JsonObject, meta: Option<&JsonObject>) -> Vec<u8> {
    use toolhost_protocol::json;
    // Room for a small call's request at once (the frame is 50 bytes; a
    // client's `_meta`, its version and name, some 200 more).
    let mut out = Vec::with_capacity(if meta.is_some() { 384 } else { 128 } + name.len());
    out.extend_from_slice(br#"{"method":"tools/call","params":{"name":"#);
    json::write_str(&mut out, name);
    out.extend_from_slice(br#","arguments":"#);
    json::write_object(&mut out, arguments);
    if let Some(meta) = meta {
        out.extend_from_slice(br#","_meta":"#);
        json::write_object(&mut out, meta);
    }
    out.extend_from_slice(b"}}");
    out
}

/// An object as JSON text, written as [`encode_call`] writes the arguments
/// (what `serde_json::to_string` writes, by hand).
fn encode_object(object: &JsonObject) -> String {
    let mut out = Vec::with_capacity(64);
    toolhost_protocol::json::write_object(&mut out, object);
    // (The writer writes UTF-8: its input is text, its escapes ASCII.)
    String::from_utf8(out).unwrap_or_else(|bytes| String::from_utf8_lossy(bytes.as_bytes()).into_owned())
}

/// What a pooled instance is asked to run.
enum Job<'a> {
    Describe,
    /// A call, with the secrets its tool may read, its deadline and log sink.
    Call(&'a Payload, &'a RunOptions<'a>),
    /// One of the exports of what the plugin offers besides tools.
    Offer(&'static str, &'a [u8], &'a RunOptions<'a>),
}

/// What it returned.
enum Ran {
    Describe(Value),
    Call(CallOutput),
    Offer(Value),
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
