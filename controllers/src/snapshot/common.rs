//! The VolumeSnapshot side (upstream's snapshot-controller): bind a snapshot to its
//! content, mirror the content's state into the snapshot's status, and clean up on delete.

use std::sync::Arc;

use k1s_api::client::{Client, ClientError, Patch, ResourceRef, WriteParams};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{
    ANN_DELETION_SECRET_NAME, ANN_DELETION_SECRET_NAMESPACE, CONTENT_FINALIZER,
    DEFAULT_CLASS_ANNOTATION, GROUP, SECRET_NAME_PARAM, SECRET_NAMESPACE_PARAM, SNAPSHOT_FINALIZER,
    SnapshotError, classes, contents, record, snapshots,
};
use k1s_runtime::key::{self, ObjectKey};
use k1s_runtime::{Action, Controller, Reconcile, Store, watcher};

/// Why no class can be chosen for a new content (the text goes into the snapshot's
/// `status.error` and a `SnapshotCreationFailed` event).
#[derive(Debug, thiserror::Error)]
enum ClassError {
    #[error("failed to get snapshot class with error {}", .0.message)]
    Get(#[source] ClientError),
    #[error("failed to list snapshot classes: {}", .0.message)]
    List(#[source] ClientError),
    #[error("cannot find default snapshot class for snapshotter {driver}")]
    NoDefault { driver: String },
    #[error("{count} default snapshot classes were found for snapshotter {driver}")]
    ManyDefaults { count: usize, driver: String },
}

/// Runs the controller until `cancel`.
pub async fn run(client: Arc<dyn Client>, cancel: CancellationToken) {
    let mut ctrl = Controller::new(
        "snapshot-controller",
        client.clone(),
        snapshots(None),
        watcher::Config::default(),
    );
    let snaps = ctrl.store();
    // A content's change re-examines the snapshot it points to.
    let contents = ctrl.watches(
        contents(),
        watcher::Config::default(),
        Vec::new(),
        Arc::new(|c: &Value, _| {
            let r = &c["spec"]["volumeSnapshotRef"];
            match (r["namespace"].as_str(), r["name"].as_str()) {
                (Some(ns), Some(name)) => vec![ObjectKey::new(Some(ns), name)],
                _ => Vec::new(),
            }
        }),
    );
    let reconciler = Arc::new(Snapshots {
        client,
        snaps,
        contents,
    });
    ctrl.run(reconciler, cancel).await;
}

struct Snapshots {
    client: Arc<dyn Client>,
    snaps: Store,
    contents: Store,
}

/// Upstream's name of the content of a dynamically created snapshot.
pub fn content_name(snapshot: &Value) -> String {
    format!("snapcontent-{}", key::uid(snapshot))
}

/// Whether `content` is bound to `snapshot` (by namespace, name and, when set, uid).
fn points_to(content: &Value, snapshot: &Value) -> bool {
    let r = &content["spec"]["volumeSnapshotRef"];
    r["name"].as_str() == Some(key::name(snapshot))
        && r["namespace"].as_str() == key::namespace(snapshot)
        && r["uid"]
            .as_str()
            .is_none_or(|u| u.is_empty() || u == key::uid(snapshot))
}

/// A byte count as a quantity string (`1Gi`, `1536Mi`, or plain bytes).
pub fn bytes_quantity(bytes: i64) -> String {
    for (suffix, unit) in [
        ("Ti", 1i64 << 40),
        ("Gi", 1 << 30),
        ("Mi", 1 << 20),
        ("Ki", 1 << 10),
    ] {
        if bytes >= unit && bytes % unit == 0 {
            return format!("{}{suffix}", bytes / unit);
        }
    }
    bytes.to_string()
}

/// The snapshot status that mirrors `content`.
fn status_from(content: &Value) -> Value {
    let cs = &content["status"];
    let mut status = json!({
        "boundVolumeSnapshotContentName": key::name(content),
        "readyToUse": cs["readyToUse"].as_bool().unwrap_or(false),
    });
    if let Some(size) = cs["restoreSize"].as_i64() {
        status["restoreSize"] = json!(bytes_quantity(size));
    }
    if let Some(ns) = cs["creationTime"].as_i64().filter(|n| *n > 0) {
        // Whole seconds, as metav1.Time serialises.
        if let Ok(t) = jiff::Timestamp::from_nanosecond(i128::from(ns)) {
            status["creationTime"] = json!(k1s_api::time::format(t));
        }
    }
    if cs["error"].is_object() {
        status["error"] = cs["error"].clone();
    }
    status
}

impl Snapshots {
    fn err(k: &ObjectKey) -> impl Fn(k1s_api::client::ClientError) -> SnapshotError + '_ {
        move |source| SnapshotError::Api {
            key: format!("volumesnapshot {k}"),
            source,
        }
    }

    async fn patch_status(&self, snap: &Value, status: Value) -> Result<(), SnapshotError> {
        let r = snapshots(key::namespace(snap));
        super::patch_status(&*self.client, &r, snap, status).await
    }

    /// Sets `status.error` (and records a warning) for a snapshot that cannot proceed.
    async fn fail(
        &self,
        snap: &Value,
        reason: &str,
        message: &str,
    ) -> Result<Action, SnapshotError> {
        if snap["status"]["error"]["message"].as_str() != Some(message) {
            record(
                &*self.client,
                "VolumeSnapshot",
                snap,
                "Warning",
                reason,
                message,
            )
            .await;
        }
        self.patch_status(
            snap,
            json!({"readyToUse": false, "error": {"message": message, "time": k1s_api::events::now_rfc3339()}}),
        )
        .await?;
        Ok(Action::requeue(std::time::Duration::from_secs(10)))
    }

    /// The class for a new content: the named one, else the driver's default.
    async fn class_for(&self, snap: &Value, driver: &str) -> Result<Value, ClassError> {
        if let Some(name) = snap["spec"]["volumeSnapshotClassName"].as_str() {
            return self
                .client
                .get(&classes(), name)
                .await
                .map_err(ClassError::Get);
        }
        let all = self
            .client
            .list(&classes(), &Default::default())
            .await
            .map_err(ClassError::List)?;
        let defaults: Vec<Value> = all
            .items
            .into_iter()
            .filter(|c| {
                c["driver"] == driver
                    && c["metadata"]["annotations"][DEFAULT_CLASS_ANNOTATION] == "true"
            })
            .collect();
        match defaults.len() {
            1 => Ok(defaults.into_iter().next().unwrap_or_default()),
            0 => Err(ClassError::NoDefault {
                driver: driver.to_owned(),
            }),
            count => Err(ClassError::ManyDefaults {
                count,
                driver: driver.to_owned(),
            }),
        }
    }

    /// Creates the content of a snapshot of a claim.
    async fn create_content(&self, snap: &Value, k: &ObjectKey) -> Result<Action, SnapshotError> {
        let ns = key::namespace(snap).unwrap_or("");
        let Some(claim) = snap["spec"]["source"]["persistentVolumeClaimName"].as_str() else {
            return self
                .fail(
                    snap,
                    "SnapshotContentMissing",
                    "the snapshot names neither a claim nor a content",
                )
                .await;
        };
        let pvc_ref = ResourceRef::new("", "v1", "persistentvolumeclaims", Some(ns));
        let pvc = match self.client.get(&pvc_ref, claim).await {
            Ok(p) => p,
            Err(e) if e.is_not_found() => {
                return self
                    .fail(
                        snap,
                        "SnapshotPVCSourceMissing",
                        &format!("PVC {ns}/{claim} is not found"),
                    )
                    .await;
            }
            Err(e) => return Err(Self::err(k)(e)),
        };
        let volume = pvc["spec"]["volumeName"].as_str().unwrap_or("");
        if pvc["status"]["phase"] != "Bound" || volume.is_empty() {
            return self
                .fail(
                    snap,
                    "SnapshotPVCSourceNotBound",
                    &format!("the source PVC {claim} is not bound yet"),
                )
                .await;
        }
        let pv = self
            .client
            .get(
                &ResourceRef::new("", "v1", "persistentvolumes", None),
                volume,
            )
            .await
            .map_err(Self::err(k))?;
        let (Some(driver), Some(handle)) = (
            pv["spec"]["csi"]["driver"].as_str(),
            pv["spec"]["csi"]["volumeHandle"].as_str(),
        ) else {
            return self
                .fail(
                    snap,
                    "SnapshotCreationFailed",
                    &format!(
                        "volume {volume} is not a CSI volume; only CSI volumes can be snapshotted"
                    ),
                )
                .await;
        };
        let class = match self.class_for(snap, driver).await {
            Ok(c) => c,
            Err(e) => {
                return self
                    .fail(snap, "SnapshotCreationFailed", &e.to_string())
                    .await;
            }
        };
        if class["driver"].as_str() != Some(driver) {
            let m = format!(
                "snapshot class {} is for driver {}, the volume's driver is {driver}",
                key::name(&class),
                class["driver"].as_str().unwrap_or("")
            );
            return self.fail(snap, "SnapshotCreationFailed", &m).await;
        }
        let class_name = key::name(&class).to_owned();
        if snap["spec"]["volumeSnapshotClassName"].is_null() {
            let patch = Patch::Merge(json!({"spec": {"volumeSnapshotClassName": class_name}}));
            self.client
                .patch(
                    &snapshots(Some(ns)),
                    key::name(snap),
                    &patch,
                    None,
                    &WriteParams::default(),
                )
                .await
                .map_err(Self::err(k))?;
        }
        let mut annotations = json!({});
        if let (Some(n), Some(sns)) = (
            class["parameters"][SECRET_NAME_PARAM].as_str(),
            class["parameters"][SECRET_NAMESPACE_PARAM].as_str(),
        ) {
            annotations[ANN_DELETION_SECRET_NAME] = json!(n);
            annotations[ANN_DELETION_SECRET_NAMESPACE] = json!(sns);
        }
        let content = json!({
            "apiVersion": format!("{GROUP}/v1"), "kind": "VolumeSnapshotContent",
            "metadata": {"name": content_name(snap), "annotations": annotations,
                "finalizers": [CONTENT_FINALIZER]},
            "spec": {
                "deletionPolicy": class["deletionPolicy"].as_str().unwrap_or("Delete"),
                "driver": driver,
                "source": {"volumeHandle": handle},
                "sourceVolumeMode": pv["spec"]["volumeMode"].as_str().unwrap_or("Filesystem"),
                "volumeSnapshotClassName": class_name,
                "volumeSnapshotRef": {"apiVersion": format!("{GROUP}/v1"), "kind": "VolumeSnapshot",
                    "namespace": ns, "name": key::name(snap), "uid": key::uid(snap)},
            },
        });
        match self
            .client
            .create(&contents(), content, &WriteParams::default())
            .await
        {
            Ok(c) => {
                record(
                    &*self.client,
                    "VolumeSnapshot",
                    snap,
                    "Normal",
                    "CreatingSnapshot",
                    &format!(
                        "Waiting for a snapshot {ns}/{} to be created by the CSI driver.",
                        key::name(snap)
                    ),
                )
                .await;
                self.patch_status(snap, status_from(&c)).await?;
                Ok(Action::await_change())
            }
            Err(e) if e.is_already_exists() => {
                Ok(Action::requeue(std::time::Duration::from_secs(1)))
            }
            Err(e) => Err(Self::err(k)(e)),
        }
    }

    /// A snapshot being deleted: delete a `Delete`-policy content, then let the snapshot go.
    async fn delete(&self, snap: &Value, k: &ObjectKey) -> Result<Action, SnapshotError> {
        let bound = snap["status"]["boundVolumeSnapshotContentName"]
            .as_str()
            .map(str::to_owned)
            .or_else(|| {
                snap["spec"]["source"]["volumeSnapshotContentName"]
                    .as_str()
                    .map(str::to_owned)
            })
            .unwrap_or_else(|| content_name(snap));
        if let Some(content) = self.contents.get(&ObjectKey::cluster(&bound))
            && points_to(&content, snap)
            && content["spec"]["deletionPolicy"] == "Delete"
            && !key::is_deleting(&content)
        {
            match self
                .client
                .delete(&contents(), &bound, &Default::default())
                .await
            {
                Ok(_) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(Self::err(k)(e)),
            }
        }
        if let Some(p) = key::remove_finalizer_patch(snap, SNAPSHOT_FINALIZER) {
            match self
                .client
                .patch(
                    &snapshots(key::namespace(snap)),
                    key::name(snap),
                    &p,
                    None,
                    &WriteParams::default(),
                )
                .await
            {
                Ok(_) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(Self::err(k)(e)),
            }
        }
        Ok(Action::await_change())
    }
}

#[async_trait::async_trait]
impl Reconcile for Snapshots {
    type Error = SnapshotError;

    async fn reconcile(&self, k: &ObjectKey) -> Result<Action, SnapshotError> {
        let Some(snap) = self.snaps.get(k) else {
            return Ok(Action::await_change());
        };
        if key::is_deleting(&snap) {
            return self.delete(&snap, k).await;
        }
        if !key::has_finalizer(&snap, SNAPSHOT_FINALIZER) {
            let p = key::add_finalizer_patch(&snap, SNAPSHOT_FINALIZER);
            self.client
                .patch(
                    &snapshots(key::namespace(&snap)),
                    key::name(&snap),
                    &p,
                    None,
                    &WriteParams::default(),
                )
                .await
                .map_err(Self::err(k))?;
            return Ok(Action::await_change());
        }
        let wanted = snap["spec"]["source"]["volumeSnapshotContentName"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| content_name(&snap));
        let pre_provisioned = snap["spec"]["source"]["volumeSnapshotContentName"].is_string();
        let content = match self.contents.get(&ObjectKey::cluster(&wanted)) {
            Some(c) => Some(c),
            // The cache may not have a content created a moment ago.
            None => match self.client.get(&contents(), &wanted).await {
                Ok(c) => Some(Arc::new(c)),
                Err(e) if e.is_not_found() => None,
                Err(e) => return Err(Self::err(k)(e)),
            },
        };
        match content {
            Some(c) if points_to(&c, &snap) => {
                self.patch_status(&snap, status_from(&c)).await?;
                Ok(Action::await_change())
            }
            Some(_) => {
                self.fail(
                    &snap,
                    "SnapshotContentMismatch",
                    &format!("VolumeSnapshotContent {wanted} is bound to another snapshot"),
                )
                .await
            }
            None if pre_provisioned => {
                self.fail(
                    &snap,
                    "SnapshotContentMissing",
                    &format!("VolumeSnapshotContent {wanted} is missing"),
                )
                .await
            }
            None => self.create_content(&snap, k).await,
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn class_error_text() {
        use super::ClassError;
        let e = ClassError::Get(k1s_api::client::ClientError::transport("down"));
        assert_eq!(
            e.to_string(),
            "failed to get snapshot class with error down"
        );
        let e = ClassError::List(k1s_api::client::ClientError::transport("down"));
        assert_eq!(e.to_string(), "failed to list snapshot classes: down");
        let e = ClassError::NoDefault { driver: "d".into() };
        assert_eq!(
            e.to_string(),
            "cannot find default snapshot class for snapshotter d"
        );
        let e = ClassError::ManyDefaults {
            count: 2,
            driver: "d".into(),
        };
        assert_eq!(
            e.to_string(),
            "2 default snapshot classes were found for snapshotter d"
        );
    }

    use super::*;

    #[test]
    fn sizes_read_as_quantities() {
        assert_eq!(bytes_quantity(1 << 30), "1Gi");
        assert_eq!(bytes_quantity(1536 << 20), "1536Mi");
        assert_eq!(bytes_quantity(1000), "1000");
        assert_eq!(bytes_quantity(0), "0");
    }

    #[test]
    fn status_mirrors_the_content() {
        let content = json!({"metadata": {"name": "snapcontent-1"},
            "status": {"readyToUse": true, "restoreSize": 1073741824i64,
                "creationTime": 1_700_000_000_123_456_789i64, "snapshotHandle": "h"}});
        let s = status_from(&content);
        assert_eq!(s["boundVolumeSnapshotContentName"], "snapcontent-1");
        assert_eq!(s["readyToUse"], true);
        assert_eq!(s["restoreSize"], "1Gi");
        assert_eq!(s["creationTime"], "2023-11-14T22:13:20Z");
    }

    #[test]
    fn contents_bind_by_name_namespace_and_uid() {
        let snap = json!({"metadata": {"name": "s", "namespace": "n", "uid": "u1"}});
        let c = |uid: &str| json!({"spec": {"volumeSnapshotRef": {"name": "s", "namespace": "n", "uid": uid}}});
        assert!(points_to(&c("u1"), &snap));
        assert!(points_to(&c(""), &snap));
        assert!(!points_to(&c("u2"), &snap));
    }
}
