//! Local storage, k1s's answer to k3s's local-path-provisioner, through CSI: the server and
//! each node run `k1s csi-hostpath` as a child process (restarted when it dies, stopped on
//! shutdown), which registers with the kubelet like any CSI plugin; the server also creates
//! the `hostpath.csi.k1s.io` CSIDriver and the default `local-path` StorageClass once (an
//! admin's later edits are kept). `--disable local-storage` turns all of it off.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
#[cfg(feature = "server")]
use k1s_api::client::{Client, ResourceRef, WriteParams};
#[cfg(feature = "server")]
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// The driver `k1s csi-hostpath` serves.
pub use k1s_csi::hostpath::DRIVER_NAME as DRIVER;
/// The StorageClass the server creates for it.
#[cfg(feature = "server")]
pub const STORAGE_CLASS: &str = "local-path";

/// Where the plugin and the kubelet find each other, under the kubelet's root directory.
pub struct PluginPaths {
    /// The plugin's CSI socket.
    pub endpoint: PathBuf,
    /// The kubelet's plugin registration directory.
    pub registry: PathBuf,
}

impl PluginPaths {
    pub fn new(kubelet_root: &Path) -> Self {
        Self {
            endpoint: kubelet_root.join("plugins").join(DRIVER).join("csi.sock"),
            registry: kubelet_root.join("plugins_registry"),
        }
    }
}

#[cfg(feature = "server")]
/// Creates the CSIDriver and the default StorageClass unless they exist.
pub async fn ensure_objects(client: &dyn Client) -> anyhow::Result<()> {
    let driver = json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
        "metadata": {"name": DRIVER, "labels": {"app.kubernetes.io/managed-by": "k1s"}},
        "spec": {
            "attachRequired": false,
            "podInfoOnMount": true,
            "fsGroupPolicy": "File",
            "storageCapacity": true,
            "requiresRepublish": false,
            "volumeLifecycleModes": ["Persistent", "Ephemeral"],
        },
    });
    let class = json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": STORAGE_CLASS,
            "labels": {"app.kubernetes.io/managed-by": "k1s"},
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": DRIVER,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowVolumeExpansion": true,
    });
    create_unless_exists(client, "csidrivers", driver).await?;
    create_unless_exists(client, "storageclasses", class).await
}

#[cfg(feature = "server")]
async fn create_unless_exists(
    client: &dyn Client,
    resource: &str,
    obj: Value,
) -> anyhow::Result<()> {
    let r = ResourceRef::new("storage.k8s.io", "v1", resource, None);
    match client.create(&r, obj, &WriteParams::default()).await {
        Ok(_) => Ok(()),
        Err(e) if e.is_already_exists() => Ok(()),
        Err(e) => Err(anyhow::anyhow!(
            "creating the local-path {resource}: {}",
            e.message
        )),
    }
}

/// Runs `k1s csi-hostpath` for node `node` until `cancel`, restarting it with back-off when
/// it exits; on cancel it gets SIGTERM and 10 s to stop.
pub async fn supervise(
    exe: PathBuf,
    data_dir: PathBuf,
    node: String,
    paths: Arc<PluginPaths>,
    cancel: CancellationToken,
) {
    let mut backoff = Duration::from_secs(1);
    loop {
        let started = std::time::Instant::now();
        match run_once(&exe, &data_dir, &node, &paths, &cancel).await {
            Ok(None) => return,
            Ok(Some(status)) => {
                tracing::warn!(%status, "csi-hostpath exited; restarting");
            }
            Err(e) => tracing::error!(error = %e, "cannot start csi-hostpath"),
        }
        if started.elapsed() > Duration::from_secs(60) {
            backoff = Duration::from_secs(1);
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(Duration::from_secs(30));
    }
}

/// One life of the plugin: `Ok(None)` when stopped for shutdown, else its exit status.
async fn run_once(
    exe: &Path,
    data_dir: &Path,
    node: &str,
    paths: &PluginPaths,
    cancel: &CancellationToken,
) -> anyhow::Result<Option<std::process::ExitStatus>> {
    if let Some(dir) = paths.endpoint.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut cmd = tokio::process::Command::new(exe);
    // SAFETY: the closure only calls prctl(PR_SET_PDEATHSIG), which is async-signal-safe.
    // The plugin must not outlive a k1s killed with SIGKILL: the next k1s starts its own.
    unsafe {
        cmd.pre_exec(|| {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM)
                .map_err(std::io::Error::from)
        });
    }
    let mut child = cmd
        .arg("csi-hostpath")
        .arg("--endpoint")
        .arg(format!("unix://{}", paths.endpoint.display()))
        .arg("--node-id")
        .arg(node)
        .arg("--data-dir")
        .arg(data_dir)
        .arg("--registry-dir")
        .arg(&paths.registry)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("spawning {} csi-hostpath", exe.display()))?;
    tracing::info!(pid = child.id(), driver = DRIVER, "started csi-hostpath");
    tokio::select! {
        status = child.wait() => Ok(Some(status.context("waiting for csi-hostpath")?)),
        _ = cancel.cancelled() => {
            if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGTERM,
                );
            }
            if tokio::time::timeout(Duration::from_secs(10), child.wait()).await.is_err() {
                tracing::warn!("csi-hostpath did not stop in 10 s; killing it");
                let _ = child.kill().await;
            }
            Ok(None)
        }
    }
}
