//! End to end through the real server and kubectl: the node lifecycle controller (a Node
//! whose Lease is never renewed goes NotReady, is tainted, and its pods are evicted per their
//! tolerationSeconds), and the Endpoints, EndpointSlice and disruption controllers following
//! pods marked Ready/NotReady through the status subresource, as a kubelet would.

use std::time::{Duration, Instant};

use k1s_tests::Cluster;
use serde_json::Value;

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

const NODE: &str = r#"{"apiVersion": "v1", "kind": "Node",
  "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1", "kubernetes.io/os": "linux"}},
  "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
             "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
             "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}"#;

fn pod(name: &str, tolerations: &str) -> String {
    format!(
        r#"{{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "{name}"}},
  "spec": {{"nodeName": "n1", "tolerations": {tolerations},
           "containers": [{{"name": "c", "image": "busybox"}}]}}}}"#
    )
}

fn condition(obj: &Value, type_: &str) -> Value {
    obj["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_).cloned())
        .unwrap_or_default()
}

fn mark(c: &Cluster, pod: &str, ip: &str, ready: bool) {
    let status = if ready { "True" } else { "False" };
    let patch = format!(
        r#"{{"status": {{"phase": "Running", "podIP": "{ip}", "podIPs": [{{"ip": "{ip}"}}],
            "conditions": [{{"type": "Ready", "status": "{status}"}}]}}}}"#
    );
    c.ok(&[
        "patch",
        "pod",
        pod,
        "--subresource=status",
        "--type=merge",
        "-p",
        &patch,
    ]);
}

#[test]
fn a_node_without_lease_renewals_goes_not_ready_and_its_pods_are_evicted() {
    let Some(c) = Cluster::start(&["--node-monitor-grace-period=3s"]) else {
        return;
    };
    c.ok_stdin(&["create", "-f", "-"], NODE);
    // A Lease the "kubelet" never renews.
    c.ok_stdin(
        &["create", "-f", "-"],
        r#"{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "n1", "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40}}"#,
    );
    let unreachable = |secs: &str| {
        format!(
            r#"[{{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"{secs}}}]"#
        )
    };
    c.ok_stdin(
        &["create", "-f", "-"],
        &pod("quick", &unreachable(r#", "tolerationSeconds": 2"#)),
    );
    c.ok_stdin(&["create", "-f", "-"], &pod("stays", &unreachable("")));
    for (p, ip) in [("quick", "10.42.0.2"), ("stays", "10.42.0.3")] {
        mark(&c, p, ip, true);
    }
    eventually("the node NotReady", || {
        c.ok(&["get", "node", "n1"]).contains("NotReady")
    });
    let node = json(&c.ok(&["get", "node", "n1", "-o", "json"]));
    let ready = condition(&node, "Ready");
    assert_eq!(ready["status"], "Unknown", "{node}");
    assert_eq!(ready["reason"], "NodeStatusUnknown");
    assert_eq!(ready["message"], "Kubelet stopped posting node status.");
    eventually("the unreachable taints", || {
        let node = json(&c.ok(&["get", "node", "n1", "-o", "json"]));
        let taints = node["spec"]["taints"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        ["NoSchedule", "NoExecute"].iter().all(|e| {
            taints
                .iter()
                .any(|t| t["key"] == "node.kubernetes.io/unreachable" && t["effect"] == *e)
        })
    });
    let described = c.ok(&["describe", "node", "n1"]);
    assert!(
        described.contains("node.kubernetes.io/unreachable:NoExecute"),
        "{described}"
    );
    eventually("the 2 s pod evicted", || {
        let p = json(&c.ok(&["get", "pod", "quick", "-o", "json"]));
        !p["metadata"]["deletionTimestamp"].is_null()
            && condition(&p, "DisruptionTarget")["reason"] == "DeletionByTaintManager"
    });
    let stays = json(&c.ok(&["get", "pod", "stays", "-o", "json"]));
    assert!(stays["metadata"]["deletionTimestamp"].is_null(), "{stays}");
    assert_eq!(condition(&stays, "Ready")["status"], "False", "{stays}");
}

#[test]
fn endpoints_slices_and_budgets_follow_pod_readiness() {
    // Long grace: the stand-in node must stay Ready throughout.
    let Some(c) = Cluster::start(&["--node-monitor-grace-period=10m"]) else {
        return;
    };
    c.ok_stdin(&["create", "-f", "-"], NODE);
    eventually("the default ServiceAccount", || {
        c.run(&["get", "sa", "default"]).status.success()
    });
    c.ok(&[
        "create",
        "deployment",
        "web",
        "--image=busybox",
        "--replicas=3",
        "--port=8080",
    ]);
    c.ok(&["create", "service", "clusterip", "web", "--tcp=80:8080"]);
    c.ok(&[
        "create",
        "pdb",
        "web",
        "--selector=app=web",
        "--min-available=2",
    ]);
    let mut names = Vec::new();
    eventually("3 pods bound", || {
        let pods = json(&c.ok(&["get", "pods", "-l", "app=web", "-o", "json"]));
        let items = pods["items"].as_array().cloned().unwrap_or_default();
        names = items
            .iter()
            .filter(|p| p["spec"]["nodeName"] == "n1")
            .map(|p| p["metadata"]["name"].as_str().unwrap().to_owned())
            .collect();
        names.len() == 3
    });
    names.sort();
    let ips: Vec<String> = (1..=3).map(|i| format!("10.42.0.{}", 10 + i)).collect();
    for (n, ip) in names.iter().zip(&ips) {
        mark(&c, n, ip, true);
    }
    eventually("3 ready addresses", || {
        let out = c.ok(&["get", "endpoints", "web"]);
        ips.iter().all(|ip| out.contains(&format!("{ip}:8080")))
    });
    eventually("3 ready slice endpoints", || {
        let s = json(&c.ok(&[
            "get",
            "endpointslices",
            "-l",
            "kubernetes.io/service-name=web",
            "-o",
            "json",
        ]));
        let eps: Vec<Value> = s["items"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
            .collect();
        eps.len() == 3 && eps.iter().all(|e| e["conditions"]["ready"] == true)
    });
    let table = c.ok(&[
        "get",
        "endpointslices",
        "-l",
        "kubernetes.io/service-name=web",
    ]);
    assert!(table.contains("IPv4") && table.contains("8080"), "{table}");
    eventually("1 allowed disruption", || {
        let out = c.ok(&["get", "pdb", "web"]);
        out.contains("ALLOWED DISRUPTIONS")
            && out
                .lines()
                .nth(1)
                .is_some_and(|l| l.split_whitespace().nth(3) == Some("1"))
    });

    // One pod turns NotReady: it moves to notReadyAddresses, its slice endpoint is not ready,
    // and the budget allows nothing.
    mark(&c, &names[0], &ips[0], false);
    eventually("a not-ready address", || {
        let ep = json(&c.ok(&["get", "endpoints", "web", "-o", "json"]));
        let not_ready: Vec<&Value> = ep["subsets"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|s| s["notReadyAddresses"].as_array().into_iter().flatten())
            .collect();
        not_ready.len() == 1 && not_ready[0]["ip"] == ips[0].as_str()
    });
    eventually("the slice endpoint not ready", || {
        let s = json(&c.ok(&[
            "get",
            "endpointslices",
            "-l",
            "kubernetes.io/service-name=web",
            "-o",
            "json",
        ]));
        s["items"].as_array().into_iter().flatten().any(|s| {
            s["endpoints"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|e| e["addresses"][0] == ips[0].as_str() && e["conditions"]["ready"] == false)
        })
    });
    eventually("0 allowed disruptions", || {
        let pdb = json(&c.ok(&["get", "pdb", "web", "-o", "json"]));
        pdb["status"]["disruptionsAllowed"] == 0 && pdb["status"]["currentHealthy"] == 2
    });
    let out = c.ok(&["get", "pdb", "web"]);
    assert_eq!(
        out.lines().nth(1).and_then(|l| l.split_whitespace().nth(3)),
        Some("0"),
        "{out}"
    );
    // The API server's own endpoints are untouched by the controllers.
    let k = json(&c.ok(&["get", "endpointslice", "kubernetes", "-o", "json"]));
    assert!(
        k["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"].is_null(),
        "{k}"
    );
    let out = c.ok(&["get", "endpoints", "kubernetes"]);
    assert!(out.contains(":"), "{out}");
}
