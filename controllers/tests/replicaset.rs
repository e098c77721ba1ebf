//! The ReplicaSet controller against the real API semantics: creation from the template,
//! adoption, status as pods become ready, scaling down.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{create, env, eventually};

use futures::StreamExt;
use k1s_api::client::{Client, ListParams, Patch, ResourceRef, WatchEvent, WriteParams};
use serde_json::{Value, json};

async fn owned_pods(c: &Arc<dyn Client>, uid: &str) -> Vec<Value> {
    let pods = ResourceRef::new("", "v1", "pods", Some("default"));
    c.list(&pods, &ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| {
            p["metadata"]["ownerReferences"]
                .as_array()
                .is_some_and(|r| r.iter().any(|r| r["uid"] == uid && r["controller"] == true))
        })
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicaset_creates_adopts_reports_and_scales_down() {
    let env = env().await;
    let c = env.client.clone();
    tokio::spawn(k1s_controllers::replicaset::run(
        c.clone(),
        std::sync::Arc::new(k1s_runtime::clock::SystemClock),
        env.cancel.clone(),
    ));
    let sets = ResourceRef::new("apps", "v1", "replicasets", Some("default"));
    let pods = ResourceRef::new("", "v1", "pods", Some("default"));
    let rs = create(&c, &sets, json!({"metadata": {"name": "web-abc"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web", "pod-template-hash": "abc"}},
                 "template": {"metadata": {"labels": {"app": "web", "pod-template-hash": "abc"}},
                              "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}))
    .await;
    let uid = rs["metadata"]["uid"].as_str().unwrap().to_owned();
    let created = eventually("three pods", || {
        let (c, uid) = (c.clone(), uid.clone());
        async move {
            let ps = owned_pods(&c, &uid).await;
            (ps.len() == 3).then_some(ps)
        }
    })
    .await;
    for p in &created {
        assert_eq!(p["metadata"]["labels"]["pod-template-hash"], "abc");
        assert!(
            p["metadata"]["name"]
                .as_str()
                .unwrap()
                .starts_with("web-abc-")
        );
    }
    let status = eventually("status replicas 3", || {
        let c = c.clone();
        let sets = sets.clone();
        async move {
            let rs = c.get(&sets, "web-abc").await.ok()?;
            (rs["status"]["replicas"] == 3).then_some(rs["status"].clone())
        }
    })
    .await;
    assert_eq!(status["fullyLabeledReplicas"], 3);
    assert_eq!(status["observedGeneration"], 1);
    assert!(status["readyReplicas"].is_null());

    // Two pods become ready, as a kubelet would report.
    for p in created.iter().take(2) {
        let mut p = p.clone();
        p["status"]["phase"] = json!("Running");
        p["status"]["conditions"] = json!([{"type": "Ready", "status": "True",
            "lastTransitionTime": "2020-01-01T00:00:00Z"}]);
        c.update(&pods, p, Some("status"), &WriteParams::default())
            .await
            .unwrap();
    }
    eventually("two ready and available", || {
        let c = c.clone();
        let sets = sets.clone();
        async move {
            let rs = c.get(&sets, "web-abc").await.ok()?;
            (rs["status"]["readyReplicas"] == 2 && rs["status"]["availableReplicas"] == 2)
                .then_some(())
        }
    })
    .await;

    // An orphan that matches is adopted; one pod too many is then deleted (possibly the
    // orphan itself, so the adoption is watched for rather than polled).
    let mut watch = common::watch_from_now(&c, &pods, Some("metadata.name=stray")).await;
    create(
        &c,
        &pods,
        json!({"metadata": {"name": "stray", "labels": {"app": "web", "pod-template-hash": "abc"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}),
    )
    .await;
    let adopted = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(Ok(ev)) = watch.next().await {
            if let WatchEvent::Modified(p) | WatchEvent::Deleted(p) = ev
                && p["metadata"]["ownerReferences"][0]["uid"] == uid.as_str()
            {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(adopted, Ok(true), "the orphan was not adopted");
    eventually("back to three", || {
        let (c, uid) = (c.clone(), uid.clone());
        async move { (owned_pods(&c, &uid).await.len() == 3).then_some(()) }
    })
    .await;

    // Scale down to two: the pod that is not ready goes, the ready ones stay.
    c.patch(
        &sets,
        "web-abc",
        &Patch::Merge(json!({"spec": {"replicas": 2}})),
        None,
        &WriteParams::default(),
    )
    .await
    .unwrap();
    let left = eventually("two pods", || {
        let (c, uid) = (c.clone(), uid.clone());
        async move {
            let ps = owned_pods(&c, &uid).await;
            (ps.len() == 2).then_some(ps)
        }
    })
    .await;
    assert!(
        left.iter().all(|p| p["status"]["phase"] == "Running"),
        "{left:?}"
    );
    eventually("status follows", || {
        let c = c.clone();
        let sets = sets.clone();
        async move {
            let rs = c.get(&sets, "web-abc").await.ok()?;
            (rs["status"]["replicas"] == 2
                && rs["status"]["readyReplicas"] == 2
                && rs["status"]["observedGeneration"] == 2)
                .then_some(())
        }
    })
    .await;
}
