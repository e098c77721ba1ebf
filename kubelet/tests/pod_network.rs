//! The bridge pod network against the real kernel: two pod namespaces on a test bridge,
//! addresses, routes, pings (or TCP), masquerade rules, teardown, re-setup and restart.
//!
//! Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN); prints SKIP otherwise. Everything it makes
//! has a name derived from the process id (bridge `k1st<pid%10000>`, CIDR
//! `10.244.<pid%250>.0/24`) and is removed by a drop guard even when an assertion fails.

use std::net::{IpAddr, TcpStream};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k1s_kubelet::network::netns::unprepare_netns_dir;
use k1s_kubelet::network::{
    BridgeConfig, BridgeNetwork, PodNetwork, create_netns, host_veth_name, is_netns_mount, mac_for,
    pod_netns_path, prepare_netns_dir, remove_netns,
};

fn is_root() -> bool {
    // /proc/self belongs to the effective uid.
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// Runs a command; (success, stdout + stderr).
fn sh(program: &str, args: &[&str]) -> (bool, String) {
    match Command::new(program).args(args).output() {
        Ok(out) => (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        ),
        Err(e) => (false, format!("{program}: {e}")),
    }
}

fn have(program: &str, probe: &str) -> bool {
    Command::new(program)
        .arg(probe)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

fn in_ns(ns: &Path, args: &[&str]) -> (bool, String) {
    let net = format!("--net={}", ns.display());
    let mut full = vec![net.as_str()];
    full.extend_from_slice(args);
    sh("nsenter", &full)
}

fn link_exists(name: &str) -> bool {
    Path::new("/sys/class/net").join(name).exists()
}

/// Removes everything the test made, whatever state it got to.
struct Cleanup {
    net: Arc<BridgeNetwork>,
    pods: Vec<String>,
    netns: Vec<PathBuf>,
    netns_dir: PathBuf,
    ip_forward_before: Option<String>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let net = self.net.clone();
        let pods = self.pods.clone();
        // Async cleanup on a thread of its own (we may be inside the test's runtime).
        let done = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async {
                for pod in &pods {
                    if let Err(e) = net.teardown(pod, None).await {
                        eprintln!("cleanup: teardown {pod}: {e}");
                    }
                }
                if let Err(e) = net.destroy().await {
                    eprintln!("cleanup: destroy: {e}");
                }
            });
        })
        .join();
        if done.is_err() {
            eprintln!("cleanup: the async cleanup panicked");
        }
        // Belt and braces, in case the API under test is what broke.
        for pod in &self.pods {
            let veth = host_veth_name(pod);
            if link_exists(&veth) {
                sh("ip", &["link", "del", &veth]);
            }
        }
        let bridge = &self.net.config().bridge;
        if link_exists(bridge) {
            sh("ip", &["link", "del", bridge]);
        }
        for ns in &self.netns {
            remove_netns(ns);
        }
        if let Err(e) = unprepare_netns_dir(&self.netns_dir) {
            eprintln!("cleanup: {e}");
        }
        if let Some(v) = &self.ip_forward_before {
            let _ = std::fs::write("/proc/sys/net/ipv4/ip_forward", v);
        }
    }
}

/// Starts a one-shot TCP server inside `ns` that answers "k1s" and returns when it listens.
fn tcp_server(ns: &Path, ip: &str, port: u16) -> Option<std::process::Child> {
    let script = format!(
        "import socket\n\
         s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
         s.bind(('{ip}', {port})); s.listen(1); print('ready', flush=True)\n\
         s.settimeout(20); c,_=s.accept(); c.sendall(b'k1s'); c.close()\n"
    );
    let net = format!("--net={}", ns.display());
    let mut child = Command::new("nsenter")
        .args([net.as_str(), "python3", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut line = String::new();
    let stdout = child.stdout.take()?;
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line).ok()?;
    (line.trim() == "ready").then_some(child)
}

fn tcp_read(ip: IpAddr, port: u16) -> std::io::Result<String> {
    use std::io::Read;
    let mut stream = TcpStream::connect_timeout(&(ip, port).into(), Duration::from_secs(3))?;
    stream.set_read_timeout(Some(Duration::from_secs(3)))?;
    let mut got = String::new();
    stream.read_to_string(&mut got)?;
    Ok(got)
}

/// Reachability from the host (ns None) or a pod namespace, by ping, else by TCP.
fn reachable(from: Option<&Path>, to_ns: &Path, to: IpAddr) -> Result<(), String> {
    if have("ping", "-V") {
        let ip = to.to_string();
        let args = ["ping", "-c1", "-W2", ip.as_str()];
        let (ok, out) = match from {
            Some(ns) => in_ns(ns, &args),
            None => sh("ping", &args[1..]),
        };
        return if ok { Ok(()) } else { Err(out) };
    }
    // No ping: TCP, served from the target namespace.
    let port = 18080;
    let mut server = tcp_server(to_ns, &to.to_string(), port)
        .ok_or_else(|| "could not start a python3 TCP server in the pod namespace".to_string())?;
    let result = match from {
        None => tcp_read(to, port).map_err(|e| e.to_string()),
        Some(ns) => {
            let code = format!(
                "import socket\ns=socket.create_connection(('{to}', {port}), 3)\nprint(s.recv(16).decode())"
            );
            let (ok, out) = in_ns(ns, &["python3", "-c", &code]);
            if ok { Ok(out) } else { Err(out) }
        }
    };
    let _ = server.kill();
    let _ = server.wait();
    match result {
        Ok(got) if got.trim() == "k1s" => Ok(()),
        Ok(got) => Err(format!("unexpected answer {got:?}")),
        Err(e) => Err(e),
    }
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridge_network_on_a_real_kernel() {
    if !is_root() {
        eprintln!("SKIP pod_network: needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN)");
        return;
    }
    if !have("nsenter", "--version") || !have("ip", "-V") {
        eprintln!("SKIP pod_network: needs nsenter and ip (util-linux, iproute2)");
        return;
    }
    let pid = std::process::id();
    let bridge = format!("k1st{}", pid % 10000);
    let n = pid % 250;
    let cidr = format!("10.244.{n}.0/24");
    let tmp = tempfile::tempdir().unwrap();
    let state_dir = tmp.path().join("state");
    let netns_dir = tmp.path().join("netns");

    let mut config = BridgeConfig::new(cidr.parse().unwrap(), &state_dir);
    config.bridge = bridge.clone();
    let net = Arc::new(BridgeNetwork::new(config.clone()).unwrap());
    let uid_a = format!("pod-a-{pid}");
    let uid_b = format!("pod-b-{pid}");
    let uid_c = format!("pod-c-{pid}");
    let ns_a = pod_netns_path(&netns_dir, &uid_a).unwrap();
    let ns_b = pod_netns_path(&netns_dir, &uid_b).unwrap();
    let ns_c = pod_netns_path(&netns_dir, &uid_c).unwrap();
    let _cleanup = Cleanup {
        net: net.clone(),
        pods: vec![uid_a.clone(), uid_b.clone(), uid_c.clone()],
        netns: vec![ns_a.clone(), ns_b.clone(), ns_c.clone()],
        netns_dir: netns_dir.clone(),
        ip_forward_before: std::fs::read_to_string("/proc/sys/net/ipv4/ip_forward").ok(),
    };

    // Node setup, twice (idempotent).
    net.init().await.unwrap();
    net.init().await.unwrap();
    assert!(link_exists(&bridge), "bridge {bridge} missing");
    let (_, addrs) = sh("ip", &["-4", "-o", "addr", "show", "dev", &bridge]);
    assert!(addrs.contains(&format!("10.244.{n}.1/24")), "{addrs}");
    assert_eq!(
        std::fs::read_to_string("/proc/sys/net/ipv4/ip_forward")
            .unwrap()
            .trim(),
        "1"
    );

    // Masquerade and forward rules, once each.
    if have("iptables", "--version") {
        let (ok, nat) = sh(
            "iptables",
            &["-w", "5", "-t", "nat", "-S", "K1S-POSTROUTING"],
        );
        assert!(ok, "{nat}");
        let rules: Vec<_> = nat.lines().filter(|l| l.contains(&cidr)).collect();
        assert_eq!(rules.len(), 1, "{nat}");
        assert!(rules[0].contains("MASQUERADE"), "{nat}");
        let (_, post) = sh("iptables", &["-w", "5", "-t", "nat", "-S", "POSTROUTING"]);
        assert_eq!(post.matches("-j K1S-POSTROUTING").count(), 1, "{post}");
        let (_, fwd) = sh("iptables", &["-w", "5", "-S", "K1S-FORWARD"]);
        assert_eq!(
            fwd.matches(&format!("-i {bridge} -j ACCEPT")).count(),
            1,
            "{fwd}"
        );
        assert_eq!(
            fwd.matches(&format!("-o {bridge} -j ACCEPT")).count(),
            1,
            "{fwd}"
        );
    } else if have("nft", "--version") {
        let (ok, table) = sh("nft", &["list", "table", "ip", "k1s"]);
        assert!(ok && table.contains(&cidr), "{table}");
    } else {
        eprintln!("NOTE pod_network: neither iptables nor nft; masquerade not checked");
    }

    // Pod namespaces, in a shared mount point dir as iproute2 makes /run/netns.
    prepare_netns_dir(&netns_dir).unwrap();
    for ns in [&ns_a, &ns_b] {
        create_netns(ns).unwrap();
        assert!(is_netns_mount(ns));
        create_netns(ns).unwrap(); // idempotent
    }

    // A namespace that does not exist: refused, nothing allocated, nothing left behind.
    let missing = netns_dir.join("missing");
    assert!(net.setup(&uid_a, &missing).await.is_err());
    assert_eq!(net.address(&uid_a), None);
    assert!(!link_exists(&host_veth_name(&uid_a)));

    let a = net.setup(&uid_a, &ns_a).await.unwrap();
    let b = net.setup(&uid_b, &ns_b).await.unwrap();
    assert_eq!(a.ip.to_string(), format!("10.244.{n}.2"));
    assert_eq!(b.ip.to_string(), format!("10.244.{n}.3"));
    assert_eq!(a.gateway.to_string(), format!("10.244.{n}.1"));
    assert_eq!(a.prefix_len, 24);
    assert_eq!(net.address(&uid_a), Some(a.clone()));

    for (ns, addr) in [(&ns_a, &a), (&ns_b, &b)] {
        let (ok, out) = in_ns(ns, &["ip", "-4", "-o", "addr", "show", "dev", "eth0"]);
        assert!(ok && out.contains(&format!("{}/24", addr.ip)), "{out}");
        let (_, link) = in_ns(ns, &["ip", "-o", "link", "show", "dev", "eth0"]);
        assert!(link.contains("mtu 1500") && link.contains("UP"), "{link}");
        let mac = mac_for(match addr.ip {
            IpAddr::V4(ip) => ip,
            IpAddr::V6(_) => unreachable!(),
        })
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":");
        assert!(link.contains(&format!("link/ether {mac}")), "{link}");
        let (_, lo) = in_ns(ns, &["ip", "-o", "link", "show", "dev", "lo"]);
        assert!(lo.contains("UP"), "{lo}");
        let (_, route) = in_ns(ns, &["ip", "-4", "route", "show", "default"]);
        assert!(
            route.contains(&format!("via 10.244.{n}.1 dev eth0")),
            "{route}"
        );
    }
    for uid in [&uid_a, &uid_b] {
        let veth = host_veth_name(uid);
        let (_, link) = sh("ip", &["-o", "link", "show", "dev", &veth]);
        assert!(link.contains(&format!("master {bridge}")), "{link}");
        let hairpin =
            std::fs::read_to_string(format!("/sys/class/net/{veth}/brport/hairpin_mode")).unwrap();
        assert_eq!(hairpin.trim(), "1", "hairpin on {veth}");
    }

    // Traffic: pod to pod, host to pod, pod to gateway.
    reachable(Some(&ns_a), &ns_b, b.ip).expect("pod a -> pod b");
    reachable(Some(&ns_b), &ns_a, a.ip).expect("pod b -> pod a");
    reachable(None, &ns_a, a.ip).expect("host -> pod a");
    if have("ping", "-V") {
        let gw = a.gateway.to_string();
        let (ok, out) = in_ns(&ns_a, &["ping", "-c1", "-W2", &gw]);
        assert!(ok, "pod a -> gateway: {out}");
    }
    if have("python3", "--version") {
        // TCP from the host into a pod, whichever way reachability was checked above.
        let mut server = tcp_server(&ns_b, &b.ip.to_string(), 18081).expect("python3 server");
        let got = tcp_read(b.ip, 18081);
        let _ = server.kill();
        let _ = server.wait();
        assert_eq!(got.expect("host -> pod b over TCP"), "k1s");
    }

    // Setting up a pod again keeps its address and its connectivity.
    let b_again = net.setup(&uid_b, &ns_b).await.unwrap();
    assert_eq!(b_again, b);
    reachable(Some(&ns_a), &ns_b, b.ip).expect("pod a -> pod b after re-setup");

    // A restarted kubelet finds the same addresses.
    let restarted = BridgeNetwork::new(config.clone()).unwrap();
    assert_eq!(restarted.address(&uid_a), Some(a.clone()));
    assert_eq!(restarted.address(&uid_b), Some(b.clone()));
    drop(restarted);

    // Teardown removes the pair and frees the address; twice is fine.
    net.teardown(&uid_a, Some(&ns_a)).await.unwrap();
    assert!(!link_exists(&host_veth_name(&uid_a)));
    let (has_eth0, _) = in_ns(&ns_a, &["ip", "link", "show", "dev", "eth0"]);
    assert!(!has_eth0, "eth0 still in pod a's namespace");
    assert_eq!(net.address(&uid_a), None);
    net.teardown(&uid_a, Some(&ns_a)).await.unwrap();
    assert_eq!(
        net.ipam().allocations().get(&uid_a),
        None,
        "address of a still allocated"
    );

    // The freed .2 is not handed out at once: a new pod gets .4. Its namespace already has
    // an eth0 that is not a veth of ours (left by something else): setup replaces it.
    create_netns(&ns_c).unwrap();
    let (ok, out) = in_ns(
        &ns_c,
        &[
            "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "stray0",
        ],
    );
    assert!(ok, "adding a stray eth0: {out}");
    let c = net.setup(&uid_c, &ns_c).await.unwrap();
    assert_eq!(c.ip.to_string(), format!("10.244.{n}.4"));
    reachable(Some(&ns_c), &ns_b, b.ip).expect("pod c -> pod b");

    // Namespace removed first (the runtime's crash path): the pair dies with it, and
    // teardown still succeeds.
    remove_netns(&ns_c);
    assert!(!ns_c.exists());
    let veth_c = host_veth_name(&uid_c);
    wait_until("veth of pod c to go with its namespace", || {
        !link_exists(&veth_c)
    });
    net.teardown(&uid_c, Some(&ns_c)).await.unwrap();
    assert_eq!(net.address(&uid_c), None);

    // Node teardown: bridge and rules go.
    net.teardown(&uid_b, Some(&ns_b)).await.unwrap();
    net.destroy().await.unwrap();
    assert!(!link_exists(&bridge));
    if have("iptables", "--version") {
        let (_, nat) = sh("iptables", &["-w", "5", "-t", "nat", "-S"]);
        assert!(!nat.contains(&cidr), "{nat}");
        let (_, filter) = sh("iptables", &["-w", "5", "-S"]);
        assert!(!filter.contains(&format!("{bridge} -j ACCEPT")), "{filter}");
    }
}
