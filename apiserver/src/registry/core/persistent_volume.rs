//! PersistentVolumeClaims and PersistentVolumes: both start Pending, default their volume
//! mode (and a PV its reclaim policy); claims are validated (resize rules included).

use serde_json::{Value, json};

use crate::registry::strategy::{Causes, Strategy, set_default, spec_mut};
use crate::rest::validation;

pub struct PersistentVolumeClaim;

impl Strategy for PersistentVolumeClaim {
    fn initial_status(&self, _obj: &Value) -> Option<Value> {
        Some(json!({"phase": "Pending"}))
    }

    fn defaults(&self, obj: &mut Value) {
        if let Some(spec) = spec_mut(obj) {
            set_default(spec, "volumeMode", json!("Filesystem"));
        }
    }

    fn validate(&self, obj: &Value, old: Option<&Value>, causes: &mut Causes) {
        validation::pvc(obj, old, causes);
    }
}

pub struct PersistentVolume;

impl Strategy for PersistentVolume {
    fn initial_status(&self, _obj: &Value) -> Option<Value> {
        Some(json!({"phase": "Pending"}))
    }

    fn defaults(&self, obj: &mut Value) {
        if let Some(spec) = spec_mut(obj) {
            set_default(spec, "persistentVolumeReclaimPolicy", json!("Retain"));
            set_default(spec, "volumeMode", json!("Filesystem"));
        }
    }
}
