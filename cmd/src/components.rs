//! The controller manager as `k1s server` runs it in process on the in-process client: under
//! leader election, as upstream's, campaigning again after a lost lease. (The scheduler runs
//! with its own informers: [`k1s_scheduler::informers`].)

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

/// Runs the controllers while this server holds the controller-manager Lease; after losing
/// it, campaigns again.
pub async fn controllers(
    client: Arc<dyn Client>,
    registry: Arc<Registry>,
    ca_pem: String,
    identity: String,
    options: k1s_controllers::Options,
    cancel: CancellationToken,
) {
    let catalog: Arc<dyn ResourceCatalog> = Arc::new(RegistryCatalog(registry));
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
