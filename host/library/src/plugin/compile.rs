//! Finding or compiling a plugin's module: the compiled-module cache, the
//! flavour (Extism module or component), the baseline compiler's code
//! while Cranelift works, and the module made ready to instantiate.

use super::*;

/// The compiled-module cache loads go through.
#[cfg(feature = "cache")]
pub(super) type Cache = ModuleCache;
#[cfg(not(feature = "cache"))]
pub(super) type Cache = NoCache;

/// Without the `cache` feature: every load compiles.
#[cfg(not(feature = "cache"))]
#[derive(Clone)]
pub(super) struct NoCache;

#[cfg(not(feature = "cache"))]
impl NoCache {
    pub(super) fn load_or_compile(
        &self,
        engine: &wasmtime::Engine,
        wasm: &[u8],
        kind: PluginKind,
    ) -> wasmtime::Result<(Compiled, CompileInfo)> {
        Compiled::compile_uncached(engine, wasm, kind)
    }

    pub(super) fn find(
        &self,
        _engine: &wasmtime::Engine,
        _wasm: &[u8],
        _kind: PluginKind,
    ) -> Result<(Compiled, CompileInfo), CacheStatus> {
        Err(CacheStatus::Disabled)
    }

    pub(super) fn compile_baseline(
        &self,
        engine: &wasmtime::Engine,
        wasm: &[u8],
        kind: PluginKind,
    ) -> wasmtime::Result<(Compiled, bool)> {
        Ok((Compiled::compile(engine, wasm, kind)?, true))
    }
}

/// What a load's lookup found.
pub(super) struct Found {
    pub(super) compiled: Compiled,
    /// How it was obtained, and which compiler made it.
    pub(super) info: CompileInfo,
    /// On the baseline: the Wasm, for Cranelift to compile next.
    pub(super) wasm: Option<Arc<[u8]>>,
    pub(super) flavour: PluginKind,
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
pub(super) fn cached(source: &Source, cache: &Cache, engine: &wasmtime::Engine, compilers: Compilers) -> Option<Found> {
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
pub(super) fn wasm_of(source: &Source) -> Result<std::borrow::Cow<'_, [u8]>, Error> {
    match source {
        Source::File(path) => {
            std::fs::read(path).map(Into::into).map_err(|source| Error::Read { path: path.clone(), source })
        }
        Source::Bytes(bytes) => Ok(std::borrow::Cow::Borrowed(bytes)),
        Source::Builtin(_) => Err(Error::Host("a built-in toolset has no Wasm to compile".to_owned())),
    }
}

/// Which flavour of plugin `wasm` is, if this build can run it.
pub(super) fn flavour_of(name: &str, wasm: &[u8]) -> Result<PluginKind, Error> {
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
pub(super) fn takes_hit_at_once(compilers: Compilers, flavour: PluginKind, wasm: &[u8]) -> bool {
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
pub(super) fn compile<'e>(
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
pub(super) fn imports_tool_list_changes(wasm: &[u8]) -> bool {
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

pub(super) fn compile_error(name: &str, flavour: PluginKind, e: wasmtime::Error) -> Error {
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
pub(super) fn ready_kernel(runtime: &Runtime, kind: EngineKind, tier: Tier, cache: &Cache) -> Result<(), Error> {
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
pub(super) fn module_from(
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
