//! DaemonSets (upstream `pkg/registry/apps/daemonset`).

use serde_json::{Value, json};

use crate::registry::core::pod::default_pod_spec;
use crate::registry::strategy::{Causes, Strategy, set_default, spec_mut};
use crate::rest::validation;

pub struct DaemonSet;

impl Strategy for DaemonSet {
    fn defaults(&self, obj: &mut Value) {
        let Some(spec) = spec_mut(obj) else {
            return;
        };
        set_default(spec, "revisionHistoryLimit", json!(10));
        set_default(&mut spec["updateStrategy"], "type", json!("RollingUpdate"));
        if spec["updateStrategy"]["type"] == "RollingUpdate" {
            let ru = &mut spec["updateStrategy"]["rollingUpdate"];
            set_default(ru, "maxUnavailable", json!(1));
            set_default(ru, "maxSurge", json!(0));
        }
        default_pod_spec(&mut spec["template"]["spec"]);
    }

    fn validate(&self, obj: &Value, old: Option<&Value>, causes: &mut Causes) {
        validation::selector_immutable(obj, old, causes);
        super::validate_template(obj, &obj["spec"]["template"]["spec"], causes);
    }
}
