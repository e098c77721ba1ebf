//! The flags of `k1s server` ([`ServerArgs`]) and their value parsers. [`crate::server`] runs
//! a server from them; [`crate::server_join`] reads the datastore and join flags.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

#[derive(Args, Debug)]
pub struct ServerArgs {
    /// Directory for all state (certificates, the embedded datastore).
    #[arg(long, default_value = "/var/lib/k1s", env = "K1S_DATA_DIR")]
    pub data_dir: PathBuf,
    /// etcd client URLs (comma-separated) to use instead of the embedded store.
    #[arg(long, env = "K1S_DATASTORE_ENDPOINT")]
    pub datastore_endpoint: Option<String>,
    /// When to snapshot the datastore (cron, UTC: minute hour day-of-month month
    /// day-of-week), into --snapshot-dir.
    #[arg(long, default_value = "0 */12 * * *")]
    pub snapshot_schedule: String,
    /// How many scheduled snapshots to keep.
    #[arg(long, default_value_t = 5)]
    pub snapshot_retention: usize,
    /// Where snapshots go; default DATA_DIR/server/snapshots.
    #[arg(long)]
    pub snapshot_dir: Option<PathBuf>,
    /// Take no scheduled snapshots.
    #[arg(long)]
    pub disable_snapshots: bool,
    /// Join the cluster of the server at this URL (`https://HOST:6443`, with --token): take
    /// its datastore (etcd) and, from there, its identity.
    #[arg(long, env = "K1S_URL")]
    pub server: Option<String>,
    /// CA certificate (PEM) that signed the etcd servers' certificates, for https:// endpoints.
    #[arg(long)]
    pub datastore_cafile: Option<PathBuf>,
    /// Client certificate (PEM) for etcd's --client-cert-auth.
    #[arg(long)]
    pub datastore_certfile: Option<PathBuf>,
    /// Client key (PEM) for etcd's --client-cert-auth.
    #[arg(long)]
    pub datastore_keyfile: Option<PathBuf>,
    /// Keep at least this many revisions of history for watchers to resume from.
    #[arg(long, default_value_t = 10_000)]
    pub compaction_keep_revisions: i64,
    /// Keep at least this many seconds of history for watchers to resume from.
    #[arg(long, default_value_t = 300)]
    pub compaction_keep_seconds: u64,
    /// How often the compactor runs, in seconds.
    #[arg(long, default_value_t = 60)]
    pub compaction_interval_seconds: u64,
    /// Port of the HTTPS API.
    #[arg(long, default_value_t = 6443)]
    pub https_port: u16,
    /// Address the HTTPS API listens on.
    #[arg(long, default_value = "0.0.0.0")]
    pub bind_address: IpAddr,
    /// The address the cluster reaches this API server at (the `kubernetes` endpoints, which
    /// pods and agents use). Default, as kube-apiserver: --bind-address when it is a
    /// specific address, else this node's first address.
    #[arg(long)]
    pub advertise_address: Option<IpAddr>,
    /// Extra host names or IPs for the serving certificate (repeatable).
    #[arg(long = "tls-san")]
    pub tls_san: Vec<String>,
    /// This node's IP addresses (repeatable); found from the host name when not given.
    #[arg(long = "node-ip")]
    pub node_ip: Vec<IpAddr>,
    /// Where to write the admin kubeconfig.
    #[arg(
        long,
        default_value = "/etc/k1s/k1s.yaml",
        env = "K1S_KUBECONFIG_OUTPUT"
    )]
    pub write_kubeconfig: PathBuf,
    /// How long events are kept after their last update, in seconds.
    #[arg(long, default_value_t = 3600)]
    pub event_ttl_seconds: u64,
    /// IPv4 range of Service ClusterIPs.
    #[arg(long, default_value = "10.43.0.0/16")]
    pub service_cidr: String,
    /// Port range of Service NodePorts.
    #[arg(long, default_value = "30000-32767")]
    pub service_node_port_range: String,
    /// Static bearer tokens, one `token,user,uid[,"group1,group2"]` per line.
    #[arg(long)]
    pub token_auth_file: Option<PathBuf>,
    /// Upstream's AdmissionConfiguration file (YAML or JSON): PodSecurity defaults and
    /// exemptions (usernames, namespaces, runtimeClasses).
    #[arg(long)]
    pub admission_control_config_file: Option<PathBuf>,
    /// Admission plugins to turn off, comma-separated (kube-apiserver's names, e.g.
    /// `ServiceAccount,Priority`). All of k1s's plugins are on by default.
    #[arg(long, value_delimiter = ',')]
    pub disable_admission_plugins: Vec<String>,
    /// The join token agents present (`K10<ca-hash>::<user>:<password>`, or just a password).
    /// Generated and saved to DATA_DIR/server/token when not given.
    #[arg(long, env = "K1S_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Do not run the scheduler (another one schedules this cluster's pods).
    #[arg(long)]
    pub disable_scheduler: bool,
    /// Run the controller manager and the scheduler under leader election (Leases in
    /// kube-system). Default: on with --datastore-endpoint (several servers may share it),
    /// off with the embedded store (one server can use it; saves a lease write per component
    /// every 2 s).
    #[arg(long, action = clap::ArgAction::Set)]
    pub leader_elect: Option<bool>,
    /// Do not run the controller manager.
    #[arg(long)]
    pub disable_controller_manager: bool,
    /// A KubeSchedulerConfiguration (YAML or JSON) for the scheduler's profiles.
    #[arg(long)]
    pub scheduler_config: Option<PathBuf>,
    /// Do not run a kubelet on this machine (the server is then not a node).
    #[arg(long)]
    pub disable_agent: bool,
    #[command(flatten)]
    pub kubelet: crate::agent::KubeletArgs,
    /// How long a node may go without renewing its Lease or posting status before the node
    /// lifecycle controller marks it Unknown (a Go duration: 40s, 1m, 500ms).
    #[arg(long, default_value = "40s", value_parser = crate::host::parse_duration)]
    pub node_monitor_grace_period: Duration,
    /// Terminated pods kept before the pod garbage collector deletes the oldest (0 disables).
    #[arg(long, default_value_t = 12500)]
    pub terminated_pod_gc_threshold: usize,
    /// An apiserver.config.k8s.io/v1 EncryptionConfiguration (YAML or JSON): which resources
    /// are stored encrypted (aesgcm) and with which keys. Reloaded when the file changes.
    #[arg(long)]
    pub encryption_provider_config: Option<PathBuf>,
    /// Encrypt Secrets at rest with a key generated on first start (in
    /// DATA_DIR/server/cred/encryption-config.json), unless --encryption-provider-config is given.
    #[arg(long)]
    pub secrets_encryption: bool,
    /// Do not deploy a packaged component (repeatable or comma-separated). Known:
    /// `local-storage` (the `k1s csi-hostpath` plugin and the `local-path` StorageClass),
    /// `servicelb` (node addresses as LoadBalancer ingress; for users who bring MetalLB),
    /// `dns` (the cluster DNS: the kube-dns Service and each node's server; for users who
    /// bring CoreDNS), `network-policy` (NetworkPolicy enforcement on the server's node;
    /// agents take --disable-network-policy; for users who bring Calico or Cilium).
    #[arg(long, value_delimiter = ',', value_parser = parse_component)]
    pub disable: Vec<String>,
    /// Give every Node a pod CIDR from --cluster-cidr (kube-controller-manager's
    /// `--allocate-node-cidrs`; `false` when another component assigns them).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub allocate_node_cidrs: bool,
    /// The size of each node's pod CIDR (a /24 of 10.42.0.0/16: 256 nodes of 254 pods).
    #[arg(long, default_value_t = 24, value_parser = clap::value_parser!(u8).range(8..=30))]
    pub node_cidr_mask_size: u8,
    /// File mode of the admin kubeconfig, in octal (e.g. 644).
    #[arg(long, default_value = "600", value_parser = parse_mode)]
    pub write_kubeconfig_mode: u32,
}

/// The packaged components `--disable` knows.
const COMPONENTS: &[&str] = &["dns", "local-storage", "network-policy", "servicelb"];

fn parse_component(s: &str) -> Result<String, String> {
    if COMPONENTS.contains(&s) {
        Ok(s.to_owned())
    } else {
        Err(format!(
            "unknown component {s:?}; known: {}",
            COMPONENTS.join(", ")
        ))
    }
}

fn parse_mode(s: &str) -> Result<u32, String> {
    u32::from_str_radix(s.trim_start_matches("0o"), 8)
        .ok()
        .filter(|m| *m <= 0o777)
        .ok_or_else(|| format!("{s:?} is not an octal file mode such as 600 or 644"))
}
