//! Chooses and opens the datastore: the embedded redb file, or etcd with
//! `--datastore-endpoint` (as in k3s).

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use k1s_store::Store;
use k1s_store::etcd::{EtcdStore, EtcdTls, parse_endpoints};
use k1s_store::redb::{RedbConfig, RedbStore};

/// The file of the embedded store under a data directory.
pub fn redb_path(data_dir: &Path) -> std::path::PathBuf {
    data_dir.join("db").join("state.redb")
}

/// Opens the configured datastore; `tls` applies to `https://` etcd endpoints.
pub async fn open(
    data_dir: &Path,
    endpoint: Option<&str>,
    tls: &EtcdTls,
) -> anyhow::Result<Arc<dyn Store>> {
    Ok(open_with_etcd(data_dir, endpoint, tls).await?.0)
}

/// [`open`], and the etcd store itself when the datastore is etcd (for etcd's own
/// snapshots).
pub async fn open_with_etcd(
    data_dir: &Path,
    endpoint: Option<&str>,
    tls: &EtcdTls,
) -> anyhow::Result<(Arc<dyn Store>, Option<Arc<EtcdStore>>)> {
    match endpoint {
        Some(ep) if ep.starts_with("http://") || ep.starts_with("https://") => {
            let endpoints = parse_endpoints(ep);
            let store = EtcdStore::connect_with_tls(&endpoints, tls)
                .await
                .with_context(|| format!("connecting to etcd at {ep}"))?;
            tracing::info!(endpoints = ?endpoints, "using etcd datastore");
            let store = Arc::new(store);
            Ok((store.clone(), Some(store)))
        }
        Some(other) => anyhow::bail!(
            "unsupported --datastore-endpoint {other:?}: give etcd client URLs such as http://10.0.0.1:2379 (comma-separated for a cluster), or leave it out for the embedded store"
        ),
        None => {
            let path = redb_path(data_dir);
            let store = tokio::task::spawn_blocking(move || {
                RedbStore::open(RedbConfig {
                    on_idle: Some(crate::allocator::on_park),
                    ..RedbConfig::new(path)
                })
            })
            .await??;
            Ok((Arc::new(store), None))
        }
    }
}
