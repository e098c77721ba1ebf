//! `k1s agent`: a worker node. It joins the server with the join token (credentials from
//! [`k1s_kubelet::bootstrap`]), runs the kubelet against the server's API over HTTPS as
//! `system:node:NAME` (failing over between the cluster's servers: [`crate::agent_servers`]),
//! and serves the kubelet's HTTPS port for the API server
//! ([`k1s_kubelet::port`]).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use k1s_api::client::Client;
use k1s_api::http_client::{HttpClient, HttpOptions, TlsSettings};
use k1s_api::server_pool::ServerPool;
use k1s_kubelet::port::KubeletTls;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

#[derive(Args, Debug)]
pub struct AgentArgs {
    /// The server to join, `https://HOST:6443`.
    #[arg(long, env = "K1S_URL")]
    pub server: String,
    /// The join token: the full token (`K10<ca-hash>::server:<secret>`) from the server's
    /// DATA_DIR/server/token.
    #[arg(long, env = "K1S_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// A file holding the join token (instead of --token).
    #[arg(long, env = "K1S_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,
    /// Directory for this node's state (credentials, images, pods).
    #[arg(long, default_value = "/var/lib/k1s", env = "K1S_DATA_DIR")]
    pub data_dir: PathBuf,
    /// This node's address (repeatable); by default the address this machine reaches the
    /// server from.
    #[arg(long)]
    pub node_ip: Vec<IpAddr>,
    /// The cluster's Service IP range (the server's --service-cidr), for the service proxy.
    #[arg(long, default_value = "10.43.0.0/16")]
    pub service_cidr: String,
    #[command(flatten)]
    pub kubelet: crate::agent::KubeletArgs,
}

/// The local address this machine would use to reach `server` (no packet is sent).
fn route_source(server: &str) -> Option<IpAddr> {
    let (host, port) = k1s_kubelet::bootstrap::server_address(server).ok()?;
    let target = std::net::ToSocketAddrs::to_socket_addrs(&(host.as_str(), port))
        .ok()?
        .next()?;
    let bind: SocketAddr = if target.is_ipv4() {
        "0.0.0.0:0".parse().ok()?
    } else {
        "[::]:0".parse().ok()?
    };
    let socket = std::net::UdpSocket::bind(bind).ok()?;
    socket.connect(target).ok()?;
    Some(socket.local_addr().ok()?.ip())
}

pub async fn run(args: AgentArgs) -> anyhow::Result<()> {
    let stop = crate::host::shutdown_signal()?;
    crate::agent::check_proxy_flags(&args.kubelet, &args.service_cidr)?;
    let token = match (&args.token, &args.token_file) {
        (Some(t), _) => t.clone(),
        (None, Some(f)) => std::fs::read_to_string(f)
            .with_context(|| format!("--token-file: cannot read {}", f.display()))?,
        (None, None) => anyhow::bail!(
            "a join token is needed: --token (or K1S_TOKEN) or --token-file, from the \
             server's DATA_DIR/server/token"
        ),
    };
    let hostname = crate::host::hostname();
    let node_name = crate::agent::node_name(&args.kubelet, &hostname);
    let mut node_ips = args.node_ip.clone();
    if node_ips.is_empty() {
        node_ips = route_source(&args.server).into_iter().collect();
    }
    if node_ips.is_empty() {
        node_ips = crate::host::node_ips(&[], &hostname);
    }
    let node_ip = *node_ips
        .first()
        .context("cannot find this node's address: give --node-ip")?;

    let creds = k1s_kubelet::bootstrap::load_or_join(
        &args.data_dir.join("agent/pki"),
        &args.server,
        &token,
        &node_name,
        &node_ips,
    )
    .await?;
    // Every client of the agent fails over between the cluster's API servers: the --server
    // one, and those learned from the `kubernetes` endpoints (saved across restarts).
    let servers_file = crate::agent_servers::list_path(&args.data_dir);
    let pool = Arc::new(ServerPool::new(crate::agent_servers::load(&servers_file)));
    let client_with = |cert: &str, key: &str| -> anyhow::Result<Arc<dyn Client>> {
        let tls = TlsSettings {
            ca_pem: Some(creds.ca_pem.clone().into_bytes()),
            client_cert_pem: Some(cert.as_bytes().to_vec()),
            client_key_pem: Some(key.as_bytes().to_vec()),
            ..Default::default()
        };
        let c = HttpClient::with_failover(&args.server, tls, HttpOptions::default(), pool.clone())
            .context("--server")?;
        Ok(Arc::new(c))
    };
    let client = client_with(&creds.client_cert_pem, &creds.client_key_pem)?;
    // NetworkPolicy enforcement reads every pod: it goes with the node's cluster-network
    // identity, not the kubelet's.
    let network_client = client_with(&creds.network_cert_pem, &creds.network_key_pem)?;

    let cancel = CancellationToken::new();
    let tasks = TaskTracker::new();
    crate::agent_servers::spawn(client.clone(), pool, servers_file, &tasks, &cancel);
    let tls = KubeletTls::new(
        &creds.ca_pem,
        &creds.serving_cert_pem,
        &creds.serving_key_pem,
    )
    .context("the kubelet's serving certificate")?;
    crate::agent::start(
        &args.kubelet,
        &args.data_dir,
        &hostname,
        node_ip,
        &args.service_cidr,
        client,
        network_client,
        None,
        tls,
        false,
        &tasks,
        &cancel,
    )
    .await?;
    tracing::info!(node = %node_name, server = %args.server, "agent running");
    tasks.close();
    stop.await;
    tracing::info!("shutting down");
    cancel.cancel();
    tasks.wait().await;
    tracing::info!("stopped");
    Ok(())
}
