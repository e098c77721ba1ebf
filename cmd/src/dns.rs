//! The cluster DNS's wiring: the `kube-dns` Service the server keeps (`--disable dns`
//! removes it), and the node's DNS server beside its kubelet (`--disable-dns`).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

#[cfg(feature = "server")]
use k1s_api::client::DeleteParams;
use k1s_api::client::{Client, ResourceRef, WriteParams};
use k1s_api::dns;
use k1s_dns::upstreams::Choice;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Creates the `kube-dns` Service at the service CIDR's tenth address unless it exists; with
/// `enabled` false, deletes it if k1s made it (a Service of the user's, e.g. CoreDNS's, is
/// left alone).
#[cfg(feature = "server")]
pub async fn ensure_service(
    client: &dyn Client,
    service_cidr: &str,
    enabled: bool,
) -> anyhow::Result<()> {
    let r = ResourceRef::new("", "v1", "services", Some(dns::NAMESPACE));
    if !enabled {
        if let Ok(svc) = client.get(&r, dns::SERVICE).await
            && svc["metadata"]["labels"][dns::MANAGED_BY.0] == dns::MANAGED_BY.1
        {
            client
                .delete(&r, dns::SERVICE, &DeleteParams::default())
                .await
                .map_err(|e| anyhow::anyhow!("deleting the kube-dns Service: {}", e.message))?;
            tracing::info!("cluster DNS disabled: the kube-dns Service was removed");
        }
        return Ok(());
    }
    let ip = dns::service_ip(service_cidr).ok_or_else(|| {
        anyhow::anyhow!("--service-cidr {service_cidr}: too small for the DNS Service's tenth address (use a /28 or larger, or --disable dns)")
    })?;
    // Looked up first: creating it again would fail on its address, which it holds.
    match client.get(&r, dns::SERVICE).await {
        Ok(svc) => {
            if svc["spec"]["clusterIP"] != ip.to_string() {
                tracing::warn!(want = %ip, have = %svc["spec"]["clusterIP"], "the kube-dns Service is not at the service CIDR's tenth address: pods are told the tenth (--cluster-dns overrides)");
            }
            return Ok(());
        }
        Err(e) if e.is_not_found() => {}
        Err(e) => anyhow::bail!("reading the kube-dns Service: {}", e.message),
    }
    match client
        .create(&r, dns::service(ip), &WriteParams::default())
        .await
    {
        Ok(_) => {
            tracing::info!(%ip, "created the kube-dns Service");
            Ok(())
        }
        Err(e) if e.is_already_exists() => Ok(()),
        Err(e) => Err(anyhow::anyhow!(
            "creating the kube-dns Service at {ip}: {}",
            e.message
        )),
    }
}

/// Withdraws this node's DNS announcement left by an earlier start (now `--disable-dns`), so
/// the `kube-dns` endpoints stop naming a server that is not there.
pub async fn withdraw(client: Arc<dyn Client>, node_name: String) {
    let nodes = ResourceRef::new("", "v1", "nodes", None);
    let Ok(node) = client.get(&nodes, &node_name).await else {
        return;
    };
    if node["metadata"]["annotations"][dns::ADDRESS_ANNOTATION].is_null() {
        return;
    }
    let patch = k1s_api::client::Patch::Merge(serde_json::json!({
        "metadata": {"annotations": {dns::ADDRESS_ANNOTATION: null}}
    }));
    match client
        .patch(&nodes, &node_name, &patch, None, &WriteParams::default())
        .await
    {
        Ok(_) => {
            tracing::info!(node = %node_name, "cluster DNS: this node's announcement withdrawn")
        }
        Err(e) => {
            tracing::warn!(node = %node_name, error = %e, "cluster DNS: could not withdraw this node's announcement")
        }
    }
}

/// What the node's DNS server needs from the kubelet's flags.
pub struct NodeDns<'a> {
    pub node_name: &'a str,
    /// The pod bridge's gateway: where the server answers.
    pub listen: IpAddr,
    pub zone: &'a str,
    pub dns_ip: Option<IpAddr>,
    pub resolv: &'a Choice,
}

/// Binds and starts this node's DNS server.
pub fn start(
    node: NodeDns<'_>,
    client: Arc<dyn Client>,
    tasks: &TaskTracker,
    cancel: &CancellationToken,
) -> anyhow::Result<()> {
    let upstreams: Vec<SocketAddr> = node.resolv.conf.upstreams();
    if upstreams.is_empty() {
        tracing::warn!(file = %node.resolv.path.display(), "cluster DNS: no upstream resolver: names outside the cluster will fail (use --resolv-conf)");
    }
    let mut config = k1s_dns::DnsConfig::new(node.node_name, node.listen);
    config.zone = node.zone.to_string();
    config.dns_ip = node.dns_ip;
    config.upstreams = upstreams;
    let server = k1s_dns::DnsServer::bind(config).map_err(|e| {
        anyhow::anyhow!("the cluster DNS server: {e} (another DNS server on this address? --disable-dns turns k1s's off)")
    })?;
    tasks.spawn(server.run(client, cancel.clone()));
    Ok(())
}
