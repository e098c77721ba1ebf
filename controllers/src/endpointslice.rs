//! The EndpointSlice controller, as upstream's `pkg/controller/endpointslice`: for every Service
//! with a selector, EndpointSlices (`discovery.k8s.io/v1`) of the selected pods.
//!
//! - Slices carry `kubernetes.io/service-name`, `endpointslice.kubernetes.io/managed-by:
//!   endpointslice-controller.k8s.io` and the Service's labels, are named `<service>-<random>`
//!   and have the Service as controlling owner (the garbage collector removes them with it).
//! - Every non-terminal pod with an IP of the Service's family is an endpoint, terminating ones
//!   included, with conditions `serving` (pod Ready), `terminating` (deletionTimestamp) and
//!   `ready` (serving and not terminating, or always with `publishNotReadyAddresses`), its
//!   `nodeName`, `targetRef` and `hostname`.
//! - Endpoints are grouped by their resolved ports (one slice set per distinct port list), at
//!   most [`MAX_ENDPOINTS_PER_SLICE`] per slice; updates keep endpoints in the slice they are in
//!   and fill free room before creating slices. A Service with no endpoints keeps one empty
//!   placeholder slice.
//! - A write is not followed by another for the same Service until the cache has seen it
//!   (upstream's slice tracker), so a stale cache never creates duplicate slices.
//!
//! Only slices with its managed-by label are touched: the API server's `default/kubernetes`
//! slice and user-made ones are left alone.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k1s_api::client::{Client, ClientError, DeleteParams, ResourceRef, WriteParams};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::endpoints::{
    endpoint_labels, endpoint_ports, hostname_for, is_managed, is_pod_ready, pod_ip_for,
    pod_to_services, selected_pods, service_family, services, should_be_in_endpoints, target_ref,
};
use k1s_runtime::key::{self, ObjectKey};
use k1s_runtime::store::IndexFn;
use k1s_runtime::{Action, Controller, Reconcile, Store, watcher};

pub const LABEL_SERVICE_NAME: &str = "kubernetes.io/service-name";
pub const LABEL_MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
pub const MANAGED_BY: &str = "endpointslice-controller.k8s.io";
/// Upstream's `--max-endpoints-per-slice` default.
pub const MAX_ENDPOINTS_PER_SLICE: usize = 100;
/// How long a write may go unseen by the cache before it is given up on.
const TRACK_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum EndpointSliceError {
    #[error("endpointslices of {key}: {source}")]
    Api {
        key: String,
        #[source]
        source: ClientError,
    },
}

fn slices(ns: Option<&str>) -> ResourceRef {
    ResourceRef::new("discovery.k8s.io", "v1", "endpointslices", ns)
}

/// Index of managed slices by `namespace/service`.
fn service_index() -> (String, IndexFn) {
    (
        "service".into(),
        Arc::new(|s: &Value| {
            let labels = &s["metadata"]["labels"];
            if labels[LABEL_MANAGED_BY] != MANAGED_BY {
                return Vec::new();
            }
            labels[LABEL_SERVICE_NAME]
                .as_str()
                .map(|n| vec![format!("{}/{n}", key::namespace(s).unwrap_or(""))])
                .unwrap_or_default()
        }),
    )
}

fn slice_service(s: &Value) -> Vec<ObjectKey> {
    let labels = &s["metadata"]["labels"];
    if labels[LABEL_MANAGED_BY] != MANAGED_BY {
        return Vec::new();
    }
    labels[LABEL_SERVICE_NAME]
        .as_str()
        .map(|n| ObjectKey::new(key::namespace(s), n))
        .into_iter()
        .collect()
}

/// Runs the EndpointSlice controller until `cancel`.
pub async fn run(client: Arc<dyn Client>, cancel: CancellationToken) {
    run_with(client, MAX_ENDPOINTS_PER_SLICE, cancel).await;
}

/// [`run`] with `max_per_slice` endpoints per slice.
pub async fn run_with(client: Arc<dyn Client>, max_per_slice: usize, cancel: CancellationToken) {
    let mut ctrl = Controller::new(
        "endpointslice",
        client.clone(),
        services(),
        watcher::Config::default(),
    )
    .workers(3);
    let svc_store = ctrl.store();
    let slice_store = ctrl.watches(
        slices(None),
        watcher::Config::default(),
        vec![service_index()],
        Arc::new(|s: &Value, _| slice_service(s)),
    );
    let (svcs, sl) = (svc_store.clone(), slice_store.clone());
    let pod_store = ctrl.watches(
        ResourceRef::new("", "v1", "pods", None),
        watcher::Config::default(),
        Vec::new(),
        Arc::new(move |p: &Value, _| {
            let uid = key::uid(p).to_owned();
            pod_to_services(p, &svcs, |ns| {
                sl.list_namespace(ns)
                    .iter()
                    .filter(|s| {
                        s["endpoints"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .any(|e| e["targetRef"]["uid"].as_str() == Some(&uid))
                    })
                    .flat_map(|s| slice_service(s))
                    .collect()
            })
        }),
    );
    let reconciler = Arc::new(EndpointSlices {
        client,
        services: svc_store,
        slices: slice_store,
        pods: pod_store,
        max_per_slice: max_per_slice.max(1),
        tracker: Mutex::new(HashMap::new()),
    });
    ctrl.run(reconciler, cancel).await;
}

/// The writes to one Service's slices the cache must show before the next pass.
#[derive(Debug, Default)]
struct Written {
    /// Slice name → the resourceVersion written.
    present: HashMap<String, u64>,
    deleted: HashSet<String>,
    at: Option<Instant>,
}

struct EndpointSlices {
    client: Arc<dyn Client>,
    services: Store,
    slices: Store,
    pods: Store,
    max_per_slice: usize,
    tracker: Mutex<HashMap<ObjectKey, Written>>,
}

fn rv(o: &Value) -> u64 {
    key::resource_version(o)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The endpoint of a pod.
pub fn pod_endpoint(pod: &Value, svc: &Value, ip: String) -> Value {
    let serving = is_pod_ready(pod);
    let terminating = key::is_deleting(pod);
    let ready = svc["spec"]["publishNotReadyAddresses"] == true || (serving && !terminating);
    let mut ep = json!({"addresses": [ip],
        "conditions": {"ready": ready, "serving": serving, "terminating": terminating},
        "targetRef": target_ref(pod)});
    if let Some(n) = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
        ep["nodeName"] = json!(n);
    }
    if let Some(h) = hostname_for(pod, svc) {
        ep["hostname"] = json!(h);
    }
    ep
}

/// Desired endpoints grouped by their port list (canonical JSON → (ports, endpoints)).
pub fn desired(svc: &Value, pods: &[Arc<Value>]) -> HashMap<String, (Vec<Value>, Vec<Value>)> {
    let family = service_family(svc);
    let mut groups: HashMap<String, (Vec<Value>, Vec<Value>)> = HashMap::new();
    let mut sorted: Vec<&Arc<Value>> = pods.iter().collect();
    sorted.sort_by_key(|p| key::name(p).to_owned());
    for pod in sorted {
        if !should_be_in_endpoints(pod, true) {
            continue;
        }
        let Some(ip) = pod_ip_for(pod, family) else {
            continue;
        };
        let ports = endpoint_ports(pod, svc);
        let k = ports_key(&ports);
        groups
            .entry(k)
            .or_insert_with(|| (ports, Vec::new()))
            .1
            .push(pod_endpoint(pod, svc, ip));
    }
    groups
}

fn ports_key(ports: &[Value]) -> String {
    let mut p: Vec<String> = ports
        .iter()
        .map(|p| serde_json::to_string(p).unwrap_or_default())
        .collect();
    p.sort();
    p.join(",")
}

fn endpoint_id(ep: &Value) -> String {
    match ep["targetRef"]["uid"].as_str() {
        Some(u) if !u.is_empty() => u.to_owned(),
        _ => ep["addresses"][0].as_str().unwrap_or("").to_owned(),
    }
}

/// One planned change.
#[derive(Debug, PartialEq)]
pub enum Change {
    Create {
        ports: Vec<Value>,
        endpoints: Vec<Value>,
    },
    Update {
        name: String,
        endpoints: Vec<Value>,
    },
    /// Only labels or owner changed.
    Relabel {
        name: String,
    },
    Delete {
        name: String,
    },
}

/// The changes that take `existing` (this Service's managed slices) to `want`.
pub fn plan(
    existing: &[Arc<Value>],
    mut want: HashMap<String, (Vec<Value>, Vec<Value>)>,
    max: usize,
    stale_meta: impl Fn(&Value) -> bool,
) -> Vec<Change> {
    let mut changes = Vec::new();
    let total: usize = want.values().map(|(_, e)| e.len()).sum();
    if total == 0 {
        // Keep (or make) one empty placeholder slice.
        let mut kept = false;
        for s in existing {
            let empty = s["endpoints"].as_array().is_none_or(Vec::is_empty)
                && s["ports"].as_array().is_none_or(Vec::is_empty);
            if empty && !kept {
                kept = true;
                if stale_meta(s) {
                    changes.push(Change::Relabel {
                        name: key::name(s).into(),
                    });
                }
            } else {
                changes.push(Change::Delete {
                    name: key::name(s).into(),
                });
            }
        }
        if !kept {
            changes.push(Change::Create {
                ports: Vec::new(),
                endpoints: Vec::new(),
            });
        }
        return changes;
    }
    // Existing slices by port list.
    let mut by_ports: HashMap<String, Vec<&Arc<Value>>> = HashMap::new();
    for s in existing {
        let ports = s["ports"].as_array().cloned().unwrap_or_default();
        by_ports.entry(ports_key(&ports)).or_default().push(s);
    }
    for (pk, group) in by_ports {
        let Some((_, wanted)) = want.get_mut(&pk) else {
            changes.extend(group.iter().map(|s| Change::Delete {
                name: key::name(s).into(),
            }));
            continue;
        };
        let mut index: HashMap<String, Value> =
            wanted.drain(..).map(|e| (endpoint_id(&e), e)).collect();
        // Keep each wanted endpoint in the slice it is in.
        let mut kept: Vec<(&Arc<Value>, Vec<Value>)> = Vec::new();
        for s in &group {
            let mut eps = Vec::new();
            for old in s["endpoints"].as_array().into_iter().flatten() {
                if let Some(e) = index.remove(&endpoint_id(old))
                    && eps.len() < max
                {
                    eps.push(e);
                }
            }
            kept.push((s, eps));
        }
        let mut rest: Vec<Value> = index.into_values().collect();
        rest.sort_by_key(endpoint_id);
        // Fill free room, fullest slices first.
        kept.sort_by_key(|(_, eps)| std::cmp::Reverse(eps.len()));
        for (_, eps) in kept.iter_mut() {
            if eps.is_empty() {
                continue;
            }
            while eps.len() < max && !rest.is_empty() {
                eps.push(rest.remove(0));
            }
        }
        for (s, eps) in kept.iter_mut() {
            if eps.is_empty() && !rest.is_empty() {
                let n = rest.len().min(max);
                eps.extend(rest.drain(..n));
            }
            let name = key::name(s).to_owned();
            if eps.is_empty() {
                changes.push(Change::Delete { name });
            } else if s["endpoints"].as_array() != Some(&*eps) {
                changes.push(Change::Update {
                    name,
                    endpoints: std::mem::take(eps),
                });
            } else if stale_meta(s) {
                changes.push(Change::Relabel { name });
            }
        }
        *wanted = rest;
    }
    let mut groups: Vec<(Vec<Value>, Vec<Value>)> =
        want.into_values().filter(|(_, e)| !e.is_empty()).collect();
    groups.sort_by_key(|(p, _)| ports_key(p));
    for (ports, eps) in groups {
        for chunk in eps.chunks(max) {
            changes.push(Change::Create {
                ports: ports.clone(),
                endpoints: chunk.to_vec(),
            });
        }
    }
    changes
}

impl EndpointSlices {
    /// Whether the cache shows this Service's last writes (forgetting them after a while).
    fn caught_up(&self, k: &ObjectKey) -> bool {
        let mut tracker = self.tracker.lock().unwrap_or_else(|e| e.into_inner());
        let Some(w) = tracker.get(k) else { return true };
        let ns = k.namespace.as_deref();
        let seen = w.present.iter().all(|(name, v)| {
            self.slices
                .get(&ObjectKey::new(ns, name))
                .is_some_and(|s| rv(&s) >= *v)
        }) && w
            .deleted
            .iter()
            .all(|name| self.slices.get(&ObjectKey::new(ns, name)).is_none());
        if seen || w.at.is_some_and(|t| t.elapsed() > TRACK_TIMEOUT) {
            tracker.remove(k);
            return true;
        }
        false
    }

    fn meta(&self, svc: &Value) -> (Value, Value) {
        let mut labels = endpoint_labels(svc, &[LABEL_SERVICE_NAME, LABEL_MANAGED_BY]);
        labels.insert(LABEL_SERVICE_NAME.into(), json!(key::name(svc)));
        labels.insert(LABEL_MANAGED_BY.into(), json!(MANAGED_BY));
        let owner = json!([{"apiVersion": "v1", "kind": "Service", "name": key::name(svc),
            "uid": key::uid(svc), "controller": true, "blockOwnerDeletion": true}]);
        (Value::Object(labels), owner)
    }
}

#[async_trait::async_trait]
impl Reconcile for EndpointSlices {
    type Error = EndpointSliceError;

    async fn reconcile(&self, k: &ObjectKey) -> Result<Action, EndpointSliceError> {
        let ns = k.namespace.clone().unwrap_or_default();
        let api = |source| EndpointSliceError::Api {
            key: k.to_string(),
            source,
        };
        if !self.caught_up(k) {
            return Ok(Action::requeue(Duration::from_millis(100)));
        }
        let Some(svc) = self.services.get(k) else {
            // The garbage collector deletes the slices with their Service.
            return Ok(Action::await_change());
        };
        let family = service_family(&svc).to_owned();
        let mine: Vec<Arc<Value>> = self.slices.by_index("service", &k.to_string());
        let (labels, owner) = self.meta(&svc);
        let (mut existing, other_family): (Vec<Arc<Value>>, Vec<Arc<Value>>) = mine
            .into_iter()
            .partition(|s| s["addressType"] == family.as_str());
        let mut changes: Vec<Change> = other_family
            .iter()
            .map(|s| Change::Delete {
                name: key::name(s).into(),
            })
            .collect();
        if is_managed(&svc) {
            let pods = selected_pods(&svc, &self.pods);
            let stale = |s: &Value| {
                s["metadata"]["labels"] != labels || s["metadata"]["ownerReferences"] != owner
            };
            changes.extend(plan(
                &existing,
                desired(&svc, &pods),
                self.max_per_slice,
                stale,
            ));
        } else {
            changes.extend(existing.drain(..).map(|s| Change::Delete {
                name: key::name(&s).into(),
            }));
        }
        if changes.is_empty() {
            return Ok(Action::await_change());
        }
        let r = slices(Some(&ns));
        let params = WriteParams::default();
        let mut written = Written {
            at: Some(Instant::now()),
            ..Default::default()
        };
        let mut result = Ok(());
        for change in changes {
            let out = match change {
                Change::Create { ports, endpoints } => {
                    let mut s = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                        "metadata": {"generateName": format!("{}-", k.name), "namespace": ns,
                                     "labels": labels, "ownerReferences": owner},
                        "addressType": family, "endpoints": endpoints});
                    if !ports.is_empty() {
                        s["ports"] = json!(ports);
                    }
                    self.client.create(&r, s, &params).await.map(Some)
                }
                Change::Update { name, endpoints } => {
                    match existing.iter().find(|s| key::name(s) == name) {
                        Some(cur) => {
                            let mut s = (**cur).clone();
                            s["endpoints"] = json!(endpoints);
                            s["metadata"]["labels"] = labels.clone();
                            s["metadata"]["ownerReferences"] = owner.clone();
                            self.client.update(&r, s, None, &params).await.map(Some)
                        }
                        None => Ok(None),
                    }
                }
                Change::Relabel { name } => match existing.iter().find(|s| key::name(s) == name) {
                    Some(cur) => {
                        let mut s = (**cur).clone();
                        s["metadata"]["labels"] = labels.clone();
                        s["metadata"]["ownerReferences"] = owner.clone();
                        self.client.update(&r, s, None, &params).await.map(Some)
                    }
                    None => Ok(None),
                },
                Change::Delete { name } => {
                    let p = DeleteParams::default();
                    match self.client.delete(&r, &name, &p).await {
                        Ok(_) => {
                            written.deleted.insert(name);
                            Ok(None)
                        }
                        Err(e) if e.is_not_found() => Ok(None),
                        Err(e) => Err(e),
                    }
                }
            };
            match out {
                Ok(Some(s)) => {
                    written.present.insert(key::name(&s).to_owned(), rv(&s));
                }
                Ok(None) => {}
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        self.tracker
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(k.clone(), written);
        result.map_err(api)?;
        Ok(Action::await_change())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(uid: &str) -> Value {
        json!({"addresses": [format!("10.0.0.{}", uid.len())], "targetRef": {"uid": uid}})
    }

    fn want(eps: Vec<Value>) -> HashMap<String, (Vec<Value>, Vec<Value>)> {
        let ports = vec![json!({"port": 80, "protocol": "TCP"})];
        HashMap::from([(ports_key(&ports), (ports, eps))])
    }

    fn slice(name: &str, eps: Vec<Value>) -> Arc<Value> {
        Arc::new(
            json!({"metadata": {"name": name}, "ports": [{"port": 80, "protocol": "TCP"}], "endpoints": eps}),
        )
    }

    #[test]
    fn new_services_get_slices_of_at_most_max() {
        let eps: Vec<Value> = (0..5).map(|i| ep(&"x".repeat(i + 1))).collect();
        let changes = plan(&[], want(eps), 2, |_| false);
        let sizes: Vec<usize> = changes
            .iter()
            .map(|c| match c {
                Change::Create { endpoints, .. } => endpoints.len(),
                _ => panic!("{c:?}"),
            })
            .collect();
        assert_eq!(sizes, vec![2, 2, 1]);
    }

    #[test]
    fn endpoints_stay_in_their_slice_and_new_ones_fill_room() {
        let existing = vec![
            slice("s1", vec![ep("a"), ep("bb")]),
            slice("s2", vec![ep("ccc")]),
        ];
        // bb goes, dddd comes: s1 loses bb and gets dddd (fullest first); s2 unchanged.
        let changes = plan(
            &existing,
            want(vec![ep("a"), ep("ccc"), ep("dddd")]),
            2,
            |_| false,
        );
        assert_eq!(
            changes,
            vec![Change::Update {
                name: "s1".into(),
                endpoints: vec![ep("a"), ep("dddd")]
            }]
        );
        // Nothing changed: nothing to do; stale labels: relabel only.
        assert!(
            plan(
                &existing,
                want(vec![ep("a"), ep("bb"), ep("ccc")]),
                2,
                |_| false
            )
            .is_empty()
        );
        assert_eq!(
            plan(&existing[1..], want(vec![ep("ccc")]), 2, |_| true),
            vec![Change::Relabel { name: "s2".into() }]
        );
    }

    #[test]
    fn no_endpoints_leave_one_placeholder() {
        let existing = vec![slice("s1", vec![ep("a")])];
        let changes = plan(&existing, HashMap::new(), 100, |_| false);
        assert_eq!(
            changes,
            vec![
                Change::Delete { name: "s1".into() },
                Change::Create {
                    ports: vec![],
                    endpoints: vec![]
                }
            ]
        );
        let placeholder = Arc::new(json!({"metadata": {"name": "p"}, "endpoints": []}));
        assert!(
            plan(
                std::slice::from_ref(&placeholder),
                HashMap::new(),
                100,
                |_| false
            )
            .is_empty()
        );
        // Endpoints arrive: the placeholder (other ports) goes, a slice is made.
        let changes = plan(&[placeholder], want(vec![ep("a")]), 100, |_| false);
        assert!(matches!(&changes[0], Change::Delete { name } if name == "p"));
        assert!(matches!(&changes[1], Change::Create { endpoints, .. } if endpoints.len() == 1));
    }

    #[test]
    fn endpoint_conditions_follow_readiness_and_deletion() {
        let svc = json!({"metadata": {"name": "web", "namespace": "d"}, "spec": {}});
        let mut pod = json!({"metadata": {"name": "p", "namespace": "d", "uid": "u"},
            "spec": {"nodeName": "n1"},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        let e = pod_endpoint(&pod, &svc, "10.0.0.1".into());
        assert_eq!(
            e["conditions"],
            json!({"ready": true, "serving": true, "terminating": false})
        );
        assert_eq!(e["nodeName"], "n1");
        pod["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
        let e = pod_endpoint(&pod, &svc, "10.0.0.1".into());
        assert_eq!(
            e["conditions"],
            json!({"ready": false, "serving": true, "terminating": true})
        );
    }
}
