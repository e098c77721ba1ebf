//! CustomResourceDefinitions: their rules live with the rest of CRD support in
//! [`crate::crds`]; this attaches them to the kind.

use serde_json::Value;

use super::strategy::{Causes, Strategy};

pub struct CustomResourceDefinition;

impl Strategy for CustomResourceDefinition {
    fn prepare_create(&self, obj: &mut Value) {
        crate::crds::prepare_create(obj);
    }

    fn defaults(&self, obj: &mut Value) {
        crate::crds::default(obj);
    }

    fn prepare_update(&self, _old: &Value, new: &mut Value, _subresource: Option<&str>) {
        crate::crds::prepare_update(new);
    }

    fn validate(&self, obj: &Value, _old: Option<&Value>, causes: &mut Causes) {
        causes.extend(crate::crds::validate(obj));
    }
}
