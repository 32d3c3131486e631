//! The Wasm runtime under the plugins: toolhost's own, on wasmtime, owned by
//! a [`Runtime`] handle.
//!
//! - A runtime has one [`wasmtime::Engine`] (two when fuel is used: fuel
//!   metering changes the generated code), shared by every plugin loaded
//!   through it, so a plugin compiles once and its instances are cheap.
//! - Guests run as `async` calls on wasmtime fibers: a call runs on the
//!   caller's tokio worker thread, with no hand-off to another thread, and
//!   yields back to the executor at every epoch tick (1 ms), so a long call
//!   never holds a worker.
//! - Time limits are per store: the runtime's ticker thread ([`ticker`])
//!   advances the epoch; at each tick a running store checks its own
//!   deadline. One call timing out, or being cancelled, never interrupts
//!   another.
//! - The Extism plugin ABI (`extism:host/env`) is implemented natively
//!   ([`extism`]), so existing Extism plugins run unchanged without Extism's
//!   per-call costs (see DESIGN.md, "Performance").
//! - Components of the `toolhost:plugin` world ([`component`]) run on the
//!   same engine, under the same limits ([`guest`] holds what both kinds
//!   share); their typed results become the protocol's types, so everything
//!   after a call is shared.
//!
//! The files stand in floors, each using only those below it: `outcome`,
//! `ticker`, `kernel`, `stdio`, `compile`, `cache`, `output`, `http` at the bottom;
//! `guest` (store data and limits); `files` (the open-file cap); `extism`
//! and `component`; `instance` (either flavour); this file, the handle.

pub(crate) mod builtin;
#[cfg(feature = "cache")]
pub(crate) mod cache;

pub(crate) mod compile;
#[cfg(feature = "component")]
pub(crate) mod component;
pub(crate) mod extism;
mod files;
pub(crate) mod guest;
mod http;
pub(crate) mod instance;
pub(crate) mod kernel;
pub(crate) mod outcome;
pub(crate) mod output;
mod stdio;
pub(crate) mod ticker;
#[cfg(feature = "wasi-http")]
mod wasi_http;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use wasmtime::{Config, Engine};

use crate::error::Error;
use crate::sandbox::Limits;
use crate::telemetry::CallObserver;
#[cfg(feature = "cache")]
use cache::ModuleCache;
pub use instance::PluginKind;
use ticker::Ticker;

/// Which engine a plugin runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum EngineKind {
    /// The default.
    Plain,
    /// Fuel metering on (for plugins with an instruction budget).
    Fuel,
}

/// Which of wasmtime's compilers a runtime compiles plugins with
/// ([`RuntimeBuilder::with_compilers`]). Without the `winch` feature, or
/// where Winch cannot run, every choice compiles with Cranelift.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Compilers {
    /// A plugin that misses the compiled-module cache starts on the
    /// baseline compiler's code while Cranelift compiles it in the
    /// background; Cranelift's module replaces it and goes in the cache.
    /// The default where the baseline compiler runs.
    Tiered,
    /// Cranelift only: a miss waits for it. The default elsewhere.
    Cranelift,
    /// The baseline compiler only (its modules are what the cache keeps):
    /// the fastest loads and no background compiles, for slower calls. For
    /// short runs that load many plugins and call each a few times.
    Baseline,
}

/// Which of wasmtime's compilers made a plugin's code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Tier {
    /// Winch, wasmtime's baseline compiler: it compiles several times
    /// faster than Cranelift (4–5× for the example plugins), and its code
    /// runs slower. A plugin that was
    /// not in the compiled-module cache starts on it while Cranelift
    /// compiles it in the background
    /// ([`RuntimeBuilder::with_compilers`]).
    Baseline,
    /// Cranelift, wasmtime's optimising compiler: what a plugin runs on
    /// from the cache, and once its background compile is done.
    Optimized,
}

impl std::fmt::Display for Tier {
    /// `baseline` or `optimized`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Tier::Baseline => "baseline",
            Tier::Optimized => "optimized",
        })
    }
}

/// An engine and the linkers of both flavours on it, each made when first
/// needed.
pub(crate) struct Engines {
    pub(crate) engine: Engine,
    extism: OnceLock<Result<Arc<wasmtime::Linker<extism::State>>, String>>,
    /// The Extism kernel's Wasm half ([`kernel::wat`]), ready to instantiate.
    kernel: OnceLock<Result<wasmtime::InstancePre<extism::State>, String>>,
    #[cfg(feature = "component")]
    component: OnceLock<Result<wasmtime::component::Linker<component::ComponentState>, String>>,
}

impl Engines {
    fn new(engine: Engine) -> Self {
        Engines {
            engine,
            extism: OnceLock::new(),
            kernel: OnceLock::new(),
            #[cfg(feature = "component")]
            component: OnceLock::new(),
        }
    }

    pub(crate) fn extism_linker(&self) -> Result<&Arc<wasmtime::Linker<extism::State>>, String> {
        self.extism.get_or_init(|| extism::linker(&self.engine).map(Arc::new)).as_ref().map_err(Clone::clone)
    }

    /// The Extism kernel's Wasm half, compiled by `compile` the first time
    /// (through the compiled-module cache).
    pub(crate) fn extism_kernel(
        &self,
        compile: impl FnOnce(&Engine) -> Result<wasmtime::Module, String>,
    ) -> Result<&wasmtime::InstancePre<extism::State>, String> {
        self.kernel
            .get_or_init(|| {
                let module = compile(&self.engine).map_err(|e| format!("cannot compile the Extism kernel: {e}"))?;
                self.extism_linker()?.instantiate_pre(&module).map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    #[cfg(feature = "component")]
    pub(crate) fn component_linker(&self) -> Result<&wasmtime::component::Linker<component::ComponentState>, String> {
        self.component.get_or_init(|| component::linker(&self.engine)).as_ref().map_err(Clone::clone)
    }
}

/// Where plugins run: the Wasm engines, the epoch ticker thread that keeps
/// every call's deadline, the compiled-module cache, the default limits of
/// the plugins it loads and the call observer. Like wasmtime's `Engine`,
/// one is meant to serve the whole program; clones share it.
///
/// [`Plugin::load`](crate::Plugin::load) and the other one-liners use
/// [`Runtime::shared`], a runtime with no compiled-module cache and the
/// default limits. An embedder that wants its own settings, or to shut the
/// runtime down, makes one:
///
/// ```no_run
/// # async fn demo() -> Result<(), toolhost::Error> {
/// use std::time::Duration;
/// use toolhost::{Limits, Runtime};
/// let runtime = Runtime::builder()
///     .with_default_limits(Limits::default().with_timeout(Some(Duration::from_secs(10))))
///     .build();
/// let plugin = runtime.plugin_from_file("target/plugins/calculator.wasm").build().await?;
/// plugin.call_tool("add", serde_json::json!({"a": 1, "b": 2})).await?;
/// // Let calls in flight finish for up to 5 s, cancel the rest, stop the ticker.
/// let report = runtime.shutdown(Duration::from_secs(5)).await;
/// assert_eq!(report.cancelled, 0);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<RuntimeInner>,
}

struct RuntimeInner {
    plain: OnceLock<Result<Engines, String>>,
    fuel: OnceLock<Result<Engines, String>>,
    /// The same on the baseline compiler (`None`: it is off, or cannot run
    /// here).
    plain_baseline: OnceLock<Option<Engines>>,
    fuel_baseline: OnceLock<Option<Engines>>,
    /// The compilers plugins are compiled with.
    compilers: Compilers,
    ticker: Ticker,
    #[cfg(feature = "cache")]
    cache: ModuleCache,
    limits: Limits,
    observer: Option<Arc<dyn CallObserver>>,
    downloads: crate::DownloadCache,
    /// The hosts plugin downloads may reach, if limited.
    download_hosts: Option<Arc<[String]>>,
    /// Calls running now.
    in_flight: AtomicUsize,
    /// Set by [`Runtime::shutdown`]: nothing new starts.
    closed: AtomicBool,
    /// Notified when the last call in flight ends.
    idle: tokio::sync::Notify,
    /// Cancelled when a shutdown's grace period is over.
    cancel: CancellationToken,
    /// Plugins Cranelift is compiling in the background.
    background: tokio::sync::watch::Sender<usize>,
}

impl Drop for RuntimeInner {
    fn drop(&mut self) {
        self.ticker.stop();
    }
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut f = f.debug_struct("Runtime");
        #[cfg(feature = "cache")]
        f.field("cache", &self.inner.cache);
        f.field("default_limits", &self.inner.limits)
            .field("compilers", &self.inner.compilers)
            .field("observer", &self.inner.observer.is_some())
            .field("calls_in_flight", &self.calls_in_flight())
            .field("shut_down", &self.is_shut_down())
            .finish_non_exhaustive()
    }
}

impl Default for Runtime {
    /// [`Runtime::new`].
    fn default() -> Self {
        Runtime::new()
    }
}

/// Configures a [`Runtime`].
#[derive(Clone, Default)]
pub struct RuntimeBuilder {
    #[cfg(feature = "cache")]
    cache: Option<ModuleCache>,
    limits: Option<Limits>,
    observer: Option<Arc<dyn CallObserver>>,
    downloads: Option<crate::DownloadCache>,
    download_hosts: Option<Vec<String>>,
    compilers: Option<Compilers>,
}

impl std::fmt::Debug for RuntimeBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut f = f.debug_struct("RuntimeBuilder");
        #[cfg(feature = "cache")]
        f.field("cache", &self.cache);
        f.field("limits", &self.limits)
            .field("observer", &self.observer.is_some())
            .field("downloads", &self.downloads)
            .field("download_hosts", &self.download_hosts)
            .field("compilers", &self.compilers)
            .finish()
    }
}

impl RuntimeBuilder {
    /// Keep compiled modules between processes in this cache (by default
    /// none: a library writes nothing to disk unless asked;
    /// [`ModuleCache::from_env`] is the CLI's cache).
    #[cfg(feature = "cache")]
    #[cfg_attr(docsrs, doc(cfg(feature = "cache")))]
    pub fn with_module_cache(mut self, cache: ModuleCache) -> Self {
        self.cache = Some(cache);
        self
    }

    /// The limits plugins built from this runtime start with (a builder's
    /// own limits replace them; a toolsets file's `limits` are complete in
    /// themselves). By default [`Limits::default`].
    pub fn with_default_limits(mut self, limits: Limits) -> Self {
        self.limits = Some(limits);
        self
    }

    /// Tell `observer` about every call that finishes (or is cancelled):
    /// its duration, outcome, fuel, peak memory and output size.
    pub fn with_observer(mut self, observer: Arc<dyn CallObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Keep plugins downloaded from `https://` and `oci://` sources in this
    /// cache, so that they load offline afterwards (by default none: every
    /// load downloads; [`DownloadCache::from_env`](crate::DownloadCache::from_env)
    /// is the CLI's).
    pub fn with_download_cache(mut self, cache: crate::DownloadCache) -> Self {
        self.downloads = Some(cache);
        self
    }

    /// Let plugin downloads (`https://`, `oci://`) reach only hosts matching
    /// these patterns (as [`Policy::allowed_hosts`](crate::Policy::allowed_hosts)
    /// writes them: `host`, `host:port`, `*.example.com`): a source's own
    /// host, and every host an `https://` download is redirected to. For a
    /// program that loads plugins others name (a multi-tenant service): a
    /// redirect cannot take a download where the operator did not allow.
    /// By default any host may be reached (the sources are the user's own).
    pub fn with_download_hosts(mut self, patterns: impl IntoIterator<Item = String>) -> Self {
        self.download_hosts = Some(patterns.into_iter().collect());
        self
    }

    /// Which compilers plugins are compiled with. By default, where
    /// wasmtime's baseline compiler, Winch, runs (x86-64, the `winch`
    /// feature), [`Compilers::Tiered`]: a plugin that is not in the
    /// compiled-module cache starts on Winch's code while Cranelift
    /// compiles it in the background ([`Tier`]), so a never-seen plugin
    /// answers in tens of milliseconds instead of hundreds. Its first calls
    /// run slower code, and the background compile takes the CPU time the
    /// load would have. The plugin moves to Cranelift's code instance by
    /// instance (a busy instance finishes its call first; state a plugin
    /// keeps in an instance between calls starts again, as after a fault),
    /// and Cranelift's module is what the cache keeps. Elsewhere,
    /// [`Compilers::Cranelift`]: every miss waits for Cranelift.
    ///
    /// A plugin that may change its tool list (it keeps that state in its
    /// one instance) waits for Cranelift unless only the baseline compiler
    /// is used; a module Winch cannot compile (it uses GC, typed function
    /// references or tail calls) always does.
    pub fn with_compilers(mut self, compilers: Compilers) -> Self {
        self.compilers = Some(compilers);
        self
    }

    /// The runtime. Its engines and ticker thread are made when the first
    /// plugin is loaded. The first runtime of a process starts a thread
    /// that compiles what checking any plugin needs (JSON Schema's
    /// meta-schema, the protocol's `ListToolsResult`, about 1.3 ms of CPU),
    /// so that the first load does not wait for it.
    pub fn build(self) -> Runtime {
        crate::validate::prepare_in_background();
        Runtime {
            inner: Arc::new(RuntimeInner {
                plain: OnceLock::new(),
                fuel: OnceLock::new(),
                plain_baseline: OnceLock::new(),
                fuel_baseline: OnceLock::new(),
                compilers: self.compilers.unwrap_or(if cfg!(all(feature = "winch", target_arch = "x86_64")) {
                    Compilers::Tiered
                } else {
                    Compilers::Cranelift
                }),
                ticker: Ticker::new(),
                #[cfg(feature = "cache")]
                cache: self.cache.unwrap_or_else(ModuleCache::disabled),
                limits: self.limits.unwrap_or_default(),
                observer: self.observer,
                downloads: self.downloads.unwrap_or_default(),
                download_hosts: self.download_hosts.map(Arc::from),
                in_flight: AtomicUsize::new(0),
                closed: AtomicBool::new(false),
                idle: tokio::sync::Notify::new(),
                cancel: CancellationToken::new(),
                background: tokio::sync::watch::channel(0).0,
            }),
        }
    }
}

/// What [`Runtime::shutdown`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Calls in flight when the shutdown began.
    pub in_flight: usize,
    /// Of those, calls still running when the grace period ended: they were
    /// cancelled.
    pub cancelled: usize,
}

impl Runtime {
    /// A runtime with the default settings: no compiled-module cache,
    /// [`Limits::default`], no observer.
    pub fn new() -> Self {
        RuntimeBuilder::default().build()
    }

    /// Configure a runtime.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::default()
    }

    /// The runtime of the one-liners ([`Plugin::load`](crate::Plugin::load),
    /// [`Plugin::builder_from_file`](crate::Plugin::builder_from_file),
    /// [`Registry::new`](crate::Registry::new)): made on first use, with the
    /// default settings, for the life of the process. (Shutting it down
    /// shuts down every plugin loaded the one-liner way.)
    pub fn shared() -> &'static Runtime {
        static SHARED: OnceLock<Runtime> = OnceLock::new();
        SHARED.get_or_init(Runtime::new)
    }

    /// Where plugins downloaded by this runtime are kept.
    pub fn download_cache(&self) -> &crate::DownloadCache {
        &self.inner.downloads
    }

    /// The hosts plugin downloads may reach, if limited
    /// ([`RuntimeBuilder::with_download_hosts`]).
    pub fn download_hosts(&self) -> Option<&[String]> {
        self.inner.download_hosts.as_deref()
    }

    /// The compiled-module cache plugins of this runtime use.
    #[cfg(feature = "cache")]
    #[cfg_attr(docsrs, doc(cfg(feature = "cache")))]
    pub fn module_cache(&self) -> &ModuleCache {
        &self.inner.cache
    }

    /// The limits plugins built from this runtime start with.
    pub fn default_limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// Calls running now.
    pub fn calls_in_flight(&self) -> usize {
        self.inner.in_flight.load(Ordering::SeqCst)
    }

    /// Whether [`shutdown`](Self::shutdown) has begun.
    pub fn is_shut_down(&self) -> bool {
        self.inner.closed.load(Ordering::SeqCst)
    }

    /// Shut the runtime down: refuse new loads and calls
    /// ([`Error::ShutDown`]); let the calls in flight finish for up to
    /// `grace`; then cancel those still running (their guests are stopped
    /// where they are, and they return [`Error::Cancelled`]); wait for them
    /// to return; and stop the ticker thread. Plugins loaded on the runtime
    /// can still be listed, not called. Calling it again does nothing more.
    ///
    /// Waiting needs no tokio time driver (the runtime's own ticker keeps
    /// the grace period).
    pub async fn shutdown(&self, grace: Duration) -> ShutdownReport {
        let inner = &self.inner;
        inner.closed.store(true, Ordering::SeqCst);
        let in_flight = self.calls_in_flight();
        // A grace period past what `Instant` can hold waits as long as it takes.
        let drained = self.wait_idle(Instant::now().checked_add(grace)).await;
        let cancelled = if drained { 0 } else { self.calls_in_flight() };
        if !drained {
            tracing::info!(calls = cancelled, "runtime shutting down: cancelling the calls still running");
            inner.cancel.cancel();
            // Cancelled calls return within a tick (their futures are dropped).
            self.wait_idle(None).await;
        }
        inner.ticker.stop();
        ShutdownReport { in_flight, cancelled }
    }

    /// Wait until no call is in flight (`true`), or `deadline` passes
    /// (`false`).
    async fn wait_idle(&self, deadline: Option<Instant>) -> bool {
        let inner = &self.inner;
        let mut alarm = deadline.map(|at| inner.ticker.alarm(at));
        loop {
            let notified = inner.idle.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if self.calls_in_flight() == 0 {
                return true;
            }
            let woken = std::future::poll_fn(|cx| {
                if notified.as_mut().poll(cx).is_ready() {
                    return std::task::Poll::Ready(true);
                }
                match alarm.as_mut().map(|alarm| alarm.poll_alarm(cx)) {
                    Some(std::task::Poll::Ready(())) => std::task::Poll::Ready(false),
                    _ => std::task::Poll::Pending,
                }
            })
            .await;
            if !woken {
                return self.calls_in_flight() == 0;
            }
        }
    }

    /// A call begins: refused once the runtime is shutting down.
    pub(crate) fn enter(&self, plugin: &str) -> Result<CallGuard<'_>, Error> {
        let inner = &self.inner;
        if inner.closed.load(Ordering::SeqCst) {
            return Err(Error::ShutDown { plugin: plugin.to_owned() });
        }
        inner.in_flight.fetch_add(1, Ordering::SeqCst);
        // Borrowed, not a clone of the `Arc`: its count is a cache line
        // that callers on every core would write twice per call.
        let guard = CallGuard { runtime: inner };
        // A shutdown that began meanwhile may have counted us already: it
        // waits for the guard, which is dropped at once.
        if inner.closed.load(Ordering::SeqCst) {
            return Err(Error::ShutDown { plugin: plugin.to_owned() });
        }
        Ok(guard)
    }

    /// Refuse loading once the runtime is shutting down.
    pub(crate) fn check_open(&self, plugin: &str) -> Result<(), Error> {
        if self.is_shut_down() {
            return Err(Error::ShutDown { plugin: plugin.to_owned() });
        }
        Ok(())
    }

    /// Cancelled when a shutdown gives up waiting.
    pub(crate) fn cancellation(&self) -> &CancellationToken {
        &self.inner.cancel
    }

    pub(crate) fn observer(&self) -> Option<&Arc<dyn CallObserver>> {
        self.inner.observer.as_ref()
    }

    pub(crate) fn ticker(&self) -> &Ticker {
        &self.inner.ticker
    }

    /// The engines of that kind, made on first use (the ticker then
    /// advances their epoch).
    pub(crate) fn engines(&self, kind: EngineKind) -> Result<&Engines, String> {
        let cell = match kind {
            EngineKind::Plain => &self.inner.plain,
            EngineKind::Fuel => &self.inner.fuel,
        };
        let engines = cell
            .get_or_init(|| {
                let engine = Engine::new(&config(kind, Tier::Optimized)).map_err(|e| e.to_string())?;
                self.inner.ticker.tick(&engine)?;
                Ok(Engines::new(engine))
            })
            .as_ref()?;
        Ok(engines)
    }

    /// The baseline compiler's engines of that kind, made on first use:
    /// `None` when the runtime does not use it, or it cannot run here
    /// (logged once).
    pub(crate) fn baseline_engines(&self, kind: EngineKind) -> Option<&Engines> {
        // (Without the `winch` feature there is no baseline compiler.)
        if self.inner.compilers == Compilers::Cranelift || cfg!(not(feature = "winch")) {
            return None;
        }
        let cell = match kind {
            EngineKind::Plain => &self.inner.plain_baseline,
            EngineKind::Fuel => &self.inner.fuel_baseline,
        };
        cell.get_or_init(|| {
            let made = Engine::new(&config(kind, Tier::Baseline))
                .map_err(|e| e.to_string())
                .and_then(|engine| self.inner.ticker.tick(&engine).map(|()| engine));
            match made {
                Ok(engine) => Some(Engines::new(engine)),
                Err(error) => {
                    tracing::info!("the baseline compiler cannot run here ({error}): every plugin waits for Cranelift");
                    None
                }
            }
        })
        .as_ref()
    }

    /// The engines whose compiler is `tier`'s.
    pub(crate) fn tier_engines(&self, kind: EngineKind, tier: Tier) -> Result<&Engines, String> {
        match tier {
            Tier::Optimized => self.engines(kind),
            Tier::Baseline => {
                self.baseline_engines(kind).ok_or_else(|| "the baseline compiler's engine is not there".to_owned())
            }
        }
    }

    /// Wait until no plugin of this runtime is being compiled by Cranelift
    /// in the background (at once when none is): every plugin loaded so
    /// far runs Cranelift's code (or stays on the baseline's, if Cranelift
    /// failed, logged), and their entries are in the compiled-module cache.
    pub async fn background_compiles_done(&self) {
        let mut background = self.inner.background.subscribe();
        // (The sender lives as long as the runtime.)
        let _ = background.wait_for(|&n| n == 0).await;
    }

    /// A background compile begins: counted until the guard is dropped.
    pub(crate) fn background_compile(&self) -> BackgroundCompile {
        self.inner.background.send_modify(|n| *n += 1);
        BackgroundCompile { runtime: Arc::clone(&self.inner) }
    }

    /// Which compilers plugins are compiled with
    /// ([`RuntimeBuilder::with_compilers`]).
    pub fn compilers(&self) -> Compilers {
        self.inner.compilers
    }
}

/// A background compile under way: counted until dropped.
pub(crate) struct BackgroundCompile {
    runtime: Arc<RuntimeInner>,
}

impl Drop for BackgroundCompile {
    fn drop(&mut self) {
        self.runtime.background.send_modify(|n| *n -= 1);
    }
}

/// A call in flight: counted until dropped.
pub(crate) struct CallGuard<'a> {
    runtime: &'a RuntimeInner,
}

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        // Only a shutdown waits for the count to reach zero, and it marks
        // the runtime closed before it looks at the count: the last call
        // out wakes it only then (every call of a lone caller is the last
        // one out, and `notify_waiters` takes a lock). All four accesses
        // are sequentially consistent, so either this drop sees `closed`
        // or the shutdown, looking later, sees the count at zero.
        if self.runtime.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 && self.runtime.closed.load(Ordering::SeqCst) {
            self.runtime.idle.notify_waiters();
        }
    }
}

/// The engine configuration. The Wasm features are those Extism enables, so
/// every plugin Extism runs, toolhost runs. The baseline compiler has the
/// same limits, interruption and fuel accounting (Winch charges fuel as
/// Cranelift does), without the three proposals it does not compile: a
/// module that uses them fails there and waits for Cranelift.
fn config(kind: EngineKind, tier: Tier) -> Config {
    let mut config = Config::new();
    let optimized = tier == Tier::Optimized;
    config
        .epoch_interruption(true)
        .consume_fuel(kind == EngineKind::Fuel)
        .wasm_tail_call(optimized)
        .wasm_function_references(optimized)
        .wasm_gc(optimized)
        .wasm_component_model(true);
    // For profiling guests: wasmtime writes `/tmp/perf-<pid>.map`, and
    // `perf report` names the functions of compiled plugins (by their name
    // section, where they kept one) instead of showing bare addresses.
    if std::env::var_os("TOOLHOST_PERFMAP").is_some() {
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    #[cfg(feature = "winch")]
    if !optimized {
        config.strategy(wasmtime::Strategy::Winch);
        // Winch compiles the functions; Cranelift still compiles their
        // trampolines (one per function a host may call: every function in
        // the table of a Rust plugin), and with its defaults those cost
        // more than all of Winch's work. Quick code is the point here.
        config
            .cranelift_opt_level(wasmtime::OptLevel::None)
            .cranelift_regalloc_algorithm(wasmtime::RegallocAlgorithm::SinglePass);
    }
    config
}
