//! Deletion: a `Released` PV with reclaim policy `Delete` whose
//! `pv.kubernetes.io/provisioned-by` names a registered provisioner gets its storage deleted
//! (`DeleteVolume` with the secret recorded on the PV), then the PV object, then the
//! `external-provisioner.volume.kubernetes.io/finalizer` released — so a PV the user deletes
//! first still has its storage deleted once its claim is gone (HonorPVReclaimPolicy). A PV
//! being deleted whose policy is not `Delete` just loses the finalizer.
//!
//! A failed `DeleteVolume` records `VolumeFailedDelete` on the PV and retries with backoff.

use std::sync::Arc;

use k1s_api::client::{Client, ClientError, DeleteParams};
use k1s_api::volume::ANN_DYNAMICALLY_PROVISIONED;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::request::secret_data;
use super::{
    ANN_DELETION_SECRET_NAME, ANN_DELETION_SECRET_NAMESPACE, FINALIZER, ProvisionerSet,
    VolumeProvisioner,
};
use crate::pv::{pvs, record};
use k1s_runtime::key::{self, ObjectKey};
use k1s_runtime::{Action, Controller, Reconcile, Store, watcher};

pub use super::DriverError as DeletionError;

/// Runs the deletion controller until `cancel`.
pub async fn run(client: Arc<dyn Client>, set: ProvisionerSet, cancel: CancellationToken) {
    let ctrl = Controller::new(
        "csi-provisioner-deleter",
        client.clone(),
        pvs(),
        watcher::Config::default(),
    )
    .workers(2)
    .rate_limit(super::claims::retry_limit());
    crate::volume_driver::run_with_set(ctrl, set.clone(), cancel, |volumes| Deletion {
        client,
        set,
        volumes,
    })
    .await;
}

struct Deletion {
    client: Arc<dyn Client>,
    set: ProvisionerSet,
    volumes: Store,
}

/// sig-storage-lib-external-provisioner's `shouldDelete` for a provisioner named `name`.
pub fn should_delete(pv: &Value, name: &str) -> bool {
    if key::is_deleting(pv) && !key::has_finalizer(pv, FINALIZER) {
        return false;
    }
    pv["status"]["phase"] == "Released"
        && pv["spec"]["persistentVolumeReclaimPolicy"] == "Delete"
        && pv["metadata"]["annotations"][ANN_DYNAMICALLY_PROVISIONED] == name
}

#[async_trait::async_trait]
impl Reconcile for Deletion {
    type Error = DeletionError;

    async fn reconcile(&self, k: &ObjectKey) -> Result<Action, DeletionError> {
        let Some(pv) = self.volumes.get(k) else {
            return Ok(Action::await_change());
        };
        let Some(name) = pv["metadata"]["annotations"][ANN_DYNAMICALLY_PROVISIONED].as_str() else {
            return Ok(Action::await_change());
        };
        let Some(provisioner) = self.set.get(name) else {
            return Ok(Action::await_change());
        };
        let api = |source| DeletionError::Api {
            key: format!("persistentvolume {}", k.name),
            source,
        };
        if should_delete(&pv, name) {
            // The cache may lag this controller's own last deletion: decide on the live PV.
            let live = match self.client.get(&pvs(), &k.name).await {
                Ok(live) => live,
                Err(e) if e.is_not_found() => return Ok(Action::await_change()),
                Err(e) => return Err(api(e)),
            };
            if key::uid(&live) != key::uid(&pv) || !should_delete(&live, name) {
                return Ok(Action::await_change());
            }
            self.delete(&live, provisioner.as_ref()).await?;
        } else if key::is_deleting(&pv)
            && pv["spec"]["persistentVolumeReclaimPolicy"] != "Delete"
            && key::has_finalizer(&pv, FINALIZER)
        {
            self.release(&pv).await.map_err(api)?;
        }
        Ok(Action::await_change())
    }
}

impl Deletion {
    async fn delete(
        &self,
        pv: &Value,
        provisioner: &dyn VolumeProvisioner,
    ) -> Result<(), DeletionError> {
        let name = key::name(pv).to_owned();
        let fail = |message: String| DeletionError::Failed {
            key: format!("persistentvolume {name}"),
            message,
        };
        let ann = &pv["metadata"]["annotations"];
        let secrets = match (
            ann[ANN_DELETION_SECRET_NAMESPACE].as_str(),
            ann[ANN_DELETION_SECRET_NAME].as_str(),
        ) {
            (Some(ns), Some(n)) => secret_data(self.client.as_ref(), ns, n)
                .await
                .map_err(|e| fail(e.to_string()))?,
            _ => Default::default(),
        };
        let handle = pv["spec"]["csi"]["volumeHandle"].as_str().unwrap_or("");
        tracing::info!(pv = %name, handle, driver = provisioner.name(), "deleting volume");
        if let Err(e) = provisioner.delete(handle, secrets).await {
            let msg = e.to_string();
            record(
                self.client.as_ref(),
                provisioner.name(),
                "PersistentVolume",
                pv,
                "Warning",
                "VolumeFailedDelete",
                &msg,
            )
            .await;
            return Err(fail(msg));
        }
        let api = |source| DeletionError::Api {
            key: format!("persistentvolume {name}"),
            source,
        };
        match self
            .client
            .delete(&pvs(), &name, &DeleteParams::default())
            .await
        {
            Ok(_) => {}
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(api(e)),
        }
        // The PV may be gone already if nothing else held it.
        match self.client.get(&pvs(), &name).await {
            Ok(current) => self.release(&current).await.map_err(api),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(api(e)),
        }
    }

    /// Removes the finalizer (a vanished PV is fine).
    async fn release(&self, pv: &Value) -> Result<(), ClientError> {
        let Some(patch) = key::remove_finalizer_patch(pv, FINALIZER) else {
            return Ok(());
        };
        k1s_runtime::write::patch_existing(&*self.client, &pvs(), pv, &patch, None)
            .await
            .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn which_volumes_are_deleted() {
        let pv = |phase: &str, policy: &str, by: &str, deleting: bool, fin: bool| {
            let mut v = json!({"metadata": {"name": "v",
                    "annotations": {ANN_DYNAMICALLY_PROVISIONED: by}},
                "spec": {"persistentVolumeReclaimPolicy": policy},
                "status": {"phase": phase}});
            if deleting {
                v["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
            }
            if fin {
                v["metadata"]["finalizers"] = json!([FINALIZER]);
            }
            v
        };
        assert!(should_delete(
            &pv("Released", "Delete", "d", false, true),
            "d"
        ));
        assert!(should_delete(
            &pv("Released", "Delete", "d", true, true),
            "d"
        ));
        assert!(!should_delete(
            &pv("Released", "Delete", "d", true, false),
            "d"
        ));
        assert!(!should_delete(
            &pv("Bound", "Delete", "d", false, true),
            "d"
        ));
        assert!(!should_delete(
            &pv("Released", "Retain", "d", false, true),
            "d"
        ));
        assert!(!should_delete(
            &pv("Released", "Delete", "other", false, true),
            "d"
        ));
    }
}
