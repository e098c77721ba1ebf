//! PodTopologySpread: Filter enforces `DoNotSchedule` constraints (skew = matching pods in
//! the node's domain + self − the global minimum must not exceed maxSkew, with minDomains,
//! nodeAffinityPolicy and nodeTaintsPolicy); Score prefers domains with fewer matching pods
//! for `ScheduleAnyway` constraints, and for pods without constraints applies upstream's
//! system default spreading (hostname maxSkew 3, zone maxSkew 5).
//!
//! PreFilter counts the matching pods of every domain, as upstream, but keeps what it counted
//! per node ([`Memo`]) for the next pod with the same constraints (the pods of one workload
//! come in a row): only nodes that changed since (a new `Arc<NodeInfo>` in the snapshot) are
//! counted again, so a cycle costs O(nodes) pointer comparisons instead of O(pods) selector
//! matches. Filter reads each constraint's global minimum computed once per cycle.
//!
//! System defaults need the selector of the pod's owner; without ReplicaSet/Service
//! listers this plugin uses the pod's own labels (minus the per-revision hash labels) when
//! the pod has a controller owner, and no default spreading otherwise.

use std::collections::HashMap;
use std::sync::Arc;

use k1s_api::selector::{LabelSelector, Requirement};
use k8s_openapi::api::core::v1::{Pod, TopologySpreadConstraint};

use crate::framework::interface::*;
use crate::framework::{CycleState, MAX_NODE_SCORE, NodeInfo, PodInfo, Snapshot, Status, helpers};

use crate::plugin_names as names;

pub const ERR_REASON_CONSTRAINTS_NOT_MATCH: &str =
    "node(s) didn't match pod topology spread constraints";
pub const ERR_REASON_NODE_LABEL_NOT_MATCH: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";
pub const HOSTNAME_KEY: &str = "kubernetes.io/hostname";
pub const ZONE_KEY: &str = "topology.kubernetes.io/zone";

const PRE_FILTER_KEY: &str = "PreFilterPodTopologySpread";
const PRE_SCORE_KEY: &str = "PreScorePodTopologySpread";

/// A constraint with its selector parsed.
#[derive(Debug, Clone)]
pub struct Constraint {
    pub max_skew: i64,
    pub topology_key: String,
    pub selector: LabelSelector,
    pub min_domains: i64,
    pub honor_node_affinity: bool,
    pub honor_node_taints: bool,
}

fn constraints(pod: &Pod, action: &str) -> Vec<Constraint> {
    let labels = helpers::labels(pod);
    pod.spec
        .as_ref()
        .and_then(|s| s.topology_spread_constraints.as_ref())
        .into_iter()
        .flatten()
        .filter(|c| c.when_unsatisfiable == action)
        .filter_map(|c: &TopologySpreadConstraint| {
            let mut sel = c
                .label_selector
                .as_ref()
                .and_then(helpers::label_selector)?;
            for k in c.match_label_keys.iter().flatten() {
                if let Some(v) = labels.get(k) {
                    sel.0.push(Requirement::In(k.clone(), vec![v.clone()]));
                }
            }
            Some(Constraint {
                max_skew: i64::from(c.max_skew),
                topology_key: c.topology_key.clone(),
                selector: sel,
                min_domains: i64::from(c.min_domains.unwrap_or(1)),
                honor_node_affinity: c.node_affinity_policy.as_deref() != Some("Ignore"),
                honor_node_taints: c.node_taints_policy.as_deref() == Some("Honor"),
            })
        })
        .collect()
}

fn has_any_constraints(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.topology_spread_constraints.as_ref())
        .is_some_and(|c| !c.is_empty())
}

/// Upstream's `system` defaulting: spread by hostname (maxSkew 3) and zone (maxSkew 5).
fn system_default_constraints(pod: &Pod) -> Vec<Constraint> {
    let owned = pod.metadata.owner_references.iter().flatten().any(|o| {
        o.controller == Some(true)
            && matches!(
                o.kind.as_str(),
                "ReplicaSet" | "StatefulSet" | "ReplicationController"
            )
    });
    let labels: Vec<Requirement> = helpers::labels(pod)
        .iter()
        .filter(|(k, _)| {
            !matches!(
                k.as_str(),
                "pod-template-hash"
                    | "controller-revision-hash"
                    | "statefulset.kubernetes.io/pod-name"
                    | "apps.kubernetes.io/pod-index"
            )
        })
        .map(|(k, v)| Requirement::Equals(k.clone(), v.clone()))
        .collect();
    if !owned || labels.is_empty() {
        return Vec::new();
    }
    [(HOSTNAME_KEY, 3), (ZONE_KEY, 5)]
        .into_iter()
        .map(|(k, skew)| Constraint {
            max_skew: skew,
            topology_key: k.into(),
            selector: LabelSelector(labels.clone()),
            min_domains: 1,
            honor_node_affinity: true,
            honor_node_taints: false,
        })
        .collect()
}

fn count_matching(node: &NodeInfo, sel: &LabelSelector, ns: &str) -> i64 {
    node.pods
        .iter()
        .filter(|p| {
            !helpers::is_terminating(&p.pod)
                && helpers::namespace(&p.pod) == ns
                && sel.matches(helpers::labels(&p.pod))
        })
        .count() as i64
}

/// Whether the node counts for the constraints: it passes their node policies and has all
/// their topology keys.
fn node_counts(pod: &Pod, node: &NodeInfo, cs: &[Constraint], require_all_keys: bool) -> bool {
    let Some(n) = node.node.as_deref() else {
        return false;
    };
    let labels = node.labels();
    if require_all_keys && !cs.iter().all(|c| labels.contains_key(&c.topology_key)) {
        return false;
    }
    if cs.iter().any(|c| c.honor_node_affinity)
        && !helpers::pod_matches_node_selector_and_affinity(pod, n)
    {
        return false;
    }
    if cs.iter().any(|c| c.honor_node_taints)
        && helpers::find_untolerated_taint(
            helpers::taints(n),
            helpers::tolerations(pod),
            &["NoSchedule", "NoExecute"],
        )
        .is_some()
    {
        return false;
    }
    true
}

#[derive(Debug, Clone, Default)]
struct PreFilterState {
    constraints: Vec<Constraint>,
    /// Per constraint: domain value → matching pods.
    counts: Vec<HashMap<String, i64>>,
    /// Per constraint: the global minimum ([`Self::compute_min`]), kept up to date.
    mins: Vec<i64>,
}

impl PreFilterState {
    /// The smallest count of any domain (0 with fewer domains than minDomains).
    fn compute_min(&self, i: usize) -> i64 {
        let c = &self.constraints[i];
        let m = &self.counts[i];
        if (m.len() as i64) < c.min_domains {
            return 0;
        }
        m.values().copied().min().unwrap_or(0)
    }

    fn refresh_mins(&mut self) {
        self.mins = (0..self.constraints.len())
            .map(|i| self.compute_min(i))
            .collect();
    }

    fn min_match(&self, i: usize) -> i64 {
        self.mins[i]
    }

    fn update(&mut self, pod: &Pod, other: &Pod, node: &NodeInfo, v: i64) {
        if !node_counts(pod, node, &self.constraints, true)
            || helpers::namespace(other) != helpers::namespace(pod)
        {
            return;
        }
        let labels = node.labels().clone();
        for (i, c) in self.constraints.iter().enumerate() {
            if c.selector.matches(helpers::labels(other))
                && let Some(val) = labels.get(&c.topology_key)
            {
                *self.counts[i].entry(val.clone()).or_default() += v;
            }
        }
        self.refresh_mins();
    }
}

/// What PreFilter counted on one node for one memo key.
#[derive(Debug, Clone)]
struct MemoNode {
    /// The node as counted (held, so a changed node is a different pointer).
    info: Arc<NodeInfo>,
    /// Per constraint: the node's domain and its matching pods; None when the node does not
    /// count for the constraints (node policies, missing keys).
    domains: Option<Vec<(String, i64)>>,
}

/// PreFilter's counts for one key (namespace, constraints, node policies' inputs), per node in
/// snapshot order, and their sums per domain: per constraint, domain → (counted nodes,
/// matching pods).
#[derive(Debug, Default)]
struct Memo {
    key: String,
    nodes: Vec<MemoNode>,
    totals: Vec<HashMap<String, (i64, i64)>>,
}

impl Memo {
    fn add(&mut self, n: &MemoNode, sign: i64) {
        for (i, (domain, matching)) in n.domains.iter().flatten().enumerate() {
            let t = self.totals[i].entry(domain.clone()).or_default();
            t.0 += sign;
            t.1 += sign * matching;
            if t.0 == 0 {
                self.totals[i].remove(domain);
            }
        }
    }
}

/// What the counts depend on besides the nodes: the pod's namespace, the constraints, and what
/// the node policies read of the pod.
fn memo_key(pod: &Pod, cs: &[Constraint]) -> String {
    let spec = pod.spec.as_ref();
    let json = |v: Option<String>| v.unwrap_or_default();
    format!(
        "{}\n{cs:?}\n{}\n{}\n{}",
        helpers::namespace(pod),
        json(
            spec.and_then(|s| s.node_selector.as_ref())
                .and_then(|v| serde_json::to_string(v).ok())
        ),
        json(
            spec.and_then(|s| s.affinity.as_ref())
                .and_then(|a| a.node_affinity.as_ref())
                .and_then(|v| serde_json::to_string(v).ok())
        ),
        json(
            spec.and_then(|s| s.tolerations.as_ref())
                .and_then(|v| serde_json::to_string(v).ok())
        ),
    )
}

/// One node's entry: whether it counts, and per constraint its domain and matching pods.
fn count_node(pod: &Pod, n: &Arc<NodeInfo>, cs: &[Constraint]) -> MemoNode {
    let domains = node_counts(pod, n, cs, true).then(|| {
        let ns = helpers::namespace(pod);
        let labels = n.labels();
        cs.iter()
            .map(|c| {
                let v = labels.get(&c.topology_key).cloned().unwrap_or_default();
                (v, count_matching(n, &c.selector, ns))
            })
            .collect()
    });
    MemoNode {
        info: n.clone(),
        domains,
    }
}

#[derive(Debug, Clone, Default)]
struct PreScoreState {
    constraints: Vec<Constraint>,
    ignored: std::collections::HashSet<String>,
    pair_counts: HashMap<(String, String), i64>,
    weights: Vec<f64>,
}

#[derive(Debug, Default)]
pub struct PodTopologySpread {
    memo: std::sync::Mutex<Memo>,
}

impl PodTopologySpread {
    /// Per constraint, domain → matching pods over the snapshot's nodes, from the memo where
    /// the nodes did not change.
    fn domain_counts(
        &self,
        pod: &Pod,
        cs: &[Constraint],
        snap: &Snapshot,
    ) -> Vec<HashMap<String, i64>> {
        let Ok(mut memo) = self.memo.try_lock() else {
            // Another cycle (a preemption dry run) has it: count without it.
            let mut fresh = Memo::default();
            return fresh.refresh(pod, cs, snap);
        };
        memo.refresh(pod, cs, snap)
    }
}

impl Memo {
    fn refresh(
        &mut self,
        pod: &Pod,
        cs: &[Constraint],
        snap: &Snapshot,
    ) -> Vec<HashMap<String, i64>> {
        let key = memo_key(pod, cs);
        if self.key != key || self.nodes.len() != snap.nodes.len() {
            *self = Memo {
                key,
                nodes: Vec::with_capacity(snap.nodes.len()),
                totals: vec![HashMap::new(); cs.len()],
            };
            for n in snap.nodes.iter() {
                let entry = count_node(pod, n, cs);
                self.add(&entry, 1);
                self.nodes.push(entry);
            }
        } else {
            for (i, n) in snap.nodes.iter().enumerate() {
                if Arc::ptr_eq(&self.nodes[i].info, n) {
                    continue;
                }
                let entry = count_node(pod, n, cs);
                let old = std::mem::replace(&mut self.nodes[i], entry.clone());
                self.add(&old, -1);
                self.add(&entry, 1);
            }
        }
        self.totals
            .iter()
            .map(|t| t.iter().map(|(d, (_, m))| (d.clone(), *m)).collect())
            .collect()
    }
}

impl Plugin for PodTopologySpread {
    fn name(&self) -> &'static str {
        names::POD_TOPOLOGY_SPREAD
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        events(&[
            (
                EventResource::Pod,
                &[ActionType::Add, ActionType::Update, ActionType::Delete],
            ),
            (
                EventResource::Node,
                &[ActionType::Add, ActionType::Update, ActionType::Delete],
            ),
        ])
    }
    fn as_pre_filter(self: Arc<Self>) -> Option<Arc<dyn PreFilterPlugin>> {
        Some(self)
    }
    fn as_filter(self: Arc<Self>) -> Option<Arc<dyn FilterPlugin>> {
        Some(self)
    }
    fn as_pre_score(self: Arc<Self>) -> Option<Arc<dyn PreScorePlugin>> {
        Some(self)
    }
    fn as_score(self: Arc<Self>) -> Option<Arc<dyn ScorePlugin>> {
        Some(self)
    }
}

impl PreFilterPlugin for PodTopologySpread {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, snap: &Snapshot) -> Status {
        let cs = constraints(&pod.pod, "DoNotSchedule");
        if cs.is_empty() {
            return Status::skip();
        }
        let mut st = PreFilterState {
            counts: self.domain_counts(&pod.pod, &cs, snap),
            constraints: cs,
            mins: Vec::new(),
        };
        st.refresh_mins();
        state.write(PRE_FILTER_KEY, st);
        Status::success()
    }

    fn add_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        added: &PodInfo,
        node: &NodeInfo,
    ) -> Status {
        match state.read_mut::<PreFilterState>(PRE_FILTER_KEY) {
            Some(st) => {
                st.update(&pod.pod, &added.pod, node, 1);
                Status::success()
            }
            None => Status::error("reading PreFilterPodTopologySpread state"),
        }
    }

    fn remove_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        removed: &PodInfo,
        node: &NodeInfo,
    ) -> Status {
        match state.read_mut::<PreFilterState>(PRE_FILTER_KEY) {
            Some(st) => {
                st.update(&pod.pod, &removed.pod, node, -1);
                Status::success()
            }
            None => Status::error("reading PreFilterPodTopologySpread state"),
        }
    }
}

impl FilterPlugin for PodTopologySpread {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(st) = state.read::<PreFilterState>(PRE_FILTER_KEY) else {
            return Status::error("reading PreFilterPodTopologySpread state");
        };
        let labels = node.labels();
        let own = helpers::labels(&pod.pod);
        for (i, c) in st.constraints.iter().enumerate() {
            let Some(val) = labels.get(&c.topology_key) else {
                return Status::unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH);
            };
            let self_match = i64::from(c.selector.matches(own));
            let matched = st.counts[i].get(val).copied().unwrap_or(0);
            let skew = matched + self_match - st.min_match(i);
            if skew > c.max_skew {
                return Status::unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH);
            }
        }
        Status::success()
    }
}

impl PreScorePlugin for PodTopologySpread {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        snap: &Snapshot,
    ) -> Status {
        let cs = if has_any_constraints(&pod.pod) {
            constraints(&pod.pod, "ScheduleAnyway")
        } else {
            system_default_constraints(&pod.pod)
        };
        if cs.is_empty() {
            return Status::skip();
        }
        let mut st = PreScoreState {
            constraints: cs,
            ..Default::default()
        };
        let mut domains: Vec<std::collections::HashSet<String>> =
            vec![Default::default(); st.constraints.len()];
        let mut counted_nodes = 0usize;
        for n in nodes {
            let labels = n.labels();
            if !st
                .constraints
                .iter()
                .all(|c| labels.contains_key(&c.topology_key))
            {
                st.ignored.insert(n.name().to_owned());
                continue;
            }
            counted_nodes += 1;
            for (i, c) in st.constraints.iter().enumerate() {
                if c.topology_key == HOSTNAME_KEY {
                    continue;
                }
                let v = labels[&c.topology_key].clone();
                domains[i].insert(v.clone());
                st.pair_counts
                    .entry((c.topology_key.clone(), v))
                    .or_insert(0);
            }
        }
        let ns = helpers::namespace(&pod.pod);
        for n in snap.nodes.iter() {
            if !node_counts(&pod.pod, n, &st.constraints, true) {
                continue;
            }
            let labels = n.labels();
            for c in &st.constraints {
                if c.topology_key == HOSTNAME_KEY {
                    continue;
                }
                let pair = (c.topology_key.clone(), labels[&c.topology_key].clone());
                if let Some(cnt) = st.pair_counts.get_mut(&pair) {
                    *cnt += count_matching(n, &c.selector, ns);
                }
            }
        }
        st.weights = st
            .constraints
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let size = if c.topology_key == HOSTNAME_KEY {
                    counted_nodes
                } else {
                    domains[i].len()
                };
                ((size + 2) as f64).ln()
            })
            .collect();
        state.write(PRE_SCORE_KEY, st);
        Status::success()
    }
}

impl ScorePlugin for PodTopologySpread {
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> (i64, Status) {
        let Some(st) = state.read::<PreScoreState>(PRE_SCORE_KEY) else {
            return (0, Status::error("reading PreScorePodTopologySpread state"));
        };
        if st.ignored.contains(node.name()) {
            return (0, Status::success());
        }
        let labels = node.labels();
        let ns = helpers::namespace(&pod.pod);
        let mut score = 0f64;
        for (i, c) in st.constraints.iter().enumerate() {
            let Some(v) = labels.get(&c.topology_key) else {
                continue;
            };
            let cnt = if c.topology_key == HOSTNAME_KEY {
                count_matching(node, &c.selector, ns)
            } else {
                st.pair_counts
                    .get(&(c.topology_key.clone(), v.clone()))
                    .copied()
                    .unwrap_or(0)
            };
            score += cnt as f64 * st.weights[i] + (c.max_skew - 1) as f64;
        }
        (score.round() as i64, Status::success())
    }

    fn normalize_score(
        &self,
        state: &CycleState,
        _: &PodInfo,
        scores: &mut [NodeScore<'_>],
    ) -> Status {
        let Some(st) = state.read::<PreScoreState>(PRE_SCORE_KEY) else {
            return Status::error("reading PreScorePodTopologySpread state");
        };
        let counted = scores.iter().filter(|s| !st.ignored.contains(s.name));
        let min = counted.clone().map(|s| s.score).min().unwrap_or(0);
        let max = counted.map(|s| s.score).max().unwrap_or(0);
        for s in scores.iter_mut() {
            if st.ignored.contains(s.name) {
                s.score = 0;
            } else if max == 0 {
                s.score = MAX_NODE_SCORE;
            } else {
                s.score = MAX_NODE_SCORE * (max + min - s.score) / max;
            }
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::testing::{NodeBuilder, PodBuilder, node_info};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector as ApiSel, OwnerReference};

    fn spread(key: &str, skew: i32, action: &str) -> TopologySpreadConstraint {
        TopologySpreadConstraint {
            max_skew: skew,
            topology_key: key.into(),
            when_unsatisfiable: action.into(),
            label_selector: Some(ApiSel {
                match_labels: Some([("app".to_owned(), "web".to_owned())].into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn web(name: &str, node: &str) -> Pod {
        PodBuilder::new(name)
            .labels(&[("app", "web")])
            .node(node)
            .build()
    }

    /// zone a: n1 (2 web), n2 (1 web); zone b: n3 (0); n4 has no zone label.
    fn snapshot() -> Snapshot {
        let node = |n: &str, zone: Option<&str>| {
            let mut l = vec![("kubernetes.io/hostname", n)];
            if let Some(z) = zone {
                l.push(("zone", z));
            }
            NodeBuilder::new(n).labels(&l).build()
        };
        Snapshot::new(
            vec![
                node_info(
                    node("n1", Some("a")),
                    vec![web("w1", "n1"), web("w2", "n1")],
                ),
                node_info(node("n2", Some("a")), vec![web("w3", "n2")]),
                node_info(node("n3", Some("b")), vec![]),
                node_info(node("n4", None), vec![]),
            ],
            Default::default(),
        )
    }

    #[test]
    fn pod_topology_spread_filter() {
        use Code::*;
        let cases = vec![
            // zone a has 3, b has 0; min 0: a → 3+1 > 1, b → 1 ≤ 1
            (
                "zone maxSkew 1",
                vec![spread("zone", 1, "DoNotSchedule")],
                vec![
                    Unschedulable,
                    Unschedulable,
                    Success,
                    UnschedulableAndUnresolvable,
                ],
            ),
            (
                "zone maxSkew 4",
                vec![spread("zone", 4, "DoNotSchedule")],
                vec![Success, Success, Success, UnschedulableAndUnresolvable],
            ),
            // hosts n1 2, n2 1, n3 0, n4 0: n2 → 1+1-0 = 2 > 1
            (
                "hostname maxSkew 1",
                vec![spread("kubernetes.io/hostname", 1, "DoNotSchedule")],
                vec![Unschedulable, Unschedulable, Success, Success],
            ),
            (
                "hostname maxSkew 2",
                vec![spread("kubernetes.io/hostname", 2, "DoNotSchedule")],
                vec![Unschedulable, Success, Success, Success],
            ),
            (
                "ScheduleAnyway does not filter",
                vec![spread("zone", 1, "ScheduleAnyway")],
                vec![Success, Success, Success, Success],
            ),
            (
                "minDomains above the domain count makes the minimum 0",
                vec![TopologySpreadConstraint {
                    min_domains: Some(3),
                    ..spread("zone", 3, "DoNotSchedule")
                }],
                vec![
                    Unschedulable,
                    Unschedulable,
                    Success,
                    UnschedulableAndUnresolvable,
                ],
            ),
        ];
        for (name, cs, want) in cases {
            let snap = snapshot();
            let pod = PodBuilder::new("p")
                .labels(&[("app", "web")])
                .spec_with(|s| s.topology_spread_constraints = Some(cs))
                .info();
            let mut st = CycleState::new();
            let s = PodTopologySpread::default().pre_filter(&mut st, &pod, &snap);
            let got: Vec<Code> = if s.is_skip() {
                vec![Success; 4]
            } else {
                snap.nodes
                    .iter()
                    .map(|n| PodTopologySpread::default().filter(&st, &pod, n).code())
                    .collect()
            };
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn pod_topology_spread_prefilter_extensions() {
        let snap = snapshot();
        let pod = PodBuilder::new("p")
            .labels(&[("app", "web")])
            .spec_with(|s| {
                s.topology_spread_constraints =
                    Some(vec![spread("kubernetes.io/hostname", 1, "DoNotSchedule")])
            })
            .info();
        let mut st = CycleState::new();
        PodTopologySpread::default().pre_filter(&mut st, &pod, &snap);
        let n1 = snap.get("n1").unwrap();
        assert!(
            !PodTopologySpread::default()
                .filter(&st, &pod, n1)
                .is_success()
        );
        for p in n1.pods.clone() {
            PodTopologySpread::default().remove_pod(&mut st, &pod, &p, n1);
        }
        assert!(
            PodTopologySpread::default()
                .filter(&st, &pod, n1)
                .is_success()
        );
    }

    fn scores(pod: &PodInfo, snap: &Snapshot) -> Option<Vec<i64>> {
        let mut st = CycleState::new();
        if PodTopologySpread::default()
            .pre_score(&mut st, pod, &snap.nodes, snap)
            .is_skip()
        {
            return None;
        }
        let mut s: Vec<NodeScore<'_>> = snap
            .nodes
            .iter()
            .map(|n| NodeScore {
                name: n.name(),
                score: PodTopologySpread::default().score(&st, pod, n).0,
            })
            .collect();
        PodTopologySpread::default().normalize_score(&st, pod, &mut s);
        Some(s.iter().map(|s| s.score).collect())
    }

    #[test]
    fn pod_topology_spread_score() {
        let snap = snapshot();
        // zone: a has 3 matching, b 0; weight ln(2+2); n4 ignored (no zone).
        let pod = PodBuilder::new("p")
            .labels(&[("app", "web")])
            .spec_with(|s| {
                s.topology_spread_constraints = Some(vec![spread("zone", 1, "ScheduleAnyway")])
            })
            .info();
        let got = scores(&pod, &snap).unwrap();
        assert_eq!(got[3], 0, "ignored node");
        assert_eq!(got[2], 100, "empty zone is best");
        assert!(got[0] == got[1] && got[0] < got[2], "{got:?}");
        // hostname: fewer pods → higher
        let pod = PodBuilder::new("p")
            .labels(&[("app", "web")])
            .spec_with(|s| {
                s.topology_spread_constraints =
                    Some(vec![spread("kubernetes.io/hostname", 1, "ScheduleAnyway")])
            })
            .info();
        let got = scores(&pod, &snap).unwrap();
        assert!(
            got[0] < got[1] && got[1] < got[2] && got[2] == got[3],
            "{got:?}"
        );
        // No constraints and no owner: no default spreading.
        assert!(
            scores(
                &PodBuilder::new("p").labels(&[("app", "web")]).info(),
                &snap
            )
            .is_none()
        );
        // Owned by a ReplicaSet: system defaults (hostname and zone; n1..n4 all lack the zone key except by "zone" label, so all are ignored).
        let mut owned = PodBuilder::new("p")
            .labels(&[("app", "web"), ("pod-template-hash", "x")])
            .build();
        owned.metadata.owner_references = Some(vec![OwnerReference {
            kind: "ReplicaSet".into(),
            controller: Some(true),
            name: "rs".into(),
            api_version: "apps/v1".into(),
            uid: "u".into(),
            ..Default::default()
        }]);
        let got = scores(&PodInfo::new(Arc::new(owned)), &snap).unwrap();
        assert_eq!(got, vec![0, 0, 0, 0]);
    }

    /// The memo gives what a fresh count gives: after a node changed (a matching pod added,
    /// another removed), for another namespace, and after a node left the snapshot.
    #[test]
    fn remembered_counts_equal_fresh_counts() {
        let plugin = PodTopologySpread::default();
        let counts = |plugin: &PodTopologySpread, pod: &PodInfo, snap: &Snapshot| {
            let mut st = CycleState::new();
            plugin.pre_filter(&mut st, pod, snap);
            let st = st.read::<PreFilterState>(PRE_FILTER_KEY).unwrap().clone();
            (st.counts, st.mins)
        };
        let pod_in = |ns: &str| {
            PodBuilder::new("p")
                .namespace(ns)
                .labels(&[("app", "web")])
                .spec_with(|s| {
                    s.topology_spread_constraints = Some(vec![
                        spread("zone", 1, "DoNotSchedule"),
                        spread("kubernetes.io/hostname", 1, "DoNotSchedule"),
                    ])
                })
                .info()
        };
        let pod = pod_in("default");
        let snap = snapshot();
        let first = counts(&plugin, &pod, &snap);
        assert_eq!(first.0[0]["a"], 3);
        assert_eq!(first, counts(&PodTopologySpread::default(), &pod, &snap));

        // n3 gets a matching pod, n1 loses one: new NodeInfos, the rest shared.
        let mut nodes: Vec<Arc<NodeInfo>> = snap.nodes.iter().cloned().collect();
        let mut n3 = (*nodes[2]).clone();
        n3.add_pod(Arc::new(PodInfo::new(Arc::new(web("w9", "n3")))));
        nodes[2] = Arc::new(n3);
        let mut n1 = (*nodes[0]).clone();
        let w1 = n1.pods[0].pod.clone();
        assert!(n1.remove_pod(&w1));
        nodes[0] = Arc::new(n1);
        let changed = Snapshot::from_arcs(nodes.clone(), snap.namespaces.clone());
        let second = counts(&plugin, &pod, &changed);
        assert_eq!(
            second,
            counts(&PodTopologySpread::default(), &pod, &changed)
        );
        assert_eq!((second.0[0]["a"], second.0[0]["b"]), (2, 1));

        // Another namespace: nothing matches there.
        let other = pod_in("other");
        let third = counts(&plugin, &other, &changed);
        assert_eq!(
            third,
            counts(&PodTopologySpread::default(), &other, &changed)
        );
        assert_eq!(third.0[0]["a"], 0);

        // A node leaves.
        nodes.remove(1);
        let fewer = Snapshot::from_arcs(nodes, snap.namespaces.clone());
        assert_eq!(
            counts(&plugin, &pod, &fewer),
            counts(&PodTopologySpread::default(), &pod, &fewer)
        );
    }
}
