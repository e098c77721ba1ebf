//! End to end, issue #27: the cluster DNS. A server with its kubelet, service proxy and DNS
//! server; real pods (busybox `nslookup`, `wget`) and `dig` from Debian's bind9-dnsutils run
//! in a pod's network namespace over UDP and TCP; names outside the cluster forwarded to a
//! dnsmasq the test starts on its own address (`--resolv-conf`), never to the machine's.
//! Needs root, nft, dig and dnsmasq (skips visibly otherwise).

use std::process::{Child, Command, Stdio};

use k1s_tests::host::{HostCleanup, Images, NodeAddress, start_with_kubelet, wait_for_teardown};
use k1s_tests::{Cluster, eventually, proxy_flags};
use serde_json::Value;

/// The service CIDR of this test (no other test uses it), and its DNS Service's address.
const SERVICE_CIDR: &str = "10.235.0.0/16";
const DNS_IP: &str = "10.235.0.10";
/// The name the test's dnsmasq answers, and with what.
const EXTERNAL: &str = "external.k1s-test";
const EXTERNAL_IP: &str = "192.0.2.55";

/// A dnsmasq answering [`EXTERNAL`] on the node's address, killed on drop.
struct Upstream(Child);

impl Upstream {
    fn start(ip: &str) -> Upstream {
        let child = Command::new("dnsmasq")
            .args([
                "--keep-in-foreground",
                "--no-resolv",
                "--no-hosts",
                "--bind-interfaces",
                &format!("--listen-address={ip}"),
                "--except-interface=lo",
                &format!("--address=/{EXTERNAL}/{EXTERNAL_IP}"),
                "--pid-file=",
                "--user=root",
            ])
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        Upstream(child)
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `kubectl get service kube-dns` in kube-system, as JSON.
const KUBE_DNS_SERVICE: [&str; 7] = [
    "get",
    "service",
    "-n",
    "kube-system",
    "kube-dns",
    "-o",
    "json",
];

/// The `kube-dns` object of `kind` (service, endpoints) in kube-system.
fn kube_dns(c: &Cluster, kind: &str) -> Value {
    json(
        c,
        &["get", kind, "-n", "kube-system", "kube-dns", "-o", "json"],
    )
}

fn json(c: &Cluster, args: &[&str]) -> Value {
    serde_json::from_str(&c.ok(args)).unwrap_or(Value::Null)
}

/// `sh -c script` in `pod`: (success, stdout + stderr).
fn sh(c: &Cluster, pod: &str, script: &str) -> (bool, String) {
    let out = c.run(&["exec", pod, "--", "sh", "-c", script]);
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// `dig` in the network namespace of the pod with `uid`: its short output lines.
fn dig(c: &Cluster, uid: &str, args: &[&str]) -> Vec<String> {
    let out = Command::new("nsenter")
        .arg(format!(
            "--net={}",
            c.data_dir()
                .join(format!("agent/pods/{uid}/ns/net"))
                .display()
        ))
        .args(["dig", "+time=2", "+tries=2", &format!("@{DNS_IP}")])
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

/// The `status:` of a full `dig` answer (`NOERROR`, `NXDOMAIN`, …) and its authority lines.
fn dig_status(c: &Cluster, uid: &str, args: &[&str]) -> (String, Vec<String>) {
    let lines = dig(c, uid, args);
    let status = lines
        .iter()
        .find_map(|l| l.split("status: ").nth(1))
        .map(|s| s.split(',').next().unwrap_or("").to_string())
        .unwrap_or_default();
    let mut authority = Vec::new();
    let mut in_auth = false;
    for l in &lines {
        if l.starts_with(";; AUTHORITY SECTION") {
            in_auth = true;
        } else if l.starts_with(";;") {
            in_auth = false;
        } else if in_auth {
            authority.push(l.clone());
        }
    }
    (status, authority)
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

const MANIFESTS: &str = r#"
{"apiVersion": "v1", "kind": "List", "items": [
  {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
   "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}},
  {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "hl"},
   "spec": {"clusterIP": "None", "selector": {"app": "hl"}, "ports": [{"name": "http", "port": 8080}]}},
  {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "ext"},
   "spec": {"type": "ExternalName", "externalName": "external.k1s-test"}}
]}"#;

fn pod(name: &str, labels: &str, extra: &str, image: &str, command: &str) -> String {
    format!(
        r#"{{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "{name}", "labels": {labels}}},
          "spec": {{"terminationGracePeriodSeconds": 1, {extra}
            "containers": [{{"name": "c", "image": "{image}", "command": ["sh", "-c", "{command}"],
              "readinessProbe": {{"exec": {{"command": ["cat", "/tmp/ready"]}}, "periodSeconds": 1}}}}]}}}}"#
    )
}

#[test]
fn pods_resolve_services_endpoints_and_external_names() {
    let Some(images) = Images::start() else {
        return;
    };
    for (tool, package) in [
        ("nft", "nftables"),
        ("dig", "bind9-dnsutils"),
        ("dnsmasq", "dnsmasq-base"),
    ] {
        if Command::new(tool).arg("--version").output().is_err() {
            eprintln!("SKIP: {tool} is not installed (apt-get install {package})");
            return;
        }
    }
    let n = 800 + std::process::id() % 400;
    let table = format!("k1s-proxy-t{n}");
    let node = NodeAddress::create(n, &table);
    let _upstream = Upstream::start(&node.ip);
    let dir = tempfile::tempdir().unwrap();
    let resolv = dir.path().join("resolv.conf");
    std::fs::write(
        &resolv,
        format!("nameserver {}\nsearch k1s-test\n", node.ip),
    )
    .unwrap();
    let flags = proxy_flags(&images.kubelet_flags("dns"), &table);
    let _cleanup = HostCleanup(flags.clone());
    let mut all = flags.clone();
    all.extend(
        [
            "--service-cidr",
            SERVICE_CIDR,
            "--node-ip",
            &node.ip,
            "--bind-address",
            "0.0.0.0",
            "--resolv-conf",
            &resolv.display().to_string(),
        ]
        .map(String::from),
    );
    let Some(mut c) = start_with_kubelet("dns", &all) else {
        return;
    };
    let image = images.busybox();

    // The kube-dns Service at the tenth address, and this node's server as its endpoint.
    let svc = kube_dns(&c, "service");
    assert_eq!(svc["spec"]["clusterIP"], DNS_IP);
    assert_eq!(svc["metadata"]["labels"]["k8s-app"], "kube-dns");
    eventually(
        "the node's DNS server in the kube-dns endpoints",
        30,
        || {
            let eps = kube_dns(&c, "endpoints");
            eps["subsets"][0]["addresses"][0]["nodeName"] == "node-dns"
        },
    );

    c.ok_stdin(&["create", "-f", "-"], MANIFESTS);
    let ready = "touch /tmp/ready; exec sleep 3600";
    let httpd = "mkdir -p /www && echo hello-from-web > /www/index.html && touch /tmp/ready && exec httpd -f -p 8080 -h /www";
    for (name, labels, extra, cmd) in [
        ("client", r#"{"app": "client"}"#, "", ready),
        ("web", r#"{"app": "web"}"#, "", httpd),
        (
            "hl-0",
            r#"{"app": "hl"}"#,
            r#""hostname": "hl-0", "subdomain": "hl","#,
            ready,
        ),
        // Not ready until the test says so.
        (
            "hl-1",
            r#"{"app": "hl"}"#,
            r#""hostname": "hl-1", "subdomain": "hl","#,
            "exec sleep 3600",
        ),
    ] {
        c.ok_stdin(
            &["create", "-f", "-"],
            &pod(name, labels, extra, &image, cmd),
        );
    }
    for p in ["client", "web", "hl-0"] {
        c.ok(&[
            "wait",
            "--for=condition=Ready",
            &format!("pod/{p}"),
            "--timeout=120s",
        ]);
    }
    let pod_json = json(&c, &["get", "pod", "client", "-o", "json"]);
    let uid = pod_json["metadata"]["uid"].as_str().unwrap().to_string();
    let ip_of = |p: &str| {
        json(&c, &["get", "pod", p, "-o", "json"])["status"]["podIP"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (web_ip, hl0_ip, hl1_ip) = (ip_of("web"), ip_of("hl-0"), ip_of("hl-1"));
    let web_cluster_ip = json(&c, &["get", "service", "web", "-o", "json"])["spec"]["clusterIP"]
        .as_str()
        .unwrap()
        .to_string();

    // The pod's resolv.conf, as upstream's kubelet writes it for ClusterFirst.
    let (_, conf) = sh(&c, "client", "cat /etc/resolv.conf");
    assert!(conf.contains(&format!("nameserver {DNS_IP}")), "{conf}");
    assert!(
        conf.contains("search default.svc.cluster.local svc.cluster.local cluster.local k1s-test"),
        "{conf}"
    );
    assert!(conf.contains("options ndots:5"), "{conf}");

    // From the pod, with busybox: Service names, full and short, and the API's.
    eventually("web's name from the pod", 30, || {
        sh(&c, "client", "nslookup web.default.svc.cluster.local")
            .1
            .contains(&web_cluster_ip)
    });
    let (ok, out) = sh(
        &c,
        "client",
        "nslookup kubernetes.default.svc.cluster.local",
    );
    assert!(ok && out.contains("10.235.0.1"), "{out}");
    eventually("wget by the short name", 30, || {
        let (_, out) = sh(&c, "client", "timeout 5 wget -q -O - http://web/");
        out.contains("hello-from-web")
    });
    let (_, out) = sh(
        &c,
        "client",
        "timeout 5 wget -q -O - http://web.default:80/",
    );
    assert!(out.contains("hello-from-web"), "{out}");
    let (ok, out) = sh(&c, "client", "nslookup nope.default.svc.cluster.local");
    assert!(
        !ok || out.contains("NXDOMAIN") || out.contains("can't find"),
        "{out}"
    );
    // Forwarded: a name only the test's dnsmasq knows.
    let (_, out) = sh(&c, "client", &format!("nslookup {EXTERNAL}"));
    assert!(out.contains(EXTERNAL_IP), "{out}");

    // dig in the pod's namespace, UDP then TCP.
    for proto in ["+notcp", "+tcp"] {
        let short = |name: &str, t: &str| sorted(dig(&c, &uid, &[proto, "+short", name, t]));
        let ptr = |ip: &str| dig(&c, &uid, &[proto, "+short", "-x", ip]);
        assert_eq!(
            short("web.default.svc.cluster.local", "A"),
            [web_cluster_ip.as_str()],
            "{proto}"
        );
        assert_eq!(
            short("_http._tcp.web.default.svc.cluster.local", "SRV"),
            ["0 100 80 web.default.svc.cluster.local."],
            "{proto}"
        );
        assert_eq!(
            ptr(&web_cluster_ip),
            ["web.default.svc.cluster.local."],
            "{proto}"
        );
        // Headless: only the ready endpoint, by Service and by host name.
        assert_eq!(
            short("hl.default.svc.cluster.local", "A"),
            [hl0_ip.as_str()],
            "{proto}"
        );
        assert_eq!(
            short("hl-0.hl.default.svc.cluster.local", "A"),
            [hl0_ip.as_str()],
            "{proto}"
        );
        assert_eq!(
            short("_http._tcp.hl.default.svc.cluster.local", "SRV"),
            ["0 100 8080 hl-0.hl.default.svc.cluster.local."],
            "{proto}"
        );
        assert_eq!(
            ptr(&hl0_ip),
            ["hl-0.hl.default.svc.cluster.local."],
            "{proto}"
        );
        // ExternalName: the CNAME and what it points to, from the upstream.
        assert_eq!(
            short("ext.default.svc.cluster.local", "A"),
            [EXTERNAL_IP.to_string(), format!("{EXTERNAL}.")],
            "{proto}"
        );
        let dashed = web_ip.replace('.', "-");
        assert_eq!(
            short(&format!("{dashed}.default.pod.cluster.local"), "A"),
            [web_ip.as_str()],
            "{proto}"
        );
        assert_eq!(
            short("dns-version.cluster.local", "TXT"),
            ["\"1.1.0\""],
            "{proto}"
        );
        assert_eq!(short(EXTERNAL, "A"), [EXTERNAL_IP], "{proto}");
        // Negative answers carry the zone's SOA.
        let (status, auth) = dig_status(&c, &uid, &[proto, "nope.default.svc.cluster.local", "A"]);
        assert_eq!(status, "NXDOMAIN", "{proto}");
        assert!(auth.iter().any(|l| l.contains("SOA")), "{auth:?}");
        let (status, auth) =
            dig_status(&c, &uid, &[proto, "web.default.svc.cluster.local", "AAAA"]);
        assert_eq!(status, "NOERROR", "{proto}");
        assert!(
            auth.iter().any(|l| l.contains("SOA")),
            "NODATA with SOA: {auth:?}"
        );
    }

    // An answer too large for 512 bytes: truncated over UDP without EDNS, whole over TCP
    // (dig retries over TCP by itself unless told to ignore the TC bit).
    let ports: Vec<String> = (0..40)
        .map(|i| format!(r#"{{"name": "p{i}", "port": {}}}"#, 1000 + i))
        .collect();
    c.ok_stdin(
        &["create", "-f", "-"],
        &format!(
            r#"{{"apiVersion": "v1", "kind": "Service", "metadata": {{"name": "many"}},
              "spec": {{"ports": [{}]}}}}"#,
            ports.join(",")
        ),
    );
    eventually("the many-port Service resolves", 10, || {
        !dig(&c, &uid, &["+short", "many.default.svc.cluster.local", "A"]).is_empty()
    });
    let truncated = dig(
        &c,
        &uid,
        &[
            "+noedns",
            "+notcp",
            "+ignore",
            "many.default.svc.cluster.local",
            "SRV",
        ],
    );
    assert!(
        truncated
            .iter()
            .any(|l| l.contains("flags:") && l.contains(" tc")),
        "{truncated:?}"
    );
    let whole = dig(
        &c,
        &uid,
        &["+noedns", "+short", "many.default.svc.cluster.local", "SRV"],
    );
    assert_eq!(whole.len(), 40, "{whole:?}");

    // A headless endpoint appears once its pod is ready.
    sh(&c, "hl-1", "touch /tmp/ready");
    eventually("hl-1 in the headless Service's answer", 30, || {
        sorted(dig(
            &c,
            &uid,
            &["+short", "hl.default.svc.cluster.local", "A"],
        )) == sorted(vec![hl0_ip.clone(), hl1_ip.clone()])
    });
    assert_eq!(
        dig(
            &c,
            &uid,
            &["+short", "hl-1.hl.default.svc.cluster.local", "A"]
        ),
        [hl1_ip.as_str()]
    );

    // A new Service resolves, and stops resolving once deleted.
    c.ok(&["create", "service", "clusterip", "late", "--tcp=81:8080"]);
    eventually("the new Service resolves", 10, || {
        !dig(&c, &uid, &["+short", "late.default.svc.cluster.local", "A"]).is_empty()
    });
    c.ok(&["delete", "service", "late"]);
    eventually("the deleted Service is NXDOMAIN", 10, || {
        dig_status(&c, &uid, &["late.default.svc.cluster.local", "A"]).0 == "NXDOMAIN"
    });

    // The DNS server's metrics, on the node's server address.
    let gateway = json(&c, &["get", "node", "node-dns", "-o", "json"])["metadata"]["annotations"]
        ["dns.k1s.io/address"]
        .as_str()
        .unwrap()
        .to_string();
    let out = Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "3",
            &format!("http://{gateway}:9153/metrics"),
        ])
        .output()
        .unwrap();
    let metrics = String::from_utf8_lossy(&out.stdout);
    assert!(
        metrics.contains("k1s_dns_requests_total{proto=\"tcp\"}"),
        "{metrics}"
    );
    assert!(metrics.contains("k1s_dns_cache_hits_total"), "{metrics}");

    for p in ["client", "web", "hl-0", "hl-1"] {
        c.ok(&["delete", "pod", p, "--wait=false"]);
    }
    wait_for_teardown(&c.data_dir());
    c.server.terminate();
}

/// The kube-dns Service without a node: created at the tenth address of the default service
/// CIDR, kept across a restart, removed by `--disable dns` (and a Service of the user's of
/// that name left alone).
#[test]
fn the_kube_dns_service_follows_disable_dns() {
    let Some(mut c) = Cluster::start(&[]) else {
        return;
    };
    let get = |c: &Cluster| c.run(&KUBE_DNS_SERVICE);
    let svc: Value = serde_json::from_slice(&get(&c).stdout).unwrap();
    assert_eq!(svc["spec"]["clusterIP"], "10.43.0.10");
    assert_eq!(svc["spec"]["internalTrafficPolicy"], "Local");
    let ports: Vec<(String, u64)> = svc["spec"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["protocol"].as_str().unwrap().to_string(),
                p["port"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        ports,
        [("UDP".into(), 53), ("TCP".into(), 53), ("TCP".into(), 9153)]
    );
    let uid = svc["metadata"]["uid"].clone();
    let restart = |c: &mut Cluster, flags: &[&str]| {
        c.server.terminate();
        c.server = k1s_tests::Server::start(&c.data_dir(), c.port, &c.kubeconfig, flags);
    };
    // A restart keeps the same Service (its address is its own, not a conflict).
    restart(&mut c, &[]);
    let again: Value = serde_json::from_slice(&get(&c).stdout).unwrap();
    assert_eq!(again["metadata"]["uid"], uid);
    restart(&mut c, &["--disable", "dns"]);
    assert!(!get(&c).status.success(), "removed with --disable dns");
    // A user's own kube-dns (CoreDNS's) is not k1s's to remove.
    c.ok(&[
        "create",
        "service",
        "clusterip",
        "kube-dns",
        "-n",
        "kube-system",
        "--tcp=53:53",
    ]);
    restart(&mut c, &["--disable", "dns"]);
    assert!(get(&c).status.success());
    c.server.terminate();
}
