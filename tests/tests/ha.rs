//! End to end, issue #30: several `k1s server`s on one etcd are one cluster. The first
//! server publishes the cluster identity (CA, ServiceAccount key) to the datastore, sealed
//! with its token; a second server given that token takes it over, so the first server's
//! admin kubeconfig and ServiceAccount tokens work on the second; a server with another
//! token stops with a message that says so. The scheduler, like the controller manager,
//! runs on one server at a time (Lease `kube-scheduler`), and the other takes over when the
//! leader dies. A server joins with `--server URL --token T` alone (it asks for the
//! datastore). An agent joined through one server learns the others from the `kubernetes`
//! endpoints and goes on through them when that server dies. Real binary, real etcd
//! (Debian's etcd-server; skipped with K1S_SKIP_ETCD=1), real containers on the agent.

#[path = "../../store/tests/support/etcd.rs"]
mod etcd_support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k1s_tests::host::{HostCleanup, Images};
use k1s_tests::{Cluster, Server, eventually, free_port, k1s_ok};
use serde_json::{Value, json};

fn json_of(c: &Cluster, args: &[&str]) -> Value {
    serde_json::from_str(&c.ok(args)).unwrap_or(Value::Null)
}

fn lease_holder(c: &Cluster, name: &str) -> String {
    json_of(
        c,
        &["get", "lease", name, "-n", "kube-system", "-o", "json"],
    )["spec"]["holderIdentity"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn servers_on_one_etcd_share_one_identity_and_one_scheduler() {
    let Some(etcd) = etcd_support::EtcdServer::start_or_skip() else {
        return;
    };
    let endpoint = etcd.endpoint();
    let Some(first) = Cluster::start(&["--datastore-endpoint", &endpoint]) else {
        return;
    };
    let token = std::fs::read_to_string(first.data_dir().join("server/token")).unwrap();
    let token = token.trim().to_string();

    // A server with another token cannot read the identity: it stops and says why.
    let wrong = tempfile::tempdir().unwrap();
    let mut child = Command::new(k1s_tests::k1s_bin())
        .args(["server", "--data-dir"])
        .arg(wrong.path())
        .args(["--datastore-endpoint", &endpoint])
        .args(["--token", "not-the-cluster-password"])
        .args(["--bind-address", "127.0.0.1", "--https-port"])
        .arg(free_port().to_string())
        .arg("--write-kubeconfig")
        .arg(wrong.path().join("k.yaml"))
        .arg("--disable-agent")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "a server with a wrong token kept running"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(!status.success());
    assert!(
        stderr.contains("whose join token is not this server's"),
        "{stderr}"
    );

    // The second server, given the first one's token, is the same cluster.
    let Some(second) = Cluster::start(&["--datastore-endpoint", &endpoint, "--token", &token])
    else {
        return;
    };
    for f in ["tls/ca.crt", "tls/ca.key", "tls/service-account.key"] {
        assert_eq!(
            std::fs::read(first.data_dir().join(f)).unwrap(),
            std::fs::read(second.data_dir().join(f)).unwrap(),
            "{f}"
        );
    }
    // The first server's admin kubeconfig (its client certificate, its CA) on the second.
    let second_url = format!("https://127.0.0.1:{}", second.port);
    let nodes = first.run(&["--server", &second_url, "get", "namespaces", "-o", "name"]);
    assert!(
        nodes.status.success(),
        "{}",
        String::from_utf8_lossy(&nodes.stderr)
    );
    assert!(String::from_utf8_lossy(&nodes.stdout).contains("namespace/default"));
    // A ServiceAccount token issued by the first server, reviewed by the second.
    let sa_token = first.service_account_token();
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
        "spec": {"token": sa_token}});
    let reviewed: Value = serde_json::from_str(
        &second.ok_stdin(&["create", "-f", "-", "-o", "json"], &review.to_string()),
    )
    .unwrap();
    assert_eq!(reviewed["status"]["authenticated"], true, "{reviewed}");
    assert_eq!(
        reviewed["status"]["user"]["username"],
        "system:serviceaccount:default:default"
    );

    // The `kubernetes` endpoints list both servers (one EndpointSlice per port here, since
    // both listen on one address).
    let ports = |c: &Cluster| -> std::collections::BTreeSet<u64> {
        let eps = json_of(
            c,
            &[
                "get",
                "endpoints",
                "kubernetes",
                "-n",
                "default",
                "-o",
                "json",
            ],
        );
        eps["subsets"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|s| s["ports"].as_array().cloned().unwrap_or_default())
            .filter_map(|p| p["port"].as_u64())
            .collect()
    };
    let both: std::collections::BTreeSet<u64> =
        [u64::from(first.port), u64::from(second.port)].into();
    eventually("the kubernetes endpoints to list both servers", 30, || {
        ports(&first) == both
    });
    let slices = first.ok(&[
        "get",
        "endpointslices.discovery.k8s.io",
        "-n",
        "default",
        "-l",
        "kubernetes.io/service-name=kubernetes",
        "-o",
        "name",
    ]);
    assert_eq!(slices.lines().count(), 2, "{slices}");

    // One scheduler and one controller manager for the two servers; the other takes over.
    eventually("a scheduler leader", 30, || {
        !lease_holder(&first, "kube-scheduler").is_empty()
    });
    let holder = lease_holder(&first, "kube-scheduler");
    // The holder's identity (host name and a UUID per start) is in its own log only.
    let (mut leader, survivor) = if first.server.logged(&holder) {
        (first, second)
    } else {
        (second, first)
    };
    leader.server.kill();
    eventually(
        "the surviving server to take the scheduler's lease",
        40,
        || {
            let h = lease_holder(&survivor, "kube-scheduler");
            !h.is_empty() && h != holder
        },
    );
    // The dead server leaves the endpoints once its lease expires.
    eventually(
        "the dead server to leave the kubernetes endpoints",
        40,
        || ports(&survivor) == [u64::from(survivor.port)].into(),
    );
    // And it schedules: a pod gets a node (a stand-in Node; no kubelet runs here).
    survivor.ok_stdin(
        &["create", "-f", "-"],
        &json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "stand-in", "labels": {"kubernetes.io/hostname": "stand-in", "kubernetes.io/os": "linux"}},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                       "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}})
        .to_string(),
    );
    survivor.ok_stdin(
        &["create", "-f", "-"],
        &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
        .to_string(),
    );
    eventually("the survivor's scheduler to bind the pod", 30, || {
        json_of(&survivor, &["get", "pod", "p", "-o", "json"])["spec"]["nodeName"] == "stand-in"
    });
}

/// The Lease a kubelet renews, as last renewed.
fn renewed(c: &Cluster, node: &str) -> String {
    json_of(
        c,
        &["get", "lease", node, "-n", "kube-node-lease", "-o", "json"],
    )["spec"]["renewTime"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn an_agent_fails_over_to_a_surviving_server() {
    let Some(etcd) = etcd_support::EtcdServer::start_or_skip() else {
        return;
    };
    let Some(images) = Images::start() else {
        return;
    };
    let endpoint = etcd.endpoint();
    let flags = images.kubelet_flags("failover");
    let _cleanup = HostCleanup(flags.clone());
    let Some(first) = Cluster::start(&["--datastore-endpoint", &endpoint]) else {
        return;
    };
    let token = std::fs::read_to_string(first.data_dir().join("server/token")).unwrap();
    let token = token.trim().to_string();
    // The second server joins with two flags: it asks the first for the datastore.
    let first_url = format!("https://127.0.0.1:{}", first.port);
    let Some(second) = Cluster::start(&["--server", &first_url, "--token", &token]) else {
        return;
    };

    // The agent joins through the first server and learns both from the endpoints.
    let agent_dir = first.dir.path().join("agent");
    let args: Vec<&str> = flags.iter().map(String::as_str).collect();
    let agent = Server::spawn_agent(&agent_dir, first.port, &token, &args);
    agent.wait_for_log("joined: node credentials issued");
    assert!(second.server.logged("joined: took the cluster's datastore"));
    assert!(
        second
            .data_dir()
            .join("server/join/datastore.json")
            .exists()
    );
    let servers_file = agent_dir.join("agent/servers.json");
    let both = [first.port, second.port].map(|p| format!("127.0.0.1:{p}"));
    eventually("the agent to learn both servers", 60, || {
        let saved = std::fs::read_to_string(&servers_file).unwrap_or_default();
        both.iter().all(|s| saved.contains(s.as_str()))
    });
    let ready = |c: &Cluster| {
        json_of(c, &["get", "node", "node-failover", "-o", "json"])["status"]["conditions"]
            .as_array()
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
    };
    eventually("the agent's node to be Ready", 60, || ready(&second));
    eventually("the default ServiceAccount", 30, || {
        second.run(&["get", "sa", "default"]).status.success()
    });

    // The server it joined through dies: its kubelet goes on through the other one.
    let mut first = first;
    first.server.kill();
    let before = renewed(&second, "node-failover");
    eventually(
        "the node Lease to be renewed through the survivor",
        40,
        || {
            let now = renewed(&second, "node-failover");
            !now.is_empty() && now != before
        },
    );
    assert!(ready(&second));
    let pin = r#"{"spec": {"nodeSelector": {"kubernetes.io/hostname": "node-failover"}}}"#;
    second.ok(&[
        "run",
        "after",
        &format!("--image={}", images.busybox()),
        "--overrides",
        pin,
        "--command",
        "--",
        "sh",
        "-c",
        "echo up after failover; sleep 3600",
    ]);
    eventually(
        "a pod created after the failover to run on the agent",
        90,
        || json_of(&second, &["get", "pod", "after", "-o", "json"])["status"]["phase"] == "Running",
    );
    // Its log comes through the survivor from the agent's kubelet port.
    eventually("the pod's log", 30, || {
        second.run(&["logs", "after"]).stdout == b"up after failover\n"
    });
    assert!(agent.logged("API server reached after failing over"));
}

/// `k1s secrets-encrypt` on `dir` (a server's data directory): its output.
fn secrets_encrypt(dir: &std::path::Path, what: &str) -> String {
    k1s_ok(&["secrets-encrypt", what, "--data-dir", dir.to_str().unwrap()])
}

#[test]
fn encryption_keys_are_the_clusters_and_rotate_on_every_server() {
    let Some(etcd) = etcd_support::EtcdServer::start_or_skip() else {
        return;
    };
    let endpoint = etcd.endpoint();
    let Some(a) = Cluster::start(&["--datastore-endpoint", &endpoint, "--secrets-encryption"])
    else {
        return;
    };
    let token = std::fs::read_to_string(a.data_dir().join("server/token")).unwrap();
    a.ok(&["create", "secret", "generic", "s1", "--from-literal=k=one"]);
    // The second server is not given --secrets-encryption: it takes the cluster's keys.
    let a_url = format!("https://127.0.0.1:{}", a.port);
    let Some(b) = Cluster::start(&["--server", &a_url, "--token", token.trim()]) else {
        return;
    };
    assert_eq!(
        b.ok(&["get", "secret", "s1", "-o", "jsonpath={.data.k}"]),
        "b25l"
    );
    let keys = |dir: &std::path::Path| {
        let status = secrets_encrypt(dir, "status");
        status.lines().skip(1).collect::<Vec<_>>().join("\n")
    };
    assert_eq!(keys(&a.data_dir()), keys(&b.data_dir()));

    // Rotated on the second server: the first one writes with the new key too.
    let rotated = secrets_encrypt(&b.data_dir(), "rotate-keys");
    let new_key = rotated.split_whitespace().nth(2).unwrap().to_string();
    eventually("the first server to take the rotated key", 40, || {
        secrets_encrypt(&a.data_dir(), "status").contains(&format!("keys: {new_key}"))
    });
    eventually("the first server to load it", 20, || {
        a.server.logged("reloaded the encryption configuration")
    });
    a.ok(&["create", "secret", "generic", "s2", "--from-literal=k=two"]);
    for c in [&a, &b] {
        assert_eq!(
            c.ok(&["get", "secret", "s1", "-o", "jsonpath={.data.k}"]),
            "b25l"
        );
        assert_eq!(
            c.ok(&["get", "secret", "s2", "-o", "jsonpath={.data.k}"]),
            "dHdv"
        );
    }
    // The stored bytes say which key: a snapshot carries them as stored.
    let snaps = a.dir.path().join("snaps");
    k1s_ok(&[
        "snapshot",
        "save",
        "--kubeconfig",
        a.kubeconfig.to_str().unwrap(),
        "--dir",
        snaps.to_str().unwrap(),
    ]);
    let file = std::fs::read_dir(&snaps)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let bytes = std::fs::read(file).unwrap();
    let prefix = format!("k8s:enc:aesgcm:v1:{new_key}:");
    let written = bytes
        .windows(prefix.len())
        .filter(|w| *w == prefix.as_bytes())
        .count();
    assert!(written >= 1, "no value under the rotated key");
    assert!(
        !bytes.windows(6).any(|w| w == b"\"dHdv\""),
        "a secret in plaintext"
    );
}
