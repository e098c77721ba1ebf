//! Volume expansion, as upstream's external-resizer does it for CSI volumes, in process.
//!
//! A bound claim whose storage request exceeds its `status.capacity` (the API server has
//! already checked the class allows expansion and refused shrinking) is expanded by its PV's
//! driver: the claim gets the `Resizing` condition and event, `ControllerExpandVolume`
//! runs, and the PV's capacity becomes the new size. If the driver also needs the node to
//! grow the file system, the claim gets `FileSystemResizePending` and the kubelet finishes
//! (it calls `NodeExpandVolume` and sets `status.capacity`); otherwise the claim's capacity
//! is updated here, with `VolumeResizeSuccessful`. Failures record `VolumeResizeFailed` and
//! retry with backoff.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k1s_api::client::{Client, ClientError, Patch, ResourceRef, WriteParams};
use k1s_api::quantity::Quantity;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::volume_driver::ProvisionerSet;
use k1s_runtime::key::{self, ObjectKey};
use k1s_runtime::queue::RateLimit;
use k1s_runtime::{Action, Controller, Reconcile, Store, watcher};

pub use crate::volume_driver::DriverError as ResizeError;
pub use crate::volume_driver::{ExpandRequest, Expanded};

pub const CONDITION_RESIZING: &str = "Resizing";
pub const CONDITION_FS_RESIZE_PENDING: &str = "FileSystemResizePending";

fn pvcs(ns: Option<&str>) -> ResourceRef {
    ResourceRef::new("", "v1", "persistentvolumeclaims", ns)
}

fn pvs() -> ResourceRef {
    ResourceRef::new("", "v1", "persistentvolumes", None)
}

fn bytes(v: &Value) -> Option<i64> {
    Quantity::parse(v.as_str()?).ok().map(|q| q.value())
}

/// Runs the resizer until `cancel`.
pub async fn run(client: Arc<dyn Client>, set: ProvisionerSet, cancel: CancellationToken) {
    let mut ctrl = Controller::new(
        "csi-resizer",
        client.clone(),
        pvcs(None),
        watcher::Config::default(),
    )
    .rate_limit(RateLimit {
        base: Duration::from_secs(1),
        max: Duration::from_secs(300),
    });
    let claims = ctrl.store();
    let volumes = ctrl.watches(
        pvs(),
        watcher::Config::default(),
        Vec::new(),
        Arc::new(|pv: &Value, _| {
            let r = &pv["spec"]["claimRef"];
            match (r["namespace"].as_str(), r["name"].as_str()) {
                (Some(ns), Some(n)) => vec![ObjectKey::new(Some(ns), n)],
                _ => Vec::new(),
            }
        }),
    );
    let requeue = crate::volume_driver::requeue_on_change(
        set.clone(),
        claims.clone(),
        ctrl.queue(),
        cancel.clone(),
    );
    let reconciler = Arc::new(Resizer {
        client,
        set,
        claims,
        volumes,
    });
    tokio::join!(ctrl.run(reconciler, cancel), requeue);
}

struct Resizer {
    client: Arc<dyn Client>,
    set: ProvisionerSet,
    claims: Store,
    volumes: Store,
}

/// The claim's conditions with `kind` replaced by `cond` (or removed when `None`).
fn with_condition(pvc: &Value, kind: &str, cond: Option<Value>) -> Vec<Value> {
    let mut out: Vec<Value> = pvc["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["type"] != kind)
        .cloned()
        .collect();
    out.extend(cond);
    out
}

fn condition(kind: &str, message: &str) -> Value {
    json!({"type": kind, "status": "True", "lastProbeTime": null,
        "lastTransitionTime": k1s_api::events::now_rfc3339(), "message": message})
}

impl Resizer {
    fn api(k: &ObjectKey) -> impl Fn(ClientError) -> ResizeError + '_ {
        move |source| ResizeError::Api {
            key: format!("persistentvolumeclaim {k}"),
            source,
        }
    }

    async fn event(&self, pvc: &Value, type_: &str, reason: &str, message: &str) {
        let source = k1s_api::events::Source {
            component: "external-resizer".into(),
            host: None,
        };
        let about = k1s_api::events::Involved {
            api_version: "v1".into(),
            kind: "PersistentVolumeClaim".into(),
            namespace: key::namespace(pvc).unwrap_or("").into(),
            name: key::name(pvc).into(),
            uid: key::uid(pvc).into(),
            resource_version: key::resource_version(pvc).unwrap_or("").into(),
            field_path: None,
        };
        k1s_api::events::record(&*self.client, &source, &about, type_, reason, "", message).await;
    }

    async fn patch_status(
        &self,
        pvc: &Value,
        status: Value,
        k: &ObjectKey,
    ) -> Result<(), ResizeError> {
        self.client
            .patch(
                &pvcs(key::namespace(pvc)),
                key::name(pvc),
                &Patch::Merge(json!({"status": status})),
                Some("status"),
                &WriteParams::default(),
            )
            .await
            .map(drop)
            .map_err(Self::api(k))
    }
}

#[async_trait::async_trait]
impl Reconcile for Resizer {
    type Error = ResizeError;

    async fn reconcile(&self, k: &ObjectKey) -> Result<Action, ResizeError> {
        let Some(pvc) = self.claims.get(k) else {
            return Ok(Action::await_change());
        };
        let volume = pvc["spec"]["volumeName"].as_str().unwrap_or("");
        if pvc["status"]["phase"] != "Bound" || volume.is_empty() || key::is_deleting(&pvc) {
            return Ok(Action::await_change());
        }
        let (Some(want), Some(have)) = (
            bytes(&pvc["spec"]["resources"]["requests"]["storage"]),
            bytes(&pvc["status"]["capacity"]["storage"]),
        ) else {
            return Ok(Action::await_change());
        };
        if want <= have {
            return Ok(Action::await_change());
        }
        let Some(pv) = self.volumes.get(&ObjectKey::cluster(volume)) else {
            return Ok(Action::await_change());
        };
        let csi = &pv["spec"]["csi"];
        let Some(driver) = csi["driver"].as_str().and_then(|d| self.set.get(d)) else {
            return Ok(Action::await_change());
        };
        // Already expanded on the controller side: the kubelet finishes the file system.
        if bytes(&pv["spec"]["capacity"]["storage"]).is_some_and(|c| c >= want) {
            return Ok(Action::await_change());
        }
        let pv_name = key::name(&pv).to_owned();
        let conditions = with_condition(
            &pvc,
            CONDITION_RESIZING,
            Some(condition(CONDITION_RESIZING, "")),
        );
        self.patch_status(
            &pvc,
            json!({"conditions": conditions,
            "allocatedResources": {"storage": pvc["spec"]["resources"]["requests"]["storage"]},
            "allocatedResourceStatuses": {"storage": "ControllerResizeInProgress"}}),
            k,
        )
        .await?;
        self.event(
            &pvc,
            "Normal",
            "Resizing",
            &format!("External resizer is resizing volume {pv_name}"),
        )
        .await;
        let secrets = match (
            csi["controllerExpandSecretRef"]["namespace"].as_str(),
            csi["controllerExpandSecretRef"]["name"].as_str(),
        ) {
            (Some(ns), Some(name)) => {
                crate::provisioner::request::secret_data(&*self.client, ns, name)
                    .await
                    .map_err(|e| ResizeError::Failed {
                        key: k.to_string(),
                        message: e.to_string(),
                    })?
            }
            _ => BTreeMap::new(),
        };
        let req = ExpandRequest {
            volume_id: csi["volumeHandle"].as_str().unwrap_or("").to_owned(),
            required_bytes: want,
            capability: crate::provisioner::request::capability_of_pv(&pv),
            secrets,
        };
        let done = match driver.expand(req).await {
            Ok(done) => done,
            Err(e) => {
                let message = format!(
                    "resize volume {pv_name:?} by resizer {:?} failed: {e}",
                    driver.name()
                );
                self.event(&pvc, "Warning", "VolumeResizeFailed", &message)
                    .await;
                let conditions = with_condition(&pvc, CONDITION_RESIZING, None);
                self.patch_status(
                    &pvc,
                    json!({"conditions": conditions,
                    "allocatedResourceStatuses": {"storage": "ControllerResizeFailed"}}),
                    k,
                )
                .await?;
                return Err(ResizeError::Failed {
                    key: k.to_string(),
                    message,
                });
            }
        };
        let size = if done.capacity_bytes > 0 {
            done.capacity_bytes
        } else {
            want
        };
        let size_q = crate::snapshot::common::bytes_quantity(size);
        self.client
            .patch(
                &pvs(),
                &pv_name,
                &Patch::Merge(json!({"spec": {"capacity": {"storage": size_q}}})),
                None,
                &WriteParams::default(),
            )
            .await
            .map_err(Self::api(k))?;
        if done.node_expansion_required {
            let conditions = with_condition(
                &with_condition_value(&pvc, CONDITION_RESIZING),
                CONDITION_FS_RESIZE_PENDING,
                Some(condition(
                    CONDITION_FS_RESIZE_PENDING,
                    "Waiting for user to (re-)start a pod to finish file system resize of volume on node.",
                )),
            );
            self.patch_status(
                &pvc,
                json!({"conditions": conditions,
                "allocatedResourceStatuses": {"storage": "NodeResizePending"}}),
                k,
            )
            .await?;
            self.event(
                &pvc,
                "Normal",
                "FileSystemResizeRequired",
                "Require file system resize of volume on node",
            )
            .await;
        } else {
            let conditions = with_condition(&pvc, CONDITION_RESIZING, None);
            self.patch_status(
                &pvc,
                json!({"conditions": conditions,
                "capacity": {"storage": size_q},
                "allocatedResourceStatuses": null}),
                k,
            )
            .await?;
            self.event(
                &pvc,
                "Normal",
                "VolumeResizeSuccessful",
                "Resize volume succeeded",
            )
            .await;
        }
        Ok(Action::await_change())
    }
}

/// `pvc` with condition `kind` removed, as a claim value (for chaining `with_condition`).
fn with_condition_value(pvc: &Value, kind: &str) -> Value {
    json!({"status": {"conditions": with_condition(pvc, kind, None)}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_are_replaced_by_type() {
        let pvc = json!({"status": {"conditions": [
            {"type": "Resizing", "status": "True"}, {"type": "Other", "status": "True"}]}});
        let out = with_condition(&pvc, "Resizing", None);
        assert_eq!(out, vec![json!({"type": "Other", "status": "True"})]);
        let out = with_condition(
            &pvc,
            "FileSystemResizePending",
            Some(json!({"type": "FileSystemResizePending"})),
        );
        assert_eq!(out.len(), 3);
    }

    #[test]
    fn sizes_round_up_to_bytes() {
        assert_eq!(bytes(&json!("1Gi")), Some(1 << 30));
        assert_eq!(bytes(&json!("1.5k")), Some(1500));
        assert_eq!(bytes(&json!(null)), None);
    }
}
