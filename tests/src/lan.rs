//! The multi-node harness of the end-to-end tests (issue #28): a "LAN" bridge on the host
//! holding the server's address, and an agent's network namespace joined to it by a veth
//! pair, or (routed) through a router namespace on a subnet of its own, so that only VXLAN
//! can connect them. Each test gives its own number, so names and ranges never collide;
//! everything is removed on drop.

use std::path::PathBuf;
use std::process::Command;

use crate::host::Images;
use crate::{Cluster, Server, eventually};

/// One variant's own names and ranges (no other test uses them).
pub struct Variant {
    pub backend: &'static str,
    /// The agent behind a router, on a subnet of its own.
    pub routed: bool,
    pub cluster_cidr: &'static str,
    pub service_cidr: &'static str,
    /// Third octet base of the test's link addresses.
    pub net: u32,
}

pub const HOST_GW: Variant = Variant {
    backend: "host-gw",
    routed: false,
    cluster_cidr: "10.250.0.0/16",
    service_cidr: "10.234.0.0/16",
    net: 72,
};

pub const VXLAN: Variant = Variant {
    backend: "vxlan",
    routed: true,
    cluster_cidr: "10.251.0.0/16",
    service_cidr: "10.233.0.0/16",
    net: 74,
};

/// The network: a bridge on the host holding the server's address, and the agent's
/// namespace, joined to it by a veth pair, or (routed) through a router namespace. Removed
/// on drop, with the server's routes into the test's range.
pub struct Lan {
    pub bridge: String,
    pub netns: String,
    pub router: Option<String>,
    pub server_ip: String,
    pub agent_ip: String,
    pub cluster_cidr: &'static str,
    /// The server's VXLAN device (in the host's namespace).
    pub vxlan: String,
    /// The test's number and the variant's address bases (for [`Lan::add_agent`]).
    n: u32,
    net: (u32, u32),
    /// Namespaces of agents added after the first.
    extra: Vec<String>,
}

fn ip(args: &[&str]) {
    let ok = Command::new("ip").args(args).status().unwrap().success();
    assert!(ok, "ip {}", args.join(" "));
}

impl Lan {
    pub fn create(n: u32, v: &Variant) -> Lan {
        let (a, b) = (v.net, v.net + 1);
        let lan = Lan {
            bridge: format!("k1sl{n}"),
            netns: format!("k1sa{n}"),
            router: v.routed.then(|| format!("k1sr{n}")),
            server_ip: format!("100.{a}.{}.1", n % 250),
            agent_ip: if v.routed {
                format!("100.{b}.{}.2", n % 250)
            } else {
                format!("100.{a}.{}.2", n % 250)
            },
            cluster_cidr: v.cluster_cidr,
            vxlan: format!("k1sx{n}"),
            n,
            net: (a, b),
            extra: vec![format!("k1sa{n}b")],
        };
        lan.remove();
        ip(&["link", "add", &lan.bridge, "type", "bridge"]);
        ip(&[
            "addr",
            "add",
            &format!("{}/24", lan.server_ip),
            "dev",
            &lan.bridge,
        ]);
        ip(&["link", "set", &lan.bridge, "up"]);
        ip(&["netns", "add", &lan.netns]);
        let inside = |ns: &str, args: &[&str]| {
            let mut all = vec!["-n", ns];
            all.extend_from_slice(args);
            ip(&all);
        };
        // A veth pair from `ns` (named `name` there) into the host bridge.
        let plug = |ns: &str, outer: &str, name: &str, addr: &str| {
            ip(&[
                "link", "add", outer, "type", "veth", "peer", "name", name, "netns", ns,
            ]);
            ip(&["link", "set", outer, "master", &lan.bridge]);
            ip(&["link", "set", outer, "up"]);
            inside(ns, &["addr", "add", addr, "dev", name]);
            inside(ns, &["link", "set", name, "up"]);
            inside(ns, &["link", "set", "lo", "up"]);
        };
        match &lan.router {
            None => {
                plug(
                    &lan.netns,
                    &format!("k1sv{n}"),
                    "eth0",
                    &format!("{}/24", lan.agent_ip),
                );
                inside(
                    &lan.netns,
                    &["route", "add", "default", "via", &lan.server_ip],
                );
            }
            Some(router) => {
                // host bridge (100.a.x.0/24) — router — agent (100.b.x.0/24)
                let (router_a, router_b) = (
                    format!("100.{a}.{}.254", n % 250),
                    format!("100.{b}.{}.1", n % 250),
                );
                ip(&["netns", "add", router]);
                plug(
                    router,
                    &format!("k1sv{n}"),
                    "lan",
                    &format!("{router_a}/24"),
                );
                // The far subnet is a bridge in the router, so that more agents can join it.
                inside(router, &["link", "add", "wanbr", "type", "bridge"]);
                inside(
                    router,
                    &["addr", "add", &format!("{router_b}/24"), "dev", "wanbr"],
                );
                inside(router, &["link", "set", "wanbr", "up"]);
                ip(&[
                    "link", "add", "wan", "netns", router, "type", "veth", "peer", "name", "eth0",
                    "netns", &lan.netns,
                ]);
                inside(router, &["link", "set", "wan", "master", "wanbr"]);
                inside(router, &["link", "set", "wan", "up"]);
                let ok = Command::new("ip")
                    .args([
                        "netns",
                        "exec",
                        router,
                        "sysctl",
                        "-qw",
                        "net.ipv4.ip_forward=1",
                    ])
                    .status()
                    .unwrap()
                    .success();
                assert!(ok, "ip_forward in the router");
                inside(
                    &lan.netns,
                    &[
                        "addr",
                        "add",
                        &format!("{}/24", lan.agent_ip),
                        "dev",
                        "eth0",
                    ],
                );
                inside(&lan.netns, &["link", "set", "eth0", "up"]);
                inside(&lan.netns, &["link", "set", "lo", "up"]);
                inside(&lan.netns, &["route", "add", "default", "via", &router_b]);
                ip(&[
                    "route",
                    "add",
                    &format!("100.{b}.{}.0/24", n % 250),
                    "via",
                    &router_a,
                ]);
            }
        }
        lan
    }

    /// Another agent's namespace on the agents' subnet (the LAN, or the far side of the
    /// router), at the next address; returns its namespace and address.
    pub fn add_agent(&self) -> (String, String) {
        let (n, (a, b)) = (self.n, self.net);
        let ns = self.extra[0].clone();
        let addr = format!(
            "100.{}.{}.3",
            if self.router.is_some() { b } else { a },
            n % 250
        );
        ip(&["netns", "add", &ns]);
        let inside = |args: &[&str]| {
            let mut all = vec!["-n", ns.as_str()];
            all.extend_from_slice(args);
            ip(&all);
        };
        let gateway = match &self.router {
            None => {
                let outer = format!("k1sw{n}");
                ip(&[
                    "link", "add", &outer, "type", "veth", "peer", "name", "eth0", "netns", &ns,
                ]);
                ip(&["link", "set", &outer, "master", &self.bridge]);
                ip(&["link", "set", &outer, "up"]);
                self.server_ip.clone()
            }
            Some(router) => {
                ip(&[
                    "link", "add", "wan2", "netns", router, "type", "veth", "peer", "name", "eth0",
                    "netns", &ns,
                ]);
                ip(&["-n", router, "link", "set", "wan2", "master", "wanbr"]);
                ip(&["-n", router, "link", "set", "wan2", "up"]);
                format!("100.{b}.{}.1", n % 250)
            }
        };
        inside(&["addr", "add", &format!("{addr}/24"), "dev", "eth0"]);
        inside(&["link", "set", "eth0", "up"]);
        inside(&["link", "set", "lo", "up"]);
        inside(&["route", "add", "default", "via", &gateway]);
        (ns, addr)
    }

    pub fn remove(&self) {
        for ns in std::iter::once(&self.netns)
            .chain(self.router.iter())
            .chain(self.extra.iter())
        {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
        let _ = Command::new("ip")
            .args(["link", "del", &self.vxlan])
            .stderr(std::process::Stdio::null())
            .status();
        let _ = Command::new("ip")
            .args(["link", "del", &self.bridge])
            .status();
        // The server's host-gw routes into this test's range.
        let out = Command::new("ip")
            .args(["-4", "route", "show", "proto", "75"])
            .output()
            .unwrap();
        let prefix = self.cluster_cidr.trim_end_matches(".0.0/16");
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            if let Some(dst) = line.split_whitespace().next()
                && dst.starts_with(prefix)
            {
                let _ = Command::new("ip").args(["route", "del", dst]).status();
            }
        }
    }
}

impl Drop for Lan {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Kubelet flags for a node of this test: [`crate::kubelet_flags`] without its own
/// `--pod-cidr` (node IPAM assigns one), with the service proxy and DNS on.
pub fn node_flags(images: &Images, tag: &str, table: &str, v: &Variant, n: u32) -> Vec<String> {
    let base = images.kubelet_flags(tag);
    let mut out = Vec::new();
    let mut skip = false;
    for f in base {
        if skip {
            skip = false;
            continue;
        }
        if f == "--pod-cidr" || f == "--pod-network-backend" {
            skip = true;
            continue;
        }
        if f == "--disable-kube-proxy" || f == "--disable-dns" {
            continue;
        }
        out.push(f);
    }
    out.extend(
        [
            "--proxy-table",
            table,
            "--cluster-cidr",
            v.cluster_cidr,
            "--service-cidr",
            v.service_cidr,
            "--pod-network-backend",
            v.backend,
            "--vxlan-device",
            &format!("k1sx{n}"),
        ]
        .map(String::from),
    );
    out
}

impl Lan {
    /// `flags` (from [`node_flags`]) plus what the server needs on the LAN: its address there,
    /// listening on every address (the agent comes from its namespace), and node IPAM on.
    pub fn server_flags(&self, mut flags: Vec<String>) -> Vec<String> {
        flags.extend(
            [
                "--node-ip",
                &self.server_ip,
                "--bind-address",
                "0.0.0.0",
                "--allocate-node-cidrs=true",
            ]
            .map(String::from),
        );
        flags
    }
}

/// The test's agent in the LAN's namespace, joining the server `c` over the LAN; started (and
/// started again) with [`LanAgent::spawn`].
pub struct LanAgent {
    pub dir: PathBuf,
    wrapper: String,
    server_url: String,
    token: String,
    flags: Vec<String>,
}

impl LanAgent {
    /// Prepares the agent's data dir: the agent's namespace has its own loopback, so the
    /// test registry on the host's is out of reach and the image goes in as an airgap archive.
    pub fn new(lan: &Lan, c: &Cluster, images: &Images, flags: Vec<String>) -> LanAgent {
        Self::in_netns(lan, &lan.netns, "agent", c, images, flags)
    }

    /// An agent in namespace `netns` (from [`Lan::add_agent`]) with its data in `c`'s temp
    /// dir under `name`.
    pub fn in_netns(
        lan: &Lan,
        netns: &str,
        name: &str,
        c: &Cluster,
        images: &Images,
        flags: Vec<String>,
    ) -> LanAgent {
        let dir = c.dir.path().join(name);
        std::fs::create_dir_all(dir.join("agent/images")).unwrap();
        images.save_archive(&dir.join("agent/images/busybox.tar"));
        let token = std::fs::read_to_string(c.data_dir().join("server/token")).unwrap();
        LanAgent {
            dir,
            wrapper: format!("--net=/run/netns/{netns}"),
            server_url: format!("https://{}:{}", lan.server_ip, c.port),
            token: token.trim().to_string(),
            flags,
        }
    }

    /// Starts `k1s agent` in the namespace and waits until its kubelet listens.
    pub fn spawn(&self) -> Server {
        let args: Vec<&str> = self.flags.iter().map(String::as_str).collect();
        let agent = Server::spawn_agent_via(
            &["nsenter", &self.wrapper],
            &self.dir,
            &self.server_url,
            &self.token,
            &args,
        );
        agent.wait_for_log("kubelet port listening");
        agent
    }
}

/// Waits until `node` is Ready with a pod CIDR; returns the CIDR.
pub fn wait_node_ready(c: &Cluster, node: &str) -> String {
    let get = || -> serde_json::Value {
        serde_json::from_str(&c.ok(&["get", "node", node, "-o", "json"]))
            .unwrap_or(serde_json::Value::Null)
    };
    eventually("the agent's node Ready with a pod CIDR", 90, || {
        let node = get();
        node["spec"]["podCIDR"].is_string()
            && node["status"]["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
    });
    get()["spec"]["podCIDR"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}
