//! Services (upstream `pkg/registry/core/service`): defaults and validation here, ClusterIP
//! and NodePort allocation in [`allocator`] (the strategy's side effects).

pub mod allocator;

use serde_json::{Value, json};

use crate::registry::side_effects::SideEffects;
use crate::registry::strategy::{Causes, Strategy, set_default, spec_mut};
use crate::rest::validation;

pub struct Service;

impl Strategy for Service {
    fn side_effects(&self) -> Option<&dyn SideEffects> {
        Some(&allocator::Allocations)
    }

    fn initial_status(&self, _obj: &Value) -> Option<Value> {
        Some(json!({"loadBalancer": {}}))
    }

    fn defaults(&self, obj: &mut Value) {
        let Some(spec) = spec_mut(obj) else {
            return;
        };
        set_default(spec, "type", json!("ClusterIP"));
        set_default(spec, "sessionAffinity", json!("None"));
        for p in spec
            .get_mut("ports")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            set_default(p, "protocol", json!("TCP"));
            // Upstream defaults a zero target port too: client-go's protobuf encoding always
            // sends the field, as the integer 0 when the user set none.
            if p["targetPort"].is_null() || p["targetPort"] == 0 || p["targetPort"] == "" {
                p["targetPort"] = p["port"].clone();
            }
        }
    }

    fn validate(&self, obj: &Value, _old: Option<&Value>, causes: &mut Causes) {
        validation::service(obj, causes);
    }
}
