//! The in-tree plugins' names, as upstream spells them: what profiles name in
//! [`crate::config`] (the default plugin sets) and what each plugin of [`crate::plugins`]
//! answers to.

pub const PRIORITY_SORT: &str = "PrioritySort";
pub const SCHEDULING_GATES: &str = "SchedulingGates";
pub const NODE_UNSCHEDULABLE: &str = "NodeUnschedulable";
pub const NODE_NAME: &str = "NodeName";
pub const TAINT_TOLERATION: &str = "TaintToleration";
pub const NODE_AFFINITY: &str = "NodeAffinity";
pub const NODE_PORTS: &str = "NodePorts";
pub const NODE_RESOURCES_FIT: &str = "NodeResourcesFit";
pub const VOLUME_RESTRICTIONS: &str = "VolumeRestrictions";
pub const NODE_VOLUME_LIMITS: &str = "NodeVolumeLimits";
pub const VOLUME_BINDING: &str = "VolumeBinding";
pub const VOLUME_ZONE: &str = "VolumeZone";
pub const POD_TOPOLOGY_SPREAD: &str = "PodTopologySpread";
pub const INTER_POD_AFFINITY: &str = "InterPodAffinity";
pub const DEFAULT_PREEMPTION: &str = "DefaultPreemption";
pub const NODE_RESOURCES_BALANCED_ALLOCATION: &str = "NodeResourcesBalancedAllocation";
pub const IMAGE_LOCALITY: &str = "ImageLocality";
pub const DEFAULT_BINDER: &str = "DefaultBinder";
