//! The controller side of a CSI driver, over its gRPC socket: implements
//! [`VolumeProvisioner`] (provisioning, deletion, expansion, snapshots) with
//! `CreateVolume`, `DeleteVolume`, `ControllerExpandVolume`, `CreateSnapshot` and
//! `DeleteSnapshot`, honouring the capabilities the plugin advertises. Errors keep the CSI
//! distinction between a refusal (final) and a call that may still complete (transient).

use std::collections::{BTreeMap, HashSet};

use k1s_csi::proto::v1 as csi;
use k1s_csi::proto::v1::controller_service_capability::rpc::Type as Cap;
use k1s_csi::{CsiClient, CsiError};

use crate::volume_driver::{
    AccessMode, AccessType, ContentSource, ExpandRequest, Expanded, ProvisionError,
    ProvisionRequest, ProvisionedVolume, PublishRequest, SnapshotInfo, SnapshotRequest,
    VolumeCapability, VolumeProvisioner,
};

/// One registered CSI driver with a controller service.
pub struct CsiDriver {
    name: String,
    client: CsiClient,
    caps: HashSet<Cap>,
}

impl CsiDriver {
    /// Asks the plugin behind `client` what it can do. `None` when it has no controller
    /// service able to create volumes (a node-only plugin needs no provisioner).
    pub async fn probe(name: &str, client: CsiClient) -> Result<Option<Self>, CsiError> {
        if !client.plugin_capabilities().await?.controller_service {
            return Ok(None);
        }
        let caps = client.controller_capabilities().await?;
        if !caps.contains(&Cap::CreateDeleteVolume) {
            return Ok(None);
        }
        Ok(Some(Self {
            name: name.to_owned(),
            client,
            caps,
        }))
    }
}

fn error(e: CsiError) -> ProvisionError {
    if e.is_final() {
        ProvisionError::Final(e.to_string())
    } else {
        ProvisionError::Transient(e.to_string())
    }
}

/// A capability in CSI's terms.
pub fn to_csi(cap: &VolumeCapability) -> csi::VolumeCapability {
    use csi::volume_capability::access_mode::Mode;
    use csi::volume_capability::{AccessType as T, BlockVolume, MountVolume};
    let access_type = match &cap.access_type {
        AccessType::Block => T::Block(BlockVolume {}),
        AccessType::Mount {
            fs_type,
            mount_flags,
        } => T::Mount(MountVolume {
            fs_type: fs_type.clone(),
            mount_flags: mount_flags.clone(),
            volume_mount_group: String::new(),
        }),
    };
    let mode = match cap.access_mode {
        AccessMode::SingleNodeWriter => Mode::SingleNodeWriter,
        AccessMode::SingleNodeSingleWriter => Mode::SingleNodeSingleWriter,
        AccessMode::MultiNodeReaderOnly => Mode::MultiNodeReaderOnly,
        AccessMode::MultiNodeMultiWriter => Mode::MultiNodeMultiWriter,
    };
    csi::VolumeCapability {
        access_type: Some(access_type),
        access_mode: Some(csi::volume_capability::AccessMode { mode: mode as i32 }),
    }
}

fn topology(segment: &BTreeMap<String, String>) -> csi::Topology {
    csi::Topology {
        segments: segment.clone().into_iter().collect(),
    }
}

/// The `CreateVolume` request for `req`.
pub fn create_request(req: ProvisionRequest) -> csi::CreateVolumeRequest {
    use csi::volume_content_source::{SnapshotSource, Type, VolumeSource};
    csi::CreateVolumeRequest {
        name: req.name,
        capacity_range: Some(csi::CapacityRange {
            required_bytes: req.required_bytes,
            limit_bytes: req.limit_bytes,
        }),
        volume_capabilities: req.capabilities.iter().map(to_csi).collect(),
        parameters: req.parameters.into_iter().collect(),
        secrets: req.secrets.into_iter().collect(),
        volume_content_source: req.content_source.map(|s| csi::VolumeContentSource {
            r#type: Some(match s {
                ContentSource::Snapshot { snapshot_id } => {
                    Type::Snapshot(SnapshotSource { snapshot_id })
                }
                ContentSource::Volume { volume_id } => Type::Volume(VolumeSource { volume_id }),
            }),
        }),
        accessibility_requirements: req.accessibility.map(|a| csi::TopologyRequirement {
            requisite: a.requisite.iter().map(topology).collect(),
            preferred: a.preferred.iter().map(topology).collect(),
        }),
        mutable_parameters: Default::default(),
    }
}

#[async_trait::async_trait]
impl VolumeProvisioner for CsiDriver {
    fn name(&self) -> &str {
        &self.name
    }

    async fn create(&self, req: ProvisionRequest) -> Result<ProvisionedVolume, ProvisionError> {
        if req.content_source.is_some() {
            let need = match &req.content_source {
                Some(ContentSource::Snapshot { .. }) => Cap::CreateDeleteSnapshot,
                _ => Cap::CloneVolume,
            };
            if !self.caps.contains(&need) {
                return Err(ProvisionError::Final(format!(
                    "driver {} does not support {}",
                    self.name,
                    if need == Cap::CloneVolume {
                        "cloning"
                    } else {
                        "restoring snapshots"
                    }
                )));
            }
        }
        let v = self
            .client
            .create_volume(create_request(req))
            .await
            .map_err(error)?;
        Ok(ProvisionedVolume {
            volume_handle: v.volume_id,
            capacity_bytes: v.capacity_bytes,
            volume_context: v.volume_context.into_iter().collect(),
            accessible_topology: v
                .accessible_topology
                .into_iter()
                .map(|t| t.segments.into_iter().collect())
                .collect(),
        })
    }

    async fn delete(
        &self,
        volume_handle: &str,
        secrets: BTreeMap<String, String>,
    ) -> Result<(), ProvisionError> {
        self.client
            .delete_volume(volume_handle, secrets)
            .await
            .map_err(error)
    }

    async fn expand(&self, req: ExpandRequest) -> Result<Expanded, ProvisionError> {
        if !self.caps.contains(&Cap::ExpandVolume) {
            // A node-only expansion: the kubelet grows the volume.
            return Ok(Expanded {
                capacity_bytes: req.required_bytes,
                node_expansion_required: true,
            });
        }
        let resp = self
            .client
            .controller_expand(csi::ControllerExpandVolumeRequest {
                volume_id: req.volume_id,
                capacity_range: Some(csi::CapacityRange {
                    required_bytes: req.required_bytes,
                    limit_bytes: 0,
                }),
                secrets: req.secrets.into_iter().collect(),
                volume_capability: req.capability.as_ref().map(to_csi),
            })
            .await
            .map_err(error)?;
        Ok(Expanded {
            capacity_bytes: resp.capacity_bytes,
            node_expansion_required: resp.node_expansion_required,
        })
    }

    async fn publish(
        &self,
        req: PublishRequest,
    ) -> Result<BTreeMap<String, String>, ProvisionError> {
        if !self.caps.contains(&Cap::PublishUnpublishVolume) {
            // Attach required by the CSIDriver object but not done by the plugin.
            return Ok(BTreeMap::new());
        }
        self.client
            .controller_publish(csi::ControllerPublishVolumeRequest {
                volume_id: req.volume_id,
                node_id: req.node_id,
                volume_capability: req.capability.as_ref().map(to_csi),
                readonly: req.readonly,
                secrets: req.secrets.into_iter().collect(),
                volume_context: req.volume_context.into_iter().collect(),
            })
            .await
            .map_err(error)
    }

    async fn unpublish(
        &self,
        volume_id: &str,
        node_id: &str,
        secrets: BTreeMap<String, String>,
    ) -> Result<(), ProvisionError> {
        if !self.caps.contains(&Cap::PublishUnpublishVolume) {
            return Ok(());
        }
        self.client
            .controller_unpublish(csi::ControllerUnpublishVolumeRequest {
                volume_id: volume_id.to_owned(),
                node_id: node_id.to_owned(),
                secrets: secrets.into_iter().collect(),
            })
            .await
            .map_err(error)
    }

    async fn create_snapshot(&self, req: SnapshotRequest) -> Result<SnapshotInfo, ProvisionError> {
        if !self.caps.contains(&Cap::CreateDeleteSnapshot) {
            return Err(ProvisionError::Final(format!(
                "driver {} does not support snapshots",
                self.name
            )));
        }
        let s = self
            .client
            .create_snapshot(csi::CreateSnapshotRequest {
                source_volume_id: req.source_volume_id,
                name: req.name,
                secrets: req.secrets.into_iter().collect(),
                parameters: req.parameters.into_iter().collect(),
            })
            .await
            .map_err(error)?;
        Ok(SnapshotInfo {
            snapshot_id: s.snapshot_id,
            size_bytes: s.size_bytes,
            creation_time_ns: s
                .creation_time
                .map(|t| t.seconds * 1_000_000_000 + i64::from(t.nanos))
                .unwrap_or(0),
            ready_to_use: s.ready_to_use,
        })
    }

    async fn delete_snapshot(
        &self,
        snapshot_id: &str,
        secrets: BTreeMap<String, String>,
    ) -> Result<(), ProvisionError> {
        self.client
            .delete_snapshot(snapshot_id, secrets)
            .await
            .map_err(error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_carry_everything_the_spec_names() {
        let req = ProvisionRequest {
            name: "pvc-1".into(),
            required_bytes: 1 << 30,
            limit_bytes: 0,
            capabilities: vec![VolumeCapability {
                access_type: AccessType::Mount {
                    fs_type: "ext4".into(),
                    mount_flags: vec!["noatime".into()],
                },
                access_mode: AccessMode::SingleNodeWriter,
            }],
            parameters: [("type".to_string(), "fast".to_string())].into(),
            secrets: BTreeMap::new(),
            accessibility: Some(crate::volume_driver::AccessibilityRequirements {
                requisite: vec![[("zone".to_string(), "a".to_string())].into()],
                preferred: vec![[("zone".to_string(), "a".to_string())].into()],
            }),
            content_source: Some(ContentSource::Snapshot {
                snapshot_id: "snap-1".into(),
            }),
        };
        let c = create_request(req);
        assert_eq!(c.name, "pvc-1");
        assert_eq!(c.capacity_range.unwrap().required_bytes, 1 << 30);
        let cap = &c.volume_capabilities[0];
        assert_eq!(
            cap.access_mode.unwrap().mode,
            csi::volume_capability::access_mode::Mode::SingleNodeWriter as i32
        );
        assert!(matches!(
            &cap.access_type,
            Some(csi::volume_capability::AccessType::Mount(m)) if m.fs_type == "ext4" && m.mount_flags == ["noatime"]
        ));
        assert_eq!(c.parameters["type"], "fast");
        assert_eq!(
            c.accessibility_requirements.unwrap().requisite[0].segments["zone"],
            "a"
        );
        assert!(matches!(
            c.volume_content_source.unwrap().r#type,
            Some(csi::volume_content_source::Type::Snapshot(s)) if s.snapshot_id == "snap-1"
        ));
    }
}
