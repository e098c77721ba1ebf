//! The cgroup v2 (unified) manager: upstream's cgroupfs driver over one cgroup2 mount.
//!
//! Owns the tree under an injectable root (`/sys/fs/cgroup`, or a fixture directory in
//! tests): enabling controllers level by level with `cgroup.subtree_control` (`cpu`, `memory`,
//! `pids`, `cpuset`, `io`, whichever the parent offers in `cgroup.controllers`), and per group:
//!
//! - `cpu.weight` from `cpu.shares` ([`shares_to_weight`]); `cpu.max` as `<quota> <period>`
//!   or `max <period>`;
//! - `memory.max` (`max` = unlimited); OOM kills from `memory.events` `oom_kill`; usage from
//!   `memory.current` and `memory.stat` `inactive_file`;
//! - `pids.max`, `pids.current`; CPU time from `cpu.stat` `usage_usec`;
//! - device access: an eBPF device program ([`super::devices::apply_v2`]).
//!
//! Writes for a controller the root does not offer are skipped (an unlimited value silently, a
//! limit with a warning). `cgroup.controllers` missing in a freshly made group means a fixture
//! tree, not cgroupfs; the parent's enabled set stands in for it then.
//!
//! Plain file IO rather than `cgroups-rs`, for the reasons given in [`super::v1`].

use std::collections::BTreeSet;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use super::fsutil::{self, io_err};
use super::resources::{DEFAULT_CPU_PERIOD, MIN_SHARES, shares_to_weight};
use super::v1::list_pods;
use super::{
    BESTEFFORT, BURSTABLE, CgroupError, CgroupManager, QosClass, Resources, Stats, check_top,
    container_group_name, pod_group_name,
};

/// Controllers enabled for the kubelet's groups, in the order they are enabled.
const WANTED: &[&str] = &["cpuset", "cpu", "io", "memory", "pids"];
/// Controllers whose absence or failure to enable is an error; the others are best effort.
const REQUIRED: &[&str] = &["cpu", "memory", "pids"];

/// The cgroup v2 [`CgroupManager`].
#[derive(Debug, Clone)]
pub struct V2Manager {
    root: PathBuf,
    top: String,
    /// What the root offers (`<root>/cgroup.controllers`).
    available: BTreeSet<String>,
}

/// The controller names in `cgroup.controllers` or `cgroup.subtree_control` (a leading `+`,
/// which only a fixture file can hold, is dropped).
fn words(s: &str) -> BTreeSet<String> {
    s.split_whitespace()
        .map(|w| w.trim_start_matches('+').to_string())
        .filter(|w| !w.is_empty())
        .collect()
}

impl V2Manager {
    /// A manager over the unified hierarchy at `root` with `top` as the top-level group name
    /// (`kubepods`). Reads `<root>/cgroup.controllers`; fails when it cannot.
    pub fn new(root: impl Into<PathBuf>, top: &str) -> Result<Self, CgroupError> {
        check_top(top)?;
        let root = root.into();
        let available = words(&fsutil::read(&root.join("cgroup.controllers"))?);
        Ok(Self {
            root,
            top: top.to_string(),
            available,
        })
    }

    /// The mount (or fixture) root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The top-level group name.
    pub fn top(&self) -> &str {
        &self.top
    }

    /// The controllers the root offers.
    pub fn available(&self) -> &BTreeSet<String> {
        &self.available
    }

    /// Usage of the group `rel`.
    fn group_stats(&self, rel: &str) -> Result<Stats, CgroupError> {
        let dir = self.root.join(rel);
        let cpu_stat_path = dir.join("cpu.stat");
        let cpu_stat = fsutil::read(&cpu_stat_path)?;
        let usage_usec = fsutil::keyed(&cpu_stat, "usage_usec")
            .ok_or_else(|| fsutil::parse_err(&cpu_stat_path, "no usage_usec"))?;
        let memory_usage_bytes = fsutil::read_u64(&dir.join("memory.current"))?;
        let stat = fsutil::read(&dir.join("memory.stat"))?;
        let inactive = fsutil::keyed(&stat, "inactive_file").unwrap_or(0);
        let pids = if self.has("pids") {
            fsutil::read_u64(&dir.join("pids.current"))?
        } else {
            fsutil::procs(&dir)?.len() as u64
        };
        Ok(Stats {
            cpu_usage_nanos: usage_usec.saturating_mul(1000),
            memory_usage_bytes,
            memory_working_set_bytes: memory_usage_bytes.saturating_sub(inactive),
            pids,
        })
    }

    fn has(&self, controller: &str) -> bool {
        self.available.contains(controller)
    }

    /// Enables the wanted controllers among `offered` in `dir`'s `cgroup.subtree_control`;
    /// returns what is enabled there afterwards.
    fn enable(
        &self,
        dir: &Path,
        offered: &BTreeSet<String>,
    ) -> Result<BTreeSet<String>, CgroupError> {
        let path = dir.join("cgroup.subtree_control");
        let mut enabled = match std::fs::read_to_string(&path) {
            Ok(s) => words(&s),
            Err(e) if e.kind() == ErrorKind::NotFound => BTreeSet::new(),
            Err(e) => return Err(io_err(&path, e)),
        };
        let missing: Vec<&str> = WANTED
            .iter()
            .copied()
            .filter(|c| offered.contains(*c) && !enabled.contains(*c))
            .collect();
        if missing.is_empty() {
            return Ok(enabled);
        }
        let all = missing
            .iter()
            .map(|c| format!("+{c}"))
            .collect::<Vec<_>>()
            .join(" ");
        if fsutil::write_file(&path, &all).is_ok() {
            enabled.extend(missing.iter().map(|c| c.to_string()));
            return Ok(enabled);
        }
        // One refused controller fails the whole write: retry one by one.
        for c in missing {
            match fsutil::write_file(&path, &format!("+{c}")) {
                Ok(()) => {
                    enabled.insert(c.to_string());
                }
                Err(e) if REQUIRED.contains(&c) => return Err(e),
                Err(e) => tracing::warn!(controller = c, "not enabled: {e}"),
            }
        }
        Ok(enabled)
    }

    /// Creates `rel` level by level, enabling controllers in the root and every level but the
    /// last unless `leaf_enables`, then applies `res` if given.
    fn ensure_group(
        &self,
        rel: &str,
        leaf_enables: bool,
        res: Option<&Resources>,
    ) -> Result<PathBuf, CgroupError> {
        let mut enabled = self.enable(&self.root, &self.available)?;
        let comps: Vec<&str> = rel.split('/').collect();
        let mut dir = self.root.clone();
        for (i, comp) in comps.iter().enumerate() {
            dir.push(comp);
            fsutil::mkdir(&dir)?;
            if i + 1 == comps.len() && !leaf_enables {
                break;
            }
            let offered_path = dir.join("cgroup.controllers");
            let offered = match std::fs::read_to_string(&offered_path) {
                Ok(s) => words(&s),
                Err(e) if e.kind() == ErrorKind::NotFound => enabled.clone(),
                Err(e) => return Err(io_err(&offered_path, e)),
            };
            enabled = self.enable(&dir, &offered)?;
        }
        if let Some(res) = res {
            self.apply(&dir, res)?;
        }
        Ok(dir)
    }

    fn apply(&self, dir: &Path, res: &Resources) -> Result<(), CgroupError> {
        if self.has("cpu") {
            if let Some(shares) = res.cpu_shares {
                fsutil::write_file(
                    &dir.join("cpu.weight"),
                    &shares_to_weight(shares).to_string(),
                )?;
            }
            let period = res.cpu_period.unwrap_or(DEFAULT_CPU_PERIOD);
            let max = match res.cpu_quota.filter(|q| *q > 0) {
                Some(q) => format!("{q} {period}"),
                None => format!("max {period}"),
            };
            fsutil::write_file(&dir.join("cpu.max"), &max)?;
        } else if res.cpu_shares.is_some() || res.cpu_quota.is_some() {
            tracing::warn!(group = %dir.display(), "cpu controller not available; cpu limits not set");
        }
        let limit = |v: Option<i64>| match v.filter(|v| *v > 0) {
            Some(v) => v.to_string(),
            None => "max".to_string(),
        };
        if self.has("memory") {
            fsutil::write_file(&dir.join("memory.max"), &limit(res.memory_limit))?;
        } else if res.memory_limit.is_some() {
            tracing::warn!(group = %dir.display(), "memory controller not available; memory limit not set");
        }
        if self.has("pids") {
            fsutil::write_file(&dir.join("pids.max"), &limit(res.pids_limit))?;
        } else if res.pids_limit.is_some() {
            tracing::warn!(group = %dir.display(), "pids controller not available; pids limit not set");
        }
        if let Some(rules) = &res.devices {
            super::devices::apply_v2(dir, rules)?;
        }
        Ok(())
    }

    /// Kills what runs in `rel` and below (`cgroup.kill` where the kernel has it, else SIGKILL
    /// to each process listed) and removes the groups bottom-up.
    fn remove_tree(&self, rel: &str) -> Result<(), CgroupError> {
        let dir = self.root.join(rel);
        if !dir.exists() {
            return Ok(());
        }
        let kill = dir.join("cgroup.kill");
        if kill.exists() {
            fsutil::write_file(&kill, "1")?;
        }
        fsutil::kill_and_remove_tree(&dir, fsutil::remove_deadline())
    }

    /// Removes the whole top-level group (all pods, killing what still runs in them); for
    /// uninstalling and tests.
    pub fn remove_hierarchy(&self) -> Result<(), CgroupError> {
        self.remove_tree(&self.top)
    }
}

impl CgroupManager for V2Manager {
    fn ensure_qos_hierarchy(&self, allocatable: &Resources) -> Result<(), CgroupError> {
        self.ensure_group(&self.top, true, Some(allocatable))?;
        self.ensure_group(&format!("{}/{BURSTABLE}", self.top), true, None)?;
        self.ensure_group(
            &format!("{}/{BESTEFFORT}", self.top),
            true,
            Some(&Resources {
                cpu_shares: Some(MIN_SHARES),
                ..Resources::default()
            }),
        )?;
        Ok(())
    }

    fn update_qos(&self, burstable: &Resources) -> Result<(), CgroupError> {
        self.ensure_group(&format!("{}/{BURSTABLE}", self.top), true, Some(burstable))?;
        self.ensure_group(
            &format!("{}/{BESTEFFORT}", self.top),
            true,
            Some(&Resources {
                cpu_shares: Some(MIN_SHARES),
                ..Resources::default()
            }),
        )?;
        Ok(())
    }

    fn ensure_pod(
        &self,
        pod_uid: &str,
        qos: QosClass,
        resources: &Resources,
    ) -> Result<String, CgroupError> {
        let rel = pod_group_name(&self.top, pod_uid, qos)?;
        self.ensure_group(&rel, true, Some(resources))?;
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
        // The container's group holds its processes, so it enables nothing (no internal
        // processes in v2).
        let dir = self.ensure_group(&rel, false, Some(resources))?;
        Ok(vec![dir.join("cgroup.procs")])
    }

    fn oom_killed(&self, pod_uid: &str, qos: QosClass, container_id: &str) -> bool {
        let Ok(rel) = container_group_name(&self.top, pod_uid, qos, container_id) else {
            return false;
        };
        std::fs::read_to_string(self.root.join(rel).join("memory.events"))
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
        fsutil::rmdir_retry(&self.root.join(rel), fsutil::remove_deadline())
    }

    fn remove_pod(&self, pod_uid: &str, qos: QosClass) -> Result<(), CgroupError> {
        let rel = pod_group_name(&self.top, pod_uid, qos)?;
        self.remove_tree(&rel)
    }

    fn pods(&self) -> Result<Vec<String>, CgroupError> {
        list_pods(&self.root.join(&self.top))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fixture root offering `controllers`, with `enabled` already in its subtree_control.
    fn fixture(controllers: &str, enabled: &str) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("cgroup.controllers"),
            format!("{controllers}\n"),
        )
        .unwrap();
        std::fs::write(
            d.path().join("cgroup.subtree_control"),
            format!("{enabled}\n"),
        )
        .unwrap();
        d
    }

    fn read(p: impl AsRef<Path>) -> String {
        std::fs::read_to_string(p.as_ref())
            .unwrap_or_else(|e| panic!("{}: {e}", p.as_ref().display()))
            .trim()
            .to_string()
    }

    #[test]
    fn tree_controllers_and_limits() {
        let d = fixture("cpuset cpu io memory hugetlb pids rdma misc", "");
        let root = d.path();
        let m = V2Manager::new(root, "kubepods").unwrap();
        m.ensure_qos_hierarchy(&Resources {
            cpu_shares: Some(3584),
            memory_limit: Some(7 << 30),
            pids_limit: Some(4096),
            ..Resources::default()
        })
        .unwrap();
        let all = "+cpuset +cpu +io +memory +pids";
        assert_eq!(read(root.join("cgroup.subtree_control")), all);
        let kp = root.join("kubepods");
        assert_eq!(read(kp.join("cgroup.subtree_control")), all);
        assert_eq!(read(kp.join("cpu.weight")), "137");
        assert_eq!(read(kp.join("cpu.max")), "max 100000");
        assert_eq!(read(kp.join("memory.max")), (7u64 << 30).to_string());
        assert_eq!(read(kp.join("pids.max")), "4096");
        assert_eq!(read(kp.join("besteffort/cpu.weight")), "1");
        assert_eq!(read(kp.join("besteffort/memory.max")), "max");
        assert_eq!(read(kp.join("burstable/cgroup.subtree_control")), all);
        assert!(!kp.join("burstable/cpu.weight").exists());

        m.update_qos(&Resources {
            cpu_shares: Some(1024),
            ..Resources::default()
        })
        .unwrap();
        assert_eq!(read(kp.join("burstable/cpu.weight")), "39");

        let pod = Resources {
            cpu_shares: Some(512),
            cpu_quota: Some(50_000),
            cpu_period: Some(100_000),
            memory_limit: Some(256 << 20),
            pids_limit: Some(100),
            devices: None,
        };
        let rel = m.ensure_pod("u1", QosClass::Burstable, &pod).unwrap();
        assert_eq!(rel, "kubepods/burstable/podu1");
        let pd = root.join(&rel);
        assert_eq!(read(pd.join("cpu.weight")), "20");
        assert_eq!(read(pd.join("cpu.max")), "50000 100000");
        assert_eq!(read(pd.join("memory.max")), "268435456");
        assert_eq!(read(pd.join("pids.max")), "100");
        assert_eq!(read(pd.join("cgroup.subtree_control")), all);

        let paths = m
            .ensure_container(
                "u1",
                QosClass::Burstable,
                "c1",
                &Resources {
                    cpu_shares: Some(2),
                    cpu_quota: Some(1000),
                    cpu_period: Some(50_000),
                    ..Resources::default()
                },
            )
            .unwrap();
        let cd = pd.join("c1");
        assert_eq!(paths, vec![cd.join("cgroup.procs")]);
        assert!(!cd.join("cgroup.subtree_control").exists());
        assert_eq!(read(cd.join("cpu.weight")), "1");
        assert_eq!(read(cd.join("cpu.max")), "1000 50000");
        assert_eq!(read(cd.join("memory.max")), "max");
        assert_eq!(read(cd.join("pids.max")), "max");

        // Updating rewrites, and re-enabling writes nothing new.
        std::fs::write(
            root.join("cgroup.subtree_control"),
            "cpuset cpu io memory pids\n",
        )
        .unwrap();
        m.ensure_pod("u1", QosClass::Burstable, &Resources::default())
            .unwrap();
        assert_eq!(
            read(root.join("cgroup.subtree_control")),
            "cpuset cpu io memory pids"
        );
        assert_eq!(read(pd.join("cpu.max")), "max 100000");
        assert_eq!(read(pd.join("memory.max")), "max");
        assert_eq!(read(pd.join("cpu.weight")), "20");

        m.ensure_pod("u2", QosClass::Guaranteed, &Resources::default())
            .unwrap();
        m.ensure_pod("u3", QosClass::BestEffort, &Resources::default())
            .unwrap();
        assert!(root.join("kubepods/podu2").is_dir());
        assert!(root.join("kubepods/besteffort/podu3").is_dir());
        assert_eq!(m.pods().unwrap(), vec!["u1", "u2", "u3"]);

        // Removing what is not there is fine.
        m.remove_container("u1", QosClass::Burstable, "nope")
            .unwrap();
        m.remove_pod("nope", QosClass::Guaranteed).unwrap();

        for bad in ["", "..", "a/b"] {
            assert!(m.ensure_pod(bad, QosClass::Burstable, &pod).is_err());
            assert!(
                m.ensure_container("u1", QosClass::Burstable, bad, &pod)
                    .is_err()
            );
            assert!(!m.oom_killed(bad, QosClass::Burstable, "c1"));
        }
    }

    #[test]
    fn only_offered_controllers() {
        let d = fixture("cpu memory hugetlb", "memory");
        let root = d.path();
        let m = V2Manager::new(root, "k1s/pods").unwrap();
        m.ensure_pod(
            "u1",
            QosClass::Guaranteed,
            &Resources {
                pids_limit: Some(10),
                memory_limit: Some(1 << 20),
                ..Resources::default()
            },
        )
        .unwrap();
        assert_eq!(read(root.join("cgroup.subtree_control")), "+cpu");
        let pd = root.join("k1s/pods/podu1");
        assert_eq!(
            read(root.join("k1s/cgroup.subtree_control")),
            "+cpu +memory"
        );
        assert_eq!(read(pd.join("memory.max")), "1048576");
        assert!(!pd.join("pids.max").exists());
        assert_eq!(m.pods().unwrap(), vec!["u1"]);
    }

    #[test]
    fn oom_and_stats() {
        let d = fixture("cpu memory pids", "cpu memory pids");
        let m = V2Manager::new(d.path(), "kubepods").unwrap();
        m.ensure_container("u1", QosClass::BestEffort, "c1", &Resources::default())
            .unwrap();
        let cd = d.path().join("kubepods/besteffort/podu1/c1");
        assert!(!m.oom_killed("u1", QosClass::BestEffort, "c1"));
        let e = m
            .container_stats("u1", QosClass::BestEffort, "c1")
            .unwrap_err();
        assert!(e.to_string().contains("cpu.stat"), "{e}");

        std::fs::write(
            cd.join("memory.events"),
            "low 0\nhigh 0\nmax 7\noom 1\noom_kill 0\n",
        )
        .unwrap();
        assert!(!m.oom_killed("u1", QosClass::BestEffort, "c1"));
        std::fs::write(
            cd.join("memory.events"),
            "low 0\nhigh 0\nmax 9\noom 2\noom_kill 1\noom_group_kill 0\n",
        )
        .unwrap();
        assert!(m.oom_killed("u1", QosClass::BestEffort, "c1"));
        assert!(!m.oom_killed("u1", QosClass::BestEffort, "c2"));

        std::fs::write(
            cd.join("cpu.stat"),
            "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n",
        )
        .unwrap();
        std::fs::write(cd.join("memory.current"), "10485760\n").unwrap();
        std::fs::write(
            cd.join("memory.stat"),
            "anon 4096\nfile 8192\nactive_file 1\ninactive_file 4194304\n",
        )
        .unwrap();
        std::fs::write(cd.join("pids.current"), "3\n").unwrap();
        assert_eq!(
            m.container_stats("u1", QosClass::BestEffort, "c1").unwrap(),
            Stats {
                cpu_usage_nanos: 1_500_000,
                memory_usage_bytes: 10_485_760,
                memory_working_set_bytes: 6_291_456,
                pids: 3,
            }
        );
        // More inactive file than usage (racy reads): zero, not an underflow.
        std::fs::write(cd.join("memory.current"), "1\n").unwrap();
        let s = m.container_stats("u1", QosClass::BestEffort, "c1").unwrap();
        assert_eq!(s.memory_working_set_bytes, 0);
        std::fs::write(cd.join("memory.current"), "lots\n").unwrap();
        let e = m
            .container_stats("u1", QosClass::BestEffort, "c1")
            .unwrap_err();
        assert!(matches!(e, CgroupError::Parse { .. }), "{e}");
    }

    #[test]
    fn not_a_cgroup2_root() {
        let d = tempfile::tempdir().unwrap();
        let e = V2Manager::new(d.path(), "kubepods").unwrap_err();
        assert!(e.to_string().contains("cgroup.controllers"), "{e}");
        let d = fixture("cpu", "");
        assert!(V2Manager::new(d.path(), "").is_err());
        assert!(V2Manager::new(d.path(), "../x").is_err());
    }
}
