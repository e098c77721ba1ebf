//! Volume snapshots, as upstream's snapshot-controller and the csi-snapshotter sidecar do
//! them, in process:
//!
//! - [`common`] binds each `VolumeSnapshot` to a `VolumeSnapshotContent`: for a snapshot of a
//!   claim it creates `snapcontent-<snapshot uid>` (class from the snapshot, else the
//!   driver's default class), for a pre-provisioned content it checks the content points
//!   back; it mirrors the content's state into the snapshot's status and, on delete, deletes
//!   a `Delete`-policy content.
//! - [`content`] does the storage side for contents of a registered driver: `CreateSnapshot`
//!   (named `snapshot-<snapshot uid>`, so retries find the same snapshot) until the snapshot
//!   is ready, and `DeleteSnapshot` before a deleted content's finalizer goes.
//!
//! The API objects are the `snapshot.storage.k8s.io/v1` CRDs the API server installs.

pub mod common;
pub mod content;

use std::collections::BTreeMap;
use std::sync::Arc;

use k1s_api::client::{Client, ResourceRef};
use k1s_api::events::{self, Involved, Source};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::volume_driver::ProvisionerSet;
use k1s_runtime::key;

pub const GROUP: &str = "snapshot.storage.k8s.io";
/// On a snapshot while it is bound to a content.
pub const SNAPSHOT_FINALIZER: &str =
    "snapshot.storage.kubernetes.io/volumesnapshot-bound-protection";
/// On a content until its storage snapshot is deleted (or retained).
pub const CONTENT_FINALIZER: &str =
    "snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection";
/// The default class of a driver.
pub const DEFAULT_CLASS_ANNOTATION: &str = "snapshot.storage.kubernetes.io/is-default-class";
/// On a content: the secret `DeleteSnapshot` gets.
pub const ANN_DELETION_SECRET_NAME: &str = "snapshot.storage.kubernetes.io/deletion-secret-name";
pub const ANN_DELETION_SECRET_NAMESPACE: &str =
    "snapshot.storage.kubernetes.io/deletion-secret-namespace";
/// Class parameters naming the snapshotter secret; removed from what the driver gets.
pub const SECRET_NAME_PARAM: &str = "csi.storage.k8s.io/snapshotter-secret-name";
pub const SECRET_NAMESPACE_PARAM: &str = "csi.storage.k8s.io/snapshotter-secret-namespace";

pub use crate::volume_driver::DriverError as SnapshotError;
pub use crate::volume_driver::{SnapshotInfo, SnapshotRequest};

pub fn snapshots(ns: Option<&str>) -> ResourceRef {
    ResourceRef::new(GROUP, "v1", "volumesnapshots", ns)
}

pub fn contents() -> ResourceRef {
    ResourceRef::new(GROUP, "v1", "volumesnapshotcontents", None)
}

pub fn classes() -> ResourceRef {
    ResourceRef::new(GROUP, "v1", "volumesnapshotclasses", None)
}

/// Runs both controllers until `cancel`.
pub async fn run(client: Arc<dyn Client>, set: ProvisionerSet, cancel: CancellationToken) {
    let tracker = TaskTracker::new();
    tracker.spawn(common::run(client.clone(), cancel.clone()));
    tracker.spawn(content::run(client, set, cancel));
    tracker.close();
    tracker.wait().await;
}

/// The class parameters the driver gets (without the `csi.storage.k8s.io/` keys).
pub fn driver_parameters(class: &Value) -> BTreeMap<String, String> {
    class["parameters"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| !k.starts_with("csi.storage.k8s.io/"))
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
        .collect()
}

/// Merge-patches `status` into the status of `obj` (of resource `r`), unless it says that
/// already; a vanished object is not an error.
async fn patch_status(
    client: &dyn Client,
    r: &ResourceRef,
    obj: &Value,
    status: Value,
) -> Result<(), SnapshotError> {
    let mut merged = obj["status"].clone();
    if !merged.is_object() {
        merged = serde_json::json!({});
    }
    for (k, v) in status.as_object().into_iter().flatten() {
        merged[k] = v.clone();
    }
    if merged == obj["status"] {
        return Ok(());
    }
    let patch = k1s_api::client::Patch::Merge(serde_json::json!({"status": status}));
    match k1s_runtime::write::patch_existing(client, r, obj, &patch, Some("status")).await {
        Ok(_) => Ok(()),
        Err(source) => Err(SnapshotError::Api {
            key: format!("{} {}", r.resource, key::name(obj)),
            source,
        }),
    }
}

/// Records an event about a snapshot API object.
async fn record(
    client: &dyn Client,
    kind: &str,
    obj: &Value,
    type_: &str,
    reason: &str,
    message: &str,
) {
    let source = Source {
        component: "snapshot-controller".into(),
        host: None,
    };
    let about = Involved {
        api_version: format!("{GROUP}/v1"),
        kind: kind.into(),
        namespace: key::namespace(obj).unwrap_or("").into(),
        name: key::name(obj).into(),
        uid: key::uid(obj).into(),
        resource_version: key::resource_version(obj).unwrap_or("").into(),
        field_path: None,
    };
    events::record(client, &source, &about, type_, reason, "", message).await;
}
