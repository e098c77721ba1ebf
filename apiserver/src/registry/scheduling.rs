//! PriorityClasses (upstream `pkg/registry/scheduling`).

use serde_json::{Value, json};

use super::strategy::{Causes, Strategy, set_default};
use crate::rest::validation;

pub struct PriorityClass;

impl Strategy for PriorityClass {
    fn defaults(&self, obj: &mut Value) {
        set_default(obj, "preemptionPolicy", json!("PreemptLowerPriority"));
    }

    fn validate(&self, obj: &Value, old: Option<&Value>, causes: &mut Causes) {
        validation::priority_class(obj, old, causes);
    }
}
