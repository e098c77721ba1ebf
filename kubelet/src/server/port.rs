//! The kubelet's HTTPS port (10250), served for an agent's kubelet: what the API server
//! reaches through its kubelet client, on upstream's kubelet paths. The sessions speak the
//! streaming protocols of [`k1s_streaming`] (websocket and SPDY) over the kubelet's
//! [`NodeStreams`].
//!
//! | path | answer |
//! |---|---|
//! | `/exec/NS/POD/CONTAINER?command=...`, `/attach/NS/POD/CONTAINER` | exec/attach session (upgrade) |
//! | `/portForward/NS/POD?ports=N` | port-forward session (upgrade) |
//! | `/containerLogs/NS/POD/CONTAINER` | the log, streamed while `follow=true` |
//! | anything else | [`NodeStreams::proxy`]: `/healthz`, `/pods`, `/stats/summary`, ... |
//!
//! Authentication is a client certificate chaining to the cluster CA (none or a foreign one:
//! 401). Authorization: only the API server's identity
//! ([`KUBELET_CLIENT_USER`]) and `system:masters` (403 otherwise;
//! upstream's kubelet asks the API server with a SubjectAccessReview instead).

use std::sync::Arc;

use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use k1s_api::client::{Client, ClientError, ResourceRef};
use k1s_api::streams::{LogOptions, NodeStreams, StreamOptions};
use rustls::ServerConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
use rustls::server::WebPkiClientVerifier;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use k1s_streaming::body::{self, Body};
use k1s_streaming::peer::{ClientCertCheck, KUBELET_CLIENT_GROUP, KUBELET_CLIENT_USER, PeerCert};
use k1s_streaming::{self as streaming, Kind, Refusal};

/// Why the kubelet's port cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum KubeletServerError {
    #[error("the {what} is not valid PEM: {reason}")]
    Pem { what: &'static str, reason: String },
    #[error("TLS configuration: {0}")]
    Tls(String),
}

/// The TLS side of the kubelet's port: the cluster CA (for client certificates) and the
/// kubelet's serving certificate and key, all PEM.
pub struct KubeletTls {
    pub config: Arc<ServerConfig>,
    pub clients: ClientCertCheck,
}

impl KubeletTls {
    pub fn new(ca_pem: &str, cert_pem: &str, key_pem: &str) -> Result<Self, KubeletServerError> {
        let pem = |what, reason: String| KubeletServerError::Pem { what, reason };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for ca in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            let ca = ca.map_err(|e| pem("cluster CA", e.to_string()))?;
            roots
                .add(ca)
                .map_err(|e| pem("cluster CA", e.to_string()))?;
        }
        let strict = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .allow_unauthenticated()
            .build()
            .map_err(|e| KubeletServerError::Tls(e.to_string()))?;
        let clients = ClientCertCheck::new(strict);
        let chain = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| pem("serving certificate", e.to_string()))?;
        let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
            .map_err(|e| pem("serving key", e.to_string()))?;
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| KubeletServerError::Tls(e.to_string()))?
            .with_client_cert_verifier(clients.deferred_verifier())
            .with_single_cert(chain, key)
            .map_err(|e| KubeletServerError::Tls(e.to_string()))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            config: Arc::new(config),
            clients,
        })
    }
}

/// What a request to the kubelet's port is served with.
pub struct KubeletServer {
    pub streams: Arc<dyn NodeStreams>,
    /// Reads the pods a request names.
    pub client: Arc<dyn Client>,
}

/// How long [`serve`] waits for open connections once cancelled.
const SHUTDOWN_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Serves `server` on `listener` until `cancel`; sessions in progress end with it. Each
/// connection is a task on one tracker: on `cancel` the listener stops, every connection
/// shuts down gracefully (an idle one closes, a request in flight gets its answer first), and
/// `serve` returns once they have all ended, or after [`SHUTDOWN_WAIT`].
pub async fn serve(
    listener: TcpListener,
    tls: KubeletTls,
    server: Arc<KubeletServer>,
    cancel: CancellationToken,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.config.clone());
    let clients = Arc::new(tls.clients);
    let connections = TaskTracker::new();
    loop {
        let (tcp, peer) = tokio::select! {
            () = cancel.cancelled() => break,
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "kubelet port: accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let (acceptor, clients, server, cancel) = (
            acceptor.clone(),
            clients.clone(),
            server.clone(),
            cancel.clone(),
        );
        connections.spawn(async move {
            let handshake =
                tokio::time::timeout(std::time::Duration::from_secs(10), acceptor.accept(tcp));
            let stream = match handshake.await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "kubelet port: TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "kubelet port: no TLS handshake in 10 s");
                    return;
                }
            };
            let peer_cert = clients.check(stream.get_ref().1.peer_certificates());
            let sessions_cancel = cancel.clone();
            let service = hyper::service::service_fn(move |req| {
                let (server, peer_cert, cancel) =
                    (server.clone(), peer_cert.clone(), sessions_cancel.clone());
                async move {
                    Ok::<_, std::convert::Infallible>(
                        handle(&server, &peer_cert, req, cancel)
                            .await
                            .unwrap_or_else(Refusal::into_response),
                    )
                }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades();
            tokio::pin!(conn);
            let ended = tokio::select! {
                r = conn.as_mut() => r,
                () = cancel.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    conn.await
                }
            };
            if let Err(e) = ended {
                tracing::debug!(%peer, error = %e, "kubelet port: connection ended");
            }
        });
    }
    connections.close();
    if tokio::time::timeout(SHUTDOWN_WAIT, connections.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            open = connections.len(),
            "kubelet port: connections still open after the shutdown wait"
        );
    }
}

/// May the holder of a certificate for `name` in `groups` use the kubelet's API?
fn authorized(name: &str, groups: &[String]) -> bool {
    name == KUBELET_CLIENT_USER || groups.iter().any(|g| g == KUBELET_CLIENT_GROUP)
}

async fn handle(
    server: &KubeletServer,
    peer: &PeerCert,
    mut req: Request<Incoming>,
    cancel: CancellationToken,
) -> Result<Response<Body>, Refusal> {
    let (name, groups) = match peer {
        PeerCert::Valid { name, groups, .. } => (name, groups),
        _ => return Err(Refusal::new(401, "Unauthorized", "Unauthorized")),
    };
    let path = req.uri().path().to_owned();
    if !authorized(name, groups) {
        return Err(Refusal::new(
            403,
            "Forbidden",
            format!("Forbidden (user={name}, verb=get, resource=nodes, subresource=proxy)"),
        ));
    }
    let query = req.uri().query().map(str::to_owned);
    let mut pairs = streaming::query_pairs(query.as_deref());
    let segments: Vec<String> = path
        .trim_matches('/')
        .split('/')
        .map(|s| {
            form_urlencoded::parse(format!("x={s}").as_bytes())
                .next()
                .map(|(_, v)| v.into_owned())
                .unwrap_or_default()
        })
        .collect();
    let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
    let method = req.method().clone();
    match segments.as_slice() {
        [kind @ ("exec" | "attach"), ns, pod, container] => {
            let kind = if *kind == "exec" {
                Kind::Exec
            } else {
                Kind::Attach
            };
            let pod = server.pod(ns, pod).await?;
            pairs.retain(|(k, _)| k != "container");
            pairs.push(("container".into(), (*container).into()));
            let name = pod["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let options = streaming::stream_options(kind, &pairs, &pod, &name)?;
            if let Some(c) = &options.container
                && !streaming::container_running(&pod, c)
            {
                return Err(Refusal::bad_request(format!("container not found ({c:?})")));
            }
            let upgrade = req.extensions_mut().remove::<hyper::upgrade::OnUpgrade>();
            let request = streaming::Request {
                kind,
                pod,
                kubelet: server.streams.clone(),
                options,
                ports: Vec::new(),
                cancel,
            };
            streaming::start(request, req.headers(), upgrade)
        }
        ["portForward", ns, pod] => {
            let pod = server.pod(ns, pod).await?;
            let ports = streaming::query_ports(&pairs)?;
            let upgrade = req.extensions_mut().remove::<hyper::upgrade::OnUpgrade>();
            let request = streaming::Request {
                kind: Kind::PortForward,
                pod,
                kubelet: server.streams.clone(),
                options: StreamOptions::default(),
                ports,
                cancel,
            };
            streaming::start(request, req.headers(), upgrade)
        }
        ["containerLogs", ns, pod, container] if method == Method::GET => {
            let pod = server.pod(ns, pod).await?;
            let q = pairs.into_iter().collect();
            let options = LogOptions {
                container: Some((*container).to_owned()),
                ..LogOptions::from_query(&q).map_err(|e| Refusal::bad_request(e.to_string()))?
            };
            let stream = server
                .streams
                .logs(&pod, &options)
                .await
                .map_err(Refusal::from_kubelet)?;
            use futures::StreamExt;
            let mut resp = Response::new(body::streamed(stream.map(bytes::Bytes::from)));
            resp.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("text/plain"),
            );
            Ok(resp)
        }
        _ => {
            let answer = server
                .streams
                .proxy(method.as_str(), &path, query.as_deref())
                .await
                .map_err(Refusal::from_kubelet)?;
            Ok(body::respond(
                StatusCode::from_u16(answer.status).unwrap_or(StatusCode::BAD_GATEWAY),
                &answer.content_type,
                answer.body,
            ))
        }
    }
}

impl KubeletServer {
    /// The pod `ns/name`, if it is bound to this node.
    async fn pod(&self, ns: &str, name: &str) -> Result<Value, Refusal> {
        let r = ResourceRef::new("", "v1", "pods", Some(ns));
        let not_found = || {
            Refusal::new(
                404,
                "NotFound",
                format!("pod {ns}/{name} not found on this node"),
            )
        };
        match self.client.get(&r, name).await {
            Ok(p) if p["spec"]["nodeName"] == self.streams.node_name() => Ok(p),
            Ok(_) | Err(ClientError { code: 404, .. }) => Err(not_found()),
            Err(e) => Err(Refusal::from_kubelet(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_api_server_may_use_the_kubelet() {
        assert!(authorized(KUBELET_CLIENT_USER, &[]));
        assert!(authorized("admin", &[KUBELET_CLIENT_GROUP.to_owned()]));
        assert!(!authorized("system:node:n2", &["system:nodes".to_owned()]));
    }
}
