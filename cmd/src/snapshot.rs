//! Datastore snapshots: `k1s snapshot save|ls|restore`, and the server's scheduled snapshots
//! with retention (`--snapshot-schedule`, `--snapshot-retention`, as k3s's
//! `etcd-snapshot`). The file format and the restore are `k1s_store::snapshot` and
//! `k1s_store::redb::restore`; this module owns where files go, their names, the schedule and
//! the CLI.
//!
//! - `save` asks the running server (`GET /k1s/v1/snapshot` with the admin kubeconfig), so it
//!   works on either datastore while the server holds the embedded store's file; with
//!   `--datastore-endpoint` it takes etcd's own snapshot instead (`NAME-HOST-TIME.etcd.db`,
//!   what `etcdctl snapshot save` writes).
//! - Scheduled snapshots are taken in the server process: of the embedded store, a k1s
//!   snapshot; of etcd, etcd's own (as k3s's `etcd-snapshot`).
//! - `restore` writes a new embedded store into `--data-dir` from a k1s snapshot, with the
//!   server stopped; started with the cluster's original token, the server is the same
//!   cluster. etcd's own snapshots are restored with `etcdctl snapshot restore`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, Subcommand};
use jiff::Timestamp;
use k1s_store::Store;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::cron::Cron;

/// The file name ending of k1s snapshots.
const EXT: &str = "snap";
/// The file name ending of etcd's own snapshots (`NAME-HOST-TIME.etcd.db`).
const ETCD_EXT: &str = "etcd.db";
/// The name of scheduled snapshots (retention applies to these only).
const SCHEDULED: &str = "scheduled";

#[derive(Args, Debug)]
pub struct SnapshotArgs {
    #[command(subcommand)]
    pub command: SnapshotCommand,
}

#[derive(Subcommand, Debug)]
pub enum SnapshotCommand {
    /// Take a snapshot of the running server's datastore into --dir.
    Save {
        /// The admin kubeconfig of the server.
        #[arg(long, default_value = "/etc/k1s/k1s.yaml", env = "KUBECONFIG")]
        kubeconfig: PathBuf,
        /// Where to write it; default DATA_DIR/server/snapshots.
        #[arg(long)]
        dir: Option<PathBuf>,
        /// The server's data directory (for the default --dir).
        #[arg(long, default_value = "/var/lib/k1s", env = "K1S_DATA_DIR")]
        data_dir: PathBuf,
        /// The first part of the file name: NAME-HOST-UNIXTIME.snap.
        #[arg(long, default_value = "on-demand")]
        name: String,
        /// Take etcd's own snapshot from these etcd client URLs instead of asking the server.
        #[arg(long)]
        datastore_endpoint: Option<String>,
        /// TLS to https:// etcd endpoints, as the server's flags.
        #[arg(long)]
        datastore_cafile: Option<PathBuf>,
        #[arg(long)]
        datastore_certfile: Option<PathBuf>,
        #[arg(long)]
        datastore_keyfile: Option<PathBuf>,
    },
    /// List the snapshots in --dir.
    Ls {
        #[arg(long)]
        dir: Option<PathBuf>,
        #[arg(long, default_value = "/var/lib/k1s", env = "K1S_DATA_DIR")]
        data_dir: PathBuf,
    },
    /// Restore a snapshot into --data-dir as its embedded store (the server must be stopped).
    Restore {
        /// The snapshot file.
        file: PathBuf,
        #[arg(long, default_value = "/var/lib/k1s", env = "K1S_DATA_DIR")]
        data_dir: PathBuf,
        /// Start the restored store's revisions this far above the snapshot's, so clients
        /// that saw later revisions relist (etcd's `--bump-revision`).
        #[arg(long, default_value_t = 1_000_000_000)]
        bump_revision: i64,
        /// Move an existing store aside (to `state.redb.before-restore-UNIXTIME`) instead of
        /// refusing.
        #[arg(long)]
        force: bool,
    },
}

/// Where snapshots go by default.
pub fn default_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("server/snapshots")
}

fn file_name(name: &str, at: Timestamp, ext: &str) -> String {
    format!(
        "{name}-{}-{}.{ext}",
        crate::host::hostname(),
        at.as_second()
    )
}

fn now_rfc3339(at: Timestamp) -> String {
    k1s_api::time::format_nano(at)
}

/// Writes `bytes` to `dir/name` (0600) without ever leaving a partial file there.
fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> anyhow::Result<PathBuf> {
    let path = dir.join(name);
    k1s_apiserver::files::write_atomic(&path, bytes, 0o600)?;
    Ok(path)
}

pub async fn run(args: SnapshotArgs) -> anyhow::Result<()> {
    match args.command {
        SnapshotCommand::Save {
            kubeconfig,
            dir,
            data_dir,
            name,
            datastore_endpoint,
            datastore_cafile,
            datastore_certfile,
            datastore_keyfile,
        } => {
            check_name(&name)?;
            let dir = dir.unwrap_or_else(|| default_dir(&data_dir));
            if let Some(endpoint) = datastore_endpoint {
                let tls = k1s_store::etcd::EtcdTls {
                    ca_file: datastore_cafile,
                    cert_file: datastore_certfile,
                    key_file: datastore_keyfile,
                };
                let etcd = k1s_store::etcd::EtcdStore::connect_with_tls(
                    &k1s_store::etcd::parse_endpoints(&endpoint),
                    &tls,
                )
                .await
                .with_context(|| format!("connecting to etcd at {endpoint}"))?;
                let mut bytes = Vec::new();
                let size = etcd.save_native_snapshot(&mut bytes).await?;
                let at = Timestamp::now();
                let path = write_file(&dir, &file_name(&name, at, ETCD_EXT), &bytes)?;
                println!(
                    "{}: etcd's own snapshot, {size} bytes (restore with etcdctl snapshot restore)",
                    path.display()
                );
                return Ok(());
            }
            let client = k1s_api::http_client::HttpClient::from_kubeconfig_with(
                &kubeconfig,
                None,
                k1s_api::http_client::HttpOptions {
                    request_timeout: std::time::Duration::from_secs(600),
                    ..Default::default()
                },
            )
            .with_context(|| format!("--kubeconfig {}", kubeconfig.display()))?;
            let bytes = client
                .get_bytes(k1s_apiserver::datastore_snapshot::PATH)
                .await
                .map_err(|e| anyhow::anyhow!("the server did not give a snapshot: {e}"))?;
            // Check it before keeping it.
            let snap = k1s_store::snapshot::read(&bytes).context("the server's snapshot")?;
            let path = write_file(&dir, &file_name(&name, Timestamp::now(), EXT), &bytes)?;
            println!(
                "{}: {} keys at revision {}, {} bytes",
                path.display(),
                snap.header.keys,
                snap.header.revision,
                bytes.len()
            );
            Ok(())
        }
        SnapshotCommand::Ls { dir, data_dir } => {
            let dir = dir.unwrap_or_else(|| default_dir(&data_dir));
            println!(
                "{:<56} {:>12} {:>8} {:>22} CREATED",
                "NAME", "SIZE", "KEYS", "REVISION"
            );
            for (path, header, size) in list(&dir)? {
                let name = path.file_name().unwrap_or_default().to_string_lossy();
                match header {
                    Some(h) => println!(
                        "{name:<56} {size:>12} {:>8} {:>22} {}",
                        h.keys, h.revision, h.created_at
                    ),
                    None if name.ends_with(ETCD_EXT) => {
                        println!("{name:<56} {size:>12} (etcd's own snapshot)")
                    }
                    None => println!("{name:<56} {size:>12} (not a readable snapshot)"),
                }
            }
            Ok(())
        }
        SnapshotCommand::Restore {
            file,
            data_dir,
            bump_revision,
            force,
        } => restore(&file, &data_dir, bump_revision, force),
    }
}

fn check_name(name: &str) -> anyhow::Result<()> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
    {
        anyhow::bail!("--name {name:?}: use letters, digits, '-', '_' and '.'");
    }
    Ok(())
}

/// The snapshots in `dir`, oldest first, with their headers.
fn list(dir: &Path) -> anyhow::Result<Vec<(PathBuf, Option<k1s_store::snapshot::Header>, u64)>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", dir.display())),
    };
    let mut out = Vec::new();
    for entry in entries {
        let path = entry?.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if !name.ends_with(&format!(".{EXT}")) && !name.ends_with(&format!(".{ETCD_EXT}")) {
            continue;
        }
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        let header = std::fs::File::open(&path)
            .ok()
            .and_then(|f| k1s_store::snapshot::read_header(&mut std::io::BufReader::new(f)).ok());
        out.push((path, header, size));
    }
    // Oldest first: by the time in the name (NAME-HOST-UNIXTIME.EXT), then the name.
    let time = |p: &Path| -> i64 {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let stem = name.split('.').next().unwrap_or_default();
        stem.rsplit('-')
            .next()
            .and_then(|t| t.parse().ok())
            .unwrap_or(0)
    };
    out.sort_by(|a, b| time(&a.0).cmp(&time(&b.0)).then(a.0.cmp(&b.0)));
    Ok(out)
}

fn restore(file: &Path, data_dir: &Path, bump: i64, force: bool) -> anyhow::Result<()> {
    if bump < 0 {
        anyhow::bail!("--bump-revision must not be negative");
    }
    if file.to_string_lossy().ends_with(ETCD_EXT) {
        anyhow::bail!(
            "{} is etcd's own snapshot: restore it with `etcdctl snapshot restore {} --data-dir \
             DIR` on each etcd member (see etcd's disaster recovery guide), start etcd on DIR, \
             then the servers with --datastore-endpoint and the cluster's --token",
            file.display(),
            file.display()
        );
    }
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let snap = k1s_store::snapshot::read(&bytes).with_context(|| format!("{}", file.display()))?;
    let path = crate::datastore::redb_path(data_dir);
    let wal = k1s_store::redb::wal_path(&path);
    if path.exists() || wal.exists() {
        if k1s_store::redb::in_use(&path) {
            anyhow::bail!(
                "{} is open in a running server: stop it first (systemctl stop k1s)",
                path.display()
            );
        }
        if !force {
            anyhow::bail!(
                "{} already holds a store: stop the server and give --force to move it aside, \
                 or restore into another --data-dir",
                path.display()
            );
        }
        let stamp = Timestamp::now().as_second();
        for p in [&path, &wal] {
            if p.exists() {
                let aside = PathBuf::from(format!("{}.before-restore-{stamp}", p.display()));
                std::fs::rename(p, &aside).with_context(|| {
                    format!(
                        "moving {} aside (is the server still running?)",
                        p.display()
                    )
                })?;
                println!("moved {} to {}", p.display(), aside.display());
            }
        }
    }
    let revision = k1s_store::redb::restore(&path, &snap, bump)
        .with_context(|| format!("restoring into {}", path.display()))?;
    println!(
        "restored {} keys (snapshot of {}, revision {}) into {} at revision {revision}; start \
         the server on this data directory with the cluster's original --token",
        snap.header.keys,
        snap.header.created_at,
        snap.header.revision,
        path.display()
    );
    Ok(())
}

/// The server's snapshot schedule.
#[derive(Debug, Clone)]
pub struct Schedule {
    pub cron: Cron,
    pub retention: usize,
    pub dir: PathBuf,
}

/// Takes a snapshot at every time of `schedule` until `cancel`, keeping the newest
/// `retention` scheduled ones: of `etcd`'s own when the datastore is etcd.
pub fn spawn(
    store: Arc<dyn Store>,
    etcd: Option<Arc<k1s_store::etcd::EtcdStore>>,
    schedule: Schedule,
    tasks: &TaskTracker,
    cancel: &CancellationToken,
) {
    let cancel = cancel.clone();
    tasks.spawn(async move {
        loop {
            let now = Timestamp::now();
            let Some(next) = schedule.cron.next_after(now) else {
                tracing::warn!("the snapshot schedule names no time in the next five years");
                return;
            };
            let wait = next.duration_since(now).try_into().unwrap_or_default();
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(wait) => {}
            }
            let at = Timestamp::now();
            let taken = match &etcd {
                Some(etcd) => take_etcd(etcd, &schedule.dir, at).await,
                None => take(&*store, &schedule.dir, at).await.map(|(p, _)| p),
            };
            match taken {
                Ok(path) => tracing::info!(file = %path.display(), "scheduled snapshot taken"),
                Err(e) => tracing::warn!(error = %format!("{e:#}"), "scheduled snapshot failed"),
            }
            if let Err(e) = prune(&schedule.dir, schedule.retention) {
                tracing::warn!(error = %format!("{e:#}"), "pruning old snapshots failed");
            }
        }
    });
}

async fn take(
    store: &dyn Store,
    dir: &Path,
    at: Timestamp,
) -> anyhow::Result<(PathBuf, k1s_store::snapshot::Header)> {
    let mut bytes = Vec::new();
    let header = k1s_store::snapshot::save(store, &now_rfc3339(at), &mut bytes).await?;
    let path = write_file(dir, &file_name(SCHEDULED, at, EXT), &bytes)?;
    Ok((path, header))
}

async fn take_etcd(
    etcd: &k1s_store::etcd::EtcdStore,
    dir: &Path,
    at: Timestamp,
) -> anyhow::Result<PathBuf> {
    let mut bytes = Vec::new();
    etcd.save_native_snapshot(&mut bytes).await?;
    write_file(dir, &file_name(SCHEDULED, at, ETCD_EXT), &bytes)
}

/// Deletes all but the newest `keep` scheduled snapshots.
fn prune(dir: &Path, keep: usize) -> anyhow::Result<()> {
    let scheduled: Vec<PathBuf> = list(dir)?
        .into_iter()
        .map(|(p, _, _)| p)
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("{SCHEDULED}-")))
        })
        .collect();
    let excess = scheduled.len().saturating_sub(keep.max(1));
    for p in &scheduled[..excess] {
        std::fs::remove_file(p).with_context(|| format!("deleting {}", p.display()))?;
        tracing::info!(file = %p.display(), "deleted an old scheduled snapshot");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k1s_store::redb::{RedbConfig, RedbStore};
    use tokio_util::bytes::Bytes;

    #[tokio::test]
    async fn scheduled_snapshots_are_kept_to_the_retention() {
        let dir = tempfile::tempdir().unwrap();
        let store = RedbStore::open(RedbConfig::new(dir.path().join("s.redb"))).unwrap();
        store
            .create("/registry/a", Bytes::from_static(b"1"))
            .await
            .unwrap();
        let snaps = dir.path().join("snaps");
        // An on-demand one is never pruned.
        write_file(&snaps, "on-demand-h-1.snap", b"x").unwrap();
        let start = Timestamp::now();
        for i in 0..4 {
            take(&store, &snaps, start + jiff::SignedDuration::from_secs(i))
                .await
                .unwrap();
        }
        prune(&snaps, 2).unwrap();
        let left = list(&snaps).unwrap();
        let names: Vec<String> = left
            .iter()
            .map(|(p, _, _)| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 3, "{names:?}");
        assert!(names.iter().any(|n| n.starts_with("on-demand-")));
        let newest = left.last().unwrap();
        assert_eq!(newest.1.as_ref().unwrap().keys, 1);
        store.close();
    }

    #[test]
    fn names_are_checked() {
        assert!(check_name("before-upgrade_1.2").is_ok());
        assert!(check_name("../x").is_err());
        assert!(check_name("").is_err());
    }
}
