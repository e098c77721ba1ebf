//! The kubelet side of plugin registration (the kubelet's plugin watcher): plugins announce
//! themselves with a socket in the registry directory (`DATA_DIR/plugins_registry`); the
//! watcher asks each new socket who it is (`GetInfo`), hands CSI plugins to a
//! [`RegistrationHandler`], tells the plugin the outcome (`NotifyRegistrationStatus`), and
//! deregisters a plugin when its socket goes away. A socket replaced by a new one (a
//! restarted plugin) is registered again.
//!
//! The directory is scanned once a second rather than watched with inotify: it is tiny, a
//! scan cannot miss an event, and registration is not latency-critical.
//!
//! A failed registration is a [`RegisterError`]; its text is what the plugin is told. The
//! handler's own error is a plain message, as it is only ever reported to the plugin.

use std::collections::HashMap;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::connect::{self, ConnectError};
use crate::proto::registration::registration_client::RegistrationClient;
use crate::proto::registration::{InfoRequest, PluginInfo, RegistrationStatus};

/// The plugin type string of CSI plugins in `PluginInfo.type`.
pub const CSI_PLUGIN_TYPE: &str = "CSIPlugin";

/// How often the directory is scanned.
const SCAN_INTERVAL: Duration = Duration::from_secs(1);
/// Deadline for the registration calls to a plugin.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a plugin could not be registered.
#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    /// The registration socket cannot be dialled.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    #[error("GetInfo: {}", .0.message())]
    GetInfo(#[source] Box<tonic::Status>),
    #[error("plugin name is empty")]
    EmptyName,
    /// The plugin speaks no CSI 1.x version.
    #[error("none of the versions {versions:?} of plugin {name} is supported (k1s speaks CSI 1.x)")]
    Unsupported { name: String, versions: Vec<String> },
    /// The [`RegistrationHandler`] refused the driver, with this text.
    #[error("{0}")]
    Rejected(String),
}

/// What the kubelet does with a CSI plugin that registers.
#[async_trait::async_trait]
pub trait RegistrationHandler: Send + Sync {
    /// Validates and registers driver `name`, whose CSI service is at `endpoint`. The error
    /// text is reported to the plugin; the watcher tries again on a later scan.
    async fn register(
        &self,
        name: &str,
        endpoint: &Path,
        versions: &[String],
    ) -> Result<(), String>;
    /// The plugin's registration socket is gone.
    async fn deregister(&self, name: &str);
}

/// A socket seen in the directory: its identity (inode and change time, so a re-created
/// socket is new) and the driver it registered, once it has.
struct Seen {
    identity: (u64, i64),
    driver: Option<String>,
}

/// Scans `dir` until `cancel`, registering and deregistering plugins through `handler`.
pub async fn run(dir: PathBuf, handler: Arc<dyn RegistrationHandler>, cancel: CancellationToken) {
    if let Err(e) = std::fs::create_dir_all(&dir) {
        tracing::error!(dir = %dir.display(), error = %e, "cannot create the plugin registry directory");
        return;
    }
    let mut seen: HashMap<PathBuf, Seen> = HashMap::new();
    loop {
        scan(&dir, handler.as_ref(), &mut seen).await;
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(SCAN_INTERVAL) => {}
        }
    }
}

/// One pass over the directory.
async fn scan(dir: &Path, handler: &dyn RegistrationHandler, seen: &mut HashMap<PathBuf, Seen>) {
    let present = sockets(dir);
    // Gone, or replaced by a new socket: deregister what it registered.
    let stale: Vec<PathBuf> = seen
        .iter()
        .filter(|(path, s)| present.get(*path) != Some(&s.identity))
        .map(|(path, _)| path.clone())
        .collect();
    for path in stale {
        if let Some(Seen {
            driver: Some(name), ..
        }) = seen.remove(&path)
        {
            tracing::info!(driver = %name, socket = %path.display(), "plugin deregistered");
            handler.deregister(&name).await;
        }
    }
    for (path, identity) in present {
        if seen.get(&path).is_some_and(|s| s.driver.is_some()) {
            continue;
        }
        match register(&path, handler).await {
            Ok(Some(name)) => {
                seen.insert(
                    path,
                    Seen {
                        identity,
                        driver: Some(name),
                    },
                );
            }
            // Not a CSI plugin: remember it so it is not asked again.
            Ok(None) => {
                seen.insert(
                    path,
                    Seen {
                        identity,
                        driver: None,
                    },
                );
            }
            Err(e) => {
                tracing::warn!(socket = %path.display(), error = %e, "plugin registration failed; will retry");
            }
        }
    }
}

/// The sockets in `dir` (hidden files skipped, as upstream does) and their identities.
fn sockets(dir: &Path) -> HashMap<PathBuf, (u64, i64)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return HashMap::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .filter_map(|e| {
            let meta = e.metadata().ok()?;
            meta.file_type().is_socket().then(|| {
                (
                    e.path(),
                    (meta.ino(), meta.ctime_nsec() + meta.ctime() * 1_000_000_000),
                )
            })
        })
        .collect()
}

/// Registers the plugin behind registration socket `path`: `Ok(Some(driver))` when it
/// registered, `Ok(None)` for a plugin that is not CSI.
async fn register(
    path: &Path,
    handler: &dyn RegistrationHandler,
) -> Result<Option<String>, RegisterError> {
    let channel = connect::connect(path, CALL_TIMEOUT).await?;
    let mut client = RegistrationClient::new(channel);
    let info: PluginInfo = client
        .get_info(InfoRequest {})
        .await
        .map_err(|s| RegisterError::GetInfo(Box::new(s)))?
        .into_inner();
    if info.r#type != CSI_PLUGIN_TYPE {
        tracing::debug!(socket = %path.display(), kind = %info.r#type, "ignoring a plugin that is not CSI");
        return Ok(None);
    }
    let outcome = validate(&info).map(|_| endpoint(path, &info));
    let outcome = match outcome {
        Ok(endpoint) => handler
            .register(&info.name, &endpoint, &info.supported_versions)
            .await
            .map_err(RegisterError::Rejected),
        Err(e) => Err(e),
    };
    let status = RegistrationStatus {
        plugin_registered: outcome.is_ok(),
        error: outcome
            .as_ref()
            .err()
            .map(ToString::to_string)
            .unwrap_or_default(),
    };
    if let Err(s) = client.notify_registration_status(status).await {
        tracing::warn!(driver = %info.name, error = %s.message(), "NotifyRegistrationStatus failed");
    }
    outcome?;
    tracing::info!(driver = %info.name, socket = %path.display(), "CSI plugin registered");
    Ok(Some(info.name))
}

/// The checks the kubelet's CSI handler makes before registering a driver.
fn validate(info: &PluginInfo) -> Result<(), RegisterError> {
    if info.name.is_empty() {
        return Err(RegisterError::EmptyName);
    }
    let supported = info
        .supported_versions
        .iter()
        .any(|v| v.trim_start_matches('v').split('.').next() == Some("1"));
    if !supported {
        return Err(RegisterError::Unsupported {
            name: info.name.clone(),
            versions: info.supported_versions.clone(),
        });
    }
    Ok(())
}

/// The CSI service socket: `endpoint` from the plugin, else the registration socket itself.
fn endpoint(registration: &Path, info: &PluginInfo) -> PathBuf {
    if info.endpoint.is_empty() {
        registration.to_path_buf()
    } else {
        connect::socket_path(&info.endpoint).unwrap_or_else(|_| PathBuf::from(&info.endpoint))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(name: &str, versions: &[&str], endpoint: &str) -> PluginInfo {
        PluginInfo {
            r#type: CSI_PLUGIN_TYPE.into(),
            name: name.into(),
            endpoint: endpoint.into(),
            supported_versions: versions.iter().map(|v| v.to_string()).collect(),
        }
    }

    #[test]
    fn only_csi_1_plugins_with_a_name_validate() {
        assert!(validate(&info("d", &["1.0.0"], "")).is_ok());
        assert!(validate(&info("d", &["0.3.0", "v1.2.0"], "")).is_ok());
        let e = validate(&info("d", &["0.3.0"], "")).unwrap_err();
        assert!(matches!(e, RegisterError::Unsupported { .. }));
        assert_eq!(
            e.to_string(),
            r#"none of the versions ["0.3.0"] of plugin d is supported (k1s speaks CSI 1.x)"#
        );
        assert!(validate(&info("d", &[], "")).is_err());
        let e = validate(&info("", &["1.0.0"], "")).unwrap_err();
        assert!(matches!(e, RegisterError::EmptyName));
        assert_eq!(e.to_string(), "plugin name is empty");
        let e = RegisterError::GetInfo(Box::new(tonic::Status::unavailable("gone")));
        assert_eq!(e.to_string(), "GetInfo: gone");
        assert_eq!(RegisterError::Rejected("no".into()).to_string(), "no");
    }

    #[test]
    fn endpoint_defaults_to_the_registration_socket() {
        let reg = Path::new("/reg/d-reg.sock");
        assert_eq!(endpoint(reg, &info("d", &["1.0.0"], "")), reg);
        assert_eq!(
            endpoint(reg, &info("d", &["1.0.0"], "unix:///csi/d.sock")),
            PathBuf::from("/csi/d.sock")
        );
    }
}
