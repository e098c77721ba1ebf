//! PersistentVolume ↔ PersistentVolumeClaim matching, shared by the scheduler's VolumeBinding
//! plugin and the PV controller (upstream's `k8s.io/component-helpers/storage/volume` and the
//! PV controller's `index.go`), plus the well-known annotations both sides write.
//!
//! Pure functions over the k8s-openapi types: no I/O, no caches. What a caller may consider
//! (assumed or taken volumes) is passed in as a filter.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Node, NodeSelector, NodeSelectorTerm, PersistentVolume, PersistentVolumeClaim,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as ApiLabelSelector;

use crate::quantity::Quantity;
use crate::selector::{LabelSelector, Requirement};

/// On a PV and a PVC: the PV controller (not the user) made the binding.
pub const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// On a PVC: the binding finished (the claim is bound, not merely pre-bound).
pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// On a PV: the provisioner that created it (and will delete it).
pub const ANN_DYNAMICALLY_PROVISIONED: &str = "pv.kubernetes.io/provisioned-by";
/// On a PVC: the provisioner asked to provision it.
pub const ANN_STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
/// The beta spelling of [`ANN_STORAGE_PROVISIONER`], still written for old provisioners.
pub const ANN_BETA_STORAGE_PROVISIONER: &str = "volume.beta.kubernetes.io/storage-provisioner";
/// On a PVC of a `WaitForFirstConsumer` class: the node the scheduler chose.
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// The class of a PV or PVC before `storageClassName` existed (takes precedence).
pub const ANN_BETA_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";
/// On a StorageClass: it is the default class.
pub const ANN_DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";
/// The provisioner of classes whose volumes are created by hand (local volumes).
pub const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";

fn quantity_bytes(q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>) -> i64 {
    q.and_then(|q| Quantity::parse(q.0.trim()).ok().map(|q| q.value()))
        .unwrap_or(0)
}

/// The storage a claim requests, in bytes (0 when absent or unparsable).
pub fn storage_request(pvc: &PersistentVolumeClaim) -> i64 {
    quantity_bytes(
        pvc.spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage")),
    )
}

/// The storage limit of a claim in bytes, if it sets one.
pub fn storage_limit(pvc: &PersistentVolumeClaim) -> Option<i64> {
    let q = pvc
        .spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.limits.as_ref())
        .and_then(|r| r.get("storage"))?;
    Some(quantity_bytes(Some(q)))
}

/// A PV's `capacity.storage` in bytes (0 when absent).
pub fn pv_capacity(pv: &PersistentVolume) -> i64 {
    quantity_bytes(
        pv.spec
            .as_ref()
            .and_then(|s| s.capacity.as_ref())
            .and_then(|c| c.get("storage")),
    )
}

fn annotation<'a>(
    meta: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
) -> Option<&'a str> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// The class a claim asks for: the beta annotation, else `spec.storageClassName`, else "".
pub fn claim_class(pvc: &PersistentVolumeClaim) -> String {
    if let Some(c) = annotation(&pvc.metadata, ANN_BETA_STORAGE_CLASS) {
        return c.to_owned();
    }
    pvc.spec
        .as_ref()
        .and_then(|s| s.storage_class_name.clone())
        .unwrap_or_default()
}

/// Whether a claim names a class at all (`""` counts: it asks for no class).
pub fn claim_has_class(pvc: &PersistentVolumeClaim) -> bool {
    annotation(&pvc.metadata, ANN_BETA_STORAGE_CLASS).is_some()
        || pvc
            .spec
            .as_ref()
            .is_some_and(|s| s.storage_class_name.is_some())
}

/// The class of a PV: the beta annotation, else `spec.storageClassName`, else "".
pub fn volume_class(pv: &PersistentVolume) -> String {
    if let Some(c) = annotation(&pv.metadata, ANN_BETA_STORAGE_CLASS) {
        return c.to_owned();
    }
    pv.spec
        .as_ref()
        .and_then(|s| s.storage_class_name.clone())
        .unwrap_or_default()
}

/// Whether the claim's and the volume's `volumeMode` differ (unset is `Filesystem`).
pub fn volume_mode_mismatch(pvc: &PersistentVolumeClaim, pv: &PersistentVolume) -> bool {
    let claim = pvc.spec.as_ref().and_then(|s| s.volume_mode.as_deref());
    let volume = pv.spec.as_ref().and_then(|s| s.volume_mode.as_deref());
    claim.unwrap_or("Filesystem") != volume.unwrap_or("Filesystem")
}

fn pv_modes(pv: &PersistentVolume) -> Vec<&str> {
    pv.spec
        .as_ref()
        .and_then(|s| s.access_modes.as_ref())
        .into_iter()
        .flatten()
        .map(String::as_str)
        .collect()
}

/// Whether the volume offers every access mode the claim asks for.
pub fn access_modes_satisfied(pvc: &PersistentVolumeClaim, pv: &PersistentVolume) -> bool {
    let offered = pv_modes(pv);
    pvc.spec
        .as_ref()
        .and_then(|s| s.access_modes.as_ref())
        .into_iter()
        .flatten()
        .all(|m| offered.contains(&m.as_str()))
}

/// Whether `pv.spec.claimRef` names this claim (namespace and name, and its uid when the
/// reference has one).
pub fn is_bound_to_claim(pv: &PersistentVolume, pvc: &PersistentVolumeClaim) -> bool {
    let Some(r) = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
        return false;
    };
    if r.name.as_deref() != pvc.metadata.name.as_deref()
        || r.namespace.as_deref().unwrap_or("") != pvc.metadata.namespace.as_deref().unwrap_or("")
    {
        return false;
    }
    match r.uid.as_deref().filter(|u| !u.is_empty()) {
        Some(uid) => Some(uid) == pvc.metadata.uid.as_deref(),
        None => true,
    }
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

fn selector_matches(pvc: &PersistentVolumeClaim, pv: &PersistentVolume) -> bool {
    let Some(sel) = pvc.spec.as_ref().and_then(|s| s.selector.as_ref()) else {
        return true;
    };
    let empty = BTreeMap::new();
    label_selector(sel).is_some_and(|s| s.matches(pv.metadata.labels.as_ref().unwrap_or(&empty)))
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

/// One node selector term: all expressions and fields must match; a term with neither
/// matches nothing. Invalid requirements make the term not match.
pub fn node_selector_term_matches(term: &NodeSelectorTerm, node: &Node) -> bool {
    let exprs = term.match_expressions.as_deref().unwrap_or(&[]);
    let fields = term.match_fields.as_deref().unwrap_or(&[]);
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    let empty = BTreeMap::new();
    let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
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
        let name = node.metadata.name.as_deref().unwrap_or("");
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

/// Whether a PV's `nodeAffinity.required` admits the node (none: every node).
pub fn pv_matches_node(pv: &PersistentVolume, node: &Node) -> bool {
    match pv
        .spec
        .as_ref()
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref())
    {
        Some(sel) => node_selector_matches(sel, node),
        None => true,
    }
}

/// Why a volume cannot serve the claim that names it, with upstream's reason texts
/// (`checkVolumeSatisfyClaim`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VolumeMismatch {
    #[error("the volume is marked for deletion {name:?}")]
    MarkedForDeletion { name: String },
    #[error("requested PV is too small")]
    TooSmall,
    #[error("storageClassName does not match")]
    StorageClass,
    #[error("incompatible volumeMode")]
    VolumeMode,
    #[error("incompatible accessMode")]
    AccessMode,
}

/// Upstream's `checkVolumeSatisfyClaim`: whether a volume the claim names in
/// `spec.volumeName` can serve it.
pub fn check_volume_satisfies_claim(
    pv: &PersistentVolume,
    pvc: &PersistentVolumeClaim,
) -> Result<(), VolumeMismatch> {
    if pv.metadata.deletion_timestamp.is_some() {
        return Err(VolumeMismatch::MarkedForDeletion {
            name: pv.metadata.name.clone().unwrap_or_default(),
        });
    }
    if pv_capacity(pv) < storage_request(pvc) {
        return Err(VolumeMismatch::TooSmall);
    }
    if volume_class(pv) != claim_class(pvc) {
        return Err(VolumeMismatch::StorageClass);
    }
    if volume_mode_mismatch(pvc, pv) {
        return Err(VolumeMismatch::VolumeMode);
    }
    if !access_modes_satisfied(pvc, pv) {
        return Err(VolumeMismatch::AccessMode);
    }
    Ok(())
}

/// Whether an unbound, unreserved volume is free for binding: upstream takes only
/// `Available` ones; a volume whose phase is not set yet (`Pending` right after creation, or
/// no status) is taken too, so binding does not wait for the PV controller's first pass.
fn is_free(pv: &PersistentVolume) -> bool {
    matches!(
        pv.status.as_ref().and_then(|s| s.phase.as_deref()),
        None | Some("Available" | "Pending")
    )
}

/// Upstream's `findBestMatchForClaim` / `findMatchingVolume`: the volume for `pvc` among
/// `volumes` (those `usable` admits).
///
/// - A volume pre-bound to the claim (`claimRef` naming it) wins outright, unless its node
///   affinity rejects `node`; then nothing matches.
/// - Without a node (the PV controller's pass) and `delay_binding` (a `WaitForFirstConsumer`
///   class), only pre-bound volumes are considered: the scheduler picks the rest.
/// - Otherwise: a free volume (no `claimRef`, not being deleted) of the same volume mode and
///   class, whose labels match the claim's selector, whose node affinity admits `node`,
///   offering the requested access modes and at least the requested capacity. Among those,
///   the one with the fewest access modes, then the smallest capacity (upstream's index
///   walks access-mode sets from the smallest).
pub fn find_matching_volume<'a, I>(
    pvc: &PersistentVolumeClaim,
    volumes: I,
    node: Option<&Node>,
    delay_binding: bool,
    mut usable: impl FnMut(&PersistentVolume) -> bool,
) -> Option<&'a PersistentVolume>
where
    I: IntoIterator<Item = &'a PersistentVolume>,
{
    let requested = storage_request(pvc);
    let class = claim_class(pvc);
    let mut best: Option<(&PersistentVolume, (usize, i64))> = None;
    for pv in volumes {
        if !usable(pv) || volume_mode_mismatch(pvc, pv) || pv.metadata.deletion_timestamp.is_some()
        {
            continue;
        }
        let node_ok = node.is_none_or(|n| pv_matches_node(pv, n));
        if is_bound_to_claim(pv, pvc) {
            return node_ok.then_some(pv);
        }
        if node.is_none() && delay_binding {
            continue;
        }
        let claimed = pv.spec.as_ref().is_some_and(|s| s.claim_ref.is_some());
        if claimed || !is_free(pv) || !selector_matches(pvc, pv) || volume_class(pv) != class {
            continue;
        }
        if !node_ok || !access_modes_satisfied(pvc, pv) {
            continue;
        }
        let capacity = pv_capacity(pv);
        if capacity < requested {
            continue;
        }
        let rank = (pv_modes(pv).len(), capacity);
        if best.is_none_or(|(_, r)| rank < r) {
            best = Some((pv, rank));
        }
    }
    best.map(|(pv, _)| pv)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        NodeSelectorRequirement, ObjectReference, PersistentVolumeClaimSpec, PersistentVolumeSpec,
        PersistentVolumeStatus, VolumeNodeAffinity, VolumeResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity as Q;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    fn res(size: &str) -> BTreeMap<String, Q> {
        BTreeMap::from([("storage".to_owned(), Q(size.into()))])
    }

    fn pvc(size: &str, modes: &[&str]) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("c".into()),
                namespace: Some("ns".into()),
                uid: Some("uid-c".into()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(modes.iter().map(|m| (*m).to_owned()).collect()),
                resources: Some(VolumeResourceRequirements {
                    requests: Some(res(size)),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn pv(name: &str, size: &str, modes: &[&str]) -> PersistentVolume {
        PersistentVolume {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeSpec {
                access_modes: Some(modes.iter().map(|m| (*m).to_owned()).collect()),
                capacity: Some(res(size)),
                ..Default::default()
            }),
            status: Some(PersistentVolumeStatus {
                phase: Some("Available".into()),
                ..Default::default()
            }),
        }
    }

    fn with(mut pv: PersistentVolume, f: impl FnOnce(&mut PersistentVolume)) -> PersistentVolume {
        f(&mut pv);
        pv
    }

    fn claim_ref(ns: &str, name: &str, uid: &str) -> ObjectReference {
        ObjectReference {
            namespace: Some(ns.into()),
            name: Some(name.into()),
            uid: (!uid.is_empty()).then(|| uid.to_owned()),
            ..Default::default()
        }
    }

    fn node(zone: &str) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(format!("n-{zone}")),
                labels: Some(BTreeMap::from([("zone".to_owned(), zone.to_owned())])),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn zone_affinity(zone: &str) -> VolumeNodeAffinity {
        VolumeNodeAffinity {
            required: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_expressions: Some(vec![NodeSelectorRequirement {
                        key: "zone".into(),
                        operator: "In".into(),
                        values: Some(vec![zone.into()]),
                    }]),
                    match_fields: None,
                }],
            }),
        }
    }

    const RWO: &str = "ReadWriteOnce";
    const RWX: &str = "ReadWriteMany";
    const ROX: &str = "ReadOnlyMany";

    #[test]
    fn matching() {
        struct Case {
            name: &'static str,
            claim: PersistentVolumeClaim,
            volumes: Vec<PersistentVolume>,
            node: Option<Node>,
            delay: bool,
            want: Option<&'static str>,
        }
        let selector = |mut c: PersistentVolumeClaim| {
            c.spec.as_mut().unwrap().selector = Some(ApiLabelSelector {
                match_labels: Some(BTreeMap::from([("tier".into(), "gold".into())])),
                ..Default::default()
            });
            c
        };
        let class = |mut c: PersistentVolumeClaim, name: &str| {
            c.spec.as_mut().unwrap().storage_class_name = Some(name.into());
            c
        };
        let cases = vec![
            Case {
                name: "smallest that fits",
                claim: pvc("1Gi", &[RWO]),
                volumes: vec![
                    pv("big", "10Gi", &[RWO]),
                    pv("small", "2Gi", &[RWO]),
                    pv("tiny", "500Mi", &[RWO]),
                ],
                node: None,
                delay: false,
                want: Some("small"),
            },
            Case {
                name: "exact size",
                claim: pvc("1Gi", &[RWO]),
                volumes: vec![pv("a", "1Gi", &[RWO]), pv("b", "2Gi", &[RWO])],
                node: None,
                delay: false,
                want: Some("a"),
            },
            Case {
                name: "too small",
                claim: pvc("5Gi", &[RWO]),
                volumes: vec![pv("a", "1Gi", &[RWO])],
                node: None,
                delay: false,
                want: None,
            },
            Case {
                name: "access modes must be a superset",
                claim: pvc("1Gi", &[RWO, ROX]),
                volumes: vec![pv("rwo", "1Gi", &[RWO]), pv("both", "5Gi", &[RWO, ROX])],
                node: None,
                delay: false,
                want: Some("both"),
            },
            Case {
                name: "fewest access modes before smallest",
                claim: pvc("1Gi", &[RWO]),
                volumes: vec![
                    pv("many", "1Gi", &[RWO, RWX, ROX]),
                    pv("one", "3Gi", &[RWO]),
                ],
                node: None,
                delay: false,
                want: Some("one"),
            },
            Case {
                name: "volume mode",
                claim: {
                    let mut c = pvc("1Gi", &[RWO]);
                    c.spec.as_mut().unwrap().volume_mode = Some("Block".into());
                    c
                },
                volumes: vec![
                    pv("fs", "1Gi", &[RWO]),
                    with(pv("block", "2Gi", &[RWO]), |p| {
                        p.spec.as_mut().unwrap().volume_mode = Some("Block".into())
                    }),
                ],
                node: None,
                delay: false,
                want: Some("block"),
            },
            Case {
                name: "empty class matches only empty class",
                claim: pvc("1Gi", &[RWO]),
                volumes: vec![with(pv("fast", "1Gi", &[RWO]), |p| {
                    p.spec.as_mut().unwrap().storage_class_name = Some("fast".into())
                })],
                node: None,
                delay: false,
                want: None,
            },
            Case {
                name: "class by name",
                claim: class(pvc("1Gi", &[RWO]), "fast"),
                volumes: vec![
                    pv("none", "1Gi", &[RWO]),
                    with(pv("fast", "2Gi", &[RWO]), |p| {
                        p.spec.as_mut().unwrap().storage_class_name = Some("fast".into())
                    }),
                ],
                node: None,
                delay: false,
                want: Some("fast"),
            },
            Case {
                name: "label selector",
                claim: selector(pvc("1Gi", &[RWO])),
                volumes: vec![
                    pv("plain", "1Gi", &[RWO]),
                    with(pv("gold", "4Gi", &[RWO]), |p| {
                        p.metadata.labels = Some(BTreeMap::from([("tier".into(), "gold".into())]))
                    }),
                ],
                node: None,
                delay: false,
                want: Some("gold"),
            },
            Case {
                name: "pre-bound to this claim wins over a smaller free one",
                claim: pvc("1Gi", &[RWO]),
                volumes: vec![
                    pv("free", "1Gi", &[RWO]),
                    with(pv("mine", "8Gi", &[RWO]), |p| {
                        p.spec.as_mut().unwrap().claim_ref = Some(claim_ref("ns", "c", ""))
                    }),
                ],
                node: None,
                delay: false,
                want: Some("mine"),
            },
            Case {
                name: "pre-bound to another claim or uid is skipped",
                claim: pvc("1Gi", &[RWO]),
                volumes: vec![
                    with(pv("other", "1Gi", &[RWO]), |p| {
                        p.spec.as_mut().unwrap().claim_ref = Some(claim_ref("ns", "d", ""))
                    }),
                    with(pv("old-uid", "1Gi", &[RWO]), |p| {
                        p.spec.as_mut().unwrap().claim_ref = Some(claim_ref("ns", "c", "uid-old"))
                    }),
                ],
                node: None,
                delay: false,
                want: None,
            },
            Case {
                name: "released and deleting volumes are skipped",
                claim: pvc("1Gi", &[RWO]),
                volumes: vec![
                    with(pv("released", "1Gi", &[RWO]), |p| {
                        p.status.as_mut().unwrap().phase = Some("Released".into())
                    }),
                    with(pv("deleting", "1Gi", &[RWO]), |p| {
                        p.metadata.deletion_timestamp = Some(Time(Default::default()))
                    }),
                ],
                node: None,
                delay: false,
                want: None,
            },
            Case {
                name: "delayed binding without a node: only pre-bound",
                claim: pvc("1Gi", &[RWO]),
                volumes: vec![pv("free", "1Gi", &[RWO])],
                node: None,
                delay: true,
                want: None,
            },
            Case {
                name: "with a node: node affinity",
                claim: pvc("1Gi", &[RWO]),
                volumes: vec![
                    with(pv("a", "1Gi", &[RWO]), |p| {
                        p.spec.as_mut().unwrap().node_affinity = Some(zone_affinity("a"))
                    }),
                    with(pv("b", "2Gi", &[RWO]), |p| {
                        p.spec.as_mut().unwrap().node_affinity = Some(zone_affinity("b"))
                    }),
                ],
                node: Some(node("b")),
                delay: true,
                want: Some("b"),
            },
            Case {
                name: "pre-bound volume on another node: nothing",
                claim: pvc("1Gi", &[RWO]),
                volumes: vec![
                    pv("free", "1Gi", &[RWO]),
                    with(pv("mine", "1Gi", &[RWO]), |p| {
                        let s = p.spec.as_mut().unwrap();
                        s.claim_ref = Some(claim_ref("ns", "c", "uid-c"));
                        s.node_affinity = Some(zone_affinity("a"));
                    }),
                ],
                node: Some(node("b")),
                delay: true,
                want: None,
            },
        ];
        for c in cases {
            let got =
                find_matching_volume(&c.claim, &c.volumes, c.node.as_ref(), c.delay, |_| true)
                    .and_then(|p| p.metadata.name.as_deref());
            assert_eq!(got, c.want, "{}", c.name);
        }
    }

    #[test]
    fn usable_filter_excludes_volumes() {
        let claim = pvc("1Gi", &[RWO]);
        let volumes = vec![pv("a", "1Gi", &[RWO]), pv("b", "2Gi", &[RWO])];
        let got = find_matching_volume(&claim, &volumes, None, false, |p| {
            p.metadata.name.as_deref() != Some("a")
        });
        assert_eq!(got.and_then(|p| p.metadata.name.as_deref()), Some("b"));
    }

    #[test]
    fn requested_volume_checks() {
        let claim = pvc("2Gi", &[RWO]);
        let e = check_volume_satisfies_claim(&pv("a", "1Gi", &[RWO]), &claim).unwrap_err();
        assert_eq!(e, VolumeMismatch::TooSmall);
        assert_eq!(e.to_string(), "requested PV is too small");
        let e = check_volume_satisfies_claim(&pv("a", "2Gi", &[ROX]), &claim).unwrap_err();
        assert_eq!(e, VolumeMismatch::AccessMode);
        assert_eq!(e.to_string(), "incompatible accessMode");
        let classed = with(pv("a", "2Gi", &[RWO]), |p| {
            p.spec.as_mut().unwrap().storage_class_name = Some("x".into())
        });
        let e = check_volume_satisfies_claim(&classed, &claim).unwrap_err();
        assert_eq!(e, VolumeMismatch::StorageClass);
        assert_eq!(e.to_string(), "storageClassName does not match");
        assert!(check_volume_satisfies_claim(&pv("a", "3Gi", &[RWO, ROX]), &claim).is_ok());
        let deleted = with(pv("a", "3Gi", &[RWO]), |p| {
            p.metadata.deletion_timestamp =
                Some(serde_json::from_value(serde_json::json!("2024-01-01T00:00:00Z")).unwrap())
        });
        let e = check_volume_satisfies_claim(&deleted, &claim).unwrap_err();
        assert_eq!(e, VolumeMismatch::MarkedForDeletion { name: "a".into() });
        assert_eq!(e.to_string(), "the volume is marked for deletion \"a\"");
        assert_eq!(
            VolumeMismatch::VolumeMode.to_string(),
            "incompatible volumeMode"
        );
    }

    #[test]
    fn classes_from_annotations() {
        let mut c = pvc("1Gi", &[RWO]);
        assert!(!claim_has_class(&c));
        assert_eq!(claim_class(&c), "");
        c.spec.as_mut().unwrap().storage_class_name = Some(String::new());
        assert!(claim_has_class(&c));
        c.metadata.annotations = Some(BTreeMap::from([(
            ANN_BETA_STORAGE_CLASS.to_owned(),
            "old".to_owned(),
        )]));
        assert_eq!(claim_class(&c), "old");
        assert_eq!(storage_request(&c), 1 << 30);
        assert_eq!(storage_limit(&c), None);
    }
}

/// The name of the VolumeAttachment of CSI volume `handle` of `driver` on `node`, as
/// upstream's attach/detach controller and kubelet compute it:
/// `csi-<hex sha256(handle + driver + node)>`.
pub fn attachment_name(handle: &str, driver: &str, node: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("{handle}{driver}{node}").as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("csi-{hex}")
}

#[cfg(test)]
mod attachment_tests {
    #[test]
    fn attachment_names_are_upstreams() {
        // sha256("vol-1" + "d.csi" + "node-a")
        let n = super::attachment_name("vol-1", "d.csi", "node-a");
        assert_eq!(
            n,
            "csi-be34ea3dc8f0651abefb4eedeef44e3f2511a48953534c1105ff55842e3a251d"
        );
        assert_ne!(n, super::attachment_name("vol-1", "d.csi", "node-b"));
    }
}
