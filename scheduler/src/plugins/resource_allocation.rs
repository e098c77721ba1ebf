//! The scoring half shared by NodeResourcesFit and NodeResourcesBalancedAllocation
//! (upstream `resource_allocation.go`): per resource, what the node offers and what it
//! would have requested with the pod on it.

use serde::{Deserialize, Serialize};

use crate::framework::NodeInfo;
use crate::framework::PodInfo;
use crate::framework::resource::{CPU, EPHEMERAL_STORAGE, MEMORY, is_scalar_resource};

/// A resource and its weight in a score.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSpec {
    pub name: String,
    #[serde(default = "one")]
    pub weight: i64,
}

fn one() -> i64 {
    1
}

/// cpu and memory, weight 1 each: upstream's default.
pub fn default_resources() -> Vec<ResourceSpec> {
    vec![
        ResourceSpec {
            name: CPU.into(),
            weight: 1,
        },
        ResourceSpec {
            name: MEMORY.into(),
            weight: 1,
        },
    ]
}

/// What the pod requests of `name`; with `use_requested` false, cpu and memory count
/// upstream's non-zero defaults.
pub fn pod_request(pod: &PodInfo, name: &str, use_requested: bool) -> i64 {
    match name {
        CPU if !use_requested => pod.non_zero_cpu,
        MEMORY if !use_requested => pod.non_zero_memory,
        other => pod.requests.get(other),
    }
}

/// `(allocatable, requested-with-pod)` of `name` on the node; `(0, 0)` when the node does
/// not have the resource or, for scalar resources, the pod does not request it.
pub fn allocatable_and_requested(
    node: &NodeInfo,
    pod: &PodInfo,
    name: &str,
    use_requested: bool,
) -> (i64, i64) {
    let pod_req = pod_request(pod, name, use_requested);
    let node_req = match name {
        CPU if !use_requested => node.non_zero_cpu,
        MEMORY if !use_requested => node.non_zero_memory,
        other => node.requested.get(other),
    };
    let alloc = node.allocatable.get(name);
    match name {
        CPU | MEMORY | EPHEMERAL_STORAGE => (alloc, node_req + pod_req),
        other if is_scalar_resource(other) => {
            if pod_req == 0 || alloc == 0 {
                (0, 0)
            } else {
                (alloc, node_req + pod_req)
            }
        }
        _ => (0, 0),
    }
}
