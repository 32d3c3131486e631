//! A bounded pool of instances: at most `size` exist at once; idle ones are
//! reused; a caller that finds none idle and the pool full waits for one to
//! come back (or to be discarded, freeing its place).
//!
//! One mutex guards the idle list and the count of live instances, held only
//! to push, pop or count: taking and returning an instance are one short
//! critical section each, the only shared writes of a call. Waiting callers
//! are woken through a `Notify`, touched only when someone waits.

use std::sync::Mutex;

use tokio::sync::Notify;

/// The pool.
pub(crate) struct Pool<T> {
    state: Mutex<State<T>>,
    returned: Notify,
    size: usize,
}

struct State<T> {
    idle: Vec<T>,
    /// Instances in existence: idle, busy, or being made.
    live: usize,
    /// Callers waiting for an instance.
    waiting: usize,
}

/// What [`Pool::take`] gives: an idle instance, or the right to make one.
pub(crate) enum Taken<'a, T> {
    /// An idle instance.
    Idle(Lease<'a, T>),
    /// A place for a new instance: make one and [`Lease::fill`] it.
    Empty(Lease<'a, T>),
}

/// A place in the pool, with or without its instance. Dropped without
/// [`Pool::give_back`], the place is freed and the instance discarded.
pub(crate) struct Lease<'a, T> {
    pool: &'a Pool<T>,
    instance: Option<T>,
}

impl<T> Lease<'_, T> {
    /// The instance (a lease from [`Taken::Empty`] has one after `fill`).
    pub(crate) fn instance(&mut self) -> Option<&mut T> {
        self.instance.as_mut()
    }

    /// Put a new instance in an empty place.
    pub(crate) fn fill(&mut self, instance: T) {
        self.instance = Some(instance);
    }
}

impl<T> Drop for Lease<'_, T> {
    fn drop(&mut self) {
        let mut state = self.pool.lock();
        state.live -= 1;
        let wake = state.waiting > 0;
        drop(state);
        drop(self.instance.take());
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

    /// An idle instance, or a place to make one; waits while the pool is
    /// full and every instance busy.
    pub(crate) async fn take(&self) -> Taken<'_, T> {
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
                let mut state = self.lock();
                if let Some(instance) = state.idle.pop() {
                    if waiting.1 {
                        state.waiting -= 1;
                        waiting.1 = false;
                    }
                    return Taken::Idle(Lease { pool: self, instance: Some(instance) });
                }
                if state.live < self.size {
                    state.live += 1;
                    if waiting.1 {
                        state.waiting -= 1;
                        waiting.1 = false;
                    }
                    return Taken::Empty(Lease { pool: self, instance: None });
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

    /// Return a leased instance: it becomes idle.
    pub(crate) fn give_back(&self, mut lease: Lease<'_, T>) {
        let Some(instance) = lease.instance.take() else { return };
        // The place stays taken (the instance lives on, idle): the lease
        // must not free it, and holds nothing else to drop.
        std::mem::forget(lease);
        let mut state = self.lock();
        state.idle.push(instance);
        let wake = state.waiting > 0;
        drop(state);
        if wake {
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
        self.lock().idle.iter().map(f).sum()
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
        let Taken::Empty(mut a) = pool.take().await else { panic!("empty pool") };
        a.fill(1);
        pool.give_back(a);
        assert_eq!(pool.counts(), (1, 1));
        let Taken::Idle(mut a) = pool.take().await else { panic!("idle instance") };
        assert_eq!(a.instance(), Some(&mut 1));
        drop(a); // discarded
        assert_eq!(pool.counts(), (0, 0));
    }

    #[tokio::test]
    async fn a_full_pool_makes_callers_wait_for_a_return() {
        let pool = Arc::new(Pool::new(1));
        let Taken::Empty(mut held) = pool.take().await else { panic!() };
        held.fill(7);
        let served = Arc::new(AtomicUsize::new(0));
        let waiter = {
            let (pool, served) = (Arc::clone(&pool), Arc::clone(&served));
            tokio::spawn(async move {
                let Taken::Idle(mut lease) = pool.take().await else { panic!("expected the returned instance") };
                assert_eq!(lease.instance(), Some(&mut 7));
                served.fetch_add(1, Ordering::SeqCst);
                pool.give_back(lease);
            })
        };
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert_eq!(served.load(Ordering::SeqCst), 0, "the waiter waits while the only instance is busy");
        pool.give_back(held);
        waiter.await.unwrap();
        assert_eq!(served.load(Ordering::SeqCst), 1);
        assert_eq!(pool.counts(), (1, 1));
    }

    #[tokio::test]
    async fn a_discarded_instance_lets_a_waiter_make_a_new_one() {
        let pool = Arc::new(Pool::<u32>::new(1));
        let Taken::Empty(held) = pool.take().await else { panic!() };
        let waiter = {
            let pool = Arc::clone(&pool);
            tokio::spawn(async move { matches!(pool.take().await, Taken::Empty(_)) })
        };
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        drop(held);
        assert!(waiter.await.unwrap(), "the waiter got the freed place");
    }
}
