//! StatefulSets (upstream `pkg/registry/apps/statefulset`).

use serde_json::{Value, json};

use crate::registry::core::pod::default_pod_spec;
use crate::registry::strategy::{Causes, Strategy, set_default, spec_mut};
use crate::rest::validation;

pub struct StatefulSet;

impl Strategy for StatefulSet {
    fn defaults(&self, obj: &mut Value) {
        let Some(spec) = spec_mut(obj) else {
            return;
        };
        set_default(spec, "replicas", json!(1));
        set_default(spec, "podManagementPolicy", json!("OrderedReady"));
        set_default(spec, "revisionHistoryLimit", json!(10));
        set_default(&mut spec["updateStrategy"], "type", json!("RollingUpdate"));
        if spec["updateStrategy"]["type"] == "RollingUpdate" {
            set_default(
                &mut spec["updateStrategy"]["rollingUpdate"],
                "partition",
                json!(0),
            );
        }
        let retention = &mut spec["persistentVolumeClaimRetentionPolicy"];
        set_default(retention, "whenDeleted", json!("Retain"));
        set_default(retention, "whenScaled", json!("Retain"));
        for claim in spec["volumeClaimTemplates"]
            .as_array_mut()
            .into_iter()
            .flatten()
        {
            set_default(&mut claim["spec"], "volumeMode", json!("Filesystem"));
        }
        default_pod_spec(&mut spec["template"]["spec"]);
    }

    fn validate(&self, obj: &Value, old: Option<&Value>, causes: &mut Causes) {
        validation::selector_immutable(obj, old, causes);
        // The claim templates are volumes of the pods too (their mounts name them).
        let mut spec = obj["spec"]["template"]["spec"].clone();
        let claims: Vec<Value> = obj["spec"]["volumeClaimTemplates"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["metadata"]["name"].as_str())
            .map(|n| json!({"name": n, "persistentVolumeClaim": {"claimName": n}}))
            .collect();
        if !claims.is_empty() && spec.is_object() {
            let mut volumes = spec["volumes"].as_array().cloned().unwrap_or_default();
            volumes.extend(claims);
            spec["volumes"] = Value::Array(volumes);
        }
        super::validate_template(obj, &spec, causes);
    }
}
