//! The kubelet: node registration, one worker per pod, and the container runtime in process
//! (OCI images, namespaces, cgroups, the pod network), issue #7.
//!
//! Each OS edge sits behind a trait with a real and a fake implementation:
//! [`images::ImageService`], [`cgroups::CgroupManager`], [`network::PodNetwork`],
//! [`runtime::Runtime`]. [`run`] wires them: it registers the node, keeps its Lease, and feeds
//! the pods bound to this node to their [`pod::worker::PodWorker`]s ([`pod::feed`]); the
//! [`eviction`] manager fails pods to protect the node. [`server::port`] serves the kubelet's
//! HTTPS port (logs, exec, attach, port-forward and the node proxy) for the API server.
//!
//! The folders, by subsystem:
//!
//! | Folder | Owns |
//! |---|---|
//! | [`pod`] | the pod feed, the pod workers, their plan and back-off, sandboxes, status, hooks, static pods, admission |
//! | [`server`] | what the kubelet's port answers: logs, exec/attach/port-forward streams, the node API |
//! | [`eviction`] | node pressure signals and the eviction manager |
//! | [`images`] | image pulls, the content store, image garbage collection |
//! | [`runtime`] | the container runtime (shim, namespaces, mounts) |
//! | [`cgroups`], [`network`], [`volumes`], [`probes`], [`devices`], [`csi`] | their OS or plugin edge |

pub mod bootstrap;
pub mod cgroups;
pub mod config;
pub mod container;
pub mod csi;
pub mod devices;
pub mod eviction;
pub mod images;
mod mountinfo;
pub mod network;
pub mod node;
pub mod pod;
mod pod_containers;
pub mod probes;
pub mod runtime;
pub mod server;
pub mod stats;
pub mod volumes;

// The paths from before the kubelet was grouped by subsystem, for the crates outside it
// (cmd, apiserver) and `cgroups/resources.rs`; new code uses the grouped paths.
pub use eviction::pressure;
pub use pod::{admission, status};
pub use server::{node_api, port, streams};

use std::sync::Arc;

use k1s_api::client::Client;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use config::Config;

/// What the kubelet works with.
pub struct Deps {
    pub client: Arc<dyn Client>,
    pub config: Arc<Config>,
    pub images: Arc<dyn images::ImageService>,
    pub runtime: Arc<dyn runtime::Runtime>,
    pub cgroups: Arc<dyn cgroups::CgroupManager>,
    pub network: Arc<dyn network::PodNetwork>,
    pub volumes: Arc<volumes::VolumeManager>,
    /// Device plugins and the devices pods hold.
    pub devices: Arc<devices::DeviceManager>,
    /// The pods admitted on this node (resources, host ports).
    pub admitted: Arc<admission::Admitted>,
    /// `kubelet` on this node, for events.
    pub event_source: k1s_api::events::Source,
    /// How many new pods may be set up at once (see [`start_slots`]).
    pub start_slots: Arc<tokio::sync::Semaphore>,
}

/// The slots for setting up new pods: twice the CPUs (at least 2). A burst of new pods is
/// set up a few at a time instead of all at once: every setup step (namespaces, netlink under
/// the kernel's one rtnl lock, mounts, cgroup writes, status writes) then runs with less
/// contention, and the first pods of the burst are Running early instead of all of them
/// together at the end (measured: 100 pods at once, p50 create → Running halved; see
/// docs/benchmarks.md). Pods already set up (restarts, probes, deletion) take no slot.
pub fn start_slots() -> Arc<tokio::sync::Semaphore> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    Arc::new(tokio::sync::Semaphore::new((2 * cpus).max(2)))
}

/// Runs the kubelet until `cancel` fires. Containers keep running after it returns; its
/// tasks (the pod workers, the heartbeat, the managers and loops) have all ended by then.
pub async fn run(deps: Arc<Deps>, cancel: CancellationToken) {
    let config = deps.config.clone();
    let machine = node::Machine::detect(&config.root_dir);
    let capacity = machine.capacity(config.max_pods);
    let alloc = node::allocatable(&capacity, &config);
    deps.admitted.set_allocatable(alloc.clone());
    let qos_limits = cgroups::Resources {
        cpu_shares: alloc
            .get("cpu")
            .map(|q| (q.milli_value().max(2) as u64 * 1024 / 1000).max(2)),
        memory_limit: alloc.get("memory").map(|q| q.value()),
        ..Default::default()
    };
    if let Err(e) = deps.cgroups.ensure_qos_hierarchy(&qos_limits) {
        tracing::error!(error = %e, "creating the kubepods cgroups");
    }
    if let Err(e) = deps.network.init().await {
        tracing::error!(error = %e, "setting up the pod network");
    }
    let reported = loop {
        match node::register(
            deps.client.as_ref(),
            &config,
            &machine,
            deps.images.as_ref(),
            deps.devices.as_ref(),
        )
        .await
        {
            Ok(status) => break status,
            Err(e) => tracing::warn!(error = %e, "registering the node; retrying"),
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(std::time::Duration::from_secs(2)) => {}
        }
    };
    tracing::info!(node = %config.node_name, "node registered");
    admission::refresh_labels(&deps.admitted, deps.client.as_ref(), &config.node_name).await;
    // Every task below stops on `cancel`; the kubelet returns once they all have.
    let tasks = TaskTracker::new();
    start_csi(&deps, &tasks, &cancel);
    tasks.spawn(deps.devices.clone().run(cancel.clone()));
    tasks.spawn(node::heartbeat(
        deps.clone(),
        machine,
        reported,
        cancel.clone(),
    ));
    tasks.spawn(images::gc_loop::run(deps.clone(), cancel.clone()));
    let (evict_tx, evict_rx) = tokio::sync::mpsc::channel(16);
    tasks.spawn(eviction::run(deps.clone(), evict_tx, cancel.clone()));
    pod::feed::run(deps, evict_rx, cancel).await;
    tasks.close();
    tasks.wait().await;
}

/// The CSI side (issue #8): rebuilds the CSI volume state from disk, then runs the plugin
/// watcher on `ROOT/plugins_registry`, the Probe loop and the cleanup of volumes staged for
/// pods that are gone, and the refresh of the volume stats gauges.
fn start_csi(deps: &Arc<Deps>, tasks: &TaskTracker, cancel: &CancellationToken) {
    let csi = deps.volumes.csi();
    csi.set_node_name(&deps.config.node_name);
    csi.reconstruct();
    let registrar = Arc::new(csi::Registrar::new(
        deps.client.clone(),
        &deps.config.node_name,
        csi.drivers(),
        Arc::new(csi::GrpcConnector),
    ));
    tasks.spawn(k1s_csi::watcher::run(
        csi.registry_dir(),
        registrar,
        cancel.clone(),
    ));
    tasks.spawn(csi::probe_loop(
        csi.drivers(),
        deps.client.clone(),
        deps.event_source.clone(),
        deps.config.node_name.clone(),
        csi::PROBE_INTERVAL,
        cancel.clone(),
    ));
    let volumes = deps.volumes.clone();
    let stop = cancel.clone();
    tasks.spawn(async move {
        loop {
            volumes.csi().refresh_metrics().await;
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(csi::STATS_INTERVAL) => {}
            }
        }
    });
    let volumes = deps.volumes.clone();
    let cancel = cancel.clone();
    tasks.spawn(async move {
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(std::time::Duration::from_secs(10)) => {}
            }
            volumes.retry_teardowns().await;
            if let Err(e) = volumes.csi().unstage_unused().await {
                tracing::debug!(error = %e, "unstaging unused CSI volumes");
            }
        }
    });
}
