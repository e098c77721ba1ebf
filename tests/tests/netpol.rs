//! End to end, issue #28: NetworkPolicy as a truth table, in the style of upstream's netpol
//! e2e. Two nodes (the server on the host, an agent in a network namespace of its own on a
//! host-gw "LAN"), namespaces x, y and z with pods a, b and c each (the b pods on the agent,
//! so that every check crosses nodes both ways), ports 80 and 81 over TCP and UDP. After
//! each policy change every pair is probed on every port and compared with what the
//! policies say: default deny, pod and namespace selectors (by label and by
//! `kubernetes.io/metadata.name`), named ports, ipBlock with except, egress, endPort,
//! policies adding up, and the policies holding while the agent is down and after it
//! restarts.
//!
//! The probes are the kernel's: the test enters each pod's network namespace (its file
//! under the node's data dir) and serves or connects from there, so every packet takes the
//! pods' real path (bridge, routes, both nodes' policy tables), and 324 probes run at once
//! instead of one `kubectl exec` each. Real binary, containers and kernel; needs root, nft
//! and nsenter (skips visibly otherwise).

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k1s_tests::Cluster;
use k1s_tests::host::{HostCleanup, Images, start_with_kubelet, wait_for_teardown};
use k1s_tests::lan::{Lan, LanAgent, Variant, node_flags, wait_node_ready};
use serde_json::{Value, json};

/// This test's own names and ranges.
const NETPOL: Variant = Variant {
    backend: "host-gw",
    routed: false,
    cluster_cidr: "10.249.0.0/16",
    service_cidr: "10.232.0.0/16",
    net: 76,
};

const NAMESPACES: [&str; 3] = ["x", "y", "z"];
const PODS: [&str; 3] = ["a", "b", "c"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Proto {
    Tcp,
    Udp,
}

/// One probe target: a port and protocol.
const PORTS: [(u16, Proto); 4] = [
    (80, Proto::Tcp),
    (81, Proto::Tcp),
    (80, Proto::Udp),
    (81, Proto::Udp),
];

/// A pod of the table.
#[derive(Debug, Clone)]
struct P {
    ns: &'static str,
    pod: &'static str,
    ip: Ipv4Addr,
    netns: PathBuf,
}

impl P {
    fn id(&self) -> String {
        format!("{}/{}", self.ns, self.pod)
    }
}

/// Runs `f` on a thread inside the network namespace at `netns`.
fn in_netns<T: Send + 'static>(
    netns: &Path,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    let file = std::fs::File::open(netns).unwrap();
    std::thread::spawn(move || {
        nix::sched::setns(file.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        f()
    })
}

/// Serves the pod's ports from inside its namespace: TCP answers with the pod's id, UDP
/// echoes it back. The sockets live as long as the test process.
fn serve(p: &P) {
    let id = p.id();
    in_netns(&p.netns, move || {
        for port in [80, 81] {
            let tcp = TcpListener::bind(("0.0.0.0", port)).unwrap();
            let udp = UdpSocket::bind(("0.0.0.0", port)).unwrap();
            let (a, b) = (id.clone(), id.clone());
            std::thread::spawn(move || {
                for mut s in tcp.incoming().flatten() {
                    let _ = s.write_all(a.as_bytes());
                }
            });
            std::thread::spawn(move || {
                let mut buf = [0u8; 64];
                while let Ok((_, from)) = udp.recv_from(&mut buf) {
                    let _ = udp.send_to(b.as_bytes(), from);
                }
            });
        }
    })
    .join()
    .unwrap();
}

/// Whether `to` answers `from` on `port`/`proto` within a second.
fn probe(from: &Path, to: &P, port: u16, proto: Proto) -> std::thread::JoinHandle<bool> {
    let (addr, want) = (SocketAddr::from((to.ip, port)), to.id());
    in_netns(from, move || {
        let t = Duration::from_millis(1000);
        let mut got = String::new();
        match proto {
            Proto::Tcp => {
                let Ok(mut s) = TcpStream::connect_timeout(&addr, t) else {
                    return false;
                };
                let _ = s.set_read_timeout(Some(t));
                let _ = s.read_to_string(&mut got);
            }
            Proto::Udp => {
                let s = UdpSocket::bind("0.0.0.0:0").unwrap();
                let _ = s.set_read_timeout(Some(t));
                if s.send_to(b"?", addr).is_err() {
                    return false;
                }
                let mut buf = [0u8; 64];
                let Ok((n, _)) = s.recv_from(&mut buf) else {
                    return false;
                };
                got = String::from_utf8_lossy(&buf[..n]).into_owned();
            }
        }
        got == want
    })
}

/// The probes that disagree with `expect` (from, to, port, proto) → allowed, as text.
fn mismatches(pods: &[P], expect: &dyn Fn(&P, &P, u16, Proto) -> bool) -> Vec<String> {
    let mut handles = Vec::new();
    for from in pods {
        for to in pods {
            for (port, proto) in PORTS {
                handles.push((from, to, port, proto, probe(&from.netns, to, port, proto)));
            }
        }
    }
    let mut out = Vec::new();
    for (from, to, port, proto, h) in handles {
        let got = h.join().unwrap();
        // A pod reaching its own address never leaves it: always allowed.
        let want = from.id() == to.id() || expect(from, to, port, proto);
        if got != want {
            out.push(format!(
                "{} -> {} {port}/{proto:?}: {} (want {})",
                from.id(),
                to.id(),
                if got { "allowed" } else { "denied" },
                if want { "allowed" } else { "denied" }
            ));
        }
    }
    out
}

/// Waits until every probe agrees with `expect` (policies are programmed within a second of
/// a change; the first rounds may still see the previous table).
fn check(step: &str, pods: &[P], expect: &dyn Fn(&P, &P, u16, Proto) -> bool) {
    let mut last = Vec::new();
    for _ in 0..10 {
        last = mismatches(pods, expect);
        if last.is_empty() {
            eprintln!("truth table holds: {step}");
            return;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    panic!(
        "{step}: {} of {} probes disagree:\n{}",
        last.len(),
        pods.len() * pods.len() * PORTS.len(),
        last.join("\n")
    );
}

/// The file of the pod's network namespace under a node's data dir
/// (`…/pods/UID/ns/net`).
fn find_netns(dirs: &[&Path], uid: &str) -> Option<PathBuf> {
    fn walk(dir: &Path, uid: &str, depth: u32) -> Option<PathBuf> {
        let candidate = dir.join("pods").join(uid).join("ns/net");
        if candidate.exists() {
            return Some(candidate);
        }
        if depth == 0 {
            return None;
        }
        for e in std::fs::read_dir(dir).ok()?.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir())
                && let Some(p) = walk(&e.path(), uid, depth - 1)
            {
                return Some(p);
            }
        }
        None
    }
    dirs.iter().find_map(|d| walk(d, uid, 3))
}

fn json_of(c: &Cluster, args: &[&str]) -> Value {
    serde_json::from_str(&c.ok(args)).unwrap_or(Value::Null)
}

fn pod(ns: &str, name: &str, node: &str, image: &str) -> Value {
    let port = |n: u16, proto: &str| json!({"name": format!("serve-{n}-{}", proto.to_lowercase()), "containerPort": n, "protocol": proto});
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"pod": name}},
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "c", "image": image, "imagePullPolicy": "IfNotPresent",
                "command": ["sleep", "3600"],
                "ports": [port(80, "TCP"), port(80, "UDP"), port(81, "TCP"), port(81, "UDP")]}]}})
}

fn policy(ns: &str, name: &str, spec: Value) -> String {
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": ns}, "spec": spec})
    .to_string()
}

fn delete_policies(c: &Cluster) {
    for ns in NAMESPACES {
        c.ok(&["delete", "networkpolicy", "--all", "-n", ns]);
    }
}

#[test]
fn network_policies_hold_as_the_truth_tables_say_across_two_nodes() {
    let Some(images) = Images::start() else {
        return;
    };
    if Command::new("nft").arg("--version").output().is_err() {
        eprintln!("SKIP: nft is not installed (apt-get install nftables)");
        return;
    }
    let n = 1600 + std::process::id() % 200;
    let v = &NETPOL;
    let lan = Lan::create(n, v);
    let with_policy = |flags: Vec<String>, table: &str| -> Vec<String> {
        let mut out: Vec<String> = flags
            .into_iter()
            .filter(|f| f != "--disable-network-policy")
            .collect();
        out.extend(["--policy-table".to_string(), table.to_string()]);
        out
    };
    let server_flags = with_policy(
        node_flags(&images, "npserver", &format!("k1s-proxy-p{n}"), v, n),
        &format!("k1s-policy-p{n}"),
    );
    let _server_cleanup = HostCleanup(server_flags.clone());
    let server_flags = lan.server_flags(server_flags);
    let Some(mut c) = start_with_kubelet("npserver", &server_flags) else {
        return;
    };
    let agent_flags = with_policy(
        node_flags(&images, "npagent", "k1s-proxy", v, n),
        "k1s-policy",
    );
    let _agent_cleanup = HostCleanup(agent_flags.clone());
    let lan_agent = LanAgent::new(&lan, &c, &images, agent_flags);
    let mut agent = lan_agent.spawn();
    let (server_node, agent_node) = ("node-npserver", "node-npagent");
    let agent_cidr = wait_node_ready(&c, agent_node);

    // x, y, z (z labelled team=blue); a and c on the server, b on the agent.
    for ns in NAMESPACES {
        c.ok(&["create", "namespace", ns]);
    }
    c.ok(&["label", "namespace", "z", "team=blue"]);
    let image = images.busybox();
    let items: Vec<Value> = NAMESPACES
        .iter()
        .flat_map(|ns| {
            PODS.iter().map(|p| {
                let node = if *p == "b" { agent_node } else { server_node };
                pod(ns, p, node, &image)
            })
        })
        .collect();
    c.ok_stdin(
        &["create", "-f", "-"],
        &json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string(),
    );
    for ns in NAMESPACES {
        c.ok(&[
            "wait",
            "--for=condition=Ready",
            "pod",
            "--all",
            "-n",
            ns,
            "--timeout=120s",
        ]);
    }
    let server_dir = c.data_dir();
    let mut pods = Vec::new();
    for ns in NAMESPACES {
        for name in PODS {
            let p = json_of(&c, &["get", "pod", name, "-n", ns, "-o", "json"]);
            let uid = p["metadata"]["uid"].as_str().unwrap();
            let netns = find_netns(&[&server_dir, &lan_agent.dir], uid)
                .unwrap_or_else(|| panic!("no network namespace file for {ns}/{name}"));
            pods.push(P {
                ns,
                pod: name,
                ip: p["status"]["podIP"].as_str().unwrap().parse().unwrap(),
                netns,
            });
        }
    }
    for p in &pods {
        serve(p);
    }
    let on_agent = |p: &P| p.pod == "b";

    check("no policies: everything allowed", &pods, &|_, _, _, _| true);

    // Default deny for ingress in x.
    let deny_x = policy("x", "deny-ingress", json!({"podSelector": {}}));
    c.ok_stdin(&["create", "-f", "-"], &deny_x);
    check("x denies all ingress", &pods, &|_, to, _, _| to.ns != "x");

    // x/a from any namespace's b pods on TCP 80, by pod and namespace selector.
    c.ok_stdin(
        &["create", "-f", "-"],
        &policy(
            "x",
            "a-from-b",
            json!({"podSelector": {"matchLabels": {"pod": "a"}}, "ingress": [{
                "from": [{"namespaceSelector": {}, "podSelector": {"matchLabels": {"pod": "b"}}}],
                "ports": [{"port": 80}]}]}),
        ),
    );
    check(
        "x/a admits */b on TCP 80",
        &pods,
        &|from, to, port, proto| {
            to.ns != "x" || (to.pod == "a" && from.pod == "b" && port == 80 && proto == Proto::Tcp)
        },
    );

    // Namespace y by its name label, on a named UDP port.
    c.ok(&["delete", "networkpolicy", "a-from-b", "-n", "x"]);
    c.ok_stdin(
        &["create", "-f", "-"],
        &policy(
            "x",
            "from-y-named",
            json!({"podSelector": {}, "ingress": [{
                "from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "y"}}}],
                "ports": [{"port": "serve-81-udp", "protocol": "UDP"}]}]}),
        ),
    );
    check(
        "x admits y on the named port serve-81-udp",
        &pods,
        &|from, to, port, proto| {
            to.ns != "x" || (from.ns == "y" && port == 81 && proto == Proto::Udp)
        },
    );

    // ipBlock: the cluster CIDR except the agent's pods.
    c.ok(&["delete", "networkpolicy", "from-y-named", "-n", "x"]);
    c.ok_stdin(
        &["create", "-f", "-"],
        &policy(
            "x",
            "from-block",
            json!({"podSelector": {}, "ingress": [{
                "from": [{"ipBlock": {"cidr": v.cluster_cidr, "except": [agent_cidr]}}]}]}),
        ),
    );
    check(
        "x admits the cluster CIDR except the agent's pods",
        &pods,
        &|from, to, _, _| to.ns != "x" || !on_agent(from),
    );

    // Egress: y may only reach namespaces labelled team=blue (z) on TCP 80.
    delete_policies(&c);
    c.ok_stdin(
        &["create", "-f", "-"],
        &policy(
            "y",
            "deny-egress",
            json!({"podSelector": {}, "policyTypes": ["Egress"]}),
        ),
    );
    c.ok_stdin(
        &["create", "-f", "-"],
        &policy(
            "y",
            "to-blue-80",
            json!({"podSelector": {}, "policyTypes": ["Egress"], "egress": [{
                "to": [{"namespaceSelector": {"matchLabels": {"team": "blue"}}}],
                "ports": [{"port": 80}]}]}),
        ),
    );
    check(
        "y reaches only z on TCP 80",
        &pods,
        &|from, to, port, proto| {
            from.ns != "y" || (to.ns == "z" && port == 80 && proto == Proto::Tcp)
        },
    );

    // endPort: z admits TCP 80-81 from anyone, nothing over UDP.
    delete_policies(&c);
    c.ok_stdin(
        &["create", "-f", "-"],
        &policy(
            "z",
            "tcp-range",
            json!({"podSelector": {}, "ingress": [{"ports": [{"port": 80, "endPort": 81}]}]}),
        ),
    );
    check("z admits TCP 80-81 only", &pods, &|_, to, _, proto| {
        to.ns != "z" || proto == Proto::Tcp
    });

    // Two policies adding up: x admits y on TCP 80; x/c admits z on UDP 81 as well.
    delete_policies(&c);
    c.ok_stdin(
        &["create", "-f", "-"],
        &policy(
            "x",
            "from-y-80",
            json!({"podSelector": {}, "ingress": [{
                "from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "y"}}}],
                "ports": [{"port": 80}]}]}),
        ),
    );
    c.ok_stdin(
        &["create", "-f", "-"],
        &policy(
            "x",
            "c-from-z-81",
            json!({"podSelector": {"matchLabels": {"pod": "c"}}, "ingress": [{
                "from": [{"namespaceSelector": {"matchLabels": {"team": "blue"}}}],
                "ports": [{"port": 81, "protocol": "UDP"}]}]}),
        ),
    );
    let adding_up = |from: &P, to: &P, port: u16, proto: Proto| {
        to.ns != "x"
            || (from.ns == "y" && port == 80 && proto == Proto::Tcp)
            || (to.pod == "c" && from.ns == "z" && port == 81 && proto == Proto::Udp)
    };
    check("x's two policies add up", &pods, &adding_up);

    // The agent stops: its pods keep running and its table keeps their policies.
    agent.terminate();
    check("policies hold while the agent is down", &pods, &adding_up);
    // It comes back, takes its table over and follows changes again.
    agent = lan_agent.spawn();
    check("policies hold after the agent restarts", &pods, &adding_up);
    delete_policies(&c);
    check(
        "no policies again: everything allowed",
        &pods,
        &|_, _, _, _| true,
    );

    for ns in NAMESPACES {
        c.ok(&["delete", "pod", "--all", "-n", ns, "--wait=false"]);
    }
    wait_for_teardown(&server_dir);
    wait_for_teardown(&lan_agent.dir);
    drop(agent);
    c.server.terminate();
}
