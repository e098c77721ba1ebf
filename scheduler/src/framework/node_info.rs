//! [`PodInfo`] (a pod with its parsed requests, ports and affinity terms), [`NodeInfo`] (a node
//! with the pods on it and what they use) and [`Snapshot`] (all nodes, frozen for one
//! scheduling cycle). The cache owns the mutable copies; plugins only read these.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k1s_api::selector::{LabelSelector, Requirement};
use k8s_openapi::api::core::v1::{Node, Pod, PodAffinityTerm};

use super::helpers;
use super::resource::{Resource, pod_requests};

/// A pod affinity term, parsed once.
#[derive(Debug, Clone)]
pub struct AffinityTerm {
    /// Namespaces the term selects by name (the pod's own when neither these nor a
    /// namespace selector are given).
    pub namespaces: BTreeSet<String>,
    /// `None`: the term's label selector was missing or invalid, so it matches no pod.
    pub selector: Option<LabelSelector>,
    pub topology_key: String,
    /// `Some(empty)` selects every namespace.
    pub namespace_selector: Option<LabelSelector>,
}

impl AffinityTerm {
    pub fn new(pod: &Pod, term: &PodAffinityTerm) -> Self {
        let own_labels = helpers::labels(pod);
        let mut selector = term
            .label_selector
            .as_ref()
            .and_then(helpers::label_selector);
        if let Some(sel) = selector.as_mut() {
            for k in term.match_label_keys.iter().flatten() {
                if let Some(v) = own_labels.get(k) {
                    sel.0.push(Requirement::In(k.clone(), vec![v.clone()]));
                }
            }
            for k in term.mismatch_label_keys.iter().flatten() {
                if let Some(v) = own_labels.get(k) {
                    sel.0.push(Requirement::NotIn(k.clone(), vec![v.clone()]));
                }
            }
        }
        let mut namespaces: BTreeSet<String> = term.namespaces.iter().flatten().cloned().collect();
        let namespace_selector = term.namespace_selector.as_ref().map(|s| {
            helpers::label_selector(s).unwrap_or(LabelSelector(vec![Requirement::Exists(
                "\u{0}invalid".into(),
            )]))
        });
        if namespaces.is_empty() && namespace_selector.is_none() {
            namespaces.insert(helpers::namespace(pod).to_owned());
        }
        Self {
            namespaces,
            selector,
            topology_key: term.topology_key.clone(),
            namespace_selector,
        }
    }

    /// Whether `pod` is selected by this term; `ns_labels` gives namespaces' labels.
    pub fn matches(&self, pod: &Pod, ns_labels: &NamespaceLabels) -> bool {
        let Some(sel) = &self.selector else {
            return false;
        };
        let ns = helpers::namespace(pod);
        let ns_ok = self.namespaces.contains(ns)
            || self
                .namespace_selector
                .as_ref()
                .is_some_and(|s| s.is_empty() || ns_labels.get(ns).is_some_and(|l| s.matches(l)));
        ns_ok && sel.matches(helpers::labels(pod))
    }
}

/// Labels of namespaces by name, for namespace selectors.
pub type NamespaceLabels = HashMap<String, BTreeMap<String, String>>;

#[derive(Debug, Clone)]
pub struct WeightedAffinityTerm {
    pub weight: i32,
    pub term: AffinityTerm,
}

/// `(host IP, protocol, port)` of a container port with a hostPort.
pub type HostPort = (String, String, i32);

/// A pod and what the scheduler derives from it, computed once.
#[derive(Debug, Clone)]
pub struct PodInfo {
    pub pod: Arc<Pod>,
    pub requests: Resource,
    /// CPU and memory as counted for scoring (defaults for containers without requests).
    pub non_zero_cpu: i64,
    pub non_zero_memory: i64,
    pub host_ports: Vec<HostPort>,
    pub required_affinity: Vec<AffinityTerm>,
    pub required_anti_affinity: Vec<AffinityTerm>,
    pub preferred_affinity: Vec<WeightedAffinityTerm>,
    pub preferred_anti_affinity: Vec<WeightedAffinityTerm>,
}

impl PodInfo {
    pub fn new(pod: Arc<Pod>) -> Self {
        let (requests, non_zero_cpu, non_zero_memory) = pod_requests(&pod);
        let mut host_ports = Vec::new();
        let spec = pod.spec.as_ref();
        for c in spec.into_iter().flat_map(|s| s.containers.iter()) {
            for p in c.ports.iter().flatten() {
                if let Some(hp) = p.host_port.filter(|hp| *hp > 0) {
                    let ip = p
                        .host_ip
                        .clone()
                        .filter(|i| !i.is_empty())
                        .unwrap_or_else(|| "0.0.0.0".into());
                    let proto = p.protocol.clone().unwrap_or_else(|| "TCP".into());
                    host_ports.push((ip, proto, hp));
                }
            }
        }
        let affinity = spec.and_then(|s| s.affinity.as_ref());
        let pa = affinity.and_then(|a| a.pod_affinity.as_ref());
        let paa = affinity.and_then(|a| a.pod_anti_affinity.as_ref());
        let required = |terms: Option<&Vec<PodAffinityTerm>>| {
            terms
                .into_iter()
                .flatten()
                .map(|t| AffinityTerm::new(&pod, t))
                .collect::<Vec<_>>()
        };
        let required_affinity = required(pa.and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        }));
        let required_anti_affinity = required(paa.and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        }));
        let preferred =
            |terms: Option<&Vec<k8s_openapi::api::core::v1::WeightedPodAffinityTerm>>| {
                terms
                    .into_iter()
                    .flatten()
                    .map(|t| WeightedAffinityTerm {
                        weight: t.weight,
                        term: AffinityTerm::new(&pod, &t.pod_affinity_term),
                    })
                    .collect::<Vec<_>>()
            };
        let preferred_affinity = preferred(pa.and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        }));
        let preferred_anti_affinity = preferred(paa.and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        }));
        Self {
            pod,
            requests,
            non_zero_cpu,
            non_zero_memory,
            host_ports,
            required_affinity,
            required_anti_affinity,
            preferred_affinity,
            preferred_anti_affinity,
        }
    }

    pub fn has_affinity(&self) -> bool {
        !(self.required_affinity.is_empty()
            && self.required_anti_affinity.is_empty()
            && self.preferred_affinity.is_empty()
            && self.preferred_anti_affinity.is_empty())
    }
}

/// A node, the pods on it (bound and assumed) and what they use.
#[derive(Debug, Clone, Default)]
pub struct NodeInfo {
    /// `None` while pods reference a node the cache has not seen (yet).
    pub node: Option<Arc<Node>>,
    pub pods: Vec<Arc<PodInfo>>,
    /// How many pods have affinity terms / required anti-affinity terms.
    pub num_pods_with_affinity: usize,
    pub num_pods_with_required_anti_affinity: usize,
    pub used_ports: Vec<HostPort>,
    pub requested: Resource,
    pub non_zero_cpu: i64,
    pub non_zero_memory: i64,
    pub allocatable: Resource,
    /// Sizes of the images on the node, by normalized name.
    pub image_sizes: HashMap<String, i64>,
    /// `namespace/claim` of PVCs used by pods here, with how many pods use them.
    pub pvc_ref_counts: HashMap<String, usize>,
    /// Bumped on every change, so snapshots can tell what changed.
    pub generation: u64,
}

impl NodeInfo {
    pub fn new(node: Option<Arc<Node>>) -> Self {
        let mut ni = NodeInfo::default();
        if let Some(n) = node {
            ni.set_node(n);
        }
        ni
    }

    pub fn name(&self) -> &str {
        self.node.as_deref().map(helpers::node_name).unwrap_or("")
    }

    pub fn set_node(&mut self, node: Arc<Node>) {
        self.allocatable = Resource::allocatable_of(&node);
        self.image_sizes.clear();
        for img in node
            .status
            .as_ref()
            .and_then(|s| s.images.as_ref())
            .into_iter()
            .flatten()
        {
            for n in img.names.iter().flatten() {
                self.image_sizes
                    .insert(normalize_image(n), img.size_bytes.unwrap_or(0));
            }
        }
        self.node = Some(node);
        self.generation += 1;
    }

    pub fn add_pod(&mut self, pi: Arc<PodInfo>) {
        self.requested.add(&pi.requests);
        self.requested.allowed_pod_number += 1;
        self.non_zero_cpu += pi.non_zero_cpu;
        self.non_zero_memory += pi.non_zero_memory;
        self.used_ports.extend(pi.host_ports.iter().cloned());
        if pi.has_affinity() {
            self.num_pods_with_affinity += 1;
        }
        if !pi.required_anti_affinity.is_empty() {
            self.num_pods_with_required_anti_affinity += 1;
        }
        for claim in pod_claims(&pi.pod) {
            *self.pvc_ref_counts.entry(claim).or_default() += 1;
        }
        self.pods.push(pi);
        self.generation += 1;
    }

    /// Removes the pod with `uid` (or, for pods without uid, `namespace/name`).
    pub fn remove_pod(&mut self, pod: &Pod) -> bool {
        let key = helpers::pod_key(pod);
        let uid = helpers::uid(pod);
        let Some(i) = self.pods.iter().position(|p| {
            if uid.is_empty() {
                helpers::pod_key(&p.pod) == key
            } else {
                helpers::uid(&p.pod) == uid
            }
        }) else {
            return false;
        };
        let pi = self.pods.swap_remove(i);
        self.requested.sub(&pi.requests);
        self.requested.allowed_pod_number -= 1;
        self.non_zero_cpu -= pi.non_zero_cpu;
        self.non_zero_memory -= pi.non_zero_memory;
        for hp in &pi.host_ports {
            if let Some(j) = self.used_ports.iter().position(|u| u == hp) {
                self.used_ports.swap_remove(j);
            }
        }
        if pi.has_affinity() {
            self.num_pods_with_affinity -= 1;
        }
        if !pi.required_anti_affinity.is_empty() {
            self.num_pods_with_required_anti_affinity -= 1;
        }
        for claim in pod_claims(&pi.pod) {
            if let Some(c) = self.pvc_ref_counts.get_mut(&claim) {
                *c -= 1;
                if *c == 0 {
                    self.pvc_ref_counts.remove(&claim);
                }
            }
        }
        self.generation += 1;
        true
    }

    pub fn labels(&self) -> &BTreeMap<String, String> {
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        self.node
            .as_deref()
            .and_then(|n| n.metadata.labels.as_ref())
            .unwrap_or(&EMPTY)
    }
}

/// `namespace/claim` of the PVCs a pod mounts.
pub fn pod_claims(pod: &Pod) -> Vec<String> {
    let ns = helpers::namespace(pod);
    pod.spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|v| {
            v.persistent_volume_claim
                .as_ref()
                .map(|c| format!("{ns}/{}", c.claim_name))
                .or_else(|| {
                    v.ephemeral
                        .as_ref()
                        .map(|_| format!("{ns}/{}-{}", helpers::name(pod), v.name))
                })
        })
        .collect()
}

/// An image name as the node reports it: `docker.io/library/` and `:latest` made explicit
/// when missing, so `nginx`, `nginx:latest` and `docker.io/library/nginx:latest` agree.
pub fn normalize_image(name: &str) -> String {
    let mut n = name.to_owned();
    let last = n.rsplit('/').next().unwrap_or("");
    if !last.contains(':') && !n.contains('@') {
        n.push_str(":latest");
    }
    let first = n.split('/').next().unwrap_or("");
    let has_domain =
        n.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    if !has_domain {
        if n.contains('/') {
            n = format!("docker.io/{n}");
        } else {
            n = format!("docker.io/library/{n}");
        }
    }
    n
}

/// All nodes as they were when a scheduling cycle began. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub nodes: Arc<Vec<Arc<NodeInfo>>>,
    pub index: Arc<HashMap<String, usize>>,
    pub namespaces: Arc<NamespaceLabels>,
    /// On how many nodes each image is.
    pub image_nodes: Arc<HashMap<String, usize>>,
}

impl Snapshot {
    /// A snapshot of `nodes` (which must all have a node set).
    pub fn new(nodes: Vec<NodeInfo>, namespaces: NamespaceLabels) -> Self {
        Self::from_arcs(
            nodes.into_iter().map(Arc::new).collect(),
            Arc::new(namespaces),
        )
    }

    pub fn from_arcs(nodes: Vec<Arc<NodeInfo>>, namespaces: Arc<NamespaceLabels>) -> Self {
        let index = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name().to_owned(), i))
            .collect();
        Self {
            image_nodes: Arc::new(count_images(&nodes)),
            nodes: Arc::new(nodes),
            index: Arc::new(index),
            namespaces,
        }
    }

    pub fn get(&self, name: &str) -> Option<&Arc<NodeInfo>> {
        self.index.get(name).map(|i| &self.nodes[*i])
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Every pod in the snapshot with its node.
    pub fn pods(&self) -> impl Iterator<Item = (&Arc<NodeInfo>, &Arc<PodInfo>)> {
        self.nodes
            .iter()
            .flat_map(|n| n.pods.iter().map(move |p| (n, p)))
    }
}

/// On how many of `nodes` each image is.
pub fn count_images(nodes: &[Arc<NodeInfo>]) -> HashMap<String, usize> {
    let mut counts: HashMap<String, usize> = HashMap::new();
    for n in nodes {
        for k in n.image_sizes.keys() {
            *counts.entry(k.clone()).or_default() += 1;
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_names_normalize() {
        for (i, o) in [
            ("nginx", "docker.io/library/nginx:latest"),
            ("nginx:1.2", "docker.io/library/nginx:1.2"),
            ("me/app", "docker.io/me/app:latest"),
            ("gcr.io/x/y:v1", "gcr.io/x/y:v1"),
            ("localhost:5000/b", "localhost:5000/b:latest"),
        ] {
            assert_eq!(normalize_image(i), o, "{i}");
        }
    }
}
