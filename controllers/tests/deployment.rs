//! The Deployment and ReplicaSet controllers together against the real API semantics, with a
//! stand-in kubelet that marks pods Running and Ready: creation, rolling update within the
//! surge budget, undo to an earlier revision, scaling, and Recreate; proportional scaling of a
//! stuck rollout and a new template after it.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{create, env, eventually, watch_from_now};
use futures::StreamExt;
use k1s_api::client::{Client, ListParams, Patch, ResourceRef, WatchEvent, WriteParams};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

fn deploys() -> ResourceRef {
    ResourceRef::new("apps", "v1", "deployments", Some("default"))
}

fn sets() -> ResourceRef {
    ResourceRef::new("apps", "v1", "replicasets", Some("default"))
}

/// Marks every pod Running and Ready, as a kubelet would, except those of an image tagged
/// `404` (one that cannot be pulled: its pods stay Pending).
async fn kubelet(c: Arc<dyn Client>, cancel: CancellationToken) {
    let pods = ResourceRef::new("", "v1", "pods", Some("default"));
    while !cancel.is_cancelled() {
        if let Ok(list) = c.list(&pods, &ListParams::default()).await {
            for mut p in list.items {
                if p["status"]["phase"] == "Running"
                    || p["metadata"]["deletionTimestamp"].is_string()
                    || p["spec"]["containers"][0]["image"]
                        .as_str()
                        .is_some_and(|i| i.ends_with(":404"))
                {
                    continue;
                }
                p["status"]["phase"] = json!("Running");
                p["status"]["conditions"] = json!([{"type": "Ready", "status": "True",
                    "lastTransitionTime": "2020-01-01T00:00:00Z"}]);
                let _ = c
                    .update(&pods, p, Some("status"), &WriteParams::default())
                    .await;
            }
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
}

/// The ReplicaSet and Deployment controllers, until `cancel`.
fn start_controllers(c: &Arc<dyn Client>, cancel: &CancellationToken) {
    tokio::spawn(k1s_controllers::replicaset::run(
        c.clone(),
        std::sync::Arc::new(k1s_runtime::clock::SystemClock),
        cancel.clone(),
    ));
    tokio::spawn(k1s_controllers::deployment::run(
        c.clone(),
        std::sync::Arc::new(k1s_runtime::clock::SystemClock),
        cancel.clone(),
    ));
}

async fn replica_sets(c: &Arc<dyn Client>) -> Vec<Value> {
    c.list(&sets(), &ListParams::default()).await.unwrap().items
}

/// Waits for the rollout to finish as `kubectl rollout status` judges it; meanwhile checks
/// that the ReplicaSets never ask for more than `max_total` pods and, with `exclusive`, that
/// old and new never run at once.
async fn rolled_out(c: &Arc<dyn Client>, name: &str, max_total: i64, exclusive: bool) -> Value {
    eventually("the rollout to finish", || {
        let c = c.clone();
        async move {
            let rss = replica_sets(&c).await;
            let total: i64 = rss
                .iter()
                .map(|r| r["spec"]["replicas"].as_i64().unwrap_or(0))
                .sum();
            assert!(total <= max_total, "{total} replicas asked for: {rss:?}");
            if exclusive {
                let active = rss
                    .iter()
                    .filter(|r| r["spec"]["replicas"].as_i64().unwrap_or(0) > 0)
                    .count();
                assert!(active <= 1, "old and new at once: {rss:?}");
            }
            let d = c.get(&deploys(), name).await.ok()?;
            let s = &d["status"];
            let want = d["spec"]["replicas"].as_i64()?;
            let done = d["metadata"]["generation"].as_i64() <= s["observedGeneration"].as_i64()
                && s["updatedReplicas"].as_i64() == Some(want)
                && s["replicas"].as_i64() == Some(want)
                && s["availableReplicas"].as_i64() == Some(want);
            done.then_some(d)
        }
    })
    .await
}

fn revision(o: &Value) -> &str {
    o["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
        .as_str()
        .unwrap_or("")
}

/// The Deployment's Progressing condition.
/// Waits for the Deployment's Progressing condition to say its deadline was exceeded.
async fn deadline_exceeded(c: &Arc<dyn Client>, name: &str) -> Value {
    eventually("the progress deadline exceeded", || {
        let c = c.clone();
        async move {
            let d = c.get(&deploys(), name).await.ok()?;
            progressing(&d)
                .filter(|p| p["reason"] == "ProgressDeadlineExceeded")
                .cloned()
        }
    })
    .await
}

fn progressing(d: &Value) -> Option<&Value> {
    d["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Progressing")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_update_undo_scale_and_recreate() {
    let env = env().await;
    let c = env.client.clone();
    start_controllers(&c, &env.cancel);
    tokio::spawn(kubelet(c.clone(), env.cancel.clone()));
    create(&c, &deploys(), json!({"metadata": {"name": "web"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                 "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}}}))
    .await;
    let d = rolled_out(&c, "web", 3, false).await;
    assert_eq!(revision(&d), "1");
    assert_eq!(progressing(&d).unwrap()["reason"], "NewReplicaSetAvailable");
    let rss = replica_sets(&c).await;
    assert_eq!(rss.len(), 1);
    let first = rss[0].clone();
    let hash = first["metadata"]["labels"]["pod-template-hash"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(first["metadata"]["name"], format!("web-{hash}"));
    assert_eq!(revision(&first), "1");

    // A new image rolls out one surge pod at a time.
    c.patch(
        &deploys(),
        "web",
        &Patch::Merge(json!({
            "metadata": {"annotations": {"kubernetes.io/change-cause": "image 2"}},
            "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox:2"}]}}}})),
        None,
        &WriteParams::default(),
    )
    .await
    .unwrap();
    let d = rolled_out(&c, "web", 4, false).await;
    assert_eq!(revision(&d), "2");
    let rss = replica_sets(&c).await;
    assert_eq!(rss.len(), 2);
    let old = rss
        .iter()
        .find(|r| r["metadata"]["name"] == first["metadata"]["name"])
        .unwrap();
    assert_eq!(old["spec"]["replicas"], 0);
    let new = rss
        .iter()
        .find(|r| r["metadata"]["name"] != first["metadata"]["name"])
        .unwrap();
    assert_eq!(revision(new), "2");
    assert_eq!(
        new["metadata"]["annotations"]["kubernetes.io/change-cause"],
        "image 2"
    );
    assert_eq!(
        new["spec"]["template"]["spec"]["containers"][0]["image"],
        "busybox:2"
    );

    // Undo, as kubectl does it: the old template back; the old set becomes revision 3.
    let mut template = first["spec"]["template"].clone();
    template["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove("pod-template-hash");
    c.patch(
        &deploys(),
        "web",
        &Patch::Merge(json!({"spec": {"template": template}})),
        None,
        &WriteParams::default(),
    )
    .await
    .unwrap();
    let d = rolled_out(&c, "web", 4, false).await;
    assert_eq!(revision(&d), "3");
    let back = c
        .get(&sets(), first["metadata"]["name"].as_str().unwrap())
        .await
        .unwrap();
    assert_eq!(revision(&back), "3");
    assert_eq!(back["spec"]["replicas"], 3);

    // Scaling.
    c.patch(
        &deploys(),
        "web",
        &Patch::Merge(json!({"spec": {"replicas": 5}})),
        None,
        &WriteParams::default(),
    )
    .await
    .unwrap();
    rolled_out(&c, "web", 6, false).await;

    // Recreate: the old pods go before new ones come.
    create(
        &c,
        &deploys(),
        json!({"metadata": {"name": "batch"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "batch"}},
                 "strategy": {"type": "Recreate"},
                 "template": {"metadata": {"labels": {"app": "batch"}},
                              "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}}}),
    )
    .await;
    rolled_out(&c, "batch", 7, false).await;
    c.patch(
        &deploys(),
        "batch",
        &Patch::Merge(json!({"spec": {"template": {"spec":
        {"containers": [{"name": "c", "image": "busybox:2"}]}}}})),
        None,
        &WriteParams::default(),
    )
    .await
    .unwrap();
    let d = eventually("the recreate rollout", || {
        let c = c.clone();
        async move {
            let rss: Vec<Value> = replica_sets(&c)
                .await
                .into_iter()
                .filter(|r| r["metadata"]["labels"]["app"] == "batch")
                .collect();
            let active = rss
                .iter()
                .filter(|r| r["spec"]["replicas"].as_i64().unwrap_or(0) > 0)
                .count();
            assert!(active <= 1, "old and new at once: {rss:?}");
            let d = c.get(&deploys(), "batch").await.ok()?;
            let s = &d["status"];
            (d["metadata"]["generation"].as_i64() <= s["observedGeneration"].as_i64()
                && s["updatedReplicas"] == 2
                && s["availableReplicas"] == 2
                && s["replicas"] == 2)
                .then_some(d)
        }
    })
    .await;
    assert_eq!(revision(&d), "2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_resume_and_progress_deadline() {
    let env = env().await;
    let c = env.client.clone();
    start_controllers(&c, &env.cancel);
    let kubelet_cancel = env.cancel.child_token();
    tokio::spawn(kubelet(c.clone(), kubelet_cancel.clone()));
    create(
        &c,
        &deploys(),
        json!({"metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}}}),
    )
    .await;
    rolled_out(&c, "web", 3, false).await;
    // Paused: a template change rolls nothing out, but scaling still applies.
    c.patch(
        &deploys(),
        "web",
        &Patch::Merge(json!({"spec": {"paused": true}})),
        None,
        &WriteParams::default(),
    )
    .await
    .unwrap();
    c.patch(
        &deploys(),
        "web",
        &Patch::Merge(json!({"spec": {"replicas": 3, "template": {"spec":
        {"containers": [{"name": "c", "image": "busybox:2"}]}}}})),
        None,
        &WriteParams::default(),
    )
    .await
    .unwrap();
    let d = eventually("the paused condition and the new size", || {
        let c = c.clone();
        async move {
            let d = c.get(&deploys(), "web").await.ok()?;
            let paused = progressing(&d).is_some_and(|p| p["reason"] == "DeploymentPaused");
            (paused && d["status"]["availableReplicas"] == 3).then_some(d)
        }
    })
    .await;
    // No ReplicaSet has the new template yet: none are up to date (omitted as zero).
    assert!(d["status"]["updatedReplicas"].is_null(), "{}", d["status"]);
    assert_eq!(
        replica_sets(&c).await.len(),
        1,
        "no new replica set while paused"
    );
    // Resumed: the new template rolls out.
    c.patch(
        &deploys(),
        "web",
        &Patch::Merge(json!({"spec": {"paused": false}})),
        None,
        &WriteParams::default(),
    )
    .await
    .unwrap();
    let d = rolled_out(&c, "web", 4, false).await;
    assert_eq!(revision(&d), "2");

    // No kubelet: a new rollout makes no progress and misses its deadline.
    kubelet_cancel.cancel();
    let mut watch = watch_from_now(&c, &deploys(), None).await;
    c.patch(
        &deploys(),
        "web",
        &Patch::Merge(json!({"spec": {"progressDeadlineSeconds": 1,
        "template": {"spec": {"containers": [{"name": "c", "image": "busybox:3"}]}}}})),
        None,
        &WriteParams::default(),
    )
    .await
    .unwrap();
    let cond = deadline_exceeded(&c, "web").await;
    assert_eq!(cond["status"], "False");
    // The deadline ran from the pass that created the new ReplicaSet, which said so in the
    // same pass as it recorded the new revision (the watch sees every version written).
    let new_rs = replica_sets(&c)
        .await
        .into_iter()
        .find(|r| revision(r) == "3")
        .expect("the third revision's replica set");
    let created = format!(
        "Created new replica set \"{}\"",
        new_rs["metadata"]["name"].as_str().unwrap()
    );
    let said = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(Ok(ev)) = watch.next().await {
            if let WatchEvent::Modified(d) = ev
                && progressing(&d).is_some_and(|p| {
                    p["reason"] == "NewReplicaSetCreated" && p["message"] == created.as_str()
                })
            {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(
        said,
        Ok(true),
        "no {created:?} in any version of the Deployment"
    );
    // The old pods stay available meanwhile (maxUnavailable 25% of 3 rounds down to 0).
    let d = c.get(&deploys(), "web").await.unwrap();
    assert_eq!(d["status"]["availableReplicas"], 3);
}

/// The progress deadline is judged on the controller's clock: with a fake one moved past the
/// deadline, a stuck rollout is reported at once rather than ten minutes later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_progress_deadline_runs_on_the_controllers_clock() {
    let env = env().await;
    let c = env.client.clone();
    let clock = k1s_runtime::clock::FakeClock::new();
    tokio::spawn(k1s_controllers::replicaset::run(
        c.clone(),
        Arc::new(clock.clone()),
        env.cancel.clone(),
    ));
    tokio::spawn(k1s_controllers::deployment::run(
        c.clone(),
        Arc::new(clock.clone()),
        env.cancel.clone(),
    ));
    // No kubelet: the pods never become ready.
    create(
        &c,
        &deploys(),
        json!({"metadata": {"name": "slow"},
        "spec": {"replicas": 1, "progressDeadlineSeconds": 600,
                 "selector": {"matchLabels": {"app": "slow"}},
                 "template": {"metadata": {"labels": {"app": "slow"}},
                              "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}}}),
    )
    .await;
    eventually("the rollout under way", || {
        let c = c.clone();
        async move {
            let d = c.get(&deploys(), "slow").await.ok()?;
            progressing(&d)
                .filter(|p| p["status"] == "True")
                .map(|_| ())
        }
    })
    .await;
    clock.advance(Duration::from_secs(601));
    // Any change of the Deployment makes the controller look again.
    c.patch(
        &deploys(),
        "slow",
        &Patch::Merge(json!({"metadata": {"annotations": {"poke": "1"}}})),
        None,
        &WriteParams::default(),
    )
    .await
    .unwrap();
    let cond = deadline_exceeded(&c, "slow").await;
    assert_eq!(cond["status"], "False");
}

fn spec_of(rss: &[Value], image: &str) -> Option<i64> {
    rss.iter()
        .find(|r| r["spec"]["template"]["spec"]["containers"][0]["image"] == image)
        .and_then(|r| r["spec"]["replicas"].as_i64())
}

/// Upstream's "proportional scaling" and "lifecycle of a Deployment" conformance cases: a
/// rollout stuck on an image that never runs, scaled up (the difference spread over the old
/// and new ReplicaSets by size) and down, then a new template rolls out completely.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stuck_rollout_scales_proportionally_and_a_new_template_rolls_out() {
    let env = env().await;
    let c = env.client.clone();
    start_controllers(&c, &env.cancel);
    tokio::spawn(kubelet(c.clone(), env.cancel.clone()));
    create(
        &c,
        &deploys(),
        json!({"metadata": {"name": "web"},
        "spec": {"replicas": 10, "selector": {"matchLabels": {"app": "web"}},
                 "strategy": {"type": "RollingUpdate",
                              "rollingUpdate": {"maxSurge": 3, "maxUnavailable": 2}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}}}),
    )
    .await;
    rolled_out(&c, "web", 13, false).await;
    let set_spec = |patch: Value| {
        let c = c.clone();
        async move {
            c.patch(
                &deploys(),
                "web",
                &Patch::Merge(json!({ "spec": patch })),
                None,
                &WriteParams::default(),
            )
            .await
            .unwrap();
        }
    };
    // Stuck: 10 - maxUnavailable old, replicas + maxSurge - 8 new.
    set_spec(
        json!({"template": {"spec": {"containers": [{"name": "c", "image": "busybox:404"}]}}}),
    )
    .await;
    let sizes = |old: i64, new: i64| {
        let c = c.clone();
        move || {
            let c = c.clone();
            async move {
                let rss = replica_sets(&c).await;
                (spec_of(&rss, "busybox:1") == Some(old)
                    && spec_of(&rss, "busybox:404") == Some(new))
                .then_some(())
            }
        }
    };
    eventually("8 old and 5 new replicas", sizes(8, 5)).await;
    // 30 replicas (33 allowed): 8 + round(20 * 8/13) and 5 + round(20 * 5/13).
    set_spec(json!({"replicas": 30})).await;
    eventually("20 old and 13 new replicas", sizes(20, 13)).await;
    // And back to 10: 8 and 5 again.
    set_spec(json!({"replicas": 10})).await;
    eventually("8 old and 5 new replicas again", sizes(8, 5)).await;
    // A working template and a new size: it rolls out completely.
    set_spec(json!({"replicas": 2,
        "template": {"spec": {"containers": [{"name": "c", "image": "busybox:3"}]}}}))
    .await;
    rolled_out(&c, "web", 33, false).await;
    let rss = replica_sets(&c).await;
    assert_eq!(spec_of(&rss, "busybox:3"), Some(2), "{rss:?}");
    assert_eq!(spec_of(&rss, "busybox:1"), Some(0), "{rss:?}");
    assert_eq!(spec_of(&rss, "busybox:404"), Some(0), "{rss:?}");
}
