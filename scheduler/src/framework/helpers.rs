//! Small matching helpers shared by plugins: pod identity and priority, label selectors of
//! API objects (converted into [`k1s_api::selector`] types), node selector terms and taint
//! tolerations.

use std::collections::BTreeMap;

use k1s_api::selector::LabelSelector;
use k8s_openapi::api::core::v1::{Node, NodeSelector, NodeSelectorTerm, Pod, Taint, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as ApiLabelSelector;

static EMPTY_LABELS: BTreeMap<String, String> = BTreeMap::new();

pub fn namespace(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or("default")
}

pub fn name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or("")
}

/// `namespace/name`, the queue and cache key of a pod.
pub fn pod_key(pod: &Pod) -> String {
    format!("{}/{}", namespace(pod), name(pod))
}

pub fn uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or("")
}

pub fn priority(pod: &Pod) -> i32 {
    pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)
}

pub fn labels(pod: &Pod) -> &BTreeMap<String, String> {
    pod.metadata.labels.as_ref().unwrap_or(&EMPTY_LABELS)
}

pub fn node_labels(node: &Node) -> &BTreeMap<String, String> {
    node.metadata.labels.as_ref().unwrap_or(&EMPTY_LABELS)
}

pub fn node_name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or("")
}

pub fn pod_node_name(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or("")
}

pub fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

pub fn tolerations(pod: &Pod) -> &[Toleration] {
    pod.spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or(&[])
}

pub fn taints(node: &Node) -> &[Taint] {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or(&[])
}

/// A `metav1.LabelSelector` as a selector; `None` when it is invalid (upstream then matches
/// nothing). An empty selector matches everything.
pub fn label_selector(sel: &ApiLabelSelector) -> Option<LabelSelector> {
    k1s_api::volume::label_selector(sel)
}

/// One node selector term ([`k1s_api::volume::node_selector_term_matches`]).
pub fn node_selector_term_matches(term: &NodeSelectorTerm, node: &Node) -> bool {
    k1s_api::volume::node_selector_term_matches(term, node)
}

/// A node selector: its terms are ORed.
pub fn node_selector_matches(sel: &NodeSelector, node: &Node) -> bool {
    k1s_api::volume::node_selector_matches(sel, node)
}

/// Whether the pod's `nodeSelector` and required node affinity both match `node`.
pub fn pod_matches_node_selector_and_affinity(pod: &Pod, node: &Node) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return true;
    };
    if let Some(sel) = &spec.node_selector {
        let labels = node_labels(node);
        if !sel.iter().all(|(k, v)| labels.get(k) == Some(v)) {
            return false;
        }
    }
    if let Some(req) = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| {
            na.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
    {
        return node_selector_matches(req, node);
    }
    true
}

/// Whether `tol` tolerates `taint` (upstream `Toleration.ToleratesTaint`).
pub fn tolerates(tol: &Toleration, taint: &Taint) -> bool {
    if let Some(e) = tol.effect.as_deref().filter(|e| !e.is_empty())
        && e != taint.effect
    {
        return false;
    }
    if let Some(k) = tol.key.as_deref().filter(|k| !k.is_empty())
        && k != taint.key
    {
        return false;
    }
    match tol.operator.as_deref().unwrap_or("Equal") {
        "Exists" => true,
        "Equal" | "" => tol.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or(""),
        _ => false,
    }
}

/// The first taint with one of `effects` that no toleration tolerates.
pub fn find_untolerated_taint<'a>(
    taints: &'a [Taint],
    tols: &[Toleration],
    effects: &[&str],
) -> Option<&'a Taint> {
    taints
        .iter()
        .filter(|t| effects.contains(&t.effect.as_str()))
        .find(|t| !tols.iter().any(|tol| tolerates(tol, t)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tol(key: &str, op: &str, value: &str, effect: &str) -> Toleration {
        Toleration {
            key: Some(key.into()),
            operator: Some(op.into()),
            value: Some(value.into()),
            effect: Some(effect.into()),
            ..Default::default()
        }
    }

    #[test]
    fn tolerations_match_as_upstream() {
        let taint = Taint {
            key: "k".into(),
            value: Some("v".into()),
            effect: "NoSchedule".into(),
            ..Default::default()
        };
        let cases = [
            (tol("k", "Equal", "v", "NoSchedule"), true),
            (tol("k", "Equal", "w", "NoSchedule"), false),
            (tol("k", "Exists", "", ""), true),
            (tol("", "Exists", "", ""), true),
            (tol("k", "Equal", "v", "NoExecute"), false),
            (tol("j", "Exists", "", "NoSchedule"), false),
        ];
        for (i, (t, want)) in cases.iter().enumerate() {
            assert_eq!(tolerates(t, &taint), *want, "case {i}");
        }
    }
}
