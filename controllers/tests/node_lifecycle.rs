//! The node lifecycle controller against the real API semantics, on a fake clock: a node whose
//! Lease stops being renewed goes Unknown with the unreachable taints, its pods go NotReady and
//! are evicted per their tolerationSeconds; a kubelet reporting Ready again lifts the taints.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{create, env, eventually};
use k1s_api::client::{Client, ResourceRef, WriteParams};
use k1s_controllers::node_lifecycle::{self, TAINT_UNREACHABLE};
use k1s_runtime::clock::{Clock, FakeClock};
use serde_json::{Value, json};

fn nodes() -> ResourceRef {
    ResourceRef::new("", "v1", "nodes", None)
}

fn pods() -> ResourceRef {
    ResourceRef::new("", "v1", "pods", Some("default"))
}

fn leases() -> ResourceRef {
    ResourceRef::new(
        "coordination.k8s.io",
        "v1",
        "leases",
        Some("kube-node-lease"),
    )
}

fn micro(clock: &FakeClock) -> String {
    k1s_api::time::format_nano(clock.now())
}

async fn bound_pod(c: &Arc<dyn Client>, name: &str, tolerations: Value) {
    let p = create(
        c,
        &pods(),
        json!({"metadata": {"name": name},
        "spec": {"nodeName": "n1", "tolerations": tolerations,
                 "containers": [{"name": "c", "image": "busybox"}]}}),
    )
    .await;
    let mut p = p;
    p["status"]["phase"] = json!("Running");
    p["status"]["conditions"] = json!([{"type": "Ready", "status": "True"}]);
    c.update(&pods(), p, Some("status"), &WriteParams::default())
        .await
        .unwrap();
}

async fn get(c: &Arc<dyn Client>, r: &ResourceRef, name: &str) -> Value {
    c.get(r, name).await.unwrap()
}

fn ready(n: &Value) -> Value {
    n["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready").cloned())
        .unwrap_or_default()
}

fn has_taint(n: &Value, key: &str, effect: &str) -> bool {
    n["spec"]["taints"]
        .as_array()
        .is_some_and(|ts| ts.iter().any(|t| t["key"] == key && t["effect"] == effect))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unrenewed_lease_marks_unknown_taints_and_evicts_per_toleration() {
    let env = env().await;
    let c = env.client.clone();
    let clock = FakeClock::new();
    create(
        &c,
        &nodes(),
        json!({"metadata": {"name": "n1"},
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                   "lastHeartbeatTime": "2020-01-01T00:00:00Z"}]}}),
    )
    .await;
    create(
        &c,
        &leases(),
        json!({"metadata": {"name": "n1"},
        "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40, "renewTime": micro(&clock)}}),
    )
    .await;
    let unreachable = |secs: Option<i64>| {
        let mut t = json!({"key": TAINT_UNREACHABLE, "operator": "Exists", "effect": "NoExecute"});
        if let Some(s) = secs {
            t["tolerationSeconds"] = json!(s);
        }
        t
    };
    bound_pod(&c, "short", json!([unreachable(Some(30))])).await;
    bound_pod(&c, "long", json!([unreachable(Some(300))])).await;
    bound_pod(&c, "forever", json!([unreachable(None)])).await;
    tokio::spawn(node_lifecycle::run(
        c.clone(),
        node_lifecycle::Config {
            monitor_period: Duration::from_millis(50),
            clock: Arc::new(clock.clone()),
            ..Default::default()
        },
        env.cancel.clone(),
    ));

    // Within the grace period nothing happens.
    tokio::time::sleep(Duration::from_millis(500)).await;
    clock.advance(Duration::from_secs(39));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let n = get(&c, &nodes(), "n1").await;
    assert_eq!(ready(&n)["status"], "True", "{n}");
    assert!(n["spec"]["taints"].is_null(), "{n}");

    // Past it: Unknown, tainted, pods not ready.
    clock.advance(Duration::from_secs(2));
    let n = eventually("node Unknown and tainted", || {
        let c = c.clone();
        async move {
            let n = get(&c, &nodes(), "n1").await;
            (ready(&n)["status"] == "Unknown"
                && has_taint(&n, TAINT_UNREACHABLE, "NoExecute")
                && has_taint(&n, TAINT_UNREACHABLE, "NoSchedule"))
            .then_some(n)
        }
    })
    .await;
    let r = ready(&n);
    assert_eq!(r["reason"], "NodeStatusUnknown");
    assert_eq!(r["message"], "Kubelet stopped posting node status.");
    assert_eq!(r["lastHeartbeatTime"], "2020-01-01T00:00:00Z");
    let mem = n["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "MemoryPressure")
        .cloned()
        .unwrap();
    assert_eq!(
        (mem["status"].as_str(), mem["reason"].as_str()),
        (Some("Unknown"), Some("NodeStatusNeverUpdated"))
    );
    eventually("pods not ready", || {
        let c = c.clone();
        async move {
            for name in ["short", "long", "forever"] {
                if ready(&get(&c, &pods(), name).await)["status"] != "False" {
                    return None;
                }
            }
            Some(())
        }
    })
    .await;
    // No pod is evicted before its tolerationSeconds.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(get(&c, &pods(), "short").await["metadata"]["deletionTimestamp"].is_null());

    clock.advance(Duration::from_secs(31));
    let short = eventually("the 30 s pod evicted", || {
        let c = c.clone();
        async move {
            match c.get(&pods(), "short").await {
                Ok(p) if p["metadata"]["deletionTimestamp"].is_null() => None,
                Ok(p) => Some(Some(p)),
                Err(e) if e.is_not_found() => Some(None),
                Err(e) => panic!("{e}"),
            }
        }
    })
    .await;
    if let Some(p) = short {
        let dt = p["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "DisruptionTarget")
            .cloned()
            .unwrap();
        assert_eq!(dt["reason"], "DeletionByTaintManager");
    }
    assert!(get(&c, &pods(), "long").await["metadata"]["deletionTimestamp"].is_null());

    // The kubelet comes back: Lease renewed and Ready posted; the taints go, nothing else is
    // evicted even after the long toleration would have run out.
    clock.advance(Duration::from_secs(1));
    let mut lease = get(&c, &leases(), "n1").await;
    lease["spec"]["renewTime"] = json!(micro(&clock));
    c.update(&leases(), lease, None, &WriteParams::default())
        .await
        .unwrap();
    let mut n = get(&c, &nodes(), "n1").await;
    for cond in n["status"]["conditions"].as_array_mut().unwrap() {
        if cond["type"] == "Ready" {
            cond["status"] = json!("True");
            cond["lastHeartbeatTime"] = json!(micro(&clock));
        }
    }
    c.update(&nodes(), n, Some("status"), &WriteParams::default())
        .await
        .unwrap();
    eventually("taints lifted", || {
        let c = c.clone();
        async move {
            get(&c, &nodes(), "n1").await["spec"]["taints"]
                .as_array()
                .is_none_or(Vec::is_empty)
                .then_some(())
        }
    })
    .await;
    clock.advance(Duration::from_secs(20));
    tokio::time::sleep(Duration::from_millis(300)).await;
    clock.advance(Duration::from_secs(300));
    tokio::time::sleep(Duration::from_millis(300)).await;
    // 320 s without renewal again: Unknown once more — but the pods' eviction clocks restart.
    let long = get(&c, &pods(), "long").await;
    assert!(long["metadata"]["deletionTimestamp"].is_null(), "{long}");
    assert!(get(&c, &pods(), "forever").await["metadata"]["deletionTimestamp"].is_null());
}
