//! The service account and root CA controllers against the real API semantics.

mod common;

use common::{configmaps, create, env, eventually, namespaces};
use k1s_api::client::{DeleteParams, ResourceRef, WriteParams};
use serde_json::json;

const PEM: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_namespace_gets_a_default_account_and_the_root_ca() {
    let env = env().await;
    let c = env.client.clone();
    tokio::spawn(k1s_controllers::serviceaccount::run(
        c.clone(),
        env.cancel.clone(),
    ));
    tokio::spawn(k1s_controllers::root_ca::run(
        c.clone(),
        PEM.into(),
        env.cancel.clone(),
    ));
    create(&c, &namespaces(), json!({"metadata": {"name": "fresh"}})).await;
    let sas = ResourceRef::new("", "v1", "serviceaccounts", Some("fresh"));
    let cms = configmaps("fresh");
    for ns in ["default", "kube-system", "fresh"] {
        let sas = ResourceRef::new("", "v1", "serviceaccounts", Some(ns));
        eventually("the default service account", || {
            let (c, sas) = (c.clone(), sas.clone());
            async move { c.get(&sas, "default").await.ok() }
        })
        .await;
        let cm = eventually("the root CA configmap", || {
            let (c, cms) = (c.clone(), configmaps(ns));
            async move { c.get(&cms, "kube-root-ca.crt").await.ok() }
        })
        .await;
        assert_eq!(cm["data"]["ca.crt"], PEM);
        assert!(cm["metadata"]["annotations"]["kubernetes.io/description"].is_string());
    }
    // Deleted: recreated.
    let old = c.get(&sas, "default").await.unwrap();
    c.delete(&sas, "default", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the default service account recreated", || {
        let (c, sas, old_uid) = (c.clone(), sas.clone(), old["metadata"]["uid"].clone());
        async move {
            let sa = c.get(&sas, "default").await.ok()?;
            (sa["metadata"]["uid"] != old_uid).then_some(())
        }
    })
    .await;
    // Changed: put back.
    let mut cm = c.get(&cms, "kube-root-ca.crt").await.unwrap();
    cm["data"]["ca.crt"] = json!("tampered");
    c.update(&cms, cm, None, &WriteParams::default())
        .await
        .unwrap();
    eventually("the root CA restored", || {
        let (c, cms) = (c.clone(), cms.clone());
        async move {
            let cm = c.get(&cms, "kube-root-ca.crt").await.ok()?;
            (cm["data"]["ca.crt"] == PEM).then_some(())
        }
    })
    .await;
    c.delete(&cms, "kube-root-ca.crt", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the root CA recreated", || {
        let (c, cms) = (c.clone(), cms.clone());
        async move { c.get(&cms, "kube-root-ca.crt").await.ok() }
    })
    .await;
}
