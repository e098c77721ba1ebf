//! Which nodes run a daemon pod, as upstream's `NodeShouldRunDaemonPod`: the template's
//! `nodeName`, `nodeSelector` and required node affinity must match the node, and its
//! NoSchedule/NoExecute taints must be tolerated — with the tolerations upstream adds to every
//! daemon pod ([`daemon_tolerations`]). A node whose only untolerated taints are NoSchedule
//! keeps a pod it already has. Also the pod-side changes: the tolerations and the required
//! affinity on `metadata.name` that pins a pod to its node. Pure functions; no I/O.

use serde_json::{Value, json};

/// Whether a node should run a new daemon pod, and keep one it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Eligibility {
    pub should_run: bool,
    pub should_continue_running: bool,
}

/// The tolerations upstream's `AddOrUpdateDaemonPodTolerations` gives daemon pods.
pub fn daemon_tolerations(host_network: bool) -> Vec<Value> {
    let mut t = vec![
        json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}),
        json!({"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}),
        json!({"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"}),
        json!({"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"}),
        json!({"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"}),
        json!({"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}),
    ];
    if host_network {
        t.push(
            json!({"key": "node.kubernetes.io/network-unavailable", "operator": "Exists",
                      "effect": "NoSchedule"}),
        );
    }
    t
}

/// Adds the daemon tolerations a pod spec lacks (same key and effect counts as present).
pub fn add_daemon_tolerations(spec: &mut Value) {
    let host_network = spec["hostNetwork"] == true;
    let mut tols: Vec<Value> = spec["tolerations"].as_array().cloned().unwrap_or_default();
    for t in daemon_tolerations(host_network) {
        let present = tols
            .iter()
            .any(|x| x["key"] == t["key"] && x["effect"] == t["effect"]);
        if !present {
            tols.push(t);
        }
    }
    spec["tolerations"] = json!(tols);
}

/// Pins a pod spec to `node` with a required node affinity on `metadata.name`, replacing
/// any required node selector terms (the node was already checked against them), as
/// upstream's `ReplaceDaemonSetPodNodeNameNodeAffinity`.
pub fn pin_to_node(spec: &mut Value, node: &str) {
    let term =
        json!({"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]});
    if !spec["affinity"].is_object() {
        spec["affinity"] = json!({});
    }
    if !spec["affinity"]["nodeAffinity"].is_object() {
        spec["affinity"]["nodeAffinity"] = json!({});
    }
    spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] =
        json!({"nodeSelectorTerms": [term]});
}

/// The node a daemon pod is for: `spec.nodeName`, else its `metadata.name` affinity.
pub fn target_node(pod: &Value) -> Option<&str> {
    if let Some(n) = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
        return Some(n);
    }
    let terms = pod["spec"]["affinity"]["nodeAffinity"]
        ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        .as_array()?;
    terms.iter().find_map(|t| {
        t["matchFields"].as_array()?.iter().find_map(|r| {
            (r["key"] == "metadata.name" && r["operator"] == "In")
                .then(|| r["values"].as_array()?.first()?.as_str())
                .flatten()
        })
    })
}

fn label<'a>(node: &'a Value, k: &str) -> Option<&'a str> {
    node["metadata"]["labels"][k].as_str()
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// One node selector requirement against a value (a label or a field).
fn requirement_matches(r: &Value, value: Option<&str>) -> bool {
    let values = strings(&r["values"]);
    match r["operator"].as_str().unwrap_or("") {
        "In" => value.is_some_and(|v| values.contains(&v)),
        "NotIn" => value.is_none_or(|v| !values.contains(&v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        op @ ("Gt" | "Lt") => {
            let (Some(v), Some(bound)) = (
                value.and_then(|v| v.parse::<i64>().ok()),
                values.first().and_then(|b| b.parse::<i64>().ok()),
            ) else {
                return false;
            };
            if op == "Gt" { v > bound } else { v < bound }
        }
        _ => false,
    }
}

/// A node selector term: every expression and field requirement matches (an empty term
/// matches nothing, as upstream).
fn term_matches(term: &Value, node: &Value) -> bool {
    let exprs = term["matchExpressions"].as_array();
    let fields = term["matchFields"].as_array();
    if exprs.is_none_or(Vec::is_empty) && fields.is_none_or(Vec::is_empty) {
        return false;
    }
    let exprs_ok = exprs.is_none_or(|es| {
        es.iter()
            .all(|r| requirement_matches(r, r["key"].as_str().and_then(|k| label(node, k))))
    });
    let fields_ok = fields.is_none_or(|fs| {
        fs.iter().all(|r| {
            let v = (r["key"] == "metadata.name").then(|| node["metadata"]["name"].as_str());
            requirement_matches(r, v.flatten())
        })
    });
    exprs_ok && fields_ok
}

/// Whether `spec`'s nodeSelector and required node affinity match `node`.
pub fn selects_node(spec: &Value, node: &Value) -> bool {
    if let Some(sel) = spec["nodeSelector"].as_object()
        && !sel.iter().all(|(k, v)| label(node, k) == v.as_str())
    {
        return false;
    }
    let required =
        &spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
    match required["nodeSelectorTerms"].as_array() {
        Some(terms) if required.is_object() => terms.iter().any(|t| term_matches(t, node)),
        _ => true,
    }
}

/// Whether `toleration` tolerates `taint` (upstream's `ToleratesTaint`).
pub fn tolerates(toleration: &Value, taint: &Value) -> bool {
    let effect = toleration["effect"].as_str().unwrap_or("");
    if !effect.is_empty() && Some(effect) != taint["effect"].as_str() {
        return false;
    }
    let key = toleration["key"].as_str().unwrap_or("");
    if !key.is_empty() && Some(key) != taint["key"].as_str() {
        return false;
    }
    match toleration["operator"].as_str().unwrap_or("Equal") {
        "Exists" => true,
        "Equal" | "" => {
            toleration["value"].as_str().unwrap_or("") == taint["value"].as_str().unwrap_or("")
        }
        _ => false,
    }
}

/// Upstream's `NodeShouldRunDaemonPod` for the daemon pod `spec` (tolerations already added).
pub fn node_should_run(spec: &Value, node: &Value) -> Eligibility {
    let no = Eligibility {
        should_run: false,
        should_continue_running: false,
    };
    if let Some(n) = spec["nodeName"].as_str().filter(|n| !n.is_empty())
        && Some(n) != node["metadata"]["name"].as_str()
    {
        return no;
    }
    if !selects_node(spec, node) {
        return no;
    }
    let tols: Vec<&Value> = spec["tolerations"]
        .as_array()
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let untolerated = |effect: &str| {
        node["spec"]["taints"].as_array().is_some_and(|taints| {
            taints
                .iter()
                .filter(|t| t["effect"] == effect)
                .any(|t| !tols.iter().any(|tol| tolerates(tol, t)))
        })
    };
    if untolerated("NoExecute") {
        return no;
    }
    Eligibility {
        should_run: !untolerated("NoSchedule"),
        should_continue_running: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, labels: Value, taints: Value) -> Value {
        json!({"metadata": {"name": name, "labels": labels}, "spec": {"taints": taints}})
    }

    fn spec(extra: Value) -> Value {
        let mut s = json!({"containers": [{"name": "c", "image": "i"}]});
        if let (Some(s), Some(e)) = (s.as_object_mut(), extra.as_object()) {
            s.extend(e.clone());
        }
        add_daemon_tolerations(&mut s);
        s
    }

    const RUN: Eligibility = Eligibility {
        should_run: true,
        should_continue_running: true,
    };
    const KEEP: Eligibility = Eligibility {
        should_run: false,
        should_continue_running: true,
    };
    const NO: Eligibility = Eligibility {
        should_run: false,
        should_continue_running: false,
    };

    #[test]
    fn eligibility_table() {
        let plain = node("a", json!({"disk": "ssd"}), json!([]));
        let cases = [
            ("plain", spec(json!({})), plain.clone(), RUN),
            (
                "selector match",
                spec(json!({"nodeSelector": {"disk": "ssd"}})),
                plain.clone(),
                RUN,
            ),
            (
                "selector miss",
                spec(json!({"nodeSelector": {"disk": "hdd"}})),
                plain.clone(),
                NO,
            ),
            (
                "affinity NotIn",
                spec(
                    json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                    {"nodeSelectorTerms": [{"matchExpressions": [{"key": "disk", "operator": "NotIn", "values": ["ssd"]}]}]}}}}),
                ),
                plain.clone(),
                NO,
            ),
            (
                "affinity second term",
                spec(
                    json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                    {"nodeSelectorTerms": [{"matchExpressions": [{"key": "x", "operator": "Exists"}]},
                                           {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]}]}]}}}}),
                ),
                plain.clone(),
                RUN,
            ),
            (
                "nodeName other",
                spec(json!({"nodeName": "b"})),
                plain.clone(),
                NO,
            ),
            (
                "NoSchedule taint",
                spec(json!({})),
                node(
                    "a",
                    json!({}),
                    json!([{"key": "gpu", "value": "x", "effect": "NoSchedule"}]),
                ),
                KEEP,
            ),
            (
                "NoExecute taint",
                spec(json!({})),
                node(
                    "a",
                    json!({}),
                    json!([{"key": "gpu", "effect": "NoExecute"}]),
                ),
                NO,
            ),
            (
                "tolerated taint",
                spec(json!({"tolerations": [{"key": "gpu", "operator": "Equal", "value": "x"}]})),
                node(
                    "a",
                    json!({}),
                    json!([{"key": "gpu", "value": "x", "effect": "NoSchedule"}]),
                ),
                RUN,
            ),
            (
                "automatic tolerations",
                spec(json!({})),
                node(
                    "a",
                    json!({}),
                    json!([
                    {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
                    {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
                    {"key": "node.kubernetes.io/memory-pressure", "effect": "NoSchedule"}]),
                ),
                RUN,
            ),
            (
                "network-unavailable without hostNetwork",
                spec(json!({})),
                node(
                    "a",
                    json!({}),
                    json!([{"key": "node.kubernetes.io/network-unavailable", "effect": "NoSchedule"}]),
                ),
                KEEP,
            ),
            (
                "network-unavailable with hostNetwork",
                spec(json!({"hostNetwork": true})),
                node(
                    "a",
                    json!({}),
                    json!([{"key": "node.kubernetes.io/network-unavailable", "effect": "NoSchedule"}]),
                ),
                RUN,
            ),
        ];
        for (name, s, n, want) in cases {
            assert_eq!(node_should_run(&s, &n), want, "{name}");
        }
    }

    #[test]
    fn tolerations_are_added_once() {
        let mut s = json!({"tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
            "effect": "NoExecute", "tolerationSeconds": 10}]});
        add_daemon_tolerations(&mut s);
        add_daemon_tolerations(&mut s);
        let tols = s["tolerations"].as_array().unwrap();
        assert_eq!(tols.len(), 6);
        assert_eq!(tols[0]["tolerationSeconds"], 10);
    }

    #[test]
    fn pinning_replaces_required_terms_and_is_read_back() {
        let mut s = json!({"affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}]},
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {}}]}}});
        pin_to_node(&mut s, "n1");
        let pod = json!({"spec": s});
        assert_eq!(target_node(&pod), Some("n1"));
        let terms = &pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            ["nodeSelectorTerms"];
        assert_eq!(terms.as_array().unwrap().len(), 1);
        assert!(pod["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"].is_array());
        assert_eq!(
            target_node(&json!({"spec": {"nodeName": "n2", "affinity": s}})),
            Some("n2")
        );
        assert_eq!(target_node(&json!({"spec": {}})), None);
    }
}
