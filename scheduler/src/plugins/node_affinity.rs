//! NodeAffinity: Filter on `nodeSelector` and required node affinity; Score by the summed
//! weights of matching preferred terms, normalized to 0..100.

use std::sync::Arc;

use k8s_openapi::api::core::v1::PreferredSchedulingTerm;

use crate::framework::interface::*;
use crate::framework::{CycleState, MAX_NODE_SCORE, NodeInfo, PodInfo, Snapshot, Status, helpers};

use crate::plugin_names as names;

pub const ERR_REASON_POD: &str = "node(s) didn't match Pod's node affinity/selector";
const STATE_KEY: &str = "PreScoreNodeAffinity";

#[derive(Debug, Default)]
pub struct NodeAffinity;

impl Plugin for NodeAffinity {
    fn name(&self) -> &'static str {
        names::NODE_AFFINITY
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        events(&[(EventResource::Node, &[ActionType::Add, ActionType::Update])])
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

fn required_present(pod: &PodInfo) -> bool {
    let Some(spec) = pod.pod.spec.as_ref() else {
        return false;
    };
    spec.node_selector.as_ref().is_some_and(|s| !s.is_empty())
        || spec
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|n| {
                n.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .is_some()
}

impl PreFilterPlugin for NodeAffinity {
    fn pre_filter(&self, _: &mut CycleState, pod: &PodInfo, _: &Snapshot) -> Status {
        if required_present(pod) {
            Status::success()
        } else {
            Status::skip()
        }
    }
}

impl FilterPlugin for NodeAffinity {
    fn filter(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(n) = node.node.as_deref() else {
            return Status::error("node not found");
        };
        if helpers::pod_matches_node_selector_and_affinity(&pod.pod, n) {
            Status::success()
        } else {
            Status::unresolvable(ERR_REASON_POD)
        }
    }
}

fn preferred(pod: &PodInfo) -> Vec<PreferredSchedulingTerm> {
    pod.pod
        .spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.preferred_during_scheduling_ignored_during_execution
                .clone()
        })
        .unwrap_or_default()
}

impl PreScorePlugin for NodeAffinity {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _: &[Arc<NodeInfo>],
        _: &Snapshot,
    ) -> Status {
        let terms = preferred(pod);
        if terms.is_empty() {
            return Status::skip();
        }
        state.write(STATE_KEY, terms);
        Status::success()
    }
}

impl ScorePlugin for NodeAffinity {
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> (i64, Status) {
        let Some(n) = node.node.as_deref() else {
            return (0, Status::error("node not found"));
        };
        let owned;
        let terms = match state.read::<Vec<PreferredSchedulingTerm>>(STATE_KEY) {
            Some(t) => t,
            None => {
                owned = preferred(pod);
                &owned
            }
        };
        let score = terms
            .iter()
            .filter(|t| t.weight != 0 && helpers::node_selector_term_matches(&t.preference, n))
            .map(|t| i64::from(t.weight))
            .sum();
        (score, Status::success())
    }

    fn normalize_score(&self, _: &CycleState, _: &PodInfo, scores: &mut [NodeScore<'_>]) -> Status {
        default_normalize_score(MAX_NODE_SCORE, false, scores);
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::testing::{NodeBuilder, PodBuilder, node_info};
    use k8s_openapi::api::core::v1::{
        Affinity, NodeAffinity as ApiNodeAffinity, NodeSelector, NodeSelectorRequirement,
        NodeSelectorTerm,
    };

    fn term(key: &str, op: &str, values: &[&str]) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: Some(vec![NodeSelectorRequirement {
                key: key.into(),
                operator: op.into(),
                values: (!values.is_empty())
                    .then(|| values.iter().map(|v| (*v).to_owned()).collect()),
            }]),
            match_fields: None,
        }
    }

    fn required(terms: Vec<NodeSelectorTerm>) -> Affinity {
        Affinity {
            node_affinity: Some(ApiNodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                    node_selector_terms: terms,
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn preferred_aff(terms: Vec<(i32, NodeSelectorTerm)>) -> Affinity {
        Affinity {
            node_affinity: Some(ApiNodeAffinity {
                preferred_during_scheduling_ignored_during_execution: Some(
                    terms
                        .into_iter()
                        .map(|(weight, preference)| PreferredSchedulingTerm { weight, preference })
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn node_affinity_filter() {
        let cases = [
            (
                "no constraints",
                PodBuilder::new("p"),
                &[("zone", "a")][..],
                Code::Success,
            ),
            (
                "nodeSelector matches",
                PodBuilder::new("p").node_selector(&[("zone", "a")]),
                &[("zone", "a")][..],
                Code::Success,
            ),
            (
                "nodeSelector mismatch",
                PodBuilder::new("p").node_selector(&[("zone", "b")]),
                &[("zone", "a")][..],
                Code::UnschedulableAndUnresolvable,
            ),
            (
                "required In",
                PodBuilder::new("p").affinity(required(vec![term("zone", "In", &["a", "b"])])),
                &[("zone", "a")][..],
                Code::Success,
            ),
            (
                "required NotIn",
                PodBuilder::new("p").affinity(required(vec![term("zone", "NotIn", &["a"])])),
                &[("zone", "a")][..],
                Code::UnschedulableAndUnresolvable,
            ),
            (
                "required Exists",
                PodBuilder::new("p").affinity(required(vec![term("gpu", "Exists", &[])])),
                &[("zone", "a")][..],
                Code::UnschedulableAndUnresolvable,
            ),
            (
                "required DoesNotExist",
                PodBuilder::new("p").affinity(required(vec![term("gpu", "DoesNotExist", &[])])),
                &[("zone", "a")][..],
                Code::Success,
            ),
            (
                "required Gt",
                PodBuilder::new("p").affinity(required(vec![term("cores", "Gt", &["4"])])),
                &[("cores", "8")][..],
                Code::Success,
            ),
            (
                "required Lt",
                PodBuilder::new("p").affinity(required(vec![term("cores", "Lt", &["4"])])),
                &[("cores", "8")][..],
                Code::UnschedulableAndUnresolvable,
            ),
            (
                "terms are ORed",
                PodBuilder::new("p").affinity(required(vec![
                    term("zone", "In", &["x"]),
                    term("zone", "In", &["a"]),
                ])),
                &[("zone", "a")][..],
                Code::Success,
            ),
            (
                "empty terms match nothing",
                PodBuilder::new("p").affinity(required(vec![NodeSelectorTerm::default()])),
                &[("zone", "a")][..],
                Code::UnschedulableAndUnresolvable,
            ),
            (
                "nodeSelector and affinity both must match",
                PodBuilder::new("p")
                    .node_selector(&[("zone", "b")])
                    .affinity(required(vec![term("zone", "In", &["a"])])),
                &[("zone", "a")][..],
                Code::UnschedulableAndUnresolvable,
            ),
        ];
        for (name, pod, labels, want) in cases {
            let ni = node_info(NodeBuilder::new("n").labels(labels).build(), vec![]);
            let s = NodeAffinity.filter(&CycleState::new(), &pod.info(), &ni);
            assert_eq!(s.code(), want, "{name}");
            if want != Code::Success {
                assert_eq!(s.message(), ERR_REASON_POD);
            }
        }
    }

    #[test]
    fn node_affinity_score() {
        let pod = PodBuilder::new("p")
            .affinity(preferred_aff(vec![
                (2, term("zone", "In", &["a"])),
                (8, term("disk", "In", &["ssd"])),
            ]))
            .info();
        let nodes: Vec<Arc<NodeInfo>> = [
            NodeBuilder::new("n1").labels(&[("zone", "a")]),
            NodeBuilder::new("n2").labels(&[("zone", "a"), ("disk", "ssd")]),
            NodeBuilder::new("n3"),
        ]
        .into_iter()
        .map(|n| Arc::new(node_info(n.build(), vec![])))
        .collect();
        let mut state = CycleState::new();
        assert!(
            NodeAffinity
                .pre_score(&mut state, &pod, &nodes, &Snapshot::default())
                .is_success()
        );
        let mut scores: Vec<NodeScore<'_>> = nodes
            .iter()
            .map(|n| NodeScore {
                name: n.name(),
                score: NodeAffinity.score(&state, &pod, n).0,
            })
            .collect();
        NodeAffinity.normalize_score(&state, &pod, &mut scores);
        assert_eq!(
            scores.iter().map(|s| s.score).collect::<Vec<_>>(),
            vec![20, 100, 0]
        );
        let mut state = CycleState::new();
        assert!(
            NodeAffinity
                .pre_score(
                    &mut state,
                    &PodBuilder::new("q").info(),
                    &nodes,
                    &Snapshot::default()
                )
                .is_skip()
        );
    }
}
