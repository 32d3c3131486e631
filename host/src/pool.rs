//! A bounded pool of instances: at most `size` exist at once; idle ones are
//! reused; a caller that finds none idle and the pool full waits for one to
//! come back (or to be discarded, freeing its place).
//!
//! One mutex guards the idle list and the count of live instances, held only
//! to push, pop or count: taking and returning an instance are one short
//! critical section each, the only shared writes of a call. Waiting callers
//! are woken through a `Notify`, touched only when someone waits.
//!
//! A caller takes, of the last few instances returned, one its own thread
//! returned, if there is one: with two callers on two threads, each keeps
//! calling the instance whose memory is in its own core's cache, rather
//! than the one the other core returned a moment ago (whose store, stack
//! and linear memory would then move between the cores on every call).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Notify;

/// The pool.
pub(crate) struct Pool<T> {
    state: Mutex<State<T>>,
    returned: Notify,
    size: usize,
}

/// How many of the most recently returned idle instances a caller looks
/// through for one its thread returned.
const AFFINITY: usize = 4;

/// This thread's tag, for preferring the instances it returned.
fn thread_tag() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static TAG: u64 = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    TAG.with(|tag| *tag)
}

struct State<T> {
    /// Idle instances, the most recently returned last, each with the tag
    /// of the thread that returned it.
    idle: Vec<(u64, T)>,
    /// Instances in existence: idle, busy, or being made.
    live: usize,
    /// Callers waiting for an instance.
    waiting: usize,
}

/// A place in the pool, held by a busy (or about to be made) instance.
/// Dropped without [`Pool::give_back`], the place is freed: the instance
/// that held it is discarded.
pub(crate) struct Place<'a, T> {
    pool: &'a Pool<T>,
}

impl<T> Drop for Place<'_, T> {
    fn drop(&mut self) {
        let mut state = self.pool.lock();
        state.live -= 1;
        let wake = state.waiting > 0;
        drop(state);
        if wake {
            self.pool.returned.notify_one();
        }
    }
}

impl<T> Pool<T> {
    /// A pool of at most `size` (at least one) instances.
    pub(crate) fn new(size: usize) -> Self {
        Pool {
            state: Mutex::new(State { idle: Vec::with_capacity(size.max(1)), live: 0, waiting: 0 }),
            returned: Notify::new(),
            size: size.max(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Instances the pool may hold.
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// A place, with an idle instance to use, or `None`: make a new one.
    /// Waits while the pool is full and every instance busy.
    pub(crate) async fn take(&self) -> (Place<'_, T>, Option<T>) {
        // Counted as waiting from the first wait until this returns (or is
        // dropped, cancelled).
        struct Waiting<'a, T>(&'a Pool<T>, bool);
        impl<T> Drop for Waiting<'_, T> {
            fn drop(&mut self) {
                if self.1 {
                    self.0.lock().waiting -= 1;
                }
            }
        }
        let mut waiting = Waiting(self, false);
        loop {
            {
                let here = thread_tag();
                let mut state = self.lock();
                let len = state.idle.len();
                let idle = match (len.saturating_sub(AFFINITY)..len).rev().find(|&i| state.idle[i].0 == here) {
                    Some(i) => Some(state.idle.remove(i).1),
                    None => state.idle.pop().map(|(_, instance)| instance),
                };
                if idle.is_some() || state.live < self.size {
                    if idle.is_none() {
                        state.live += 1;
                    }
                    if waiting.1 {
                        state.waiting -= 1;
                        waiting.1 = false;
                    }
                    return (Place { pool: self }, idle);
                }
                if !waiting.1 {
                    state.waiting += 1;
                    waiting.1 = true;
                }
            }
            // A `notify_one` between the unlock and this wait is kept as a
            // permit, so no return is missed.
            self.returned.notified().await;
        }
    }

    /// Return an instance to its place: it becomes idle.
    pub(crate) fn give_back(&self, place: Place<'_, T>, instance: T) {
        // The place stays taken (the instance lives on, idle): it must not
        // be freed, and holds nothing else to drop.
        std::mem::forget(place);
        let here = thread_tag();
        let mut state = self.lock();
        state.idle.push((here, instance));
        let wake = state.waiting > 0;
        drop(state);
        if wake {
            self.returned.notify_one();
        }
    }

    /// Drop the idle instances `keep` refuses, freeing their places.
    pub(crate) fn retain_idle(&self, keep: impl Fn(&T) -> bool) {
        let mut state = self.lock();
        let (kept, dropped): (Vec<_>, Vec<_>) = state.idle.drain(..).partition(|(_, instance)| keep(instance));
        state.idle = kept;
        state.live -= dropped.len();
        let wake = if state.waiting > 0 { dropped.len() } else { 0 };
        drop(state);
        // (Dropped outside the lock.)
        drop(dropped);
        // One wake per freed place, as freeing a place does.
        for _ in 0..wake {
            self.returned.notify_one();
        }
    }

    /// Idle instances, and how many exist.
    pub(crate) fn counts(&self) -> (usize, usize) {
        let state = self.lock();
        (state.idle.len(), state.live)
    }

    /// Run `f` over the idle instances.
    pub(crate) fn idle_sum(&self, f: impl Fn(&T) -> usize) -> usize {
        self.lock().idle.iter().map(|(_, instance)| f(instance)).sum()
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
        // A thread that returned none gets the last one returned.
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let (place, idle) = block_on(pool.take());
                assert_eq!(idle, Some(1), "the last one returned");
                pool.give_back(place, 1);
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
