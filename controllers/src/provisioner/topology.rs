//! Accessibility requirements for `CreateVolume`, as external-provisioner's
//! `GenerateAccessibilityRequirements` (without `--strict-topology`).
//!
//! - The driver's topology keys come from the CSINode objects (`spec.drivers[].topologyKeys`);
//!   a driver without keys gets no requirements.
//! - `requisite`: the class's `allowedTopologies` flattened into segments; without them, the
//!   segments of every node whose CSINode lists the driver with the same keys.
//! - `preferred`: with a selected node (`WaitForFirstConsumer`), its segment first — it must be
//!   in `requisite` — then the rest in order; without one, `requisite` sorted and rotated by a
//!   hash of the claim's name, so volumes spread across segments.
//!
//! Failures are [`TopologyError`]s.

use std::collections::{BTreeMap, BTreeSet};

use k1s_api::client::{Client, ClientError, ListParams, ResourceRef};
use serde_json::Value;

use super::{AccessibilityRequirements, Segment};

/// Why the accessibility requirements cannot be computed.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    #[error("topology {selected:?} of the selected node is not in allowedTopologies {allowed:?}")]
    NotAllowed {
        selected: Segment,
        allowed: Vec<Segment>,
    },
    #[error("listing CSINodes: {}", .0.message)]
    ListCsiNodes(#[source] ClientError),
    #[error("driver {driver} is not registered on the selected node {node} (no CSINode entry)")]
    NotRegistered { driver: String, node: String },
    #[error("failed to get target node: {}", .0.message)]
    GetNode(#[source] ClientError),
    #[error(
        "topology labels from selected node {node} do not match topology keys {keys:?} from CSINode"
    )]
    NodeLabels { node: String, keys: Vec<String> },
    #[error("listing nodes: {}", .0.message)]
    ListNodes(#[source] ClientError),
}

fn csinodes() -> ResourceRef {
    ResourceRef::new("storage.k8s.io", "v1", "csinodes", None)
}

fn nodes() -> ResourceRef {
    ResourceRef::new("", "v1", "nodes", None)
}

/// The class's `allowedTopologies` as segments: each term's expressions combined, every
/// combination of their values one segment.
pub fn flatten_allowed(terms: &Value) -> Vec<Segment> {
    let mut out: Vec<Segment> = Vec::new();
    for term in terms.as_array().into_iter().flatten() {
        let mut segs: Vec<Segment> = vec![Segment::new()];
        for expr in term["matchLabelExpressions"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let k = expr["key"].as_str().unwrap_or("");
            let values: Vec<&str> = expr["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            segs = segs
                .iter()
                .flat_map(|s| {
                    values.iter().map(move |v| {
                        let mut s = s.clone();
                        s.insert(k.to_owned(), (*v).to_owned());
                        s
                    })
                })
                .collect();
        }
        out.extend(segs.into_iter().filter(|s| !s.is_empty()));
    }
    dedup_sorted(out)
}

fn dedup_sorted(segs: Vec<Segment>) -> Vec<Segment> {
    segs.into_iter()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// The topology keys a CSINode lists for `driver` (`None`: the driver is not on the node).
pub fn driver_keys(csinode: &Value, driver: &str) -> Option<Vec<String>> {
    let d = csinode["spec"]["drivers"]
        .as_array()?
        .iter()
        .find(|d| d["name"] == driver)?;
    let mut keys: Vec<String> = d["topologyKeys"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|k| k.as_str().map(str::to_owned))
        .collect();
    keys.sort();
    Some(keys)
}

/// A node's values for `keys` (`None` when it lacks one of the labels).
pub fn node_segment(node: &Value, keys: &[String]) -> Option<Segment> {
    keys.iter()
        .map(|k| {
            node["metadata"]["labels"][k]
                .as_str()
                .map(|v| (k.clone(), v.to_owned()))
        })
        .collect()
}

/// FNV-1a: a stable spread of claim names over segments.
fn hash(s: &str) -> usize {
    let mut h: u32 = 0x811c_9dc5;
    for b in s.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h as usize
}

/// The requirements from the flattened `allowed` topologies, the `selected` node's segment
/// and the segments of `all` nodes with the driver.
pub fn requirements(
    allowed: Vec<Segment>,
    selected: Option<Segment>,
    all: Vec<Segment>,
    claim_name: &str,
) -> Result<Option<AccessibilityRequirements>, TopologyError> {
    let mut requisite = if allowed.is_empty() {
        dedup_sorted(all)
    } else {
        allowed.clone()
    };
    if let Some(sel) = &selected
        && !requisite.contains(sel)
    {
        if !allowed.is_empty() {
            return Err(TopologyError::NotAllowed {
                selected: sel.clone(),
                allowed,
            });
        }
        requisite.push(sel.clone());
        requisite = dedup_sorted(requisite);
    }
    if requisite.is_empty() {
        return Ok(None);
    }
    let start = match &selected {
        Some(sel) => requisite.iter().position(|s| s == sel).unwrap_or(0),
        None => hash(claim_name) % requisite.len(),
    };
    let mut preferred = requisite.clone();
    preferred.rotate_left(start);
    Ok(Some(AccessibilityRequirements {
        requisite,
        preferred,
    }))
}

/// Gathers the inputs from the API server and computes the requirements for `driver`.
pub async fn accessibility(
    client: &dyn Client,
    driver: &str,
    class: &Value,
    selected_node: Option<&str>,
    claim_name: &str,
) -> Result<Option<AccessibilityRequirements>, TopologyError> {
    let allowed = flatten_allowed(&class["allowedTopologies"]);
    let all_csinodes = client
        .list(&csinodes(), &ListParams::default())
        .await
        .map_err(TopologyError::ListCsiNodes)?
        .items;
    let (keys, selected) = match selected_node {
        Some(node_name) => {
            let keys = all_csinodes
                .iter()
                .find(|c| c["metadata"]["name"] == node_name)
                .and_then(|c| driver_keys(c, driver))
                .ok_or_else(|| TopologyError::NotRegistered {
                    driver: driver.to_owned(),
                    node: node_name.to_owned(),
                })?;
            if keys.is_empty() {
                return Ok(None);
            }
            let node = client
                .get(&nodes(), node_name)
                .await
                .map_err(TopologyError::GetNode)?;
            let seg = node_segment(&node, &keys).ok_or_else(|| TopologyError::NodeLabels {
                node: node_name.to_owned(),
                keys: keys.clone(),
            })?;
            (keys, Some(seg))
        }
        None => {
            let Some(keys) = all_csinodes
                .iter()
                .filter_map(|c| driver_keys(c, driver))
                .find(|k| !k.is_empty())
            else {
                return Ok(None);
            };
            (keys, None)
        }
    };
    let mut all = Vec::new();
    if allowed.is_empty() {
        let node_list = client
            .list(&nodes(), &ListParams::default())
            .await
            .map_err(TopologyError::ListNodes)?
            .items;
        let by_name: BTreeMap<&str, &Value> = node_list
            .iter()
            .map(|n| (n["metadata"]["name"].as_str().unwrap_or(""), n))
            .collect();
        for c in &all_csinodes {
            if driver_keys(c, driver).as_ref() != Some(&keys) {
                continue;
            }
            let name = c["metadata"]["name"].as_str().unwrap_or("");
            if let Some(seg) = by_name.get(name).and_then(|n| node_segment(n, &keys)) {
                all.push(seg);
            }
        }
    }
    requirements(allowed, selected, all, claim_name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn seg(p: &[(&str, &str)]) -> Segment {
        p.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn allowed_topologies_flatten() {
        let terms = json!([
            {"matchLabelExpressions": [
                {"key": "zone", "values": ["a", "b"]},
                {"key": "rack", "values": ["1"]}]},
            {"matchLabelExpressions": [{"key": "zone", "values": ["c"]}]}
        ]);
        assert_eq!(
            flatten_allowed(&terms),
            vec![
                seg(&[("rack", "1"), ("zone", "a")]),
                seg(&[("rack", "1"), ("zone", "b")]),
                seg(&[("zone", "c")]),
            ]
        );
        assert!(flatten_allowed(&Value::Null).is_empty());
    }

    #[test]
    fn selected_node_first() {
        let (a, b, c) = (
            seg(&[("zone", "a")]),
            seg(&[("zone", "b")]),
            seg(&[("zone", "c")]),
        );
        let r = requirements(
            vec![],
            Some(b.clone()),
            vec![a.clone(), c.clone(), b.clone()],
            "x",
        )
        .unwrap()
        .unwrap();
        assert_eq!(r.requisite, vec![a.clone(), b.clone(), c.clone()]);
        assert_eq!(r.preferred, vec![b.clone(), c.clone(), a.clone()]);
        // allowedTopologies bound requisite; the selected node must be in them.
        let r = requirements(vec![a.clone(), b.clone()], Some(a.clone()), vec![], "x")
            .unwrap()
            .unwrap();
        assert_eq!(r.requisite, vec![a.clone(), b.clone()]);
        assert_eq!(r.preferred[0], a);
        let e = requirements(vec![a.clone()], Some(c.clone()), vec![], "x").unwrap_err();
        assert!(matches!(e, TopologyError::NotAllowed { .. }));
        assert_eq!(
            e.to_string(),
            format!(
                "topology {c:?} of the selected node is not in allowedTopologies {:?}",
                vec![a.clone()]
            )
        );
        let e = TopologyError::NodeLabels {
            node: "n1".into(),
            keys: vec!["zone".into()],
        };
        assert_eq!(
            e.to_string(),
            r#"topology labels from selected node n1 do not match topology keys ["zone"] from CSINode"#
        );
        let e = TopologyError::GetNode(ClientError::transport("down"));
        assert_eq!(e.to_string(), "failed to get target node: down");
        // Nothing known: no requirements.
        assert_eq!(requirements(vec![], None, vec![], "x").unwrap(), None);
        // Without a node every segment is preferred, in a rotation of the sorted list.
        let r = requirements(vec![], None, vec![c.clone(), a.clone(), b.clone()], "claim")
            .unwrap()
            .unwrap();
        assert_eq!(r.requisite, vec![a, b, c]);
        assert_eq!(r.preferred.len(), 3);
    }

    #[test]
    fn keys_and_segments() {
        let csinode = json!({"metadata": {"name": "n1"}, "spec": {"drivers": [
            {"name": "other", "topologyKeys": ["x"]},
            {"name": "hostpath.csi.k1s.io", "topologyKeys": ["topology.hostpath/node"]}]}});
        let keys = driver_keys(&csinode, "hostpath.csi.k1s.io").unwrap();
        assert_eq!(keys, vec!["topology.hostpath/node"]);
        assert_eq!(driver_keys(&csinode, "missing"), None);
        let node = json!({"metadata": {"labels": {"topology.hostpath/node": "n1"}}});
        assert_eq!(
            node_segment(&node, &keys),
            Some(seg(&[("topology.hostpath/node", "n1")]))
        );
        assert_eq!(node_segment(&json!({}), &keys), None);
    }
}
