//! The scheduling queue (upstream `internal/queue`): pods waiting to be scheduled.
//!
//! - **activeQ**: ready pods, highest priority first, then oldest (PrioritySort).
//! - **backoffQ**: pods that failed recently, released after a per-pod exponential backoff
//!   (initial × 2^(attempts-1), capped; 1 s .. 10 s by default).
//! - **unschedulable**: pods no node fit. A cluster event moves them to active (or backoff
//!   while their backoff runs) when one of the plugins that rejected them registered
//!   interest in the event (upstream's QueueingHints, simplified to per-plugin event sets);
//!   pods stuck longer than 5 minutes are flushed regardless. Pods held back by
//!   `schedulingGates` also wait here until their gates are removed.
//!
//! A move request during a pod's scheduling attempt sends that pod to backoff instead of
//! unschedulable when it fails, so the event is not lost. The queue is internally locked;
//! every method takes `&self`.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::framework::helpers;
use crate::framework::interface::ClusterEvent;
use crate::framework::node_info::PodInfo;

/// How long a pod may stay unschedulable before it is retried anyway.
pub const UNSCHEDULABLE_FLUSH: Duration = Duration::from_secs(5 * 60);

/// A queue operation that does not fit the queue's state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueueError {
    #[error("pod {0} is already in the queue")]
    AlreadyQueued(String),
}

/// A pod in the queue and its scheduling history.
#[derive(Debug, Clone)]
pub struct QueuedPodInfo {
    pub pod_info: Arc<PodInfo>,
    /// When the pod was last added or failed.
    pub timestamp: Instant,
    /// Scheduling attempts so far.
    pub attempts: u32,
    /// When it first entered the queue.
    pub initial_attempt: Instant,
    /// Plugins that rejected the pod in its last attempt; empty after an error.
    pub unschedulable_plugins: HashSet<&'static str>,
    /// Held back by scheduling gates.
    pub gated: bool,
}

impl QueuedPodInfo {
    pub fn pod(&self) -> &Pod {
        &self.pod_info.pod
    }
    pub fn key(&self) -> String {
        helpers::pod_key(&self.pod_info.pod)
    }
}

#[derive(Debug, PartialEq, Eq)]
struct ActiveKey {
    priority: i32,
    timestamp: Reverse<Instant>,
    seq: Reverse<u64>,
    key: String,
}

impl Ord for ActiveKey {
    fn cmp(&self, o: &Self) -> Ordering {
        (self.priority, self.timestamp, self.seq).cmp(&(o.priority, o.timestamp, o.seq))
    }
}
impl PartialOrd for ActiveKey {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Where {
    Active,
    Backoff,
    Unschedulable,
}

struct Entry {
    info: QueuedPodInfo,
    at: Where,
    /// Heap entries with another seq are stale.
    seq: u64,
}

struct Inner {
    pods: HashMap<String, Entry>,
    active: BinaryHeap<ActiveKey>,
    backoff: BinaryHeap<(Reverse<Instant>, Reverse<u64>, String)>,
    seq: u64,
    scheduling_cycle: u64,
    move_request_cycle: u64,
    /// Pods popped and not yet done: key → the cycle they were popped in.
    in_flight: HashMap<String, u64>,
    closed: bool,
}

type Clock = Arc<dyn Fn() -> Instant + Send + Sync>;

/// Active, backoff and unschedulable pods.
pub struct SchedulingQueue {
    inner: Mutex<Inner>,
    notify: Notify,
    initial_backoff: Duration,
    max_backoff: Duration,
    /// Which events each plugin registered.
    plugin_events: HashMap<&'static str, HashSet<ClusterEvent>>,
    clock: Clock,
}

impl SchedulingQueue {
    pub fn new(
        initial_backoff: Duration,
        max_backoff: Duration,
        plugin_events: HashMap<&'static str, HashSet<ClusterEvent>>,
    ) -> Self {
        Self::with_clock(
            initial_backoff,
            max_backoff,
            plugin_events,
            Arc::new(Instant::now),
        )
    }

    pub fn with_clock(
        initial_backoff: Duration,
        max_backoff: Duration,
        plugin_events: HashMap<&'static str, HashSet<ClusterEvent>>,
        clock: Clock,
    ) -> Self {
        Self {
            inner: Mutex::new(Inner {
                pods: HashMap::new(),
                active: BinaryHeap::new(),
                backoff: BinaryHeap::new(),
                seq: 0,
                scheduling_cycle: 0,
                move_request_cycle: 0,
                in_flight: HashMap::new(),
                closed: false,
            }),
            notify: Notify::new(),
            initial_backoff,
            max_backoff,
            plugin_events,
            clock,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now(&self) -> Instant {
        (self.clock)()
    }

    /// The backoff of a pod after `attempts` failures.
    pub fn backoff_duration(&self, attempts: u32) -> Duration {
        let mut d = self.initial_backoff;
        for _ in 1..attempts {
            d = d.saturating_mul(2);
            if d >= self.max_backoff {
                return self.max_backoff;
            }
        }
        d.min(self.max_backoff)
    }

    fn backoff_expiry(&self, info: &QueuedPodInfo) -> Instant {
        info.timestamp + self.backoff_duration(info.attempts)
    }

    fn place(&self, inner: &mut Inner, info: QueuedPodInfo, at: Where) {
        inner.seq += 1;
        let seq = inner.seq;
        let key = info.key();
        match at {
            Where::Active => {
                inner.active.push(ActiveKey {
                    priority: helpers::priority(info.pod()),
                    timestamp: Reverse(info.timestamp),
                    seq: Reverse(seq),
                    key: key.clone(),
                });
                self.notify.notify_one();
            }
            Where::Backoff => {
                let expiry = self.backoff_expiry(&info);
                inner
                    .backoff
                    .push((Reverse(expiry), Reverse(seq), key.clone()));
            }
            Where::Unschedulable => {}
        }
        inner.pods.insert(key, Entry { info, at, seq });
    }

    fn gated(pod: &Pod) -> bool {
        pod.spec
            .as_ref()
            .and_then(|s| s.scheduling_gates.as_ref())
            .is_some_and(|g| !g.is_empty())
    }

    /// A new pending pod.
    pub fn add(&self, pod: Arc<Pod>) -> Result<(), QueueError> {
        let now = self.now();
        let mut inner = self.lock();
        let key = helpers::pod_key(&pod);
        if inner.pods.contains_key(&key) {
            return Err(QueueError::AlreadyQueued(key));
        }
        let gated = Self::gated(&pod);
        let info = QueuedPodInfo {
            pod_info: Arc::new(PodInfo::new(pod)),
            timestamp: now,
            attempts: 0,
            initial_attempt: now,
            unschedulable_plugins: HashSet::new(),
            gated,
        };
        let at = if gated {
            Where::Unschedulable
        } else {
            Where::Active
        };
        self.place(&mut inner, info, at);
        Ok(())
    }

    /// A pending pod changed; it is added if unknown (and not being scheduled).
    pub fn update(&self, pod: Arc<Pod>) {
        let mut inner = self.lock();
        let key = helpers::pod_key(&pod);
        let Some(e) = inner.pods.remove(&key) else {
            if !inner.in_flight.contains_key(&key) {
                drop(inner);
                let _ = self.add(pod);
            }
            return;
        };
        let mut info = e.info;
        let spec_changed =
            info.pod().spec != pod.spec || info.pod().metadata.labels != pod.metadata.labels;
        info.pod_info = Arc::new(PodInfo::new(pod));
        let was_gated = info.gated;
        info.gated = Self::gated(info.pod());
        let at = match e.at {
            Where::Unschedulable if info.gated => Where::Unschedulable,
            Where::Unschedulable if was_gated || spec_changed => {
                if was_gated || self.backoff_expiry(&info) <= self.now() {
                    Where::Active
                } else {
                    Where::Backoff
                }
            }
            other => other,
        };
        if at == e.at && at != Where::Active {
            // Keep its place in the backoff heap.
            inner.pods.insert(
                key,
                Entry {
                    info,
                    at,
                    seq: e.seq,
                },
            );
        } else {
            self.place(&mut inner, info, at);
        }
    }

    /// The pod was deleted (or bound by someone else).
    pub fn delete(&self, pod: &Pod) {
        let mut inner = self.lock();
        inner.pods.remove(&helpers::pod_key(pod));
    }

    /// Whether the pod is queued (in any sub-queue).
    pub fn contains(&self, pod: &Pod) -> bool {
        self.lock().pods.contains_key(&helpers::pod_key(pod))
    }

    /// The next active pod, if any, and the scheduling cycle it starts.
    pub fn try_pop(&self) -> Option<(QueuedPodInfo, u64)> {
        let mut inner = self.lock();
        while let Some(top) = inner.active.pop() {
            let fresh = inner
                .pods
                .get(&top.key)
                .is_some_and(|e| e.at == Where::Active && e.seq == top.seq.0);
            if !fresh {
                continue;
            }
            let mut e = inner.pods.remove(&top.key).expect("checked above");
            e.info.attempts += 1;
            inner.scheduling_cycle += 1;
            let cycle = inner.scheduling_cycle;
            inner.in_flight.insert(top.key, cycle);
            return Some((e.info, cycle));
        }
        None
    }

    /// Waits for an active pod; `None` once cancelled or closed.
    pub async fn pop(&self, cancel: &CancellationToken) -> Option<(QueuedPodInfo, u64)> {
        loop {
            let notified = self.notify.notified();
            if self.lock().closed {
                return None;
            }
            if let Some(p) = self.try_pop() {
                return Some(p);
            }
            tokio::select! {
                _ = cancel.cancelled() => return None,
                _ = notified => {}
                // Backoff expiries are flushed by the caller's timer; poll as a fallback.
                _ = tokio::time::sleep(Duration::from_millis(200)) => {}
            }
        }
    }

    /// Stops `pop` waiters.
    pub fn close(&self) {
        self.lock().closed = true;
        self.notify.notify_waiters();
    }

    /// The pod's attempt finished (bound or handed back); it is no longer in flight.
    pub fn done(&self, pod: &Pod) {
        self.lock().in_flight.remove(&helpers::pod_key(pod));
    }

    /// A pod that failed its attempt started in `cycle`. Unschedulable pods go to the
    /// unschedulable set, unless a move request came during the attempt; errors (no
    /// rejecting plugin) go to backoff.
    pub fn add_unschedulable(&self, mut info: QueuedPodInfo, cycle: u64) {
        let now = self.now();
        let mut inner = self.lock();
        let key = info.key();
        inner.in_flight.remove(&key);
        if inner.pods.contains_key(&key) {
            return;
        }
        info.timestamp = now;
        let at = if info.unschedulable_plugins.is_empty() || inner.move_request_cycle >= cycle {
            Where::Backoff
        } else {
            Where::Unschedulable
        };
        self.place(&mut inner, info, at);
    }

    /// Moves pods whose backoff ended to active.
    pub fn flush_backoff_completed(&self) {
        let now = self.now();
        let mut inner = self.lock();
        while let Some((Reverse(expiry), Reverse(seq), key)) = inner.backoff.peek().cloned() {
            if expiry > now {
                break;
            }
            inner.backoff.pop();
            let fresh = inner
                .pods
                .get(&key)
                .is_some_and(|e| e.at == Where::Backoff && e.seq == seq);
            if fresh {
                let e = inner.pods.remove(&key).expect("checked above");
                self.place(&mut inner, e.info, Where::Active);
            }
        }
    }

    /// Retries pods unschedulable for longer than [`UNSCHEDULABLE_FLUSH`].
    pub fn flush_unschedulable_leftover(&self) {
        let now = self.now();
        let inner = self.lock();
        let keys: Vec<String> = inner
            .pods
            .iter()
            .filter(|(_, e)| {
                e.at == Where::Unschedulable
                    && !e.info.gated
                    && now.saturating_duration_since(e.info.timestamp) > UNSCHEDULABLE_FLUSH
            })
            .map(|(k, _)| k.clone())
            .collect();
        drop(inner);
        self.move_keys(keys, now);
    }

    fn move_keys(&self, keys: Vec<String>, now: Instant) {
        let mut inner = self.lock();
        for k in keys {
            let Some(e) = inner.pods.remove(&k) else {
                continue;
            };
            let at = if self.backoff_expiry(&e.info) > now {
                Where::Backoff
            } else {
                Where::Active
            };
            self.place(&mut inner, e.info, at);
        }
    }

    fn interested(&self, info: &QueuedPodInfo, event: ClusterEvent) -> bool {
        info.unschedulable_plugins.is_empty()
            || info.unschedulable_plugins.iter().any(|p| {
                self.plugin_events
                    .get(p)
                    .is_some_and(|evs| evs.contains(&event))
            })
    }

    /// A cluster event: unschedulable pods whose rejecting plugins care move to active (or
    /// backoff); `filter` can narrow the pods further (e.g. only those with affinity).
    pub fn move_on_event(
        &self,
        event: ClusterEvent,
        filter: Option<&dyn Fn(&QueuedPodInfo) -> bool>,
    ) {
        let now = self.now();
        let mut inner = self.lock();
        inner.move_request_cycle = inner.scheduling_cycle;
        let keys: Vec<String> = inner
            .pods
            .iter()
            .filter(|(_, e)| e.at == Where::Unschedulable && !e.info.gated)
            .filter(|(_, e)| self.interested(&e.info, event))
            .filter(|(_, e)| filter.is_none_or(|f| f(&e.info)))
            .map(|(k, _)| k.clone())
            .collect();
        drop(inner);
        self.move_keys(keys, now);
    }

    /// Counts of (active, backoff, unschedulable) pods.
    pub fn len(&self) -> (usize, usize, usize) {
        let inner = self.lock();
        let mut c = (0, 0, 0);
        for e in inner.pods.values() {
            match e.at {
                Where::Active => c.0 += 1,
                Where::Backoff => c.1 += 1,
                Where::Unschedulable => c.2 += 1,
            }
        }
        c
    }

    /// Pods that are pending (queued or in flight) and nominated to `node`.
    pub fn nominated_pods(&self, node: &str) -> Vec<Arc<PodInfo>> {
        let inner = self.lock();
        inner
            .pods
            .values()
            .filter(|e| {
                e.info
                    .pod()
                    .status
                    .as_ref()
                    .and_then(|s| s.nominated_node_name.as_deref())
                    == Some(node)
            })
            .map(|e| e.info.pod_info.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::interface::{ActionType, EventResource};
    use crate::testing::PodBuilder;
    use k8s_openapi::api::core::v1::PodSchedulingGate;

    struct FakeClock(Mutex<Instant>);
    impl FakeClock {
        fn advance(&self, d: Duration) {
            *self.0.lock().unwrap() += d;
        }
    }

    fn queue() -> (SchedulingQueue, Arc<FakeClock>) {
        let clock = Arc::new(FakeClock(Mutex::new(Instant::now())));
        let c = clock.clone();
        let mut events = HashMap::new();
        events.insert(
            "NodeResourcesFit",
            HashSet::from([ClusterEvent::new(EventResource::Node, ActionType::Add)]),
        );
        events.insert("NodeName", HashSet::new());
        let q = SchedulingQueue::with_clock(
            Duration::from_secs(1),
            Duration::from_secs(10),
            events,
            Arc::new(move || *c.0.lock().unwrap()),
        );
        (q, clock)
    }

    fn pod(name: &str, prio: i32) -> Arc<Pod> {
        Arc::new(PodBuilder::new(name).priority(prio).build())
    }

    fn pop_name(q: &SchedulingQueue) -> Option<String> {
        q.try_pop().map(|(i, _)| helpers::name(i.pod()).to_owned())
    }

    #[test]
    fn active_queue_orders_by_priority_then_time() {
        let (q, clock) = queue();
        q.add(pod("low", 1)).unwrap();
        clock.advance(Duration::from_millis(1));
        q.add(pod("high", 10)).unwrap();
        clock.advance(Duration::from_millis(1));
        q.add(pod("low2", 1)).unwrap();
        assert!(q.add(pod("low", 1)).is_err());
        let order: Vec<_> = std::iter::from_fn(|| pop_name(&q)).collect();
        assert_eq!(order, ["high", "low", "low2"]);
    }

    #[test]
    fn backoff_grows_exponentially_and_caps() {
        let (q, _) = queue();
        let cases = [(1, 1), (2, 2), (3, 4), (4, 8), (5, 10), (30, 10)];
        for (attempts, secs) in cases {
            assert_eq!(
                q.backoff_duration(attempts),
                Duration::from_secs(secs),
                "{attempts}"
            );
        }
    }

    #[test]
    fn unschedulable_pods_move_on_relevant_events() {
        let (q, clock) = queue();
        q.add(pod("fit", 0)).unwrap();
        q.add(pod("name", 0)).unwrap();
        let (mut a, ca) = q.try_pop().unwrap();
        let (mut b, cb) = q.try_pop().unwrap();
        a.unschedulable_plugins.insert("NodeResourcesFit");
        b.unschedulable_plugins.insert("NodeName");
        q.add_unschedulable(a, ca);
        q.add_unschedulable(b, cb);
        assert_eq!(q.len(), (0, 0, 2));

        // An event no rejecting plugin registered moves nothing.
        q.move_on_event(
            ClusterEvent::new(EventResource::Pod, ActionType::Delete),
            None,
        );
        assert_eq!(q.len(), (0, 0, 2));

        // Node add: only the NodeResourcesFit pod moves, to backoff (1 s not yet over).
        q.move_on_event(
            ClusterEvent::new(EventResource::Node, ActionType::Add),
            None,
        );
        assert_eq!(q.len(), (0, 1, 1));
        q.flush_backoff_completed();
        assert_eq!(q.len(), (0, 1, 1));
        clock.advance(Duration::from_millis(1001));
        q.flush_backoff_completed();
        assert_eq!(q.len(), (1, 0, 1));
        assert_eq!(pop_name(&q).as_deref(), Some("fit"));

        // The 5-minute flush retries the rest.
        clock.advance(UNSCHEDULABLE_FLUSH + Duration::from_secs(1));
        q.flush_unschedulable_leftover();
        assert_eq!(pop_name(&q).as_deref(), Some("name"));
    }

    #[test]
    fn move_request_during_attempt_sends_to_backoff() {
        let (q, _) = queue();
        q.add(pod("p", 0)).unwrap();
        let (mut p, cycle) = q.try_pop().unwrap();
        q.move_on_event(
            ClusterEvent::new(EventResource::Node, ActionType::Add),
            None,
        );
        p.unschedulable_plugins.insert("NodeName");
        q.add_unschedulable(p, cycle);
        assert_eq!(q.len(), (0, 1, 0));
    }

    #[test]
    fn errors_go_to_backoff_and_deletes_remove() {
        let (q, _) = queue();
        q.add(pod("p", 0)).unwrap();
        let (p, cycle) = q.try_pop().unwrap();
        q.add_unschedulable(p, cycle);
        assert_eq!(q.len(), (0, 1, 0));
        q.delete(&pod("p", 0));
        assert_eq!(q.len(), (0, 0, 0));
    }

    #[test]
    fn gated_pods_wait_until_ungated() {
        let (q, _) = queue();
        let gated = PodBuilder::new("g")
            .spec_with(|s| {
                s.scheduling_gates = Some(vec![PodSchedulingGate { name: "x".into() }]);
            })
            .build();
        q.add(Arc::new(gated.clone())).unwrap();
        assert_eq!(q.len(), (0, 0, 1));
        q.move_on_event(
            ClusterEvent::new(EventResource::Node, ActionType::Add),
            None,
        );
        assert!(q.try_pop().is_none());
        let mut open = gated;
        open.spec.as_mut().unwrap().scheduling_gates = None;
        q.update(Arc::new(open));
        assert_eq!(pop_name(&q).as_deref(), Some("g"));
    }

    #[tokio::test]
    async fn pop_waits_and_cancels() {
        let q = Arc::new(SchedulingQueue::new(
            Duration::from_secs(1),
            Duration::from_secs(10),
            HashMap::new(),
        ));
        let cancel = CancellationToken::new();
        let q2 = q.clone();
        let c2 = cancel.clone();
        let h = tokio::spawn(async move { q2.pop(&c2).await.map(|(i, _)| i.key()) });
        tokio::time::sleep(Duration::from_millis(20)).await;
        q.add(pod("p", 0)).unwrap();
        assert_eq!(h.await.unwrap().as_deref(), Some("default/p"));
        cancel.cancel();
        assert!(q.pop(&cancel).await.is_none());
    }
}
