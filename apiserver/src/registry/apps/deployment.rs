//! Deployments (upstream `pkg/registry/apps/deployment`).

use serde_json::{Value, json};

use crate::registry::ResourceType;
use crate::registry::core::pod::default_pod_spec;
use crate::registry::strategy::{
    Causes, Strategy, keep_metadata, set_default, spec_mut, update_base,
};
use crate::rest::validation;

pub struct Deployment;

impl Strategy for Deployment {
    fn update_base(
        &self,
        res: &ResourceType,
        old: &Value,
        new: Value,
        subresource: Option<&str>,
    ) -> Value {
        let mut o = update_base(res, old, new, subresource);
        if subresource == Some("status") {
            // Status writes keep the labels (upstream's deployment status strategy).
            keep_metadata(old, &mut o, "labels");
        }
        o
    }

    fn defaults(&self, obj: &mut Value) {
        let Some(spec) = spec_mut(obj) else {
            return;
        };
        set_default(spec, "replicas", json!(1));
        set_default(spec, "revisionHistoryLimit", json!(10));
        set_default(spec, "progressDeadlineSeconds", json!(600));
        set_default(&mut spec["strategy"], "type", json!("RollingUpdate"));
        if spec["strategy"]["type"] == "RollingUpdate" {
            let ru = &mut spec["strategy"]["rollingUpdate"];
            set_default(ru, "maxSurge", json!("25%"));
            set_default(ru, "maxUnavailable", json!("25%"));
        }
        default_pod_spec(&mut spec["template"]["spec"]);
    }

    fn validate(&self, obj: &Value, old: Option<&Value>, causes: &mut Causes) {
        validation::deployment(obj, old, causes);
        super::validate_template(obj, &obj["spec"]["template"]["spec"], causes);
    }
}
