//! Shared setup of the integration tests: the real API semantics in process (LocalClient on
//! a temp redb file), a catalog from the server's registry, and polling for eventual state.

#![allow(dead_code)]

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k1s_api::client::{Client, ListParams, ResourceRef, WatchParams, WatchStream, WriteParams};
use k1s_apiserver::local_client::LocalClient;
use k1s_apiserver::registry::Registry;
use k1s_apiserver::server::{ApiConfig, ApiState};
use k1s_controllers::{CatalogEntry, ResourceCatalog};
use k1s_store::redb::{RedbConfig, RedbStore};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub struct Env {
    pub client: Arc<dyn Client>,
    pub rest: Arc<k1s_apiserver::rest::Rest>,
    pub catalog: Arc<dyn ResourceCatalog>,
    pub cancel: CancellationToken,
    _dir: tempfile::TempDir,
}

impl Drop for Env {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

pub async fn env() -> Env {
    // Logs go through the test harness's capture; set RUST_LOG to see them.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStore::open(RedbConfig::new(dir.path().join("state.redb"))).unwrap();
    let state = ApiState::new(Arc::new(store), &ApiConfig::default()).unwrap();
    k1s_apiserver::bootstrap::run(&state.rest, "127.0.0.1".parse().unwrap(), 6443)
        .await
        .unwrap();
    let cancel = CancellationToken::new();
    let client: Arc<dyn Client> = Arc::new(LocalClient::new(
        state.rest.clone(),
        "controllers-test",
        cancel.clone(),
    ));
    // Pods need their ServiceAccount (admission): run its controller, as a cluster does.
    tokio::spawn(k1s_controllers::serviceaccount::run(
        client.clone(),
        cancel.clone(),
    ));
    // Admission holds a pod create up to 5 s for its namespace's default ServiceAccount;
    // tests with second-scale deadlines must not race that, so wait for it here.
    let sas = ResourceRef::new("", "v1", "serviceaccounts", Some("default"));
    eventually("the default ServiceAccount", || {
        let (c, sas) = (client.clone(), sas.clone());
        async move { c.get(&sas, "default").await.ok() }
    })
    .await;
    Env {
        client,
        rest: state.rest.clone(),
        catalog: Arc::new(RegistryCatalog(state.rest.registry.clone())),
        cancel,
        _dir: dir,
    }
}

/// The server's resources as the server would give them to the controllers.
pub struct RegistryCatalog(pub Arc<Registry>);

impl ResourceCatalog for RegistryCatalog {
    fn resources(&self) -> Vec<CatalogEntry> {
        self.0
            .collectable()
            .iter()
            .map(|r| CatalogEntry::new(&r.group, &r.version, &r.plural, &r.kind, r.namespaced))
            .collect()
    }
}

/// Polls `check` until it returns `Some`, for up to 20 s; panics with `what` otherwise.
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub async fn create(c: &Arc<dyn Client>, r: &ResourceRef, obj: Value) -> Value {
    c.create(r, obj, &WriteParams::default()).await.unwrap()
}

/// A watch of `r` from now on (a list's resourceVersion), optionally narrowed by a field
/// selector: for changes too brief to poll for.
pub async fn watch_from_now(
    c: &Arc<dyn Client>,
    r: &ResourceRef,
    field_selector: Option<&str>,
) -> WatchStream {
    let from = c
        .list(r, &ListParams::default())
        .await
        .unwrap()
        .resource_version;
    let params = WatchParams {
        resource_version: Some(from),
        field_selector: field_selector.map(str::to_owned),
        ..Default::default()
    };
    c.watch(r, &params).await.unwrap()
}

pub fn configmaps(ns: &str) -> ResourceRef {
    ResourceRef::new("", "v1", "configmaps", Some(ns))
}

pub fn namespaces() -> ResourceRef {
    ResourceRef::new("", "v1", "namespaces", None)
}
