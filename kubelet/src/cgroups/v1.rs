//! The cgroup v1 manager: upstream's cgroupfs driver over the v1 hierarchies.
//!
//! Owns hierarchy discovery (`cgroup` mounts in `/proc/self/mountinfo` below the cgroup root,
//! whether `cpu` and `cpuacct` are mounted apart or together; named hierarchies such as
//! `name=systemd` included, cgroup2 mounts such as the hybrid `unified` ignored), and creating,
//! limiting, reading and removing the same relative group in every hierarchy:
//!
//! - `cpu`: `cpu.shares`, `cpu.cfs_period_us`, `cpu.cfs_quota_us` (-1 = unlimited);
//! - `memory`: `memory.limit_in_bytes` (-1 = unlimited; `memory.memsw.*` is left alone), OOM
//!   kills from the `oom_kill` counter of `memory.oom_control`, usage from
//!   `memory.usage_in_bytes` and `memory.stat` `total_inactive_file`;
//! - `cpuacct`: `cpuacct.usage`;
//! - `pids`: `pids.max` (`max` = unlimited), `pids.current`;
//! - `devices`: a container's device allow-list ([`super::devices::apply_v1`]);
//! - `cpuset`: each new group gets its parent's `cpuset.cpus` / `cpuset.mems` (v1 leaves them
//!   empty, and an empty cpuset cannot take processes).
//!
//! Plain file IO rather than the `cgroups-rs` crate: cgroups-rs 0.5 depends on `zbus` (its
//! systemd driver) without a feature to turn it off, which would pull an async D-Bus stack
//! into the kubelet for a handful of one-line file writes; and its hierarchy type does not take
//! an injected set of mount points, which the fixture tests here need.

use std::path::{Path, PathBuf};

use super::fsutil::{self, io_err};
use super::{
    BESTEFFORT, BURSTABLE, CgroupError, CgroupManager, QosClass, Resources, Stats, check_top,
    container_group_name, pod_group_name,
};
use crate::cgroups::resources::{DEFAULT_CPU_PERIOD, MIN_SHARES};

/// v1 controllers a hierarchy may carry (mount options that are not controllers, such as
/// `rw` or `noprefix`, are not in it).
const CONTROLLERS: &[&str] = &[
    "blkio",
    "cpu",
    "cpuacct",
    "cpuset",
    "debug",
    "devices",
    "freezer",
    "hugetlb",
    "memory",
    "misc",
    "net_cls",
    "net_prio",
    "perf_event",
    "pids",
    "rdma",
];

/// Controllers without which the kubelet cannot enforce limits or report usage.
const REQUIRED: &[&str] = &["cpu", "cpuacct", "memory"];

/// One mounted v1 hierarchy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hierarchy {
    /// Its controllers (`cpu`, `cpuacct`, ...), or a name (`name=systemd`).
    pub controllers: Vec<String>,
    /// Where it is mounted (`/sys/fs/cgroup/cpu`).
    pub mount: PathBuf,
}

impl Hierarchy {
    fn has(&self, controller: &str) -> bool {
        self.controllers.iter().any(|c| c == controller)
    }
}

/// The v1 hierarchies mounted at or below `under`, from `/proc/<pid>/mountinfo` text; the first
/// mount of each hierarchy wins (later bind mounts of it are skipped).
pub fn parse_mountinfo(text: &str, under: &Path) -> Vec<Hierarchy> {
    let mut out: Vec<Hierarchy> = Vec::new();
    for line in text.lines() {
        let Some((pre, post)) = line.split_once(" - ") else {
            continue;
        };
        let Some(mount) = pre.split(' ').nth(4) else {
            continue;
        };
        let mut post = post.split(' ');
        if post.next() != Some("cgroup") {
            continue;
        }
        let opts = post.nth(1).unwrap_or("");
        let mount = PathBuf::from(crate::mountinfo::unescape(mount));
        if !mount.starts_with(under) {
            continue;
        }
        let controllers: Vec<String> = opts
            .split(',')
            .filter(|o| CONTROLLERS.contains(o) || o.starts_with("name="))
            .map(str::to_string)
            .collect();
        if controllers.is_empty()
            || out
                .iter()
                .any(|h| controllers.iter().any(|c| h.has(c.as_str())))
        {
            continue;
        }
        out.push(Hierarchy { controllers, mount });
    }
    out
}

/// The cgroup v1 [`CgroupManager`].
#[derive(Debug, Clone)]
pub struct V1Manager {
    top: String,
    hierarchies: Vec<Hierarchy>,
}

impl V1Manager {
    /// A manager over the given hierarchies (fixture trees in tests), with `top` as the
    /// top-level group name (`kubepods`). Fails when `cpu`, `cpuacct` or `memory` is missing.
    pub fn new(top: &str, hierarchies: Vec<Hierarchy>) -> Result<Self, CgroupError> {
        check_top(top)?;
        for c in REQUIRED {
            if !hierarchies.iter().any(|h| h.has(c)) {
                return Err(CgroupError::Other(format!(
                    "cgroup v1 controller {c} is not mounted"
                )));
            }
        }
        Ok(Self {
            top: top.to_string(),
            hierarchies,
        })
    }

    /// A manager over the v1 hierarchies mounted below `root` (`/sys/fs/cgroup`), read from
    /// `/proc/self/mountinfo`.
    pub fn from_mountinfo(root: &Path, top: &str) -> Result<Self, CgroupError> {
        let path = Path::new("/proc/self/mountinfo");
        let text = fsutil::read(path)?;
        Self::new(top, parse_mountinfo(&text, root))
    }

    /// The hierarchies the groups are made in.
    pub fn hierarchies(&self) -> &[Hierarchy] {
        &self.hierarchies
    }

    /// The top-level group name.
    pub fn top(&self) -> &str {
        &self.top
    }

    /// Where the hierarchy carrying `controller` is mounted.
    pub fn mount_of(&self, controller: &str) -> Option<&Path> {
        self.hierarchies
            .iter()
            .find(|h| h.has(controller))
            .map(|h| h.mount.as_path())
    }

    /// Usage of the group `rel` (relative to each hierarchy).
    fn group_stats(&self, rel: &str) -> Result<Stats, CgroupError> {
        let cpu_usage_nanos = fsutil::read_u64(&self.dir("cpuacct", rel)?.join("cpuacct.usage"))?;
        let mem = self.dir("memory", rel)?;
        let memory_usage_bytes = fsutil::read_u64(&mem.join("memory.usage_in_bytes"))?;
        let stat_path = mem.join("memory.stat");
        let stat = fsutil::read(&stat_path)?;
        let inactive = fsutil::keyed(&stat, "total_inactive_file")
            .or_else(|| fsutil::keyed(&stat, "inactive_file"))
            .unwrap_or(0);
        let pids = match self.mount_of("pids") {
            Some(m) => fsutil::read_u64(&m.join(rel).join("pids.current"))?,
            None => fsutil::procs(&mem)?.len() as u64,
        };
        Ok(Stats {
            cpu_usage_nanos,
            memory_usage_bytes,
            memory_working_set_bytes: memory_usage_bytes.saturating_sub(inactive),
            pids,
        })
    }

    /// The directory of relative group `rel` in the hierarchy of `controller`.
    fn dir(&self, controller: &str, rel: &str) -> Result<PathBuf, CgroupError> {
        self.mount_of(controller)
            .map(|m| m.join(rel))
            .ok_or_else(|| {
                CgroupError::Other(format!("cgroup v1 controller {controller} is not mounted"))
            })
    }

    /// Creates `rel` level by level in every hierarchy (cpusets filled from the parent), then
    /// applies `res` if given.
    fn ensure_group(&self, rel: &str, res: Option<&Resources>) -> Result<(), CgroupError> {
        for h in &self.hierarchies {
            let mut dir = h.mount.clone();
            for comp in rel.split('/') {
                dir.push(comp);
                fsutil::mkdir(&dir)?;
                if h.has("cpuset") {
                    init_cpuset(&dir)?;
                }
            }
        }
        if let Some(res) = res {
            self.apply(rel, res)?;
        }
        Ok(())
    }

    fn apply(&self, rel: &str, res: &Resources) -> Result<(), CgroupError> {
        let cpu = self.dir("cpu", rel)?;
        if let Some(shares) = res.cpu_shares {
            fsutil::write_file(&cpu.join("cpu.shares"), &shares.to_string())?;
        }
        let period = res.cpu_period.unwrap_or(DEFAULT_CPU_PERIOD);
        let quota = res.cpu_quota.filter(|q| *q > 0).unwrap_or(-1);
        set_cfs(&cpu, quota, period)?;

        let mem = self.dir("memory", rel)?;
        let limit = res.memory_limit.filter(|m| *m > 0).unwrap_or(-1);
        fsutil::write_file(&mem.join("memory.limit_in_bytes"), &limit.to_string())?;

        match self.mount_of("pids") {
            Some(m) => {
                let v = match res.pids_limit.filter(|p| *p > 0) {
                    Some(p) => p.to_string(),
                    None => "max".to_string(),
                };
                fsutil::write_file(&m.join(rel).join("pids.max"), &v)?;
            }
            None if res.pids_limit.is_some() => {
                tracing::warn!(
                    group = rel,
                    "pids controller not mounted; pids limit not set"
                );
            }
            None => {}
        }
        if let Some(rules) = &res.devices {
            match self.mount_of("devices") {
                Some(m) => super::devices::apply_v1(&m.join(rel), rules)?,
                None => tracing::warn!(
                    group = rel,
                    "devices controller not mounted; device access not restricted"
                ),
            }
        }
        Ok(())
    }

    /// Removes the whole top-level group (all pods, killing what still runs in them) in every
    /// hierarchy; for uninstalling and tests.
    pub fn remove_hierarchy(&self) -> Result<(), CgroupError> {
        self.remove_tree(&self.top)
    }

    fn remove_tree(&self, rel: &str) -> Result<(), CgroupError> {
        // Kill everywhere first (a process is in every hierarchy), then remove.
        let deadline = fsutil::remove_deadline();
        let mut first_err = None;
        for h in &self.hierarchies {
            for g in fsutil::subtree_bottom_up(&h.mount.join(rel))? {
                if let Err(e) = fsutil::kill_procs(&g) {
                    first_err.get_or_insert(e);
                }
            }
        }
        for h in &self.hierarchies {
            if let Err(e) = fsutil::kill_and_remove_tree(&h.mount.join(rel), deadline) {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

/// Copies `cpuset.cpus` and `cpuset.mems` from the parent when the group's are empty.
fn init_cpuset(dir: &Path) -> Result<(), CgroupError> {
    let Some(parent) = dir.parent() else {
        return Ok(());
    };
    for f in ["cpuset.cpus", "cpuset.mems"] {
        let own = dir.join(f);
        let current = match std::fs::read_to_string(&own) {
            Ok(s) => s,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(io_err(&own, e)),
        };
        if !current.trim().is_empty() {
            continue;
        }
        let from_parent = fsutil::read(&parent.join(f))?;
        if !from_parent.trim().is_empty() {
            fsutil::write_file(&own, from_parent.trim())?;
        }
    }
    Ok(())
}

/// Writes the CFS period and quota. The kernel refuses a pair whose ratio breaks the parent's
/// or children's bounds at any moment, so when the period is refused the quota goes first.
fn set_cfs(dir: &Path, quota: i64, period: u64) -> Result<(), CgroupError> {
    let p = dir.join("cpu.cfs_period_us");
    let q = dir.join("cpu.cfs_quota_us");
    match fsutil::write_file(&p, &period.to_string()) {
        Ok(()) => fsutil::write_file(&q, &quota.to_string()),
        Err(CgroupError::Io { ref source, .. }) if source.raw_os_error() == Some(libc::EINVAL) => {
            fsutil::write_file(&q, &quota.to_string())?;
            fsutil::write_file(&p, &period.to_string())
        }
        Err(e) => Err(e),
    }
}

impl CgroupManager for V1Manager {
    fn ensure_qos_hierarchy(&self, allocatable: &Resources) -> Result<(), CgroupError> {
        self.ensure_group(&self.top, Some(allocatable))?;
        self.ensure_group(&format!("{}/{BURSTABLE}", self.top), None)?;
        self.ensure_group(
            &format!("{}/{BESTEFFORT}", self.top),
            Some(&Resources {
                cpu_shares: Some(MIN_SHARES),
                ..Resources::default()
            }),
        )
    }

    fn update_qos(&self, burstable: &Resources) -> Result<(), CgroupError> {
        self.ensure_group(&format!("{}/{BURSTABLE}", self.top), Some(burstable))?;
        self.ensure_group(
            &format!("{}/{BESTEFFORT}", self.top),
            Some(&Resources {
                cpu_shares: Some(MIN_SHARES),
                ..Resources::default()
            }),
        )
    }

    fn ensure_pod(
        &self,
        pod_uid: &str,
        qos: QosClass,
        resources: &Resources,
    ) -> Result<String, CgroupError> {
        let rel = pod_group_name(&self.top, pod_uid, qos)?;
        self.ensure_group(&rel, Some(resources))?;
        Ok(rel)
    }

    fn ensure_container(
        &self,
        pod_uid: &str,
        qos: QosClass,
        container_id: &str,
        resources: &Resources,
    ) -> Result<Vec<PathBuf>, CgroupError> {
        let rel = container_group_name(&self.top, pod_uid, qos, container_id)?;
        self.ensure_group(&rel, Some(resources))?;
        Ok(self
            .hierarchies
            .iter()
            .map(|h| h.mount.join(&rel).join("cgroup.procs"))
            .collect())
    }

    fn oom_killed(&self, pod_uid: &str, qos: QosClass, container_id: &str) -> bool {
        let Ok(rel) = container_group_name(&self.top, pod_uid, qos, container_id) else {
            return false;
        };
        let Ok(dir) = self.dir("memory", &rel) else {
            return false;
        };
        std::fs::read_to_string(dir.join("memory.oom_control"))
            .ok()
            .and_then(|t| fsutil::keyed(&t, "oom_kill"))
            .is_some_and(|n| n > 0)
    }

    fn container_stats(
        &self,
        pod_uid: &str,
        qos: QosClass,
        container_id: &str,
    ) -> Result<Stats, CgroupError> {
        self.group_stats(&container_group_name(
            &self.top,
            pod_uid,
            qos,
            container_id,
        )?)
    }

    fn pod_stats(&self, pod_uid: &str, qos: QosClass) -> Result<Stats, CgroupError> {
        self.group_stats(&pod_group_name(&self.top, pod_uid, qos)?)
    }

    fn remove_container(
        &self,
        pod_uid: &str,
        qos: QosClass,
        container_id: &str,
    ) -> Result<(), CgroupError> {
        let rel = container_group_name(&self.top, pod_uid, qos, container_id)?;
        let deadline = fsutil::remove_deadline();
        let mut first_err = None;
        for h in &self.hierarchies {
            if let Err(e) = fsutil::rmdir_retry(&h.mount.join(&rel), deadline) {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    fn remove_pod(&self, pod_uid: &str, qos: QosClass) -> Result<(), CgroupError> {
        let rel = pod_group_name(&self.top, pod_uid, qos)?;
        self.remove_tree(&rel)
    }

    fn pods(&self) -> Result<Vec<String>, CgroupError> {
        let base = self.dir("memory", &self.top)?;
        list_pods(&base)
    }
}

/// Pod UIDs from `pod<uid>` directories directly in `base`, `base/burstable` and
/// `base/besteffort`; shared with v2.
pub(crate) fn list_pods(base: &Path) -> Result<Vec<String>, CgroupError> {
    let mut out = Vec::new();
    for dir in [
        base.to_path_buf(),
        base.join(BURSTABLE),
        base.join(BESTEFFORT),
    ] {
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io_err(&dir, e)),
        };
        for entry in entries {
            let entry = entry.map_err(|e| io_err(&dir, e))?;
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let name = entry.file_name();
            if let Some(uid) = name.to_str().and_then(|n| n.strip_prefix("pod"))
                && !uid.is_empty()
            {
                out.push(uid.to_string());
            }
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroups::{CgroupVersion, detect_version, join};

    fn read(p: impl AsRef<Path>) -> String {
        std::fs::read_to_string(p.as_ref())
            .unwrap_or_else(|e| panic!("{}: {e}", p.as_ref().display()))
            .trim()
            .to_string()
    }

    /// Mountinfo lines as this machine has them, with mount points under `root`.
    fn mountinfo(root: &Path) -> String {
        let r = root.display();
        format!(
            "23 1 0:21 / /sys rw,nosuid - sysfs sysfs rw\n\
             31 23 0:28 / {r} rw,relatime - tmpfs tmpfs rw,mode=755\n\
             32 31 0:29 / {r}/cpu rw,relatime - cgroup cgroup rw,cpu\n\
             33 31 0:30 / {r}/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n\
             34 31 0:31 / {r}/cpuset rw,relatime - cgroup cgroup rw,cpuset\n\
             35 31 0:32 / {r}/memory rw,relatime shared:9 - cgroup cgroup rw,memory\n\
             39 31 0:36 / {r}/pids rw,relatime - cgroup cgroup rw,pids\n\
             40 31 0:37 / {r}/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd\n\
             41 31 0:38 / {r}/unified rw,relatime - cgroup2 cgroup2 rw\n\
             50 1 0:32 / /elsewhere/memory rw,relatime - cgroup cgroup rw,memory\n"
        )
    }

    #[test]
    fn mountinfo_parsing() {
        let h = parse_mountinfo(
            &mountinfo(Path::new("/sys/fs/cgroup")),
            Path::new("/sys/fs/cgroup"),
        );
        let names: Vec<String> = h.iter().map(|h| h.controllers.join(",")).collect();
        assert_eq!(
            names,
            ["cpu", "cpuacct", "cpuset", "memory", "pids", "name=systemd"]
        );
        assert_eq!(h[3].mount, Path::new("/sys/fs/cgroup/memory"));

        let combined = "1 0 0:1 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n\
                        2 0 0:1 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n\
                        3 0 0:2 / /sys/fs/cgroup/net\\040cls rw - cgroup cgroup rw,net_cls,net_prio,noprefix\n\
                        garbage line\n\
                        4 0 0:3 / /sys/fs/cgroup - cgroup2 cgroup2 rw,nsdelegate\n";
        let h = parse_mountinfo(combined, Path::new("/sys/fs/cgroup"));
        assert_eq!(h.len(), 2);
        assert_eq!(h[0].controllers, ["cpu", "cpuacct"]);
        assert_eq!(h[1].controllers, ["net_cls", "net_prio"]);
        assert_eq!(h[1].mount, Path::new("/sys/fs/cgroup/net cls"));
        assert!(parse_mountinfo(combined, Path::new("/other")).is_empty());
    }

    #[test]
    fn fixture_tree() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        for c in [
            "cpu", "cpuacct", "cpuset", "memory", "pids", "systemd", "unified",
        ] {
            std::fs::create_dir(root.join(c)).unwrap();
        }
        std::fs::write(root.join("cpuset/cpuset.cpus"), "0-3\n").unwrap();
        std::fs::write(root.join("cpuset/cpuset.mems"), "0\n").unwrap();
        let m = V1Manager::new("kubepods", parse_mountinfo(&mountinfo(root), root)).unwrap();
        assert_eq!(m.mount_of("cpuacct"), Some(root.join("cpuacct").as_path()));

        m.ensure_qos_hierarchy(&Resources {
            cpu_shares: Some(3584),
            memory_limit: Some(7 << 30),
            pids_limit: Some(4096),
            ..Resources::default()
        })
        .unwrap();
        for c in ["cpu", "cpuacct", "cpuset", "memory", "pids", "systemd"] {
            for g in ["kubepods", "kubepods/burstable", "kubepods/besteffort"] {
                assert!(root.join(c).join(g).is_dir(), "{c}/{g}");
            }
        }
        assert!(!root.join("unified/kubepods").exists());
        assert_eq!(read(root.join("cpu/kubepods/cpu.shares")), "3584");
        assert_eq!(read(root.join("cpu/kubepods/cpu.cfs_quota_us")), "-1");
        assert_eq!(read(root.join("cpu/kubepods/cpu.cfs_period_us")), "100000");
        assert_eq!(
            read(root.join("memory/kubepods/memory.limit_in_bytes")),
            (7u64 << 30).to_string()
        );
        assert_eq!(read(root.join("pids/kubepods/pids.max")), "4096");
        assert_eq!(read(root.join("cpu/kubepods/besteffort/cpu.shares")), "2");
        assert!(!root.join("cpu/kubepods/burstable/cpu.shares").exists());
        assert_eq!(
            read(root.join("cpuset/kubepods/burstable/cpuset.cpus")),
            "0-3"
        );
        m.update_qos(&Resources {
            cpu_shares: Some(1024),
            ..Resources::default()
        })
        .unwrap();
        assert_eq!(read(root.join("cpu/kubepods/burstable/cpu.shares")), "1024");

        let rel = m
            .ensure_pod(
                "u1",
                QosClass::Guaranteed,
                &Resources {
                    cpu_shares: Some(1024),
                    cpu_quota: Some(100_000),
                    cpu_period: None,
                    memory_limit: Some(1 << 30),
                    pids_limit: None,
                    devices: None,
                },
            )
            .unwrap();
        assert_eq!(rel, "kubepods/podu1");
        assert_eq!(
            read(root.join("cpu/kubepods/podu1/cpu.cfs_quota_us")),
            "100000"
        );
        assert_eq!(read(root.join("pids/kubepods/podu1/pids.max")), "max");

        let paths = m
            .ensure_container(
                "u1",
                QosClass::Guaranteed,
                "c1",
                &Resources {
                    cpu_shares: Some(512),
                    cpu_quota: Some(50_000),
                    cpu_period: Some(100_000),
                    memory_limit: Some(512 << 20),
                    pids_limit: Some(20),
                    devices: None,
                },
            )
            .unwrap();
        let want: Vec<PathBuf> = ["cpu", "cpuacct", "cpuset", "memory", "pids", "systemd"]
            .iter()
            .map(|c| root.join(c).join("kubepods/podu1/c1/cgroup.procs"))
            .collect();
        assert_eq!(paths, want);
        let c = "kubepods/podu1/c1";
        assert_eq!(read(root.join("cpu").join(c).join("cpu.shares")), "512");
        assert_eq!(
            read(root.join("cpu").join(c).join("cpu.cfs_quota_us")),
            "50000"
        );
        assert_eq!(
            read(root.join("memory").join(c).join("memory.limit_in_bytes")),
            "536870912"
        );
        assert_eq!(read(root.join("pids").join(c).join("pids.max")), "20");
        assert_eq!(read(root.join("cpuset").join(c).join("cpuset.cpus")), "0-3");
        assert_eq!(read(root.join("cpuset").join(c).join("cpuset.mems")), "0");
        assert!(
            !root
                .join("memory")
                .join(c)
                .join("memory.memsw.limit_in_bytes")
                .exists()
        );

        // OOM and stats.
        assert!(!m.oom_killed("u1", QosClass::Guaranteed, "c1"));
        let mem = root.join("memory").join(c);
        std::fs::write(
            mem.join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
        )
        .unwrap();
        assert!(!m.oom_killed("u1", QosClass::Guaranteed, "c1"));
        std::fs::write(
            mem.join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
        )
        .unwrap();
        assert!(m.oom_killed("u1", QosClass::Guaranteed, "c1"));
        assert!(!m.oom_killed("u1", QosClass::Burstable, "c1"));

        assert!(m.container_stats("u1", QosClass::Guaranteed, "c1").is_err());
        std::fs::write(
            root.join("cpuacct").join(c).join("cpuacct.usage"),
            "123456789\n",
        )
        .unwrap();
        std::fs::write(mem.join("memory.usage_in_bytes"), "10485760\n").unwrap();
        std::fs::write(
            mem.join("memory.stat"),
            "cache 1\ninactive_file 99\ntotal_cache 1\ntotal_inactive_file 4194304\n",
        )
        .unwrap();
        std::fs::write(root.join("pids").join(c).join("pids.current"), "4\n").unwrap();
        assert_eq!(
            m.container_stats("u1", QosClass::Guaranteed, "c1").unwrap(),
            Stats {
                cpu_usage_nanos: 123_456_789,
                memory_usage_bytes: 10_485_760,
                memory_working_set_bytes: 6_291_456,
                pids: 4,
            }
        );

        m.ensure_pod("u2", QosClass::BestEffort, &Resources::default())
            .unwrap();
        assert_eq!(m.pods().unwrap(), vec!["u1", "u2"]);
        m.remove_container("u1", QosClass::Guaranteed, "gone")
            .unwrap();
        m.remove_pod("gone", QosClass::Burstable).unwrap();
    }

    #[test]
    fn required_controllers() {
        let h = parse_mountinfo(
            "1 0 0:1 / /c/memory rw - cgroup cgroup rw,memory\n\
             2 0 0:1 / /c/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n",
            Path::new("/c"),
        );
        assert!(V1Manager::new("kubepods", h.clone()).is_ok());
        let e = V1Manager::new("kubepods", h[..1].to_vec()).unwrap_err();
        assert!(e.to_string().contains("cpu"), "{e}");
        assert!(V1Manager::new("", h).is_err());
    }

    // ---- the real kernel ----

    /// A manager over this machine's v1 hierarchies with a unique top-level name, removed
    /// (with everything under it) on drop; None (after a visible SKIP) when not root or not v1.
    struct Real(V1Manager);

    impl Drop for Real {
        fn drop(&mut self) {
            if let Err(e) = self.0.remove_hierarchy() {
                eprintln!("cleanup of {}: {e}", self.0.top());
            }
        }
    }

    fn real(tag: &str) -> Option<Real> {
        let root = Path::new("/sys/fs/cgroup");
        // SAFETY: geteuid has no preconditions.
        let euid = unsafe { libc::geteuid() };
        if euid != 0
            || !root.join("memory").is_dir()
            || detect_version(root).ok() != Some(CgroupVersion::V1)
        {
            eprintln!("SKIP: real cgroup v1 test {tag} needs root and v1 at /sys/fs/cgroup");
            return None;
        }
        let top = format!("k1s-test-{}-{tag}", std::process::id());
        Some(Real(V1Manager::from_mountinfo(root, &top).unwrap()))
    }

    fn group_file(m: &V1Manager, controller: &str, rel: &str, file: &str) -> String {
        read(m.mount_of(controller).unwrap().join(rel).join(file))
    }

    /// Spawns `sh -c script` waiting for a line on stdin before running the rest; returns the
    /// child (its stdin open).
    fn gated(script: &str) -> std::process::Child {
        std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("read _go; {script}"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    }

    fn go(child: &mut std::process::Child) {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"go\n").unwrap();
    }

    #[test]
    fn real_kernel_limits_join_and_remove() {
        use std::os::unix::process::ExitStatusExt;
        let Some(r) = real("join") else { return };
        let m = &r.0;
        m.ensure_qos_hierarchy(&Resources {
            cpu_shares: Some(2048),
            memory_limit: Some(1 << 30),
            pids_limit: Some(1000),
            ..Resources::default()
        })
        .unwrap();
        let top = m.top().to_string();
        assert_eq!(
            group_file(m, "memory", &top, "memory.limit_in_bytes"),
            "1073741824"
        );
        assert_eq!(group_file(m, "cpu", &top, "cpu.shares"), "2048");
        assert_eq!(
            group_file(m, "cpu", &format!("{top}/besteffort"), "cpu.shares"),
            "2"
        );

        let pod = m
            .ensure_pod(
                "u1",
                QosClass::Burstable,
                &Resources {
                    cpu_shares: Some(512),
                    cpu_quota: Some(50_000),
                    cpu_period: Some(100_000),
                    memory_limit: Some(256 << 20),
                    pids_limit: Some(50),
                    devices: None,
                },
            )
            .unwrap();
        assert_eq!(pod, format!("{top}/burstable/podu1"));
        let paths = m
            .ensure_container(
                "u1",
                QosClass::Burstable,
                "c1",
                &Resources {
                    cpu_shares: Some(256),
                    cpu_quota: Some(20_000),
                    cpu_period: Some(100_000),
                    memory_limit: Some(64 << 20),
                    pids_limit: None,
                    devices: None,
                },
            )
            .unwrap();
        let rel = format!("{pod}/c1");
        assert_eq!(group_file(m, "cpu", &rel, "cpu.cfs_quota_us"), "20000");
        assert_eq!(group_file(m, "cpu", &rel, "cpu.shares"), "256");
        assert_eq!(
            group_file(m, "memory", &rel, "memory.limit_in_bytes"),
            "67108864"
        );
        assert_eq!(group_file(m, "pids", &pod, "pids.max"), "50");
        assert!(!group_file(m, "cpuset", &rel, "cpuset.cpus").is_empty());

        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        join(&paths, child.id()).unwrap();
        let own = read(format!("/proc/{}/cgroup", child.id()));
        for c in ["cpu", "cpuacct", "cpuset", "memory", "pids"] {
            let line = own
                .lines()
                .find(|l| {
                    l.split(':')
                        .nth(1)
                        .is_some_and(|cs| cs.split(',').any(|x| x == c))
                })
                .unwrap_or_else(|| panic!("no {c} line in {own}"));
            assert!(line.ends_with(&format!(":/{rel}")), "{c}: {line}");
        }
        let stats = m.container_stats("u1", QosClass::Burstable, "c1").unwrap();
        assert_eq!(stats.pids, 1, "{stats:?}");
        assert!(m.pods().unwrap().contains(&"u1".to_string()));
        assert!(!m.oom_killed("u1", QosClass::Burstable, "c1"));

        // A group with a live process cannot go (after the retries)...
        let t0 = std::time::Instant::now();
        let e = m
            .remove_container("u1", QosClass::Burstable, "c1")
            .unwrap_err();
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(3),
            "{:?}",
            t0.elapsed()
        );
        assert!(e.to_string().contains("c1"), "{e}");
        // ...but removing the pod kills it first.
        m.remove_pod("u1", QosClass::Burstable).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
        for h in m.hierarchies() {
            assert!(!h.mount.join(&pod).exists(), "{}", h.mount.display());
        }
        assert!(!m.pods().unwrap().contains(&"u1".to_string()));
    }

    #[test]
    fn real_kernel_oom_kill() {
        use std::os::unix::process::ExitStatusExt;
        let Some(r) = real("oom") else { return };
        let m = &r.0;
        m.ensure_qos_hierarchy(&Resources::default()).unwrap();
        m.ensure_pod("u2", QosClass::Guaranteed, &Resources::default())
            .unwrap();
        let limit = Resources {
            memory_limit: Some(32 << 20),
            ..Resources::default()
        };
        let paths = m
            .ensure_container("u2", QosClass::Guaranteed, "hog", &limit)
            .unwrap();
        let rel = format!("{}/podu2/hog", m.top());
        assert_eq!(
            group_file(m, "memory", &rel, "memory.limit_in_bytes"),
            "33554432"
        );
        let quiet = m
            .ensure_container("u2", QosClass::Guaranteed, "quiet", &limit)
            .unwrap();
        assert_eq!(quiet.len(), paths.len());

        let hog = if Path::new("/usr/bin/python3").exists() {
            "exec /usr/bin/python3 -c 'b = bytearray(200 * 1024 * 1024); print(len(b))'"
        } else {
            "x=a; while :; do x=$x$x; done"
        };
        let mut child = gated(hog);
        join(&paths, child.id()).unwrap();
        go(&mut child);
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
        assert!(m.oom_killed("u2", QosClass::Guaranteed, "hog"));
        assert!(!m.oom_killed("u2", QosClass::Guaranteed, "quiet"));
        m.remove_container("u2", QosClass::Guaranteed, "hog")
            .unwrap();
        m.remove_pod("u2", QosClass::Guaranteed).unwrap();
    }

    #[test]
    fn real_kernel_pids_limit() {
        let Some(r) = real("pids") else { return };
        let m = &r.0;
        if m.mount_of("pids").is_none() {
            eprintln!("SKIP: no pids hierarchy");
            return;
        }
        m.ensure_qos_hierarchy(&Resources::default()).unwrap();
        m.ensure_pod("u3", QosClass::BestEffort, &Resources::default())
            .unwrap();
        let paths = m
            .ensure_container(
                "u3",
                QosClass::BestEffort,
                "forker",
                &Resources {
                    pids_limit: Some(3),
                    ..Resources::default()
                },
            )
            .unwrap();
        let rel = format!("{}/besteffort/podu3/forker", m.top());
        assert_eq!(group_file(m, "pids", &rel, "pids.max"), "3");
        // The shell and two sleeps fit; the third and fourth forks fail.
        let mut child = gated("sleep 20 & sleep 20 & sleep 20 & sleep 20 & wait");
        join(&paths, child.id()).unwrap();
        go(&mut child);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let refused = loop {
            let events = group_file(m, "pids", &rel, "pids.events");
            let n = crate::cgroups::fsutil::keyed(&events, "max").unwrap_or(0);
            if n > 0 || std::time::Instant::now() > deadline {
                break n;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        assert!(refused > 0, "no fork was refused");
        let current: u64 = group_file(m, "pids", &rel, "pids.current").parse().unwrap();
        assert!(current <= 3, "pids.current {current}");
        // remove_pod kills the shell and whatever sleeps it started.
        m.remove_pod("u3", QosClass::BestEffort).unwrap();
        let _ = child.wait().unwrap();
        assert!(!m.mount_of("pids").unwrap().join(&rel).exists());
    }

    #[test]
    fn real_kernel_device_access() {
        use crate::cgroups::devices::container_rules;
        let Some(r) = real("devices") else { return };
        let m = &r.0;
        if m.mount_of("devices").is_none() {
            eprintln!("SKIP: no devices hierarchy");
            return;
        }
        m.ensure_qos_hierarchy(&Resources::default()).unwrap();
        m.ensure_pod("u4", QosClass::BestEffort, &Resources::default())
            .unwrap();
        let ensure = |id: &str, privileged: bool| {
            let res = Resources {
                devices: Some(container_rules(privileged, &[])),
                ..Resources::default()
            };
            m.ensure_container("u4", QosClass::BestEffort, id, &res)
                .unwrap()
        };
        let confined = ensure("confined", false);
        let rel = format!("{}/besteffort/podu4/confined", m.top());
        let list = group_file(m, "devices", &rel, "devices.list");
        assert!(list.lines().any(|l| l == "c 1:3 rwm"), "{list}");
        assert!(!list.contains("a *:* rwm"), "{list}");
        // Again: nothing to change, and the same list.
        assert_eq!(ensure("confined", false), confined);
        assert_eq!(group_file(m, "devices", &rel, "devices.list"), list);
        let privileged = ensure("privileged", true);

        // /dev/null opens; /dev/kmsg (c 1:11) does not, though a node for it can be made.
        let dir = tempfile::tempdir().unwrap();
        let script = format!(
            "true </dev/null || exit 10; true </dev/kmsg && exit 11; \
             mknod {0}/kmsg c 1 11 || exit 12; true <{0}/kmsg && exit 13; exit 0",
            dir.path().display()
        );
        let run = |paths: &[PathBuf], script: &str| {
            let mut child = gated(script);
            join(paths, child.id()).unwrap();
            go(&mut child);
            child.wait().unwrap().code()
        };
        assert_eq!(run(&confined, &script), Some(0));
        assert_eq!(run(&privileged, "exec true </dev/kmsg"), Some(0));
        m.remove_pod("u4", QosClass::BestEffort).unwrap();
    }
}
