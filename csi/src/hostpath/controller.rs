//! The CSI Controller service: create (empty, from a snapshot, as a clone), delete, list and
//! expand volumes; create, delete and list snapshots; report capacity. Error codes follow the
//! CSI spec: INVALID_ARGUMENT for missing fields, NOT_FOUND for unknown sources, ALREADY_EXISTS
//! for a name reused with different parameters, OUT_OF_RANGE for sizes the plugin cannot give,
//! RESOURCE_EXHAUSTED when the byte budget is spent, FAILED_PRECONDITION for a volume in use,
//! ABORTED for a bad pagination token.
//!
//! Snapshots are independent copies, so a volume with snapshots can be deleted and a snapshot
//! outlives its source volume.

use std::time::{SystemTime, UNIX_EPOCH};

use tonic::{Request, Response, Status};

use super::capacity::volume_size;
use super::store::{ContentSource, SnapshotRecord, Store, VolumeRecord};
use super::{Driver, require, system};
use crate::proto::v1::controller_server::Controller;
use crate::proto::v1::controller_service_capability::{self, rpc};
use crate::proto::v1::volume_capability::{AccessType, access_mode::Mode};
use crate::proto::v1::volume_content_source::{self, SnapshotSource, VolumeSource};
use crate::proto::v1::*;

/// How a volume is consumed, from a `VolumeCapability`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Access {
    Block,
    Mount { fs_type: String, flags: Vec<String> },
}

/// File systems the plugin makes and mounts.
const FS_TYPES: &[&str] = &["", "ext4"];

/// A volume capability the plugin cannot serve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum CapabilityError {
    #[error("volume capability has no access mode")]
    NoAccessMode,
    #[error("file system {0:?} is not supported (ext4 is)")]
    FsType(String),
    #[error("volume_mount_group is not supported")]
    MountGroup,
    #[error("volume capability has no access type")]
    NoAccessType,
}

/// Checks one capability: an access type, a known access mode, a supported file system.
/// Returns the access and whether the mode is read-only.
pub(super) fn access(cap: &VolumeCapability) -> Result<(Access, bool), CapabilityError> {
    let mode = cap
        .access_mode
        .as_ref()
        .and_then(|m| Mode::try_from(m.mode).ok())
        .unwrap_or(Mode::Unknown);
    if mode == Mode::Unknown {
        return Err(CapabilityError::NoAccessMode);
    }
    let read_only = matches!(mode, Mode::SingleNodeReaderOnly | Mode::MultiNodeReaderOnly);
    let access = match &cap.access_type {
        Some(AccessType::Block(_)) => Access::Block,
        Some(AccessType::Mount(m)) => {
            if !FS_TYPES.contains(&m.fs_type.as_str()) {
                return Err(CapabilityError::FsType(m.fs_type.clone()));
            }
            if !m.volume_mount_group.is_empty() {
                return Err(CapabilityError::MountGroup);
            }
            Access::Mount {
                fs_type: "ext4".into(),
                flags: m.mount_flags.clone(),
            }
        }
        None => return Err(CapabilityError::NoAccessType),
    };
    Ok((access, read_only))
}

/// Checks a request's capabilities; returns whether they ask for a block volume.
fn check_capabilities(caps: &[VolumeCapability]) -> Result<bool, Status> {
    if caps.is_empty() {
        return Err(Status::invalid_argument("volume_capabilities are required"));
    }
    let mut kinds = Vec::new();
    for cap in caps {
        let (a, _) = access(cap).map_err(|e| Status::invalid_argument(e.to_string()))?;
        kinds.push(a == Access::Block);
    }
    if kinds.iter().any(|&b| b) && kinds.iter().any(|&b| !b) {
        return Err(Status::invalid_argument(
            "a volume is either block or mount, not both",
        ));
    }
    Ok(kinds[0])
}

fn rpc_capability(t: rpc::Type) -> ControllerServiceCapability {
    ControllerServiceCapability {
        r#type: Some(controller_service_capability::Type::Rpc(
            controller_service_capability::Rpc { r#type: t as i32 },
        )),
    }
}

fn content_source(source: &Option<ContentSource>) -> Option<VolumeContentSource> {
    let t = match source.as_ref()? {
        ContentSource::Snapshot(id) => volume_content_source::Type::Snapshot(SnapshotSource {
            snapshot_id: id.clone(),
        }),
        ContentSource::Volume(id) => volume_content_source::Type::Volume(VolumeSource {
            volume_id: id.clone(),
        }),
    };
    Some(VolumeContentSource { r#type: Some(t) })
}

impl Driver {
    fn volume_message(&self, v: &VolumeRecord) -> Volume {
        Volume {
            capacity_bytes: v.capacity,
            volume_id: v.id.clone(),
            volume_context: Default::default(),
            content_source: content_source(&v.source),
            accessible_topology: vec![self.topology()],
        }
    }

    /// Is this node among `requirements`' requisite topologies (or are there none)?
    fn reachable(&self, requirements: Option<&TopologyRequirement>) -> bool {
        let Some(req) = requirements else { return true };
        let ours = self.topology();
        let fits = |t: &Topology| {
            t.segments
                .iter()
                .all(|(k, v)| ours.segments.get(k) == Some(v))
        };
        if req.requisite.is_empty() {
            // Only preferences: any node will do, and this is the only one.
            return true;
        }
        req.requisite.iter().any(fits)
    }
}

fn snapshot_message(s: &SnapshotRecord) -> Snapshot {
    Snapshot {
        size_bytes: s.size,
        snapshot_id: s.id.clone(),
        source_volume_id: s.source_volume_id.clone(),
        creation_time: Some(prost_types::Timestamp {
            seconds: s.created_seconds,
            nanos: s.created_nanos,
        }),
        ready_to_use: true,
        group_snapshot_id: String::new(),
    }
}

/// Pagination: the token is the index of the first entry to return.
fn page<T>(items: Vec<T>, max_entries: i32, token: &str) -> Result<(Vec<T>, String), Status> {
    if max_entries < 0 {
        return Err(Status::invalid_argument("max_entries must not be negative"));
    }
    let start = if token.is_empty() {
        0
    } else {
        token
            .parse::<usize>()
            .ok()
            .filter(|&i| i <= items.len())
            .ok_or_else(|| Status::aborted(format!("invalid starting_token {token:?}")))?
    };
    let end = if max_entries == 0 {
        items.len()
    } else {
        items.len().min(start + max_entries as usize)
    };
    let next = if end < items.len() {
        end.to_string()
    } else {
        String::new()
    };
    Ok((
        items.into_iter().skip(start).take(end - start).collect(),
        next,
    ))
}

/// Fails with FAILED_PRECONDITION if a loop device still uses the volume's image.
fn ensure_unused(store: &Store, id: &str) -> Result<(), Status> {
    // A device being released is no longer staged: only something outside the plugin's
    // control still holds it, and the image can go (the kernel keeps it open until then).
    let devices = system::staged_loops(&store.volume_image(id))?;
    if devices.is_empty() {
        Ok(())
    } else {
        Err(Status::failed_precondition(format!(
            "volume {id} is in use (staged on {}); unstage it first",
            devices[0].display()
        )))
    }
}

/// A volume in use has dirty data in the page cache (its file system's and the loop device's);
/// write it all to the image before copying the image.
fn flush_if_in_use(store: &Store, id: &str) -> Result<(), Status> {
    if !system::loop_devices(&store.volume_image(id))?.is_empty() {
        nix::unistd::sync();
    }
    Ok(())
}

#[tonic::async_trait]
impl Controller for Driver {
    async fn create_volume(
        &self,
        request: Request<CreateVolumeRequest>,
    ) -> Result<Response<CreateVolumeResponse>, Status> {
        let req = request.into_inner();
        require(&req.name, "name")?;
        let block = check_capabilities(&req.volume_capabilities)?;
        let (required, limit) = req
            .capacity_range
            .map(|r| (r.required_bytes, r.limit_bytes))
            .unwrap_or((0, 0));
        if !self.reachable(req.accessibility_requirements.as_ref()) {
            return Err(Status::resource_exhausted(format!(
                "volumes can only be provisioned on node {:?}",
                self.inner.node_id
            )));
        }
        let source = match req.volume_content_source.and_then(|s| s.r#type) {
            None => None,
            Some(volume_content_source::Type::Snapshot(s)) => {
                require(&s.snapshot_id, "volume_content_source.snapshot.snapshot_id")?;
                Some(ContentSource::Snapshot(s.snapshot_id))
            }
            Some(volume_content_source::Type::Volume(v)) => {
                require(&v.volume_id, "volume_content_source.volume.volume_id")?;
                Some(ContentSource::Volume(v.volume_id))
            }
        };
        let driver = self.clone();
        let capacity = self.inner.capacity;
        let volume = self
            .locked(move |store| {
                if let Some(existing) = store.volume_by_name(&req.name) {
                    let fits = existing.capacity >= required
                        && (limit == 0 || existing.capacity <= limit)
                        && existing.source == source
                        && existing.block == block;
                    return if fits {
                        Ok(existing.clone())
                    } else {
                        Err(Status::already_exists(format!(
                            "volume {:?} exists with a different size, source or access type",
                            req.name
                        )))
                    };
                }
                // The content's size and image, if any.
                let content = match &source {
                    None => None,
                    Some(ContentSource::Snapshot(id)) => {
                        let s = store.snapshot(id).ok_or_else(|| {
                            Status::not_found(format!("source snapshot {id} does not exist"))
                        })?;
                        Some((s.size, store.snapshot_image(id)))
                    }
                    Some(ContentSource::Volume(id)) => {
                        let v = store.volume(id).ok_or_else(|| {
                            Status::not_found(format!("source volume {id} does not exist"))
                        })?;
                        let content = (v.capacity, store.volume_image(id));
                        flush_if_in_use(store, id)?;
                        Some(content)
                    }
                };
                let size = match &content {
                    // Unsized: as big as the source.
                    Some((source_size, _)) if required == 0 && (limit == 0 || limit >= *source_size) => {
                        *source_size
                    }
                    _ => volume_size(required, limit)?,
                };
                if let Some((source_size, _)) = &content
                    && size < *source_size
                {
                    return Err(Status::out_of_range(format!(
                        "{size} bytes is smaller than the source's {source_size}"
                    )));
                }
                capacity.reserve(store.allocated(), size)?;
                let record = VolumeRecord {
                    id: uuid::Uuid::new_v4().to_string(),
                    name: req.name.clone(),
                    capacity: size,
                    source,
                    block,
                };
                store.create_volume(record.clone(), content.as_ref().map(|(_, p)| p.as_path()))?;
                tracing::info!(id = %record.id, name = %record.name, bytes = size, "created volume");
                Ok(record)
            })
            .await?;
        Ok(Response::new(CreateVolumeResponse {
            volume: Some(driver.volume_message(&volume)),
        }))
    }

    async fn delete_volume(
        &self,
        request: Request<DeleteVolumeRequest>,
    ) -> Result<Response<DeleteVolumeResponse>, Status> {
        let id = request.into_inner().volume_id;
        require(&id, "volume_id")?;
        self.locked(move |store| {
            if store.volume(&id).is_none() {
                return Ok(());
            }
            ensure_unused(store, &id)?;
            store.delete_volume(&id)?;
            tracing::info!(%id, "deleted volume");
            Ok(())
        })
        .await?;
        Ok(Response::new(DeleteVolumeResponse {}))
    }

    async fn controller_publish_volume(
        &self,
        _: Request<ControllerPublishVolumeRequest>,
    ) -> Result<Response<ControllerPublishVolumeResponse>, Status> {
        Err(Status::unimplemented(
            "volumes are node-local: no controller publish",
        ))
    }

    async fn controller_unpublish_volume(
        &self,
        _: Request<ControllerUnpublishVolumeRequest>,
    ) -> Result<Response<ControllerUnpublishVolumeResponse>, Status> {
        Err(Status::unimplemented(
            "volumes are node-local: no controller unpublish",
        ))
    }

    async fn validate_volume_capabilities(
        &self,
        request: Request<ValidateVolumeCapabilitiesRequest>,
    ) -> Result<Response<ValidateVolumeCapabilitiesResponse>, Status> {
        let req = request.into_inner();
        require(&req.volume_id, "volume_id")?;
        if req.volume_capabilities.is_empty() {
            return Err(Status::invalid_argument("volume_capabilities are required"));
        }
        let id = req.volume_id.clone();
        let block = self
            .locked(move |store| {
                store
                    .volume(&id)
                    .map(|v| v.block)
                    .ok_or_else(|| Status::not_found(format!("volume {id} does not exist")))
            })
            .await?;
        let problem = req
            .volume_capabilities
            .iter()
            .find_map(|cap| match access(cap) {
                Err(e) => Some(e.to_string()),
                Ok((Access::Block, _)) if !block => {
                    Some("the volume was created for a file system, not block access".into())
                }
                Ok((Access::Mount { .. }, _)) if block => {
                    Some("the volume was created for block access".into())
                }
                Ok(_) => None,
            });
        let response = match problem {
            Some(message) => ValidateVolumeCapabilitiesResponse {
                confirmed: None,
                message,
            },
            None => ValidateVolumeCapabilitiesResponse {
                confirmed: Some(validate_volume_capabilities_response::Confirmed {
                    volume_context: req.volume_context,
                    volume_capabilities: req.volume_capabilities,
                    parameters: req.parameters,
                    mutable_parameters: req.mutable_parameters,
                }),
                message: String::new(),
            },
        };
        Ok(Response::new(response))
    }

    async fn list_volumes(
        &self,
        request: Request<ListVolumesRequest>,
    ) -> Result<Response<ListVolumesResponse>, Status> {
        let req = request.into_inner();
        let driver = self.clone();
        let volumes = self
            .locked(|store| Ok(store.volumes().cloned().collect::<Vec<_>>()))
            .await?;
        let (volumes, next_token) = page(volumes, req.max_entries, &req.starting_token)?;
        Ok(Response::new(ListVolumesResponse {
            entries: volumes
                .iter()
                .map(|v| list_volumes_response::Entry {
                    volume: Some(driver.volume_message(v)),
                    status: None,
                })
                .collect(),
            next_token,
        }))
    }

    async fn get_capacity(
        &self,
        request: Request<GetCapacityRequest>,
    ) -> Result<Response<GetCapacityResponse>, Status> {
        let req = request.into_inner();
        for cap in &req.volume_capabilities {
            access(cap).map_err(|e| Status::invalid_argument(e.to_string()))?;
        }
        let here = match &req.accessible_topology {
            None => true,
            Some(t) => self.reachable(Some(&TopologyRequirement {
                requisite: vec![t.clone()],
                preferred: vec![],
            })),
        };
        let capacity = self.inner.capacity;
        let available = if here {
            self.locked(move |store| Ok(capacity.available(store.allocated())))
                .await?
        } else {
            0
        };
        Ok(Response::new(GetCapacityResponse {
            available_capacity: available,
            maximum_volume_size: Some(available),
            minimum_volume_size: Some(super::MIN_VOLUME_SIZE),
        }))
    }

    async fn controller_get_capabilities(
        &self,
        _: Request<ControllerGetCapabilitiesRequest>,
    ) -> Result<Response<ControllerGetCapabilitiesResponse>, Status> {
        use rpc::Type::*;
        Ok(Response::new(ControllerGetCapabilitiesResponse {
            capabilities: [
                CreateDeleteVolume,
                ListVolumes,
                GetCapacity,
                CreateDeleteSnapshot,
                ListSnapshots,
                CloneVolume,
                ExpandVolume,
                GetVolume,
            ]
            .into_iter()
            .map(rpc_capability)
            .collect(),
        }))
    }

    async fn create_snapshot(
        &self,
        request: Request<CreateSnapshotRequest>,
    ) -> Result<Response<CreateSnapshotResponse>, Status> {
        let req = request.into_inner();
        require(&req.name, "name")?;
        require(&req.source_volume_id, "source_volume_id")?;
        let snapshot = self
            .locked(move |store| {
                if let Some(existing) = store.snapshot_by_name(&req.name) {
                    return if existing.source_volume_id == req.source_volume_id {
                        Ok(existing.clone())
                    } else {
                        Err(Status::already_exists(format!(
                            "snapshot {:?} exists for another volume ({})",
                            req.name, existing.source_volume_id
                        )))
                    };
                }
                let volume = store.volume(&req.source_volume_id).ok_or_else(|| {
                    Status::not_found(format!("volume {} does not exist", req.source_volume_id))
                })?;
                flush_if_in_use(store, &volume.id)?;
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default();
                let record = SnapshotRecord {
                    id: uuid::Uuid::new_v4().to_string(),
                    name: req.name.clone(),
                    source_volume_id: volume.id.clone(),
                    size: volume.capacity,
                    created_seconds: now.as_secs() as i64,
                    created_nanos: now.subsec_nanos() as i32,
                };
                store.create_snapshot(record.clone())?;
                tracing::info!(id = %record.id, volume = %record.source_volume_id, "created snapshot");
                Ok(record)
            })
            .await?;
        Ok(Response::new(CreateSnapshotResponse {
            snapshot: Some(snapshot_message(&snapshot)),
        }))
    }

    async fn delete_snapshot(
        &self,
        request: Request<DeleteSnapshotRequest>,
    ) -> Result<Response<DeleteSnapshotResponse>, Status> {
        let id = request.into_inner().snapshot_id;
        require(&id, "snapshot_id")?;
        self.locked(move |store| {
            if store.snapshot(&id).is_some() {
                store.delete_snapshot(&id)?;
                tracing::info!(%id, "deleted snapshot");
            }
            Ok(())
        })
        .await?;
        Ok(Response::new(DeleteSnapshotResponse {}))
    }

    async fn list_snapshots(
        &self,
        request: Request<ListSnapshotsRequest>,
    ) -> Result<Response<ListSnapshotsResponse>, Status> {
        let req = request.into_inner();
        let (by_id, by_volume) = (req.snapshot_id.clone(), req.source_volume_id.clone());
        let snapshots = self
            .locked(move |store| {
                Ok(store
                    .snapshots()
                    .filter(|s| by_id.is_empty() || s.id == by_id)
                    .filter(|s| by_volume.is_empty() || s.source_volume_id == by_volume)
                    .cloned()
                    .collect::<Vec<_>>())
            })
            .await?;
        let (snapshots, next_token) = page(snapshots, req.max_entries, &req.starting_token)?;
        Ok(Response::new(ListSnapshotsResponse {
            entries: snapshots
                .iter()
                .map(|s| list_snapshots_response::Entry {
                    snapshot: Some(snapshot_message(s)),
                })
                .collect(),
            next_token,
        }))
    }

    async fn get_snapshot(
        &self,
        request: Request<GetSnapshotRequest>,
    ) -> Result<Response<GetSnapshotResponse>, Status> {
        let id = request.into_inner().snapshot_id;
        require(&id, "snapshot_id")?;
        let snapshot = self
            .locked(move |store| {
                store
                    .snapshot(&id)
                    .cloned()
                    .ok_or_else(|| Status::not_found(format!("snapshot {id} does not exist")))
            })
            .await?;
        Ok(Response::new(GetSnapshotResponse {
            snapshot: Some(snapshot_message(&snapshot)),
        }))
    }

    async fn controller_expand_volume(
        &self,
        request: Request<ControllerExpandVolumeRequest>,
    ) -> Result<Response<ControllerExpandVolumeResponse>, Status> {
        let req = request.into_inner();
        require(&req.volume_id, "volume_id")?;
        let range = req
            .capacity_range
            .ok_or_else(|| Status::invalid_argument("capacity_range is required"))?;
        let capacity = self.inner.capacity;
        let size = self
            .locked(move |store| {
                let id = req.volume_id;
                let current = store
                    .volume(&id)
                    .ok_or_else(|| Status::not_found(format!("volume {id} does not exist")))?
                    .capacity;
                let size = volume_size(range.required_bytes, range.limit_bytes)?;
                if size <= current {
                    return Ok(current);
                }
                capacity
                    .reserve(store.allocated() - current, size)
                    .map_err(|e| Status::out_of_range(e.to_string()))?;
                store.expand_volume(&id, size)?;
                tracing::info!(%id, from = current, to = size, "expanded volume");
                Ok(size)
            })
            .await?;
        Ok(Response::new(ControllerExpandVolumeResponse {
            capacity_bytes: size,
            // The loop device must see the new size and the file system grow into it.
            node_expansion_required: true,
        }))
    }

    async fn controller_get_volume(
        &self,
        request: Request<ControllerGetVolumeRequest>,
    ) -> Result<Response<ControllerGetVolumeResponse>, Status> {
        let id = request.into_inner().volume_id;
        require(&id, "volume_id")?;
        let volume = self
            .locked(move |store| {
                store
                    .volume(&id)
                    .cloned()
                    .ok_or_else(|| Status::not_found(format!("volume {id} does not exist")))
            })
            .await?;
        Ok(Response::new(ControllerGetVolumeResponse {
            volume: Some(self.volume_message(&volume)),
            status: Some(controller_get_volume_response::VolumeStatus {
                published_node_ids: vec![],
                volume_condition: None,
            }),
        }))
    }

    async fn controller_modify_volume(
        &self,
        _: Request<ControllerModifyVolumeRequest>,
    ) -> Result<Response<ControllerModifyVolumeResponse>, Status> {
        Err(Status::unimplemented("volumes have no mutable parameters"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::v1::volume_capability::{AccessMode, BlockVolume, MountVolume};

    fn cap(access_type: Option<AccessType>, mode: Mode) -> VolumeCapability {
        VolumeCapability {
            access_type,
            access_mode: Some(AccessMode { mode: mode as i32 }),
        }
    }

    fn mount(fs: &str) -> Option<AccessType> {
        Some(AccessType::Mount(MountVolume {
            fs_type: fs.into(),
            mount_flags: vec!["noatime".into()],
            volume_mount_group: String::new(),
        }))
    }

    #[test]
    fn capabilities() {
        let block = Some(AccessType::Block(BlockVolume {}));
        assert_eq!(
            access(&cap(mount(""), Mode::SingleNodeWriter)),
            Ok((
                Access::Mount {
                    fs_type: "ext4".into(),
                    flags: vec!["noatime".into()]
                },
                false
            ))
        );
        assert_eq!(
            access(&cap(block.clone(), Mode::SingleNodeReaderOnly)),
            Ok((Access::Block, true))
        );
        let e = access(&cap(mount("xfs"), Mode::SingleNodeWriter)).unwrap_err();
        assert_eq!(e, CapabilityError::FsType("xfs".into()));
        assert_eq!(
            e.to_string(),
            r#"file system "xfs" is not supported (ext4 is)"#
        );
        let e = access(&cap(None, Mode::SingleNodeWriter)).unwrap_err();
        assert_eq!(e, CapabilityError::NoAccessType);
        assert_eq!(e.to_string(), "volume capability has no access type");
        let e = access(&cap(mount("ext4"), Mode::Unknown)).unwrap_err();
        assert_eq!(e, CapabilityError::NoAccessMode);
        assert_eq!(e.to_string(), "volume capability has no access mode");
        let mut grouped = cap(mount(""), Mode::SingleNodeWriter);
        if let Some(AccessType::Mount(m)) = &mut grouped.access_type {
            m.volume_mount_group = "g".into();
        }
        let e = access(&grouped).unwrap_err();
        assert_eq!(e, CapabilityError::MountGroup);
        assert_eq!(e.to_string(), "volume_mount_group is not supported");
        let mixed = [
            cap(block, Mode::SingleNodeWriter),
            cap(mount(""), Mode::SingleNodeWriter),
        ];
        assert_eq!(
            check_capabilities(&mixed).unwrap_err().code(),
            tonic::Code::InvalidArgument
        );
        assert_eq!(
            check_capabilities(&[]).unwrap_err().code(),
            tonic::Code::InvalidArgument
        );
    }

    #[test]
    fn pages() {
        let items: Vec<i32> = (0..5).collect();
        assert_eq!(
            page(items.clone(), 0, "").unwrap(),
            (items.clone(), String::new())
        );
        assert_eq!(
            page(items.clone(), 2, "").unwrap(),
            (vec![0, 1], "2".into())
        );
        assert_eq!(
            page(items.clone(), 2, "4").unwrap(),
            (vec![4], String::new())
        );
        assert_eq!(
            page(items.clone(), 0, "2").unwrap(),
            (vec![2, 3, 4], String::new())
        );
        assert_eq!(
            page(items.clone(), 0, "5").unwrap(),
            (vec![], String::new())
        );
        for bad in ["6", "x", "-1"] {
            assert_eq!(
                page(items.clone(), 0, bad).unwrap_err().code(),
                tonic::Code::Aborted
            );
        }
        assert_eq!(
            page(items, -1, "").unwrap_err().code(),
            tonic::Code::InvalidArgument
        );
    }
}
