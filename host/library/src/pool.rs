//! A bounded pool of instances: at most `size` exist at once; idle ones are
//! reused; a caller that finds none idle and the pool full waits for one to
//! come back (or to be discarded, freeing its place).
//!
//! Idle instances are kept in a few shards, each behind its own mutex on a
//! cache line of its own; a thread returns instances to, and takes them
//! from, the shard its thread index picks. With two callers on two threads,
//! each takes and returns through a lock whose line stays in its own core's
//! cache: one shared mutex made every call move that line between the
//! cores twice (a profile put its `lock cmpxchg` at half of the call's own
//! host samples), and moved the instance's store, stack and linear memory
//! with it whenever a caller took what the other had just returned. A
//! caller whose shard is empty takes the oldest idle instance of another
//! shard, or else makes a new one if the pool has room.
//!
//! The count of live instances and of waiting callers are atomics written
//! only when an instance is made or discarded and when a caller starts or
//! stops waiting; a return only reads the waiting count. Waiting callers
//! are woken through a `Notify`, touched only when someone waits.
//!
//! Within a shard, a caller takes, of the last few instances returned, one
//! its own thread returned, if there is one (threads may share a shard).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{LazyLock, Mutex, MutexGuard};

use crossbeam_utils::CachePadded;
use tokio::sync::Notify;

/// Idle instances, the most recently returned last, each with the tag of
/// the thread that returned it.
type Shard<T> = CachePadded<Mutex<Vec<(u64, T)>>>;

/// The pool.
pub(crate) struct Pool<T> {
    shards: Box<[Shard<T>]>,
    /// Instances in existence: idle, busy, or being made.
    live: CachePadded<AtomicUsize>,
    /// Callers waiting for an instance.
    waiting: AtomicUsize,
    returned: Notify,
    size: usize,
}

/// How many of the most recently returned idle instances of its shard a
/// caller looks through for one its thread returned.
const AFFINITY: usize = 4;

/// The number of cores (2 if it cannot be learnt), asked once: the answer
/// comes from cgroup files on Linux. It is also a plugin's default pool
/// size.
pub(crate) fn cores() -> usize {
    static CORES: LazyLock<usize> =
        LazyLock::new(|| std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get));
    *CORES
}

/// Shards per pool: twice the cores (so that the threads of a busy process
/// seldom share one), at most 64, and no more than the pool has instances.
fn shard_count(size: usize) -> usize {
    (2 * cores()).clamp(1, 64).min(size)
}

/// This thread's tag: its index among the threads that used a pool, which
/// also picks its shard (consecutive threads, consecutive shards).
fn thread_tag() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    thread_local! {
        static TAG: u64 = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    TAG.with(|tag| *tag)
}

/// A place in the pool, held by a busy (or about to be made) instance.
/// Dropped without [`Pool::give_back`], the place is freed: the instance
/// that held it is discarded.
pub(crate) struct Place<'a, T> {
    pool: &'a Pool<T>,
}

impl<T> Drop for Place<'_, T> {
    fn drop(&mut self) {
        self.pool.free_place();
    }
}

impl<T> Pool<T> {
    /// A pool of at most `size` (at least one) instances.
    pub(crate) fn new(size: usize) -> Self {
        let size = size.max(1);
        Pool {
            shards: (0..shard_count(size)).map(|_| CachePadded::new(Mutex::new(Vec::new()))).collect(),
            live: CachePadded::new(AtomicUsize::new(0)),
            waiting: AtomicUsize::new(0),
            returned: Notify::new(),
            size,
        }
    }

    fn lock(&self, shard: usize) -> MutexGuard<'_, Vec<(u64, T)>> {
        self.shards[shard].lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The shard of the thread tagged `tag`.
    fn shard_of(&self, tag: u64) -> usize {
        // The remainder is below the shard count, a `usize`.
        (tag % self.shards.len() as u64) as usize
    }

    /// Free a place: its instance was discarded.
    fn free_place(&self) {
        // Sequentially consistent with a waiter's count and its look at
        // `live` in `take`: either it sees the freed place or this sees it
        // waiting.
        self.live.fetch_sub(1, Ordering::SeqCst);
        self.wake_one();
    }

    /// Wake one waiting caller, if any waits.
    fn wake_one(&self) {
        if self.waiting.load(Ordering::SeqCst) > 0 {
            self.returned.notify_one();
        }
    }

    /// Instances the pool may hold.
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// An idle instance of this thread's shard (preferring one this
    /// thread returned), or else of another shard, or else a new place if
    /// the pool has room: an idle instance is reused before another is
    /// made, so calls one at a time that land on different threads keep
    /// using one instance.
    fn try_take(&self, here: u64) -> Option<(Place<'_, T>, Option<T>)> {
        let own = self.shard_of(here);
        {
            let mut idle = self.lock(own);
            let len = idle.len();
            if len > 0 {
                let i = (len.saturating_sub(AFFINITY)..len).rev().find(|&i| idle[i].0 == here).unwrap_or(len - 1);
                return Some((Place { pool: self }, Some(idle.remove(i).1)));
            }
        }
        // From another shard, the one returned longest ago: the most
        // recent is the one still warm in its thread's cache.
        let shards = self.shards.len();
        let oldest = |shard: usize| {
            let mut idle = self.lock(shard);
            (!idle.is_empty()).then(|| idle.remove(0))
        };
        if let Some(instance) = (1..shards).find_map(|step| oldest((own + step) % shards)) {
            return Some((Place { pool: self }, Some(instance.1)));
        }
        let mut live = self.live.load(Ordering::SeqCst);
        while live < self.size {
            match self.live.compare_exchange_weak(live, live + 1, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => return Some((Place { pool: self }, None)),
                Err(now) => live = now,
            }
        }
        None
    }

    /// A place, with an idle instance to use, or `None`: make a new one.
    /// Waits while the pool is full and every instance busy.
    pub(crate) async fn take(&self) -> (Place<'_, T>, Option<T>) {
        let here = thread_tag();
        if let Some(taken) = self.try_take(here) {
            return taken;
        }
        // Counted as waiting from here until this returns (or is dropped,
        // cancelled).
        struct Waiting<'a, T>(&'a Pool<T>);
        impl<T> Drop for Waiting<'_, T> {
            fn drop(&mut self) {
                self.0.waiting.fetch_sub(1, Ordering::SeqCst);
            }
        }
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let _waiting = Waiting(self);
        loop {
            // Counted, and in `Notify`'s list of waiters, before this look:
            // a return or discard after it sees the count and its
            // `notify_one` wakes this waiter or another that is listed.
            // (Listed only at the wait, two waiters could share the one
            // permit `Notify` keeps for two returns, and one would sleep
            // beside an idle instance until the next return.)
            let notified = self.returned.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if let Some(taken) = self.try_take(here) {
                return taken;
            }
            notified.await;
        }
    }

    /// Return an instance to its place: it becomes idle.
    pub(crate) fn give_back(&self, place: Place<'_, T>, instance: T) {
        // The place stays taken (the instance lives on, idle): it must not
        // be freed, and holds nothing else to drop.
        std::mem::forget(place);
        let here = thread_tag();
        self.lock(self.shard_of(here)).push((here, instance));
        // A waiter counted before its last look either saw this instance
        // (it locked the shard after the push) or is seen here (it locked
        // the shard before, so its count came before this read).
        self.wake_one();
    }

    /// Drop the idle instances `keep` refuses, freeing their places.
    pub(crate) fn retain_idle(&self, keep: impl Fn(&T) -> bool) {
        for shard in 0..self.shards.len() {
            let dropped: Vec<_> = {
                let mut idle = self.lock(shard);
                let (kept, dropped) = std::mem::take(&mut *idle).into_iter().partition(|(_, instance)| keep(instance));
                *idle = kept;
                dropped
            };
            // (Dropped outside the lock; one wake per freed place, as
            // freeing a place does.)
            for instance in dropped {
                drop(instance);
                self.free_place();
            }
        }
    }

    /// Idle instances, and how many exist. (The shards are counted one at
    /// a time while calls go on, so the idle count is a moment's estimate,
    /// kept at most the live count: an instance counted idle may have been
    /// taken and discarded before `live` is read.)
    pub(crate) fn counts(&self) -> (usize, usize) {
        let idle: usize = (0..self.shards.len()).map(|shard| self.lock(shard).len()).sum();
        let live = self.live.load(Ordering::SeqCst);
        (idle.min(live), live)
    }

    /// Run `f` over the idle instances.
    pub(crate) fn idle_sum(&self, f: impl Fn(&T) -> usize) -> usize {
        (0..self.shards.len())
            .map(|shard| self.lock(shard).iter().map(|(_, instance)| f(instance)).sum::<usize>())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn idle_instances_are_reused_and_discarded_ones_free_their_place() {
        let pool = Pool::new(2);
        let (place, idle) = pool.take().await;
        assert_eq!(idle, None, "an empty pool gives a place to fill");
        pool.give_back(place, 1);
        assert_eq!(pool.counts(), (1, 1));
        let (place, idle) = pool.take().await;
        assert_eq!(idle, Some(1));
        drop(place); // discarded
        assert_eq!(pool.counts(), (0, 0));
    }

    #[test]
    fn a_caller_takes_back_the_instance_its_thread_returned() {
        let pool = Pool::new(4);
        let block_on = |f| tokio::runtime::Builder::new_current_thread().build().expect("runtime").block_on(f);
        let (first, _) = block_on(pool.take());
        let (second, _) = block_on(pool.take());
        pool.give_back(first, 1);
        // Another thread returns 2, after 1.
        std::thread::scope(|scope| {
            scope.spawn(|| pool.give_back(second, 2));
        });
        // This thread gets its own back, though 2 came back last.
        let (mine, idle) = block_on(pool.take());
        assert_eq!(idle, Some(1));
        pool.give_back(mine, 1);
        // A thread that returned none takes an idle one (from another
        // thread's shard) rather than making a third.
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let (place, idle) = block_on(pool.take());
                let idle = idle.expect("an idle instance, not a new place");
                pool.give_back(place, idle);
            });
        });
        assert_eq!(pool.counts(), (2, 2));
    }

    #[tokio::test]
    async fn a_full_pool_makes_callers_wait_for_a_return() {
        let pool = Arc::new(Pool::new(1));
        let (held, _) = pool.take().await;
        let served = Arc::new(AtomicUsize::new(0));
        let waiter = {
            let (pool, served) = (Arc::clone(&pool), Arc::clone(&served));
            tokio::spawn(async move {
                let (place, idle) = pool.take().await;
                assert_eq!(idle, Some(7), "expected the returned instance");
                served.fetch_add(1, Ordering::SeqCst);
                pool.give_back(place, 7);
            })
        };
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert_eq!(served.load(Ordering::SeqCst), 0, "the waiter waits while the only instance is busy");
        pool.give_back(held, 7);
        waiter.await.unwrap();
        assert_eq!(served.load(Ordering::SeqCst), 1);
        assert_eq!(pool.counts(), (1, 1));
    }

    #[tokio::test]
    async fn idle_instances_refused_by_retain_free_their_places() {
        let pool = Pool::new(3);
        let mut places = Vec::new();
        for _ in 0..3 {
            places.push(pool.take().await.0);
        }
        for (place, instance) in places.into_iter().zip([1, 2, 3]) {
            pool.give_back(place, instance);
        }
        pool.retain_idle(|&instance| instance != 2);
        assert_eq!(pool.counts(), (2, 2));
        // The freed place makes a new instance; the kept ones are reused.
        let taken = [pool.take().await, pool.take().await, pool.take().await];
        let mut idle: Vec<_> = taken.iter().map(|(_, idle)| *idle).collect();
        idle.sort();
        assert_eq!(idle, [None, Some(1), Some(3)]);
    }

    #[test]
    fn threads_contending_for_a_small_pool_never_exceed_it_and_all_finish() {
        const THREADS: usize = 8;
        const ROUNDS: usize = 500;
        let pool = Arc::new(Pool::<usize>::new(2));
        let busy = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let (done, finished) = std::sync::mpsc::channel();
        for thread in 0..THREADS {
            let (pool, busy, most, done) = (Arc::clone(&pool), Arc::clone(&busy), Arc::clone(&most), done.clone());
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
                for round in 0..ROUNDS {
                    let (place, idle) = runtime.block_on(pool.take());
                    let now = busy.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    // Held a moment, so that others find the pool full.
                    std::thread::sleep(std::time::Duration::from_micros(20));
                    busy.fetch_sub(1, Ordering::SeqCst);
                    // Every seventh use discards its instance, freeing its
                    // place for a waiter to fill.
                    if (thread + round) % 7 == 0 {
                        drop(place);
                    } else {
                        pool.give_back(place, idle.unwrap_or(thread));
                    }
                }
                done.send(()).expect("the test waits");
            });
        }
        for _ in 0..THREADS {
            // A lost wake-up leaves a caller waiting for good.
            finished.recv_timeout(std::time::Duration::from_secs(120)).expect("every thread finishes");
        }
        assert!(most.load(Ordering::SeqCst) <= 2, "at most two instances in use at once");
        let (idle, live) = pool.counts();
        assert_eq!(idle, live, "with every caller done, every live instance is idle");
        assert!(live <= 2);
    }

    #[tokio::test]
    async fn a_discarded_instance_lets_a_waiter_make_a_new_one() {
        let pool = Arc::new(Pool::<u32>::new(1));
        let (held, _) = pool.take().await;
        let waiter = {
            let pool = Arc::clone(&pool);
            tokio::spawn(async move { pool.take().await.1.is_none() })
        };
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        drop(held);
        assert!(waiter.await.unwrap(), "the waiter got the freed place");
    }
}
