//! The `vxlan` backend, in flannel's wire layout (VNI 1, UDP 8472): nodes need only reach
//! each other by IP, not share an L2 segment.
//!
//! Each node has a VXLAN device (`k1s.1` by default; learning off) bound to its node
//! address, holding the first address of its pod CIDR as a /32 (its VTEP address,
//! `10.42.N.0`), with an MTU 50 bytes below the uplink's; it announces the device's MAC and
//! its address on its Node (annotations [`MAC_ANNOTATION`], [`PUBLIC_IP_ANNOTATION`]). For
//! every other node that has announced both, three kernel entries, as flannel writes them:
//! - a neighbour: the remote VTEP address → the remote VTEP MAC (permanent);
//! - a forwarding-database entry: the remote VTEP MAC → the remote node address;
//! - a route: the remote pod CIDR via the remote VTEP address, on the device, on-link
//!   (tagged like every k1s route, so departed nodes' routes are removed).
//!
//! Neighbour and FDB entries of a departed node stay until the device is recreated: they
//! name a MAC no route leads to.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use futures::TryStreamExt;
use k1s_api::client::{Client, ClientError, Patch, ResourceRef, WriteParams};
use k1s_api::net::Ipv4Net;
use k8s_openapi::api::core::v1::Node;
use netlink_packet_route::link::LinkAttribute;
use netlink_packet_route::neighbour::{NeighbourFlags, NeighbourState};
use rtnetlink::{LinkUnspec, LinkVxlan};
use tokio_util::sync::CancellationToken;

use crate::hostgw::{self, drive};
use crate::routes::{Route, RouteError, Routes};

/// The Node annotation with the node's VTEP MAC.
pub const MAC_ANNOTATION: &str = "vxlan.k1s.io/vtep-mac";
/// The Node annotation with the address VXLAN packets for the node go to.
pub const PUBLIC_IP_ANNOTATION: &str = "vxlan.k1s.io/public-ip";
/// VXLAN's own header and the outer IPv4/UDP/Ethernet headers.
pub const OVERHEAD: u32 = 50;

/// The device's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VxlanConfig {
    pub device: String,
    pub vni: u32,
    pub port: u16,
    /// This node's address (the tunnel's local end, announced as its public IP).
    pub local: Ipv4Addr,
}

impl VxlanConfig {
    pub fn new(local: Ipv4Addr) -> Self {
        Self {
            device: "k1s.1".into(),
            vni: 1,
            port: 8472,
            local,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum VxlanError {
    #[error("netlink: {context}: {message}")]
    Netlink { context: String, message: String },
    #[error(
        "cannot create the VXLAN device {device}: {message} (does this kernel have the vxlan module? `modprobe vxlan`; --pod-network-backend host-gw needs none, if the nodes share an L2 segment)"
    )]
    NoVxlan { device: String, message: String },
}

/// Why a pass of the backend did not bring the node's tunnel in place.
#[derive(Debug, thiserror::Error)]
pub enum PassError {
    #[error("this node has no pod CIDR yet")]
    NoPodCidr,
    /// Creating the device or writing a peer's entries failed.
    #[error(transparent)]
    Vtep(#[from] VxlanError),
    #[error("announcing the VTEP on the Node: {0}")]
    Announce(#[source] ClientError),
    #[error(transparent)]
    Routes(#[from] RouteError),
}

/// A remote node's tunnel end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Peer {
    pub pod_cidr: Ipv4Net,
    pub mac: [u8; 6],
    pub public_ip: Ipv4Addr,
}

impl Peer {
    /// The remote VTEP address: the first address of its pod CIDR.
    pub fn vtep_ip(&self) -> Ipv4Addr {
        self.pod_cidr.addr()
    }
}

fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut out {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(out)
}

fn format_mac(m: &[u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The peers among `nodes`: every other node with a pod CIDR inside `cluster` and both
/// annotations.
pub fn peers(me: &str, nodes: &BTreeMap<String, Arc<Node>>, cluster: &Ipv4Net) -> Vec<Peer> {
    nodes
        .iter()
        .filter(|(name, _)| name.as_str() != me)
        .filter_map(|(_, n)| {
            let pod_cidr: Ipv4Net = n.spec.as_ref()?.pod_cidr.as_deref()?.parse().ok()?;
            let ann = n.metadata.annotations.as_ref()?;
            let peer = Peer {
                pod_cidr,
                mac: parse_mac(ann.get(MAC_ANNOTATION)?)?,
                public_ip: ann.get(PUBLIC_IP_ANNOTATION)?.parse().ok()?,
            };
            cluster.contains_net(&pod_cidr).then_some(peer)
        })
        .collect()
}

/// The kernel side: the device and the per-peer neighbour and FDB entries.
#[async_trait::async_trait]
pub trait Vtep: Send + Sync {
    /// Creates the device if missing, gives it `address`/32, sets its MTU and brings it
    /// up; returns its index and MAC.
    async fn ensure(
        &self,
        config: &VxlanConfig,
        address: Ipv4Addr,
    ) -> Result<(u32, [u8; 6]), VxlanError>;
    /// The neighbour and FDB entries for `peer` on device `index`.
    async fn set_peer(&self, index: u32, peer: &Peer) -> Result<(), VxlanError>;
}

/// [`Vtep`] over rtnetlink.
#[derive(Debug, Default)]
pub struct NetlinkVtep;

fn nl(context: impl Into<String>) -> impl FnOnce(rtnetlink::Error) -> VxlanError {
    let context = context.into();
    move |e| VxlanError::Netlink {
        context,
        message: e.to_string(),
    }
}

async fn link_of(handle: &rtnetlink::Handle, name: &str) -> Option<(u32, Vec<LinkAttribute>)> {
    let mut links = handle.link().get().match_name(name.to_string()).execute();
    match links.try_next().await {
        Ok(Some(l)) => Some((l.header.index, l.attributes)),
        _ => None,
    }
}

/// The MTU of the link holding `ip`.
async fn uplink_mtu(handle: &rtnetlink::Handle, ip: Ipv4Addr) -> Option<u32> {
    use netlink_packet_route::address::AddressAttribute;
    let addrs: Vec<_> = handle.address().get().execute().try_collect().await.ok()?;
    let index = addrs.iter().find_map(|a| {
        a.attributes
            .iter()
            .any(|at| matches!(at, AddressAttribute::Address(IpAddr::V4(v)) if *v == ip))
            .then_some(a.header.index)
    })?;
    let mut links = handle.link().get().match_index(index).execute();
    let link = links.try_next().await.ok()??;
    link.attributes.iter().find_map(|a| match a {
        LinkAttribute::Mtu(m) => Some(*m),
        _ => None,
    })
}

/// The MTU pods should use with this backend: the uplink's (the link holding `local`)
/// minus [`OVERHEAD`]; `None` when the uplink is not found.
pub async fn pod_mtu(local: Ipv4Addr) -> Option<u32> {
    let (conn, handle, _) = rtnetlink::new_connection().ok()?;
    let work = async move { uplink_mtu(&handle, local).await };
    let ((), mtu) = tokio::join!(conn, work);
    mtu.map(|m| m.saturating_sub(OVERHEAD))
}

#[async_trait::async_trait]
impl Vtep for NetlinkVtep {
    async fn ensure(
        &self,
        config: &VxlanConfig,
        address: Ipv4Addr,
    ) -> Result<(u32, [u8; 6]), VxlanError> {
        let (conn, handle, _) = rtnetlink::new_connection().map_err(|e| VxlanError::Netlink {
            context: "opening netlink".into(),
            message: e.to_string(),
        })?;
        let work = async move {
            if link_of(&handle, &config.device).await.is_none() {
                let msg = LinkVxlan::new(&config.device, config.vni)
                    .local(config.local)
                    .port(config.port)
                    .learning(false)
                    .build();
                handle
                    .link()
                    .add(msg)
                    .execute()
                    .await
                    .map_err(|e| VxlanError::NoVxlan {
                        device: config.device.clone(),
                        message: e.to_string(),
                    })?;
            }
            let (index, attrs) =
                link_of(&handle, &config.device)
                    .await
                    .ok_or_else(|| VxlanError::Netlink {
                        context: format!("looking up {}", config.device),
                        message: "gone right after creation".into(),
                    })?;
            let mac = attrs
                .iter()
                .find_map(|a| match a {
                    LinkAttribute::Address(m) if m.len() == 6 => {
                        let mut out = [0u8; 6];
                        out.copy_from_slice(m);
                        Some(out)
                    }
                    _ => None,
                })
                .ok_or_else(|| VxlanError::Netlink {
                    context: format!("reading the MAC of {}", config.device),
                    message: "no address".into(),
                })?;
            match handle
                .address()
                .add(index, IpAddr::V4(address), 32)
                .execute()
                .await
            {
                Ok(()) => {}
                Err(rtnetlink::Error::NetlinkError(e)) if e.raw_code() == -libc::EEXIST => {}
                Err(e) => return Err(nl(format!("adding {address}/32 to {}", config.device))(e)),
            }
            let mut set = LinkUnspec::new_with_index(index).up();
            if let Some(mtu) = uplink_mtu(&handle, config.local).await {
                set = set.mtu(mtu.saturating_sub(OVERHEAD));
            }
            handle
                .link()
                .set(set.build())
                .execute()
                .await
                .map_err(nl(format!("bringing {} up", config.device)))?;
            Ok((index, mac))
        };
        let ((), r) = tokio::join!(conn, work);
        r
    }

    async fn set_peer(&self, index: u32, peer: &Peer) -> Result<(), VxlanError> {
        let (conn, handle, _) = rtnetlink::new_connection().map_err(|e| VxlanError::Netlink {
            context: "opening netlink".into(),
            message: e.to_string(),
        })?;
        let peer = *peer;
        let work = async move {
            handle
                .neighbours()
                .add(index, IpAddr::V4(peer.vtep_ip()))
                .link_layer_address(&peer.mac)
                .state(NeighbourState::Permanent)
                .replace()
                .execute()
                .await
                .map_err(nl(format!("the neighbour {}", peer.vtep_ip())))?;
            handle
                .neighbours()
                .add_bridge(index, &peer.mac)
                .destination(IpAddr::V4(peer.public_ip))
                .flags(NeighbourFlags::Own)
                .state(NeighbourState::Permanent)
                .replace()
                .execute()
                .await
                .map_err(nl(format!(
                    "the FDB entry {} → {}",
                    format_mac(&peer.mac),
                    peer.public_ip
                )))
        };
        let ((), r) = tokio::join!(conn, work);
        r
    }
}

/// The device once created: its index and MAC.
type Device = (u32, [u8; 6]);

/// Keeps this node's VTEP, its announcement and the tunnels to the other nodes until
/// `cancel`.
pub async fn run(
    client: Arc<dyn Client>,
    me: String,
    cluster: Ipv4Net,
    config: VxlanConfig,
    routes: Arc<dyn Routes>,
    vtep: Arc<dyn Vtep>,
    cancel: CancellationToken,
) {
    let state: Arc<tokio::sync::Mutex<Option<Device>>> = Arc::default();
    let c = client.clone();
    drive(client, cancel, move |nodes| {
        let (me, config, routes, vtep, state, client) = (
            me.clone(),
            config.clone(),
            routes.clone(),
            vtep.clone(),
            state.clone(),
            c.clone(),
        );
        let own = nodes.get(&me).and_then(|n| {
            n.spec
                .as_ref()?
                .pod_cidr
                .as_deref()?
                .parse::<Ipv4Net>()
                .ok()
        });
        let announced = nodes.get(&me).and_then(|n| {
            let a = n.metadata.annotations.as_ref()?;
            Some((
                a.get(MAC_ANNOTATION)?.clone(),
                a.get(PUBLIC_IP_ANNOTATION)?.clone(),
            ))
        });
        let peers = peers(&me, nodes, &cluster);
        Box::pin(async move {
            let own = own.ok_or(PassError::NoPodCidr)?;
            let mut guard = state.lock().await;
            let (index, mac) = match *guard {
                Some(s) => s,
                None => {
                    let s = vtep.ensure(&config, own.addr()).await?;
                    tracing::info!(device = %config.device, vni = config.vni, port = config.port,
                        mac = %format_mac(&s.1), "vxlan: device ready");
                    *guard = Some(s);
                    s
                }
            };
            drop(guard);
            let want = (format_mac(&mac), config.local.to_string());
            if announced.as_ref() != Some(&want) {
                let patch = Patch::Merge(serde_json::json!({"metadata": {"annotations": {
                    MAC_ANNOTATION: want.0, PUBLIC_IP_ANNOTATION: want.1}}}));
                client
                    .patch(
                        &ResourceRef::new("", "v1", "nodes", None),
                        &me,
                        &patch,
                        None,
                        &WriteParams::default(),
                    )
                    .await
                    .map_err(PassError::Announce)?;
            }
            for p in &peers {
                vtep.set_peer(index, p).await?;
            }
            let want_routes = peers
                .iter()
                .map(|p| Route {
                    destination: p.pod_cidr,
                    via: p.vtep_ip(),
                    dev: Some(index),
                })
                .collect();
            hostgw::sync(&*routes, &want_routes, &cluster)
                .await
                .map(drop)
                .map_err(PassError::from)
        })
    })
    .await;
}

#[cfg(test)]
mod tests {
    #[test]
    fn pass_error_text() {
        use super::PassError;
        assert_eq!(
            PassError::NoPodCidr.to_string(),
            "this node has no pod CIDR yet"
        );
        let api = k1s_api::client::ClientError::transport("down");
        assert_eq!(
            PassError::Announce(api.clone()).to_string(),
            format!("announcing the VTEP on the Node: {api}")
        );
        let e = super::VxlanError::Netlink {
            context: "ctx".into(),
            message: "m".into(),
        };
        let text = e.to_string();
        assert_eq!(PassError::from(e).to_string(), text);
    }

    use super::*;
    use serde_json::json;

    fn node(name: &str, cidr: &str, mac: Option<&str>, ip: Option<&str>) -> (String, Arc<Node>) {
        let mut ann = serde_json::Map::new();
        if let Some(m) = mac {
            ann.insert(MAC_ANNOTATION.into(), json!(m));
        }
        if let Some(i) = ip {
            ann.insert(PUBLIC_IP_ANNOTATION.into(), json!(i));
        }
        let n: Node = serde_json::from_value(json!({
            "metadata": {"name": name, "annotations": ann},
            "spec": {"podCIDR": cidr},
        }))
        .unwrap();
        (name.to_string(), Arc::new(n))
    }

    #[test]
    fn peers_are_the_other_announced_nodes_in_the_range() {
        let cluster: Ipv4Net = "10.42.0.0/16".parse().unwrap();
        let nodes = BTreeMap::from([
            node(
                "me",
                "10.42.0.0/24",
                Some("aa:bb:cc:dd:ee:01"),
                Some("192.0.2.1"),
            ),
            node(
                "b",
                "10.42.1.0/24",
                Some("aa:bb:cc:dd:ee:02"),
                Some("198.51.100.2"),
            ),
            node("c", "10.42.2.0/24", None, Some("192.0.2.3")),
            node("d", "10.42.3.0/24", Some("not-a-mac"), Some("192.0.2.4")),
            node(
                "e",
                "10.99.0.0/24",
                Some("aa:bb:cc:dd:ee:05"),
                Some("192.0.2.5"),
            ),
        ]);
        let p = peers("me", &nodes, &cluster);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].vtep_ip().to_string(), "10.42.1.0");
        assert_eq!(p[0].public_ip.to_string(), "198.51.100.2");
        assert_eq!(format_mac(&p[0].mac), "aa:bb:cc:dd:ee:02");
        assert_eq!(parse_mac("aa:bb:cc:dd:ee"), None);
        assert_eq!(parse_mac("aa:bb:cc:dd:ee:ff:00"), None);
    }
}
