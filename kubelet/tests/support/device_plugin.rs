//! A sample device plugin speaking the real device plugin API (v1beta1, the kubelet's own
//! generated types) over unix sockets, for the kubelet's tests and the end-to-end tests
//! (which include this file by path). It serves DevicePlugin on `DIR/NAME.sock`, registers
//! with `DIR/kubelet.sock` (again, on a new socket of its own, whenever a restarted kubelet
//! replaces that socket),
//! advertises its devices (health changeable while it runs), prefers the highest device IDs
//! when asked, and records every call the kubelet makes.
//!
//! Allocate gives a container: `SAMPLE_DEVICES=<ids, comma-separated>`, the plugin's host
//! directory read-only at `/sample`, and one device node per device, `/dev/sample-<id>`,
//! made from the host device it was started with (`/dev/null` in the tests).

#![allow(dead_code)]

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{Stream, StreamExt};
use k1s_kubelet::devices::proto::device_plugin_server::{DevicePlugin, DevicePluginServer};
use k1s_kubelet::devices::proto::registration_client::RegistrationClient;
use k1s_kubelet::devices::proto::*;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tonic::service::Routes;
use tonic::{Request, Response, Status};

/// A call the kubelet made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    ListAndWatch,
    Preferred {
        available: Vec<String>,
        must: Vec<String>,
        size: i32,
    },
    Allocate(Vec<String>),
    PreStart(Vec<String>),
}

/// How the plugin behaves.
#[derive(Debug, Clone)]
pub struct Setup {
    pub resource: String,
    pub ids: Vec<String>,
    pub preferred: bool,
    pub pre_start: bool,
    /// The host device node every device is made from.
    pub host_device: String,
    /// The host directory mounted at `/sample`.
    pub mount_dir: PathBuf,
}

struct Shared {
    setup: Setup,
    devices: watch::Sender<Vec<Device>>,
    calls: Mutex<Vec<Call>>,
    cancel: CancellationToken,
}

#[derive(Clone)]
struct Service(Arc<Shared>);

type DeviceStream = Pin<Box<dyn Stream<Item = Result<ListAndWatchResponse, Status>> + Send>>;

#[tonic::async_trait]
impl DevicePlugin for Service {
    async fn get_device_plugin_options(
        &self,
        _: Request<Empty>,
    ) -> Result<Response<DevicePluginOptions>, Status> {
        Ok(Response::new(self.0.options()))
    }

    type ListAndWatchStream = DeviceStream;

    async fn list_and_watch(
        &self,
        _: Request<Empty>,
    ) -> Result<Response<Self::ListAndWatchStream>, Status> {
        self.0.record(Call::ListAndWatch);
        let lists = tokio_stream::wrappers::WatchStream::new(self.0.devices.subscribe())
            .map(|devices| Ok(ListAndWatchResponse { devices }))
            .take_until(self.0.cancel.clone().cancelled_owned());
        Ok(Response::new(Box::pin(lists)))
    }

    async fn get_preferred_allocation(
        &self,
        request: Request<PreferredAllocationRequest>,
    ) -> Result<Response<PreferredAllocationResponse>, Status> {
        let mut responses = Vec::new();
        for r in request.into_inner().container_requests {
            self.0.record(Call::Preferred {
                available: r.available_device_i_ds.clone(),
                must: r.must_include_device_i_ds.clone(),
                size: r.allocation_size,
            });
            // The must-include devices, then the highest IDs.
            let mut ids = r.must_include_device_i_ds.clone();
            let mut rest = r.available_device_i_ds.clone();
            rest.sort();
            rest.reverse();
            for id in rest {
                if ids.len() >= r.allocation_size as usize {
                    break;
                }
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
            responses.push(ContainerPreferredAllocationResponse { device_i_ds: ids });
        }
        Ok(Response::new(PreferredAllocationResponse {
            container_responses: responses,
        }))
    }

    async fn allocate(
        &self,
        request: Request<AllocateRequest>,
    ) -> Result<Response<AllocateResponse>, Status> {
        let setup = &self.0.setup;
        let mut responses = Vec::new();
        for r in request.into_inner().container_requests {
            self.0.record(Call::Allocate(r.devices_ids.clone()));
            let known = self.0.devices.borrow().clone();
            if let Some(bad) = r
                .devices_ids
                .iter()
                .find(|id| !known.iter().any(|d| &d.id == *id))
            {
                return Err(Status::invalid_argument(format!("unknown device {bad}")));
            }
            responses.push(ContainerAllocateResponse {
                envs: [("SAMPLE_DEVICES".to_string(), r.devices_ids.join(","))].into(),
                mounts: vec![Mount {
                    container_path: "/sample".into(),
                    host_path: setup.mount_dir.display().to_string(),
                    read_only: true,
                }],
                devices: r
                    .devices_ids
                    .iter()
                    .map(|id| DeviceSpec {
                        container_path: format!("/dev/sample-{id}"),
                        host_path: setup.host_device.clone(),
                        permissions: "rw".into(),
                    })
                    .collect(),
                annotations: Default::default(),
                cdi_devices: Vec::new(),
            });
        }
        Ok(Response::new(AllocateResponse {
            container_responses: responses,
        }))
    }

    async fn pre_start_container(
        &self,
        request: Request<PreStartContainerRequest>,
    ) -> Result<Response<PreStartContainerResponse>, Status> {
        self.0
            .record(Call::PreStart(request.into_inner().devices_ids));
        Ok(Response::new(PreStartContainerResponse {}))
    }
}

impl Shared {
    fn record(&self, call: Call) {
        self.calls.lock().unwrap().push(call);
    }

    fn options(&self) -> DevicePluginOptions {
        DevicePluginOptions {
            pre_start_required: self.setup.pre_start,
            get_preferred_allocation_available: self.setup.preferred,
        }
    }
}

/// A running sample plugin; stops (its socket gone, its device stream ended) when dropped.
pub struct SamplePlugin {
    shared: Arc<Shared>,
    dir: PathBuf,
    endpoint: String,
}

impl SamplePlugin {
    /// Serves on `dir/<endpoint>` and registers with the kubelet in `dir` (waiting up to
    /// 30 s for its socket); then, whenever that socket is replaced, serves on a new socket
    /// if its own was removed and registers again.
    pub async fn start(dir: &Path, endpoint: &str, setup: Setup) -> Self {
        let devices = setup
            .ids
            .iter()
            .map(|id| Device {
                id: id.clone(),
                health: "Healthy".into(),
                topology: None,
            })
            .collect();
        let shared = Arc::new(Shared {
            setup,
            devices: watch::Sender::new(devices),
            calls: Mutex::new(Vec::new()),
            cancel: CancellationToken::new(),
        });
        let plugin = SamplePlugin {
            shared,
            dir: dir.to_owned(),
            endpoint: endpoint.into(),
        };
        let registered = plugin.register().await;
        tokio::spawn(reregister(
            plugin.shared.clone(),
            plugin.dir.clone(),
            plugin.endpoint.clone(),
            registered,
        ));
        plugin
    }

    async fn register(&self) -> (u64, i64, i64) {
        register(&self.shared, &self.dir, &self.endpoint).await
    }

    /// Marks device `id` healthy or not (a new list goes to the kubelet).
    pub fn set_health(&self, id: &str, healthy: bool) {
        self.shared.devices.send_modify(|devices| {
            for d in devices.iter_mut().filter(|d| d.id == id) {
                d.health = if healthy { "Healthy" } else { "Unhealthy" }.into();
            }
        });
    }

    pub fn calls(&self) -> Vec<Call> {
        self.shared.calls.lock().unwrap().clone()
    }

    pub fn allocations(&self) -> Vec<Vec<String>> {
        self.calls()
            .into_iter()
            .filter_map(|c| match c {
                Call::Allocate(ids) => Some(ids),
                _ => None,
            })
            .collect()
    }
}

impl Drop for SamplePlugin {
    fn drop(&mut self) {
        self.shared.cancel.cancel();
    }
}

/// Which kubelet socket file is there, to notice a restarted kubelet: its inode and change
/// time (a new socket may get the inode of the one it replaced).
fn kubelet_socket_inode(dir: &Path) -> Option<(u64, i64, i64)> {
    std::fs::metadata(dir.join("kubelet.sock"))
        .ok()
        .map(|m| (m.ino(), m.ctime(), m.ctime_nsec()))
}

/// Serves on `dir/endpoint` unless that socket is there: a starting kubelet removes the
/// plugins' sockets, and plugins then start over on a new one.
async fn ensure_serving(shared: &Arc<Shared>, dir: &Path, endpoint: &str) {
    let path = dir.join(endpoint);
    if path.exists() {
        return;
    }
    let socket = k1s_csi::serve::Socket::bind(&path).await.unwrap();
    let routes = Routes::new(DevicePluginServer::new(Service(shared.clone())));
    tokio::spawn(socket.serve(routes, shared.cancel.clone()));
}

/// Registers (retrying until the kubelet's socket answers); returns which socket it was.
async fn register(shared: &Arc<Shared>, dir: &Path, endpoint: &str) -> (u64, i64, i64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let attempt = async {
            ensure_serving(shared, dir, endpoint).await;
            let inode = kubelet_socket_inode(dir).ok_or("no kubelet socket yet")?;
            let channel =
                k1s_csi::connect::connect(&dir.join("kubelet.sock"), Duration::from_secs(5))
                    .await
                    .map_err(|_| "kubelet socket not answering")?;
            RegistrationClient::new(channel)
                .register(RegisterRequest {
                    version: "v1beta1".into(),
                    endpoint: endpoint.into(),
                    resource_name: shared.setup.resource.clone(),
                    options: Some(shared.options()),
                })
                .await
                .map_err(|_| "registration refused")?;
            Ok::<_, &str>(inode)
        };
        match attempt.await {
            Ok(inode) => return inode,
            Err(why) => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "sample device plugin could not register: {why}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Registers again whenever the kubelet's socket is replaced or the plugin's own socket was
/// removed (a restarting kubelet does both), as device plugins are expected to.
async fn reregister(
    shared: Arc<Shared>,
    dir: PathBuf,
    endpoint: String,
    mut inode: (u64, i64, i64),
) {
    loop {
        tokio::select! {
            _ = shared.cancel.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
        }
        let replaced = kubelet_socket_inode(&dir).is_some_and(|now| now != inode);
        if replaced || !dir.join(&endpoint).exists() {
            inode = register(&shared, &dir, &endpoint).await;
        }
    }
}
