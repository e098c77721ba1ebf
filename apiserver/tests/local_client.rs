//! The in-process client against the real storage layer on a redb file: the same semantics
//! as the HTTP API (defaults, conflicts, selectors, watch, binding, status, scale, apply).

use std::sync::Arc;

use futures::StreamExt;
use k1s_api::client::{
    Api, Client, DeleteParams, ListParams, Patch, ResourceRef, WatchEvent, WatchParams, WriteParams,
};
use k1s_apiserver::local_client::LocalClient;
use k1s_apiserver::server::{ApiConfig, ApiState};
use k1s_store::redb::{RedbConfig, RedbStore};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use serde_json::json;
use tokio_util::sync::CancellationToken;

async fn client(dir: &std::path::Path) -> (Arc<dyn Client>, CancellationToken) {
    let store = RedbStore::open(RedbConfig::new(dir.join("state.redb"))).unwrap();
    let state = ApiState::new(Arc::new(store), &ApiConfig::default()).unwrap();
    k1s_apiserver::bootstrap::run(&state.rest, "127.0.0.1".parse().unwrap(), 6443)
        .await
        .unwrap();
    let cancel = CancellationToken::new();
    let c: Arc<dyn Client> = Arc::new(LocalClient::new(state.rest.clone(), "test", cancel.clone()));
    // What the ServiceAccount controller would have made: pods need their ServiceAccount.
    c.create(
        &ResourceRef::new("", "v1", "serviceaccounts", Some("default")),
        json!({"metadata": {"name": "default"}}),
        &WriteParams::default(),
    )
    .await
    .unwrap();
    (c, cancel)
}

#[tokio::test]
async fn crud_conflicts_and_typed_access() {
    let dir = tempfile::tempdir().unwrap();
    let (c, _cancel) = client(dir.path()).await;
    let cms = ResourceRef::of::<ConfigMap>(Some("default"));
    let created = c
        .create(
            &cms,
            json!({"metadata": {"name": "a"}, "data": {"k": "v"}}),
            &WriteParams::default(),
        )
        .await
        .unwrap();
    assert_eq!(created["metadata"]["managedFields"][0]["manager"], "test");
    let err = c
        .create(
            &cms,
            json!({"metadata": {"name": "a"}}),
            &WriteParams::default(),
        )
        .await
        .unwrap_err();
    assert!(err.is_already_exists(), "{err}");
    let mut stale = created.clone();
    c.patch(
        &cms,
        "a",
        &Patch::Merge(json!({"data": {"k": "w"}})),
        None,
        &WriteParams::default(),
    )
    .await
    .unwrap();
    stale["data"]["k"] = json!("x");
    assert!(
        c.update(&cms, stale, None, &WriteParams::default())
            .await
            .unwrap_err()
            .is_conflict()
    );
    let typed: Api<ConfigMap> = Api::new(c.clone(), Some("default"));
    let cm = typed.get("a").await.unwrap();
    assert_eq!(cm.data.unwrap()["k"], "w");
    typed.delete("a").await.unwrap();
    assert!(typed.get("a").await.unwrap_err().is_not_found());
    let missing = ResourceRef::new("nope.example", "v1", "things", None);
    assert_eq!(c.get(&missing, "x").await.unwrap_err().code, 404);
}

#[tokio::test]
async fn watch_binding_status_scale_and_apply() {
    let dir = tempfile::tempdir().unwrap();
    let (c, cancel) = client(dir.path()).await;
    let pods = ResourceRef::of::<Pod>(Some("default"));
    let list = c.list(&pods, &ListParams::default()).await.unwrap();
    let mut watch = c
        .watch(
            &pods,
            &WatchParams {
                resource_version: Some(list.resource_version.clone()),
                field_selector: Some("spec.nodeName=n1".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    let created = c.create(&pods, pod, &WriteParams::default()).await.unwrap();
    assert_eq!(created["status"]["phase"], "Pending");
    assert_eq!(created["spec"]["schedulerName"], "default-scheduler");
    // Binding moves the pod onto n1: the field-selected watch sees it appear.
    c.create_subresource(
        &pods,
        "p",
        "binding",
        json!({"target": {"kind": "Node", "name": "n1"}}),
    )
    .await
    .unwrap();
    match watch.next().await.unwrap().unwrap() {
        WatchEvent::Added(p) => assert_eq!(p["spec"]["nodeName"], "n1"),
        other => panic!("{other:?}"),
    }
    let bound = c.get(&pods, "p").await.unwrap();
    assert_eq!(bound["status"]["conditions"][0]["type"], "PodScheduled");
    assert_eq!(bound["status"]["conditions"][0]["status"], "True");
    // As upstream: a binding is no field manager of the pod.
    let managers: Vec<&str> = bound["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["subresource"].as_str())
        .collect();
    assert!(!managers.contains(&"binding"), "{managers:?}");
    let err = c
        .create_subresource(
            &pods,
            "p",
            "binding",
            json!({"target": {"kind": "Node", "name": "n2"}}),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code, 409);
    // The Binding's preconditions and annotations, and a target that is not a Node.
    let unbound = json!({"metadata": {"name": "q"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    let q = c
        .create(&pods, unbound, &WriteParams::default())
        .await
        .unwrap();
    let wrong_uid = c
        .create_subresource(
            &pods,
            "q",
            "binding",
            json!({"metadata": {"uid": "not-the-pod"}, "target": {"name": "n1"}}),
        )
        .await
        .unwrap_err();
    assert_eq!(wrong_uid.code, 409, "{wrong_uid:?}");
    assert!(
        wrong_uid.message.contains("Precondition failed: UID"),
        "{wrong_uid:?}"
    );
    let not_node = c
        .create_subresource(
            &pods,
            "q",
            "binding",
            json!({"target": {"kind": "Pod", "name": "n1"}}),
        )
        .await
        .unwrap_err();
    assert_eq!(not_node.code, 422, "{not_node:?}");
    c.create_subresource(
        &pods,
        "q",
        "binding",
        json!({"metadata": {"uid": q["metadata"]["uid"], "annotations": {"example.com/why": "test"}},
               "target": {"name": "n1"}}),
    )
    .await
    .unwrap();
    let q = c.get(&pods, "q").await.unwrap();
    assert_eq!(q["spec"]["nodeName"], "n1");
    assert_eq!(q["metadata"]["annotations"]["example.com/why"], "test");
    match watch.next().await.unwrap().unwrap() {
        WatchEvent::Added(p) => assert_eq!(p["metadata"]["name"], "q"),
        other => panic!("{other:?}"),
    }
    // Status writes (as a kubelet makes them).
    let mut running = bound.clone();
    running["status"]["phase"] = json!("Running");
    c.update(&pods, running, Some("status"), &WriteParams::default())
        .await
        .unwrap();
    match watch.next().await.unwrap().unwrap() {
        WatchEvent::Modified(p) => assert_eq!(p["status"]["phase"], "Running"),
        other => panic!("{other:?}"),
    }
    // Graceful deletion of a bound pod marks it; a zero grace period removes it.
    let marked = c
        .delete(&pods, "p", &DeleteParams::default())
        .await
        .unwrap();
    assert!(marked["metadata"]["deletionTimestamp"].is_string());
    c.delete(
        &pods,
        "p",
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert!(matches!(
        watch.next().await.unwrap().unwrap(),
        WatchEvent::Modified(_)
    ));
    assert!(matches!(
        watch.next().await.unwrap().unwrap(),
        WatchEvent::Deleted(_)
    ));

    // Server-side apply and the scale subresource of a deployment.
    let deploys = ResourceRef::of::<Deployment>(Some("default"));
    let config = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}},
                 "template": {"metadata": {"labels": {"app": "d"}},
                              "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}});
    let applied = c
        .patch(
            &deploys,
            "d",
            &Patch::Apply {
                config,
                force: false,
            },
            None,
            &WriteParams {
                field_manager: Some("ctl".into()),
                dry_run: false,
            },
        )
        .await
        .unwrap();
    assert_eq!(
        applied["metadata"]["managedFields"][0]["operation"],
        "Apply"
    );
    let scale = c
        .update(&deploys, json!({"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": {"name": "d"}, "spec": {"replicas": 3}}), Some("scale"), &WriteParams::default())
        .await
        .unwrap();
    assert_eq!(scale["spec"]["replicas"], 3);
    cancel.cancel();
}

#[tokio::test]
async fn expired_events_are_swept() {
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStore::open(RedbConfig::new(dir.path().join("state.redb"))).unwrap();
    let state = ApiState::new(Arc::new(store), &ApiConfig::default()).unwrap();
    k1s_apiserver::bootstrap::run(&state.rest, "127.0.0.1".parse().unwrap(), 6443)
        .await
        .unwrap();
    let c = LocalClient::new(state.rest.clone(), "test", CancellationToken::new());
    let events = ResourceRef::new("", "v1", "events", Some("default"));
    let old = json!({"metadata": {"name": "old"}, "involvedObject": {"kind": "Pod", "name": "p"},
        "reason": "Old", "lastTimestamp": "2020-01-01T00:00:00Z"});
    // Sweep two hours from now with a one-hour TTL: "old" was last written now (its own
    // timestamps are older still), "new" reports activity 90 minutes from now.
    let now = jiff::Timestamp::now();
    let later = k1s_apiserver::rest::meta::timestamp(now + jiff::SignedDuration::from_mins(90));
    let new = json!({"metadata": {"name": "new"}, "involvedObject": {"kind": "Pod", "name": "p"},
        "reason": "New", "lastTimestamp": later});
    c.create(&events, old, &WriteParams::default())
        .await
        .unwrap();
    c.create(&events, new, &WriteParams::default())
        .await
        .unwrap();
    let swept = k1s_apiserver::event_ttl::sweep(
        &state.rest,
        std::time::Duration::from_secs(3600),
        now + jiff::SignedDuration::from_hours(2),
    )
    .await;
    assert_eq!(swept, 1);
    let left = c.list(&events, &ListParams::default()).await.unwrap();
    let names: Vec<&str> = left
        .items
        .iter()
        .map(|e| e["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["new"]);
}

#[tokio::test]
async fn eviction_respects_pod_disruption_budgets() {
    let dir = tempfile::tempdir().unwrap();
    let (c, _cancel) = client(dir.path()).await;
    let pods = ResourceRef::of::<Pod>(Some("default"));
    let pdbs = ResourceRef::new("policy", "v1", "poddisruptionbudgets", Some("default"));
    for name in ["a", "b"] {
        let pod = json!({"metadata": {"name": name, "labels": {"app": "x"}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
        c.create(&pods, pod, &WriteParams::default()).await.unwrap();
    }
    let pdb = c
        .create(
            &pdbs,
            json!({"metadata": {"name": "budget"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "x"}}}}),
            &WriteParams::default(),
        )
        .await
        .unwrap();
    // Before the disruption controller has processed the budget, nothing may be evicted.
    let err = c
        .create_subresource(&pods, "a", "eviction", json!({"metadata": {"name": "a"}}))
        .await
        .unwrap_err();
    assert_eq!((err.code, err.reason.as_str()), (429, "TooManyRequests"));
    let mut with_status = pdb.clone();
    with_status["status"] = json!({"observedGeneration": 1, "disruptionsAllowed": 1,
        "currentHealthy": 2, "desiredHealthy": 1, "expectedPods": 2});
    c.update(&pdbs, with_status, Some("status"), &WriteParams::default())
        .await
        .unwrap();
    c.create_subresource(&pods, "a", "eviction", json!({"metadata": {"name": "a"}}))
        .await
        .unwrap();
    assert!(c.get(&pods, "a").await.unwrap_err().is_not_found());
    let after = c.get(&pdbs, "budget").await.unwrap();
    assert_eq!(after["status"]["disruptionsAllowed"], 0);
    assert!(after["status"]["disruptedPods"]["a"].is_string());
    let err = c
        .create_subresource(&pods, "b", "eviction", json!({"metadata": {"name": "b"}}))
        .await
        .unwrap_err();
    assert_eq!(err.code, 429, "{err}");
    assert!(c.get(&pods, "b").await.is_ok());
}

#[tokio::test]
async fn events_are_one_resource_in_both_groups() {
    let dir = tempfile::tempdir().unwrap();
    let (c, _cancel) = client(dir.path()).await;
    let core = ResourceRef::new("", "v1", "events", Some("default"));
    let events = ResourceRef::new("events.k8s.io", "v1", "events", Some("default"));
    let now = k1s_apiserver::rest::meta::now();
    c.create(
        &events,
        json!({"metadata": {"name": "scheduled"}, "eventTime": "2026-11-21T10:00:00.000000Z",
            "regarding": {"kind": "Pod", "name": "p", "namespace": "default"}, "note": "bound",
            "reason": "Scheduled", "type": "Normal", "action": "Binding",
            "reportingController": "k1s-scheduler", "reportingInstance": "k1s-scheduler-1"}),
        &WriteParams::default(),
    )
    .await
    .unwrap();
    c.create(
        &core,
        json!({"metadata": {"name": "pulled"}, "involvedObject": {"kind": "Pod", "name": "p"},
            "message": "pulled", "reason": "Pulled", "type": "Normal", "lastTimestamp": now,
            "source": {"component": "kubelet"}}),
        &WriteParams::default(),
    )
    .await
    .unwrap();
    let as_core = c.get(&core, "scheduled").await.unwrap();
    assert_eq!(
        (as_core["apiVersion"].as_str(), as_core["message"].as_str()),
        (Some("v1"), Some("bound"))
    );
    assert_eq!(as_core["involvedObject"]["name"], "p");
    let as_events = c.get(&events, "pulled").await.unwrap();
    assert_eq!(as_events["apiVersion"], "events.k8s.io/v1");
    assert_eq!(as_events["note"], "pulled");
    assert_eq!(as_events["deprecatedSource"]["component"], "kubelet");
    // Field selectors use each group's own field names.
    let by_core = c
        .list(
            &core,
            &ListParams {
                field_selector: Some("involvedObject.name=p".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(by_core.items.len(), 2);
    let by_events = c
        .list(
            &events,
            &ListParams {
                field_selector: Some("regarding.name=p,reason=Scheduled".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(by_events.items.len(), 1);
}

/// Admission reads the namespace, the pod's ServiceAccount and PriorityClass on every create
/// (remembered between writes to them): each change is seen by the very next create.
#[tokio::test]
async fn each_change_admission_reads_is_seen_by_the_next_create() {
    let dir = tempfile::tempdir().unwrap();
    let (c, _cancel) = client(dir.path()).await;
    let nss = ResourceRef::new("", "v1", "namespaces", None);
    let cm = |n: &str| json!({"metadata": {"name": n}});
    let cms = ResourceRef::of::<ConfigMap>(Some("team"));
    let w = WriteParams::default();
    for _ in 0..2 {
        let err = c.create(&cms, cm("a"), &w).await.unwrap_err();
        assert!(err.is_not_found(), "{err}");
        assert!(
            err.to_string().contains("namespaces \"team\" not found"),
            "{err}"
        );
    }
    c.create(&nss, json!({"metadata": {"name": "team"}}), &w)
        .await
        .unwrap();
    c.create(&cms, cm("a"), &w).await.unwrap();
    // Labelled to enforce the restricted profile: the next privileged pod is refused.
    let sas = ResourceRef::new("", "v1", "serviceaccounts", Some("team"));
    c.create(&sas, json!({"metadata": {"name": "default"}}), &w)
        .await
        .unwrap();
    let pods = ResourceRef::of::<Pod>(Some("team"));
    let pod = |n: &str| {
        json!({"metadata": {"name": n}, "spec": {"containers": [{"name": "c", "image": "busybox",
            "securityContext": {"privileged": true}}]}})
    };
    c.create(&pods, pod("p1"), &w).await.unwrap();
    // A missing ServiceAccount or PriorityClass refuses the pod until it is created.
    let mut robot = pod("robot");
    robot["spec"]["serviceAccountName"] = json!("robot");
    robot["spec"]["priorityClassName"] = json!("urgent");
    let err = c.create(&pods, robot.clone(), &w).await.unwrap_err();
    assert!(
        err.message
            .contains("error looking up service account team/robot"),
        "{err}"
    );
    c.create(&sas, json!({"metadata": {"name": "robot"}}), &w)
        .await
        .unwrap();
    let err = c.create(&pods, robot.clone(), &w).await.unwrap_err();
    assert!(
        err.message
            .contains("no PriorityClass with name urgent was found"),
        "{err}"
    );
    let classes = ResourceRef::new("scheduling.k8s.io", "v1", "priorityclasses", None);
    c.create(
        &classes,
        json!({"metadata": {"name": "urgent"}, "value": 1000}),
        &w,
    )
    .await
    .unwrap();
    let created = c.create(&pods, robot, &w).await.unwrap();
    assert_eq!(created["spec"]["priority"], 1000);
    c.patch(
        &nss,
        "team",
        &Patch::Merge(
            json!({"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}),
        ),
        None,
        &w,
    )
    .await
    .unwrap();
    let err = c.create(&pods, pod("p2"), &w).await.unwrap_err();
    assert_eq!(err.code, 403, "{err}");
    assert!(
        err.message
            .contains("violates PodSecurity \"restricted:latest\""),
        "{err}"
    );
    // Deleted (its finalizer keeps it Terminating): the next create is refused.
    c.delete(&nss, "team", &DeleteParams::default())
        .await
        .unwrap();
    let err = c.create(&cms, cm("b"), &w).await.unwrap_err();
    assert!(
        err.to_string().contains("because it is being terminated"),
        "{err}"
    );
}
