//! The field selectors each resource supports, as upstream registers them (the `GetAttrs` /
//! `ToSelectableFields` of each registry strategy), and their values for an object.

use k1s_api::selector::FieldSelector;
use serde_json::Value;

use crate::registry::ResourceType;
use crate::status::ApiError;

/// The fields a resource supports beyond `metadata.name` and `metadata.namespace`, each with
/// the JSON path its value is read from.
fn extra_fields(res: &ResourceType) -> &'static [(&'static str, &'static [&'static str])] {
    match (res.group.as_str(), res.plural.as_str()) {
        ("", "pods") => &[
            ("spec.nodeName", &["spec", "nodeName"]),
            ("spec.restartPolicy", &["spec", "restartPolicy"]),
            ("spec.schedulerName", &["spec", "schedulerName"]),
            ("spec.serviceAccountName", &["spec", "serviceAccountName"]),
            ("spec.hostNetwork", &["spec", "hostNetwork"]),
            ("status.phase", &["status", "phase"]),
            ("status.podIP", &["status", "podIP"]),
            ("status.nominatedNodeName", &["status", "nominatedNodeName"]),
        ],
        ("", "events") => &[
            ("involvedObject.kind", &["involvedObject", "kind"]),
            ("involvedObject.namespace", &["involvedObject", "namespace"]),
            ("involvedObject.name", &["involvedObject", "name"]),
            ("involvedObject.uid", &["involvedObject", "uid"]),
            (
                "involvedObject.apiVersion",
                &["involvedObject", "apiVersion"],
            ),
            (
                "involvedObject.resourceVersion",
                &["involvedObject", "resourceVersion"],
            ),
            ("involvedObject.fieldPath", &["involvedObject", "fieldPath"]),
            ("reason", &["reason"]),
            ("reportingComponent", &["reportingComponent"]),
            ("source", &["source", "component"]),
            ("type", &["type"]),
        ],
        ("events.k8s.io", "events") => &[
            ("regarding.kind", &["regarding", "kind"]),
            ("regarding.namespace", &["regarding", "namespace"]),
            ("regarding.name", &["regarding", "name"]),
            ("regarding.uid", &["regarding", "uid"]),
            ("reason", &["reason"]),
            ("reportingController", &["reportingController"]),
            ("type", &["type"]),
        ],
        ("", "secrets") => &[("type", &["type"])],
        ("", "nodes") => &[("spec.unschedulable", &["spec", "unschedulable"])],
        ("", "namespaces") => &[("status.phase", &["status", "phase"])],
        ("", "replicationcontrollers") | ("apps", "replicasets") => {
            &[("status.replicas", &["status", "replicas"])]
        }
        ("batch", "jobs") => &[("status.successful", &["status", "successful"])],
        ("certificates.k8s.io", "certificatesigningrequests") => {
            &[("spec.signerName", &["spec", "signerName"])]
        }
        _ => &[],
    }
}

/// Checks that every field of `sel` is supported by `res`.
pub fn check(res: &ResourceType, sel: &FieldSelector) -> Result<(), ApiError> {
    for r in &sel.0 {
        let known = matches!(r.field.as_str(), "metadata.name" | "metadata.namespace")
            || extra_fields(res).iter().any(|(f, _)| *f == r.field);
        if !known {
            return Err(ApiError::bad_request(format!(
                "field label not supported: {}",
                r.field
            )));
        }
    }
    Ok(())
}

/// The value of a supported field of `obj`, as a string ("" when unset; booleans and numbers
/// in their Go formatting, so `spec.unschedulable=false` matches an unset field).
pub fn value(res: &ResourceType, obj: &Value, field: &str) -> String {
    let path: &[&str] = match field {
        "metadata.name" => &["metadata", "name"],
        "metadata.namespace" => &["metadata", "namespace"],
        _ => match extra_fields(res).iter().find(|(f, _)| *f == field) {
            Some((_, p)) => p,
            None => return String::new(),
        },
    };
    let mut v = path.iter().fold(obj, |v, k| &v[*k]);
    // A core Event's `source` is its reporting component when it has no source (an event
    // written through events.k8s.io), as upstream's event strategy selects it.
    if field == "source" && res.group.is_empty() && v.as_str().is_none_or(str::is_empty) {
        v = &obj["reportingComponent"];
    }
    match v {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Null if matches!(field, "spec.hostNetwork" | "spec.unschedulable") => "false".into(),
        Value::Null if field == "status.replicas" || field == "status.successful" => "0".into(),
        _ => String::new(),
    }
}

/// Whether `obj` matches `sel`.
pub fn matches(res: &ResourceType, sel: &FieldSelector, obj: &Value) -> bool {
    sel.matches(|f| value(res, obj, f))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;
    use serde_json::json;

    #[test]
    fn an_event_without_a_source_is_selected_by_its_reporting_component() {
        let reg = Registry::new();
        let events = reg.get("", "v1", "events").unwrap();
        let sel = FieldSelector::parse("source=test-controller").unwrap();
        let from_events_api = json!({"reportingComponent": "test-controller"});
        assert!(matches(&events, &sel, &from_events_api));
        let both =
            json!({"source": {"component": "kubelet"}, "reportingComponent": "test-controller"});
        assert!(!matches(&events, &sel, &both));
    }

    #[test]
    fn pod_and_event_fields() {
        let reg = Registry::new();
        let pods = reg.get("", "v1", "pods").unwrap();
        let pod = json!({"metadata": {"name": "p", "namespace": "d"},
            "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}});
        let sel =
            FieldSelector::parse("spec.nodeName=n1,status.phase!=Failed,metadata.namespace=d")
                .unwrap();
        check(&pods, &sel).unwrap();
        assert!(matches(&pods, &sel, &pod));
        assert!(matches(
            &pods,
            &FieldSelector::parse("spec.hostNetwork=false").unwrap(),
            &pod
        ));
        let bad = FieldSelector::parse("spec.bogus=1").unwrap();
        assert_eq!(check(&pods, &bad).unwrap_err().code, 400);
        let events = reg.get("", "v1", "events").unwrap();
        let ev = json!({"involvedObject": {"name": "p", "uid": "u"}, "source": {"component": "k"}});
        let sel =
            FieldSelector::parse("involvedObject.name=p,involvedObject.uid=u,source=k").unwrap();
        check(&events, &sel).unwrap();
        assert!(matches(&events, &sel, &ev));
    }
}
