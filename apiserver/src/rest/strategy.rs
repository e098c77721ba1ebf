//! Per-kind rules of upstream's registry strategies: what a create resets, what status a new
//! object starts with, defaults, validation beyond typing, and how deletion waits.
//!
//! Kinds without rules here get the generic behaviour of [`super::write`].

use serde_json::{Value, json};

use super::meta;
use crate::registry::ResourceType;
use crate::status::ApiError;

/// The grace period of a pod when neither the request nor the pod gives one.
const DEFAULT_POD_GRACE: i64 = 30;

fn kind_of(res: &ResourceType) -> (&str, &str) {
    (res.group.as_str(), res.kind.as_str())
}

/// Resets what clients cannot set on create and fills in defaults.
pub fn prepare_create(res: &ResourceType, obj: &mut Value) {
    if res.has_status() {
        let status = match kind_of(res) {
            ("", "Pod") => json!({"phase": "Pending", "qosClass": qos_class(obj)}),
            ("", "Namespace") => json!({"phase": "Active"}),
            ("", "PersistentVolumeClaim" | "PersistentVolume") => json!({"phase": "Pending"}),
            ("", "Service") => json!({"loadBalancer": {}}),
            // Nodes are created by their kubelet, status included.
            ("", "Node") => obj.get("status").cloned().unwrap_or(json!({})),
            _ => Value::Null,
        };
        match status {
            Value::Null => {
                obj.as_object_mut().map(|m| m.remove("status"));
            }
            s => obj["status"] = s,
        }
    }
    match kind_of(res) {
        ("", "Namespace") if obj["spec"]["finalizers"].is_null() => {
            obj["spec"]["finalizers"] = json!(["kubernetes"]);
        }
        ("", "Pod") => default_pod_spec(&mut obj["spec"]),
        ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet") => {
            let spec = &mut obj["spec"];
            if kind_of(res).1 != "DaemonSet" && spec["replicas"].is_null() {
                spec["replicas"] = json!(1);
            }
            if kind_of(res).1 == "Deployment" {
                set_default(spec, "revisionHistoryLimit", json!(10));
                set_default(spec, "progressDeadlineSeconds", json!(600));
                if spec["strategy"]["type"].is_null() {
                    spec["strategy"]["type"] = json!("RollingUpdate");
                }
                if spec["strategy"]["type"] == "RollingUpdate"
                    && spec["strategy"]["rollingUpdate"].is_null()
                {
                    spec["strategy"]["rollingUpdate"] =
                        json!({"maxSurge": "25%", "maxUnavailable": "25%"});
                }
            }
            default_pod_spec(&mut spec["template"]["spec"]);
        }
        ("batch", "Job") => default_pod_spec(&mut obj["spec"]["template"]["spec"]),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => crate::crds::prepare_create(obj),
        ("", "Service") => {
            let spec = &mut obj["spec"];
            set_default(spec, "type", json!("ClusterIP"));
            set_default(spec, "sessionAffinity", json!("None"));
            if let Some(ports) = spec["ports"].as_array_mut() {
                for p in ports {
                    set_default(p, "protocol", json!("TCP"));
                    if p["targetPort"].is_null() {
                        p["targetPort"] = p["port"].clone();
                    }
                }
            }
        }
        _ => {}
    }
}

/// Keeps what an update may not change.
pub fn prepare_update(res: &ResourceType, old: &Value, new: &mut Value) {
    if kind_of(res) == ("", "Pod") {
        // The node a pod is bound to changes only through the binding subresource.
        if !old["spec"]["nodeName"].is_null() {
            new["spec"]["nodeName"] = old["spec"]["nodeName"].clone();
        }
    }
}

/// Validation that typing does not cover, with upstream's messages.
pub fn validate(res: &ResourceType, obj: &Value) -> Result<(), ApiError> {
    let mut causes = Vec::new();
    let pod_spec = match kind_of(res) {
        ("", "Pod") => Some(("spec", &obj["spec"])),
        ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet") | ("batch", "Job") => {
            Some(("spec.template.spec", &obj["spec"]["template"]["spec"]))
        }
        _ => None,
    };
    if let Some((path, spec)) = pod_spec {
        let containers = spec["containers"].as_array().map_or(&[][..], Vec::as_slice);
        if containers.is_empty() {
            causes.push((format!("{path}.containers"), "Required value".to_owned()));
        }
        for (i, c) in containers.iter().enumerate() {
            if c["name"].as_str().unwrap_or("").is_empty() {
                causes.push((
                    format!("{path}.containers[{i}].name"),
                    "Required value".into(),
                ));
            }
            if c["image"].as_str().unwrap_or("").is_empty() {
                causes.push((
                    format!("{path}.containers[{i}].image"),
                    "Required value".into(),
                ));
            }
        }
    }
    if res.group == "apps" {
        let selector = &obj["spec"]["selector"];
        let labels = &obj["spec"]["template"]["metadata"]["labels"];
        let match_labels = selector["matchLabels"].as_object();
        if selector.is_null() {
            causes.push(("spec.selector".into(), "Required value".into()));
        } else if let Some(ml) = match_labels
            && ml.iter().any(|(k, v)| labels.get(k) != Some(v))
        {
            causes.push((
                "spec.template.metadata.labels".into(),
                format!(
                    "Invalid value: {}: `selector` does not match template `labels`",
                    serde_json::to_string(labels).unwrap_or_default()
                ),
            ));
        }
    }
    if res.is_crd() {
        causes.extend(crate::crds::validate(obj));
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(&res.kind, meta::name(obj), causes))
    }
}

/// The grace period a delete waits: pods bound to a node and not finished get one.
pub fn grace_period(res: &ResourceType, obj: &Value, requested: Option<i64>) -> i64 {
    if kind_of(res) != ("", "Pod") {
        return 0;
    }
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

/// Changes a delete makes besides the deletion timestamp.
pub fn prepare_delete(res: &ResourceType, obj: &mut Value) {
    if kind_of(res) == ("", "Namespace") {
        obj["status"]["phase"] = json!("Terminating");
    }
}

/// Whether something other than `metadata.finalizers` keeps a deleted object: a namespace
/// stays until its `spec.finalizers` are emptied through the `finalize` subresource.
pub fn blocks_deletion(res: &ResourceType, obj: &Value) -> bool {
    kind_of(res) == ("", "Namespace")
        && obj["spec"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty())
}

fn set_default(obj: &mut Value, key: &str, value: Value) {
    if obj[key].is_null() {
        obj[key] = value;
    }
}

/// The pod spec defaults of upstream's `SetDefaults_PodSpec` and `SetDefaults_Container`.
fn default_pod_spec(spec: &mut Value) {
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
        if let Some(cs) = spec[list].as_array_mut() {
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
                if let Some(ports) = c["ports"].as_array_mut() {
                    for p in ports {
                        set_default(p, "protocol", json!("TCP"));
                    }
                }
            }
        }
    }
}

/// The pod's QoS class from its containers' requests and limits.
fn qos_class(pod: &Value) -> &'static str {
    let containers: Vec<&Value> = ["initContainers", "containers"]
        .iter()
        .flat_map(|l| pod["spec"][l].as_array().into_iter().flatten())
        .collect();
    let mut any = false;
    let mut guaranteed = true;
    for c in containers {
        let req = &c["resources"]["requests"];
        let lim = &c["resources"]["limits"];
        for r in ["cpu", "memory"] {
            let (q, l) = (&req[r], &lim[r]);
            if !q.is_null() || !l.is_null() {
                any = true;
            }
            // Requests default to limits.
            if l.is_null() || (!q.is_null() && q != l) {
                guaranteed = false;
            }
        }
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    #[test]
    fn pods_get_defaults_and_pending_status() {
        let pods = Registry::new().get("", "v1", "pods").unwrap();
        let mut p = json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "c", "image": "busybox"}, {"name": "d", "image": "busybox:1.36"}]},
            "status": {"phase": "Running"}});
        prepare_create(&pods, &mut p);
        assert_eq!(p["status"]["phase"], "Pending");
        assert_eq!(p["status"]["qosClass"], "BestEffort");
        assert_eq!(p["spec"]["restartPolicy"], "Always");
        assert_eq!(p["spec"]["containers"][0]["imagePullPolicy"], "Always");
        assert_eq!(
            p["spec"]["containers"][1]["imagePullPolicy"],
            "IfNotPresent"
        );
        validate(&pods, &p).unwrap();
        let bad = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}});
        let e = validate(&pods, &bad).unwrap_err();
        assert_eq!(e.code, 422);
        assert!(
            e.message.contains("spec.containers[0].image"),
            "{}",
            e.message
        );
    }

    #[test]
    fn qos_classes() {
        let g = json!({"spec": {"containers": [{"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}});
        assert_eq!(qos_class(&g), "Guaranteed");
        let b = json!({"spec": {"containers": [{"resources": {"requests": {"cpu": "1"}}}]}});
        assert_eq!(qos_class(&b), "Burstable");
    }

    #[test]
    fn deployment_selector_must_match_template() {
        let d = Registry::new().get("apps", "v1", "deployments").unwrap();
        let obj = json!({"metadata": {"name": "d"}, "spec": {
            "selector": {"matchLabels": {"app": "x"}},
            "template": {"metadata": {"labels": {"app": "y"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        assert_eq!(validate(&d, &obj).unwrap_err().code, 422);
    }

    #[test]
    fn graceful_pod_deletion_only_when_bound() {
        let pods = Registry::new().get("", "v1", "pods").unwrap();
        let unbound = json!({"spec": {}});
        assert_eq!(grace_period(&pods, &unbound, None), 0);
        let bound = json!({"spec": {"nodeName": "n"}, "status": {"phase": "Running"}});
        assert_eq!(grace_period(&pods, &bound, None), 30);
        assert_eq!(grace_period(&pods, &bound, Some(0)), 0);
    }
}
