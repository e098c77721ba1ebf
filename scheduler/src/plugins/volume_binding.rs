//! VolumeBinding: a pod's PVCs must be satisfiable on the node. Bound claims: the PV's node
//! affinity must match. `WaitForFirstConsumer` claims: an available PV that fits (class,
//! size, access modes, volume mode, selector, node affinity) — or, failing that, dynamic
//! provisioning allowed by the StorageClass (not `kubernetes.io/no-provisioner`, node in
//! `allowedTopologies`). Unbound claims of `Immediate` classes make the pod unschedulable.
//!
//! Reserve remembers the choice (and keeps the chosen PVs from other pods); PreBind writes
//! it: a static PV gets the claim in `spec.claimRef`, a claim to provision gets the
//! `volume.kubernetes.io/selected-node` annotation. PreBind then waits until the lister
//! shows every claim bound (up to `bindTimeoutSeconds`), as upstream does.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k1s_api::client::{Client, Patch, ResourceRef, WriteParams};
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use serde_json::json;

use crate::framework::interface::*;
use crate::framework::listers::VolumeLister;
use crate::framework::{CycleState, FrameworkError, NodeInfo, PodInfo, Snapshot, Status, helpers};

use crate::plugin_names as names;

pub const ERR_REASON_BIND_CONFLICT: &str =
    "node(s) didn't find available persistent volumes to bind";
pub const ERR_REASON_NODE_CONFLICT: &str = "node(s) had volume node affinity conflict";
pub const ERR_REASON_PV_NOT_EXIST: &str =
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";
pub const ERR_UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";
pub const SELECTED_NODE_ANNOTATION: &str = "volume.kubernetes.io/selected-node";
pub const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";

const STATE_KEY: &str = "PreFilterVolumeBinding";

/// The claims a pod uses (`namespace`, claim name): PVC volumes and generic ephemeral
/// volumes (`<pod>-<volume>`).
pub fn pod_claim_names(pod: &Pod) -> Vec<String> {
    let pod_name = helpers::name(pod);
    pod.spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|v| {
            v.persistent_volume_claim
                .as_ref()
                .map(|c| c.claim_name.clone())
                .or_else(|| {
                    v.ephemeral
                        .as_ref()
                        .map(|_| format!("{pod_name}-{}", v.name))
                })
        })
        .collect()
}

/// Whether a claim waits for its first consumer.
pub fn is_delayed(pvc: &PersistentVolumeClaim, lister: &dyn VolumeLister) -> bool {
    class_name(pvc)
        .and_then(|c| lister.storage_class(&c))
        .is_some_and(|sc| sc.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer"))
}

pub fn class_name(pvc: &PersistentVolumeClaim) -> Option<String> {
    pvc.spec
        .as_ref()
        .and_then(|s| s.storage_class_name.clone())
        .filter(|s| !s.is_empty())
}

pub fn bound_volume(pvc: &PersistentVolumeClaim) -> Option<&str> {
    pvc.spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .filter(|s| !s.is_empty())
}

pub use k1s_api::volume::pv_matches_node;

/// Whether the StorageClass's `allowedTopologies` admit the node (none: every node).
pub fn class_allows_node(sc: &StorageClass, node: &Node) -> bool {
    let Some(terms) = sc.allowed_topologies.as_ref().filter(|t| !t.is_empty()) else {
        return true;
    };
    let labels = helpers::node_labels(node);
    terms.iter().any(|t| {
        t.match_label_expressions.iter().flatten().all(|r| {
            labels
                .get(&r.key)
                .is_some_and(|v| r.values.iter().any(|x| x == v))
        })
    })
}

#[derive(Debug, Clone, Default)]
struct PodVolumes {
    /// (claim, PV) pairs to bind statically.
    static_bindings: Vec<(Arc<PersistentVolumeClaim>, Arc<PersistentVolume>)>,
    /// Claims to provision on the node.
    provision: Vec<Arc<PersistentVolumeClaim>>,
}

#[derive(Debug, Clone, Default)]
struct State {
    bound: Vec<(Arc<PersistentVolumeClaim>, Option<Arc<PersistentVolume>>)>,
    delayed: Vec<Arc<PersistentVolumeClaim>>,
    /// Decisions per node from Filter (shared so Filter, which reads the state, can fill it).
    by_node: Arc<Mutex<HashMap<String, PodVolumes>>>,
    /// The node Reserve chose, with its decisions.
    reserved: Option<PodVolumes>,
}

/// `VolumeBindingArgs`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Args {
    pub bind_timeout_seconds: u64,
}

impl Default for Args {
    fn default() -> Self {
        Self {
            bind_timeout_seconds: 600,
        }
    }
}

pub struct VolumeBinding {
    client: Arc<dyn Client>,
    lister: Arc<dyn VolumeLister>,
    bind_timeout: Duration,
    /// PVs reserved for pods whose binding is in progress: PV name → claim key.
    assumed: Mutex<HashMap<String, String>>,
}

impl VolumeBinding {
    pub fn new(handle: &Handle, args: Option<&serde_json::Value>) -> Result<Self, FrameworkError> {
        let args: Args = match args {
            Some(v) if !v.is_null() => {
                serde_json::from_value(v.clone()).map_err(|e| FrameworkError::InvalidArgs {
                    plugin: names::VOLUME_BINDING.into(),
                    message: e.to_string(),
                })?
            }
            _ => Args::default(),
        };
        Ok(Self {
            client: handle.client.clone(),
            lister: handle.volumes.clone(),
            bind_timeout: Duration::from_secs(args.bind_timeout_seconds),
            assumed: Mutex::new(HashMap::new()),
        })
    }

    fn assumed(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.assumed.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn claim_key(pvc: &PersistentVolumeClaim) -> String {
        format!(
            "{}/{}",
            pvc.metadata.namespace.as_deref().unwrap_or(""),
            pvc.metadata.name.as_deref().unwrap_or("")
        )
    }

    /// Finds volumes for the delayed claims on `node`; `Err` carries the reasons.
    fn find_for_node(&self, st: &State, node: &Node) -> Result<PodVolumes, Vec<&'static str>> {
        let mut reasons = Vec::new();
        for (_, pv) in &st.bound {
            match pv {
                None => reasons.push(ERR_REASON_PV_NOT_EXIST),
                Some(pv) if !pv_matches_node(pv, node) => reasons.push(ERR_REASON_NODE_CONFLICT),
                _ => {}
            }
        }
        let mut out = PodVolumes::default();
        if !st.delayed.is_empty() {
            let assumed = self.assumed().clone();
            let pvs = self.lister.pvs();
            let mut taken: HashSet<String> = HashSet::new();
            let mut bind_ok = true;
            for pvc in &st.delayed {
                let key = Self::claim_key(pvc);
                // The smallest fitting volume, as upstream (shared with the PV controller).
                let found = k1s_api::volume::find_matching_volume(
                    pvc,
                    pvs.iter().map(|p| p.as_ref()),
                    Some(node),
                    true,
                    |pv| {
                        let name = pv.metadata.name.as_deref().unwrap_or_default();
                        !taken.contains(name) && assumed.get(name).is_none_or(|c| *c == key)
                    },
                )
                .and_then(|pv| pvs.iter().find(|p| std::ptr::eq(p.as_ref(), pv)).cloned());
                if let Some(pv) = found {
                    taken.insert(pv.metadata.name.clone().unwrap_or_default());
                    out.static_bindings.push((pvc.clone(), pv.clone()));
                    continue;
                }
                let class = class_name(pvc).and_then(|c| self.lister.storage_class(&c));
                match class {
                    Some(sc)
                        if sc.provisioner != NO_PROVISIONER && class_allows_node(&sc, node) =>
                    {
                        out.provision.push(pvc.clone());
                    }
                    _ => bind_ok = false,
                }
            }
            if !bind_ok {
                reasons.push(ERR_REASON_BIND_CONFLICT);
            }
        }
        if reasons.is_empty() {
            Ok(out)
        } else {
            Err(reasons)
        }
    }

    async fn wait_bound(&self, claims: &[Arc<PersistentVolumeClaim>]) -> Status {
        let deadline = tokio::time::Instant::now() + self.bind_timeout;
        loop {
            let all = claims.iter().all(|c| {
                self.lister
                    .pvc(
                        c.metadata.namespace.as_deref().unwrap_or(""),
                        c.metadata.name.as_deref().unwrap_or(""),
                    )
                    .is_some_and(|p| bound_volume(&p).is_some())
            });
            if all {
                return Status::success();
            }
            if tokio::time::Instant::now() >= deadline {
                return Status::error(format!(
                    "binding volumes: timed out waiting for the condition after {:?}",
                    self.bind_timeout
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Plugin for VolumeBinding {
    fn name(&self) -> &'static str {
        names::VOLUME_BINDING
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        events(&[
            (EventResource::Node, &[ActionType::Add, ActionType::Update]),
            (
                EventResource::PersistentVolume,
                &[ActionType::Add, ActionType::Update],
            ),
            (
                EventResource::PersistentVolumeClaim,
                &[ActionType::Add, ActionType::Update],
            ),
            (
                EventResource::StorageClass,
                &[ActionType::Add, ActionType::Update],
            ),
            (
                EventResource::CsiNode,
                &[ActionType::Add, ActionType::Update],
            ),
        ])
    }
    fn as_pre_filter(self: Arc<Self>) -> Option<Arc<dyn PreFilterPlugin>> {
        Some(self)
    }
    fn as_filter(self: Arc<Self>) -> Option<Arc<dyn FilterPlugin>> {
        Some(self)
    }
    fn as_reserve(self: Arc<Self>) -> Option<Arc<dyn ReservePlugin>> {
        Some(self)
    }
    fn as_pre_bind(self: Arc<Self>) -> Option<Arc<dyn PreBindPlugin>> {
        Some(self)
    }
}

impl PreFilterPlugin for VolumeBinding {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, _: &Snapshot) -> Status {
        let claims = pod_claim_names(&pod.pod);
        if claims.is_empty() {
            return Status::skip();
        }
        let ns = helpers::namespace(&pod.pod);
        let mut st = State::default();
        for c in claims {
            let Some(pvc) = self.lister.pvc(ns, &c) else {
                return Status::unresolvable(format!("persistentvolumeclaim \"{c}\" not found"));
            };
            if pvc.metadata.deletion_timestamp.is_some() {
                return Status::unresolvable(format!(
                    "persistentvolumeclaim \"{c}\" is being deleted"
                ));
            }
            if let Some(v) = bound_volume(&pvc) {
                let pv = self.lister.pv(v);
                st.bound.push((pvc, pv));
            } else if is_delayed(&pvc, self.lister.as_ref()) {
                st.delayed.push(pvc);
            } else {
                return Status::unresolvable(ERR_UNBOUND_IMMEDIATE);
            }
        }
        state.write(STATE_KEY, st);
        Status::success()
    }
}

impl FilterPlugin for VolumeBinding {
    fn filter(&self, state: &CycleState, _: &PodInfo, node: &NodeInfo) -> Status {
        let Some(st) = state.read::<State>(STATE_KEY) else {
            return Status::error("reading PreFilterVolumeBinding state");
        };
        let Some(n) = node.node.as_deref() else {
            return Status::error("node not found");
        };
        match self.find_for_node(st, n) {
            Ok(pv) => {
                st.by_node
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(node.name().to_owned(), pv);
                Status::success()
            }
            Err(reasons) => Status::with_reasons(
                crate::framework::Code::UnschedulableAndUnresolvable,
                reasons.into_iter().map(str::to_owned).collect(),
            ),
        }
    }
}

impl ReservePlugin for VolumeBinding {
    fn reserve(&self, state: &mut CycleState, _: &PodInfo, node: &str) -> Status {
        let Some(st) = state.read_mut::<State>(STATE_KEY) else {
            return Status::success();
        };
        let chosen = st
            .by_node
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(node)
            .cloned()
            .unwrap_or_default();
        let mut assumed = self.assumed();
        for (pvc, pv) in &chosen.static_bindings {
            let name = pv.metadata.name.clone().unwrap_or_default();
            let key = Self::claim_key(pvc);
            if assumed.get(&name).is_some_and(|c| *c != key) {
                return Status::unschedulable(ERR_REASON_BIND_CONFLICT);
            }
            assumed.insert(name, key);
        }
        st.reserved = Some(chosen);
        Status::success()
    }

    fn unreserve(&self, state: &mut CycleState, _: &PodInfo, _: &str) {
        if let Some(st) = state.read_mut::<State>(STATE_KEY)
            && let Some(r) = st.reserved.take()
        {
            let mut assumed = self.assumed();
            for (_, pv) in &r.static_bindings {
                assumed.remove(pv.metadata.name.as_deref().unwrap_or(""));
            }
        }
    }
}

#[async_trait::async_trait]
impl PreBindPlugin for VolumeBinding {
    async fn pre_bind(&self, state: &CycleState, _: &PodInfo, node: &str) -> Status {
        let Some(st) = state.read::<State>(STATE_KEY) else {
            return Status::success();
        };
        let Some(r) = st.reserved.as_ref() else {
            return Status::success();
        };
        if r.static_bindings.is_empty() && r.provision.is_empty() {
            return Status::success();
        }
        for (pvc, pv) in &r.static_bindings {
            let body = json!({"spec": {"claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": pvc.metadata.namespace,
                "name": pvc.metadata.name,
                "uid": pvc.metadata.uid,
                "resourceVersion": pvc.metadata.resource_version,
            }}});
            let res = ResourceRef::new("", "v1", "persistentvolumes", None);
            let name = pv.metadata.name.as_deref().unwrap_or("");
            if let Err(e) = self
                .client
                .patch(
                    &res,
                    name,
                    &Patch::Merge(body),
                    None,
                    &WriteParams::default(),
                )
                .await
            {
                return Status::error(format!("binding volumes: {e}"));
            }
        }
        for pvc in &r.provision {
            let res = ResourceRef::new(
                "",
                "v1",
                "persistentvolumeclaims",
                pvc.metadata.namespace.as_deref(),
            );
            let body = json!({"metadata": {"annotations": {SELECTED_NODE_ANNOTATION: node}}});
            if let Err(e) = self
                .client
                .patch(
                    &res,
                    pvc.metadata.name.as_deref().unwrap_or(""),
                    &Patch::Merge(body),
                    None,
                    &WriteParams::default(),
                )
                .await
            {
                return Status::error(format!("binding volumes: {e}"));
            }
        }
        let claims: Vec<Arc<PersistentVolumeClaim>> = r
            .static_bindings
            .iter()
            .map(|(c, _)| c.clone())
            .chain(r.provision.iter().cloned())
            .collect();
        let s = self.wait_bound(&claims).await;
        let mut assumed = self.assumed();
        for (_, pv) in &r.static_bindings {
            assumed.remove(pv.metadata.name.as_deref().unwrap_or(""));
        }
        s
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::framework::listers::StaticLister;
    use crate::testing::{FakeClient, NodeBuilder, PodBuilder, node_info, res};
    use k8s_openapi::api::core::v1::{
        NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PersistentVolumeClaimSpec,
        PersistentVolumeClaimVolumeSource, PersistentVolumeSpec, TopologySelectorLabelRequirement,
        TopologySelectorTerm, Volume, VolumeNodeAffinity, VolumeResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    pub fn pvc(name: &str, class: &str, size: &str, volume: &str) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                uid: Some(format!("uid-{name}")),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                storage_class_name: Some(class.into()),
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                resources: Some(VolumeResourceRequirements {
                    requests: Some(res(&[("storage", size)])),
                    ..Default::default()
                }),
                volume_name: (!volume.is_empty()).then(|| volume.to_owned()),
                ..Default::default()
            }),
            status: None,
        }
    }

    pub fn pv(name: &str, class: &str, size: &str, zone: Option<&str>) -> PersistentVolume {
        PersistentVolume {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeSpec {
                storage_class_name: Some(class.into()),
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                capacity: Some(res(&[("storage", size)])),
                node_affinity: zone.map(|z| VolumeNodeAffinity {
                    required: Some(NodeSelector {
                        node_selector_terms: vec![NodeSelectorTerm {
                            match_expressions: Some(vec![NodeSelectorRequirement {
                                key: "zone".into(),
                                operator: "In".into(),
                                values: Some(vec![z.into()]),
                            }]),
                            match_fields: None,
                        }],
                    }),
                }),
                ..Default::default()
            }),
            status: None,
        }
    }

    pub fn class(name: &str, mode: &str, provisioner: &str, zones: &[&str]) -> StorageClass {
        StorageClass {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            provisioner: provisioner.into(),
            volume_binding_mode: Some(mode.into()),
            allowed_topologies: (!zones.is_empty()).then(|| {
                vec![TopologySelectorTerm {
                    match_label_expressions: Some(vec![TopologySelectorLabelRequirement {
                        key: "zone".into(),
                        values: zones.iter().map(|z| (*z).to_owned()).collect(),
                    }]),
                }]
            }),
            ..Default::default()
        }
    }

    pub fn pod_with_claims(claims: &[&str]) -> PodInfo {
        PodBuilder::new("p")
            .spec_with(|s| {
                s.volumes = Some(
                    claims
                        .iter()
                        .map(|c| Volume {
                            name: format!("v-{c}"),
                            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                                claim_name: (*c).into(),
                                read_only: None,
                            }),
                            ..Default::default()
                        })
                        .collect(),
                )
            })
            .info()
    }

    fn plugin(lister: Arc<StaticLister>, client: Arc<FakeClient>) -> VolumeBinding {
        let h = Handle {
            client,
            volumes: lister.clone(),
            cluster: lister,
        };
        VolumeBinding::new(&h, Some(&json!({"bindTimeoutSeconds": 1}))).unwrap()
    }

    fn zone_node(name: &str, zone: &str) -> NodeInfo {
        node_info(
            NodeBuilder::new(name).labels(&[("zone", zone)]).build(),
            vec![],
        )
    }

    #[test]
    fn volume_binding_filter() {
        struct Case {
            name: &'static str,
            pvcs: Vec<PersistentVolumeClaim>,
            pvs: Vec<PersistentVolume>,
            classes: Vec<StorageClass>,
            claims: Vec<&'static str>,
            pre_filter: Code,
            /// zone a, zone b
            want: [Code; 2],
        }
        use Code::*;
        let wffc = || class("local", "WaitForFirstConsumer", NO_PROVISIONER, &[]);
        let cases = vec![
            Case {
                name: "no claims",
                pvcs: vec![],
                pvs: vec![],
                classes: vec![],
                claims: vec![],
                pre_filter: Skip,
                want: [Success, Success],
            },
            Case {
                name: "missing claim",
                pvcs: vec![],
                pvs: vec![],
                classes: vec![],
                claims: vec!["c"],
                pre_filter: UnschedulableAndUnresolvable,
                want: [Success, Success],
            },
            Case {
                name: "bound PV with zone affinity",
                pvcs: vec![pvc("c", "local", "1Gi", "pv-a")],
                pvs: vec![pv("pv-a", "local", "1Gi", Some("a"))],
                classes: vec![wffc()],
                claims: vec!["c"],
                pre_filter: Success,
                want: [Success, UnschedulableAndUnresolvable],
            },
            Case {
                name: "bound to missing PV",
                pvcs: vec![pvc("c", "local", "1Gi", "gone")],
                pvs: vec![],
                classes: vec![wffc()],
                claims: vec!["c"],
                pre_filter: Success,
                want: [UnschedulableAndUnresolvable, UnschedulableAndUnresolvable],
            },
            Case {
                name: "unbound immediate claim",
                pvcs: vec![pvc("c", "fast", "1Gi", "")],
                pvs: vec![],
                classes: vec![class("fast", "Immediate", "csi.example.com", &[])],
                claims: vec!["c"],
                pre_filter: UnschedulableAndUnresolvable,
                want: [Success, Success],
            },
            Case {
                name: "WFFC matches an existing PV in zone b",
                pvcs: vec![pvc("c", "local", "1Gi", "")],
                pvs: vec![pv("pv-b", "local", "2Gi", Some("b"))],
                classes: vec![wffc()],
                claims: vec!["c"],
                pre_filter: Success,
                want: [UnschedulableAndUnresolvable, Success],
            },
            Case {
                name: "WFFC PV too small",
                pvcs: vec![pvc("c", "local", "5Gi", "")],
                pvs: vec![pv("pv-b", "local", "2Gi", Some("b"))],
                classes: vec![wffc()],
                claims: vec!["c"],
                pre_filter: Success,
                want: [UnschedulableAndUnresolvable, UnschedulableAndUnresolvable],
            },
            Case {
                name: "WFFC dynamic provisioning limited by allowedTopologies",
                pvcs: vec![pvc("c", "csi", "1Gi", "")],
                pvs: vec![],
                classes: vec![class(
                    "csi",
                    "WaitForFirstConsumer",
                    "csi.example.com",
                    &["a"],
                )],
                claims: vec!["c"],
                pre_filter: Success,
                want: [Success, UnschedulableAndUnresolvable],
            },
        ];
        for c in cases {
            let lister = Arc::new(StaticLister::new());
            c.pvcs.into_iter().for_each(|p| lister.upsert_pvc(p));
            c.pvs.into_iter().for_each(|p| lister.upsert_pv(p));
            c.classes
                .into_iter()
                .for_each(|p| lister.upsert_storage_class(p));
            let p = plugin(lister, FakeClient::new());
            let pod = pod_with_claims(&c.claims);
            let mut st = CycleState::new();
            let s = p.pre_filter(&mut st, &pod, &Snapshot::default());
            assert_eq!(s.code(), c.pre_filter, "{}: {s}", c.name);
            if !s.is_success() {
                continue;
            }
            let got = [
                p.filter(&st, &pod, &zone_node("na", "a")).code(),
                p.filter(&st, &pod, &zone_node("nb", "b")).code(),
            ];
            assert_eq!(got, c.want, "{}", c.name);
        }
    }

    #[tokio::test]
    async fn volume_binding_reserve_and_prebind() {
        // Dynamic provisioning: PreBind annotates the claim with the selected node, then waits
        // for it to be bound.
        let lister = Arc::new(StaticLister::new());
        lister.upsert_pvc(pvc("c", "csi", "1Gi", ""));
        lister.upsert_storage_class(class("csi", "WaitForFirstConsumer", "csi.example.com", &[]));
        let client = FakeClient::new();
        let p = plugin(lister.clone(), client.clone());
        let pod = pod_with_claims(&["c"]);
        let mut st = CycleState::new();
        assert!(
            p.pre_filter(&mut st, &pod, &Snapshot::default())
                .is_success()
        );
        assert!(p.filter(&st, &pod, &zone_node("na", "a")).is_success());
        assert!(p.reserve(&mut st, &pod, "na").is_success());
        let l2 = lister.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(150)).await;
            l2.upsert_pvc(pvc("c", "csi", "1Gi", "pv-new"));
        });
        assert!(p.pre_bind(&st, &pod, "na").await.is_success());
        let calls = client.calls_to("/persistentvolumeclaims/c");
        assert_eq!(
            calls[0].body["metadata"]["annotations"][SELECTED_NODE_ANNOTATION],
            "na"
        );

        // Static binding: the PV gets the claimRef; two pods cannot reserve the same PV.
        let lister = Arc::new(StaticLister::new());
        lister.upsert_pvc(pvc("c", "local", "1Gi", ""));
        lister.upsert_pvc(pvc("d", "local", "1Gi", ""));
        lister.upsert_pv(pv("pv1", "local", "1Gi", None));
        lister.upsert_storage_class(class("local", "WaitForFirstConsumer", NO_PROVISIONER, &[]));
        let client = FakeClient::new();
        let p = plugin(lister.clone(), client.clone());
        let pod = pod_with_claims(&["c"]);
        let mut st = CycleState::new();
        p.pre_filter(&mut st, &pod, &Snapshot::default());
        assert!(p.filter(&st, &pod, &zone_node("na", "a")).is_success());
        assert!(p.reserve(&mut st, &pod, "na").is_success());
        let other = pod_with_claims(&["d"]);
        let mut st2 = CycleState::new();
        p.pre_filter(&mut st2, &other, &Snapshot::default());
        assert!(
            !p.filter(&st2, &other, &zone_node("na", "a")).is_success(),
            "pv1 is reserved"
        );
        let mut bound = pvc("c", "local", "1Gi", "pv1");
        bound.spec.as_mut().unwrap().volume_name = Some("pv1".into());
        lister.upsert_pvc(bound);
        assert!(p.pre_bind(&st, &pod, "na").await.is_success());
        let calls = client.calls_to("/persistentvolumes/pv1");
        assert_eq!(calls[0].body["spec"]["claimRef"]["name"], "c");
        // Unreserve frees a reservation.
        p.unreserve(&mut st, &pod, "na");
    }
}
