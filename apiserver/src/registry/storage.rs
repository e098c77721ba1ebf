//! The storage group's kinds with defaults (upstream `pkg/registry/storage`).

use serde_json::{Value, json};

use super::ResourceType;
use super::strategy::{Strategy, set_default, spec_mut, update_base};

pub struct VolumeAttachment;

impl Strategy for VolumeAttachment {
    fn update_base(
        &self,
        res: &ResourceType,
        old: &Value,
        new: Value,
        subresource: Option<&str>,
    ) -> Value {
        let mut o = update_base(res, old, new, subresource);
        if subresource == Some("status") {
            // Upstream's ResetObjectMetaForStatus: status writes change no metadata.
            let managed = o["metadata"].get("managedFields").cloned();
            o["metadata"] = old["metadata"].clone();
            if let Some(m) = managed {
                o["metadata"]["managedFields"] = m;
            }
        }
        o
    }
}

pub struct StorageClass;

impl Strategy for StorageClass {
    fn defaults(&self, obj: &mut Value) {
        set_default(obj, "reclaimPolicy", json!("Delete"));
        set_default(obj, "volumeBindingMode", json!("Immediate"));
    }
}

pub struct CsiDriver;

impl Strategy for CsiDriver {
    fn defaults(&self, obj: &mut Value) {
        let Some(spec) = spec_mut(obj) else {
            return;
        };
        set_default(spec, "attachRequired", json!(true));
        set_default(spec, "podInfoOnMount", json!(false));
        set_default(spec, "storageCapacity", json!(false));
        set_default(spec, "requiresRepublish", json!(false));
        set_default(spec, "seLinuxMount", json!(false));
        set_default(spec, "fsGroupPolicy", json!("ReadWriteOnceWithFSType"));
        set_default(spec, "volumeLifecycleModes", json!(["Persistent"]));
    }
}
