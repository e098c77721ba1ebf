//! `k1s bench podnet`: pod-to-pod throughput across two nodes per backend, beside two plain
//! namespaces on the same link, in one run (issue #28's targets: host-gw ≥ 95 %, VXLAN ≥ 85 %
//! of the plain baseline).
//!
//! Two "node" network namespaces joined by a veth pair (the LAN, 1500 bytes), each with a
//! bridge and one "pod" namespace on it, as the kubelet lays them out. The backends' kernel
//! state is programmed by k1s's own code (`k1s_podnet::routes::NetlinkRoutes`,
//! `k1s_podnet::vxlan::NetlinkVtep`) from a thread inside each node's namespace. `iperf3`
//! (one TCP stream) measures: node to node on the LAN (the baseline), then pod to pod over
//! host-gw, then over VXLAN (pods at the MTU k1s gives them: 1450), alternated `--runs`
//! times. Needs root, `ip` and `iperf3`; nothing on the host is touched.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use k1s_podnet::routes::{NetlinkRoutes, Route, Routes};
use k1s_podnet::vxlan::{NetlinkVtep, Peer, Vtep, VxlanConfig};
use serde_json::json;

use crate::bench_proxy::{Netns, iperf3};

#[derive(Args, Debug)]
pub struct PodnetBenchArgs {
    /// Seconds of each iperf3 run.
    #[arg(long, default_value_t = 5)]
    pub seconds: u64,
    /// Alternated runs of each path.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
}

/// Runs `f` on a thread inside network namespace `ns` (its own runtime: netlink sockets
/// opened there belong to that namespace).
fn in_netns<T, F, Fut>(ns: &str, f: F) -> anyhow::Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = anyhow::Result<T>>,
{
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || -> anyhow::Result<T> {
        let fd = std::fs::File::open(&path).with_context(|| format!("opening {path}"))?;
        nix::sched::setns(fd, nix::sched::CloneFlags::CLONE_NEWNET)
            .with_context(|| format!("entering {path}"))?;
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
            .block_on(f())
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the thread in {ns} panicked"))?
}

/// An iperf3 server in `ns`, killed on drop.
struct Server(Child);

impl Server {
    fn start(ns: &Netns) -> anyhow::Result<Server> {
        let child = Command::new("ip")
            .args(["netns", "exec", &ns.0, "iperf3", "-s"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting iperf3 (apt-get install iperf3)")?;
        std::thread::sleep(Duration::from_millis(300));
        Ok(Server(child))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One node: its namespace, its LAN address, its pod namespace and pod CIDR index.
struct Node {
    ns: Netns,
    pod: Netns,
    lan_ip: String,
    n: u8,
}

impl Node {
    fn pod_ip(&self) -> String {
        format!("10.42.{}.2", self.n)
    }

    fn cidr(&self) -> k1s_api::net::Ipv4Net {
        format!("10.42.{}.0/24", self.n)
            .parse()
            .unwrap_or_else(|_| unreachable!())
    }

    fn set_pod_mtu(&self, mtu: u32) -> anyhow::Result<()> {
        let m = mtu.to_string();
        self.pod.ip(&["link", "set", "eth0", "mtu", &m])?;
        self.ns.ip(&["link", "set", "br0", "mtu", &m])?;
        self.ns.ip(&["link", "set", "vpod", "mtu", &m])
    }
}

fn build() -> anyhow::Result<(Node, Node)> {
    let a = Node {
        ns: Netns::new("k1sb-node-a")?,
        pod: Netns::new("k1sb-pod-a")?,
        lan_ip: "192.168.77.1".into(),
        n: 0,
    };
    let b = Node {
        ns: Netns::new("k1sb-node-b")?,
        pod: Netns::new("k1sb-pod-b")?,
        lan_ip: "192.168.77.2".into(),
        n: 1,
    };
    let run = |args: &[&str]| -> anyhow::Result<()> {
        let ok = Command::new("ip").args(args).status()?.success();
        anyhow::ensure!(ok, "ip {}", args.join(" "));
        Ok(())
    };
    run(&[
        "link", "add", "lan", "netns", &a.ns.0, "type", "veth", "peer", "name", "lan", "netns",
        &b.ns.0,
    ])?;
    for node in [&a, &b] {
        let sysctl = Command::new("ip")
            .args([
                "netns",
                "exec",
                &node.ns.0,
                "sysctl",
                "-qw",
                "net.ipv4.ip_forward=1",
            ])
            .status()?;
        anyhow::ensure!(sysctl.success(), "ip_forward in {}", node.ns.0);
        node.ns
            .ip(&["addr", "add", &format!("{}/24", node.lan_ip), "dev", "lan"])?;
        node.ns.ip(&["link", "set", "lan", "up"])?;
        node.ns.ip(&["link", "set", "lo", "up"])?;
        node.ns.ip(&["link", "add", "br0", "type", "bridge"])?;
        node.ns.ip(&[
            "addr",
            "add",
            &format!("10.42.{}.1/24", node.n),
            "dev",
            "br0",
        ])?;
        node.ns.ip(&["link", "set", "br0", "up"])?;
        run(&[
            "link",
            "add",
            "vpod",
            "netns",
            &node.ns.0,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            &node.pod.0,
        ])?;
        node.ns.ip(&["link", "set", "vpod", "master", "br0"])?;
        node.ns.ip(&["link", "set", "vpod", "up"])?;
        node.pod.ip(&[
            "addr",
            "add",
            &format!("{}/24", node.pod_ip()),
            "dev",
            "eth0",
        ])?;
        node.pod.ip(&["link", "set", "eth0", "up"])?;
        node.pod.ip(&["link", "set", "lo", "up"])?;
        node.pod.ip(&[
            "route",
            "add",
            "default",
            "via",
            &format!("10.42.{}.1", node.n),
        ])?;
    }
    Ok((a, b))
}

/// host-gw: each node a route to the other's pod CIDR via its LAN address.
fn host_gw(a: &Node, b: &Node, add: bool) -> anyhow::Result<()> {
    for (me, other) in [(a, b), (b, a)] {
        let route = Route {
            destination: other.cidr(),
            via: other.lan_ip.parse()?,
            dev: None,
        };
        in_netns(&me.ns.0, move || async move {
            let r = NetlinkRoutes;
            if add {
                r.replace(&route).await?;
            } else {
                r.delete(&route).await?;
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// vxlan: each node's device, then its peer entries and on-link route to the other.
fn vxlan(a: &Node, b: &Node) -> anyhow::Result<()> {
    let mut devices = Vec::new();
    for node in [a, b] {
        let config = VxlanConfig::new(node.lan_ip.parse()?);
        let vtep_ip = node.cidr().addr();
        let (index, mac) = in_netns(&node.ns.0, move || async move {
            Ok(NetlinkVtep.ensure(&config, vtep_ip).await?)
        })?;
        devices.push((index, mac));
    }
    for (i, (me, other)) in [(a, b), (b, a)].into_iter().enumerate() {
        let (index, _) = devices[i];
        let (_, other_mac) = devices[1 - i];
        let peer = Peer {
            pod_cidr: other.cidr(),
            mac: other_mac,
            public_ip: other.lan_ip.parse()?,
        };
        in_netns(&me.ns.0, move || async move {
            NetlinkVtep.set_peer(index, &peer).await?;
            NetlinkRoutes
                .replace(&Route {
                    destination: peer.pod_cidr,
                    via: peer.vtep_ip(),
                    dev: Some(index),
                })
                .await?;
            Ok(())
        })?;
    }
    Ok(())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub async fn run(args: PodnetBenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.runs > 0, "--runs must be at least 1");
    let (a, b) = build()?;
    let _lan_server = Server::start(&b.ns)?;
    let _pod_server = Server::start(&b.pod)?;
    let (mut plain, mut hostgw, mut vx) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..args.runs {
        plain.push(iperf3(&a.ns, &b.lan_ip, 5201, args.seconds)?);
        host_gw(&a, &b, true)?;
        a.set_pod_mtu(1500)?;
        b.set_pod_mtu(1500)?;
        hostgw.push(iperf3(&a.pod, &b.pod_ip(), 5201, args.seconds)?);
        host_gw(&a, &b, false)?;
        vxlan(&a, &b)?;
        a.set_pod_mtu(1450)?;
        b.set_pod_mtu(1450)?;
        vx.push(iperf3(&a.pod, &b.pod_ip(), 5201, args.seconds)?);
        for node in [&a, &b] {
            node.ns.ip(&["link", "del", "k1s.1"])?;
        }
    }
    let base = median(plain.clone());
    for (path, runs) in [
        ("plain namespaces on the LAN", plain),
        ("pod to pod, host-gw", hostgw),
        ("pod to pod, vxlan", vx),
    ] {
        let m = median(runs.clone());
        println!(
            "{}",
            json!({"bench": "podnet", "path": path, "tool": "iperf3, one TCP stream",
                "seconds": args.seconds, "runs_gbit_s": runs.iter().map(|g| (g * 100.0).round() / 100.0).collect::<Vec<_>>(),
                "median_gbit_s": (m * 100.0).round() / 100.0,
                "of_plain": (m / base * 100.0).round() / 100.0})
        );
    }
    Ok(())
}
