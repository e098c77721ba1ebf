//! End to end, issue #30, the whole scenario: three etcd members and three `k1s server`s on
//! loopback (the second and third joined with `--server` and `--token` only), plus one
//! agent with real containers.
//!
//! - The first server's admin certificate, a ServiceAccount token it issued and the agent's
//!   node certificate are accepted by every server.
//! - The server holding both leases (scheduler, controller manager) — and the one the agent
//!   joined through — is SIGKILLed during a Deployment rollout and a stream of writes: the
//!   others take the leases, the rollout finishes, every acknowledged write is readable, and a
//!   watch resumed on another server from a resourceVersion of before misses nothing.
//! - The agent's node stays Ready and its pods Running (same pods, no restart) through it.
//! - A snapshot taken under the write load restores into a fresh data directory with the
//!   objects and their resourceVersions.
//! - One etcd member killed: everything works; two: writes fail with a clear error, `/readyz`
//!   fails; both back: writes work again and nothing acknowledged is lost.
//!
//! Real binary, real etcd (Debian's etcd-server; skipped with K1S_SKIP_ETCD=1), real
//! containers (root and the local registry tools; skipped visibly otherwise).

#[path = "../../store/tests/support/etcd.rs"]
mod etcd_support;

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use k1s_tests::host::{HostCleanup, Images};
use k1s_tests::{Cluster, Server, eventually, k1s_ok};
use serde_json::{Value, json};

fn json_of(c: &Cluster, args: &[&str]) -> Value {
    serde_json::from_slice(&c.run(args).stdout).unwrap_or(Value::Null)
}

/// `kubectl` against the server at `url` with the first server's admin kubeconfig.
fn at(c: &Cluster, url: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec!["--server", url, "--request-timeout", "20s"];
    all.extend_from_slice(args);
    c.run(&all)
}

fn lease_holder(c: &Cluster, url: &str, name: &str) -> String {
    let out = at(
        c,
        url,
        &["get", "lease", name, "-n", "kube-system", "-o", "json"],
    );
    serde_json::from_slice::<Value>(&out.stdout).unwrap_or(Value::Null)["spec"]["holderIdentity"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The status code of a GET of `path` on `url` (trusting `ca`) with `auth` (curl flags).
fn curl(ca: &std::path::Path, url: &str, path: &str, auth: &[&str]) -> String {
    let out = Command::new("curl")
        .args(["-sS", "-o", "/dev/null", "-w", "%{http_code}", "--cacert"])
        .arg(ca)
        .args(auth)
        .arg(format!("{url}{path}"))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn ready(c: &Cluster, url: &str, node: &str) -> bool {
    let n: Value = serde_json::from_slice(&at(c, url, &["get", "node", node, "-o", "json"]).stdout)
        .unwrap_or_default();
    n["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

#[test]
fn three_servers_on_three_etcd_members_survive_a_leader_and_a_member() {
    let Some(mut etcd) = etcd_support::EtcdCluster::start_or_skip(3) else {
        return;
    };
    let Some(images) = Images::start() else {
        return;
    };
    let flags = images.kubelet_flags("ha3");
    let _cleanup = HostCleanup(flags.clone());
    let endpoints = etcd.endpoints();

    // The first server takes both leases before the others exist.
    let Some(mut first) = Cluster::start(&["--datastore-endpoint", &endpoints]) else {
        return;
    };
    let token = std::fs::read_to_string(first.data_dir().join("server/token")).unwrap();
    let token = token.trim().to_string();
    let url = |c: &Cluster| format!("https://127.0.0.1:{}", c.port);
    let url1 = url(&first);
    eventually("the first server to hold both leases", 40, || {
        ["kube-scheduler", "kube-controller-manager"]
            .iter()
            .all(|l| {
                let h = lease_holder(&first, &url1, l);
                !h.is_empty() && first.server.logged(&h)
            })
    });
    let Some(second) = Cluster::start(&["--server", &url1, "--token", &token]) else {
        return;
    };
    let Some(third) = Cluster::start(&["--server", &url1, "--token", &token]) else {
        return;
    };
    let (url2, url3) = (url(&second), url(&third));
    let urls = [url1.clone(), url2.clone(), url3.clone()];

    // The agent joins through the first server.
    let agent_dir = first.dir.path().join("agent");
    let args: Vec<&str> = flags.iter().map(String::as_str).collect();
    let agent = Server::spawn_agent(&agent_dir, first.port, &token, &args);
    agent.wait_for_log("joined: node credentials issued");
    eventually("the agent's node to be Ready", 60, || {
        ready(&first, &url2, "node-ha3")
    });
    eventually("the default ServiceAccount", 30, || {
        at(&first, &url3, &["get", "sa", "default"])
            .status
            .success()
    });

    // Credentials from one server are good on every server.
    let sa_token = first.service_account_token();
    let pki = agent_dir.join("agent/pki");
    let ca = pki.join("ca.crt");
    let bearer = format!("Authorization: Bearer {sa_token}");
    let (cert, key) = (pki.join("client.crt"), pki.join("client.key"));
    let node_cert = [
        "--cert",
        cert.to_str().unwrap(),
        "--key",
        key.to_str().unwrap(),
    ];
    for u in &urls {
        let admin = at(&first, u, &["get", "namespaces", "-o", "name"]);
        assert!(admin.status.success(), "admin on {u}");
        // The ServiceAccount may not list pods, but it is authenticated (403, not 401).
        let sa = curl(&ca, u, "/api/v1/namespaces/default/pods", &["-H", &bearer]);
        assert_eq!(sa, "403", "ServiceAccount token on {u}");
        let node = curl(&ca, u, "/api/v1/nodes/node-ha3", &node_cert);
        assert_eq!(node, "200", "agent on {u}");
    }

    // A bare pod and a Deployment on the agent.
    let image = images.busybox();
    let pin = json!({"kubernetes.io/hostname": "node-ha3"});
    first.ok_stdin(
        &["create", "-f", "-"],
        &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "steady"},
            "spec": {"nodeSelector": pin, "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "c", "image": image, "command": ["sleep", "3600"]}]}})
        .to_string(),
    );
    first.ok_stdin(
        &["create", "-f", "-"],
        &json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"nodeSelector": pin, "terminationGracePeriodSeconds": 1,
                        "containers": [{"name": "c", "image": image, "command": ["sleep", "3600"],
                            "env": [{"name": "V", "value": "1"}]}]}}}})
        .to_string(),
    );
    first.ok(&["rollout", "status", "deployment/web", "--timeout=120s"]);
    let steady = json_of(&first, &["get", "pod", "steady", "-o", "json"]);
    assert_eq!(steady["status"]["phase"], "Running");
    let steady_uid = steady["metadata"]["uid"].clone();

    // A stream of writes through the second server, from here to after the failover.
    let list_rv =
        json_of(&first, &["get", "configmaps", "-o", "json"])["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_string();
    let acked: Arc<Mutex<Vec<String>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (acked, stop) = (acked.clone(), stop.clone());
        let kubeconfig = first.kubeconfig.clone();
        let kubectl = first.kubectl.clone();
        let url2 = url2.clone();
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let name = format!("cm-{i}");
                let out = Command::new(&kubectl)
                    .arg("--kubeconfig")
                    .arg(&kubeconfig)
                    .args(["--server", &url2, "--request-timeout", "20s"])
                    .args(["create", "configmap", &name, "--from-literal=i=x"])
                    .output()
                    .unwrap();
                if out.status.success() {
                    acked.lock().unwrap().push(name);
                }
                i += 1;
            }
        })
    };
    eventually("some writes", 30, || acked.lock().unwrap().len() >= 5);

    // A snapshot under that load (through the first server, before it dies).
    let snap_dir = first.dir.path().join("snaps");
    let before_snapshot: Vec<String> = acked.lock().unwrap().clone();
    let snaps = snap_dir.to_str().unwrap();
    k1s_ok(&[
        "snapshot",
        "save",
        "--kubeconfig",
        first.kubeconfig.to_str().unwrap(),
        "--dir",
        snaps,
    ]);
    // And etcd's own snapshot, straight from etcd (etcdctl restores it; see the store tests).
    k1s_ok(&[
        "snapshot",
        "save",
        "--name",
        "etcd",
        "--datastore-endpoint",
        &endpoints,
        "--dir",
        snaps,
    ]);
    assert!(k1s_ok(&["snapshot", "ls", "--dir", snaps]).contains("(etcd's own snapshot)"));

    // The rollout starts, and the leader dies under it.
    first.ok(&["set", "env", "deployment/web", "V=2"]);
    let leases = ["kube-scheduler", "kube-controller-manager"];
    let holders = leases.map(|l| lease_holder(&first, &url1, l));
    let killed = Instant::now();
    first.server.kill();
    eventually("the survivors to take both leases", 60, || {
        leases.iter().zip(&holders).all(|(l, old)| {
            let h = lease_holder(&second, &url2, l);
            !h.is_empty() && h != *old
        })
    });
    eprintln!(
        "both leases taken over {:.1} s after the kill",
        killed.elapsed().as_secs_f64()
    );
    second.ok(&["rollout", "status", "deployment/web", "--timeout=180s"]);
    let pods = json_of(&second, &["get", "pods", "-l", "app=web", "-o", "json"]);
    let envs: Vec<&Value> = pods["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .map(|p| &p["spec"]["containers"][0]["env"][0]["value"])
        .collect();
    assert!(envs.iter().all(|v| *v == "2"), "{envs:?}");
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();

    // Every acknowledged write is there, and a watch resumed on another server from a
    // resourceVersion read through the dead one sees every one of them.
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() >= 10, "only {} writes", acked.len());
    let listed: Vec<String> = json_of(&third, &["get", "configmaps", "-o", "json"])["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    for name in &acked {
        assert!(listed.contains(name), "{name} was acknowledged and is gone");
    }
    let watched = third.run(&[
        "get",
        "--raw",
        &format!(
            "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={list_rv}&timeoutSeconds=3"
        ),
    ]);
    let events = String::from_utf8_lossy(&watched.stdout);
    for name in &acked {
        assert!(
            events.contains(&format!("\"name\":\"{name}\"")),
            "the watch from {list_rv} missed {name}"
        );
    }

    // The agent went on through the survivors: Ready, the same pod, never restarted.
    assert!(agent.logged("API server reached after failing over"));
    assert!(ready(&second, &url2, "node-ha3"));
    let steady = json_of(&third, &["get", "pod", "steady", "-o", "json"]);
    assert_eq!(steady["metadata"]["uid"], steady_uid);
    assert_eq!(steady["status"]["phase"], "Running");
    assert_eq!(steady["status"]["containerStatuses"][0]["restartCount"], 0);

    // The snapshot: restored into a fresh data directory, the objects with their versions.
    let rvs: BTreeMap<String, String> =
        json_of(&second, &["get", "configmaps", "-o", "json"])["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["metadata"]["name"].as_str().unwrap().to_string(),
                    c["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap()
                        .to_string(),
                )
            })
            .collect();
    let file = std::fs::read_dir(&snap_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "snap"))
        .unwrap();
    let restored_dir = tempfile::tempdir().unwrap();
    let restored_data = restored_dir.path().join("data");
    k1s_ok(&[
        "snapshot",
        "restore",
        file.to_str().unwrap(),
        "--data-dir",
        restored_data.to_str().unwrap(),
    ]);
    {
        let Some(restored) = Cluster::start_in(restored_dir, &["--token", &token]) else {
            return;
        };
        for name in &before_snapshot {
            let rv = restored.ok(&[
                "get",
                "configmap",
                name,
                "-o",
                "jsonpath={.metadata.resourceVersion}",
            ]);
            assert_eq!(Some(&rv), rvs.get(name), "{name} in the snapshot");
        }
    }

    // etcd: one member down is nothing.
    etcd.kill(0);
    let one_down = at(&second, &url2, &["create", "configmap", "one-member-down"]);
    assert!(
        one_down.status.success(),
        "{}",
        String::from_utf8_lossy(&one_down.stderr)
    );
    // Two down: no quorum. Writes fail and say so; readiness fails.
    etcd.kill(1);
    let no_quorum = at(&second, &url2, &["create", "configmap", "no-quorum"]);
    assert!(!no_quorum.status.success());
    let said = String::from_utf8_lossy(&no_quorum.stderr).into_owned();
    eprintln!("a write without quorum: {said}");
    assert!(
        said.contains("etcd") || said.contains("datastore") || said.contains("timed out"),
        "{said}"
    );
    let read = at(&second, &url2, &["get", "configmap", "one-member-down"]);
    assert!(
        !read.status.success(),
        "a read without quorum is not served stale"
    );
    let said = String::from_utf8_lossy(&read.stderr).into_owned();
    eprintln!("a read without quorum: {said}");
    assert!(said.contains("etcd"), "{said}");
    eventually("/readyz to fail without quorum", 30, || {
        !at(&second, &url2, &["get", "--raw", "/readyz"])
            .status
            .success()
    });
    // Quorum back: writes work, nothing acknowledged is lost.
    etcd.restart(0);
    etcd.restart(1);
    etcd.wait_healthy(0);
    etcd.wait_healthy(1);
    eventually("writes after quorum returns", 60, || {
        at(&second, &url2, &["create", "configmap", "quorum-back"])
            .status
            .success()
    });
    let listed =
        String::from_utf8_lossy(&at(&third, &url3, &["get", "configmaps", "-o", "name"]).stdout)
            .into_owned();
    for name in acked.iter().map(String::as_str).chain(["one-member-down"]) {
        assert!(
            listed.contains(&format!("configmap/{name}\n")),
            "{name} lost"
        );
    }
}
