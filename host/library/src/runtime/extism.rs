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
use std::sync::Arc;

use wasmtime::{
    AsContextMut, Caller, ExternType, FuncType, Instance, InstancePre, Linker, Module, Store, TypedFunc, Val, ValType,
};
use wasmtime_wasi::I32Exit;
use wasmtime_wasi::p1::WasiP1Ctx;

/// The host functions of hyper-mcp's `extism:host/user` (talking back to
/// the client, keyring secrets, OAuth tokens): part of this flavour.
pub(crate) mod user;

/// Extism's own host functions (`extism:host/env`).
mod env;

use env::Vars;
pub(crate) use env::linker;

use super::compile::Mapping;
use super::files::P1Guest;
use super::guest::{self, Guest, GuestCore, HostEnv, RunOptions};
use super::kernel::{self, Kernel};
use super::outcome::Stop;
use super::output;
use crate::error::{Fault, FaultKind};
use crate::host_fn::{HostCall, HostFunction};

/// The import module of Extism's host functions.
pub(crate) const ENV: &str = "extism:host/env";
/// The import module of host functions the embedding program supplies
/// ([`HostFunction`]) and of hyper-mcp's ([`super::user`]).
use user::USER;
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

/// The data of one instance's store.
pub(crate) struct State {
    /// Grants, limits, memory budget, deadline, captured output.
    pub(crate) core: GuestCore,
    pub(crate) kernel: Kernel,
    pub(crate) wasi: WasiP1Ctx,
    vars: Vars,
    pub(crate) http_status: u16,
    pub(crate) http_headers: Option<BTreeMap<String, String>>,
}

impl kernel::HasKernel for State {
    fn kernel(&self) -> &Kernel {
        &self.kernel
    }

    fn kernel_mut(&mut self) -> (&mut Kernel, &mut dyn kernel::Budget) {
        (&mut self.kernel, &mut self.core.memory)
    }
}

/// The kernel memory's bytes and the state, borrowed together.
pub(crate) fn kernel_parts<'a>(
    store: impl Into<wasmtime::StoreContextMut<'a, State>>,
) -> wasmtime::Result<(&'a mut [u8], &'a mut State)> {
    kernel::parts(store).ok_or_else(|| wasmtime::Error::new(Stop::Host("the kernel memory is missing".to_owned())))
}

/// Copy bytes into a new kernel block (the null handle for none),
/// trapping when the memory budget is spent.
pub(crate) fn write_new(store: &mut impl AsContextMut<Data = State>, bytes: &[u8]) -> wasmtime::Result<u64> {
    kernel::write_new(store, bytes).map_err(|_| wasmtime::Error::new(Stop::MemoryLimit))
}

/// The shape of an exported entry point: `() -> i32` (a return code) or
/// `() -> ()`, as Extism accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    ReturnsCode,
    ReturnsNothing,
}

/// An entry point a module exports: its name and shape.
type EntryPoint = (&'static str, Shape);

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

/// Which published interface an Extism plugin speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Interface {
    /// `describe` and `call`: mcp.run's servlets, hyper-mcp's v1 plugins,
    /// toolhost's SDK.
    Servlet,
    /// hyper-mcp's v2 (chosen, as hyper-mcp chooses, when a module does not
    /// export both `describe` and `call`): `list_tools`, `call_tool` and
    /// the rest, each optional, each taking `{"request", "context"}`.
    V2,
}

/// hyper-mcp v2's exports of tools; the rest of its exports are
/// [`OFFER_EXPORTS`].
const V2_TOOL_EXPORTS: &[&str] = &["list_tools", "call_tool"];

/// The exports of what a plugin offers besides tools, each optional, with
/// hyper-mcp v2's inputs; a servlet may export them too.
pub(crate) const OFFER_EXPORTS: &[&str] = &[
    "list_prompts",
    "get_prompt",
    "list_resources",
    "list_resource_templates",
    "read_resource",
    "complete",
    "on_roots_list_changed",
];

/// A compiled Extism plugin with its imports checked.
pub(crate) struct ExtismModule {
    module: Module,
    /// The host functions it imports (the engine's, or a copy with the
    /// embedder's functions).
    linker: Arc<Linker<State>>,
    /// The kernel's Wasm half, instantiated first in each store.
    kernel: InstancePre<State>,
    interface: Interface,
    /// The entry points the module exports, by name.
    entries: Vec<EntryPoint>,
    init: Init,
    /// It imports `notify_tool_list_changed`: its tool list may change
    /// while it runs.
    dynamic_tools: bool,
    /// Its share of the cache entry it was mapped from, if it was.
    _mapping: Mapping,
}

/// Why a module cannot be an Extism plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NotAPlugin(pub(crate) String);

impl ExtismModule {
    /// The same module, holding its share of the cache entry it was mapped
    /// from (for as long as the plugin holds the module).
    pub(crate) fn keeping(self, mapping: Mapping) -> ExtismModule {
        ExtismModule { _mapping: mapping, ..self }
    }

    /// Check a compiled module's imports and exports and resolve its imports.
    /// `functions`: the host functions the embedding program supplies (the
    /// module may import any of them from `extism:host/user`; one named as
    /// a function of hyper-mcp's takes its place).
    pub(crate) fn new(
        linker: &Arc<Linker<State>>,
        kernel: &InstancePre<State>,
        module: Module,
        functions: &[HostFunction],
    ) -> Result<ExtismModule, NotAPlugin> {
        let (user, dynamic_tools) = resolve_imports(&module, functions)?;
        let (interface, entries) = entry_points(&module)?;
        let init = detect_init(&module);
        let cannot = |e: wasmtime::Error| NotAPlugin(format!("its imports cannot be satisfied ({e})"));
        let linker = if user.is_empty() {
            Arc::clone(linker)
        } else {
            let mut linker = Linker::clone(linker);
            // The embedder's function takes the place of hyper-mcp's of
            // the same name.
            linker.allow_shadowing(true);
            for (function, ty, returns) in user {
                define_user(&mut linker, function, ty, returns).map_err(cannot)?;
            }
            Arc::new(linker)
        };
        // Every import is checked here, once, with its type.
        linker.instantiate_pre(&module).map_err(cannot)?;
        Ok(ExtismModule {
            module,
            linker,
            kernel: kernel.clone(),
            interface,
            entries,
            init,
            dynamic_tools,
            _mapping: Mapping::default(),
        })
    }

    /// The interface the plugin speaks.
    pub(crate) fn interface(&self) -> Interface {
        self.interface
    }

    /// Whether the module exports `name`.
    pub(crate) fn exports(&self, name: &str) -> bool {
        self.entries.iter().any(|(n, _)| *n == name)
    }

    /// Whether the plugin may say its tool list changed.
    pub(crate) fn dynamic_tools(&self) -> bool {
        self.dynamic_tools
    }

    /// A new instance, started (its language runtime initialised) under
    /// the plugin's limits.
    pub(crate) async fn instantiate(&self, env: &Arc<HostEnv>) -> Result<ExtismInstance, Fault> {
        let (core, mut wasi) = GuestCore::new(env)?;
        let state = State {
            core,
            kernel: Kernel::default(),
            wasi: wasi.build_p1(),
            vars: Vars::default(),
            http_status: 0,
            http_headers: None,
        };
        let mut store = guest::new_store(self.module.engine(), state);
        let ticker = env.ticker.clone();
        let _running = ticker.running();
        let deadline = store.data().core.deadline;
        let runtime = |e: wasmtime::Error| Fault::new(FaultKind::Runtime, e.to_string());
        // The kernel first: the plugin imports its Wasm half's functions.
        let kernel = guest::bounded(&ticker, deadline, self.kernel.instantiate_async(&mut store))
            .await
            .map_err(|e| store.data().core.fault(e))?;
        let memory = kernel
            .get_memory(&mut store, "memory")
            .ok_or_else(|| Fault::new(FaultKind::Runtime, "the kernel has no memory".to_owned()))?;
        store.data_mut().kernel.attach(memory);
        let mut imports = Vec::with_capacity(self.module.imports().len());
        for import in self.module.imports() {
            let item = if import.module() == ENV && kernel::WASM_FUNCTIONS.contains(&import.name()) {
                kernel.get_export(&mut store, import.name())
            } else {
                self.linker.get_by_import(&mut store, &import)
            };
            imports.push(item.ok_or_else(|| {
                Fault::new(FaultKind::Runtime, format!("cannot link `{}::{}`", import.module(), import.name()))
            })?);
        }
        let instance = guest::bounded(&ticker, deadline, Instance::new_async(&mut store, &self.module, &imports))
            .await
            .map_err(|e| store.data().core.fault(e))?;
        let func = |store: &mut Store<State>, name: &str| {
            instance
                .get_func(&mut *store, name)
                .ok_or_else(|| Fault::new(FaultKind::Runtime, format!("the instance has no function `{name}`")))
        };
        match self.init {
            Init::None => {}
            Init::Wasi(name) => {
                let init = func(&mut store, name)?;
                guest::bounded(&ticker, deadline, init.call_async(&mut store, &[], &mut []))
                    .await
                    .map_err(|e| store.data().core.fault(e))?;
            }
            Init::Haskell { reactor } => {
                if reactor {
                    let init = func(&mut store, "_initialize")?;
                    guest::bounded(&ticker, deadline, init.call_async(&mut store, &[], &mut []))
                        .await
                        .map_err(|e| store.data().core.fault(e))?;
                }
                let hs_init = func(&mut store, "hs_init")?;
                let ty = hs_init.ty(&store);
                let params: Vec<Val> = ty.params().map(|_| Val::I32(0)).collect();
                let mut results: Vec<Val> = ty.results().map(|_| Val::I32(0)).collect();
                guest::bounded(&ticker, deadline, hs_init.call_async(&mut store, &params, &mut results))
                    .await
                    .map_err(|e| store.data().core.fault(e))?;
            }
        }
        let mut entries = Vec::with_capacity(self.entries.len());
        for &(name, shape) in &self.entries {
            let entry = match shape {
                Shape::ReturnsCode => Entry::Code(instance.get_typed_func(&mut store, name).map_err(runtime)?),
                Shape::ReturnsNothing => Entry::Unit(instance.get_typed_func(&mut store, name).map_err(runtime)?),
            };
            entries.push((name, entry));
        }
        Ok(ExtismInstance { store, ticker: ticker.clone(), interface: self.interface, entries })
    }
}

/// An embedder's function a module imports: the function, the type it is
/// imported with, and whether it returns a memory handle.
type EmbedderImport = (HostFunction, FuncType, bool);

/// Check every import of a module against what toolhost serves and what
/// the embedder supplies: the embedder's functions it imports (each with
/// its type), and whether it imports `notify_tool_list_changed`.
fn resolve_imports(module: &Module, functions: &[HostFunction]) -> Result<(Vec<EmbedderImport>, bool), NotAPlugin> {
    let mut user = Vec::new();
    let mut dynamic_tools = false;
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
                check_type(&import.ty(), ENV, name, params, results)?;
            }
            WASI_P1 => {}
            USER => {
                if let Some(function) = functions.iter().find(|f| f.name() == name) {
                    let ExternType::Func(ty) = import.ty() else {
                        return Err(NotAPlugin(format!(
                            "it imports `{USER}::{name}` as something other than a function"
                        )));
                    };
                    user.push(embedders(function, ty)?);
                    continue;
                }
                let Some(&(_, takes, returns)) = user::FUNCTIONS.iter().find(|(n, _, _)| *n == name) else {
                    let supplied: Vec<&str> = functions.iter().map(HostFunction::name).collect();
                    return Err(NotAPlugin(format!(
                        "it imports the host function `{USER}::{name}`, which is neither one of hyper-mcp's \
                         that toolhost serves nor one the host supplies{}",
                        if supplied.is_empty() {
                            " (it supplies none)".to_owned()
                        } else {
                            format!(" (it supplies {})", supplied.join(", "))
                        }
                    )));
                };
                let (params, results) = user::signature(takes, returns);
                check_type(&import.ty(), USER, name, &params, &results)?;
                dynamic_tools |= name == user::NOTIFY_TOOL_LIST_CHANGED;
            }
            other => {
                return Err(NotAPlugin(format!(
                    "it imports `{other}::{name}`, which toolhost does not provide (only `{ENV}`, `{USER}` and `{WASI_P1}`)"
                )));
            }
        }
    }
    Ok((user, dynamic_tools))
}

/// The interface a module speaks and the entry points it exports, each
/// with its shape.
fn entry_points(module: &Module) -> Result<(Interface, Vec<EntryPoint>), NotAPlugin> {
    let shape = |export: &str| -> Result<Option<Shape>, NotAPlugin> {
        let Some(ty) = module.get_export(export) else { return Ok(None) };
        let ExternType::Func(ty) = ty else {
            return Err(NotAPlugin(format!("its export `{export}` is not a function")));
        };
        let results: Vec<ValType> = ty.results().collect();
        match (ty.params().len(), results.as_slice()) {
            (0, []) => Ok(Some(Shape::ReturnsNothing)),
            (0, [ValType::I32]) => Ok(Some(Shape::ReturnsCode)),
            _ => Err(NotAPlugin(format!(
                "its export `{export}` has the type {ty}; an entry point takes nothing and returns an i32 or nothing"
            ))),
        }
    };
    let (describe, call) = (crate::protocol::exports::DESCRIBE, crate::protocol::exports::CALL);
    let servlet = [describe, call];
    let has = |name: &str| matches!(module.get_export(name), Some(ExternType::Func(_)));
    let servlet_and_offers: Vec<&'static str> = servlet.iter().chain(OFFER_EXPORTS).copied().collect();
    let v2_exports: Vec<&'static str> = V2_TOOL_EXPORTS.iter().chain(OFFER_EXPORTS).copied().collect();
    let (interface, names): (Interface, &[&'static str]) = if servlet.iter().all(|n| has(n)) {
        (Interface::Servlet, &servlet_and_offers)
    } else if v2_exports.iter().any(|n| has(n)) {
        (Interface::V2, &v2_exports)
    } else {
        let missing = if has(describe) { call } else { describe };
        return Err(NotAPlugin(format!(
            "it does not export `{missing}`: a plugin exports `describe` and `call` (a servlet), or \
             hyper-mcp v2's `list_tools` and `call_tool`"
        )));
    };
    let mut entries = Vec::new();
    for &name in names {
        if let Some(shape) = shape(name)? {
            entries.push((name, shape));
        }
    }
    Ok((interface, entries))
}

/// Check an import's type against a function's.
fn check_type(
    ty: &ExternType,
    namespace: &str,
    name: &str,
    params: &[ValType],
    results: &[ValType],
) -> Result<(), NotAPlugin> {
    let ExternType::Func(ty) = ty else {
        return Err(NotAPlugin(format!("it imports `{namespace}::{name}` as something other than a function")));
    };
    let same = ty.params().map(|t| t.to_string()).eq(params.iter().map(|t| t.to_string()))
        && ty.results().map(|t| t.to_string()).eq(results.iter().map(|t| t.to_string()));
    if !same {
        return Err(NotAPlugin(format!(
            "it imports `{namespace}::{name}` with the type {ty}, but the function has the type {}",
            describe_signature(params, results)
        )));
    }
    Ok(())
}

/// An embedder's function as the plugin imports it: the function, the
/// import's type, and whether it returns a handle.
fn embedders(function: &HostFunction, ty: FuncType) -> Result<EmbedderImport, NotAPlugin> {
    let name = function.name();
    let handles = match function.inputs() {
        1 => "1 memory handle (i64)".to_owned(),
        n => format!("{n} memory handles (i64)"),
    };
    let takes_handles = ty.params().len() == function.inputs() && ty.params().all(|t| matches!(t, ValType::I64));
    let results: Vec<ValType> = ty.results().collect();
    let returns = match results.as_slice() {
        [] => false,
        [ValType::I64] => true,
        _ => {
            return Err(NotAPlugin(format!(
                "it imports `{USER}::{name}` with the type {ty}; the host function takes {handles} and returns one or nothing"
            )));
        }
    };
    if !takes_handles {
        return Err(NotAPlugin(format!(
            "it imports `{USER}::{name}` with the type {ty}, but the host function takes {handles}"
        )));
    }
    Ok((function.clone(), ty, returns))
}

/// Define a host function of the embedding program's in `linker`: the
/// guest passes memory handles; the function gets their bytes (read, not
/// freed: the guest owns its blocks) and its answer comes back as a new
/// block, charged to the instance's memory budget. It runs on the call's
/// task, within the call's deadline.
fn define_user(
    linker: &mut Linker<State>,
    function: HostFunction,
    ty: FuncType,
    returns: bool,
) -> wasmtime::Result<()> {
    let name = function.name().to_owned();
    linker.func_new_async(
        USER,
        &name,
        ty,
        move |mut caller: Caller<'_, State>, params: &[Val], results: &mut [Val]| {
            let function = function.clone();
            // The import's type was checked at load: every parameter is an i64.
            let handles: Vec<u64> = params.iter().filter_map(Val::i64).map(|h| h as u64).collect();
            Box::new(async move {
                let (mem, state) = kernel_parts(&mut caller)?;
                let mut inputs = Vec::with_capacity(handles.len());
                for handle in handles {
                    let bytes = state.kernel.block(mem, handle).ok_or_else(|| {
                        wasmtime::Error::new(Stop::Host(format!(
                            "invalid memory handle {handle} passed to the host function `{}`",
                            function.name()
                        )))
                    })?;
                    inputs.push(bytes.to_vec());
                }
                let call = HostCall::new(state.core.env.name.clone(), inputs, state.core.env.limits.max_output_bytes);
                let answer = function.run(call).await.map_err(|message| {
                    wasmtime::Error::new(Stop::Host(format!(
                        "the host function `{}` failed: {message}",
                        function.name()
                    )))
                })?;
                if returns {
                    results[0] = Val::I64(write_new(&mut caller, &answer)? as i64);
                }
                Ok(())
            })
        },
    )?;
    Ok(())
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

impl P1Guest for State {
    fn wasi_p1(&mut self) -> &mut WasiP1Ctx {
        &mut self.wasi
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
    /// `describe` (v2: `list_tools`).
    Describe,
    /// `call` (v2: `call_tool`).
    Call,
    /// One of [`OFFER_EXPORTS`].
    Offer(&'static str),
}

impl Export {
    /// The export's name in `interface`.
    fn name(self, interface: Interface) -> &'static str {
        match (interface, self) {
            (Interface::Servlet, Export::Describe) => crate::protocol::exports::DESCRIBE,
            (Interface::Servlet, Export::Call) => crate::protocol::exports::CALL,
            (Interface::V2, Export::Describe) => "list_tools",
            (Interface::V2, Export::Call) => "call_tool",
            (_, Export::Offer(name)) => name,
        }
    }
}

/// The input of a v2 plugin's `list_tools`: its request context.
const V2_LIST_TOOLS_INPUT: &[u8] = br#"{"context":{"id":"toolhost-list-tools","_meta":{}}}"#;

/// One instance of an Extism plugin, with its store.
pub(crate) struct ExtismInstance {
    store: Store<State>,
    /// The runtime's ticker, kept here so that a call borrows it rather
    /// than cloning it (a reference count every core would write).
    ticker: super::ticker::Ticker,
    interface: Interface,
    entries: Vec<(&'static str, Entry)>,
}

impl ExtismInstance {
    /// The engine its code was compiled for.
    pub(crate) fn engine(&self) -> &wasmtime::Engine {
        self.store.engine()
    }

    /// Run an entry point with `input` and hand its output to `read`, where
    /// it lies in the kernel's memory (not copied out first), or say how it
    /// failed. An instance whose run failed must be dropped.
    pub(crate) async fn run<R>(
        &mut self,
        export: Export,
        input: &[u8],
        run: &RunOptions<'_>,
        read: impl FnOnce(&[u8]) -> R,
    ) -> Result<R, Fault> {
        let name = export.name(self.interface);
        let Some(index) = self.entries.iter().position(|(n, _)| *n == name) else {
            // A v2 plugin exports what it offers: no `list_tools`, no tools.
            return match export {
                Export::Describe => Ok(read(br#"{"tools":[]}"#)),
                Export::Call => {
                    Err(Fault::new(FaultKind::Error, format!("it lists tools but exports no `{name}` to call them")))
                }
                Export::Offer(_) => Err(Fault::new(FaultKind::Error, format!("it exports no `{name}`"))),
            };
        };
        let input = match (self.interface, export) {
            (Interface::V2, Export::Describe) => V2_LIST_TOOLS_INPUT,
            _ => input,
        };
        let state = self.store.data_mut();
        state.http_status = 0;
        state.http_headers = None;
        if kernel::start(&mut self.store, input).is_err() {
            return Err(self.store.data().core.memory_fault());
        }
        guest::prepare(&mut self.store, run);
        let entry = &self.entries[index].1;
        let ticker = &self.ticker;
        let running = ticker.running();
        let deadline = self.store.data().core.deadline;
        let ran = match entry {
            Entry::Code(f) => guest::bounded(ticker, deadline, f.call_async(&mut self.store, ())).await,
            Entry::Unit(f) => guest::bounded(ticker, deadline, f.call_async(&mut self.store, ())).await.map(|()| 0),
        };
        // (The guest is done: its output is read without the ticker.)
        drop(running);
        let (mem, state) = kernel_parts(&mut self.store).map_err(|e| Fault::new(FaultKind::Runtime, e.to_string()))?;
        let code = match ran {
            Ok(code) => code,
            // A WASI exit with status 0 is a normal return (Extism's reading).
            Err(e) if e.downcast_ref::<I32Exit>().is_some_and(|exit| exit.0 == 0) => 0,
            Err(e) => {
                let mut fault = state.core.fault(e);
                // A guest that set an error before it trapped said why.
                if fault.kind == FaultKind::Trap
                    && let Some(message) = state.kernel.error_message(mem)
                {
                    let message = output::short_message(message, &state.core.env.redactor);
                    fault.message = format!("{}; the plugin's error: {message}", fault.message);
                }
                return Err(fault);
            }
        };
        if let Some(message) = state.kernel.error_message(mem) {
            // Only the first few KiB are read: a message is no output.
            return Err(Fault::new(FaultKind::Error, output::short_message(message, &state.core.env.redactor)));
        }
        if code != 0 {
            let mut message = format!("it returned {code} without an error message");
            if let Some(words) = state.core.stderr_words() {
                message.push_str(&format!("; its stderr ends with: {words}"));
            }
            return Err(Fault::new(FaultKind::Error, message));
        }
        state.core.check_output_size(state.kernel.output_length())?;
        Ok(read(state.kernel.output(mem)))
    }

    /// Bytes this instance holds against its memory limit (linear memories
    /// and kernel memory).
    pub(crate) fn memory_used(&self) -> usize {
        self.store.data().core.memory.used()
    }

    /// What the last run used.
    pub(crate) fn usage(&self) -> super::outcome::Usage {
        guest::usage(&self.store)
    }

    /// Let go of what the last run's caller lent it ([`guest::release`]).
    pub(crate) fn release(&mut self) {
        guest::release(&mut self.store);
    }

    /// The output cap of its calls.
    pub(crate) fn max_output_bytes(&self) -> usize {
        self.store.data().core.env.limits.max_output_bytes
    }
}
