//! PodTemplates: their template is a pod spec, defaulted and validated as one.

use serde_json::Value;

use super::pod::default_pod_spec;
use crate::registry::strategy::{Causes, Strategy};
use crate::rest::validation;

pub struct PodTemplate;

impl Strategy for PodTemplate {
    fn defaults(&self, obj: &mut Value) {
        default_pod_spec(&mut obj["template"]["spec"]);
    }

    fn validate(&self, obj: &Value, _old: Option<&Value>, causes: &mut Causes) {
        validation::pod_spec("template.spec", &obj["template"]["spec"], causes);
    }
}
