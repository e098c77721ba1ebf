//! The StatefulSet controller against the real API semantics (the test acts as the kubelet by
//! marking pods Running and Ready through the status subresource): ordered creation with
//! claims, rolling update with a partition, revisions, scale down from the highest ordinal,
//! Parallel management and the claim retention policy.

mod common;

use std::sync::Arc;

use common::{create, env, eventually};

use futures::StreamExt;
use k1s_api::client::{Client, ListParams, Patch, ResourceRef, WatchEvent, WriteParams};
use serde_json::{Value, json};

fn sets() -> ResourceRef {
    ResourceRef::new("apps", "v1", "statefulsets", Some("default"))
}

fn pods() -> ResourceRef {
    ResourceRef::new("", "v1", "pods", Some("default"))
}

fn claims() -> ResourceRef {
    ResourceRef::new("", "v1", "persistentvolumeclaims", Some("default"))
}

fn revisions() -> ResourceRef {
    ResourceRef::new("apps", "v1", "controllerrevisions", Some("default"))
}

/// Live (not terminating) pods of the set by name, sorted.
async fn live_pods(c: &Arc<dyn Client>, app: &str) -> Vec<Value> {
    let mut ps: Vec<Value> = c
        .list(
            &pods(),
            &ListParams {
                label_selector: Some(format!("app={app}")),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .collect();
    ps.sort_by_key(|p| p["metadata"]["name"].as_str().unwrap_or("").to_owned());
    ps
}

fn names(ps: &[Value]) -> Vec<String> {
    ps.iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// What a kubelet reports for a started pod.
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

async fn get_set(c: &Arc<dyn Client>, name: &str) -> Value {
    c.get(&sets(), name).await.unwrap()
}

fn template(app: &str, image: &str) -> Value {
    json!({"metadata": {"labels": {"app": app}},
           "spec": {"containers": [{"name": "c", "image": image}]}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_claims_rolling_partition_and_scale_down() {
    let env = env().await;
    let c = env.client.clone();
    tokio::spawn(k1s_controllers::statefulset::run(
        c.clone(),
        std::sync::Arc::new(k1s_runtime::clock::SystemClock),
        env.cancel.clone(),
    ));
    create(&c, &sets(), json!({"metadata": {"name": "web"},
        "spec": {"replicas": 3, "serviceName": "nginx",
            "selector": {"matchLabels": {"app": "web"}},
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Delete"},
            "volumeClaimTemplates": [{"metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}],
            "template": template("web", "busybox:1")}}))
    .await;

    // OrderedReady: web-0 alone until it is ready, then web-1, then web-2.
    for n in 1..=3usize {
        let ps = eventually(&format!("{n} pods"), || {
            let c = c.clone();
            async move {
                let ps = live_pods(&c, "web").await;
                (ps.len() == n).then_some(ps)
            }
        })
        .await;
        let want: Vec<String> = (0..n).map(|i| format!("web-{i}")).collect();
        assert_eq!(names(&ps), want);
        let newest = &ps[n - 1];
        assert_eq!(newest["spec"]["hostname"], format!("web-{}", n - 1));
        assert_eq!(newest["spec"]["subdomain"], "nginx");
        assert_eq!(
            newest["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"],
            format!("web-{}", n - 1)
        );
        assert_eq!(
            newest["metadata"]["labels"]["apps.kubernetes.io/pod-index"],
            (n - 1).to_string()
        );
        assert_eq!(
            newest["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"],
            format!("data-web-{}", n - 1)
        );
        // Not ready yet: the next ordinal must wait.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert_eq!(live_pods(&c, "web").await.len(), n);
        mark_ready(&c, newest).await;
    }
    let claim = c.get(&claims(), "data-web-2").await.unwrap();
    assert_eq!(claim["metadata"]["labels"]["app"], "web");
    assert_eq!(claim["spec"]["resources"]["requests"]["storage"], "1Gi");
    let status = eventually("all ready, one revision", || {
        let c = c.clone();
        async move {
            let s = get_set(&c, "web").await["status"].clone();
            (s["readyReplicas"] == 3 && s["currentReplicas"] == 3).then_some(s)
        }
    })
    .await;
    let rev1 = status["updateRevision"].as_str().unwrap().to_owned();
    assert_eq!(status["currentRevision"], rev1);
    assert_eq!(status["updatedReplicas"], 3);
    assert_eq!(status["availableReplicas"], 3);
    assert_eq!(status["observedGeneration"], 1);
    let r1 = c.get(&revisions(), &rev1).await.unwrap();
    assert_eq!(r1["revision"], 1);
    assert_eq!(r1["data"]["spec"]["template"]["$patch"], "replace");
    for p in live_pods(&c, "web").await {
        assert_eq!(p["metadata"]["labels"]["controller-revision-hash"], rev1);
    }

    // A new image with partition 2: only web-2 is replaced.
    let patch = json!({"spec": {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}},
        "template": {"spec": {"containers": [{"name": "c", "image": "busybox:2"}]}}}});
    c.patch(
        &sets(),
        "web",
        &Patch::Merge(patch),
        None,
        &WriteParams::default(),
    )
    .await
    .unwrap();
    let rev2 = eventually("web-2 on the new revision", || {
        let c = c.clone();
        async move {
            let ps = live_pods(&c, "web").await;
            let p2 = ps.iter().find(|p| p["metadata"]["name"] == "web-2")?;
            if p2["spec"]["containers"][0]["image"] != "busybox:2" {
                return None;
            }
            mark_ready(&c, p2).await;
            Some(
                p2["metadata"]["labels"]["controller-revision-hash"]
                    .as_str()?
                    .to_owned(),
            )
        }
    })
    .await;
    assert_ne!(rev2, rev1);
    let status = eventually("partitioned status", || {
        let c = c.clone();
        async move {
            let s = get_set(&c, "web").await["status"].clone();
            (s["updatedReplicas"] == 1 && s["readyReplicas"] == 3).then_some(s)
        }
    })
    .await;
    assert_eq!(status["updateRevision"], rev2);
    assert_eq!(status["currentRevision"], rev1);
    assert_eq!(status["currentReplicas"], 2);
    for p in live_pods(&c, "web").await.iter().take(2) {
        assert_eq!(p["spec"]["containers"][0]["image"], "busybox:1");
    }

    // Partition 0: the rest follow, highest first; then the update is complete.
    c.patch(
        &sets(),
        "web",
        &Patch::Merge(json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}})),
        None,
        &WriteParams::default(),
    )
    .await
    .unwrap();
    eventually("rolled out", || {
        let c = c.clone();
        let rev2 = rev2.clone();
        async move {
            for p in live_pods(&c, "web").await {
                mark_ready(&c, &p).await;
            }
            let s = get_set(&c, "web").await["status"].clone();
            (s["currentRevision"] == rev2.as_str()
                && s["updatedReplicas"] == 3
                && s["currentReplicas"] == 3
                && s["readyReplicas"] == 3)
                .then_some(())
        }
    })
    .await;
    let revs = c.list(&revisions(), &ListParams::default()).await.unwrap();
    assert_eq!(revs.items.len(), 2);

    // Scale to 1: web-2 goes before web-1; whenScaled Delete hands their claims to the pods.
    let mut watch = common::watch_from_now(&c, &pods(), None).await;
    c.patch(
        &sets(),
        "web",
        &Patch::Merge(json!({"spec": {"replicas": 1}})),
        None,
        &WriteParams::default(),
    )
    .await
    .unwrap();
    let mut deleted = Vec::new();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    while deleted.len() < 2 {
        let ev = tokio::time::timeout_at(deadline, watch.next())
            .await
            .expect("two deletions")
            .unwrap()
            .unwrap();
        if let WatchEvent::Deleted(p) = ev {
            deleted.push(p["metadata"]["name"].as_str().unwrap().to_owned());
        }
    }
    assert_eq!(deleted, ["web-2", "web-1"]);
    let claim = c.get(&claims(), "data-web-2").await.unwrap();
    let refs = claim["metadata"]["ownerReferences"].as_array().unwrap();
    assert!(
        refs.iter()
            .any(|r| r["kind"] == "Pod" && r["name"] == "web-2"),
        "{claim}"
    );
    eventually("status replicas 1", || {
        let c = c.clone();
        async move { (get_set(&c, "web").await["status"]["replicas"] == 1).then_some(()) }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_start_ordinals_on_delete_and_history_limit() {
    let env = env().await;
    let c = env.client.clone();
    tokio::spawn(k1s_controllers::statefulset::run(
        c.clone(),
        std::sync::Arc::new(k1s_runtime::clock::SystemClock),
        env.cancel.clone(),
    ));
    create(&c, &sets(), json!({"metadata": {"name": "db"},
        "spec": {"replicas": 3, "serviceName": "db", "podManagementPolicy": "Parallel",
            "ordinals": {"start": 5}, "revisionHistoryLimit": 0,
            "updateStrategy": {"type": "OnDelete"},
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Retain"},
            "volumeClaimTemplates": [{"metadata": {"name": "d"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}],
            "selector": {"matchLabels": {"app": "db"}},
            "template": template("db", "busybox:1")}}))
    .await;
    // Parallel: all three at once, without waiting for readiness.
    let ps = eventually("three pods at once", || {
        let c = c.clone();
        async move {
            let ps = live_pods(&c, "db").await;
            (ps.len() == 3).then_some(ps)
        }
    })
    .await;
    assert_eq!(names(&ps), ["db-5", "db-6", "db-7"]);
    let set = get_set(&c, "db").await;
    let claim = c.get(&claims(), "d-db-6").await.unwrap();
    assert_eq!(
        claim["metadata"]["ownerReferences"][0]["uid"],
        set["metadata"]["uid"]
    );

    // OnDelete: a template change replaces nothing until a pod is deleted.
    for image in ["busybox:2", "busybox:3"] {
        c.patch(
            &sets(),
            "db",
            &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": image}]}}}})),
            None,
            &WriteParams::default(),
        )
        .await
        .unwrap();
        eventually("the update revision", || {
            let c = c.clone();
            async move {
                let s = get_set(&c, "db").await;
                (s["status"]["observedGeneration"] == s["metadata"]["generation"]).then_some(())
            }
        })
        .await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    for p in live_pods(&c, "db").await {
        assert_eq!(p["spec"]["containers"][0]["image"], "busybox:1");
    }
    let old_uid = ps[1]["metadata"]["uid"].clone();
    c.delete(&pods(), "db-6", &Default::default())
        .await
        .unwrap();
    eventually("db-6 recreated from the update revision", || {
        let c = c.clone();
        let old_uid = old_uid.clone();
        async move {
            let p = c.get(&pods(), "db-6").await.ok()?;
            (p["metadata"]["uid"] != old_uid && p["spec"]["containers"][0]["image"] == "busybox:3")
                .then_some(())
        }
    })
    .await;
    // Three revisions were made; with a limit of 0 only those in use remain (busybox:1 for
    // db-5 and db-7, busybox:3 the update revision); idle busybox:2 is deleted.
    eventually("history trimmed", || {
        let c = c.clone();
        async move {
            let s = get_set(&c, "db").await;
            let revs = c.list(&revisions(), &ListParams::default()).await.ok()?;
            let mut images: Vec<String> = revs
                .items
                .iter()
                .map(|r| {
                    r["data"]["spec"]["template"]["spec"]["containers"][0]["image"]
                        .as_str()
                        .unwrap_or("")
                        .to_owned()
                })
                .collect();
            images.sort();
            (s["status"]["updatedReplicas"] == 1 && images == ["busybox:1", "busybox:3"])
                .then_some(())
        }
    })
    .await;
}

/// What a kubelet reports when a pod's readiness probe fails.
async fn mark_unready(c: &Arc<dyn Client>, name: &str) {
    let mut p = c.get(&pods(), name).await.unwrap();
    p["status"]["phase"] = json!("Running");
    p["status"]["conditions"] = json!([{"type": "Ready", "status": "False",
        "lastTransitionTime": "2020-01-01T00:00:00Z"}]);
    c.update(&pods(), p, Some("status"), &WriteParams::default())
        .await
        .unwrap();
}

/// Upstream's "scaling should happen in predictable order and halt if any stateful pod is
/// unhealthy", scale-down half: with every pod unready, scaling to 0 deletes nothing (the
/// highest ordinal is unhealthy and not the first unhealthy pod); once they are ready again,
/// pods go from the highest ordinal down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_scale_down_halts_on_unhealthy_pods() {
    let env = env().await;
    let c = env.client.clone();
    tokio::spawn(k1s_controllers::statefulset::run(
        c.clone(),
        std::sync::Arc::new(k1s_runtime::clock::SystemClock),
        env.cancel.clone(),
    ));
    create(
        &c,
        &sets(),
        json!({"metadata": {"name": "halt"},
        "spec": {"replicas": 3, "serviceName": "nginx",
            "selector": {"matchLabels": {"app": "halt"}},
            "template": template("halt", "busybox:1")}}),
    )
    .await;
    for n in 1..=3usize {
        let ps = eventually(&format!("{n} pods"), || {
            let c = c.clone();
            async move {
                let ps = live_pods(&c, "halt").await;
                (ps.len() == n).then_some(ps)
            }
        })
        .await;
        mark_ready(&c, &ps[n - 1]).await;
    }
    for i in 0..3 {
        mark_unready(&c, &format!("halt-{i}")).await;
    }
    eventually("no ready replicas", || {
        let c = c.clone();
        async move {
            let s = get_set(&c, "halt").await;
            s["status"]["readyReplicas"]
                .as_i64()
                .is_none_or(|r| r == 0)
                .then_some(())
        }
    })
    .await;
    c.patch(
        &sets(),
        "halt",
        &Patch::Merge(json!({"spec": {"replicas": 0}})),
        None,
        &WriteParams::default(),
    )
    .await
    .unwrap();
    // Observed by the controller, and still nothing deleted.
    eventually("the scale observed", || {
        let c = c.clone();
        async move {
            let s = get_set(&c, "halt").await;
            (s["status"]["observedGeneration"] == s["metadata"]["generation"]).then_some(())
        }
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert_eq!(
        names(&live_pods(&c, "halt").await),
        ["halt-0", "halt-1", "halt-2"]
    );
    // Healthy again: deleted from the highest ordinal down (deletion is immediate here: no
    // kubelet holds the pods).
    let mut watch = common::watch_from_now(&c, &pods(), None).await;
    // From the highest ordinal down: an unhealthy pod that is itself the one to delete does
    // not halt the scale-down (upstream's rule), so healing 0 and 1 first could let halt-2
    // go before this loop reached it.
    for i in (0..3).rev() {
        let p = c.get(&pods(), &format!("halt-{i}")).await.unwrap();
        let mut p2 = p.clone();
        p2["status"]["phase"] = json!("Pending");
        mark_ready(&c, &p2).await;
    }
    let mut deleted = Vec::new();
    while deleted.len() < 3 {
        let ev = tokio::time::timeout(std::time::Duration::from_secs(30), watch.next())
            .await
            .expect("pods deleted within 30 s")
            .expect("the watch goes on")
            .unwrap();
        if let WatchEvent::Deleted(p) = ev {
            deleted.push(p["metadata"]["name"].as_str().unwrap().to_owned());
        }
    }
    assert_eq!(deleted, ["halt-2", "halt-1", "halt-0"]);
}
