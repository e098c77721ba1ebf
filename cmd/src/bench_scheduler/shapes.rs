//! The workload shapes, after upstream's scheduler_perf (`performance-config.yaml`): how many
//! nodes and pods each uses by default, how overrides are fitted to what the nodes can hold,
//! and the pods (and Deployment) each creates.

use std::fmt;

use serde::Serialize;
use serde_json::{Value, json};

use super::cluster::{ZONE_LABEL, ZONES};

/// Namespace of the initial (untimed) pods.
pub const INIT_NS: &str = "sched-0";
/// Namespace of the measured pods.
pub const MEASURED_NS: &str = "sched-1";
/// Zones whose nodes the node-affinity pods require.
pub const AFFINITY_ZONES: [&str; 2] = ["zone-0", "zone-1"];
/// The topology-spread pods' maxSkew over zones.
pub const MAX_SKEW: usize = 1;
/// Label of the anti-affinity and spread pods (as upstream's `color`).
pub const COLOR: &str = "color";
/// Hollow node allocatable cpu in millicores; small pods request 100m.
const NODE_MILLI_CPU: usize = 4000;
const SMALL_POD_MILLI_CPU: usize = 100;
/// Low-priority pods request 900m: four fill a node.
const LOW_PER_NODE: usize = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum ShapeArg {
    All,
    Basic,
    NodeAffinity,
    PodAntiAffinity,
    TopologySpread,
    Preemption,
    Deployment,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Shape {
    Basic,
    NodeAffinity,
    PodAntiAffinity,
    TopologySpread,
    Preemption,
    Deployment,
}

impl Shape {
    pub const ALL: [Shape; 6] = [
        Shape::Basic,
        Shape::NodeAffinity,
        Shape::PodAntiAffinity,
        Shape::TopologySpread,
        Shape::Preemption,
        Shape::Deployment,
    ];

    /// The shapes the `--shape` flags name, in the canonical order, without repeats; all
    /// when none is named.
    pub fn selected(args: &[ShapeArg]) -> Vec<Shape> {
        if args.is_empty() || args.contains(&ShapeArg::All) {
            return Self::ALL.to_vec();
        }
        Self::ALL
            .into_iter()
            .filter(|s| args.contains(&s.arg()))
            .collect()
    }

    fn arg(self) -> ShapeArg {
        match self {
            Shape::Basic => ShapeArg::Basic,
            Shape::NodeAffinity => ShapeArg::NodeAffinity,
            Shape::PodAntiAffinity => ShapeArg::PodAntiAffinity,
            Shape::TopologySpread => ShapeArg::TopologySpread,
            Shape::Preemption => ShapeArg::Preemption,
            Shape::Deployment => ShapeArg::Deployment,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Shape::Basic => "basic",
            Shape::NodeAffinity => "node-affinity",
            Shape::PodAntiAffinity => "pod-anti-affinity",
            Shape::TopologySpread => "topology-spread",
            Shape::Preemption => "preemption",
            Shape::Deployment => "deployment",
        }
    }

    /// The default node count.
    fn default_nodes(self) -> usize {
        match self {
            Shape::Basic | Shape::NodeAffinity | Shape::TopologySpread => 1000,
            Shape::PodAntiAffinity => 5000,
            Shape::Preemption => 500,
            Shape::Deployment => 100,
        }
    }

    /// The default initial and measured pods on `nodes` nodes.
    fn default_pods(self, nodes: usize) -> (usize, usize) {
        match self {
            Shape::Basic => (1000, 10_000),
            Shape::NodeAffinity | Shape::TopologySpread => (1000, 5000),
            // Upstream's 5000Nodes: 1,000 and 1,000.
            Shape::PodAntiAffinity => (nodes / 5, nodes / 5),
            // Upstream's 500Nodes: 2,000 low-priority pods fill the nodes, 500 preempt.
            Shape::Preemption => (LOW_PER_NODE * nodes, nodes),
            Shape::Deployment => (0, 1000),
        }
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The sizes one shape runs with.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    pub shape: Shape,
    pub nodes: usize,
    pub initial_pods: usize,
    pub measured_pods: usize,
    /// How the overrides were fitted to what the nodes hold.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// How many hollow nodes of `0..nodes` are in one of `zones`.
pub fn nodes_in(nodes: usize, zones: &[&str]) -> usize {
    (0..nodes)
        .filter(|i| zones.contains(&ZONES[i % ZONES.len()]))
        .count()
}

impl Plan {
    /// The shape's defaults with the overrides applied, then shrunk where the pods could not
    /// all be placed (saying so in `notes`).
    pub fn new(
        shape: Shape,
        nodes: Option<usize>,
        initial: Option<usize>,
        measured: Option<usize>,
    ) -> anyhow::Result<Self> {
        let nodes = nodes.unwrap_or(shape.default_nodes());
        if nodes == 0 {
            anyhow::bail!("--nodes must be at least 1");
        }
        let (default_initial, default_measured) = shape.default_pods(nodes);
        let mut plan = Self {
            shape,
            nodes,
            initial_pods: if shape == Shape::Deployment {
                0
            } else {
                initial.unwrap_or(default_initial)
            },
            measured_pods: measured.unwrap_or(default_measured),
            notes: Vec::new(),
        };
        let small_per_node = NODE_MILLI_CPU / SMALL_POD_MILLI_CPU;
        // (most initial pods, most initial + measured pods)
        let (initial_cap, total_cap) = match shape {
            Shape::Basic | Shape::Deployment => (small_per_node * nodes, small_per_node * nodes),
            // Measured pods fit only on the affinity zones' nodes.
            Shape::NodeAffinity => {
                let eligible = small_per_node * nodes_in(nodes, &AFFINITY_ZONES);
                (small_per_node * nodes, eligible)
            }
            // With skew 1 the smallest zone bounds the others.
            Shape::TopologySpread => {
                let smallest = ZONES
                    .iter()
                    .map(|z| nodes_in(nodes, &[z]))
                    .min()
                    .unwrap_or(0);
                (
                    small_per_node * nodes,
                    small_per_node * smallest * ZONES.len(),
                )
            }
            // One pod of the label per node, initial and measured alike.
            Shape::PodAntiAffinity => (nodes, nodes),
            // Four low-priority pods per node; one high-priority pod per node.
            Shape::Preemption => (LOW_PER_NODE * nodes, usize::MAX),
        };
        if plan.initial_pods > initial_cap {
            plan.notes.push(format!(
                "initial pods cut from {} to {initial_cap} (what {nodes} nodes hold)",
                plan.initial_pods
            ));
            plan.initial_pods = initial_cap;
        }
        let measured_cap = if shape == Shape::Preemption {
            nodes
        } else {
            total_cap.saturating_sub(plan.initial_pods)
        };
        if plan.measured_pods > measured_cap {
            plan.notes.push(format!(
                "measured pods cut from {} to {measured_cap} (what {nodes} nodes hold)",
                plan.measured_pods
            ));
            plan.measured_pods = measured_cap;
        }
        if plan.measured_pods == 0 {
            anyhow::bail!(
                "{shape}: no measured pods fit on {nodes} nodes with {} initial pods",
                plan.initial_pods
            );
        }
        Ok(plan)
    }
}

fn container(cpu: &str) -> Value {
    let resources = json!({"cpu": cpu, "memory": "500Mi"});
    json!({"name": "pause", "image": "registry.k8s.io/pause:3.10",
           "ports": [{"containerPort": 80}],
           "resources": {"limits": resources, "requests": resources}})
}

/// Upstream's `pod-default.yaml`: one pause container, 100m cpu and 500Mi.
fn default_pod(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": ns},
           "spec": {"containers": [container("100m")]}})
}

/// Pod `i` of the initial (`measured == false`) or measured batch of `shape`.
pub fn pod(shape: Shape, measured: bool, i: usize) -> Value {
    let ns = if measured { MEASURED_NS } else { INIT_NS };
    let name = format!("{}-{i:06}", if measured { "pod" } else { "init" });
    let mut pod = default_pod(ns, &name);
    match (shape, measured) {
        (Shape::Basic | Shape::Deployment, _)
        | (Shape::NodeAffinity | Shape::TopologySpread, false) => {}
        (Shape::NodeAffinity, true) => {
            pod["spec"]["affinity"] = json!({"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": ZONE_LABEL, "operator": "In",
                                           "values": AFFINITY_ZONES}]}]}}});
        }
        (Shape::PodAntiAffinity, _) => {
            pod["metadata"]["labels"] = json!({COLOR: "green"});
            pod["spec"]["affinity"] = json!({"podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{
                    "labelSelector": {"matchLabels": {COLOR: "green"}},
                    "topologyKey": "kubernetes.io/hostname",
                    "namespaces": [INIT_NS, MEASURED_NS]}]}});
        }
        (Shape::TopologySpread, true) => {
            pod["metadata"]["labels"] = json!({COLOR: "blue"});
            pod["spec"]["topologySpreadConstraints"] = json!([{
                "maxSkew": MAX_SKEW, "topologyKey": ZONE_LABEL,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {COLOR: "blue"}}}]);
        }
        (Shape::Preemption, false) => {
            pod["spec"]["priorityClassName"] = json!("bench-low");
            pod["spec"]["terminationGracePeriodSeconds"] = json!(0);
            pod["spec"]["containers"] = json!([container("900m")]);
        }
        (Shape::Preemption, true) => {
            pod["spec"]["priorityClassName"] = json!("bench-high");
            pod["spec"]["containers"] = json!([container("3000m")]);
        }
    }
    pod
}

/// The preemption shape's priorities (upstream's pods carry priority 0 and 10).
const PRIORITIES: [(&str, i32); 2] = [("bench-low", 0), ("bench-high", 10)];

/// The PriorityClasses of the preemption shape.
pub fn priority_classes() -> [Value; 2] {
    PRIORITIES.map(|(name, value)| {
        json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
               "metadata": {"name": name}, "value": value,
               "description": "k1s bench scheduler"})
    })
}

/// Gives `pod` the priority of its PriorityClass in `spec.priority` instead of the class's
/// name, for an API server without Priority admission (which would resolve the name).
pub fn priority_by_value(pod: &mut Value) {
    let Some(spec) = pod["spec"].as_object_mut() else {
        return;
    };
    if let Some(Value::String(class)) = spec.remove("priorityClassName")
        && let Some((_, value)) = PRIORITIES.iter().find(|(name, _)| *name == class)
    {
        spec.insert("priority".into(), json!(value));
    }
}

/// The Deployment of the deployment shape: `replicas` default pods.
pub fn deployment(replicas: usize) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "bench", "namespace": MEASURED_NS},
           "spec": {"replicas": replicas,
                    "selector": {"matchLabels": {"app": "bench"}},
                    "template": {"metadata": {"labels": {"app": "bench"}},
                                 "spec": {"containers": [container("100m")]}}}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_or_nothing_selects_every_shape_in_order() {
        assert_eq!(Shape::selected(&[]), Shape::ALL);
        assert_eq!(
            Shape::selected(&[ShapeArg::Basic, ShapeArg::All]),
            Shape::ALL
        );
        assert_eq!(
            Shape::selected(&[ShapeArg::Deployment, ShapeArg::Basic, ShapeArg::Basic]),
            [Shape::Basic, Shape::Deployment]
        );
    }

    #[test]
    fn defaults_follow_upstream_scaled() {
        let p = Plan::new(Shape::Basic, None, None, None).unwrap();
        assert_eq!(
            (p.nodes, p.initial_pods, p.measured_pods),
            (1000, 1000, 10_000)
        );
        assert!(p.notes.is_empty());
        let p = Plan::new(Shape::PodAntiAffinity, None, None, None).unwrap();
        assert_eq!(
            (p.nodes, p.initial_pods, p.measured_pods),
            (5000, 1000, 1000)
        );
        let p = Plan::new(Shape::Preemption, None, None, None).unwrap();
        assert_eq!((p.nodes, p.initial_pods, p.measured_pods), (500, 2000, 500));
        let p = Plan::new(Shape::Deployment, None, Some(7), None).unwrap();
        assert_eq!((p.nodes, p.initial_pods, p.measured_pods), (100, 0, 1000));
    }

    #[test]
    fn overrides_are_fitted_to_the_nodes() {
        // 100 nodes hold 100 anti-affinity pods in all.
        let p = Plan::new(Shape::PodAntiAffinity, Some(100), None, Some(1000)).unwrap();
        assert_eq!((p.initial_pods, p.measured_pods), (20, 80));
        assert_eq!(p.notes.len(), 1, "{:?}", p.notes);
        // One high-priority pod per node; four low-priority ones.
        let p = Plan::new(Shape::Preemption, Some(100), Some(1000), Some(1000)).unwrap();
        assert_eq!((p.initial_pods, p.measured_pods), (400, 100));
        // Node affinity: 67 of 100 nodes are in zone-0/zone-1, 40 small pods each.
        assert_eq!(nodes_in(100, &AFFINITY_ZONES), 67);
        let p = Plan::new(Shape::NodeAffinity, Some(100), Some(1000), Some(5000)).unwrap();
        assert_eq!(p.measured_pods, 67 * 40 - 1000);
        // Spread: the smallest zone (33 nodes) bounds the other two.
        let p = Plan::new(Shape::TopologySpread, Some(100), Some(0), Some(5000)).unwrap();
        assert_eq!(p.measured_pods, 33 * 40 * 3);
        assert!(Plan::new(Shape::Basic, Some(0), None, None).is_err());
        assert!(Plan::new(Shape::Basic, Some(10), Some(400), None).is_err());
    }

    #[test]
    fn pods_carry_the_shape_constraint() {
        let p = pod(Shape::NodeAffinity, true, 3);
        assert_eq!(p["metadata"]["name"], "pod-000003");
        assert_eq!(p["metadata"]["namespace"], MEASURED_NS);
        let expr = &p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            ["nodeSelectorTerms"][0]["matchExpressions"][0];
        assert_eq!(expr["values"], json!(["zone-0", "zone-1"]));
        assert!(pod(Shape::NodeAffinity, false, 0)["spec"]["affinity"].is_null());
        let p = pod(Shape::PodAntiAffinity, false, 0);
        assert_eq!(p["metadata"]["namespace"], INIT_NS);
        assert_eq!(p["metadata"]["labels"][COLOR], "green");
        let p = pod(Shape::TopologySpread, true, 0);
        assert_eq!(p["spec"]["topologySpreadConstraints"][0]["maxSkew"], 1);
        let low = pod(Shape::Preemption, false, 0);
        assert_eq!(
            low["spec"]["containers"][0]["resources"]["requests"]["cpu"],
            "900m"
        );
        let high = pod(Shape::Preemption, true, 0);
        assert_eq!(high["spec"]["priorityClassName"], "bench-high");
        // Without Priority admission: the class's value in the spec, no class name.
        for (mut p, want) in [(high, 10), (low, 0)] {
            priority_by_value(&mut p);
            assert_eq!(p["spec"]["priority"], want);
            assert!(p["spec"]["priorityClassName"].is_null());
        }
        let mut basic = pod(Shape::Basic, true, 0);
        priority_by_value(&mut basic);
        assert!(basic["spec"]["priority"].is_null());
        assert_eq!(deployment(5)["spec"]["replicas"], 5);
    }
}
