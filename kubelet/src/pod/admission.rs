//! The kubelet's own admission of a pod against this node, as upstream's `GeneralPredicates`
//! (`pkg/kubelet/lifecycle/predicate.go`): the pod's requests fit the node's allocatable next
//! to the pods already admitted (pod count, cpu, memory, ephemeral storage, hugepages), its
//! `nodeName`, `nodeSelector` and required node affinity match this node, and its host ports
//! are free. This matters for pods that never went through the scheduler (`nodeName` set by
//! their creator, static pods) and for races the scheduler cannot see. A refused pod ends
//! Failed with upstream's reason (`OutOfcpu`, `NodePorts`, …) and message.
//!
//! Owns the set of pods admitted on this node and not yet ended ([`Admitted`]); pod workers
//! add to it when they admit and take out when their pod ends or is torn down. Extended
//! resources are left to the device manager, which admits them against its devices.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use k1s_api::client::{Client, ResourceRef};
use k1s_api::quantity::ResourceList;
use k8s_openapi::api::core::v1::{Node, NodeSpec, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// Why a pod was refused: the pod's status `reason` and `message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub reason: String,
    pub message: String,
}

impl Refusal {
    fn predicate(name: &str) -> Self {
        Refusal {
            reason: name.into(),
            message: format!("Predicate {name} failed"),
        }
    }
}

/// This node as admission sees it.
#[derive(Default)]
struct NodeFacts {
    name: String,
    labels: BTreeMap<String, String>,
    allocatable: ResourceList,
}

/// The pods admitted on this node and the node's facts; shared by the pod workers.
#[derive(Default)]
pub struct Admitted {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    node: NodeFacts,
    /// Admitted pods that have not ended, by UID.
    pods: HashMap<String, Arc<Pod>>,
}

impl Admitted {
    pub fn new(node_name: &str) -> Self {
        let a = Admitted::default();
        a.lock().node.name = node_name.to_owned();
        a
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The node's allocatable (what registration reports).
    pub fn set_allocatable(&self, allocatable: ResourceList) {
        self.lock().node.allocatable = allocatable;
    }

    /// The node's labels, as the Node in the API has them.
    pub fn set_labels(&self, labels: BTreeMap<String, String>) {
        self.lock().node.labels = labels;
    }

    /// Admits `pod` (recording it) or says why not. A pod already recorded is admitted.
    pub fn admit(&self, uid: &str, pod: &Pod) -> Result<(), Refusal> {
        let mut state = self.lock();
        if state.pods.contains_key(uid) {
            return Ok(());
        }
        let others = state
            .pods
            .iter()
            .filter(|(u, _)| u.as_str() != uid)
            .map(|(_, p)| p.as_ref());
        general_predicates(pod, &state.node, others)?;
        state.pods.insert(uid.to_owned(), Arc::new(pod.clone()));
        Ok(())
    }

    /// Records a pod admitted before (its containers already run after a kubelet restart).
    pub fn record(&self, uid: &str, pod: &Pod) {
        self.lock()
            .pods
            .insert(uid.to_owned(), Arc::new(pod.clone()));
    }

    /// The pod ended or is gone: it no longer holds resources or ports.
    pub fn release(&self, uid: &str) {
        self.lock().pods.remove(uid);
    }
}

/// Reads this node's labels from the API into `admitted` (kept as they were when the Node
/// cannot be read).
pub async fn refresh_labels(admitted: &Admitted, client: &dyn Client, node_name: &str) {
    let nodes = ResourceRef::new("", "v1", "nodes", None);
    if let Ok(node) = client.get(&nodes, node_name).await {
        set_labels_from(admitted, &node);
    }
}

/// Takes the labels of a Node object read from the API.
pub fn set_labels_from(admitted: &Admitted, node: &serde_json::Value) {
    if let Ok(labels) = serde_json::from_value(node["metadata"]["labels"].clone()) {
        admitted.set_labels(labels);
    }
}

/// Upstream's `GeneralPredicates`, first failure first: resources, node affinity, node name,
/// host ports.
fn general_predicates<'a>(
    pod: &Pod,
    node: &NodeFacts,
    others: impl Iterator<Item = &'a Pod> + Clone,
) -> Result<(), Refusal> {
    fits_resources(pod, node, others.clone())?;
    if !matches_node_selector_and_affinity(pod, node) {
        return Err(Refusal::predicate("NodeAffinity"));
    }
    let node_name = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
    if node_name.is_some_and(|n| !n.is_empty() && n != node.name) {
        return Err(Refusal::predicate("NodeName"));
    }
    let used: Vec<HostPort> = others.flat_map(host_ports).collect();
    if host_ports(pod)
        .iter()
        .any(|want| used.iter().any(|u| u.conflicts(want)))
    {
        return Err(Refusal::predicate("NodePorts"));
    }
    Ok(())
}

fn requests(pod: &Pod) -> ResourceList {
    k1s_api::resource::pod_requests(pod, &k1s_api::resource::Options::default())
}

/// Upstream's `noderesources.Fits`: the pod count, then cpu (in millicores), memory,
/// ephemeral storage and hugepages against allocatable less what admitted pods request.
/// Resources the node does not report are not checked.
fn fits_resources<'a>(
    pod: &Pod,
    node: &NodeFacts,
    others: impl Iterator<Item = &'a Pod>,
) -> Result<(), Refusal> {
    let others: Vec<&Pod> = others.collect();
    let out_of = |name: &str, requested: i64, used: i64, capacity: i64| Refusal {
        reason: format!("OutOf{name}"),
        message: format!(
            "Node didn't have enough resource: {name}, requested: {requested}, used: {used}, capacity: {capacity}"
        ),
    };
    if let Some(max) = node.allocatable.get("pods").map(|q| q.value())
        && others.len() as i64 + 1 > max
    {
        return Err(out_of("pods", 1, others.len() as i64, max));
    }
    let want = requests(pod);
    let used = others
        .iter()
        .map(|p| requests(p))
        .fold(ResourceList::new(), |acc, r| acc.add(&r));
    let amount = |list: &ResourceList, name: &str| {
        list.get(name).map_or(0, |q| {
            if name == "cpu" {
                q.milli_value()
            } else {
                q.value()
            }
        })
    };
    let mut names: Vec<&str> = vec!["cpu", "memory", "ephemeral-storage"];
    names.extend(
        want.0
            .keys()
            .map(String::as_str)
            .filter(|n| n.starts_with("hugepages-")),
    );
    for name in names {
        let requested = amount(&want, name);
        if requested == 0 {
            continue;
        }
        let Some(capacity) = node
            .allocatable
            .get(name)
            .map(|_| amount(&node.allocatable, name))
        else {
            continue;
        };
        let in_use = amount(&used, name);
        if requested > capacity - in_use {
            return Err(out_of(name, requested, in_use, capacity));
        }
    }
    Ok(())
}

/// `nodeSelector` and the required node affinity terms against this node's labels and name.
fn matches_node_selector_and_affinity(pod: &Pod, node: &NodeFacts) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return true;
    };
    if let Some(sel) = &spec.node_selector
        && sel.iter().any(|(k, v)| node.labels.get(k) != Some(v))
    {
        return false;
    }
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    let Some(required) = required else {
        return true;
    };
    let as_node = Node {
        metadata: ObjectMeta {
            name: Some(node.name.clone()),
            labels: Some(node.labels.clone()),
            ..Default::default()
        },
        spec: Some(NodeSpec::default()),
        status: None,
    };
    k1s_api::volume::node_selector_matches(required, &as_node)
}

/// A host port a pod uses: (host IP, protocol, port); an empty IP is `0.0.0.0`.
#[derive(Debug, PartialEq)]
struct HostPort {
    ip: String,
    protocol: String,
    port: i32,
}

impl HostPort {
    /// Upstream's `HostPortInfo` rule: the same protocol and port on the same IP, or on
    /// any IP when either side binds all addresses.
    fn conflicts(&self, other: &HostPort) -> bool {
        let any = |ip: &str| ip == "0.0.0.0";
        self.port == other.port
            && self.protocol == other.protocol
            && (self.ip == other.ip || any(&self.ip) || any(&other.ip))
    }
}

fn host_ports(pod: &Pod) -> Vec<HostPort> {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    spec.init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter())
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            let port = p.host_port.filter(|&hp| hp > 0)?;
            let ip = p.host_ip.as_deref().filter(|ip| !ip.is_empty());
            Some(HostPort {
                ip: ip.unwrap_or("0.0.0.0").to_owned(),
                protocol: p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                port,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).unwrap()
    }

    fn with_port(port: i64, ip: &str, protocol: &str) -> Pod {
        pod(json!({"containers": [{"name": "c", "image": "i",
            "ports": [{"containerPort": port, "hostPort": port, "hostIP": ip, "protocol": protocol}]}]}))
    }

    fn node() -> Admitted {
        let a = Admitted::new("n1");
        a.set_allocatable(ResourceList::from_json_lenient(
            &json!({"cpu": "2", "memory": "1Gi", "pods": "3"}),
        ));
        a.set_labels(BTreeMap::from([("zone".to_owned(), "a".to_owned())]));
        a
    }

    #[test]
    fn host_ports_conflict_as_upstream() {
        let a = node();
        a.admit("1", &with_port(8080, "", "TCP")).unwrap();
        // Same port, any address: refused as upstream says it.
        assert_eq!(
            a.admit("2", &with_port(8080, "10.0.0.1", "TCP")),
            Err(Refusal {
                reason: "NodePorts".into(),
                message: "Predicate NodePorts failed".into()
            })
        );
        // Another protocol is free.
        a.admit("3", &with_port(8080, "", "UDP")).unwrap();
        // Released when the first pod ends.
        a.release("1");
        a.admit("2", &with_port(8080, "10.0.0.1", "TCP")).unwrap();
        // Two specific addresses do not conflict.
        a.release("3");
        a.admit("4", &with_port(8080, "10.0.0.2", "TCP")).unwrap();
    }

    #[test]
    fn resources_and_pod_count() {
        let a = node();
        let cpu = |m: &str| {
            pod(json!({"containers": [{"name": "c", "image": "i",
                "resources": {"requests": {"cpu": m}}}]}))
        };
        a.admit("1", &cpu("1500m")).unwrap();
        let r = a.admit("2", &cpu("600m")).unwrap_err();
        assert_eq!(r.reason, "OutOfcpu");
        assert_eq!(
            r.message,
            "Node didn't have enough resource: cpu, requested: 600, used: 1500, capacity: 2000"
        );
        a.admit("2", &cpu("500m")).unwrap();
        a.admit("3", &cpu("0")).unwrap();
        // The fourth pod is one too many.
        assert_eq!(a.admit("4", &cpu("0")).unwrap_err().reason, "OutOfpods");
        // Admitting again what is admitted changes nothing.
        a.admit("3", &cpu("0")).unwrap();
    }

    #[test]
    fn node_name_selector_and_affinity() {
        let a = node();
        let p = pod(json!({"nodeName": "n2", "containers": []}));
        assert_eq!(a.admit("1", &p).unwrap_err().reason, "NodeName");
        let p = pod(json!({"nodeSelector": {"zone": "b"}, "containers": []}));
        assert_eq!(a.admit("2", &p).unwrap_err().reason, "NodeAffinity");
        let p = pod(json!({"nodeSelector": {"zone": "a"}, "containers": [],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name",
                    "operator": "In", "values": ["n1"]}]}]}}}}));
        a.admit("3", &p).unwrap();
    }
}
