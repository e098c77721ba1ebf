//! An in-memory [`CgroupManager`] for pod-worker tests: records every call, keeps the groups
//! and their limits, and reports OOM kills and stats that the test sets.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use super::{
    CgroupError, CgroupManager, DEFAULT_TOP, QosClass, Resources, Stats, container_group_name,
    pod_group_name,
};

/// One recorded call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FakeCall {
    EnsureQosHierarchy(Resources),
    UpdateQos(Resources),
    EnsurePod {
        pod_uid: String,
        qos: QosClass,
        resources: Resources,
    },
    EnsureContainer {
        pod_uid: String,
        qos: QosClass,
        container_id: String,
        resources: Resources,
    },
    RemoveContainer {
        pod_uid: String,
        container_id: String,
    },
    RemovePod {
        pod_uid: String,
    },
}

#[derive(Debug, Default)]
struct State {
    calls: Vec<FakeCall>,
    qos: Option<Resources>,
    burstable: Option<Resources>,
    pods: BTreeMap<String, (QosClass, Resources)>,
    containers: BTreeMap<(String, String), Resources>,
    oom: BTreeSet<String>,
    stats: BTreeMap<String, Stats>,
    fail: Option<String>,
}

/// The fake. `ensure_container` returns no `cgroup.procs` paths (nothing to join) unless made
/// with [`FakeCgroupManager::with_procs_root`].
#[derive(Debug, Default)]
pub struct FakeCgroupManager {
    state: Mutex<State>,
    procs_root: Option<PathBuf>,
}

impl FakeCgroupManager {
    pub fn new() -> Self {
        Self::default()
    }

    /// A fake whose `ensure_container` creates `<dir>/<relative group name>/` and returns its
    /// `cgroup.procs` path, so that a runtime under test can write PIDs into it.
    pub fn with_procs_root(dir: impl Into<PathBuf>) -> Self {
        Self {
            procs_root: Some(dir.into()),
            ..Self::default()
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A test that panicked while holding the lock leaves usable state.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn check_fail(st: &State) -> Result<(), CgroupError> {
        match &st.fail {
            Some(m) => Err(CgroupError::Other(m.clone())),
            None => Ok(()),
        }
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<FakeCall> {
        self.state().calls.clone()
    }

    /// Makes every mutating call fail with `CgroupError::Other(message)` (None: succeed).
    pub fn set_fail(&self, message: Option<&str>) {
        self.state().fail = message.map(str::to_string);
    }

    /// Sets whether the container's group reports an OOM kill.
    pub fn set_oom_killed(&self, container_id: &str, killed: bool) {
        let mut st = self.state();
        if killed {
            st.oom.insert(container_id.to_string());
        } else {
            st.oom.remove(container_id);
        }
    }

    /// Sets the stats reported for a container (others report [`Stats::default`]).
    pub fn set_stats(&self, container_id: &str, stats: Stats) {
        self.state().stats.insert(container_id.to_string(), stats);
    }

    /// The node-level limits given to `ensure_qos_hierarchy`, if it was called.
    pub fn qos_hierarchy(&self) -> Option<Resources> {
        self.state().qos.clone()
    }

    /// The Burstable group's limits from the last `update_qos`.
    pub fn burstable(&self) -> Option<Resources> {
        self.state().burstable.clone()
    }

    /// A pod's QoS class and limits, while its group exists.
    pub fn pod(&self, pod_uid: &str) -> Option<(QosClass, Resources)> {
        self.state().pods.get(pod_uid).cloned()
    }

    /// A container's limits, while its group exists.
    pub fn container(&self, pod_uid: &str, container_id: &str) -> Option<Resources> {
        self.state()
            .containers
            .get(&(pod_uid.to_string(), container_id.to_string()))
            .cloned()
    }

    /// The container IDs with a group under the pod.
    pub fn containers_of(&self, pod_uid: &str) -> Vec<String> {
        self.state()
            .containers
            .keys()
            .filter(|(p, _)| p == pod_uid)
            .map(|(_, c)| c.clone())
            .collect()
    }
}

impl CgroupManager for FakeCgroupManager {
    fn ensure_qos_hierarchy(&self, allocatable: &Resources) -> Result<(), CgroupError> {
        let mut st = self.state();
        st.calls
            .push(FakeCall::EnsureQosHierarchy(allocatable.clone()));
        Self::check_fail(&st)?;
        st.qos = Some(allocatable.clone());
        Ok(())
    }

    fn update_qos(&self, burstable: &Resources) -> Result<(), CgroupError> {
        let mut st = self.state();
        st.calls.push(FakeCall::UpdateQos(burstable.clone()));
        Self::check_fail(&st)?;
        st.burstable = Some(burstable.clone());
        Ok(())
    }

    fn ensure_pod(
        &self,
        pod_uid: &str,
        qos: QosClass,
        resources: &Resources,
    ) -> Result<String, CgroupError> {
        let mut st = self.state();
        st.calls.push(FakeCall::EnsurePod {
            pod_uid: pod_uid.to_string(),
            qos,
            resources: resources.clone(),
        });
        Self::check_fail(&st)?;
        let rel = pod_group_name(DEFAULT_TOP, pod_uid, qos)?;
        st.pods
            .insert(pod_uid.to_string(), (qos, resources.clone()));
        Ok(rel)
    }

    fn ensure_container(
        &self,
        pod_uid: &str,
        qos: QosClass,
        container_id: &str,
        resources: &Resources,
    ) -> Result<Vec<PathBuf>, CgroupError> {
        let mut st = self.state();
        st.calls.push(FakeCall::EnsureContainer {
            pod_uid: pod_uid.to_string(),
            qos,
            container_id: container_id.to_string(),
            resources: resources.clone(),
        });
        Self::check_fail(&st)?;
        let rel = container_group_name(DEFAULT_TOP, pod_uid, qos, container_id)?;
        st.containers.insert(
            (pod_uid.to_string(), container_id.to_string()),
            resources.clone(),
        );
        let Some(root) = &self.procs_root else {
            return Ok(Vec::new());
        };
        let dir = root.join(rel);
        std::fs::create_dir_all(&dir).map_err(|e| super::fsutil::io_err(&dir, e))?;
        Ok(vec![dir.join("cgroup.procs")])
    }

    fn oom_killed(&self, _pod_uid: &str, _qos: QosClass, container_id: &str) -> bool {
        self.state().oom.contains(container_id)
    }

    fn container_stats(
        &self,
        pod_uid: &str,
        _qos: QosClass,
        container_id: &str,
    ) -> Result<Stats, CgroupError> {
        let st = self.state();
        if !st
            .containers
            .contains_key(&(pod_uid.to_string(), container_id.to_string()))
        {
            return Err(CgroupError::Other(format!(
                "no group for container {container_id} of pod {pod_uid}"
            )));
        }
        Ok(st.stats.get(container_id).cloned().unwrap_or_default())
    }

    /// The sum of the stats set for the pod's containers.
    fn pod_stats(&self, pod_uid: &str, _qos: QosClass) -> Result<Stats, CgroupError> {
        let st = self.state();
        if !st.pods.contains_key(pod_uid) {
            return Err(CgroupError::Other(format!("no group for pod {pod_uid}")));
        }
        let mut sum = Stats::default();
        for (_, id) in st.containers.keys().filter(|(p, _)| p == pod_uid) {
            let s = st.stats.get(id).cloned().unwrap_or_default();
            sum.cpu_usage_nanos += s.cpu_usage_nanos;
            sum.memory_usage_bytes += s.memory_usage_bytes;
            sum.memory_working_set_bytes += s.memory_working_set_bytes;
            sum.pids += s.pids;
        }
        Ok(sum)
    }

    fn remove_container(
        &self,
        pod_uid: &str,
        _qos: QosClass,
        container_id: &str,
    ) -> Result<(), CgroupError> {
        let mut st = self.state();
        st.calls.push(FakeCall::RemoveContainer {
            pod_uid: pod_uid.to_string(),
            container_id: container_id.to_string(),
        });
        Self::check_fail(&st)?;
        st.containers
            .remove(&(pod_uid.to_string(), container_id.to_string()));
        Ok(())
    }

    fn remove_pod(&self, pod_uid: &str, _qos: QosClass) -> Result<(), CgroupError> {
        let mut st = self.state();
        st.calls.push(FakeCall::RemovePod {
            pod_uid: pod_uid.to_string(),
        });
        Self::check_fail(&st)?;
        st.pods.remove(pod_uid);
        st.containers.retain(|(p, _), _| p != pod_uid);
        Ok(())
    }

    fn pods(&self) -> Result<Vec<String>, CgroupError> {
        Ok(self.state().pods.keys().cloned().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_and_reports() {
        let f = FakeCgroupManager::new();
        let r = Resources {
            memory_limit: Some(1 << 20),
            ..Resources::default()
        };
        f.ensure_qos_hierarchy(&Resources::default()).unwrap();
        assert_eq!(
            f.ensure_pod("u1", QosClass::Burstable, &r).unwrap(),
            "kubepods/burstable/podu1"
        );
        assert!(
            f.ensure_container("u1", QosClass::Burstable, "c1", &r)
                .unwrap()
                .is_empty()
        );
        assert_eq!(f.container("u1", "c1"), Some(r.clone()));
        assert!(!f.oom_killed("u1", QosClass::Burstable, "c1"));
        f.set_oom_killed("c1", true);
        assert!(f.oom_killed("u1", QosClass::Burstable, "c1"));
        let s = Stats {
            pids: 3,
            ..Stats::default()
        };
        f.set_stats("c1", s.clone());
        assert_eq!(
            f.container_stats("u1", QosClass::Burstable, "c1").unwrap(),
            s
        );
        assert!(f.container_stats("u1", QosClass::Burstable, "c2").is_err());
        assert_eq!(f.pods().unwrap(), vec!["u1".to_string()]);
        f.set_fail(Some("boom"));
        assert!(f.remove_pod("u1", QosClass::Burstable).is_err());
        f.set_fail(None);
        f.remove_pod("u1", QosClass::Burstable).unwrap();
        assert!(f.pods().unwrap().is_empty());
        assert!(f.containers_of("u1").is_empty());
        assert_eq!(f.calls().len(), 5);
        assert!(matches!(f.calls()[0], FakeCall::EnsureQosHierarchy(_)));
        assert!(f.ensure_pod("a/b", QosClass::Burstable, &r).is_err());
    }

    #[test]
    fn procs_root() {
        let d = tempfile::tempdir().unwrap();
        let f = FakeCgroupManager::with_procs_root(d.path());
        let paths = f
            .ensure_container("u1", QosClass::Guaranteed, "c1", &Resources::default())
            .unwrap();
        assert_eq!(paths, vec![d.path().join("kubepods/podu1/c1/cgroup.procs")]);
        super::super::join(&paths, 42).unwrap();
        assert_eq!(std::fs::read_to_string(&paths[0]).unwrap(), "42");
    }
}
