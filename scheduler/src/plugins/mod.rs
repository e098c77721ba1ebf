//! The in-tree plugins, one per file, and the registry that builds them by name
//! ([`new_plugin`]). Plugins read cluster state only through the [`Handle`] and the
//! snapshot; they never touch the cache or queue.

pub mod balanced_allocation;
pub mod default_binder;
pub mod default_preemption;
pub mod image_locality;
pub mod inter_pod_affinity;
pub mod node_affinity;
pub mod node_name;
pub mod node_ports;
pub mod node_resources_fit;
pub mod node_unschedulable;
pub mod node_volume_limits;
pub mod pod_topology_spread;
pub mod resource_allocation;
pub mod taint_toleration;
pub mod volume_binding;
pub mod volume_restrictions;
pub mod volume_zone;

use std::sync::Arc;

use crate::framework::FrameworkError;
use crate::framework::interface::{Handle, Plugin};
use crate::plugin_names as names;

/// A plugin the queue implements itself (PrioritySort orders the active queue,
/// SchedulingGates holds gated pods back); it has no framework extension point.
#[derive(Debug)]
pub struct QueuePlugin(&'static str);

impl Plugin for QueuePlugin {
    fn name(&self) -> &'static str {
        self.0
    }
}

/// Builds the plugin `name` with its `pluginConfig` args.
pub fn new_plugin(
    name: &str,
    handle: &Handle,
    args: Option<&serde_json::Value>,
) -> Result<Arc<dyn Plugin>, FrameworkError> {
    use names::*;
    Ok(match name {
        PRIORITY_SORT => Arc::new(QueuePlugin(PRIORITY_SORT)),
        SCHEDULING_GATES => Arc::new(QueuePlugin(SCHEDULING_GATES)),
        NODE_UNSCHEDULABLE => Arc::new(node_unschedulable::NodeUnschedulable),
        NODE_NAME => Arc::new(node_name::NodeName),
        TAINT_TOLERATION => Arc::new(taint_toleration::TaintToleration),
        NODE_AFFINITY => Arc::new(node_affinity::NodeAffinity),
        NODE_PORTS => Arc::new(node_ports::NodePorts),
        NODE_RESOURCES_FIT => Arc::new(node_resources_fit::NodeResourcesFit::new(args)?),
        NODE_RESOURCES_BALANCED_ALLOCATION => {
            Arc::new(balanced_allocation::BalancedAllocation::new(args)?)
        }
        IMAGE_LOCALITY => Arc::new(image_locality::ImageLocality),
        DEFAULT_PREEMPTION => Arc::new(default_preemption::DefaultPreemption::new(handle, args)?),
        INTER_POD_AFFINITY => Arc::new(inter_pod_affinity::InterPodAffinity::new(args)?),
        POD_TOPOLOGY_SPREAD => Arc::new(pod_topology_spread::PodTopologySpread::default()),
        VOLUME_BINDING => Arc::new(volume_binding::VolumeBinding::new(handle, args)?),
        DEFAULT_BINDER => Arc::new(default_binder::DefaultBinder::new(handle.client.clone())),
        VOLUME_RESTRICTIONS => Arc::new(volume_restrictions::VolumeRestrictions::new(handle)),
        NODE_VOLUME_LIMITS => Arc::new(node_volume_limits::NodeVolumeLimits::new(handle)),
        VOLUME_ZONE => Arc::new(volume_zone::VolumeZone::new(handle)),
        other => return Err(FrameworkError::UnknownPlugin(other.to_owned())),
    })
}
