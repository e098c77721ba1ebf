//! Serving gRPC services on a unix socket, the way CSI plugins and the kubelet's plugin
//! registration talk: bind the socket (replacing a stale one a dead process left behind, but
//! never one a live server still answers on), serve tonic `Routes` until a
//! `CancellationToken` fires, let in-flight calls finish, and remove the socket.
//!
//! Any plugin k1s runs uses this: `k1s csi-hostpath`, its registrar, and test fixtures.
//! (Endpoint parsing is `connect::socket_path`, shared with the client side.)

use std::io;
use std::path::{Path, PathBuf};

use tokio::net::UnixListener;
use tokio_stream::wrappers::UnixListenerStream;
use tokio_util::sync::CancellationToken;
use tonic::service::Routes;

/// What can go wrong binding or serving a socket.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("socket {path}: another server is listening on it")]
    InUse { path: PathBuf },
    #[error("socket {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("serving on {path}: {source}")]
    Transport {
        path: PathBuf,
        #[source]
        source: tonic::transport::Error,
    },
}

/// A bound unix socket, ready to serve. Dropping it without serving removes the socket file.
#[derive(Debug)]
pub struct Socket {
    path: PathBuf,
    listener: Option<UnixListener>,
}

impl Socket {
    /// Binds `path`, creating its directory. A socket file nobody answers on is a leftover of a
    /// process that died and is replaced; one a server still accepts on is `InUse`.
    pub async fn bind(path: &Path) -> Result<Self, ServeError> {
        let io_err = |source| ServeError::Io {
            path: path.to_owned(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            tokio::fs::create_dir_all(dir).await.map_err(io_err)?;
        }
        match tokio::fs::symlink_metadata(path).await {
            Ok(_) => {
                if tokio::net::UnixStream::connect(path).await.is_ok() {
                    return Err(ServeError::InUse {
                        path: path.to_owned(),
                    });
                }
                tracing::info!(socket = %path.display(), "removing stale socket");
                tokio::fs::remove_file(path).await.map_err(io_err)?;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(e)),
        }
        let listener = UnixListener::bind(path).map_err(io_err)?;
        Ok(Self {
            path: path.to_owned(),
            listener: Some(listener),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Serves `routes` until `cancel` fires, then waits for in-flight calls and removes the
    /// socket file (also when serving fails).
    pub async fn serve(
        mut self,
        routes: Routes,
        cancel: CancellationToken,
    ) -> Result<(), ServeError> {
        let listener = self.listener.take().expect("a socket is served once");
        let incoming = UnixListenerStream::new(listener);
        tracing::debug!(socket = %self.path.display(), "serving");
        let result = tonic::transport::Server::builder()
            .add_routes(routes)
            .serve_with_incoming_shutdown(incoming, cancel.cancelled_owned())
            .await;
        result.map_err(|source| ServeError::Transport {
            path: self.path.clone(),
            source,
        })
        // `self` drops here and removes the socket.
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_file(&self.path)
            && e.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!(socket = %self.path.display(), error = %e, "removing socket");
        }
    }
}

/// Binds `path` and serves `routes` on it until `cancel` fires.
pub async fn serve(
    path: &Path,
    routes: Routes,
    cancel: CancellationToken,
) -> Result<(), ServeError> {
    Socket::bind(path).await?.serve(routes, cancel).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stale_socket_is_replaced_live_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/plugin.sock");
        // A socket file whose server is gone: std's listener is dropped without unlinking.
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        assert!(path.exists());

        let live = Socket::bind(&path).await.unwrap();
        match Socket::bind(&path).await {
            Err(ServeError::InUse { .. }) => {}
            other => panic!("expected InUse, got {other:?}"),
        }
        drop(live);
        assert!(!path.exists(), "dropping the socket removes the file");
    }

    #[tokio::test]
    async fn serve_stops_on_cancel_and_removes_the_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let cancel = CancellationToken::new();
        let socket = Socket::bind(&path).await.unwrap();
        let task = tokio::spawn(socket.serve(Routes::default(), cancel.clone()));
        tokio::net::UnixStream::connect(&path).await.unwrap();
        cancel.cancel();
        task.await.unwrap().unwrap();
        assert!(!path.exists());
    }
}
