//! The scheduler cache: nodes, the pods bound to them, and pods the scheduler assumed onto a
//! node before the API confirmed the binding (upstream `internal/cache`). It hands out a
//! [`Snapshot`] per cycle, rebuilt incrementally from the nodes that changed.
//!
//! Assumed pods: `assume_pod` adds the pod to its node at once; `finish_binding` starts its
//! expiry clock; the informer's add (`add_pod`) confirms it; `forget_pod` undoes it;
//! `cleanup_expired` drops those whose binding finished but never showed up.
//!
//! Owns no I/O; the scheduler calls it from informer events and its own cycles.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};

use crate::framework::helpers;
use crate::framework::node_info::{NamespaceLabels, NodeInfo, PodInfo, Snapshot};

/// A cache operation that does not fit the cache's state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CacheError {
    #[error("pod {0} is already in the cache, so can't be assumed")]
    AlreadyPresent(String),
    #[error("pod {0} has no node name")]
    NoNodeName(String),
    #[error("pod {0} wasn't assumed so cannot be forgotten")]
    NotAssumed(String),
    #[error("pod {0} is not in the cache")]
    NotFound(String),
}

#[derive(Debug)]
struct PodState {
    pod: Arc<Pod>,
    node: String,
    /// Set by `finish_binding` for assumed pods.
    deadline: Option<Instant>,
}

/// Nodes and pods the scheduler knows.
#[derive(Debug)]
pub struct Cache {
    ttl: Duration,
    nodes: HashMap<String, Arc<NodeInfo>>,
    /// Node names in the order they were added (the snapshot's order).
    order: Vec<String>,
    pods: HashMap<String, PodState>,
    assumed: HashSet<String>,
    namespaces: Arc<NamespaceLabels>,
    snap: Snapshot,
    dirty: HashSet<String>,
    structure_changed: bool,
}

fn pod_id(pod: &Pod) -> String {
    let uid = helpers::uid(pod);
    if uid.is_empty() {
        helpers::pod_key(pod)
    } else {
        uid.to_owned()
    }
}

impl Cache {
    /// `ttl`: how long an assumed pod whose binding finished may wait for confirmation.
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            nodes: HashMap::new(),
            order: Vec::new(),
            pods: HashMap::new(),
            assumed: HashSet::new(),
            namespaces: Arc::new(HashMap::new()),
            snap: Snapshot::default(),
            dirty: HashSet::new(),
            structure_changed: true,
        }
    }

    fn node_mut(&mut self, name: &str) -> &mut NodeInfo {
        if !self.nodes.contains_key(name) {
            self.nodes
                .insert(name.to_owned(), Arc::new(NodeInfo::new(None)));
        }
        self.dirty.insert(name.to_owned());
        let arc = self.nodes.get_mut(name).expect("inserted above");
        Arc::make_mut(arc)
    }

    pub fn add_node(&mut self, node: Node) {
        let name = helpers::node_name(&node).to_owned();
        let had_node = self.nodes.get(&name).is_some_and(|n| n.node.is_some());
        self.node_mut(&name).set_node(Arc::new(node));
        if !had_node {
            self.order.push(name);
            self.structure_changed = true;
        }
    }

    /// Updates the node; returns whether anything scheduling looks at changed (labels,
    /// taints, cordon, allocatable, images), so heartbeats do not requeue pods.
    pub fn update_node(&mut self, node: Node) -> bool {
        let old = self
            .nodes
            .get(helpers::node_name(&node))
            .and_then(|n| n.node.clone());
        let relevant = old.is_none_or(|o| {
            let spec = |n: &Node| n.spec.as_ref().map(|s| (s.unschedulable, s.taints.clone()));
            let status = |n: &Node| {
                n.status
                    .as_ref()
                    .map(|s| (s.allocatable.clone(), s.images.clone()))
            };
            o.metadata.labels != node.metadata.labels
                || spec(&o) != spec(&node)
                || status(&o) != status(&node)
        });
        self.add_node(node);
        relevant
    }

    /// Removes the node; its pods stay (under a node-less entry) until they are deleted.
    pub fn remove_node(&mut self, name: &str) {
        let Some(ni) = self.nodes.get_mut(name) else {
            return;
        };
        if ni.pods.is_empty() {
            self.nodes.remove(name);
        } else {
            let ni = Arc::make_mut(ni);
            ni.node = None;
            ni.generation += 1;
        }
        self.order.retain(|n| n != name);
        self.structure_changed = true;
    }

    pub fn node_count(&self) -> usize {
        self.order.len()
    }

    pub fn set_namespace(&mut self, ns: &Namespace) {
        let name = ns.metadata.name.clone().unwrap_or_default();
        Arc::make_mut(&mut self.namespaces)
            .insert(name, ns.metadata.labels.clone().unwrap_or_default());
        self.structure_changed = true;
    }

    pub fn remove_namespace(&mut self, name: &str) {
        Arc::make_mut(&mut self.namespaces).remove(name);
        self.structure_changed = true;
    }

    fn add_to_node(&mut self, pod: Arc<Pod>, node: &str) {
        let pi = Arc::new(PodInfo::new(pod));
        self.node_mut(node).add_pod(pi);
    }

    fn remove_from_node(&mut self, pod: &Pod, node: &str) {
        if !self.nodes.contains_key(node) {
            return;
        }
        self.node_mut(node).remove_pod(pod);
        let gone = self
            .nodes
            .get(node)
            .is_some_and(|n| n.node.is_none() && n.pods.is_empty());
        if gone {
            self.nodes.remove(node);
            self.dirty.remove(node);
        }
    }

    /// Puts a pod the scheduler chose a node for (`spec.nodeName` set) on that node before
    /// the binding is confirmed.
    pub fn assume_pod(&mut self, pod: Arc<Pod>) -> Result<(), CacheError> {
        let id = pod_id(&pod);
        if self.pods.contains_key(&id) {
            return Err(CacheError::AlreadyPresent(helpers::pod_key(&pod)));
        }
        let node = helpers::pod_node_name(&pod).to_owned();
        if node.is_empty() {
            return Err(CacheError::NoNodeName(helpers::pod_key(&pod)));
        }
        self.add_to_node(pod.clone(), &node);
        self.pods.insert(
            id.clone(),
            PodState {
                pod,
                node,
                deadline: None,
            },
        );
        self.assumed.insert(id);
        Ok(())
    }

    /// The binding call returned: start the assumed pod's expiry clock.
    pub fn finish_binding(&mut self, pod: &Pod, now: Instant) {
        let id = pod_id(pod);
        if self.assumed.contains(&id)
            && let Some(ps) = self.pods.get_mut(&id)
        {
            ps.deadline = Some(now + self.ttl);
        }
    }

    /// Undoes `assume_pod` (the binding failed).
    pub fn forget_pod(&mut self, pod: &Pod) -> Result<(), CacheError> {
        let id = pod_id(pod);
        if !self.assumed.remove(&id) {
            return Err(CacheError::NotAssumed(helpers::pod_key(pod)));
        }
        if let Some(ps) = self.pods.remove(&id) {
            self.remove_from_node(&ps.pod, &ps.node);
        }
        Ok(())
    }

    pub fn is_assumed(&self, pod: &Pod) -> bool {
        self.assumed.contains(&pod_id(pod))
    }

    /// A bound pod from the informer: confirms an assumed pod, or adds/updates it.
    pub fn add_pod(&mut self, pod: Pod) {
        let id = pod_id(&pod);
        let node = helpers::pod_node_name(&pod).to_owned();
        if node.is_empty() {
            return;
        }
        if let Some(old) = self.pods.remove(&id) {
            self.remove_from_node(&old.pod, &old.node);
        }
        self.assumed.remove(&id);
        let pod = Arc::new(pod);
        self.add_to_node(pod.clone(), &node);
        self.pods.insert(
            id,
            PodState {
                pod,
                node,
                deadline: None,
            },
        );
    }

    /// Updates a bound pod; returns whether anything scheduling looks at changed (labels,
    /// spec) or the pod was new or assumed until now.
    pub fn update_pod(&mut self, pod: Pod) -> bool {
        let id = pod_id(&pod);
        let relevant = self.assumed.contains(&id)
            || self.pods.get(&id).is_none_or(|old| {
                old.pod.metadata.labels != pod.metadata.labels || old.pod.spec != pod.spec
            });
        self.add_pod(pod);
        relevant
    }

    pub fn remove_pod(&mut self, pod: &Pod) {
        let id = pod_id(pod);
        self.assumed.remove(&id);
        if let Some(ps) = self.pods.remove(&id) {
            self.remove_from_node(&ps.pod, &ps.node);
        }
    }

    pub fn get_pod(&self, pod: &Pod) -> Option<Arc<Pod>> {
        self.pods.get(&pod_id(pod)).map(|p| p.pod.clone())
    }

    pub fn pod_count(&self) -> usize {
        self.pods.len()
    }

    /// Drops assumed pods whose binding finished more than the TTL ago without the informer
    /// confirming them. Returns them.
    pub fn cleanup_expired(&mut self, now: Instant) -> Vec<Arc<Pod>> {
        let expired: Vec<String> = self
            .assumed
            .iter()
            .filter(|id| {
                self.pods
                    .get(*id)
                    .and_then(|p| p.deadline)
                    .is_some_and(|d| now >= d)
            })
            .cloned()
            .collect();
        let mut out = Vec::new();
        for id in expired {
            self.assumed.remove(&id);
            if let Some(ps) = self.pods.remove(&id) {
                tracing::warn!(pod = %helpers::pod_key(&ps.pod), node = %ps.node, "assumed pod expired");
                self.remove_from_node(&ps.pod, &ps.node);
                out.push(ps.pod);
            }
        }
        out
    }

    /// The nodes as they are now, for one scheduling cycle.
    pub fn snapshot(&mut self) -> Snapshot {
        if self.structure_changed {
            let nodes: Vec<Arc<NodeInfo>> = self
                .order
                .iter()
                .filter_map(|n| self.nodes.get(n))
                .filter(|n| n.node.is_some())
                .cloned()
                .collect();
            self.snap = Snapshot::from_arcs(nodes, self.namespaces.clone());
            self.structure_changed = false;
            self.dirty.clear();
        } else if !self.dirty.is_empty() {
            // Changed in place when no earlier cycle still holds the list (the usual case),
            // else copied: a snapshot handed out never changes.
            let nodes = Arc::make_mut(&mut self.snap.nodes);
            let mut images_changed = false;
            for name in self.dirty.drain() {
                if let (Some(i), Some(ni)) = (self.snap.index.get(&name), self.nodes.get(&name)) {
                    images_changed |= nodes[*i].image_sizes != ni.image_sizes;
                    nodes[*i] = ni.clone();
                }
            }
            if images_changed {
                self.snap.image_nodes = Arc::new(crate::framework::node_info::count_images(nodes));
            }
        }
        self.snap.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{NodeBuilder, PodBuilder};

    fn cpu_on(snap: &Snapshot, node: &str) -> i64 {
        snap.get(node).map(|n| n.requested.milli_cpu).unwrap_or(-1)
    }

    #[test]
    fn assume_confirm_forget_expire() {
        let mut c = Cache::new(Duration::from_secs(30));
        c.add_node(NodeBuilder::new("n1").build());
        c.add_node(NodeBuilder::new("n2").build());
        let p = PodBuilder::new("p")
            .container(&[("cpu", "1")])
            .node("n1")
            .build();

        // assume → visible in the next snapshot
        let s0 = c.snapshot();
        c.assume_pod(Arc::new(p.clone())).unwrap();
        assert!(c.is_assumed(&p));
        let s1 = c.snapshot();
        assert_eq!(cpu_on(&s0, "n1"), 0, "old snapshots do not change");
        assert_eq!(cpu_on(&s1, "n1"), 1000);
        assert_eq!(
            c.assume_pod(Arc::new(p.clone())),
            Err(CacheError::AlreadyPresent("default/p".into()))
        );

        // forget → gone
        c.forget_pod(&p).unwrap();
        assert_eq!(cpu_on(&c.snapshot(), "n1"), 0);
        assert!(c.forget_pod(&p).is_err());

        // assume, finish binding, confirm by informer → not expired later
        c.assume_pod(Arc::new(p.clone())).unwrap();
        let t0 = Instant::now();
        c.finish_binding(&p, t0);
        c.add_pod(p.clone());
        assert!(!c.is_assumed(&p));
        assert!(c.cleanup_expired(t0 + Duration::from_secs(60)).is_empty());
        assert_eq!(cpu_on(&c.snapshot(), "n1"), 1000);

        // assume another, finish binding, never confirmed → expires after ttl only
        let q = PodBuilder::new("q")
            .container(&[("cpu", "2")])
            .node("n2")
            .build();
        c.assume_pod(Arc::new(q.clone())).unwrap();
        assert!(
            c.cleanup_expired(t0 + Duration::from_secs(60)).is_empty(),
            "not finished"
        );
        c.finish_binding(&q, t0);
        assert!(c.cleanup_expired(t0 + Duration::from_secs(10)).is_empty());
        assert_eq!(c.cleanup_expired(t0 + Duration::from_secs(31)).len(), 1);
        assert_eq!(cpu_on(&c.snapshot(), "n2"), 0);
    }

    #[test]
    fn nodes_and_pods() {
        let mut c = Cache::new(Duration::from_secs(30));
        // a pod on a node the cache has not seen yet
        let p = PodBuilder::new("p")
            .container(&[("cpu", "1")])
            .node("n1")
            .build();
        c.add_pod(p.clone());
        assert!(
            c.snapshot().is_empty(),
            "node-less entries are not in snapshots"
        );
        c.add_node(NodeBuilder::new("n1").build());
        let s = c.snapshot();
        assert_eq!(s.len(), 1);
        assert_eq!(cpu_on(&s, "n1"), 1000);
        // update moves nothing, delete frees
        assert!(!c.update_pod(p.clone()), "unchanged");
        let mut relabelled = p.clone();
        relabelled.metadata.labels = Some([("x".to_owned(), "y".to_owned())].into());
        assert!(c.update_pod(relabelled));
        assert_eq!(cpu_on(&c.snapshot(), "n1"), 1000);
        c.remove_pod(&p);
        assert_eq!(cpu_on(&c.snapshot(), "n1"), 0);
        // remove node
        c.add_pod(p.clone());
        c.remove_node("n1");
        assert!(c.snapshot().is_empty());
        c.remove_pod(&p);
        assert_eq!(c.pod_count(), 0);
        // unbound pods are ignored
        c.add_pod(PodBuilder::new("u").build());
        assert_eq!(c.pod_count(), 0);
    }

    #[test]
    fn image_counts_follow_nodes() {
        let mut c = Cache::new(Duration::from_secs(30));
        c.add_node(NodeBuilder::new("n1").image("nginx", 10).build());
        assert_eq!(
            c.snapshot()
                .image_nodes
                .get("docker.io/library/nginx:latest"),
            Some(&1)
        );
        assert!(
            c.update_node(NodeBuilder::new("n1").build()),
            "images changed"
        );
        assert!(
            !c.update_node(NodeBuilder::new("n1").build()),
            "nothing changed"
        );
        assert!(c.update_node(NodeBuilder::new("n1").labels(&[("a", "b")]).build()));
        assert_eq!(
            c.snapshot()
                .image_nodes
                .get("docker.io/library/nginx:latest"),
            None
        );
    }
}
