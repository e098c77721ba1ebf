//! The Job and TTL-after-finished controllers against the real API semantics; the test acts
//! as the kubelet, setting pod phases through the status subresource.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{create, env, eventually, watch_from_now};

use futures::StreamExt;
use k1s_api::client::{Client, ListParams, Patch, ResourceRef, WatchEvent, WriteParams};
use k1s_controllers::job::{self, TRACKING_FINALIZER};
use serde_json::{Value, json};

fn jobs() -> ResourceRef {
    ResourceRef::new("batch", "v1", "jobs", Some("default"))
}

fn pods() -> ResourceRef {
    ResourceRef::new("", "v1", "pods", Some("default"))
}

/// Starts the Job controller with a short pod-recreation delay.
fn start(env: &common::Env) -> Arc<dyn Client> {
    let c = env.client.clone();
    let options = job::Options {
        pod_failure_backoff: Duration::from_millis(200),
        ..job::Options::default()
    };
    tokio::spawn(job::run_with(c.clone(), options, env.cancel.clone()));
    c
}

fn job_spec(name: &str, spec: Value) -> Value {
    let mut j = json!({"metadata": {"name": name}, "spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}}}});
    for (k, v) in spec.as_object().unwrap() {
        j["spec"][k] = v.clone();
    }
    j
}

/// The pods of job `uid` (all, or only those not being deleted).
async fn job_pods(c: &Arc<dyn Client>, uid: &str, live_only: bool) -> Vec<Value> {
    c.list(&pods(), &ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p["metadata"]["ownerReferences"][0]["uid"] == uid)
        .filter(|p| !live_only || p["metadata"]["deletionTimestamp"].is_null())
        .collect()
}

async fn wait_pods(c: &Arc<dyn Client>, uid: &str, what: &str, n: usize) -> Vec<Value> {
    eventually(what, || {
        let (c, uid) = (c.clone(), uid.to_owned());
        async move {
            let ps: Vec<Value> = job_pods(&c, &uid, true)
                .await
                .into_iter()
                .filter(|p| !matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed")))
                .collect();
            (ps.len() == n).then_some(ps)
        }
    })
    .await
}

/// Sets a pod's phase as a kubelet would, with its main container's exit code.
async fn finish(c: &Arc<dyn Client>, pod: &Value, phase: &str, code: i64) {
    let mut p = c
        .get(&pods(), pod["metadata"]["name"].as_str().unwrap())
        .await
        .unwrap();
    p["status"]["phase"] = json!(phase);
    p["status"]["containerStatuses"] = json!([{"name": "main", "image": "busybox", "imageID": "",
        "ready": false, "restartCount": 0,
        "state": {"terminated": {"exitCode": code, "reason": if code == 0 { "Completed" } else { "Error" },
                                 "finishedAt": "2024-01-01T00:00:00Z"}}}]);
    c.update(&pods(), p, Some("status"), &WriteParams::default())
        .await
        .unwrap();
}

async fn wait_condition(c: &Arc<dyn Client>, name: &str, type_: &str) -> Value {
    eventually(&format!("job {name} {type_}"), || {
        let c = c.clone();
        let name = name.to_owned();
        let type_ = type_.to_owned();
        async move {
            let j = c.get(&jobs(), &name).await.ok()?;
            j["status"]["conditions"]
                .as_array()?
                .iter()
                .any(|x| x["type"] == type_.as_str() && x["status"] == "True")
                .then_some(j)
        }
    })
    .await
}

fn cond<'a>(job: &'a Value, type_: &str) -> &'a Value {
    job["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == type_)
        .unwrap_or(&Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_and_parallelism_then_complete() {
    let env = env().await;
    let c = start(&env);
    let j = create(
        &c,
        &jobs(),
        job_spec("work", json!({"completions": 3, "parallelism": 2})),
    )
    .await;
    let uid = j["metadata"]["uid"].as_str().unwrap().to_owned();
    // The apiserver generated the selector and the template labels.
    assert_eq!(
        j["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"],
        uid.as_str()
    );
    let first = wait_pods(&c, &uid, "two pods", 2).await;
    for p in &first {
        assert_eq!(p["metadata"]["labels"]["job-name"], "work");
        assert!(
            p["metadata"]["finalizers"]
                .as_array()
                .unwrap()
                .contains(&json!(TRACKING_FINALIZER))
        );
        assert!(p["metadata"]["name"].as_str().unwrap().starts_with("work-"));
    }
    let status = eventually("active 2", || {
        let c = c.clone();
        async move {
            let j = c.get(&jobs(), "work").await.ok()?;
            (j["status"]["active"] == 2).then_some(j["status"].clone())
        }
    })
    .await;
    assert!(status["startTime"].is_string());
    assert_eq!(status["ready"], 0);
    finish(&c, &first[0], "Succeeded", 0).await;
    finish(&c, &first[1], "Succeeded", 0).await;
    let third = wait_pods(&c, &uid, "the third pod", 1).await;
    eventually("succeeded 2", || {
        let c = c.clone();
        async move {
            let j = c.get(&jobs(), "work").await.ok()?;
            (j["status"]["succeeded"] == 2).then_some(())
        }
    })
    .await;
    finish(&c, &third[0], "Succeeded", 0).await;
    let done = wait_condition(&c, "work", "Complete").await;
    assert_eq!(done["status"]["succeeded"], 3);
    assert!(done["status"]["failed"].is_null());
    assert!(done["status"]["completionTime"].is_string());
    assert_eq!(cond(&done, "Complete")["reason"], "CompletionsReached");
    assert_eq!(cond(&done, "SuccessCriteriaMet")["status"], "True");
    assert_eq!(done["status"]["uncountedTerminatedPods"], json!({}));
    // Every pod was counted and released.
    let all = job_pods(&c, &uid, false).await;
    assert_eq!(all.len(), 3);
    eventually("finalizers removed", || {
        let (c, uid) = (c.clone(), uid.clone());
        async move {
            let all = job_pods(&c, &uid, false).await;
            all.iter()
                .all(|p| {
                    !p["metadata"]["finalizers"]
                        .as_array()
                        .is_some_and(|f| f.contains(&json!(TRACKING_FINALIZER)))
                })
                .then_some(())
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backoff_limit_then_failed() {
    let env = env().await;
    let c = start(&env);
    let j = create(&c, &jobs(), job_spec("flaky", json!({"backoffLimit": 1}))).await;
    let uid = j["metadata"]["uid"].as_str().unwrap().to_owned();
    let p = wait_pods(&c, &uid, "first pod", 1).await;
    finish(&c, &p[0], "Failed", 1).await;
    // Replaced after the (shortened) delay; one failure is within the limit.
    let p2 = wait_pods(&c, &uid, "replacement", 1).await;
    assert_ne!(p2[0]["metadata"]["uid"], p[0]["metadata"]["uid"]);
    finish(&c, &p2[0], "Failed", 1).await;
    let failed = wait_condition(&c, "flaky", "Failed").await;
    assert_eq!(failed["status"]["failed"], 2);
    assert_eq!(cond(&failed, "Failed")["reason"], "BackoffLimitExceeded");
    assert_eq!(
        cond(&failed, "Failed")["message"],
        "Job has reached the specified backoff limit"
    );
    assert_eq!(
        cond(&failed, "FailureTarget")["reason"],
        "BackoffLimitExceeded"
    );
    assert!(failed["status"]["completionTime"].is_null());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_failure_policy_ignore_and_fail_job() {
    let env = env().await;
    let c = start(&env);
    let policy = json!({"rules": [
        {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [3]}},
        {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}}]});
    let j = create(
        &c,
        &jobs(),
        job_spec(
            "policy",
            json!({"backoffLimit": 0, "podFailurePolicy": policy}),
        ),
    )
    .await;
    let uid = j["metadata"]["uid"].as_str().unwrap().to_owned();
    let p = wait_pods(&c, &uid, "first pod", 1).await;
    // Exit code 3 is ignored: not counted even with backoffLimit 0, and replaced.
    finish(&c, &p[0], "Failed", 3).await;
    let p2 = eventually("replacement", || {
        let (c, uid, old) = (c.clone(), uid.clone(), p[0]["metadata"]["uid"].clone());
        async move {
            job_pods(&c, &uid, true)
                .await
                .into_iter()
                .find(|x| x["metadata"]["uid"] != old && x["status"]["phase"] == "Pending")
        }
    })
    .await;
    let j = c.get(&jobs(), "policy").await.unwrap();
    assert!(j["status"]["failed"].is_null(), "{}", j["status"]);
    finish(&c, &p2, "Failed", 42).await;
    let failed = wait_condition(&c, "policy", "Failed").await;
    assert_eq!(cond(&failed, "Failed")["reason"], "PodFailurePolicy");
    let msg = cond(&failed, "Failed")["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        msg.starts_with("Container main for pod default/policy-"),
        "{msg}"
    );
    assert!(
        msg.ends_with("failed with exit code 42 matching FailJob rule at index 1"),
        "{msg}"
    );
    assert_eq!(failed["status"]["failed"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indexed_job_tracks_completed_indexes() {
    let env = env().await;
    let c = start(&env);
    let j = create(
        &c,
        &jobs(),
        job_spec(
            "idx",
            json!({"completions": 3, "parallelism": 3, "completionMode": "Indexed"}),
        ),
    )
    .await;
    let uid = j["metadata"]["uid"].as_str().unwrap().to_owned();
    let mut ps = wait_pods(&c, &uid, "three indexed pods", 3).await;
    let ix = |p: &Value| {
        p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    ps.sort_by_key(ix);
    for (i, p) in ps.iter().enumerate() {
        assert_eq!(ix(p), i.to_string());
        assert_eq!(
            p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"],
            i.to_string()
        );
        assert_eq!(p["spec"]["hostname"], format!("idx-{i}"));
        assert!(
            p["metadata"]["name"]
                .as_str()
                .unwrap()
                .starts_with(&format!("idx-{i}-"))
        );
        assert_eq!(
            p["spec"]["containers"][0]["env"][0]["name"],
            "JOB_COMPLETION_INDEX"
        );
    }
    finish(&c, &ps[1], "Succeeded", 0).await;
    eventually("completedIndexes 1", || {
        let c = c.clone();
        async move {
            let j = c.get(&jobs(), "idx").await.ok()?;
            (j["status"]["completedIndexes"] == "1" && j["status"]["succeeded"] == 1).then_some(())
        }
    })
    .await;
    // Index 0 fails: replaced by a new pod of index 0.
    finish(&c, &ps[0], "Failed", 1).await;
    let again = eventually("a new pod for index 0", || {
        let (c, uid, old) = (c.clone(), uid.clone(), ps[0]["metadata"]["uid"].clone());
        async move {
            job_pods(&c, &uid, true).await.into_iter().find(|p| {
                p["metadata"]["uid"] != old
                    && p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
                        == "0"
            })
        }
    })
    .await;
    finish(&c, &again, "Succeeded", 0).await;
    finish(&c, &ps[2], "Succeeded", 0).await;
    let done = wait_condition(&c, "idx", "Complete").await;
    assert_eq!(done["status"]["completedIndexes"], "0-2");
    assert_eq!(done["status"]["succeeded"], 3);
    assert_eq!(done["status"]["failed"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadline_suspend_and_ttl() {
    let env = env().await;
    let c = start(&env);
    tokio::spawn(k1s_controllers::ttl_after_finished::run(
        c.clone(),
        env.cancel.clone(),
    ));
    // The TTL controller deletes in the foreground, as upstream: the collector finishes it.
    tokio::spawn(k1s_controllers::gc::run(
        c.clone(),
        env.catalog.clone(),
        env.cancel.clone(),
    ));
    // activeDeadlineSeconds: the running pod goes and the job fails. startTime has whole
    // seconds, so the pod may live for a few milliseconds only: its creation is watched for
    // rather than polled.
    let mut watch = watch_from_now(&c, &pods(), None).await;
    let j = create(
        &c,
        &jobs(),
        job_spec("slow", json!({"activeDeadlineSeconds": 1})),
    )
    .await;
    let uid = j["metadata"]["uid"].as_str().unwrap().to_owned();
    let created = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(Ok(ev)) = watch.next().await {
            if let WatchEvent::Added(p) = ev
                && p["metadata"]["ownerReferences"][0]["uid"] == uid.as_str()
            {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(created, Ok(true), "the job's pod was never created");
    let failed = wait_condition(&c, "slow", "Failed").await;
    assert_eq!(cond(&failed, "Failed")["reason"], "DeadlineExceeded");
    assert_eq!(
        cond(&failed, "Failed")["message"],
        "Job was active longer than specified deadline"
    );
    eventually("the pod deleted", || {
        let (c, uid) = (c.clone(), uid.clone());
        async move { job_pods(&c, &uid, false).await.is_empty().then_some(()) }
    })
    .await;

    // Suspended: no pods, the Suspended condition; resumed: pods.
    let j = create(
        &c,
        &jobs(),
        job_spec(
            "later",
            json!({"suspend": true, "ttlSecondsAfterFinished": 0}),
        ),
    )
    .await;
    let uid = j["metadata"]["uid"].as_str().unwrap().to_owned();
    let s = wait_condition(&c, "later", "Suspended").await;
    assert_eq!(cond(&s, "Suspended")["reason"], "JobSuspended");
    assert!(s["status"]["startTime"].is_null());
    assert!(job_pods(&c, &uid, false).await.is_empty());
    c.patch(
        &jobs(),
        "later",
        &Patch::Merge(json!({"spec": {"suspend": false}})),
        None,
        &WriteParams::default(),
    )
    .await
    .unwrap();
    let p = wait_pods(&c, &uid, "a pod after resume", 1).await;
    // The pods may be created before the status that says the job resumed is written.
    let resumed = eventually("job later resumed", || {
        let c = c.clone();
        async move {
            let j = c.get(&jobs(), "later").await.ok()?;
            (cond(&j, "Suspended")["status"] == "False").then_some(j)
        }
    })
    .await;
    assert_eq!(cond(&resumed, "Suspended")["status"], "False");
    assert_eq!(cond(&resumed, "Suspended")["reason"], "JobResumed");
    finish(&c, &p[0], "Succeeded", 0).await;
    // ttlSecondsAfterFinished 0: the finished job is deleted.
    eventually("the finished job deleted by its TTL", || {
        let c = c.clone();
        async move {
            c.get(&jobs(), "later")
                .await
                .err()
                .filter(|e| e.is_not_found())
                .map(|_| ())
        }
    })
    .await;
}

/// Upstream's "adopt matching orphans and release non-matching pods": a pod whose owner
/// reference is removed is adopted again (with the tracking finalizer); a pod whose labels no
/// longer match is released (reference and finalizer removed) and replaced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphans_are_adopted_and_non_matching_pods_released() {
    let env = env().await;
    let c = start(&env);
    let job = create(
        &c,
        &jobs(),
        job_spec("adopt", json!({"parallelism": 2, "completions": 4})),
    )
    .await;
    let uid = job["metadata"]["uid"].as_str().unwrap().to_owned();
    let ps = wait_pods(&c, &uid, "two pods", 2).await;
    let name = ps[0]["metadata"]["name"].as_str().unwrap().to_owned();
    // Orphaned: the Job adopts it again.
    let mut p = c.get(&pods(), &name).await.unwrap();
    p["metadata"]["ownerReferences"] = Value::Null;
    p["metadata"]["finalizers"] = Value::Null;
    c.update(&pods(), p, None, &WriteParams::default())
        .await
        .unwrap();
    let adopted = eventually("the orphan adopted", || {
        let (c, name, uid) = (c.clone(), name.clone(), uid.clone());
        async move {
            let p = c.get(&pods(), &name).await.ok()?;
            let r = &p["metadata"]["ownerReferences"][0];
            (r["uid"] == uid.as_str() && r["controller"] == true).then_some(p)
        }
    })
    .await;
    assert_eq!(
        adopted["metadata"]["ownerReferences"][0]["kind"], "Job",
        "{adopted}"
    );
    assert_eq!(
        adopted["metadata"]["finalizers"],
        json!([TRACKING_FINALIZER])
    );
    // Two pods still: the adopted one was not replaced.
    assert_eq!(job_pods(&c, &uid, true).await.len(), 2);
    // Labels removed: released, and a new pod takes its place.
    let mut p = adopted;
    p["metadata"]["labels"] = Value::Null;
    c.update(&pods(), p, None, &WriteParams::default())
        .await
        .unwrap();
    let released = eventually("the pod released", || {
        let (c, name) = (c.clone(), name.clone());
        async move {
            let p = c.get(&pods(), &name).await.ok()?;
            p["metadata"]["ownerReferences"]
                .as_array()
                .is_none_or(|r| r.is_empty())
                .then_some(p)
        }
    })
    .await;
    assert!(
        released["metadata"]["finalizers"]
            .as_array()
            .is_none_or(|f| f.is_empty()),
        "{released}"
    );
    wait_pods(&c, &uid, "a replacement pod", 2).await;
}
