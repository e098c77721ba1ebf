//! The plugin side of kubelet plugin registration, as node-driver-registrar does it for a CSI
//! driver: serve `pluginregistration.Registration` on `<registry dir>/<driver>-reg.sock`, tell
//! the kubelet who we are when it asks (`GetInfo`: a `CSIPlugin`, the driver name, the CSI
//! endpoint it should dial, the CSI versions spoken), and hear its verdict
//! (`NotifyRegistrationStatus`).
//!
//! A rejected registration ends [`run`] with [`RegistrarError::Rejected`], so the process exits
//! non-zero and whoever supervises it restarts it and the registration is tried again, as
//! node-driver-registrar does. The socket is removed when the registrar stops.

use std::path::{Path, PathBuf};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tonic::service::Routes;
use tonic::{Request, Response, Status};

use crate::proto::registration::registration_server::{Registration, RegistrationServer};
use crate::proto::registration::{
    InfoRequest, PluginInfo, RegistrationStatus, RegistrationStatusResponse,
};
use crate::serve::{ServeError, Socket};
use crate::watcher::CSI_PLUGIN_TYPE;

/// The CSI versions k1s plugins speak.
pub const SUPPORTED_VERSIONS: &[&str] = &["1.0.0"];

#[derive(Debug, thiserror::Error)]
pub enum RegistrarError {
    #[error(transparent)]
    Serve(#[from] ServeError),
    #[error("the kubelet rejected the registration of {driver}: {message}")]
    Rejected { driver: String, message: String },
}

/// Who registers and where.
#[derive(Debug, Clone)]
pub struct Registrar {
    /// The kubelet's plugin registry directory (`/var/lib/kubelet/plugins_registry` upstream).
    pub registry_dir: PathBuf,
    /// The CSI driver name (`GetPluginInfo.name`).
    pub driver: String,
    /// The CSI socket the kubelet should dial, as a path.
    pub endpoint: PathBuf,
}

impl Registrar {
    /// `<registry dir>/<driver>-reg.sock`.
    pub fn socket_path(&self) -> PathBuf {
        registration_socket(&self.registry_dir, &self.driver)
    }

    /// Serves the registration socket until `cancel` fires (`Ok`) or the kubelet rejects the
    /// registration (`Err(Rejected)`). The socket is gone when this returns.
    pub async fn run(self, cancel: CancellationToken) -> Result<(), RegistrarError> {
        let path = self.socket_path();
        let socket = Socket::bind(&path).await?;
        tracing::info!(socket = %path.display(), driver = %self.driver, "serving plugin registration");
        let (rejected_tx, mut rejected_rx) = mpsc::channel(1);
        let driver = self.driver.clone();
        let service = Service {
            info: PluginInfo {
                r#type: CSI_PLUGIN_TYPE.to_owned(),
                name: self.driver,
                endpoint: self.endpoint.display().to_string(),
                supported_versions: SUPPORTED_VERSIONS.iter().map(|v| v.to_string()).collect(),
            },
            rejected: rejected_tx,
        };
        let stop = cancel.child_token();
        let serving = socket.serve(Routes::new(RegistrationServer::new(service)), stop.clone());
        tokio::pin!(serving);
        tokio::select! {
            result = &mut serving => Ok(result?),
            Some(message) = rejected_rx.recv() => {
                stop.cancel();
                serving.await?;
                Err(RegistrarError::Rejected { driver, message })
            }
        }
    }
}

/// Where a driver's registration socket lives in a registry directory.
pub fn registration_socket(registry_dir: &Path, driver: &str) -> PathBuf {
    registry_dir.join(format!("{driver}-reg.sock"))
}

struct Service {
    info: PluginInfo,
    rejected: mpsc::Sender<String>,
}

#[tonic::async_trait]
impl Registration for Service {
    async fn get_info(&self, _: Request<InfoRequest>) -> Result<Response<PluginInfo>, Status> {
        tracing::debug!(driver = %self.info.name, "kubelet asked for plugin info");
        Ok(Response::new(self.info.clone()))
    }

    async fn notify_registration_status(
        &self,
        request: Request<RegistrationStatus>,
    ) -> Result<Response<RegistrationStatusResponse>, Status> {
        let status = request.into_inner();
        if status.plugin_registered {
            tracing::info!(driver = %self.info.name, "registered with the kubelet");
        } else {
            tracing::error!(driver = %self.info.name, error = %status.error, "the kubelet rejected the registration");
            // Only the first rejection matters; the registrar is stopping already.
            let _ = self.rejected.try_send(status.error);
        }
        Ok(Response::new(RegistrationStatusResponse {}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_is_named_after_the_driver() {
        assert_eq!(
            registration_socket(
                Path::new("/var/lib/kubelet/plugins_registry"),
                "hostpath.csi.k1s.io"
            ),
            PathBuf::from("/var/lib/kubelet/plugins_registry/hostpath.csi.k1s.io-reg.sock")
        );
    }

    #[tokio::test]
    async fn rejection_is_reported_once_and_success_is_not() {
        let (tx, mut rx) = mpsc::channel(1);
        let service = Service {
            info: PluginInfo::default(),
            rejected: tx,
        };
        let ok = RegistrationStatus {
            plugin_registered: true,
            error: String::new(),
        };
        service
            .notify_registration_status(Request::new(ok))
            .await
            .unwrap();
        assert!(rx.try_recv().is_err());
        for _ in 0..2 {
            let bad = RegistrationStatus {
                plugin_registered: false,
                error: "version 9 not supported".into(),
            };
            service
                .notify_registration_status(Request::new(bad))
                .await
                .unwrap();
        }
        assert_eq!(rx.try_recv().unwrap(), "version 9 not supported");
        assert!(rx.try_recv().is_err());
    }
}
