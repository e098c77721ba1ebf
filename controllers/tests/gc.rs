//! The garbage collector against the real API semantics: Background, Foreground (with
//! blockOwnerDeletion) and Orphan propagation, dangling references, several owners.

mod common;

use std::sync::Arc;

use common::{configmaps, create, env, eventually};
use k1s_api::client::{Client, DeleteParams, ResourceRef, WriteParams};
use serde_json::{Value, json};

fn owner_ref(owner: &Value, kind: &str, api_version: &str, block: bool) -> Value {
    json!({"apiVersion": api_version, "kind": kind, "name": owner["metadata"]["name"],
           "uid": owner["metadata"]["uid"], "blockOwnerDeletion": block})
}

async fn gone(c: &Arc<dyn Client>, r: &ResourceRef, name: &str) -> Option<()> {
    match c.get(r, name).await {
        Err(e) if e.is_not_found() => Some(()),
        _ => None,
    }
}

fn start(env: &common::Env) {
    tokio::spawn(k1s_controllers::gc::run(
        env.client.clone(),
        env.catalog.clone(),
        env.cancel.clone(),
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_deletes_dependents_whose_owners_are_all_gone() {
    let env = env().await;
    let c = env.client.clone();
    start(&env);
    let cms = configmaps("default");
    let owner = create(&c, &cms, json!({"metadata": {"name": "owner"}})).await;
    let other = create(&c, &cms, json!({"metadata": {"name": "other"}})).await;
    let role = create(
        &c,
        &ResourceRef::new("rbac.authorization.k8s.io", "v1", "clusterroles", None),
        json!({"metadata": {"name": "cluster-owner"}, "rules": []}),
    )
    .await;
    let oref = owner_ref(&owner, "ConfigMap", "v1", false);
    create(
        &c,
        &cms,
        json!({"metadata": {"name": "child", "ownerReferences": [oref]}}),
    )
    .await;
    create(
        &c,
        &cms,
        json!({"metadata": {"name": "shared",
        "ownerReferences": [oref, owner_ref(&other, "ConfigMap", "v1", false)]}}),
    )
    .await;
    // A namespaced dependent of a cluster-scoped owner.
    create(&c, &cms, json!({"metadata": {"name": "of-role",
        "ownerReferences": [owner_ref(&role, "ClusterRole", "rbac.authorization.k8s.io/v1", false)]}}))
    .await;
    // An owner that never existed: the dependent goes.
    create(&c, &cms, json!({"metadata": {"name": "dangling", "ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost", "uid": "00000000-0000-0000-0000-000000000001"}]}}))
    .await;
    eventually("the dangling dependent collected", || {
        gone(&c, &cms, "dangling")
    })
    .await;

    c.delete(&cms, "owner", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the only child collected", || gone(&c, &cms, "child")).await;
    // The one with another owner loses the reference only.
    let shared = eventually("the shared dependent loses its reference", || {
        let c = c.clone();
        let cms = cms.clone();
        async move {
            let s = c.get(&cms, "shared").await.ok()?;
            (s["metadata"]["ownerReferences"].as_array()?.len() == 1).then_some(s)
        }
    })
    .await;
    assert_eq!(shared["metadata"]["ownerReferences"][0]["name"], "other");
    assert!(c.get(&cms, "of-role").await.is_ok());
    c.delete(
        &ResourceRef::new("rbac.authorization.k8s.io", "v1", "clusterroles", None),
        "cluster-owner",
        &DeleteParams::default(),
    )
    .await
    .unwrap();
    eventually(
        "the dependent of the cluster-scoped owner collected",
        || gone(&c, &cms, "of-role"),
    )
    .await;
    assert!(c.get(&cms, "other").await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreground_waits_for_blocking_dependents_and_orphan_keeps_them() {
    let env = env().await;
    let c = env.client.clone();
    start(&env);
    let cms = configmaps("default");
    let owner = create(&c, &cms, json!({"metadata": {"name": "fg"}})).await;
    // The blocking dependent holds a finalizer of its own, so the owner must wait.
    create(
        &c,
        &cms,
        json!({"metadata": {"name": "fg-child", "finalizers": ["example.com/hold"],
        "ownerReferences": [owner_ref(&owner, "ConfigMap", "v1", true)]}}),
    )
    .await;
    create(
        &c,
        &cms,
        json!({"metadata": {"name": "fg-loose",
        "ownerReferences": [owner_ref(&owner, "ConfigMap", "v1", false)]}}),
    )
    .await;
    c.delete(
        &cms,
        "fg",
        &DeleteParams {
            propagation_policy: Some("Foreground".into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let child = eventually("the blocking dependent deleted first", || {
        let c = c.clone();
        let cms = cms.clone();
        async move {
            let ch = c.get(&cms, "fg-child").await.ok()?;
            ch["metadata"]["deletionTimestamp"]
                .is_string()
                .then_some(ch)
        }
    })
    .await;
    eventually("the non-blocking dependent deleted", || {
        gone(&c, &cms, "fg-loose")
    })
    .await;
    let waiting = c.get(&cms, "fg").await.unwrap();
    assert_eq!(
        waiting["metadata"]["finalizers"],
        json!(["foregroundDeletion"])
    );
    let mut released = child.clone();
    released["metadata"]["finalizers"] = json!([]);
    c.update(&cms, released, None, &WriteParams::default())
        .await
        .unwrap();
    eventually("the owner goes after its dependent", || {
        gone(&c, &cms, "fg")
    })
    .await;

    // Orphan: the dependents stay, without the reference.
    let owner = create(&c, &cms, json!({"metadata": {"name": "or"}})).await;
    for name in ["or-a", "or-b"] {
        create(
            &c,
            &cms,
            json!({"metadata": {"name": name,
            "ownerReferences": [owner_ref(&owner, "ConfigMap", "v1", true)]}}),
        )
        .await;
    }
    c.delete(
        &cms,
        "or",
        &DeleteParams {
            propagation_policy: Some("Orphan".into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    eventually("the orphaning owner gone", || gone(&c, &cms, "or")).await;
    for name in ["or-a", "or-b"] {
        let o = c.get(&cms, name).await.unwrap();
        assert!(o["metadata"]["ownerReferences"].is_null(), "{o}");
        assert!(o["metadata"]["deletionTimestamp"].is_null());
    }
}
