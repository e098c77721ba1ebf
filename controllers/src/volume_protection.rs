//! StorageObjectInUseProtection, the controller half (upstream's `pvcprotection` and
//! `pvprotection` controllers; the admission half adds the finalizers on create).
//!
//! - **PVCs** carry `kubernetes.io/pvc-protection`. The finalizer is added to every PVC that
//!   is not being deleted and lacks it, and removed from a PVC being deleted once no pod uses
//!   it: no scheduled pod that is not terminal (Succeeded or Failed) names it in a
//!   `persistentVolumeClaim` volume, or owns it as the `<pod>-<volume>` claim of an ephemeral
//!   volume. The pods are read from the watch cache first and, before the finalizer goes, once
//!   more from the API server (a pod the cache has not seen yet must still hold the claim).
//! - **PVs** carry `kubernetes.io/pv-protection`, added the same way and removed from a PV
//!   being deleted once it is no longer `Bound`.
//!
//! Both edit `metadata.finalizers` only, with a JSON patch that tests the object's uid and the
//! finalizer's position, so a concurrent change to the list makes the patch fail and retry.

use std::sync::Arc;

use k1s_api::client::{Client, ClientError, ListParams, ResourceRef};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use k1s_runtime::controller::Mapper;
use k1s_runtime::key::{self, ObjectKey};
use k1s_runtime::{Action, Controller, Reconcile, Store, watcher};

pub const PVC_FINALIZER: &str = "kubernetes.io/pvc-protection";
pub const PV_FINALIZER: &str = "kubernetes.io/pv-protection";

#[derive(Debug, thiserror::Error)]
pub enum ProtectionError {
    #[error("{key}: {source}")]
    Api {
        key: String,
        #[source]
        source: ClientError,
    },
}

fn pvcs(ns: Option<&str>) -> ResourceRef {
    ResourceRef::new("", "v1", "persistentvolumeclaims", ns)
}

fn pvs() -> ResourceRef {
    ResourceRef::new("", "v1", "persistentvolumes", None)
}

fn pods(ns: Option<&str>) -> ResourceRef {
    ResourceRef::new("", "v1", "pods", ns)
}

/// The claims a pod uses, by name: its `persistentVolumeClaim` volumes and the claims of its
/// ephemeral volumes (`<pod>-<volume>`).
pub fn claims_of(pod: &Value) -> Vec<String> {
    let pod_name = key::name(pod);
    pod["spec"]["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| {
            if let Some(c) = v["persistentVolumeClaim"]["claimName"].as_str() {
                Some(c.to_owned())
            } else if v["ephemeral"].is_object() {
                Some(format!("{pod_name}-{}", v["name"].as_str().unwrap_or("")))
            } else {
                None
            }
        })
        .collect()
}

/// Whether `pod` keeps `pvc` (by name and uid) from being deleted: it is scheduled, not
/// terminal, and uses the claim (an ephemeral claim only when the pod owns it).
pub fn pod_uses(pod: &Value, pvc: &Value) -> bool {
    let scheduled = pod["spec"]["nodeName"]
        .as_str()
        .is_some_and(|n| !n.is_empty());
    let phase = pod["status"]["phase"].as_str().unwrap_or("");
    if !scheduled || phase == "Succeeded" || phase == "Failed" {
        return false;
    }
    let name = key::name(pvc);
    let pod_name = key::name(pod);
    pod["spec"]["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|v| {
            if v["persistentVolumeClaim"]["claimName"].as_str() == Some(name) {
                return true;
            }
            v["ephemeral"].is_object()
                && format!("{pod_name}-{}", v["name"].as_str().unwrap_or("")) == name
                && key::controller_ref(pvc).is_some_and(|r| r["uid"] == key::uid(pod))
        })
}

/// Maps a pod to the claims it uses.
fn claims_mapper() -> Mapper {
    Arc::new(|pod: &Value, _| {
        let ns = key::namespace(pod);
        claims_of(pod)
            .iter()
            .map(|c| ObjectKey::new(ns, c))
            .collect()
    })
}

/// Runs the PVC protection controller until `cancel`.
pub async fn run_pvc(client: Arc<dyn Client>, cancel: CancellationToken) {
    let mut ctrl = Controller::new(
        "pvc-protection",
        client.clone(),
        pvcs(None),
        watcher::Config::default(),
    );
    let claims = ctrl.store();
    let pods = ctrl.watches(
        pods(None),
        watcher::Config::default(),
        Vec::new(),
        claims_mapper(),
    );
    let reconciler = Arc::new(PvcProtection {
        client,
        claims,
        pods,
    });
    ctrl.run(reconciler, cancel).await;
}

/// Runs the PV protection controller until `cancel`.
pub async fn run_pv(client: Arc<dyn Client>, cancel: CancellationToken) {
    let ctrl = Controller::new(
        "pv-protection",
        client.clone(),
        pvs(),
        watcher::Config::default(),
    );
    let volumes = ctrl.store();
    ctrl.run(Arc::new(PvProtection { client, volumes }), cancel)
        .await;
}

struct PvcProtection {
    client: Arc<dyn Client>,
    claims: Store,
    pods: Store,
}

#[async_trait::async_trait]
impl Reconcile for PvcProtection {
    type Error = ProtectionError;

    async fn reconcile(&self, k: &ObjectKey) -> Result<Action, ProtectionError> {
        let Some(pvc) = self.claims.get(k) else {
            return Ok(Action::await_change());
        };
        let err = |source| ProtectionError::Api {
            key: format!("persistentvolumeclaim {k}"),
            source,
        };
        let ns = k.namespace.as_deref();
        if !release_wanted(&*self.client, &pvcs(ns), &pvc, PVC_FINALIZER)
            .await
            .map_err(err)?
        {
            return Ok(Action::await_change());
        }
        let ns_name = ns.unwrap_or("");
        if self
            .pods
            .list_namespace(ns_name)
            .iter()
            .any(|p| pod_uses(p, &pvc))
        {
            return Ok(Action::await_change());
        }
        // The cache may lag a pod created a moment ago: ask the API server before releasing.
        let live = self
            .client
            .list(&pods(ns), &ListParams::default())
            .await
            .map_err(err)?;
        if live.items.iter().any(|p| pod_uses(p, &pvc)) {
            return Ok(Action::await_change());
        }
        if let Some(p) = key::remove_finalizer_patch(&pvc, PVC_FINALIZER) {
            tracing::debug!(pvc = %k, "no pod uses the claim: releasing it");
            patch(&*self.client, &pvcs(ns), &pvc, p)
                .await
                .map_err(err)?;
        }
        Ok(Action::await_change())
    }
}

struct PvProtection {
    client: Arc<dyn Client>,
    volumes: Store,
}

#[async_trait::async_trait]
impl Reconcile for PvProtection {
    type Error = ProtectionError;

    async fn reconcile(&self, k: &ObjectKey) -> Result<Action, ProtectionError> {
        let Some(pv) = self.volumes.get(k) else {
            return Ok(Action::await_change());
        };
        let err = |source| ProtectionError::Api {
            key: format!("persistentvolume {k}"),
            source,
        };
        let wanted = release_wanted(&*self.client, &pvs(), &pv, PV_FINALIZER)
            .await
            .map_err(err)?;
        if wanted
            && pv["status"]["phase"] != "Bound"
            && let Some(p) = key::remove_finalizer_patch(&pv, PV_FINALIZER)
        {
            patch(&*self.client, &pvs(), &pv, p).await.map_err(err)?;
        }
        Ok(Action::await_change())
    }
}

/// Adds `finalizer` to `obj` when it is not being deleted and lacks it; whether `obj` is
/// being deleted and still holds the finalizer (the case where it may be released).
async fn release_wanted(
    client: &dyn Client,
    r: &ResourceRef,
    obj: &Value,
    finalizer: &str,
) -> Result<bool, ClientError> {
    let has = key::has_finalizer(obj, finalizer);
    if !key::is_deleting(obj) {
        if !has {
            patch(client, r, obj, key::add_finalizer_patch(obj, finalizer)).await?;
        }
        return Ok(false);
    }
    Ok(has)
}

/// Applies a finalizer patch; a vanished object is not an error.
async fn patch(
    client: &dyn Client,
    r: &ResourceRef,
    obj: &Value,
    patch: k1s_api::client::Patch,
) -> Result<(), ClientError> {
    k1s_runtime::write::patch_existing(client, r, obj, &patch, None)
        .await
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(phase: &str, node: &str, volumes: Value) -> Value {
        json!({"metadata": {"name": "p", "namespace": "d", "uid": "pod-uid"},
            "spec": {"nodeName": node, "volumes": volumes}, "status": {"phase": phase}})
    }

    #[test]
    fn pods_that_hold_a_claim() {
        let pvc = json!({"metadata": {"name": "data", "namespace": "d", "uid": "c"}});
        let vols = json!([{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]);
        assert!(pod_uses(&pod("Running", "n1", vols.clone()), &pvc));
        assert!(pod_uses(&pod("Pending", "n1", vols.clone()), &pvc));
        // Unscheduled pods never started with it; terminal pods are done with it.
        assert!(!pod_uses(&pod("Pending", "", vols.clone()), &pvc));
        assert!(!pod_uses(&pod("Succeeded", "n1", vols.clone()), &pvc));
        assert!(!pod_uses(&pod("Failed", "n1", vols), &pvc));
        let other = json!([{"name": "v", "persistentVolumeClaim": {"claimName": "other"}}]);
        assert!(!pod_uses(&pod("Running", "n1", other), &pvc));
    }

    #[test]
    fn ephemeral_claims_count_only_for_their_owner() {
        let vols = json!([{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}}]);
        let owned = json!({"metadata": {"name": "p-scratch", "uid": "c",
            "ownerReferences": [{"uid": "pod-uid", "controller": true, "kind": "Pod",
                "apiVersion": "v1", "name": "p"}]}});
        let foreign = json!({"metadata": {"name": "p-scratch", "uid": "c"}});
        assert!(pod_uses(&pod("Running", "n1", vols.clone()), &owned));
        assert!(!pod_uses(&pod("Running", "n1", vols.clone()), &foreign));
        assert_eq!(claims_of(&pod("Running", "n1", vols)), vec!["p-scratch"]);
    }
}
