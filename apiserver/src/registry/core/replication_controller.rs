//! ReplicationControllers (upstream `pkg/registry/core/replicationcontroller`).

use serde_json::{Value, json};

use super::pod::default_pod_spec;
use crate::registry::strategy::{Causes, Strategy, set_default};
use crate::rest::validation;

pub struct ReplicationController;

impl Strategy for ReplicationController {
    /// Upstream's SetDefaults_ReplicationController: the selector and the object's labels
    /// default to the template's labels; one replica; the template's pod spec defaults.
    fn defaults(&self, obj: &mut Value) {
        if !obj.get("spec").is_some_and(Value::is_object) {
            return;
        }
        let labels = obj["spec"]["template"]["metadata"]["labels"].clone();
        if labels.as_object().is_some_and(|l| !l.is_empty()) {
            if obj["spec"]["selector"]
                .as_object()
                .is_none_or(|s| s.is_empty())
            {
                obj["spec"]["selector"] = labels.clone();
            }
            if obj["metadata"]["labels"]
                .as_object()
                .is_none_or(|l| l.is_empty())
            {
                obj["metadata"]["labels"] = labels;
            }
        }
        let spec = &mut obj["spec"];
        set_default(spec, "replicas", json!(1));
        default_pod_spec(&mut spec["template"]["spec"]);
    }

    fn validate(&self, obj: &Value, _old: Option<&Value>, causes: &mut Causes) {
        validation::replication_controller(obj, causes);
    }
}
