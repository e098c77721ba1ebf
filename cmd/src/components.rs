//! The controller manager and the scheduler as `k1s server` runs them in process on the
//! in-process client: each under leader election (Leases `kube-controller-manager` and
//! `kube-scheduler` in kube-system, upstream's durations), campaigning again after a lost
//! lease, so that several servers on one etcd run one of each — or, with `elect` false (the
//! embedded store: one server can use it), directly, as upstream's `--leader-elect=false`.

use std::sync::Arc;
use std::time::Duration;

use k1s_api::client::Client;
use k1s_apiserver::registry::Registry;
use k1s_controllers::{CatalogEntry, ResourceCatalog};
use tokio_util::sync::CancellationToken;

/// The served resources, as the controllers need them (the client has no discovery).
struct RegistryCatalog(Arc<Registry>);

impl ResourceCatalog for RegistryCatalog {
    fn resources(&self) -> Vec<CatalogEntry> {
        self.0
            .collectable()
            .iter()
            .map(|r| CatalogEntry::new(&r.group, &r.version, &r.plural, &r.kind, r.namespaced))
            .collect()
    }
}

/// Runs the scheduler (its own informers: [`k1s_scheduler::informers`]) while this server
/// holds the `kube-scheduler` Lease; after losing it, campaigns again. A new term starts from
/// a fresh list, as a newly elected upstream scheduler does.
pub async fn scheduler(
    client: Arc<dyn Client>,
    config: k1s_scheduler::Config,
    identity: Option<String>,
    cancel: CancellationToken,
) {
    let Some(identity) = identity else {
        if let Err(e) = k1s_scheduler::informers::run(client, config, cancel).await {
            tracing::error!(error = %e, "the scheduler stopped");
        }
        return;
    };
    while !cancel.is_cancelled() {
        let lease = k1s_runtime::leader::Config::new("kube-system", "kube-scheduler", &identity);
        let elector = k1s_runtime::leader::Elector::new(client.clone(), lease);
        let (c, cfg) = (client.clone(), config.clone());
        let result = elector
            .run(cancel.clone(), move |term| async move {
                if let Err(e) = k1s_scheduler::informers::run(c, cfg, term).await {
                    tracing::error!(error = %e, "the scheduler stopped");
                }
            })
            .await;
        if let Err(e) = result {
            tracing::warn!(error = %e, "scheduler lost its lease; campaigning again");
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(Duration::from_secs(2)) => {}
            }
        }
    }
}

/// Runs the controllers while this server holds the controller-manager Lease; after losing
/// it, campaigns again.
pub async fn controllers(
    client: Arc<dyn Client>,
    registry: Arc<Registry>,
    ca_pem: String,
    identity: Option<String>,
    options: k1s_controllers::Options,
    cancel: CancellationToken,
) {
    let catalog: Arc<dyn ResourceCatalog> = Arc::new(RegistryCatalog(registry));
    let Some(identity) = identity else {
        k1s_controllers::run_all_with(client, catalog, ca_pem, options, cancel).await;
        return;
    };
    while !cancel.is_cancelled() {
        let result = k1s_controllers::run_elected_with(
            client.clone(),
            catalog.clone(),
            ca_pem.clone(),
            &identity,
            options.clone(),
            cancel.clone(),
        )
        .await;
        if let Err(e) = result {
            tracing::warn!(error = %e, "controller manager lost its lease; campaigning again");
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(Duration::from_secs(2)) => {}
            }
        }
    }
}
