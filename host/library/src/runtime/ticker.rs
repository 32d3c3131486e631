//! The epoch ticker of a [`Runtime`](crate::Runtime): one thread that
//! advances its engines' epoch, so a running guest checks its deadline and
//! yields to the executor; and keeps the alarms of guests waiting in host
//! calls. It ends when its runtime shuts down or is dropped.
//!
//! It has three paces, so that what it costs follows what guests do:
//! - **ticking**, every [`TICK`], while it saw guest code running at its
//!   last look: a guest that runs on yields every tick, and deadlines are
//!   kept to a tick;
//! - **watching**, every [`WATCH`], while calls come and go between its
//!   looks: most calls take microseconds, and a server answering hundreds
//!   a second would otherwise wake this thread a thousand times a second,
//!   two wake-ups a call. A call that runs on is seen within `WATCH` and
//!   ticked from then on, so its first yield comes at most `WATCH` after it
//!   began (its deadline is checked then too);
//! - **parked** after [`PARK_AFTER`] without a call or an alarm, so an idle
//!   host costs nothing; the next call unparks it.
//!
//! Alarms do not make it tick: it looks no later than the earliest alarm
//! set, whatever its pace. An alarm earlier than its next look wakes it at
//! once; one later (a call's timeout, seconds away, set while the call
//! waits on a remote server) costs no wake-up at all.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

use wasmtime::Engine;

/// How often the epoch advances while the ticker is ticking: the
/// resolution of timeouts, and how long a running guest goes between its
/// yields to the executor (its first comes within [`WATCH`]).
pub(crate) const TICK: Duration = Duration::from_millis(1);

/// How often the ticker looks while calls come and go but none was seen
/// running: the longest a guest runs before its first yield.
const WATCH: Duration = Duration::from_millis(10);

/// How long without a call before the ticker parks.
const PARK_AFTER: Duration = Duration::from_secs(1);

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
    /// When it looks next, in nanoseconds after `origin` (`u64::MAX` while
    /// parked or not started). Written and read under the `alarms` lock.
    next_look: AtomicU64,
    origin: Instant,
    /// A call started since the ticker last looked.
    seen: AtomicBool,
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
                next_look: AtomicU64::new(u64::MAX),
                origin: Instant::now(),
                seen: AtomicBool::new(false),
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
        // Read before writing (here and below): callers on several threads
        // would otherwise bounce the flags' cache line on every call.
        if !shared.seen.load(Ordering::Relaxed) {
            shared.seen.store(true, Ordering::Relaxed);
        }
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
    let mut last_call = Instant::now();
    let mut ticking = false;
    while !shared.stopped.load(Ordering::SeqCst) {
        let pace = if ticking { TICK } else { WATCH };
        // No later than the earliest alarm. (An unpark, for an earlier
        // alarm or a stop, ends the wait early.)
        let wait = {
            let alarms = lock(&shared.alarms);
            let now = Instant::now();
            let wait = alarms.values().map(|(at, _)| at.saturating_duration_since(now)).fold(pace, Duration::min);
            shared.next_look.store(shared.nanos(now + wait), Ordering::SeqCst);
            wait
        };
        std::thread::park_timeout(wait);
        for engine in lock(&shared.engines).iter() {
            engine.increment_epoch();
        }
        let alarms = fire(shared);
        let running = active(shared) > 0;
        let seen = shared.seen.swap(false, Ordering::Relaxed);
        ticking = running;
        let now = Instant::now();
        if running || seen {
            last_call = now;
        }
        if ticking || alarms || now.duration_since(last_call) < PARK_AFTER {
            continue;
        }
        shared.parked.store(true, Ordering::SeqCst);
        // An alarm set from now on finds the ticker parked and unparks it;
        // one set before is seen here.
        let no_alarm = {
            let alarms = lock(&shared.alarms);
            shared.next_look.store(u64::MAX, Ordering::SeqCst);
            alarms.is_empty()
        };
        // A call that started after the check above saw `parked` and will
        // unpark us (an unpark before park is not lost).
        if no_alarm && active(shared) == 0 && !shared.stopped.load(Ordering::SeqCst) {
            std::thread::park();
        }
        shared.parked.store(false, Ordering::SeqCst);
        last_call = Instant::now();
    }
}

impl Shared {
    /// `at` in nanoseconds after the ticker's origin (`u64::MAX` at most).
    fn nanos(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.origin).as_nanos()).unwrap_or(u64::MAX)
    }
}

/// Wake the tasks whose alarms have gone off; whether any alarm is still
/// set.
fn fire(shared: &Shared) -> bool {
    let now = Instant::now();
    let (due, left): (Vec<Waker>, bool) = {
        let mut alarms = lock(&shared.alarms);
        if alarms.is_empty() {
            return false;
        }
        let ids: Vec<u64> = alarms.iter().filter(|(_, (at, _))| *at <= now).map(|(id, _)| *id).collect();
        let due = ids.into_iter().filter_map(|id| alarms.remove(&id)).map(|(_, waker)| waker).collect();
        (due, !alarms.is_empty())
    };
    for waker in due {
        waker.wake();
    }
    left
}

/// A deadline the ticker thread keeps: ready once it has passed, and its
/// task woken then (within a tick), even while the guest waits in a host
/// call. Unlike `tokio::time`, it needs no time driver in the caller's
/// runtime. It needs no [`Running`] guard: the ticker looks by the
/// earliest alarm set, whatever its pace.
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
        let shared = self.shared;
        let mut alarms = lock(&shared.alarms);
        match alarms.get_mut(&id) {
            Some((_, waker)) if waker.will_wake(cx.waker()) => {}
            _ => {
                alarms.insert(id, (self.deadline, cx.waker().clone()));
                // A ticker that would look too late (parked, or watching
                // with no earlier alarm) is woken to look again; one that
                // will look by the deadline, or is between looks (and will
                // see this alarm when it next takes the lock), is not.
                let late = shared.nanos(self.deadline) < shared.next_look.load(Ordering::SeqCst);
                drop(alarms);
                if late && let Some((thread, _)) = &*lock(&shared.thread) {
                    thread.unpark();
                }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Wait for `alarm` on a runtime with no time driver, on a thread of
    /// its own; when it went off, or `None` if it had not within 30 s.
    fn went_off(ticker: &Ticker, at: Instant) -> Option<Instant> {
        let ticker = ticker.clone();
        let (sent, went) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().build().expect("a runtime");
            runtime.block_on(ticker.alarm(at));
            let _ = sent.send(Instant::now());
        });
        went.recv_timeout(Duration::from_secs(30)).ok()
    }

    #[test]
    fn an_alarm_goes_off_after_its_deadline_whether_the_ticker_is_parked_watching_or_waits_for_a_later_one() {
        let ticker = Ticker::new();
        ticker.tick(&Engine::default()).expect("the ticker starts");

        // Parked: nothing has run for longer than `PARK_AFTER`.
        let waited = Instant::now() + Duration::from_secs(30);
        while !ticker.shared.parked.load(Ordering::SeqCst) {
            assert!(Instant::now() < waited, "the ticker never parked");
            std::thread::sleep(Duration::from_millis(20));
        }
        let at = Instant::now() + Duration::from_millis(50);
        let off = went_off(&ticker, at).expect("an alarm set while the ticker is parked goes off");
        assert!(off >= at, "it went off before its deadline");

        // A later alarm is set (it neither goes off nor holds back an
        // earlier one), then one earlier than the ticker's next look.
        let later = ticker.clone();
        let far = std::thread::spawn(move || went_off(&later, Instant::now() + Duration::from_secs(3600)));
        for ahead in [Duration::from_millis(30), Duration::from_micros(500), Duration::ZERO] {
            let at = Instant::now() + ahead;
            let off = went_off(&ticker, at).expect("an alarm earlier than a later one goes off");
            assert!(off >= at, "it went off before its deadline");
        }
        assert!(!far.is_finished(), "the alarm an hour away went off");

        // Stopping the ticker sets off the alarms still set.
        ticker.stop();
        assert!(far.join().expect("the waiting thread").is_some(), "a stopped ticker left an alarm set");
    }
}
