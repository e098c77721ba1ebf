//! The disruption controller against the real API semantics and the API server's eviction
//! subresource: status from an integer minAvailable and a percentage maxUnavailable (scaled
//! through the pods' ReplicaSet), evictions taking allowed disruptions, and SyncFailed for
//! pods without a controller.

mod common;

use std::sync::Arc;

use common::{create, env, eventually};
use k1s_api::client::{Client, ResourceRef, WriteParams};
use k1s_runtime::clock::SystemClock;
use serde_json::{Value, json};

fn pods() -> ResourceRef {
    ResourceRef::new("", "v1", "pods", Some("default"))
}
fn pdbs() -> ResourceRef {
    ResourceRef::new("policy", "v1", "poddisruptionbudgets", Some("default"))
}

async fn pod(c: &Arc<dyn Client>, name: &str, app: &str, owner: Option<&Value>) {
    let mut meta = json!({"name": name, "labels": {"app": app}});
    if let Some(rs) = owner {
        meta["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "name": rs["metadata"]["name"], "uid": rs["metadata"]["uid"], "controller": true}]);
    }
    let mut p = create(
        c,
        &pods(),
        json!({"metadata": meta,
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}),
    )
    .await;
    p["status"] = json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]});
    c.update(&pods(), p, Some("status"), &WriteParams::default())
        .await
        .unwrap();
}

async fn status_when(
    c: &Arc<dyn Client>,
    name: &str,
    what: &str,
    f: impl Fn(&Value) -> bool + Copy,
) -> Value {
    eventually(what, || {
        let c = c.clone();
        let name = name.to_owned();
        async move {
            let p = c.get(&pdbs(), &name).await.ok()?;
            f(&p["status"]).then(|| p["status"].clone())
        }
    })
    .await
}

fn condition(status: &Value) -> Value {
    status["conditions"]
        .as_array()
        .and_then(|cs| {
            cs.iter()
                .find(|c| c["type"] == "DisruptionAllowed")
                .cloned()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budgets_count_healthy_pods_and_evictions_take_from_them() {
    let env = env().await;
    let c = env.client.clone();
    tokio::spawn(k1s_controllers::disruption::run(
        c.clone(),
        Arc::new(SystemClock),
        env.cancel.clone(),
    ));
    let rs = create(
        &c,
        &ResourceRef::new("apps", "v1", "replicasets", Some("default")),
        json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}),
    )
    .await;
    for n in ["a", "b", "c"] {
        pod(&c, n, "web", Some(&rs)).await;
    }
    create(
        &c,
        &pdbs(),
        json!({"metadata": {"name": "min2"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}}),
    )
    .await;
    let s = status_when(&c, "min2", "min2 computed", |s| s["expectedPods"] == 3).await;
    assert_eq!(
        (
            s["currentHealthy"].as_i64(),
            s["desiredHealthy"].as_i64(),
            s["disruptionsAllowed"].as_i64()
        ),
        (Some(3), Some(2), Some(1))
    );
    assert_eq!(s["observedGeneration"], 1);
    let cond = condition(&s);
    assert_eq!(
        (cond["status"].as_str(), cond["reason"].as_str()),
        (Some("True"), Some("SufficientPods"))
    );

    // One eviction is allowed, the next refused until the budget recovers.
    c.create_subresource(
        &pods(),
        "a",
        "eviction",
        json!({"apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": "a", "namespace": "default"}}),
    )
    .await
    .unwrap();
    // While the evicted pod still exists it sits in disruptedPods and already counts as
    // unhealthy (as upstream); once it is gone it leaves the map.
    let s = status_when(&c, "min2", "min2 after the eviction, the pod gone", |s| {
        s["currentHealthy"] == 2 && s["disruptedPods"].is_null()
    })
    .await;
    assert_eq!(s["disruptionsAllowed"], 0);
    assert_eq!(condition(&s)["reason"], "InsufficientPods");
    let err = c
        .create_subresource(
            &pods(),
            "b",
            "eviction",
            json!({"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": "b", "namespace": "default"}}),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code, 429, "{err:?}");

    // A percentage maxUnavailable scales against the ReplicaSet's 3 replicas: 34% → 2.
    create(
        &c,
        &pdbs(),
        json!({"metadata": {"name": "max34"},
        "spec": {"maxUnavailable": "34%", "selector": {"matchLabels": {"app": "web"}}}}),
    )
    .await;
    let s = status_when(&c, "max34", "max34 computed", |s| s["expectedPods"] == 3).await;
    assert_eq!(
        (
            s["currentHealthy"].as_i64(),
            s["desiredHealthy"].as_i64(),
            s["disruptionsAllowed"].as_i64()
        ),
        (Some(2), Some(1), Some(1))
    );

    // Pods without a controller cannot be scaled: SyncFailed.
    pod(&c, "loose", "loose", None).await;
    create(
        &c,
        &pdbs(),
        json!({"metadata": {"name": "loose"},
        "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "loose"}}}}),
    )
    .await;
    let s = status_when(&c, "loose", "SyncFailed", |s| {
        condition(s)["reason"] == "SyncFailed"
    })
    .await;
    assert_eq!(s["disruptionsAllowed"], 0);
    assert!(
        condition(&s)["message"]
            .as_str()
            .unwrap()
            .contains("found no controller ref for pod"),
        "{s}"
    );
}
