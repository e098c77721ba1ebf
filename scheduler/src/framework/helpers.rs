//! Small matching helpers shared by plugins: pod identity and priority, label selectors of
//! API objects (converted into [`k1s_api::selector`] types), node selector terms and taint
//! tolerations.

use std::collections::BTreeMap;

use k1s_api::selector::{LabelSelector, Requirement};
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
    let mut reqs = Vec::new();
    for (k, v) in sel.match_labels.iter().flatten() {
        reqs.push(Requirement::Equals(k.clone(), v.clone()));
    }
    for e in sel.match_expressions.iter().flatten() {
        let values = e.values.clone().unwrap_or_default();
        reqs.push(match e.operator.as_str() {
            "In" if !values.is_empty() => Requirement::In(e.key.clone(), values),
            "NotIn" if !values.is_empty() => Requirement::NotIn(e.key.clone(), values),
            "Exists" if values.is_empty() => Requirement::Exists(e.key.clone()),
            "DoesNotExist" if values.is_empty() => Requirement::DoesNotExist(e.key.clone()),
            _ => return None,
        });
    }
    Some(LabelSelector(reqs))
}

/// One node selector term: all expressions and fields must match; a term with neither
/// matches nothing. Invalid requirements make the term not match.
pub fn node_selector_term_matches(term: &NodeSelectorTerm, node: &Node) -> bool {
    let exprs = term.match_expressions.as_deref().unwrap_or(&[]);
    let fields = term.match_fields.as_deref().unwrap_or(&[]);
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    let labels = node_labels(node);
    for r in exprs {
        let Some(req) = node_requirement(&r.key, &r.operator, r.values.as_deref()) else {
            return false;
        };
        if !LabelSelector(vec![req]).matches(labels) {
            return false;
        }
    }
    for f in fields {
        // Only metadata.name is a supported field, with In and NotIn.
        if f.key != "metadata.name" {
            return false;
        }
        let values = f.values.as_deref().unwrap_or(&[]);
        if values.len() != 1 {
            return false;
        }
        let name = node_name(node);
        let ok = match f.operator.as_str() {
            "In" => values.iter().any(|v| v == name),
            "NotIn" => values.iter().all(|v| v != name),
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    true
}

/// A node selector: its terms are ORed.
pub fn node_selector_matches(sel: &NodeSelector, node: &Node) -> bool {
    sel.node_selector_terms
        .iter()
        .any(|t| node_selector_term_matches(t, node))
}

fn node_requirement(key: &str, op: &str, values: Option<&[String]>) -> Option<Requirement> {
    let values = values.unwrap_or(&[]);
    let k = key.to_owned();
    Some(match op {
        "In" if !values.is_empty() => Requirement::In(k, values.to_vec()),
        "NotIn" if !values.is_empty() => Requirement::NotIn(k, values.to_vec()),
        "Exists" if values.is_empty() => Requirement::Exists(k),
        "DoesNotExist" if values.is_empty() => Requirement::DoesNotExist(k),
        "Gt" if values.len() == 1 => Requirement::GreaterThan(k, values[0].parse().ok()?),
        "Lt" if values.len() == 1 => Requirement::LessThan(k, values[0].parse().ok()?),
        _ => return None,
    })
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
