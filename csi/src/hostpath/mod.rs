//! `hostpath.csi.k1s.io`, the CSI plugin k1s ships (`k1s csi-hostpath`): node-local volumes
//! that are sparse image files under `DATA_DIR/storage/hostpath`, handed to workloads through
//! loop devices — ext4 file systems (made when first staged) or raw block devices.
//!
//! One process serves all three CSI services:
//! - `identity`: who the plugin is and what it can do;
//! - `controller`: volumes, snapshots (sparse copies), clones, expansion, capacity;
//! - `node`: stage (attach a loop device, mount its file system), publish (bind mounts),
//!   volume stats, online expansion (`losetup --set-capacity` + `resize2fs`).
//!
//! `store` owns the files and the persisted metadata, `capacity` the sizing rules and the byte
//! budget, `system` the host commands and syscalls. Every call runs on a blocking thread while
//! holding the driver's one lock, so calls never interleave: that keeps name-based idempotency,
//! the capacity budget and loop-device attach/detach free of races, at the cost of
//! parallelism a single-node plugin does not need.

mod capacity;
mod controller;
mod identity;
mod node;
mod store;
mod system;

pub use system::loop_releasing;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;
use tonic::Status;
use tonic::service::Routes;

use crate::proto::v1::Topology;
use crate::proto::v1::controller_server::ControllerServer;
use crate::proto::v1::identity_server::IdentityServer;
use crate::proto::v1::node_server::NodeServer;
use crate::serve::{ServeError, Socket};

pub use capacity::{DEFAULT_VOLUME_SIZE, MIN_VOLUME_SIZE};

/// The driver name (`GetPluginInfo.name`, the `provisioner` of StorageClasses).
pub const DRIVER_NAME: &str = "hostpath.csi.k1s.io";
/// The topology key volumes and the node carry; its value is the node id.
pub const TOPOLOGY_KEY: &str = "topology.hostpath.csi.k1s.io/node";

/// How the plugin runs.
#[derive(Debug, Clone)]
pub struct Config {
    /// This node's id (`NodeGetInfo.node_id`), the Kubernetes node name.
    pub node_id: String,
    /// Volumes and state live under `<data_dir>/storage/hostpath`.
    pub data_dir: PathBuf,
    /// Bytes the plugin may hand out; `None`: the data dir's free space at start.
    pub capacity: Option<u64>,
    /// `NodeGetInfo.max_volumes_per_node`; 0 means no limit.
    pub max_volumes_per_node: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    #[error("node id must not be empty")]
    NoNodeId,
    #[error("data dir {path}: {source}")]
    DataDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Store(#[from] store::StoreError),
    #[error(transparent)]
    Serve(#[from] ServeError),
}

/// The plugin: cheap to clone, all clones share one state.
#[derive(Clone)]
pub struct Driver {
    inner: Arc<Inner>,
}

struct Inner {
    node_id: String,
    max_volumes_per_node: i64,
    /// Whether mounted file systems can be grown (see `system::can_resize_online`).
    online_expansion: bool,
    capacity: capacity::Capacity,
    store: Mutex<store::Store>,
}

impl Driver {
    /// Opens the store under the data dir (creating it) and sizes the capacity budget.
    pub fn new(config: Config) -> Result<Self, DriverError> {
        if config.node_id.is_empty() {
            return Err(DriverError::NoNodeId);
        }
        let root = config.data_dir.join("storage").join("hostpath");
        let data_err = |source| DriverError::DataDir {
            path: root.clone(),
            source,
        };
        std::fs::create_dir_all(&root).map_err(data_err)?;
        // losetup matches backing files by their canonical path.
        let root = std::fs::canonicalize(&root).map_err(data_err)?;
        let capacity = capacity::Capacity::new(config.capacity, &root).map_err(data_err)?;
        let store = store::Store::open(&root)?;
        let online_expansion = system::can_resize_online();
        if !online_expansion {
            tracing::warn!(
                "no CAP_SYS_RESOURCE: mounted file systems cannot grow, so volumes expand \
                 offline (when next staged)"
            );
        }
        tracing::info!(
            root = %root.display(),
            node = %config.node_id,
            capacity = capacity.total,
            volumes = store.volumes().count(),
            snapshots = store.snapshots().count(),
            "hostpath plugin ready"
        );
        Ok(Self {
            inner: Arc::new(Inner {
                node_id: config.node_id,
                max_volumes_per_node: config.max_volumes_per_node.max(0),
                online_expansion,
                capacity,
                store: Mutex::new(store),
            }),
        })
    }

    /// The Identity, Controller and Node services.
    pub fn routes(&self) -> Routes {
        Routes::new(IdentityServer::new(self.clone()))
            .add_service(ControllerServer::new(self.clone()))
            .add_service(NodeServer::new(self.clone()))
    }

    /// Serves the plugin on the unix socket `path` until `cancel` fires.
    pub async fn serve(&self, path: &Path, cancel: CancellationToken) -> Result<(), DriverError> {
        let socket = Socket::bind(path).await?;
        tracing::info!(socket = %path.display(), driver = DRIVER_NAME, "serving CSI");
        socket.serve(self.routes(), cancel).await?;
        Ok(())
    }

    /// Whether volumes can grow while in use (ONLINE expansion) or only when not staged.
    pub fn online_expansion(&self) -> bool {
        self.inner.online_expansion
    }

    /// The topology of this node and of every volume it creates.
    fn topology(&self) -> Topology {
        Topology {
            segments: HashMap::from([(TOPOLOGY_KEY.to_owned(), self.inner.node_id.clone())]),
        }
    }

    /// Runs `f` on a blocking thread with the store locked.
    async fn locked<T, F>(&self, f: F) -> Result<T, Status>
    where
        T: Send + 'static,
        F: FnOnce(&mut store::Store) -> Result<T, Status> + Send + 'static,
    {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            let mut store = inner
                .store
                .lock()
                .map_err(|_| Status::internal("a previous call panicked holding the store"))?;
            f(&mut store)
        })
        .await
        .map_err(|e| Status::internal(format!("call failed: {e}")))?
    }
}

/// `Err(INVALID_ARGUMENT)` when a required field is empty.
fn require(value: &str, field: &str) -> Result<(), Status> {
    if value.is_empty() {
        Err(Status::invalid_argument(format!("{field} is required")))
    } else {
        Ok(())
    }
}

impl From<store::StoreError> for Status {
    fn from(e: store::StoreError) -> Self {
        tracing::error!(error = %e, "store");
        Status::internal(e.to_string())
    }
}

impl From<system::SystemError> for Status {
    fn from(e: system::SystemError) -> Self {
        tracing::error!(error = %e, "host operation");
        Status::internal(e.to_string())
    }
}

impl From<capacity::SizeError> for Status {
    fn from(e: capacity::SizeError) -> Self {
        use capacity::SizeError::*;
        match e {
            Negative { .. } | LimitBelowRequired { .. } => Status::invalid_argument(e.to_string()),
            Unsatisfiable { .. } | TooLarge { .. } => Status::out_of_range(e.to_string()),
            Exhausted { .. } => Status::resource_exhausted(e.to_string()),
        }
    }
}
