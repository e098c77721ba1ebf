//! What a scheduler benchmark checks after each shape, from the final list of pods: that
//! every measured pod is bound to a node that exists, that no node holds more than it
//! allocates, and that the placement honours the shape's constraint (anti-affinity, zone
//! spread, node affinity). Also the percentile of the latency figures. Pure functions over
//! [`PodFact`] and [`NodeFact`]; the benchmark gathers those from the API.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use anyhow::{Context, bail};
use k1s_api::quantity::Quantity;
use serde_json::Value;

/// What the checks need of a node.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeFact {
    pub zone: String,
    pub cpu_milli: i64,
    pub memory: i64,
    pub pods: i64,
}

/// What the checks need of a pod.
#[derive(Debug, Clone, PartialEq)]
pub struct PodFact {
    pub namespace: String,
    pub name: String,
    pub node: Option<String>,
    pub terminating: bool,
    pub labels: BTreeMap<String, String>,
    pub cpu_milli: i64,
    pub memory: i64,
}

fn quantity(v: &Value, what: &str) -> anyhow::Result<Quantity> {
    match v {
        Value::Null => Ok(Quantity::default()),
        Value::String(s) => Quantity::parse(s).with_context(|| format!("{what} {s:?}")),
        Value::Number(n) => Quantity::parse(&n.to_string()).with_context(|| format!("{what} {n}")),
        other => bail!("{what} is not a quantity: {other}"),
    }
}

impl NodeFact {
    pub fn from_json(node: &Value) -> anyhow::Result<(String, Self)> {
        let name = node["metadata"]["name"].as_str().unwrap_or("").to_string();
        let alloc = &node["status"]["allocatable"];
        let fact = Self {
            zone: node["metadata"]["labels"]["topology.kubernetes.io/zone"]
                .as_str()
                .unwrap_or("")
                .to_string(),
            cpu_milli: quantity(&alloc["cpu"], "node cpu")?.milli_value(),
            memory: quantity(&alloc["memory"], "node memory")?.value(),
            pods: quantity(&alloc["pods"], "node pods")?.value(),
        };
        Ok((name, fact))
    }
}

impl PodFact {
    /// Requests are the sum over the regular containers (the benchmark's pods have no init
    /// containers or overhead).
    pub fn from_json(pod: &Value) -> anyhow::Result<Self> {
        let meta = &pod["metadata"];
        let mut cpu_milli = 0;
        let mut memory = 0;
        for c in pod["spec"]["containers"].as_array().into_iter().flatten() {
            let req = &c["resources"]["requests"];
            cpu_milli += quantity(&req["cpu"], "pod cpu")?.milli_value();
            memory += quantity(&req["memory"], "pod memory")?.value();
        }
        Ok(Self {
            namespace: meta["namespace"].as_str().unwrap_or("").to_string(),
            name: meta["name"].as_str().unwrap_or("").to_string(),
            node: pod["spec"]["nodeName"]
                .as_str()
                .filter(|n| !n.is_empty())
                .map(str::to_string),
            terminating: !meta["deletionTimestamp"].is_null(),
            labels: meta["labels"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                        .collect()
                })
                .unwrap_or_default(),
            cpu_milli,
            memory,
        })
    }

    fn has_label(&self, key: &str, value: &str) -> bool {
        self.labels.get(key).is_some_and(|v| v == value)
    }
}

/// Exactly `expected` live pods in `namespace`, each bound to a known node.
pub fn all_bound(
    pods: &[PodFact],
    nodes: &HashMap<String, NodeFact>,
    namespace: &str,
    expected: usize,
) -> anyhow::Result<()> {
    let mine: Vec<&PodFact> = pods
        .iter()
        .filter(|p| p.namespace == namespace && !p.terminating)
        .collect();
    if mine.len() != expected {
        bail!(
            "{} live pods in {namespace}, expected {expected}",
            mine.len()
        );
    }
    let unbound: Vec<&str> = mine
        .iter()
        .filter(|p| p.node.is_none())
        .map(|p| p.name.as_str())
        .collect();
    if !unbound.is_empty() {
        bail!(
            "{} pods in {namespace} are not bound (e.g. {})",
            unbound.len(),
            unbound[0]
        );
    }
    if let Some(p) = mine
        .iter()
        .find(|p| !nodes.contains_key(p.node.as_deref().unwrap_or("")))
    {
        bail!("pod {}/{} is bound to an unknown node", p.namespace, p.name);
    }
    Ok(())
}

/// No node holds more requested cpu or memory, or more pods, than it allocates.
pub fn within_capacity(pods: &[PodFact], nodes: &HashMap<String, NodeFact>) -> anyhow::Result<()> {
    let mut used: HashMap<&str, (i64, i64, i64)> = HashMap::new();
    for p in pods {
        if let Some(n) = &p.node {
            let u = used.entry(n.as_str()).or_default();
            u.0 += p.cpu_milli;
            u.1 += p.memory;
            u.2 += 1;
        }
    }
    for (name, (cpu, mem, count)) in used {
        let Some(n) = nodes.get(name) else {
            bail!("pods are bound to unknown node {name}");
        };
        if cpu > n.cpu_milli || mem > n.memory || count > n.pods {
            bail!(
                "node {name} is over capacity: {cpu}m cpu of {}m, {mem} bytes of {}, {count} pods of {}",
                n.cpu_milli,
                n.memory,
                n.pods
            );
        }
    }
    Ok(())
}

/// No two bound pods labelled `key=value` share a node (required anti-affinity on the
/// hostname topology against pods of the same label).
pub fn anti_affinity(pods: &[PodFact], key: &str, value: &str) -> anyhow::Result<()> {
    let mut on: HashMap<&str, &str> = HashMap::new();
    for p in pods.iter().filter(|p| p.has_label(key, value)) {
        if let Some(n) = &p.node
            && let Some(other) = on.insert(n.as_str(), p.name.as_str())
        {
            bail!("pods {other} and {} share node {n}", p.name);
        }
    }
    Ok(())
}

/// Per zone, the bound pods labelled `key=value`; every zone that has a node counts (with 0).
pub fn zone_counts(
    pods: &[PodFact],
    nodes: &HashMap<String, NodeFact>,
    key: &str,
    value: &str,
) -> BTreeMap<String, usize> {
    let mut counts: BTreeMap<String, usize> = nodes.values().map(|n| (n.zone.clone(), 0)).collect();
    for p in pods.iter().filter(|p| p.has_label(key, value)) {
        if let Some(n) = p.node.as_ref().and_then(|n| nodes.get(n)) {
            *counts.entry(n.zone.clone()).or_default() += 1;
        }
    }
    counts
}

/// The pods labelled `key=value` are spread over the zones with a skew of at most `max_skew`.
pub fn zone_spread(
    pods: &[PodFact],
    nodes: &HashMap<String, NodeFact>,
    key: &str,
    value: &str,
    max_skew: usize,
) -> anyhow::Result<()> {
    let counts = zone_counts(pods, nodes, key, value);
    let max = counts.values().copied().max().unwrap_or(0);
    let min = counts.values().copied().min().unwrap_or(0);
    if max - min > max_skew {
        bail!("zone skew {} exceeds {max_skew}: {counts:?}", max - min);
    }
    Ok(())
}

/// Every bound pod in `namespace` is on a node of one of `zones`.
pub fn node_affinity(
    pods: &[PodFact],
    nodes: &HashMap<String, NodeFact>,
    namespace: &str,
    zones: &BTreeSet<String>,
) -> anyhow::Result<()> {
    for p in pods.iter().filter(|p| p.namespace == namespace) {
        if let Some(n) = &p.node {
            let zone = nodes.get(n).map(|n| n.zone.as_str()).unwrap_or("");
            if !zones.contains(zone) {
                bail!(
                    "pod {} is on node {n} in zone {zone:?}, outside {zones:?}",
                    p.name
                );
            }
        }
    }
    Ok(())
}

/// The `q` quantile (0..=1) of sorted samples, by nearest rank; zero for no samples.
pub fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nodes(n: usize) -> HashMap<String, NodeFact> {
        (0..n)
            .map(|i| {
                (
                    format!("n{i}"),
                    NodeFact {
                        zone: format!("zone-{}", i % 3),
                        cpu_milli: 4000,
                        memory: 32 << 30,
                        pods: 110,
                    },
                )
            })
            .collect()
    }

    fn pod(ns: &str, name: &str, node: Option<&str>, color: &str, cpu: i64) -> PodFact {
        PodFact {
            namespace: ns.into(),
            name: name.into(),
            node: node.map(str::to_string),
            terminating: false,
            labels: [("color".to_string(), color.to_string())].into(),
            cpu_milli: cpu,
            memory: 500 << 20,
        }
    }

    #[test]
    fn facts_come_from_the_api_objects() {
        let (name, n) = NodeFact::from_json(&json!({
            "metadata": {"name": "n1", "labels": {"topology.kubernetes.io/zone": "zone-1"}},
            "status": {"allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"}}
        }))
        .unwrap();
        assert_eq!(name, "n1");
        assert_eq!(
            (n.zone.as_str(), n.cpu_milli, n.memory, n.pods),
            ("zone-1", 4000, 32 << 30, 110)
        );
        let p = PodFact::from_json(&json!({
            "metadata": {"namespace": "a", "name": "p", "labels": {"color": "blue"},
                         "deletionTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"nodeName": "n1", "containers": [
                {"resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}},
                {"resources": {"requests": {"cpu": "1"}}}]}
        }))
        .unwrap();
        assert_eq!(p.node.as_deref(), Some("n1"));
        assert!(p.terminating && p.has_label("color", "blue"));
        assert_eq!((p.cpu_milli, p.memory), (1100, 500 << 20));
        assert!(
            PodFact::from_json(&json!({"spec": {"containers": [
            {"resources": {"requests": {"cpu": "lots"}}}]}}))
            .is_err()
        );
    }

    #[test]
    fn all_bound_wants_every_pod_on_a_known_node() {
        let ns = nodes(2);
        let ok = vec![
            pod("m", "a", Some("n0"), "x", 1),
            pod("m", "b", Some("n1"), "x", 1),
        ];
        all_bound(&ok, &ns, "m", 2).unwrap();
        assert!(all_bound(&ok, &ns, "m", 3).is_err());
        let pending = vec![
            pod("m", "a", Some("n0"), "x", 1),
            pod("m", "b", None, "x", 1),
        ];
        assert!(all_bound(&pending, &ns, "m", 2).is_err());
        let lost = vec![pod("m", "a", Some("n9"), "x", 1)];
        assert!(all_bound(&lost, &ns, "m", 1).is_err());
        // Terminating pods do not count as scheduled.
        let mut dying = ok.clone();
        dying[1].terminating = true;
        assert!(all_bound(&dying, &ns, "m", 2).is_err());
    }

    #[test]
    fn capacity_counts_cpu_memory_and_pods() {
        let ns = nodes(1);
        let fits: Vec<PodFact> = (0..4)
            .map(|i| pod("m", &format!("p{i}"), Some("n0"), "x", 1000))
            .collect();
        within_capacity(&fits, &ns).unwrap();
        let mut over = fits.clone();
        over.push(pod("m", "p4", Some("n0"), "x", 1));
        assert!(within_capacity(&over, &ns).is_err());
        let many: Vec<PodFact> = (0..111)
            .map(|i| {
                let mut p = pod("m", &format!("p{i}"), Some("n0"), "x", 0);
                p.memory = 0;
                p
            })
            .collect();
        assert!(within_capacity(&many, &ns).is_err());
    }

    #[test]
    fn anti_affinity_rejects_two_of_a_label_on_one_node() {
        let ok = vec![
            pod("a", "p1", Some("n0"), "green", 1),
            pod("b", "p2", Some("n1"), "green", 1),
            pod("b", "p3", Some("n0"), "blue", 1),
            pod("b", "p4", None, "green", 1),
        ];
        anti_affinity(&ok, "color", "green").unwrap();
        let mut bad = ok.clone();
        bad.push(pod("b", "p5", Some("n1"), "green", 1));
        let err = anti_affinity(&bad, "color", "green")
            .unwrap_err()
            .to_string();
        assert!(err.contains("n1"), "{err}");
    }

    #[test]
    fn spread_counts_empty_zones_and_the_label_only() {
        let ns = nodes(3);
        let even = vec![
            pod("m", "a", Some("n0"), "blue", 1),
            pod("m", "b", Some("n1"), "blue", 1),
            pod("m", "c", Some("n2"), "blue", 1),
            pod("m", "d", Some("n0"), "blue", 1),
            pod("m", "x", Some("n0"), "red", 1),
            pod("m", "y", Some("n0"), "red", 1),
        ];
        zone_spread(&even, &ns, "color", "blue", 1).unwrap();
        // Two in zone-0, none in zone-2: skew 2.
        let skewed = vec![
            pod("m", "a", Some("n0"), "blue", 1),
            pod("m", "b", Some("n0"), "blue", 1),
            pod("m", "c", Some("n1"), "blue", 1),
        ];
        assert_eq!(
            zone_counts(&skewed, &ns, "color", "blue")["zone-2"],
            0,
            "an empty zone counts"
        );
        assert!(zone_spread(&skewed, &ns, "color", "blue", 1).is_err());
        zone_spread(&skewed, &ns, "color", "blue", 2).unwrap();
    }

    #[test]
    fn node_affinity_allows_only_the_chosen_zones() {
        let ns = nodes(3);
        let zones: BTreeSet<String> = ["zone-0".to_string(), "zone-1".to_string()].into();
        let ok = vec![
            pod("m", "a", Some("n0"), "x", 1),
            pod("m", "b", Some("n1"), "x", 1),
            pod("other", "c", Some("n2"), "x", 1),
        ];
        node_affinity(&ok, &ns, "m", &zones).unwrap();
        let bad = vec![pod("m", "a", Some("n2"), "x", 1)];
        assert!(node_affinity(&bad, &ns, "m", &zones).is_err());
    }

    #[test]
    fn percentile_is_nearest_rank() {
        let ms = |v: u64| Duration::from_millis(v);
        assert_eq!(percentile(&[], 0.5), Duration::ZERO);
        assert_eq!(percentile(&[ms(7)], 0.99), ms(7));
        let samples: Vec<Duration> = (1..=100).map(ms).collect();
        assert_eq!(percentile(&samples, 0.5), ms(50));
        assert_eq!(percentile(&samples, 0.99), ms(99));
        assert_eq!(percentile(&samples, 1.0), ms(100));
        assert_eq!(percentile(&samples, 0.0), ms(1));
        let four: Vec<Duration> = [10, 20, 30, 40].map(ms).to_vec();
        assert_eq!(percentile(&four, 0.5), ms(20));
        assert_eq!(percentile(&four, 0.51), ms(30));
    }
}
