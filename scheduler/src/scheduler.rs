//! The scheduler: one scheduling cycle at a time (snapshot → PreFilter → Filter over
//! `numFeasibleNodesToFind` nodes → PostFilter on failure → PreScore/Score → pick the best
//! node, random among ties → assume → Reserve → Permit), then an asynchronous binding cycle
//! (wait on Permit → PreBind → Bind → finish binding), as upstream's `schedule_one.go`.
//!
//! It is fed by informer events through the `on_*` methods and runs no list/watch of its
//! own. It reports through the [`Client`]: `Scheduled`/`FailedScheduling` events, the
//! `PodScheduled` condition and `status.nominatedNodeName`.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use k1s_api::client::{Client, Patch, ResourceRef, WriteParams};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::cache::Cache;
use crate::config::{Config, ConfigError};
use crate::framework::interface::{
    ActionType, ClusterEvent, EventResource, Handle, NodeScore, PostFilterContext,
};
use crate::framework::listers::{StaticLister, VolumeLister};
use crate::framework::node_info::{NodeInfo, PodInfo, Snapshot};
use crate::framework::{Code, CycleState, Framework, FrameworkError, Registry, Status, helpers};
use crate::queue::{QueuedPodInfo, SchedulingQueue};

/// Below this many nodes, every node is evaluated.
pub const MIN_FEASIBLE_NODES_TO_FIND: usize = 100;
/// The adaptive percentage never drops below this.
pub const MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND: i32 = 5;
/// How long an assumed pod waits for the informer to confirm its binding.
pub const ASSUMED_POD_TTL: Duration = Duration::from_secs(15 * 60);

pub const ERR_NO_NODES_AVAILABLE: &str = "no nodes available to schedule pods";

/// Errors constructing the scheduler.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchedulerError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("profile {profile:?}: {source}")]
    Framework {
        profile: String,
        source: FrameworkError,
    },
}

/// An informer event, as the shared runtime's typed informers deliver it.
pub use k1s_runtime::reflector::Change;

/// Why no node fit: per-node statuses and the messages of PreFilter and PostFilter.
#[derive(Debug, Clone, Default)]
pub struct Diagnosis {
    pub node_to_status: HashMap<String, Status>,
    pub unschedulable_plugins: HashSet<&'static str>,
    pub pre_filter_msg: String,
    pub post_filter_msg: String,
}

/// No node fit the pod.
#[derive(Debug, Clone, Default)]
pub struct FitError {
    pub num_all_nodes: usize,
    pub diagnosis: Diagnosis,
}

impl FitError {
    /// Upstream's message: `0/3 nodes are available: 1 node(s) had untolerated taint
    /// {k: v}, 2 Insufficient cpu. preemption: ...`.
    pub fn message(&self) -> String {
        let mut msg = format!("0/{} nodes are available:", self.num_all_nodes);
        let d = &self.diagnosis;
        if !d.pre_filter_msg.is_empty() {
            msg.push_str(&format!(" {}.", d.pre_filter_msg));
        } else {
            let mut counts: HashMap<&str, usize> = HashMap::new();
            for s in d.node_to_status.values() {
                for r in s.reasons() {
                    *counts.entry(r.as_str()).or_default() += 1;
                }
            }
            let mut parts: Vec<String> = counts.iter().map(|(r, n)| format!("{n} {r}")).collect();
            parts.sort();
            if !parts.is_empty() {
                msg.push_str(&format!(" {}.", parts.join(", ")));
            }
        }
        if !d.post_filter_msg.is_empty() {
            msg.push_str(&format!(" {}.", d.post_filter_msg));
        }
        msg
    }
}

/// Upstream `numFeasibleNodesToFind`.
pub fn num_feasible_nodes_to_find(percentage: i32, num_all_nodes: usize) -> usize {
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND || percentage >= 100 {
        return num_all_nodes;
    }
    let mut adaptive = percentage;
    if adaptive <= 0 {
        adaptive = 50 - (num_all_nodes / 125) as i32;
        if adaptive < MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND {
            adaptive = MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND;
        }
    }
    let n = num_all_nodes * adaptive as usize / 100;
    n.max(MIN_FEASIBLE_NODES_TO_FIND)
}

enum ScheduleError {
    NoNodes,
    Fit(Box<FitError>),
    Internal(Status),
}

/// The scheduler. Construct with [`Scheduler::new`], feed with `on_*`, drive with
/// [`Scheduler::run`].
pub struct Scheduler {
    client: Arc<dyn Client>,
    cache: Mutex<Cache>,
    queue: Arc<SchedulingQueue>,
    profiles: HashMap<String, Arc<Framework>>,
    cluster: Arc<StaticLister>,
    percentage_of_nodes_to_score: i32,
    next_start_node_index: AtomicUsize,
    rng: Mutex<u64>,
    /// Pending pods we know (namespace/name → uid), to drop failures of deleted pods.
    pending: Mutex<HashMap<String, String>>,
    /// Pending pods with `status.nominatedNodeName`, by node.
    nominated: Mutex<HashMap<String, Vec<Arc<PodInfo>>>>,
    bindings: TaskTracker,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

use k1s_api::events::now_rfc3339;

impl Scheduler {
    pub fn new(
        client: Arc<dyn Client>,
        config: Config,
        volumes: Arc<dyn VolumeLister>,
    ) -> Result<Arc<Self>, SchedulerError> {
        Self::with_registry(client, config, volumes, &Registry::new())
    }

    /// Like [`Scheduler::new`], with out-of-tree plugins available to the profiles.
    pub fn with_registry(
        client: Arc<dyn Client>,
        mut config: Config,
        volumes: Arc<dyn VolumeLister>,
        registry: &Registry,
    ) -> Result<Arc<Self>, SchedulerError> {
        config.set_defaults();
        config.validate()?;
        let cluster = Arc::new(StaticLister::new());
        let handle = Handle {
            client: client.clone(),
            volumes,
            cluster: cluster.clone(),
        };
        let mut profiles = HashMap::new();
        let mut plugin_events: HashMap<&'static str, HashSet<ClusterEvent>> = HashMap::new();
        for p in &config.profiles {
            let fw = Framework::with_registry(p, &handle, registry).map_err(|source| {
                SchedulerError::Framework {
                    profile: p.scheduler_name.clone(),
                    source,
                }
            })?;
            for (name, evs) in fw.plugin_events() {
                plugin_events.entry(name).or_default().extend(evs);
            }
            profiles.insert(p.scheduler_name.clone(), Arc::new(fw));
        }
        let (initial, max) = config.backoff_seconds();
        let queue = Arc::new(SchedulingQueue::new(
            Duration::from_secs(initial as u64),
            Duration::from_secs(max as u64),
            plugin_events,
        ));
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x9E37_79B9_7F4A_7C15)
            | 1;
        Ok(Arc::new(Self {
            client,
            cache: Mutex::new(Cache::new(ASSUMED_POD_TTL)),
            queue,
            profiles,
            cluster,
            percentage_of_nodes_to_score: config.percentage_of_nodes_to_score.unwrap_or(0),
            next_start_node_index: AtomicUsize::new(0),
            rng: Mutex::new(seed),
            pending: Mutex::new(HashMap::new()),
            nominated: Mutex::new(HashMap::new()),
            bindings: TaskTracker::new(),
        }))
    }

    pub fn queue(&self) -> &SchedulingQueue {
        &self.queue
    }

    pub fn framework(&self, scheduler_name: &str) -> Option<&Arc<Framework>> {
        self.profiles.get(scheduler_name)
    }

    fn next_random(&self) -> u64 {
        let mut s = lock(&self.rng);
        // xorshift64*
        *s ^= *s >> 12;
        *s ^= *s << 25;
        *s ^= *s >> 27;
        s.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn responsible_for(&self, pod: &Pod) -> bool {
        let name = pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduler_name.as_deref())
            .unwrap_or(crate::config::DEFAULT_SCHEDULER_NAME);
        self.profiles.contains_key(name)
    }

    fn event(&self, resource: EventResource, action: ActionType) {
        self.queue
            .move_on_event(ClusterEvent::new(resource, action), None);
    }

    // ----- the feed -----

    pub fn on_node(&self, change: Change<Node>) {
        match change {
            Change::Added(n) => {
                lock(&self.cache).add_node(n);
                self.event(EventResource::Node, ActionType::Add);
            }
            Change::Modified(n) => {
                let relevant = lock(&self.cache).update_node(n);
                if relevant {
                    self.event(EventResource::Node, ActionType::Update);
                }
            }
            Change::Deleted(n) => {
                lock(&self.cache).remove_node(helpers::node_name(&n));
                self.event(EventResource::Node, ActionType::Delete);
            }
        }
    }

    pub fn on_pod(&self, change: Change<Pod>) {
        let (pod, deleted, added) = match change {
            Change::Added(p) => (p, false, true),
            Change::Modified(p) => (p, false, false),
            Change::Deleted(p) => (p, true, false),
        };
        let key = helpers::pod_key(&pod);
        let terminal = matches!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded") | Some("Failed")
        );
        let bound = !helpers::pod_node_name(&pod).is_empty();
        self.unnominate(&pod);
        if bound || deleted {
            lock(&self.pending).remove(&key);
            self.queue.delete(&pod);
            for fw in self.profiles.values() {
                fw.reject(helpers::uid(&pod), "", "pod deleted");
            }
        }
        if bound {
            if deleted || terminal {
                lock(&self.cache).remove_pod(&pod);
                self.event(EventResource::Pod, ActionType::Delete);
            } else {
                let relevant = lock(&self.cache).update_pod(pod);
                if relevant {
                    let action = if added {
                        ActionType::Add
                    } else {
                        ActionType::Update
                    };
                    self.event(EventResource::Pod, action);
                }
            }
            return;
        }
        if deleted {
            return;
        }
        if terminal || helpers::is_terminating(&pod) || !self.responsible_for(&pod) {
            return;
        }
        // Our own binding may not have reached the informer yet.
        if lock(&self.cache).is_assumed(&pod) {
            return;
        }
        lock(&self.pending).insert(key, helpers::uid(&pod).to_owned());
        let pod = Arc::new(pod);
        self.nominate_from_status(&pod);
        self.queue.update(pod);
    }

    pub fn on_namespace(&self, change: Change<Namespace>) {
        let mut c = lock(&self.cache);
        match change {
            Change::Added(n) | Change::Modified(n) => c.set_namespace(&n),
            Change::Deleted(n) => c.remove_namespace(n.metadata.name.as_deref().unwrap_or("")),
        }
    }

    pub fn on_pdb(&self, change: Change<PodDisruptionBudget>) {
        match change {
            Change::Added(p) | Change::Modified(p) => self.cluster.upsert_pdb(p),
            Change::Deleted(p) => self.cluster.remove_pdb(
                p.metadata.namespace.as_deref().unwrap_or(""),
                p.metadata.name.as_deref().unwrap_or(""),
            ),
        }
        self.event(EventResource::PodDisruptionBudget, ActionType::Update);
    }

    /// A change of PVs, PVCs, StorageClasses or CSINodes (which the caller's
    /// [`VolumeLister`] already reflects): requeues pods waiting on volumes.
    pub fn on_volume_event(&self, resource: EventResource, action: ActionType) {
        self.event(resource, action);
    }

    fn nominate_from_status(&self, pod: &Arc<Pod>) {
        if let Some(node) = pod
            .status
            .as_ref()
            .and_then(|s| s.nominated_node_name.as_deref())
            .filter(|n| !n.is_empty())
        {
            self.nominate(Arc::new(PodInfo::new(pod.clone())), node);
        }
    }

    fn nominate(&self, pi: Arc<PodInfo>, node: &str) {
        self.unnominate(&pi.pod);
        lock(&self.nominated)
            .entry(node.to_owned())
            .or_default()
            .push(pi);
    }

    fn unnominate(&self, pod: &Pod) {
        let key = helpers::pod_key(pod);
        let mut n = lock(&self.nominated);
        for list in n.values_mut() {
            list.retain(|p| helpers::pod_key(&p.pod) != key);
        }
        n.retain(|_, l| !l.is_empty());
    }

    /// Pods nominated to `node` with at least `priority`, other than `pod`.
    fn nominated_for(&self, node: &str, pod: &Pod) -> Vec<Arc<PodInfo>> {
        let nominated = lock(&self.nominated);
        let Some(l) = nominated.get(node).filter(|l| !l.is_empty()) else {
            return Vec::new();
        };
        let key = helpers::pod_key(pod);
        let prio = helpers::priority(pod);
        l.iter()
            .filter(|p| helpers::pod_key(&p.pod) != key && helpers::priority(&p.pod) >= prio)
            .cloned()
            .collect()
    }

    // ----- the loop -----

    /// Schedules pods until cancelled, then waits for running bindings.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        let timers = {
            let me = self.clone();
            let cancel = cancel.clone();
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_secs(1));
                let mut n = 0u64;
                loop {
                    tokio::select! {
                        _ = cancel.cancelled() => return,
                        _ = tick.tick() => {}
                    }
                    n += 1;
                    me.queue.flush_backoff_completed();
                    if n.is_multiple_of(30) {
                        me.queue.flush_unschedulable_leftover();
                    }
                    let expired = lock(&me.cache).cleanup_expired(Instant::now());
                    if !expired.is_empty() {
                        me.event(EventResource::Pod, ActionType::Delete);
                    }
                }
            })
        };
        while let Some((qpi, cycle)) = self.queue.pop(&cancel).await {
            self.schedule_one(qpi, cycle).await;
        }
        let _ = timers.await;
        self.bindings.close();
        self.bindings.wait().await;
    }

    /// Schedules the next active pod, if any (tests and benchmarks drive this directly).
    pub async fn schedule_next(self: &Arc<Self>) -> bool {
        self.queue.flush_backoff_completed();
        match self.queue.try_pop() {
            Some((qpi, cycle)) => {
                self.schedule_one(qpi, cycle).await;
                true
            }
            None => false,
        }
    }

    /// Waits for all binding cycles started so far.
    pub async fn wait_for_bindings(&self) {
        self.bindings.close();
        self.bindings.wait().await;
        self.bindings.reopen();
    }

    async fn schedule_one(self: &Arc<Self>, qpi: QueuedPodInfo, cycle: u64) {
        let pod = qpi.pod_info.clone();
        let name = pod
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduler_name.as_deref())
            .unwrap_or(crate::config::DEFAULT_SCHEDULER_NAME);
        let Some(fw) = self.profiles.get(name).cloned() else {
            self.queue.done(&pod.pod);
            return;
        };
        let assumed = lock(&self.cache).is_assumed(&pod.pod);
        if helpers::is_terminating(&pod.pod) || assumed {
            self.queue.done(&pod.pod);
            return;
        }
        let snapshot = lock(&self.cache).snapshot();
        let mut state = CycleState::new();
        let result = self.schedule_pod(&fw, &mut state, &pod, &snapshot);
        let node = match result {
            Ok(node) => node,
            Err(ScheduleError::Fit(mut fit)) => {
                let (nominated, status) = fw
                    .run_post_filter(&PostFilterContext {
                        state: &state,
                        pod: &pod,
                        snapshot: &snapshot,
                        statuses: &fit.diagnosis.node_to_status,
                        framework: &fw,
                        nominated: &self.nominated_by_node(&pod.pod),
                    })
                    .await;
                if !status.is_success() || nominated.is_some() {
                    fit.diagnosis.post_filter_msg = status.message();
                }
                if status.code() == Code::Error {
                    tracing::warn!(pod = %helpers::pod_key(&pod.pod), %status, "PostFilter failed");
                }
                let msg = fit.message();
                let plugins = fit.diagnosis.unschedulable_plugins.clone();
                self.handle_failure(&fw, qpi, cycle, "Unschedulable", &msg, plugins, nominated)
                    .await;
                return;
            }
            Err(ScheduleError::NoNodes) => {
                // Any cluster event may help (no plugin recorded).
                self.handle_failure(
                    &fw,
                    qpi,
                    cycle,
                    "Unschedulable",
                    ERR_NO_NODES_AVAILABLE,
                    HashSet::new(),
                    None,
                )
                .await;
                return;
            }
            Err(ScheduleError::Internal(s)) => {
                let msg = s.message();
                self.handle_failure(
                    &fw,
                    qpi,
                    cycle,
                    "SchedulerError",
                    &msg,
                    HashSet::new(),
                    None,
                )
                .await;
                return;
            }
        };

        // Assume.
        let mut assumed = (*pod.pod).clone();
        assumed.spec.get_or_insert_with(Default::default).node_name = Some(node.clone());
        let assumed_info = Arc::new(PodInfo::new(Arc::new(assumed)));
        let assume = lock(&self.cache).assume_pod(assumed_info.pod.clone());
        if let Err(e) = assume {
            self.handle_failure(
                &fw,
                qpi,
                cycle,
                "SchedulerError",
                &e.to_string(),
                HashSet::new(),
                None,
            )
            .await;
            return;
        }
        // Reserve.
        let s = fw.run_reserve(&mut state, &assumed_info, &node);
        if !s.is_success() {
            fw.run_unreserve(&mut state, &assumed_info, &node);
            let _ = lock(&self.cache).forget_pod(&assumed_info.pod);
            let plugins = if s.is_rejected() {
                HashSet::from([s.plugin()])
            } else {
                HashSet::new()
            };
            let reason = if s.is_rejected() {
                "Unschedulable"
            } else {
                "SchedulerError"
            };
            self.handle_failure(&fw, qpi, cycle, reason, &s.message(), plugins, None)
                .await;
            return;
        }
        // Permit.
        let (s, timeout) = fw.run_permit(&state, &assumed_info, &node);
        if !s.is_success() && s.code() != Code::Wait {
            fw.run_unreserve(&mut state, &assumed_info, &node);
            let _ = lock(&self.cache).forget_pod(&assumed_info.pod);
            let plugins = if s.is_rejected() {
                HashSet::from([s.plugin()])
            } else {
                HashSet::new()
            };
            let reason = if s.is_rejected() {
                "Unschedulable"
            } else {
                "SchedulerError"
            };
            self.handle_failure(&fw, qpi, cycle, reason, &s.message(), plugins, None)
                .await;
            return;
        }
        let waits = s.code() == Code::Wait;
        let me = self.clone();
        self.bindings.spawn(async move {
            me.binding_cycle(
                fw,
                state,
                qpi,
                cycle,
                assumed_info,
                node,
                waits.then_some(timeout),
            )
            .await;
        });
    }

    #[allow(clippy::too_many_arguments)]
    async fn binding_cycle(
        self: Arc<Self>,
        fw: Arc<Framework>,
        mut state: CycleState,
        qpi: QueuedPodInfo,
        cycle: u64,
        assumed: Arc<PodInfo>,
        node: String,
        permit_wait: Option<Duration>,
    ) {
        let mut s = Status::success();
        if let Some(t) = permit_wait {
            s = fw.wait_on_permit(helpers::uid(&assumed.pod), t).await;
        }
        if s.is_success() {
            s = fw.run_pre_bind(&state, &assumed, &node).await;
        }
        if s.is_success() {
            s = fw.run_bind(&state, &assumed, &node).await;
        }
        if s.is_success() {
            lock(&self.cache).finish_binding(&assumed.pod, Instant::now());
            self.queue.done(&assumed.pod);
            lock(&self.pending).remove(&helpers::pod_key(&assumed.pod));
            self.unnominate(&assumed.pod);
            let msg = format!(
                "Successfully assigned {} to {node}",
                helpers::pod_key(&assumed.pod)
            );
            self.record_event(&fw, &assumed.pod, "Normal", "Scheduled", &msg)
                .await;
            return;
        }
        fw.run_unreserve(&mut state, &assumed, &node);
        let _ = lock(&self.cache).forget_pod(&assumed.pod);
        // The resources the pod held are free again.
        self.event(EventResource::Pod, ActionType::Delete);
        let plugins = if s.is_rejected() {
            HashSet::from([s.plugin()])
        } else {
            HashSet::new()
        };
        let reason = if s.is_rejected() {
            "Unschedulable"
        } else {
            "SchedulerError"
        };
        let msg = if s.is_rejected() {
            s.message()
        } else {
            format!("Binding rejected: {}", s.message())
        };
        self.handle_failure(&fw, qpi, cycle, reason, &msg, plugins, None)
            .await;
    }

    /// The synchronous part of a cycle: find and rank nodes, pick one.
    fn schedule_pod(
        &self,
        fw: &Framework,
        state: &mut CycleState,
        pod: &PodInfo,
        snap: &Snapshot,
    ) -> Result<String, ScheduleError> {
        if snap.is_empty() {
            return Err(ScheduleError::NoNodes);
        }
        let feasible = self.find_nodes_that_fit(fw, state, pod, snap)?;
        if feasible.len() == 1 {
            return Ok(feasible[0].name().to_owned());
        }
        let s = fw.run_pre_score(state, pod, &feasible, snap);
        if !s.is_success() {
            return Err(ScheduleError::Internal(s));
        }
        let scores = fw
            .run_score(state, pod, &feasible)
            .map_err(ScheduleError::Internal)?;
        Ok(self.select_host(&scores))
    }

    fn find_nodes_that_fit(
        &self,
        fw: &Framework,
        state: &mut CycleState,
        pod: &PodInfo,
        snap: &Snapshot,
    ) -> Result<Vec<Arc<NodeInfo>>, ScheduleError> {
        let mut diagnosis = Diagnosis::default();
        let all = snap.len();
        let s = fw.run_pre_filter(state, pod, snap);
        if !s.is_success() {
            if !s.is_rejected() {
                return Err(ScheduleError::Internal(s));
            }
            for n in snap.nodes.iter() {
                diagnosis
                    .node_to_status
                    .insert(n.name().to_owned(), s.clone());
            }
            diagnosis.pre_filter_msg = s.message();
            diagnosis.unschedulable_plugins.insert(s.plugin());
            return Err(ScheduleError::Fit(Box::new(FitError {
                num_all_nodes: all,
                diagnosis,
            })));
        }
        let mut feasible = Vec::new();
        // The pods nominated to each node, read once for the cycle (nearly always none).
        let nominated = self.nominated_by_node(&pod.pod);
        // A nominated node (from an earlier preemption) is tried first.
        if let Some(nn) = pod
            .pod
            .status
            .as_ref()
            .and_then(|s| s.nominated_node_name.as_deref())
            && let Some(ni) = snap.get(nn)
            && self
                .filter_node(fw, state, pod, ni, &nominated)
                .is_success()
        {
            return Ok(vec![ni.clone()]);
        }
        let pct = fw
            .percentage_of_nodes_to_score
            .unwrap_or(self.percentage_of_nodes_to_score);
        let want = num_feasible_nodes_to_find(pct, all);
        let start = self.next_start_node_index.load(Ordering::Relaxed) % all;
        let mut processed = 0;
        for i in 0..all {
            if feasible.len() >= want {
                break;
            }
            let ni = &snap.nodes[(start + i) % all];
            processed += 1;
            let s = self.filter_node(fw, state, pod, ni, &nominated);
            if s.is_success() {
                feasible.push(ni.clone());
            } else if s.is_rejected() {
                diagnosis.unschedulable_plugins.insert(s.plugin());
                diagnosis.node_to_status.insert(ni.name().to_owned(), s);
            } else {
                return Err(ScheduleError::Internal(s));
            }
        }
        self.next_start_node_index
            .store((start + processed) % all, Ordering::Relaxed);
        if feasible.is_empty() {
            return Err(ScheduleError::Fit(Box::new(FitError {
                num_all_nodes: all,
                diagnosis,
            })));
        }
        Ok(feasible)
    }

    /// Filter, with higher-or-equal priority pods nominated to the node counted as if they
    /// ran there (so preemptors keep the room they made); `nominated` is
    /// [`Self::nominated_by_node`] for `pod`.
    fn filter_node(
        &self,
        fw: &Framework,
        state: &CycleState,
        pod: &PodInfo,
        ni: &Arc<NodeInfo>,
        nominated: &HashMap<String, Vec<Arc<PodInfo>>>,
    ) -> Status {
        let pods = nominated.get(ni.name()).map_or(&[][..], Vec::as_slice);
        fw.run_filter_with_nominated(state, pod, ni, pods)
    }

    /// [`Self::nominated_for`] for every node that has nominated pods.
    fn nominated_by_node(&self, pod: &Pod) -> HashMap<String, Vec<Arc<PodInfo>>> {
        let nodes: Vec<String> = lock(&self.nominated).keys().cloned().collect();
        nodes
            .into_iter()
            .map(|n| {
                let pods = self.nominated_for(&n, pod);
                (n, pods)
            })
            .filter(|(_, pods)| !pods.is_empty())
            .collect()
    }

    /// The highest total; ties broken uniformly at random (reservoir sampling).
    fn select_host(&self, scores: &[NodeScore<'_>]) -> String {
        let mut best = 0usize;
        let mut ties = 1u64;
        for (i, s) in scores.iter().enumerate().skip(1) {
            if s.score > scores[best].score {
                best = i;
                ties = 1;
            } else if s.score == scores[best].score {
                ties += 1;
                if self.next_random().is_multiple_of(ties) {
                    best = i;
                }
            }
        }
        scores[best].name.to_owned()
    }

    #[allow(clippy::too_many_arguments)]
    async fn handle_failure(
        self: &Arc<Self>,
        fw: &Arc<Framework>,
        mut qpi: QueuedPodInfo,
        cycle: u64,
        reason: &str,
        message: &str,
        plugins: HashSet<&'static str>,
        nominated: Option<String>,
    ) {
        let pod = qpi.pod_info.pod.clone();
        let key = helpers::pod_key(&pod);
        tracing::debug!(pod = %key, %reason, %message, "unable to schedule pod");
        let still_pending =
            lock(&self.pending).get(&key).map(String::as_str) == Some(helpers::uid(&pod));
        if !still_pending {
            self.queue.done(&pod);
            return;
        }
        qpi.unschedulable_plugins = plugins.into_iter().filter(|p| !p.is_empty()).collect();
        if reason != "Unschedulable" {
            qpi.unschedulable_plugins.clear();
        }
        if let Some(node) = nominated.as_deref() {
            self.nominate(qpi.pod_info.clone(), node);
        }
        self.queue.add_unschedulable(qpi, cycle);
        // Reporting goes to the API off the scheduling loop.
        let (me, fw) = (self.clone(), fw.clone());
        let (reason, message) = (reason.to_owned(), message.to_owned());
        self.bindings.spawn(async move {
            me.record_event(&fw, &pod, "Warning", "FailedScheduling", &message)
                .await;
            me.update_pod_condition(&pod, &reason, &message, nominated.as_deref())
                .await;
        });
    }

    async fn update_pod_condition(
        &self,
        pod: &Pod,
        reason: &str,
        message: &str,
        nominated: Option<&str>,
    ) {
        let current = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "PodScheduled"));
        let unchanged = current.is_some_and(|c| {
            c.status == "False"
                && c.reason.as_deref() == Some(reason)
                && c.message.as_deref() == Some(message)
        });
        let old_nominated = pod
            .status
            .as_ref()
            .and_then(|s| s.nominated_node_name.as_deref());
        if unchanged && (nominated.is_none() || nominated == old_nominated) {
            return;
        }
        let mut status = json!({
            "conditions": [{
                "type": "PodScheduled",
                "status": "False",
                "reason": reason,
                "message": message,
                "lastProbeTime": Value::Null,
                "lastTransitionTime": now_rfc3339(),
            }]
        });
        if let Some(n) = nominated {
            status["nominatedNodeName"] = json!(n);
        }
        let r = ResourceRef::new("", "v1", "pods", Some(helpers::namespace(pod)));
        let patch = Patch::Strategic(json!({ "status": status }));
        if let Err(e) = self
            .client
            .patch(
                &r,
                helpers::name(pod),
                &patch,
                Some("status"),
                &WriteParams::default(),
            )
            .await
        {
            tracing::warn!(pod = %helpers::pod_key(pod), error = %e, "updating PodScheduled condition");
        }
    }

    async fn record_event(
        &self,
        fw: &Framework,
        pod: &Pod,
        type_: &str,
        reason: &str,
        message: &str,
    ) {
        record_event(
            self.client.as_ref(),
            fw.profile_name(),
            pod,
            type_,
            reason,
            message,
        )
        .await;
    }
}

/// Creates a core/v1 Event about `pod` (what `kubectl describe` lists).
pub async fn record_event(
    client: &dyn Client,
    component: &str,
    pod: &Pod,
    type_: &str,
    reason: &str,
    message: &str,
) {
    let source = k1s_api::events::Source {
        component: component.into(),
        host: None,
    };
    let action = if reason == "Scheduled" {
        "Binding"
    } else {
        "Scheduling"
    };
    let about = k1s_api::events::Involved::pod(&pod.metadata);
    k1s_api::events::record(client, &source, &about, type_, reason, action, message).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{FakeClient, NodeBuilder, PodBuilder};

    fn new_scheduler(client: Arc<FakeClient>) -> Arc<Scheduler> {
        Scheduler::new(client, Config::default(), Arc::new(StaticLister::new())).unwrap()
    }

    fn events_with(client: &FakeClient, reason: &str) -> Vec<String> {
        client
            .calls_to("/events")
            .into_iter()
            .filter(|c| c.body["reason"] == reason)
            .map(|c| c.body["message"].as_str().unwrap_or("").to_owned())
            .collect()
    }

    #[test]
    fn num_feasible_nodes_as_upstream() {
        let cases = [
            (0, 10, 10),
            (0, 99, 99),
            (0, 1000, 420),  // 50 - 1000/125 = 42%
            (0, 5000, 500),  // 50 - 40 = 10%
            (0, 10000, 500), // floor 5%
            (10, 1000, 100), // 10% = 100
            (10, 500, 100),  // 50 → at least 100
            (30, 1000, 300),
            (100, 1000, 1000),
        ];
        for (pct, n, want) in cases {
            assert_eq!(num_feasible_nodes_to_find(pct, n), want, "{pct}% of {n}");
        }
    }

    #[test]
    fn fit_error_messages_as_upstream() {
        let st = |r: &str| Status::unschedulable(r);
        let mut d = Diagnosis::default();
        d.node_to_status
            .insert("a".into(), st("node(s) had untolerated taint {k: v}"));
        d.node_to_status.insert("b".into(), st("Insufficient cpu"));
        d.node_to_status.insert(
            "c".into(),
            Status::with_reasons(
                Code::Unschedulable,
                vec!["Insufficient cpu".into(), "Insufficient memory".into()],
            ),
        );
        let mut f = FitError {
            num_all_nodes: 3,
            diagnosis: d,
        };
        assert_eq!(
            f.message(),
            "0/3 nodes are available: 1 Insufficient memory, 1 node(s) had untolerated taint {k: v}, 2 Insufficient cpu."
        );
        f.diagnosis.post_filter_msg =
            "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
                .into();
        assert!(f.message().ends_with(
            ". preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.."
        ));
        let f = FitError {
            num_all_nodes: 2,
            diagnosis: Diagnosis {
                pre_filter_msg:
                    "node(s) didn't match pod topology spread constraints (missing required label)"
                        .into(),
                ..Default::default()
            },
        };
        assert_eq!(
            f.message(),
            "0/2 nodes are available: node(s) didn't match pod topology spread constraints (missing required label)."
        );
    }

    #[tokio::test]
    async fn schedules_binds_and_reports() {
        let client = FakeClient::new();
        let s = new_scheduler(client.clone());
        s.on_node(Change::Added(
            NodeBuilder::new("small")
                .allocatable(&[("cpu", "1"), ("memory", "1Gi"), ("pods", "10")])
                .build(),
        ));
        s.on_node(Change::Added(
            NodeBuilder::new("big")
                .allocatable(&[("cpu", "8"), ("memory", "8Gi"), ("pods", "10")])
                .build(),
        ));
        s.on_pod(Change::Added(
            PodBuilder::new("p").container(&[("cpu", "2")]).build(),
        ));
        // Someone else's pod is ignored.
        s.on_pod(Change::Added(
            PodBuilder::new("other")
                .scheduler_name("my-scheduler")
                .build(),
        ));
        assert!(s.schedule_next().await);
        assert!(!s.schedule_next().await);
        s.wait_for_bindings().await;
        let binds = client.calls_to("/binding");
        assert_eq!(binds.len(), 1);
        assert_eq!(binds[0].path, "/api/v1/namespaces/default/pods/p/binding");
        assert_eq!(binds[0].body["target"]["name"], "big");
        assert_eq!(
            events_with(&client, "Scheduled"),
            ["Successfully assigned default/p to big"]
        );
        // The assumed pod counts on the node until the informer confirms it.
        let snap = lock(&s.cache).snapshot();
        assert_eq!(snap.get("big").unwrap().requested.milli_cpu, 2000);
        let mut bound = PodBuilder::new("p").container(&[("cpu", "2")]).build();
        bound.spec.as_mut().unwrap().node_name = Some("big".into());
        s.on_pod(Change::Modified(bound.clone()));
        assert!(!lock(&s.cache).is_assumed(&bound));
        s.on_pod(Change::Deleted(bound));
        assert_eq!(
            lock(&s.cache)
                .snapshot()
                .get("big")
                .unwrap()
                .requested
                .milli_cpu,
            0
        );
    }

    #[tokio::test]
    async fn failed_scheduling_event_condition_and_requeue_on_node_add() {
        let client = FakeClient::new();
        let s = new_scheduler(client.clone());
        s.on_node(Change::Added(
            NodeBuilder::new("n1").taint("k", "v", "NoSchedule").build(),
        ));
        s.on_node(Change::Added(
            NodeBuilder::new("n2")
                .allocatable(&[("cpu", "4"), ("pods", "10")])
                .build(),
        ));
        s.on_node(Change::Added(
            NodeBuilder::new("n3")
                .allocatable(&[("cpu", "4"), ("pods", "10")])
                .build(),
        ));
        for (n, name) in [("n2", "e2"), ("n3", "e3")] {
            s.on_pod(Change::Added(
                PodBuilder::new(name)
                    .container(&[("cpu", "3")])
                    .node(n)
                    .build(),
            ));
        }
        s.on_pod(Change::Added(
            PodBuilder::new("p").container(&[("cpu", "2")]).build(),
        ));
        assert!(s.schedule_next().await);
        s.wait_for_bindings().await;
        let failed = events_with(&client, "FailedScheduling");
        assert_eq!(failed.len(), 1);
        assert!(
            failed[0]
                == "0/3 nodes are available: 1 node(s) had untolerated taint {k: v}, 2 Insufficient cpu. \
                    preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, \
                    2 No preemption victims found for incoming pod..",
            "{}",
            failed[0]
        );
        let cond = client.calls_to("/pods/p/status");
        assert_eq!(cond.len(), 1);
        let c = &cond[0].body["status"]["conditions"][0];
        assert_eq!(c["type"], "PodScheduled");
        assert_eq!(c["status"], "False");
        assert_eq!(c["reason"], "Unschedulable");
        assert_eq!(c["message"], failed[0].as_str());
        assert_eq!(s.queue().len(), (0, 0, 1));

        // A pod deletion frees cpu on n2: NodeResourcesFit registered it, so the pod moves.
        s.on_pod(Change::Deleted(
            PodBuilder::new("e2")
                .container(&[("cpu", "3")])
                .node("n2")
                .build(),
        ));
        assert_eq!(s.queue().len(), (0, 1, 0));
        tokio::time::sleep(Duration::from_millis(1100)).await;
        assert!(s.schedule_next().await);
        s.wait_for_bindings().await;
        assert_eq!(client.calls_to("/binding")[0].body["target"]["name"], "n2");
    }

    #[tokio::test]
    async fn no_nodes_and_binding_failures() {
        let client = FakeClient::new();
        let s = new_scheduler(client.clone());
        s.on_pod(Change::Added(PodBuilder::new("p").build()));
        assert!(s.schedule_next().await);
        s.wait_for_bindings().await;
        assert_eq!(
            events_with(&client, "FailedScheduling"),
            ["no nodes available to schedule pods"]
        );
        // A node arrives; binding fails: the pod is forgotten and retried with backoff.
        client.fail_paths.lock().unwrap().push("binding".into());
        s.on_node(Change::Added(NodeBuilder::new("n1").build()));
        tokio::time::sleep(Duration::from_millis(1100)).await;
        assert!(s.schedule_next().await);
        s.wait_for_bindings().await;
        let failed = events_with(&client, "FailedScheduling");
        assert!(failed[1].starts_with("Binding rejected: "), "{failed:?}");
        assert_eq!(lock(&s.cache).snapshot().get("n1").unwrap().pods.len(), 0);
        assert_eq!(s.queue().len(), (0, 1, 0));
    }

    #[tokio::test]
    async fn run_loop_schedules_and_stops_on_cancel() {
        let client = FakeClient::new();
        let s = new_scheduler(client.clone());
        s.on_node(Change::Added(NodeBuilder::new("n1").build()));
        let cancel = CancellationToken::new();
        let h = tokio::spawn(s.clone().run(cancel.clone()));
        for i in 0..5 {
            s.on_pod(Change::Added(PodBuilder::new(&format!("p{i}")).build()));
        }
        for _ in 0..100 {
            if client.calls_to("/binding").len() == 5 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(client.calls_to("/binding").len(), 5);
        cancel.cancel();
        tokio::time::timeout(Duration::from_secs(5), h)
            .await
            .unwrap()
            .unwrap();
    }

    #[tokio::test]
    async fn ties_are_broken_randomly() {
        let client = FakeClient::new();
        let s = new_scheduler(client);
        let scores: Vec<NodeScore<'_>> = ["a", "b", "c"]
            .iter()
            .map(|n| NodeScore { name: n, score: 5 })
            .collect();
        let picked: HashSet<String> = (0..200).map(|_| s.select_host(&scores)).collect();
        assert_eq!(picked.len(), 3);
        let scores = vec![
            NodeScore {
                name: "a",
                score: 1,
            },
            NodeScore {
                name: "b",
                score: 9,
            },
        ];
        assert_eq!(s.select_host(&scores), "b");
    }

    #[tokio::test]
    async fn preemption_nominates_evicts_and_schedules_after_victims_leave() {
        let client = FakeClient::new();
        let s = new_scheduler(client.clone());
        s.on_node(Change::Added(
            NodeBuilder::new("n1")
                .allocatable(&[("cpu", "2"), ("pods", "10")])
                .build(),
        ));
        let victim = PodBuilder::new("low")
            .container(&[("cpu", "2")])
            .priority(1)
            .node("n1")
            .build();
        s.on_pod(Change::Added(victim.clone()));
        s.on_pod(Change::Added(
            PodBuilder::new("high")
                .container(&[("cpu", "2")])
                .priority(1000)
                .build(),
        ));
        assert!(s.schedule_next().await);
        s.wait_for_bindings().await;
        let deletes: Vec<_> = client
            .calls()
            .into_iter()
            .filter(|c| c.verb == "delete")
            .collect();
        assert_eq!(deletes.len(), 1);
        assert_eq!(deletes[0].path, "/api/v1/namespaces/default/pods/low");
        let status = client.calls_to("/pods/high/status");
        assert_eq!(status[0].body["status"]["nominatedNodeName"], "n1");
        assert_eq!(
            events_with(&client, "Preempted"),
            ["Preempted by pod uid-high on node n1"]
        );
        let failed = events_with(&client, "FailedScheduling");
        assert_eq!(failed, ["0/1 nodes are available: 1 Insufficient cpu."]);

        // A lower-priority pod cannot take the room the preemptor made.
        s.on_pod(Change::Deleted(victim));
        s.on_pod(Change::Added(
            PodBuilder::new("sneaky")
                .container(&[("cpu", "1")])
                .priority(0)
                .build(),
        ));
        tokio::time::sleep(Duration::from_millis(1100)).await;
        assert!(s.schedule_next().await, "high");
        assert!(s.schedule_next().await, "sneaky");
        s.wait_for_bindings().await;
        let binds = client.calls_to("/binding");
        assert_eq!(binds.len(), 1, "{binds:?}");
        assert_eq!(
            binds[0].path,
            "/api/v1/namespaces/default/pods/high/binding"
        );
    }

    #[tokio::test]
    async fn profiles_and_scheduler_names() {
        let client = FakeClient::new();
        let cfg = Config::parse(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: packer\n  pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        type: MostAllocated\n  plugins:\n    score:\n      disabled:\n      - name: '*'\n      enabled:\n      - name: NodeResourcesFit\n",
        )
        .unwrap();
        let s = Scheduler::new(client.clone(), cfg, Arc::new(StaticLister::new())).unwrap();
        assert!(s.framework("default-scheduler").is_none());
        let fw = s.framework("packer").unwrap();
        let score = fw
            .list_plugins()
            .into_iter()
            .find(|(p, _)| *p == "Score")
            .unwrap()
            .1;
        assert_eq!(score, ["NodeResourcesFit:1"]);
        s.on_node(Change::Added(NodeBuilder::new("empty").build()));
        s.on_node(Change::Added(NodeBuilder::new("busy").build()));
        s.on_pod(Change::Added(
            PodBuilder::new("e")
                .container(&[("cpu", "2")])
                .node("busy")
                .build(),
        ));
        // The default scheduler's pods are not ours any more.
        s.on_pod(Change::Added(PodBuilder::new("d").build()));
        assert!(!s.schedule_next().await);
        s.on_pod(Change::Added(
            PodBuilder::new("p")
                .container(&[("cpu", "1")])
                .scheduler_name("packer")
                .build(),
        ));
        assert!(s.schedule_next().await);
        s.wait_for_bindings().await;
        assert_eq!(
            client.calls_to("/binding")[0].body["target"]["name"],
            "busy",
            "MostAllocated packs"
        );
    }

    /// A rough throughput check (not a benchmark): `cargo test -p k1s-scheduler --release
    /// -- --ignored throughput --nocapture`.
    #[tokio::test]
    #[ignore]
    async fn throughput() {
        let client = FakeClient::new();
        let s = new_scheduler(client.clone());
        for i in 0..1000 {
            s.on_node(Change::Added(
                NodeBuilder::new(&format!("n{i}"))
                    .labels(&[("topology.kubernetes.io/zone", &format!("z{}", i % 3))])
                    .build(),
            ));
        }
        for i in 0..2000 {
            s.on_pod(Change::Added(
                PodBuilder::new(&format!("p{i}"))
                    .container(&[("cpu", "10m"), ("memory", "10Mi")])
                    .build(),
            ));
        }
        let t = Instant::now();
        while s.schedule_next().await {}
        s.wait_for_bindings().await;
        let n = client.calls_to("/binding").len();
        eprintln!(
            "{n} pods in {:?}: {:.0} pods/s",
            t.elapsed(),
            n as f64 / t.elapsed().as_secs_f64()
        );
        assert_eq!(n, 2000);
    }
}
