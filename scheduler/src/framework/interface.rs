//! One trait per extension point, as upstream's `framework/interface.go`: a plugin is a
//! [`Plugin`] that hands out the extension-point traits it implements (`as_filter`, ...).
//! Filter and Score run synchronously on a frozen [`Snapshot`]; PostFilter, PreBind and Bind
//! talk to the API and are async.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k1s_api::client::Client;

use super::listers::{ClusterLister, VolumeLister};
use super::node_info::{NodeInfo, PodInfo, Snapshot};
use super::runtime::Framework;
use super::{CycleState, Status};

/// What plugins get at construction: the API client and listers.
#[derive(Clone)]
pub struct Handle {
    pub client: Arc<dyn Client>,
    pub volumes: Arc<dyn VolumeLister>,
    pub cluster: Arc<dyn ClusterLister>,
}

/// The kind of object a cluster event is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventResource {
    Node,
    /// A pod other than the one being scheduled (bound, assumed or deleted).
    Pod,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    CsiNode,
    PodDisruptionBudget,
}

/// What happened to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ActionType {
    Add,
    Update,
    Delete,
}

/// A change in the cluster that may make unschedulable pods schedulable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClusterEvent {
    pub resource: EventResource,
    pub action: ActionType,
}

impl ClusterEvent {
    pub const fn new(resource: EventResource, action: ActionType) -> Self {
        Self { resource, action }
    }
}

/// Shorthand for plugins' `events_to_register`.
pub fn events(list: &[(EventResource, &[ActionType])]) -> Vec<ClusterEvent> {
    list.iter()
        .flat_map(|(r, acts)| acts.iter().map(|a| ClusterEvent::new(*r, *a)))
        .collect()
}

/// A plugin, and the extension points it implements.
pub trait Plugin: Send + Sync + 'static {
    fn name(&self) -> &'static str;

    /// The cluster events after which a pod this plugin rejected may fit (upstream's
    /// `EnqueueExtensions`, without per-event hints).
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        Vec::new()
    }

    fn as_pre_filter(self: Arc<Self>) -> Option<Arc<dyn PreFilterPlugin>> {
        None
    }
    fn as_filter(self: Arc<Self>) -> Option<Arc<dyn FilterPlugin>> {
        None
    }
    fn as_post_filter(self: Arc<Self>) -> Option<Arc<dyn PostFilterPlugin>> {
        None
    }
    fn as_pre_score(self: Arc<Self>) -> Option<Arc<dyn PreScorePlugin>> {
        None
    }
    fn as_score(self: Arc<Self>) -> Option<Arc<dyn ScorePlugin>> {
        None
    }
    fn as_reserve(self: Arc<Self>) -> Option<Arc<dyn ReservePlugin>> {
        None
    }
    fn as_permit(self: Arc<Self>) -> Option<Arc<dyn PermitPlugin>> {
        None
    }
    fn as_pre_bind(self: Arc<Self>) -> Option<Arc<dyn PreBindPlugin>> {
        None
    }
    fn as_bind(self: Arc<Self>) -> Option<Arc<dyn BindPlugin>> {
        None
    }
}

/// Runs once per cycle before Filter; may reject the pod outright or return Skip.
pub trait PreFilterPlugin: Plugin {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, snapshot: &Snapshot) -> Status;

    /// Preemption's what-if: `added` now runs on `node` (upstream `PreFilterExtensions`).
    fn add_pod(
        &self,
        _state: &mut CycleState,
        _pod: &PodInfo,
        _added: &PodInfo,
        _node: &NodeInfo,
    ) -> Status {
        Status::success()
    }

    /// Preemption's what-if: `removed` no longer runs on `node`.
    fn remove_pod(
        &self,
        _state: &mut CycleState,
        _pod: &PodInfo,
        _removed: &PodInfo,
        _node: &NodeInfo,
    ) -> Status {
        Status::success()
    }
}

/// Whether the pod may run on one node.
pub trait FilterPlugin: Plugin {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status;
}

/// What a PostFilter plugin sees after no node fit.
pub struct PostFilterContext<'a> {
    pub state: &'a CycleState,
    pub pod: &'a PodInfo,
    pub snapshot: &'a Snapshot,
    /// Why each node was rejected, by node name.
    pub statuses: &'a HashMap<String, Status>,
    /// The framework of the pod's profile, to run Filter in what-if scenarios.
    pub framework: &'a Framework,
    /// By node: other pods nominated there with at least the pod's priority, which the
    /// what-if Filter runs count as running.
    pub nominated: &'a HashMap<String, Vec<Arc<PodInfo>>>,
}

/// Runs when no node fits (preemption). On success it may nominate a node.
#[async_trait::async_trait]
pub trait PostFilterPlugin: Plugin {
    async fn post_filter(&self, ctx: &PostFilterContext<'_>) -> (Option<String>, Status);
}

/// Runs once per cycle before Score with the feasible nodes.
pub trait PreScorePlugin: Plugin {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        snapshot: &Snapshot,
    ) -> Status;
}

/// A node's name and score. The name borrows the node's own (from the cycle's snapshot):
/// scoring runs over hundreds of nodes per pod, and each cycle copied and dropped every
/// scored node's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeScore<'a> {
    pub name: &'a str,
    pub score: i64,
}

/// Ranks feasible nodes; scores end in 0..=100 after `normalize_score`.
pub trait ScorePlugin: Plugin {
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> (i64, Status);

    /// Rescales this plugin's scores of all nodes (upstream `ScoreExtensions`).
    fn normalize_score(
        &self,
        _state: &CycleState,
        _pod: &PodInfo,
        _scores: &mut [NodeScore<'_>],
    ) -> Status {
        Status::success()
    }
}

/// Reserves (and on failure releases) resources for the pod on the chosen node.
pub trait ReservePlugin: Plugin {
    fn reserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status;
    fn unreserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str);
}

/// Approves, rejects or delays (Wait, with a timeout) binding.
pub trait PermitPlugin: Plugin {
    fn permit(&self, state: &CycleState, pod: &PodInfo, node: &str) -> (Status, Duration);
}

/// Work before binding, such as provisioning or binding volumes.
#[async_trait::async_trait]
pub trait PreBindPlugin: Plugin {
    async fn pre_bind(&self, state: &CycleState, pod: &PodInfo, node: &str) -> Status;
}

/// Binds the pod to the node. Skip lets the next bind plugin bind.
#[async_trait::async_trait]
pub trait BindPlugin: Plugin {
    async fn bind(&self, state: &CycleState, pod: &PodInfo, node: &str) -> Status;
}

/// Upstream `DefaultNormalizeScore`: scale to 0..=`max` by the highest score, reversed if
/// asked (then all-zero scores become `max`).
pub fn default_normalize_score(max: i64, reverse: bool, scores: &mut [NodeScore<'_>]) {
    let highest = scores.iter().map(|s| s.score).max().unwrap_or(0);
    if highest == 0 {
        if reverse {
            for s in scores.iter_mut() {
                s.score = max;
            }
        }
        return;
    }
    for s in scores.iter_mut() {
        let mut v = max * s.score / highest;
        if reverse {
            v = max - v;
        }
        s.score = v;
    }
}
