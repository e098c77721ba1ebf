//! How the generic write path applies a kind's rules: the generic part of each step (a
//! create's status reset, validation's error), then the kind's [`Strategy`]
//! ([`crate::registry::strategy`], one file per kind under `registry/<group>/`).

use serde_json::Value;

use crate::registry::ResourceType;
use crate::status::ApiError;
use crate::user::UserInfo;

/// Resets what clients cannot set on create and fills in defaults.
pub fn prepare_create(res: &ResourceType, obj: &mut Value) {
    let strategy = res.strategy();
    if res.has_status() {
        match strategy.initial_status(obj) {
            Some(status) => obj["status"] = status,
            None => {
                obj.as_object_mut().map(|m| m.remove("status"));
            }
        }
    }
    strategy.prepare_create(obj);
    strategy.defaults(obj);
    strategy.finish_create(obj);
}

/// What a create takes from the requesting user (`None`: the server itself).
pub fn set_requestor(res: &ResourceType, obj: &mut Value, user: Option<&UserInfo>) {
    res.strategy().set_requestor(obj, user);
}

/// Keeps what an update may not change, and defaults the new object. `subresource` is the
/// write path (`status`, `approval`, ...; `None` for the object itself).
pub fn prepare_update(res: &ResourceType, old: &Value, new: &mut Value, subresource: Option<&str>) {
    let strategy = res.strategy();
    strategy.defaults(new);
    strategy.prepare_update(old, new, subresource);
}

/// Validation that typing does not cover, with upstream's messages; `old` is the stored
/// object on update.
pub fn validate(res: &ResourceType, obj: &Value, old: Option<&Value>) -> Result<(), ApiError> {
    let mut causes = Vec::new();
    res.strategy().validate(obj, old, &mut causes);
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(&res.kind, super::meta::name(obj), causes))
    }
}

/// The grace period a delete waits: pods bound to a node and not finished get one.
pub fn grace_period(res: &ResourceType, obj: &Value, requested: Option<i64>) -> i64 {
    res.strategy().grace_period(obj, requested)
}

/// Changes a delete makes besides the deletion timestamp.
pub fn prepare_delete(res: &ResourceType, obj: &mut Value) {
    res.strategy().prepare_delete(obj);
}

/// Whether something other than `metadata.finalizers` keeps a deleted object: a namespace
/// stays until its `spec.finalizers` are emptied through the `finalize` subresource.
pub fn blocks_deletion(res: &ResourceType, obj: &Value) -> bool {
    res.strategy().blocks_deletion(obj)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;
    use serde_json::json;

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
        // Defaulting adds no null members for lists the pod does not have.
        let spec = p["spec"].as_object().unwrap();
        assert!(!spec.contains_key("initContainers"), "{spec:?}");
        assert!(
            !p["spec"]["containers"][0]
                .as_object()
                .unwrap()
                .contains_key("ports")
        );
        validate(&pods, &p, None).unwrap();
        let bad = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}});
        let e = validate(&pods, &bad, None).unwrap_err();
        assert_eq!(e.code, 422);
        assert!(
            e.message.contains("spec.containers[0].image"),
            "{}",
            e.message
        );
    }

    #[test]
    fn pods_request_what_they_limit_templates_do_not() {
        let reg = Registry::new();
        let pods = reg.get("", "v1", "pods").unwrap();
        let mut p = json!({"spec": {"containers": [{"name": "c", "image": "i", "resources": {
            "requests": {"memory": "150Mi"}, "limits": {"cpu": "300m", "memory": "200Mi"}}}]}});
        pods.strategy().defaults(&mut p);
        assert_eq!(
            p["spec"]["containers"][0]["resources"]["requests"],
            json!({"cpu": "300m", "memory": "150Mi"})
        );
        let rs = reg.get("apps", "v1", "replicasets").unwrap();
        let mut r = json!({"spec": {"template": {"spec": {"containers": [{"name": "c",
            "image": "i", "resources": {"limits": {"cpu": "1"}}}]}}}});
        rs.strategy().defaults(&mut r);
        assert!(
            r["spec"]["template"]["spec"]["containers"][0]["resources"]
                .get("requests")
                .is_none()
        );
    }

    #[test]
    fn workload_defaults() {
        let reg = Registry::new();
        let job = reg.get("batch", "v1", "jobs").unwrap();
        let mut j =
            json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        job.strategy().defaults(&mut j);
        assert_eq!(
            (
                j["spec"]["completions"].as_i64(),
                j["spec"]["parallelism"].as_i64(),
                j["spec"]["backoffLimit"].as_i64()
            ),
            (Some(1), Some(1), Some(6))
        );
        assert_eq!(j["spec"]["template"]["spec"]["restartPolicy"], "Always");
        let sts = reg.get("apps", "v1", "statefulsets").unwrap();
        let mut s = json!({"spec": {"template": {"spec": {}}}});
        sts.strategy().defaults(&mut s);
        assert_eq!(s["spec"]["podManagementPolicy"], "OrderedReady");
        assert_eq!(s["spec"]["updateStrategy"]["rollingUpdate"]["partition"], 0);
        let cm = reg.get("", "v1", "configmaps").unwrap();
        let mut c = json!({"data": {}});
        cm.strategy().defaults(&mut c);
        assert!(c.get("spec").is_none());
        let secret = reg.get("", "v1", "secrets").unwrap();
        let mut sec = json!({});
        secret.strategy().defaults(&mut sec);
        assert_eq!(sec["type"], "Opaque");
        // A Service port's target port defaults to its port when absent, 0 (what client-go's
        // protobuf sends for an unset IntOrString) or "".
        let svc = reg.get("", "v1", "services").unwrap();
        let mut sv = json!({"spec": {"ports": [{"port": 80}, {"port": 81, "targetPort": 0},
            {"port": 82, "targetPort": ""}, {"port": 83, "targetPort": "http"}]}});
        svc.strategy().defaults(&mut sv);
        let targets: Vec<_> = sv["spec"]["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["targetPort"].clone())
            .collect();
        assert_eq!(targets, [json!(80), json!(81), json!(82), json!("http")]);
    }

    #[test]
    fn qos_class_is_computed_on_the_defaulted_pod() {
        let pods = Registry::new().get("", "v1", "pods").unwrap();
        // Limits only: requests default to them, so the pod is Guaranteed.
        let mut g = json!({"metadata": {"name": "g"}, "spec": {"containers": [{"name": "c",
            "image": "i", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}});
        prepare_create(&pods, &mut g);
        assert_eq!(g["status"]["qosClass"], "Guaranteed");
        let mut b = json!({"metadata": {"name": "b"}, "spec": {"containers": [{"name": "c",
            "image": "i", "resources": {"requests": {"cpu": "1"}}}]}});
        prepare_create(&pods, &mut b);
        assert_eq!(b["status"]["qosClass"], "Burstable");
    }

    #[test]
    fn deployment_selector_must_match_template() {
        let d = Registry::new().get("apps", "v1", "deployments").unwrap();
        let obj = json!({"metadata": {"name": "d"}, "spec": {
            "selector": {"matchLabels": {"app": "x"}},
            "template": {"metadata": {"labels": {"app": "y"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        assert_eq!(validate(&d, &obj, None).unwrap_err().code, 422);
    }

    #[test]
    fn statefulset_mounts_may_name_claim_templates() {
        let sts = Registry::new().get("apps", "v1", "statefulsets").unwrap();
        let obj = |claim: &str| {
            json!({"metadata": {"name": "ss"}, "spec": {
            "selector": {"matchLabels": {"app": "x"}}, "serviceName": "s",
            "volumeClaimTemplates": [{"metadata": {"name": claim}, "spec": {
                "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}],
            "template": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{
                "name": "c", "image": "i",
                "volumeMounts": [{"name": "datadir", "mountPath": "/data"}]}]}}}})
        };
        validate(&sts, &obj("datadir"), None).unwrap();
        let e = validate(&sts, &obj("other"), None).unwrap_err();
        assert_eq!(e.code, 422);
    }

    #[test]
    fn namespaces_carry_their_name_as_a_label() {
        let ns = Registry::new().get("", "v1", "namespaces").unwrap();
        let mut obj = json!({"metadata": {"name": "team-a", "labels": {"kubernetes.io/metadata.name": "other", "x": "y"}}});
        ns.strategy().defaults(&mut obj);
        assert_eq!(
            obj["metadata"]["labels"],
            json!({"kubernetes.io/metadata.name": "team-a", "x": "y"})
        );
        let mut bare = json!({"metadata": {"name": "b"}});
        ns.strategy().defaults(&mut bare);
        assert_eq!(
            bare["metadata"]["labels"]["kubernetes.io/metadata.name"],
            "b"
        );
    }

    #[test]
    fn network_policies_defaulted_and_validated() {
        let np = Registry::new()
            .get("networking.k8s.io", "v1", "networkpolicies")
            .unwrap();
        let mut obj = json!({"metadata": {"name": "np", "namespace": "d"}, "spec": {
            "egress": [{"ports": [{"port": 53, "protocol": "UDP"}, {"port": 443}]}]}});
        prepare_create(&np, &mut obj);
        assert_eq!(obj["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
        assert_eq!(obj["spec"]["egress"][0]["ports"][1]["protocol"], "TCP");
        validate(&np, &obj, None).unwrap();
        obj["spec"]["egress"][0]["to"] = json!([{}]);
        let e = validate(&np, &obj, Some(&obj)).unwrap_err();
        assert_eq!(e.code, 422);
        let causes = e.details.and_then(|d| d.causes).unwrap_or_default();
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert_eq!(causes[0].field.as_deref(), Some("spec.egress[0].to[0]"));
        assert_eq!(
            causes[0].message.as_deref(),
            Some("Required value: must specify a peer")
        );
    }

    #[test]
    fn controller_revisions_hold_data_not_a_template() {
        let revs = Registry::new()
            .get("apps", "v1", "controllerrevisions")
            .unwrap();
        let obj = json!({"metadata": {"name": "ds-1"}, "revision": 1,
            "data": {"spec": {"template": {"$patch": "replace", "spec": {}}}}});
        assert!(validate(&revs, &obj, None).is_ok());
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
