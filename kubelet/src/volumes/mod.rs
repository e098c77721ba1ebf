//! The kubelet's volume manager: sets up a pod's volumes before its containers start, keeps
//! them current on every pod sync (configMap, secret, downwardAPI and projected contents, token
//! refresh), computes each container's bind mounts, and tears everything down when the pod is
//! gone. As upstream, volumes live in `PODS_DIR/<pod-uid>/volumes/<plugin>/<volume-name>`.
//!
//! One file per concern:
//! - `mod.rs` (this file): [`VolumeManager`], [`PodVolumes`], [`VolumeError`] and the causes
//!   it carries ([`SetUpError`], [`TearDownError`], [`VolumeMountError`], [`FsError`]),
//!   [`container_mounts`], teardown;
//! - `empty_dir.rs`: emptyDir (disk or tmpfs), and the directories of the other plugins;
//! - `host_path.rs`: hostPath and its `type` checks;
//! - `configmap_secret.rs`: fetching configMaps and secrets, their payloads;
//! - `downward_api.rs`: pod fields and container resources as files;
//! - `projected.rs`: projected volumes and the service account token cache;
//! - `atomic_writer.rs`: upstream's `..data` layout and its atomic swap;
//! - `subpath.rs`: subPath / subPathExpr resolution inside a volume;
//! - `mounts.rs`: tmpfs mounts and `/proc/self/mountinfo`;
//! - `csi.rs`: persistentVolumeClaim (csi, hostPath and local PVs), generic ephemeral and
//!   inline csi volumes through the registered CSI drivers, and their actual state.
//!
//! Each file has its error enum (`HostPathError`, `SubPathError`, `CsiVolumeError`, ...);
//! their messages are the ones upstream's kubelet puts in events, so they are shown verbatim.
//!
//! Supported: emptyDir, hostPath, configMap, secret, downwardAPI, projected,
//! persistentVolumeClaim, ephemeral, csi. Other types (nfs, ...) fail with
//! [`VolumeError::Unsupported`].
//!
//! Gaps (documented where they live): disk emptyDir sizeLimit is reported, not enforced;
//! mount propagation (`mountPropagation`) and `recursiveReadOnly` are ignored (all mounts are
//! private); fsGroup ownership is applied to volumes the kubelet writes, without
//! `fsGroupChangePolicy`.

mod atomic_writer;
mod configmap_secret;
pub mod csi;
mod downward_api;
mod empty_dir;
mod host_path;
mod mounts;
mod projected;
mod subpath;
#[cfg(test)]
mod tests;

pub use atomic_writer::AtomicWriteError;
pub use configmap_secret::ConfigMapSecretError;
pub use csi::CsiVolumeError;
pub use downward_api::DownwardApiError;
pub(crate) use downward_api::{container_resource_value, needs_node_allocatable};
pub use empty_dir::EmptyDirError;
pub use host_path::HostPathError;
pub use mounts::MountError;
pub use projected::ProjectedError;
pub use subpath::SubPathError;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k1s_api::client::Client;
use k8s_openapi::api::core::v1::{Container, Pod, Volume};

use crate::runtime::spec::Mount;

use configmap_secret::{DEFAULT_MODE, Kind, file_mode};
use projected::{PodCtx, TokenCache};

/// Upstream's plugin directory names.
pub const EMPTY_DIR: &str = "kubernetes.io~empty-dir";

/// Where a pod's volumes live: `PODS_DIR/<uid>/volumes/<plugin>/<name>` below this.
pub fn pod_volumes_dir(pods_dir: &Path, pod_uid: &str) -> PathBuf {
    pods_dir.join(pod_uid).join("volumes")
}
/// Whether a downwardAPI volume or projection of `pod` reads a limit one of its containers
/// does not set (the node's allocatable then stands in).
fn needs_node_allocatable_for(pod: &Pod) -> bool {
    let volumes = pod.spec.iter().flat_map(|s| s.volumes.iter().flatten());
    volumes.into_iter().any(|v| {
        let direct = v.downward_api.iter().map(|d| d.items.as_deref());
        let projected = v
            .projected
            .iter()
            .flat_map(|p| p.sources.iter().flatten())
            .filter_map(|s| s.downward_api.as_ref())
            .map(|d| d.items.as_deref());
        direct
            .chain(projected)
            .any(|items| downward_api::items_need_node_allocatable(pod, items.unwrap_or_default()))
    })
}

pub const CONFIGMAP: &str = "kubernetes.io~configmap";
pub const SECRET: &str = "kubernetes.io~secret";
pub const PROJECTED: &str = "kubernetes.io~projected";
pub const DOWNWARD_API: &str = "kubernetes.io~downward-api";

/// Why a volume could not be set up, mounted or torn down; worded as upstream's kubelet
/// events (`kubectl describe`).
#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    #[error("MountVolume.SetUp failed for volume \"{volume}\" : {cause}")]
    SetUp {
        volume: String,
        #[source]
        cause: Box<SetUpError>,
    },
    #[error(
        "MountVolume.SetUp failed for volume \"{volume}\" : volume type {kind} is not supported by k1s yet"
    )]
    Unsupported { volume: String, kind: String },
    /// A volumeMount of a container (missing volume, bad subPath).
    #[error("{cause}")]
    Mount {
        container: String,
        volume: String,
        #[source]
        cause: Box<VolumeMountError>,
    },
    #[error("UnmountVolume.TearDown failed for pod \"{pod_uid}\" : {cause}")]
    TearDown {
        pod_uid: String,
        #[source]
        cause: Box<TearDownError>,
    },
    #[error("invalid pod: {0}")]
    InvalidPod(String),
}

/// A file system call of the volume manager that failed: `{op} {path}: {source}`, `op` being
/// `reading`, `creating`, `chmod`, `chown`, `writing`, `removing`, ...
#[derive(Debug, thiserror::Error)]
#[error("{op} {}: {source}", path.display())]
pub struct FsError {
    pub op: &'static str,
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

impl FsError {
    pub(crate) fn new(op: &'static str, path: &Path, source: std::io::Error) -> Self {
        Self {
            op,
            path: path.to_path_buf(),
            source,
        }
    }

    /// For `map_err`: the error of `op` on `path`.
    pub(crate) fn at(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.to_path_buf();
        move |source| Self { op, path, source }
    }
}

/// Errors joined as upstream's aggregate (`a, b`), inside the brackets of a `Many` variant.
fn join<E: std::fmt::Display>(errors: &[E]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Why one volume could not be set up (the cause of [`VolumeError::SetUp`]).
#[derive(Debug, thiserror::Error)]
pub enum SetUpError {
    #[error("invalid volume name {0:?}")]
    InvalidName(String),
    #[error(transparent)]
    HostPath(#[from] HostPathError),
    #[error(transparent)]
    ConfigMapSecret(#[from] ConfigMapSecretError),
    #[error(transparent)]
    DownwardApi(#[from] DownwardApiError),
    #[error(transparent)]
    Projected(#[from] ProjectedError),
    #[error(transparent)]
    EmptyDir(#[from] EmptyDirError),
    #[error(transparent)]
    Mount(#[from] MountError),
    #[error(transparent)]
    Write(#[from] AtomicWriteError),
    #[error(transparent)]
    Csi(#[from] CsiVolumeError),
}

/// Why a pod's volumes could not be torn down (the cause of [`VolumeError::TearDown`]).
#[derive(Debug, thiserror::Error)]
pub enum TearDownError {
    #[error("invalid pod uid {0:?}")]
    InvalidPodUid(String),
    #[error(transparent)]
    Csi(#[from] CsiVolumeError),
    #[error("teardown task: {0}")]
    Task(#[from] tokio::task::JoinError),
    #[error(transparent)]
    Fs(#[from] FsError),
    #[error("reading mounts: {0}")]
    ReadMounts(#[source] std::io::Error),
    #[error(transparent)]
    Unmount(#[from] MountError),
    /// A mount below the volumes directory that is not one of ours (a tmpfs).
    #[error(
        "{} is a {fs_type} mount, not made by the volume manager; refusing to remove {}",
        mount_point.display(),
        dir.display()
    )]
    ForeignMount {
        mount_point: PathBuf,
        fs_type: String,
        dir: PathBuf,
    },
    #[error(
        "{} is still a mount point; refusing to remove {}",
        mount_point.display(),
        dir.display()
    )]
    StillMounted { mount_point: PathBuf, dir: PathBuf },
}

/// Why a volumeMount or volumeDevice of a container cannot be made (the cause of
/// [`VolumeError::Mount`]).
#[derive(Debug, thiserror::Error)]
pub enum VolumeMountError {
    #[error("cannot find volume {volume:?} to mount into container {container:?}")]
    NoVolume { volume: String, container: String },
    #[error("cannot find volume {volume:?} to map into container {container:?}")]
    NoDevice { volume: String, container: String },
    /// A subPathExpr names variables the container does not have (or has empty).
    #[error(
        "failed to prepare subPath for volumeMount {volume:?} of container {container:?}: missing value for {}",
        missing.join(", ")
    )]
    MissingVariables {
        volume: String,
        container: String,
        missing: Vec<String>,
    },
    #[error(transparent)]
    SubPath(#[from] SubPathError),
}

impl VolumeError {
    /// The volume concerned, if any.
    pub fn volume(&self) -> Option<&str> {
        match self {
            VolumeError::SetUp { volume, .. }
            | VolumeError::Unsupported { volume, .. }
            | VolumeError::Mount { volume, .. } => Some(volume),
            VolumeError::TearDown { .. } | VolumeError::InvalidPod(_) => None,
        }
    }
}

/// One set-up volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodVolume {
    /// The host directory (or, for a hostPath of a file type, the file).
    pub path: PathBuf,
    /// Read-only by nature: configMap, secret, downwardAPI and projected volumes.
    pub read_only: bool,
    /// The sizeLimit of a disk-backed emptyDir in bytes, for eviction (not enforced yet).
    pub size_limit: Option<i64>,
}

/// A pod's volumes by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodVolumes {
    pub volumes: BTreeMap<String, PodVolume>,
}

impl PodVolumes {
    pub fn get(&self, name: &str) -> Option<&PodVolume> {
        self.volumes.get(name)
    }
}

/// Sets up, refreshes and tears down pod volumes.
pub struct VolumeManager {
    client: Arc<dyn Client>,
    pods_dir: PathBuf,
    tokens: TokenCache,
    csi: csi::CsiVolumes,
    /// Pods whose CSI volumes still need tearing down.
    pending_teardown: Mutex<std::collections::HashSet<String>>,
    /// Added to `Instant::now()`; moved forward by tests only.
    clock_offset: Mutex<Duration>,
}

/// A pod UID or volume name used as one path component.
fn safe_component(s: &str) -> bool {
    !s.is_empty() && s != "." && s != ".." && !s.contains('/') && !s.contains('\0')
}

/// The type of a volume we do not support, by its field name in the API (`persistentVolumeClaim`).
fn volume_kind(v: &Volume) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| {
            v.as_object()?
                .iter()
                .find(|(k, v)| k.as_str() != "name" && !v.is_null())
                .map(|(k, _)| k.clone())
        })
        .unwrap_or_else(|| "unknown".into())
}

impl VolumeManager {
    pub fn new(client: Arc<dyn Client>, pods_dir: PathBuf) -> Self {
        Self {
            csi: csi::CsiVolumes::new(client.clone(), pods_dir.clone()),
            pending_teardown: Mutex::default(),
            client,
            pods_dir,
            tokens: TokenCache::default(),
            clock_offset: Mutex::new(Duration::ZERO),
        }
    }

    /// The CSI side: registered drivers, actual state, volume stats.
    pub fn csi(&self) -> &csi::CsiVolumes {
        &self.csi
    }

    fn now(&self) -> Instant {
        Instant::now() + *self.clock_offset.lock().unwrap_or_else(|p| p.into_inner())
    }

    #[cfg(test)]
    fn advance_clock(&self, by: Duration) {
        *self.clock_offset.lock().unwrap() += by;
    }

    /// `PODS_DIR/<uid>/volumes`.
    pub fn volumes_dir(&self, pod_uid: &str) -> PathBuf {
        pod_volumes_dir(&self.pods_dir, pod_uid)
    }

    /// When the pod's volumes should be set up again to refresh a service account token
    /// (`None`: no token). In the manager's clock, which is `Instant::now()`.
    pub fn next_refresh(&self, pod_uid: &str) -> Option<Instant> {
        self.tokens.next_refresh(pod_uid)
    }

    /// Sets up (or brings up to date) every volume of `pod`. Idempotent: called on every
    /// sync. On failure the other volumes are still set up, and the first error is returned.
    pub async fn setup(&self, pod: &Pod) -> Result<PodVolumes, VolumeError> {
        let uid = pod
            .metadata
            .uid
            .as_deref()
            .ok_or_else(|| VolumeError::InvalidPod("the pod has no uid".into()))?;
        if !safe_component(uid) {
            return Err(VolumeError::InvalidPod(format!("invalid pod uid {uid:?}")));
        }
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        let spec = pod.spec.as_ref();
        let fs_group = spec
            .and_then(|s| s.security_context.as_ref())
            .and_then(|s| s.fs_group)
            .and_then(|g| u32::try_from(g).ok());
        // The node's allocatable, only when a downwardAPI item reads a limit a container
        // does not set.
        let node_allocatable = match spec.and_then(|s| s.node_name.as_deref()) {
            Some(node) if needs_node_allocatable_for(pod) => {
                crate::node::reported_allocatable(self.client.as_ref(), node).await
            }
            _ => k1s_api::quantity::ResourceList::new(),
        };
        let ctx = PodCtx {
            pod,
            namespace,
            uid,
            fs_group,
            node_allocatable,
        };
        let now = self.now();
        let mut out = PodVolumes::default();
        let mut first = None;
        for vol in spec.and_then(|s| s.volumes.as_deref()).unwrap_or_default() {
            match self.setup_volume(&ctx, vol, now).await {
                Ok(v) => {
                    out.volumes.insert(vol.name.clone(), v);
                }
                Err(e) => {
                    tracing::warn!(pod_uid = uid, error = %e, "volume setup failed");
                    first.get_or_insert(e);
                }
            }
        }
        match first {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    async fn setup_volume(
        &self,
        ctx: &PodCtx<'_>,
        vol: &Volume,
        now: Instant,
    ) -> Result<PodVolume, VolumeError> {
        let name = &vol.name;
        if !safe_component(name) {
            return Err(set_up_failed(name)(SetUpError::InvalidName(name.clone())));
        }
        let dir = |plugin: &str| self.volumes_dir(ctx.uid).join(plugin).join(name);
        let client = self.client.as_ref();
        let written = |path: PathBuf| PodVolume {
            path,
            read_only: true,
            size_limit: None,
        };

        if let Some(hp) = &vol.host_path {
            let path = host_path::setup(hp).map_err(set_up_failed(name))?;
            return Ok(PodVolume {
                path,
                read_only: false,
                size_limit: None,
            });
        }
        if let Some(cm) = &vol.config_map {
            let optional = cm.optional.unwrap_or(false);
            let data =
                configmap_secret::fetch(client, Kind::ConfigMap, ctx.namespace, &cm.name, optional)
                    .await
                    .map_err(set_up_failed(name))?;
            let payload = configmap_secret::make_payload(
                Kind::ConfigMap,
                &data.unwrap_or_default(),
                cm.items.as_deref().unwrap_or_default(),
                file_mode(cm.default_mode, DEFAULT_MODE),
                optional,
            )
            .map_err(set_up_failed(name))?;
            let d = dir(CONFIGMAP);
            write_volume(&d, &payload, false, ctx.fs_group).map_err(set_up_failed(name))?;
            return Ok(written(d));
        }
        if let Some(s) = &vol.secret {
            let optional = s.optional.unwrap_or(false);
            let secret_name = s.secret_name.as_deref().unwrap_or_default();
            let data =
                configmap_secret::fetch(client, Kind::Secret, ctx.namespace, secret_name, optional)
                    .await
                    .map_err(set_up_failed(name))?;
            let payload = configmap_secret::make_payload(
                Kind::Secret,
                &data.unwrap_or_default(),
                s.items.as_deref().unwrap_or_default(),
                file_mode(s.default_mode, DEFAULT_MODE),
                optional,
            )
            .map_err(set_up_failed(name))?;
            let d = dir(SECRET);
            write_volume(&d, &payload, true, ctx.fs_group).map_err(set_up_failed(name))?;
            return Ok(written(d));
        }
        if let Some(dapi) = &vol.downward_api {
            let payload = downward_api::make_payload(
                ctx.pod,
                dapi.items.as_deref().unwrap_or_default(),
                dapi.default_mode.unwrap_or(DEFAULT_MODE),
                &ctx.node_allocatable,
            )
            .map_err(set_up_failed(name))?;
            let d = dir(DOWNWARD_API);
            write_volume(&d, &payload, false, ctx.fs_group).map_err(set_up_failed(name))?;
            return Ok(written(d));
        }
        if let Some(p) = &vol.projected {
            let payload = projected::make_payload(client, &self.tokens, ctx, p, now)
                .await
                .map_err(set_up_failed(name))?;
            let d = dir(PROJECTED);
            write_volume(&d, &payload, true, ctx.fs_group).map_err(set_up_failed(name))?;
            return Ok(written(d));
        }
        if let Some(resolved) = self.csi.resolve(ctx.pod, vol).await {
            return match resolved.map_err(set_up_failed(name))? {
                csi::Resolved::Path { path, read_only } => Ok(PodVolume {
                    path,
                    read_only,
                    size_limit: None,
                }),
                csi::Resolved::Csi(spec) => self
                    .csi
                    .setup(ctx.pod, vol, &spec, ctx.fs_group)
                    .await
                    .map_err(set_up_failed(name)),
            };
        }
        let other = volume_kind(vol);
        // A volume without a source is an emptyDir (the API's default).
        if vol.empty_dir.is_some() || other == "unknown" {
            let ed = vol.empty_dir.clone().unwrap_or_default();
            let medium = empty_dir::medium(ed.medium.as_deref()).map_err(set_up_failed(name))?;
            let size = empty_dir::size_limit(ed.size_limit.as_ref().map(|q| q.0.as_str()))
                .map_err(set_up_failed(name))?;
            let d = dir(EMPTY_DIR);
            empty_dir::setup(&d, medium, size, ctx.fs_group).map_err(set_up_failed(name))?;
            return Ok(PodVolume {
                path: d,
                read_only: false,
                size_limit: if medium == empty_dir::Medium::Disk {
                    size
                } else {
                    None
                },
            });
        }
        Err(VolumeError::Unsupported {
            volume: name.clone(),
            kind: other,
        })
    }

    /// Unmounts and removes everything under `PODS_DIR/<uid>/volumes`. hostPath volumes are
    /// used in place and never under it; nothing is removed while anything below is still a
    /// mount point, and symlinks are removed, never followed.
    pub async fn teardown(&self, pod_uid: &str) -> Result<(), VolumeError> {
        if !safe_component(pod_uid) {
            return Err(tear_down_failed(pod_uid)(TearDownError::InvalidPodUid(
                pod_uid.to_string(),
            )));
        }
        self.tokens.forget(pod_uid);
        // CSI volumes first: once unpublished, nothing below is a mount of theirs.
        if let Err(e) = self.csi.teardown(pod_uid).await {
            // Retried by `retry_teardowns` (a driver that is not registered yet, ...).
            self.pending_teardown
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(pod_uid.to_string());
            return Err(tear_down_failed(pod_uid)(e));
        }
        let dir = self.volumes_dir(pod_uid);
        let result = tokio::task::spawn_blocking(move || remove_volumes_dir(&dir))
            .await
            .map_err(tear_down_failed(pod_uid))?
            .map_err(tear_down_failed(pod_uid));
        self.pending_teardown
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(pod_uid);
        result
    }

    /// Tears down again the pods whose CSI volumes could not be torn down (the kubelet's
    /// cleanup loop calls this; upstream's reconciler retries the same way).
    pub async fn retry_teardowns(&self) {
        let pending: Vec<String> = self
            .pending_teardown
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .cloned()
            .collect();
        for uid in pending {
            match self.teardown(&uid).await {
                Ok(()) => tracing::info!(pod_uid = %uid, "pod volumes torn down on retry"),
                Err(e) => tracing::debug!(pod_uid = %uid, error = %e, "pod volumes teardown"),
            }
        }
    }
}

/// For `map_err`: a [`VolumeError::SetUp`] of `volume`.
fn set_up_failed<E: Into<SetUpError>>(volume: &str) -> impl FnOnce(E) -> VolumeError + '_ {
    move |e| VolumeError::SetUp {
        volume: volume.to_string(),
        cause: Box::new(e.into()),
    }
}

/// For `map_err`: a [`VolumeError::TearDown`] of the pod `pod_uid`.
fn tear_down_failed<E: Into<TearDownError>>(pod_uid: &str) -> impl FnOnce(E) -> VolumeError + '_ {
    move |e| VolumeError::TearDown {
        pod_uid: pod_uid.to_string(),
        cause: Box::new(e.into()),
    }
}

/// The directory of an atomic-writer volume (on a tmpfs for secrets and projected volumes),
/// then the payload.
fn write_volume(
    dir: &Path,
    payload: &atomic_writer::Payload,
    tmpfs: bool,
    gid: Option<u32>,
) -> Result<(), SetUpError> {
    empty_dir::ensure_dir(dir, 0o777)?;
    if tmpfs {
        mounts::ensure_tmpfs(dir, None)?;
    }
    atomic_writer::write(dir, payload, gid)?;
    Ok(())
}

fn remove_volumes_dir(dir: &Path) -> Result<(), TearDownError> {
    let meta = match std::fs::symlink_metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(FsError::new("reading", dir, e).into()),
    };
    if !meta.is_dir() {
        // Never ours to follow: remove the entry itself.
        std::fs::remove_file(dir).map_err(FsError::at("removing", dir))?;
        return Ok(());
    }
    for _ in 0..3 {
        let below = mounts::mounts_under(dir).map_err(TearDownError::ReadMounts)?;
        if below.is_empty() {
            break;
        }
        for m in below {
            if m.fs_type != "tmpfs" {
                return Err(TearDownError::ForeignMount {
                    mount_point: m.mount_point,
                    fs_type: m.fs_type,
                    dir: dir.to_path_buf(),
                });
            }
            mounts::unmount(&m.mount_point)?;
        }
    }
    let left = mounts::mounts_under(dir).map_err(TearDownError::ReadMounts)?;
    if let Some(m) = left.into_iter().next() {
        return Err(TearDownError::StillMounted {
            mount_point: m.mount_point,
            dir: dir.to_path_buf(),
        });
    }
    // std's remove_dir_all never follows symlinks (it unlinks them).
    std::fs::remove_dir_all(dir).map_err(FsError::at("removing", dir))?;
    Ok(())
}

/// The container's environment with literal values and pod field references, for
/// `subPathExpr` (values from configMaps, secrets and resources are not resolved here).
fn container_env(pod: &Pod, container: &Container) -> HashMap<String, String> {
    let mut env = HashMap::new();
    for e in container.env.iter().flatten() {
        let value = if let Some(src) = &e.value_from {
            let Some(f) = &src.field_ref else { continue };
            let spec = pod.spec.as_ref();
            let status = pod.status.as_ref();
            let v = match f.field_path.as_str() {
                "spec.nodeName" => spec.and_then(|s| s.node_name.clone()),
                "spec.serviceAccountName" => spec.and_then(|s| s.service_account_name.clone()),
                "status.podIP" => status.and_then(|s| s.pod_ip.clone()),
                "status.hostIP" => status.and_then(|s| s.host_ip.clone()),
                p => downward_api::field_value(pod, p).ok(),
            };
            let Some(v) = v else { continue };
            v
        } else {
            // Earlier variables expand in later values, as upstream's env.
            subpath::expand(e.value.as_deref().unwrap_or_default(), &env).0
        };
        env.insert(e.name.clone(), value);
    }
    env
}

/// The bind mounts of `container`'s volumeMounts: the volume's path, or a sub path inside it
/// (created if missing, refused if it leaves the volume). Read-only if the volumeMount says so
/// or the volume is read-only by nature. Mount propagation is ignored.
/// The host device nodes behind a container's raw block volumes (`volumeDevices`) with the
/// cgroup permissions upstream gives them (`mrw`, or `r` for a read-only volume), for the
/// container's device allow-list. Volumes not set up yet are left out ([`container_mounts`]
/// reports them).
pub fn container_block_devices(
    container: &Container,
    volumes: &PodVolumes,
) -> Vec<crate::runtime::spec::HostDevice> {
    container
        .volume_devices
        .iter()
        .flatten()
        .filter_map(|vd| {
            let v = volumes.get(&vd.name)?;
            Some(crate::runtime::spec::HostDevice {
                container_path: vd.device_path.clone(),
                host_path: v.path.to_string_lossy().into_owned(),
                permissions: if v.read_only { "r" } else { "mrw" }.into(),
            })
        })
        .collect()
}

pub fn container_mounts(
    pod: &Pod,
    container: &Container,
    volumes: &PodVolumes,
) -> Result<Vec<Mount>, VolumeError> {
    let mut env = None;
    let mut out = Vec::new();
    for vm in container.volume_mounts.iter().flatten() {
        let err = |cause: VolumeMountError| VolumeError::Mount {
            container: container.name.clone(),
            volume: vm.name.clone(),
            cause: Box::new(cause),
        };
        let v = volumes.get(&vm.name).ok_or_else(|| {
            err(VolumeMountError::NoVolume {
                volume: vm.name.clone(),
                container: container.name.clone(),
            })
        })?;
        let sub_path = match (
            vm.sub_path.as_deref().filter(|s| !s.is_empty()),
            vm.sub_path_expr.as_deref().filter(|s| !s.is_empty()),
        ) {
            (Some(s), _) => Some(s.to_string()),
            (None, Some(expr)) => {
                let env = env.get_or_insert_with(|| container_env(pod, container));
                let (expanded, missing) = subpath::expand(expr, env);
                if !missing.is_empty() {
                    return Err(err(VolumeMountError::MissingVariables {
                        volume: vm.name.clone(),
                        container: container.name.clone(),
                        missing,
                    }));
                }
                Some(expanded)
            }
            (None, None) => None,
        };
        let source = match &sub_path {
            Some(s) => subpath::resolve(&v.path, s).map_err(|e| err(e.into()))?,
            None => v.path.clone(),
        };
        let read_only = vm.read_only.unwrap_or(false) || v.read_only;
        let mut m = Mount::bind(&source, &vm.mount_path, read_only);
        // Sockets and devices are bound onto a file, like regular files.
        m.file = std::fs::metadata(&source).is_ok_and(|m| !m.is_dir());
        out.push(m);
    }
    // Raw block volumes: the published device node, bound onto a file at devicePath.
    for vd in container.volume_devices.iter().flatten() {
        let v = volumes.get(&vd.name).ok_or_else(|| VolumeError::Mount {
            container: container.name.clone(),
            volume: vd.name.clone(),
            cause: Box::new(VolumeMountError::NoDevice {
                volume: vd.name.clone(),
                container: container.name.clone(),
            }),
        })?;
        let mut m = Mount::bind(&v.path, &vd.device_path, v.read_only);
        m.file = true;
        out.push(m);
    }
    Ok(out)
}
