//! The cgroup manager: the kubepods / burstable / besteffort hierarchy, pod and container
//! cgroups, their limits from requests and limits, OOM detection and stats; cgroup v1 and v2
//! behind one trait.
//!
//! Files:
//! - this file: the [`CgroupManager`] trait, its value types, group naming, [`detect`] (which
//!   picks v1 or v2 from the filesystem mounted at the cgroup root) and [`join`];
//! - [`v1`]: the cgroupfs driver over separately (or jointly) mounted v1 hierarchies, found in
//!   `/proc/self/mountinfo`;
//! - [`v2`]: the cgroupfs driver over one unified (v2) mount;
//! - [`resources`]: pure functions from a pod spec to [`Resources`] and [`QosClass`];
//! - [`devices`]: a container's device access (default allow-list, device plugins' devices,
//!   privileged) and its enforcement: v1 `devices` controller, v2 eBPF device program;
//! - [`fake`]: an in-memory [`CgroupManager`] for pod-worker tests;
//! - `fsutil` (private): cgroupfs file reads and writes, removal with retries, process killing.
//!
//! The tree is upstream's cgroupfs layout, with a configurable top-level name (`kubepods` by
//! default, [`DEFAULT_TOP`]):
//!
//! ```text
//! <top>/                       node allocatable
//! <top>/pod<uid>/              Guaranteed pods
//! <top>/burstable/pod<uid>/    Burstable pods
//! <top>/besteffort/pod<uid>/   BestEffort pods
//! .../pod<uid>/<container-id>  containers
//! ```
//!
//! In v1 the same relative path exists in every mounted hierarchy; in v2 once under the unified
//! root. All calls are blocking file system work (removal may sleep up to about a second while
//! exiting processes leave a group): call them from `spawn_blocking` in async code.

use std::path::{Path, PathBuf};

pub mod devices;
pub mod fake;
mod fsutil;
pub mod resources;
pub mod v1;
pub mod v2;

pub use fake::FakeCgroupManager;
pub use v1::V1Manager;
pub use v2::V2Manager;

/// Upstream's name of the top-level group of all pods (`--cgroup-root` `/` with the cgroupfs
/// driver).
pub const DEFAULT_TOP: &str = "kubepods";
/// Upstream's name of the Burstable QoS group.
pub const BURSTABLE: &str = "burstable";
/// Upstream's name of the BestEffort QoS group.
pub const BESTEFFORT: &str = "besteffort";

pub use k1s_api::resource::QosClass;

/// The QoS level group under the top-level group; Guaranteed pods sit directly in it.
pub fn qos_group(qos: QosClass) -> Option<&'static str> {
    match qos {
        QosClass::Guaranteed => None,
        QosClass::Burstable => Some(BURSTABLE),
        QosClass::BestEffort => Some(BESTEFFORT),
    }
}

/// Limits of one cgroup, already computed from the pod spec.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources {
    /// v1 `cpu.shares` (2..=262144); v2 maps it to `cpu.weight`. None leaves the group's
    /// current value (the kernel default for a new group).
    pub cpu_shares: Option<u64>,
    /// CFS quota in µs per `cpu_period`; None = unlimited.
    pub cpu_quota: Option<i64>,
    /// CFS period in µs; None = 100000 (upstream's default).
    pub cpu_period: Option<u64>,
    /// Bytes; None = unlimited.
    pub memory_limit: Option<i64>,
    /// None = unlimited.
    pub pids_limit: Option<i64>,
    /// Device access (containers); None leaves the group's (a new group inherits its
    /// parent's: all devices for the pod and QoS groups).
    pub devices: Option<devices::DeviceRules>,
}

/// Usage of one cgroup, for the summary API and `kubectl top`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Cumulative CPU time of the group (v1 `cpuacct.usage`, v2 `cpu.stat` `usage_usec`).
    pub cpu_usage_nanos: u64,
    /// v1 `memory.usage_in_bytes`, v2 `memory.current`.
    pub memory_usage_bytes: u64,
    /// Usage minus inactive file pages, as cAdvisor computes it.
    pub memory_working_set_bytes: u64,
    /// `pids.current` (or the number of processes when the pids controller is missing).
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
    /// A cgroup file whose content is not what the kernel writes.
    #[error("cgroup {path}: unexpected content: {reason}")]
    Parse { path: String, reason: String },
    #[error("cgroup: {0}")]
    Other(String),
}

/// What the pod workers need from the cgroup tree. Names are relative (`kubepods/burstable/
/// pod<uid>/<container-id>`); each implementation maps them onto its hierarchy.
///
/// Pod UIDs and container IDs must be single path components (no `/`, not `.` or `..`, not
/// empty); others are refused with [`CgroupError::Other`].
pub trait CgroupManager: Send + Sync {
    /// Creates the kubepods, burstable and besteffort groups with the node's allocatable
    /// (see [`resources::node_allocatable_resources`]); besteffort gets `cpu.shares` 2.
    fn ensure_qos_hierarchy(&self, allocatable: &Resources) -> Result<(), CgroupError>;
    /// Sets the Burstable QoS group's limits (upstream's QoS container manager: `cpu.shares`
    /// from the sum of the Burstable pods' CPU requests, [`resources::burstable_qos_resources`])
    /// and re-asserts BestEffort's `cpu.shares` 2. Call after admitting or removing a pod.
    fn update_qos(&self, burstable: &Resources) -> Result<(), CgroupError> {
        let _ = burstable;
        Ok(())
    }
    /// Creates (or updates) a pod's group; returns its relative name.
    fn ensure_pod(
        &self,
        pod_uid: &str,
        qos: QosClass,
        resources: &Resources,
    ) -> Result<String, CgroupError>;
    /// Creates (or updates) a container's group under its pod's; returns the paths of its
    /// `cgroup.procs` files (one per v1 hierarchy, one for v2) for the runtime to join: write
    /// the container's PID into each (see [`join`]) before it execs the workload. The pod's
    /// group must exist ([`CgroupManager::ensure_pod`]); it is created if missing, but without
    /// limits.
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
    /// Usage of a pod's group (its containers and anything else in it).
    fn pod_stats(&self, pod_uid: &str, qos: QosClass) -> Result<Stats, CgroupError>;
    /// Removes a container's group (its processes must be gone; a busy group is retried for
    /// about a second, then the error is returned). A missing group is not an error.
    fn remove_container(
        &self,
        pod_uid: &str,
        qos: QosClass,
        container_id: &str,
    ) -> Result<(), CgroupError>;
    /// Removes a pod's group and what is left under it: processes still in it or its
    /// container groups are sent SIGKILL first, then the groups are removed bottom-up, busy
    /// groups retried for about a second. A missing group is not an error.
    fn remove_pod(&self, pod_uid: &str, qos: QosClass) -> Result<(), CgroupError>;
    /// Pods that have a group (by UID), for cleaning up after a restart.
    fn pods(&self) -> Result<Vec<String>, CgroupError>;
}

/// Which cgroup version is mounted at a root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    /// Separate controller hierarchies (a tmpfs with one mount per hierarchy below it).
    V1,
    /// The unified hierarchy mounted at the root itself.
    V2,
}

/// `CGROUP2_SUPER_MAGIC` from `linux/magic.h`.
const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

/// Whether `root` (normally `/sys/fs/cgroup`) is a cgroup2 mount (by `statfs` magic) or not,
/// in which case the v1 hierarchies are expected below it.
pub fn detect_version(root: &Path) -> Result<CgroupVersion, CgroupError> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(root.as_os_str().as_bytes())
        .map_err(|_| CgroupError::Other(format!("{}: path contains NUL", root.display())))?;
    // SAFETY: `c` is a valid NUL-terminated string and `st` a properly sized, writable
    // statfs buffer that outlives the call.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statfs(c.as_ptr(), &mut st) };
    if rc != 0 {
        return Err(fsutil::io_err(root, std::io::Error::last_os_error()));
    }
    // f_type's width differs between libcs and architectures.
    #[allow(clippy::unnecessary_cast)]
    let magic = st.f_type as i64;
    Ok(if magic == CGROUP2_SUPER_MAGIC {
        CgroupVersion::V2
    } else {
        CgroupVersion::V1
    })
}

/// The manager for the cgroups mounted at `root` (normally `/sys/fs/cgroup`), with the
/// upstream top-level name `kubepods`: [`V2Manager`] when `root` is a cgroup2 mount, else
/// [`V1Manager`] over the v1 hierarchies mounted below `root` (from `/proc/self/mountinfo`;
/// cgroup2 mounts below a v1 root, such as the hybrid `unified`, are ignored).
pub fn detect(root: &Path) -> Result<Box<dyn CgroupManager>, CgroupError> {
    detect_with_top(root, DEFAULT_TOP)
}

/// As [`detect`], with another top-level group name (tests use a unique one).
pub fn detect_with_top(root: &Path, top: &str) -> Result<Box<dyn CgroupManager>, CgroupError> {
    Ok(match detect_version(root)? {
        CgroupVersion::V2 => Box::new(V2Manager::new(root, top)?),
        CgroupVersion::V1 => Box::new(V1Manager::from_mountinfo(root, top)?),
    })
}

/// Moves process `pid` into every `cgroup.procs` file returned by
/// [`CgroupManager::ensure_container`]. From inside the process itself, writing PID 0 moves
/// the writer.
pub fn join(procs_files: &[PathBuf], pid: u32) -> Result<(), CgroupError> {
    let pid = pid.to_string();
    for p in procs_files {
        fsutil::write_file(p, &pid)?;
    }
    Ok(())
}

/// The relative name of a pod's group: `<top>[/<qos group>]/pod<uid>`.
pub fn pod_group_name(top: &str, pod_uid: &str, qos: QosClass) -> Result<String, CgroupError> {
    check_component("pod UID", pod_uid)?;
    Ok(match qos_group(qos) {
        None => format!("{top}/pod{pod_uid}"),
        Some(g) => format!("{top}/{g}/pod{pod_uid}"),
    })
}

/// The relative name of a container's group: `<pod group>/<container-id>`.
pub fn container_group_name(
    top: &str,
    pod_uid: &str,
    qos: QosClass,
    container_id: &str,
) -> Result<String, CgroupError> {
    check_component("container ID", container_id)?;
    Ok(format!(
        "{}/{container_id}",
        pod_group_name(top, pod_uid, qos)?
    ))
}

/// Refuses names that are not one plain path component.
fn check_component(what: &str, s: &str) -> Result<(), CgroupError> {
    if s.is_empty()
        || s == "."
        || s == ".."
        || s.contains('/')
        || s.contains('\0')
        || s.contains('\n')
    {
        return Err(CgroupError::Other(format!("invalid {what} {s:?}")));
    }
    Ok(())
}

/// Checks a top-level name: one or more plain components separated by `/`.
fn check_top(top: &str) -> Result<(), CgroupError> {
    if top.is_empty() {
        return Err(CgroupError::Other("empty top-level group name".into()));
    }
    for c in top.split('/') {
        check_component("top-level group name", c)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(
            pod_group_name("kubepods", "u1", QosClass::Guaranteed).unwrap(),
            "kubepods/podu1"
        );
        assert_eq!(
            pod_group_name("kubepods", "u1", QosClass::Burstable).unwrap(),
            "kubepods/burstable/podu1"
        );
        assert_eq!(
            container_group_name("kubepods", "u1", QosClass::BestEffort, "c").unwrap(),
            "kubepods/besteffort/podu1/c"
        );
        for bad in ["", ".", "..", "a/b", "a\nb"] {
            assert!(pod_group_name("kubepods", bad, QosClass::Burstable).is_err());
            assert!(container_group_name("kubepods", "u", QosClass::Burstable, bad).is_err());
        }
        assert!(check_top("a/b").is_ok());
        assert!(check_top("a//b").is_err());
        assert!(check_top("/a").is_err());
    }

    #[test]
    fn detect_version_of_this_machine() {
        let root = Path::new("/sys/fs/cgroup");
        if !root.exists() {
            eprintln!("SKIP: no /sys/fs/cgroup");
            return;
        }
        let v = detect_version(root).unwrap();
        let unified = std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap()
            .lines()
            .any(|l| l.contains(" /sys/fs/cgroup ") && l.contains(" - cgroup2 "));
        assert_eq!(v == CgroupVersion::V2, unified);
        if unified || root.join("memory").is_dir() {
            // Constructing touches nothing.
            let m = detect_with_top(root, "k1s-test-detect").unwrap();
            assert!(!m.pods().unwrap_or_default().iter().any(|p| p.is_empty()));
            assert!(!root.join("memory/k1s-test-detect").exists());
        }
    }

    #[test]
    fn detect_version_of_missing_path() {
        let e = detect_version(Path::new("/nonexistent/k1s")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/k1s"), "{e}");
    }
}
