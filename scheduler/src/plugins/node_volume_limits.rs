//! NodeVolumeLimits: CSI attach limits. The unique CSI volumes of the pod that are not yet
//! on the node, plus those the node's pods already use, must not exceed the
//! `allocatable.count` the node's CSINode reports per driver.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use crate::framework::interface::*;
use crate::framework::listers::VolumeLister;
use crate::framework::{CycleState, NodeInfo, PodInfo, Snapshot, Status, helpers};

use super::volume_binding::{bound_volume, class_name};
use crate::plugin_names as names;

pub const ERR_REASON_MAX_VOLUME_COUNT: &str = "node(s) exceed max volume count";

pub struct NodeVolumeLimits {
    lister: Arc<dyn VolumeLister>,
}

impl NodeVolumeLimits {
    pub fn new(handle: &Handle) -> Self {
        Self {
            lister: handle.volumes.clone(),
        }
    }

    /// The pod's CSI volumes: unique id → driver.
    fn csi_volumes(&self, pod: &Pod) -> HashMap<String, String> {
        let mut out = HashMap::new();
        let ns = helpers::namespace(pod);
        for v in pod
            .spec
            .as_ref()
            .and_then(|s| s.volumes.as_ref())
            .into_iter()
            .flatten()
        {
            if let Some(csi) = &v.csi {
                out.insert(
                    format!("{}-{}-{}", csi.driver, helpers::uid(pod), v.name),
                    csi.driver.clone(),
                );
                continue;
            }
            let claim = match (&v.persistent_volume_claim, &v.ephemeral) {
                (Some(c), _) => c.claim_name.clone(),
                (None, Some(_)) => format!("{}-{}", helpers::name(pod), v.name),
                _ => continue,
            };
            let Some(pvc) = self.lister.pvc(ns, &claim) else {
                continue;
            };
            if let Some(pv) = bound_volume(&pvc).and_then(|n| self.lister.pv(n)) {
                if let Some(csi) = pv.spec.as_ref().and_then(|s| s.csi.as_ref()) {
                    out.insert(
                        format!("{}-{}", csi.driver, csi.volume_handle),
                        csi.driver.clone(),
                    );
                }
            } else if let Some(sc) = class_name(&pvc).and_then(|c| self.lister.storage_class(&c)) {
                // Not provisioned yet: counted by claim under the class's driver.
                out.insert(
                    format!("{}-{ns}/{claim}", sc.provisioner),
                    sc.provisioner.clone(),
                );
            }
        }
        out
    }
}

impl Plugin for NodeVolumeLimits {
    fn name(&self) -> &'static str {
        names::NODE_VOLUME_LIMITS
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        events(&[
            (EventResource::Pod, &[ActionType::Delete]),
            (
                EventResource::CsiNode,
                &[ActionType::Add, ActionType::Update],
            ),
            (EventResource::PersistentVolumeClaim, &[ActionType::Add]),
        ])
    }
    fn as_pre_filter(self: Arc<Self>) -> Option<Arc<dyn PreFilterPlugin>> {
        Some(self)
    }
    fn as_filter(self: Arc<Self>) -> Option<Arc<dyn FilterPlugin>> {
        Some(self)
    }
}

impl PreFilterPlugin for NodeVolumeLimits {
    fn pre_filter(&self, _: &mut CycleState, pod: &PodInfo, _: &Snapshot) -> Status {
        let any = pod
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.volumes.as_ref())
            .is_some_and(|v| {
                v.iter().any(|v| {
                    v.csi.is_some() || v.persistent_volume_claim.is_some() || v.ephemeral.is_some()
                })
            });
        if any {
            Status::success()
        } else {
            Status::skip()
        }
    }
}

impl FilterPlugin for NodeVolumeLimits {
    fn filter(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let mut new = self.csi_volumes(&pod.pod);
        if new.is_empty() {
            return Status::success();
        }
        let Some(csi_node) = self.lister.csi_node(node.name()) else {
            return Status::success();
        };
        let mut attached: HashMap<String, HashSet<String>> = HashMap::new();
        for p in &node.pods {
            for (id, driver) in self.csi_volumes(&p.pod) {
                new.remove(&id);
                attached.entry(driver).or_default().insert(id);
            }
        }
        let mut wanted: HashMap<&str, usize> = HashMap::new();
        for driver in new.values() {
            *wanted.entry(driver.as_str()).or_default() += 1;
        }
        let drivers = csi_node.spec.drivers.as_slice();
        for (driver, n) in wanted {
            let Some(limit) = drivers
                .iter()
                .find(|d| d.name == driver)
                .and_then(|d| d.allocatable.as_ref())
                .and_then(|a| a.count)
            else {
                continue;
            };
            let used = attached.get(driver).map(HashSet::len).unwrap_or(0);
            if (used + n) as i64 > i64::from(limit) {
                return Status::unschedulable(ERR_REASON_MAX_VOLUME_COUNT);
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
    use crate::plugins::volume_binding::tests::{pod_with_claims, pv, pvc};
    use crate::testing::{FakeClient, NodeBuilder, node_info};
    use k8s_openapi::api::core::v1::CSIPersistentVolumeSource;
    use k8s_openapi::api::storage::v1::{CSINode, CSINodeDriver, CSINodeSpec, VolumeNodeResources};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn csi_pv(name: &str) -> k8s_openapi::api::core::v1::PersistentVolume {
        let mut p = pv(name, "csi", "1Gi", None);
        p.spec.as_mut().unwrap().csi = Some(CSIPersistentVolumeSource {
            driver: "csi.example.com".into(),
            volume_handle: format!("h-{name}"),
            ..Default::default()
        });
        p
    }

    #[test]
    fn node_volume_limits_filter() {
        let lister = Arc::new(StaticLister::new());
        for i in 1..=3 {
            lister.upsert_pv(csi_pv(&format!("pv{i}")));
            lister.upsert_pvc(pvc(&format!("c{i}"), "csi", "1Gi", &format!("pv{i}")));
        }
        lister.upsert_csi_node(CSINode {
            metadata: ObjectMeta {
                name: Some("n".into()),
                ..Default::default()
            },
            spec: CSINodeSpec {
                drivers: vec![CSINodeDriver {
                    name: "csi.example.com".into(),
                    node_id: "n".into(),
                    allocatable: Some(VolumeNodeResources { count: Some(2) }),
                    ..Default::default()
                }],
            },
        });
        let p = NodeVolumeLimits::new(&Handle {
            client: FakeClient::new(),
            volumes: lister.clone(),
            cluster: lister,
        });
        let on_node = |claims: &[&str], name: &str| {
            let mut pod = (*pod_with_claims(claims).pod).clone();
            pod.metadata.name = Some(name.into());
            pod.metadata.uid = Some(name.into());
            pod.spec.as_mut().unwrap().node_name = Some("n".into());
            pod
        };
        let cases = [
            ("within limit", vec![], vec!["c1", "c2"], Code::Success),
            (
                "over limit",
                vec![on_node(&["c1", "c2"], "e")],
                vec!["c3"],
                Code::Unschedulable,
            ),
            (
                "shared volume is not counted twice",
                vec![on_node(&["c1", "c2"], "e")],
                vec!["c1"],
                Code::Success,
            ),
            (
                "three new volumes",
                vec![],
                vec!["c1", "c2", "c3"],
                Code::Unschedulable,
            ),
        ];
        for (name, existing, claims, want) in cases {
            let ni = node_info(NodeBuilder::new("n").build(), existing);
            let pod = pod_with_claims(&claims);
            assert_eq!(
                p.filter(&CycleState::new(), &pod, &ni).code(),
                want,
                "{name}"
            );
        }
        // Without a CSINode there is no limit.
        let ni = node_info(NodeBuilder::new("other").build(), vec![]);
        assert!(
            p.filter(
                &CycleState::new(),
                &pod_with_claims(&["c1", "c2", "c3"]),
                &ni
            )
            .is_success()
        );
    }
}
