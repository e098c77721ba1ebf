//! The Registration service on `DIR/kubelet.sock`: a plugin names its resource and socket;
//! the kubelet checks the request, answers, and then connects to the plugin ([`super::endpoint`]),
//! as upstream does (the plugin serves before it registers).

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::service::Routes;
use tonic::{Request, Response, Status};

use super::proto::registration_server::{Registration, RegistrationServer};
use super::proto::{Empty, RegisterRequest};
use super::{API_VERSION, DeviceManager, KUBELET_SOCKET};

struct Registrar {
    manager: Arc<DeviceManager>,
    cancel: CancellationToken,
    /// The connections to registered plugins ([`super::endpoint::follow`]).
    followers: TaskTracker,
}

#[tonic::async_trait]
impl Registration for Registrar {
    async fn register(&self, request: Request<RegisterRequest>) -> Result<Response<Empty>, Status> {
        let req = request.into_inner();
        if let Err(why) = check(&req) {
            tracing::warn!(resource = %req.resource_name, endpoint = %req.endpoint, %why, "refused a device plugin registration");
            return Err(Status::invalid_argument(why.to_string()));
        }
        tracing::info!(resource = %req.resource_name, endpoint = %req.endpoint, "device plugin registered");
        self.followers.spawn(super::endpoint::follow(
            self.manager.clone(),
            req,
            self.cancel.child_token(),
        ));
        Ok(Response::new(Empty {}))
    }
}

/// Why a registration was refused (the gRPC status message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistrationError {
    #[error(
        "device plugin API version {0:?} is not supported; this kubelet supports {supported}",
        supported = API_VERSION
    )]
    Version(String),
    #[error(transparent)]
    ResourceName(#[from] ResourceNameError),
    #[error(
        "endpoint {0:?} must be the name of the plugin's socket in the device plugin directory"
    )]
    Endpoint(String),
}

/// Why a name is not an extended resource a device plugin may serve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResourceNameError {
    #[error(
        "invalid extended resource name {0:?}: it must be domain-prefixed (vendor.example/resource)"
    )]
    NoDomain(String),
    #[error(
        "invalid extended resource name {0:?}: the kubernetes.io domains are for native resources"
    )]
    NativeDomain(String),
    #[error("invalid extended resource name {0:?}: it must not start with \"requests.\"")]
    RequestsPrefix(String),
    #[error("invalid extended resource name {0:?}: the prefix must be a lowercase DNS subdomain")]
    BadPrefix(String),
    #[error(
        "invalid extended resource name {0:?}: the name must be a qualified name (alphanumerics, '-', '_', '.'; at most 63)"
    )]
    BadName(String),
}

/// Upstream's checks of a registration: the API version, an extended resource name, and a
/// socket that is a file in the device plugin directory.
fn check(req: &RegisterRequest) -> Result<(), RegistrationError> {
    if req.version != API_VERSION {
        return Err(RegistrationError::Version(req.version.clone()));
    }
    valid_resource_name(&req.resource_name)?;
    let e = &req.endpoint;
    if e.is_empty() || e.contains('/') || e == "." || e == ".." || e == KUBELET_SOCKET {
        return Err(RegistrationError::Endpoint(e.clone()));
    }
    Ok(())
}

/// Whether `name` is an extended resource a device plugin may serve: `domain/name`, a DNS
/// subdomain prefix outside `kubernetes.io`, a qualified name, and not `requests.`-prefixed.
pub fn valid_resource_name(name: &str) -> Result<(), ResourceNameError> {
    let owned = || name.to_string();
    let Some((domain, short)) = name.split_once('/') else {
        return Err(ResourceNameError::NoDomain(owned()));
    };
    if domain.contains("kubernetes.io") {
        return Err(ResourceNameError::NativeDomain(owned()));
    }
    if name.starts_with("requests.") {
        return Err(ResourceNameError::RequestsPrefix(owned()));
    }
    let subdomain_ok = domain.len() <= 253
        && domain.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    if !subdomain_ok {
        return Err(ResourceNameError::BadPrefix(owned()));
    }
    let alnum = |c: char| c.is_ascii_alphanumeric();
    let name_ok = !short.is_empty()
        && short.len() <= 63
        && short.starts_with(alnum)
        && short.ends_with(alnum)
        && short
            .chars()
            .all(|c| alnum(c) || c == '-' || c == '_' || c == '.');
    if !name_ok {
        return Err(ResourceNameError::BadName(owned()));
    }
    Ok(())
}

/// Removes the sockets in the device plugin directory, as upstream's kubelet does when it
/// starts: plugins watch for that (or for a new `kubelet.sock`) and start over with a new
/// socket and a new registration. Other files (the checkpoint) stay.
fn remove_plugin_sockets(dir: &std::path::Path) {
    use std::os::unix::fs::FileTypeExt;
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.file_type().is_ok_and(|t| t.is_socket()) {
            let path = entry.path();
            match std::fs::remove_file(&path) {
                Ok(()) => {
                    tracing::debug!(socket = %path.display(), "removed a device plugin socket")
                }
                Err(e) => {
                    tracing::warn!(socket = %path.display(), error = %e, "removing a device plugin socket")
                }
            }
        }
    }
}

/// Serves Registration on `DIR/kubelet.sock` until `cancel` fires, after removing the
/// sockets an earlier kubelet's plugins left (see [`remove_plugin_sockets`]).
pub(super) async fn serve(manager: Arc<DeviceManager>, cancel: CancellationToken) {
    remove_plugin_sockets(manager.dir());
    let path = manager.dir().join(KUBELET_SOCKET);
    let socket = match k1s_csi::serve::Socket::bind(&path).await {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "the device plugin registration socket; device plugins cannot register");
            return;
        }
    };
    tracing::info!(socket = %path.display(), "serving device plugin registration");
    let followers = TaskTracker::new();
    let routes = Routes::new(RegistrationServer::new(Registrar {
        manager,
        cancel: cancel.clone(),
        followers: followers.clone(),
    }));
    if let Err(e) = socket.serve(routes, cancel.clone()).await {
        tracing::error!(error = %e, "serving device plugin registration");
    }
    // On shutdown the plugin connections end with `cancel`: wait for them. (If serving
    // failed they go on following their plugins, as before.)
    followers.close();
    if cancel.is_cancelled() {
        followers.wait().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(version: &str, endpoint: &str, resource: &str) -> RegisterRequest {
        RegisterRequest {
            version: version.into(),
            endpoint: endpoint.into(),
            resource_name: resource.into(),
            options: None,
        }
    }

    #[test]
    fn registrations_are_checked_as_upstream() {
        assert!(check(&req("v1beta1", "gpu.sock", "example.com/gpu")).is_ok());
        assert!(check(&req("v1beta1", "gpu.sock", "nvidia.com/gpu.shared")).is_ok());
        for (r, want) in [
            (req("v1alpha", "gpu.sock", "example.com/gpu"), "version"),
            (req("v1beta1", "", "example.com/gpu"), "endpoint"),
            (req("v1beta1", "../x.sock", "example.com/gpu"), "endpoint"),
            (
                req("v1beta1", "kubelet.sock", "example.com/gpu"),
                "endpoint",
            ),
            (req("v1beta1", "gpu.sock", "gpu"), "domain-prefixed"),
            (req("v1beta1", "gpu.sock", "kubernetes.io/gpu"), "native"),
            (req("v1beta1", "gpu.sock", "x.kubernetes.io/gpu"), "native"),
            (req("v1beta1", "gpu.sock", "Example.com/gpu"), "subdomain"),
            (req("v1beta1", "gpu.sock", "example.com/-gpu"), "qualified"),
            (req("v1beta1", "gpu.sock", "example.com/"), "qualified"),
        ] {
            let e = check(&r).unwrap_err().to_string();
            assert!(e.contains(want), "{r:?}: {e}");
        }
        assert_eq!(
            check(&req("v1alpha", "gpu.sock", "example.com/gpu")).unwrap_err(),
            RegistrationError::Version("v1alpha".into())
        );
        assert_eq!(
            valid_resource_name("gpu").unwrap_err().to_string(),
            "invalid extended resource name \"gpu\": it must be domain-prefixed (vendor.example/resource)"
        );
    }
}
