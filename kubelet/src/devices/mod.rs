//! The device manager (issue #7 §5): the kubelet's side of the device plugin API v1beta1.
//!
//! Owns the devices each plugin-served extended resource has, which pod containers hold which
//! of them, and the checkpoint of those allocations ([`checkpoint`]), so that a kubelet
//! restart neither forgets nor hands out again the devices of running pods. Around it:
//! [`registration`] serves `DIR/kubelet.sock`, where plugins announce themselves, and
//! [`endpoint`] follows each registered plugin's ListAndWatch stream.
//!
//! As upstream's devicemanager: a pod is admitted once ([`DeviceManager::admit`]). For each
//! container asking for a plugin's resource, devices are chosen (the plugin's preferred
//! allocation when it offers one; an init container's devices may be reused by the containers
//! after it), and the plugin's Allocate prepares them and says how the container reaches them:
//! environment, host mounts, device nodes. That answer is kept and applied to every start of
//! the container ([`DeviceManager::container_devices`]), after PreStartContainer if the plugin
//! asked for it. A pod that cannot get its devices is rejected (UnexpectedAdmissionError).
//! Devices return to the pool when the pod ends ([`DeviceManager::release`]).
//!
//! Node status shows each resource's device count as capacity and its healthy devices as
//! allocatable ([`DeviceManager::resources`]); a plugin whose connection ends keeps its
//! capacity with nothing allocatable until it registers again.

mod checkpoint;
mod endpoint;
mod registration;
mod select;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

pub use crate::runtime::spec::HostDevice;
pub use registration::{ResourceNameError, valid_resource_name};

/// The generated messages, clients and servers of `proto/deviceplugin.proto`.
#[allow(clippy::all, missing_docs)]
pub mod proto {
    tonic::include_proto!("v1beta1");
}

use proto::device_plugin_client::DevicePluginClient;

/// The API version plugins must register with.
pub const API_VERSION: &str = "v1beta1";
/// The kubelet's registration socket, in the device plugin directory.
pub const KUBELET_SOCKET: &str = "kubelet.sock";
/// `Device.health` of a usable device.
pub const HEALTHY: &str = "Healthy";

/// Why a pod's containers cannot get their devices. The texts are upstream's, as they end up
/// in a rejected pod's status message.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error(
        "Allocate failed due to requested number of devices unavailable for {resource}. \
         Requested: {requested}, Available: {available}, which is unexpected"
    )]
    Unavailable {
        resource: String,
        requested: usize,
        available: usize,
    },
    #[error(
        "Allocate failed due to no healthy devices present; cannot allocate unhealthy devices \
         {resource}, which is unexpected"
    )]
    NoPlugin { resource: String },
    #[error("device plugin for {resource}: {call}: {status}")]
    Plugin {
        resource: String,
        call: &'static str,
        status: Box<tonic::Status>,
    },
    #[error("device plugin for {resource}: {call} answered {got} container responses to 1 request")]
    BadAnswer {
        resource: String,
        call: &'static str,
        got: usize,
    },
    #[error("device manager checkpoint {path}: {source}")]
    Checkpoint {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A host path a plugin wants mounted into the container.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostMount {
    pub container_path: String,
    pub host_path: String,
    pub read_only: bool,
}

/// How a container reaches its devices: what the plugins' Allocate answered.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerDevices {
    pub envs: BTreeMap<String, String>,
    pub mounts: Vec<HostMount>,
    pub devices: Vec<HostDevice>,
    /// For a container runtime; k1s's runtime has no use for them but keeps them.
    pub annotations: BTreeMap<String, String>,
}

impl ContainerDevices {
    fn from_response(r: proto::ContainerAllocateResponse) -> Self {
        Self {
            envs: r.envs.into_iter().collect(),
            mounts: r
                .mounts
                .into_iter()
                .map(|m| HostMount {
                    container_path: m.container_path,
                    host_path: m.host_path,
                    read_only: m.read_only,
                })
                .collect(),
            devices: r
                .devices
                .into_iter()
                .map(|d| HostDevice {
                    container_path: d.container_path,
                    host_path: d.host_path,
                    permissions: d.permissions,
                })
                .collect(),
            annotations: r.annotations.into_iter().collect(),
        }
    }

    fn merge(&mut self, other: &ContainerDevices) {
        self.envs
            .extend(other.envs.iter().map(|(k, v)| (k.clone(), v.clone())));
        self.mounts.extend(other.mounts.iter().cloned());
        self.devices.extend(other.devices.iter().cloned());
        self.annotations.extend(
            other
                .annotations
                .iter()
                .map(|(k, v)| (k.clone(), v.clone())),
        );
    }

    pub fn is_empty(&self) -> bool {
        self.envs.is_empty() && self.mounts.is_empty() && self.devices.is_empty()
    }
}

/// Devices of one resource held by one container of a pod (checkpointed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allocation {
    pub pod_uid: String,
    /// The pod worker's container key: `init/NAME` or `main/NAME`.
    pub container: String,
    pub resource: String,
    pub device_ids: Vec<String>,
    pub response: ContainerDevices,
}

impl Allocation {
    fn init(&self) -> bool {
        self.container.starts_with("init/")
    }
}

/// A registered plugin: how to reach it and what it asked for.
#[derive(Clone)]
struct Plugin {
    client: DevicePluginClient<Channel>,
    options: proto::DevicePluginOptions,
    generation: u64,
    /// Ends its ListAndWatch follower when another registration replaces it.
    cancel: CancellationToken,
}

/// One extended resource: its devices (ID → healthy) and its plugin, while connected.
#[derive(Default)]
struct Resource {
    devices: BTreeMap<String, bool>,
    plugin: Option<Plugin>,
    /// Since when no plugin serves it (its connection ended, or since the kubelet started).
    orphaned_since: Option<Instant>,
}

/// How long a resource whose plugin is gone keeps its capacity (upstream's endpoint stop
/// grace period); after it, the node shows a capacity of 0.
pub const PLUGIN_GONE_GRACE: Duration = Duration::from_secs(5 * 60);

#[derive(Default)]
struct State {
    resources: BTreeMap<String, Resource>,
    allocations: Vec<Allocation>,
}

pub struct DeviceManager {
    dir: PathBuf,
    state: Mutex<State>,
    /// One admission at a time: the choice of free devices and the Allocate call that takes
    /// them must not interleave with another pod's.
    admit_lock: tokio::sync::Mutex<()>,
    /// Bumped whenever capacity or allocatable may have changed (node status listens).
    changed: watch::Sender<u64>,
    generations: AtomicU64,
}

impl DeviceManager {
    /// A manager for the plugins in `dir`, with the allocations and resources of its
    /// checkpoint (the resources' devices count as unhealthy until their plugin registers).
    pub fn new(dir: PathBuf) -> Arc<Self> {
        let mut state = State::default();
        match checkpoint::load(&dir) {
            Ok(Some(cp)) => {
                for (name, ids) in cp.registered {
                    state.resources.insert(
                        name,
                        Resource {
                            devices: ids.into_iter().map(|id| (id, false)).collect(),
                            plugin: None,
                            orphaned_since: Some(Instant::now()),
                        },
                    );
                }
                state.allocations = cp.allocations;
            }
            Ok(None) => {}
            Err(e) => {
                tracing::error!(error = %e, "reading the device manager checkpoint; starting without it")
            }
        }
        Arc::new(Self {
            dir,
            state: Mutex::new(state),
            admit_lock: tokio::sync::Mutex::new(()),
            changed: watch::Sender::new(0),
            generations: AtomicU64::new(0),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Serves the Registration service on `DIR/kubelet.sock` until `cancel` fires.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        registration::serve(self, cancel).await
    }

    /// Changes when capacity or allocatable may have changed.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn notify(&self) {
        self.changed.send_modify(|n| *n += 1);
    }

    /// Each resource's capacity (all its devices) and allocatable (its healthy devices, none
    /// while its plugin is not connected). A resource whose plugin has been gone for
    /// [`PLUGIN_GONE_GRACE`] has a capacity of 0: still listed, as upstream, to say a device
    /// plugin served it.
    pub fn resources(&self) -> Vec<(String, usize, usize)> {
        self.state()
            .resources
            .iter()
            .map(|(name, r)| match r.plugin {
                Some(_) => {
                    let healthy = r.devices.values().filter(|h| **h).count();
                    (name.clone(), r.devices.len(), healthy)
                }
                None if r
                    .orphaned_since
                    .is_some_and(|t| t.elapsed() >= PLUGIN_GONE_GRACE) =>
                {
                    (name.clone(), 0, 0)
                }
                None => (name.clone(), r.devices.len(), 0),
            })
            .collect()
    }

    /// Whether `name` is a resource a device plugin serves (or served before a restart).
    pub fn has_resource(&self, name: &str) -> bool {
        self.state().resources.contains_key(name)
    }

    /// Gives every container of `pod` the devices it asks for, or says why it cannot. Idempotent:
    /// containers that already hold their devices (also from before a restart) keep them.
    pub async fn admit(&self, pod: &Pod) -> Result<(), DeviceError> {
        let Some(uid) = pod.metadata.uid.as_deref() else {
            return Ok(());
        };
        let wanted = select::requests(pod, |r| self.has_resource(r));
        if wanted.is_empty() {
            return Ok(());
        }
        let _one = self.admit_lock.lock().await;
        // Devices this pod's init containers used, which the containers after them may reuse.
        let mut reusable: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for want in wanted {
            for (resource, count) in want.resources {
                let held = self.held(uid, &want.key, &resource);
                let ids = match held {
                    Some(ids) => ids,
                    None => {
                        let pool = reusable.get(&resource).cloned().unwrap_or_default();
                        self.allocate(uid, &want.key, &resource, count, &pool)
                            .await?
                    }
                };
                let pool = reusable.entry(resource).or_default();
                if want.init {
                    let new: Vec<String> =
                        ids.into_iter().filter(|id| !pool.contains(id)).collect();
                    pool.extend(new);
                } else {
                    pool.retain(|id| !ids.contains(id));
                }
            }
        }
        Ok(())
    }

    fn held(&self, uid: &str, key: &str, resource: &str) -> Option<Vec<String>> {
        self.state()
            .allocations
            .iter()
            .find(|a| a.pod_uid == uid && a.container == key && a.resource == resource)
            .map(|a| a.device_ids.clone())
    }

    /// Chooses `count` free healthy devices of `resource` for one container (those of
    /// `reusable` first), has the plugin allocate them and records the answer.
    async fn allocate(
        &self,
        uid: &str,
        key: &str,
        resource: &str,
        count: usize,
        reusable: &[String],
    ) -> Result<Vec<String>, DeviceError> {
        let (plugin, available) = {
            let state = self.state();
            let r = state.resources.get(resource);
            let plugin = r.and_then(|r| r.plugin.clone());
            let Some((r, plugin)) = r.zip(plugin) else {
                return Err(DeviceError::NoPlugin {
                    resource: resource.into(),
                });
            };
            // Held by others: every container of other pods, and this pod's regular
            // containers (its init containers' devices may be reused).
            let taken: BTreeSet<&str> = state
                .allocations
                .iter()
                .filter(|a| a.resource == resource && !(a.pod_uid == uid && a.init()))
                .flat_map(|a| a.device_ids.iter().map(String::as_str))
                .collect();
            let available: Vec<String> = r
                .devices
                .iter()
                .filter(|(id, healthy)| **healthy && !taken.contains(id.as_str()))
                .map(|(id, _)| id.clone())
                .collect();
            (plugin, available)
        };
        if available.len() < count {
            return Err(DeviceError::Unavailable {
                resource: resource.into(),
                requested: count,
                available: available.len(),
            });
        }
        let must: Vec<String> = reusable
            .iter()
            .filter(|id| available.contains(id))
            .take(count)
            .cloned()
            .collect();
        let plugin_err = |call, status| DeviceError::Plugin {
            resource: resource.into(),
            call,
            status: Box::new(status),
        };
        let mut client = plugin.client.clone();
        let mut ids = None;
        if plugin.options.get_preferred_allocation_available {
            let answer = client
                .get_preferred_allocation(proto::PreferredAllocationRequest {
                    container_requests: vec![proto::ContainerPreferredAllocationRequest {
                        available_device_i_ds: available.clone(),
                        must_include_device_i_ds: must.clone(),
                        allocation_size: count as i32,
                    }],
                })
                .await
                .map_err(|s| plugin_err("GetPreferredAllocation", s))?
                .into_inner();
            let preferred = answer
                .container_responses
                .into_iter()
                .next()
                .map(|r| r.device_i_ds)
                .unwrap_or_default();
            if select::acceptable(&preferred, &available, &must, count) {
                ids = Some(preferred);
            } else {
                tracing::warn!(%resource, ?preferred, "ignoring a preferred allocation that does not fit the request");
            }
        }
        let ids = ids.unwrap_or_else(|| select::fallback(&available, &must, count));
        let answer = client
            .allocate(proto::AllocateRequest {
                container_requests: vec![proto::ContainerAllocateRequest {
                    devices_ids: ids.clone(),
                }],
            })
            .await
            .map_err(|s| plugin_err("Allocate", s))?
            .into_inner();
        let got = answer.container_responses.len();
        let Some(response) = answer
            .container_responses
            .into_iter()
            .next()
            .filter(|_| got == 1)
        else {
            return Err(DeviceError::BadAnswer {
                resource: resource.into(),
                call: "Allocate",
                got,
            });
        };
        tracing::info!(pod_uid = %uid, container = %key, %resource, devices = ?ids, "allocated devices");
        let mut state = self.state();
        state.allocations.push(Allocation {
            pod_uid: uid.into(),
            container: key.into(),
            resource: resource.into(),
            device_ids: ids.clone(),
            response: ContainerDevices::from_response(response),
        });
        self.save(&state)?;
        Ok(ids)
    }

    /// What one container gets from its devices' plugins (empty if it has none).
    pub fn container_devices(&self, uid: &str, key: &str) -> ContainerDevices {
        let mut all = ContainerDevices::default();
        for a in self
            .state()
            .allocations
            .iter()
            .filter(|a| a.pod_uid == uid && a.container == key)
        {
            all.merge(&a.response);
        }
        all
    }

    /// Calls PreStartContainer of every plugin of this container's devices that asked for it.
    pub async fn pre_start(&self, uid: &str, key: &str) -> Result<(), DeviceError> {
        let calls: Vec<(String, Plugin, Vec<String>)> = {
            let state = self.state();
            state
                .allocations
                .iter()
                .filter(|a| a.pod_uid == uid && a.container == key)
                .filter_map(|a| {
                    let plugin = state.resources.get(&a.resource)?.plugin.clone()?;
                    plugin
                        .options
                        .pre_start_required
                        .then(|| (a.resource.clone(), plugin, a.device_ids.clone()))
                })
                .collect()
        };
        for (resource, plugin, ids) in calls {
            plugin
                .client
                .clone()
                .pre_start_container(proto::PreStartContainerRequest { devices_ids: ids })
                .await
                .map_err(|s| DeviceError::Plugin {
                    resource,
                    call: "PreStartContainer",
                    status: Box::new(s),
                })?;
        }
        Ok(())
    }

    /// Returns the devices of pod `uid` to the pool (it ended or is gone).
    pub fn release(&self, uid: &str) {
        self.release_where(|a| a.pod_uid == uid);
    }

    /// Keeps only the allocations of the pods in `live` (after the first pod list: pods
    /// deleted while the kubelet was down).
    pub fn retain(&self, live: &[String]) {
        self.release_where(|a| !live.contains(&a.pod_uid));
    }

    fn release_where(&self, gone: impl Fn(&Allocation) -> bool) {
        let mut state = self.state();
        let before = state.allocations.len();
        state.allocations.retain(|a| {
            let drop = gone(a);
            if drop {
                tracing::info!(pod_uid = %a.pod_uid, container = %a.container, resource = %a.resource, devices = ?a.device_ids, "released devices");
            }
            !drop
        });
        if state.allocations.len() != before {
            if let Err(e) = self.save(&state) {
                tracing::error!(error = %e, "writing the device manager checkpoint");
            }
            self.notify();
        }
    }

    fn save(&self, state: &State) -> Result<(), DeviceError> {
        checkpoint::save(
            &self.dir,
            &checkpoint::Checkpoint {
                allocations: state.allocations.clone(),
                registered: state
                    .resources
                    .iter()
                    .map(|(name, r)| (name.clone(), r.devices.keys().cloned().collect()))
                    .collect(),
            },
        )
    }

    /// A plugin registered for `resource`: it replaces any earlier one. Returns its generation.
    fn plugin_registered(
        &self,
        resource: &str,
        client: DevicePluginClient<Channel>,
        options: proto::DevicePluginOptions,
        cancel: CancellationToken,
    ) -> u64 {
        let generation = self.generations.fetch_add(1, Ordering::Relaxed) + 1;
        let mut state = self.state();
        let r = state.resources.entry(resource.into()).or_default();
        r.orphaned_since = None;
        if let Some(old) = r.plugin.replace(Plugin {
            client,
            options,
            generation,
            cancel,
        }) {
            old.cancel.cancel();
        }
        drop(state);
        self.notify();
        generation
    }

    /// The device list a plugin (of `generation`) sent.
    fn devices_listed(&self, resource: &str, generation: u64, devices: &[proto::Device]) {
        let mut state = self.state();
        let Some(r) = state.resources.get_mut(resource) else {
            return;
        };
        if r.plugin.as_ref().map(|p| p.generation) != Some(generation) {
            return;
        }
        r.devices = devices
            .iter()
            .map(|d| (d.id.clone(), d.health == HEALTHY))
            .collect();
        let healthy = r.devices.values().filter(|h| **h).count();
        tracing::info!(%resource, devices = r.devices.len(), healthy, "device plugin listed its devices");
        if let Err(e) = self.save(&state) {
            tracing::error!(error = %e, "writing the device manager checkpoint");
        }
        drop(state);
        self.notify();
    }

    /// The connection to a plugin (of `generation`) ended: nothing of it is allocatable
    /// until it registers again.
    fn plugin_gone(&self, resource: &str, generation: u64) {
        let mut state = self.state();
        let Some(r) = state.resources.get_mut(resource) else {
            return;
        };
        if r.plugin.as_ref().map(|p| p.generation) == Some(generation) {
            r.plugin = None;
            r.orphaned_since = Some(Instant::now());
            tracing::warn!(%resource, "device plugin disconnected; its devices are unavailable until it registers again");
            drop(state);
            self.notify();
        }
    }
}
