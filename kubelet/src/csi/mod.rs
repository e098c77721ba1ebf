//! The kubelet's CSI side, registration half: the registered drivers ([`CsiDrivers`], driver
//! name → [`NodePlugin`]), the [`RegistrationHandler`] the plugin watcher calls
//! ([`Registrar`]), what registering a driver changes in the API ([`nodeinfo`]: the Node's
//! `csi.volume.kubernetes.io/nodeid` annotation, topology labels, the
//! `attachable-volumes-csi-<driver>` capacity, and the `CSINode` object), the periodic
//! Probe of registered plugins, and the volume stats gauges ([`metrics`]).
//!
//! The volume half (staging, publishing, teardown) is `volumes/csi.rs`; it reaches drivers
//! only through [`CsiDrivers`] and the [`NodePlugin`] trait, so its tests use a recording fake.

pub mod metrics;
pub mod nodeinfo;
mod plugin;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use k1s_api::client::Client;
use k1s_csi::watcher::RegistrationHandler;
use k1s_csi::{CsiClient, CsiError};
use tokio_util::sync::CancellationToken;

pub use plugin::{NodeCap, NodePlugin};

/// How often the volume stats gauges are refreshed (upstream's volumeStatsAggPeriod).
pub const STATS_INTERVAL: Duration = Duration::from_secs(60);

/// How often registered plugins are probed.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(30);

/// One registered driver.
#[derive(Clone)]
pub struct Driver {
    pub plugin: Arc<dyn NodePlugin>,
    /// The CSI socket.
    pub endpoint: PathBuf,
    /// NodeGetCapabilities at registration.
    pub capabilities: HashSet<NodeCap>,
    /// The topology label keys this driver put on the Node.
    pub topology_keys: Vec<String>,
}

impl Driver {
    pub fn has(&self, cap: NodeCap) -> bool {
        self.capabilities.contains(&cap)
    }
}

/// A driver came or went, for components outside the kubelet (the server's provisioners).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DriverEvent {
    Registered { name: String, endpoint: PathBuf },
    Deregistered { name: String },
}

/// The drivers registered on this node, by name. Shared by the registration handler (which
/// fills it) and the volume manager (which uses it); others follow it with [`Self::subscribe`].
pub struct CsiDrivers {
    drivers: RwLock<HashMap<String, Driver>>,
    events: tokio::sync::broadcast::Sender<DriverEvent>,
}

impl Default for CsiDrivers {
    fn default() -> Self {
        Self {
            drivers: RwLock::default(),
            events: tokio::sync::broadcast::channel(64).0,
        }
    }
}

impl CsiDrivers {
    /// Registrations and deregistrations from now on; [`Self::endpoints`] gives the drivers
    /// registered before. A receiver that lags gets `Lagged` and should re-read `endpoints`.
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<DriverEvent> {
        self.events.subscribe()
    }

    /// The registered drivers and their CSI sockets.
    pub fn endpoints(&self) -> BTreeMap<String, PathBuf> {
        self.drivers
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(n, d)| (n.clone(), d.endpoint.clone()))
            .collect()
    }

    pub fn get(&self, name: &str) -> Option<Driver> {
        self.drivers
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned()
    }

    pub fn insert(&self, name: &str, driver: Driver) {
        let endpoint = driver.endpoint.clone();
        self.drivers
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.to_string(), driver);
        // No receiver is fine.
        let _ = self.events.send(DriverEvent::Registered {
            name: name.to_string(),
            endpoint,
        });
    }

    pub fn remove(&self, name: &str) -> Option<Driver> {
        let removed = self
            .drivers
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(name);
        if removed.is_some() {
            let _ = self.events.send(DriverEvent::Deregistered {
                name: name.to_string(),
            });
        }
        removed
    }

    /// The registered driver names, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .drivers
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect();
        v.sort();
        v
    }
}

/// Connects to a plugin's CSI socket; the real one dials [`CsiClient`], tests hand out fakes.
#[async_trait::async_trait]
pub trait Connector: Send + Sync {
    async fn connect(&self, endpoint: &Path) -> Result<Arc<dyn NodePlugin>, CsiError>;
}

/// Why a CSI driver could not be registered (the text is reported to the plugin).
#[derive(Debug, thiserror::Error)]
pub enum DriverRegistrationError {
    #[error(transparent)]
    Connect(CsiError),
    #[error("error getting node info of driver {driver}: {source}")]
    NodeInfo { driver: String, source: CsiError },
    #[error("error getting node capabilities of driver {driver}: {source}")]
    Capabilities { driver: String, source: CsiError },
    #[error("error installing driver {driver} on node: {source}")]
    Install {
        driver: String,
        source: nodeinfo::NodeInfoError,
    },
}

/// Dials plugins with [`CsiClient`].
pub struct GrpcConnector;

#[async_trait::async_trait]
impl Connector for GrpcConnector {
    async fn connect(&self, endpoint: &Path) -> Result<Arc<dyn NodePlugin>, CsiError> {
        CsiClient::connect(endpoint)
            .await
            .map(|c| Arc::new(c) as Arc<dyn NodePlugin>)
    }
}

/// The kubelet's CSI registration handler, as upstream's CSI plugin handler: on register,
/// NodeGetInfo and NodeGetCapabilities, install the driver on the Node and CSINode, then add
/// it to [`CsiDrivers`]; on deregister, the reverse.
pub struct Registrar {
    client: Arc<dyn Client>,
    node_name: String,
    drivers: Arc<CsiDrivers>,
    connector: Arc<dyn Connector>,
    /// Serializes Node/CSINode read-modify-writes of concurrent (de)registrations.
    lock: tokio::sync::Mutex<()>,
}

impl Registrar {
    pub fn new(
        client: Arc<dyn Client>,
        node_name: &str,
        drivers: Arc<CsiDrivers>,
        connector: Arc<dyn Connector>,
    ) -> Self {
        Self {
            client,
            node_name: node_name.to_string(),
            drivers,
            connector,
            lock: tokio::sync::Mutex::new(()),
        }
    }
}

#[async_trait::async_trait]
impl RegistrationHandler for Registrar {
    /// The watcher's trait takes the message only.
    async fn register(
        &self,
        name: &str,
        endpoint: &Path,
        _versions: &[String],
    ) -> Result<(), String> {
        self.register_driver(name, endpoint)
            .await
            .map_err(|e| e.to_string())
    }

    async fn deregister(&self, name: &str) {
        self.deregister_driver(name).await;
    }
}

impl Registrar {
    async fn register_driver(
        &self,
        name: &str,
        endpoint: &Path,
    ) -> Result<(), DriverRegistrationError> {
        let plugin = self
            .connector
            .connect(endpoint)
            .await
            .map_err(DriverRegistrationError::Connect)?;
        let info =
            plugin
                .node_info()
                .await
                .map_err(|source| DriverRegistrationError::NodeInfo {
                    driver: name.to_string(),
                    source,
                })?;
        let capabilities = plugin.node_capabilities().await.map_err(|source| {
            DriverRegistrationError::Capabilities {
                driver: name.to_string(),
                source,
            }
        })?;
        let topology: BTreeMap<String, String> = info
            .accessible_topology
            .as_ref()
            .map(|t| {
                t.segments
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default();
        let install = nodeinfo::DriverInfo {
            name: name.to_string(),
            node_id: info.node_id.clone(),
            max_volumes: info.max_volumes_per_node,
            topology: topology.clone(),
        };
        {
            let _g = self.lock.lock().await;
            nodeinfo::install(self.client.as_ref(), &self.node_name, &install)
                .await
                .map_err(|source| DriverRegistrationError::Install {
                    driver: name.to_string(),
                    source,
                })?;
        }
        self.drivers.insert(
            name,
            Driver {
                plugin,
                endpoint: endpoint.to_path_buf(),
                capabilities,
                topology_keys: topology.keys().cloned().collect(),
            },
        );
        tracing::info!(driver = name, node_id = %info.node_id, "CSI driver installed on the node");
        Ok(())
    }

    async fn deregister_driver(&self, name: &str) {
        let keys = self
            .drivers
            .remove(name)
            .map(|d| d.topology_keys)
            .unwrap_or_default();
        let _g = self.lock.lock().await;
        if let Err(e) =
            nodeinfo::uninstall(self.client.as_ref(), &self.node_name, name, &keys).await
        {
            tracing::warn!(driver = name, error = %e, "uninstalling the CSI driver from the node");
        }
    }
}

/// Probes every registered plugin each `interval` until `cancel`; an unhealthy or
/// unreachable one is logged and gets a Warning event on the Node.
pub async fn probe_loop(
    drivers: Arc<CsiDrivers>,
    client: Arc<dyn Client>,
    source: k1s_api::events::Source,
    node_name: String,
    interval: Duration,
    cancel: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
        for name in drivers.names() {
            let Some(d) = drivers.get(&name) else {
                continue;
            };
            let problem = match d.plugin.probe().await {
                Ok(true) => continue,
                Ok(false) => "Probe reports the plugin not ready".to_string(),
                Err(e) => e.to_string(),
            };
            tracing::warn!(driver = %name, problem = %problem, "CSI plugin unhealthy");
            let about = k1s_api::events::Involved {
                api_version: "v1".into(),
                kind: "Node".into(),
                name: node_name.clone(),
                uid: node_name.clone(),
                ..Default::default()
            };
            k1s_api::events::record(
                client.as_ref(),
                &source,
                &about,
                "Warning",
                "CSIPluginUnhealthy",
                "Probe",
                &format!("CSI driver {name} is unhealthy: {problem}"),
            )
            .await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Idle;

    #[async_trait::async_trait]
    impl NodePlugin for Idle {
        async fn probe(&self) -> Result<bool, k1s_csi::CsiError> {
            Ok(true)
        }
        async fn node_info(
            &self,
        ) -> Result<k1s_csi::proto::v1::NodeGetInfoResponse, k1s_csi::CsiError> {
            Ok(Default::default())
        }
        async fn node_capabilities(&self) -> Result<HashSet<NodeCap>, k1s_csi::CsiError> {
            Ok(HashSet::new())
        }
        async fn node_stage(
            &self,
            _: k1s_csi::proto::v1::NodeStageVolumeRequest,
        ) -> Result<(), k1s_csi::CsiError> {
            Ok(())
        }
        async fn node_unstage(&self, _: &str, _: &str) -> Result<(), k1s_csi::CsiError> {
            Ok(())
        }
        async fn node_publish(
            &self,
            _: k1s_csi::proto::v1::NodePublishVolumeRequest,
        ) -> Result<(), k1s_csi::CsiError> {
            Ok(())
        }
        async fn node_unpublish(&self, _: &str, _: &str) -> Result<(), k1s_csi::CsiError> {
            Ok(())
        }
        async fn node_volume_stats(
            &self,
            _: &str,
            _: &str,
        ) -> Result<k1s_csi::proto::v1::NodeGetVolumeStatsResponse, k1s_csi::CsiError> {
            Ok(Default::default())
        }
        async fn node_expand(
            &self,
            _: k1s_csi::proto::v1::NodeExpandVolumeRequest,
        ) -> Result<i64, k1s_csi::CsiError> {
            Ok(0)
        }
    }

    #[tokio::test]
    async fn subscribers_see_drivers_come_and_go() {
        let drivers = CsiDrivers::default();
        let mut rx = drivers.subscribe();
        let d = Driver {
            plugin: Arc::new(Idle),
            endpoint: PathBuf::from("/csi/d.sock"),
            capabilities: HashSet::new(),
            topology_keys: Vec::new(),
        };
        drivers.insert("d", d);
        assert_eq!(
            drivers.endpoints(),
            BTreeMap::from([("d".to_string(), PathBuf::from("/csi/d.sock"))])
        );
        assert!(drivers.remove("d").is_some());
        assert!(drivers.remove("d").is_none());
        assert_eq!(
            rx.recv().await.unwrap(),
            DriverEvent::Registered {
                name: "d".into(),
                endpoint: "/csi/d.sock".into()
            }
        );
        assert_eq!(
            rx.recv().await.unwrap(),
            DriverEvent::Deregistered { name: "d".into() }
        );
        assert!(rx.try_recv().is_err(), "one event per change");
    }
}
