//! Printers of the `storage.k8s.io` group.

use jiff::Timestamp;
use serde_json::Value;

use super::format::{age, arr_at, get, len_at, name, opt_bool, opt_str, or_none, quantity, str_at};
use super::{Column, Printer};

pub(crate) struct StorageClasses;

fn is_default_class(obj: &Value) -> bool {
    [
        "storageclass.kubernetes.io~1is-default-class",
        "storageclass.beta.kubernetes.io~1is-default-class",
    ]
    .iter()
    .any(|k| str_at(obj, &format!("/metadata/annotations/{k}")) == "true")
}

impl Printer for StorageClasses {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::s(
                "Provisioner",
                "provisioner indicates the type of the provisioner.",
            ),
            Column::s(
                "ReclaimPolicy",
                "reclaimPolicy controls the reclaimPolicy for dynamically provisioned PersistentVolumes of this storage class.",
            ),
            Column::s(
                "VolumeBindingMode",
                "volumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound.",
            ),
            Column::s(
                "AllowVolumeExpansion",
                "allowVolumeExpansion shows whether the storage class allow volume expand.",
            ),
            Column::age(),
        ]
    }

    fn cells(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        let mut n = name(obj).to_owned();
        if is_default_class(obj) {
            n.push_str(" (default)");
        }
        vec![
            n.into(),
            str_at(obj, "/provisioner").into(),
            opt_str(obj, "/reclaimPolicy").unwrap_or("Delete").into(),
            opt_str(obj, "/volumeBindingMode")
                .unwrap_or("Immediate")
                .into(),
            opt_bool(obj, "/allowVolumeExpansion")
                .unwrap_or(false)
                .into(),
            age(obj, now),
        ]
    }
}

pub(crate) struct VolumeAttachments;

impl Printer for VolumeAttachments {
    fn columns(&self) -> Vec<Column> {
        let mut attacher = Column::s(
            "Attacher",
            "attacher indicates the name of the volume driver that MUST handle this request.",
        );
        attacher.format = "name".to_owned();
        vec![
            Column::name(),
            attacher,
            Column::s(
                "PV",
                "persistentVolumeName represents the name of the persistent volume to attach.",
            ),
            Column::s(
                "Node",
                "nodeName represents the node that the volume should be attached to.",
            ),
            Column::bool(
                "Attached",
                "attached indicates the volume is successfully attached.",
            ),
            Column::age(),
        ]
    }

    fn cells(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        vec![
            name(obj).into(),
            str_at(obj, "/spec/attacher").into(),
            str_at(obj, "/spec/source/persistentVolumeName").into(),
            str_at(obj, "/spec/nodeName").into(),
            opt_bool(obj, "/status/attached").unwrap_or(false).into(),
            age(obj, now),
        ]
    }
}

pub(crate) struct CsiNodes;

impl Printer for CsiNodes {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::int(
                "Drivers",
                "Drivers indicates the number of CSI drivers registered on the node",
            ),
            Column::age(),
        ]
    }

    fn cells(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        vec![
            name(obj).into(),
            len_at(obj, "/spec/drivers").into(),
            age(obj, now),
        ]
    }
}

pub(crate) struct CsiDrivers;

impl Printer for CsiDrivers {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::bool(
                "AttachRequired",
                "attachRequired indicates this CSI volume driver requires an attach operation.",
            ),
            Column::bool(
                "PodInfoOnMount",
                "podInfoOnMount indicates this CSI volume driver requires additional pod information (like podName, podUID, etc.) during mount operations.",
            ),
            Column::bool(
                "StorageCapacity",
                "storageCapacity indicates that the CSI volume driver wants pod scheduling to consider the storage capacity that the driver deployment will report.",
            ),
            Column::s(
                "TokenRequests",
                "tokenRequests indicates the CSI driver needs pods' service account tokens it is mounting volume for to do necessary authentication.",
            ),
            Column::bool(
                "RequiresRepublish",
                "requiresRepublish indicates the CSI driver wants `NodePublishVolume` being periodically called to reflect any possible change in the mounted volume.",
            ),
            Column::s(
                "Modes",
                "volumeLifecycleModes defines what kind of volumes this CSI volume driver supports.",
            ),
            Column::age(),
        ]
    }

    fn cells(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        let modes: Vec<&str> = arr_at(obj, "/spec/volumeLifecycleModes")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let tokens = match get(obj, "/spec/tokenRequests").and_then(Value::as_array) {
            Some(reqs) => reqs
                .iter()
                .map(|t| str_at(t, "/audience"))
                .collect::<Vec<_>>()
                .join(","),
            None => "<unset>".to_owned(),
        };
        vec![
            name(obj).into(),
            opt_bool(obj, "/spec/attachRequired").unwrap_or(true).into(),
            opt_bool(obj, "/spec/podInfoOnMount")
                .unwrap_or(false)
                .into(),
            opt_bool(obj, "/spec/storageCapacity")
                .unwrap_or(false)
                .into(),
            tokens.into(),
            opt_bool(obj, "/spec/requiresRepublish")
                .unwrap_or(false)
                .into(),
            or_none(&modes.join(",")).into(),
            age(obj, now),
        ]
    }
}

pub(crate) struct CsiStorageCapacities;

impl Printer for CsiStorageCapacities {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::s(
                "StorageClassName",
                "storageClassName represents the name of the StorageClass that the reported capacity applies to.",
            ),
            Column::s(
                "Capacity",
                "capacity is the value reported by the CSI driver in its GetCapacityResponse for a GetCapacityRequest with topology and parameters that match the previous fields.",
            ),
        ]
    }

    fn cells(&self, obj: &Value, _now: Timestamp) -> Vec<Value> {
        let capacity = match get(obj, "/capacity") {
            Some(q) => quantity(Some(q)),
            None => "<unset>".to_owned(),
        };
        vec![
            name(obj).into(),
            str_at(obj, "/storageClassName").into(),
            capacity.into(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::testutil::*;
    use serde_json::json;

    #[test]
    fn storage_classes() {
        assert_eq!(
            names(&StorageClasses),
            [
                "Name",
                "Provisioner",
                "ReclaimPolicy",
                "VolumeBindingMode",
                "AllowVolumeExpansion",
                "Age"
            ]
        );
        let sc = json!({
            "metadata": {"name": "standard", "creationTimestamp": ago(40 * 86400),
                "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
            "provisioner": "rancher.io/local-path", "reclaimPolicy": "Delete",
            "volumeBindingMode": "WaitForFirstConsumer"
        });
        assert_eq!(
            StorageClasses.cells(&sc, now()),
            vec![
                json!("standard (default)"),
                json!("rancher.io/local-path"),
                json!("Delete"),
                json!("WaitForFirstConsumer"),
                json!(false),
                json!("40d")
            ]
        );
        let plain = json!({"metadata": {"name": "fast", "annotations": {"storageclass.kubernetes.io/is-default-class": "false"}},
            "provisioner": "csi.example.com", "allowVolumeExpansion": true, "reclaimPolicy": "Retain"});
        assert_eq!(
            row(&StorageClasses, &plain)[..5],
            ["fast", "csi.example.com", "Retain", "Immediate", "true"]
        );
        let beta = json!({"metadata": {"name": "old", "annotations": {"storageclass.beta.kubernetes.io/is-default-class": "true"}}});
        assert_eq!(row(&StorageClasses, &beta)[0], "old (default)");
    }

    #[test]
    fn csi_objects() {
        let drv = json!({"metadata": {"name": "csi.example.com"}, "spec": {"attachRequired": false, "volumeLifecycleModes": ["Persistent", "Ephemeral"], "tokenRequests": [{"audience": "vault"}, {"audience": ""}]}});
        assert_eq!(
            row(&CsiDrivers, &drv),
            [
                "csi.example.com",
                "false",
                "false",
                "false",
                "vault,",
                "false",
                "Persistent,Ephemeral",
                "<unknown>"
            ]
        );
        let bare = json!({"metadata": {"name": "d"}, "spec": {}});
        assert_eq!(
            row(&CsiDrivers, &bare)[1..7],
            ["true", "false", "false", "<unset>", "false", "<none>"]
        );
        let node = json!({"metadata": {"name": "n1"}, "spec": {"drivers": [{"name": "a"}, {"name": "b"}]}});
        assert_eq!(CsiNodes.cells(&node, now())[1], json!(2));
        let va = json!({"metadata": {"name": "csi-123"}, "spec": {"attacher": "csi.example.com", "nodeName": "n1", "source": {"persistentVolumeName": "pv1"}}, "status": {"attached": true}});
        assert_eq!(
            row(&VolumeAttachments, &va)[..5],
            ["csi-123", "csi.example.com", "pv1", "n1", "true"]
        );
        let cap =
            json!({"metadata": {"name": "c"}, "storageClassName": "standard", "capacity": "100Gi"});
        assert_eq!(row(&CsiStorageCapacities, &cap), ["c", "standard", "100Gi"]);
        let nocap = json!({"metadata": {"name": "c"}, "storageClassName": "standard"});
        assert_eq!(row(&CsiStorageCapacities, &nocap)[2], "<unset>");
    }
}
