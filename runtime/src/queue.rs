//! The work queue: what client-go's rate-limited delaying work queue does.
//!
//! - A key added while it waits is not queued twice.
//! - A key is handed to one worker at a time; added again while in flight, it is queued again
//!   only when that worker calls [`WorkQueue::done`].
//! - [`WorkQueue::add_after`] delays a key; [`WorkQueue::add_rate_limited`] delays it by its
//!   own exponential backoff (5 ms doubling to 1000 s, client-go's default), which
//!   [`WorkQueue::forget`] resets.
//!
//! It owns no tasks: delayed keys become due inside [`WorkQueue::get`].

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Per-key exponential backoff: `base * 2^failures`, capped at `max`.
#[derive(Debug, Clone, Copy)]
pub struct RateLimit {
    pub base: Duration,
    pub max: Duration,
}

impl Default for RateLimit {
    fn default() -> Self {
        Self {
            base: Duration::from_millis(5),
            max: Duration::from_secs(1000),
        }
    }
}

struct Inner<K> {
    queue: VecDeque<K>,
    /// Keys waiting to be processed (queued, or re-added while in flight).
    dirty: HashSet<K>,
    processing: HashSet<K>,
    /// Delayed keys and when they become due.
    waiting: HashMap<K, Instant>,
    failures: HashMap<K, u32>,
    shut_down: bool,
}

/// A deduplicating, delaying, rate-limited work queue of keys.
pub struct WorkQueue<K> {
    inner: Arc<Mutex<Inner<K>>>,
    notify: Arc<Notify>,
    limit: RateLimit,
}

impl<K> Clone for WorkQueue<K> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            notify: self.notify.clone(),
            limit: self.limit,
        }
    }
}

impl<K: Clone + Eq + Hash> Default for WorkQueue<K> {
    fn default() -> Self {
        Self::new(RateLimit::default())
    }
}

impl<K: Clone + Eq + Hash> WorkQueue<K> {
    pub fn new(limit: RateLimit) -> Self {
        Self {
            inner: Arc::new(Mutex::new(Inner {
                queue: VecDeque::new(),
                dirty: HashSet::new(),
                processing: HashSet::new(),
                waiting: HashMap::new(),
                failures: HashMap::new(),
                shut_down: false,
            })),
            notify: Arc::new(Notify::new()),
            limit,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner<K>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `key` now.
    pub fn add(&self, key: K) {
        {
            let mut inner = self.lock();
            if inner.shut_down {
                return;
            }
            Self::add_locked(&mut inner, key);
        }
        self.notify.notify_waiters();
    }

    fn add_locked(inner: &mut Inner<K>, key: K) {
        if !inner.dirty.insert(key.clone()) {
            return;
        }
        if !inner.processing.contains(&key) {
            inner.queue.push_back(key);
        }
    }

    /// Queues `key` once `delay` has passed (the earliest of several delays wins).
    pub fn add_after(&self, key: K, delay: Duration) {
        if delay.is_zero() {
            return self.add(key);
        }
        {
            let mut inner = self.lock();
            if inner.shut_down {
                return;
            }
            let due = Instant::now() + delay;
            inner
                .waiting
                .entry(key)
                .and_modify(|d| *d = (*d).min(due))
                .or_insert(due);
        }
        self.notify.notify_waiters();
    }

    /// Queues `key` after its next backoff delay.
    pub fn add_rate_limited(&self, key: K) {
        let delay = {
            let mut inner = self.lock();
            let n = inner.failures.entry(key.clone()).or_insert(0);
            let delay = self
                .limit
                .base
                .saturating_mul(2u32.saturating_pow(*n))
                .min(self.limit.max);
            *n = n.saturating_add(1);
            delay
        };
        self.add_after(key, delay);
    }

    /// Resets the backoff of `key`.
    pub fn forget(&self, key: &K) {
        self.lock().failures.remove(key);
    }

    /// How many times `key` has been requeued with backoff since it was last forgotten.
    pub fn failures(&self, key: &K) -> u32 {
        self.lock().failures.get(key).copied().unwrap_or(0)
    }

    /// Marks `key` processed; if it was added meanwhile, it is queued again.
    pub fn done(&self, key: &K) {
        {
            let mut inner = self.lock();
            inner.processing.remove(key);
            if inner.dirty.contains(key) {
                inner.queue.push_back(key.clone());
            }
        }
        self.notify.notify_waiters();
    }

    /// The number of keys ready to be processed.
    pub fn len(&self) -> usize {
        self.lock().queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stops handing out keys; [`WorkQueue::get`] returns `None` from now on.
    pub fn shut_down(&self) {
        self.lock().shut_down = true;
        self.notify.notify_waiters();
    }

    /// The next key to process, waiting for one; `None` once shut down or cancelled. The
    /// caller must call [`WorkQueue::done`] with it.
    pub async fn get(&self, cancel: &CancellationToken) -> Option<K> {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            // Registered before the state is read, so no add in between is missed.
            notified.as_mut().enable();
            let next_due = {
                let mut inner = self.lock();
                if inner.shut_down {
                    return None;
                }
                let now = Instant::now();
                let due: Vec<K> = inner
                    .waiting
                    .iter()
                    .filter(|(_, d)| **d <= now)
                    .map(|(k, _)| k.clone())
                    .collect();
                for k in due {
                    inner.waiting.remove(&k);
                    Self::add_locked(&mut inner, k);
                }
                if let Some(k) = inner.queue.pop_front() {
                    inner.dirty.remove(&k);
                    inner.processing.insert(k.clone());
                    return Some(k);
                }
                inner.waiting.values().min().copied()
            };
            let sleep = async {
                match next_due {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = notified => {}
                () = sleep => {}
                () = cancel.cancelled() => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn dedupes_and_never_hands_out_a_key_twice_at_once() {
        let q: WorkQueue<&str> = WorkQueue::default();
        let cancel = CancellationToken::new();
        q.add("a");
        q.add("a");
        q.add("b");
        assert_eq!(q.len(), 2);
        let a = q.get(&cancel).await.unwrap();
        assert_eq!(a, "a");
        // Re-added while in flight: not handed out until done.
        q.add("a");
        assert_eq!(q.get(&cancel).await, Some("b"));
        assert!(q.is_empty());
        q.done(&"b");
        assert!(q.is_empty());
        q.done(&"a");
        assert_eq!(q.get(&cancel).await, Some("a"));
        q.done(&"a");
        assert!(q.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn delays_and_backoff() {
        let q: WorkQueue<&str> = WorkQueue::default();
        let cancel = CancellationToken::new();
        let start = Instant::now();
        q.add_after("late", Duration::from_secs(10));
        q.add_after("early", Duration::from_secs(1));
        assert_eq!(q.get(&cancel).await, Some("early"));
        assert!(start.elapsed() >= Duration::from_secs(1));
        q.done(&"early");
        assert_eq!(q.get(&cancel).await, Some("late"));
        assert!(start.elapsed() >= Duration::from_secs(10));
        q.done(&"late");

        // 5ms, 10ms, 20ms, ...; forget resets.
        for expected in [5u64, 10, 20, 40] {
            let t = Instant::now();
            q.add_rate_limited("k");
            assert_eq!(q.get(&cancel).await, Some("k"));
            q.done(&"k");
            assert_eq!(t.elapsed(), Duration::from_millis(expected));
        }
        assert_eq!(q.failures(&"k"), 4);
        q.forget(&"k");
        assert_eq!(q.failures(&"k"), 0);
        // The cap.
        let capped: WorkQueue<&str> = WorkQueue::default();
        for _ in 0..40 {
            capped.add_rate_limited("x");
        }
        let t = Instant::now();
        assert_eq!(capped.get(&cancel).await, Some("x"));
        assert!(t.elapsed() <= Duration::from_secs(1000));
    }

    #[tokio::test]
    async fn shutdown_and_cancel_end_get() {
        let q: WorkQueue<u32> = WorkQueue::default();
        let cancel = CancellationToken::new();
        let waiter = {
            let q = q.clone();
            let cancel = cancel.clone();
            tokio::spawn(async move { q.get(&cancel).await })
        };
        q.shut_down();
        assert_eq!(waiter.await.unwrap(), None);
        let q: WorkQueue<u32> = WorkQueue::default();
        cancel.cancel();
        assert_eq!(q.get(&cancel).await, None);
    }

    #[tokio::test]
    async fn a_waiting_worker_wakes_on_add() {
        let q: WorkQueue<u32> = WorkQueue::default();
        let cancel = CancellationToken::new();
        let waiter = {
            let q = q.clone();
            let cancel = cancel.clone();
            tokio::spawn(async move { q.get(&cancel).await })
        };
        tokio::task::yield_now().await;
        q.add(7);
        assert_eq!(waiter.await.unwrap(), Some(7));
    }
}
