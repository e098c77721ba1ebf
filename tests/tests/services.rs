//! End to end, issue #26: Services that route, on a server with its kubelet and the service
//! proxy programming its own nftables table. Real containers (busybox httpd from the local
//! registry), real kernel networking, stock kubectl.
//!
//! The node's address is on an interface of the test's own (traffic to it never leaves the
//! machine); the server listens on it so that pods reach the API through the `kubernetes`
//! Service. Needs root, nft and the registry tools (skips visibly otherwise).

use std::process::Command;
use std::time::{Duration, Instant};

use k1s_tests::host::{HostCleanup, Images, NodeAddress, start_with_kubelet, wait_for_teardown};
use k1s_tests::{Cluster, eventually, proxy_flags};
use serde_json::Value;

/// The service CIDR of this test (no other test uses it).
const SERVICE_CIDR: &str = "10.238.0.0/16";

fn json(c: &Cluster, args: &[&str]) -> Value {
    serde_json::from_str(&c.ok(args)).unwrap_or(Value::Null)
}

/// `curl` from the host: (exit code, body).
fn curl(url: &str) -> (i32, String) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "3", url])
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// An HTTP GET from inside `pod` with busybox `nc`; the body of the answer ("" on failure).
fn get_from_pod(c: &Cluster, pod: &str, ip: &str, port: u16) -> String {
    let out = c.run(&[
        "exec",
        pod,
        "--",
        "sh",
        "-c",
        &format!("printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 {ip} {port}"),
    ]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.split("\r\n\r\n").nth(1).unwrap_or("").to_string()
}

fn web(name: &str, image: &str, replicas: u32) -> String {
    format!(
        r#"{{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {{"name": "{name}"}},
          "spec": {{"replicas": {replicas}, "selector": {{"matchLabels": {{"app": "{name}"}}}},
            "template": {{"metadata": {{"labels": {{"app": "{name}"}}}},
              "spec": {{"terminationGracePeriodSeconds": 1, "containers": [{{"name": "httpd",
                "image": "{image}", "command": ["sh", "-c",
                "mkdir -p /www && hostname > /www/index.html && exec httpd -f -p 8080 -h /www"],
                "readinessProbe": {{"tcpSocket": {{"port": 8080}}, "periodSeconds": 1}}}}]}}}}}}}}"#
    )
}

fn pod_names(c: &Cluster, app: &str) -> Vec<String> {
    json(
        c,
        &["get", "pods", "-l", &format!("app={app}"), "-o", "json"],
    )["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .filter_map(|p| p["metadata"]["name"].as_str().map(String::from))
        .collect()
}

fn ready_endpoints(c: &Cluster, svc: &str) -> usize {
    let v = json(
        c,
        &[
            "get",
            "endpointslices",
            "-l",
            &format!("kubernetes.io/service-name={svc}"),
            "-o",
            "json",
        ],
    );
    v["items"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
        .filter(|e| e["conditions"]["ready"] == true)
        .count()
}

#[test]
fn cluster_ips_node_ports_and_the_api_from_pods() {
    let Some(images) = Images::start() else {
        return;
    };
    if Command::new("nft").arg("--version").output().is_err() {
        eprintln!("SKIP: nft is not installed (apt-get install nftables)");
        return;
    }
    // Two tests in this file: each its own n (nextest runs them in two processes, cargo
    // test in one).
    let n = (std::process::id() % 400) * 2;
    let table = format!("k1s-proxy-t{n}");
    let node = NodeAddress::create(n, &table);
    let flags = proxy_flags(&images.kubelet_flags("svc"), &table);
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
        ]
        .map(String::from),
    );
    let Some(mut c) = start_with_kubelet("svc", &all) else {
        return;
    };
    let image = images.busybox();

    // The node registered the address it was given, and the kubernetes endpoints carry it.
    let n_json = json(&c, &["get", "node", "node-svc", "-o", "json"]);
    assert_eq!(
        n_json["status"]["addresses"][0]["address"],
        node.ip.as_str()
    );
    let eps = json(&c, &["get", "endpoints", "kubernetes", "-o", "json"]);
    assert_eq!(eps["subsets"][0]["addresses"][0]["ip"], node.ip.as_str());

    c.ok_stdin(&["create", "-f", "-"], &web("web", &image, 2));
    c.ok(&["rollout", "status", "deployment/web", "--timeout=120s"]);
    c.ok(&[
        "expose",
        "deployment",
        "web",
        "--port",
        "80",
        "--target-port",
        "8080",
        "--type",
        "NodePort",
    ]);
    let svc = json(&c, &["get", "service", "web", "-o", "json"]);
    let cluster_ip = svc["spec"]["clusterIP"].as_str().unwrap().to_string();
    let node_port = svc["spec"]["ports"][0]["nodePort"].as_u64().unwrap() as u16;
    assert!(cluster_ip.starts_with("10.238."), "{cluster_ip}");
    let pods = pod_names(&c, "web");
    assert_eq!(pods.len(), 2);
    eventually("both endpoints ready", 60, || {
        ready_endpoints(&c, "web") == 2
    });

    // The API server's proxy subresources (`kubectl get --raw`, as the conformance suite
    // reads pods' answers): a pod by name and port, trailing slash kept; the Service by port
    // name, by port number and without a port; the client's query passed on.
    let raw = |path: &str| c.ok(&["get", "--raw", path]).trim().to_string();
    assert_eq!(
        raw(&format!(
            "/api/v1/namespaces/default/pods/{}:8080/proxy/",
            pods[0]
        )),
        pods[0]
    );
    assert_eq!(
        raw(&format!(
            "/api/v1/namespaces/default/pods/http:{}:8080/proxy/index.html?x=1",
            pods[0]
        )),
        pods[0]
    );
    for id in ["web", "web:80", "http:web:80"] {
        let body = raw(&format!("/api/v1/namespaces/default/services/{id}/proxy/"));
        assert!(pods.contains(&body), "{id}: {body:?}");
    }
    let missing = c.run(&[
        "get",
        "--raw",
        "/api/v1/namespaces/default/services/web:9999/proxy/",
    ]);
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("ServiceUnavailable")
            || String::from_utf8_lossy(&missing.stderr).contains("no service port 9999"),
        "{missing:?}"
    );

    // ClusterIP from the host: both pods answer (random choice among ready endpoints).
    let mut seen = std::collections::BTreeSet::new();
    eventually("the ClusterIP to reach both pods", 30, || {
        let (code, body) = curl(&format!("http://{cluster_ip}/"));
        if code == 0 {
            assert!(pods.contains(&body.trim().to_string()), "{body:?}");
            seen.insert(body.trim().to_string());
        }
        seen.len() == 2
    });
    // NodePort on the node's address and on 127.0.0.1.
    for host in [node.ip.as_str(), "127.0.0.1"] {
        let (code, body) = curl(&format!("http://{host}:{node_port}/"));
        assert_eq!(code, 0, "NodePort on {host}");
        assert!(pods.contains(&body.trim().to_string()), "{body:?}");
    }

    // type LoadBalancer without a cloud: the node's address becomes the ingress, and the
    // Service answers there.
    c.ok(&[
        "expose",
        "deployment",
        "web",
        "--name",
        "web-lb",
        "--port",
        "8081",
        "--target-port",
        "8080",
        "--type",
        "LoadBalancer",
    ]);
    eventually("the load balancer's ingress", 30, || {
        json(&c, &["get", "service", "web-lb", "-o", "json"])["status"]["loadBalancer"]["ingress"]
            [0]["ip"]
            == node.ip.as_str()
    });
    eventually("the load balancer address to answer", 30, || {
        let (code, body) = curl(&format!("http://{}:8081/", node.ip));
        code == 0 && pods.contains(&body.trim().to_string())
    });

    // From a pod: the ClusterIP, and the pod through its own Service (hairpin).
    c.ok_stdin(&["create", "-f", "-"], &web("client", &image, 1));
    c.ok(&["rollout", "status", "deployment/client", "--timeout=120s"]);
    c.ok(&[
        "expose",
        "deployment",
        "client",
        "--port",
        "80",
        "--target-port",
        "8080",
    ]);
    eventually("the client's endpoint", 60, || {
        ready_endpoints(&c, "client") == 1
    });
    let client = pod_names(&c, "client").remove(0);
    let client_ip = json(&c, &["get", "service", "client", "-o", "json"])["spec"]["clusterIP"]
        .as_str()
        .unwrap()
        .to_string();
    eventually("the ClusterIP from a pod", 30, || {
        pods.contains(
            &get_from_pod(&c, &client, &cluster_ip, 80)
                .trim()
                .to_string(),
        )
    });
    eventually("a pod reaching itself through its Service", 30, || {
        get_from_pod(&c, &client, &client_ip, 80).trim() == client
    });

    // The API from a pod, through the kubernetes Service: a TLS server answers (an HTTP
    // request gets a TLS alert record, 0x15, never an HTTP answer).
    let api = c.run(&[
        "exec",
        &client,
        "--",
        "sh",
        "-c",
        "printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 $KUBERNETES_SERVICE_HOST $KUBERNETES_SERVICE_PORT | od -An -tx1 | head -1",
    ]);
    let first = String::from_utf8_lossy(&api.stdout);
    assert!(
        first.trim().starts_with("15 03"),
        "the kubernetes Service did not reach the API server: {first:?}"
    );
    // And from the host, over verified TLS (the serving certificate covers the kubernetes
    // ClusterIP): the API's own /version.
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "3", "--cacert"])
        .arg(c.data_dir().join("tls/ca.crt"))
        .arg(format!(
            "https://{}/version",
            SERVICE_CIDR.replace(".0.0/16", ".0.1")
        ))
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("gitVersion"),
        "{out:?}"
    );

    // Session affinity: every request from one client reaches one pod.
    c.ok(&[
        "patch",
        "service",
        "web",
        "-p",
        r#"{"spec": {"sessionAffinity": "ClientIP"}}"#,
    ]);
    eventually("affinity to hold", 30, || {
        let answers: std::collections::BTreeSet<String> = (0..10)
            .map(|_| curl(&format!("http://{cluster_ip}/")).1)
            .collect();
        answers.len() == 1
    });

    // A Service without endpoints is rejected at once (ICMP), not left to time out; so is a
    // port the ClusterIP does not serve.
    c.ok(&[
        "create",
        "service",
        "clusterip",
        "empty",
        "--tcp",
        "80:8080",
    ]);
    let empty_ip = json(&c, &["get", "service", "empty", "-o", "json"])["spec"]["clusterIP"]
        .as_str()
        .unwrap()
        .to_string();
    eventually("the empty Service to be rejected", 30, || {
        curl(&format!("http://{empty_ip}/")).0 == 7
    });
    let started = Instant::now();
    assert_eq!(curl(&format!("http://{cluster_ip}:81/")).0, 7);
    assert!(started.elapsed() < Duration::from_secs(3));

    // Endpoints that go away stop being used; the Service is rejected once none is left.
    c.ok(&["scale", "deployment", "web", "--replicas", "0"]);
    eventually("web to be rejected after scaling to 0", 60, || {
        curl(&format!("http://{cluster_ip}/")).0 == 7
    });
    c.ok(&["scale", "deployment", "web", "--replicas", "1"]);
    eventually("web to answer again", 60, || {
        curl(&format!("http://{cluster_ip}/")).0 == 0
    });

    // A restart keeps traffic flowing and does not duplicate the table.
    c.server.terminate();
    let (code, _) = curl(&format!("http://{cluster_ip}/"));
    assert_eq!(code, 0, "traffic stopped while k1s was down");
    let args: Vec<&str> = all.iter().map(String::as_str).collect();
    c.server = k1s_tests::Server::start(&c.data_dir(), c.port, &c.kubeconfig, &args);
    eventually("the proxy to sync again", 30, || {
        c.server
            .logged("service proxy: programmed the nftables table")
    });
    // The restarted kubelet probes readiness again (the pod is not ready until its first
    // probe, every second), and the proxy, programming a change in a millisecond, may
    // reject for that moment: traffic must flow again once the probe has run.
    eventually("traffic through the restarted proxy", 10, || {
        curl(&format!("http://{cluster_ip}/")).0 == 0
    });
    let listed = Command::new("nft")
        .args(["list", "table", "ip", &table])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert_eq!(listed.matches("chain nat-prerouting").count(), 1);
    assert_eq!(
        listed.matches(&format!("{cluster_ip} . tcp . 80")).count(),
        1,
        "{listed}"
    );

    c.ok(&["delete", "deployment", "web", "client"]);
    eventually("the pods to go", 60, || {
        pod_names(&c, "web").is_empty() && pod_names(&c, "client").is_empty()
    });
    wait_for_teardown(&c.data_dir());
    c.server.terminate();
}

/// A host outside the node: a network namespace on the node's /24 (a veth into the node
/// address's bridge), removed on drop.
struct Client {
    netns: String,
    ip: String,
}

impl Client {
    fn create(n: u32, node: &NodeAddress) -> Client {
        let netns = format!("k1sc{n}");
        let ip = node.ip.trim_end_matches(".1").to_string() + ".2";
        let (outer, inner) = (format!("k1sc{n}a"), format!("k1sc{n}b"));
        let _ = Command::new("ip").args(["netns", "del", &netns]).status();
        let _ = Command::new("ip").args(["link", "del", &outer]).status();
        let run = |args: &[&str]| {
            assert!(
                Command::new("ip").args(args).status().unwrap().success(),
                "ip {args:?}"
            )
        };
        run(&["netns", "add", &netns]);
        run(&[
            "link", "add", &outer, "type", "veth", "peer", "name", &inner,
        ]);
        run(&["link", "set", &inner, "netns", &netns]);
        run(&["link", "set", &outer, "master", &node.link]);
        run(&["link", "set", &outer, "up"]);
        let inside = |args: &[&str]| {
            let mut full = vec!["netns", "exec", &netns, "ip"];
            full.extend_from_slice(args);
            run(&full);
        };
        inside(&["addr", "add", &format!("{ip}/24"), "dev", &inner]);
        inside(&["link", "set", &inner, "up"]);
        inside(&["link", "set", "lo", "up"]);
        inside(&["route", "add", "default", "via", &node.ip]);
        Client { netns, ip }
    }

    /// `curl` from the client: (exit code, body).
    fn curl(&self, url: &str) -> (i32, String) {
        let out = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.netns,
                "curl",
                "-sS",
                "--max-time",
                "3",
                url,
            ])
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.netns])
            .status();
    }
}

/// httpd with a CGI script that answers with the client's address as the pod saw it, and a
/// hostPort.
fn echo(image: &str, host_port: u16) -> String {
    format!(
        r#"{{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {{"name": "echo"}},
          "spec": {{"replicas": 1, "selector": {{"matchLabels": {{"app": "echo"}}}},
            "template": {{"metadata": {{"labels": {{"app": "echo"}}}},
              "spec": {{"terminationGracePeriodSeconds": 1, "containers": [{{"name": "httpd",
                "image": "{image}", "command": ["sh", "-c",
                "mkdir -p /www/cgi-bin && printf '#!/bin/sh\\necho Content-Type: text/plain\\necho\\necho $REMOTE_ADDR\\n' > /www/cgi-bin/ip && chmod +x /www/cgi-bin/ip && hostname > /www/index.html && exec httpd -f -p 8080 -h /www"],
                "ports": [{{"containerPort": 8080, "hostPort": {host_port}}}],
                "readinessProbe": {{"tcpSocket": {{"port": 8080}}, "periodSeconds": 1}}}}]}}}}}}}}"#
    )
}

/// The client address busybox httpd gives a CGI script (`[::ffff:100.64.0.2]`), plain.
fn remote(body: &str) -> String {
    body.trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .trim_start_matches("::ffff:")
        .to_string()
}

/// A UDP server inside a pod's network namespace (the test image has no UDP server: a
/// Python one runs in the pod's namespace instead), answering every datagram with `tag`.
struct UdpServer(std::process::Child);

impl UdpServer {
    fn start(c: &Cluster, pod: &str, tag: &str) -> UdpServer {
        let uid = json(c, &["get", "pod", pod, "-o", "json"])["metadata"]["uid"]
            .as_str()
            .unwrap()
            .to_string();
        let netns = c.data_dir().join(format!("agent/pods/{uid}/ns/net"));
        let script = format!(
            "import socket\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\ns.bind(('0.0.0.0',5353))\nwhile True:\n    d,a=s.recvfrom(100)\n    s.sendto(b'{tag}',a)\n"
        );
        let child = Command::new("nsenter")
            .arg(format!("--net={}", netns.display()))
            .args(["python3", "-c", &script])
            .spawn()
            .unwrap();
        UdpServer(child)
    }
}

impl Drop for UdpServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One UDP exchange with `ip:port` from the fixed local port `sport` (so the kernel's
/// conntrack entry is the same flow each time); the answer, or "" after a second.
fn udp_ask(ip: &str, port: u16, sport: u16) -> String {
    let script = format!(
        "import socket\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\ns.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\ns.bind(('0.0.0.0',{sport}))\ns.settimeout(1)\ns.sendto(b'?',('{ip}',{port}))\ntry:\n    print(s.recv(100).decode())\nexcept Exception:\n    pass\n"
    );
    let out = Command::new("python3")
        .args(["-c", &script])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn external_clients_local_policy_health_checks_host_ports_udp_and_in_cluster_clients() {
    let Some(images) = Images::start() else {
        return;
    };
    if Command::new("nft").arg("--version").output().is_err() {
        eprintln!("SKIP: nft is not installed (apt-get install nftables)");
        return;
    }
    let python = k1s_tests::test_tools().join("pyvenv/bin/python");
    let n = (std::process::id() % 400) * 2 + 1;
    let table = format!("k1s-proxy-t{n}");
    let node = NodeAddress::create(n, &table);
    let client = Client::create(n, &node);
    let flags = proxy_flags(&images.kubelet_flags("ext"), &table);
    let _cleanup = HostCleanup(flags.clone());
    let service_cidr = "10.237.0.0/16";
    let mut all = flags.clone();
    all.extend(
        [
            "--service-cidr",
            service_cidr,
            "--node-ip",
            &node.ip,
            "--bind-address",
            "0.0.0.0",
        ]
        .map(String::from),
    );
    let Some(mut c) = start_with_kubelet("ext", &all) else {
        return;
    };
    let host_port = k1s_tests::free_port();
    c.ok_stdin(&["create", "-f", "-"], &echo(&images.busybox(), host_port));
    c.ok(&["rollout", "status", "deployment/echo", "--timeout=120s"]);
    let pod = pod_names(&c, "echo").remove(0);

    // externalTrafficPolicy Local on a load balancer: the pod sees the client's own address,
    // and the health check port says the node has an endpoint.
    c.ok(&[
        "expose",
        "deployment",
        "echo",
        "--name",
        "lb",
        "--port",
        "8082",
        "--target-port",
        "8080",
        "--type",
        "LoadBalancer",
    ]);
    c.ok(&[
        "patch",
        "service",
        "lb",
        "-p",
        r#"{"spec": {"externalTrafficPolicy": "Local"}}"#,
    ]);
    let svc = json(&c, &["get", "service", "lb", "-o", "json"]);
    let node_port = svc["spec"]["ports"][0]["nodePort"].as_u64().unwrap();
    let check = svc["spec"]["healthCheckNodePort"]
        .as_u64()
        .expect("a health check port for a Local load balancer");
    eventually("the client's own address inside the pod", 30, || {
        let (code, body) = client.curl(&format!("http://{}:{node_port}/cgi-bin/ip", node.ip));
        code == 0 && remote(&body) == client.ip
    });
    eventually(
        "the load balancer address with the client's address",
        30,
        || {
            let (code, body) = client.curl(&format!("http://{}:8082/cgi-bin/ip", node.ip));
            code == 0 && remote(&body) == client.ip
        },
    );
    eventually(
        "the health check to answer 200 with one local endpoint",
        30,
        || {
            let (code, body) = client.curl(&format!("http://{}:{check}/", node.ip));
            code == 0 && body.contains(r#""localEndpoints":1"#)
        },
    );
    // With Cluster the client's address is masqueraded away, and the check port is released.
    c.ok(&[
        "patch",
        "service",
        "lb",
        "-p",
        r#"{"spec": {"externalTrafficPolicy": "Cluster"}}"#,
    ]);
    assert!(
        json(&c, &["get", "service", "lb", "-o", "json"])["spec"]["healthCheckNodePort"].is_null()
    );
    eventually("a masqueraded address inside the pod", 30, || {
        let (code, body) = client.curl(&format!("http://{}:{node_port}/cgi-bin/ip", node.ip));
        code == 0 && !remote(&body).is_empty() && remote(&body) != client.ip
    });
    eventually("the health check port to close", 30, || {
        client.curl(&format!("http://{}:{check}/", node.ip)).0 == 7
    });

    // hostPort: from another host to the node address, and from this host to 127.0.0.1.
    eventually("the hostPort from the client", 30, || {
        let (code, body) = client.curl(&format!("http://{}:{host_port}/", node.ip));
        code == 0 && body.trim() == pod
    });
    let (code, body) = curl(&format!("http://127.0.0.1:{host_port}/"));
    assert_eq!((code, body.trim()), (0, pod.as_str()));

    // The official Python client's in-cluster configuration, from the pod's network
    // namespace with the pod's own ServiceAccount token and CA, through the kubernetes
    // Service.
    if python.is_file() {
        c.ok(&[
            "create",
            "rolebinding",
            "sa-view",
            "--clusterrole=view",
            "--serviceaccount=default:default",
        ]);
        let sa = c.data_dir().join("sa");
        std::fs::create_dir_all(&sa).unwrap();
        for f in ["token", "ca.crt"] {
            let out = c.ok(&[
                "exec",
                &pod,
                "--",
                "cat",
                &format!("/var/run/secrets/kubernetes.io/serviceaccount/{f}"),
            ]);
            std::fs::write(sa.join(f), out).unwrap();
        }
        let uid = json(&c, &["get", "pod", &pod, "-o", "json"])["metadata"]["uid"]
            .as_str()
            .unwrap()
            .to_string();
        let script = format!(
            "from kubernetes import client\nfrom kubernetes.config.incluster_config import InClusterConfigLoader\nInClusterConfigLoader(token_filename='{t}', cert_filename='{ca}').load_and_set()\nprint(sorted(p.metadata.name for p in client.CoreV1Api().list_namespaced_pod('default').items))\n",
            t = sa.join("token").display(),
            ca = sa.join("ca.crt").display()
        );
        let out = Command::new("nsenter")
            .arg(format!(
                "--net={}",
                c.data_dir()
                    .join(format!("agent/pods/{uid}/ns/net"))
                    .display()
            ))
            .arg(&python)
            .args(["-c", &script])
            .env("KUBERNETES_SERVICE_HOST", "10.237.0.1")
            .env("KUBERNETES_SERVICE_PORT", "443")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains(&pod),
            "in-cluster client: {stdout} {}",
            String::from_utf8_lossy(&out.stderr)
        );
    } else {
        k1s_tests::missing("the Python kubernetes client venv");
    }

    // UDP: a Service answers; when its endpoint is replaced, the same client flow (same
    // source port) reaches the new one at once (the stale conntrack entry was deleted).
    c.ok_stdin(
        &["create", "-f", "-"],
        r#"{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "udp"},
            "spec": {"selector": {"app": "echo"}, "ports": [{"port": 5353, "protocol": "UDP"}]}}"#,
    );
    let udp_ip = json(&c, &["get", "service", "udp", "-o", "json"])["spec"]["clusterIP"]
        .as_str()
        .unwrap()
        .to_string();
    let sport = k1s_tests::free_port();
    let first = UdpServer::start(&c, &pod, "A");
    eventually("the UDP Service to answer", 30, || {
        udp_ask(&udp_ip, 5353, sport) == "A"
    });
    c.ok(&["delete", "pod", &pod, "--wait=false"]);
    let mut replacement = String::new();
    eventually("a new echo pod", 60, || {
        replacement = pod_names(&c, "echo")
            .into_iter()
            .find(|p| *p != pod)
            .unwrap_or_default();
        !replacement.is_empty()
            && json(&c, &["get", "pod", &replacement, "-o", "json"])["status"]["podIP"].is_string()
    });
    drop(first);
    let _second = UdpServer::start(&c, &replacement, "B");
    eventually("the same flow to reach the new endpoint", 30, || {
        udp_ask(&udp_ip, 5353, sport) == "B"
    });

    c.ok(&["delete", "deployment", "echo"]);
    eventually("the pods to go", 60, || pod_names(&c, "echo").is_empty());
    wait_for_teardown(&c.data_dir());
    c.server.terminate();
}
