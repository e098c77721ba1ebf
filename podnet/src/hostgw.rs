//! The `host-gw` backend, as flannel's: for every other node with a pod CIDR inside
//! `--cluster-cidr` and an InternalIP, a route `POD-CIDR via NODE-IP`; nodes must share an L2
//! segment (the next hop is the node itself). Routes of departed nodes are removed; routes
//! are left in place when k1s stops, so pod traffic keeps flowing across a restart.
//!
//! [`desired`] is the pure decision (unit-tested); [`sync`] brings the kernel to it through
//! the [`Routes`] edge; [`run`] drives both with [`drive`] (shared with the VXLAN backend):
//! a Node informer, changes coalesced, a resync every [`RESYNC`] (a route deleted by hand
//! comes back).

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k1s_api::client::{Client, ResourceRef};
use k1s_api::net::Ipv4Net;
use k1s_runtime::reflector::{self, Change};
use k1s_runtime::watcher;
use k8s_openapi::api::core::v1::Node;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::routes::{Route, RouteError, Routes};

/// How often the routes are compared with the kernel even when no Node changed.
pub const RESYNC: Duration = Duration::from_secs(60);

/// What of a Node its route needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRoute {
    pub pod_cidr: Option<Ipv4Net>,
    pub address: Option<Ipv4Addr>,
}

impl NodeRoute {
    pub fn of(node: &Node) -> Self {
        let pod_cidr = node
            .spec
            .as_ref()
            .and_then(|s| s.pod_cidr.as_deref())
            .and_then(|c| c.parse().ok());
        let address = node
            .status
            .as_ref()
            .and_then(|s| s.addresses.as_ref())
            .into_iter()
            .flatten()
            .filter(|a| a.type_ == "InternalIP")
            .find_map(|a| a.address.parse().ok());
        Self { pod_cidr, address }
    }
}

/// The routes this node (`me`) should have.
pub fn desired(
    me: &str,
    nodes: &BTreeMap<String, NodeRoute>,
    cluster: &Ipv4Net,
) -> BTreeSet<Route> {
    nodes
        .iter()
        .filter(|(name, _)| name.as_str() != me)
        .filter_map(|(_, n)| {
            let destination = n.pod_cidr?;
            cluster.contains_net(&destination).then_some(Route {
                destination,
                via: n.address?,
                dev: None,
            })
        })
        .collect()
}

/// What one sync changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Synced {
    pub added: usize,
    pub removed: usize,
}

/// Brings k1s's routes inside `cluster` to `want`.
pub async fn sync(
    routes: &dyn Routes,
    want: &BTreeSet<Route>,
    cluster: &Ipv4Net,
) -> Result<Synced, RouteError> {
    let have: BTreeSet<Route> = routes
        .list()
        .await?
        .into_iter()
        .filter(|r| cluster.contains_net(&r.destination))
        .collect();
    let mut out = Synced::default();
    for r in want.difference(&have) {
        routes.replace(r).await?;
        tracing::info!(route = %r, "host-gw: route added");
        out.added += 1;
    }
    for r in have.difference(want) {
        // A route to a destination still wanted was replaced above.
        if want.iter().any(|w| w.destination == r.destination) {
            continue;
        }
        routes.delete(r).await?;
        tracing::info!(route = %r, "host-gw: route removed");
        out.removed += 1;
    }
    Ok(out)
}

/// Keeps this node's routes to the other nodes' pod CIDRs until `cancel`.
pub async fn run(
    client: Arc<dyn Client>,
    me: String,
    cluster: Ipv4Net,
    routes: Arc<dyn Routes>,
    cancel: CancellationToken,
) {
    drive(client, cancel, move |nodes| {
        let map: BTreeMap<String, NodeRoute> = nodes
            .iter()
            .map(|(name, n)| (name.clone(), NodeRoute::of(n)))
            .collect();
        let want = desired(&me, &map, &cluster);
        let routes = routes.clone();
        Box::pin(async move { sync(&*routes, &want, &cluster).await.map(drop) })
    })
    .await;
}

/// One pass of a backend over the Nodes as they are now; `E` is the backend's error (logged).
pub type Pass<E> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), E>> + Send>>;

/// Watches the Nodes and runs `pass` after the first list, after every change (a burst
/// coalesced), every [`RESYNC`], and again with back-off after a failure, until `cancel`.
pub async fn drive<F, E>(client: Arc<dyn Client>, cancel: CancellationToken, mut pass: F)
where
    F: FnMut(&BTreeMap<String, Arc<Node>>) -> Pass<E> + Send,
    E: std::fmt::Display,
{
    let nodes: Arc<Mutex<BTreeMap<String, Arc<Node>>>> = Arc::default();
    let changed = Arc::new(Notify::new());
    let synced = Arc::new(Notify::new());
    let (n, c, s) = (nodes.clone(), changed.clone(), synced.clone());
    let informer = reflector::run::<Node, _>(
        client,
        ResourceRef::new("", "v1", "nodes", None),
        watcher::Config::default(),
        move |change: Change<Node>| {
            let mut map = n.lock().unwrap_or_else(PoisonError::into_inner);
            let name = change.object().metadata.name.clone().unwrap_or_default();
            match change {
                Change::Added(node) | Change::Modified(node) => {
                    map.insert(name, Arc::new(node));
                }
                Change::Deleted(_) => {
                    map.remove(&name);
                }
            }
            c.notify_one();
        },
        move || s.notify_one(),
        cancel.clone(),
    );
    let sync_loop = async {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = synced.notified() => {}
        }
        let mut delay = Duration::from_secs(1);
        loop {
            let snapshot = nodes.lock().unwrap_or_else(PoisonError::into_inner).clone();
            let next = match pass(&snapshot).await {
                Ok(()) => {
                    delay = Duration::from_secs(1);
                    RESYNC
                }
                Err(e) => {
                    tracing::warn!(error = %e, retry_in = ?delay, "pod network: not in place yet");
                    let d = delay;
                    delay = (delay * 2).min(Duration::from_secs(30));
                    d
                }
            };
            tokio::select! {
                () = cancel.cancelled() => return,
                () = changed.notified() => {
                    // Coalesce a burst of Node updates.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                () = tokio::time::sleep(next) => {}
            }
        }
    };
    tokio::join!(informer, sync_loop);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes::FakeRoutes;

    fn n(cidr: Option<&str>, ip: Option<&str>) -> NodeRoute {
        NodeRoute {
            pod_cidr: cidr.map(|c| c.parse().unwrap()),
            address: ip.map(|i| i.parse().unwrap()),
        }
    }

    #[test]
    fn routes_to_every_other_node_in_the_cluster_range() {
        let cluster: Ipv4Net = "10.42.0.0/16".parse().unwrap();
        let nodes = BTreeMap::from([
            ("me".to_string(), n(Some("10.42.0.0/24"), Some("192.0.2.1"))),
            ("b".to_string(), n(Some("10.42.1.0/24"), Some("192.0.2.2"))),
            ("c".to_string(), n(None, Some("192.0.2.3"))),
            ("d".to_string(), n(Some("10.42.3.0/24"), None)),
            ("e".to_string(), n(Some("172.16.0.0/24"), Some("192.0.2.5"))),
        ]);
        let want = desired("me", &nodes, &cluster);
        let got: Vec<String> = want.iter().map(|r| r.to_string()).collect();
        assert_eq!(got, ["10.42.1.0/24 via 192.0.2.2"]);
    }

    #[tokio::test]
    async fn sync_adds_replaces_and_removes_only_inside_the_range() {
        let cluster: Ipv4Net = "10.42.0.0/16".parse().unwrap();
        let fake = FakeRoutes::default();
        let r = |d: &str, v: &str| Route {
            destination: d.parse().unwrap(),
            via: v.parse().unwrap(),
            dev: None,
        };
        // Another cluster's route (outside the range) is not ours to remove.
        fake.replace(&r("10.99.0.0/24", "192.0.2.9")).await.unwrap();
        fake.replace(&r("10.42.5.0/24", "192.0.2.5")).await.unwrap();
        fake.replace(&r("10.42.1.0/24", "192.0.2.7")).await.unwrap();
        let want = BTreeSet::from([
            r("10.42.1.0/24", "192.0.2.2"),
            r("10.42.2.0/24", "192.0.2.3"),
        ]);
        let s = sync(&fake, &want, &cluster).await.unwrap();
        assert_eq!(
            s,
            Synced {
                added: 2,
                removed: 1
            }
        );
        let mut got = fake.snapshot();
        got.sort();
        assert_eq!(
            got,
            vec![
                r("10.42.1.0/24", "192.0.2.2"),
                r("10.42.2.0/24", "192.0.2.3"),
                r("10.99.0.0/24", "192.0.2.9")
            ]
        );
        assert_eq!(
            sync(&fake, &want, &cluster).await.unwrap(),
            Synced::default()
        );
    }
}
