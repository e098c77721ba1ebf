//! End to end, issue #7: `k1s agent` joins a `k1s server` with the join token, runs real
//! containers, and the API server reaches its kubelet over HTTPS on the kubelet port for
//! `kubectl logs` (-f), `exec` (-i, exit codes), `port-forward`, `cp` and the node proxy.
//! The kubelet port takes only the API server's client certificate. The server is a node
//! too (reached in process), so the test pins pods to the nodes. Needs root and the local
//! registry tools, like tests/tests/kubelet.rs; skips visibly otherwise.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use k1s_tests::host::{HostCleanup, Images, start_with_kubelet};
use k1s_tests::{Cluster, Server, eventually};
use serde_json::Value;

fn pod(c: &Cluster, name: &str) -> Value {
    serde_json::from_slice(&c.run(&["get", "pod", name, "-o", "json"]).stdout)
        .unwrap_or(Value::Null)
}

/// `kubectl run NAME` of the test image on `node`, running `script` with `sh -c`; waits until
/// it is Running.
fn run_on(c: &Cluster, image: &str, name: &str, node: &str, script: &str) {
    let pin = format!(r#"{{"spec": {{"nodeSelector": {{"kubernetes.io/hostname": "{node}"}}}}}}"#);
    c.ok(&[
        "run",
        name,
        &format!("--image={image}"),
        "--overrides",
        &pin,
        "--command",
        "--",
        "sh",
        "-c",
        script,
    ]);
    eventually(&format!("{name} to be Running on {node}"), 90, || {
        pod(c, name)["status"]["phase"] == "Running"
    });
    assert_eq!(pod(c, name)["spec"]["nodeName"], node);
}

/// `curl` of the kubelet port on 127.0.0.1:`port` with the client certificate `cert` (a
/// `(crt, key)` pair of files), trusting the cluster CA: the status code.
fn kubelet_port(c: &Cluster, port: u16, path: &str, cert: Option<(&str, &str)>) -> u16 {
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "-o", "/dev/null", "-w", "%{http_code}", "--cacert"])
        .arg(c.data_dir().join("tls/ca.crt"));
    if let Some((crt, key)) = cert {
        cmd.args(["--cert", crt, "--key", key]);
    }
    let out = cmd
        .arg(format!("https://127.0.0.1:{port}{path}"))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0)
}

/// The agent's proxy table, which outlives the agent by design: removed on drop.
struct ProxyTable(String);

impl Drop for ProxyTable {
    fn drop(&mut self) {
        let _ = Command::new("nft")
            .args(["delete", "table", "ip", &self.0])
            .status();
    }
}

#[test]
fn an_agent_joins_and_its_pods_are_reached_through_its_kubelet_port() {
    let Some(images) = Images::start() else {
        return;
    };
    // The agent runs its service proxy (its own table, a service CIDR no other test uses):
    // with the node's credentials it watches Services and EndpointSlices.
    let table = format!("k1s-proxy-a{}", std::process::id() % 1000);
    let _table = ProxyTable(table.clone());
    let service_cidr = ["--service-cidr".to_string(), "10.236.0.0/16".to_string()];
    let mut flags = k1s_tests::proxy_flags(&images.kubelet_flags("agent"), &table);
    flags.extend(service_cidr.clone());
    let _cleanup = HostCleanup(flags.clone());
    // The server is a node too: two kubelets on this machine, each with its own bridge,
    // cgroup tree and pod CIDR.
    let mut server_flags = images.kubelet_flags("server");
    server_flags.extend(service_cidr);
    let _server_cleanup = HostCleanup(server_flags.clone());
    let Some(mut c) = start_with_kubelet("server", &server_flags) else {
        return;
    };
    let token = std::fs::read_to_string(c.data_dir().join("server/token")).unwrap();
    let agent_dir = c.dir.path().join("agent");
    let port: u16 = flags[flags.iter().position(|f| f == "--kubelet-port").unwrap() + 1]
        .parse()
        .unwrap();
    let args: Vec<&str> = flags.iter().map(String::as_str).collect();

    // A wrong token is refused with a reason, and nothing is saved.
    let wrong = format!("K10{}::server:wrong-secret", "0".repeat(64));
    let out = Command::new(k1s_tests::agent_bin())
        .args(["agent", "--data-dir"])
        .arg(&agent_dir)
        .args(["--server", &format!("https://127.0.0.1:{}", c.port)])
        .args(["--token", &wrong])
        .args(&args)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("does not match the CA hash"), "{err}");
    assert!(!agent_dir.join("agent/pki/client.key").exists());

    let agent = Server::spawn_agent(&agent_dir, c.port, token.trim(), &args);
    agent.wait_for_log("joined: node credentials issued");
    agent.wait_for_log("kubelet port listening");
    eventually("the agent's node to be Ready", 60, || {
        let n: Value =
            serde_json::from_slice(&c.run(&["get", "node", "node-agent", "-o", "json"]).stdout)
                .unwrap_or_default();
        n["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
    });
    let node: Value =
        serde_json::from_slice(&c.run(&["get", "node", "node-agent", "-o", "json"]).stdout)
            .unwrap();
    assert_eq!(
        node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"],
        u64::from(port)
    );
    assert!(
        node["metadata"]["labels"]["node-role.kubernetes.io/control-plane"].is_null(),
        "an agent is no control-plane node"
    );
    eventually("the default ServiceAccount", 30, || {
        c.run(&["get", "sa", "default"]).status.success()
    });

    let image = images.busybox();
    run_on(
        &c,
        &image,
        "web",
        "node-agent",
        "echo hello from the agent; mkdir -p /www; echo page > /www/index.html; \
         exec httpd -f -p 8080 -h /www",
    );
    // The agent's proxy routes a ClusterIP to its pod.
    c.ok(&[
        "expose",
        "pod",
        "web",
        "--port",
        "80",
        "--target-port",
        "8080",
    ]);
    let ip = serde_json::from_str::<Value>(&c.ok(&["get", "service", "web", "-o", "json"]))
        .unwrap()["spec"]["clusterIP"]
        .as_str()
        .unwrap()
        .to_string();
    eventually("the agent's proxy to route the ClusterIP", 60, || {
        let out = Command::new("curl")
            .args(["-sS", "--max-time", "3", &format!("http://{ip}/")])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim() == "page"
    });
    assert!(agent.logged("service proxy: programmed the nftables table"));
    // The agent's cluster DNS server announced itself with the node's credentials, is the
    // agent's endpoint of kube-dns, and answers the agent's pods through the kube-dns
    // ClusterIP (internalTrafficPolicy Local: the agent's own server).
    eventually(
        "the agent's DNS server among the kube-dns endpoints",
        60,
        || {
            let eps: Value = serde_json::from_slice(
                &c.run(&[
                    "get",
                    "endpoints",
                    "-n",
                    "kube-system",
                    "kube-dns",
                    "-o",
                    "json",
                ])
                .stdout,
            )
            .unwrap_or_default();
            eps["subsets"][0]["addresses"]
                .as_array()
                .is_some_and(|a| a.iter().any(|a| a["nodeName"] == "node-agent"))
        },
    );
    eventually("the agent's pod to resolve a Service", 30, || {
        let out = c.run(&[
            "exec",
            "web",
            "--",
            "nslookup",
            "web.default.svc.cluster.local",
        ]);
        String::from_utf8_lossy(&out.stdout).contains(&ip)
    });
    // A pod on the server's own node is still reached in process.
    run_on(
        &c,
        &image,
        "local",
        "node-server",
        "echo hello from the server; exec sleep 3600",
    );
    assert_eq!(c.ok(&["logs", "local"]).trim(), "hello from the server");
    assert_eq!(c.ok(&["exec", "local", "--", "echo", "in"]), "in\n");

    // Logs, plain and followed.
    assert_eq!(c.ok(&["logs", "web"]).trim(), "hello from the agent");
    let mut follow = Command::new(&c.kubectl)
        .arg("--kubeconfig")
        .arg(&c.kubeconfig)
        .args(["logs", "-f", "web"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(follow.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert_eq!(first.trim(), "hello from the agent");
    assert!(
        follow.try_wait().unwrap().is_none(),
        "logs -f ended by itself"
    );
    let _ = follow.kill();
    let _ = follow.wait();

    // exec: output, exit codes, stdin, an unknown command.
    let out = c.run(&[
        "exec",
        "web",
        "--",
        "sh",
        "-c",
        "echo out; echo err >&2; exit 3",
    ]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "out\n");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).lines().next(),
        Some("err")
    );
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(
        c.ok_stdin(&["exec", "-i", "web", "--", "cat"], "piped\n"),
        "piped\n"
    );
    let err = c.fails(&["exec", "web", "--", "/no/such/binary"]);
    assert!(err.contains("no/such/binary"), "{err}");

    // port-forward to the pod's httpd.
    let mut pf = Command::new(&c.kubectl)
        .arg("--kubeconfig")
        .arg(&c.kubeconfig)
        .args(["port-forward", "pod/web", ":8080"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Kept until kubectl ends: it writes a line per connection, and dies of a closed pipe.
    let mut pf_out = BufReader::new(pf.stdout.take().unwrap());
    let mut line = String::new();
    pf_out.read_line(&mut line).unwrap();
    let local: u16 = line
        .split("127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("port-forward said {line:?}"));
    let mut s = std::net::TcpStream::connect(("127.0.0.1", local)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(b"GET /index.html HTTP/1.0\r\n\r\n").unwrap();
    let mut reply = String::new();
    // httpd closes the connection: the close must reach the client through both hops.
    s.read_to_string(&mut reply).unwrap();
    let _ = pf.kill();
    drop(pf_out);
    let pf_err = pf.wait_with_output().unwrap().stderr;
    assert!(
        reply.starts_with("HTTP/1.") && reply.ends_with("page\n"),
        "{reply:?}; kubectl: {}",
        String::from_utf8_lossy(&pf_err)
    );

    // cp (tar over exec).
    let copied = c.dir.path().join("index.html");
    c.ok(&["cp", "web:/www/index.html", copied.to_str().unwrap()]);
    assert_eq!(std::fs::read_to_string(&copied).unwrap(), "page\n");

    // The node proxy: the summary API and /pods of the agent's kubelet.
    let summary: Value = serde_json::from_str(&c.ok(&[
        "get",
        "--raw",
        "/api/v1/nodes/node-agent/proxy/stats/summary",
    ]))
    .unwrap();
    assert_eq!(summary["node"]["nodeName"], "node-agent");
    assert!(
        summary["pods"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["podRef"]["name"] == "web"),
        "{summary}"
    );
    let pods = c.ok(&["get", "--raw", "/api/v1/nodes/node-agent/proxy/pods"]);
    assert!(pods.contains("\"web\""), "{pods}");

    // The kubelet port: no certificate 401, the node's own 403, an admin's 200.
    let pki = agent_dir.join("agent/pki");
    let (node_crt, node_key) = (pki.join("client.crt"), pki.join("client.key"));
    let tls = c.data_dir().join("tls");
    let (admin_crt, admin_key) = (tls.join("admin.crt"), tls.join("admin.key"));
    assert_eq!(kubelet_port(&c, port, "/pods", None), 401);
    assert_eq!(
        kubelet_port(
            &c,
            port,
            "/pods",
            Some((node_crt.to_str().unwrap(), node_key.to_str().unwrap()))
        ),
        403
    );
    assert_eq!(
        kubelet_port(
            &c,
            port,
            "/pods",
            Some((admin_crt.to_str().unwrap(), admin_key.to_str().unwrap()))
        ),
        200
    );

    // Its Lease is renewed, and nothing it does as `system:node:node-agent` is refused.
    c.ok(&["get", "lease", "-n", "kube-node-lease", "node-agent"]);
    assert!(
        !agent.logged("Forbidden"),
        "the agent was refused something"
    );

    // A restarted agent keeps its credentials and its running container.
    let mut agent = agent;
    let lines = agent.terminate();
    assert!(
        !lines.iter().any(|l| l.contains("ERROR")),
        "errors at shutdown: {lines:?}"
    );
    let restarted = Server::spawn_agent(&agent_dir, c.port, token.trim(), &args);
    restarted.wait_for_log("using the node credentials issued before");
    restarted.wait_for_log("kubelet port listening");
    eventually("exec through the restarted agent", 60, || {
        c.run(&["exec", "web", "--", "echo", "still here"])
            .stdout
            .starts_with(b"still here")
    });
    assert_eq!(
        pod(&c, "web")["status"]["containerStatuses"][0]["restartCount"],
        0
    );

    // A restarted server: the agent's kubelet watches again and runs a new pod.
    c.server.terminate();
    let server_args: Vec<&str> = server_flags.iter().map(String::as_str).collect();
    c.server = Server::start(&c.data_dir(), c.port, &c.kubeconfig, &server_args);
    run_on(
        &c,
        &image,
        "later",
        "node-agent",
        "echo after the restart; exec sleep 3600",
    );
    assert_eq!(c.ok(&["logs", "later"]).trim(), "after the restart");
    c.ok(&["delete", "pod", "later", "--grace-period=1", "--wait=true"]);

    // Graceful deletion through the agent.
    c.ok(&["delete", "pod", "web", "--grace-period=1", "--wait=true"]);
    c.ok(&["delete", "pod", "local", "--grace-period=1", "--wait=true"]);
    k1s_tests::host::wait_for_teardown(c.dir.path());
    restarted.stop();
}
