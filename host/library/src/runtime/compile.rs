//! Compiling a plugin: the compiled form of either flavour, and how it was
//! obtained (compiled now, or loaded from the compiled-module cache of the
//! `cache` feature).

use std::time::{Duration, Instant};

#[cfg(feature = "component")]
use wasmtime::component::Component;
use wasmtime::{Engine, Module};

use super::PluginKind;

/// A compiled plugin of either flavour (cheap to clone: wasmtime shares the
/// code), and, when it was mapped from a cache entry, what keeps that
/// mapping shared with the process's other loads of the entry.
#[derive(Clone)]
pub(crate) enum Compiled {
    Module(Module, Mapping),
    #[cfg(feature = "component")]
    Component(Component, Mapping),
}

/// A share of a cache entry's mapping: while one is held (by a plugin's
/// module), a load of the same entry in this process takes the module
/// already mapped instead of mapping the file again. Empty for a module
/// that was compiled, not mapped.
#[derive(Clone, Default)]
pub(crate) struct Mapping {
    _held: Option<std::sync::Arc<Compiled>>,
}

impl Mapping {
    /// A share of `held`, which the process's table of mapped entries
    /// watches through a weak reference.
    #[cfg(feature = "cache")]
    pub(crate) fn of(held: std::sync::Arc<Compiled>) -> Mapping {
        Mapping { _held: Some(held) }
    }
}

impl Compiled {
    /// The core module, if it is one (not a component).
    pub(crate) fn module(&self) -> Option<&Module> {
        match self {
            Compiled::Module(module, _) => Some(module),
            #[cfg(feature = "component")]
            Compiled::Component(..) => None,
        }
    }

    /// Whether it was compiled by `engine` (it can only run there).
    #[cfg(feature = "cache")]
    pub(crate) fn is_for(&self, engine: &Engine) -> bool {
        match self {
            Compiled::Module(module, _) => Engine::same(module.engine(), engine),
            #[cfg(feature = "component")]
            Compiled::Component(component, _) => Engine::same(component.engine(), engine),
        }
    }

    /// The same code, holding `mapping`.
    #[cfg(feature = "cache")]
    pub(crate) fn with_mapping(self, mapping: Mapping) -> Compiled {
        match self {
            Compiled::Module(module, _) => Compiled::Module(module, mapping),
            #[cfg(feature = "component")]
            Compiled::Component(component, _) => Compiled::Component(component, mapping),
        }
    }

    /// Compile `wasm` as a plugin of `kind`.
    pub(crate) fn compile(engine: &Engine, wasm: &[u8], kind: PluginKind) -> wasmtime::Result<Compiled> {
        Ok(match kind {
            PluginKind::Extism => Compiled::Module(Module::new(engine, wasm)?, Mapping::default()),
            #[cfg(feature = "component")]
            PluginKind::Component => Compiled::Component(Component::new(engine, wasm)?, Mapping::default()),
            #[cfg(not(feature = "component"))]
            PluginKind::Component => {
                return Err(wasmtime::format_err!(
                    "it is a component, and this toolhost was built without its `component` feature"
                ));
            }
            PluginKind::Builtin => return Err(wasmtime::format_err!("built-in tools are not Wasm")),
        })
    }

    /// Compile, timed, with no cache.
    pub(crate) fn compile_uncached(
        engine: &Engine,
        wasm: &[u8],
        kind: PluginKind,
    ) -> wasmtime::Result<(Compiled, CompileInfo)> {
        let started = Instant::now();
        let module = Compiled::compile(engine, wasm, kind)?;
        let elapsed = started.elapsed();
        Ok((module, CompileInfo { cache: CacheStatus::Disabled, elapsed, tier: super::Tier::Optimized }))
    }

    /// Map a compiled plugin from a cache entry: `file`, open at `path`.
    ///
    /// SAFETY: as `Module::deserialize_file`: the file must begin with what
    /// `serialize` wrote for this engine's configuration, and must not
    /// change while the plugin lives.
    #[cfg(feature = "cache")]
    pub(crate) unsafe fn deserialize_file(
        engine: &Engine,
        file: std::fs::File,
        path: &std::path::Path,
        kind: PluginKind,
    ) -> wasmtime::Result<Compiled> {
        // SAFETY: passed on from the caller.
        Ok(unsafe {
            match kind {
                PluginKind::Extism => {
                    Compiled::Module(Module::deserialize_open_file(engine, file)?, Mapping::default())
                }
                // (wasmtime maps a component by path only.)
                #[cfg(feature = "component")]
                PluginKind::Component => {
                    Compiled::Component(Component::deserialize_file(engine, path)?, Mapping::default())
                }
                _ => {
                    let _ = (file, path);
                    return Err(wasmtime::format_err!("a {kind} plugin is not kept in the cache"));
                }
            }
        })
    }

    #[cfg(feature = "cache")]
    pub(crate) fn serialize(&self) -> wasmtime::Result<Vec<u8>> {
        match self {
            Compiled::Module(module, _) => module.serialize(),
            #[cfg(feature = "component")]
            Compiled::Component(component, _) => component.serialize(),
        }
    }
}

/// How a plugin's compiled module was obtained.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CacheStatus {
    /// Loaded from the cache, or compiled by a load of the same module that
    /// was under way at the same time: this load compiled nothing.
    Hit,
    /// Compiled, and stored for next time (unless storing failed, which is
    /// logged).
    Miss,
    /// An entry was found but failed its checks (the reason); it was
    /// deleted, the module compiled and stored again.
    Rebuilt(String),
    /// The cache is off: compiled.
    Disabled,
    /// The cache directory is not safe to use (the reason: another user
    /// owns it or may write to it): nothing was read from it or written to
    /// it; compiled.
    Unsafe(String),
}

/// How long loading a plugin's module took, and how it was obtained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileInfo {
    /// Cache hit, miss, rebuild or none.
    pub cache: CacheStatus,
    /// Time to obtain the compiled module (compile or cache load).
    pub elapsed: Duration,
    /// The compiler whose code the plugin started on: the baseline
    /// compiler's for a module that missed the cache, while Cranelift
    /// compiles it in the background ([`Plugin::tier`](crate::Plugin::tier)
    /// says when that is done).
    pub tier: super::Tier,
}

impl std::fmt::Display for CacheStatus {
    /// `hit`, `miss`, `rebuilt` or `disabled`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CacheStatus::Hit => "hit",
            CacheStatus::Miss => "miss",
            CacheStatus::Rebuilt(_) => "rebuilt",
            CacheStatus::Disabled => "disabled",
            CacheStatus::Unsafe(_) => "unsafe",
        })
    }
}
