//! ResourceQuota: what an object costs, which quotas it counts against, and whether a write
//! fits, with upstream's evaluators (`pkg/quota/v1/evaluator/core`, `pkg/quota/v1/generic`)
//! and the messages of the ResourceQuota admission plugin.
//!
//! Owns the arithmetic only, shared by the API server's admission and the ResourceQuota
//! controller. Admission lists the namespace's ResourceQuotas, calls [`admit`] for each, and
//! on success writes the returned `status.used` back with the quota's resourceVersion
//! (re-evaluating on conflict); the controller calls [`recompute`] with the objects it lists.
//! Nothing here reads or writes the store.
//!
//! Evaluators: pods (compute resources, `pods`, `count/pods`, hugepages, extended
//! `requests.<name>`), services, persistentvolumeclaims (with per-storage-class usage),
//! the legacy counts `configmaps`, `secrets`, `replicationcontrollers`, `resourcequotas`, and
//! `count/<resource>[.<group>]` for everything. Scopes (`Terminating`, `NotTerminating`,
//! `BestEffort`, `NotBestEffort`, `PriorityClass`, `CrossNamespacePodAffinity`, via
//! `spec.scopes` or `spec.scopeSelector`) apply to pods; as upstream, a scoped quota matches no
//! other kind of object.
//!
//! Not modelled (off by default in v1.33): pod-level resources, in-place resize usage, and the
//! `VolumeAttributesClass` PVC scope.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::quantity::{Format, Quantity, ResourceList};
use crate::resource::{self, Options, QosClass, SpecJson, is_extended_resource};
use serde_json::Value;

/// Why a write does not fit a quota, with upstream's ResourceQuota admission messages.
/// The API server wraps one as `<resource> "<name>" is forbidden: <message>` (403).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuotaError {
    /// A container leaves unset a resource the quota constrains.
    #[error("failed quota: {name}: {source}")]
    Constraints {
        name: String,
        #[source]
        source: MissingConstraints,
    },
    /// `status.used` has no figure for some resource the write would be charged.
    #[error("status unknown for quota: {name}, resources: {}", .resources.join(","))]
    StatusUnknown {
        name: String,
        /// Sorted.
        resources: Vec<String>,
    },
    /// The object's usage came out negative.
    #[error("quota usage is negative for resource(s): {}", .resources.join(","))]
    NegativeUsage { resources: Vec<String> },
    /// The write would take usage over `status.hard`; each field is `name=quantity,...`,
    /// restricted to the exceeded resources.
    #[error("exceeded quota: {name}, requested: {requested}, used: {used}, limited: {limited}")]
    Exceeded {
        name: String,
        requested: String,
        used: String,
        limited: String,
    },
}

/// The cpu/memory requests or limits that containers leave unset although a quota constrains
/// them: resource name to the names of the containers missing it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("must specify {}", missing_list(.missing))]
pub struct MissingConstraints {
    pub missing: BTreeMap<String, BTreeSet<String>>,
}

/// Upstream's `limits.cpu for: a,b; requests.memory for: a`.
fn missing_list(missing: &BTreeMap<String, BTreeSet<String>>) -> String {
    missing
        .iter()
        .map(|(r, names)| {
            format!(
                "{r} for: {}",
                names
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>()
                    .join(",")
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The compute and count resources the pod evaluator tracks by exact name.
pub const POD_RESOURCES: &[&str] = &[
    "count/pods",
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
];

/// The resources the service evaluator tracks.
pub const SERVICE_RESOURCES: &[&str] = &[
    "count/services",
    "services",
    "services.loadbalancers",
    "services.nodeports",
];

/// The resources the PVC evaluator tracks by exact name.
pub const PVC_RESOURCES: &[&str] = &[
    "persistentvolumeclaims",
    "count/persistentvolumeclaims",
    "requests.storage",
];

/// `<class>` + this + `requests.storage` or `persistentvolumeclaims`.
pub const STORAGE_CLASS_SUFFIX: &str = ".storageclass.storage.k8s.io/";

/// Core resources that also have an unprefixed legacy count name.
const LEGACY_COUNTS: &[&str] = &[
    "configmaps",
    "secrets",
    "replicationcontrollers",
    "resourcequotas",
];

fn one() -> Quantity {
    Quantity::from_value(1, Format::DecimalSI)
}

fn list(v: &Value) -> &[Value] {
    v.as_array().map_or(&[][..], Vec::as_slice)
}

fn lenient(v: &Value) -> ResourceList {
    ResourceList::from_json_lenient(v)
}

/// `count/<resource>` for the core group, `count/<resource>.<group>` otherwise.
pub fn object_count_name(resource: &str, group: &str) -> String {
    if group.is_empty() {
        format!("count/{resource}")
    } else {
        format!("count/{resource}.{group}")
    }
}

fn now_unix() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn parse_time(s: &str) -> Option<i64> {
    crate::time::parse(s).map(|t| t.as_second())
}

// ---- pods ----

/// Whether a pod still counts against compute quota at `now`: not Succeeded or Failed, and
/// not past its deletion grace period.
pub fn pod_counts_at(pod: &Value, now: i64) -> bool {
    if matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    ) {
        return false;
    }
    let meta = &pod["metadata"];
    if let (Some(ts), Some(grace)) = (
        meta["deletionTimestamp"].as_str().and_then(parse_time),
        meta["deletionGracePeriodSeconds"].as_i64(),
    ) && now > ts.saturating_add(grace)
    {
        return false;
    }
    true
}

/// Quota usage of requests and limits (upstream `podComputeUsageHelper`).
fn compute_usage(requests: &ResourceList, limits: &ResourceList) -> ResourceList {
    let mut out = ResourceList::new();
    out.insert("pods", one());
    for r in ["cpu", "memory", "ephemeral-storage"] {
        if let Some(q) = requests.get(r) {
            out.insert(r, *q);
            out.insert(format!("requests.{r}"), *q);
        }
        if let Some(q) = limits.get(r) {
            out.insert(format!("limits.{r}"), *q);
        }
    }
    for (name, q) in &requests.0 {
        if name.starts_with("hugepages-") {
            out.insert(name.clone(), *q);
            out.insert(format!("requests.{name}"), *q);
        }
        if is_extended_resource(name) {
            out.insert(format!("requests.{name}"), *q);
        }
    }
    out
}

fn pod_usage(pod: &Value, now: i64) -> ResourceList {
    let mut out = ResourceList::new();
    out.insert("count/pods", one());
    if !pod_counts_at(pod, now) {
        return out;
    }
    let spec = &pod["spec"];
    out.add(&compute_usage(
        &resource::pod_requests(&SpecJson(spec), &Options::default()),
        &resource::pod_limits(&SpecJson(spec), &Options::default()),
    ))
}

/// Whether the pod has a deadline (`activeDeadlineSeconds >= 0`).
fn is_terminating(pod: &Value) -> bool {
    pod["spec"]["activeDeadlineSeconds"]
        .as_i64()
        .is_some_and(|d| d >= 0)
}

/// QoS class BestEffort (the `BestEffort` / `NotBestEffort` scopes).
pub fn is_best_effort(pod: &Value) -> bool {
    resource::qos_class(&SpecJson(&pod["spec"])) == QosClass::BestEffort
}

fn uses_cross_namespace_affinity(pod: &Value) -> bool {
    let aff = &pod["spec"]["affinity"];
    let cross = |t: &Value| !t["namespaceSelector"].is_null() || !list(&t["namespaces"]).is_empty();
    ["podAffinity", "podAntiAffinity"].iter().any(|k| {
        let a = &aff[*k];
        list(&a["requiredDuringSchedulingIgnoredDuringExecution"])
            .iter()
            .any(cross)
            || list(&a["preferredDuringSchedulingIgnoredDuringExecution"])
                .iter()
                .any(|w| cross(&w["podAffinityTerm"]))
    })
}

// ---- services and PVCs ----

fn service_usage(svc: &Value) -> ResourceList {
    let mut out = ResourceList::new();
    out.insert("count/services", one());
    out.insert("services", one());
    let spec = &svc["spec"];
    let ports = list(&spec["ports"]);
    let count = |n: usize| Quantity::from_value(n as i64, Format::DecimalSI);
    match spec["type"].as_str() {
        Some("NodePort") => out.insert("services.nodeports", count(ports.len())),
        Some("LoadBalancer") => {
            let n = if spec["allocateLoadBalancerNodePorts"].as_bool() == Some(false) {
                ports
                    .iter()
                    .filter(|p| p["nodePort"].as_i64().is_some_and(|n| n != 0))
                    .count()
            } else {
                ports.len()
            };
            out.insert("services.nodeports", count(n));
            out.insert("services.loadbalancers", one());
        }
        _ => {}
    }
    out
}

/// The claim's storage class: the beta annotation, else `spec.storageClassName`.
fn pvc_class(pvc: &Value) -> &str {
    pvc["metadata"]["annotations"]["volume.beta.kubernetes.io/storage-class"]
        .as_str()
        .or_else(|| pvc["spec"]["storageClassName"].as_str())
        .unwrap_or("")
}

fn pvc_usage(pvc: &Value) -> ResourceList {
    let mut out = ResourceList::new();
    out.insert("persistentvolumeclaims", one());
    out.insert("count/persistentvolumeclaims", one());
    let class = pvc_class(pvc);
    if !class.is_empty() {
        out.insert(
            format!("{class}{STORAGE_CLASS_SUFFIX}persistentvolumeclaims"),
            one(),
        );
    }
    let requested = lenient(&pvc["spec"]["resources"]["requests"]);
    if let Some(req) = requested.get("storage") {
        let mut storage = req.round_up_units();
        // A larger allocation (an expansion that failed and was reduced) is what is charged.
        if let Some(alloc) = lenient(&pvc["status"]["allocatedResources"]).get("storage")
            && *alloc > storage
        {
            storage = alloc.round_up_units();
        }
        out.insert("requests.storage", storage);
        if !class.is_empty() {
            out.insert(
                format!("{class}{STORAGE_CLASS_SUFFIX}requests.storage"),
                storage,
            );
        }
    }
    out
}

// ---- public API ----

/// What `obj` (of `resource` in API `group`, `""` for core) costs, at the current time.
pub fn usage(resource: &str, group: &str, obj: &Value) -> ResourceList {
    usage_at(resource, group, obj, now_unix())
}

/// [`usage`] at `now` (Unix seconds), which decides whether a deleted pod is past its grace
/// period.
pub fn usage_at(resource: &str, group: &str, obj: &Value, now: i64) -> ResourceList {
    if group.is_empty() {
        match resource {
            "pods" => return pod_usage(obj, now),
            "services" => return service_usage(obj),
            "persistentvolumeclaims" => return pvc_usage(obj),
            r if LEGACY_COUNTS.contains(&r) => {
                let mut out = ResourceList::new();
                out.insert(r, one());
                out.insert(object_count_name(r, group), one());
                return out;
            }
            _ => {}
        }
    }
    let mut out = ResourceList::new();
    out.insert(object_count_name(resource, group), one());
    out
}

/// The names among `names` (a quota's hard resources) that the evaluator for
/// `resource`/`group` tracks (upstream `MatchingResources`).
pub fn matching_resources<S: AsRef<str>>(resource: &str, group: &str, names: &[S]) -> Vec<String> {
    let names = names.iter().map(|s| -> &str { s.as_ref() });
    let count = object_count_name(resource, group);
    let keep: Box<dyn Fn(&str) -> bool + '_> = match (group, resource) {
        ("", "pods") => Box::new(|n: &str| {
            POD_RESOURCES.contains(&n)
                || n.starts_with("hugepages-")
                || n.starts_with("requests.hugepages-")
                || n.strip_prefix("requests.")
                    .is_some_and(is_extended_resource)
        }),
        ("", "services") => Box::new(|n: &str| SERVICE_RESOURCES.contains(&n)),
        ("", "persistentvolumeclaims") => Box::new(|n: &str| {
            PVC_RESOURCES.contains(&n)
                || n.split_once(STORAGE_CLASS_SUFFIX)
                    .is_some_and(|(_, r)| r == "requests.storage" || r == "persistentvolumeclaims")
        }),
        ("", r) if LEGACY_COUNTS.contains(&r) => Box::new(move |n: &str| n == r || n == count),
        _ => Box::new(move |n: &str| n == count),
    };
    names.filter(|n| keep(n)).map(String::from).collect()
}

/// `(scopeName, operator, values)` of a quota: `spec.scopes` as `Exists`, then
/// `spec.scopeSelector.matchExpressions`.
fn scope_selectors(quota: &Value) -> Vec<(String, String, Vec<String>)> {
    let spec = &quota["spec"];
    let strs = |v: &Value| -> Vec<String> {
        list(v)
            .iter()
            .filter_map(|s| s.as_str().map(String::from))
            .collect()
    };
    let mut out: Vec<_> = strs(&spec["scopes"])
        .into_iter()
        .map(|s| (s, "Exists".to_string(), Vec::new()))
        .collect();
    for e in list(&spec["scopeSelector"]["matchExpressions"]) {
        out.push((
            e["scopeName"].as_str().unwrap_or("").to_string(),
            e["operator"].as_str().unwrap_or("").to_string(),
            strs(&e["values"]),
        ));
    }
    out
}

/// Whether `obj` is inside every scope of the quota. A quota without scopes covers
/// everything; a scoped quota covers only pods.
pub fn matches_scopes(quota: &Value, resource: &str, obj: &Value) -> bool {
    let selectors = scope_selectors(quota);
    if selectors.is_empty() {
        return true;
    }
    if resource != "pods" {
        return false;
    }
    selectors
        .iter()
        .all(|(scope, op, values)| match scope.as_str() {
            "Terminating" => is_terminating(obj),
            "NotTerminating" => !is_terminating(obj),
            "BestEffort" => is_best_effort(obj),
            "NotBestEffort" => !is_best_effort(obj),
            "CrossNamespacePodAffinity" => uses_cross_namespace_affinity(obj),
            "PriorityClass" => {
                let pc = obj["spec"]["priorityClassName"].as_str().unwrap_or("");
                // As a label selector over {PriorityClass: <name>}: the key is always present.
                match op.as_str() {
                    "Exists" => !pc.is_empty(),
                    "In" => values.iter().any(|v| v == pc),
                    "NotIn" => !values.iter().any(|v| v == pc),
                    _ => false,
                }
            }
            _ => false,
        })
}

/// Whether the quota tracks `obj`: it limits a resource the object's evaluator tracks, and
/// the object is in its scopes (upstream `Matches`).
pub fn matches(quota: &Value, resource: &str, group: &str, obj: &Value) -> bool {
    let hard = lenient(&quota["status"]["hard"]);
    let names: Vec<&str> = hard.names().collect();
    !matching_resources(resource, group, &names).is_empty() && matches_scopes(quota, resource, obj)
}

/// Resources that, when a quota limits them, every container must set (upstream's
/// backward-compatible pod constraint).
const CONTAINER_CONSTRAINED: &[&str] = &[
    "cpu",
    "memory",
    "requests.cpu",
    "requests.memory",
    "limits.cpu",
    "limits.memory",
];

/// For pods: every container and init container must set the cpu/memory requests or limits
/// that `required` (the quota's matching hard names) constrains. The error reads as upstream's
/// `must specify limits.cpu for: a,b; requests.memory for: a`.
pub fn constraints<S: AsRef<str>>(
    required: &[S],
    resource: &str,
    obj: &Value,
) -> Result<(), MissingConstraints> {
    if resource != "pods" {
        return Ok(());
    }
    let required: Vec<&str> = required
        .iter()
        .map(|s| -> &str { s.as_ref() })
        .filter(|r| CONTAINER_CONSTRAINED.contains(r))
        .collect();
    let mut missing: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let spec = &obj["spec"];
    for c in list(&spec["containers"])
        .iter()
        .chain(list(&spec["initContainers"]))
    {
        let usage = compute_usage(
            &lenient(&c["resources"]["requests"]),
            &lenient(&c["resources"]["limits"]),
        );
        for &r in &required {
            if !usage.contains(r) {
                missing
                    .entry(r.to_string())
                    .or_default()
                    .insert(c["name"].as_str().unwrap_or("").to_string());
            }
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    Err(MissingConstraints { missing })
}

/// Whether upstream's quota admission evaluates this operation (`CREATE` or `UPDATE`):
/// every create; updates only of services and PVCs (pods, and plain object counts, cannot
/// change cost on update).
pub fn handles(resource: &str, group: &str, operation: &str) -> bool {
    match operation {
        "CREATE" => true,
        "UPDATE" => group.is_empty() && matches!(resource, "services" | "persistentvolumeclaims"),
        _ => false,
    }
}

/// Checks `delta` (the write's added usage) against one quota whose `status.hard` and
/// `status.used` are set. Returns the new `status.used`, or [`QuotaError::Exceeded`]
/// (`exceeded quota: NAME, requested: pods=1, used: pods=2, limited: pods=2`).
/// The caller wraps a message as `<resource> "<name>" is forbidden: <message>` (403).
pub fn check(quota: &Value, delta: &ResourceList) -> Result<ResourceList, QuotaError> {
    let name = quota["metadata"]["name"].as_str().unwrap_or("");
    let hard = lenient(&quota["status"]["hard"]);
    let used = lenient(&quota["status"]["used"]);
    let hard_names: Vec<&str> = hard.names().collect();
    let requested = delta.mask(&hard_names);
    let new_used = used.add(&requested);
    let requested_names: Vec<&str> = requested.names().collect();
    let masked = new_used.mask(&requested_names);
    let (ok, exceeded) = masked.less_or_equal(&hard);
    if ok {
        return Ok(new_used);
    }
    Err(QuotaError::Exceeded {
        name: name.to_string(),
        requested: requested.mask(&exceeded).to_pairs(),
        used: used.mask(&exceeded).to_pairs(),
        limited: hard.mask(&exceeded).to_pairs(),
    })
}

/// The whole admission decision for one quota and one write of `obj` (`old` for an update):
/// `Ok(None)` when the quota does not track the object or the write costs nothing under it,
/// `Ok(Some(used))` with the quota's new `status.used`, or a [`QuotaError`] whose text is
/// upstream's message (`failed quota: ...`, `status unknown for quota: ...`,
/// `quota usage is negative ...`, `exceeded quota: ...`). Evaluating several quotas: all must
/// pass before any is updated.
pub fn admit(
    quota: &Value,
    resource: &str,
    group: &str,
    obj: &Value,
    old: Option<&Value>,
) -> Result<Option<ResourceList>, QuotaError> {
    admit_at(quota, resource, group, obj, old, now_unix())
}

/// Whether `quota.status.used` has a figure for every resource of `status.hard` that a write
/// of `resource`/`group` would be charged (otherwise [`admit`] answers "status unknown").
pub fn usage_known(quota: &Value, resource: &str, group: &str) -> bool {
    let hard = lenient(&quota["status"]["hard"]);
    let used = lenient(&quota["status"]["used"]);
    let names: Vec<&str> = hard.names().collect();
    matching_resources(resource, group, &names)
        .iter()
        .all(|r| used.contains(r))
}

/// [`admit`] at `now` (Unix seconds).
pub fn admit_at(
    quota: &Value,
    resource: &str,
    group: &str,
    obj: &Value,
    old: Option<&Value>,
    now: i64,
) -> Result<Option<ResourceList>, QuotaError> {
    if !matches(quota, resource, group, obj) {
        return Ok(None);
    }
    let name = quota["metadata"]["name"].as_str().unwrap_or("");
    let hard = lenient(&quota["status"]["hard"]);
    let used = lenient(&quota["status"]["used"]);
    let hard_names: Vec<&str> = hard.names().collect();
    let restricted = matching_resources(resource, group, &hard_names);
    constraints(&restricted, resource, obj).map_err(|source| QuotaError::Constraints {
        name: name.to_string(),
        source,
    })?;
    if restricted.iter().any(|r| !used.contains(r)) {
        let mut resources = restricted.clone();
        resources.sort();
        return Err(QuotaError::StatusUnknown {
            name: name.to_string(),
            resources,
        });
    }
    let mut delta = usage_at(resource, group, obj, now);
    let negative: Vec<String> = delta
        .0
        .iter()
        .filter(|(_, q)| q.sign() < 0)
        .map(|(k, _)| k.clone())
        .collect();
    if !negative.is_empty() {
        return Err(QuotaError::NegativeUsage {
            resources: negative,
        });
    }
    // An update is charged the growth only; an old object without a resourceVersion is a
    // create-on-update and is charged in full.
    if let Some(old) = old.filter(|o| {
        o["metadata"]["resourceVersion"]
            .as_str()
            .is_some_and(|s| !s.is_empty())
    }) {
        let prev = usage_at(resource, group, old, now);
        delta = delta
            .0
            .iter()
            .map(|(k, v)| {
                let d = prev.get(k).map_or(*v, |p| *v - *p);
                (k.clone(), if d.sign() < 0 { Quantity::zero() } else { d })
            })
            .collect();
    }
    delta.0.retain(|_, q| !q.is_zero());
    let requested = delta.mask(&hard_names);
    if requested.is_empty() {
        return Ok(None);
    }
    check(quota, &delta).map(Some)
}

/// The `(group, resource)` pairs a controller must list to recompute this quota's usage.
pub fn needed_resources(quota: &Value) -> Vec<(String, String)> {
    let hard = lenient(&quota["spec"]["hard"]).add(&lenient(&quota["status"]["hard"]));
    let mut out: Vec<(String, String)> = Vec::new();
    let mut push = |g: &str, r: &str| {
        let p = (g.to_string(), r.to_string());
        if !out.contains(&p) {
            out.push(p);
        }
    };
    for n in hard.names() {
        for core in ["pods", "services", "persistentvolumeclaims"] {
            if !matching_resources(core, "", &[n]).is_empty() {
                push("", core);
            }
        }
        if LEGACY_COUNTS.contains(&n) {
            push("", n);
        }
        if let Some(rest) = n.strip_prefix("count/") {
            match rest.split_once('.') {
                Some((r, g)) => push(g, r),
                None => push("", rest),
            }
        }
    }
    out
}

/// Recomputes a quota's `status.used` from every object in its namespace:
/// `objects` holds `(resource, group, items)`; resources the quota limits but that are not
/// given count as zero. Every tracked hard resource appears in the result, zero or not.
/// Uses the quota's `spec.hard` (what the controller copies to `status.hard`).
pub fn recompute(quota: &Value, objects: &[(&str, &str, &[Value])]) -> ResourceList {
    recompute_at(quota, objects, now_unix())
}

/// [`recompute`] at `now` (Unix seconds).
pub fn recompute_at(quota: &Value, objects: &[(&str, &str, &[Value])], now: i64) -> ResourceList {
    let hard = lenient(&quota["spec"]["hard"]);
    let hard_names: Vec<&str> = hard.names().collect();
    let mut used = ResourceList::new();
    let mut tracked: Vec<String> = Vec::new();
    for (group, resource) in
        needed_resources(&serde_json::json!({"spec": {"hard": hard.to_json()}}))
    {
        let matched = matching_resources(&resource, &group, &hard_names);
        for m in &matched {
            used.add_to(m, Quantity::zero());
        }
        let items = objects
            .iter()
            .filter(|(r, g, _)| *r == resource && *g == group)
            .flat_map(|(_, _, items)| items.iter());
        for item in items {
            if matches_scopes(quota, &resource, item) {
                used = used.add(&usage_at(&resource, &group, item, now).mask(&matched));
            }
        }
        tracked.extend(matched);
    }
    used.mask(&tracked)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rl(v: Value) -> ResourceList {
        ResourceList::from_json(&v).unwrap()
    }

    fn pod(containers: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": {"containers": containers}})
    }

    fn quota(hard: Value, used: Value) -> Value {
        json!({"metadata": {"name": "q"}, "spec": {"hard": hard.clone()}, "status": {"hard": hard, "used": used}})
    }

    #[test]
    fn pod_usage_table() {
        let cases: Vec<(Value, Value)> = vec![
            (
                pod(
                    json!([{"name": "a", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "200m"}}},
                           {"name": "b", "resources": {"requests": {"cpu": "150m", "example.com/gpu": "1", "hugepages-2Mi": "4Mi"}}}]),
                ),
                json!({"count/pods": "1", "pods": "1", "cpu": "250m", "requests.cpu": "250m", "limits.cpu": "200m",
                       "memory": "64Mi", "requests.memory": "64Mi", "requests.example.com/gpu": "1",
                       "hugepages-2Mi": "4Mi", "requests.hugepages-2Mi": "4Mi"}),
            ),
            // Init containers: the max of each (plus earlier sidecars) vs the sum of the rest.
            (
                json!({"spec": {"initContainers": [
                        {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
                        {"name": "init", "resources": {"requests": {"cpu": "2"}}}],
                      "containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}],
                      "overhead": {"cpu": "10m", "memory": "1Mi"}}}),
                json!({"count/pods": "1", "pods": "1", "cpu": "3010m", "requests.cpu": "3010m",
                       "memory": "1Mi", "requests.memory": "1Mi"}),
            ),
            (
                json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}, "status": {"phase": "Succeeded"}}),
                json!({"count/pods": "1"}),
            ),
            (
                json!({"metadata": {"deletionTimestamp": "2020-01-01T00:00:00Z", "deletionGracePeriodSeconds": 30},
                       "spec": {"containers": [{"name": "c"}]}}),
                json!({"count/pods": "1"}),
            ),
            (
                json!({"metadata": {"deletionTimestamp": "2999-01-01T00:00:00Z", "deletionGracePeriodSeconds": 30},
                       "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "bogus"}}}]}}),
                json!({"count/pods": "1", "pods": "1"}),
            ),
            (json!("garbage"), json!({"count/pods": "1", "pods": "1"})),
        ];
        for (i, (obj, want)) in cases.into_iter().enumerate() {
            assert_eq!(
                usage_at("pods", "", &obj, 1_700_000_000),
                rl(want),
                "case {i}"
            );
        }
    }

    #[test]
    fn other_usage_table() {
        let cases: Vec<(&str, &str, Value, Value)> = vec![
            (
                "services",
                "",
                json!({"spec": {"type": "NodePort", "ports": [{"port": 1}, {"port": 2}]}}),
                json!({"count/services": "1", "services": "1", "services.nodeports": "2"}),
            ),
            (
                "services",
                "",
                json!({"spec": {"type": "LoadBalancer", "allocateLoadBalancerNodePorts": false, "ports": [{"port": 1, "nodePort": 30001}, {"port": 2}]}}),
                json!({"count/services": "1", "services": "1", "services.nodeports": "1", "services.loadbalancers": "1"}),
            ),
            (
                "services",
                "",
                json!({"spec": {"type": "ClusterIP"}}),
                json!({"count/services": "1", "services": "1"}),
            ),
            (
                "persistentvolumeclaims",
                "",
                json!({"spec": {"storageClassName": "gold", "resources": {"requests": {"storage": "1500m"}}}}),
                json!({"persistentvolumeclaims": "1", "count/persistentvolumeclaims": "1", "requests.storage": "2",
                    "gold.storageclass.storage.k8s.io/persistentvolumeclaims": "1", "gold.storageclass.storage.k8s.io/requests.storage": "2"}),
            ),
            (
                "persistentvolumeclaims",
                "",
                json!({"spec": {"resources": {"requests": {"storage": "1Gi"}}}, "status": {"allocatedResources": {"storage": "2Gi"}}}),
                json!({"persistentvolumeclaims": "1", "count/persistentvolumeclaims": "1", "requests.storage": "2Gi"}),
            ),
            (
                "configmaps",
                "",
                json!({}),
                json!({"configmaps": "1", "count/configmaps": "1"}),
            ),
            (
                "secrets",
                "",
                json!({}),
                json!({"secrets": "1", "count/secrets": "1"}),
            ),
            (
                "deployments",
                "apps",
                json!({}),
                json!({"count/deployments.apps": "1"}),
            ),
            (
                "widgets",
                "example.com",
                json!(null),
                json!({"count/widgets.example.com": "1"}),
            ),
        ];
        for (i, (res, group, obj, want)) in cases.into_iter().enumerate() {
            assert_eq!(usage(res, group, &obj), rl(want), "case {i}");
        }
    }

    #[test]
    fn scopes() {
        let be = pod(json!([{"name": "c"}]));
        let burst = pod(json!([{"name": "c", "resources": {"requests": {"cpu": "1"}}}]));
        let mut term = be.clone();
        term["spec"]["activeDeadlineSeconds"] = json!(10);
        let mut prio = be.clone();
        prio["spec"]["priorityClassName"] = json!("high");
        let scoped = |scopes: Value| json!({"spec": {"scopes": scopes}});
        let sel = |op: &str, values: Value| json!({"spec": {"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": op, "values": values}]}}});
        let cases: Vec<(Value, &str, &Value, bool)> = vec![
            (json!({}), "pods", &be, true),
            (json!({}), "configmaps", &be, true),
            (scoped(json!(["BestEffort"])), "pods", &be, true),
            (scoped(json!(["BestEffort"])), "pods", &burst, false),
            (scoped(json!(["NotBestEffort"])), "pods", &burst, true),
            (scoped(json!(["Terminating"])), "pods", &term, true),
            (scoped(json!(["Terminating"])), "pods", &be, false),
            (
                scoped(json!(["NotTerminating", "BestEffort"])),
                "pods",
                &be,
                true,
            ),
            (scoped(json!(["BestEffort"])), "configmaps", &be, false),
            (scoped(json!(["PriorityClass"])), "pods", &prio, true),
            (scoped(json!(["PriorityClass"])), "pods", &be, false),
            (sel("In", json!(["high", "low"])), "pods", &prio, true),
            (sel("In", json!(["low"])), "pods", &prio, false),
            (sel("NotIn", json!(["low"])), "pods", &prio, true),
            (sel("DoesNotExist", json!([])), "pods", &be, false),
            (scoped(json!(["Bogus"])), "pods", &be, false),
        ];
        for (i, (q, res, obj, want)) in cases.into_iter().enumerate() {
            assert_eq!(matches_scopes(&q, res, obj), want, "case {i}");
        }
    }

    #[test]
    fn check_messages() {
        let q = quota(
            json!({"pods": "2", "requests.cpu": "1"}),
            json!({"pods": "2", "requests.cpu": "500m"}),
        );
        let e = check(&q, &rl(json!({"pods": "1", "count/pods": "1"}))).unwrap_err();
        assert_eq!(
            e,
            QuotaError::Exceeded {
                name: "q".into(),
                requested: "pods=1".into(),
                used: "pods=2".into(),
                limited: "pods=2".into(),
            }
        );
        assert_eq!(
            e.to_string(),
            "exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2"
        );
        assert_eq!(
            check(&q, &rl(json!({"requests.cpu": "500m"}))),
            Ok(rl(json!({"pods": "2", "requests.cpu": "1"})))
        );
        assert_eq!(
            check(&q, &rl(json!({"requests.cpu": "600m", "pods": "1"}))).map_err(|e| e.to_string()),
            Err("exceeded quota: q, requested: pods=1,requests.cpu=600m, used: pods=2,requests.cpu=500m, limited: pods=2,requests.cpu=1".to_string())
        );
    }

    #[test]
    fn admit_table() {
        let p =
            pod(json!([{"name": "a", "resources": {"requests": {"cpu": "100m"}}}, {"name": "b"}]));
        let cases: Vec<(Value, Result<Option<Value>, &str>)> = vec![
            (
                quota(json!({"pods": "2"}), json!({"pods": "1"})),
                Ok(Some(json!({"pods": "2"}))),
            ),
            (
                quota(json!({"pods": "1"}), json!({"pods": "1"})),
                Err("exceeded quota: q, requested: pods=1, used: pods=1, limited: pods=1"),
            ),
            (
                quota(
                    json!({"limits.cpu": "2", "requests.cpu": "2"}),
                    json!({"limits.cpu": "0", "requests.cpu": "0"}),
                ),
                Err("failed quota: q: must specify limits.cpu for: a,b; requests.cpu for: b"),
            ),
            (
                quota(json!({"pods": "2"}), json!({})),
                Err("status unknown for quota: q, resources: pods"),
            ),
            (
                quota(json!({"configmaps": "2"}), json!({"configmaps": "0"})),
                Ok(None),
            ),
        ];
        for (i, (q, want)) in cases.into_iter().enumerate() {
            let got = admit_at(&q, "pods", "", &p, None, 0).map_err(|e| e.to_string());
            let want = want.map(|o| o.map(rl)).map_err(String::from);
            assert_eq!(got, want, "case {i}");
        }
        // Updates are charged the growth only.
        let q = quota(
            json!({"requests.storage": "10Gi"}),
            json!({"requests.storage": "5Gi"}),
        );
        let old = json!({"metadata": {"resourceVersion": "3"}, "spec": {"resources": {"requests": {"storage": "5Gi"}}}});
        let new = json!({"metadata": {"resourceVersion": "3"}, "spec": {"resources": {"requests": {"storage": "8Gi"}}}});
        assert_eq!(
            admit_at(&q, "persistentvolumeclaims", "", &new, Some(&old), 0),
            Ok(Some(rl(json!({"requests.storage": "8Gi"}))))
        );
        assert_eq!(
            admit_at(&q, "persistentvolumeclaims", "", &old, Some(&new), 0),
            Ok(None)
        );
        assert!(handles("services", "", "UPDATE") && !handles("pods", "", "UPDATE"));
    }

    #[test]
    fn admit_error_variants() {
        let p =
            pod(json!([{"name": "a", "resources": {"requests": {"cpu": "100m"}}}, {"name": "b"}]));
        let q = quota(
            json!({"limits.cpu": "2", "requests.cpu": "2"}),
            json!({"limits.cpu": "0", "requests.cpu": "0"}),
        );
        let Err(QuotaError::Constraints { name, source }) = admit_at(&q, "pods", "", &p, None, 0)
        else {
            panic!("expected Constraints");
        };
        assert_eq!(name, "q");
        assert_eq!(
            source.missing,
            BTreeMap::from([
                (
                    "limits.cpu".to_string(),
                    BTreeSet::from(["a".to_string(), "b".to_string()])
                ),
                (
                    "requests.cpu".to_string(),
                    BTreeSet::from(["b".to_string()])
                ),
            ])
        );
        assert_eq!(
            source.to_string(),
            "must specify limits.cpu for: a,b; requests.cpu for: b"
        );
        let q = quota(json!({"pods": "2", "count/pods": "2"}), json!({}));
        let e = admit_at(&q, "pods", "", &p, None, 0).unwrap_err();
        assert_eq!(
            e,
            QuotaError::StatusUnknown {
                name: "q".into(),
                resources: vec!["count/pods".into(), "pods".into()],
            }
        );
        assert_eq!(
            e.to_string(),
            "status unknown for quota: q, resources: count/pods,pods"
        );
        let e = QuotaError::NegativeUsage {
            resources: vec!["pods".into(), "requests.cpu".into()],
        };
        assert_eq!(
            e.to_string(),
            "quota usage is negative for resource(s): pods,requests.cpu"
        );
    }

    #[test]
    fn recompute_counts_matching_objects() {
        let q = json!({"spec": {"hard": {"pods": "10", "requests.cpu": "4", "count/deployments.apps": "5", "configmaps": "3", "services.nodeports": "2"},
                                "scopes": []}});
        let pods = vec![
            pod(json!([{"name": "a", "resources": {"requests": {"cpu": "1"}}}])),
            json!({"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}]}, "status": {"phase": "Failed"}}),
        ];
        let deploys = vec![json!({}), json!({})];
        let used = recompute_at(
            &q,
            &[("pods", "", &pods), ("deployments", "apps", &deploys)],
            0,
        );
        assert_eq!(
            used,
            rl(
                json!({"pods": "1", "requests.cpu": "1", "count/deployments.apps": "2", "configmaps": "0", "services.nodeports": "0"})
            )
        );
        let mut needed = needed_resources(&q);
        needed.sort();
        assert_eq!(
            needed,
            vec![
                ("".into(), "configmaps".into()),
                ("".into(), "pods".into()),
                ("".into(), "services".into()),
                ("apps".into(), "deployments".into())
            ]
        );
    }
}
