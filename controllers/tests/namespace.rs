//! The namespace controller against the real API semantics: a deleted namespace is emptied,
//! reports what remains in its conditions, and goes once its content is gone.

mod common;

use std::sync::Arc;

use common::{configmaps, create, env, eventually, namespaces};
use k1s_api::client::{DeleteParams, ListParams, ResourceRef, WriteParams};
use k1s_controllers::{CatalogEntry, ResourceCatalog};
use serde_json::{Value, json};

fn condition<'a>(ns: &'a Value, kind: &str) -> Option<&'a Value> {
    ns["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_namespace_empties_it_then_removes_it() {
    let env = env().await;
    let c = env.client.clone();
    tokio::spawn(k1s_controllers::namespace::run(
        c.clone(),
        env.catalog.clone(),
        env.cancel.clone(),
    ));
    // With `spec: {}`, as `kubectl create namespace` sends it: the API server defaults
    // spec.finalizers only when a spec is present.
    create(
        &c,
        &namespaces(),
        json!({"metadata": {"name": "doomed"}, "spec": {}}),
    )
    .await;
    let cms = configmaps("doomed");
    create(&c, &cms, json!({"metadata": {"name": "plain"}})).await;
    create(
        &c,
        &cms,
        json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}),
    )
    .await;
    let secrets = ResourceRef::new("", "v1", "secrets", Some("doomed"));
    create(&c, &secrets, json!({"metadata": {"name": "s"}})).await;
    let pods = ResourceRef::new("", "v1", "pods", Some("doomed"));
    create(
        &c,
        &pods,
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}),
    )
    .await;
    let deploys = ResourceRef::new("apps", "v1", "deployments", Some("doomed"));
    create(
        &c,
        &deploys,
        json!({"metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"app": "d"}},
                 "template": {"metadata": {"labels": {"app": "d"}},
                              "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}),
    )
    .await;
    // Another namespace is left alone.
    create(
        &c,
        &configmaps("default"),
        json!({"metadata": {"name": "bystander"}}),
    )
    .await;

    c.delete(&namespaces(), "doomed", &DeleteParams::default())
        .await
        .unwrap();
    // Everything without a finalizer goes; the held ConfigMap stays and is reported.
    let ns = eventually("the remaining finalizer reported", || {
        let c = c.clone();
        async move {
            let ns = c.get(&namespaces(), "doomed").await.ok()?;
            let fin = condition(&ns, "NamespaceFinalizersRemaining")?;
            (fin["status"] == "True").then_some(ns)
        }
    })
    .await;
    assert_eq!(ns["status"]["phase"], "Terminating");
    let fin = condition(&ns, "NamespaceFinalizersRemaining").unwrap();
    assert_eq!(fin["reason"], "SomeFinalizersRemain");
    assert_eq!(
        fin["message"],
        "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances"
    );
    let remaining = condition(&ns, "NamespaceContentRemaining").unwrap();
    assert_eq!(remaining["status"], "True");
    assert_eq!(
        remaining["message"],
        "Some resources are remaining: configmaps has 1 resource instances"
    );
    for (kind, reason) in [
        ("NamespaceDeletionDiscoveryFailure", "ResourcesDiscovered"),
        ("NamespaceDeletionContentFailure", "ContentDeleted"),
        (
            "NamespaceDeletionGroupVersionParsingFailure",
            "ParsedGroupVersions",
        ),
    ] {
        let cond = condition(&ns, kind).unwrap();
        assert_eq!(
            (cond["status"].as_str(), cond["reason"].as_str()),
            (Some("False"), Some(reason))
        );
    }
    assert!(
        ns["spec"]["finalizers"]
            .as_array()
            .unwrap()
            .contains(&json!("kubernetes"))
    );
    for r in [&secrets, &pods, &deploys] {
        assert!(
            c.list(r, &ListParams::default())
                .await
                .unwrap()
                .items
                .is_empty()
        );
    }
    let left = c.list(&cms, &ListParams::default()).await.unwrap().items;
    assert_eq!(left.len(), 1);
    assert!(left[0]["metadata"]["deletionTimestamp"].is_string());

    // The finalizer goes: the namespace goes.
    let mut held = left[0].clone();
    held["metadata"]["finalizers"] = json!([]);
    c.update(&cms, held, None, &WriteParams::default())
        .await
        .unwrap();
    eventually("the namespace gone", || {
        let c = c.clone();
        async move {
            match c.get(&namespaces(), "doomed").await {
                Err(e) if e.is_not_found() => Some(()),
                _ => None,
            }
        }
    })
    .await;
    assert!(c.get(&configmaps("default"), "bystander").await.is_ok());
}

/// The server's catalog plus a resource it does not serve.
struct WithGhost(Arc<dyn ResourceCatalog>);

impl ResourceCatalog for WithGhost {
    fn resources(&self) -> Vec<CatalogEntry> {
        let mut all = self.0.resources();
        all.push(CatalogEntry::new(
            "ghost.example.com",
            "v1",
            "ghosts",
            "Ghost",
            true,
        ));
        all
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_that_cannot_be_listed_holds_the_namespace() {
    let env = env().await;
    let c = env.client.clone();
    tokio::spawn(k1s_controllers::namespace::run(
        c.clone(),
        Arc::new(WithGhost(env.catalog.clone())),
        env.cancel.clone(),
    ));
    create(
        &c,
        &namespaces(),
        json!({"metadata": {"name": "haunted"}, "spec": {}}),
    )
    .await;
    create(
        &c,
        &configmaps("haunted"),
        json!({"metadata": {"name": "x"}}),
    )
    .await;
    c.delete(&namespaces(), "haunted", &DeleteParams::default())
        .await
        .unwrap();
    let cond = eventually("the discovery failure reported", || {
        let c = c.clone();
        async move {
            let ns = c.get(&namespaces(), "haunted").await.ok()?;
            condition(&ns, "NamespaceDeletionDiscoveryFailure")
                .filter(|c| c["status"] == "True")
                .cloned()
        }
    })
    .await;
    assert_eq!(cond["reason"], "DiscoveryFailed");
    assert!(
        cond["message"]
            .as_str()
            .unwrap()
            .starts_with("Discovery failed for some groups, 1 failing: ghost.example.com/v1"),
        "{cond}"
    );
    // What could be listed is deleted all the same; the namespace stays.
    assert!(
        c.list(&configmaps("haunted"), &ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(c.get(&namespaces(), "haunted").await.is_ok());
}
