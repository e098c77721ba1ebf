//! Attaching CSI volumes to nodes, as upstream's attach/detach controller and the
//! external-attacher sidecar do it, in process:
//!
//! - [`desired`] keeps one `VolumeAttachment` per (CSI volume, node) for every volume a pod
//!   scheduled on that node uses, when the driver needs attaching (its CSIDriver says
//!   `attachRequired`, or there is no CSIDriver object, as upstream assumes), and deletes it
//!   once no pod on the node uses the volume;
//! - [`attacher`] does the storage side for VolumeAttachments of a registered driver:
//!   `ControllerPublishVolume` (the publish context goes into
//!   `status.attachmentMetadata` for the kubelet), and `ControllerUnpublishVolume` before a
//!   deleted attachment lets go of its finalizer.

pub mod attacher;
pub mod desired;

use k1s_api::client::ResourceRef;

pub use crate::volume_driver::PublishRequest;

pub fn attachments() -> ResourceRef {
    ResourceRef::new("storage.k8s.io", "v1", "volumeattachments", None)
}

/// The finalizer the attacher of `driver` puts on attachments and PVs.
pub fn finalizer(driver: &str) -> String {
    format!("external-attacher/{}", driver.replace('/', "-"))
}
