//! The volume sync (upstream's `syncVolume` and `reclaimVolume`).
//!
//! - No `claimRef`, or one without a uid (pre-bound, not bound yet): `Available`.
//! - The claim exists with that uid: `Bound` once the claim names the volume; while it does
//!   not, the claim sync is woken to finish the binding; a volume whose claim went to another
//!   volume is unbound (a controller-made binding) or stays pre-bound (a user's), or — if it
//!   was provisioned for that claim and its policy is `Delete` — released.
//! - The claim is gone (checked against the API server before believing the cache), or was
//!   re-created under another uid: `Released`, then the reclaim policy: `Retain` keeps it;
//!   `Delete` is the provisioner's job when `pv.kubernetes.io/provisioned-by` names one, and
//!   `Failed` (`VolumeFailedDelete`) otherwise, as k1s has no in-tree deleters; `Recycle` is
//!   `Failed` (`VolumeFailedRecycle`), as upstream for every plugin without a recycler.
//!
//! It writes volumes' `claimRef` (unbinding) and status only.

use std::sync::Arc;

use k1s_api::client::{Client, ClientError};
use k1s_api::volume::{self, ANN_BOUND_BY_CONTROLLER, ANN_DYNAMICALLY_PROVISIONED};
use serde_json::Value;

use super::bind;
use super::{
    COMPONENT, ClaimQueue, PvError, claim_ref_key, has_annotation, pvcs, record, typed_claim,
    typed_volume,
};
use k1s_runtime::key::{self, ObjectKey};
use k1s_runtime::{Action, Reconcile, Store};

pub const MSG_NO_RECYCLER: &str = "No recycler plugin found for the volume!";
pub const MSG_NO_DELETER: &str = "no deletable volume plugin matched";

pub struct VolumeSync {
    pub client: Arc<dyn Client>,
    pub volumes: Store,
    pub claims: Store,
    pub claim_queue: ClaimQueue,
}

#[async_trait::async_trait]
impl Reconcile for VolumeSync {
    type Error = PvError;

    async fn reconcile(&self, k: &ObjectKey) -> Result<Action, PvError> {
        let Some(pv) = self.volumes.get(k) else {
            return Ok(Action::await_change());
        };
        self.sync(&pv).await.map_err(|source| PvError::Api {
            key: format!("persistentvolume {k}"),
            source,
        })?;
        Ok(Action::await_change())
    }
}

impl VolumeSync {
    fn client(&self) -> &dyn Client {
        self.client.as_ref()
    }

    async fn sync(&self, pv: &Value) -> Result<(), ClientError> {
        let Some(claim_key) = claim_ref_key(pv) else {
            bind::update_volume_phase(self.client(), pv, "Available", "").await?;
            return Ok(());
        };
        let ref_uid = pv["spec"]["claimRef"]["uid"].as_str().unwrap_or("");
        if ref_uid.is_empty() {
            // Pre-bound by the user; the claim sync binds it.
            bind::update_volume_phase(self.client(), pv, "Available", "").await?;
            return Ok(());
        }
        let claim = self.claim(pv, &claim_key, ref_uid).await?;
        let phase = pv["status"]["phase"].as_str().unwrap_or("");
        let Some(claim) = claim else {
            let pv = if phase != "Released" && phase != "Failed" {
                tracing::info!(
                    pv = key::name(pv),
                    policy = pv["spec"]["persistentVolumeReclaimPolicy"]
                        .as_str()
                        .unwrap_or(""),
                    "volume is released and its reclaim policy will be executed"
                );
                bind::update_volume_phase(self.client(), pv, "Released", "").await?
            } else {
                pv.clone()
            };
            return self.reclaim(&pv).await;
        };
        let bound_to = claim["spec"]["volumeName"].as_str().unwrap_or("");
        if bound_to.is_empty() {
            let mismatch = match (typed_claim(&claim), typed_volume(pv)) {
                (Ok(c), Ok(v)) => volume::volume_mode_mismatch(&c, &v),
                _ => false,
            };
            if mismatch {
                let msg = format!(
                    "Cannot bind PersistentVolume to requested PersistentVolumeClaim {:?} due to incompatible volumeMode.",
                    key::name(&claim)
                );
                record(
                    self.client(),
                    COMPONENT,
                    "PersistentVolume",
                    pv,
                    "Warning",
                    "VolumeMismatch",
                    &msg,
                )
                .await;
                let msg = format!(
                    "Cannot bind PersistentVolume {:?} to requested PersistentVolumeClaim due to incompatible volumeMode.",
                    key::name(pv)
                );
                record(
                    self.client(),
                    COMPONENT,
                    "PersistentVolumeClaim",
                    &claim,
                    "Warning",
                    "VolumeMismatch",
                    &msg,
                )
                .await;
                return Ok(());
            }
            // The binding is not finished: the claim sync completes it.
            self.claim_queue.add(claim_key);
            return Ok(());
        }
        if bound_to == key::name(pv) {
            bind::update_volume_phase(self.client(), pv, "Bound", "").await?;
            return Ok(());
        }
        // The claim is bound to another volume.
        let policy = pv["spec"]["persistentVolumeReclaimPolicy"]
            .as_str()
            .unwrap_or("");
        if has_annotation(pv, ANN_DYNAMICALLY_PROVISIONED) && policy == "Delete" {
            let pv = if phase != "Released" && phase != "Failed" {
                bind::update_volume_phase(self.client(), pv, "Released", "").await?
            } else {
                pv.clone()
            };
            return self.reclaim(&pv).await;
        }
        tracing::debug!(
            pv = key::name(pv),
            by_controller = has_annotation(pv, ANN_BOUND_BY_CONTROLLER),
            "claim bound to another volume: unbinding"
        );
        bind::unbind_volume(self.client(), pv).await?;
        Ok(())
    }

    /// The claim `claimRef` names, if it still exists with `uid`: the cache first, the API
    /// server when the cache has none or another uid (it may lag a claim just created).
    async fn claim(
        &self,
        pv: &Value,
        k: &ObjectKey,
        uid: &str,
    ) -> Result<Option<Value>, ClientError> {
        if let Some(c) = self.claims.get(k)
            && key::uid(&c) == uid
        {
            return Ok(Some((*c).clone()));
        }
        let phase = pv["status"]["phase"].as_str().unwrap_or("");
        if (phase == "Released" || phase == "Failed") && self.claims.get(k).is_none() {
            return Ok(None);
        }
        match self
            .client
            .get(&pvcs(k.namespace.as_deref()), &k.name)
            .await
        {
            Ok(c) if key::uid(&c) == uid => Ok(Some(c)),
            Ok(_) => Ok(None),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Upstream's `reclaimVolume` for a released volume.
    async fn reclaim(&self, pv: &Value) -> Result<(), ClientError> {
        match pv["spec"]["persistentVolumeReclaimPolicy"]
            .as_str()
            .unwrap_or("Retain")
        {
            "Recycle" => {
                self.fail(pv, "VolumeFailedRecycle", MSG_NO_RECYCLER)
                    .await?;
            }
            "Delete" => {
                if !has_annotation(pv, ANN_DYNAMICALLY_PROVISIONED) {
                    self.fail(pv, "VolumeFailedDelete", MSG_NO_DELETER).await?;
                }
                // Otherwise the provisioner named there deletes it.
            }
            _ => tracing::debug!(pv = key::name(pv), "reclaim policy Retain: nothing to do"),
        }
        Ok(())
    }

    /// Sets the volume `Failed` with `message` and, on the change only, records `reason`.
    async fn fail(&self, pv: &Value, reason: &str, message: &str) -> Result<(), ClientError> {
        if pv["status"]["phase"] == "Failed" {
            return Ok(());
        }
        let updated = bind::update_volume_phase(self.client(), pv, "Failed", message).await?;
        record(
            self.client(),
            COMPONENT,
            "PersistentVolume",
            &updated,
            "Warning",
            reason,
            message,
        )
        .await;
        Ok(())
    }
}
