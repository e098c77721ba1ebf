//! The external-attacher, in process: VolumeAttachments of registered drivers get
//! `ControllerPublishVolume` and `status.attached`; deleted ones get
//! `ControllerUnpublishVolume` before their finalizer goes. The node id is the one the
//! node's kubelet recorded for the driver (the `csi.volume.kubernetes.io/nodeid` annotation).
//! Like upstream's attacher, it also holds its finalizer on an attached PV, so the PV
//! outlives every attachment of it: added before the first publish, removed once the last
//! of the PV's attachments is detached (upstream waits for the PV's deletion instead).

use std::collections::BTreeMap;
use std::sync::Arc;

use k1s_api::client::{Client, ClientError, Patch, ResourceRef};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{PublishRequest, attachments, finalizer};
use crate::volume_driver::ProvisionerSet;
use k1s_runtime::key::{self, ObjectKey};
use k1s_runtime::{Action, Controller, Reconcile, Store, watcher};

pub use crate::volume_driver::DriverError as AttacherError;

/// Runs the attacher until `cancel`.
pub async fn run(client: Arc<dyn Client>, set: ProvisionerSet, cancel: CancellationToken) {
    let ctrl = Controller::new(
        "csi-attacher",
        client.clone(),
        attachments(),
        watcher::Config::default(),
    )
    .rate_limit(crate::provisioner::claims::retry_limit());
    crate::volume_driver::run_with_set(ctrl, set.clone(), cancel, |store| Attacher {
        client,
        set,
        store,
    })
    .await;
}

struct Attacher {
    client: Arc<dyn Client>,
    set: ProvisionerSet,
    store: Store,
}

fn pvs() -> ResourceRef {
    ResourceRef::new("", "v1", "persistentvolumes", None)
}

/// The name of the PV `va` attaches.
fn pv_of(va: &Value) -> &str {
    va["spec"]["source"]["persistentVolumeName"]
        .as_str()
        .unwrap_or("")
}

/// The node id the kubelet of `node` recorded for `driver`.
fn node_id(node: &Value, driver: &str) -> Option<String> {
    let ann = node["metadata"]["annotations"]["csi.volume.kubernetes.io/nodeid"].as_str()?;
    let ids: BTreeMap<String, String> = serde_json::from_str(ann).ok()?;
    ids.get(driver).cloned()
}

impl Attacher {
    fn api(k: &ObjectKey) -> impl Fn(ClientError) -> AttacherError + '_ {
        move |source| AttacherError::Api {
            key: format!("volumeattachment {}", k.name),
            source,
        }
    }

    fn failed(k: &ObjectKey, message: String) -> AttacherError {
        AttacherError::Failed {
            key: format!("volumeattachment {}", k.name),
            message,
        }
    }

    /// Patches `obj` (a VolumeAttachment, or with `res` a PV); one that is gone is fine.
    async fn patch_object(
        &self,
        res: &ResourceRef,
        obj: &Value,
        patch: Patch,
        sub: Option<&str>,
        k: &ObjectKey,
    ) -> Result<(), AttacherError> {
        k1s_runtime::write::patch_existing(&*self.client, res, obj, &patch, sub)
            .await
            .map(drop)
            .map_err(Self::api(k))
    }

    async fn patch(
        &self,
        va: &Value,
        patch: Patch,
        sub: Option<&str>,
        k: &ObjectKey,
    ) -> Result<(), AttacherError> {
        self.patch_object(&attachments(), va, patch, sub, k).await
    }

    /// Lets go of the PV of `va` once no other attachment of it is left.
    async fn release_pv(&self, va: &Value, fin: &str, k: &ObjectKey) -> Result<(), AttacherError> {
        let pv_name = pv_of(va);
        let others = self
            .store
            .list()
            .iter()
            .any(|o| pv_of(o) == pv_name && key::name(o) != key::name(va));
        if others || pv_name.is_empty() {
            return Ok(());
        }
        let pv = match self.client.get(&pvs(), pv_name).await {
            Ok(pv) => pv,
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(Self::api(k)(e)),
        };
        match key::remove_finalizer_patch(&pv, fin) {
            Some(patch) => self.patch_object(&pvs(), &pv, patch, None, k).await,
            None => Ok(()),
        }
    }

    /// The PV and its CSI source, and the node id, for `va`.
    async fn target(
        &self,
        va: &Value,
        driver: &str,
        k: &ObjectKey,
    ) -> Result<(Value, String), AttacherError> {
        let pv = self
            .client
            .get(&pvs(), pv_of(va))
            .await
            .map_err(Self::api(k))?;
        let node_name = va["spec"]["nodeName"].as_str().unwrap_or("");
        let node = self
            .client
            .get(&ResourceRef::new("", "v1", "nodes", None), node_name)
            .await
            .map_err(Self::api(k))?;
        let id = node_id(&node, driver).ok_or_else(|| {
            Self::failed(
                k,
                format!("node {node_name:?} has no ID annotation for driver {driver}"),
            )
        })?;
        Ok((pv, id))
    }

    async fn secrets(
        &self,
        pv: &Value,
        k: &ObjectKey,
    ) -> Result<BTreeMap<String, String>, AttacherError> {
        let r = &pv["spec"]["csi"]["controllerPublishSecretRef"];
        match (r["namespace"].as_str(), r["name"].as_str()) {
            (Some(ns), Some(name)) => {
                crate::provisioner::request::secret_data(&*self.client, ns, name)
                    .await
                    .map_err(|e| Self::failed(k, e.to_string()))
            }
            _ => Ok(BTreeMap::new()),
        }
    }

    async fn attach(
        &self,
        va: &Value,
        driver: &str,
        k: &ObjectKey,
    ) -> Result<Action, AttacherError> {
        let fin = finalizer(driver);
        if !key::has_finalizer(va, &fin) {
            self.patch(va, key::add_finalizer_patch(va, &fin), None, k)
                .await?;
            return Ok(Action::await_change());
        }
        let Some(p) = self.set.get(driver) else {
            return Ok(Action::await_change());
        };
        let (pv, node_id) = self.target(va, driver, k).await?;
        // A PV already being deleted takes no new finalizer (the API refuses it); its
        // pv-protection finalizer keeps it while pods use it.
        if !key::has_finalizer(&pv, &fin) && !key::is_deleting(&pv) {
            let add = key::add_finalizer_patch(&pv, &fin);
            self.patch_object(&pvs(), &pv, add, None, k).await?;
        }
        let csi = &pv["spec"]["csi"];
        let req = PublishRequest {
            volume_id: csi["volumeHandle"].as_str().unwrap_or("").to_owned(),
            node_id,
            capability: crate::provisioner::request::capability_of_pv(&pv),
            readonly: csi["readOnly"].as_bool().unwrap_or(false),
            secrets: self.secrets(&pv, k).await?,
            volume_context: csi["volumeAttributes"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect(),
        };
        match p.publish(req).await {
            Ok(context) => {
                let status =
                    json!({"attached": true, "attachmentMetadata": context, "attachError": null});
                self.patch(
                    va,
                    Patch::Merge(json!({"status": status})),
                    Some("status"),
                    k,
                )
                .await?;
                Ok(Action::await_change())
            }
            Err(e) => {
                let status = json!({"attached": false, "attachError": {
                    "message": e.to_string(), "time": k1s_api::events::now_rfc3339()}});
                self.patch(
                    va,
                    Patch::Merge(json!({"status": status})),
                    Some("status"),
                    k,
                )
                .await?;
                Err(Self::failed(k, format!("attaching: {e}")))
            }
        }
    }

    async fn detach(
        &self,
        va: &Value,
        driver: &str,
        k: &ObjectKey,
    ) -> Result<Action, AttacherError> {
        let fin = finalizer(driver);
        if !key::has_finalizer(va, &fin) {
            return Ok(Action::await_change());
        }
        let Some(p) = self.set.get(driver) else {
            return Ok(Action::await_change());
        };
        if va["status"]["attached"] == true || va["status"]["attachError"].is_object() {
            let (pv, node_id) = self.target(va, driver, k).await?;
            let volume_id = pv["spec"]["csi"]["volumeHandle"].as_str().unwrap_or("");
            let secrets = self.secrets(&pv, k).await?;
            if let Err(e) = p.unpublish(volume_id, &node_id, secrets).await {
                let status = json!({"detachError": {"message": e.to_string(),
                    "time": k1s_api::events::now_rfc3339()}});
                self.patch(
                    va,
                    Patch::Merge(json!({"status": status})),
                    Some("status"),
                    k,
                )
                .await?;
                return Err(Self::failed(k, format!("detaching: {e}")));
            }
        }
        self.release_pv(va, &fin, k).await?;
        if let Some(patch) = key::remove_finalizer_patch(va, &fin) {
            self.patch(va, patch, None, k).await?;
        }
        Ok(Action::await_change())
    }
}

#[async_trait::async_trait]
impl Reconcile for Attacher {
    type Error = AttacherError;

    async fn reconcile(&self, k: &ObjectKey) -> Result<Action, AttacherError> {
        let Some(va) = self.store.get(k) else {
            return Ok(Action::await_change());
        };
        let driver = va["spec"]["attacher"].as_str().unwrap_or("").to_owned();
        if self.set.get(&driver).is_none() {
            return Ok(Action::await_change());
        }
        if key::is_deleting(&va) {
            return self.detach(&va, &driver, k).await;
        }
        if va["status"]["attached"] == true {
            return Ok(Action::await_change());
        }
        self.attach(&va, &driver, k).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_ids_come_from_the_kubelet_annotation() {
        let node = json!({"metadata": {"annotations": {
            "csi.volume.kubernetes.io/nodeid": "{\"a.csi\":\"n-1\",\"b.csi\":\"x\"}"}}});
        assert_eq!(node_id(&node, "a.csi").as_deref(), Some("n-1"));
        assert_eq!(node_id(&node, "c.csi"), None);
        assert_eq!(node_id(&json!({}), "a.csi"), None);
    }
}
