//! The pod network: a bridge, one veth pair per pod, host-local IPAM persisted under the data
//! dir, and masquerade for egress.

use std::net::IpAddr;
use std::path::Path;

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
