//! VolumeRestrictions: a pod's GCE PD, AWS EBS, RBD and iSCSI volumes must not conflict with
//! those of pods on the node (same disk, unless both mount read-only where the volume type
//! allows it), and a `ReadWriteOncePod` claim may be used by only one pod in the cluster.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Volume;

use crate::framework::interface::*;
use crate::framework::listers::VolumeLister;
use crate::framework::{CycleState, NodeInfo, PodInfo, Snapshot, Status, helpers};

use super::volume_binding::pod_claim_names;
use crate::plugin_names as names;

pub const ERR_REASON_DISK_CONFLICT: &str = "node(s) had no available disk";
pub const ERR_REASON_RWOP_CONFLICT: &str =
    "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode";

pub struct VolumeRestrictions {
    lister: Arc<dyn VolumeLister>,
}

impl VolumeRestrictions {
    pub fn new(handle: &Handle) -> Self {
        Self {
            lister: handle.volumes.clone(),
        }
    }
}

fn has_disk_volumes(vols: &[Volume]) -> bool {
    vols.iter().any(|v| {
        v.gce_persistent_disk.is_some()
            || v.aws_elastic_block_store.is_some()
            || v.rbd.is_some()
            || v.iscsi.is_some()
    })
}

/// Upstream `isVolumeConflict`.
fn conflicts(v: &Volume, e: &Volume) -> bool {
    if let (Some(a), Some(b)) = (&v.gce_persistent_disk, &e.gce_persistent_disk)
        && a.pd_name == b.pd_name
        && !(a.read_only.unwrap_or(false) && b.read_only.unwrap_or(false))
    {
        return true;
    }
    if let (Some(a), Some(b)) = (&v.aws_elastic_block_store, &e.aws_elastic_block_store)
        && a.volume_id == b.volume_id
    {
        return true;
    }
    if let (Some(a), Some(b)) = (&v.iscsi, &e.iscsi)
        && a.iqn == b.iqn
        && !(a.read_only.unwrap_or(false) && b.read_only.unwrap_or(false))
    {
        return true;
    }
    if let (Some(a), Some(b)) = (&v.rbd, &e.rbd) {
        let shared_mon = a.monitors.iter().any(|m| b.monitors.contains(m));
        if shared_mon
            && a.pool == b.pool
            && a.image == b.image
            && !(a.read_only.unwrap_or(false) && b.read_only.unwrap_or(false))
        {
            return true;
        }
    }
    false
}

fn volumes(pi: &PodInfo) -> &[Volume] {
    pi.pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_deref())
        .unwrap_or(&[])
}

impl Plugin for VolumeRestrictions {
    fn name(&self) -> &'static str {
        names::VOLUME_RESTRICTIONS
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        events(&[
            (EventResource::Pod, &[ActionType::Delete]),
            (EventResource::Node, &[ActionType::Add, ActionType::Update]),
            (
                EventResource::PersistentVolumeClaim,
                &[ActionType::Add, ActionType::Update],
            ),
        ])
    }
    fn as_pre_filter(self: Arc<Self>) -> Option<Arc<dyn PreFilterPlugin>> {
        Some(self)
    }
    fn as_filter(self: Arc<Self>) -> Option<Arc<dyn FilterPlugin>> {
        Some(self)
    }
}

impl PreFilterPlugin for VolumeRestrictions {
    fn pre_filter(&self, _: &mut CycleState, pod: &PodInfo, snap: &Snapshot) -> Status {
        let ns = helpers::namespace(&pod.pod);
        let mut rwop = false;
        for c in pod_claim_names(&pod.pod) {
            let Some(pvc) = self.lister.pvc(ns, &c) else {
                continue;
            };
            let is_rwop = pvc
                .spec
                .as_ref()
                .and_then(|s| s.access_modes.as_ref())
                .is_some_and(|m| m.iter().any(|m| m == "ReadWriteOncePod"));
            if !is_rwop {
                continue;
            }
            rwop = true;
            let key = format!("{ns}/{c}");
            let own = helpers::uid(&pod.pod);
            let used = snap.pods().any(|(_, p)| {
                helpers::uid(&p.pod) != own
                    && helpers::namespace(&p.pod) == ns
                    && pod_claim_names(&p.pod)
                        .iter()
                        .any(|x| format!("{ns}/{x}") == key)
            });
            if used {
                return Status::unresolvable(ERR_REASON_RWOP_CONFLICT);
            }
        }
        if !rwop && !has_disk_volumes(volumes(pod)) {
            return Status::skip();
        }
        Status::success()
    }
}

impl FilterPlugin for VolumeRestrictions {
    fn filter(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        for v in volumes(pod) {
            for e in &node.pods {
                if volumes(e).iter().any(|ev| conflicts(v, ev)) {
                    return Status::unschedulable(ERR_REASON_DISK_CONFLICT);
                }
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
    use crate::plugins::volume_binding::tests::{pod_with_claims, pvc};
    use crate::testing::{FakeClient, NodeBuilder, PodBuilder, node_info};
    use k8s_openapi::api::core::v1::{
        AWSElasticBlockStoreVolumeSource, GCEPersistentDiskVolumeSource,
    };

    fn gce(name: &str, ro: bool) -> Volume {
        Volume {
            name: "v".into(),
            gce_persistent_disk: Some(GCEPersistentDiskVolumeSource {
                pd_name: name.into(),
                read_only: Some(ro),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn ebs(id: &str) -> Volume {
        Volume {
            name: "v".into(),
            aws_elastic_block_store: Some(AWSElasticBlockStoreVolumeSource {
                volume_id: id.into(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn plugin(lister: Arc<StaticLister>) -> VolumeRestrictions {
        VolumeRestrictions::new(&Handle {
            client: FakeClient::new(),
            volumes: lister.clone(),
            cluster: lister,
        })
    }

    #[test]
    fn volume_restrictions_disk_conflicts() {
        let cases = [
            (
                "same GCE PD",
                gce("d", false),
                gce("d", false),
                Code::Unschedulable,
            ),
            (
                "same GCE PD both read-only",
                gce("d", true),
                gce("d", true),
                Code::Success,
            ),
            (
                "other GCE PD",
                gce("d", false),
                gce("e", false),
                Code::Success,
            ),
            ("same EBS", ebs("x"), ebs("x"), Code::Unschedulable),
            ("other EBS", ebs("x"), ebs("y"), Code::Success),
        ];
        for (name, mine, theirs, want) in cases {
            let existing = PodBuilder::new("e")
                .node("n")
                .spec_with(|s| s.volumes = Some(vec![theirs]))
                .build();
            let ni = node_info(NodeBuilder::new("n").build(), vec![existing]);
            let pod = PodBuilder::new("p")
                .spec_with(|s| s.volumes = Some(vec![mine]))
                .info();
            let p = plugin(Arc::new(StaticLister::new()));
            let mut st = CycleState::new();
            assert!(
                p.pre_filter(&mut st, &pod, &Snapshot::default())
                    .is_success(),
                "{name}"
            );
            assert_eq!(p.filter(&st, &pod, &ni).code(), want, "{name}");
        }
    }

    #[test]
    fn volume_restrictions_read_write_once_pod() {
        let lister = Arc::new(StaticLister::new());
        let mut c = pvc("c", "x", "1Gi", "pv");
        c.spec.as_mut().unwrap().access_modes = Some(vec!["ReadWriteOncePod".into()]);
        lister.upsert_pvc(c);
        lister.upsert_pvc(pvc("shared", "x", "1Gi", "pv2"));
        let p = plugin(lister);
        let user = |claim: &str| {
            let mut pi = pod_with_claims(&[claim]);
            let mut pod = (*pi.pod).clone();
            pod.metadata.uid = Some("other".into());
            pod.metadata.name = Some("other".into());
            pod.spec.as_mut().unwrap().node_name = Some("n".into());
            pi = PodInfo::new(Arc::new(pod));
            (*pi.pod).clone()
        };
        let cases = [
            (
                "RWOP claim in use",
                "c",
                true,
                Code::UnschedulableAndUnresolvable,
            ),
            ("RWOP claim free", "c", false, Code::Success),
            ("RWO claim in use", "shared", true, Code::Skip),
        ];
        for (name, claim, in_use, want) in cases {
            let pods = if in_use { vec![user(claim)] } else { vec![] };
            let snap = Snapshot::new(
                vec![node_info(NodeBuilder::new("n").build(), pods)],
                Default::default(),
            );
            let s = p.pre_filter(&mut CycleState::new(), &pod_with_claims(&[claim]), &snap);
            assert_eq!(s.code(), want, "{name}");
        }
    }
}
