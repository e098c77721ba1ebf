//! NodeUnschedulable: cordoned nodes (`spec.unschedulable`) take only pods that tolerate the
//! `node.kubernetes.io/unschedulable:NoSchedule` taint.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Taint;

use crate::framework::interface::*;
use crate::framework::{CycleState, NodeInfo, PodInfo, Status, helpers};

use crate::plugin_names as names;

pub const ERR_REASON_UNKNOWN_CONDITION: &str = "node(s) had unknown conditions";
pub const ERR_REASON_UNSCHEDULABLE: &str = "node(s) were unschedulable";
pub const TAINT_NODE_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";

#[derive(Debug, Default)]
pub struct NodeUnschedulable;

impl Plugin for NodeUnschedulable {
    fn name(&self) -> &'static str {
        names::NODE_UNSCHEDULABLE
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        events(&[(EventResource::Node, &[ActionType::Add, ActionType::Update])])
    }
    fn as_filter(self: Arc<Self>) -> Option<Arc<dyn FilterPlugin>> {
        Some(self)
    }
}

impl FilterPlugin for NodeUnschedulable {
    fn filter(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(n) = node.node.as_deref() else {
            return Status::unresolvable(ERR_REASON_UNKNOWN_CONDITION);
        };
        let cordoned = n
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false);
        if !cordoned {
            return Status::success();
        }
        let taint = Taint {
            key: TAINT_NODE_UNSCHEDULABLE.into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        };
        if helpers::tolerations(&pod.pod)
            .iter()
            .any(|t| helpers::tolerates(t, &taint))
        {
            Status::success()
        } else {
            Status::unresolvable(ERR_REASON_UNSCHEDULABLE)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::testing::{NodeBuilder, PodBuilder, node_info};

    #[test]
    fn node_unschedulable_filter() {
        let cases = [
            (
                "schedulable node",
                PodBuilder::new("p"),
                false,
                Code::Success,
            ),
            (
                "cordoned node",
                PodBuilder::new("p"),
                true,
                Code::UnschedulableAndUnresolvable,
            ),
            (
                "cordoned node, pod tolerates",
                PodBuilder::new("p").toleration(
                    TAINT_NODE_UNSCHEDULABLE,
                    "Exists",
                    "",
                    "NoSchedule",
                ),
                true,
                Code::Success,
            ),
            (
                "cordoned node, toleration for another effect",
                PodBuilder::new("p").toleration(
                    TAINT_NODE_UNSCHEDULABLE,
                    "Exists",
                    "",
                    "NoExecute",
                ),
                true,
                Code::UnschedulableAndUnresolvable,
            ),
        ];
        for (name, pod, cordoned, want) in cases {
            let mut nb = NodeBuilder::new("n");
            if cordoned {
                nb = nb.unschedulable();
            }
            let s = NodeUnschedulable.filter(
                &CycleState::new(),
                &pod.info(),
                &node_info(nb.build(), vec![]),
            );
            assert_eq!(s.code(), want, "{name}");
        }
        let s = NodeUnschedulable.filter(
            &CycleState::new(),
            &PodBuilder::new("p").info(),
            &NodeInfo::default(),
        );
        assert_eq!(s.reasons(), [ERR_REASON_UNKNOWN_CONDITION]);
    }
}
