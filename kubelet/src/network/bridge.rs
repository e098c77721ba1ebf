//! The real pod network: a Linux bridge, one veth pair per pod, host-local IPAM, masquerade;
//! what the CNI `bridge` plugin with `host-local` IPAM does, in process.
//!
//! This file owns the netlink side ([`BridgeNetwork`], the [`PodNetwork`] implementation).
//! Addresses come from [`super::ipam`], firewall rules from [`super::firewall`], and every
//! namespace switch goes through [`super::netns::run_in_netns`].
//!
//! Netlink is spoken with the `rtnetlink` crate (0.24, on `netlink-packet-route` 0.34 and
//! `netlink-sys`), maintained by the rust-netlink organisation that also keeps the packet
//! crates, and used by youki, netavark and others. It has typed builders for bridges, veth
//! pairs, bridge port options (hairpin) and moving links between namespaces, and it does not
//! shell out, so errors carry the kernel's errno.
//!
//! What [`PodNetwork::setup`] does for a pod:
//! 1. makes sure the bridge (`k1s0` by default) exists, is up and holds the gateway address
//!    (a new bridge gets the MAC [`mac_for`] the gateway); this is done at
//!    [`PodNetwork::init`] and again only when a setup fails, since every netlink request
//!    waits for the kernel's one rtnl lock;
//! 2. takes the pod's address from IPAM (the same one again if it has one);
//! 3. creates the veth pair with one request: host side `veth<8 hex of FNV-1a(pod uid)>`
//!    already attached to the bridge and up, peer created directly inside the pod's namespace
//!    (`IFLA_NET_NS_FD`) as `eth0` with a MAC derived from the pod address ([`mac_for`]).
//!    An old pair of that name is deleted first, and an `eth0` left in the namespace by an
//!    earlier setup is removed, so a second setup starts clean. (Creating the peer in the
//!    host namespace and moving it afterwards, as before, cost the most: a namespace move
//!    waits for RCU grace periods with the rtnl lock held, and 100 pods at once queued ~2 s
//!    behind each other on it.)
//! 4. turns on hairpin mode on the bridge port (so a pod can reach itself through a Service
//!    address);
//! 5. on a dedicated thread inside the namespace: sets the address, brings `eth0` and `lo`
//!    up (a veth end cannot be created up: its peer is not registered yet) and adds the
//!    default route via the gateway.
//!
//! A failure after the veth exists deletes it again, and releases the address if this call
//! allocated it.

use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use futures::TryStreamExt;
use netlink_packet_route::link::{InfoData, InfoKind, InfoVeth};
use rtnetlink::{
    Handle, LinkBridge, LinkBridgePort, LinkMessageBuilder, LinkUnspec, LinkVeth,
    RouteMessageBuilder,
};

use super::firewall;
use super::ipam::{Ipam, Ipv4Cidr};
use super::netns::{check_netns_path, is_netns_mount, run_in_netns};
use super::{NetworkError, PodAddress, PodNetwork};

/// The name the pod side of the veth pair gets inside the pod.
pub const POD_INTERFACE: &str = "eth0";

/// How the pod network is laid out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BridgeConfig {
    /// The bridge device (at most 15 bytes), `k1s0` by default.
    pub bridge: String,
    /// The pod CIDR of this node; the bridge holds its first host address.
    pub cidr: Ipv4Cidr,
    /// MTU of the bridge and both veth ends, 1500 by default.
    pub mtu: u32,
    /// Where IPAM keeps `ipam.json`, e.g. `<data dir>/network`.
    pub state_dir: PathBuf,
    /// Whether to install masquerade and forwarding rules for egress (default true).
    pub masquerade: bool,
    /// The cluster's pod network (`--cluster-cidr`): traffic to it is not masqueraded
    /// (default: this node's CIDR only).
    pub cluster_cidr: Option<Ipv4Cidr>,
}

impl BridgeConfig {
    pub const DEFAULT_BRIDGE: &'static str = "k1s0";
    pub const DEFAULT_MTU: u32 = 1500;

    /// The default layout for `cidr` with IPAM state in `state_dir`.
    pub fn new(cidr: Ipv4Cidr, state_dir: impl Into<PathBuf>) -> Self {
        BridgeConfig {
            bridge: Self::DEFAULT_BRIDGE.to_string(),
            cidr,
            mtu: Self::DEFAULT_MTU,
            state_dir: state_dir.into(),
            masquerade: true,
            cluster_cidr: None,
        }
    }

    fn validate(&self) -> Result<(), NetworkError> {
        check_ifname(&self.bridge)?;
        if !(68..=65535).contains(&self.mtu) {
            return Err(NetworkError::Invalid(format!(
                "MTU {} is out of range (68..=65535)",
                self.mtu
            )));
        }
        Ok(())
    }
}

/// Interface names: 1 to 15 bytes, no `/`, whitespace, `:` or NUL, not `.` or `..`.
fn check_ifname(name: &str) -> Result<(), NetworkError> {
    let ok = !name.is_empty()
        && name.len() <= 15
        && name != "."
        && name != ".."
        && !name
            .chars()
            .any(|c| c == '/' || c == ':' || c == '\0' || c.is_whitespace());
    if ok {
        Ok(())
    } else {
        Err(NetworkError::Invalid(format!(
            "{name:?} is not a valid interface name"
        )))
    }
}

/// 32-bit FNV-1a: stable across Rust versions and processes (unlike `DefaultHasher`), so a
/// restarted kubelet finds the veth of a pod it set up before.
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

/// A fixed MAC for an IPv4 address: `0a:58:` (locally administered, unicast) and the four
/// address bytes, as the CNI bridge plugin used to do. The pod's `eth0` gets the one of its
/// address and the bridge the one of the gateway, so neighbours' ARP caches stay right when a
/// pod's veth is recreated with the same address, and the gateway's MAC does not follow the
/// lowest port MAC as ports come and go.
pub fn mac_for(ip: Ipv4Addr) -> [u8; 6] {
    let [a, b, c, d] = ip.octets();
    [0x0a, 0x58, a, b, c, d]
}

/// The host side of a pod's veth pair: `veth` and 8 hex digits of a hash of the pod UID.
pub fn host_veth_name(pod_uid: &str) -> String {
    format!("veth{:08x}", fnv1a(pod_uid.as_bytes()))
}

fn netlink(context: impl std::fmt::Display) -> impl FnOnce(rtnetlink::Error) -> NetworkError {
    move |e| NetworkError::Netlink(format!("{context}: {e}"))
}

/// Whether a netlink error carries `errno`.
fn is_errno(e: &rtnetlink::Error, errno: i32) -> bool {
    matches!(e, rtnetlink::Error::NetlinkError(m) if m.raw_code() == -errno)
}

/// Tolerates one errno (e.g. EEXIST when adding, ENODEV when deleting).
fn allow(result: Result<(), rtnetlink::Error>, errno: i32) -> Result<(), rtnetlink::Error> {
    match result {
        Err(e) if is_errno(&e, errno) => Ok(()),
        other => other,
    }
}

/// A netlink connection in the calling thread's network namespace; its driver runs as a task
/// on the current tokio runtime and ends when the handle is dropped.
fn connect() -> Result<Handle, NetworkError> {
    let (connection, handle, _) =
        rtnetlink::new_connection().map_err(|source| NetworkError::Os {
            context: "opening a netlink socket".into(),
            source,
        })?;
    // Not tracked: the driver ends once every clone of `handle` is dropped.
    tokio::spawn(connection);
    Ok(handle)
}

/// The index of link `name`, `None` if there is none.
async fn link_index(handle: &Handle, name: &str) -> Result<Option<u32>, NetworkError> {
    let mut links = handle.link().get().match_name(name.to_string()).execute();
    match links.try_next().await {
        Ok(Some(link)) => Ok(Some(link.header.index)),
        Ok(None) => Ok(None),
        Err(e) if is_errno(&e, libc::ENODEV) => Ok(None),
        Err(e) => Err(netlink(format!("looking up link {name}"))(e)),
    }
}

/// Deletes link `name` if it exists.
async fn delete_link(handle: &Handle, name: &str) -> Result<(), NetworkError> {
    if let Some(index) = link_index(handle, name).await? {
        allow(handle.link().del(index).execute().await, libc::ENODEV)
            .map_err(netlink(format!("deleting link {name}")))?;
    }
    Ok(())
}

/// The pod network of a node; see the module docs. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct BridgeNetwork {
    config: BridgeConfig,
    ipam: Ipam,
    /// The bridge's interface index once known (0 before).
    bridge_index: AtomicU32,
}

impl BridgeNetwork {
    /// Checks `config` and loads the IPAM state from `config.state_dir`. Touches no
    /// interface; [`PodNetwork::init`] does.
    pub fn new(config: BridgeConfig) -> Result<Self, NetworkError> {
        config.validate()?;
        let ipam = Ipam::open(config.cidr, &config.state_dir)?;
        Ok(BridgeNetwork {
            config,
            ipam,
            bridge_index: AtomicU32::new(0),
        })
    }

    pub fn config(&self) -> &BridgeConfig {
        &self.config
    }

    pub fn ipam(&self) -> &Ipam {
        &self.ipam
    }

    /// Creates the bridge if missing, sets it up and gives it the gateway address.
    /// Returns its index, which later setups reuse without asking the kernel again.
    async fn ensure_bridge(&self, handle: &Handle) -> Result<u32, NetworkError> {
        let name = &self.config.bridge;
        let index = match link_index(handle, name).await? {
            Some(index) => index,
            None => {
                allow(
                    handle
                        .link()
                        .add(
                            LinkBridge::new(name)
                                .mtu(self.config.mtu)
                                .address(mac_for(self.config.cidr.gateway()).to_vec())
                                .build(),
                        )
                        .execute()
                        .await,
                    libc::EEXIST,
                )
                .map_err(netlink(format!("creating bridge {name}")))?;
                link_index(handle, name).await?.ok_or_else(|| {
                    NetworkError::Netlink(format!("bridge {name} vanished right after creation"))
                })?
            }
        };
        let gateway = self.config.cidr.gateway();
        let prefix = self.config.cidr.prefix_len();
        allow(
            handle
                .address()
                .add(index, IpAddr::V4(gateway), prefix)
                .execute()
                .await,
            libc::EEXIST,
        )
        .map_err(netlink(format!("adding {gateway}/{prefix} to {name}")))?;
        handle
            .link()
            .set(LinkUnspec::new_with_index(index).up().build())
            .execute()
            .await
            .map_err(netlink(format!("setting {name} up")))?;
        self.bridge_index.store(index, Ordering::Relaxed);
        Ok(index)
    }

    /// Turns on hairpin mode on a bridge port: netlink first, sysfs if that is refused.
    async fn set_hairpin(&self, handle: &Handle, name: &str) -> Result<(), NetworkError> {
        let index = link_index(handle, name)
            .await?
            .ok_or_else(|| NetworkError::Netlink(format!("veth {name} vanished after creation")))?;
        let via_netlink = handle
            .link()
            .set_port(LinkBridgePort::new(index).hairpin(true).build())
            .execute()
            .await;
        let Err(e) = via_netlink else {
            return Ok(());
        };
        let sysfs = format!("/sys/class/net/{name}/brport/hairpin_mode");
        std::fs::write(&sysfs, b"1").map_err(|source| NetworkError::Os {
            context: format!("setting hairpin mode on {name} (netlink said: {e}); writing {sysfs}"),
            source,
        })
    }

    /// Steps 3 to 5 of the module docs.
    async fn plumb(
        &self,
        handle: &Handle,
        bridge: u32,
        pod_uid: &str,
        netns: &Path,
        address: &PodAddress,
    ) -> Result<(), NetworkError> {
        let host = host_veth_name(pod_uid);
        let (ip, gateway) = match (address.ip, address.gateway) {
            (IpAddr::V4(ip), IpAddr::V4(gw)) => (ip, gw),
            _ => {
                return Err(NetworkError::Invalid(format!(
                    "IPv6 address {} is not supported",
                    address.ip
                )));
            }
        };
        // Opened first: a missing namespace fails before anything is created.
        let ns = std::fs::File::open(netns).map_err(|source| NetworkError::Os {
            context: format!("opening the network namespace {}", netns.display()),
            source,
        })?;
        delete_link(handle, &host).await?;
        let add = || {
            let veth = LinkMessageBuilder::<LinkVeth>::new_with_info_kind(InfoKind::Veth)
                .name(host.clone())
                .mtu(self.config.mtu)
                .controller(bridge)
                .up()
                .set_info_data(InfoData::Veth(InfoVeth::Peer(
                    LinkUnspec::new_with_name(POD_INTERFACE)
                        .mtu(self.config.mtu)
                        .address(mac_for(ip).to_vec())
                        .setns_by_fd(ns.as_raw_fd())
                        .build(),
                )))
                .build();
            handle.link().add(veth).execute()
        };
        if let Err(e) = add().await {
            if !is_errno(&e, libc::EEXIST) {
                return Err(netlink(format!(
                    "creating veth pair {host}/{POD_INTERFACE}"
                ))(e));
            }
            // The pod's namespace still has the eth0 of an earlier setup whose host end is
            // gone: remove it and create the pair again.
            let path = netns.to_path_buf();
            in_pod_netns(path, |handle| async move {
                delete_link(&handle, POD_INTERFACE).await
            })
            .await?;
            add().await.map_err(netlink(format!(
                "creating veth pair {host}/{POD_INTERFACE}"
            )))?;
        }
        drop(ns);
        self.set_hairpin(handle, &host).await?;
        let prefix = address.prefix_len;
        in_pod_netns(netns.to_path_buf(), move |handle| async move {
            configure_pod_side(&handle, ip, prefix, gateway).await
        })
        .await
    }

    /// Removes what [`PodNetwork::init`] made: the bridge (pods' veths stay, detached) and
    /// the firewall rules for this bridge and CIDR. For uninstalling and tests; a running
    /// node never calls it. IPAM state is kept.
    pub async fn destroy(&self) -> Result<(), NetworkError> {
        let handle = connect()?;
        delete_link(&handle, &self.config.bridge).await?;
        drop(handle);
        if let Err(e) = firewall::remove(
            &self.config.bridge,
            self.config.cidr,
            self.config.cluster_cidr.unwrap_or(self.config.cidr),
        )
        .await
        {
            tracing::warn!(error = %e, "removing the pod network firewall rules");
        }
        Ok(())
    }
}

/// Runs `f` with a netlink connection inside the pod's namespace: on the fresh thread
/// [`run_in_netns`] makes (waited for from the blocking pool), with a current-thread runtime
/// whose netlink socket therefore lives in that namespace.
async fn in_pod_netns<F, Fut>(netns: PathBuf, f: F) -> Result<(), NetworkError>
where
    F: FnOnce(Handle) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<(), NetworkError>>,
{
    tokio::task::spawn_blocking(move || {
        run_in_netns(&netns, move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_io()
                .build()
                .map_err(|source| NetworkError::Os {
                    context: "building the pod namespace runtime".into(),
                    source,
                })?;
            runtime.block_on(async move { f(connect()?).await })
        })
    })
    .await
    .map_err(|e| NetworkError::Netlink(format!("pod namespace task failed: {e}")))??
}

/// Inside the pod's namespace (eth0 arrived there named, with its MAC and MTU): the
/// address, `eth0` and `lo` up, and the default route via the gateway.
async fn configure_pod_side(
    handle: &Handle,
    ip: Ipv4Addr,
    prefix: u8,
    gateway: Ipv4Addr,
) -> Result<(), NetworkError> {
    let index = link_index(handle, POD_INTERFACE).await?.ok_or_else(|| {
        NetworkError::Netlink(format!(
            "{POD_INTERFACE} did not arrive in the pod namespace"
        ))
    })?;
    allow(
        handle
            .address()
            .add(index, IpAddr::V4(ip), prefix)
            .execute()
            .await,
        libc::EEXIST,
    )
    .map_err(netlink(format!("adding {ip}/{prefix} to {POD_INTERFACE}")))?;
    // Not at creation: a veth end cannot come up before its peer is registered (ENOTCONN).
    handle
        .link()
        .set(LinkUnspec::new_with_index(index).up().build())
        .execute()
        .await
        .map_err(netlink(format!("setting {POD_INTERFACE} up")))?;
    let lo = link_index(handle, "lo")
        .await?
        .ok_or_else(|| NetworkError::Netlink("the pod namespace has no lo".into()))?;
    handle
        .link()
        .set(LinkUnspec::new_with_index(lo).up().build())
        .execute()
        .await
        .map_err(netlink("setting lo up"))?;
    handle
        .route()
        .add(
            RouteMessageBuilder::<Ipv4Addr>::new()
                .gateway(gateway)
                .output_interface(index)
                .build(),
        )
        .replace()
        .execute()
        .await
        .map_err(netlink(format!("adding the default route via {gateway}")))
}

/// Turns on IPv4 forwarding (so pods reach beyond the node); a failure is logged.
fn enable_ip_forward() {
    const PATH: &str = "/proc/sys/net/ipv4/ip_forward";
    if std::fs::read_to_string(PATH).is_ok_and(|v| v.trim() == "1") {
        return;
    }
    if let Err(e) = std::fs::write(PATH, b"1") {
        tracing::warn!(error = %e, "could not enable net.ipv4.ip_forward; pods cannot reach beyond the node");
    }
}

#[async_trait::async_trait]
impl PodNetwork for BridgeNetwork {
    async fn init(&self) -> Result<(), NetworkError> {
        let handle = connect()?;
        self.ensure_bridge(&handle).await?;
        drop(handle);
        enable_ip_forward();
        if self.config.masquerade {
            match firewall::ensure(
                &self.config.bridge,
                self.config.cidr,
                self.config.cluster_cidr.unwrap_or(self.config.cidr),
            )
            .await
            {
                Ok(backend) => {
                    tracing::debug!(?backend, cidr = %self.config.cidr, "pod network firewall rules in place");
                }
                Err(e) => tracing::warn!(
                    error = %e,
                    "could not install masquerade/forward rules; pod egress beyond the node is off"
                ),
            }
        }
        Ok(())
    }

    async fn setup(&self, pod_uid: &str, netns: &Path) -> Result<PodAddress, NetworkError> {
        check_netns_path(netns)?;
        if !is_netns_mount(netns) {
            return Err(NetworkError::Invalid(format!(
                "{} is not a namespace file (create it with create_netns)",
                netns.display()
            )));
        }
        let handle = connect()?;
        let cached = self.bridge_index.load(Ordering::Relaxed);
        let bridge = match cached {
            0 => self.ensure_bridge(&handle).await?,
            known => known,
        };
        let had_address = self.ipam.get(pod_uid).is_some();
        let address = self.ipam.allocate(pod_uid)?;
        let mut result = self.plumb(&handle, bridge, pod_uid, netns, &address).await;
        if result.is_err() && cached != 0 {
            // The bridge may have been recreated under another index: look again, once.
            result = match self.ensure_bridge(&handle).await {
                Ok(bridge) => self.plumb(&handle, bridge, pod_uid, netns, &address).await,
                Err(e) => Err(e),
            };
        }
        match result {
            Ok(()) => Ok(address),
            Err(e) => {
                if let Err(cleanup) = delete_link(&handle, &host_veth_name(pod_uid)).await {
                    tracing::warn!(pod_uid, error = %cleanup, "cleaning up after a failed pod network setup");
                }
                if !had_address && let Err(release) = self.ipam.release(pod_uid) {
                    tracing::warn!(pod_uid, error = %release, "releasing the address of a failed pod network setup");
                }
                Err(e)
            }
        }
    }

    async fn teardown(&self, pod_uid: &str, _netns: Option<&Path>) -> Result<(), NetworkError> {
        // Deleting the host end deletes the pair; if the namespace is gone, so is the pair.
        let handle = connect()?;
        delete_link(&handle, &host_veth_name(pod_uid)).await?;
        drop(handle);
        self.ipam.release(pod_uid)?;
        Ok(())
    }

    fn address(&self, pod_uid: &str) -> Option<PodAddress> {
        self.ipam.get(pod_uid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn veth_names_are_stable_and_short() {
        // FNV-1a test vectors.
        assert_eq!(fnv1a(b""), 0x811c_9dc5);
        assert_eq!(fnv1a(b"a"), 0xe40c_292c);
        let cases = ["", "0b6c6b0e-4f6a-4a43-9a8c-1d2e3f405162", "x"];
        for uid in cases {
            let host = host_veth_name(uid);
            assert_eq!(host.len(), 12, "{host}");
            assert!(host.starts_with("veth"));
            assert_eq!(host, host_veth_name(uid));
            check_ifname(&host).unwrap();
        }
        assert_ne!(host_veth_name("a"), host_veth_name("b"));
    }

    #[test]
    fn macs_from_addresses() {
        assert_eq!(
            mac_for(Ipv4Addr::new(10, 42, 0, 7)),
            [0x0a, 0x58, 10, 42, 0, 7]
        );
        // Locally administered, unicast.
        let mac = mac_for(Ipv4Addr::new(192, 168, 1, 1));
        assert_eq!(mac[0] & 0b11, 0b10);
    }

    #[test]
    fn config_validation() {
        let cidr: Ipv4Cidr = "10.42.0.0/24".parse().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let cases: [(&str, u32, bool); 7] = [
            ("k1s0", 1500, true),
            ("a", 68, true),
            ("exactly15chars_", 9000, true),
            ("sixteen_chars_xx", 1500, false),
            ("", 1500, false),
            ("br 0", 1500, false),
            ("k1s0", 67, false),
        ];
        for (bridge, mtu, ok) in cases {
            let mut config = BridgeConfig::new(cidr, dir.path());
            config.bridge = bridge.into();
            config.mtu = mtu;
            assert_eq!(BridgeNetwork::new(config).is_ok(), ok, "{bridge:?} {mtu}");
        }
    }
}
