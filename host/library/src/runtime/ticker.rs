//! The epoch ticker of a [`Runtime`](crate::Runtime): one thread that
//! advances its engines' epoch every [`TICK`], so a running guest checks
//! its deadline and yields to the executor; and keeps the alarms of guests
//! waiting in host calls. It sleeps (parked) while no call has run for a
//! while, so an idle host costs nothing, and it ends when its runtime shuts
//! down or is dropped.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

use wasmtime::Engine;

/// How often the epoch advances: the resolution of timeouts, and how long a
/// guest runs before it yields to the executor.
pub(crate) const TICK: Duration = Duration::from_millis(1);

/// Idle ticks before the ticker parks.
const IDLE_TICKS: u32 = 200;

/// Calls running, counted in shards (a cache line each) so that callers on
/// different threads do not write the same line on every call.
#[repr(align(64))]
struct Shard(AtomicUsize);
const SHARDS: usize = 16;

static NEXT_SHARD: AtomicUsize = AtomicUsize::new(0);
thread_local! {
    static SHARD: usize = NEXT_SHARD.fetch_add(1, Ordering::Relaxed) % SHARDS;
}

/// A ticker; clones share it.
#[derive(Clone)]
pub(crate) struct Ticker {
    shared: Arc<Shared>,
}

struct Shared {
    /// The engines whose epoch it advances.
    engines: Mutex<Vec<Engine>>,
    /// The thread, once started.
    thread: Mutex<Option<(Thread, JoinHandle<()>)>>,
    parked: AtomicBool,
    stopped: AtomicBool,
    active: [Shard; SHARDS],
    /// Alarms set, by id: when each goes off and whom to wake.
    alarms: Mutex<BTreeMap<u64, (Instant, Waker)>>,
    next_alarm: AtomicU64,
}

impl Ticker {
    pub(crate) fn new() -> Ticker {
        Ticker {
            shared: Arc::new(Shared {
                engines: Mutex::new(Vec::new()),
                thread: Mutex::new(None),
                parked: AtomicBool::new(false),
                stopped: AtomicBool::new(false),
                active: [const { Shard(AtomicUsize::new(0)) }; SHARDS],
                alarms: Mutex::new(BTreeMap::new()),
                next_alarm: AtomicU64::new(0),
            }),
        }
    }

    /// Advance this engine's epoch too, and start the thread if it is not
    /// running.
    pub(crate) fn tick(&self, engine: &Engine) -> Result<(), String> {
        let shared = &self.shared;
        if shared.stopped.load(Ordering::SeqCst) {
            return Err("the runtime has shut down".to_owned());
        }
        lock(&shared.engines).push(engine.clone());
        let mut thread = lock(&shared.thread);
        if thread.is_none() {
            let ticking = Arc::clone(shared);
            let spawned = std::thread::Builder::new()
                .name("toolhost-epoch".to_owned())
                .spawn(move || run(&ticking))
                .map_err(|e| format!("cannot start the epoch ticker thread: {e}"))?;
            *thread = Some((spawned.thread().clone(), spawned));
        }
        Ok(())
    }

    /// Stop the thread and wait for it to end (at most a tick). Alarms
    /// still set go off at once, so nothing waits on a ticker that is gone.
    pub(crate) fn stop(&self) {
        let shared = &self.shared;
        shared.stopped.store(true, Ordering::SeqCst);
        let thread = lock(&shared.thread).take();
        if let Some((thread, handle)) = thread {
            thread.unpark();
            if std::thread::current().id() != thread.id() {
                let _ = handle.join();
            }
        }
        let waiting: Vec<Waker> = std::mem::take(&mut *lock(&shared.alarms)).into_values().map(|(_, w)| w).collect();
        for waker in waiting {
            waker.wake();
        }
        lock(&shared.engines).clear();
    }

    /// Guest code is about to run: the ticker ticks while the guard lives.
    pub(crate) fn running(&self) -> Running<'_> {
        let shared = &self.shared;
        let shard = SHARD.with(|s| *s);
        shared.active[shard].0.fetch_add(1, Ordering::SeqCst);
        // Read before writing: callers on several threads would otherwise
        // bounce the flag's cache line on every call.
        if shared.parked.load(Ordering::SeqCst)
            && shared.parked.swap(false, Ordering::SeqCst)
            && let Some((thread, _)) = &*lock(&shared.thread)
        {
            thread.unpark();
        }
        Running { shared, shard }
    }

    /// An alarm that goes off at `deadline`.
    pub(crate) fn alarm(&self, deadline: Instant) -> Alarm<'_> {
        Alarm { shared: &self.shared, deadline, id: None }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

fn active(shared: &Shared) -> usize {
    shared.active.iter().map(|shard| shard.0.load(Ordering::SeqCst)).sum()
}

fn run(shared: &Shared) {
    let mut idle = 0;
    while !shared.stopped.load(Ordering::SeqCst) {
        std::thread::sleep(TICK);
        for engine in lock(&shared.engines).iter() {
            engine.increment_epoch();
        }
        fire(shared);
        if active(shared) > 0 {
            idle = 0;
            continue;
        }
        idle += 1;
        if idle >= IDLE_TICKS {
            shared.parked.store(true, Ordering::SeqCst);
            // A call that started after the check above saw `parked` and
            // will unpark us (an unpark before park is not lost).
            if active(shared) == 0 && !shared.stopped.load(Ordering::SeqCst) {
                std::thread::park();
            }
            shared.parked.store(false, Ordering::SeqCst);
            idle = 0;
        }
    }
}

/// Wake the tasks whose alarms have gone off.
fn fire(shared: &Shared) {
    let now = Instant::now();
    let due: Vec<Waker> = {
        let mut alarms = lock(&shared.alarms);
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

/// A deadline the ticker thread keeps: ready once it has passed, and its
/// task woken then (within a tick), even while the guest waits in a host
/// call. Unlike `tokio::time`, it needs no time driver in the caller's
/// runtime. The ticker ticks while a [`Running`] guard lives: hold one
/// meanwhile.
///
/// It borrows its ticker rather than holding a clone: a call on each core
/// would otherwise write the ticker's reference count, one cache line
/// bounced between the cores, on every call.
pub(crate) struct Alarm<'a> {
    shared: &'a Shared,
    deadline: Instant,
    id: Option<u64>,
}

impl Alarm<'_> {
    /// Ready once the deadline has passed (or the ticker stopped); else set
    /// (or renew) the alarm to wake this task.
    pub(crate) fn poll_alarm(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.deadline || self.shared.stopped.load(Ordering::SeqCst) {
            return Poll::Ready(());
        }
        let id = *self.id.get_or_insert_with(|| self.shared.next_alarm.fetch_add(1, Ordering::Relaxed));
        let mut alarms = lock(&self.shared.alarms);
        match alarms.get_mut(&id) {
            Some((_, waker)) if waker.will_wake(cx.waker()) => {}
            _ => {
                alarms.insert(id, (self.deadline, cx.waker().clone()));
            }
        }
        Poll::Pending
    }
}

impl Future for Alarm<'_> {
    type Output = ();

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.poll_alarm(cx)
    }
}

impl Drop for Alarm<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            lock(&self.shared.alarms).remove(&id);
        }
    }
}

/// Marks guest code as running while it lives: the ticker keeps ticking.
/// (It may be dropped on another thread than it was made on: it remembers
/// its shard.)
#[must_use]
pub(crate) struct Running<'a> {
    shared: &'a Shared,
    shard: usize,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.shared.active[self.shard].0.fetch_sub(1, Ordering::SeqCst);
    }
}
