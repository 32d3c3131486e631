//! Extism plugins on wasmtime: the `extism:host/env` ABI, natively.
//!
//! An Extism plugin is a core Wasm module that imports functions from
//! `extism:host/env` (the kernel of [`super::kernel`], plus `config_get`,
//! `var_*`, `http_*`, `log_*`) and, usually, WASI preview 1. toolhost
//! provides exactly those, with the meaning Extism gives them, so plugins
//! built with any Extism plugin kit run unchanged. What toolhost does not
//! provide (host functions of `extism:host/user`, other modules) is named
//! when the plugin is loaded.
//!
//! [`ExtismModule`] is a compiled plugin with its imports resolved (an
//! `InstancePre`): shared by all instances. [`ExtismInstance`] is one store
//! and instance; a pool keeps them between calls.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use wasmtime::{
    Caller, Engine, ExternType, InstancePre, Linker, Module, ResourceLimiter, Store, TypedFunc, Val, ValType,
};
use wasmtime_wasi::I32Exit;
use wasmtime_wasi::p1::WasiP1Ctx;

use super::guest::{self, Guest, GuestCore, ToolSecrets};
use super::kernel::{Budget, Kernel, OutOfBudget};
use super::{EngineKind, Stop, engine, output, ticker};
use crate::error::{Fault, FaultKind};
use crate::sandbox::{Limits, PathGrant, format_size};

/// The import module of Extism's host functions.
pub(crate) const ENV: &str = "extism:host/env";
/// The import module of user-defined Extism host functions (not provided).
const USER: &str = "extism:host/user";
/// WASI preview 1.
const WASI_P1: &str = "wasi_snapshot_preview1";

/// Every function of `extism:host/env`, with its Wasm signature.
const ENV_FUNCTIONS: &[(&str, &[ValType], &[ValType])] = {
    use ValType::{I32, I64};
    &[
        ("alloc", &[I64], &[I64]),
        ("free", &[I64], &[]),
        ("length", &[I64], &[I64]),
        ("length_unsafe", &[I64], &[I64]),
        ("load_u8", &[I64], &[I32]),
        ("load_u64", &[I64], &[I64]),
        ("store_u8", &[I64, I32], &[]),
        ("store_u64", &[I64, I64], &[]),
        ("input_load_u8", &[I64], &[I32]),
        ("input_load_u64", &[I64], &[I64]),
        ("input_length", &[], &[I64]),
        ("input_offset", &[], &[I64]),
        ("input_set", &[I64, I64], &[]),
        ("output_set", &[I64, I64], &[]),
        ("output_length", &[], &[I64]),
        ("output_offset", &[], &[I64]),
        ("error_set", &[I64], &[]),
        ("error_get", &[], &[I64]),
        ("memory_bytes", &[], &[I64]),
        ("reset", &[], &[]),
        ("config_get", &[I64], &[I64]),
        ("var_get", &[I64], &[I64]),
        ("var_set", &[I64, I64], &[]),
        ("http_request", &[I64, I64], &[I64]),
        ("http_status_code", &[], &[I32]),
        ("http_headers", &[], &[I64]),
        ("log_warn", &[I64], &[]),
        ("log_info", &[I64], &[]),
        ("log_debug", &[I64], &[]),
        ("log_error", &[I64], &[]),
        ("log_trace", &[I64], &[]),
        ("get_log_level", &[], &[I32]),
    ]
};

/// Most bytes of variables an instance may keep (Extism's default).
const MAX_VAR_BYTES: usize = 1024 * 1024;
/// Most elements a table may grow to, whatever the memory limit.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;
/// Bytes a table element is charged against the memory limit: wasmtime
/// keeps a funcref as a pointer (8 bytes) and a continuation as two; we
/// charge the larger, so a table never holds more host memory than counted.
pub(crate) const TABLE_ELEMENT_BYTES: usize = 16;

/// What every instance of one plugin shares: its name, grants and limits.
/// (No `Debug`: the config holds secrets.)
#[derive(Clone)]
pub(crate) struct HostEnv {
    /// The plugin's name, for logs.
    pub(crate) name: String,
    /// Config values (`config_get`).
    pub(crate) config: BTreeMap<String, String>,
    /// The secrets handed to the plugin, by id: `config_get` of one answers
    /// only during calls of a tool that declares it.
    pub(crate) secrets: BTreeMap<String, String>,
    /// The plugin's sensitive values (its secrets and the secret values of
    /// its config), kept out of its log lines.
    pub(crate) redactor: Arc<crate::secrets::Redactor>,
    /// Host patterns HTTP requests may go to.
    pub(crate) allowed_hosts: Vec<String>,
    /// Directories the plugin sees.
    pub(crate) allowed_paths: Vec<PathGrant>,
    /// Limits of every call.
    pub(crate) limits: Limits,
}

/// The memory an instance holds: its linear memories and its kernel memory,
/// against one limit.
#[derive(Debug)]
pub(crate) struct MemoryBudget {
    max: Option<usize>,
    used: usize,
}

impl MemoryBudget {
    pub(crate) fn new(max: Option<u64>) -> Self {
        MemoryBudget { max: max.map(|m| usize::try_from(m).unwrap_or(usize::MAX)), used: 0 }
    }

    /// Bytes held now.
    pub(crate) fn used(&self) -> usize {
        self.used
    }
}

impl Budget for MemoryBudget {
    fn charge(&mut self, bytes: usize) -> Result<(), OutOfBudget> {
        let total = self.used.checked_add(bytes).ok_or(OutOfBudget)?;
        if self.max.is_some_and(|max| total > max) {
            return Err(OutOfBudget);
        }
        self.used = total;
        Ok(())
    }

    fn refund(&mut self, bytes: usize) {
        self.used = self.used.saturating_sub(bytes);
    }
}

impl ResourceLimiter for MemoryBudget {
    fn memory_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        if maximum.is_some_and(|m| desired > m) {
            return Ok(false);
        }
        self.charge(desired.saturating_sub(current)).map_err(|_| wasmtime::Error::new(Stop::MemoryLimit))?;
        Ok(true)
    }

    /// Tables live in host memory: their elements count against the same
    /// limit as linear memories (a module's initial tables too, charged at
    /// instantiation, so a huge declared table is refused, not allocated).
    fn table_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > maximum.unwrap_or(usize::MAX).min(MAX_TABLE_ELEMENTS) {
            return Ok(false);
        }
        let bytes = desired.saturating_sub(current).saturating_mul(TABLE_ELEMENT_BYTES);
        self.charge(bytes).map_err(|_| wasmtime::Error::new(Stop::MemoryLimit))?;
        Ok(true)
    }
}

/// The data of one instance's store.
pub(crate) struct State {
    /// Grants, limits, memory budget, deadline, captured output.
    pub(crate) core: GuestCore,
    pub(crate) kernel: Kernel,
    pub(crate) wasi: WasiP1Ctx,
    vars: BTreeMap<String, Vec<u8>>,
    pub(crate) http_status: u16,
    pub(crate) http_headers: Option<BTreeMap<String, String>>,
}

impl State {
    /// Copy bytes into a new kernel block (the null handle for none),
    /// trapping when the memory budget is spent.
    pub(crate) fn write_new(&mut self, bytes: &[u8]) -> wasmtime::Result<u64> {
        self.kernel.write_new(bytes, &mut self.core.memory).map_err(|_| wasmtime::Error::new(Stop::MemoryLimit))
    }

    /// The bytes of a live block, copied, and the block freed (host
    /// functions take ownership of the handles they are given).
    pub(crate) fn take_block(&mut self, handle: u64, what: &str) -> wasmtime::Result<Vec<u8>> {
        let bytes = self
            .kernel
            .block_bytes(handle)
            .ok_or_else(|| wasmtime::Error::new(Stop::Host(format!("invalid memory handle {handle} for {what}"))))?
            .to_vec();
        self.kernel.free(handle);
        Ok(bytes)
    }

    fn take_string(&mut self, handle: u64, what: &str) -> wasmtime::Result<String> {
        let bytes = self.take_block(handle, what)?;
        String::from_utf8(bytes).map_err(|_| wasmtime::Error::new(Stop::Host(format!("the {what} is not UTF-8"))))
    }
}

/// The linker of an engine: every host function, defined once.
fn linker(kind: EngineKind) -> Result<&'static Linker<State>, String> {
    static PLAIN: OnceLock<Result<Linker<State>, String>> = OnceLock::new();
    static FUEL: OnceLock<Result<Linker<State>, String>> = OnceLock::new();
    let cell = match kind {
        EngineKind::Plain => &PLAIN,
        EngineKind::Fuel => &FUEL,
    };
    cell.get_or_init(|| {
        let engine = engine(kind)?;
        define(engine).map_err(|e| format!("cannot define the host functions: {e}"))
    })
    .as_ref()
    .map_err(Clone::clone)
}

fn define(engine: &Engine) -> wasmtime::Result<Linker<State>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p1::add_to_linker_async(&mut linker, |state: &mut State| &mut state.wasi)?;
    super::files::cap_p1(&mut linker)?;

    // The kernel: memory blocks, input, output, error.
    linker.func_wrap(ENV, "alloc", |mut c: Caller<'_, State>, n: u64| -> wasmtime::Result<u64> {
        let state = c.data_mut();
        state.kernel.alloc(n, &mut state.core.memory).map_err(|_| wasmtime::Error::new(Stop::MemoryLimit))
    })?;
    linker.func_wrap(ENV, "free", |mut c: Caller<'_, State>, h: u64| c.data_mut().kernel.free(h))?;
    linker.func_wrap(ENV, "length", |c: Caller<'_, State>, h: u64| c.data().kernel.length(h))?;
    linker.func_wrap(ENV, "length_unsafe", |c: Caller<'_, State>, h: u64| c.data().kernel.length(h))?;
    linker.func_wrap(ENV, "load_u8", |c: Caller<'_, State>, h: u64| c.data().kernel.load_u8(h))?;
    linker.func_wrap(ENV, "load_u64", |c: Caller<'_, State>, h: u64| c.data().kernel.load_u64(h))?;
    linker.func_wrap(ENV, "store_u8", |mut c: Caller<'_, State>, h: u64, v: u32| c.data_mut().kernel.store_u8(h, v))?;
    linker
        .func_wrap(ENV, "store_u64", |mut c: Caller<'_, State>, h: u64, v: u64| c.data_mut().kernel.store_u64(h, v))?;
    linker.func_wrap(ENV, "input_load_u8", |c: Caller<'_, State>, o: u64| c.data().kernel.input_load_u8(o))?;
    linker.func_wrap(ENV, "input_load_u64", |c: Caller<'_, State>, o: u64| c.data().kernel.input_load_u64(o))?;
    linker.func_wrap(ENV, "input_length", |c: Caller<'_, State>| c.data().kernel.input_length())?;
    linker.func_wrap(ENV, "input_offset", |c: Caller<'_, State>| c.data().kernel.input_offset())?;
    linker
        .func_wrap(ENV, "input_set", |mut c: Caller<'_, State>, h: u64, n: u64| c.data_mut().kernel.input_set(h, n))?;
    linker.func_wrap(ENV, "output_set", |mut c: Caller<'_, State>, h: u64, n: u64| {
        c.data_mut().kernel.output_set(h, n)
    })?;
    linker.func_wrap(ENV, "output_length", |c: Caller<'_, State>| c.data().kernel.output_length())?;
    linker.func_wrap(ENV, "output_offset", |c: Caller<'_, State>| c.data().kernel.output_offset())?;
    linker.func_wrap(ENV, "error_set", |mut c: Caller<'_, State>, h: u64| c.data_mut().kernel.error_set(h))?;
    linker.func_wrap(ENV, "error_get", |c: Caller<'_, State>| c.data().kernel.error_get())?;
    linker.func_wrap(ENV, "memory_bytes", |c: Caller<'_, State>| c.data().kernel.memory_bytes())?;
    linker.func_wrap(ENV, "reset", |mut c: Caller<'_, State>| {
        let state = c.data_mut();
        state.kernel.reset(&mut state.core.memory);
    })?;

    // Config and variables.
    linker.func_wrap(ENV, "config_get", |mut c: Caller<'_, State>, key: u64| -> wasmtime::Result<u64> {
        let state = c.data_mut();
        let key = state.take_string(key, "config key")?;
        match state.core.config_value(&key).map(str::to_owned) {
            Some(value) => state.write_new(value.as_bytes()),
            None => Ok(0),
        }
    })?;
    linker.func_wrap(ENV, "var_get", |mut c: Caller<'_, State>, key: u64| -> wasmtime::Result<u64> {
        let state = c.data_mut();
        let key = state.take_string(key, "var key")?;
        match state.vars.get(&key).cloned() {
            Some(value) => state.write_new(&value),
            None => Ok(0),
        }
    })?;
    linker.func_wrap(ENV, "var_set", |mut c: Caller<'_, State>, key: u64, value: u64| -> wasmtime::Result<()> {
        let state = c.data_mut();
        let key = state.take_string(key, "var key")?;
        if value == 0 {
            state.vars.remove(&key);
            return Ok(());
        }
        let value = state.take_block(value, "var value")?;
        let held: usize = state.vars.iter().filter(|(k, _)| **k != key).map(|(k, v)| k.len() + v.len()).sum();
        if held + key.len() + value.len() > MAX_VAR_BYTES {
            return Err(wasmtime::Error::new(Stop::Host(format!(
                "the variable store is full ({} at most)",
                format_size(MAX_VAR_BYTES as u64)
            ))));
        }
        state.vars.insert(key, value);
        Ok(())
    })?;

    // HTTP, through the allowed-host grants.
    linker.func_wrap_async(ENV, "http_request", |mut c: Caller<'_, State>, (request, body): (u64, u64)| {
        Box::new(async move { super::http::request(&mut c, request, body).await })
    })?;
    linker.func_wrap(ENV, "http_status_code", |c: Caller<'_, State>| i32::from(c.data().http_status))?;
    linker.func_wrap(ENV, "http_headers", |mut c: Caller<'_, State>| -> wasmtime::Result<u64> {
        let state = c.data_mut();
        match &state.http_headers {
            Some(headers) => {
                let json = serde_json::to_vec(headers).unwrap_or_default();
                state.write_new(&json)
            }
            None => Ok(0),
        }
    })?;

    // Logs, into the host's tracing, tagged with the plugin's name.
    linker.func_wrap(ENV, "log_error", |c: Caller<'_, State>, h: u64| log(c, tracing::Level::ERROR, h))?;
    linker.func_wrap(ENV, "log_warn", |c: Caller<'_, State>, h: u64| log(c, tracing::Level::WARN, h))?;
    linker.func_wrap(ENV, "log_info", |c: Caller<'_, State>, h: u64| log(c, tracing::Level::INFO, h))?;
    linker.func_wrap(ENV, "log_debug", |c: Caller<'_, State>, h: u64| log(c, tracing::Level::DEBUG, h))?;
    linker.func_wrap(ENV, "log_trace", |c: Caller<'_, State>, h: u64| log(c, tracing::Level::TRACE, h))?;
    linker.func_wrap(ENV, "get_log_level", |_: Caller<'_, State>| log_level())?;
    Ok(linker)
}

/// The target of the plugins' own log events (`TOOLHOST_LOG=toolhost::guest=info`).
const LOG_TARGET: &str = "toolhost::guest";

fn log(mut caller: Caller<'_, State>, level: tracing::Level, handle: u64) -> wasmtime::Result<()> {
    let state = caller.data_mut();
    let enabled = match level {
        tracing::Level::ERROR => tracing::enabled!(target: LOG_TARGET, tracing::Level::ERROR),
        tracing::Level::WARN => tracing::enabled!(target: LOG_TARGET, tracing::Level::WARN),
        tracing::Level::INFO => tracing::enabled!(target: LOG_TARGET, tracing::Level::INFO),
        tracing::Level::DEBUG => tracing::enabled!(target: LOG_TARGET, tracing::Level::DEBUG),
        tracing::Level::TRACE => tracing::enabled!(target: LOG_TARGET, tracing::Level::TRACE),
    };
    if !enabled {
        state.kernel.free(handle);
        return Ok(());
    }
    // At most a line's worth is read, within the call's log budget.
    let Some(bytes) = state.kernel.block_bytes(handle) else {
        return Err(wasmtime::Error::new(Stop::Host(format!("invalid memory handle {handle} for log message"))));
    };
    // Redacted before it is cut, so no secret is cut in two.
    let head = state.core.env.redactor.redact_head(bytes, output::MAX_LOG_LINE_BYTES);
    let admitted = state.core.admit_log(&head, bytes.len());
    state.kernel.free(handle);
    let Some(message) = admitted else { return Ok(()) };
    let message = state.core.log_line(&message);
    let plugin = state.core.env.name.as_str();
    match level {
        tracing::Level::ERROR => tracing::error!(target: LOG_TARGET, plugin, "{message}"),
        tracing::Level::WARN => tracing::warn!(target: LOG_TARGET, plugin, "{message}"),
        tracing::Level::INFO => tracing::info!(target: LOG_TARGET, plugin, "{message}"),
        tracing::Level::DEBUG => tracing::debug!(target: LOG_TARGET, plugin, "{message}"),
        tracing::Level::TRACE => tracing::trace!(target: LOG_TARGET, plugin, "{message}"),
    }
    Ok(())
}

/// Extism's numbering: trace 0 … error 4, `i32::MAX` when logging is off.
fn log_level() -> i32 {
    use tracing::level_filters::LevelFilter;
    match LevelFilter::current() {
        LevelFilter::OFF => i32::MAX,
        LevelFilter::TRACE => 0,
        LevelFilter::DEBUG => 1,
        LevelFilter::INFO => 2,
        LevelFilter::WARN => 3,
        _ => 4,
    }
}

/// The shape of an exported entry point: `() -> i32` (a return code) or
/// `() -> ()`, as Extism accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    ReturnsCode,
    ReturnsNothing,
}

/// A guest language runtime to start after instantiation, as Extism does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Init {
    None,
    /// `__wasm_call_ctors` or `_initialize`.
    Wasi(&'static str),
    /// GHC's `hs_init`, after `_initialize` if the module is a reactor.
    Haskell {
        reactor: bool,
    },
}

/// A compiled Extism plugin with its imports resolved.
pub(crate) struct ExtismModule {
    kind: EngineKind,
    pre: InstancePre<State>,
    describe: Shape,
    call: Shape,
    init: Init,
}

/// Why a module cannot be an Extism plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NotAPlugin(pub(crate) String);

impl ExtismModule {
    /// Check a compiled module's imports and exports and resolve its imports.
    pub(crate) fn new(kind: EngineKind, module: Module) -> Result<ExtismModule, NotAPlugin> {
        for import in module.imports() {
            let (namespace, name) = (import.module(), import.name());
            match namespace {
                ENV => {
                    let Some((_, params, results)) = ENV_FUNCTIONS.iter().find(|(n, _, _)| *n == name) else {
                        return Err(NotAPlugin(format!(
                            "it imports `{ENV}::{name}`, which this host does not know; the plugin kit \
                             that built it may be newer than toolhost"
                        )));
                    };
                    let ExternType::Func(ty) = import.ty() else {
                        return Err(NotAPlugin(format!(
                            "it imports `{ENV}::{name}` as something other than a function"
                        )));
                    };
                    let same = ty.params().map(|t| t.to_string()).eq(params.iter().map(|t| t.to_string()))
                        && ty.results().map(|t| t.to_string()).eq(results.iter().map(|t| t.to_string()));
                    if !same {
                        return Err(NotAPlugin(format!(
                            "it imports `{ENV}::{name}` with the type {ty}, but the function has the type {}",
                            describe_signature(params, results)
                        )));
                    }
                }
                WASI_P1 => {}
                USER => {
                    return Err(NotAPlugin(format!(
                        "it imports the host function `{USER}::{name}`; toolhost provides no user host functions"
                    )));
                }
                other => {
                    return Err(NotAPlugin(format!(
                        "it imports `{other}::{name}`, which toolhost does not provide (only `{ENV}` and `{WASI_P1}`)"
                    )));
                }
            }
        }
        let shape = |export: &str| -> Result<Shape, NotAPlugin> {
            let missing = || {
                NotAPlugin(format!("it does not export `{export}` (a toolhost plugin exports `describe` and `call`)"))
            };
            let ty = module.get_export(export).ok_or_else(missing)?;
            let ExternType::Func(ty) = ty else {
                return Err(NotAPlugin(format!("its export `{export}` is not a function")));
            };
            let results: Vec<ValType> = ty.results().collect();
            match (ty.params().len(), results.as_slice()) {
                (0, []) => Ok(Shape::ReturnsNothing),
                (0, [ValType::I32]) => Ok(Shape::ReturnsCode),
                _ => Err(NotAPlugin(format!(
                    "its export `{export}` has the type {ty}; an entry point takes nothing and returns an i32 or nothing"
                ))),
            }
        };
        let describe = shape(crate::protocol::exports::DESCRIBE)?;
        let call = shape(crate::protocol::exports::CALL)?;
        let init = detect_init(&module);
        let linker = linker(kind).map_err(NotAPlugin)?;
        let pre = linker
            .instantiate_pre(&module)
            .map_err(|e| NotAPlugin(format!("its imports cannot be satisfied ({e})")))?;
        Ok(ExtismModule { kind, pre, describe, call, init })
    }

    /// A new instance, started (its language runtime initialised) under
    /// the plugin's limits.
    pub(crate) async fn instantiate(&self, env: &Arc<HostEnv>) -> Result<ExtismInstance, Fault> {
        let (core, mut wasi) = GuestCore::new(env)?;
        let state = State {
            core,
            kernel: Kernel::default(),
            wasi: wasi.build_p1(),
            vars: BTreeMap::new(),
            http_status: 0,
            http_headers: None,
        };
        let mut store = guest::new_store(self.kind, state)?;
        let _running = ticker::running();
        let deadline = store.data().core.deadline;
        let instance = guest::bounded(deadline, self.pre.instantiate_async(&mut store))
            .await
            .map_err(|e| store.data().core.fault(&e))?;
        let func = |store: &mut Store<State>, name: &str| {
            instance.get_func(&mut *store, name).ok_or_else(|| Fault {
                kind: FaultKind::Runtime,
                message: format!("the instance has no function `{name}`"),
            })
        };
        match self.init {
            Init::None => {}
            Init::Wasi(name) => {
                let init = func(&mut store, name)?;
                guest::bounded(deadline, init.call_async(&mut store, &[], &mut []))
                    .await
                    .map_err(|e| store.data().core.fault(&e))?;
            }
            Init::Haskell { reactor } => {
                if reactor {
                    let init = func(&mut store, "_initialize")?;
                    guest::bounded(deadline, init.call_async(&mut store, &[], &mut []))
                        .await
                        .map_err(|e| store.data().core.fault(&e))?;
                }
                let hs_init = func(&mut store, "hs_init")?;
                let ty = hs_init.ty(&store);
                let params: Vec<Val> = ty.params().map(|_| Val::I32(0)).collect();
                let mut results: Vec<Val> = ty.results().map(|_| Val::I32(0)).collect();
                guest::bounded(deadline, hs_init.call_async(&mut store, &params, &mut results))
                    .await
                    .map_err(|e| store.data().core.fault(&e))?;
            }
        }
        let entry = |store: &mut Store<State>, name: &str, shape: Shape| -> Result<Entry, Fault> {
            let runtime = |e: wasmtime::Error| Fault { kind: FaultKind::Runtime, message: e.to_string() };
            Ok(match shape {
                Shape::ReturnsCode => Entry::Code(instance.get_typed_func(&mut *store, name).map_err(runtime)?),
                Shape::ReturnsNothing => Entry::Unit(instance.get_typed_func(&mut *store, name).map_err(runtime)?),
            })
        };
        let describe = entry(&mut store, crate::protocol::exports::DESCRIBE, self.describe)?;
        let call = entry(&mut store, crate::protocol::exports::CALL, self.call)?;
        Ok(ExtismInstance { store, describe, call })
    }
}

fn describe_signature(params: &[ValType], results: &[ValType]) -> String {
    let list = |types: &[ValType]| types.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(" ");
    format!("(func (param {}) (result {}))", list(params), list(results))
}

/// Extism's detection of a guest runtime to initialise.
fn detect_init(module: &Module) -> Init {
    let nullary = |name: &str| matches!(module.get_export(name), Some(ExternType::Func(ty)) if ty.params().len() == 0 && ty.results().len() == 0);
    if matches!(module.get_export("hs_init"), Some(ExternType::Func(_))) {
        return Init::Haskell { reactor: nullary("_initialize") };
    }
    if module.get_export("__wasm_call_ctors").is_some() {
        return if nullary("__wasm_call_ctors") { Init::Wasi("__wasm_call_ctors") } else { Init::None };
    }
    if module.get_export("_initialize").is_some() && nullary("_initialize") {
        return Init::Wasi("_initialize");
    }
    Init::None
}

impl Guest for State {
    fn core(&self) -> &GuestCore {
        &self.core
    }

    fn core_mut(&mut self) -> &mut GuestCore {
        &mut self.core
    }
}

/// An exported entry point, typed.
enum Entry {
    Code(TypedFunc<(), i32>),
    Unit(TypedFunc<(), ()>),
}

/// Which entry point to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Export {
    /// `describe`.
    Describe,
    /// `call`.
    Call,
}

/// One instance of an Extism plugin, with its store.
pub(crate) struct ExtismInstance {
    store: Store<State>,
    describe: Entry,
    call: Entry,
}

impl ExtismInstance {
    /// Run an entry point with `input` and return its output, or how it
    /// failed. An instance whose run failed must be dropped.
    /// `secrets`: the ids of the secrets this run may read.
    pub(crate) async fn run(&mut self, export: Export, input: &[u8], secrets: &ToolSecrets) -> Result<Vec<u8>, Fault> {
        let state = self.store.data_mut();
        state.kernel.reset(&mut state.core.memory);
        state.http_status = 0;
        state.http_headers = None;
        if state.kernel.set_input(input, &mut state.core.memory).is_err() {
            return Err(state.core.memory_fault());
        }
        guest::prepare(&mut self.store, secrets);
        let entry = match export {
            Export::Describe => &self.describe,
            Export::Call => &self.call,
        };
        let _running = ticker::running();
        let deadline = self.store.data().core.deadline;
        let ran = match entry {
            Entry::Code(f) => guest::bounded(deadline, f.call_async(&mut self.store, ())).await,
            Entry::Unit(f) => guest::bounded(deadline, f.call_async(&mut self.store, ())).await.map(|()| 0),
        };
        let state = self.store.data();
        let code = match ran {
            Ok(code) => code,
            // A WASI exit with status 0 is a normal return (Extism's reading).
            Err(e) if e.downcast_ref::<I32Exit>().is_some_and(|exit| exit.0 == 0) => 0,
            Err(e) => {
                let mut fault = state.core.fault(&e);
                // A guest that set an error before it trapped said why.
                if fault.kind == FaultKind::Trap
                    && let Some(message) = state.kernel.error_message()
                {
                    let message = output::short_message(message, &state.core.env.redactor);
                    fault.message = format!("{}; the plugin's error: {message}", fault.message);
                }
                return Err(fault);
            }
        };
        if let Some(message) = state.kernel.error_message() {
            // Only the first few KiB are read: a message is no output.
            return Err(Fault {
                kind: FaultKind::Error,
                message: output::short_message(message, &state.core.env.redactor),
            });
        }
        if code != 0 {
            let mut message = format!("it returned {code} without an error message");
            if let Some(words) = state.core.stderr_words() {
                message.push_str(&format!("; its stderr ends with: {words}"));
            }
            return Err(Fault { kind: FaultKind::Error, message });
        }
        state.core.check_output_size(state.kernel.output_length())?;
        Ok(state.kernel.output().to_vec())
    }

    /// Bytes this instance holds against its memory limit (linear memories
    /// and kernel memory).
    pub(crate) fn memory_used(&self) -> usize {
        self.store.data().core.memory.used()
    }

    /// The output cap of its calls.
    pub(crate) fn max_output_bytes(&self) -> usize {
        self.store.data().core.env.limits.max_output_bytes
    }
}
