//! The pod network: a bridge, one veth pair per pod, host-local IPAM persisted under the data
//! dir, and masquerade for egress.
//!
//! * [`PodNetwork`] is the trait the pod workers use; [`BridgeNetwork`] is the real one
//!   (`bridge.rs`, netlink), [`FakePodNetwork`] the one for tests (`fake.rs`, memory only).
//! * `ipam.rs`: host-local IPAM for the node's pod CIDR ([`Ipam`], [`Ipv4Cidr`]).
//! * `netns.rs`: persistent network namespaces bound to files ([`create_netns`],
//!   [`remove_netns`]) and running code inside one ([`run_in_netns`]).
//! * `firewall.rs`: masquerade and forwarding rules via `iptables` (or `nft`).
//!
//! How the kubelet uses it, per node and per pod:
//!
//! ```ignore
//! let net = BridgeNetwork::new(BridgeConfig::new(pod_cidr.parse()?, data_dir.join("network")))?;
//! net.init().await?;                                   // once at startup
//! prepare_netns_dir(&run_dir.join("netns"))?;           // once at startup (shared mount)
//! let ns = pod_netns_path(&run_dir.join("netns"), pod_uid)?;
//! create_netns(&ns)?;                                   // before the sandbox starts
//! let addr = net.setup(pod_uid, &ns).await?;            // the pod IP for the status
//! // ... containers join `ns` (setns or /proc/<pid>/ns/net) ...
//! net.teardown(pod_uid, Some(&ns)).await?;              // when the pod is gone
//! remove_netns(&ns);
//! ```

use std::net::IpAddr;
use std::path::{Path, PathBuf};

pub mod bridge;
pub mod fake;
pub mod firewall;
pub mod ipam;
pub mod netns;

pub use bridge::{BridgeConfig, BridgeNetwork, host_veth_name, mac_for};
pub use fake::FakePodNetwork;
pub use ipam::{Ipam, Ipv4Cidr};
pub use netns::{
    create_netns, is_netns_mount, pod_netns_path, prepare_netns_dir, remove_netns, run_in_netns,
    try_remove_netns,
};

/// What a pod got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodAddress {
    pub ip: IpAddr,
    pub gateway: IpAddr,
    pub prefix_len: u8,
}

#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    #[error("pod network: no free address left in {0}")]
    Exhausted(String),
    #[error("pod network: {0}")]
    Netlink(String),
    #[error("pod network: {0}")]
    Io(#[from] std::io::Error),
    /// A system call or file operation failed; `context` says what was being done.
    #[error("pod network: {context}: {source}")]
    Os {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// A bad configuration value or argument (CIDR, interface name, path, pod UID).
    #[error("pod network: {0}")]
    Invalid(String),
    /// The persisted IPAM state cannot be read.
    #[error("pod network: IPAM state {}: {message}", path.display())]
    State { path: PathBuf, message: String },
}

/// Sets up and tears down pod network namespaces.
#[async_trait::async_trait]
pub trait PodNetwork: Send + Sync {
    /// Creates the bridge and the masquerade rule if missing (idempotent).
    async fn init(&self) -> Result<(), NetworkError>;
    /// Gives the network namespace at `netns` (a bind-mounted nsfs file) an interface `eth0`
    /// with an address for `pod_uid` (the same one again if it has one), `lo` up and a default
    /// route through the bridge.
    async fn setup(&self, pod_uid: &str, netns: &Path) -> Result<PodAddress, NetworkError>;
    /// Removes the pod's veth and releases its address (idempotent).
    async fn teardown(&self, pod_uid: &str, netns: Option<&Path>) -> Result<(), NetworkError>;
    /// The address a pod holds, if any (after a restart, from the persisted IPAM state).
    fn address(&self, pod_uid: &str) -> Option<PodAddress>;
}
