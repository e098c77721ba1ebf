//! Dialing a CSI (or registration) socket: gRPC over HTTP/2 on a unix stream, as every CSI
//! plugin serves it. Owns endpoint parsing (`unix:///path` or a bare path) and the channel.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};

/// Why a socket could not be dialed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("CSI endpoint {0:?} is not a unix socket path (want unix:///path or /path)")]
    BadEndpoint(String),
    #[error("connecting to {path}: {source}")]
    Connect {
        path: PathBuf,
        #[source]
        source: tonic::transport::Error,
    },
}

/// The socket path of `endpoint`: `unix:///run/csi.sock`, `unix:/run/csi.sock` or a bare
/// absolute path.
pub fn socket_path(endpoint: &str) -> Result<PathBuf, ConnectError> {
    let path = endpoint
        .strip_prefix("unix://")
        .or_else(|| endpoint.strip_prefix("unix:"))
        .unwrap_or(endpoint);
    if path.starts_with('/') && path.len() > 1 {
        Ok(PathBuf::from(path))
    } else {
        Err(ConnectError::BadEndpoint(endpoint.to_string()))
    }
}

/// Connects to the gRPC server on the unix socket at `path`. The channel reconnects by
/// itself if the plugin restarts on the same socket.
pub async fn connect(path: &Path, timeout: Duration) -> Result<Channel, ConnectError> {
    let socket = path.to_path_buf();
    // The URI is required by the HTTP layer but never resolved: the connector dials `socket`.
    let endpoint = Endpoint::from_static("http://csi.invalid")
        .connect_timeout(timeout)
        .timeout(timeout);
    endpoint
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let socket = socket.clone();
            async move { UnixStream::connect(socket).await.map(TokioIo::new) }
        }))
        .await
        .map_err(|source| ConnectError::Connect {
            path: path.to_path_buf(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse_as_unix_paths() {
        assert_eq!(
            socket_path("unix:///run/k1s/csi.sock").unwrap(),
            PathBuf::from("/run/k1s/csi.sock")
        );
        assert_eq!(
            socket_path("unix:/run/csi.sock").unwrap(),
            PathBuf::from("/run/csi.sock")
        );
        assert_eq!(socket_path("/a.sock").unwrap(), PathBuf::from("/a.sock"));
        for bad in ["tcp://1.2.3.4:10000", "relative.sock", "unix://", ""] {
            assert!(socket_path(bad).is_err(), "{bad}");
        }
    }
}
