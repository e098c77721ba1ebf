//! The CSI volume plugin of the volume manager, and the persistent volumes it resolves:
//! `persistentVolumeClaim` volumes (the claim must be Bound; its PV may be `csi`, `hostPath`
//! or `local`), generic `ephemeral` volumes (the claim `<pod>-<volume>` a controller creates,
//! owned by the pod) and inline ephemeral `csi` volumes.
//!
//! For a CSI volume, as upstream's csi_attacher and csi_mounter: wait for the VolumeAttachment
//! `csi-<sha256(handle+driver+node)>` when the `CSIDriver` requires attaching (the default when
//! it has no CSIDriver object); NodeStageVolume once per volume and node to
//! `ROOT/plugins/kubernetes.io/csi/<driver>/<sha256(handle)>/globalmount` when the plugin has
//! STAGE_UNSTAGE_VOLUME; NodePublishVolume per pod to
//! `PODS_DIR/<uid>/volumes/kubernetes.io~csi/<volume>/mount`; fsGroup ownership unless the
//! driver's fsGroupPolicy is `None`; NodeExpandVolume when the PV grew past the claim's
//! capacity. Teardown: NodeUnpublishVolume per pod, NodeUnstageVolume when no pod on the node
//! uses the volume any more.
//!
//! What is staged and published is kept in memory and in `vol_data.json` files beside each
//! staging and target path, from which [`CsiVolumes::reconstruct`] rebuilds it when the
//! kubelet starts, so a restart neither leaks nor stages twice. All stage/publish/unpublish/
//! unstage decisions are serialized by one lock.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use k1s_api::client::{Client, Patch, ResourceRef, WriteParams};
use k1s_api::quantity::Quantity;
use k1s_csi::proto::v1::volume_capability::access_mode::Mode;
use k1s_csi::proto::v1::volume_capability::{AccessMode, AccessType, BlockVolume, MountVolume};
use k1s_csi::proto::v1::{
    CapacityRange, NodeExpandVolumeRequest, NodePublishVolumeRequest, NodeStageVolumeRequest,
    VolumeCapability,
};
use k8s_openapi::api::core::v1::{
    PersistentVolume, PersistentVolumeClaim, Pod, SecretReference, Volume,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::configmap_secret::{self, Kind};
use super::{FsError, PodVolume};
use crate::csi::metrics::VolumeStats;
use crate::csi::nodeinfo::hex;
use crate::csi::{CsiDrivers, Driver, NodeCap};

/// Upstream's plugin directory name of CSI volumes in a pod.
pub const CSI_DIR: &str = "kubernetes.io~csi";
/// The file beside a target or staging path that says what is mounted there.
pub const VOL_DATA: &str = "vol_data.json";

/// What `vol_data.json` records (upstream's keys, plus the staging path).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolData {
    pub driver_name: String,
    pub volume_handle: String,
    #[serde(rename = "specVolID")]
    pub spec_vol_id: String,
    pub node_name: String,
    #[serde(default)]
    pub volume_lifecycle_mode: String,
    /// Empty when the volume was not staged.
    #[serde(default)]
    pub staging_target_path: String,
}

/// The parts of a `CSIDriver` object the kubelet reads, with upstream's defaults for a
/// driver that has none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverPolicy {
    pub attach_required: bool,
    pub pod_info_on_mount: bool,
    pub fs_group_policy: String,
    pub lifecycle_modes: Vec<String>,
}

impl Default for DriverPolicy {
    fn default() -> Self {
        Self {
            attach_required: true,
            pod_info_on_mount: false,
            fs_group_policy: "ReadWriteOnceWithFSType".into(),
            lifecycle_modes: vec!["Persistent".into()],
        }
    }
}

impl DriverPolicy {
    fn from_object(obj: &Value) -> Self {
        let d = Self::default();
        let spec = &obj["spec"];
        Self {
            attach_required: spec["attachRequired"]
                .as_bool()
                .unwrap_or(d.attach_required),
            pod_info_on_mount: spec["podInfoOnMount"].as_bool().unwrap_or(false),
            fs_group_policy: spec["fsGroupPolicy"]
                .as_str()
                .map_or(d.fs_group_policy, str::to_string),
            lifecycle_modes: spec["volumeLifecycleModes"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|m| m.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or(d.lifecycle_modes),
        }
    }
}

/// A CSI volume as resolved from the pod's volume and, for claims, the PV.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CsiSpec {
    pub driver: String,
    pub handle: String,
    pub read_only: bool,
    pub fs_type: String,
    pub mount_options: Vec<String>,
    pub block: bool,
    pub access_mode: i32,
    pub attributes: BTreeMap<String, String>,
    pub stage_secret: Option<(String, String)>,
    pub publish_secret: Option<(String, String)>,
    pub expand_secret: Option<(String, String)>,
    /// An inline (ephemeral) `csi` volume.
    pub ephemeral: bool,
    /// The claim (namespace, name) and PV behind it, for expansion and stats.
    pub claim: Option<(String, String)>,
    pub pv_capacity: Option<i64>,
    /// The PV's access modes include ReadWriteOnce only (for the fsGroup policy).
    pub rwo_only: bool,
}

impl CsiSpec {
    fn capability(&self) -> VolumeCapability {
        VolumeCapability {
            access_mode: Some(AccessMode {
                mode: self.access_mode,
            }),
            access_type: Some(if self.block {
                AccessType::Block(BlockVolume {})
            } else {
                AccessType::Mount(MountVolume {
                    fs_type: self.fs_type.clone(),
                    mount_flags: self.mount_options.clone(),
                    volume_mount_group: String::new(),
                })
            }),
        }
    }
}

/// What a pod volume resolves to.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolved {
    /// A path used in place (hostPath and local PVs).
    Path {
        path: PathBuf,
        read_only: bool,
    },
    Csi(Box<CsiSpec>),
}

pub use k1s_api::volume::attachment_name;

/// The volume handle of an inline ephemeral volume (upstream's makeVolumeHandle).
pub fn ephemeral_handle(pod_uid: &str, volume: &str) -> String {
    let digest = Sha256::digest(format!("{pod_uid}{volume}").as_bytes());
    format!("csi-{}", hex(&digest))
}

fn access_mode(modes: &[String]) -> i32 {
    let has = |m: &str| modes.iter().any(|x| x == m);
    let mode = if has("ReadWriteMany") {
        Mode::MultiNodeMultiWriter
    } else if has("ReadOnlyMany") && !has("ReadWriteOnce") && !has("ReadWriteOncePod") {
        Mode::MultiNodeReaderOnly
    } else {
        Mode::SingleNodeWriter
    };
    mode as i32
}

fn secret_ref(r: &Option<SecretReference>, default_ns: &str) -> Option<(String, String)> {
    r.as_ref().and_then(|s| {
        let name = s.name.clone().filter(|n| !n.is_empty())?;
        Some((
            s.namespace
                .clone()
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| default_ns.to_string()),
            name,
        ))
    })
}

/// Why a persistentVolumeClaim, ephemeral or csi volume cannot be resolved, set up or torn
/// down; worded as upstream's csi plugin and volume manager.
#[derive(Debug, thiserror::Error)]
pub enum CsiVolumeError {
    #[error("persistentvolume {0} has no spec")]
    NoSpec(String),
    #[error(
        "persistentvolume {0} has a volume source k1s cannot mount (only csi, hostPath and local)"
    )]
    UnsupportedSource(String),
    #[error("getting {resource} {name}: {source}")]
    Get {
        resource: String,
        name: String,
        source: k1s_api::client::ClientError,
    },
    #[error("persistentvolumeclaim \"{0}\" not found")]
    ClaimNotFound(String),
    #[error("decoding the claim: {0}")]
    DecodeClaim(#[source] serde_json::Error),
    #[error(
        "PVC {namespace}/{claim} has non-bound phase (\"{phase}\") or empty pvc.Spec.VolumeName (\"{volume}\")"
    )]
    ClaimNotBound {
        namespace: String,
        claim: String,
        phase: String,
        volume: String,
    },
    #[error("persistentvolume \"{0}\" not found")]
    VolumeNotFound(String),
    #[error("decoding the volume: {0}")]
    DecodeVolume(#[source] serde_json::Error),
    #[error("persistentvolume {volume} is not bound to claim {namespace}/{claim}")]
    BoundElsewhere {
        volume: String,
        namespace: String,
        claim: String,
    },
    /// The claim of a generic ephemeral volume is not controlled by the pod.
    #[error("PVC {namespace}/{claim} was not created for pod {namespace}/{pod} (pod is not owner)")]
    NotOwner {
        namespace: String,
        claim: String,
        pod: String,
    },
    /// A stage, publish or expand secret.
    #[error(transparent)]
    Secret(#[from] super::configmap_secret::ConfigMapSecretError),
    #[error(
        "volume {handle} of driver {driver} is not attached yet: waiting for VolumeAttachment {attachment}"
    )]
    NoAttachment {
        handle: String,
        driver: String,
        attachment: String,
    },
    #[error(
        "volume {handle} of driver {driver} is not attached yet: VolumeAttachment {attachment} has attached=false{}",
        attach_error_suffix(.attach_error.as_deref())
    )]
    NotAttached {
        handle: String,
        driver: String,
        attachment: String,
        /// The VolumeAttachment's `status.attachError.message`.
        attach_error: Option<String>,
    },
    #[error("kubernetes.io/csi: driver name {0} not found in the list of registered CSI drivers")]
    DriverNotFound(String),
    #[error("volume {volume} is already published with handle {handle} of driver {driver}")]
    AlreadyPublished {
        volume: String,
        handle: String,
        driver: String,
    },
    #[error("volume mode \"Ephemeral\" not supported by driver {driver} (only supports {modes:?})")]
    EphemeralUnsupported { driver: String, modes: Vec<String> },
    /// NodePublishVolume or NodeUnpublishVolume.
    #[error("rpc error: {0}")]
    Rpc(#[source] k1s_csi::CsiError),
    #[error("rpc error: NodeStageVolume: {0}")]
    Stage(#[source] k1s_csi::CsiError),
    #[error("rpc error: NodeUnstageVolume: {0}")]
    Unstage(#[source] k1s_csi::CsiError),
    #[error("cannot unstage volume {handle}: driver {driver} is not registered")]
    UnstageNoDriver { handle: String, driver: String },
    /// A `vol_data.json` that does not encode.
    #[error(transparent)]
    Encode(serde_json::Error),
    #[error(transparent)]
    Fs(#[from] FsError),
    /// Reading a file or directory while applying the fsGroup.
    #[error("{}: {source}", path.display())]
    Ownership {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    ReadDir(std::io::Error),
    #[error("chown {}: {source}", path.display())]
    Chown {
        path: PathBuf,
        source: nix::errno::Errno,
    },
    #[error(transparent)]
    Task(#[from] tokio::task::JoinError),
}

fn attach_error_suffix(message: Option<&str>) -> String {
    message
        .map(|m| format!(": attach error: {m}"))
        .unwrap_or_default()
}

fn quantity_bytes(
    q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
) -> Option<i64> {
    q.and_then(|q| Quantity::parse(&q.0).ok())
        .map(|q| q.value())
}

/// Resolves a PV (bound to `claim`) to what the pod mounts.
pub fn resolve_pv(
    pv: &PersistentVolume,
    claim: &PersistentVolumeClaim,
    claim_read_only: bool,
) -> Result<Resolved, CsiVolumeError> {
    let pv_name = pv.metadata.name.clone().unwrap_or_default();
    let Some(spec) = pv.spec.as_ref() else {
        return Err(CsiVolumeError::NoSpec(pv_name));
    };
    if let Some(hp) = &spec.host_path {
        return Ok(Resolved::Path {
            path: PathBuf::from(&hp.path),
            read_only: claim_read_only,
        });
    }
    if let Some(local) = &spec.local {
        return Ok(Resolved::Path {
            path: PathBuf::from(&local.path),
            read_only: claim_read_only,
        });
    }
    let Some(csi) = &spec.csi else {
        return Err(CsiVolumeError::UnsupportedSource(pv_name));
    };
    let modes = spec.access_modes.clone().unwrap_or_default();
    let claim_ns = claim.metadata.namespace.clone().unwrap_or_default();
    Ok(Resolved::Csi(Box::new(CsiSpec {
        driver: csi.driver.clone(),
        handle: csi.volume_handle.clone(),
        read_only: claim_read_only || csi.read_only.unwrap_or(false),
        fs_type: csi.fs_type.clone().unwrap_or_default(),
        mount_options: spec.mount_options.clone().unwrap_or_default(),
        block: spec.volume_mode.as_deref() == Some("Block"),
        access_mode: access_mode(&modes),
        attributes: csi.volume_attributes.clone().unwrap_or_default(),
        stage_secret: secret_ref(&csi.node_stage_secret_ref, &claim_ns),
        publish_secret: secret_ref(&csi.node_publish_secret_ref, &claim_ns),
        expand_secret: secret_ref(&csi.node_expand_secret_ref, &claim_ns),
        ephemeral: false,
        claim: Some((claim_ns, claim.metadata.name.clone().unwrap_or_default())),
        pv_capacity: quantity_bytes(spec.capacity.as_ref().and_then(|c| c.get("storage"))),
        rwo_only: !modes.is_empty() && modes.iter().all(|m| m == "ReadWriteOnce"),
    })))
}

/// Two names: (driver, volume handle) or (pod uid, volume name).
pub type Pair = (String, String);

/// Actual state: what is staged and published on this node.
#[derive(Debug, Default)]
struct State {
    /// (driver, handle) → staging path.
    staged: HashMap<(String, String), PathBuf>,
    /// (pod uid, volume name) → what is published there.
    published: HashMap<(String, String), VolData>,
    /// Stages and publishes whose call failed in a way that may still complete in the
    /// plugin: counted as done for cleanup, but called again on the next setup.
    uncertain_stage: std::collections::HashSet<Pair>,
    uncertain_publish: std::collections::HashSet<Pair>,
}

impl State {
    fn users(&self, driver: &str, handle: &str) -> usize {
        self.published
            .values()
            .filter(|d| d.driver_name == driver && d.volume_handle == handle)
            .count()
    }
}

/// The CSI side of the volume manager.
pub struct CsiVolumes {
    client: Arc<dyn Client>,
    /// The kubelet's root (`plugins/` lives here).
    root: PathBuf,
    pods_dir: PathBuf,
    drivers: Arc<CsiDrivers>,
    node_name: OnceLock<String>,
    state: Mutex<State>,
    /// (pod uid, volume) → the claim (namespace, name) behind it, for volume stats.
    claims: Mutex<HashMap<(String, String), (String, String)>>,
    /// Serializes stage/publish/unpublish/unstage.
    ops: tokio::sync::Mutex<()>,
    metrics: crate::csi::metrics::VolumeMetrics,
}

/// Reads a `vol_data.json`.
fn read_vol_data(path: &Path) -> Option<VolData> {
    let text = std::fs::read(path).ok()?;
    serde_json::from_slice(&text).ok()
}

fn write_vol_data(dir: &Path, data: &VolData) -> Result<(), CsiVolumeError> {
    std::fs::create_dir_all(dir).map_err(FsError::at("creating", dir))?;
    let path = dir.join(VOL_DATA);
    let tmp = dir.join(format!(".{VOL_DATA}.tmp"));
    let body = serde_json::to_vec(data).map_err(CsiVolumeError::Encode)?;
    std::fs::write(&tmp, body).map_err(FsError::at("writing", &tmp))?;
    std::fs::rename(&tmp, &path).map_err(FsError::at("writing", &path))?;
    Ok(())
}

impl CsiVolumes {
    pub fn new(client: Arc<dyn Client>, pods_dir: PathBuf) -> Self {
        let root = pods_dir
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| pods_dir.clone());
        Self {
            client,
            root,
            pods_dir,
            drivers: Arc::new(CsiDrivers::default()),
            node_name: OnceLock::new(),
            state: Mutex::new(State::default()),
            claims: Mutex::new(HashMap::new()),
            ops: tokio::sync::Mutex::new(()),
            metrics: Default::default(),
        }
    }

    /// The registered drivers (filled by the registration handler).
    pub fn drivers(&self) -> Arc<CsiDrivers> {
        self.drivers.clone()
    }

    /// The `kubelet_volume_stats_*` gauges.
    pub fn metrics(&self) -> &crate::csi::metrics::VolumeMetrics {
        &self.metrics
    }

    /// Refreshes the gauges from NodeGetVolumeStats of every published claim.
    pub async fn refresh_metrics(&self) {
        let stats = self.claim_stats().await;
        self.metrics.set(&stats);
    }

    /// Sets the node name (once, when the kubelet starts).
    pub fn set_node_name(&self, name: &str) {
        let _ = self.node_name.set(name.to_string());
    }

    fn node_name(&self) -> &str {
        self.node_name.get().map_or("", String::as_str)
    }

    /// `ROOT/plugins_registry`, where plugins put their registration sockets.
    pub fn registry_dir(&self) -> PathBuf {
        self.root.join("plugins_registry")
    }

    /// `ROOT/plugins/kubernetes.io/csi`.
    fn global_dir(&self) -> PathBuf {
        self.root.join("plugins").join("kubernetes.io").join("csi")
    }

    /// The global mount (staging) path of a volume.
    pub fn staging_path(&self, driver: &str, handle: &str) -> PathBuf {
        self.global_dir()
            .join(driver)
            .join(hex(&Sha256::digest(handle.as_bytes())))
            .join("globalmount")
    }

    /// The publish (target) path of a pod's volume.
    pub fn target_path(&self, pod_uid: &str, volume: &str) -> PathBuf {
        self.pods_dir
            .join(pod_uid)
            .join("volumes")
            .join(CSI_DIR)
            .join(volume)
            .join("mount")
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Rebuilds the actual state from the `vol_data.json` files on disk (kubelet start).
    pub fn reconstruct(&self) {
        let mut state = self.state();
        state.staged.clear();
        state.published.clear();
        for driver_dir in read_dirs(&self.global_dir()) {
            for vol_dir in read_dirs(&driver_dir) {
                if let Some(d) = read_vol_data(&vol_dir.join(VOL_DATA)) {
                    state.staged.insert(
                        (d.driver_name.clone(), d.volume_handle.clone()),
                        vol_dir.join("globalmount"),
                    );
                }
            }
        }
        for pod_dir in read_dirs(&self.pods_dir) {
            let Some(uid) = pod_dir.file_name().map(|n| n.to_string_lossy().to_string()) else {
                continue;
            };
            for vol_dir in read_dirs(&pod_dir.join("volumes").join(CSI_DIR)) {
                if let Some(d) = read_vol_data(&vol_dir.join(VOL_DATA)) {
                    state
                        .published
                        .insert((uid.clone(), d.spec_vol_id.clone()), d);
                }
            }
        }
        tracing::info!(
            staged = state.staged.len(),
            published = state.published.len(),
            "reconstructed CSI volume state"
        );
    }

    /// (driver, handle) pairs staged now, and (pod uid, volume) pairs published now.
    pub fn actual(&self) -> (Vec<Pair>, Vec<Pair>) {
        let s = self.state();
        let mut staged: Vec<_> = s.staged.keys().cloned().collect();
        let mut published: Vec<_> = s.published.keys().cloned().collect();
        staged.sort();
        published.sort();
        (staged, published)
    }

    async fn get(&self, r: &ResourceRef, name: &str) -> Result<Option<Value>, CsiVolumeError> {
        match self.client.get(r, name).await {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(source) => Err(CsiVolumeError::Get {
                resource: r.resource.to_string(),
                name: name.to_string(),
                source,
            }),
        }
    }

    /// The claim of a pod volume, and the PV bound to it.
    async fn claim_and_pv(
        &self,
        ns: &str,
        claim_name: &str,
    ) -> Result<(PersistentVolumeClaim, PersistentVolume), CsiVolumeError> {
        let pvcs = ResourceRef::new("", "v1", "persistentvolumeclaims", Some(ns));
        let pvc = self
            .get(&pvcs, claim_name)
            .await?
            .ok_or_else(|| CsiVolumeError::ClaimNotFound(claim_name.to_string()))?;
        let pvc: PersistentVolumeClaim =
            serde_json::from_value(pvc).map_err(CsiVolumeError::DecodeClaim)?;
        let phase = pvc
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default();
        let volume_name = pvc
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.clone())
            .unwrap_or_default();
        if phase != "Bound" || volume_name.is_empty() {
            return Err(CsiVolumeError::ClaimNotBound {
                namespace: ns.to_string(),
                claim: claim_name.to_string(),
                phase,
                volume: volume_name,
            });
        }
        let pvs = ResourceRef::new("", "v1", "persistentvolumes", None);
        let pv = self
            .get(&pvs, &volume_name)
            .await?
            .ok_or_else(|| CsiVolumeError::VolumeNotFound(volume_name.clone()))?;
        let pv: PersistentVolume =
            serde_json::from_value(pv).map_err(CsiVolumeError::DecodeVolume)?;
        let claim_ref = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
        let bound_here = claim_ref.is_some_and(|r| {
            r.name.as_deref() == Some(claim_name)
                && r.namespace.as_deref() == Some(ns)
                && (r.uid.is_none() || r.uid == pvc.metadata.uid)
        });
        if !bound_here {
            return Err(CsiVolumeError::BoundElsewhere {
                volume: volume_name,
                namespace: ns.to_string(),
                claim: claim_name.to_string(),
            });
        }
        Ok((pvc, pv))
    }

    /// What a pod volume of a kind handled here resolves to; `None` for other kinds.
    pub async fn resolve(
        &self,
        pod: &Pod,
        vol: &Volume,
    ) -> Option<Result<Resolved, CsiVolumeError>> {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        if let Some(src) = &vol.persistent_volume_claim {
            let read_only = src.read_only.unwrap_or(false);
            return Some(
                async {
                    let (pvc, pv) = self.claim_and_pv(ns, &src.claim_name).await?;
                    resolve_pv(&pv, &pvc, read_only)
                }
                .await,
            );
        }
        if vol.ephemeral.is_some() {
            let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
            let claim_name = format!("{pod_name}-{}", vol.name);
            return Some(
                async {
                    let (pvc, pv) = self.claim_and_pv(ns, &claim_name).await?;
                    let owned = pvc.metadata.owner_references.iter().flatten().any(|o| {
                        o.controller == Some(true) && Some(&o.uid) == pod.metadata.uid.as_ref()
                    });
                    if !owned {
                        return Err(CsiVolumeError::NotOwner {
                            namespace: ns.to_string(),
                            claim: claim_name.clone(),
                            pod: pod_name.to_string(),
                        });
                    }
                    resolve_pv(&pv, &pvc, false)
                }
                .await,
            );
        }
        if let Some(csi) = &vol.csi {
            let uid = pod.metadata.uid.as_deref().unwrap_or_default();
            let publish_secret = csi
                .node_publish_secret_ref
                .as_ref()
                .map(|r| r.name.clone())
                .filter(|n| !n.is_empty())
                .map(|n| (ns.to_string(), n));
            return Some(Ok(Resolved::Csi(Box::new(CsiSpec {
                driver: csi.driver.clone(),
                handle: ephemeral_handle(uid, &vol.name),
                read_only: csi.read_only.unwrap_or(false),
                fs_type: csi.fs_type.clone().unwrap_or_default(),
                block: false,
                access_mode: Mode::SingleNodeWriter as i32,
                attributes: csi.volume_attributes.clone().unwrap_or_default(),
                publish_secret,
                ephemeral: true,
                ..Default::default()
            }))));
        }
        None
    }

    async fn policy(&self, driver: &str) -> Result<DriverPolicy, CsiVolumeError> {
        let r = ResourceRef::new("storage.k8s.io", "v1", "csidrivers", None);
        Ok(self
            .get(&r, driver)
            .await?
            .map(|o| DriverPolicy::from_object(&o))
            .unwrap_or_default())
    }

    async fn secrets(
        &self,
        r: &Option<(String, String)>,
    ) -> Result<HashMap<String, String>, CsiVolumeError> {
        let Some((ns, name)) = r else {
            return Ok(HashMap::new());
        };
        let data = configmap_secret::fetch(self.client.as_ref(), Kind::Secret, ns, name, false)
            .await?
            .unwrap_or_default();
        Ok(data
            .into_iter()
            .map(|(k, v)| (k, String::from_utf8_lossy(&v).into_owned()))
            .collect())
    }

    /// The publish context from the VolumeAttachment, or why the pod must wait.
    async fn attachment(&self, spec: &CsiSpec) -> Result<HashMap<String, String>, CsiVolumeError> {
        let name = attachment_name(&spec.handle, &spec.driver, self.node_name());
        let r = ResourceRef::new("storage.k8s.io", "v1", "volumeattachments", None);
        let Some(va) = self.get(&r, &name).await? else {
            return Err(CsiVolumeError::NoAttachment {
                handle: spec.handle.clone(),
                driver: spec.driver.clone(),
                attachment: name,
            });
        };
        if va["status"]["attached"].as_bool() != Some(true) {
            return Err(CsiVolumeError::NotAttached {
                handle: spec.handle.clone(),
                driver: spec.driver.clone(),
                attachment: name,
                attach_error: va["status"]["attachError"]["message"]
                    .as_str()
                    .map(str::to_string),
            });
        }
        Ok(va["status"]["attachmentMetadata"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default())
    }

    fn driver(&self, name: &str) -> Result<Driver, CsiVolumeError> {
        self.drivers
            .get(name)
            .ok_or_else(|| CsiVolumeError::DriverNotFound(name.to_string()))
    }

    /// Sets up a CSI volume of `pod` (idempotent) and returns where it is.
    pub async fn setup(
        &self,
        pod: &Pod,
        vol: &Volume,
        spec: &CsiSpec,
        fs_group: Option<u32>,
    ) -> Result<PodVolume, CsiVolumeError> {
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let target = self.target_path(uid, &vol.name);
        let key = (uid.to_string(), vol.name.clone());
        let done = PodVolume {
            path: target.clone(),
            read_only: spec.read_only,
            size_limit: None,
        };
        if let Some(claim) = &spec.claim {
            self.claims
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(key.clone(), claim.clone());
        }
        let driver = self.driver(&spec.driver)?;
        let known = {
            let s = self.state();
            s.published
                .get(&key)
                .filter(|_| !s.uncertain_publish.contains(&key))
                .cloned()
        };
        if let Some(d) = known {
            if d.volume_handle == spec.handle && d.driver_name == spec.driver {
                self.maybe_expand(&driver, spec, &d, &target).await;
                return Ok(done);
            }
            return Err(CsiVolumeError::AlreadyPublished {
                volume: vol.name.clone(),
                handle: d.volume_handle,
                driver: d.driver_name,
            });
        }
        let policy = self.policy(&spec.driver).await?;
        if spec.ephemeral && !policy.lifecycle_modes.iter().any(|m| m == "Ephemeral") {
            return Err(CsiVolumeError::EphemeralUnsupported {
                driver: spec.driver.clone(),
                modes: policy.lifecycle_modes.clone(),
            });
        }
        let publish_context = if policy.attach_required && !spec.ephemeral {
            self.attachment(spec).await?
        } else {
            HashMap::new()
        };
        let _ops = self.ops.lock().await;
        let staging = if driver.has(NodeCap::StageUnstageVolume) && !spec.ephemeral {
            let staging = self.staging_path(&spec.driver, &spec.handle);
            self.stage(&driver, spec, &staging, &publish_context)
                .await?;
            Some(staging)
        } else {
            None
        };
        let mut context: HashMap<String, String> = spec.attributes.clone().into_iter().collect();
        if policy.pod_info_on_mount {
            context.extend(pod_info(pod, spec.ephemeral));
        }
        let data = VolData {
            driver_name: spec.driver.clone(),
            volume_handle: spec.handle.clone(),
            spec_vol_id: vol.name.clone(),
            node_name: self.node_name().to_string(),
            volume_lifecycle_mode: if spec.ephemeral {
                "Ephemeral"
            } else {
                "Persistent"
            }
            .into(),
            staging_target_path: staging
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
        };
        let parent = target.parent().unwrap_or(&target).to_path_buf();
        // Recorded before publishing: a kubelet that dies mid-call unpublishes at start.
        write_vol_data(&parent, &data)?;
        self.state().published.insert(key.clone(), data);
        let req = NodePublishVolumeRequest {
            volume_id: spec.handle.clone(),
            publish_context,
            staging_target_path: staging
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            target_path: target.display().to_string(),
            volume_capability: Some(spec.capability()),
            readonly: spec.read_only,
            secrets: self.secrets(&spec.publish_secret).await?,
            volume_context: context,
        };
        if let Err(e) = driver.plugin.node_publish(req).await {
            if e.is_final() {
                // Certainly not published: forget it (a stage stays until the last user
                // goes; it is cleaned up by `unstage_unused`).
                self.state().published.remove(&key);
                let _ = std::fs::remove_file(parent.join(VOL_DATA));
            } else {
                self.state().uncertain_publish.insert(key.clone());
            }
            return Err(CsiVolumeError::Rpc(e));
        }
        self.state().uncertain_publish.remove(&key);
        if let Some(gid) = fs_group
            && !spec.block
            && !spec.read_only
            && applies_fs_group(&policy, spec)
        {
            let t = target.clone();
            tokio::task::spawn_blocking(move || set_ownership(&t, gid)).await??;
        }
        tracing::info!(pod_uid = uid, volume = %vol.name, driver = %spec.driver, "CSI volume published");
        Ok(done)
    }

    async fn stage(
        &self,
        driver: &Driver,
        spec: &CsiSpec,
        staging: &Path,
        publish_context: &HashMap<String, String>,
    ) -> Result<(), CsiVolumeError> {
        let key = (spec.driver.clone(), spec.handle.clone());
        {
            let s = self.state();
            if s.staged.contains_key(&key) && !s.uncertain_stage.contains(&key) {
                return Ok(());
            }
        }
        let dir = staging.parent().unwrap_or(staging);
        write_vol_data(
            dir,
            &VolData {
                driver_name: spec.driver.clone(),
                volume_handle: spec.handle.clone(),
                spec_vol_id: String::new(),
                node_name: self.node_name().to_string(),
                volume_lifecycle_mode: "Persistent".into(),
                staging_target_path: staging.display().to_string(),
            },
        )?;
        if !spec.block {
            std::fs::create_dir_all(staging).map_err(FsError::at("creating", staging))?;
        }
        let req = NodeStageVolumeRequest {
            volume_id: spec.handle.clone(),
            publish_context: publish_context.clone(),
            staging_target_path: staging.display().to_string(),
            volume_capability: Some(spec.capability()),
            secrets: self.secrets(&spec.stage_secret).await?,
            volume_context: spec.attributes.clone().into_iter().collect(),
        };
        // Recorded as staged even when the call is not final: NodeUnstage cleans up either way.
        self.state()
            .staged
            .insert(key.clone(), staging.to_path_buf());
        if let Err(e) = driver.plugin.node_stage(req).await {
            if e.is_final() {
                self.state().staged.remove(&key);
                let _ = std::fs::remove_file(dir.join(VOL_DATA));
            } else {
                self.state().uncertain_stage.insert(key.clone());
            }
            return Err(CsiVolumeError::Stage(e));
        }
        self.state().uncertain_stage.remove(&key);
        Ok(())
    }

    /// NodeExpandVolume when the PV is larger than the claim's capacity, then the claim's
    /// status as upstream's kubelet leaves it. Failures are logged and retried next sync.
    async fn maybe_expand(&self, driver: &Driver, spec: &CsiSpec, data: &VolData, target: &Path) {
        let (Some((ns, name)), Some(pv_cap)) = (&spec.claim, spec.pv_capacity) else {
            return;
        };
        if !driver.has(NodeCap::ExpandVolume) {
            return;
        }
        let pvcs = ResourceRef::new("", "v1", "persistentvolumeclaims", Some(ns));
        let Ok(Some(pvc)) = self.get(&pvcs, name).await else {
            return;
        };
        let current = pvc["status"]["capacity"]["storage"]
            .as_str()
            .and_then(|s| Quantity::parse(s).ok())
            .map(|q| q.value());
        if current.is_none_or(|c| c >= pv_cap) {
            return;
        }
        let secrets = match self.secrets(&spec.expand_secret).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(claim = %name, error = %e, "node expansion secrets");
                return;
            }
        };
        let req = NodeExpandVolumeRequest {
            volume_id: spec.handle.clone(),
            volume_path: target.display().to_string(),
            capacity_range: Some(CapacityRange {
                required_bytes: pv_cap,
                limit_bytes: 0,
            }),
            staging_target_path: data.staging_target_path.clone(),
            volume_capability: Some(spec.capability()),
            secrets,
        };
        if let Err(e) = driver.plugin.node_expand(req).await {
            tracing::warn!(claim = %name, error = %e, "NodeExpandVolume failed; will retry");
            return;
        }
        let conditions: Vec<Value> = pvc["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["type"] != "FileSystemResizePending" && c["type"] != "Resizing")
            .cloned()
            .collect();
        let cap = pvc["spec"]["resources"]["requests"]["storage"]
            .as_str()
            .and_then(|s| Quantity::parse(s).ok())
            .filter(|q| q.value() == pv_cap)
            .map_or_else(|| pv_cap.to_string(), |q| q.to_string());
        let patch = json!({"status": {"capacity": {"storage": cap}, "conditions": conditions}});
        match self
            .client
            .patch(
                &pvcs,
                name,
                &Patch::Merge(patch),
                Some("status"),
                &WriteParams::default(),
            )
            .await
        {
            Ok(_) => tracing::info!(claim = %name, bytes = pv_cap, "volume expanded on the node"),
            Err(e) => {
                tracing::warn!(claim = %name, error = %e, "updating the claim after node expansion")
            }
        }
    }

    /// Unpublishes every CSI volume of the pod (from what is on disk, so it works after a
    /// restart too), then unstages volumes no other pod uses.
    pub async fn teardown(&self, pod_uid: &str) -> Result<(), CsiVolumeError> {
        let dir = self.pods_dir.join(pod_uid).join("volumes").join(CSI_DIR);
        let _ops = self.ops.lock().await;
        let mut first = None;
        for vol_dir in read_dirs(&dir) {
            let Some(data) = read_vol_data(&vol_dir.join(VOL_DATA)) else {
                continue;
            };
            if let Err(e) = self.unpublish(pod_uid, &vol_dir, &data).await {
                first.get_or_insert(e);
            }
        }
        if let Some(e) = first {
            return Err(e);
        }
        self.unstage_unused_locked().await
    }

    async fn unpublish(
        &self,
        pod_uid: &str,
        vol_dir: &Path,
        data: &VolData,
    ) -> Result<(), CsiVolumeError> {
        let driver = self.driver(&data.driver_name)?;
        let target = vol_dir.join("mount");
        driver
            .plugin
            .node_unpublish(&data.volume_handle, &target.display().to_string())
            .await
            .map_err(CsiVolumeError::Rpc)?;
        // The plugin removes the target; anything left that is not a mount goes with the
        // volumes directory.
        let _ = std::fs::remove_file(vol_dir.join(VOL_DATA));
        let key = (pod_uid.to_string(), data.spec_vol_id.clone());
        let mut s = self.state();
        s.published.remove(&key);
        s.uncertain_publish.remove(&key);
        drop(s);
        self.claims
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&key);
        tracing::info!(pod_uid, volume = %data.spec_vol_id, driver = %data.driver_name, "CSI volume unpublished");
        Ok(())
    }

    /// NodeUnstageVolume for every staged volume without a user on this node.
    pub async fn unstage_unused(&self) -> Result<(), CsiVolumeError> {
        let _ops = self.ops.lock().await;
        self.unstage_unused_locked().await
    }

    async fn unstage_unused_locked(&self) -> Result<(), CsiVolumeError> {
        let unused: Vec<((String, String), PathBuf)> = {
            let s = self.state();
            s.staged
                .iter()
                .filter(|((d, h), _)| s.users(d, h) == 0)
                .map(|(k, p)| (k.clone(), p.clone()))
                .collect()
        };
        let mut first = None;
        for ((driver_name, handle), staging) in unused {
            let Some(driver) = self.drivers.get(&driver_name) else {
                first.get_or_insert(CsiVolumeError::UnstageNoDriver {
                    handle,
                    driver: driver_name,
                });
                continue;
            };
            match driver
                .plugin
                .node_unstage(&handle, &staging.display().to_string())
                .await
            {
                Ok(()) => {
                    let key = (driver_name.clone(), handle.clone());
                    let mut s = self.state();
                    s.staged.remove(&key);
                    s.uncertain_stage.remove(&key);
                    drop(s);
                    if let Some(dir) = staging.parent() {
                        let _ = std::fs::remove_file(dir.join(VOL_DATA));
                        let _ = std::fs::remove_dir(&staging);
                        let _ = std::fs::remove_dir(dir);
                    }
                    tracing::info!(driver = %driver_name, volume = %handle, "CSI volume unstaged");
                }
                Err(e) => {
                    first.get_or_insert(CsiVolumeError::Unstage(e));
                }
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// NodeGetVolumeStats of every published claim whose driver has GET_VOLUME_STATS:
    /// ((namespace, claim), usage).
    pub async fn claim_stats(&self) -> Vec<((String, String), VolumeStats)> {
        let published: Vec<((String, String), VolData)> = self
            .state()
            .published
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut out = Vec::new();
        for ((uid, _), data) in published {
            let Some(driver) = self.drivers.get(&data.driver_name) else {
                continue;
            };
            if !driver.has(NodeCap::GetVolumeStats) {
                continue;
            }
            let Some(claim) = self
                .claims
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&(uid.clone(), data.spec_vol_id.clone()))
                .cloned()
            else {
                continue;
            };
            let target = self.target_path(&uid, &data.spec_vol_id);
            match driver
                .plugin
                .node_volume_stats(&data.volume_handle, &target.display().to_string())
                .await
            {
                Ok(resp) => out.push((claim, VolumeStats::from_usage(&resp.usage))),
                Err(e) => {
                    tracing::debug!(volume = %data.volume_handle, error = %e, "NodeGetVolumeStats")
                }
            }
        }
        out
    }
}

/// Whether fsGroup ownership applies: never with policy `None`, always with `File`, and
/// with the default `ReadWriteOnceWithFSType` only for an fsType on a ReadWriteOnce volume.
fn applies_fs_group(policy: &DriverPolicy, spec: &CsiSpec) -> bool {
    match policy.fs_group_policy.as_str() {
        "None" => false,
        "File" => true,
        _ => !spec.fs_type.is_empty() && (spec.rwo_only || spec.ephemeral),
    }
}

/// The `csi.storage.k8s.io/*` volume context of a driver with podInfoOnMount.
fn pod_info(pod: &Pod, ephemeral: bool) -> Vec<(String, String)> {
    let m = &pod.metadata;
    vec![
        (
            "csi.storage.k8s.io/pod.name".into(),
            m.name.clone().unwrap_or_default(),
        ),
        (
            "csi.storage.k8s.io/pod.namespace".into(),
            m.namespace.clone().unwrap_or_default(),
        ),
        (
            "csi.storage.k8s.io/pod.uid".into(),
            m.uid.clone().unwrap_or_default(),
        ),
        (
            "csi.storage.k8s.io/serviceAccount.name".into(),
            pod.spec
                .as_ref()
                .and_then(|s| s.service_account_name.clone())
                .unwrap_or_else(|| "default".into()),
        ),
        ("csi.storage.k8s.io/ephemeral".into(), ephemeral.to_string()),
    ]
}

/// Group `gid` and group read/write (setgid on directories) on everything under `root`,
/// as upstream's SetVolumeOwnership. Symlinks are not followed.
fn set_ownership(root: &Path, gid: u32) -> Result<(), CsiVolumeError> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let ownership = |path: &Path| {
        let path = path.to_path_buf();
        move |source| CsiVolumeError::Ownership { path, source }
    };
    let mut stack = vec![root.to_path_buf()];
    while let Some(p) = stack.pop() {
        let meta = std::fs::symlink_metadata(&p).map_err(ownership(&p))?;
        if meta.file_type().is_symlink() {
            continue;
        }
        nix::unistd::fchownat(
            nix::fcntl::AT_FDCWD,
            &p,
            None,
            Some(nix::unistd::Gid::from_raw(gid)),
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .map_err(|source| CsiVolumeError::Chown {
            path: p.clone(),
            source,
        })?;
        let mut mode = meta.mode() & 0o7777 | 0o060;
        if meta.is_dir() {
            mode |= 0o2010;
            for e in std::fs::read_dir(&p).map_err(ownership(&p))? {
                stack.push(e.map_err(CsiVolumeError::ReadDir)?.path());
            }
        }
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode))
            .map_err(FsError::at("chmod", &p))?;
    }
    Ok(())
}

/// The subdirectories of `dir` (none if it is missing).
fn read_dirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use k1s_csi::CsiError;
    use k1s_csi::proto::v1::{NodeGetInfoResponse, NodeGetVolumeStatsResponse};

    use super::*;
    use crate::csi::NodePlugin;

    use crate::volumes::tests::FakeClient;

    /// A node plugin that records every call (method and the interesting arguments).
    #[derive(Default)]
    struct Recorder {
        calls: Mutex<Vec<String>>,
        stages: Mutex<Vec<NodeStageVolumeRequest>>,
        publishes: Mutex<Vec<NodePublishVolumeRequest>>,
        /// The next NodeStage and NodePublish fail with this code.
        fail_next: Mutex<Option<tonic::Code>>,
    }

    impl Recorder {
        fn calls(&self) -> Vec<String> {
            std::mem::take(&mut *self.calls.lock().unwrap())
        }
        fn log(&self, s: String) {
            self.calls.lock().unwrap().push(s);
        }
        fn failure(&self, method: &'static str) -> Result<(), CsiError> {
            match self.fail_next.lock().unwrap().take() {
                Some(code) => Err(CsiError::Rpc {
                    method,
                    code,
                    message: "injected".into(),
                }),
                None => Ok(()),
            }
        }
    }

    #[async_trait::async_trait]
    impl NodePlugin for Recorder {
        async fn probe(&self) -> Result<bool, CsiError> {
            Ok(true)
        }
        async fn node_info(&self) -> Result<NodeGetInfoResponse, CsiError> {
            Ok(NodeGetInfoResponse {
                node_id: "n1".into(),
                ..Default::default()
            })
        }
        async fn node_capabilities(&self) -> Result<HashSet<NodeCap>, CsiError> {
            Ok(HashSet::new())
        }
        async fn node_stage(&self, req: NodeStageVolumeRequest) -> Result<(), CsiError> {
            self.log(format!("stage {}", req.volume_id));
            self.failure("NodeStageVolume")?;
            self.stages.lock().unwrap().push(req);
            Ok(())
        }
        async fn node_unstage(&self, id: &str, _: &str) -> Result<(), CsiError> {
            self.log(format!("unstage {id}"));
            Ok(())
        }
        async fn node_publish(&self, req: NodePublishVolumeRequest) -> Result<(), CsiError> {
            let uid = req
                .target_path
                .split('/')
                .rev()
                .nth(4)
                .unwrap_or("")
                .to_string();
            self.log(format!("publish {} {uid}", req.volume_id));
            self.failure("NodePublishVolume")?;
            std::fs::create_dir_all(&req.target_path).unwrap();
            self.publishes.lock().unwrap().push(req);
            Ok(())
        }
        async fn node_unpublish(&self, id: &str, target: &str) -> Result<(), CsiError> {
            let uid = target.split('/').rev().nth(4).unwrap_or("").to_string();
            self.log(format!("unpublish {id} {uid}"));
            let _ = std::fs::remove_dir(target);
            Ok(())
        }
        async fn node_volume_stats(
            &self,
            _: &str,
            _: &str,
        ) -> Result<NodeGetVolumeStatsResponse, CsiError> {
            Ok(NodeGetVolumeStatsResponse::default())
        }
        async fn node_expand(&self, req: NodeExpandVolumeRequest) -> Result<i64, CsiError> {
            self.log(format!(
                "expand {} {}",
                req.volume_id,
                req.capacity_range.map_or(0, |c| c.required_bytes)
            ));
            Ok(0)
        }
    }

    const DRIVER: &str = "rec.csi.k1s.io";

    struct Env {
        dir: tempfile::TempDir,
        client: Arc<FakeClient>,
        plugin: Arc<Recorder>,
        csi: CsiVolumes,
    }

    fn volumes(
        env_dir: &Path,
        client: Arc<FakeClient>,
        plugin: Arc<Recorder>,
        caps: &[NodeCap],
    ) -> CsiVolumes {
        let csi = CsiVolumes::new(client, env_dir.join("agent").join("pods"));
        csi.set_node_name("n1");
        csi.drivers().insert(
            DRIVER,
            Driver {
                plugin,
                endpoint: PathBuf::from("/unused"),
                capabilities: caps.iter().copied().collect(),
                topology_keys: Vec::new(),
            },
        );
        csi
    }

    fn env(caps: &[NodeCap]) -> Env {
        let dir = tempfile::tempdir().unwrap();
        let client = Arc::new(FakeClient::default());
        let plugin = Arc::new(Recorder::default());
        let csi = volumes(dir.path(), client.clone(), plugin.clone(), caps);
        Env {
            dir,
            client,
            plugin,
            csi,
        }
    }

    /// A Bound claim `data` in `ns` and its CSI PV with handle `vol-1`.
    fn claim(env: &Env, driver_spec: Option<Value>) {
        env.client.put(
            "persistentvolumeclaims",
            "ns",
            json!({"metadata": {"name": "data", "namespace": "ns", "uid": "c-1"},
                   "spec": {"volumeName": "pv-1", "resources": {"requests": {"storage": "1Gi"}}},
                   "status": {"phase": "Bound", "capacity": {"storage": "1Gi"}}}),
        );
        env.client.put(
            "persistentvolumes",
            "",
            json!({"metadata": {"name": "pv-1"},
                   "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                            "claimRef": {"namespace": "ns", "name": "data", "uid": "c-1"},
                            "mountOptions": ["noatime"],
                            "csi": {"driver": DRIVER, "volumeHandle": "vol-1", "fsType": "ext4",
                                    "volumeAttributes": {"k": "v"}}}}),
        );
        if let Some(spec) = driver_spec {
            env.client.put(
                "csidrivers",
                "",
                json!({"metadata": {"name": DRIVER}, "spec": spec}),
            );
        }
    }

    fn pod(uid: &str, volume: Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": format!("p-{uid}"), "namespace": "ns", "uid": uid},
            "spec": {"serviceAccountName": "sa", "containers": [{"name": "c", "image": "x"}],
                     "volumes": [volume]},
        }))
        .unwrap()
    }

    fn pvc_volume() -> Value {
        json!({"name": "data", "persistentVolumeClaim": {"claimName": "data"}})
    }

    async fn setup(env: &Env, pod: &Pod) -> Result<PodVolume, CsiVolumeError> {
        let vol = &pod.spec.as_ref().unwrap().volumes.as_ref().unwrap()[0];
        match env.csi.resolve(pod, vol).await.expect("handled here")? {
            Resolved::Csi(spec) => env.csi.setup(pod, vol, &spec, None).await,
            Resolved::Path { .. } => panic!("not a CSI volume"),
        }
    }

    #[tokio::test]
    async fn stage_once_publish_per_pod_unstage_after_the_last_pod() {
        let env = env(&[NodeCap::StageUnstageVolume]);
        claim(&env, Some(json!({"attachRequired": false})));
        let (a, b) = (pod("a", pvc_volume()), pod("b", pvc_volume()));
        let v = setup(&env, &a).await.unwrap();
        assert_eq!(v.path, env.csi.target_path("a", "data"));
        setup(&env, &b).await.unwrap();
        setup(&env, &a).await.unwrap(); // a resync: nothing new
        assert_eq!(
            env.plugin.calls(),
            ["stage vol-1", "publish vol-1 a", "publish vol-1 b"]
        );
        let stage = env.plugin.stages.lock().unwrap()[0].clone();
        assert_eq!(
            PathBuf::from(&stage.staging_target_path),
            env.csi.staging_path(DRIVER, "vol-1")
        );
        assert!(stage.staging_target_path.ends_with("/globalmount"));
        let cap = stage.volume_capability.unwrap();
        assert_eq!(
            cap.access_type,
            Some(AccessType::Mount(MountVolume {
                fs_type: "ext4".into(),
                mount_flags: vec!["noatime".into()],
                volume_mount_group: String::new(),
            }))
        );
        assert_eq!(cap.access_mode.unwrap().mode, Mode::SingleNodeWriter as i32);
        let publish = env.plugin.publishes.lock().unwrap()[0].clone();
        assert_eq!(publish.staging_target_path, stage.staging_target_path);
        assert_eq!(
            publish.volume_context.get("k").map(String::as_str),
            Some("v")
        );
        assert!(
            !publish
                .volume_context
                .contains_key("csi.storage.k8s.io/pod.name")
        );

        env.csi.teardown("a").await.unwrap();
        assert_eq!(env.plugin.calls(), ["unpublish vol-1 a"]);
        env.csi.teardown("b").await.unwrap();
        assert_eq!(env.plugin.calls(), ["unpublish vol-1 b", "unstage vol-1"]);
        assert_eq!(env.csi.actual(), (vec![], vec![]));
        // Torn down twice: nothing left to do.
        env.csi.teardown("b").await.unwrap();
        assert!(env.plugin.calls().is_empty());
    }

    #[tokio::test]
    async fn calls_that_may_still_complete_are_made_again_and_final_failures_forgotten() {
        let env = env(&[NodeCap::StageUnstageVolume]);
        claim(&env, Some(json!({"attachRequired": false})));
        let a = pod("a", pvc_volume());
        // A stage timing out is staged as far as cleanup knows, and staged again next time.
        *env.plugin.fail_next.lock().unwrap() = Some(tonic::Code::DeadlineExceeded);
        assert!(setup(&env, &a).await.is_err());
        assert_eq!(env.csi.actual().0.len(), 1);
        setup(&env, &a).await.unwrap();
        assert_eq!(
            env.plugin.calls(),
            ["stage vol-1", "stage vol-1", "publish vol-1 a"]
        );
        // A publish timing out is published again; a refused one is forgotten.
        let b = pod("b", pvc_volume());
        *env.plugin.fail_next.lock().unwrap() = Some(tonic::Code::Unavailable);
        assert!(setup(&env, &b).await.is_err());
        assert!(env.csi.actual().1.contains(&("b".into(), "data".into())));
        setup(&env, &b).await.unwrap();
        let c = pod("c", pvc_volume());
        *env.plugin.fail_next.lock().unwrap() = Some(tonic::Code::InvalidArgument);
        assert!(setup(&env, &c).await.is_err());
        assert!(!env.csi.actual().1.contains(&("c".into(), "data".into())));
        assert_eq!(
            env.plugin.calls(),
            ["publish vol-1 b", "publish vol-1 b", "publish vol-1 c"]
        );
        env.csi.teardown("c").await.unwrap();
        assert!(env.plugin.calls().is_empty(), "nothing published for c");
    }

    #[tokio::test]
    async fn a_teardown_without_the_driver_is_retried_once_it_registers() {
        let env = env(&[]);
        claim(&env, Some(json!({"attachRequired": false})));
        let vm = super::super::VolumeManager::new(
            env.client.clone(),
            env.dir.path().join("agent").join("pods"),
        );
        vm.csi().set_node_name("n1");
        let driver = env.csi.drivers().get(DRIVER).unwrap();
        vm.csi().drivers().insert(DRIVER, driver.clone());
        let a = pod("a", pvc_volume());
        vm.setup(&a).await.unwrap();
        vm.csi().drivers().remove(DRIVER);
        let err = vm.teardown("a").await.unwrap_err();
        assert!(err.to_string().contains("not found in the list"), "{err}");
        vm.retry_teardowns().await;
        assert!(vm.volumes_dir("a").exists());
        vm.csi().drivers().insert(DRIVER, driver);
        vm.retry_teardowns().await;
        assert!(!vm.volumes_dir("a").exists());
        assert_eq!(env.plugin.calls(), ["publish vol-1 a", "unpublish vol-1 a"]);
        vm.retry_teardowns().await;
        assert!(env.plugin.calls().is_empty(), "done once");
    }

    #[tokio::test]
    async fn without_stage_unstage_only_publish_is_called() {
        let env = env(&[]);
        claim(&env, Some(json!({"attachRequired": false})));
        setup(&env, &pod("a", pvc_volume())).await.unwrap();
        env.csi.teardown("a").await.unwrap();
        assert_eq!(env.plugin.calls(), ["publish vol-1 a", "unpublish vol-1 a"]);
    }

    #[tokio::test]
    async fn a_restarted_kubelet_rebuilds_its_state_and_neither_leaks_nor_stages_twice() {
        let env = env(&[NodeCap::StageUnstageVolume]);
        claim(&env, Some(json!({"attachRequired": false})));
        setup(&env, &pod("a", pvc_volume())).await.unwrap();
        setup(&env, &pod("b", pvc_volume())).await.unwrap();
        let before = env.csi.actual();
        env.plugin.calls();

        let plugin = Arc::new(Recorder::default());
        let restarted = volumes(
            env.dir.path(),
            env.client.clone(),
            plugin.clone(),
            &[NodeCap::StageUnstageVolume],
        );
        restarted.reconstruct();
        assert_eq!(restarted.actual(), before);
        assert_eq!(before.0, [(DRIVER.to_string(), "vol-1".to_string())]);
        // Pod a is still there: its sync finds everything in place.
        let env2 = Env {
            dir: tempfile::tempdir().unwrap(),
            client: env.client.clone(),
            plugin: plugin.clone(),
            csi: restarted,
        };
        setup(&env2, &pod("a", pvc_volume())).await.unwrap();
        assert!(plugin.calls().is_empty(), "no second stage or publish");
        // Pod b went away while the kubelet was down, pod a later.
        env2.csi.teardown("b").await.unwrap();
        env2.csi.teardown("a").await.unwrap();
        assert_eq!(
            plugin.calls(),
            ["unpublish vol-1 b", "unpublish vol-1 a", "unstage vol-1"]
        );
    }

    #[tokio::test]
    async fn a_volume_staged_for_no_pod_is_unstaged_after_a_restart() {
        let env = env(&[NodeCap::StageUnstageVolume]);
        claim(&env, Some(json!({"attachRequired": false})));
        setup(&env, &pod("a", pvc_volume())).await.unwrap();
        env.plugin.calls();
        // The pod directory vanished (removed while the kubelet was down).
        std::fs::remove_dir_all(env.dir.path().join("agent/pods/a")).unwrap();
        env.csi.reconstruct();
        env.csi.unstage_unused().await.unwrap();
        assert_eq!(env.plugin.calls(), ["unstage vol-1"]);
    }

    #[tokio::test]
    async fn attach_required_waits_for_the_volume_attachment() {
        // No CSIDriver object: attach is required.
        let env = env(&[NodeCap::StageUnstageVolume]);
        claim(&env, None);
        let a = pod("a", pvc_volume());
        let va = attachment_name("vol-1", DRIVER, "n1");
        assert_eq!(va.len(), 4 + 64);
        let err = setup(&env, &a).await.unwrap_err();
        assert!(err.to_string().contains(&va), "{err}");
        env.client.put(
            "volumeattachments",
            "",
            json!({"metadata": {"name": va}, "status": {"attached": false,
                   "attachError": {"message": "boom"}}}),
        );
        let err = setup(&env, &a).await.unwrap_err();
        assert!(matches!(err, CsiVolumeError::NotAttached { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            format!(
                "volume vol-1 of driver {DRIVER} is not attached yet: VolumeAttachment {va} has attached=false: attach error: boom"
            )
        );
        assert!(env.plugin.calls().is_empty());
        env.client.put(
            "volumeattachments",
            "",
            json!({"metadata": {"name": va}, "status": {"attached": true,
                   "attachmentMetadata": {"devicePath": "/dev/x"}}}),
        );
        setup(&env, &a).await.unwrap();
        let stage = env.plugin.stages.lock().unwrap()[0].clone();
        assert_eq!(
            stage.publish_context.get("devicePath").map(String::as_str),
            Some("/dev/x")
        );
        let publish = env.plugin.publishes.lock().unwrap()[0].clone();
        assert_eq!(publish.publish_context, stage.publish_context);
    }

    #[tokio::test]
    async fn pod_info_on_mount_adds_the_pod_to_the_volume_context() {
        let env = env(&[]);
        claim(
            &env,
            Some(json!({"attachRequired": false, "podInfoOnMount": true})),
        );
        setup(&env, &pod("a", pvc_volume())).await.unwrap();
        let ctx = env.plugin.publishes.lock().unwrap()[0]
            .volume_context
            .clone();
        let get = |k: &str| ctx.get(k).map(String::as_str);
        assert_eq!(get("csi.storage.k8s.io/pod.name"), Some("p-a"));
        assert_eq!(get("csi.storage.k8s.io/pod.namespace"), Some("ns"));
        assert_eq!(get("csi.storage.k8s.io/pod.uid"), Some("a"));
        assert_eq!(get("csi.storage.k8s.io/serviceAccount.name"), Some("sa"));
        assert_eq!(get("csi.storage.k8s.io/ephemeral"), Some("false"));
        assert_eq!(get("k"), Some("v"));
    }

    #[tokio::test]
    async fn a_claim_must_be_bound_and_the_driver_registered() {
        let env = env(&[]);
        env.client.put(
            "persistentvolumeclaims",
            "ns",
            json!({"metadata": {"name": "data", "namespace": "ns"}, "spec": {},
                   "status": {"phase": "Pending"}}),
        );
        let err = setup(&env, &pod("a", pvc_volume())).await.unwrap_err();
        assert!(
            matches!(err, CsiVolumeError::ClaimNotBound { .. }),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "PVC ns/data has non-bound phase (\"Pending\") or empty pvc.Spec.VolumeName (\"\")"
        );
        claim(&env, Some(json!({"attachRequired": false})));
        env.csi.drivers().remove(DRIVER);
        let err = setup(&env, &pod("a", pvc_volume())).await.unwrap_err();
        assert!(
            err.to_string()
                .contains("not found in the list of registered CSI drivers"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn inline_volumes_need_the_ephemeral_mode_and_are_never_staged() {
        let env = env(&[NodeCap::StageUnstageVolume]);
        let inline = json!({"name": "scratch", "csi": {"driver": DRIVER,
                            "volumeAttributes": {"size": "1"}}});
        env.client.put(
            "csidrivers",
            "",
            json!({"metadata": {"name": DRIVER}, "spec": {"volumeLifecycleModes": ["Persistent"]}}),
        );
        let err = setup(&env, &pod("a", inline.clone())).await.unwrap_err();
        assert!(
            err.to_string().contains("\"Ephemeral\" not supported"),
            "{err}"
        );
        env.client.put(
            "csidrivers",
            "",
            json!({"metadata": {"name": DRIVER}, "spec": {"volumeLifecycleModes": ["Ephemeral"],
                   "podInfoOnMount": true}}),
        );
        setup(&env, &pod("a", inline)).await.unwrap();
        let handle = ephemeral_handle("a", "scratch");
        assert_eq!(env.plugin.calls(), [format!("publish {handle} a")]);
        let ctx = env.plugin.publishes.lock().unwrap()[0]
            .volume_context
            .clone();
        assert_eq!(
            ctx.get("csi.storage.k8s.io/ephemeral").map(String::as_str),
            Some("true")
        );
        env.csi.teardown("a").await.unwrap();
        assert_eq!(env.plugin.calls(), [format!("unpublish {handle} a")]);
    }

    #[tokio::test]
    async fn generic_ephemeral_claims_must_belong_to_the_pod() {
        let env = env(&[]);
        env.client.put(
            "csidrivers",
            "",
            json!({"metadata": {"name": DRIVER}, "spec": {"attachRequired": false}}),
        );
        let claim = |owner: &str| {
            json!({"metadata": {"name": "p-a-scratch", "namespace": "ns", "uid": "c-2",
                   "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p-a",
                                        "uid": owner, "controller": true}]},
                   "spec": {"volumeName": "pv-2"}, "status": {"phase": "Bound"}})
        };
        env.client
            .put("persistentvolumeclaims", "ns", claim("someone-else"));
        env.client.put(
            "persistentvolumes",
            "",
            json!({"metadata": {"name": "pv-2"}, "spec": {
                "claimRef": {"namespace": "ns", "name": "p-a-scratch"},
                "csi": {"driver": DRIVER, "volumeHandle": "vol-2"}}}),
        );
        let vol = json!({"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}});
        let err = setup(&env, &pod("a", vol.clone())).await.unwrap_err();
        assert!(matches!(err, CsiVolumeError::NotOwner { .. }), "{err:?}");
        assert!(err.to_string().contains("pod is not owner"), "{err}");
        env.client.put("persistentvolumeclaims", "ns", claim("a"));
        setup(&env, &pod("a", vol)).await.unwrap();
        assert_eq!(env.plugin.calls(), ["publish vol-2 a"]);
    }

    #[tokio::test]
    async fn host_path_and_local_pvs_are_used_in_place() {
        let env = env(&[]);
        claim(&env, None);
        let mut pv = env
            .client
            .get(
                &ResourceRef::new("", "v1", "persistentvolumes", None),
                "pv-1",
            )
            .await
            .unwrap();
        pv["spec"].as_object_mut().unwrap().remove("csi");
        pv["spec"]["local"] = json!({"path": "/mnt/disk1"});
        env.client.put("persistentvolumes", "", pv);
        let a = pod(
            "a",
            json!({"name": "data",
            "persistentVolumeClaim": {"claimName": "data", "readOnly": true}}),
        );
        let vol = &a.spec.as_ref().unwrap().volumes.as_ref().unwrap()[0];
        assert_eq!(
            env.csi.resolve(&a, vol).await.unwrap().unwrap(),
            Resolved::Path {
                path: PathBuf::from("/mnt/disk1"),
                read_only: true
            }
        );
    }

    #[tokio::test]
    async fn a_grown_pv_is_expanded_on_the_node_and_the_claim_updated() {
        let env = env(&[NodeCap::ExpandVolume]);
        claim(&env, Some(json!({"attachRequired": false})));
        let a = pod("a", pvc_volume());
        setup(&env, &a).await.unwrap();
        setup(&env, &a).await.unwrap();
        assert_eq!(
            env.plugin.calls(),
            ["publish vol-1 a"],
            "same size: no expansion"
        );
        let pvs = ResourceRef::new("", "v1", "persistentvolumes", None);
        let mut pv = env.client.get(&pvs, "pv-1").await.unwrap();
        pv["spec"]["capacity"]["storage"] = json!("2Gi");
        env.client.put("persistentvolumes", "", pv);
        let mut pvc = env
            .client
            .get(
                &ResourceRef::new("", "v1", "persistentvolumeclaims", Some("ns")),
                "data",
            )
            .await
            .unwrap();
        pvc["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
        pvc["status"]["conditions"] =
            json!([{"type": "FileSystemResizePending", "status": "True"}]);
        env.client.put("persistentvolumeclaims", "ns", pvc);
        setup(&env, &a).await.unwrap();
        assert_eq!(env.plugin.calls(), [format!("expand vol-1 {}", 2i64 << 30)]);
        let patches = env.client.patches.lock().unwrap().clone();
        assert_eq!(
            patches,
            [(
                "persistentvolumeclaims/data".to_string(),
                json!({"status": {"capacity": {"storage": "2Gi"}, "conditions": []}})
            )]
        );
    }

    #[tokio::test]
    async fn block_volumes_get_a_block_capability_and_become_container_devices() {
        let env = env(&[NodeCap::StageUnstageVolume]);
        claim(&env, Some(json!({"attachRequired": false})));
        let pvs = ResourceRef::new("", "v1", "persistentvolumes", None);
        let mut pv = env.client.get(&pvs, "pv-1").await.unwrap();
        pv["spec"]["volumeMode"] = json!("Block");
        env.client.put("persistentvolumes", "", pv);
        let a = pod("a", pvc_volume());
        let v = setup(&env, &a).await.unwrap();
        let publish = env.plugin.publishes.lock().unwrap()[0].clone();
        assert_eq!(
            publish.volume_capability.unwrap().access_type,
            Some(AccessType::Block(BlockVolume {}))
        );
        let container: k8s_openapi::api::core::v1::Container = serde_json::from_value(
            json!({"name": "c", "volumeDevices": [{"name": "data", "devicePath": "/dev/xvda"}]}),
        )
        .unwrap();
        let vols = super::super::PodVolumes {
            volumes: [("data".to_string(), v.clone())].into(),
        };
        let mounts = super::super::container_mounts(&a, &container, &vols).unwrap();
        assert_eq!(mounts.len(), 1);
        assert_eq!(mounts[0].destination, "/dev/xvda");
        assert_eq!(mounts[0].source, v.path);
        assert!(mounts[0].file, "a device node is bound onto a file");
    }

    #[test]
    fn fs_group_policy() {
        let spec = CsiSpec {
            fs_type: "ext4".into(),
            rwo_only: true,
            ..Default::default()
        };
        let policy = |p: &str| DriverPolicy {
            fs_group_policy: p.into(),
            ..Default::default()
        };
        assert!(applies_fs_group(&DriverPolicy::default(), &spec));
        assert!(!applies_fs_group(&policy("None"), &spec));
        let no_fs = CsiSpec {
            fs_type: String::new(),
            ..spec.clone()
        };
        assert!(!applies_fs_group(&DriverPolicy::default(), &no_fs));
        assert!(applies_fs_group(&policy("File"), &no_fs));
        let rwx = CsiSpec {
            rwo_only: false,
            ..spec
        };
        assert!(!applies_fs_group(&DriverPolicy::default(), &rwx));
    }

    #[test]
    fn fs_group_ownership_is_applied_to_the_tree() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/f"), b"x").unwrap();
        std::fs::set_permissions(
            dir.path().join("sub/f"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
        set_ownership(dir.path(), 4321).unwrap();
        let f = std::fs::metadata(dir.path().join("sub/f")).unwrap();
        assert_eq!(f.gid(), 4321);
        assert_eq!(f.mode() & 0o777, 0o660);
        let d = std::fs::metadata(dir.path().join("sub")).unwrap();
        assert_eq!(d.mode() & 0o2000, 0o2000, "setgid directory");
    }
}
