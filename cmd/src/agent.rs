//! The kubelet's flags and its start-up: shared by `k1s server` (the server is a node too,
//! unless `--disable-agent`) and `k1s agent` ([`crate::agent_cmd`]).

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use k1s_api::client::Client;
use k1s_api::quantity::{Quantity, ResourceList};
use k1s_api::streams::NodeStreams;
#[cfg(feature = "server")]
use k1s_controllers::provisioner::ProvisionerSet;
use k1s_kubelet::images::pull::RegistryImageService;
use k1s_kubelet::images::registries::RegistriesConfig;
use k1s_kubelet::port::{self, KubeletServer, KubeletTls};
use k1s_kubelet::{Config, Deps};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

#[derive(Args, Debug, Clone)]
pub struct KubeletArgs {
    /// Node name; the host name when not given.
    #[arg(long)]
    pub node_name: Option<String>,
    /// Labels for this node, `key=value` (repeatable).
    #[arg(long = "node-label")]
    pub node_label: Vec<String>,
    /// Taints for this node, `key=value:Effect` (repeatable).
    #[arg(long = "node-taint")]
    pub node_taint: Vec<String>,
    /// This node's pod CIDR (addresses for pods on the bridge); default: the one the
    /// controller manager's node IPAM assigns from --cluster-cidr.
    #[arg(long)]
    pub pod_cidr: Option<String>,
    /// Cluster DNS server IPs for ClusterFirst pods (comma-separated); default: the
    /// `kube-dns` Service's address, the tenth of --service-cidr (10.43.0.10).
    #[arg(long, value_delimiter = ',')]
    pub cluster_dns: Vec<IpAddr>,
    /// The cluster's DNS domain.
    #[arg(long, default_value = "cluster.local")]
    pub cluster_domain: String,
    /// The file naming the host's resolvers: the cluster DNS forwards other names to them
    /// and `dnsPolicy: Default` pods get them. Default: /etc/resolv.conf, or systemd-resolved's
    /// /run/systemd/resolve/resolv.conf when the former names only loopback resolvers.
    #[arg(long)]
    pub resolv_conf: Option<PathBuf>,
    /// Do not run the cluster DNS server on this node (`--disable dns` on the server implies
    /// it for the server's own node).
    #[arg(long)]
    pub disable_dns: bool,
    /// Resources reserved for Kubernetes daemons, `cpu=500m,memory=256Mi`.
    #[arg(long)]
    pub kube_reserved: Option<String>,
    /// Resources reserved for the OS, `cpu=500m,memory=256Mi`.
    #[arg(long)]
    pub system_reserved: Option<String>,
    #[arg(long, default_value_t = 110)]
    pub max_pods: u32,
    /// Hard eviction thresholds, upstream's syntax: `memory.available<100Mi,nodefs.available<10%`.
    /// Crossing one sets the node's MemoryPressure, DiskPressure or PIDPressure condition;
    /// signals not named keep upstream's defaults.
    #[arg(long, value_parser = k1s_kubelet::pressure::Thresholds::parse)]
    pub eviction_hard: Option<k1s_kubelet::pressure::Thresholds>,
    /// How often each pod is synced even when nothing about it changed: configMap and
    /// secret volumes refreshed, claims grown on the node while in use (upstream: 1m).
    #[arg(long, default_value = "1m", value_parser = crate::host::parse_duration)]
    pub sync_frequency: std::time::Duration,
    /// Disk usage of the image file system (percent) at which unused images are removed.
    #[arg(long, default_value_t = 85, value_parser = clap::value_parser!(u8).range(1..=100))]
    pub image_gc_high_threshold: u8,
    /// Disk usage (percent) image garbage collection frees down to; below the high threshold.
    #[arg(long, default_value_t = 80, value_parser = clap::value_parser!(u8).range(0..=100))]
    pub image_gc_low_threshold: u8,
    /// Directory of the cgroup filesystem.
    #[arg(long, default_value = "/sys/fs/cgroup", hide = true)]
    pub cgroup_root: PathBuf,
    /// Name of the top cgroup for pods (`kubepods`).
    #[arg(long, default_value = "kubepods", hide = true)]
    pub cgroup_top: String,
    /// Name of the pod bridge.
    #[arg(long, default_value = "k1s0", hide = true)]
    pub bridge_name: String,
    /// Registry mirrors, plain-HTTP registries and credentials, in k3s's `registries.yaml`
    /// format.
    #[arg(long, default_value = "/etc/k1s/registries.yaml")]
    pub private_registry: PathBuf,
    /// Static pod manifests: every file in this directory is a Pod the kubelet runs itself,
    /// shown in the API as a mirror pod (default: DATA_DIR/agent/pod-manifests).
    #[arg(long)]
    pub pod_manifest_path: Option<PathBuf>,
    /// How often the static pod directory is read again (upstream: 20s).
    #[arg(long, default_value = "20s", value_parser = crate::host::parse_duration)]
    pub file_check_frequency: std::time::Duration,
    /// The kubelet's HTTPS port (logs, exec, attach, port-forward and the node proxy, for
    /// the API server), advertised in the Node's status.
    #[arg(long, default_value_t = 10250)]
    pub kubelet_port: u16,
    /// Address the kubelet's HTTPS port listens on.
    #[arg(long, default_value = "0.0.0.0")]
    pub kubelet_bind_address: IpAddr,
    /// First container restart back-off, in seconds (upstream: 10).
    #[arg(long, default_value_t = 10, hide = true)]
    pub restart_backoff_seconds: u64,
    /// The cluster's pod network (every node's pod CIDR is inside it): traffic from outside
    /// it to a ClusterIP is masqueraded, pod traffic keeps its source address.
    #[arg(long, default_value = "10.42.0.0/16")]
    pub cluster_cidr: String,
    /// Do not run the service proxy on this node (another proxy programs Services); its
    /// nftables table is removed if an earlier start left one.
    #[arg(long)]
    pub disable_kube_proxy: bool,
    /// Do not answer NodePorts on 127.0.0.1 (kube-proxy's --iptables-localhost-nodeports=false).
    #[arg(long)]
    pub disable_localhost_nodeports: bool,
    /// How pods reach pods on other nodes: `vxlan` (flannel's layout, VNI 1, UDP 8472; the
    /// nodes only need to reach each other by IP), `host-gw` (a route to each node's pod CIDR
    /// via its address; the nodes share an L2 segment) or `none` (another component routes).
    #[arg(long, value_enum, default_value_t = PodNetworkBackend::Vxlan)]
    pub pod_network_backend: PodNetworkBackend,
    /// The VXLAN device (`vxlan` backend).
    #[arg(long, default_value = "k1s.1", hide = true)]
    pub vxlan_device: String,
    /// The VXLAN network identifier (`vxlan` backend).
    #[arg(long, default_value_t = 1, hide = true)]
    pub vxlan_vni: u32,
    /// The VXLAN UDP port (`vxlan` backend; flannel's 8472).
    #[arg(long, default_value_t = 8472, hide = true)]
    pub vxlan_port: u16,
    /// The service proxy's nftables table (ip family).
    #[arg(long, default_value = k1s_proxy::TABLE, hide = true)]
    pub proxy_table: String,
    /// Do not enforce NetworkPolicies on this node (another component does); its nftables
    /// table is removed if an earlier start left one (`--disable network-policy` on the
    /// server implies it for the server's own node).
    #[arg(long)]
    pub disable_network_policy: bool,
    /// The network policy's nftables table (ip family).
    #[arg(long, default_value = k1s_netpol::TABLE, hide = true)]
    pub policy_table: String,
}

/// The cross-node backends (`--pod-network-backend`).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodNetworkBackend {
    /// A VXLAN tunnel to every node (flannel's vxlan backend).
    Vxlan,
    /// A route per remote node's pod CIDR via the node's address (flannel's host-gw).
    #[value(name = "host-gw")]
    HostGw,
    /// No cross-node routes from k1s.
    None,
}

fn parse_reserved(flag: &str, s: Option<&str>) -> anyhow::Result<ResourceList> {
    let mut out = ResourceList::new();
    for pair in s.unwrap_or("").split(',').filter(|p| !p.is_empty()) {
        let (k, v) = pair
            .split_once('=')
            .with_context(|| format!("--{flag}: {pair:?} is not name=quantity"))?;
        let q = Quantity::parse(v)
            .map_err(|e| anyhow::anyhow!("--{flag}: {v:?} is not a quantity: {e}"))?;
        out.insert(k.trim(), q);
    }
    Ok(out)
}

/// What the server's own node shares with the control plane in the same process.
#[cfg(feature = "server")]
pub struct ServerSide {
    /// The process's `/metrics`, which the kubelet's volume stats join.
    pub metrics: Arc<k1s_apiserver::metrics::Metrics>,
    /// The controllers' storage drivers: CSI plugins that register with this kubelet and
    /// have a controller service are added (and removed when they go).
    pub provisioners: ProvisionerSet,
}

/// Without the control plane in this build no node is a server's own.
#[cfg(not(feature = "server"))]
pub enum ServerSide {}

/// This node's name: `--node-name`, or the host name.
pub fn node_name(args: &KubeletArgs, hostname: &str) -> String {
    args.node_name
        .clone()
        .unwrap_or_else(|| hostname.to_string())
}

/// Starts the kubelet for this node on `client` (with `server` on the server's own node),
/// serving its HTTPS port with `port_tls`, and, with `local_storage`, the `k1s csi-hostpath`
/// plugin beside it; NetworkPolicy enforcement runs on `network_client` (the node's
/// cluster-network identity on an agent).
#[allow(clippy::too_many_arguments)]
pub async fn start(
    args: &KubeletArgs,
    data_dir: &Path,
    hostname: &str,
    node_ip: IpAddr,
    service_cidr: &str,
    client: Arc<dyn Client>,
    network_client: Arc<dyn Client>,
    server: Option<ServerSide>,
    port_tls: KubeletTls,
    local_storage: bool,
    tasks: &TaskTracker,
    cancel: &CancellationToken,
) -> anyhow::Result<Arc<dyn NodeStreams>> {
    let node_name = node_name(args, hostname);
    let addr = std::net::SocketAddr::new(args.kubelet_bind_address, args.kubelet_port);
    let listener = std::net::TcpListener::bind(addr)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .and_then(tokio::net::TcpListener::from_std)
        .with_context(|| {
            format!("cannot listen on {addr} (is another kubelet running? use --kubelet-port)")
        })?;
    let root = data_dir.join("agent");
    std::fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
    let mut config = Config::new(&node_name, root.clone(), node_ip);
    if server.is_some() {
        config.labels.insert(
            "node-role.kubernetes.io/control-plane".into(),
            "true".into(),
        );
        config
            .labels
            .insert("node-role.kubernetes.io/master".into(), "true".into());
    }
    for l in &args.node_label {
        let (k, v) = l.split_once('=').unwrap_or((l, ""));
        config.labels.insert(k.into(), v.into());
    }
    config.taints = args.node_taint.clone();
    config.port = args.kubelet_port;
    if let Some(c) = &args.pod_cidr {
        c.parse::<k1s_kubelet::network::Ipv4Cidr>()
            .map_err(|e| anyhow::anyhow!("--pod-cidr {c}: {e}"))?;
    }
    config.pod_cidr = args.pod_cidr.clone().unwrap_or_default();
    config.cluster_dns = args.cluster_dns.clone();
    if config.cluster_dns.is_empty() {
        config
            .cluster_dns
            .extend(k1s_api::dns::service_ip(service_cidr));
    }
    config.cluster_domain = args.cluster_domain.clone();
    let resolv = k1s_dns::upstreams::choose(args.resolv_conf.as_deref(), Path::new("/"))
        .map_err(|e| anyhow::anyhow!("--resolv-conf: {e}"))?;
    tracing::info!(file = %resolv.path.display(), nameservers = ?resolv.conf.nameservers, reason = resolv.reason, "the host's resolvers");
    config.resolv_conf = resolv.path.clone();
    config.kube_reserved = parse_reserved("kube-reserved", args.kube_reserved.as_deref())?;
    config.system_reserved = parse_reserved("system-reserved", args.system_reserved.as_deref())?;
    config.max_pods = args.max_pods;
    config.eviction_hard = args.eviction_hard.clone().unwrap_or_default();
    if args.image_gc_low_threshold >= args.image_gc_high_threshold {
        anyhow::bail!(
            "--image-gc-low-threshold ({}) must be below --image-gc-high-threshold ({})",
            args.image_gc_low_threshold,
            args.image_gc_high_threshold
        );
    }
    config.sync_frequency = args.sync_frequency.max(std::time::Duration::from_secs(1));
    let manifests = args
        .pod_manifest_path
        .clone()
        .unwrap_or_else(|| root.join("pod-manifests"));
    std::fs::create_dir_all(&manifests)
        .with_context(|| format!("--pod-manifest-path: creating {}", manifests.display()))?;
    config.static_pod_path = Some(manifests);
    config.file_check_frequency = args
        .file_check_frequency
        .max(std::time::Duration::from_millis(100));
    config.image_gc_high_percent = args.image_gc_high_threshold;
    config.image_gc_low_percent = args.image_gc_low_threshold;
    config.backoff_initial = std::time::Duration::from_secs(args.restart_backoff_seconds.max(1));

    let cgroups = k1s_kubelet::cgroups::detect_with_top(&args.cgroup_root, &args.cgroup_top)
        .map_err(|e| anyhow::anyhow!("the cgroup manager: {e}"))?;
    // The node's pod CIDR: the flag's, or node IPAM's (waited for).
    let machine = k1s_kubelet::node::Machine::detect(&root);
    let pod_cidr = k1s_kubelet::node::resolve_pod_cidr(
        &*client,
        &config,
        &machine,
        args.pod_cidr.as_deref(),
        cancel,
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e}"))?
    .ok_or_else(|| anyhow::anyhow!("stopped while waiting for this node's pod CIDR"))?;
    tracing::info!(node = %node_name, %pod_cidr, "pod CIDR");
    config.pod_cidr = pod_cidr.clone();
    let cidr = pod_cidr
        .parse()
        .map_err(|e| anyhow::anyhow!("the node's pod CIDR {pod_cidr}: {e}"))?;
    let cluster_cidr: k1s_kubelet::network::Ipv4Cidr = args
        .cluster_cidr
        .parse()
        .map_err(|e| anyhow::anyhow!("--cluster-cidr {}: {e}", args.cluster_cidr))?;
    let gateway = IpAddr::V4(k1s_kubelet::network::Ipv4Cidr::gateway(&cidr));
    let mut net = k1s_kubelet::network::BridgeConfig::new(cidr, root.join("network"));
    net.bridge = args.bridge_name.clone();
    // Pods' packets to other nodes are wrapped in VXLAN: leave room for its headers.
    if args.pod_network_backend == PodNetworkBackend::Vxlan
        && let IpAddr::V4(local) = node_ip
        && let Some(mtu) = k1s_podnet::vxlan::pod_mtu(local).await
    {
        net.mtu = mtu;
    }
    // Traffic to the cluster's pod network keeps its addresses; a pod CIDR outside it (an
    // explicit --pod-cidr) keeps only its own.
    if cluster_cidr.contains(cidr.network()) && cidr.prefix_len() >= cluster_cidr.prefix_len() {
        net.cluster_cidr = Some(cluster_cidr);
    } else {
        tracing::warn!(pod_cidr = %cidr, cluster_cidr = %cluster_cidr, "the pod CIDR is outside --cluster-cidr: traffic to other nodes' pods is masqueraded and not routed");
    }
    let network = k1s_kubelet::network::BridgeNetwork::new(net)
        .map_err(|e| anyhow::anyhow!("the pod network: {e}"))?;
    let registries = if args.private_registry.exists() {
        RegistriesConfig::load(&args.private_registry)
            .map_err(|e| anyhow::anyhow!("--private-registry: {e}"))?
    } else {
        RegistriesConfig::default()
    };
    let images = Arc::new(
        RegistryImageService::open(root.join("images-store"), registries)
            .map_err(|e| anyhow::anyhow!("the image store: {e}"))?,
    );
    let exe = std::env::current_exe().context("finding the k1s binary for the container shim")?;
    let runtime: Arc<dyn k1s_kubelet::runtime::Runtime> =
        Arc::new(k1s_kubelet::runtime::ShimRuntime::new(vec![
            exe,
            "internal".into(),
            "shim".into(),
        ]));
    let config = Arc::new(config);
    let cgroups: Arc<dyn k1s_kubelet::cgroups::CgroupManager> = Arc::from(cgroups);
    let node_api = k1s_kubelet::node_api::NodeApi {
        client: client.clone(),
        stats: Arc::new(k1s_kubelet::stats::StatsProvider::new(
            config.clone(),
            cgroups.clone(),
        )),
    };
    let streams: Arc<dyn NodeStreams> = Arc::new(
        k1s_kubelet::streams::KubeletStreams::new(config.clone(), runtime.clone())
            .with_node_api(node_api),
    );
    let volumes = Arc::new(k1s_kubelet::volumes::VolumeManager::new(
        client.clone(),
        config.pods_dir(),
    ));
    #[cfg(feature = "server")]
    if let Some(server) = server {
        // Weak: the volume manager holds a client of the API server that owns these metrics.
        let v = Arc::downgrade(&volumes);
        server.metrics.add_source(Arc::new(move || {
            v.upgrade()
                .map(|v| v.csi().metrics().encode())
                .unwrap_or_default()
        }));
        tasks.spawn(follow_drivers(
            volumes.csi().drivers(),
            server.provisioners,
            cancel.clone(),
        ));
    }
    if local_storage {
        let exe = std::env::current_exe().context("finding the k1s binary for csi-hostpath")?;
        tasks.spawn(crate::local_storage::supervise(
            exe,
            data_dir.to_path_buf(),
            node_name.clone(),
            Arc::new(crate::local_storage::PluginPaths::new(&root)),
            cancel.clone(),
        ));
    }
    tasks.spawn(port::serve(
        listener,
        port_tls,
        Arc::new(KubeletServer {
            streams: streams.clone(),
            client: client.clone(),
        }),
        cancel.clone(),
    ));
    tracing::info!(node = %node_name, %addr, "kubelet port listening");
    let devices = k1s_kubelet::devices::DeviceManager::new(config.device_plugins_dir());
    let deps = Arc::new(Deps {
        client,
        volumes,
        devices,
        admitted: Arc::new(k1s_kubelet::admission::Admitted::new(&node_name)),
        config,
        images: images.clone(),
        runtime,
        cgroups,
        network: Arc::new(network),
        event_source: k1s_api::events::Source {
            component: "kubelet".into(),
            host: Some(node_name.clone()),
        },
        start_slots: k1s_kubelet::start_slots(),
    });
    start_proxy(
        args,
        &node_name,
        service_cidr,
        deps.client.clone(),
        tasks,
        cancel,
    );
    start_pod_network(
        args,
        &node_name,
        node_ip,
        deps.client.clone(),
        tasks,
        cancel,
    )?;
    start_network_policy(args, &node_name, network_client, tasks, cancel);
    if args.disable_dns {
        tracing::info!("cluster DNS server not started on this node (--disable-dns)");
        tasks.spawn(crate::dns::withdraw(deps.client.clone(), node_name.clone()));
    } else {
        crate::dns::start(
            crate::dns::NodeDns {
                node_name: &node_name,
                listen: gateway,
                zone: &args.cluster_domain,
                dns_ip: k1s_api::dns::service_ip(service_cidr),
                resolv: &resolv,
            },
            deps.client.clone(),
            tasks,
            cancel,
        )?;
    }
    tracing::info!(node = %node_name, root = %root.display(), "starting the kubelet");
    let airgap = root.join("images");
    let cancel = cancel.clone();
    tasks.spawn(async move {
        // Airgap tarballs first, so that pods can start from them without a registry.
        if airgap.is_dir() {
            let report = images.import_dir(&airgap).await;
            tracing::info!(?report, dir = %airgap.display(), "imported image archives");
        }
        k1s_kubelet::run(deps, cancel).await
    });
    Ok(streams)
}

/// Checks the service proxy's CIDR flags before anything starts, so that a typo stops the
/// command with the flag's name instead of every sync failing in `nft`.
pub fn check_proxy_flags(args: &KubeletArgs, service_cidr: &str) -> anyhow::Result<()> {
    for (flag, value) in [
        ("--service-cidr", service_cidr),
        ("--cluster-cidr", args.cluster_cidr.as_str()),
    ] {
        value
            .parse::<k1s_kubelet::network::Ipv4Cidr>()
            .map_err(|e| anyhow::anyhow!("{flag} {value:?}: {e}"))?;
    }
    Ok(())
}

/// Starts the cross-node backend of the pod network (`--pod-network-backend`).
fn start_pod_network(
    args: &KubeletArgs,
    node_name: &str,
    node_ip: IpAddr,
    client: Arc<dyn Client>,
    tasks: &TaskTracker,
    cancel: &CancellationToken,
) -> anyhow::Result<()> {
    let cluster: k1s_api::net::Ipv4Net = args
        .cluster_cidr
        .parse()
        .map_err(|e| anyhow::anyhow!("--cluster-cidr: {e}"))?;
    match args.pod_network_backend {
        PodNetworkBackend::None => {
            tracing::info!("no cross-node pod routes (--pod-network-backend none)");
        }
        PodNetworkBackend::Vxlan => {
            let IpAddr::V4(local) = node_ip else {
                anyhow::bail!(
                    "--pod-network-backend vxlan: the node IP {node_ip} is not IPv4 (give --node-ip)"
                );
            };
            let mut config = k1s_podnet::vxlan::VxlanConfig::new(local);
            config.device = args.vxlan_device.clone();
            config.vni = args.vxlan_vni;
            config.port = args.vxlan_port;
            tracing::info!(%cluster, device = %config.device, vni = config.vni, port = config.port, "pod network backend vxlan");
            tasks.spawn(k1s_podnet::vxlan::run(
                client,
                node_name.to_string(),
                cluster,
                config,
                Arc::new(k1s_podnet::routes::NetlinkRoutes),
                Arc::new(k1s_podnet::vxlan::NetlinkVtep),
                cancel.clone(),
            ));
        }
        PodNetworkBackend::HostGw => {
            tracing::info!(%cluster, "pod network backend host-gw");
            tasks.spawn(k1s_podnet::hostgw::run(
                client,
                node_name.to_string(),
                cluster,
                Arc::new(k1s_podnet::routes::NetlinkRoutes),
                cancel.clone(),
            ));
        }
    }
    Ok(())
}

/// Starts this node's service proxy, or with `--disable-kube-proxy` removes the table an
/// earlier start left.
fn start_proxy(
    args: &KubeletArgs,
    node_name: &str,
    service_cidr: &str,
    client: Arc<dyn Client>,
    tasks: &TaskTracker,
    cancel: &CancellationToken,
) {
    // Compiled to netlink; `nft` only for text the compiler does not cover (none of the
    // proxy's today).
    let nft = Arc::new(k1s_proxy::nft::NftNetlink::default());
    if args.disable_kube_proxy {
        let table = args.proxy_table.clone();
        tasks.spawn(async move {
            if let Err(e) = k1s_proxy::remove_table(&*nft, &table).await {
                tracing::debug!(error = %e, "no service proxy table to remove");
            }
        });
        return;
    }
    let localhost = !args.disable_localhost_nodeports;
    for e in k1s_proxy::host::prepare(Path::new("/proc/sys"), localhost) {
        tracing::warn!(error = %e, "service proxy: a kernel setting it needs is missing");
    }
    let mut config = k1s_proxy::ProxyConfig::new(
        node_name,
        k1s_proxy::RulesConfig {
            service_cidr: service_cidr.to_string(),
            cluster_cidr: args.cluster_cidr.clone(),
            localhost_nodeports: localhost,
        },
    );
    config.table = args.proxy_table.clone();
    config.health_bind = Some(IpAddr::from([0, 0, 0, 0]));
    tracing::info!(table = %config.table, %service_cidr, cluster_cidr = %args.cluster_cidr, localhost_nodeports = localhost, "starting the service proxy");
    let proxier = k1s_proxy::Proxier::new(
        config,
        nft,
        Arc::new(k1s_proxy::conntrack::ConntrackCommand::default()),
    );
    tasks.spawn(proxier.run(client, cancel.clone()));
}

/// Starts this node's NetworkPolicy enforcement, or with `--disable-network-policy` removes
/// the table an earlier start left.
fn start_network_policy(
    args: &KubeletArgs,
    node_name: &str,
    client: Arc<dyn Client>,
    tasks: &TaskTracker,
    cancel: &CancellationToken,
) {
    let nft = Arc::new(k1s_nft::NftCommand::default());
    if args.disable_network_policy {
        let table = args.policy_table.clone();
        tracing::info!("NetworkPolicies not enforced on this node (--disable-network-policy)");
        tasks.spawn(async move {
            if let Err(e) = k1s_netpol::remove_table(&*nft, &table).await {
                tracing::debug!(error = %e, "no network policy table to remove");
            }
        });
        return;
    }
    // Pods on one bridge reach each other without routing: their traffic meets the policy
    // table only through br_netfilter.
    if let Err(e) = k1s_nft::sysctl::set(
        Path::new("/proc/sys"),
        k1s_nft::sysctl::BRIDGE_NF_CALL_IPTABLES,
        "1",
    ) {
        tracing::warn!(error = %e, "network policy: traffic between pods of this node is not filtered (load br_netfilter: modprobe br_netfilter)");
    }
    let mut config = k1s_netpol::PolicyConfig::new(node_name);
    config.table = args.policy_table.clone();
    tracing::info!(table = %config.table, "starting NetworkPolicy enforcement");
    let controller = k1s_netpol::PolicyController::new(config, nft);
    tasks.spawn(controller.run(client, cancel.clone()));
}

/// Keeps `set` in step with the CSI plugins registered on this node: a plugin with a
/// controller service becomes a storage driver of the controllers while it is registered.
#[cfg(feature = "server")]
async fn follow_drivers(
    drivers: Arc<k1s_kubelet::csi::CsiDrivers>,
    set: ProvisionerSet,
    cancel: CancellationToken,
) {
    use k1s_kubelet::csi::DriverEvent;
    let mut events = drivers.subscribe();
    for (name, endpoint) in drivers.endpoints() {
        add_driver(&set, &name, &endpoint).await;
    }
    loop {
        let event = tokio::select! {
            _ = cancel.cancelled() => return,
            e = events.recv() => e,
        };
        match event {
            Ok(DriverEvent::Registered { name, endpoint }) => {
                add_driver(&set, &name, &endpoint).await;
            }
            Ok(DriverEvent::Deregistered { name }) => {
                if set.remove(&name).is_some() {
                    tracing::info!(driver = %name, "storage driver removed from the controllers");
                }
            }
            // Missed events: start over from what is registered now.
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                for (name, endpoint) in drivers.endpoints() {
                    add_driver(&set, &name, &endpoint).await;
                }
            }
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
        }
    }
}

#[cfg(feature = "server")]
async fn add_driver(set: &ProvisionerSet, name: &str, endpoint: &Path) {
    let probed = match k1s_csi::CsiClient::connect(endpoint).await {
        Ok(client) => k1s_controllers::csi_driver::CsiDriver::probe(name, client).await,
        Err(e) => Err(e),
    };
    match probed {
        Ok(Some(driver)) => {
            tracing::info!(driver = %name, "storage driver added to the controllers");
            set.add(Arc::new(driver));
        }
        Ok(None) => tracing::info!(
            driver = %name,
            "plugin offers no controller service with CreateVolume: it provisions nothing"
        ),
        Err(e) => {
            tracing::warn!(driver = %name, error = %e, "cannot use the plugin's controller service")
        }
    }
}
