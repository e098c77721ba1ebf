//! VolumeZone: a node must be in the zone/region of the PVs a pod's bound claims use (the
//! PVs' `topology.kubernetes.io/{zone,region}` labels and their beta forms; `__` separates
//! several zones). Claims still waiting for their first consumer are left to VolumeBinding.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::framework::interface::*;
use crate::framework::listers::VolumeLister;
use crate::framework::{CycleState, NodeInfo, PodInfo, Snapshot, Status, helpers};

use super::volume_binding::{bound_volume, is_delayed, pod_claim_names};
use crate::plugin_names as names;

pub const ERR_REASON_CONFLICT: &str = "node(s) had no available volume zone";
const STATE_KEY: &str = "PreFilterVolumeZone";

pub const TOPOLOGY_LABELS: [&str; 4] = [
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
];

pub struct VolumeZone {
    lister: Arc<dyn VolumeLister>,
}

impl VolumeZone {
    pub fn new(handle: &Handle) -> Self {
        Self {
            lister: handle.volumes.clone(),
        }
    }
}

/// (label key, allowed values) of the pod's PVs.
type Topologies = Vec<(String, BTreeSet<String>)>;

impl Plugin for VolumeZone {
    fn name(&self) -> &'static str {
        names::VOLUME_ZONE
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        events(&[
            (EventResource::Node, &[ActionType::Add, ActionType::Update]),
            (
                EventResource::PersistentVolume,
                &[ActionType::Add, ActionType::Update],
            ),
            (
                EventResource::PersistentVolumeClaim,
                &[ActionType::Add, ActionType::Update],
            ),
            (EventResource::StorageClass, &[ActionType::Add]),
        ])
    }
    fn as_pre_filter(self: Arc<Self>) -> Option<Arc<dyn PreFilterPlugin>> {
        Some(self)
    }
    fn as_filter(self: Arc<Self>) -> Option<Arc<dyn FilterPlugin>> {
        Some(self)
    }
}

impl PreFilterPlugin for VolumeZone {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, _: &Snapshot) -> Status {
        let ns = helpers::namespace(&pod.pod);
        let mut tops: Topologies = Vec::new();
        for c in pod_claim_names(&pod.pod) {
            let Some(pvc) = self.lister.pvc(ns, &c) else {
                return Status::unresolvable(format!("persistentvolumeclaim \"{c}\" not found"));
            };
            let Some(pv_name) = bound_volume(&pvc) else {
                if is_delayed(&pvc, self.lister.as_ref()) {
                    continue;
                }
                return Status::unresolvable("PersistentVolumeClaim was not found or is not bound");
            };
            let Some(pv) = self.lister.pv(pv_name) else {
                return Status::unresolvable(format!(
                    "PersistentVolume was not found: \"{pv_name}\""
                ));
            };
            for (k, v) in pv.metadata.labels.iter().flatten() {
                if TOPOLOGY_LABELS.contains(&k.as_str()) {
                    tops.push((k.clone(), v.split("__").map(str::to_owned).collect()));
                }
            }
        }
        if tops.is_empty() {
            return Status::skip();
        }
        state.write(STATE_KEY, tops);
        Status::success()
    }
}

impl FilterPlugin for VolumeZone {
    fn filter(&self, state: &CycleState, _: &PodInfo, node: &NodeInfo) -> Status {
        let Some(tops) = state.read::<Topologies>(STATE_KEY) else {
            return Status::error("reading PreFilterVolumeZone state");
        };
        let labels = node.labels();
        for (k, values) in tops {
            if !labels.get(k).is_some_and(|v| values.contains(v)) {
                return Status::unresolvable(ERR_REASON_CONFLICT);
            }
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::framework::listers::StaticLister;
    use crate::plugins::volume_binding::tests::{class, pod_with_claims, pv, pvc};
    use crate::testing::{FakeClient, NodeBuilder, node_info};

    #[test]
    fn volume_zone_filter() {
        let lister = Arc::new(StaticLister::new());
        let mut zoned = pv("pv-a", "std", "1Gi", None);
        zoned.metadata.labels =
            Some([("topology.kubernetes.io/zone".to_owned(), "a__c".to_owned())].into());
        lister.upsert_pv(zoned);
        lister.upsert_pv(pv("pv-any", "std", "1Gi", None));
        lister.upsert_pvc(pvc("zoned", "std", "1Gi", "pv-a"));
        lister.upsert_pvc(pvc("plain", "std", "1Gi", "pv-any"));
        lister.upsert_pvc(pvc("later", "wffc", "1Gi", ""));
        lister.upsert_storage_class(class("wffc", "WaitForFirstConsumer", "x", &[]));
        let p = VolumeZone::new(&Handle {
            client: FakeClient::new(),
            volumes: lister.clone(),
            cluster: lister,
        });
        let node = |z: Option<&str>| {
            let nb = NodeBuilder::new("n");
            let nb = match z {
                Some(z) => nb.labels(&[("topology.kubernetes.io/zone", z)]),
                None => nb,
            };
            node_info(nb.build(), vec![])
        };
        let cases = [
            ("PV in zone a, node in a", "zoned", Some("a"), Code::Success),
            (
                "PV in zones a and c, node in c",
                "zoned",
                Some("c"),
                Code::Success,
            ),
            (
                "PV in zone a, node in b",
                "zoned",
                Some("b"),
                Code::UnschedulableAndUnresolvable,
            ),
            (
                "PV in zone a, node unlabelled",
                "zoned",
                None,
                Code::UnschedulableAndUnresolvable,
            ),
            ("PV without zone", "plain", Some("b"), Code::Skip),
            ("unbound WFFC claim", "later", Some("b"), Code::Skip),
            (
                "missing claim",
                "nope",
                Some("b"),
                Code::UnschedulableAndUnresolvable,
            ),
        ];
        for (name, claim, zone, want) in cases {
            let pod = pod_with_claims(&[claim]);
            let mut st = CycleState::new();
            let s = p.pre_filter(&mut st, &pod, &Snapshot::default());
            let got = if s.is_success() {
                p.filter(&st, &pod, &node(zone)).code()
            } else {
                s.code()
            };
            assert_eq!(got, want, "{name}");
        }
    }
}
