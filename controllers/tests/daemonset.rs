//! The DaemonSet controller against the real API semantics, over Node objects (no scheduler:
//! pods are matched to nodes by their pinning affinity; the test marks them Running and Ready
//! as a kubelet would): eligibility by nodeSelector and taints, reaction to node label and
//! taint changes, status, and a rolling update with revisions.

mod common;

use std::sync::Arc;

use common::{create, env, eventually};

use k1s_api::client::{Client, ListParams, Patch, ResourceRef, WriteParams};
use serde_json::{Value, json};

fn daemonsets() -> ResourceRef {
    ResourceRef::new("apps", "v1", "daemonsets", Some("default"))
}

fn pods() -> ResourceRef {
    ResourceRef::new("", "v1", "pods", Some("default"))
}

fn nodes() -> ResourceRef {
    ResourceRef::new("", "v1", "nodes", None)
}

fn node(name: &str, role: &str, taints: Value) -> Value {
    json!({"metadata": {"name": name, "labels": {"role": role, "kubernetes.io/hostname": name}},
           "spec": {"taints": taints},
           "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
}

/// The node each live pod is pinned to, sorted.
fn pinned(ps: &[Value]) -> Vec<String> {
    let mut v: Vec<String> = ps
        .iter()
        .map(|p| {
            p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                ["nodeSelectorTerms"][0]["matchFields"][0]["values"][0]
                .as_str()
                .unwrap_or("?")
                .to_owned()
        })
        .collect();
    v.sort();
    v
}

async fn live_pods(c: &Arc<dyn Client>) -> Vec<Value> {
    c.list(&pods(), &ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .collect()
}

async fn mark_ready(c: &Arc<dyn Client>, pod: &Value) {
    if pod["status"]["phase"] == "Running" {
        return;
    }
    let mut p = pod.clone();
    p["status"]["phase"] = json!("Running");
    p["status"]["conditions"] = json!([{"type": "Ready", "status": "True",
        "lastTransitionTime": "2020-01-01T00:00:00Z"}]);
    let _ = c
        .update(&pods(), p, Some("status"), &WriteParams::default())
        .await;
}

async fn status(c: &Arc<dyn Client>) -> Value {
    c.get(&daemonsets(), "agent").await.unwrap()["status"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemonset_follows_nodes_and_rolls() {
    let env = env().await;
    let c = env.client.clone();
    tokio::spawn(k1s_controllers::daemonset::run(
        c.clone(),
        std::sync::Arc::new(k1s_runtime::clock::SystemClock),
        env.cancel.clone(),
    ));
    create(&c, &nodes(), node("a", "worker", json!([]))).await;
    create(
        &c,
        &nodes(),
        node(
            "b",
            "worker",
            json!([{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]),
        ),
    )
    .await;
    create(&c, &nodes(), node("c", "infra", json!([]))).await;
    // not-ready is tolerated by every daemon pod.
    create(
        &c,
        &nodes(),
        node(
            "d",
            "worker",
            json!([{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]),
        ),
    )
    .await;
    create(
        &c,
        &daemonsets(),
        json!({"metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
            "template": {"metadata": {"labels": {"app": "agent"}},
                "spec": {"nodeSelector": {"role": "worker"},
                         "containers": [{"name": "c", "image": "agent:1"}]}}}}),
    )
    .await;

    let ps = eventually("pods on a and d", || {
        let c = c.clone();
        async move {
            let ps = live_pods(&c).await;
            (pinned(&ps) == ["a", "d"]).then_some(ps)
        }
    })
    .await;
    let p = &ps[0];
    assert!(p["spec"]["nodeName"].is_null());
    let tols = p["spec"]["tolerations"].as_array().unwrap();
    for k in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.kubernetes.io/disk-pressure",
        "node.kubernetes.io/memory-pressure",
        "node.kubernetes.io/pid-pressure",
        "node.kubernetes.io/unschedulable",
    ] {
        assert!(tols.iter().any(|t| t["key"] == k), "{k}: {tols:?}");
    }
    let hash1 = p["metadata"]["labels"]["controller-revision-hash"]
        .as_str()
        .unwrap()
        .to_owned();
    for p in &ps {
        mark_ready(&c, p).await;
    }
    let s = eventually("status of two", || {
        let c = c.clone();
        async move {
            let s = status(&c).await;
            (s["numberReady"] == 2).then_some(s)
        }
    })
    .await;
    assert_eq!(s["desiredNumberScheduled"], 2);
    assert_eq!(s["currentNumberScheduled"], 2);
    assert_eq!(s["updatedNumberScheduled"], 2);
    assert_eq!(s["numberAvailable"], 2);
    assert_eq!(s["numberMisscheduled"], 0);
    assert!(s["numberUnavailable"].is_null());
    assert_eq!(s["observedGeneration"], 1);

    // c becomes a worker: it gets a pod. b's taint goes: it gets one too.
    c.patch(
        &nodes(),
        "c",
        &Patch::Merge(json!({"metadata": {"labels": {"role": "worker"}}})),
        None,
        &WriteParams::default(),
    )
    .await
    .unwrap();
    c.patch(
        &nodes(),
        "b",
        &Patch::Merge(json!({"spec": {"taints": null}})),
        None,
        &WriteParams::default(),
    )
    .await
    .unwrap();
    eventually("pods on a, b, c and d", || {
        let c = c.clone();
        async move { (pinned(&live_pods(&c).await) == ["a", "b", "c", "d"]).then_some(()) }
    })
    .await;
    // d stops being a worker: its pod goes.
    c.patch(
        &nodes(),
        "d",
        &Patch::Merge(json!({"metadata": {"labels": {"role": "infra"}}})),
        None,
        &WriteParams::default(),
    )
    .await
    .unwrap();
    eventually("pods on a, b and c", || {
        let c = c.clone();
        async move {
            let ps = live_pods(&c).await;
            for p in &ps {
                mark_ready(&c, p).await;
            }
            let s = status(&c).await;
            (pinned(&ps) == ["a", "b", "c"] && s["numberAvailable"] == 3).then_some(())
        }
    })
    .await;

    // A new image rolls out one node at a time (maxUnavailable 1).
    c.patch(
        &daemonsets(),
        "agent",
        &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "agent:2"}]}}}})),
        None,
        &WriteParams::default(),
    )
    .await
    .unwrap();
    let max_unready = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let hash2 = eventually("rolled out", || {
        let c = c.clone();
        let hash1 = hash1.clone();
        let max = max_unready.clone();
        async move {
            let ps = live_pods(&c).await;
            let unready = ps
                .iter()
                .filter(|p| p["status"]["phase"] != "Running")
                .count();
            max.fetch_max(unready, std::sync::atomic::Ordering::SeqCst);
            for p in &ps {
                mark_ready(&c, p).await;
            }
            let s = status(&c).await;
            let all_new = ps.len() == 3
                && ps.iter().all(|p| {
                    p["spec"]["containers"][0]["image"] == "agent:2"
                        && p["metadata"]["labels"]["controller-revision-hash"] != hash1.as_str()
                });
            (all_new
                && s["updatedNumberScheduled"] == 3
                && s["numberAvailable"] == 3
                && s["observedGeneration"] == 2)
                .then(|| {
                    ps[0]["metadata"]["labels"]["controller-revision-hash"]
                        .as_str()
                        .unwrap_or("")
                        .to_owned()
                })
        }
    })
    .await;
    let max_unready = max_unready.load(std::sync::atomic::Ordering::SeqCst);
    assert!(max_unready <= 1, "{max_unready} pods unavailable at once");
    let revs = c
        .list(
            &ResourceRef::new("apps", "v1", "controllerrevisions", Some("default")),
            &ListParams::default(),
        )
        .await
        .unwrap()
        .items;
    let mut by_number: Vec<(i64, String)> = revs
        .iter()
        .map(|r| {
            (
                r["revision"].as_i64().unwrap_or(0),
                r["metadata"]["labels"]["controller-revision-hash"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned(),
            )
        })
        .collect();
    by_number.sort();
    assert_eq!(by_number, [(1, hash1), (2, hash2)]);
}
