//! Many replicas through the ReplicaSet and Deployment controllers: every pod is created once
//! (expectations and slow start never overshoot), and a rolling update of all of them stays
//! within the surge budget.

mod common;

use common::{create, env, eventually};
use k1s_api::client::{ListParams, Patch, ResourceRef, WriteParams};
use serde_json::json;

const REPLICAS: i64 = 200;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_replicas_without_overshoot() {
    let env = env().await;
    let c = env.client.clone();
    tokio::spawn(k1s_controllers::replicaset::run(
        c.clone(),
        std::sync::Arc::new(k1s_runtime::clock::SystemClock),
        env.cancel.clone(),
    ));
    tokio::spawn(k1s_controllers::deployment::run(
        c.clone(),
        std::sync::Arc::new(k1s_runtime::clock::SystemClock),
        env.cancel.clone(),
    ));
    let deploys = ResourceRef::new("apps", "v1", "deployments", Some("default"));
    let pods = ResourceRef::new("", "v1", "pods", Some("default"));
    create(
        &c,
        &deploys,
        json!({"metadata": {"name": "big"},
        "spec": {"replicas": REPLICAS, "selector": {"matchLabels": {"app": "big"}},
                 "template": {"metadata": {"labels": {"app": "big"}},
                              "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}}}),
    )
    .await;
    eventually("every pod created, none twice", || {
        let (c, pods) = (c.clone(), pods.clone());
        async move {
            let n = c
                .list(&pods, &ListParams::default())
                .await
                .ok()?
                .items
                .len();
            let n = i64::try_from(n).ok()?;
            assert!(n <= REPLICAS, "{n} pods for {REPLICAS} replicas");
            (n == REPLICAS).then_some(())
        }
    })
    .await;
    // Nothing marks the pods ready, so a rolling update may only surge (25%): the new set
    // grows to 50 and no old pod goes.
    c.patch(
        &deploys,
        "big",
        &Patch::Merge(json!({"spec": {"template": {"spec":
        {"containers": [{"name": "c", "image": "busybox:2"}]}}}})),
        None,
        &WriteParams::default(),
    )
    .await
    .unwrap();
    eventually("the surge pods", || {
        let (c, pods) = (c.clone(), pods.clone());
        async move {
            let n = c
                .list(&pods, &ListParams::default())
                .await
                .ok()?
                .items
                .len();
            let n = i64::try_from(n).ok()?;
            assert!(n <= REPLICAS + REPLICAS / 4, "{n} pods");
            (n == REPLICAS + REPLICAS / 4).then_some(())
        }
    })
    .await;
    let d = c.get(&deploys, "big").await.unwrap();
    assert!(d["status"]["availableReplicas"].is_null());
}
