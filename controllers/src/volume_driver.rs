//! The controller side of storage drivers, as the storage controllers ([`crate::provisioner`],
//! [`crate::resizer`], [`crate::attach`], [`crate::snapshot`]) see it: the
//! [`VolumeProvisioner`] trait, the requests and answers of its operations (create and
//! delete, expand, publish and unpublish, snapshots), its errors, and the [`ProvisionerSet`]
//! of registered drivers with the helpers that re-queue a controller's keys when a driver
//! comes or goes.
//!
//! [`crate::csi_driver`] implements the trait over a CSI plugin's socket.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Why a reconcile of a storage controller (provisioning, deletion, expansion, attaching,
/// snapshots) failed: the API server, or the driver / the object itself.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    #[error("{key}: {source}")]
    Api {
        key: String,
        #[source]
        source: k1s_api::client::ClientError,
    },
    #[error("{key}: {message}")]
    Failed { key: String, message: String },
}

/// A CSI access mode (`VolumeCapability.AccessMode.Mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AccessMode {
    /// `ReadWriteOnce`.
    SingleNodeWriter,
    /// `ReadWriteOncePod`.
    SingleNodeSingleWriter,
    /// `ReadOnlyMany`.
    MultiNodeReaderOnly,
    /// `ReadWriteMany`.
    MultiNodeMultiWriter,
}

impl AccessMode {
    /// The CSI mode of a Kubernetes access mode.
    pub fn from_k8s(mode: &str) -> Option<Self> {
        Some(match mode {
            "ReadWriteOnce" => Self::SingleNodeWriter,
            "ReadWriteOncePod" => Self::SingleNodeSingleWriter,
            "ReadOnlyMany" => Self::MultiNodeReaderOnly,
            "ReadWriteMany" => Self::MultiNodeMultiWriter,
            _ => return None,
        })
    }
}

/// How the volume is consumed (`VolumeCapability.access_type`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessType {
    /// `volumeMode: Block`.
    Block,
    /// `volumeMode: Filesystem`: the file system and the class's mount options.
    Mount {
        fs_type: String,
        mount_flags: Vec<String>,
    },
}

/// One `VolumeCapability`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeCapability {
    pub access_type: AccessType,
    pub access_mode: AccessMode,
}

/// A topology segment: label key → value.
pub type Segment = BTreeMap<String, String>;

/// `TopologyRequirement`: where the volume must be (`requisite`) and would best be
/// (`preferred`, first first).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccessibilityRequirements {
    pub requisite: Vec<Segment>,
    pub preferred: Vec<Segment>,
}

/// `VolumeContentSource`: what a new volume starts from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContentSource {
    /// A snapshot (`VolumeSnapshotContent.status.snapshotHandle`).
    Snapshot { snapshot_id: String },
    /// A clone of a volume (the source PV's `csi.volumeHandle`).
    Volume { volume_id: String },
}

/// The `CreateVolume` request for a claim.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProvisionRequest {
    /// `pvc-<claim uid>`: the same on every retry, so creation is idempotent.
    pub name: String,
    /// `CapacityRange.required_bytes` (the claim's request).
    pub required_bytes: i64,
    /// `CapacityRange.limit_bytes` (the claim's limit; 0: none).
    pub limit_bytes: i64,
    pub capabilities: Vec<VolumeCapability>,
    /// The class's parameters without the `csi.storage.k8s.io/` keys.
    pub parameters: BTreeMap<String, String>,
    /// The provisioner secret's data (never logged).
    pub secrets: BTreeMap<String, String>,
    pub accessibility: Option<AccessibilityRequirements>,
    pub content_source: Option<ContentSource>,
}

/// What `CreateVolume` answered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProvisionedVolume {
    pub volume_handle: String,
    /// 0: unknown (the requested size is recorded).
    pub capacity_bytes: i64,
    pub volume_context: BTreeMap<String, String>,
    pub accessible_topology: Vec<Segment>,
}

/// A `ControllerExpandVolume` request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpandRequest {
    pub volume_id: String,
    pub required_bytes: i64,
    pub capability: Option<VolumeCapability>,
    /// Never logged.
    pub secrets: BTreeMap<String, String>,
}

/// What the expansion did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expanded {
    pub capacity_bytes: i64,
    pub node_expansion_required: bool,
}

/// A `ControllerPublishVolume` request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishRequest {
    pub volume_id: String,
    pub node_id: String,
    pub capability: Option<VolumeCapability>,
    pub readonly: bool,
    /// Never logged.
    pub secrets: BTreeMap<String, String>,
    pub volume_context: BTreeMap<String, String>,
}

/// A `CreateSnapshot` request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SnapshotRequest {
    /// `snapshot-<snapshot uid>`.
    pub name: String,
    pub source_volume_id: String,
    pub parameters: BTreeMap<String, String>,
    /// Never logged.
    pub secrets: BTreeMap<String, String>,
}

/// What `CreateSnapshot` answered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SnapshotInfo {
    pub snapshot_id: String,
    pub size_bytes: i64,
    /// Nanoseconds since the epoch (0: unknown).
    pub creation_time_ns: i64,
    pub ready_to_use: bool,
}

/// A failed `CreateVolume` or `DeleteVolume`. Both kinds are retried with backoff;
/// `Transient` says the operation may still be in progress or have half-happened (a timeout,
/// an unavailable plugin), `Final` that the plugin refused it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProvisionError {
    #[error("{0}")]
    Final(String),
    #[error("{0}")]
    Transient(String),
}

/// The controller side of a storage driver, one per CSI driver: provisioning and deletion,
/// and (with default refusals) expansion, attaching and snapshots.
#[async_trait::async_trait]
pub trait VolumeProvisioner: Send + Sync {
    /// Provisioner name as in StorageClass.provisioner (CSI driver name).
    fn name(&self) -> &str;
    /// CreateVolume: `name` is `pvc-<uid>` (idempotent on retry).
    async fn create(&self, req: ProvisionRequest) -> Result<ProvisionedVolume, ProvisionError>;
    async fn delete(
        &self,
        volume_handle: &str,
        secrets: BTreeMap<String, String>,
    ) -> Result<(), ProvisionError>;
    /// ControllerExpandVolume (the resizer).
    async fn expand(&self, req: ExpandRequest) -> Result<Expanded, ProvisionError> {
        let _ = req;
        Err(unsupported(self.name(), "expansion"))
    }
    /// ControllerPublishVolume (the attacher); returns the publish context.
    async fn publish(
        &self,
        req: PublishRequest,
    ) -> Result<BTreeMap<String, String>, ProvisionError> {
        let _ = req;
        Err(unsupported(self.name(), "attaching"))
    }
    /// ControllerUnpublishVolume (the attacher).
    async fn unpublish(
        &self,
        volume_handle: &str,
        node_id: &str,
        secrets: BTreeMap<String, String>,
    ) -> Result<(), ProvisionError> {
        let _ = (volume_handle, node_id, secrets);
        Err(unsupported(self.name(), "detaching"))
    }
    /// CreateSnapshot (the snapshotter).
    async fn create_snapshot(&self, req: SnapshotRequest) -> Result<SnapshotInfo, ProvisionError> {
        let _ = req;
        Err(unsupported(self.name(), "snapshots"))
    }
    /// DeleteSnapshot (the snapshotter).
    async fn delete_snapshot(
        &self,
        snapshot_id: &str,
        secrets: BTreeMap<String, String>,
    ) -> Result<(), ProvisionError> {
        let _ = (snapshot_id, secrets);
        Err(unsupported(self.name(), "snapshots"))
    }
}

/// The refusal of a driver that does not do `what`.
fn unsupported(driver: &str, what: &str) -> ProvisionError {
    ProvisionError::Final(format!("driver {driver} does not support {what}"))
}

/// The provisioners currently registered, by name. Cheap to clone (shared); plugins come and
/// go at run time: adding one re-examines every pending claim.
#[derive(Clone)]
pub struct ProvisionerSet {
    inner: Arc<RwLock<BTreeMap<String, Arc<dyn VolumeProvisioner>>>>,
    /// Bumped on every change.
    changed: Arc<watch::Sender<u64>>,
}

impl Default for ProvisionerSet {
    fn default() -> Self {
        Self {
            inner: Arc::default(),
            changed: Arc::new(watch::channel(0).0),
        }
    }
}

impl std::fmt::Debug for ProvisionerSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProvisionerSet")
            .field("names", &self.names())
            .finish()
    }
}

impl ProvisionerSet {
    pub fn new() -> Self {
        Self::default()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<dyn VolumeProvisioner>>> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers `p` under its name (replacing one of the same name).
    pub fn add(&self, p: Arc<dyn VolumeProvisioner>) {
        let name = p.name().to_owned();
        self.inner
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name, p);
        self.changed.send_modify(|n| *n += 1);
    }

    /// Unregisters the provisioner `name`.
    pub fn remove(&self, name: &str) -> Option<Arc<dyn VolumeProvisioner>> {
        let p = self
            .inner
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
        self.changed.send_modify(|n| *n += 1);
        p
    }

    pub fn get(&self, name: &str) -> Option<Arc<dyn VolumeProvisioner>> {
        self.read().get(name).cloned()
    }

    pub fn names(&self) -> Vec<String> {
        self.read().keys().cloned().collect()
    }

    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// A receiver that sees every change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }
}

/// Runs `ctrl` with the reconciler `make` builds from its store, and re-queues every key
/// whenever a driver of `set` comes or goes, until `cancel`.
pub(crate) async fn run_with_set<R: k1s_runtime::Reconcile>(
    ctrl: k1s_runtime::Controller,
    set: ProvisionerSet,
    cancel: CancellationToken,
    make: impl FnOnce(k1s_runtime::Store) -> R,
) {
    let store = ctrl.store();
    let requeue = requeue_on_change(set, store.clone(), ctrl.queue(), cancel.clone());
    let reconciler = Arc::new(make(store));
    tokio::join!(ctrl.run(reconciler, cancel), requeue);
}

/// Re-queues every key of `store` into `queue` whenever `set` changes, until `cancel`.
pub(crate) async fn requeue_on_change(
    set: ProvisionerSet,
    store: k1s_runtime::Store,
    queue: k1s_runtime::queue::WorkQueue<k1s_runtime::ObjectKey>,
    cancel: CancellationToken,
) {
    let mut rx = set.subscribe();
    loop {
        tokio::select! {
            r = rx.changed() => {
                if r.is_err() {
                    return;
                }
                store.keys().into_iter().for_each(|k| queue.add(k));
            }
            () = cancel.cancelled() => return,
        }
    }
}
