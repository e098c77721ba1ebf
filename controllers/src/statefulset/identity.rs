//! The stable identity of StatefulSet pods, as upstream's `stateful_set_utils.go`: ordinals
//! and names (`<set>-<ordinal>`), the pod made from a revision's template (hostname,
//! subdomain, identity labels, claim volumes), the claims made from `volumeClaimTemplates`,
//! their retention owner references, and pod health. Pure functions over JSON; no I/O.

use serde_json::{Value, json};

use crate::history::REVISION_LABEL;
use k1s_runtime::key;

pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";

/// `spec.replicas` (default 1).
pub fn replicas(set: &Value) -> i64 {
    set["spec"]["replicas"].as_i64().unwrap_or(1).max(0)
}

/// `spec.ordinals.start` (default 0).
pub fn start(set: &Value) -> i64 {
    set["spec"]["ordinals"]["start"]
        .as_i64()
        .unwrap_or(0)
        .max(0)
}

/// Whether pods are managed one at a time (`OrderedReady`, the default).
pub fn is_ordered(set: &Value) -> bool {
    set["spec"]["podManagementPolicy"] != "Parallel"
}

pub fn is_rolling(set: &Value) -> bool {
    set["spec"]["updateStrategy"]["type"] != "OnDelete"
}

/// The first ordinal a rolling update may replace (`ordinals.start + partition`).
pub fn partition(set: &Value) -> i64 {
    start(set)
        + set["spec"]["updateStrategy"]["rollingUpdate"]["partition"]
            .as_i64()
            .unwrap_or(0)
            .max(0)
}

/// `rollingUpdate.maxUnavailable` resolved against the replicas (rounded up, at least 1).
pub fn max_unavailable(set: &Value) -> i64 {
    let total = replicas(set);
    let v = &set["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"];
    let n = match v {
        Value::Number(n) => n.as_i64().unwrap_or(1),
        Value::String(s) => match s.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) {
            Some(p) => (p * total + 99) / 100,
            None => s.parse().unwrap_or(1),
        },
        _ => 1,
    };
    n.max(1)
}

pub fn pod_name(set: &Value, ordinal: i64) -> String {
    format!("{}-{ordinal}", key::name(set))
}

/// The ordinal of a pod of `set` (`None` if the name is not `<set>-<n>`).
pub fn ordinal_of(set_name: &str, pod_name: &str) -> Option<i64> {
    let rest = pod_name.strip_prefix(set_name)?.strip_prefix('-')?;
    if rest.is_empty() || !rest.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if rest.len() > 1 && rest.starts_with('0') {
        return None;
    }
    rest.parse().ok()
}

/// Whether `ordinal` is one of the set's replicas.
pub fn in_range(set: &Value, ordinal: i64) -> bool {
    ordinal >= start(set) && ordinal < start(set) + replicas(set)
}

/// The claim name of template `template_name` for pod `pod_name`.
pub fn claim_name(template_name: &str, pod_name: &str) -> String {
    format!("{template_name}-{pod_name}")
}

fn set_ref(set: &Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "name": set["metadata"]["name"],
           "uid": set["metadata"]["uid"]})
}

fn pod_ref(pod: &Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "name": pod["metadata"]["name"],
           "uid": pod["metadata"]["uid"]})
}

/// The pod of `ordinal` from `template` (a revision's) with revision label `revision`.
pub fn new_pod(set: &Value, template: &Value, revision: &str, ordinal: i64) -> Value {
    let name = pod_name(set, ordinal);
    let mut labels = template["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    labels.insert(POD_NAME_LABEL.into(), json!(name));
    labels.insert(POD_INDEX_LABEL.into(), json!(ordinal.to_string()));
    labels.insert(REVISION_LABEL.into(), json!(revision));
    let mut meta = json!({
        "name": name,
        "namespace": set["metadata"]["namespace"],
        "labels": labels,
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet",
            "name": set["metadata"]["name"], "uid": set["metadata"]["uid"],
            "controller": true, "blockOwnerDeletion": true}],
    });
    for f in ["annotations", "finalizers"] {
        if !template["metadata"][f].is_null() {
            meta[f] = template["metadata"][f].clone();
        }
    }
    let mut spec = template["spec"].clone();
    spec["hostname"] = json!(name);
    if let Some(svc) = set["spec"]["serviceName"]
        .as_str()
        .filter(|s| !s.is_empty())
    {
        spec["subdomain"] = json!(svc);
    }
    // One volume per claim template, replacing a template volume of the same name.
    let mut volumes: Vec<Value> = spec["volumes"].as_array().cloned().unwrap_or_default();
    for t in claim_templates(set) {
        let vname = key::name(t);
        let v = json!({"name": vname, "persistentVolumeClaim": {"claimName": claim_name(vname, &name)}});
        match volumes.iter_mut().find(|x| x["name"] == vname) {
            Some(x) => *x = v,
            None => volumes.push(v),
        }
    }
    if !volumes.is_empty() {
        spec["volumes"] = json!(volumes);
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
}

pub fn claim_templates(set: &Value) -> Vec<&Value> {
    set["spec"]["volumeClaimTemplates"]
        .as_array()
        .map(|a| a.iter().collect())
        .unwrap_or_default()
}

fn policy<'a>(set: &'a Value, when: &str) -> &'a str {
    set["spec"]["persistentVolumeClaimRetentionPolicy"][when]
        .as_str()
        .unwrap_or("Retain")
}

/// The claims of the pod of `ordinal` (unsaved): the template's spec, labels from the
/// template and the set's `matchLabels`, and the set as owner if `whenDeleted: Delete`.
pub fn new_claims(set: &Value, ordinal: i64) -> Vec<Value> {
    let pod = pod_name(set, ordinal);
    claim_templates(set)
        .into_iter()
        .map(|t| {
            let mut labels = t["metadata"]["labels"]
                .as_object()
                .cloned()
                .unwrap_or_default();
            if let Some(m) = set["spec"]["selector"]["matchLabels"].as_object() {
                labels.extend(m.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
            let mut meta = json!({"name": claim_name(key::name(t), &pod),
                "namespace": set["metadata"]["namespace"]});
            if !labels.is_empty() {
                meta["labels"] = json!(labels);
            }
            if let Some(a) = t["metadata"]["annotations"].as_object() {
                meta["annotations"] = json!(a);
            }
            if policy(set, "whenDeleted") == "Delete" {
                meta["ownerReferences"] = json!([set_ref(set)]);
            }
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta,
                   "spec": t["spec"], "status": {"phase": "Pending"}})
        })
        .collect()
}

/// The owner references a claim of `pod` should carry under the retention policy
/// (upstream's `updateClaimOwnerRefForSetAndPod`); `None` when they already do.
pub fn retention_refs(set: &Value, pod: &Value, claim: &Value, condemned: bool) -> Option<Value> {
    let mut refs: Vec<Value> = claim["metadata"]["ownerReferences"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let before = refs.clone();
    let set_uid = key::uid(set);
    let pod_uid = key::uid(pod);
    let has = |refs: &[Value], uid: &str| refs.iter().any(|r| r["uid"] == uid);
    if policy(set, "whenDeleted") == "Delete" {
        if !has(&refs, set_uid) {
            refs.push(set_ref(set));
        }
    } else {
        refs.retain(|r| r["uid"] != set_uid);
    }
    if condemned && policy(set, "whenScaled") == "Delete" {
        if !has(&refs, pod_uid) {
            refs.push(pod_ref(pod));
        }
    } else {
        refs.retain(|r| !(r["kind"] == "Pod" && r["name"] == pod["metadata"]["name"]));
    }
    (refs != before).then(|| json!(refs))
}

pub fn phase(pod: &Value) -> &str {
    pod["status"]["phase"].as_str().unwrap_or("")
}

pub fn is_terminating(pod: &Value) -> bool {
    key::is_deleting(pod)
}

pub fn is_finished(pod: &Value) -> bool {
    matches!(phase(pod), "Failed" | "Succeeded")
}

fn ready_since(pod: &Value) -> Option<Option<jiff::Timestamp>> {
    let c = pod["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready" && c["status"] == "True")?;
    Some(
        c["lastTransitionTime"]
            .as_str()
            .and_then(k1s_api::time::parse),
    )
}

pub fn is_running_and_ready(pod: &Value) -> bool {
    phase(pod) == "Running" && ready_since(pod).is_some()
}

/// Running and ready for `min_ready` seconds.
pub fn is_available(pod: &Value, min_ready: i64, now: jiff::Timestamp) -> bool {
    if phase(pod) != "Running" {
        return false;
    }
    match ready_since(pod) {
        None => false,
        Some(_) if min_ready <= 0 => true,
        Some(t) => t.is_some_and(|t| t + jiff::SignedDuration::from_secs(min_ready) <= now),
    }
}

/// Running, ready and not terminating.
pub fn is_healthy(pod: &Value) -> bool {
    is_running_and_ready(pod) && !is_terminating(pod)
}

pub fn revision_of(pod: &Value) -> &str {
    pod["metadata"]["labels"][REVISION_LABEL]
        .as_str()
        .unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set() -> Value {
        json!({"metadata": {"name": "web", "namespace": "d", "uid": "su"},
            "spec": {"replicas": 3, "serviceName": "nginx", "ordinals": {"start": 2},
                "selector": {"matchLabels": {"app": "web"}},
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 1, "maxUnavailable": "50%"}},
                "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Delete"},
                "volumeClaimTemplates": [{"metadata": {"name": "data", "labels": {"tier": "db"}},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}],
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": "i"}],
                             "volumes": [{"name": "data", "emptyDir": {}}, {"name": "x", "emptyDir": {}}]}}}})
    }

    #[test]
    fn ordinals() {
        let s = set();
        assert_eq!(ordinal_of("web", "web-0"), Some(0));
        assert_eq!(ordinal_of("web", "web-12"), Some(12));
        for bad in [
            "web", "web-", "web-x", "web-01", "webx-1", "web-1-2", "other-1",
        ] {
            assert_eq!(ordinal_of("web", bad), None, "{bad}");
        }
        assert!(!in_range(&s, 1));
        assert!(in_range(&s, 2) && in_range(&s, 4));
        assert!(!in_range(&s, 5));
        assert_eq!(partition(&s), 3);
        assert_eq!(max_unavailable(&s), 2);
        assert_eq!(max_unavailable(&json!({"spec": {}})), 1);
        assert!(is_ordered(&s) && is_rolling(&s));
    }

    #[test]
    fn pods_carry_identity_and_claims() {
        let s = set();
        let p = new_pod(&s, &s["spec"]["template"], "web-abc", 3);
        assert_eq!(p["metadata"]["name"], "web-3");
        assert_eq!(p["metadata"]["labels"][POD_NAME_LABEL], "web-3");
        assert_eq!(p["metadata"]["labels"][POD_INDEX_LABEL], "3");
        assert_eq!(p["metadata"]["labels"][REVISION_LABEL], "web-abc");
        assert_eq!(p["metadata"]["labels"]["app"], "web");
        assert_eq!(p["spec"]["hostname"], "web-3");
        assert_eq!(p["spec"]["subdomain"], "nginx");
        let vols = p["spec"]["volumes"].as_array().unwrap();
        assert_eq!(vols.len(), 2);
        assert_eq!(
            vols[0],
            json!({"name": "data", "persistentVolumeClaim": {"claimName": "data-web-3"}})
        );
        assert_eq!(p["metadata"]["ownerReferences"][0]["controller"], true);

        let claims = new_claims(&s, 3);
        assert_eq!(claims.len(), 1);
        let c = &claims[0];
        assert_eq!(c["metadata"]["name"], "data-web-3");
        assert_eq!(c["metadata"]["labels"], json!({"tier": "db", "app": "web"}));
        assert_eq!(c["metadata"]["ownerReferences"][0]["uid"], "su");
        assert_eq!(c["spec"]["resources"]["requests"]["storage"], "1Gi");
    }

    #[test]
    fn retention_follows_the_policy() {
        let s = set();
        let pod = json!({"metadata": {"name": "web-4", "uid": "pu"}});
        let claim = &new_claims(&s, 4)[0];
        // Already owned by the set; a replica keeps no pod reference.
        assert_eq!(retention_refs(&s, &pod, claim, false), None);
        // Condemned with whenScaled Delete: the pod owns it too.
        let refs = retention_refs(&s, &pod, claim, true).unwrap();
        assert_eq!(refs.as_array().unwrap().len(), 2);
        assert_eq!(refs[1]["uid"], "pu");
        // Retain everywhere: no references.
        let mut retain = s.clone();
        retain["spec"]["persistentVolumeClaimRetentionPolicy"] = json!({});
        assert_eq!(
            retention_refs(&retain, &pod, claim, true).unwrap(),
            json!([])
        );
        assert!(new_claims(&retain, 4)[0]["metadata"]["ownerReferences"].is_null());
    }

    #[test]
    fn health() {
        let now = jiff::Timestamp::now();
        let ready = json!({"status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z"}]}});
        assert!(is_healthy(&ready) && is_available(&ready, 10, now));
        let pending = json!({"status": {"phase": "Pending"}});
        assert!(!is_healthy(&pending) && !is_available(&pending, 0, now));
        let mut terminating = ready.clone();
        terminating["metadata"]["deletionTimestamp"] = json!("2020-01-01T00:00:00Z");
        assert!(is_running_and_ready(&terminating) && !is_healthy(&terminating));
        assert!(is_finished(&json!({"status": {"phase": "Failed"}})));
    }
}
