//! Per-kind rules of upstream's registry strategies: what a create resets, what status a new
//! object starts with, defaults, validation beyond typing, and how deletion waits.
//!
//! Kinds without rules here get the generic behaviour of [`super::write`].

use serde_json::{Value, json};

use super::{
    certificates, config_data, meta, network_policy, runtime_class, validation, webhook_config,
};
use crate::auth::UserInfo;
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
            // The QoS class is computed after defaulting (below).
            ("", "Pod") => json!({"phase": "Pending"}),
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
    if res.is_crd() {
        crate::crds::prepare_create(obj);
    }
    if kind_of(res) == ("", "Namespace") {
        // Every namespace carries the `kubernetes` finalizer, whatever else the client asked
        // for: the namespace controller empties it before it goes.
        if !obj["spec"].is_object() {
            obj["spec"] = json!({});
        }
        let f = &mut obj["spec"]["finalizers"];
        match f.as_array_mut() {
            Some(list) if !list.iter().any(|x| x == "kubernetes") => list.push(json!("kubernetes")),
            Some(_) => {}
            None => *f = json!(["kubernetes"]),
        }
    }
    if kind_of(res) == ("batch", "Job") {
        generate_job_selector(obj);
    }
    apply_defaults(res, obj);
    if kind_of(res) == ("", "Pod") {
        // As upstream: on the pod as defaulted (requests from limits).
        obj["status"]["qosClass"] = json!(qos_class(obj));
    }
}

/// Upstream's job `generateSelector`: unless `spec.manualSelector`, the selector is the new
/// UID's `batch.kubernetes.io/controller-uid` label, and the template carries that label, the
/// job name label and their legacy unprefixed forms.
fn generate_job_selector(job: &mut Value) {
    if job["spec"]["manualSelector"] == true || !job["spec"].is_object() {
        return;
    }
    let (uid, name) = (
        job["metadata"]["uid"].clone(),
        job["metadata"]["name"].clone(),
    );
    let labels = [
        ("batch.kubernetes.io/controller-uid", &uid),
        ("batch.kubernetes.io/job-name", &name),
        ("controller-uid", &uid),
        ("job-name", &name),
    ];
    let template_labels = &mut job["spec"]["template"]["metadata"]["labels"];
    if !template_labels.is_object() {
        *template_labels = json!({});
    }
    for (k, v) in labels {
        template_labels[k] = v.clone();
    }
    job["spec"]["selector"] = json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}});
}

/// Upstream's defaulting (`SetDefaults_*`) of the fields components rely on; it runs on every
/// create and update, as decoding does upstream.
pub fn apply_defaults(res: &ResourceType, obj: &mut Value) {
    if res.is_crd() {
        crate::crds::default(obj);
    }
    if kind_of(res) == ("", "Namespace") {
        // Upstream (1.21+) labels every namespace with its own name on create and update,
        // so that NetworkPolicy namespace selectors can pick namespaces by name.
        let name = obj["metadata"]["name"].clone();
        if name.is_string() {
            if !obj["metadata"]["labels"].is_object() {
                obj["metadata"]["labels"] = json!({});
            }
            obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
        }
    }
    match kind_of(res) {
        ("", "Secret") => {
            set_default(obj, "type", json!("Opaque"));
            config_data::fold_string_data(obj);
        }
        ("", "PodTemplate") => default_pod_spec(&mut obj["template"]["spec"]),
        ("", "ReplicationController") if obj.get("spec").is_some_and(Value::is_object) => {
            // Upstream's SetDefaults_ReplicationController: the selector and the object's
            // labels default to the template's labels.
            let labels = obj["spec"]["template"]["metadata"]["labels"].clone();
            if labels.as_object().is_some_and(|l| !l.is_empty()) {
                if obj["spec"]["selector"]
                    .as_object()
                    .is_none_or(|s| s.is_empty())
                {
                    obj["spec"]["selector"] = labels.clone();
                }
                if obj["metadata"]["labels"]
                    .as_object()
                    .is_none_or(|l| l.is_empty())
                {
                    obj["metadata"]["labels"] = labels;
                }
            }
            let spec = &mut obj["spec"];
            set_default(spec, "replicas", json!(1));
            default_pod_spec(&mut spec["template"]["spec"]);
        }
        ("storage.k8s.io", "StorageClass") => {
            set_default(obj, "reclaimPolicy", json!("Delete"));
            set_default(obj, "volumeBindingMode", json!("Immediate"));
        }
        ("scheduling.k8s.io", "PriorityClass") => {
            set_default(obj, "preemptionPolicy", json!("PreemptLowerPriority"));
        }
        ("networking.k8s.io", "NetworkPolicy") => network_policy::apply_defaults(obj),
        (
            "admissionregistration.k8s.io",
            kind @ ("MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration"),
        ) => {
            webhook_config::apply_defaults(obj, kind.starts_with("Mutating"));
        }
        // The remaining kinds default inside `spec`; an object without one is left alone
        // (indexing would add `"spec": null`).
        _ if obj.get("spec").is_some_and(Value::is_object) => default_spec(res, &mut obj["spec"]),
        _ => {}
    }
}

fn default_spec(res: &ResourceType, spec: &mut Value) {
    match kind_of(res) {
        ("", "Namespace") => set_default(spec, "finalizers", json!(["kubernetes"])),
        ("", "Pod") => {
            default_pod_spec(spec);
            default_requests_from_limits(spec);
        }
        ("apiregistration.k8s.io", "APIService") => {
            if let Some(svc) = spec.get_mut("service").filter(|s| s.is_object()) {
                set_default(svc, "port", json!(443));
            }
        }
        ("", "PersistentVolumeClaim") => set_default(spec, "volumeMode", json!("Filesystem")),
        ("", "PersistentVolume") => {
            set_default(spec, "persistentVolumeReclaimPolicy", json!("Retain"));
            set_default(spec, "volumeMode", json!("Filesystem"));
        }
        ("", "Service") => {
            set_default(spec, "type", json!("ClusterIP"));
            set_default(spec, "sessionAffinity", json!("None"));
            for p in spec
                .get_mut("ports")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                set_default(p, "protocol", json!("TCP"));
                // Upstream defaults a zero target port too: client-go's protobuf encoding
                // always sends the field, as the integer 0 when the user set none.
                if p["targetPort"].is_null() || p["targetPort"] == 0 || p["targetPort"] == "" {
                    p["targetPort"] = p["port"].clone();
                }
            }
        }
        ("apps", "Deployment") => {
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
        ("apps", "ReplicaSet") => {
            set_default(spec, "replicas", json!(1));
            default_pod_spec(&mut spec["template"]["spec"]);
        }
        ("apps", "StatefulSet") => {
            set_default(spec, "replicas", json!(1));
            set_default(spec, "podManagementPolicy", json!("OrderedReady"));
            set_default(spec, "revisionHistoryLimit", json!(10));
            set_default(&mut spec["updateStrategy"], "type", json!("RollingUpdate"));
            if spec["updateStrategy"]["type"] == "RollingUpdate" {
                set_default(
                    &mut spec["updateStrategy"]["rollingUpdate"],
                    "partition",
                    json!(0),
                );
            }
            let retention = &mut spec["persistentVolumeClaimRetentionPolicy"];
            set_default(retention, "whenDeleted", json!("Retain"));
            set_default(retention, "whenScaled", json!("Retain"));
            for claim in spec["volumeClaimTemplates"]
                .as_array_mut()
                .into_iter()
                .flatten()
            {
                set_default(&mut claim["spec"], "volumeMode", json!("Filesystem"));
            }
            default_pod_spec(&mut spec["template"]["spec"]);
        }
        ("apps", "DaemonSet") => {
            set_default(spec, "revisionHistoryLimit", json!(10));
            set_default(&mut spec["updateStrategy"], "type", json!("RollingUpdate"));
            if spec["updateStrategy"]["type"] == "RollingUpdate" {
                let ru = &mut spec["updateStrategy"]["rollingUpdate"];
                set_default(ru, "maxUnavailable", json!(1));
                set_default(ru, "maxSurge", json!(0));
            }
            default_pod_spec(&mut spec["template"]["spec"]);
        }
        ("batch", "Job") => default_job_spec(spec),
        ("batch", "CronJob") => {
            set_default(spec, "concurrencyPolicy", json!("Allow"));
            set_default(spec, "suspend", json!(false));
            set_default(spec, "successfulJobsHistoryLimit", json!(3));
            set_default(spec, "failedJobsHistoryLimit", json!(1));
            default_job_spec(&mut spec["jobTemplate"]["spec"]);
        }
        ("storage.k8s.io", "CSIDriver") => {
            set_default(spec, "attachRequired", json!(true));
            set_default(spec, "podInfoOnMount", json!(false));
            set_default(spec, "storageCapacity", json!(false));
            set_default(spec, "requiresRepublish", json!(false));
            set_default(spec, "seLinuxMount", json!(false));
            set_default(spec, "fsGroupPolicy", json!("ReadWriteOnceWithFSType"));
            set_default(spec, "volumeLifecycleModes", json!(["Persistent"]));
        }
        _ => {}
    }
}

/// `SetDefaults_Job`: one completion, one pod at a time, six retries, NonIndexed, and the pod
/// template's defaults.
fn default_job_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    let indexed = spec["completionMode"] == "Indexed";
    if spec["completions"].is_null() && spec["parallelism"].is_null() {
        spec["completions"] = json!(1);
        spec["parallelism"] = json!(1);
    }
    set_default(spec, "parallelism", json!(1));
    // With backoffLimitPerIndex the job-wide limit is effectively unlimited.
    let per_index = indexed && !spec["backoffLimitPerIndex"].is_null();
    set_default(
        spec,
        "backoffLimit",
        json!(if per_index { i32::MAX } else { 6 }),
    );
    set_default(spec, "completionMode", json!("NonIndexed"));
    set_default(spec, "suspend", json!(false));
    default_pod_spec(&mut spec["template"]["spec"]);
}

/// What a create takes from the requesting user (`None`: the server itself): the requestor
/// of a CertificateSigningRequest.
pub fn set_requestor(res: &ResourceType, obj: &mut Value, user: Option<&UserInfo>) {
    if kind_of(res) == ("certificates.k8s.io", "CertificateSigningRequest") {
        certificates::set_requestor(obj, user);
    }
}

/// Keeps what an update may not change, and defaults the new object. `subresource` is the
/// write path (`status`, `approval`, ...; `None` for the object itself).
pub fn prepare_update(res: &ResourceType, old: &Value, new: &mut Value, subresource: Option<&str>) {
    apply_defaults(res, new);
    if kind_of(res) == ("certificates.k8s.io", "CertificateSigningRequest") {
        certificates::prepare_update(old, new, subresource, &meta::now());
    }
    if res.is_crd() {
        crate::crds::prepare_update(new);
    }
    if kind_of(res) == ("", "Pod") {
        // The node a pod is bound to changes only through the binding subresource.
        if !old["spec"]["nodeName"].is_null() {
            new["spec"]["nodeName"] = old["spec"]["nodeName"].clone();
        }
    }
}

/// Validation that typing does not cover, with upstream's messages; `old` is the stored
/// object on update.
pub fn validate(res: &ResourceType, obj: &Value, old: Option<&Value>) -> Result<(), ApiError> {
    let mut causes = Vec::new();
    match kind_of(res) {
        ("", "Pod") => {
            validation::pod_spec("spec", &obj["spec"], &mut causes);
            if let Some(old) = old {
                validation::pod_update(old, obj, &mut causes);
            }
        }
        ("", "PodTemplate") => {
            validation::pod_spec("template.spec", &obj["template"]["spec"], &mut causes);
        }
        ("", "Service") => validation::service(obj, &mut causes),
        ("", "Secret") => config_data::secret(obj, old, &mut causes),
        ("", "ConfigMap") => config_data::config_map(obj, old, &mut causes),
        ("", "PersistentVolumeClaim") => validation::pvc(obj, old, &mut causes),
        ("apps", "Deployment") => validation::deployment(obj, old, &mut causes),
        ("", "ReplicationController") => validation::replication_controller(obj, &mut causes),
        ("networking.k8s.io", "NetworkPolicy") => network_policy::validate(obj, old, &mut causes),
        ("node.k8s.io", "RuntimeClass") => runtime_class::validate(obj, old, &mut causes),
        (
            "admissionregistration.k8s.io",
            kind @ ("MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration"),
        ) => {
            webhook_config::validate(obj, kind.starts_with("Mutating"), &mut causes);
        }
        ("scheduling.k8s.io", "PriorityClass") => {
            validation::priority_class(obj, old, &mut causes);
        }
        ("certificates.k8s.io", "CertificateSigningRequest") => {
            certificates::validate(obj, old, &mut causes);
        }
        ("apps", "ReplicaSet" | "StatefulSet" | "DaemonSet") => {
            validation::selector_immutable(obj, old, &mut causes);
        }
        _ => {}
    }
    match kind_of(res) {
        ("apps", "Deployment" | "ReplicaSet" | "DaemonSet") | ("batch", "Job") => {
            validation::pod_spec(
                "spec.template.spec",
                &obj["spec"]["template"]["spec"],
                &mut causes,
            )
        }
        ("apps", "StatefulSet") => {
            // The claim templates are volumes of the pods too (their mounts name them).
            let mut spec = obj["spec"]["template"]["spec"].clone();
            let claims: Vec<Value> = obj["spec"]["volumeClaimTemplates"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| t["metadata"]["name"].as_str())
                .map(|n| json!({"name": n, "persistentVolumeClaim": {"claimName": n}}))
                .collect();
            if !claims.is_empty() && spec.is_object() {
                let mut volumes = spec["volumes"].as_array().cloned().unwrap_or_default();
                volumes.extend(claims);
                spec["volumes"] = Value::Array(volumes);
            }
            validation::pod_spec("spec.template.spec", &spec, &mut causes)
        }
        ("batch", "CronJob") => validation::pod_spec(
            "spec.jobTemplate.spec.template.spec",
            &obj["spec"]["jobTemplate"]["spec"]["template"]["spec"],
            &mut causes,
        ),
        _ => {}
    }
    let job_template = match kind_of(res) {
        ("batch", "Job") => Some(("spec.template.spec", &obj["spec"]["template"]["spec"])),
        ("batch", "CronJob") => Some((
            "spec.jobTemplate.spec.template.spec",
            &obj["spec"]["jobTemplate"]["spec"]["template"]["spec"],
        )),
        _ => None,
    };
    if let Some((path, spec)) = job_template
        && !matches!(spec["restartPolicy"].as_str(), Some("OnFailure" | "Never"))
    {
        causes.push((
            format!("{path}.restartPolicy"),
            format!(
                "Unsupported value: {}: supported values: \"OnFailure\", \"Never\"",
                spec["restartPolicy"]
            ),
        ));
    }
    if matches!(
        kind_of(res),
        (
            "apps",
            "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet"
        )
    ) {
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
    if kind_of(res) == ("apiregistration.k8s.io", "APIService") {
        validation::api_service(obj, &mut causes);
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
pub(crate) fn qos_class(pod: &Value) -> &'static str {
    k1s_api::resource::qos_class(&k1s_api::resource::SpecJson(&pod["spec"])).as_str()
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
        apply_defaults(&pods, &mut p);
        assert_eq!(
            p["spec"]["containers"][0]["resources"]["requests"],
            json!({"cpu": "300m", "memory": "150Mi"})
        );
        let rs = reg.get("apps", "v1", "replicasets").unwrap();
        let mut r = json!({"spec": {"template": {"spec": {"containers": [{"name": "c",
            "image": "i", "resources": {"limits": {"cpu": "1"}}}]}}}});
        apply_defaults(&rs, &mut r);
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
        apply_defaults(&job, &mut j);
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
        apply_defaults(&sts, &mut s);
        assert_eq!(s["spec"]["podManagementPolicy"], "OrderedReady");
        assert_eq!(s["spec"]["updateStrategy"]["rollingUpdate"]["partition"], 0);
        let cm = reg.get("", "v1", "configmaps").unwrap();
        let mut c = json!({"data": {}});
        apply_defaults(&cm, &mut c);
        assert!(c.get("spec").is_none());
        let secret = reg.get("", "v1", "secrets").unwrap();
        let mut sec = json!({});
        apply_defaults(&secret, &mut sec);
        assert_eq!(sec["type"], "Opaque");
        // A Service port's target port defaults to its port when absent, 0 (what client-go's
        // protobuf sends for an unset IntOrString) or "".
        let svc = reg.get("", "v1", "services").unwrap();
        let mut sv = json!({"spec": {"ports": [{"port": 80}, {"port": 81, "targetPort": 0},
            {"port": 82, "targetPort": ""}, {"port": 83, "targetPort": "http"}]}});
        apply_defaults(&svc, &mut sv);
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
        apply_defaults(&ns, &mut obj);
        assert_eq!(
            obj["metadata"]["labels"],
            json!({"kubernetes.io/metadata.name": "team-a", "x": "y"})
        );
        let mut bare = json!({"metadata": {"name": "b"}});
        apply_defaults(&ns, &mut bare);
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
