//! NodeName: a pod with `spec.nodeName` set fits only that node.

use std::sync::Arc;

use crate::framework::interface::*;
use crate::framework::{CycleState, NodeInfo, PodInfo, Status, helpers};

use crate::plugin_names as names;

pub const ERR_REASON: &str = "node(s) didn't match the requested node name";

#[derive(Debug, Default)]
pub struct NodeName;

impl Plugin for NodeName {
    fn name(&self) -> &'static str {
        names::NODE_NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        events(&[(EventResource::Node, &[ActionType::Add, ActionType::Update])])
    }
    fn as_filter(self: Arc<Self>) -> Option<Arc<dyn FilterPlugin>> {
        Some(self)
    }
}

impl FilterPlugin for NodeName {
    fn filter(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        if fits(pod, node) {
            Status::success()
        } else {
            Status::unresolvable(ERR_REASON)
        }
    }
}

/// Whether the pod names no node or names this one.
pub fn fits(pod: &PodInfo, node: &NodeInfo) -> bool {
    let want = helpers::pod_node_name(&pod.pod);
    want.is_empty() || want == node.name()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::testing::{NodeBuilder, PodBuilder, node_info};

    #[test]
    fn node_name_filter() {
        let cases = [
            ("no host specified", "", "foo", Code::Success),
            ("host matches", "foo", "foo", Code::Success),
            (
                "host doesn't match",
                "bar",
                "foo",
                Code::UnschedulableAndUnresolvable,
            ),
        ];
        for (name, pod_node, node, want) in cases {
            let mut pb = PodBuilder::new("p");
            if !pod_node.is_empty() {
                pb = pb.node(pod_node);
            }
            let ni = node_info(NodeBuilder::new(node).build(), vec![]);
            let s = NodeName.filter(&CycleState::new(), &pb.info(), &ni);
            assert_eq!(s.code(), want, "{name}");
            if want != Code::Success {
                assert_eq!(s.reasons(), [ERR_REASON], "{name}");
            }
        }
    }
}
