//! `k1s server`: the control-plane process. Today it runs the datastore and its background
//! compaction; the API server, scheduler, controllers and kubelet join it as their issues land.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use k1s_store::compactor::{self, CompactionPolicy};
use k1s_store::etcd::EtcdTls;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::datastore;

#[derive(Args, Debug)]
pub struct ServerArgs {
    /// Directory for all state (certificates, the embedded datastore).
    #[arg(long, default_value = "/var/lib/k1s", env = "K1S_DATA_DIR")]
    pub data_dir: PathBuf,
    /// etcd client URLs (comma-separated) to use instead of the embedded store.
    #[arg(long, env = "K1S_DATASTORE_ENDPOINT")]
    pub datastore_endpoint: Option<String>,
    /// CA certificate (PEM) that signed the etcd servers' certificates, for https:// endpoints.
    #[arg(long)]
    pub datastore_cafile: Option<PathBuf>,
    /// Client certificate (PEM) for etcd's --client-cert-auth.
    #[arg(long)]
    pub datastore_certfile: Option<PathBuf>,
    /// Client key (PEM) for etcd's --client-cert-auth.
    #[arg(long)]
    pub datastore_keyfile: Option<PathBuf>,
    /// Keep at least this many revisions of history for watchers to resume from.
    #[arg(long, default_value_t = 10_000)]
    pub compaction_keep_revisions: i64,
    /// Keep at least this many seconds of history for watchers to resume from.
    #[arg(long, default_value_t = 300)]
    pub compaction_keep_seconds: u64,
    /// How often the compactor runs, in seconds.
    #[arg(long, default_value_t = 60)]
    pub compaction_interval_seconds: u64,
}

pub async fn run(args: ServerArgs) -> anyhow::Result<()> {
    let tls = EtcdTls {
        ca_file: args.datastore_cafile.clone(),
        cert_file: args.datastore_certfile.clone(),
        key_file: args.datastore_keyfile.clone(),
    };
    let store = datastore::open(&args.data_dir, args.datastore_endpoint.as_deref(), &tls).await?;
    let revision = store.current_revision().await?;
    tracing::info!(revision, data_dir = %args.data_dir.display(), "datastore ready");

    let cancel = CancellationToken::new();
    let tasks = TaskTracker::new();
    let policy = CompactionPolicy {
        keep_revisions: args.compaction_keep_revisions,
        keep_for: Duration::from_secs(args.compaction_keep_seconds),
        interval: Duration::from_secs(args.compaction_interval_seconds.max(1)),
    };
    tasks.spawn(compactor::run(store.clone(), policy, cancel.clone()));
    tasks.close();

    shutdown_signal().await?;
    tracing::info!("shutting down");
    cancel.cancel();
    tasks.wait().await;
    drop(store);
    tracing::info!("stopped");
    Ok(())
}

async fn shutdown_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    Ok(())
}
