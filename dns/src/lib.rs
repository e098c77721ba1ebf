//! The cluster DNS of k1s: one server per node, in the node's process, answering the
//! `kube-dns` Service's ClusterIP for the pods of that node.
//!
//! Where it runs (decided in issue #27; `docs/networking.md`): every node with a kubelet
//! runs a [`DnsServer`] on its pod bridge's gateway address (port 53 UDP and TCP, metrics on
//! 9153) and says so on its Node (annotation [`ADDRESS_ANNOTATION`]) once its informers have
//! synced. The controller manager lists those addresses, per node, in the `kube-dns`
//! Service's EndpointSlice, and the Service has `internalTrafficPolicy: Local`, so the
//! service proxy sends a pod's query to its own node's server: it never crosses the network,
//! and a node cut off from the API server still answers from its last view.
//!
//! The modules, each one job:
//! - [`index`]: the cluster's names from the Service and EndpointSlice informers;
//! - [`answer`]: the specification's records for a name, from the index;
//! - [`forward`]: other names, asked of the host's resolvers, with a cache;
//! - [`upstreams`]: which `resolv.conf` names the host's resolvers;
//! - [`server`]: the UDP and TCP wire, truncation;
//! - [`transport`]: UDP or TCP, and the sockets bound for them;
//! - [`packet_cache`]: encoded answers reused for byte-identical questions;
//! - [`metrics`]: counters and the metrics port.

pub mod answer;
pub mod forward;
pub mod index;
pub mod metrics;
pub mod packet_cache;
pub mod server;
pub mod transport;
pub mod upstreams;

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use k1s_api::client::{Client, Patch, ResourceRef, WriteParams};
use k1s_runtime::reflector::{self, Change};
use k1s_runtime::watcher;
use k8s_openapi::Metadata;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::answer::Zone;
use crate::forward::Forwarder;
use crate::index::Index;
use crate::metrics::{Gauges, Metrics};
use crate::packet_cache::PacketCache;
use crate::server::Handler;

/// The Node annotation with the address this node's DNS server answers on.
pub use k1s_api::dns::ADDRESS_ANNOTATION;

#[derive(Debug, thiserror::Error)]
pub enum DnsError {
    #[error("cannot listen on {addr} ({proto}): {source}")]
    Bind {
        addr: SocketAddr,
        proto: &'static str,
        #[source]
        source: std::io::Error,
    },
}

/// How a node's DNS server runs.
#[derive(Debug, Clone)]
pub struct DnsConfig {
    /// This node (the Node annotated with the address).
    pub node_name: String,
    /// The cluster domain (`cluster.local`).
    pub zone: String,
    /// TTL of cluster records, and of negative answers about them.
    pub ttl: u32,
    /// The address answered on (the pod bridge's gateway).
    pub listen: IpAddr,
    pub port: u16,
    /// The metrics port (`/metrics`, `/health`) on the same address; none when `None`.
    pub metrics_port: Option<u16>,
    /// The `kube-dns` Service's address (answered for `ns.dns.ZONE`).
    pub dns_ip: Option<IpAddr>,
    /// Resolvers for names outside the cluster.
    pub upstreams: Vec<SocketAddr>,
    pub forward_timeout: Duration,
    /// Forwarded answers kept at most.
    pub cache_size: usize,
    /// UDP receiving tasks.
    pub workers: usize,
}

impl DnsConfig {
    pub fn new(node_name: &str, listen: IpAddr) -> Self {
        Self {
            node_name: node_name.into(),
            zone: "cluster.local".into(),
            ttl: 5,
            listen,
            port: 53,
            metrics_port: Some(9153),
            dns_ip: None,
            upstreams: Vec::new(),
            forward_timeout: Duration::from_secs(2),
            cache_size: 10_000,
            workers: 2,
        }
    }
}

/// A node's DNS server, its sockets bound.
pub struct DnsServer {
    config: DnsConfig,
    handler: Arc<Handler>,
    udp: Arc<tokio::net::UdpSocket>,
    tcp: tokio::net::TcpListener,
    metrics: Option<tokio::net::TcpListener>,
}

impl DnsServer {
    /// Binds the ports (the address need not exist yet: `IP_FREEBIND`), so that a port in
    /// use stops the start with a message that names it.
    pub fn bind(config: DnsConfig) -> Result<Self, DnsError> {
        let addr = SocketAddr::new(config.listen, config.port);
        let err = |addr, proto| {
            move |source| DnsError::Bind {
                addr,
                proto,
                source,
            }
        };
        let udp = transport::bind_udp(addr).map_err(err(addr, "udp"))?;
        let tcp = transport::bind_tcp(addr).map_err(err(addr, "tcp"))?;
        let metrics = match config.metrics_port {
            Some(p) => {
                let a = SocketAddr::new(config.listen, p);
                Some(metrics::bind(a).map_err(err(a, "metrics"))?)
            }
            None => None,
        };
        let handler = Arc::new(Handler {
            index: Arc::new(RwLock::new(Index::new(&config.zone))),
            synced: Arc::new(AtomicBool::new(false)),
            zone: Zone {
                ttl: config.ttl,
                dns_ip: config.dns_ip,
            },
            forwarder: Forwarder::new(
                config.upstreams.clone(),
                config.forward_timeout,
                config.cache_size,
            ),
            metrics: Arc::new(Metrics::default()),
            packets: PacketCache::new(config.cache_size),
        });
        Ok(Self {
            config,
            handler,
            udp: Arc::new(udp),
            tcp,
            metrics,
        })
    }

    /// The UDP address bound (the port chosen when 0 was asked).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.udp.local_addr()
    }

    /// The records answered (the benchmark fills it without an API server).
    pub fn index(&self) -> Arc<RwLock<Index>> {
        self.handler.index.clone()
    }

    /// Answer cluster names (normally set once the informers have synced).
    pub fn set_synced(&self) {
        self.handler.synced.store(true, Ordering::Release);
    }

    /// Watches Services and EndpointSlices through `client`, announces this node's address
    /// once synced, and serves until `cancel`; returns when every task has ended.
    pub async fn run(self, client: Arc<dyn Client>, cancel: CancellationToken) {
        let tasks = TaskTracker::new();
        let ready = Arc::new(tokio::sync::Barrier::new(3));
        let index = self.handler.index.clone();
        tasks.spawn(informer::<Service>(
            client.clone(),
            index.clone(),
            |ix, ns, name, s| ix.apply_service(ns, name, s),
            ready.clone(),
            cancel.clone(),
        ));
        tasks.spawn(informer::<EndpointSlice>(
            client.clone(),
            index,
            |ix, ns, name, s| ix.apply_slice(ns, name, s),
            ready.clone(),
            cancel.clone(),
        ));
        let synced = self.handler.synced.clone();
        let (node, listen) = (self.config.node_name.clone(), self.config.listen);
        let c = cancel.clone();
        tasks.spawn(async move {
            tokio::select! {
                () = c.cancelled() => return,
                _ = ready.wait() => {}
            }
            synced.store(true, Ordering::Release);
            tracing::info!("cluster DNS: informers synced, answering cluster names");
            announce(&*client, &node, listen, &c).await;
        });
        self.serve_on(&tasks, cancel.clone());
        cancel.cancelled().await;
        tasks.close();
        tasks.wait().await;
    }

    /// Serves without watching (the benchmark), until `cancel`.
    pub async fn serve(self, cancel: CancellationToken) {
        let tasks = TaskTracker::new();
        self.serve_on(&tasks, cancel.clone());
        cancel.cancelled().await;
        tasks.close();
        tasks.wait().await;
    }

    fn serve_on(self, tasks: &TaskTracker, cancel: CancellationToken) {
        let Self {
            config,
            handler,
            udp,
            tcp,
            metrics,
        } = self;
        tracing::info!(listen = %config.listen, port = config.port, zone = %config.zone,
            upstreams = ?config.upstreams, "cluster DNS serving");
        if let Some(l) = metrics {
            let h = handler.clone();
            let scrape = Arc::new(move || {
                let (services, endpoints) = h
                    .index
                    .read()
                    .unwrap_or_else(PoisonError::into_inner)
                    .counts();
                h.metrics.encode(&Gauges {
                    services,
                    endpoints,
                    cache_entries: h.forwarder.cached(),
                })
            });
            tasks.spawn(metrics::serve(l, scrape, tasks.clone(), cancel.clone()));
        }
        tasks.spawn(server::serve_udp(
            udp,
            handler.clone(),
            config.workers,
            tasks.clone(),
            cancel.clone(),
        ));
        tasks.spawn(server::serve_tcp(tcp, handler, tasks.clone(), cancel));
    }
}

/// Feeds one kind's changes into the index; meets `ready` once its first list is in.
async fn informer<K>(
    client: Arc<dyn Client>,
    index: Arc<RwLock<Index>>,
    apply: fn(&mut Index, &str, &str, Option<&K>),
    ready: Arc<tokio::sync::Barrier>,
    cancel: CancellationToken,
) where
    K: k8s_openapi::Resource
        + Metadata<Ty = ObjectMeta>
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let c = cancel.clone();
    let barrier = async move {
        if rx.await.is_ok() {
            tokio::select! {
                () = c.cancelled() => {}
                _ = ready.wait() => {}
            }
        }
    };
    let watch = reflector::run::<K, _>(
        client,
        ResourceRef::of::<K>(None),
        watcher::Config::default(),
        move |c: Change<K>| {
            let (o, deleted) = match &c {
                Change::Added(o) | Change::Modified(o) => (o, false),
                Change::Deleted(o) => (o, true),
            };
            let m = o.metadata();
            let ns = m.namespace.as_deref().unwrap_or("");
            let name = m.name.as_deref().unwrap_or("");
            let mut ix = index.write().unwrap_or_else(PoisonError::into_inner);
            apply(&mut ix, ns, name, (!deleted).then_some(o));
        },
        move || {
            let _ = tx.send(());
        },
        cancel.clone(),
    );
    tokio::join!(watch, barrier);
}

/// Sets this node's [`ADDRESS_ANNOTATION`], retrying until it is written or `cancel`.
async fn announce(client: &dyn Client, node: &str, listen: IpAddr, cancel: &CancellationToken) {
    let nodes = ResourceRef::new("", "v1", "nodes", None);
    let patch = Patch::Merge(serde_json::json!({
        "metadata": {"annotations": {ADDRESS_ANNOTATION: listen.to_string()}}
    }));
    let mut delay = Duration::from_millis(200);
    loop {
        match client
            .patch(&nodes, node, &patch, None, &WriteParams::default())
            .await
        {
            Ok(_) => {
                tracing::info!(node, address = %listen, "cluster DNS: announced on the Node");
                return;
            }
            Err(e) => {
                tracing::debug!(node, error = %e, "cluster DNS: announcing (the Node may not be registered yet)")
            }
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(Duration::from_secs(10));
    }
}
