//! The provisioner controller: external-provisioner semantics (kubernetes-csi's
//! external-provisioner over sig-storage-lib-external-provisioner), in process, for every
//! provisioner registered in a [`ProvisionerSet`].
//!
//! - [`claims`]: provisions claims the PV controller handed to a registered provisioner
//!   (`volume.kubernetes.io/storage-provisioner`), once the selected node is known for
//!   `WaitForFirstConsumer` classes: `CreateVolume` named `pvc-<uid>` (so a retry, or a
//!   restart mid-provision, finds the same volume), then the PV, with `Provisioning`,
//!   `ProvisioningSucceeded` and `ProvisioningFailed` events and retries with backoff.
//! - [`deletion`]: deletes the storage of released `Delete` volumes it provisioned, then the
//!   PV, and releases the `external-provisioner.volume.kubernetes.io/finalizer` that keeps a
//!   PV deleted by the user around until its storage is gone.
//! - [`request`]: the `CreateVolume` request from the claim and its class: capacity,
//!   capabilities, parameters, secrets (with templates), data source.
//! - [`topology`]: accessibility requirements from `allowedTopologies` or the selected node.
//! - [`volume`]: the PV object for a provisioned volume.
//!
//! The storage side is the [`VolumeProvisioner`] trait of [`crate::volume_driver`] (its types
//! are re-exported here; the CSI-backed implementation is [`crate::csi_driver`]); this module
//! talks only to the API server and that trait.

pub mod claims;
pub mod deletion;
pub mod request;
pub mod topology;
pub mod volume;

use std::sync::Arc;

use k1s_api::client::Client;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use crate::volume_driver::{
    AccessMode, AccessType, AccessibilityRequirements, ContentSource, DriverError, ProvisionError,
    ProvisionRequest, ProvisionedVolume, ProvisionerSet, Segment, VolumeCapability,
    VolumeProvisioner,
};

/// The finalizer on provisioned PVs, released once the storage is deleted.
pub const FINALIZER: &str = "external-provisioner.volume.kubernetes.io/finalizer";
/// On a provisioned PV: the secret `DeleteVolume` gets.
pub const ANN_DELETION_SECRET_NAME: &str = "volume.kubernetes.io/provisioner-deletion-secret-name";
pub const ANN_DELETION_SECRET_NAMESPACE: &str =
    "volume.kubernetes.io/provisioner-deletion-secret-namespace";

/// Runs the provisioning and deletion controllers for the provisioners in `set` until
/// `cancel`.
pub async fn run(client: Arc<dyn Client>, set: ProvisionerSet, cancel: CancellationToken) {
    let tracker = TaskTracker::new();
    tracker.spawn(claims::run(client.clone(), set.clone(), cancel.clone()));
    tracker.spawn(deletion::run(client, set, cancel));
    tracker.close();
    tracker.wait().await;
}
