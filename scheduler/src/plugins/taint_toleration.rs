//! TaintToleration: Filter rejects nodes with an untolerated NoSchedule/NoExecute taint;
//! Score prefers nodes with fewer untolerated PreferNoSchedule taints.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Toleration;

use crate::framework::interface::*;
use crate::framework::{CycleState, MAX_NODE_SCORE, NodeInfo, PodInfo, Snapshot, Status, helpers};

use crate::plugin_names as names;

const STATE_KEY: &str = "PreScoreTaintToleration";

#[derive(Debug, Default)]
pub struct TaintToleration;

impl Plugin for TaintToleration {
    fn name(&self) -> &'static str {
        names::TAINT_TOLERATION
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        events(&[(EventResource::Node, &[ActionType::Add, ActionType::Update])])
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

impl FilterPlugin for TaintToleration {
    fn filter(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(n) = node.node.as_deref() else {
            return Status::error("invalid nodeInfo");
        };
        match helpers::find_untolerated_taint(
            helpers::taints(n),
            helpers::tolerations(&pod.pod),
            &["NoSchedule", "NoExecute"],
        ) {
            None => Status::success(),
            Some(t) => Status::unresolvable(format!(
                "node(s) had untolerated taint {{{}: {}}}",
                t.key,
                t.value.as_deref().unwrap_or("")
            )),
        }
    }
}

impl PreScorePlugin for TaintToleration {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _: &[Arc<NodeInfo>],
        _: &Snapshot,
    ) -> Status {
        let tols: Vec<Toleration> = helpers::tolerations(&pod.pod)
            .iter()
            .filter(|t| {
                matches!(
                    t.effect.as_deref(),
                    None | Some("") | Some("PreferNoSchedule")
                )
            })
            .cloned()
            .collect();
        state.write(STATE_KEY, tols);
        Status::success()
    }
}

impl ScorePlugin for TaintToleration {
    fn score(&self, state: &CycleState, _: &PodInfo, node: &NodeInfo) -> (i64, Status) {
        let Some(tols) = state.read::<Vec<Toleration>>(STATE_KEY) else {
            return (0, Status::error("reading PreScoreTaintToleration state"));
        };
        let Some(n) = node.node.as_deref() else {
            return (0, Status::error("invalid nodeInfo"));
        };
        let count = helpers::taints(n)
            .iter()
            .filter(|t| t.effect == "PreferNoSchedule")
            .filter(|t| !tols.iter().any(|tol| helpers::tolerates(tol, t)))
            .count();
        (count as i64, Status::success())
    }

    fn normalize_score(&self, _: &CycleState, _: &PodInfo, scores: &mut [NodeScore<'_>]) -> Status {
        default_normalize_score(MAX_NODE_SCORE, true, scores);
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::testing::{NodeBuilder, PodBuilder, node_info};

    #[test]
    fn taint_toleration_filter() {
        let cases = [
            (
                "no taints",
                PodBuilder::new("p"),
                NodeBuilder::new("n"),
                Code::Success,
                "",
            ),
            (
                "untolerated NoSchedule",
                PodBuilder::new("p"),
                NodeBuilder::new("n").taint("dedicated", "user1", "NoSchedule"),
                Code::UnschedulableAndUnresolvable,
                "node(s) had untolerated taint {dedicated: user1}",
            ),
            (
                "tolerated by Equal",
                PodBuilder::new("p").toleration("dedicated", "Equal", "user1", "NoSchedule"),
                NodeBuilder::new("n").taint("dedicated", "user1", "NoSchedule"),
                Code::Success,
                "",
            ),
            (
                "value differs",
                PodBuilder::new("p").toleration("dedicated", "Equal", "user2", "NoSchedule"),
                NodeBuilder::new("n").taint("dedicated", "user1", "NoSchedule"),
                Code::UnschedulableAndUnresolvable,
                "node(s) had untolerated taint {dedicated: user1}",
            ),
            (
                "PreferNoSchedule does not filter",
                PodBuilder::new("p"),
                NodeBuilder::new("n").taint("k", "v", "PreferNoSchedule"),
                Code::Success,
                "",
            ),
            (
                "NoExecute filters",
                PodBuilder::new("p"),
                NodeBuilder::new("n").taint("k", "", "NoExecute"),
                Code::UnschedulableAndUnresolvable,
                "node(s) had untolerated taint {k: }",
            ),
        ];
        for (name, pod, node, want, reason) in cases {
            let s = TaintToleration.filter(
                &CycleState::new(),
                &pod.info(),
                &node_info(node.build(), vec![]),
            );
            assert_eq!(s.code(), want, "{name}");
            if !reason.is_empty() {
                assert_eq!(s.message(), reason, "{name}");
            }
        }
    }

    #[test]
    fn taint_toleration_score() {
        let cases = [
            (
                "fewer untolerated PreferNoSchedule taints score higher",
                PodBuilder::new("p").toleration("a", "Exists", "", "PreferNoSchedule"),
                vec![
                    NodeBuilder::new("n1").taint("a", "", "PreferNoSchedule"),
                    NodeBuilder::new("n2").taint("b", "", "PreferNoSchedule"),
                    NodeBuilder::new("n3")
                        .taint("b", "", "PreferNoSchedule")
                        .taint("c", "", "PreferNoSchedule"),
                ],
                vec![100, 50, 0],
            ),
            (
                "no taints: all max",
                PodBuilder::new("p"),
                vec![NodeBuilder::new("n1"), NodeBuilder::new("n2")],
                vec![100, 100],
            ),
        ];
        for (name, pod, nodes, want) in cases {
            let pod = pod.info();
            let nodes: Vec<Arc<NodeInfo>> = nodes
                .into_iter()
                .map(|n| Arc::new(node_info(n.build(), vec![])))
                .collect();
            let mut state = CycleState::new();
            TaintToleration.pre_score(&mut state, &pod, &nodes, &Snapshot::default());
            let mut scores: Vec<NodeScore<'_>> = nodes
                .iter()
                .map(|n| NodeScore {
                    name: n.name(),
                    score: TaintToleration.score(&state, &pod, n).0,
                })
                .collect();
            TaintToleration.normalize_score(&state, &pod, &mut scores);
            let got: Vec<i64> = scores.iter().map(|s| s.score).collect();
            assert_eq!(got, want, "{name}");
        }
    }
}
