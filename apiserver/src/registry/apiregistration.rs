//! APIServices (upstream kube-aggregator's registry): the service port defaults to 443.

use serde_json::{Value, json};

use super::strategy::{Causes, Strategy, set_default, spec_mut};
use crate::rest::validation;

pub struct ApiService;

impl Strategy for ApiService {
    fn defaults(&self, obj: &mut Value) {
        if let Some(svc) = spec_mut(obj)
            .and_then(|spec| spec.get_mut("service"))
            .filter(|s| s.is_object())
        {
            set_default(svc, "port", json!(443));
        }
    }

    fn validate(&self, obj: &Value, _old: Option<&Value>, causes: &mut Causes) {
        validation::api_service(obj, causes);
    }
}
