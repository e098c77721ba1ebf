//! The root CA publisher: a ConfigMap `kube-root-ca.crt` with key `ca.crt` (the API server's
//! CA bundle, given by the caller) in every active namespace, created when missing and put
//! back when its data drifts. It owns that one ConfigMap per namespace and nothing else.

use std::sync::Arc;

use k1s_api::client::{Client, ClientError, ResourceRef, WriteParams};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use k1s_runtime::key::{self, ObjectKey};
use k1s_runtime::{Action, Controller, Reconcile, Store, watcher};

pub const CONFIGMAP_NAME: &str = "kube-root-ca.crt";
pub const KEY: &str = "ca.crt";
/// Upstream's description annotation on the ConfigMap.
const DESCRIPTION_ANNOTATION: &str = "kubernetes.io/description";
const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

#[derive(Debug, thiserror::Error)]
pub enum RootCaError {
    #[error("writing configmap {namespace}/{CONFIGMAP_NAME}: {source}")]
    Write {
        namespace: String,
        #[source]
        source: ClientError,
    },
}

/// Runs the root CA publisher until `cancel`.
pub async fn run(client: Arc<dyn Client>, ca_pem: String, cancel: CancellationToken) {
    let mut ctrl = Controller::new(
        "root-ca-cert-publisher",
        client.clone(),
        ResourceRef::new("", "v1", "namespaces", None),
        watcher::Config::default(),
    )
    .workers(2);
    let configmaps = ctrl.watches(
        ResourceRef::new("", "v1", "configmaps", None),
        watcher::Config::default().fields(&format!("metadata.name={CONFIGMAP_NAME}")),
        Vec::new(),
        Arc::new(|cm: &Value, _| {
            key::namespace(cm)
                .map(ObjectKey::cluster)
                .into_iter()
                .collect()
        }),
    );
    let reconciler = Arc::new(RootCa {
        client,
        ca_pem,
        namespaces: ctrl.store(),
        configmaps,
    });
    ctrl.run(reconciler, cancel).await;
}

struct RootCa {
    client: Arc<dyn Client>,
    ca_pem: String,
    namespaces: Store,
    configmaps: Store,
}

#[async_trait::async_trait]
impl Reconcile for RootCa {
    type Error = RootCaError;

    async fn reconcile(&self, key: &ObjectKey) -> Result<Action, RootCaError> {
        let active = self
            .namespaces
            .get(key)
            .is_some_and(|ns| !key::is_deleting(&ns));
        if !active {
            return Ok(Action::await_change());
        }
        let ns = key.name.as_str();
        let r = ResourceRef::new("", "v1", "configmaps", Some(ns));
        let want = json!({KEY: self.ca_pem});
        let err = |source| RootCaError::Write {
            namespace: ns.to_owned(),
            source,
        };
        let written = match self
            .configmaps
            .get(&ObjectKey::new(Some(ns), CONFIGMAP_NAME))
        {
            None => {
                let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": CONFIGMAP_NAME, "namespace": ns,
                                 "annotations": {DESCRIPTION_ANNOTATION: DESCRIPTION}},
                    "data": want});
                match self.client.create(&r, cm, &WriteParams::default()).await {
                    Err(e) if e.is_already_exists() => Ok(()),
                    other => other.map(|_| ()),
                }
            }
            Some(cm) => {
                let described = cm["metadata"]["annotations"][DESCRIPTION_ANNOTATION]
                    .as_str()
                    .is_some_and(|d| !d.is_empty());
                if cm["data"] == want && described {
                    return Ok(Action::await_change());
                }
                let mut cm = (*cm).clone();
                cm["data"] = want;
                if !cm["metadata"]["annotations"].is_object() {
                    cm["metadata"]["annotations"] = json!({});
                }
                cm["metadata"]["annotations"][DESCRIPTION_ANNOTATION] = json!(DESCRIPTION);
                match self
                    .client
                    .update(&r, cm, None, &WriteParams::default())
                    .await
                {
                    // The cache was stale; the watch brings the newer one and requeues.
                    Err(e) if e.is_conflict() || e.is_not_found() => Ok(()),
                    other => other.map(|_| ()),
                }
            }
        };
        match written {
            Ok(()) => Ok(Action::await_change()),
            // Creating in a namespace that is terminating is forbidden: nothing to do.
            Err(e) if e.code == 403 => Ok(Action::await_change()),
            Err(e) => Err(err(e)),
        }
    }
}
