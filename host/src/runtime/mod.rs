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

pub(crate) mod cache;
pub(crate) mod extism;
mod http;
pub(crate) mod kernel;
mod stdio;

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use wasmtime::{Config, Engine};

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
    ticker::start();
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
    static ACTIVE: AtomicUsize = AtomicUsize::new(0);
    static PARKED: AtomicBool = AtomicBool::new(false);
    /// Idle ticks before the ticker parks.
    const IDLE_TICKS: u32 = 200;

    /// Start the ticker if it is not running.
    pub(crate) fn start() {
        THREAD.get_or_init(|| {
            std::thread::Builder::new()
                .name("toolhost-epoch".to_owned())
                .spawn(run)
                .expect("start the epoch ticker thread")
                .thread()
                .clone()
        });
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
            if ACTIVE.load(Ordering::SeqCst) > 0 {
                idle = 0;
                continue;
            }
            idle += 1;
            if idle >= IDLE_TICKS {
                PARKED.store(true, Ordering::SeqCst);
                // A call that started after the check above saw PARKED and
                // will unpark us (an unpark before park is not lost).
                if ACTIVE.load(Ordering::SeqCst) == 0 {
                    std::thread::park();
                }
                PARKED.store(false, Ordering::SeqCst);
                idle = 0;
            }
        }
    }

    /// Marks guest code as running while it lives: the ticker keeps ticking.
    #[must_use]
    pub(crate) struct Running(());

    /// Guest code is about to run.
    pub(crate) fn running() -> Running {
        ACTIVE.fetch_add(1, Ordering::SeqCst);
        // Read before writing: callers on several threads would otherwise
        // bounce the flag's cache line on every call.
        if PARKED.load(Ordering::SeqCst)
            && PARKED.swap(false, Ordering::SeqCst)
            && let Some(thread) = THREAD.get()
        {
            thread.unpark();
        }
        Running(())
    }

    impl Drop for Running {
        fn drop(&mut self) {
            ACTIVE.fetch_sub(1, Ordering::SeqCst);
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
