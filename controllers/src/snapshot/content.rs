//! The VolumeSnapshotContent side (upstream's csi-snapshotter sidecar), for contents whose
//! driver is registered: take the snapshot until it is ready, and delete it before a
//! deleted `Delete`-policy content lets go of its finalizer.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k1s_api::client::{Client, WriteParams};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{
    ANN_DELETION_SECRET_NAME, ANN_DELETION_SECRET_NAMESPACE, CONTENT_FINALIZER, SECRET_NAME_PARAM,
    SECRET_NAMESPACE_PARAM, SnapshotError, SnapshotRequest, classes, contents, driver_parameters,
    record,
};
use crate::provisioner::request::RequestError;
use crate::volume_driver::ProvisionerSet;
use k1s_runtime::key::{self, ObjectKey};
use k1s_runtime::{Action, Controller, Reconcile, Store, watcher};

/// How often a snapshot that is not ready yet is asked about again.
const READY_POLL: Duration = Duration::from_secs(5);

/// Runs the controller until `cancel`.
pub async fn run(client: Arc<dyn Client>, set: ProvisionerSet, cancel: CancellationToken) {
    let ctrl = Controller::new(
        "csi-snapshotter",
        client.clone(),
        contents(),
        watcher::Config::default(),
    )
    .rate_limit(crate::provisioner::claims::retry_limit());
    crate::volume_driver::run_with_set(ctrl, set.clone(), cancel, |store| Contents {
        client,
        set,
        store,
    })
    .await;
}

struct Contents {
    client: Arc<dyn Client>,
    set: ProvisionerSet,
    store: Store,
}

impl Contents {
    fn failed(k: &ObjectKey, message: impl Into<String>) -> SnapshotError {
        SnapshotError::Failed {
            key: format!("volumesnapshotcontent {}", k.name),
            message: message.into(),
        }
    }

    async fn patch_status(&self, content: &Value, status: Value) -> Result<(), SnapshotError> {
        super::patch_status(&*self.client, &contents(), content, status).await
    }

    /// The secret of the content's class (`csi.storage.k8s.io/snapshotter-secret-*`), or of
    /// its deletion annotations.
    async fn secrets(
        &self,
        namespace: Option<&str>,
        name: Option<&str>,
    ) -> Result<BTreeMap<String, String>, RequestError> {
        match (namespace, name) {
            (Some(ns), Some(n)) => {
                crate::provisioner::request::secret_data(&*self.client, ns, n).await
            }
            _ => Ok(BTreeMap::new()),
        }
    }

    async fn create(&self, content: &Value, k: &ObjectKey) -> Result<Action, SnapshotError> {
        let driver_name = content["spec"]["driver"].as_str().unwrap_or("");
        let Some(driver) = self.set.get(driver_name) else {
            return Ok(Action::await_change());
        };
        if let Some(handle) = content["spec"]["source"]["snapshotHandle"].as_str() {
            // Pre-provisioned: the snapshot exists already.
            self.patch_status(
                content,
                json!({"snapshotHandle": handle, "readyToUse": true}),
            )
            .await?;
            return Ok(Action::await_change());
        }
        let Some(source) = content["spec"]["source"]["volumeHandle"].as_str() else {
            return Err(Self::failed(
                k,
                "the content names neither a volume nor a snapshot",
            ));
        };
        let class = match content["spec"]["volumeSnapshotClassName"].as_str() {
            Some(name) => match self.client.get(&classes(), name).await {
                Ok(c) => c,
                Err(e) => {
                    return Err(Self::failed(
                        k,
                        format!("failed to get snapshot class {name}: {}", e.message),
                    ));
                }
            },
            None => json!({}),
        };
        let secrets = self
            .secrets(
                class["parameters"][SECRET_NAMESPACE_PARAM].as_str(),
                class["parameters"][SECRET_NAME_PARAM].as_str(),
            )
            .await
            .map_err(|e| Self::failed(k, e.to_string()))?;
        let uid = content["spec"]["volumeSnapshotRef"]["uid"]
            .as_str()
            .unwrap_or("");
        let req = SnapshotRequest {
            name: format!("snapshot-{uid}"),
            source_volume_id: source.to_owned(),
            parameters: driver_parameters(&class),
            secrets,
        };
        match driver.create_snapshot(req).await {
            Ok(info) => {
                let mut status = json!({
                    "snapshotHandle": info.snapshot_id,
                    "readyToUse": info.ready_to_use,
                    "restoreSize": info.size_bytes,
                });
                if info.creation_time_ns > 0 {
                    status["creationTime"] = json!(info.creation_time_ns);
                }
                self.patch_status(content, status).await?;
                if info.ready_to_use {
                    Ok(Action::await_change())
                } else {
                    Ok(Action::requeue(READY_POLL))
                }
            }
            Err(e) => {
                let message = format!("Failed to create snapshot: {e}");
                record(
                    &*self.client,
                    "VolumeSnapshotContent",
                    content,
                    "Warning",
                    "SnapshotCreationFailed",
                    &message,
                )
                .await;
                self.patch_status(
                    content,
                    json!({"readyToUse": false, "error": {"message": message, "time": k1s_api::events::now_rfc3339()}}),
                )
                .await?;
                Err(Self::failed(k, message))
            }
        }
    }

    async fn delete(&self, content: &Value, k: &ObjectKey) -> Result<Action, SnapshotError> {
        if !key::has_finalizer(content, CONTENT_FINALIZER) {
            return Ok(Action::await_change());
        }
        let handle = content["status"]["snapshotHandle"].as_str().unwrap_or("");
        if content["spec"]["deletionPolicy"] == "Delete" && !handle.is_empty() {
            let driver_name = content["spec"]["driver"].as_str().unwrap_or("");
            let Some(driver) = self.set.get(driver_name) else {
                // Wait for the driver to come back: the snapshot must not leak.
                return Ok(Action::await_change());
            };
            let ann = &content["metadata"]["annotations"];
            let secrets = self
                .secrets(
                    ann[ANN_DELETION_SECRET_NAMESPACE].as_str(),
                    ann[ANN_DELETION_SECRET_NAME].as_str(),
                )
                .await
                .map_err(|e| Self::failed(k, e.to_string()))?;
            if let Err(e) = driver.delete_snapshot(handle, secrets).await {
                let message = format!("Failed to delete snapshot: {e}");
                record(
                    &*self.client,
                    "VolumeSnapshotContent",
                    content,
                    "Warning",
                    "SnapshotDeleteError",
                    &message,
                )
                .await;
                return Err(Self::failed(k, message));
            }
        }
        if let Some(p) = key::remove_finalizer_patch(content, CONTENT_FINALIZER) {
            match self
                .client
                .patch(
                    &contents(),
                    key::name(content),
                    &p,
                    None,
                    &WriteParams::default(),
                )
                .await
            {
                Ok(_) => {}
                Err(e) if e.is_not_found() => {}
                Err(source) => {
                    return Err(SnapshotError::Api {
                        key: format!("volumesnapshotcontent {}", k.name),
                        source,
                    });
                }
            }
        }
        Ok(Action::await_change())
    }
}

#[async_trait::async_trait]
impl Reconcile for Contents {
    type Error = SnapshotError;

    async fn reconcile(&self, k: &ObjectKey) -> Result<Action, SnapshotError> {
        let Some(content) = self.store.get(k) else {
            return Ok(Action::await_change());
        };
        if key::is_deleting(&content) {
            return self.delete(&content, k).await;
        }
        if content["status"]["readyToUse"] == true {
            return Ok(Action::await_change());
        }
        self.create(&content, k).await
    }
}
