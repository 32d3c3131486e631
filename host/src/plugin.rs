//! Loading a plugin and calling its tools.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use toolhost_protocol::{
    CallToolRequest, CallToolResult, JsonObject, ListToolsResult, Tool, exports,
};

use crate::error::{Error, Fault, FaultKind, Operation, OutputProblem, Violation};
use crate::config::SecretOutput;
use crate::sandbox::{Access, Limits, PathGrant, Policy, WASM_PAGE_BYTES, format_size};
use crate::secrets::{HandedSecrets, NoSecrets, SecretProvider};
use crate::validate::{self, CheckedTool, LoadProblem, ValidationOptions};

/// Where a plugin's Wasm comes from.
#[derive(Debug, Clone)]
enum Source {
    File(PathBuf),
    Bytes(Arc<[u8]>),
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
    source: Source,
    name: Option<String>,
    policy: Policy,
    validation: ValidationOptions,
    secrets: Arc<dyn SecretProvider>,
    secret_output: SecretOutput,
    max_idle_instances: usize,
}

impl std::fmt::Debug for PluginBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginBuilder")
            .field("source", &self.source)
            .field("name", &self.name)
            .field("policy", &self.policy)
            .field("validation", &self.validation)
            .field("secrets", &self.secrets.describe())
            .field("secret_output", &self.secret_output)
            .finish_non_exhaustive()
    }
}

impl PluginBuilder {
    fn new(source: Source) -> Self {
        PluginBuilder {
            source,
            name: None,
            policy: Policy::default(),
            validation: ValidationOptions::default(),
            secrets: Arc::new(NoSecrets),
            secret_output: SecretOutput::default(),
            max_idle_instances: std::thread::available_parallelism().map_or(2, |n| n.get()),
        }
    }

    /// How strictly to validate the plugin's tools, arguments and results.
    pub fn with_validation(mut self, validation: ValidationOptions) -> Self {
        self.validation = validation;
        self
    }

    /// Where the secrets the plugin's tools declare (`requirements.secrets`)
    /// come from. The plugin gets exactly those, as config values keyed by
    /// the secret's id; by default it gets none.
    pub fn with_secret_provider(mut self, secrets: Arc<dyn SecretProvider>) -> Self {
        self.secrets = secrets;
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

    /// Let the plugin send HTTP requests to hosts matching this pattern
    /// (`api.example.com`, `*.example.com`).
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

    /// How many ready instances to keep between calls (at least one is
    /// created for `describe`). Defaults to the number of cores.
    pub fn with_max_idle_instances(mut self, n: usize) -> Self {
        self.max_idle_instances = n;
        self
    }

    /// Compile the plugin, call `describe` and keep its tools.
    ///
    /// Compilation runs on a blocking thread, never on a tokio worker.
    pub async fn build(self) -> Result<Plugin, Error> {
        tokio::task::spawn_blocking(move || self.build_blocking())
            .await
            .map_err(|e| Error::Host(format!("the loading thread failed: {e}")))?
    }

    fn build_blocking(self) -> Result<Plugin, Error> {
        let (name, wasm) = match &self.source {
            Source::File(path) => {
                let bytes = std::fs::read(path).map_err(|source| Error::Read {
                    path: path.clone(),
                    source,
                })?;
                let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned());
                (self.name.clone().or(stem).unwrap_or_else(|| "plugin".to_owned()), bytes)
            }
            Source::Bytes(bytes) => (
                self.name.clone().unwrap_or_else(|| "plugin".to_owned()),
                bytes.to_vec(),
            ),
        };
        let load_error = |message: String, source: Option<extism::Error>| Error::Load {
            plugin: name.clone(),
            message,
            source: source.map(|e| e.into_boxed_dyn_error()),
        };

        self.policy.check().map_err(|source| Error::Policy { plugin: name.clone(), source })?;
        let manifest = manifest(wasm, &self.policy);
        let limits = self.policy.limits.clone();
        let mut instance = new_instance(&manifest, &limits).map_err(|e| {
            let message = if e.downcast_ref::<wasmtime::Trap>().is_some() {
                format!("its initialisation trapped ({e})")
            } else {
                format!("it is not a valid Wasm module or cannot be instantiated ({e})")
            };
            load_error(message, Some(e))
        })?;
        for export in [exports::DESCRIBE, exports::CALL] {
            if !instance.function_exists(export) {
                return Err(load_error(
                    format!(
                        "it does not export `{export}` (a toolhost plugin exports `describe` and `call`)"
                    ),
                    None,
                ));
            }
        }

        let output = run_export(&mut instance, exports::DESCRIBE, b"", &limits)
            .map_err(|fault| Error::PluginFailed {
                plugin: name.clone(),
                operation: Operation::Describe,
                fault,
            })?;
        let raw = parse_json(&output).map_err(|problem| Error::InvalidOutput {
            plugin: name.clone(),
            operation: Operation::Describe,
            problem,
        })?;
        let checked = validate::check_describe(&raw, &self.validation);
        if !checked.problems.is_empty() && (checked.fatal || !self.validation.lenient) {
            return Err(Error::InvalidPlugin { plugin: name, problems: checked.problems });
        }
        for warning in &checked.problems {
            tracing::warn!(plugin = %name, "tool left out: {warning}");
        }
        let mut extra = match raw {
            Value::Object(map) => map,
            _ => JsonObject::new(),
        };
        extra.remove("tools");
        let described = ListToolsResult {
            tools: checked.tools.iter().map(|t| t.tool.clone()).collect(),
            extra,
        };
        let index = described
            .tools
            .iter()
            .enumerate()
            .map(|(i, tool)| (tool.name.clone(), i))
            .collect();

        // The secrets the tools declare, and nothing else, go to the call
        // instances as config values. `describe` ran without them.
        let mut handed = HandedSecrets::default();
        let mut missing_secrets = BTreeSet::new();
        let declared: BTreeSet<&str> = checked
            .tools
            .iter()
            .flat_map(|t| t.requirements.secrets.iter().map(|s| s.id.as_str()))
            .collect();
        let mut call_manifest = manifest;
        for id in declared {
            match self.secrets.secret(id) {
                Ok(Some(value)) => {
                    call_manifest.config.insert(id.to_owned(), value.clone());
                    handed.push(id.to_owned(), value);
                }
                Ok(None) => {
                    missing_secrets.insert(id.to_owned());
                }
                Err(error) => {
                    tracing::warn!(plugin = %name, secret = id, "cannot look the secret up: {error}");
                    missing_secrets.insert(id.to_owned());
                }
            }
        }

        let inner = Inner {
            name,
            manifest: call_manifest,
            handed,
            missing_secrets,
            secret_output: self.secret_output,
            described,
            checked: checked.tools,
            warnings: checked.problems,
            index,
            limits,
            validation: self.validation,
            idle: Mutex::new(Vec::new()),
            max_idle: self.max_idle_instances.max(1),
        };
        if inner.handed.is_empty() {
            inner.recycle(instance);
        }
        Ok(Plugin { inner: Arc::new(inner) })
    }
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
    name: String,
    /// What every call instance is made from.
    manifest: extism::Manifest,
    /// The secrets in `manifest`'s config, to keep them out of results.
    handed: HandedSecrets,
    /// Secrets a tool declares that the provider does not have.
    missing_secrets: BTreeSet<String>,
    secret_output: SecretOutput,
    described: ListToolsResult,
    checked: Vec<CheckedTool>,
    warnings: Vec<LoadProblem>,
    index: HashMap<String, usize>,
    limits: Limits,
    validation: ValidationOptions,
    idle: Mutex<Vec<extism::Plugin>>,
    max_idle: usize,
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

    /// Configure a plugin loaded from a `.wasm` file.
    pub fn builder_from_file(path: impl AsRef<Path>) -> PluginBuilder {
        PluginBuilder::new(Source::File(path.as_ref().to_path_buf()))
    }

    /// Configure a plugin loaded from Wasm bytes.
    pub fn builder_from_bytes(wasm: impl Into<Arc<[u8]>>) -> PluginBuilder {
        PluginBuilder::new(Source::Bytes(wasm.into()))
    }

    /// The plugin's name, as used in errors.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The tools the plugin described at load, in its order.
    pub fn tools(&self) -> &[Tool] {
        &self.inner.described.tools
    }

    /// The full `describe` output, as the plugin returned it.
    pub fn describe(&self) -> &ListToolsResult {
        &self.inner.described
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
        &self.inner.limits
    }

    /// Call a tool.
    ///
    /// `arguments` must be a JSON object, or `null` for none (the same as
    /// `{}`). A tool the plugin does not describe is refused before the plugin
    /// runs. A tool error is `Ok` with `isError: true`; everything else that
    /// goes wrong is a typed [`Error`].
    ///
    /// The guest runs on a blocking thread, never on a tokio worker, and on an
    /// instance of its own: an instance that faults is discarded.
    ///
    /// Dropping the returned future (a cancelled request, a `select!` that
    /// went the other way) stops the guest: its instance is interrupted and
    /// discarded.
    pub async fn call_tool(&self, name: &str, arguments: Value) -> Result<CallToolResult, Error> {
        let arguments = self.validate_arguments(name, arguments)?;
        self.run_call(name, arguments).await
    }

    /// Call a tool with arguments that are *not* checked against its
    /// `inputSchema`: the plugin gets them as they are. The result is checked
    /// as [`call_tool`](Self::call_tool) checks it.
    ///
    /// This is for testing how a plugin copes with bad input (as
    /// `toolhost check` does): a plugin must answer arguments it cannot use
    /// with a tool error, not a crash, since not every host validates them.
    pub async fn call_tool_unvalidated(&self, name: &str, arguments: JsonObject) -> Result<CallToolResult, Error> {
        self.index_of(name)?;
        self.run_call(name, arguments).await
    }

    /// Run the call on a blocking thread, with cancel-on-drop.
    async fn run_call(&self, name: &str, arguments: JsonObject) -> Result<CallToolResult, Error> {
        let request = self.prepare_call(name, arguments)?;
        let inner = Arc::clone(&self.inner);
        let tool = name.to_owned();
        let cancel = CancelOnDrop { slot: Arc::default(), armed: true };
        let slot = Arc::clone(&cancel.slot);
        let outcome = tokio::task::spawn_blocking(move || inner.call_blocking(&tool, &request, &slot)).await;
        cancel.disarm();
        outcome.map_err(|e| Error::Host(format!("the calling thread failed: {e}")))?
    }

    /// Check arguments for a tool as [`call_tool`](Self::call_tool) does
    /// before the plugin runs, without calling it: the tool must exist, the
    /// arguments must be an object (or `null`) valid against its
    /// `inputSchema`. Returns the arguments as an object.
    pub fn validate_arguments(&self, name: &str, arguments: Value) -> Result<JsonObject, Error> {
        let index = self.index_of(name)?;
        let invalid = |violations| Error::InvalidArguments {
            plugin: self.inner.name.clone(),
            tool: name.to_owned(),
            violations,
        };
        let arguments = match arguments {
            Value::Null => Value::Object(JsonObject::new()),
            object @ Value::Object(_) => object,
            other => {
                return Err(invalid(vec![Violation {
                    instance_path: String::new(),
                    keyword: "type".to_owned(),
                    message: format!(
                        "arguments must be a JSON object, not {}",
                        json_type_name(&other)
                    ),
                }]));
            }
        };
        if self.inner.validation.arguments {
            let violations = validate::violations(&self.inner.checked[index].input, &arguments);
            if !violations.is_empty() {
                return Err(invalid(violations));
            }
        }
        match arguments {
            Value::Object(map) => Ok(map),
            _ => unreachable!("only objects get here"),
        }
    }

    /// Check a result as [`call_tool`](Self::call_tool) checks what a tool
    /// returns: against the protocol and the tool's `outputSchema`.
    pub fn validate_result(&self, name: &str, result: Value) -> Result<CallToolResult, Error> {
        self.inner.check_output(name, result)
    }

    /// The secrets a tool declares that the host could not provide.
    pub fn missing_secrets(&self, name: &str) -> Vec<&str> {
        self.inner
            .index
            .get(name)
            .map(|&i| {
                self.inner.checked[i]
                    .requirements
                    .secrets
                    .iter()
                    .map(|s| s.id.as_str())
                    .filter(|id| self.inner.missing_secrets.contains(*id))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The position of a tool the plugin describes, or `UnknownTool`.
    fn index_of(&self, name: &str) -> Result<usize, Error> {
        self.inner.index.get(name).copied().ok_or_else(|| {
            let mut available: Vec<String> = self.inner.index.keys().cloned().collect();
            available.sort();
            Error::UnknownTool { plugin: self.inner.name.clone(), tool: name.to_owned(), available }
        })
    }

    /// Check the tool's secrets and the request's size, and encode it.
    fn prepare_call(&self, name: &str, arguments: JsonObject) -> Result<Vec<u8>, Error> {
        if let Some(secret) = self.missing_secrets(name).first() {
            return Err(Error::MissingSecret {
                plugin: self.inner.name.clone(),
                tool: name.to_owned(),
                secret: (*secret).to_owned(),
            });
        }
        let invalid = |violations| Error::InvalidArguments {
            plugin: self.inner.name.clone(),
            tool: name.to_owned(),
            violations,
        };
        let request = CallToolRequest::new(name, Some(arguments));
        let bytes = serde_json::to_vec(&request)
            .map_err(|e| Error::Host(format!("cannot encode the request: {e}")))?;
        if bytes.len() > self.inner.limits.max_input_bytes {
            return Err(invalid(vec![Violation {
                instance_path: String::new(),
                keyword: "maxInputBytes".to_owned(),
                message: format!(
                    "the request is {} bytes, over the limit of {} bytes",
                    bytes.len(),
                    self.inner.limits.max_input_bytes
                ),
            }]));
        }
        Ok(bytes)
    }
}

impl Inner {
    fn call_blocking(&self, tool: &str, request: &[u8], cancel: &CancelSlot) -> Result<CallToolResult, Error> {
        match self.call_unscrubbed(tool, request, cancel) {
            Ok(mut result) => {
                let found = self.handed.redact_result(&mut result);
                if found.is_empty() {
                    return Ok(result);
                }
                tracing::warn!(plugin = %self.name, tool, secrets = ?found, "the result contained secrets handed to the plugin");
                match self.secret_output {
                    SecretOutput::Redact => Ok(result),
                    SecretOutput::Refuse => Err(Error::InvalidOutput {
                        plugin: self.name.clone(),
                        operation: Operation::Tool(tool.to_owned()),
                        problem: OutputProblem::SecretLeak { secrets: found },
                    }),
                }
            }
            Err(error) => Err(self.scrub(error)),
        }
    }

    /// An error with every handed-out secret value replaced: a plugin's
    /// error message or a violation may quote what it returned.
    fn scrub(&self, mut error: Error) -> Error {
        if self.handed.is_empty() {
            return error;
        }
        let mut found = Vec::new();
        match &mut error {
            Error::PluginFailed { fault, .. } => self.handed.redact_str(&mut fault.message, &mut found),
            Error::InvalidOutput { problem: OutputProblem::Invalid { violations }, .. } => {
                for violation in violations {
                    self.handed.redact_str(&mut violation.message, &mut found);
                }
            }
            Error::InvalidOutput { problem: OutputProblem::NotJson { message }, .. } => {
                self.handed.redact_str(message, &mut found);
            }
            _ => {}
        }
        if !found.is_empty() {
            tracing::warn!(plugin = %self.name, secrets = ?found, "an error quoted secrets handed to the plugin");
        }
        error
    }

    fn call_unscrubbed(&self, tool: &str, request: &[u8], cancel: &CancelSlot) -> Result<CallToolResult, Error> {
        let operation = || Operation::Tool(tool.to_owned());
        let mut instance = self.checkout().map_err(|fault| Error::PluginFailed {
            plugin: self.name.clone(),
            operation: operation(),
            fault,
        })?;
        if !cancel.start(instance.cancel_handle()) {
            // Cancelled before it started: the healthy instance goes back.
            self.recycle(instance);
            return Err(Error::Host("the call was cancelled before it started".to_owned()));
        }
        // An instance whose call faulted is dropped here, never recycled.
        let ran = run_export(&mut instance, exports::CALL, request, &self.limits);
        let cancelled = cancel.finish();
        let output = ran.map_err(|mut fault| {
            if cancelled {
                fault = Fault { kind: FaultKind::Cancelled, message: "the caller went away".to_owned() };
            }
            Error::PluginFailed { plugin: self.name.clone(), operation: operation(), fault }
        })?;
        self.recycle(instance);
        let raw = parse_json(&output).map_err(|problem| Error::InvalidOutput {
            plugin: self.name.clone(),
            operation: operation(),
            problem,
        })?;
        self.check_output(tool, raw)
    }

    /// Check a tool's output as the options say.
    fn check_output(&self, tool: &str, raw: Value) -> Result<CallToolResult, Error> {
        let invalid = |violations| Error::InvalidOutput {
            plugin: self.name.clone(),
            operation: Operation::Tool(tool.to_owned()),
            problem: OutputProblem::Invalid { violations },
        };
        if !self.validation.results {
            return serde_json::from_value(raw).map_err(|e| invalid(vec![protocol_violation(&e)]));
        }
        let output_validator = self.index.get(tool).and_then(|&i| self.checked[i].output.as_ref());
        validate::check_result(raw, output_validator).map_err(invalid)
    }

    /// An idle instance, or a new one.
    fn checkout(&self) -> Result<extism::Plugin, Fault> {
        let idle = self.idle.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).pop();
        match idle {
            Some(instance) => Ok(instance),
            None => new_instance(&self.manifest, &self.limits).map_err(|e| Fault {
                kind: FaultKind::Runtime,
                message: format!("cannot create an instance: {e}"),
            }),
        }
    }

    /// Return a healthy instance to the pool, or drop it when the pool is full.
    fn recycle(&self, instance: extism::Plugin) {
        let mut idle = self.idle.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if idle.len() < self.max_idle {
            idle.push(instance);
        }
    }
}

/// Where a running call's cancel handle lives, shared between the caller's
/// future and the thread running the guest.
#[derive(Default)]
struct CancelSlot {
    state: Mutex<CancelState>,
}

#[derive(Default)]
enum CancelState {
    #[default]
    Pending,
    Running(extism::CancelHandle),
    Cancelled,
    Done,
}

impl CancelSlot {
    /// The guest is about to run; `false` if the caller already went away.
    fn start(&self, handle: extism::CancelHandle) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match *state {
            CancelState::Cancelled => false,
            _ => {
                *state = CancelState::Running(handle);
                true
            }
        }
    }

    /// The guest returned; whether it was cancelled.
    fn finish(&self) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let cancelled = matches!(*state, CancelState::Cancelled);
        *state = CancelState::Done;
        cancelled
    }

    /// The caller went away: stop the guest if it runs, or keep it from starting.
    fn cancel(&self) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let CancelState::Running(handle) = &*state {
            // Bumps the epoch of this instance's own engine: only this call stops.
            let _ = handle.cancel();
        }
        if !matches!(*state, CancelState::Done) {
            *state = CancelState::Cancelled;
        }
    }
}

/// Cancels the call when dropped before [`disarm`](Self::disarm).
struct CancelOnDrop {
    slot: Arc<CancelSlot>,
    armed: bool,
}

impl CancelOnDrop {
    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if self.armed {
            self.slot.cancel();
        }
    }
}

/// The Extism manifest for a plugin under a policy.
fn manifest(wasm: Vec<u8>, policy: &Policy) -> extism::Manifest {
    let mut manifest = extism::Manifest::new([extism::Wasm::data(wasm)])
        .with_config(policy.config.clone().into_iter())
        .with_allowed_hosts(policy.allowed_hosts.clone().into_iter());
    for grant in &policy.allowed_paths {
        // Extism marks read-only grants with a `ro:` prefix on the host path.
        let host = grant.host.to_string_lossy();
        let host = match grant.access {
            Access::ReadOnly => format!("ro:{host}"),
            Access::ReadWrite => host.into_owned(),
        };
        manifest = manifest.with_allowed_path(host, grant.guest_path());
    }
    if let Some(timeout) = policy.limits.timeout {
        manifest = manifest.with_timeout(timeout);
    }
    if let Some(bytes) = policy.limits.memory_max_bytes {
        let pages = u32::try_from(bytes / WASM_PAGE_BYTES).unwrap_or(u32::MAX);
        manifest = manifest.with_memory_max(pages);
    }
    manifest
}

/// A new instance, on an engine of its own.
///
/// Extism enforces timeouts by bumping the epoch of an instance's engine, and
/// every running call on that engine traps when it moves. Instances sharing an
/// engine would all be stopped when one of them times out, so each gets its
/// own; wasmtime's compilation cache makes all but the first compilation a
/// cache hit.
fn new_instance(manifest: &extism::Manifest, limits: &Limits) -> Result<extism::Plugin, extism::Error> {
    let mut builder = extism::PluginBuilder::new(manifest.clone()).with_wasi(true);
    if let Some(fuel) = limits.fuel {
        builder = builder.with_fuel_limit(fuel);
    }
    extism::Plugin::new_from_compiled(&builder.compile()?)
}

/// Run one export and copy its output out of the instance, or say how it
/// failed.
fn run_export(
    instance: &mut extism::Plugin,
    export: &str,
    input: &[u8],
    limits: &Limits,
) -> Result<Vec<u8>, Fault> {
    match instance.call::<&[u8], &[u8]>(export, input) {
        Ok(output) if output.len() > limits.max_output_bytes => Err(Fault {
            kind: FaultKind::OutputTooLarge,
            message: format!(
                "{} bytes of output, over the limit of {}",
                output.len(),
                format_size(limits.max_output_bytes as u64)
            ),
        }),
        Ok(output) => Ok(output.to_vec()),
        Err(error) => Err(classify(&error, limits)),
    }
}

/// Turn an Extism call error into a [`Fault`].
fn classify(error: &extism::Error, limits: &Limits) -> Fault {
    if let Some(trap) = error.downcast_ref::<wasmtime::Trap>() {
        if *trap == wasmtime::Trap::Interrupt {
            return timeout_fault(limits);
        }
        let message = match trap {
            // What a Rust panic or `abort` compiles to on Wasm.
            wasmtime::Trap::UnreachableCodeReached => {
                "`unreachable` executed: the plugin panicked or aborted".to_owned()
            }
            other => other.to_string(),
        };
        return Fault { kind: FaultKind::Trap, message };
    }
    if let Some(exit) = error.downcast_ref::<wasmtime_wasi::I32Exit>() {
        return Fault {
            kind: FaultKind::Exit,
            message: format!("WASI exit code {}", exit.0),
        };
    }
    // Extism reports these with plain messages.
    match error.to_string().as_str() {
        "timeout" => return timeout_fault(limits),
        "oom" => {
            let limit = limits.memory_max_bytes.map_or_else(|| "4GiB".to_owned(), format_size);
            return Fault {
                kind: FaultKind::MemoryLimit,
                message: format!("the instance tried to grow its memory past {limit}"),
            };
        }
        "plugin ran out of fuel" => {
            let budget = limits.fuel.map_or_else(|| "its".to_owned(), |f| format!("the {f}-unit"));
            return Fault {
                kind: FaultKind::FuelExhausted,
                message: format!("the call used up {budget} instruction budget"),
            };
        }
        _ => {}
    }
    // A host function's error reaches us wrapped in the Wasm backtrace; its own
    // sentence is the root cause.
    let top = error.to_string();
    let message = if top.starts_with("error while executing at wasm backtrace") {
        error.root_cause().to_string()
    } else {
        top
    };
    // Extism refuses HTTP to hosts outside the grant with this sentence.
    if message.starts_with("HTTP request to ") && message.ends_with(" is not allowed") {
        return Fault {
            kind: FaultKind::Denied,
            message: format!("{message}: its host matches no allowed-host grant"),
        };
    }
    Fault { kind: FaultKind::Error, message }
}

fn timeout_fault(limits: &Limits) -> Fault {
    let limit = limits.timeout.map_or_else(|| "its limit".to_owned(), |t| format!("{t:?}"));
    Fault { kind: FaultKind::Timeout, message: format!("it ran longer than {limit}") }
}

/// Decode a plugin's output as JSON.
fn parse_json(output: &[u8]) -> Result<Value, OutputProblem> {
    let text = std::str::from_utf8(output)
        .map_err(|e| OutputProblem::NotUtf8 { valid_up_to: e.valid_up_to() })?;
    serde_json::from_str(text).map_err(|e| OutputProblem::NotJson { message: e.to_string() })
}

/// A JSON value that does not deserialize into the protocol type.
pub(crate) fn protocol_violation(error: &serde_json::Error) -> Violation {
    Violation {
        instance_path: String::new(),
        keyword: "protocol".to_owned(),
        message: error.to_string(),
    }
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
