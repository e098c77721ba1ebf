//! The `default/kubernetes` endpoints of a cluster with several servers, as upstream's lease
//! endpoint reconciler (`--endpoint-reconciler-type=lease`) keeps them: every server renews
//! a Lease of its own and writes the Endpoints and EndpointSlices of the `kubernetes` Service
//! from the Leases that are live, so they list every running server and lose one within the
//! lease duration after it dies (at once when it stops cleanly: it deletes its Lease and takes
//! itself out).
//!
//! The Leases are upstream's API server identity Leases (`kube-system/kube-apiserver-HASH`,
//! label `apiserver.kubernetes.io/identity=kube-apiserver`), with the server's advertised
//! address and port in an annotation. Servers on one host listening on different ports get
//! one EndpointSlice per port (`kubernetes`, `kubernetes-PORT`); Endpoints group them in
//! subsets. Only writes what differs, so servers that agree do not take turns rewriting.
//!
//! Run only on a shared datastore (etcd): with the embedded store there is one server, and
//! the bootstrap's endpoints never change.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k1s_api::client::{Client, DeleteParams, ListParams, Patch, ResourceRef, WriteParams};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// The label of API server identity Leases, and its value.
pub const IDENTITY_LABEL: &str = "apiserver.kubernetes.io/identity";
pub const IDENTITY_VALUE: &str = "kube-apiserver";
/// The annotation holding a server's advertised `IP:PORT` (`[IP]:PORT` for IPv6).
pub const ADDRESS_ANNOTATION: &str = "k1s.io/advertise-address";

/// How one server takes part.
#[derive(Debug, Clone)]
pub struct Config {
    pub advertise: IpAddr,
    pub port: u16,
    /// How often the Lease is renewed and the endpoints reconciled (upstream: 10 s).
    pub interval: Duration,
    /// How long a Lease lives without renewal (upstream's master lease TTL: 15 s).
    pub lease_seconds: i64,
}

impl Config {
    pub fn new(advertise: IpAddr, port: u16) -> Self {
        Self {
            advertise,
            port,
            interval: Duration::from_secs(10),
            lease_seconds: 15,
        }
    }

    fn address(&self) -> String {
        std::net::SocketAddr::new(self.advertise, self.port).to_string()
    }

    /// This server's Lease name: stable for its address, so a restart renews the same one.
    pub fn lease_name(&self) -> String {
        let d = ring::digest::digest(&ring::digest::SHA256, self.address().as_bytes());
        let h: String = d
            .as_ref()
            .iter()
            .take(8)
            .map(|b| format!("{b:02x}"))
            .collect();
        format!("kube-apiserver-{h}")
    }
}

fn leases() -> ResourceRef {
    ResourceRef::new("coordination.k8s.io", "v1", "leases", Some("kube-system"))
}

fn endpoints() -> ResourceRef {
    ResourceRef::new("", "v1", "endpoints", Some("default"))
}

fn slices() -> ResourceRef {
    ResourceRef::new("discovery.k8s.io", "v1", "endpointslices", Some("default"))
}

use k1s_api::time::now_micro_text as now_micro;

type Result<T> = std::result::Result<T, k1s_api::client::ClientError>;

/// Creates or renews this server's Lease.
async fn renew(client: &dyn Client, cfg: &Config) -> Result<()> {
    let name = cfg.lease_name();
    let spec = json!({"holderIdentity": name, "leaseDurationSeconds": cfg.lease_seconds,
        "renewTime": now_micro()});
    let patch =
        json!({"metadata": {"annotations": {ADDRESS_ANNOTATION: cfg.address()}}, "spec": spec});
    match client
        .patch(
            &leases(),
            &name,
            &Patch::Merge(patch),
            None,
            &WriteParams::default(),
        )
        .await
    {
        Err(e) if e.is_not_found() => {
            let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": name, "namespace": "kube-system",
                    "labels": {IDENTITY_LABEL: IDENTITY_VALUE},
                    "annotations": {ADDRESS_ANNOTATION: cfg.address()}},
                "spec": spec});
            client
                .create(&leases(), lease, &WriteParams::default())
                .await
                .map(|_| ())
        }
        other => other.map(|_| ()),
    }
}

/// The live servers' addresses by port, from the Leases (`now` in Unix seconds).
fn live(items: &[Value], now: i64) -> BTreeMap<u16, BTreeSet<IpAddr>> {
    let mut out: BTreeMap<u16, BTreeSet<IpAddr>> = BTreeMap::new();
    for l in items {
        let renewed = l["spec"]["renewTime"]
            .as_str()
            .and_then(k1s_api::time::parse)
            .map(Timestamp::as_second);
        let ttl = l["spec"]["leaseDurationSeconds"].as_i64().unwrap_or(0);
        let addr = l["metadata"]["annotations"][ADDRESS_ANNOTATION]
            .as_str()
            .and_then(|a| a.parse::<std::net::SocketAddr>().ok());
        if let (Some(r), Some(a)) = (renewed, addr)
            && r + ttl >= now
        {
            out.entry(a.port()).or_default().insert(a.ip());
        }
    }
    out
}

fn slice_name(port: u16, first: u16) -> String {
    if port == first {
        "kubernetes".into()
    } else {
        format!("kubernetes-{port}")
    }
}

/// Writes the endpoints for `servers` where they differ.
async fn write(client: &dyn Client, servers: &BTreeMap<u16, BTreeSet<IpAddr>>) -> Result<()> {
    let Some(&first) = servers.keys().next() else {
        return Ok(());
    };
    let port = |p: u16| json!([{"name": "https", "port": p, "protocol": "TCP"}]);
    let subsets: Vec<Value> = servers
        .iter()
        .map(|(p, ips)| {
            json!({"addresses": ips.iter().map(|ip| json!({"ip": ip.to_string()})).collect::<Vec<_>>(),
                "ports": port(*p)})
        })
        .collect();
    let current = client.get(&endpoints(), "kubernetes").await?;
    if current["subsets"] != Value::Array(subsets.clone()) {
        let mut next = current.clone();
        next["subsets"] = Value::Array(subsets);
        client
            .update(&endpoints(), next, None, &WriteParams::default())
            .await?;
    }
    let existing = client
        .list(
            &slices(),
            &ListParams {
                label_selector: Some("kubernetes.io/service-name=kubernetes".into()),
                ..Default::default()
            },
        )
        .await?;
    let mut wanted = BTreeSet::new();
    for (p, ips) in servers {
        let name = slice_name(*p, first);
        wanted.insert(name.clone());
        let family = if ips.iter().all(IpAddr::is_ipv4) {
            "IPv4"
        } else {
            "IPv6"
        };
        let eps: Vec<Value> = ips
            .iter()
            .map(|ip| json!({"addresses": [ip.to_string()], "conditions": {"ready": true}}))
            .collect();
        let have = existing
            .items
            .iter()
            .find(|s| s["metadata"]["name"] == name.as_str());
        match have {
            Some(s) if s["endpoints"] == Value::Array(eps.clone()) && s["ports"] == port(*p) => {}
            Some(s) => {
                let mut next = s.clone();
                next["endpoints"] = Value::Array(eps);
                next["ports"] = port(*p);
                next["addressType"] = json!(family);
                client
                    .update(&slices(), next, None, &WriteParams::default())
                    .await?;
            }
            None => {
                let slice = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                    "metadata": {"name": name, "namespace": "default",
                        "labels": {"kubernetes.io/service-name": "kubernetes"}},
                    "addressType": family, "endpoints": eps, "ports": port(*p)});
                client
                    .create(&slices(), slice, &WriteParams::default())
                    .await?;
            }
        }
    }
    for s in &existing.items {
        let name = s["metadata"]["name"].as_str().unwrap_or_default();
        if name.starts_with("kubernetes-") && !wanted.contains(name) {
            client
                .delete(&slices(), name, &DeleteParams::default())
                .await?;
        }
    }
    Ok(())
}

/// One pass: the live Leases (and this server, unless `leaving`) → the endpoints.
async fn reconcile(client: &dyn Client, cfg: &Config, leaving: bool) -> Result<()> {
    let list = client
        .list(
            &leases(),
            &ListParams {
                label_selector: Some(format!("{IDENTITY_LABEL}={IDENTITY_VALUE}")),
                ..Default::default()
            },
        )
        .await?;
    let me = cfg.lease_name();
    let others: Vec<Value> = list
        .items
        .into_iter()
        .filter(|l| l["metadata"]["name"] != me.as_str())
        .collect();
    let mut servers = live(&others, Timestamp::now().as_second());
    if !leaving {
        servers.entry(cfg.port).or_default().insert(cfg.advertise);
    }
    write(client, &servers).await
}

/// Renews this server's Lease and reconciles the endpoints every `interval` until `cancel`;
/// then deletes the Lease and takes this server out of the endpoints.
pub async fn run(client: Arc<dyn Client>, cfg: Config, cancel: CancellationToken) {
    tracing::info!(lease = %cfg.lease_name(), address = %cfg.address(), "API server endpoint lease reconciler started");
    loop {
        if let Err(e) = renew(&*client, &cfg).await {
            tracing::warn!(error = %e, "renewing the API server's endpoint lease");
        }
        if let Err(e) = reconcile(&*client, &cfg, false).await {
            tracing::warn!(error = %e, "reconciling the kubernetes endpoints");
        }
        tokio::select! {
            () = cancel.cancelled() => break,
            () = tokio::time::sleep(cfg.interval) => {}
        }
    }
    let _ = client
        .delete(&leases(), &cfg.lease_name(), &DeleteParams::default())
        .await;
    if let Err(e) = reconcile(&*client, &cfg, true).await {
        tracing::debug!(error = %e, "taking this server out of the kubernetes endpoints");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(addr: &str, renewed: &str, ttl: i64) -> Value {
        json!({"metadata": {"annotations": {ADDRESS_ANNOTATION: addr}},
            "spec": {"renewTime": renewed, "leaseDurationSeconds": ttl}})
    }

    #[test]
    fn only_live_leases_count_grouped_by_port() {
        let now = k1s_api::time::parse("2026-11-27T10:00:30Z")
            .unwrap()
            .as_second();
        let items = [
            lease("10.0.0.1:6443", "2026-11-27T10:00:20.000000Z", 15),
            lease("10.0.0.2:6443", "2026-11-27T10:00:00.000000Z", 15),
            lease("10.0.0.3:6444", "2026-11-27T10:00:29.000000Z", 15),
            lease("garbage", "2026-11-27T10:00:29.000000Z", 15),
            json!({"spec": {}}),
        ];
        let live = live(&items, now);
        assert_eq!(live.len(), 2);
        assert_eq!(
            live[&6443],
            BTreeSet::from(["10.0.0.1".parse::<IpAddr>().unwrap()])
        );
        assert_eq!(live[&6444].len(), 1);
        assert_eq!(slice_name(6443, 6443), "kubernetes");
        assert_eq!(slice_name(6444, 6443), "kubernetes-6444");
    }

    #[test]
    fn lease_names_are_stable_per_address() {
        let a = Config::new("10.0.0.1".parse().unwrap(), 6443);
        let b = Config::new("10.0.0.1".parse().unwrap(), 6444);
        assert_eq!(a.lease_name(), a.clone().lease_name());
        assert_ne!(a.lease_name(), b.lease_name());
        assert!(a.lease_name().starts_with("kube-apiserver-"));
    }
}
