//! End to end, StatefulSets and DaemonSets through the real server with stock kubectl: the
//! test plays the kubelet (it marks pods Running and Ready through the status subresource,
//! and finishes the deletion of pods bound to its stand-in Node objects).

use std::time::{Duration, Instant};

use k1s_tests::Cluster;
use serde_json::Value;

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(90);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Pods matching `selector`, by name.
fn pods(c: &Cluster, selector: &str) -> Vec<Value> {
    let mut v = json(&c.ok(&["get", "pods", "-l", selector, "-o", "json"]))["items"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    v.sort_by_key(|p| p["metadata"]["name"].as_str().unwrap_or("").to_owned());
    v
}

fn name(p: &Value) -> &str {
    p["metadata"]["name"].as_str().unwrap_or("")
}

fn image(p: &Value) -> &str {
    p["spec"]["containers"][0]["image"].as_str().unwrap_or("")
}

/// What a kubelet would do: report started pods Running and Ready, and finish deleting
/// terminating ones.
fn kubelet_pass(c: &Cluster, selector: &str) {
    for p in pods(c, selector) {
        if p["metadata"]["deletionTimestamp"].is_string() {
            let _ = c.run(&["delete", "pod", name(&p), "--grace-period=0", "--force"]);
        } else if p["status"]["phase"] != "Running" {
            let _ = c.run(&[
                "patch",
                "pod",
                name(&p),
                "--subresource=status",
                "--type=merge",
                "-p",
                r#"{"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z"}]}}"#,
            ]);
        }
    }
}

const STATEFULSET: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  clusterIP: None
  selector: {app: web}
  ports: [{port: 80}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  serviceName: web
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: c, image: "busybox:1"}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Gi}}
"#;

#[test]
fn statefulset_orders_updates_undoes_and_scales_down() {
    // No Node: pods stay unscheduled, so their deletion is immediate.
    let Some(c) = Cluster::start(&[]) else { return };
    eventually("the default ServiceAccount", || {
        c.run(&["get", "sa", "default"]).status.success()
    });
    c.ok_stdin(&["apply", "-f", "-"], STATEFULSET);

    // Up in order: the pods present are always web-0..web-k, the next only once the
    // previous is ready.
    let mut seen = 0;
    eventually("three pods, in order", || {
        let ps = pods(&c, "app=web");
        let names: Vec<&str> = ps.iter().map(name).collect();
        let want: Vec<String> = (0..names.len()).map(|i| format!("web-{i}")).collect();
        assert_eq!(names, want, "pods must come up in ordinal order");
        let ready = ps
            .iter()
            .filter(|p| p["status"]["phase"] == "Running")
            .count();
        assert!(
            names.len() <= ready + 1,
            "a pod was created before its predecessor was ready: {names:?}"
        );
        seen = seen.max(names.len());
        kubelet_pass(&c, "app=web");
        ready == 3
    });
    let out = c.ok(&["rollout", "status", "statefulset/web", "--timeout=60s"]);
    assert!(out.contains("complete"), "{out}");
    let pvcs = json(&c.ok(&["get", "pvc", "-o", "json"]));
    let mut claim_names: Vec<&str> = pvcs["items"].as_array().unwrap().iter().map(name).collect();
    claim_names.sort();
    assert_eq!(claim_names, ["data-web-0", "data-web-1", "data-web-2"]);
    assert_eq!(pvcs["items"][0]["metadata"]["labels"]["app"], "web");
    let table = c.ok(&["get", "statefulset", "web"]);
    assert!(table.contains("3/3"), "{table}");

    // Rolling update with partition 2: only web-2 moves to the new image.
    c.ok(&[
        "patch",
        "statefulset",
        "web",
        "--type=merge",
        "-p",
        r#"{"spec": {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}}}"#,
    ]);
    c.ok(&["set", "image", "statefulset/web", "c=busybox:2"]);
    eventually("web-2 updated", || {
        kubelet_pass(&c, "app=web");
        let ps = pods(&c, "app=web");
        ps.len() == 3
            && ps.iter().all(|p| p["status"]["phase"] == "Running")
            && image(&ps[2]) == "busybox:2"
    });
    let out = c.ok(&["rollout", "status", "statefulset/web", "--timeout=60s"]);
    assert!(out.contains("partitioned roll out complete"), "{out}");
    let ps = pods(&c, "app=web");
    assert_eq!(image(&ps[0]), "busybox:1");
    assert_eq!(image(&ps[1]), "busybox:1");

    // Partition 0: the rest follow and the rollout completes.
    c.ok(&[
        "patch",
        "statefulset",
        "web",
        "--type=merge",
        "-p",
        r#"{"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}}"#,
    ]);
    eventually("all on busybox:2", || {
        kubelet_pass(&c, "app=web");
        let ps = pods(&c, "app=web");
        ps.len() == 3
            && ps
                .iter()
                .all(|p| p["status"]["phase"] == "Running" && image(p) == "busybox:2")
    });
    // kubectl reports any RollingUpdate with a partition (defaulted to 0) as "partitioned",
    // as it does against kube-apiserver; the revisions show the roll finished.
    let out = c.ok(&["rollout", "status", "statefulset/web", "--timeout=60s"]);
    assert!(
        out.contains("partitioned roll out complete: 3 new pods"),
        "{out}"
    );
    eventually("currentRevision caught up", || {
        let s = json(&c.ok(&["get", "statefulset", "web", "-o", "json"]));
        s["status"]["currentRevision"] == s["status"]["updateRevision"]
    });
    let history = c.ok(&["rollout", "history", "statefulset/web"]);
    assert!(
        history.contains("\n1 ") && history.contains("\n2 "),
        "{history}"
    );

    // Undo: back to busybox:1, which becomes revision 3.
    c.ok(&["rollout", "undo", "statefulset/web"]);
    eventually("all back on busybox:1", || {
        kubelet_pass(&c, "app=web");
        let ps = pods(&c, "app=web");
        ps.len() == 3
            && ps
                .iter()
                .all(|p| p["status"]["phase"] == "Running" && image(p) == "busybox:1")
    });
    c.ok(&["rollout", "status", "statefulset/web", "--timeout=60s"]);
    let history = c.ok(&["rollout", "history", "statefulset/web"]);
    assert!(
        history.contains("\n2 ") && history.contains("\n3 ") && !history.contains("\n1 "),
        "{history}"
    );

    // Scale down to 1: web-2 goes before web-1; the claims stay (Retain).
    c.ok(&["scale", "statefulset", "web", "--replicas=1"]);
    eventually("one pod left", || {
        let ps = pods(&c, "app=web");
        let names: Vec<&str> = ps.iter().map(name).collect();
        assert!(
            names.contains(&"web-1") || !names.contains(&"web-2"),
            "web-1 went before web-2: {names:?}"
        );
        names == ["web-0"]
    });
    let pvcs = json(&c.ok(&["get", "pvc", "-o", "json"]));
    assert_eq!(pvcs["items"].as_array().unwrap().len(), 3);
    let sts = json(&c.ok(&["get", "statefulset", "web", "-o", "json"]));
    eventually("status replicas 1", || {
        json(&c.ok(&["get", "statefulset", "web", "-o", "json"]))["status"]["replicas"] == 1
    });
    assert_eq!(sts["spec"]["replicas"], 1);
}

fn node(name: &str, role: &str, taints: &str) -> String {
    format!(
        r#"{{"apiVersion": "v1", "kind": "Node",
  "metadata": {{"name": "{name}", "labels": {{"kubernetes.io/hostname": "{name}", "kubernetes.io/os": "linux", "role": "{role}"}}}},
  "spec": {{"taints": {taints}}},
  "status": {{"capacity": {{"cpu": "4", "memory": "8Gi", "pods": "110"}},
             "allocatable": {{"cpu": "4", "memory": "8Gi", "pods": "110"}},
             "conditions": [{{"type": "Ready", "status": "True"}}]}}}}"#
    )
}

const DAEMONSET: &str = r#"
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      nodeSelector: {role: worker}
      containers: [{name: c, image: "agent:1"}]
"#;

#[test]
fn daemonset_runs_on_eligible_nodes_and_rolls() {
    let Some(c) = Cluster::start(&[]) else { return };
    c.ok_stdin(&["create", "-f", "-"], &node("n1", "worker", "[]"));
    c.ok_stdin(&["create", "-f", "-"], &node("n2", "worker", "[]"));
    c.ok_stdin(
        &["create", "-f", "-"],
        &node(
            "n3",
            "worker",
            r#"[{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]"#,
        ),
    );
    c.ok_stdin(&["create", "-f", "-"], &node("n4", "infra", "[]"));
    eventually("the default ServiceAccount", || {
        c.run(&["get", "sa", "default"]).status.success()
    });
    c.ok_stdin(&["apply", "-f", "-"], DAEMONSET);

    // n3 is tainted and n4 not a worker: pods on n1 and n2, bound there by the scheduler.
    eventually("pods bound to n1 and n2", || {
        kubelet_pass(&c, "app=agent");
        let ps = pods(&c, "app=agent");
        let mut nodes: Vec<&str> = ps
            .iter()
            .filter_map(|p| p["spec"]["nodeName"].as_str())
            .collect();
        nodes.sort();
        nodes == ["n1", "n2"] && ps.iter().all(|p| p["status"]["phase"] == "Running")
    });
    let out = c.ok(&["rollout", "status", "daemonset/agent", "--timeout=60s"]);
    assert!(out.contains("successfully rolled out"), "{out}");
    let ds = json(&c.ok(&["get", "daemonset", "agent", "-o", "json"]));
    assert_eq!(ds["status"]["desiredNumberScheduled"], 2, "{ds}");
    assert_eq!(ds["status"]["numberReady"], 2, "{ds}");
    let table = c.ok(&["get", "daemonset", "agent"]);
    let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    // NAME DESIRED CURRENT READY UP-TO-DATE AVAILABLE NODE SELECTOR AGE
    assert_eq!(&row[..6], ["agent", "2", "2", "2", "2", "2"], "{table}");

    // n4 becomes a worker: it gets a pod.
    c.ok(&["label", "node", "n4", "role=worker", "--overwrite"]);
    eventually("a pod on n4", || {
        kubelet_pass(&c, "app=agent");
        pods(&c, "app=agent")
            .iter()
            .any(|p| p["spec"]["nodeName"] == "n4" && p["status"]["phase"] == "Running")
    });

    // Rolling update to agent:2.
    c.ok(&["set", "image", "daemonset/agent", "c=agent:2"]);
    eventually("all on agent:2", || {
        kubelet_pass(&c, "app=agent");
        let ps = pods(&c, "app=agent");
        ps.len() == 3
            && ps.iter().all(|p| {
                image(p) == "agent:2"
                    && p["status"]["phase"] == "Running"
                    && p["metadata"]["deletionTimestamp"].is_null()
            })
    });
    let out = c.ok(&["rollout", "status", "daemonset/agent", "--timeout=60s"]);
    assert!(out.contains("successfully rolled out"), "{out}");
    let history = c.ok(&["rollout", "history", "daemonset/agent"]);
    assert!(
        history.contains("\n1 ") && history.contains("\n2 "),
        "{history}"
    );
    c.ok(&["rollout", "undo", "daemonset/agent"]);
    eventually("all back on agent:1", || {
        kubelet_pass(&c, "app=agent");
        let ps = pods(&c, "app=agent");
        ps.len() == 3
            && ps.iter().all(|p| {
                image(p) == "agent:1"
                    && p["status"]["phase"] == "Running"
                    && p["metadata"]["deletionTimestamp"].is_null()
            })
    });
}
