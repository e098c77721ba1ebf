//! The Endpoints and EndpointSlice controllers against the real API semantics: addresses
//! follow pod readiness and deletion, named target ports resolve per pod, slices split at
//! their maximum size, and the API server's own `default/kubernetes` endpoints stay as they
//! are.

mod common;

use std::sync::Arc;

use common::{create, env, eventually};
use k1s_api::client::{Client, DeleteParams, ListParams, ResourceRef, WriteParams};
use serde_json::{Value, json};

fn pods() -> ResourceRef {
    ResourceRef::new("", "v1", "pods", Some("default"))
}
fn services() -> ResourceRef {
    ResourceRef::new("", "v1", "services", Some("default"))
}
fn endpoints() -> ResourceRef {
    ResourceRef::new("", "v1", "endpoints", Some("default"))
}
fn slices() -> ResourceRef {
    ResourceRef::new("discovery.k8s.io", "v1", "endpointslices", Some("default"))
}

async fn pod(c: &Arc<dyn Client>, name: &str, app: &str, ip: &str, ready: bool) {
    let mut p = create(c, &pods(), json!({"metadata": {"name": name, "labels": {"app": app}},
        "spec": {"nodeName": "n1", "hostname": name, "subdomain": app,
                 "containers": [{"name": "c", "image": "busybox", "ports": [{"name": "web", "containerPort": 8080}]}]}}))
    .await;
    p["status"] = json!({"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
        "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]});
    c.update(&pods(), p, Some("status"), &WriteParams::default())
        .await
        .unwrap();
}

async fn set_ready(c: &Arc<dyn Client>, name: &str, ready: bool) {
    let mut p = c.get(&pods(), name).await.unwrap();
    p["status"]["conditions"] =
        json!([{"type": "Ready", "status": if ready {"True"} else {"False"}}]);
    c.update(&pods(), p, Some("status"), &WriteParams::default())
        .await
        .unwrap();
}

fn ips(ep: &Value, field: &str) -> Vec<String> {
    let mut v: Vec<String> = ep["subsets"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s[field].as_array().cloned().unwrap_or_default())
        .map(|a| a["ip"].as_str().unwrap().to_owned())
        .collect();
    v.sort();
    v
}

async fn service_slices(c: &Arc<dyn Client>, svc: &str) -> Vec<Value> {
    c.list(
        &slices(),
        &ListParams {
            label_selector: Some(format!("kubernetes.io/service-name={svc}")),
            ..Default::default()
        },
    )
    .await
    .unwrap()
    .items
}

/// (ip, ready, serving, terminating) of every endpoint of the Service's slices.
async fn slice_endpoints(c: &Arc<dyn Client>, svc: &str) -> Vec<(String, bool, bool, bool)> {
    let mut v: Vec<_> = service_slices(c, svc)
        .await
        .iter()
        .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
        .map(|e| {
            let cond = &e["conditions"];
            (
                e["addresses"][0].as_str().unwrap().to_owned(),
                cond["ready"] == true,
                cond["serving"] == true,
                cond["terminating"] == true,
            )
        })
        .collect();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_and_slices_follow_pods() {
    let env = env().await;
    let c = env.client.clone();
    let before_ep = c.get(&endpoints(), "kubernetes").await.unwrap();
    let before_slice = c.get(&slices(), "kubernetes").await.unwrap();
    tokio::spawn(k1s_controllers::endpoints::run(
        c.clone(),
        env.cancel.clone(),
    ));
    tokio::spawn(k1s_controllers::endpointslice::run(
        c.clone(),
        env.cancel.clone(),
    ));
    let svc = create(&c, &services(), json!({"metadata": {"name": "web", "labels": {"team": "a"}},
        "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": "web"}]}}))
    .await;
    // No pods yet: an empty Endpoints and a placeholder slice.
    eventually("empty endpoints", || {
        let c = c.clone();
        async move {
            c.get(&endpoints(), "web")
                .await
                .ok()
                .filter(|e| e["subsets"].is_null())
        }
    })
    .await;
    let placeholder = eventually("placeholder slice", || {
        let c = c.clone();
        async move { service_slices(&c, "web").await.into_iter().next() }
    })
    .await;
    assert_eq!(placeholder["endpoints"], json!([]));
    assert_eq!(
        placeholder["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"],
        "endpointslice-controller.k8s.io"
    );
    assert_eq!(placeholder["metadata"]["labels"]["team"], "a");
    assert_eq!(
        placeholder["metadata"]["ownerReferences"][0]["uid"],
        svc["metadata"]["uid"]
    );
    assert_eq!(placeholder["addressType"], "IPv4");

    pod(&c, "a", "web", "10.42.0.1", true).await;
    pod(&c, "b", "web", "10.42.0.2", false).await;
    pod(&c, "other", "db", "10.42.0.9", true).await;
    let ep = eventually("addresses and notReadyAddresses", || {
        let c = c.clone();
        async move {
            let ep = c.get(&endpoints(), "web").await.ok()?;
            (ips(&ep, "addresses") == ["10.42.0.1"]
                && ips(&ep, "notReadyAddresses") == ["10.42.0.2"])
            .then_some(ep)
        }
    })
    .await;
    let s = &ep["subsets"][0];
    assert_eq!(
        s["ports"],
        json!([{"name": "http", "port": 8080, "protocol": "TCP"}])
    );
    assert_eq!(s["addresses"][0]["targetRef"]["name"], "a");
    assert_eq!(s["addresses"][0]["nodeName"], "n1");
    assert_eq!(s["addresses"][0]["hostname"], "a");
    assert_eq!(ep["metadata"]["labels"]["team"], "a");
    eventually("slice endpoints", || {
        let c = c.clone();
        async move {
            (slice_endpoints(&c, "web").await
                == vec![
                    ("10.42.0.1".into(), true, true, false),
                    ("10.42.0.2".into(), false, false, false),
                ])
            .then_some(())
        }
    })
    .await;
    let all = service_slices(&c, "web").await;
    assert_eq!(all.len(), 1, "the placeholder is replaced: {all:?}");
    assert_eq!(
        all[0]["ports"],
        json!([{"name": "http", "port": 8080, "protocol": "TCP"}])
    );

    // Readiness flips.
    set_ready(&c, "a", false).await;
    set_ready(&c, "b", true).await;
    eventually("readiness swapped", || {
        let c = c.clone();
        async move {
            let ep = c.get(&endpoints(), "web").await.ok()?;
            (ips(&ep, "addresses") == ["10.42.0.2"]
                && ips(&ep, "notReadyAddresses") == ["10.42.0.1"])
            .then_some(())
        }
    })
    .await;
    // A terminating pod (bound, so deletion is graceful) leaves Endpoints but stays in the
    // slice as terminating.
    c.delete(&pods(), "b", &DeleteParams::default())
        .await
        .unwrap();
    eventually("b terminating", || {
        let c = c.clone();
        async move {
            let ep = c.get(&endpoints(), "web").await.ok()?;
            let slice = slice_endpoints(&c, "web").await;
            (ips(&ep, "addresses").is_empty()
                && ips(&ep, "notReadyAddresses") == ["10.42.0.1"]
                && slice
                    == vec![
                        ("10.42.0.1".into(), false, false, false),
                        ("10.42.0.2".into(), false, true, true),
                    ])
            .then_some(())
        }
    })
    .await;

    // publishNotReadyAddresses: every pod ready.
    let mut s = c.get(&services(), "web").await.unwrap();
    s["spec"]["publishNotReadyAddresses"] = json!(true);
    c.update(&services(), s, None, &WriteParams::default())
        .await
        .unwrap();
    eventually("all published", || {
        let c = c.clone();
        async move {
            let ep = c.get(&endpoints(), "web").await.ok()?;
            (ips(&ep, "addresses") == ["10.42.0.1", "10.42.0.2"]).then_some(())
        }
    })
    .await;

    // The Service goes: its Endpoints go.
    c.delete(&services(), "web", &DeleteParams::default())
        .await
        .unwrap();
    eventually("endpoints deleted", || {
        let c = c.clone();
        async move {
            c.get(&endpoints(), "web")
                .await
                .err()
                .filter(|e| e.is_not_found())
                .map(|_| ())
        }
    })
    .await;

    // The API server's own endpoints were not touched.
    let after_ep = c.get(&endpoints(), "kubernetes").await.unwrap();
    let after_slice = c.get(&slices(), "kubernetes").await.unwrap();
    assert_eq!(
        before_ep["metadata"]["resourceVersion"],
        after_ep["metadata"]["resourceVersion"]
    );
    assert_eq!(
        before_slice["metadata"]["resourceVersion"],
        after_slice["metadata"]["resourceVersion"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slices_split_at_their_maximum_and_shrink() {
    let env = env().await;
    let c = env.client.clone();
    tokio::spawn(k1s_controllers::endpointslice::run_with(
        c.clone(),
        2,
        env.cancel.clone(),
    ));
    create(
        &c,
        &services(),
        json!({"metadata": {"name": "many"},
        "spec": {"selector": {"app": "many"}, "ports": [{"port": 80, "targetPort": 8080}]}}),
    )
    .await;
    for i in 1..=5 {
        pod(&c, &format!("p{i}"), "many", &format!("10.42.1.{i}"), true).await;
    }
    eventually("5 endpoints in 3 slices", || {
        let c = c.clone();
        async move {
            let s = service_slices(&c, "many").await;
            let n: usize = s
                .iter()
                .map(|s| s["endpoints"].as_array().map_or(0, Vec::len))
                .sum();
            (n == 5
                && s.len() == 3
                && s.iter()
                    .all(|s| s["endpoints"].as_array().unwrap().len() <= 2))
            .then_some(())
        }
    })
    .await;
    for i in 1..=4 {
        c.delete(
            &pods(),
            &format!("p{i}"),
            &DeleteParams {
                grace_period_seconds: Some(0),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    }
    eventually("1 endpoint left", || {
        let c = c.clone();
        async move {
            let s = service_slices(&c, "many").await;
            let eps: Vec<_> = s
                .iter()
                .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
                .collect();
            (eps.len() == 1 && s.len() == 1 && eps[0]["addresses"][0] == "10.42.1.5").then_some(())
        }
    })
    .await;
}
