//! End to end, issue #6 with a real kubelet and real containers: a Deployment, `set image` (a rolling update that never has more than maxUnavailable pods unavailable),
//! `rollout status`, `rollout history` and `rollout undo`; then deleting Deployments with
//! `--cascade=orphan`, `background` and `foreground`. Needs root and the local registry tools
//! (skips visibly otherwise).

use k1s_tests::host::{HostCleanup, Images, start_with_kubelet};
use k1s_tests::{Cluster, eventually};
use serde_json::Value;

fn json(c: &Cluster, args: &[&str]) -> Value {
    serde_json::from_str(&c.ok(args)).unwrap_or(Value::Null)
}

fn pods_of(c: &Cluster, app: &str) -> Vec<Value> {
    json(
        c,
        &["get", "pods", "-l", &format!("app={app}"), "-o", "json"],
    )["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn images_of(c: &Cluster, app: &str) -> Vec<String> {
    let mut v: Vec<String> = pods_of(c, app)
        .iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .map(|p| {
            p["spec"]["containers"][0]["image"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    v.sort();
    v
}

#[test]
fn deployments_roll_undo_and_cascade() {
    let Some(images) = Images::start() else {
        return;
    };
    let flags = images.kubelet_flags("rollout");
    let _cleanup = HostCleanup(flags.clone());
    let Some(c) = start_with_kubelet("rollout", &flags) else {
        return;
    };
    let v1 = images.busybox();
    let v2 = images.busybox_tag("v2");

    // maxUnavailable 1, maxSurge 0: the update replaces one pod at a time. A short grace
    // period: `sleep` as PID 1 ignores SIGTERM.
    let deployment = |name: &str, replicas: u32| {
        format!(
            r#"{{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {{"name": "{name}"}},
              "spec": {{"replicas": {replicas}, "selector": {{"matchLabels": {{"app": "{name}"}}}},
                "strategy": {{"rollingUpdate": {{"maxUnavailable": 1, "maxSurge": 0}}}},
                "template": {{"metadata": {{"labels": {{"app": "{name}"}}}},
                  "spec": {{"terminationGracePeriodSeconds": 1, "containers": [{{"name": "busybox",
                    "image": "{v1}", "command": ["sleep", "3600"]}}]}}}}}}}}"#
        )
    };
    c.ok_stdin(&["create", "-f", "-"], &deployment("web", 3));
    let out = c.ok(&["rollout", "status", "deployment/web", "--timeout=120s"]);
    assert!(out.contains("successfully rolled out"), "{out}");
    assert_eq!(images_of(&c, "web"), vec![v1.clone(); 3]);

    c.ok(&["set", "image", "deployment/web", &format!("busybox={v2}")]);
    // While it rolls, at least 2 of the 3 pods stay available (maxUnavailable 1).
    let mut lowest_available = 3;
    eventually("the rollout to v2", 120, || {
        let d = json(&c, &["get", "deployment", "web", "-o", "json"]);
        let available = d["status"]["availableReplicas"].as_i64().unwrap_or(0);
        if d["status"]["observedGeneration"] == d["metadata"]["generation"] {
            lowest_available = lowest_available.min(available);
        }
        d["status"]["updatedReplicas"] == 3
            && available == 3
            && images_of(&c, "web") == vec![v2.clone(); 3]
    });
    assert!(
        lowest_available >= 2,
        "available fell to {lowest_available}"
    );
    let out = c.ok(&["rollout", "status", "deployment/web", "--timeout=60s"]);
    assert!(out.contains("successfully rolled out"), "{out}");
    let history = c.ok(&["rollout", "history", "deployment/web"]);
    assert!(history.contains('1') && history.contains('2'), "{history}");

    c.ok(&["rollout", "undo", "deployment/web"]);
    eventually("the undo back to the first image", 120, || {
        images_of(&c, "web") == vec![v1.clone(); 3]
    });
    let out = c.ok(&["rollout", "status", "deployment/web", "--timeout=60s"]);
    assert!(out.contains("successfully rolled out"), "{out}");

    // --cascade=orphan: the Deployment goes, its ReplicaSets and pods stay, without owners.
    c.ok(&["delete", "deployment", "web", "--cascade=orphan"]);
    eventually("orphaned ReplicaSets to lose their owner", 60, || {
        let rs = json(&c, &["get", "rs", "-l", "app=web", "-o", "json"]);
        let items = rs["items"].as_array().cloned().unwrap_or_default();
        !items.is_empty()
            && items
                .iter()
                .all(|r| r["metadata"]["ownerReferences"].is_null())
    });
    let live = pods_of(&c, "web")
        .iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .count();
    assert_eq!(live, 3, "the orphaned ReplicaSet's pods stay");
    c.ok(&["delete", "rs", "-l", "app=web", "--cascade=orphan"]);
    c.ok(&["delete", "pods", "-l", "app=web", "--grace-period=1"]);

    // Background (kubectl's default): the Deployment is gone at once, the rest follows.
    c.ok(&[
        "create",
        "deployment",
        "bg",
        &format!("--image={v1}"),
        "--replicas=2",
        "--",
        "sleep",
        "3600",
    ]);
    eventually("bg's pods", 90, || pods_of(&c, "bg").len() == 2);
    c.ok(&[
        "delete",
        "deployment",
        "bg",
        "--cascade=background",
        "--wait=false",
    ]);
    eventually("bg's ReplicaSet and pods to be collected", 90, || {
        pods_of(&c, "bg").is_empty()
            && json(&c, &["get", "rs", "-l", "app=bg", "-o", "json"])["items"]
                .as_array()
                .is_some_and(Vec::is_empty)
    });

    // Foreground: the Deployment stays (foregroundDeletion) until its dependents are gone.
    // Its pods ignore SIGTERM and have 20 s of grace, so the cascade takes that long.
    let fg = deployment("fg", 2)
        .replace(
            r#""terminationGracePeriodSeconds": 1"#,
            r#""terminationGracePeriodSeconds": 20"#,
        )
        .replace(
            r#"["sleep", "3600"]"#,
            r#"["sh", "-c", "trap '' TERM; sleep 3600"]"#,
        );
    c.ok_stdin(&["create", "-f", "-"], &fg);
    eventually("fg's pods to run", 90, || {
        let pods = pods_of(&c, "fg");
        pods.len() == 2 && pods.iter().all(|p| p["status"]["phase"] == "Running")
    });
    c.ok(&[
        "delete",
        "deployment",
        "fg",
        "--cascade=foreground",
        "--wait=false",
    ]);
    let d = json(&c, &["get", "deployment", "fg", "-o", "json"]);
    assert!(
        d["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| f.iter().any(|x| x == "foregroundDeletion")),
        "{d}"
    );
    eventually("fg and its dependents to be gone", 90, || {
        !c.run(&["get", "deployment", "fg"]).status.success() && pods_of(&c, "fg").is_empty()
    });
}
