//! The PV object for a provisioned volume, as external-provisioner writes it: named
//! `pvc-<uid>`, pre-bound to the claim (with its uid) so the PV controller binds the two, a
//! CSI source, the class's reclaim policy and mount options, node affinity from the volume's
//! accessible topology, the `provisioned-by` annotation, the deletion secret and the
//! finalizer that keeps the PV until its storage is deleted.

use k1s_api::quantity::{Format, Quantity};
use k1s_api::volume::ANN_DYNAMICALLY_PROVISIONED;
use serde_json::{Map, Value, json};

use super::{
    ANN_DELETION_SECRET_NAME, ANN_DELETION_SECRET_NAMESPACE, FINALIZER, ProvisionedVolume, Segment,
};
use crate::pv::bind::claim_ref;

/// The name of the PV (and of the CSI volume) provisioned for a claim.
pub fn pv_name(pvc: &Value) -> String {
    format!("pvc-{}", k1s_runtime::key::uid(pvc))
}

/// Everything the PV records besides the claim and the class.
#[derive(Debug, Clone)]
pub struct Provisioned<'a> {
    pub driver: &'a str,
    pub volume: &'a ProvisionedVolume,
    /// The claim's request, recorded when the driver reports no capacity.
    pub requested_bytes: i64,
    /// "" for block volumes.
    pub fs_type: &'a str,
    /// `spec.csi` secret reference fields: (field, namespace, name).
    pub secret_refs: Vec<(&'static str, String, String)>,
    /// The provisioner secret (namespace, name), for `DeleteVolume`.
    pub deletion_secret: Option<(String, String)>,
}

/// Node affinity requiring one of the segments (each a term of `In` expressions).
pub fn node_affinity(segments: &[Segment]) -> Option<Value> {
    let terms: Vec<Value> = segments
        .iter()
        .filter(|s| !s.is_empty())
        .map(|s| {
            let exprs: Vec<Value> = s
                .iter()
                .map(|(k, v)| json!({"key": k, "operator": "In", "values": [v]}))
                .collect();
            json!({"matchExpressions": exprs})
        })
        .collect();
    (!terms.is_empty()).then(|| json!({"required": {"nodeSelectorTerms": terms}}))
}

/// The PV for `pvc` of `class`.
pub fn build(pvc: &Value, class: &Value, p: &Provisioned<'_>) -> Value {
    let bytes = if p.volume.capacity_bytes > 0 {
        p.volume.capacity_bytes
    } else {
        p.requested_bytes
    };
    let mut annotations = Map::new();
    annotations.insert(ANN_DYNAMICALLY_PROVISIONED.into(), json!(p.driver));
    if let Some((ns, name)) = &p.deletion_secret {
        annotations.insert(ANN_DELETION_SECRET_NAME.into(), json!(name));
        annotations.insert(ANN_DELETION_SECRET_NAMESPACE.into(), json!(ns));
    }
    let mut csi = json!({
        "driver": p.driver,
        "volumeHandle": p.volume.volume_handle,
    });
    if !p.fs_type.is_empty() {
        csi["fsType"] = json!(p.fs_type);
    }
    if !p.volume.volume_context.is_empty() {
        csi["volumeAttributes"] = json!(p.volume.volume_context);
    }
    for (field, ns, name) in &p.secret_refs {
        csi[*field] = json!({"name": name, "namespace": ns});
    }
    let mut spec = json!({
        "accessModes": pvc["spec"]["accessModes"],
        "capacity": {"storage": Quantity::from_value(bytes, Format::BinarySI).to_canonical()},
        "claimRef": claim_ref(pvc),
        "csi": csi,
        "persistentVolumeReclaimPolicy": class["reclaimPolicy"].as_str().unwrap_or("Delete"),
        "storageClassName": class["metadata"]["name"],
        "volumeMode": pvc["spec"]["volumeMode"].as_str().unwrap_or("Filesystem"),
    });
    if class["mountOptions"]
        .as_array()
        .is_some_and(|m| !m.is_empty())
    {
        spec["mountOptions"] = class["mountOptions"].clone();
    }
    if let Some(a) = node_affinity(&p.volume.accessible_topology) {
        spec["nodeAffinity"] = a;
    }
    json!({
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": pv_name(pvc),
            "annotations": annotations,
            "finalizers": [FINALIZER],
        },
        "spec": spec,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn provisioned_pv() {
        let pvc = json!({"metadata": {"name": "data", "namespace": "d", "uid": "u1",
                "resourceVersion": "5"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "fast"}});
        let class = json!({"metadata": {"name": "fast"}, "provisioner": "csi.example.com",
            "mountOptions": ["noatime"]});
        let vol = ProvisionedVolume {
            volume_handle: "h-1".into(),
            capacity_bytes: 2 << 30,
            volume_context: BTreeMap::from([("k".into(), "v".into())]),
            accessible_topology: vec![BTreeMap::from([("zone".into(), "a".into())])],
        };
        let pv = build(
            &pvc,
            &class,
            &Provisioned {
                driver: "csi.example.com",
                volume: &vol,
                requested_bytes: 1 << 30,
                fs_type: "ext4",
                secret_refs: vec![("nodePublishSecretRef", "d".into(), "s".into())],
                deletion_secret: Some(("d".into(), "p".into())),
            },
        );
        assert_eq!(pv["metadata"]["name"], "pvc-u1");
        assert_eq!(pv["metadata"]["finalizers"][0], FINALIZER);
        let ann = &pv["metadata"]["annotations"];
        assert_eq!(ann[ANN_DYNAMICALLY_PROVISIONED], "csi.example.com");
        assert_eq!(ann[ANN_DELETION_SECRET_NAME], "p");
        let spec = &pv["spec"];
        assert_eq!(spec["capacity"]["storage"], "2Gi");
        assert_eq!(spec["claimRef"]["uid"], "u1");
        assert_eq!(spec["persistentVolumeReclaimPolicy"], "Delete");
        assert_eq!(spec["csi"]["fsType"], "ext4");
        assert_eq!(spec["csi"]["volumeAttributes"]["k"], "v");
        assert_eq!(spec["csi"]["nodePublishSecretRef"]["name"], "s");
        assert_eq!(spec["mountOptions"][0], "noatime");
        assert_eq!(
            spec["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0],
            json!({"key": "zone", "operator": "In", "values": ["a"]})
        );
    }
}
