//! Pods (upstream `pkg/registry/core/pod`): a new pod starts Pending with its QoS class,
//! pod specs are defaulted (also inside every workload template, through
//! [`default_pod_spec`]), the node a pod is bound to changes only through `binding`, and a
//! delete of a pod running on a node waits for its grace period.

use serde_json::{Value, json};

use crate::registry::ResourceType;
use crate::registry::strategy::{
    Causes, Strategy, keep_metadata, set_default, spec_mut, update_base,
};
use crate::rest::validation;

/// The grace period of a pod when neither the request nor the pod gives one.
pub const DEFAULT_POD_GRACE: i64 = 30;

pub struct Pod;

impl Strategy for Pod {
    fn update_base(
        &self,
        res: &ResourceType,
        old: &Value,
        new: Value,
        subresource: Option<&str>,
    ) -> Value {
        let mut o = update_base(res, old, new, subresource);
        if subresource == Some("status") {
            // Status writes keep the owners (upstream's pod status strategy).
            keep_metadata(old, &mut o, "ownerReferences");
        }
        o
    }

    fn initial_status(&self, _obj: &Value) -> Option<Value> {
        // The QoS class is computed after defaulting ([`Strategy::finish_create`]).
        Some(json!({"phase": "Pending"}))
    }

    fn defaults(&self, obj: &mut Value) {
        if let Some(spec) = spec_mut(obj) {
            default_pod_spec(spec);
            default_requests_from_limits(spec);
        }
    }

    fn finish_create(&self, obj: &mut Value) {
        // As upstream: on the pod as defaulted (requests from limits).
        obj["status"]["qosClass"] = json!(qos_class(obj));
    }

    fn prepare_update(&self, old: &Value, new: &mut Value, _subresource: Option<&str>) {
        // The node a pod is bound to changes only through the binding subresource.
        if !old["spec"]["nodeName"].is_null() {
            new["spec"]["nodeName"] = old["spec"]["nodeName"].clone();
        }
    }

    fn validate(&self, obj: &Value, old: Option<&Value>, causes: &mut Causes) {
        validation::pod_spec("spec", &obj["spec"], causes);
        if let Some(old) = old {
            validation::pod_update(old, obj, causes);
        }
    }

    /// Pods bound to a node and not finished get one.
    fn grace_period(&self, obj: &Value, requested: Option<i64>) -> i64 {
        let phase = obj["status"]["phase"].as_str().unwrap_or("");
        if obj["spec"]["nodeName"].as_str().unwrap_or("").is_empty()
            || matches!(phase, "Succeeded" | "Failed")
        {
            return 0;
        }
        requested
            .or_else(|| obj["spec"]["terminationGracePeriodSeconds"].as_i64())
            .unwrap_or(DEFAULT_POD_GRACE)
            .max(0)
    }
}

/// Upstream's SetDefaults_Pod (pods only, not templates): a resource a container limits but
/// does not request requests its limit. It runs before admission, so LimitRanger's
/// `defaultRequest` fills only what neither gives.
fn default_requests_from_limits(spec: &mut Value) {
    for list in ["initContainers", "containers"] {
        for c in spec
            .get_mut(list)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            let Some(limits) = c["resources"]["limits"].as_object().cloned() else {
                continue;
            };
            if limits.is_empty() {
                continue;
            }
            let requests = &mut c["resources"]["requests"];
            if !requests.is_object() {
                *requests = json!({});
            }
            for (name, q) in limits {
                set_default(requests, &name, q);
            }
        }
    }
}

/// The defaults of a pod spec (a pod's or a template's).
pub fn default_pod_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    set_default(spec, "restartPolicy", json!("Always"));
    set_default(spec, "dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "schedulerName", json!("default-scheduler"));
    set_default(
        spec,
        "terminationGracePeriodSeconds",
        json!(DEFAULT_POD_GRACE),
    );
    set_default(spec, "securityContext", json!({}));
    set_default(spec, "enableServiceLinks", json!(true));
    for list in ["initContainers", "containers"] {
        if let Some(cs) = spec.get_mut(list).and_then(Value::as_array_mut) {
            for c in cs {
                let image = c["image"].as_str().unwrap_or("");
                let tag = image
                    .rsplit('/')
                    .next()
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, t)| t);
                let policy = if image.contains('@') || tag.is_some_and(|t| t != "latest") {
                    "IfNotPresent"
                } else {
                    "Always"
                };
                set_default(c, "imagePullPolicy", json!(policy));
                set_default(c, "terminationMessagePath", json!("/dev/termination-log"));
                set_default(c, "terminationMessagePolicy", json!("File"));
                set_default(c, "resources", json!({}));
                if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
                    for p in ports {
                        set_default(p, "protocol", json!("TCP"));
                    }
                }
            }
        }
    }
}

/// The pod's QoS class from its containers' requests and limits
/// ([`k1s_api::resource::qos_class`]).
pub fn qos_class(pod: &Value) -> &'static str {
    k1s_api::resource::qos_class(&k1s_api::resource::SpecJson(&pod["spec"])).as_str()
}
