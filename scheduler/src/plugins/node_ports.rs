//! NodePorts: a pod's hostPorts must be free on the node (same protocol and port conflict
//! when either side binds 0.0.0.0 or both bind the same IP).

use std::sync::Arc;

use crate::framework::interface::*;
use crate::framework::node_info::HostPort;
use crate::framework::{CycleState, NodeInfo, PodInfo, Status};

use crate::plugin_names as names;

pub const ERR_REASON: &str = "node(s) didn't have free ports for the requested pod ports";

#[derive(Debug, Default)]
pub struct NodePorts;

impl Plugin for NodePorts {
    fn name(&self) -> &'static str {
        names::NODE_PORTS
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        events(&[
            (EventResource::Pod, &[ActionType::Delete]),
            (EventResource::Node, &[ActionType::Add, ActionType::Update]),
        ])
    }
    fn as_pre_filter(self: Arc<Self>) -> Option<Arc<dyn PreFilterPlugin>> {
        Some(self)
    }
    fn as_filter(self: Arc<Self>) -> Option<Arc<dyn FilterPlugin>> {
        Some(self)
    }
}

impl PreFilterPlugin for NodePorts {
    fn pre_filter(
        &self,
        _: &mut CycleState,
        pod: &PodInfo,
        _: &crate::framework::Snapshot,
    ) -> Status {
        if pod.host_ports.is_empty() {
            Status::skip()
        } else {
            Status::success()
        }
    }
}

fn conflicts(a: &HostPort, b: &HostPort) -> bool {
    a.1 == b.1 && a.2 == b.2 && (a.0 == b.0 || a.0 == "0.0.0.0" || b.0 == "0.0.0.0")
}

impl FilterPlugin for NodePorts {
    fn filter(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        if fits(pod, node) {
            Status::success()
        } else {
            Status::unschedulable(ERR_REASON)
        }
    }
}

/// Whether none of the pod's host ports is in use on the node.
pub fn fits(pod: &PodInfo, node: &NodeInfo) -> bool {
    !pod.host_ports
        .iter()
        .any(|p| node.used_ports.iter().any(|u| conflicts(p, u)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::testing::{NodeBuilder, PodBuilder, node_info};

    #[test]
    fn node_ports_filter() {
        let cases = [
            (
                "nothing running",
                PodBuilder::new("p").host_port(80, "TCP", ""),
                vec![],
                Code::Success,
            ),
            (
                "other port",
                PodBuilder::new("p").host_port(80, "TCP", ""),
                vec![PodBuilder::new("e").host_port(81, "TCP", "")],
                Code::Success,
            ),
            (
                "same port",
                PodBuilder::new("p").host_port(80, "TCP", ""),
                vec![PodBuilder::new("e").host_port(80, "TCP", "")],
                Code::Unschedulable,
            ),
            (
                "same port, other protocol",
                PodBuilder::new("p").host_port(80, "UDP", ""),
                vec![PodBuilder::new("e").host_port(80, "TCP", "")],
                Code::Success,
            ),
            (
                "different IPs",
                PodBuilder::new("p").host_port(80, "TCP", "10.0.0.1"),
                vec![PodBuilder::new("e").host_port(80, "TCP", "10.0.0.2")],
                Code::Success,
            ),
            (
                "wildcard IP conflicts with specific",
                PodBuilder::new("p").host_port(80, "TCP", "10.0.0.1"),
                vec![PodBuilder::new("e").host_port(80, "TCP", "")],
                Code::Unschedulable,
            ),
        ];
        for (name, pod, existing, want) in cases {
            let ni = node_info(
                NodeBuilder::new("n").build(),
                existing.into_iter().map(|p| p.node("n").build()).collect(),
            );
            let s = NodePorts.filter(&CycleState::new(), &pod.info(), &ni);
            assert_eq!(s.code(), want, "{name}");
        }
    }
}
