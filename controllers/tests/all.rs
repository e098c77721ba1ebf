//! Every controller together through `run_all`, as the server runs them: a Deployment's
//! deletion cascades in the background and in the foreground, `orphan` keeps its ReplicaSet
//! and pods, and deleting a namespace with a Deployment in it empties it.

mod common;

use std::sync::Arc;

use common::{create, env, eventually, namespaces};
use k1s_api::client::{Client, DeleteParams, ListParams, ResourceRef};
use serde_json::{Value, json};

fn deployment(name: &str) -> Value {
    json!({"metadata": {"name": name},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}})
}

async fn count(c: &Arc<dyn Client>, r: &ResourceRef, app: &str) -> usize {
    c.list(
        r,
        &ListParams {
            label_selector: Some(format!("app={app}")),
            ..Default::default()
        },
    )
    .await
    .map(|l| l.items.len())
    .unwrap_or(usize::MAX)
}

async fn delete(c: &Arc<dyn Client>, r: &ResourceRef, name: &str, policy: &str) {
    c.delete(
        r,
        name,
        &DeleteParams {
            propagation_policy: Some(policy.into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_deletion_cascades_and_namespaces_empty() {
    let env = env().await;
    let c = env.client.clone();
    tokio::spawn(k1s_controllers::run_all(
        c.clone(),
        env.catalog.clone(),
        "pem".into(),
        env.cancel.clone(),
    ));
    let deploys = ResourceRef::new("apps", "v1", "deployments", Some("default"));
    let sets = ResourceRef::new("apps", "v1", "replicasets", Some("default"));
    let pods = ResourceRef::new("", "v1", "pods", Some("default"));
    for (name, policy) in [("bg", "Background"), ("fg", "Foreground"), ("or", "Orphan")] {
        create(&c, &deploys, deployment(name)).await;
        eventually("two pods", || {
            let (c, pods) = (c.clone(), pods.clone());
            async move { (count(&c, &pods, name).await == 2).then_some(()) }
        })
        .await;
        delete(&c, &deploys, name, policy).await;
        if policy == "Foreground" {
            // The owner stays, marked, until its dependents are gone.
            if let Ok(d) = c.get(&deploys, name).await {
                assert_eq!(d["metadata"]["finalizers"], json!(["foregroundDeletion"]));
            }
        }
        eventually("the deployment gone", || {
            let (c, deploys) = (c.clone(), deploys.clone());
            async move { c.get(&deploys, name).await.is_err().then_some(()) }
        })
        .await;
        if policy == "Orphan" {
            let rs = c
                .list(
                    &sets,
                    &ListParams {
                        label_selector: Some(format!("app={name}")),
                        ..Default::default()
                    },
                )
                .await
                .unwrap()
                .items;
            assert_eq!(rs.len(), 1);
            assert!(rs[0]["metadata"]["ownerReferences"].is_null(), "{}", rs[0]);
            assert_eq!(count(&c, &pods, name).await, 2);
        } else {
            eventually("replica sets and pods gone", || {
                let (c, sets, pods) = (c.clone(), sets.clone(), pods.clone());
                async move {
                    (count(&c, &sets, name).await == 0 && count(&c, &pods, name).await == 0)
                        .then_some(())
                }
            })
            .await;
        }
    }

    // A namespace with a Deployment in it.
    create(
        &c,
        &namespaces(),
        json!({"metadata": {"name": "team"}, "spec": {}}),
    )
    .await;
    let team = ResourceRef::new("apps", "v1", "deployments", Some("team"));
    let team_pods = ResourceRef::new("", "v1", "pods", Some("team"));
    create(&c, &team, deployment("app")).await;
    eventually("the team's pods", || {
        let (c, team_pods) = (c.clone(), team_pods.clone());
        async move { (count(&c, &team_pods, "app").await == 2).then_some(()) }
    })
    .await;
    // The namespace defaults arrived too.
    let sa = ResourceRef::new("", "v1", "serviceaccounts", Some("team"));
    eventually("the default service account", || {
        let (c, sa) = (c.clone(), sa.clone());
        async move { c.get(&sa, "default").await.ok() }
    })
    .await;
    c.delete(&namespaces(), "team", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the namespace gone", || {
        let c = c.clone();
        async move {
            match c.get(&namespaces(), "team").await {
                Err(e) if e.is_not_found() => Some(()),
                _ => None,
            }
        }
    })
    .await;
    assert_eq!(count(&c, &team_pods, "app").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elected_controllers_run_under_the_lease() {
    let env = env().await;
    let c = env.client.clone();
    let cancel = env.cancel.child_token();
    let run = tokio::spawn(k1s_controllers::run_elected(
        c.clone(),
        env.catalog.clone(),
        "pem".into(),
        "server-1",
        cancel.clone(),
    ));
    let leases = ResourceRef::new("coordination.k8s.io", "v1", "leases", Some("kube-system"));
    let lease = eventually("the lease", || {
        let (c, leases) = (c.clone(), leases.clone());
        async move { c.get(&leases, "kube-controller-manager").await.ok() }
    })
    .await;
    assert_eq!(lease["spec"]["holderIdentity"], "server-1");
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 15);
    create(
        &c,
        &namespaces(),
        json!({"metadata": {"name": "led"}, "spec": {}}),
    )
    .await;
    let sa = ResourceRef::new("", "v1", "serviceaccounts", Some("led"));
    eventually("the controllers at work", || {
        let (c, sa) = (c.clone(), sa.clone());
        async move { c.get(&sa, "default").await.ok() }
    })
    .await;
    // Stopping releases the lease.
    cancel.cancel();
    assert!(run.await.unwrap().is_ok());
    let lease = c.get(&leases, "kube-controller-manager").await.unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], "");
}
