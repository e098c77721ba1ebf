//! The CSI Node service: stage (attach the volume's image to a loop device; for a file system,
//! make ext4 on first use and mount it at the staging path), publish (bind-mount the staging
//! path onto the target directory, or the loop device onto a target file for block volumes;
//! read-only and mount flags honoured), undo both, report usage (statvfs), grow online, and
//! describe the node (id, volume limit, topology).
//!
//! Every call is idempotent: the kernel's mount table and the loop devices are the state, read
//! afresh on each call, so a restarted plugin picks up where it left off.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use tonic::{Request, Response, Status};

use super::controller::{Access, access};
use super::store::Store;
use super::{Driver, require, system};
use crate::proto::v1::node_server::Node;
use crate::proto::v1::node_service_capability::{self, rpc};
use crate::proto::v1::volume_usage::Unit;
use crate::proto::v1::*;

/// The image of an existing volume, or NOT_FOUND.
fn image(store: &Store, id: &str) -> Result<PathBuf, Status> {
    store
        .volume(id)
        .map(|_| store.volume_image(id))
        .ok_or_else(|| Status::not_found(format!("volume {id} does not exist")))
}

fn capability(cap: Option<VolumeCapability>) -> Result<(Access, bool), Status> {
    let cap = cap.ok_or_else(|| Status::invalid_argument("volume_capability is required"))?;
    access(&cap).map_err(|e| Status::invalid_argument(e.to_string()))
}

fn io_status(path: &Path, e: io::Error) -> Status {
    Status::internal(format!("{}: {e}", path.display()))
}

/// The loop device serving `image` whose device number is `dev`, if any.
fn loop_with_number(image: &Path, dev: u64) -> Result<Option<PathBuf>, Status> {
    for d in system::loop_devices(image)? {
        if system::device_number(&d)? == dev {
            return Ok(Some(d));
        }
    }
    Ok(None)
}

/// The loop device of `image` that `path` shows: the device a file system mounted at (or
/// above) `path` lives on, or the device node `path` is. NOT_FOUND if `path` does not exist or
/// shows something else. Returns the device and whether it is used as a raw block device.
fn device_at(image: &Path, path: &Path, id: &str) -> Result<(PathBuf, bool), Status> {
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => Status::not_found(format!("{} does not exist", path.display())),
        _ => io_status(path, e),
    })?;
    let (number, block) = if system::is_block_device(path) {
        (meta.rdev(), true)
    } else {
        (meta.dev(), false)
    };
    loop_with_number(image, number)?
        .map(|d| (d, block))
        .ok_or_else(|| Status::not_found(format!("volume {id} is not at {}", path.display())))
}

#[tonic::async_trait]
impl Node for Driver {
    async fn node_stage_volume(
        &self,
        request: Request<NodeStageVolumeRequest>,
    ) -> Result<Response<NodeStageVolumeResponse>, Status> {
        let req = request.into_inner();
        require(&req.volume_id, "volume_id")?;
        require(&req.staging_target_path, "staging_target_path")?;
        let (access, _) = capability(req.volume_capability)?;
        let staging = PathBuf::from(req.staging_target_path);
        let id = req.volume_id;
        self.locked(move |store| {
            let image = image(store, &id)?;
            if store.volume(&id).is_some_and(|v| v.block) && access != Access::Block {
                // Its content is whatever the workload wrote to the raw device: never mkfs it.
                return Err(Status::failed_precondition(format!(
                    "volume {id} was created for block access, not a file system"
                )));
            }
            let Access::Mount { fs_type, flags } = access else {
                // Block: the loop device is the staged volume; publish binds it.
                system::attach_loop(&image)?;
                return Ok(());
            };
            if let Some(mounted) = system::mount_at(&staging)? {
                return match loop_with_number(&image, mounted.dev)? {
                    Some(_) => Ok(()),
                    None => Err(Status::already_exists(format!(
                        "{} already holds another volume ({})",
                        staging.display(),
                        mounted.source
                    ))),
                };
            }
            let dev = system::attach_loop(&image)?;
            // The image may have grown while no loop device was looking.
            system::refresh_loop_capacity(&dev)?;
            let fs = match system::fs_type(&dev)? {
                Some(fs) => fs,
                None => {
                    system::mkfs_ext4(&dev)?;
                    fs_type
                }
            };
            if fs.starts_with("ext") && system::grow_ext_offline(&dev)? {
                // The volume was expanded while it was not staged.
                tracing::info!(%id, device = %dev.display(), "grew the file system offline");
            }
            std::fs::create_dir_all(&staging).map_err(|e| io_status(&staging, e))?;
            system::mount_fs(&dev, &staging, &fs, &flags)?;
            tracing::info!(%id, device = %dev.display(), staging = %staging.display(), "staged volume");
            Ok(())
        })
        .await?;
        Ok(Response::new(NodeStageVolumeResponse {}))
    }

    async fn node_unstage_volume(
        &self,
        request: Request<NodeUnstageVolumeRequest>,
    ) -> Result<Response<NodeUnstageVolumeResponse>, Status> {
        let req = request.into_inner();
        require(&req.volume_id, "volume_id")?;
        require(&req.staging_target_path, "staging_target_path")?;
        let staging = PathBuf::from(req.staging_target_path);
        let id = req.volume_id;
        self.locked(move |store| {
            let image = image(store, &id)?;
            if let Some(mounted) = system::mount_at(&staging)?
                && loop_with_number(&image, mounted.dev)?.is_some()
            {
                system::flush_fs(&staging)?;
                system::unmount(&staging)?;
            }
            let held = system::detach_loops(&image)?;
            if !held.is_empty() {
                tracing::info!(%id, devices = ?held, "loop device still held elsewhere (a cloned mount namespace?); the kernel frees it when that lets go");
            }
            tracing::info!(%id, staging = %staging.display(), "unstaged volume");
            Ok(())
        })
        .await?;
        Ok(Response::new(NodeUnstageVolumeResponse {}))
    }

    async fn node_publish_volume(
        &self,
        request: Request<NodePublishVolumeRequest>,
    ) -> Result<Response<NodePublishVolumeResponse>, Status> {
        let req = request.into_inner();
        require(&req.volume_id, "volume_id")?;
        require(&req.target_path, "target_path")?;
        let (access, read_only_mode) = capability(req.volume_capability)?;
        if req.staging_target_path.is_empty() {
            return Err(Status::failed_precondition(
                "staging_target_path is required: stage the volume first",
            ));
        }
        let read_only = req.readonly || read_only_mode;
        let staging = PathBuf::from(req.staging_target_path);
        let target = PathBuf::from(req.target_path);
        let id = req.volume_id;
        self.locked(move |store| {
            let image = image(store, &id)?;
            // What the target must show: the loop device (block) or the staged file system.
            let (source, flags, block) = match access {
                Access::Block => {
                    let dev = system::loop_devices(&image)?
                        .into_iter()
                        .next()
                        .ok_or_else(|| {
                            Status::failed_precondition(format!("volume {id} is not staged"))
                        })?;
                    (dev, Vec::new(), true)
                }
                Access::Mount { flags, .. } => {
                    let staged = system::mount_at(&staging)?
                        .filter(|m| loop_with_number(&image, m.dev).ok().flatten().is_some());
                    if staged.is_none() {
                        return Err(Status::failed_precondition(format!(
                            "volume {id} is not staged at {}",
                            staging.display()
                        )));
                    }
                    (staging.clone(), flags, false)
                }
            };
            if let Some(mounted) = system::mount_at(&target)? {
                let same = device_at(&image, &target, &id).is_ok_and(|(_, b)| b == block);
                return if same && mounted.read_only() == read_only {
                    Ok(())
                } else {
                    Err(Status::already_exists(format!(
                        "{} is already published with different parameters",
                        target.display()
                    )))
                };
            }
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent).map_err(|e| io_status(parent, e))?;
            }
            if block {
                // A block device is bind-mounted onto a file.
                std::fs::OpenOptions::new()
                    .create(true)
                    .truncate(false)
                    .write(true)
                    .open(&target)
                    .map_err(|e| io_status(&target, e))?;
            } else {
                std::fs::create_dir_all(&target).map_err(|e| io_status(&target, e))?;
            }
            system::bind_mount(&source, &target, read_only, &flags)?;
            tracing::info!(%id, target = %target.display(), read_only, block, "published volume");
            Ok(())
        })
        .await?;
        Ok(Response::new(NodePublishVolumeResponse {}))
    }

    async fn node_unpublish_volume(
        &self,
        request: Request<NodeUnpublishVolumeRequest>,
    ) -> Result<Response<NodeUnpublishVolumeResponse>, Status> {
        let req = request.into_inner();
        require(&req.volume_id, "volume_id")?;
        require(&req.target_path, "target_path")?;
        let target = PathBuf::from(req.target_path);
        let id = req.volume_id;
        self.locked(move |store| {
            image(store, &id)?;
            // Unmount what is stacked there, boundedly: a path the kernel refuses to unmount
            // must not spin.
            for _ in 0..8 {
                if system::mount_at(&target)?.is_none() {
                    break;
                }
                system::unmount(&target)?;
            }
            if system::mount_at(&target)?.is_some() {
                return Err(Status::internal(format!(
                    "{} is still mounted",
                    target.display()
                )));
            }
            // The plugin made the target, so it removes it: a directory or a file.
            let removed = match std::fs::symlink_metadata(&target) {
                Ok(m) if m.is_dir() => std::fs::remove_dir(&target),
                Ok(_) => std::fs::remove_file(&target),
                Err(e) => Err(e),
            };
            match removed {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_status(&target, e)),
            }
            tracing::info!(%id, target = %target.display(), "unpublished volume");
            Ok(())
        })
        .await?;
        Ok(Response::new(NodeUnpublishVolumeResponse {}))
    }

    async fn node_get_volume_stats(
        &self,
        request: Request<NodeGetVolumeStatsRequest>,
    ) -> Result<Response<NodeGetVolumeStatsResponse>, Status> {
        let req = request.into_inner();
        require(&req.volume_id, "volume_id")?;
        require(&req.volume_path, "volume_path")?;
        let path = PathBuf::from(req.volume_path);
        let id = req.volume_id;
        let usage = self
            .locked(move |store| {
                let image = image(store, &id)?;
                let (dev, block) = device_at(&image, &path, &id)?;
                if block {
                    let size = system::device_size(&dev)? as i64;
                    return Ok(vec![VolumeUsage {
                        available: 0,
                        total: size,
                        used: 0,
                        unit: Unit::Bytes as i32,
                    }]);
                }
                let s = system::fs_stats(&path)?;
                Ok(vec![
                    VolumeUsage {
                        available: s.bytes_available as i64,
                        total: s.bytes_total as i64,
                        used: s.bytes_used as i64,
                        unit: Unit::Bytes as i32,
                    },
                    VolumeUsage {
                        available: s.inodes_free as i64,
                        total: s.inodes_total as i64,
                        used: s.inodes_used as i64,
                        unit: Unit::Inodes as i32,
                    },
                ])
            })
            .await?;
        Ok(Response::new(NodeGetVolumeStatsResponse {
            usage,
            volume_condition: None,
        }))
    }

    async fn node_expand_volume(
        &self,
        request: Request<NodeExpandVolumeRequest>,
    ) -> Result<Response<NodeExpandVolumeResponse>, Status> {
        let req = request.into_inner();
        require(&req.volume_id, "volume_id")?;
        require(&req.volume_path, "volume_path")?;
        let path = PathBuf::from(req.volume_path);
        let id = req.volume_id;
        let required = req.capacity_range.map(|r| r.required_bytes).unwrap_or(0);
        let online = self.inner.online_expansion;
        let size = self
            .locked(move |store| {
                let image = image(store, &id)?;
                let (dev, block) = device_at(&image, &path, &id)?;
                system::refresh_loop_capacity(&dev)?;
                let size = system::device_size(&dev)? as i64;
                if required > size {
                    return Err(Status::out_of_range(format!(
                        "the volume has {size} bytes, {required} asked for: expand it on the controller first"
                    )));
                }
                if !block && let Err(e) = system::resize_ext(&dev) {
                    if !online {
                        return Err(Status::failed_precondition(format!(
                            "this plugin cannot grow a mounted file system (it lacks \
                             CAP_SYS_RESOURCE); the volume grows when it is next staged: {e}"
                        )));
                    }
                    return Err(e.into());
                }
                tracing::info!(%id, bytes = size, "expanded volume on the node");
                Ok(size)
            })
            .await?;
        Ok(Response::new(NodeExpandVolumeResponse {
            capacity_bytes: size,
        }))
    }

    async fn node_get_capabilities(
        &self,
        _: Request<NodeGetCapabilitiesRequest>,
    ) -> Result<Response<NodeGetCapabilitiesResponse>, Status> {
        use rpc::Type::*;
        Ok(Response::new(NodeGetCapabilitiesResponse {
            capabilities: [StageUnstageVolume, GetVolumeStats, ExpandVolume]
                .into_iter()
                .map(|t| NodeServiceCapability {
                    r#type: Some(node_service_capability::Type::Rpc(
                        node_service_capability::Rpc { r#type: t as i32 },
                    )),
                })
                .collect(),
        }))
    }

    async fn node_get_info(
        &self,
        _: Request<NodeGetInfoRequest>,
    ) -> Result<Response<NodeGetInfoResponse>, Status> {
        Ok(Response::new(NodeGetInfoResponse {
            node_id: self.inner.node_id.clone(),
            max_volumes_per_node: self.inner.max_volumes_per_node,
            accessible_topology: Some(self.topology()),
        }))
    }
}
