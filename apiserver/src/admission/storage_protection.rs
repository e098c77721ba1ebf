//! StorageObjectInUseProtection, the admission half: every new PersistentVolumeClaim gets the
//! `kubernetes.io/pvc-protection` finalizer and every new PersistentVolume
//! `kubernetes.io/pv-protection`, so that deleting one that is still in use only marks it.
//! The protection controllers (`k1s_controllers::volume_protection`) remove the finalizers
//! once no pod uses the claim, or the volume is no longer bound.

use serde_json::Value;

pub const PVC_FINALIZER: &str = "kubernetes.io/pvc-protection";
pub const PV_FINALIZER: &str = "kubernetes.io/pv-protection";

/// Adds the finalizer of `kind` (`PersistentVolumeClaim` or `PersistentVolume`) to `obj`
/// unless it is there already.
pub fn admit(kind: &str, obj: &mut Value) {
    let finalizer = match kind {
        "PersistentVolumeClaim" => PVC_FINALIZER,
        "PersistentVolume" => PV_FINALIZER,
        _ => return,
    };
    let list = &mut obj["metadata"]["finalizers"];
    if !list.is_array() {
        *list = Value::Array(Vec::new());
    }
    if let Some(a) = list.as_array_mut()
        && !a.iter().any(|f| f == finalizer)
    {
        a.push(Value::from(finalizer));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn new_claims_and_volumes_are_protected_once() {
        let mut pvc = json!({"metadata": {"name": "c"}});
        admit("PersistentVolumeClaim", &mut pvc);
        admit("PersistentVolumeClaim", &mut pvc);
        assert_eq!(pvc["metadata"]["finalizers"], json!([PVC_FINALIZER]));
        let mut pv = json!({"metadata": {"name": "v", "finalizers": ["x"]}});
        admit("PersistentVolume", &mut pv);
        assert_eq!(pv["metadata"]["finalizers"], json!(["x", PV_FINALIZER]));
        let mut cm = json!({"metadata": {}});
        admit("ConfigMap", &mut cm);
        assert!(cm["metadata"]["finalizers"].is_null());
    }
}
