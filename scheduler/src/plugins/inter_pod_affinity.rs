//! InterPodAffinity: Filter enforces the pod's required affinity and anti-affinity and the
//! required anti-affinity of pods already running; Score adds preferred (anti-)affinity
//! weights of both sides (and existing pods' required affinity with weight 1), per
//! topology domain, normalized min-max to 0..100.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use crate::framework::interface::*;
use crate::framework::node_info::{AffinityTerm, NamespaceLabels, WeightedAffinityTerm};
use crate::framework::{
    CycleState, FrameworkError, MAX_NODE_SCORE, NodeInfo, PodInfo, Snapshot, Status,
};

use crate::plugin_names as names;

pub const ERR_REASON_AFFINITY: &str = "node(s) didn't match pod affinity rules";
pub const ERR_REASON_ANTI_AFFINITY: &str = "node(s) didn't match pod anti-affinity rules";
pub const ERR_REASON_EXISTING_ANTI_AFFINITY: &str =
    "node(s) didn't satisfy existing pods anti-affinity rules";

const PRE_FILTER_KEY: &str = "PreFilterInterPodAffinity";
const PRE_SCORE_KEY: &str = "PreScoreInterPodAffinity";

type Counts = HashMap<(String, String), i64>;

#[derive(Debug, Clone, Default)]
struct PreFilterState {
    /// Domains where existing pods' required anti-affinity matches the incoming pod.
    existing_anti: Counts,
    /// Domains with pods matching all of the incoming pod's required affinity terms.
    affinity: Counts,
    /// Domains with pods matching the incoming pod's required anti-affinity terms.
    anti: Counts,
    namespaces: Arc<NamespaceLabels>,
}

fn update(m: &mut Counts, node: &NodeInfo, key: &str, v: i64) {
    if let Some(val) = node.labels().get(key) {
        let k = (key.to_owned(), val.clone());
        let e = m.entry(k.clone()).or_default();
        *e += v;
        if *e == 0 {
            m.remove(&k);
        }
    }
}

fn matches_all(terms: &[AffinityTerm], pod: &Pod, ns: &NamespaceLabels) -> bool {
    !terms.is_empty() && terms.iter().all(|t| t.matches(pod, ns))
}

/// `InterPodAffinityArgs`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Args {
    pub hard_pod_affinity_weight: i32,
    pub ignore_preferred_terms_of_existing_pods: bool,
}

impl Default for Args {
    fn default() -> Self {
        Self {
            hard_pod_affinity_weight: 1,
            ignore_preferred_terms_of_existing_pods: false,
        }
    }
}

#[derive(Debug, Default)]
pub struct InterPodAffinity {
    args: Args,
}

impl InterPodAffinity {
    pub fn new(args: Option<&serde_json::Value>) -> Result<Self, FrameworkError> {
        let args: Args = match args {
            Some(v) if !v.is_null() => {
                serde_json::from_value(v.clone()).map_err(|e| FrameworkError::InvalidArgs {
                    plugin: names::INTER_POD_AFFINITY.into(),
                    message: e.to_string(),
                })?
            }
            _ => Args::default(),
        };
        if !(0..=100).contains(&args.hard_pod_affinity_weight) {
            return Err(FrameworkError::InvalidArgs {
                plugin: names::INTER_POD_AFFINITY.into(),
                message: "hardPodAffinityWeight must be in 0..=100".into(),
            });
        }
        Ok(Self { args })
    }

    fn add_or_remove(
        st: &mut PreFilterState,
        pod: &PodInfo,
        other: &PodInfo,
        node: &NodeInfo,
        v: i64,
    ) {
        let ns = st.namespaces.clone();
        for t in &other.required_anti_affinity {
            if t.matches(&pod.pod, &ns) {
                update(&mut st.existing_anti, node, &t.topology_key, v);
            }
        }
        if matches_all(&pod.required_affinity, &other.pod, &ns) {
            for t in &pod.required_affinity {
                update(&mut st.affinity, node, &t.topology_key, v);
            }
        }
        for t in &pod.required_anti_affinity {
            if t.matches(&other.pod, &ns) {
                update(&mut st.anti, node, &t.topology_key, v);
            }
        }
    }
}

impl Plugin for InterPodAffinity {
    fn name(&self) -> &'static str {
        names::INTER_POD_AFFINITY
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        events(&[
            (
                EventResource::Pod,
                &[ActionType::Add, ActionType::Update, ActionType::Delete],
            ),
            (EventResource::Node, &[ActionType::Add, ActionType::Update]),
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

impl PreFilterPlugin for InterPodAffinity {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, snap: &Snapshot) -> Status {
        let any_existing_anti = snap
            .nodes
            .iter()
            .any(|n| n.num_pods_with_required_anti_affinity > 0);
        if pod.required_affinity.is_empty()
            && pod.required_anti_affinity.is_empty()
            && !any_existing_anti
        {
            return Status::skip();
        }
        let ns = snap.namespaces.clone();
        let mut st = PreFilterState {
            namespaces: ns.clone(),
            ..Default::default()
        };
        for n in snap.nodes.iter() {
            if n.num_pods_with_required_anti_affinity > 0 {
                for p in &n.pods {
                    for t in &p.required_anti_affinity {
                        if t.matches(&pod.pod, &ns) {
                            update(&mut st.existing_anti, n, &t.topology_key, 1);
                        }
                    }
                }
            }
            if pod.required_affinity.is_empty() && pod.required_anti_affinity.is_empty() {
                continue;
            }
            for p in &n.pods {
                if matches_all(&pod.required_affinity, &p.pod, &ns) {
                    for t in &pod.required_affinity {
                        update(&mut st.affinity, n, &t.topology_key, 1);
                    }
                }
                for t in &pod.required_anti_affinity {
                    if t.matches(&p.pod, &ns) {
                        update(&mut st.anti, n, &t.topology_key, 1);
                    }
                }
            }
        }
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
                Self::add_or_remove(st, pod, added, node, 1);
                Status::success()
            }
            None => Status::error("reading PreFilterInterPodAffinity state"),
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
                Self::add_or_remove(st, pod, removed, node, -1);
                Status::success()
            }
            None => Status::error("reading PreFilterInterPodAffinity state"),
        }
    }
}

impl FilterPlugin for InterPodAffinity {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(st) = state.read::<PreFilterState>(PRE_FILTER_KEY) else {
            return Status::error("reading PreFilterInterPodAffinity state");
        };
        let labels = node.labels();
        // Required affinity: every topology key present and a matching pod in each domain,
        // unless no pod matches anywhere and the pod matches its own terms.
        let mut pods_exist = true;
        for t in &pod.required_affinity {
            match labels.get(&t.topology_key) {
                Some(v) => {
                    if st
                        .affinity
                        .get(&(t.topology_key.clone(), v.clone()))
                        .copied()
                        .unwrap_or(0)
                        <= 0
                    {
                        pods_exist = false;
                    }
                }
                None => return Status::unresolvable(ERR_REASON_AFFINITY),
            }
        }
        let alone =
            st.affinity.is_empty() && matches_all(&pod.required_affinity, &pod.pod, &st.namespaces);
        if !pods_exist && !alone {
            return Status::unresolvable(ERR_REASON_AFFINITY);
        }
        for t in &pod.required_anti_affinity {
            if let Some(v) = labels.get(&t.topology_key)
                && st
                    .anti
                    .get(&(t.topology_key.clone(), v.clone()))
                    .copied()
                    .unwrap_or(0)
                    > 0
            {
                return Status::unschedulable(ERR_REASON_ANTI_AFFINITY);
            }
        }
        if !st.existing_anti.is_empty() {
            for (k, v) in labels {
                if st
                    .existing_anti
                    .get(&(k.clone(), v.clone()))
                    .copied()
                    .unwrap_or(0)
                    > 0
                {
                    return Status::unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY);
                }
            }
        }
        Status::success()
    }
}

/// topology key → value → score.
type TopologyScore = HashMap<String, HashMap<String, i64>>;

fn process_term(
    m: &mut TopologyScore,
    term: &AffinityTerm,
    weight: i64,
    pod: &Pod,
    ns: &NamespaceLabels,
    node: &NodeInfo,
) {
    if term.matches(pod, ns)
        && let Some(v) = node.labels().get(&term.topology_key)
    {
        *m.entry(term.topology_key.clone())
            .or_default()
            .entry(v.clone())
            .or_default() += weight;
    }
}

fn process_terms(
    m: &mut TopologyScore,
    terms: &[WeightedAffinityTerm],
    pod: &Pod,
    ns: &NamespaceLabels,
    node: &NodeInfo,
    mult: i64,
) {
    for t in terms {
        process_term(m, &t.term, i64::from(t.weight) * mult, pod, ns, node);
    }
}

impl PreScorePlugin for InterPodAffinity {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _: &[Arc<NodeInfo>],
        snap: &Snapshot,
    ) -> Status {
        let has_constraints =
            !pod.preferred_affinity.is_empty() || !pod.preferred_anti_affinity.is_empty();
        if self.args.ignore_preferred_terms_of_existing_pods && !has_constraints {
            return Status::skip();
        }
        let ns = snap.namespaces.clone();
        let mut scores = TopologyScore::new();
        for n in snap.nodes.iter() {
            if !has_constraints && n.num_pods_with_affinity == 0 {
                continue;
            }
            if n.labels().is_empty() {
                continue;
            }
            for p in &n.pods {
                process_terms(&mut scores, &pod.preferred_affinity, &p.pod, &ns, n, 1);
                process_terms(
                    &mut scores,
                    &pod.preferred_anti_affinity,
                    &p.pod,
                    &ns,
                    n,
                    -1,
                );
                if self.args.hard_pod_affinity_weight > 0 {
                    for t in &p.required_affinity {
                        process_term(
                            &mut scores,
                            t,
                            i64::from(self.args.hard_pod_affinity_weight),
                            &pod.pod,
                            &ns,
                            n,
                        );
                    }
                }
                process_terms(&mut scores, &p.preferred_affinity, &pod.pod, &ns, n, 1);
                process_terms(
                    &mut scores,
                    &p.preferred_anti_affinity,
                    &pod.pod,
                    &ns,
                    n,
                    -1,
                );
            }
        }
        if scores.is_empty() {
            return Status::skip();
        }
        state.write(PRE_SCORE_KEY, scores);
        Status::success()
    }
}

impl ScorePlugin for InterPodAffinity {
    fn score(&self, state: &CycleState, _: &PodInfo, node: &NodeInfo) -> (i64, Status) {
        let Some(scores) = state.read::<TopologyScore>(PRE_SCORE_KEY) else {
            return (0, Status::error("reading PreScoreInterPodAffinity state"));
        };
        let labels = node.labels();
        let s = scores
            .iter()
            .filter_map(|(k, m)| labels.get(k).and_then(|v| m.get(v)))
            .sum();
        (s, Status::success())
    }

    fn normalize_score(&self, _: &CycleState, _: &PodInfo, scores: &mut [NodeScore<'_>]) -> Status {
        let min = scores.iter().map(|s| s.score).min().unwrap_or(0);
        let max = scores.iter().map(|s| s.score).max().unwrap_or(0);
        let diff = max - min;
        for s in scores.iter_mut() {
            s.score = if diff > 0 {
                (MAX_NODE_SCORE as f64 * ((s.score - min) as f64 / diff as f64)) as i64
            } else {
                0
            };
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::testing::{NodeBuilder, PodBuilder, node_info};
    use k8s_openapi::api::core::v1::{
        Affinity, PodAffinity, PodAffinityTerm, PodAntiAffinity, WeightedPodAffinityTerm,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

    fn term(app: &str, key: &str) -> PodAffinityTerm {
        PodAffinityTerm {
            label_selector: Some(LabelSelector {
                match_labels: Some([("app".to_owned(), app.to_owned())].into()),
                ..Default::default()
            }),
            topology_key: key.into(),
            ..Default::default()
        }
    }

    fn affinity(app: &str, key: &str) -> Affinity {
        Affinity {
            pod_affinity: Some(PodAffinity {
                required_during_scheduling_ignored_during_execution: Some(vec![term(app, key)]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn anti(app: &str, key: &str) -> Affinity {
        Affinity {
            pod_anti_affinity: Some(PodAntiAffinity {
                required_during_scheduling_ignored_during_execution: Some(vec![term(app, key)]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn preferred(app: &str, key: &str, weight: i32, anti_: bool) -> Affinity {
        let t = Some(vec![WeightedPodAffinityTerm {
            weight,
            pod_affinity_term: term(app, key),
        }]);
        if anti_ {
            Affinity {
                pod_anti_affinity: Some(PodAntiAffinity {
                    preferred_during_scheduling_ignored_during_execution: t,
                    ..Default::default()
                }),
                ..Default::default()
            }
        } else {
            Affinity {
                pod_affinity: Some(PodAffinity {
                    preferred_during_scheduling_ignored_during_execution: t,
                    ..Default::default()
                }),
                ..Default::default()
            }
        }
    }

    /// Two zones: n1 (zone a) runs `web`; n2 (zone a) empty; n3 (zone b) empty.
    fn snapshot(existing: Pod) -> Snapshot {
        Snapshot::new(
            vec![
                node_info(
                    NodeBuilder::new("n1")
                        .labels(&[("zone", "a"), ("kubernetes.io/hostname", "n1")])
                        .build(),
                    vec![existing],
                ),
                node_info(
                    NodeBuilder::new("n2")
                        .labels(&[("zone", "a"), ("kubernetes.io/hostname", "n2")])
                        .build(),
                    vec![],
                ),
                node_info(
                    NodeBuilder::new("n3")
                        .labels(&[("zone", "b"), ("kubernetes.io/hostname", "n3")])
                        .build(),
                    vec![],
                ),
            ],
            Default::default(),
        )
    }

    fn filter_all(snap: &Snapshot, pod: Pod) -> Vec<Code> {
        let p = InterPodAffinity::default();
        let pod = PodInfo::new(Arc::new(pod));
        let mut st = CycleState::new();
        let s = p.pre_filter(&mut st, &pod, snap);
        if s.is_skip() {
            return vec![Code::Success; snap.len()];
        }
        snap.nodes
            .iter()
            .map(|n| p.filter(&st, &pod, n).code())
            .collect()
    }

    #[test]
    fn inter_pod_affinity_filter() {
        use Code::*;
        let web = || {
            PodBuilder::new("web")
                .labels(&[("app", "web")])
                .node("n1")
                .build()
        };
        let cases = vec![
            (
                "no affinity",
                web(),
                PodBuilder::new("p").build(),
                vec![Success, Success, Success],
            ),
            (
                "affinity to web by zone",
                web(),
                PodBuilder::new("p")
                    .affinity(affinity("web", "zone"))
                    .build(),
                vec![Success, Success, UnschedulableAndUnresolvable],
            ),
            (
                "affinity to web by host",
                web(),
                PodBuilder::new("p")
                    .affinity(affinity("web", "kubernetes.io/hostname"))
                    .build(),
                vec![
                    Success,
                    UnschedulableAndUnresolvable,
                    UnschedulableAndUnresolvable,
                ],
            ),
            (
                "affinity to missing topology key",
                web(),
                PodBuilder::new("p")
                    .affinity(affinity("web", "rack"))
                    .build(),
                vec![UnschedulableAndUnresolvable; 3],
            ),
            (
                "affinity to nothing, pod matches itself",
                web(),
                PodBuilder::new("p")
                    .labels(&[("app", "db")])
                    .affinity(affinity("db", "zone"))
                    .build(),
                vec![Success, Success, Success],
            ),
            (
                "affinity to nothing, pod does not match itself",
                web(),
                PodBuilder::new("p")
                    .affinity(affinity("db", "zone"))
                    .build(),
                vec![UnschedulableAndUnresolvable; 3],
            ),
            (
                "anti-affinity to web by zone",
                web(),
                PodBuilder::new("p").affinity(anti("web", "zone")).build(),
                vec![Unschedulable, Unschedulable, Success],
            ),
            (
                "anti-affinity to web by host",
                web(),
                PodBuilder::new("p")
                    .affinity(anti("web", "kubernetes.io/hostname"))
                    .build(),
                vec![Unschedulable, Success, Success],
            ),
            (
                "existing pod's anti-affinity",
                PodBuilder::new("web")
                    .labels(&[("app", "web")])
                    .affinity(anti("db", "zone"))
                    .node("n1")
                    .build(),
                PodBuilder::new("p").labels(&[("app", "db")]).build(),
                vec![Unschedulable, Unschedulable, Success],
            ),
            (
                "existing pod's anti-affinity in another namespace does not apply",
                PodBuilder::new("web")
                    .namespace("other")
                    .labels(&[("app", "web")])
                    .affinity(anti("db", "zone"))
                    .node("n1")
                    .build(),
                PodBuilder::new("p").labels(&[("app", "db")]).build(),
                vec![Success, Success, Success],
            ),
        ];
        for (name, existing, pod, want) in cases {
            assert_eq!(filter_all(&snapshot(existing), pod), want, "{name}");
        }
    }

    #[test]
    fn inter_pod_affinity_prefilter_extensions() {
        let p = InterPodAffinity::default();
        let snap = snapshot(
            PodBuilder::new("web")
                .labels(&[("app", "web")])
                .node("n1")
                .build(),
        );
        let pod = PodInfo::new(Arc::new(
            PodBuilder::new("p").affinity(anti("web", "zone")).build(),
        ));
        let mut st = CycleState::new();
        p.pre_filter(&mut st, &pod, &snap);
        let n1 = snap.get("n1").unwrap();
        assert_eq!(p.filter(&st, &pod, n1).code(), Code::Unschedulable);
        let web = n1.pods[0].clone();
        p.remove_pod(&mut st, &pod, &web, n1);
        assert!(p.filter(&st, &pod, n1).is_success());
        p.add_pod(&mut st, &pod, &web, n1);
        assert_eq!(p.filter(&st, &pod, n1).code(), Code::Unschedulable);
    }

    #[test]
    fn inter_pod_affinity_score() {
        let cases = vec![
            (
                "preferred affinity to zone a",
                PodBuilder::new("p")
                    .affinity(preferred("web", "zone", 5, false))
                    .build(),
                vec![100, 100, 0],
            ),
            (
                "preferred anti-affinity to zone a",
                PodBuilder::new("p")
                    .affinity(preferred("web", "zone", 5, true))
                    .build(),
                vec![0, 0, 100],
            ),
            (
                "no preferences",
                PodBuilder::new("p").build(),
                vec![0, 0, 0],
            ),
        ];
        for (name, pod, want) in cases {
            let snap = snapshot(
                PodBuilder::new("web")
                    .labels(&[("app", "web")])
                    .node("n1")
                    .build(),
            );
            let p = InterPodAffinity::default();
            let pod = PodInfo::new(Arc::new(pod));
            let mut st = CycleState::new();
            if p.pre_score(&mut st, &pod, &snap.nodes, &snap).is_skip() {
                assert_eq!(want, vec![0, 0, 0], "{name}");
                continue;
            }
            let mut scores: Vec<NodeScore<'_>> = snap
                .nodes
                .iter()
                .map(|n| NodeScore {
                    name: n.name(),
                    score: p.score(&st, &pod, n).0,
                })
                .collect();
            p.normalize_score(&st, &pod, &mut scores);
            assert_eq!(
                scores.iter().map(|s| s.score).collect::<Vec<_>>(),
                want,
                "{name}"
            );
        }
        // An existing pod's preferred affinity toward the incoming pod counts too.
        let snap = snapshot(
            PodBuilder::new("web")
                .labels(&[("app", "web")])
                .affinity(preferred("db", "zone", 10, false))
                .node("n1")
                .build(),
        );
        let p = InterPodAffinity::default();
        let pod = PodInfo::new(Arc::new(
            PodBuilder::new("p").labels(&[("app", "db")]).build(),
        ));
        let mut st = CycleState::new();
        assert!(p.pre_score(&mut st, &pod, &snap.nodes, &snap).is_success());
        assert_eq!(p.score(&st, &pod, snap.get("n2").unwrap()).0, 10);
        assert_eq!(p.score(&st, &pod, snap.get("n3").unwrap()).0, 0);
    }
}
