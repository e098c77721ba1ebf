//! The cgroup manager: the kubepods / burstable / besteffort hierarchy, pod and container
//! cgroups, their limits from requests and limits, OOM detection and stats; cgroup v1 and v2
//! behind one trait.

/// `status.qosClass`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QosClass {
    Guaranteed,
    Burstable,
    BestEffort,
}

/// Limits of one cgroup, already computed from the pod spec.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources {
    /// v1 `cpu.shares` (2..=262144); v2 maps it to `cpu.weight`.
    pub cpu_shares: Option<u64>,
    /// CFS quota in µs per `cpu_period`; None = unlimited.
    pub cpu_quota: Option<i64>,
    pub cpu_period: Option<u64>,
    /// Bytes; None = unlimited.
    pub memory_limit: Option<i64>,
    /// None = unlimited.
    pub pids_limit: Option<i64>,
}

/// Usage of one cgroup, for the summary API and `kubectl top`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    pub cpu_usage_nanos: u64,
    pub memory_usage_bytes: u64,
    pub memory_working_set_bytes: u64,
    pub pids: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("cgroup {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cgroup: {0}")]
    Other(String),
}

/// What the pod workers need from the cgroup tree. Names are relative (`kubepods/burstable/
/// pod<uid>/<container-id>`); each implementation maps them onto its hierarchy.
pub trait CgroupManager: Send + Sync {
    /// Creates the kubepods, burstable and besteffort groups with the node's allocatable.
    fn ensure_qos_hierarchy(&self, allocatable: &Resources) -> Result<(), CgroupError>;
    /// Creates (or updates) a pod's group; returns its relative name.
    fn ensure_pod(
        &self,
        pod_uid: &str,
        qos: QosClass,
        resources: &Resources,
    ) -> Result<String, CgroupError>;
    /// Creates (or updates) a container's group under its pod's; returns the paths of its
    /// `cgroup.procs` files (one per v1 hierarchy, one for v2) for the runtime to join.
    fn ensure_container(
        &self,
        pod_uid: &str,
        qos: QosClass,
        container_id: &str,
        resources: &Resources,
    ) -> Result<Vec<std::path::PathBuf>, CgroupError>;
    /// Whether the container's group saw an OOM kill.
    fn oom_killed(&self, pod_uid: &str, qos: QosClass, container_id: &str) -> bool;
    fn container_stats(
        &self,
        pod_uid: &str,
        qos: QosClass,
        container_id: &str,
    ) -> Result<Stats, CgroupError>;
    /// Removes a container's group (its processes must be gone).
    fn remove_container(
        &self,
        pod_uid: &str,
        qos: QosClass,
        container_id: &str,
    ) -> Result<(), CgroupError>;
    /// Removes a pod's group and what is left under it.
    fn remove_pod(&self, pod_uid: &str, qos: QosClass) -> Result<(), CgroupError>;
    /// Pods that have a group (by UID), for cleaning up after a restart.
    fn pods(&self) -> Result<Vec<String>, CgroupError>;
}
