//! [`PluginBuilder`]: what a plugin is loaded from and under which grants,
//! its `describe` run and checked, and the plugin assembled.

use std::collections::BTreeMap;

use super::*;

/// Where a plugin's Wasm comes from.
#[derive(Debug, Clone)]
pub(super) enum Source {
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
    pub(super) sensitive: SensitiveValues,
    secret_output: SecretOutput,
    pool_size: usize,
    #[cfg(feature = "cache")]
    cache: Option<ModuleCache>,
    host_functions: Vec<HostFunction>,
    keyring: Vec<KeyringGrant>,
    protected: Vec<protected::Protected>,
    /// Who signed the plugin, when its source was verified.
    pub(super) signer: Option<crate::Signer>,
}

/// A keyring entry granted to a plugin: hyper-mcp's `get_keyring_secret`
/// of (`service`, `user`) answers the secret `secret`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct KeyringGrant {
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

    pub(super) fn new(runtime: Runtime, source: Source) -> Self {
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
            signer: None,
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
    pub(super) fn check_grants(&self) -> Result<(), crate::error::PolicyError> {
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
    pub(super) async fn build_named(self, name: String) -> Result<Plugin, Error> {
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
        let found = self.find_module(&name, kind, engine, &cache, &kernel_cache).await?;
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
            optimize_in_background(&runtime, name, code, optimize);
        }
        Ok(plugin)
    }

    /// The plugin's compiled module (and the runtime's kernel beside it):
    /// a warm load finds it on this thread (see `cached`), anything else
    /// looks it up, or compiles it, on a blocking thread.
    async fn find_module(
        &self,
        name: &str,
        kind: EngineKind,
        engine: wasmtime::Engine,
        cache: &Cache,
        kernel_cache: &Cache,
    ) -> Result<Found, Error> {
        let compilers = self.runtime.compilers();
        if tokio::runtime::Handle::current().runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread {
            let runtime = &self.runtime;
            let hit = tokio::task::block_in_place(|| {
                let found = cached(&self.source, cache, &engine, compilers)?;
                // (A kernel that cannot be made: the lookup below says why.)
                let kernel = found.compiled.module().is_none()
                    || ready_kernel(runtime, kind, found.info.tier, kernel_cache).is_ok();
                kernel.then_some(found)
            });
            if let Some(found) = hit {
                return Ok(found);
            }
        }
        let (source, loading, runtime) = (self.source.clone(), name.to_owned(), self.runtime.clone());
        let (cache, kernel_cache) = (cache.clone(), kernel_cache.clone());
        let lookup = tokio::task::spawn_blocking(move || {
            // Made only when a plugin is compiled on it: a cache hit needs
            // no second engine.
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
        lookup.await.map_err(|e| Error::Host(format!("the loading thread failed: {e}")))?
    }

    /// [`build`](Self::build), the module ready: call `describe`, check
    /// what it says and keep the tools.
    pub(super) async fn described(
        self,
        name: String,
        module: Arc<Code>,
        compiled: CompileInfo,
    ) -> Result<Plugin, Error> {
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

    /// The secrets the tools declare that are granted, looked up (each
    /// remembered for the logs' redaction), and why the others are
    /// missing. The plugin's declaration alone gets it nothing: the
    /// provider is not even asked for a secret that was not granted.
    async fn tool_secret_values(
        &self,
        name: &str,
        tools: &[CheckedTool],
    ) -> (BTreeMap<String, String>, BTreeMap<String, MissingSecretReason>) {
        let mut secrets = BTreeMap::new();
        let mut missing_secrets = BTreeMap::new();
        let declared: BTreeSet<&str> =
            tools.iter().flat_map(|t| t.requirements.secrets.iter().map(|s| s.id.as_str())).collect();
        for id in declared {
            if !self.granted.contains(id) {
                missing_secrets.insert(id.to_owned(), MissingSecretReason::NotGranted);
                continue;
            }
            match self.secrets.secret(id).await {
                Ok(Some(value)) => {
                    crate::secrets::in_logs::remember_secret(id, &value);
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
        (secrets, missing_secrets)
    }

    /// The granted keyring entries' values (hyper-mcp's
    /// `get_keyring_secret`): the grant alone hands them over, to tool
    /// calls.
    async fn keyring_values(&self, name: &str) -> BTreeMap<(String, String), String> {
        let mut keyring = BTreeMap::new();
        for grant in &self.keyring {
            match self.secrets.secret(&grant.secret).await {
                Ok(Some(value)) => {
                    crate::secrets::in_logs::remember_secret(&grant.secret, &value);
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
        keyring
    }

    /// What the calls' instances are given: `describe`'s environment, with
    /// the secrets and keyring values (which `describe` ran without) and a
    /// redactor that knows them too.
    fn call_env(
        &self,
        describe_env: Arc<HostEnv>,
        secrets: BTreeMap<String, String>,
        keyring: BTreeMap<(String, String), String>,
    ) -> Arc<HostEnv> {
        if secrets.is_empty() && keyring.is_empty() {
            return describe_env;
        }
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
    }

    /// The plugin from its checked `describe` output: the secrets its
    /// tools may have looked up, its pool made (or, when it described
    /// itself again, kept).
    pub(super) async fn assemble(
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

        let (secrets, missing_secrets) = self.tool_secret_values(&name, &checked.tools).await;
        let keyring = self.keyring_values(&name).await;
        let tool_secrets = tool_secrets_of(&checked.tools, &secrets);
        let env = self.call_env(describe_env, secrets, keyring);

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
pub(super) enum Reuse {
    /// A new plugin: a new pool, starting with the instance that ran
    /// `describe`.
    Fresh(Instance),
    /// Described again: the plugin's environment and pool, kept if the
    /// grants come out the same.
    Pool(Arc<HostEnv>, Arc<Pool<Instance>>),
}

/// Compile a plugin loaded on the baseline compiler's code with Cranelift,
/// on a blocking thread, and swap the code in when it is ready (counted by
/// the runtime, which waits for it at the end). A plugin dropped meanwhile
/// still has its entry written to the cache.
fn optimize_in_background(
    runtime: &Runtime,
    name: String,
    code: Arc<Code>,
    optimize: impl FnOnce() -> Result<(Module, CompileInfo), Error> + Send + 'static,
) {
    let settling = tiers::Settling(Arc::downgrade(&code));
    drop(code);
    let counted = runtime.background_compile();
    tokio::task::spawn_blocking(move || {
        let _counted = counted;
        let optimized = optimize();
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

/// Each tool's secrets: those it declares that were handed over, in order,
/// once each. A secret goes only to the calls of the tools that declare it.
fn tool_secrets_of(tools: &[CheckedTool], secrets: &BTreeMap<String, String>) -> Vec<ToolSecrets> {
    tools
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
        .collect()
}
