//! The kernel's routing table, as far as this component owns it: IPv4 routes tagged with
//! [`PROTOCOL`] (`ip route show proto 75`), so that k1s lists, replaces and removes only its
//! own. [`NetlinkRoutes`] speaks rtnetlink (one short-lived connection per call: routes
//! change when nodes come and go, not per packet); [`FakeRoutes`] keeps them in memory.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Mutex, PoisonError};

use futures::TryStreamExt;
use k1s_api::net::Ipv4Net;
use netlink_packet_route::route::{RouteAddress, RouteAttribute, RouteMessage, RouteProtocol};
use rtnetlink::RouteMessageBuilder;

/// The routing protocol number k1s tags its routes with (`/etc/iproute2/rt_protos` has no
/// name for it; `ip route flush proto 75` removes them all).
pub const PROTOCOL: u8 = 75;

/// A route to a node's pod CIDR via that node's address (host-gw), or via its VTEP address
/// on the VXLAN device (`dev`, on-link).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Route {
    pub destination: Ipv4Net,
    pub via: Ipv4Addr,
    /// The output device's index: the gateway is taken as on-link there.
    pub dev: Option<u32>,
}

impl std::fmt::Display for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} via {}", self.destination, self.via)?;
        if let Some(d) = self.dev {
            write!(f, " dev #{d} onlink")?;
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    #[error("netlink: {context}: {message}")]
    Netlink { context: String, message: String },
}

/// The routes k1s owns in the kernel.
#[async_trait::async_trait]
pub trait Routes: Send + Sync {
    /// Every route tagged [`PROTOCOL`] in the main table.
    async fn list(&self) -> Result<Vec<Route>, RouteError>;
    /// Adds `route`, replacing a route to the same destination.
    async fn replace(&self, route: &Route) -> Result<(), RouteError>;
    async fn delete(&self, route: &Route) -> Result<(), RouteError>;
}

/// [`Routes`] over rtnetlink.
#[derive(Debug, Default)]
pub struct NetlinkRoutes;

fn message(route: &Route) -> RouteMessage {
    let b = RouteMessageBuilder::<Ipv4Addr>::new()
        .destination_prefix(route.destination.addr(), route.destination.prefix_len())
        .gateway(route.via)
        .protocol(RouteProtocol::Other(PROTOCOL));
    match route.dev {
        Some(index) => b.output_interface(index).onlink().build(),
        None => b.build(),
    }
}

/// Runs `op` on a fresh rtnetlink connection (closed when `op` is done).
async fn with_handle<T, F, Fut>(context: String, op: F) -> Result<T, RouteError>
where
    F: FnOnce(rtnetlink::Handle) -> Fut,
    Fut: std::future::Future<Output = Result<T, rtnetlink::Error>>,
{
    let err = |message: String| RouteError::Netlink {
        context: context.clone(),
        message,
    };
    let (conn, handle, _) = rtnetlink::new_connection().map_err(|e| err(e.to_string()))?;
    let work = async move { op(handle).await };
    // The connection future ends once the handle (moved into `op`) is dropped.
    let ((), result) = tokio::join!(conn, work);
    result.map_err(|e| err(e.to_string()))
}

#[async_trait::async_trait]
impl Routes for NetlinkRoutes {
    async fn list(&self) -> Result<Vec<Route>, RouteError> {
        let messages: Vec<RouteMessage> = with_handle("listing routes".into(), |h| async move {
            h.route()
                .get(RouteMessageBuilder::<Ipv4Addr>::new().build())
                .execute()
                .try_collect()
                .await
        })
        .await?;
        Ok(messages.iter().filter_map(parse).collect())
    }

    async fn replace(&self, route: &Route) -> Result<(), RouteError> {
        let msg = message(route);
        with_handle(format!("adding the route {route}"), |h| async move {
            h.route().add(msg).replace().execute().await
        })
        .await
    }

    async fn delete(&self, route: &Route) -> Result<(), RouteError> {
        let msg = message(route);
        with_handle(format!("deleting the route {route}"), |h| async move {
            h.route().del(msg).execute().await
        })
        .await
    }
}

/// A route of ours in a kernel message: tagged [`PROTOCOL`], in the main table, IPv4 with a
/// gateway.
fn parse(m: &RouteMessage) -> Option<Route> {
    if m.header.protocol != RouteProtocol::Other(PROTOCOL) {
        return None;
    }
    let mut dst = None;
    let mut via = None;
    let mut oif = None;
    let onlink = m
        .header
        .flags
        .contains(netlink_packet_route::route::RouteFlags::Onlink);
    for a in &m.attributes {
        match a {
            RouteAttribute::Destination(RouteAddress::Inet(ip)) => dst = Some(*ip),
            RouteAttribute::Gateway(RouteAddress::Inet(ip)) => via = Some(*ip),
            RouteAttribute::Oif(i) => oif = Some(*i),
            RouteAttribute::Table(t) if *t != 254 => return None,
            _ => {}
        }
    }
    let destination = format!("{}/{}", dst?, m.header.destination_prefix_length)
        .parse()
        .ok()?;
    Some(Route {
        destination,
        via: via?,
        dev: oif.filter(|_| onlink),
    })
}

/// [`Routes`] in memory, for tests of the controller.
#[derive(Debug, Default)]
pub struct FakeRoutes {
    routes: Mutex<BTreeSet<Route>>,
}

impl FakeRoutes {
    pub fn snapshot(&self) -> Vec<Route> {
        self.routes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .copied()
            .collect()
    }
}

#[async_trait::async_trait]
impl Routes for FakeRoutes {
    async fn list(&self) -> Result<Vec<Route>, RouteError> {
        Ok(self.snapshot())
    }

    async fn replace(&self, route: &Route) -> Result<(), RouteError> {
        let mut routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
        routes.retain(|r| r.destination != route.destination);
        routes.insert(*route);
        Ok(())
    }

    async fn delete(&self, route: &Route) -> Result<(), RouteError> {
        self.routes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(route);
        Ok(())
    }
}

/// Whether `ip` is an IPv4 address (routes are IPv4 only for now).
pub fn v4(ip: IpAddr) -> Option<Ipv4Addr> {
    match ip {
        IpAddr::V4(v4) => Some(v4),
        IpAddr::V6(_) => None,
    }
}
