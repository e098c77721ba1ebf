//! The CronJob controller against the real API semantics, on a fake clock: Jobs per
//! scheduled minute, Forbid, completion bookkeeping, history limits, unknown time zones.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{create, env, eventually};

use k1s_api::client::{Client, ListParams, ResourceRef, WriteParams};
use k1s_controllers::cronjob::{self, SCHEDULED_TIMESTAMP};
use k1s_runtime::clock::{Clock, FakeClock};
use serde_json::{Value, json};

fn cronjobs() -> ResourceRef {
    ResourceRef::new("batch", "v1", "cronjobs", Some("default"))
}

fn jobs() -> ResourceRef {
    ResourceRef::new("batch", "v1", "jobs", Some("default"))
}

async fn owned_jobs(c: &Arc<dyn Client>, uid: &str) -> Vec<Value> {
    let mut js: Vec<Value> = c
        .list(&jobs(), &ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|j| j["metadata"]["ownerReferences"][0]["uid"] == uid)
        .collect();
    js.sort_by_key(|j| j["metadata"]["name"].as_str().unwrap_or("").to_owned());
    js
}

async fn has_event(c: &Arc<dyn Client>, name: &str, reason: &str) -> bool {
    let events = ResourceRef::new("", "v1", "events", Some("default"));
    c.list(&events, &ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .any(|e| e["involvedObject"]["name"] == name && e["reason"] == reason)
}

/// Marks a job Complete as the Job controller would.
async fn complete(c: &Arc<dyn Client>, job: &Value, at: &str) {
    let mut j = c
        .get(&jobs(), job["metadata"]["name"].as_str().unwrap())
        .await
        .unwrap();
    j["status"] = json!({"startTime": at, "completionTime": at, "succeeded": 1,
        "conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": at}]});
    c.update(&jobs(), j, Some("status"), &WriteParams::default())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_forbids_counts_and_trims_history() {
    let env = env().await;
    let c = env.client.clone();
    let start = jiff::Timestamp::now();
    let clock = Arc::new(FakeClock::at(start));
    // Every pass while Forbid holds the missed minute back records JobAlreadyActive, and the
    // event spam filter lets 25 events per object through before it drops them (as
    // client-go's). At one pass a second, SawCompletedJob still gets through however slowly
    // this machine reaches the job's completion; at ten a second it was dropped after 2.5 s.
    let options = cronjob::Options {
        clock: clock.clone(),
        resync: Some(Duration::from_secs(1)),
    };
    tokio::spawn(cronjob::run_with(c.clone(), options, env.cancel.clone()));
    let cj = create(
        &c,
        &cronjobs(),
        json!({"metadata": {"name": "hello"}, "spec": {"schedule": "*/1 * * * *",
            "concurrencyPolicy": "Forbid", "successfulJobsHistoryLimit": 1,
            "jobTemplate": {"metadata": {"labels": {"team": "a"}}, "spec": {"template": {"spec": {
                "restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "busybox"}]}}}}}}),
    )
    .await;
    let uid = cj["metadata"]["uid"].as_str().unwrap().to_owned();
    // Nothing before the first minute boundary after creation.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(owned_jobs(&c, &uid).await.is_empty());

    // One minute on: the job of that minute.
    let created = k1s_runtime::clock::parse(&cj["metadata"]["creationTimestamp"]).unwrap();
    let first_minute = created.as_second() / 60 * 60 + 60;
    clock.set(jiff::Timestamp::from_second(first_minute + 5).unwrap());
    let js = eventually("the first job", || {
        let (c, uid) = (c.clone(), uid.clone());
        async move {
            let js = owned_jobs(&c, &uid).await;
            (js.len() == 1).then_some(js)
        }
    })
    .await;
    let first = &js[0];
    assert_eq!(
        first["metadata"]["name"],
        format!("hello-{}", first_minute / 60)
    );
    assert_eq!(first["metadata"]["labels"]["team"], "a");
    assert_eq!(
        first["metadata"]["annotations"][SCHEDULED_TIMESTAMP],
        k1s_runtime::clock::format(jiff::Timestamp::from_second(first_minute).unwrap())
    );
    let status = eventually("status.active", || {
        let c = c.clone();
        async move {
            let cj = c.get(&cronjobs(), "hello").await.ok()?;
            (cj["status"]["active"]
                .as_array()
                .is_some_and(|a| a.len() == 1))
            .then_some(cj["status"].clone())
        }
    })
    .await;
    assert_eq!(status["active"][0]["name"], first["metadata"]["name"]);
    assert_eq!(
        status["lastScheduleTime"],
        k1s_runtime::clock::format(jiff::Timestamp::from_second(first_minute).unwrap())
    );

    // Next minute, still active: Forbid keeps it to one.
    clock.advance(std::time::Duration::from_secs(60));
    eventually("JobAlreadyActive", || {
        let c = c.clone();
        async move {
            has_event(&c, "hello", "JobAlreadyActive")
                .await
                .then_some(())
        }
    })
    .await;
    assert_eq!(owned_jobs(&c, &uid).await.len(), 1);

    // The job completes: it leaves status.active; lastSuccessfulTime follows. The clock is
    // already past the missed minute, so its job may start at once, as upstream's would.
    complete(&c, first, "2030-01-01T00:00:00Z").await;
    eventually("the first job out of active, lastSuccessfulTime", || {
        let c = c.clone();
        let first = first["metadata"]["name"].clone();
        async move {
            let cj = c.get(&cronjobs(), "hello").await.ok()?;
            let still_active = cj["status"]["active"]
                .as_array()
                .is_some_and(|a| a.iter().any(|r| r["name"] == first));
            (!still_active && cj["status"]["lastSuccessfulTime"] == "2030-01-01T00:00:00Z")
                .then_some(())
        }
    })
    .await;
    assert!(has_event(&c, "hello", "SawCompletedJob").await);

    // The missed minute runs now; when it completes, the history limit removes the first.
    let js = eventually("the second job", || {
        let (c, uid) = (c.clone(), uid.clone());
        async move {
            let js = owned_jobs(&c, &uid).await;
            (js.len() == 2).then_some(js)
        }
    })
    .await;
    let second = js
        .iter()
        .find(|j| j["metadata"]["name"] != first["metadata"]["name"])
        .unwrap()
        .clone();
    assert_eq!(
        second["metadata"]["name"],
        format!("hello-{}", first_minute / 60 + 1)
    );
    complete(&c, &second, "2030-01-01T00:01:00Z").await;
    eventually("history trimmed to one", || {
        let (c, uid) = (c.clone(), uid.clone());
        let want = second["metadata"]["name"].clone();
        async move {
            let js: Vec<Value> = owned_jobs(&c, &uid)
                .await
                .into_iter()
                .filter(|j| j["metadata"]["deletionTimestamp"].is_null())
                .collect();
            (js.len() == 1 && js[0]["metadata"]["name"] == want).then_some(())
        }
    })
    .await;
    let _ = clock.now();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_time_zone_and_suspend() {
    let env = env().await;
    let c = env.client.clone();
    let clock = Arc::new(FakeClock::new());
    let options = cronjob::Options {
        clock: clock.clone(),
        resync: Some(Duration::from_millis(100)),
    };
    tokio::spawn(cronjob::run_with(c.clone(), options, env.cancel.clone()));
    let template = json!({"spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}});
    let lost = create(
        &c,
        &cronjobs(),
        json!({"metadata": {"name": "lost"}, "spec": {
        "schedule": "* * * * *", "timeZone": "Mars/Olympus_Mons", "jobTemplate": template}}),
    )
    .await;
    let paused = create(
        &c,
        &cronjobs(),
        json!({"metadata": {"name": "paused"}, "spec": {
        "schedule": "@hourly", "suspend": true, "jobTemplate": template}}),
    )
    .await;
    let bad = create(
        &c,
        &cronjobs(),
        json!({"metadata": {"name": "bad"}, "spec": {
        "schedule": "61 * * * *", "jobTemplate": template}}),
    )
    .await;
    clock.advance(std::time::Duration::from_secs(7200));
    eventually("UnknownTimeZone", || {
        let c = c.clone();
        async move { has_event(&c, "lost", "UnknownTimeZone").await.then_some(()) }
    })
    .await;
    eventually("UnparseableSchedule", || {
        let c = c.clone();
        async move {
            has_event(&c, "bad", "UnparseableSchedule")
                .await
                .then_some(())
        }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    for cj in [&lost, &paused, &bad] {
        assert!(
            owned_jobs(&c, cj["metadata"]["uid"].as_str().unwrap())
                .await
                .is_empty()
        );
    }
}
