//! ReplicaSets (upstream `pkg/registry/apps/replicaset`).

use serde_json::{Value, json};

use crate::registry::core::pod::default_pod_spec;
use crate::registry::strategy::{Causes, Strategy, set_default, spec_mut};
use crate::rest::validation;

pub struct ReplicaSet;

impl Strategy for ReplicaSet {
    fn defaults(&self, obj: &mut Value) {
        let Some(spec) = spec_mut(obj) else {
            return;
        };
        set_default(spec, "replicas", json!(1));
        default_pod_spec(&mut spec["template"]["spec"]);
    }

    fn validate(&self, obj: &Value, old: Option<&Value>, causes: &mut Causes) {
        validation::selector_immutable(obj, old, causes);
        super::validate_template(obj, &obj["spec"]["template"]["spec"], causes);
    }
}
