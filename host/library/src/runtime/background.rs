//! Where Cranelift's background compiles run: below the rest of the
//! process in CPU priority.
//!
//! A plugin that missed the compiled-module cache starts on the baseline
//! compiler's code while Cranelift compiles it again, about a quarter of a
//! second of both cores. On tokio's blocking pool, with wasmtime's parallel
//! compile on rayon's global pool, that work ran at the same priority as
//! the server it was speeding up: it took the cores while the first
//! `tools/list` was answered (the time from the plugin's load to that
//! answer came out three times as long), and every call made meanwhile
//! waited its turn behind it.
//!
//! So a background compile runs on a thread of its own ([`spawn`]), and the
//! compile inside it on a rayon pool of its own ([`compile`]: wasmtime's
//! parallel compile uses the pool it is called from). Every one of those
//! threads sets its CPU priority [`NICENESS`] steps below the process's as
//! it starts: on Linux a nice value is a thread's own, so the rest of the
//! process keeps its priority. The scheduler then runs a woken server thread at once and
//! gives the compile what the server leaves. It is never starved (a nice
//! value is a weight, not a class): under a steady load Cranelift's code
//! arrives later, not never. Elsewhere the threads keep the process's
//! priority.
//!
//! Only wasmtime's compile runs on the pool. The rest of a background job
//! (the cache's lookup and write, the Extism kernel's one-time setup) takes
//! locks, and a rayon thread waiting for its own parallel work may run
//! another queued job meanwhile, on the same stack: two jobs wanting the
//! same lock would then wait for each other.

use std::cell::Cell;
use std::sync::{Arc, Mutex, OnceLock};

/// How many steps of nice value the background threads are below the
/// process's own (at most 19, the lowest). Ten steps is about a tenth of a
/// contended core.
pub(crate) const NICENESS: i32 = 10;

/// The name of the background threads (at most 15 bytes: Linux's limit).
pub(crate) const THREAD_NAME: &str = "toolhost-tierup";

thread_local! {
    /// Whether this thread runs a background job.
    static IN_BACKGROUND: Cell<bool> = const { Cell::new(false) };
}

/// Run `job` on a background thread of its own, whose compiles go to the
/// background pool. If no thread can be started, it runs on tokio's
/// blocking pool at the process's priority.
pub(crate) fn spawn(job: impl FnOnce() + Send + 'static) {
    // Held where either thread can take it: a thread that fails to start
    // drops what it was given.
    let job = Arc::new(Mutex::new(Some(job)));
    let take = |job: &Mutex<Option<_>>| job.lock().unwrap_or_else(|e| e.into_inner()).take();
    let theirs = Arc::clone(&job);
    let started = std::thread::Builder::new().name(THREAD_NAME.to_owned()).spawn(move || {
        lower_priority();
        IN_BACKGROUND.with(|flag| flag.set(true));
        if let Some(job) = take(&theirs) {
            job();
        }
    });
    if let Err(error) = started {
        tracing::warn!(%error, "no thread for a background compile; it runs on the blocking pool");
        if let Some(job) = take(&job) {
            drop(tokio::task::spawn_blocking(job));
        }
    }
}

/// Run `compile` (wasmtime's compile of one module) on the background pool
/// when called from a background job, else here.
pub(crate) fn compile<R: Send>(compile: impl FnOnce() -> R + Send) -> R {
    match IN_BACKGROUND.with(Cell::get).then(pool).flatten() {
        Some(pool) => pool.install(compile),
        None => compile(),
    }
}

/// The process's background pool, made at its first use: a thread per core.
fn pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        let threads = std::thread::available_parallelism().map_or(1, usize::from);
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|_| THREAD_NAME.to_owned())
            .start_handler(|_| lower_priority())
            .build()
            .inspect_err(|error| tracing::warn!(%error, "no background compile pool; compiling on rayon's global pool"))
            .ok()
    })
    .as_ref()
}

/// Lower the calling thread's CPU priority to [`NICENESS`] steps below the
/// process's (Linux: the nice value is per thread). The process's is read
/// by the first thread to call this, which is still at it: a thread started
/// by a lowered one starts lowered. Failing, it stays as it was.
#[cfg(target_os = "linux")]
fn lower_priority() {
    static PROCESS: OnceLock<Option<i32>> = OnceLock::new();
    // SAFETY: plain system calls about this thread, no memory passed but
    // errno, which is this thread's own.
    unsafe {
        let me = libc::gettid() as libc::id_t;
        let process = *PROCESS.get_or_init(|| {
            *libc::__errno_location() = 0;
            let nice = libc::getpriority(libc::PRIO_PROCESS, me);
            (nice != -1 || *libc::__errno_location() == 0).then_some(nice)
        });
        if let Some(process) = process {
            libc::setpriority(libc::PRIO_PROCESS, me, (process + NICENESS).min(19));
        }
    }
}

/// Elsewhere the nice value is the whole process's: the threads keep it.
#[cfg(not(target_os = "linux"))]
fn lower_priority() {}
