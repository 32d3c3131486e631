//! The Wasm runtime under the plugins: toolhost's own, on wasmtime.
//!
//! - One [`wasmtime::Engine`] per process (two when fuel is used: fuel
//!   metering changes the generated code), shared by every plugin, so a
//!   plugin compiles once and its instances are cheap.
//! - Guests run as `async` calls on wasmtime fibers: a call runs on the
//!   caller's tokio worker thread, with no hand-off to another thread, and
//!   yields back to the executor at every epoch tick (1 ms), so a long call
//!   never holds a worker.
//! - Time limits are per store: a global ticker thread advances the epoch;
//!   at each tick a running store checks its own deadline. One call timing
//!   out, or being cancelled, never interrupts another.
//! - The Extism plugin ABI (`extism:host/env`) is implemented natively
//!   ([`extism`]), so existing Extism plugins run unchanged without Extism's
//!   per-call costs (see DESIGN.md, "Performance").
//! - Components of the `toolhost:plugin` world ([`component`]) run on the
//!   same engine, under the same limits ([`guest`] holds what both kinds
//!   share); their typed results become the protocol's types, so everything
//!   after a call is shared.

pub(crate) mod cache;
pub(crate) mod component;
pub(crate) mod extism;
mod files;
mod guest;
mod http;
pub(crate) mod kernel;
mod output;
mod stdio;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::Value;
use wasmtime::{Config, Engine};

use crate::error::{Fault, OutputProblem};
use component::{ComponentInstance, ComponentModule};
use extism::{Export, ExtismInstance, ExtismModule, HostEnv};
pub(crate) use guest::ToolSecrets;

/// The two flavours of plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PluginKind {
    /// A core Wasm module with the Extism `describe`/`call` interface.
    Extism,
    /// A component of the `toolhost:plugin` world (`wit/plugin.wit`).
    Component,
}

impl std::fmt::Display for PluginKind {
    /// `extism` or `component`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PluginKind::Extism => "extism",
            PluginKind::Component => "component",
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
    Component(ComponentModule),
}

/// One instance of either flavour.
pub(crate) enum Instance {
    Extism(ExtismInstance),
    Component(ComponentInstance),
}

/// What a call sends, encoded for its flavour.
pub(crate) enum Payload {
    /// The `CallToolRequest` as JSON bytes.
    Extism(Vec<u8>),
    /// The tool's name and the arguments as JSON text.
    Component { name: String, arguments: String },
}

impl Payload {
    /// Bytes sent to the plugin (for the input cap).
    pub(crate) fn len(&self) -> usize {
        match self {
            Payload::Extism(bytes) => bytes.len(),
            Payload::Component { name, arguments } => name.len() + arguments.len(),
        }
    }
}

/// What `call` returned: JSON to check against the protocol (an Extism
/// plugin's output), or a result typed already (a component's).
pub(crate) enum CallOutput {
    Json(Value),
    Typed(toolhost_protocol::CallToolResult),
}

/// How a run failed: the guest's code, or what it returned.
pub(crate) enum RunError {
    Fault(Fault),
    Output(OutputProblem),
}

impl Module {
    pub(crate) fn kind(&self) -> PluginKind {
        match self {
            Module::Extism(_) => PluginKind::Extism,
            Module::Component(_) => PluginKind::Component,
        }
    }

    pub(crate) async fn instantiate(&self, env: &Arc<HostEnv>) -> Result<Instance, Fault> {
        let instance = match self {
            Module::Extism(module) => module.instantiate(env).await.map(Instance::Extism),
            Module::Component(module) => module.instantiate(env).await.map(Instance::Component),
        };
        instance.map_err(output::short_fault)
    }
}

impl Instance {
    /// Run `describe`; its output as JSON (not yet validated).
    pub(crate) async fn describe(&mut self) -> Result<Value, RunError> {
        let described = match self {
            Instance::Extism(instance) => match instance.run(Export::Describe, b"", &ToolSecrets::default()).await {
                Ok(output) => output::parse_json(&output, instance.max_output_bytes(), false),
                Err(fault) => Err(RunError::Fault(fault)),
            },
            Instance::Component(instance) => instance.describe().await,
        };
        described.map_err(output::short_error)
    }

    /// Run `call`, with the secrets of `secrets` in reach; its output (not
    /// yet validated).
    pub(crate) async fn call(&mut self, payload: &Payload, secrets: &ToolSecrets) -> Result<CallOutput, RunError> {
        let called = match (self, payload) {
            (Instance::Extism(instance), Payload::Extism(request)) => {
                match instance.run(Export::Call, request, secrets).await {
                    Ok(output) => output::parse_json(&output, instance.max_output_bytes(), true).map(CallOutput::Json),
                    Err(fault) => Err(RunError::Fault(fault)),
                }
            }
            (Instance::Component(instance), Payload::Component { name, arguments }) => {
                instance.call(name, arguments, secrets).await
            }
            _ => Err(RunError::Fault(Fault {
                kind: crate::error::FaultKind::Runtime,
                message: "a call was encoded for the other flavour of plugin".to_owned(),
            })),
        };
        called.map_err(output::short_error)
    }

    /// Bytes held against the memory limit.
    pub(crate) fn memory_used(&self) -> usize {
        match self {
            Instance::Extism(instance) => instance.memory_used(),
            Instance::Component(instance) => instance.memory_used(),
        }
    }
}

/// How often the epoch advances: the resolution of timeouts, and how long a
/// guest runs before it yields to the executor.
pub(crate) const TICK: Duration = Duration::from_millis(1);

/// Which engine a plugin runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum EngineKind {
    /// The default.
    Plain,
    /// Fuel metering on (for plugins with an instruction budget).
    Fuel,
}

static PLAIN: OnceLock<Result<Engine, String>> = OnceLock::new();
static FUEL: OnceLock<Result<Engine, String>> = OnceLock::new();

/// The shared engine of that kind.
pub(crate) fn engine(kind: EngineKind) -> Result<&'static Engine, String> {
    let cell = match kind {
        EngineKind::Plain => &PLAIN,
        EngineKind::Fuel => &FUEL,
    };
    let engine = cell.get_or_init(|| Engine::new(&config(kind)).map_err(|e| e.to_string())).as_ref()?;
    ticker::start()?;
    Ok(engine)
}

/// The engine configuration. The Wasm features are those Extism enables, so
/// every plugin Extism runs, toolhost runs.
fn config(kind: EngineKind) -> Config {
    let mut config = Config::new();
    config
        .epoch_interruption(true)
        .consume_fuel(kind == EngineKind::Fuel)
        .wasm_tail_call(true)
        .wasm_function_references(true)
        .wasm_gc(true)
        .wasm_component_model(true);
    config
}

/// The epoch ticker: one thread for the process. It sleeps (parked) while no
/// call has run for a while, so an idle host costs nothing.
pub(crate) mod ticker {
    use super::*;
    use std::thread::Thread;

    static THREAD: OnceLock<Thread> = OnceLock::new();
    static PARKED: AtomicBool = AtomicBool::new(false);

    /// Calls running, counted in shards (a cache line each) so that callers
    /// on different threads do not write the same line on every call.
    #[repr(align(64))]
    struct Shard(AtomicUsize);
    const SHARDS: usize = 16;
    static ACTIVE: [Shard; SHARDS] = [const { Shard(AtomicUsize::new(0)) }; SHARDS];
    static NEXT_SHARD: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT_SHARD.fetch_add(1, Ordering::Relaxed) % SHARDS;
    }

    fn active() -> usize {
        ACTIVE.iter().map(|shard| shard.0.load(Ordering::SeqCst)).sum()
    }
    /// Idle ticks before the ticker parks.
    const IDLE_TICKS: u32 = 200;

    /// Start the ticker if it is not running.
    pub(crate) fn start() -> Result<(), String> {
        if THREAD.get().is_some() {
            return Ok(());
        }
        // One starter at a time, so there is one ticker.
        static STARTING: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _starting = STARTING.lock().unwrap_or_else(|p| p.into_inner());
        if THREAD.get().is_some() {
            return Ok(());
        }
        let spawned = std::thread::Builder::new()
            .name("toolhost-epoch".to_owned())
            .spawn(run)
            .map_err(|e| format!("cannot start the epoch ticker thread: {e}"))?;
        let _ = THREAD.set(spawned.thread().clone());
        Ok(())
    }

    fn run() {
        let mut idle = 0;
        loop {
            std::thread::sleep(TICK);
            for cell in [&PLAIN, &FUEL] {
                if let Some(Ok(engine)) = cell.get() {
                    engine.increment_epoch();
                }
            }
            Alarm::fire();
            if active() > 0 {
                idle = 0;
                continue;
            }
            idle += 1;
            if idle >= IDLE_TICKS {
                PARKED.store(true, Ordering::SeqCst);
                // A call that started after the check above saw PARKED and
                // will unpark us (an unpark before park is not lost).
                if active() == 0 {
                    std::thread::park();
                }
                PARKED.store(false, Ordering::SeqCst);
                idle = 0;
            }
        }
    }

    /// Alarms set, by id: when each goes off and whom to wake.
    static ALARMS: std::sync::Mutex<std::collections::BTreeMap<u64, (std::time::Instant, std::task::Waker)>> =
        std::sync::Mutex::new(std::collections::BTreeMap::new());
    static NEXT_ALARM: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

    /// A deadline the ticker thread keeps: ready once it has passed, and
    /// its task woken then (within a tick), even while the guest waits in a
    /// host call. Unlike `tokio::time`, it needs no time driver in the
    /// caller's runtime. The ticker ticks while a [`Running`] guard lives:
    /// hold one meanwhile.
    pub(crate) struct Alarm {
        deadline: std::time::Instant,
        id: Option<u64>,
    }

    impl Alarm {
        pub(crate) fn new(deadline: std::time::Instant) -> Alarm {
            Alarm { deadline, id: None }
        }

        /// Ready once the deadline has passed; else set (or renew) the
        /// alarm to wake this task.
        pub(crate) fn poll(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
            if std::time::Instant::now() >= self.deadline {
                return std::task::Poll::Ready(());
            }
            let id = *self.id.get_or_insert_with(|| NEXT_ALARM.fetch_add(1, Ordering::Relaxed));
            let mut alarms = ALARMS.lock().unwrap_or_else(|p| p.into_inner());
            match alarms.get_mut(&id) {
                Some((_, waker)) if waker.will_wake(cx.waker()) => {}
                _ => {
                    alarms.insert(id, (self.deadline, cx.waker().clone()));
                }
            }
            std::task::Poll::Pending
        }

        /// Wake the tasks whose alarms have gone off (on the ticker thread).
        fn fire() {
            let now = std::time::Instant::now();
            let due: Vec<std::task::Waker> = {
                let mut alarms = ALARMS.lock().unwrap_or_else(|p| p.into_inner());
                if alarms.is_empty() {
                    return;
                }
                let ids: Vec<u64> = alarms.iter().filter(|(_, (at, _))| *at <= now).map(|(id, _)| *id).collect();
                ids.into_iter().filter_map(|id| alarms.remove(&id)).map(|(_, waker)| waker).collect()
            };
            for waker in due {
                waker.wake();
            }
        }
    }

    impl Drop for Alarm {
        fn drop(&mut self) {
            if let Some(id) = self.id {
                ALARMS.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
            }
        }
    }

    /// Marks guest code as running while it lives: the ticker keeps ticking.
    /// (It may be dropped on another thread than it was made on: it
    /// remembers its shard.)
    #[must_use]
    pub(crate) struct Running(usize);

    /// Guest code is about to run.
    pub(crate) fn running() -> Running {
        let shard = SHARD.with(|s| *s);
        ACTIVE[shard].0.fetch_add(1, Ordering::SeqCst);
        // Read before writing: callers on several threads would otherwise
        // bounce the flag's cache line on every call.
        if PARKED.load(Ordering::SeqCst)
            && PARKED.swap(false, Ordering::SeqCst)
            && let Some(thread) = THREAD.get()
        {
            thread.unpark();
        }
        Running(shard)
    }

    impl Drop for Running {
        fn drop(&mut self) {
            ACTIVE[self.0].0.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// Why the host stopped a guest: the payload of the error a host function or
/// the epoch callback returns, read back when the call fails.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Stop {
    /// The call's deadline passed.
    #[error("the call's deadline passed")]
    Timeout,
    /// The instance tried to use more memory than it may.
    #[error("the memory limit was reached")]
    MemoryLimit,
    /// The guest asked for a capability it was not granted.
    #[error("{0}")]
    Denied(String),
    /// A host function failed because of what the guest passed it.
    #[error("{0}")]
    Host(String),
}
