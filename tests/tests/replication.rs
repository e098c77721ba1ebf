//! ReplicationControllers (issue #29: the conformance suite cannot start without them): served
//! with `scale` and `status`, defaulted and validated as upstream, run by the same code as
//! ReplicaSets, scaled by `kubectl scale rc`, and their pods collected with them. Stock
//! kubectl against the real binary; no kubelet (the pods stay Pending).

use k1s_tests::{Cluster, eventually};
use serde_json::Value;

const RC: &str = r#"{"apiVersion": "v1", "kind": "ReplicationController",
  "metadata": {"name": "web"},
  "spec": {"replicas": 2,
    "template": {"metadata": {"labels": {"app": "rc-web", "tier": "front"}},
      "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}"#;

fn pods(c: &Cluster) -> Vec<Value> {
    let v: Value = serde_json::from_str(&c.ok(&["get", "pods", "-l", "app=rc-web", "-o", "json"]))
        .unwrap_or(Value::Null);
    v["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .collect()
}

#[test]
fn replication_controllers_are_served_scaled_and_collected() {
    let Some(c) = Cluster::start(&[]) else {
        return;
    };
    c.ok_stdin(&["create", "-f", "-"], RC);
    // Defaulted from the template: the selector and the object's labels.
    let rc: Value = serde_json::from_str(&c.ok(&["get", "rc", "web", "-o", "json"])).unwrap();
    assert_eq!(rc["spec"]["selector"]["app"], "rc-web");
    assert_eq!(rc["spec"]["selector"]["tier"], "front");
    assert_eq!(rc["metadata"]["labels"]["app"], "rc-web");
    eventually("two pods owned by the ReplicationController", 30, || {
        let p = pods(&c);
        p.len() == 2
            && p.iter().all(|p| {
                let o = &p["metadata"]["ownerReferences"][0];
                o["kind"] == "ReplicationController" && o["apiVersion"] == "v1"
            })
    });
    c.ok(&["scale", "rc", "web", "--replicas=3"]);
    eventually("three pods and the status", 30, || {
        let rc: Value =
            serde_json::from_str(&c.ok(&["get", "rc", "web", "-o", "json"])).unwrap_or_default();
        pods(&c).len() == 3 && rc["status"]["replicas"] == 3
    });
    let scale = c
        .raw(
            "GET",
            "/api/v1/namespaces/default/replicationcontrollers/web/scale",
            None,
            None,
        )
        .json();
    assert_eq!(scale["spec"]["replicas"], 3);
    assert_eq!(scale["status"]["selector"], "app=rc-web,tier=front");
    let table = c.ok(&["get", "rc"]);
    assert!(table.contains("web"), "{table}");

    // A selector the template does not match is refused as upstream does.
    let bad = RC.replace(r#""name": "web""#, r#""name": "bad""#).replace(
        r#""replicas": 2,"#,
        r#""replicas": 1, "selector": {"app": "other"},"#,
    );
    let file = c.dir.path().join("bad-rc.json");
    std::fs::write(&file, bad).unwrap();
    let err = c.fails(&["create", "-f", &file.display().to_string()]);
    assert!(
        err.contains("`selector` does not match template `labels`"),
        "{err}"
    );

    // Deleted: its pods go with it.
    c.ok(&["delete", "rc", "web"]);
    eventually("the pods collected", 30, || pods(&c).is_empty());
}
