//! A recording CSI test plugin: the "second, independent CSI plugin" of issue #8. It serves
//! Identity, Node and a minimal Controller on a unix socket, registers with a kubelet through
//! a `pluginregistration` socket in the kubelet's registry directory, and records every call.
//!
//! Volumes are directories (`DIR/volumes/<id>`); NodeStageVolume bind-mounts one onto the
//! staging path and NodePublishVolume bind-mounts staging (or the volume itself, without
//! staging) onto the target, read-only when asked, so a real container sees the files.
//! With `attach`, it also offers ControllerPublishVolume (a `devicePath` publish context);
//! with `lose_first_create`, the first CreateVolume of each name creates the volume but
//! answers UNAVAILABLE, as a response lost on the way, to see that the CO retries it with
//! the same name. Needs root (mount(2)). Shared by the kubelet's tests and the end-to-end
//! tests of the whole server (`tests/tests/csi_plugin.rs`).
//!
//! ```ignore
//! let plugin = CsiFixture::start(dir, registry_dir, FixtureOptions::default()).await;
//! ...
//! assert_eq!(plugin.methods(), ["NodeStageVolume", "NodePublishVolume"]);
//! ```

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use k1s_csi::proto::registration::registration_server::{Registration, RegistrationServer};
use k1s_csi::proto::registration::{
    InfoRequest, PluginInfo, RegistrationStatus, RegistrationStatusResponse,
};
use k1s_csi::proto::v1::controller_server::{Controller, ControllerServer};
use k1s_csi::proto::v1::identity_server::{Identity, IdentityServer};
use k1s_csi::proto::v1::node_server::{Node, NodeServer};
use k1s_csi::proto::v1::*;
use nix::mount::{MsFlags, mount, umount2};
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

/// One recorded call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Call {
    pub method: &'static str,
    pub volume_id: String,
    /// Staging or target path (or both, `staging -> target`, for NodePublishVolume).
    pub path: String,
    pub readonly: bool,
    pub publish_context: HashMap<String, String>,
    pub volume_context: HashMap<String, String>,
    pub secrets: HashMap<String, String>,
    pub capability: Option<VolumeCapability>,
    /// CreateVolume's requisite topologies.
    pub requisite: Vec<HashMap<String, String>>,
}

/// How the fixture presents itself.
#[derive(Debug, Clone)]
pub struct FixtureOptions {
    pub driver: String,
    pub node_id: String,
    pub max_volumes: i64,
    pub topology: HashMap<String, String>,
    pub stage_unstage: bool,
    /// Offer ControllerPublishVolume/ControllerUnpublishVolume.
    pub attach: bool,
    /// Answer the first CreateVolume of each name UNAVAILABLE after creating the volume.
    pub lose_first_create: bool,
}

impl Default for FixtureOptions {
    fn default() -> Self {
        Self {
            driver: "fixture.csi.k1s.io".into(),
            node_id: "fixture-node-1".into(),
            max_volumes: 5,
            topology: [("topology.fixture.csi.k1s.io/zone".into(), "z1".into())].into(),
            stage_unstage: true,
            attach: false,
            lose_first_create: false,
        }
    }
}

struct Shared {
    opts: FixtureOptions,
    dir: PathBuf,
    calls: Mutex<Vec<Call>>,
    ready: AtomicBool,
    registrations: Mutex<Vec<RegistrationStatus>>,
    /// Names CreateVolume has seen.
    created: Mutex<std::collections::HashSet<String>>,
}

impl Shared {
    fn record(&self, call: Call) {
        self.calls.lock().unwrap().push(call);
    }

    fn volume_dir(&self, id: &str) -> Result<PathBuf, Status> {
        self.dir_in("volumes", id)
    }

    fn snapshot_dir(&self, id: &str) -> Result<PathBuf, Status> {
        self.dir_in("snapshots", id)
    }

    fn dir_in(&self, kind: &str, id: &str) -> Result<PathBuf, Status> {
        if id.is_empty() || id.contains('/') || id.starts_with('.') {
            return Err(Status::invalid_argument(format!("bad {kind} id {id:?}")));
        }
        Ok(self.dir.join(kind).join(id))
    }
}

/// The running fixture; stops (sockets removed) when dropped.
pub struct CsiFixture {
    shared: Arc<Shared>,
    pub endpoint: PathBuf,
    pub registration_socket: PathBuf,
    cancel: CancellationToken,
}

impl Drop for CsiFixture {
    fn drop(&mut self) {
        self.cancel.cancel();
        let _ = std::fs::remove_file(&self.registration_socket);
        let _ = std::fs::remove_file(&self.endpoint);
    }
}

fn serve_unix<S>(path: &Path, router: S, cancel: CancellationToken)
where
    S: FnOnce(tonic::transport::server::Server) -> tonic::transport::server::Router,
{
    let _ = std::fs::remove_file(path);
    let listener = tokio::net::UnixListener::bind(path).expect("binding the fixture socket");
    let incoming = tokio_stream::wrappers::UnixListenerStream::new(listener);
    let router = router(tonic::transport::Server::builder());
    tokio::spawn(async move {
        let _ = router
            .serve_with_incoming_shutdown(incoming, cancel.cancelled_owned())
            .await;
    });
}

impl CsiFixture {
    /// Serves CSI on `DIR/csi.sock` and registration on `REGISTRY/<driver>-reg.sock`.
    pub async fn start(dir: &Path, registry: &Path, opts: FixtureOptions) -> Self {
        std::fs::create_dir_all(dir.join("volumes")).unwrap();
        std::fs::create_dir_all(registry).unwrap();
        let shared = Arc::new(Shared {
            opts,
            dir: dir.to_path_buf(),
            calls: Mutex::new(Vec::new()),
            ready: AtomicBool::new(true),
            registrations: Mutex::new(Vec::new()),
            created: Mutex::new(Default::default()),
        });
        let cancel = CancellationToken::new();
        let endpoint = dir.join("csi.sock");
        let s = shared.clone();
        serve_unix(
            &endpoint,
            move |b| {
                let mut b = b;
                b.add_service(IdentityServer::new(Svc(s.clone())))
                    .add_service(NodeServer::new(Svc(s.clone())))
                    .add_service(ControllerServer::new(Svc(s)))
            },
            cancel.clone(),
        );
        let registration_socket = registry.join(format!("{}-reg.sock", shared.opts.driver));
        let reg = Reg {
            shared: shared.clone(),
            endpoint: endpoint.clone(),
        };
        serve_unix(
            &registration_socket,
            move |b| {
                let mut b = b;
                b.add_service(RegistrationServer::new(reg))
            },
            cancel.clone(),
        );
        Self {
            shared,
            endpoint,
            registration_socket,
            cancel,
        }
    }

    pub fn driver(&self) -> &str {
        &self.shared.opts.driver
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<Call> {
        self.shared.calls.lock().unwrap().clone()
    }

    /// The methods called so far, Identity calls and NodeGetCapabilities left out.
    pub fn methods(&self) -> Vec<&'static str> {
        self.calls()
            .into_iter()
            .map(|c| c.method)
            .filter(|m| {
                !matches!(
                    *m,
                    "GetPluginInfo" | "GetPluginCapabilities" | "Probe" | "NodeGetCapabilities"
                )
            })
            .collect()
    }

    pub fn clear(&self) {
        self.shared.calls.lock().unwrap().clear();
    }

    /// What the kubelet told the registration service.
    pub fn registrations(&self) -> Vec<RegistrationStatus> {
        self.shared.registrations.lock().unwrap().clone()
    }

    /// Makes Probe answer not ready.
    pub fn set_ready(&self, ready: bool) {
        self.shared.ready.store(ready, Ordering::SeqCst);
    }

    /// The backing directory of volume `id` (created by CreateVolume or by hand).
    pub fn volume_dir(&self, id: &str) -> PathBuf {
        self.shared.dir.join("volumes").join(id)
    }

    /// Removes the registration socket, as a plugin that goes away.
    pub fn unregister(&self) {
        let _ = std::fs::remove_file(&self.registration_socket);
    }
}

#[derive(Clone)]
struct Svc(Arc<Shared>);

struct Reg {
    shared: Arc<Shared>,
    endpoint: PathBuf,
}

#[tonic::async_trait]
impl Registration for Reg {
    async fn get_info(&self, _: Request<InfoRequest>) -> Result<Response<PluginInfo>, Status> {
        Ok(Response::new(PluginInfo {
            r#type: "CSIPlugin".into(),
            name: self.shared.opts.driver.clone(),
            endpoint: self.endpoint.display().to_string(),
            supported_versions: vec!["1.0.0".into()],
        }))
    }

    async fn notify_registration_status(
        &self,
        req: Request<RegistrationStatus>,
    ) -> Result<Response<RegistrationStatusResponse>, Status> {
        self.shared
            .registrations
            .lock()
            .unwrap()
            .push(req.into_inner());
        Ok(Response::new(RegistrationStatusResponse {}))
    }
}

#[tonic::async_trait]
impl Identity for Svc {
    async fn get_plugin_info(
        &self,
        _: Request<GetPluginInfoRequest>,
    ) -> Result<Response<GetPluginInfoResponse>, Status> {
        self.0.record(Call {
            method: "GetPluginInfo",
            ..Default::default()
        });
        Ok(Response::new(GetPluginInfoResponse {
            name: self.0.opts.driver.clone(),
            vendor_version: "0.0.1".into(),
            manifest: Default::default(),
        }))
    }

    async fn get_plugin_capabilities(
        &self,
        _: Request<GetPluginCapabilitiesRequest>,
    ) -> Result<Response<GetPluginCapabilitiesResponse>, Status> {
        self.0.record(Call {
            method: "GetPluginCapabilities",
            ..Default::default()
        });
        use plugin_capability::service::Type;
        Ok(Response::new(GetPluginCapabilitiesResponse {
            capabilities: vec![
                PluginCapability {
                    r#type: Some(plugin_capability::Type::Service(
                        plugin_capability::Service {
                            r#type: Type::ControllerService as i32,
                        },
                    )),
                },
                PluginCapability {
                    r#type: Some(plugin_capability::Type::VolumeExpansion(
                        plugin_capability::VolumeExpansion {
                            r#type: plugin_capability::volume_expansion::Type::Online as i32,
                        },
                    )),
                },
            ],
        }))
    }

    async fn probe(&self, _: Request<ProbeRequest>) -> Result<Response<ProbeResponse>, Status> {
        self.0.record(Call {
            method: "Probe",
            ..Default::default()
        });
        Ok(Response::new(ProbeResponse {
            ready: Some(self.0.ready.load(Ordering::SeqCst)),
        }))
    }
}

fn bind(source: &Path, target: &Path, readonly: bool) -> Result<(), Status> {
    let fail = |e: nix::Error| Status::internal(format!("mount {}: {e}", target.display()));
    mount(
        Some(source),
        target,
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )
    .map_err(fail)?;
    if readonly {
        mount(
            None::<&str>,
            target,
            None::<&str>,
            MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY,
            None::<&str>,
        )
        .map_err(fail)?;
    }
    Ok(())
}

/// Copies the files of `from` (flat: volumes hold files) into a new directory `to`.
fn copy_files(from: &Path, to: &Path) -> Result<(), Status> {
    let internal = |e: std::io::Error| Status::internal(e.to_string());
    std::fs::create_dir_all(to).map_err(internal)?;
    for entry in std::fs::read_dir(from).map_err(internal)?.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_file()) {
            std::fs::copy(entry.path(), to.join(entry.file_name())).map_err(internal)?;
        }
    }
    Ok(())
}

fn is_mount_point(path: &Path) -> bool {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    let p = path.display().to_string();
    info.lines()
        .any(|l| l.split_whitespace().nth(4) == Some(p.as_str()))
}

fn unmount(path: &Path) -> Result<(), Status> {
    while is_mount_point(path) {
        umount2(path, nix::mount::MntFlags::MNT_DETACH)
            .map_err(|e| Status::internal(format!("umount {}: {e}", path.display())))?;
    }
    Ok(())
}

#[tonic::async_trait]
impl Node for Svc {
    async fn node_stage_volume(
        &self,
        req: Request<NodeStageVolumeRequest>,
    ) -> Result<Response<NodeStageVolumeResponse>, Status> {
        let r = req.into_inner();
        self.0.record(Call {
            method: "NodeStageVolume",
            volume_id: r.volume_id.clone(),
            path: r.staging_target_path.clone(),
            publish_context: r.publish_context.clone(),
            volume_context: r.volume_context.clone(),
            secrets: r.secrets.clone(),
            capability: r.volume_capability.clone(),
            ..Default::default()
        });
        let vol = self.0.volume_dir(&r.volume_id)?;
        std::fs::create_dir_all(&vol).map_err(|e| Status::internal(e.to_string()))?;
        let staging = PathBuf::from(&r.staging_target_path);
        if !staging.is_dir() {
            return Err(Status::failed_precondition("staging path does not exist"));
        }
        if !is_mount_point(&staging) {
            bind(&vol, &staging, false)?;
        }
        Ok(Response::new(NodeStageVolumeResponse {}))
    }

    async fn node_unstage_volume(
        &self,
        req: Request<NodeUnstageVolumeRequest>,
    ) -> Result<Response<NodeUnstageVolumeResponse>, Status> {
        let r = req.into_inner();
        self.0.record(Call {
            method: "NodeUnstageVolume",
            volume_id: r.volume_id.clone(),
            path: r.staging_target_path.clone(),
            ..Default::default()
        });
        unmount(Path::new(&r.staging_target_path))?;
        Ok(Response::new(NodeUnstageVolumeResponse {}))
    }

    async fn node_publish_volume(
        &self,
        req: Request<NodePublishVolumeRequest>,
    ) -> Result<Response<NodePublishVolumeResponse>, Status> {
        let r = req.into_inner();
        self.0.record(Call {
            method: "NodePublishVolume",
            volume_id: r.volume_id.clone(),
            path: format!("{} -> {}", r.staging_target_path, r.target_path),
            readonly: r.readonly,
            publish_context: r.publish_context.clone(),
            volume_context: r.volume_context.clone(),
            secrets: r.secrets.clone(),
            capability: r.volume_capability.clone(),
            ..Default::default()
        });
        let source = if self.0.opts.stage_unstage {
            if r.staging_target_path.is_empty() {
                return Err(Status::failed_precondition("volume is not staged"));
            }
            PathBuf::from(&r.staging_target_path)
        } else {
            let vol = self.0.volume_dir(&r.volume_id)?;
            std::fs::create_dir_all(&vol).map_err(|e| Status::internal(e.to_string()))?;
            vol
        };
        let target = PathBuf::from(&r.target_path);
        // The CO makes the parent; the plugin makes the target (CSI spec).
        std::fs::create_dir_all(&target).map_err(|e| Status::internal(e.to_string()))?;
        if !is_mount_point(&target) {
            bind(&source, &target, r.readonly)?;
        }
        Ok(Response::new(NodePublishVolumeResponse {}))
    }

    async fn node_unpublish_volume(
        &self,
        req: Request<NodeUnpublishVolumeRequest>,
    ) -> Result<Response<NodeUnpublishVolumeResponse>, Status> {
        let r = req.into_inner();
        self.0.record(Call {
            method: "NodeUnpublishVolume",
            volume_id: r.volume_id.clone(),
            path: r.target_path.clone(),
            ..Default::default()
        });
        let target = Path::new(&r.target_path);
        unmount(target)?;
        let _ = std::fs::remove_dir(target);
        Ok(Response::new(NodeUnpublishVolumeResponse {}))
    }

    async fn node_get_volume_stats(
        &self,
        req: Request<NodeGetVolumeStatsRequest>,
    ) -> Result<Response<NodeGetVolumeStatsResponse>, Status> {
        let r = req.into_inner();
        self.0.record(Call {
            method: "NodeGetVolumeStats",
            volume_id: r.volume_id.clone(),
            path: r.volume_path.clone(),
            ..Default::default()
        });
        let st = nix::sys::statvfs::statvfs(Path::new(&r.volume_path))
            .map_err(|e| Status::not_found(e.to_string()))?;
        let frag = st.fragment_size() as i64;
        let usage = |unit: volume_usage::Unit, total: i64, avail: i64| VolumeUsage {
            total,
            available: avail,
            used: total - avail,
            unit: unit as i32,
        };
        Ok(Response::new(NodeGetVolumeStatsResponse {
            usage: vec![
                usage(
                    volume_usage::Unit::Bytes,
                    st.blocks() as i64 * frag,
                    st.blocks_available() as i64 * frag,
                ),
                usage(
                    volume_usage::Unit::Inodes,
                    st.files() as i64,
                    st.files_available() as i64,
                ),
            ],
            volume_condition: None,
        }))
    }

    async fn node_expand_volume(
        &self,
        req: Request<NodeExpandVolumeRequest>,
    ) -> Result<Response<NodeExpandVolumeResponse>, Status> {
        let r = req.into_inner();
        let bytes = r.capacity_range.map_or(0, |c| c.required_bytes);
        self.0.record(Call {
            method: "NodeExpandVolume",
            volume_id: r.volume_id.clone(),
            path: r.volume_path.clone(),
            ..Default::default()
        });
        Ok(Response::new(NodeExpandVolumeResponse {
            capacity_bytes: bytes,
        }))
    }

    async fn node_get_capabilities(
        &self,
        _: Request<NodeGetCapabilitiesRequest>,
    ) -> Result<Response<NodeGetCapabilitiesResponse>, Status> {
        self.0.record(Call {
            method: "NodeGetCapabilities",
            ..Default::default()
        });
        use node_service_capability::rpc::Type;
        let mut caps = vec![Type::GetVolumeStats, Type::ExpandVolume];
        if self.0.opts.stage_unstage {
            caps.push(Type::StageUnstageVolume);
        }
        Ok(Response::new(NodeGetCapabilitiesResponse {
            capabilities: caps
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
        self.0.record(Call {
            method: "NodeGetInfo",
            ..Default::default()
        });
        let o = &self.0.opts;
        Ok(Response::new(NodeGetInfoResponse {
            node_id: o.node_id.clone(),
            max_volumes_per_node: o.max_volumes,
            accessible_topology: (!o.topology.is_empty()).then(|| Topology {
                segments: o.topology.clone(),
            }),
        }))
    }
}

/// Controller RPCs the fixture does not implement.
macro_rules! unimplemented_rpcs {
    ($($name:ident($req:ty) -> $resp:ty;)*) => {
        $(
            // Spelled as `async_trait` expands methods: macro output is not seen by it.
            fn $name<'life0, 'async_trait>(
                &'life0 self,
                _: Request<$req>,
            ) -> std::pin::Pin<Box<
                dyn std::future::Future<Output = Result<Response<$resp>, Status>>
                    + Send
                    + 'async_trait,
            >>
            where
                'life0: 'async_trait,
                Self: 'async_trait,
            {
                Box::pin(async { Err(Status::unimplemented(stringify!($name))) })
            }
        )*
    };
}

#[tonic::async_trait]
impl Controller for Svc {
    async fn create_volume(
        &self,
        req: Request<CreateVolumeRequest>,
    ) -> Result<Response<CreateVolumeResponse>, Status> {
        let r = req.into_inner();
        self.0.record(Call {
            method: "CreateVolume",
            volume_id: r.name.clone(),
            volume_context: r.parameters.clone(),
            secrets: r.secrets.clone(),
            capability: r.volume_capabilities.first().cloned(),
            requisite: r
                .accessibility_requirements
                .iter()
                .flat_map(|t| &t.requisite)
                .map(|t| t.segments.clone())
                .collect(),
            ..Default::default()
        });
        // Its volumes are reachable where it runs: a requirement elsewhere cannot be met.
        let requirements = r.accessibility_requirements.unwrap_or_default();
        let here = &self.0.opts.topology;
        let reachable = |ts: &[Topology]| {
            ts.iter()
                .any(|t| t.segments.iter().all(|(k, v)| here.get(k) == Some(v)))
        };
        if !requirements.requisite.is_empty() && !reachable(&requirements.requisite) {
            return Err(Status::resource_exhausted(format!(
                "no capacity in {:?}",
                requirements.requisite
            )));
        }
        let accessible_topology = if requirements.requisite.is_empty() {
            Vec::new()
        } else {
            vec![Topology {
                segments: here.clone(),
            }]
        };
        let dir = self.0.volume_dir(&r.name)?;
        // A snapshot or another volume to start from.
        let source = match r
            .volume_content_source
            .as_ref()
            .and_then(|s| s.r#type.as_ref())
        {
            Some(volume_content_source::Type::Snapshot(s)) => {
                Some(self.0.snapshot_dir(&s.snapshot_id)?)
            }
            Some(volume_content_source::Type::Volume(v)) => Some(self.0.volume_dir(&v.volume_id)?),
            None => None,
        };
        if let Some(source) = &source
            && !source.is_dir()
        {
            return Err(Status::not_found(format!(
                "no content source {}",
                source.display()
            )));
        }
        if !dir.exists() {
            match &source {
                Some(source) => copy_files(source, &dir)?,
                None => {
                    std::fs::create_dir_all(&dir).map_err(|e| Status::internal(e.to_string()))?
                }
            }
        }
        let first = self.0.created.lock().unwrap().insert(r.name.clone());
        if first && self.0.opts.lose_first_create {
            return Err(Status::unavailable("the fixture lost this response"));
        }
        Ok(Response::new(CreateVolumeResponse {
            volume: Some(k1s_csi::proto::v1::Volume {
                volume_id: r.name,
                capacity_bytes: r.capacity_range.map_or(0, |c| c.required_bytes),
                accessible_topology,
                content_source: r.volume_content_source,
                ..Default::default()
            }),
        }))
    }

    async fn delete_volume(
        &self,
        req: Request<DeleteVolumeRequest>,
    ) -> Result<Response<DeleteVolumeResponse>, Status> {
        let r = req.into_inner();
        self.0.record(Call {
            method: "DeleteVolume",
            volume_id: r.volume_id.clone(),
            ..Default::default()
        });
        let _ = std::fs::remove_dir_all(self.0.volume_dir(&r.volume_id)?);
        Ok(Response::new(DeleteVolumeResponse {}))
    }

    async fn controller_publish_volume(
        &self,
        req: Request<ControllerPublishVolumeRequest>,
    ) -> Result<Response<ControllerPublishVolumeResponse>, Status> {
        let r = req.into_inner();
        self.0.record(Call {
            method: "ControllerPublishVolume",
            volume_id: r.volume_id.clone(),
            path: r.node_id.clone(),
            readonly: r.readonly,
            volume_context: r.volume_context.clone(),
            secrets: r.secrets.clone(),
            capability: r.volume_capability.clone(),
            ..Default::default()
        });
        if !self.0.opts.attach {
            return Err(Status::unimplemented("ControllerPublishVolume"));
        }
        if r.node_id != self.0.opts.node_id {
            return Err(Status::not_found(format!("no node {:?}", r.node_id)));
        }
        if !self.0.volume_dir(&r.volume_id)?.is_dir() {
            return Err(Status::not_found(format!("no volume {:?}", r.volume_id)));
        }
        Ok(Response::new(ControllerPublishVolumeResponse {
            publish_context: [("devicePath".into(), format!("/dev/fixture/{}", r.volume_id))]
                .into(),
        }))
    }

    async fn controller_unpublish_volume(
        &self,
        req: Request<ControllerUnpublishVolumeRequest>,
    ) -> Result<Response<ControllerUnpublishVolumeResponse>, Status> {
        let r = req.into_inner();
        self.0.record(Call {
            method: "ControllerUnpublishVolume",
            volume_id: r.volume_id.clone(),
            path: r.node_id.clone(),
            ..Default::default()
        });
        if !self.0.opts.attach {
            return Err(Status::unimplemented("ControllerUnpublishVolume"));
        }
        Ok(Response::new(ControllerUnpublishVolumeResponse {}))
    }

    async fn controller_get_capabilities(
        &self,
        _: Request<ControllerGetCapabilitiesRequest>,
    ) -> Result<Response<ControllerGetCapabilitiesResponse>, Status> {
        use controller_service_capability::rpc::Type;
        let mut types = vec![
            Type::CreateDeleteVolume,
            Type::ExpandVolume,
            Type::CreateDeleteSnapshot,
            Type::CloneVolume,
        ];
        if self.0.opts.attach {
            types.push(Type::PublishUnpublishVolume);
        }
        Ok(Response::new(ControllerGetCapabilitiesResponse {
            capabilities: types
                .into_iter()
                .map(|t| ControllerServiceCapability {
                    r#type: Some(controller_service_capability::Type::Rpc(
                        controller_service_capability::Rpc { r#type: t as i32 },
                    )),
                })
                .collect(),
        }))
    }

    async fn controller_expand_volume(
        &self,
        req: Request<ControllerExpandVolumeRequest>,
    ) -> Result<Response<ControllerExpandVolumeResponse>, Status> {
        let r = req.into_inner();
        let bytes = r.capacity_range.map_or(0, |c| c.required_bytes);
        self.0.record(Call {
            method: "ControllerExpandVolume",
            volume_id: r.volume_id.clone(),
            path: bytes.to_string(),
            ..Default::default()
        });
        if !self.0.volume_dir(&r.volume_id)?.is_dir() {
            return Err(Status::not_found(format!("no volume {:?}", r.volume_id)));
        }
        Ok(Response::new(ControllerExpandVolumeResponse {
            capacity_bytes: bytes,
            node_expansion_required: true,
        }))
    }

    async fn create_snapshot(
        &self,
        req: Request<CreateSnapshotRequest>,
    ) -> Result<Response<CreateSnapshotResponse>, Status> {
        let r = req.into_inner();
        self.0.record(Call {
            method: "CreateSnapshot",
            volume_id: r.source_volume_id.clone(),
            path: r.name.clone(),
            secrets: r.secrets.clone(),
            ..Default::default()
        });
        let source = self.0.volume_dir(&r.source_volume_id)?;
        if !source.is_dir() {
            return Err(Status::not_found(format!(
                "no volume {:?}",
                r.source_volume_id
            )));
        }
        let snapshot = self.0.snapshot_dir(&r.name)?;
        if !snapshot.exists() {
            copy_files(&source, &snapshot)?;
        }
        let mut snap = Snapshot {
            snapshot_id: r.name,
            source_volume_id: r.source_volume_id,
            creation_time: Some(Default::default()),
            ready_to_use: true,
            ..Default::default()
        };
        if let Some(t) = snap.creation_time.as_mut() {
            t.seconds = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64);
        }
        Ok(Response::new(CreateSnapshotResponse {
            snapshot: Some(snap),
        }))
    }

    async fn delete_snapshot(
        &self,
        req: Request<DeleteSnapshotRequest>,
    ) -> Result<Response<DeleteSnapshotResponse>, Status> {
        let r = req.into_inner();
        self.0.record(Call {
            method: "DeleteSnapshot",
            path: r.snapshot_id.clone(),
            ..Default::default()
        });
        let _ = std::fs::remove_dir_all(self.0.snapshot_dir(&r.snapshot_id)?);
        Ok(Response::new(DeleteSnapshotResponse {}))
    }

    unimplemented_rpcs! {
        validate_volume_capabilities(ValidateVolumeCapabilitiesRequest) -> ValidateVolumeCapabilitiesResponse;
        list_volumes(ListVolumesRequest) -> ListVolumesResponse;
        get_capacity(GetCapacityRequest) -> GetCapacityResponse;
        list_snapshots(ListSnapshotsRequest) -> ListSnapshotsResponse;
        get_snapshot(GetSnapshotRequest) -> GetSnapshotResponse;
        controller_get_volume(ControllerGetVolumeRequest) -> ControllerGetVolumeResponse;
        controller_modify_volume(ControllerModifyVolumeRequest) -> ControllerModifyVolumeResponse;
    }
}
