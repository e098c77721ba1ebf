//! The service account controller: a `default` ServiceAccount in every active namespace,
//! recreated when deleted. It creates only; it never changes or deletes a ServiceAccount.

use std::sync::Arc;
use std::time::Duration;

use k1s_api::client::{Client, ClientError, ResourceRef, WriteParams};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use k1s_runtime::key::{self, ObjectKey};
use k1s_runtime::{Action, Controller, Reconcile, Store, watcher};

/// The ServiceAccount every namespace gets.
pub const DEFAULT_NAME: &str = "default";

#[derive(Debug, thiserror::Error)]
pub enum ServiceAccountError {
    #[error("creating serviceaccount {namespace}/{DEFAULT_NAME}: {source}")]
    Create {
        namespace: String,
        #[source]
        source: ClientError,
    },
}

/// Runs the service account controller until `cancel`.
pub async fn run(client: Arc<dyn Client>, cancel: CancellationToken) {
    let mut ctrl = Controller::new(
        "serviceaccount",
        client.clone(),
        ResourceRef::new("", "v1", "namespaces", None),
        watcher::Config::default(),
    )
    .workers(2);
    let accounts = ctrl.watches(
        ResourceRef::new("", "v1", "serviceaccounts", None),
        watcher::Config::default().fields(&format!("metadata.name={DEFAULT_NAME}")),
        Vec::new(),
        Arc::new(|sa: &Value, _| {
            key::namespace(sa)
                .map(ObjectKey::cluster)
                .into_iter()
                .collect()
        }),
    );
    let reconciler = Arc::new(ServiceAccounts {
        client,
        namespaces: ctrl.store(),
        accounts,
    });
    ctrl.run(reconciler, cancel).await;
}

struct ServiceAccounts {
    client: Arc<dyn Client>,
    namespaces: Store,
    accounts: Store,
}

#[async_trait::async_trait]
impl Reconcile for ServiceAccounts {
    type Error = ServiceAccountError;

    async fn reconcile(&self, key: &ObjectKey) -> Result<Action, ServiceAccountError> {
        let active = self.namespaces.get(key).is_some_and(|ns| {
            !key::is_deleting(&ns) && ns["status"]["phase"].as_str() != Some("Terminating")
        });
        if !active {
            return Ok(Action::await_change());
        }
        let sa_key = ObjectKey::new(Some(&key.name), DEFAULT_NAME);
        if self.accounts.get(&sa_key).is_some() {
            return Ok(Action::await_change());
        }
        let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": DEFAULT_NAME, "namespace": key.name}});
        let r = ResourceRef::new("", "v1", "serviceaccounts", Some(&key.name));
        match self.client.create(&r, sa, &WriteParams::default()).await {
            Ok(_) => Ok(Action::await_change()),
            Err(e) if e.is_already_exists() => Ok(Action::await_change()),
            // The namespace is going away: nothing to do.
            Err(e) if e.code == 403 || e.is_not_found() => {
                Ok(Action::requeue(Duration::from_secs(5)))
            }
            Err(source) => Err(ServiceAccountError::Create {
                namespace: key.name.clone(),
                source,
            }),
        }
    }
}
