//! `k1s bench proxy`: the service proxy's costs, measured against the real kernel inside
//! network namespaces of the bench's own (nothing on the host is touched).
//!
//! - **Programming**: a proxier with N Services of E endpoints (fed its typed changes
//!   directly: the informer's delivery is the API benchmark's concern) programs an
//!   `ip k1s-proxy` table in a scratch namespace: the full sync of all of them, then the
//!   latency from one EndpointSlice change to its transaction applied, p50/p99 over
//!   `--changes` changes; and the proxy's memory (RSS growth of this process for the N
//!   Services, their slices and the applied rules). The endpoints are spread over
//!   [`NODES`] nodes by `nodeName`, as the EndpointSlice controller writes them, the proxier
//!   being one of those nodes. Each size runs with the transactions
//!   compiled to netlink (what k1s does) and, as the peer in the same run, handed to `nft -f`
//!   (kube-proxy's way), unless `--apply` picks one.
//! - **Data path**: a "node" namespace with a bridge and a "pod" namespace running busybox
//!   `httpd`; `wrk` from the node to the pod's address and to a ClusterIP that DNATs to it, in
//!   the same run; and one `iperf3` TCP stream to each (throughput, the per-packet cost).
//!   Needs `wrk` and busybox (Debian packages; iperf3 optional); skipped with a message without.
//!
//! Prints one JSON line per measurement.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use k1s_proxy::conntrack::FakeConntrack;
use k1s_proxy::nft::{Nft, NftCommand, NftNetlink};
use k1s_proxy::{Proxier, ProxyConfig, RulesConfig};
use k1s_runtime::reflector::Change;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::json;

#[derive(Args, Debug)]
pub struct ProxyBenchArgs {
    /// Numbers of Services to measure, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1000,10000")]
    pub services: Vec<usize>,
    /// Endpoints per Service.
    #[arg(long, default_value_t = 10)]
    pub endpoints: usize,
    /// EndpointSlice changes timed per size.
    #[arg(long, default_value_t = 200)]
    pub changes: usize,
    /// Seconds of each `wrk` run of the data path (0 skips it).
    #[arg(long, default_value_t = 10)]
    pub datapath_seconds: u64,
    /// How transactions reach the kernel: `netlink`, `nft`, or both (one after the other).
    #[arg(long, value_delimiter = ',', default_value = "netlink,nft")]
    pub apply: Vec<Apply>,
}

/// The edge that applies the proxier's transactions.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Apply {
    /// Compiled to nf_tables netlink messages (`NftNetlink`, what k1s uses).
    Netlink,
    /// Handed to the `nft` program as text (`nft -f -`).
    Nft,
}

/// A scratch network namespace, deleted on drop.
pub(crate) struct Netns(pub(crate) String);

impl Netns {
    pub(crate) fn new(name: &str) -> anyhow::Result<Netns> {
        let _ = Command::new("ip")
            .args(["netns", "del", name])
            .stderr(Stdio::null())
            .status();
        let ok = Command::new("ip")
            .args(["netns", "add", name])
            .status()
            .context("running ip (iproute2)")?
            .success();
        anyhow::ensure!(ok, "cannot create network namespace {name} (run as root)");
        Ok(Netns(name.into()))
    }

    pub(crate) fn ip(&self, args: &[&str]) -> anyhow::Result<()> {
        let mut full = vec!["netns", "exec", &self.0, "ip"];
        full.extend_from_slice(args);
        let ok = Command::new("ip").args(&full).status()?.success();
        anyhow::ensure!(ok, "ip {}", full.join(" "));
        Ok(())
    }

    pub(crate) fn nft(&self) -> NftCommand {
        NftCommand {
            command: ["ip", "netns", "exec", &self.0, "nft"]
                .map(String::from)
                .to_vec(),
        }
    }

    /// Programs the namespace over netlink (the socket opened inside it).
    pub(crate) fn netlink(&self) -> NftNetlink {
        NftNetlink::new(Some(format!("/run/netns/{}", self.0).into()), self.nft())
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        if std::env::var_os("K1S_BENCH_KEEP_NETNS").is_some() {
            eprintln!("kept network namespace {}", self.0);
            return;
        }
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn rules() -> RulesConfig {
    RulesConfig {
        service_cidr: "10.43.0.0/16".into(),
        cluster_cidr: "10.42.0.0/16".into(),
        localhost_nodeports: false,
    }
}

fn ip_of(n: usize, base: [u8; 2]) -> String {
    format!("{}.{}.{}.{}", base[0], base[1], (n >> 8) & 0xff, n & 0xff)
}

fn service(i: usize) -> Service {
    serde_json::from_value(json!({
        "metadata": {"name": format!("svc-{i}"), "namespace": "bench"},
        "spec": {"clusterIP": ip_of(i + 10, [10, 43]), "ports": [{"name": "http", "port": 80}]}
    }))
    .unwrap_or_default()
}

/// The nodes the Services' endpoints run on (`node-0` … ; the proxier is `node-0`): the
/// endpoints of 10,000 Services of 10 are 100,000 pods, 1,000 per node, which is more than a
/// node runs (110 by default), so the proxier's share of them is if anything too large.
const NODES: usize = 100;

/// The node the programming measurement's proxier runs as.
const BENCH_NODE: &str = "node-0";

fn slice(i: usize, endpoints: usize, generation: usize) -> EndpointSlice {
    let eps: Vec<serde_json::Value> = (0..endpoints)
        .map(|j| {
            // Each change moves one endpoint to a new address.
            let n = (i * endpoints + j + generation * 7919) % 65_000 + 2;
            json!({"addresses": [ip_of(n, [10, 42])], "conditions": {"ready": true},
                   "nodeName": format!("node-{}", n % NODES)})
        })
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": format!("svc-{i}-x"), "namespace": "bench",
                     "labels": {"kubernetes.io/service-name": format!("svc-{i}")}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": eps,
    }))
    .unwrap_or_default()
}

pub(crate) fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

pub(crate) fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

async fn programming(services: usize, apply: Apply, args: &ProxyBenchArgs) -> anyhow::Result<()> {
    let ns = Netns::new(&format!("k1s-bench-proxy-{}", std::process::id()))?;
    let rss_before = rss_kib();
    let nft: Arc<dyn Nft> = match apply {
        Apply::Netlink => Arc::new(ns.netlink()),
        Apply::Nft => Arc::new(ns.nft()),
    };
    let mut proxier = Proxier::new(
        ProxyConfig::new(BENCH_NODE, rules()),
        nft,
        Arc::new(FakeConntrack::default()),
    );
    for i in 0..services {
        proxier.on_service(Change::Added(service(i)));
        proxier.on_slice(Change::Added(slice(i, args.endpoints, 0)));
    }
    proxier.mark_synced();
    let started = Instant::now();
    proxier
        .sync()
        .await
        .context("the full sync (is nft installed? apt-get install nftables)")?;
    let full = started.elapsed();
    let rss_after = rss_kib();
    let mut latencies = Vec::with_capacity(args.changes);
    for k in 0..args.changes {
        let i = (k * 7_919) % services;
        proxier.on_slice(Change::Modified(slice(i, args.endpoints, k + 1)));
        let t = Instant::now();
        proxier.sync().await?;
        latencies.push(t.elapsed());
    }
    latencies.sort();
    println!(
        "{}",
        json!({
            "bench": "proxy-programming",
            "apply": format!("{apply:?}").to_lowercase(),
            "services": services,
            "endpoints_per_service": args.endpoints,
            "full_sync_ms": full.as_secs_f64() * 1000.0,
            "change_to_programmed_ms": {
                "p50": percentile(&latencies, 0.50),
                "p99": percentile(&latencies, 0.99),
                "max": percentile(&latencies, 1.0),
                "changes": latencies.len(),
            },
            "proxy_rss_growth_mib": (rss_after.saturating_sub(rss_before)) as f64 / 1024.0,
        })
    );
    Ok(())
}

/// `wrk` against `url` from inside `ns`: requests per second. The connection-tracking
/// table is emptied first, so that one run's closed connections (busybox httpd closes each
/// one) do not clash with the next run's ports.
fn wrk(ns: &Netns, url: &str, seconds: u64) -> anyhow::Result<f64> {
    let _ = Command::new("ip")
        .args(["netns", "exec", &ns.0, "conntrack", "-F"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.0, "wrk", "-t2", "-c16"])
        .arg(format!("-d{seconds}s"))
        .arg(url)
        .output()
        .context("running wrk (apt-get install wrk)")?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
        .with_context(|| {
            format!(
                "wrk gave no figure: {text} {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
}

/// Kills and reaps the pod's httpd on drop.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn datapath(seconds: u64) -> anyhow::Result<()> {
    if Command::new("wrk").arg("--version").output().is_err() {
        println!(
            "{}",
            json!({"bench": "proxy-datapath", "skipped": "wrk is not installed (apt-get install wrk)"})
        );
        return Ok(());
    }
    let pid = std::process::id();
    let node = Netns::new(&format!("k1s-bench-node-{pid}"))?;
    let pod = Netns::new(&format!("k1s-bench-pod-{pid}"))?;
    let (outer, inner) = ("k1sbench0", "k1sbench1");
    node.ip(&["link", "add", "br0", "type", "bridge"])?;
    node.ip(&["addr", "add", "10.42.0.1/24", "dev", "br0"])?;
    node.ip(&["link", "set", "br0", "up"])?;
    node.ip(&["link", "set", "lo", "up"])?;
    // A node routes the service CIDR somewhere (its default route) before DNAT rewrites it.
    node.ip(&["route", "add", "default", "dev", "br0"])?;
    node.ip(&["link", "add", outer, "type", "veth", "peer", "name", inner])?;
    node.ip(&["link", "set", inner, "netns", &pod.0])?;
    node.ip(&["link", "set", outer, "master", "br0"])?;
    node.ip(&["link", "set", outer, "up"])?;
    pod.ip(&["addr", "add", "10.42.0.2/24", "dev", inner])?;
    pod.ip(&["link", "set", inner, "up"])?;
    pod.ip(&["link", "set", "lo", "up"])?;
    let www = tempfile::tempdir()?;
    std::fs::write(www.path().join("index.html"), "hello from the pod\n")?;
    let _httpd = Reaped(
        Command::new("ip")
            .args([
                "netns", "exec", &pod.0, "busybox", "httpd", "-f", "-p", "8080", "-h",
            ])
            .arg(www.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("running busybox httpd (apt-get install busybox-static)")?,
    );
    let mut proxier = Proxier::new(
        ProxyConfig::new("bench-node", rules()),
        Arc::new(node.nft()),
        Arc::new(FakeConntrack::default()),
    );
    proxier.on_service(Change::Added(service(0)));
    let one: EndpointSlice = serde_json::from_value(json!({
        "metadata": {"name": "svc-0-x", "namespace": "bench",
                     "labels": {"kubernetes.io/service-name": "svc-0"}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": [{"addresses": ["10.42.0.2"], "conditions": {"ready": true}}],
    }))?;
    proxier.on_slice(Change::Added(one));
    // A second Service (port 80) in front of the pod's iperf3 server (port 5201).
    proxier.on_service(Change::Added(service(1)));
    let iperf: EndpointSlice = serde_json::from_value(json!({
        "metadata": {"name": "svc-1-x", "namespace": "bench",
                     "labels": {"kubernetes.io/service-name": "svc-1"}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 5201, "protocol": "TCP"}],
        "endpoints": [{"addresses": ["10.42.0.2"], "conditions": {"ready": true}}],
    }))?;
    proxier.on_slice(Change::Added(iperf));
    proxier.mark_synced();
    proxier.sync().await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let cluster_ip = ip_of(10, [10, 43]);
    // Alternate the two, three times, so drift of the machine shows; compare medians.
    let mut direct = Vec::new();
    let mut via = Vec::new();
    for _ in 0..3 {
        direct.push(wrk(&node, "http://10.42.0.2:8080/", seconds)?);
        via.push(wrk(&node, &format!("http://{cluster_ip}/"), seconds)?);
    }
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "{}",
        json!({
            "bench": "proxy-datapath",
            "tool": "wrk -t2 -c16, busybox httpd in a pod namespace, client on the node",
            "seconds": seconds,
            "pod_ip_rps": direct,
            "cluster_ip_rps": via,
            "cluster_ip_over_pod_ip_median": median(&via) / median(&direct).max(1.0),
        })
    );
    // Throughput of one long connection (the per-packet cost of the DNATed path), with
    // iperf3 where it is installed.
    if Command::new("iperf3").arg("--version").output().is_ok() {
        let _server = Reaped(
            Command::new("ip")
                .args(["netns", "exec", &pod.0, "iperf3", "-s"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()?,
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
        let cluster_ip = ip_of(11, [10, 43]);
        let mut direct = Vec::new();
        let mut via = Vec::new();
        for _ in 0..3 {
            direct.push(iperf3(&node, "10.42.0.2", 5201, seconds)?);
            via.push(iperf3(&node, &cluster_ip, 80, seconds)?);
        }
        println!(
            "{}",
            json!({
                "bench": "proxy-datapath-throughput",
                "tool": "iperf3, one TCP stream, client on the node",
                "seconds": seconds,
                "pod_ip_gbit_s": direct,
                "cluster_ip_gbit_s": via,
                "cluster_ip_over_pod_ip_median": median(&via) / median(&direct).max(f64::MIN_POSITIVE),
            })
        );
    }
    Ok(())
}

/// One `iperf3` TCP stream from inside `ns` to `ip:port`: received Gbit/s.
pub(crate) fn iperf3(ns: &Netns, ip: &str, port: u16, seconds: u64) -> anyhow::Result<f64> {
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.0, "iperf3", "-J", "-c", ip, "-p"])
        .arg(port.to_string())
        .arg("-t")
        .arg(seconds.to_string())
        .output()
        .context("running iperf3")?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).with_context(|| {
        format!(
            "iperf3 gave no JSON: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .map(|b| b / 1e9)
        .with_context(|| format!("iperf3 gave no figure: {v}"))
}

pub async fn run(args: ProxyBenchArgs) -> anyhow::Result<()> {
    for n in args.services.clone() {
        for apply in args.apply.clone() {
            programming(n, apply, &args).await?;
        }
    }
    if args.datapath_seconds > 0 {
        datapath(args.datapath_seconds).await?;
    }
    Ok(())
}
