//! The kubelet's settings, filled from `k1s server` / `k1s agent` flags.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use k1s_api::quantity::ResourceList;

#[derive(Debug, Clone)]
pub struct Config {
    pub node_name: String,
    /// Where the kubelet keeps its state: `DATA_DIR/agent`.
    pub root_dir: PathBuf,
    /// The node's address (InternalIP).
    pub node_ip: IpAddr,
    /// Extra node labels (`--node-label`), and the `node-role.kubernetes.io/control-plane`
    /// label for servers.
    pub labels: BTreeMap<String, String>,
    /// Taints to register with (`--node-taint`, `key=value:Effect`).
    pub taints: Vec<String>,
    pub kube_reserved: ResourceList,
    pub system_reserved: ResourceList,
    /// `evictionHard` (`--eviction-hard`): the thresholds of the pressure conditions; its
    /// `memory.available` is also subtracted from allocatable.
    pub eviction_hard: crate::eviction::pressure::Thresholds,
    /// How often a pod's volumes are brought up to date when nothing about the pod changed
    /// (`--sync-frequency`, 1 min upstream): configMap/secret content, claims grown online.
    pub sync_frequency: Duration,
    /// Image garbage collection: how often, and the disk usage (percent of the image file
    /// system) that starts it and where it stops (5 min, 85 and 80 upstream).
    pub image_gc_period: Duration,
    /// How often the eviction manager looks at the node and the pods' local storage (10 s,
    /// upstream's monitoring period).
    pub eviction_interval: Duration,
    pub image_gc_high_percent: u8,
    pub image_gc_low_percent: u8,
    pub max_pods: u32,
    /// The node's pod CIDR (`spec.podCIDR`).
    pub pod_cidr: String,
    /// `clusterDNS`: when empty, `ClusterFirst` pods fall back to the host's resolv.conf, as
    /// upstream does.
    pub cluster_dns: Vec<IpAddr>,
    pub cluster_domain: String,
    /// The host's resolv.conf given to `dnsPolicy: Default` pods (loopback resolvers left
    /// out) and whose search domains `ClusterFirst` pods get too.
    pub resolv_conf: PathBuf,
    /// How often the Lease is renewed and node status computed (10 s, upstream's
    /// `nodeStatusUpdateFrequency`).
    pub lease_interval: Duration,
    /// How often node status is reported even when it did not change (5 min, upstream's
    /// `nodeStatusReportFrequency`).
    pub status_report_interval: Duration,
    /// Container log rotation: size of a file and how many to keep.
    pub log_max_bytes: u64,
    pub log_max_files: u32,
    /// Container restart back-off: first delay, maximum, and how long a container must run for
    /// the back-off to start over (10 s, 5 min and 10 min upstream).
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    pub backoff_reset: Duration,
    /// The kubelet's HTTPS port, advertised in `status.daemonEndpoints`.
    pub port: u16,
    /// The static pod manifests directory (`--pod-manifest-path`); None: no static pods.
    pub static_pod_path: Option<PathBuf>,
    /// How often that directory is read again (`--file-check-frequency`, 20 s upstream).
    pub file_check_frequency: Duration,
}

impl Config {
    pub fn new(node_name: &str, root_dir: PathBuf, node_ip: IpAddr) -> Self {
        Self {
            node_name: node_name.into(),
            root_dir,
            node_ip,
            labels: BTreeMap::new(),
            taints: Vec::new(),
            kube_reserved: ResourceList::default(),
            system_reserved: ResourceList::default(),
            eviction_hard: crate::eviction::pressure::Thresholds::default(),
            sync_frequency: Duration::from_secs(60),
            image_gc_period: Duration::from_secs(300),
            eviction_interval: Duration::from_secs(10),
            image_gc_high_percent: 85,
            image_gc_low_percent: 80,
            max_pods: 110,
            pod_cidr: "10.42.0.0/24".into(),
            cluster_dns: Vec::new(),
            cluster_domain: "cluster.local".into(),
            resolv_conf: "/etc/resolv.conf".into(),
            lease_interval: Duration::from_secs(10),
            status_report_interval: Duration::from_secs(300),
            log_max_bytes: 10 * 1024 * 1024,
            log_max_files: 5,
            backoff_initial: Duration::from_secs(10),
            backoff_max: Duration::from_secs(300),
            backoff_reset: Duration::from_secs(600),
            port: 10250,
            static_pod_path: None,
            file_check_frequency: Duration::from_secs(20),
        }
    }

    /// Where pulled images are kept (the image file system of the pressure signals).
    pub fn images_dir(&self) -> PathBuf {
        self.root_dir.join("images-store")
    }

    /// The device plugin directory: the kubelet's `kubelet.sock`, the plugins' sockets and
    /// the device manager's checkpoint (`/var/lib/kubelet/device-plugins` upstream).
    pub fn device_plugins_dir(&self) -> PathBuf {
        self.root_dir.join("device-plugins")
    }

    pub fn pods_dir(&self) -> PathBuf {
        self.root_dir.join("pods")
    }

    /// Container logs: `pod-logs/NAMESPACE_NAME_UID/CONTAINER/ATTEMPT.log`, as upstream's
    /// `/var/log/pods`.
    pub fn logs_dir(&self) -> PathBuf {
        self.root_dir.join("pod-logs")
    }

    /// The log directory of one container of a pod.
    pub fn container_logs_dir(&self, ns: &str, name: &str, uid: &str, container: &str) -> PathBuf {
        self.logs_dir()
            .join(format!("{ns}_{name}_{uid}"))
            .join(container)
    }

    /// The bundle of one run (`attempt`) of a container: `pods/UID/containers/{init|main}-NAME/N`.
    pub fn bundle_dir(&self, uid: &str, init: bool, container: &str, attempt: i32) -> PathBuf {
        self.pods_dir()
            .join(uid)
            .join("containers")
            .join(format!(
                "{}-{container}",
                if init { "init" } else { "main" }
            ))
            .join(attempt.to_string())
    }
}
