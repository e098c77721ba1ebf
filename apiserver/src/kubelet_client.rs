//! The API server's side of a remote node's kubelet: [`NodeStreams`] over the kubelet's HTTPS
//! port (`status.daemonEndpoints.kubeletEndpoint.Port` at the node's `InternalIP`), as
//! kube-apiserver reaches kubelets.
//!
//! - TLS both ways: the kubelet's serving certificate must chain to the cluster CA and name
//!   the address dialled; the API server presents its own client certificate
//!   (`kube-apiserver-kubelet-client` in `system:masters`, issued at start).
//! - Plain requests (`nodes/NAME/proxy/PATH`) and logs (`/containerLogs/NS/POD/CONTAINER`, a
//!   streamed body while following) are HTTP/1.1.
//! - exec and attach are websocket `v5.channel.k8s.io` (`/exec/NS/POD/CONTAINER?command=...`,
//!   `/attach/...`): stdin 0, stdout 1, stderr 2, the final `Status` 3, resize 4, and
//!   `0xff 0` to close stdin.
//! - port-forward is websocket `portforward.k8s.io` (`/portForward/NS/POD?ports=N`): data on
//!   channel 0, errors on 1, each opened by the port (2 bytes, little endian).
//!
//! The kubelet end is `k1s_kubelet::port`.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use k1s_api::client::ClientError;
use k1s_api::http_client::{TlsSettings, client_tls_config};
use k1s_api::streams::{
    ByteStream, Duplex, LogOptions, NodeStreams, ProxyResponse, StreamIo, StreamOptions,
};
use rustls::pki_types::ServerName;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

pub use k1s_streaming::peer::{KUBELET_CLIENT_GROUP, KUBELET_CLIENT_USER};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Limit for a plain request's whole answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// Limit for a plain answer's body.
const MAX_BODY: usize = 64 << 20;

/// How the API server dials kubelets: the cluster CA and its client identity.
#[derive(Clone)]
pub struct KubeletDialer {
    tls: Arc<rustls::ClientConfig>,
}

impl KubeletDialer {
    /// A dialer trusting `ca_pem` and presenting `cert_pem`/`key_pem`.
    pub fn new(
        ca_pem: &str,
        cert_pem: &str,
        key_pem: &str,
    ) -> Result<Self, k1s_api::http_client::HttpClientError> {
        let settings = TlsSettings {
            ca_pem: Some(ca_pem.as_bytes().to_vec()),
            client_cert_pem: Some(cert_pem.as_bytes().to_vec()),
            client_key_pem: Some(key_pem.as_bytes().to_vec()),
            ..Default::default()
        };
        Ok(Self {
            tls: Arc::new(client_tls_config(&settings, true)?),
        })
    }

    /// The kubelet of `node` (a Node object), or why it cannot be reached.
    pub fn kubelet(&self, node: &Value) -> Result<Arc<dyn NodeStreams>, NoKubelet> {
        let name = node["metadata"]["name"].as_str().unwrap_or_default();
        let port = node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
            .as_u64()
            .and_then(|p| u16::try_from(p).ok())
            .filter(|p| *p > 0)
            .ok_or_else(|| NoKubelet::Port {
                node: name.to_owned(),
            })?;
        let addresses = node["status"]["addresses"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        let address = ["InternalIP", "ExternalIP"]
            .iter()
            .find_map(|kind| {
                addresses
                    .iter()
                    .filter(|a| a["type"] == *kind)
                    .find_map(|a| a["address"].as_str()?.parse::<IpAddr>().ok())
            })
            .ok_or_else(|| NoKubelet::Address {
                node: name.to_owned(),
            })?;
        Ok(Arc::new(RemoteKubelet {
            node: name.to_owned(),
            address,
            port,
            tls: self.tls.clone(),
        }))
    }
}

/// Why a node's kubelet cannot be reached: its status lacks what dialling needs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoKubelet {
    #[error("node {node:?} has no kubelet port in its status")]
    Port { node: String },
    #[error("node {node:?} has no InternalIP address in its status")]
    Address { node: String },
}

/// One remote kubelet.
struct RemoteKubelet {
    node: String,
    address: IpAddr,
    port: u16,
    tls: Arc<rustls::ClientConfig>,
}

fn unreachable(node: &str, e: impl std::fmt::Display) -> ClientError {
    ClientError {
        code: 502,
        reason: "BadGateway".into(),
        message: format!("error dialing the kubelet of node {node}: {e}"),
    }
}

/// The error of a kubelet's non-2xx answer: its `Status` message, or its text.
fn answer_error(code: u16, body: &[u8]) -> ClientError {
    let message = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| String::from_utf8_lossy(body).trim().to_owned());
    ClientError {
        code,
        reason: match code {
            400 => "BadRequest",
            403 => "Forbidden",
            404 => "NotFound",
            _ => "InternalError",
        }
        .into(),
        message,
    }
}

fn pod_path(kind: &str, pod: &Value) -> String {
    let enc = |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    format!(
        "/{kind}/{}/{}",
        enc(pod["metadata"]["namespace"].as_str().unwrap_or("default")),
        enc(pod["metadata"]["name"].as_str().unwrap_or_default()),
    )
}

fn encode_query(pairs: &[(&str, String)]) -> String {
    let mut q = form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        q.append_pair(k, v);
    }
    q.finish()
}

/// `/KIND/NS/POD/CONTAINER?QUERY`.
fn container_path(kind: &str, pod: &Value, container: &str, pairs: &[(&str, String)]) -> String {
    format!(
        "{}/{}?{}",
        pod_path(kind, pod),
        form_urlencoded::byte_serialize(container.as_bytes()).collect::<String>(),
        encode_query(pairs)
    )
}

impl RemoteKubelet {
    async fn connect(&self) -> Result<TlsStream<TcpStream>, ClientError> {
        let dial = async {
            let tcp = TcpStream::connect((self.address, self.port)).await?;
            tcp.set_nodelay(true)?;
            tokio_rustls::TlsConnector::from(self.tls.clone())
                .connect(ServerName::IpAddress(self.address.into()), tcp)
                .await
        };
        match tokio::time::timeout(CONNECT_TIMEOUT, dial).await {
            Ok(Ok(s)) => Ok(s),
            Ok(Err(e)) => Err(unreachable(&self.node, e)),
            Err(_) => Err(unreachable(&self.node, "timed out")),
        }
    }

    /// `method path_and_query` (no body) over a new connection; the answer's body streams.
    async fn request(
        &self,
        method: &str,
        path_and_query: &str,
    ) -> Result<hyper::Response<hyper::body::Incoming>, ClientError> {
        let io = TokioIo::new(self.connect().await?);
        let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
            .await
            .map_err(|e| unreachable(&self.node, e))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let req = hyper::Request::builder()
            .method(method)
            .uri(path_and_query)
            .header(
                http::header::HOST,
                format!("{}:{}", self.address, self.port),
            )
            .body(Empty::<Bytes>::new())
            .map_err(|e| unreachable(&self.node, e))?;
        sender
            .send_request(req)
            .await
            .map_err(|e| unreachable(&self.node, e))
    }

    /// Opens a websocket to `path_and_query` offering `protocol`.
    async fn websocket(
        &self,
        path_and_query: &str,
        protocol: &'static str,
    ) -> Result<WebSocketStream<TlsStream<TcpStream>>, ClientError> {
        let tls = self.connect().await?;
        let url = format!("wss://{}:{}{path_and_query}", self.address, self.port);
        let mut req = url
            .into_client_request()
            .map_err(|e| unreachable(&self.node, e))?;
        req.headers_mut().insert(
            "Sec-WebSocket-Protocol",
            http::HeaderValue::from_static(protocol),
        );
        use tokio_tungstenite::tungstenite::Error;
        match tokio_tungstenite::client_async(req, tls).await {
            Ok((ws, _)) => Ok(ws),
            Err(Error::Http(resp)) => Err(answer_error(
                resp.status().as_u16(),
                resp.body().as_deref().unwrap_or_default(),
            )),
            Err(e) => Err(unreachable(&self.node, e)),
        }
    }

    /// exec or attach over `v5.channel.k8s.io`.
    async fn remote_command(
        &self,
        kind: &str,
        pod: &Value,
        options: &StreamOptions,
        io: StreamIo,
    ) -> Result<i32, ClientError> {
        let container = options.container.clone().unwrap_or_default();
        let mut pairs: Vec<(&str, String)> = options
            .command
            .iter()
            .map(|c| ("command", c.clone()))
            .collect();
        for (k, on) in [
            ("stdin", options.stdin),
            ("stdout", options.stdout),
            ("stderr", options.stderr),
            ("tty", options.tty),
        ] {
            if on {
                pairs.push((k, "true".into()));
            }
        }
        let path = container_path(kind, pod, &container, &pairs);
        let ws = self.websocket(&path, "v5.channel.k8s.io").await?;
        let (mut sink, mut source) = ws.split();
        let StreamIo {
            stdin,
            stdout,
            stderr,
            resize,
        } = io;
        let upload = async move {
            let (mut stdin, mut resize) = (stdin, resize);
            loop {
                let up = tokio::select! {
                    d = next(&mut stdin) => Up::Stdin(d),
                    s = next(&mut resize) => Up::Resize(s),
                };
                let msg = match up {
                    Up::Stdin(Some(data)) => {
                        let mut m = Vec::with_capacity(data.len() + 1);
                        m.push(0);
                        m.extend_from_slice(&data);
                        m
                    }
                    // EOF from the client: close the kubelet's stdin (v5).
                    Up::Stdin(None) => {
                        stdin = None;
                        vec![0xff, 0]
                    }
                    Up::Resize(Some(size)) => {
                        let mut m = vec![4];
                        m.extend(serde_json::to_vec(&size).unwrap_or_default());
                        m
                    }
                    Up::Resize(None) => {
                        resize = None;
                        continue;
                    }
                };
                if sink.send(Message::binary(msg)).await.is_err() {
                    return;
                }
            }
        };
        let download = async move {
            let mut status = None;
            while let Some(Ok(msg)) = source.next().await {
                let data = match msg {
                    Message::Binary(b) if !b.is_empty() => b,
                    Message::Close(_) => break,
                    _ => continue,
                };
                let out = match data[0] {
                    1 => stdout.as_ref(),
                    2 => stderr.as_ref(),
                    3 => {
                        status = serde_json::from_slice::<Value>(&data[1..]).ok();
                        continue;
                    }
                    _ => continue,
                };
                if let Some(out) = out
                    && out.send(data[1..].to_vec()).await.is_err()
                {
                    // The client went away.
                    return None;
                }
            }
            status
        };
        // The upload ends first only when the connection broke: the download ends then too.
        tokio::pin!(download);
        let status = tokio::select! {
            status = &mut download => status,
            () = upload => download.await,
        };
        match status {
            None if kind == "attach" => Ok(0),
            None => Err(ClientError {
                code: 502,
                reason: "BadGateway".into(),
                message: format!(
                    "the kubelet of node {} ended the session without a status",
                    self.node
                ),
            }),
            Some(s) => exit_code(&s),
        }
    }
}

/// What the client sent next.
enum Up {
    Stdin(Option<Vec<u8>>),
    Resize(Option<k1s_api::streams::TerminalSize>),
}

/// The next item of `rx`; never, when there is no `rx`.
async fn next<T>(rx: &mut Option<tokio::sync::mpsc::Receiver<T>>) -> Option<T> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// The exit code a remote command's final `Status` carries (an `Err` when it never ran).
fn exit_code(status: &Value) -> Result<i32, ClientError> {
    if status["status"] == "Success" {
        return Ok(0);
    }
    if status["reason"] == "NonZeroExitCode"
        && let Some(code) = status["details"]["causes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["reason"] == "ExitCode")
            .find_map(|c| c["message"].as_str()?.parse::<i32>().ok())
    {
        return Ok(code);
    }
    Err(ClientError {
        code: 500,
        reason: "InternalError".into(),
        message: status["message"].as_str().unwrap_or("unknown error").into(),
    })
}

#[async_trait::async_trait]
impl NodeStreams for RemoteKubelet {
    fn node_name(&self) -> &str {
        &self.node
    }

    async fn logs(&self, pod: &Value, options: &LogOptions) -> Result<ByteStream, ClientError> {
        let mut pairs: Vec<(&str, String)> = Vec::new();
        if options.follow {
            pairs.push(("follow", "true".into()));
        }
        if options.previous {
            pairs.push(("previous", "true".into()));
        }
        if options.timestamps {
            pairs.push(("timestamps", "true".into()));
        }
        for (k, v) in [
            ("tailLines", options.tail_lines),
            ("sinceSeconds", options.since_seconds),
            ("limitBytes", options.limit_bytes),
        ] {
            if let Some(v) = v {
                pairs.push((k, v.to_string()));
            }
        }
        if let Some(t) = &options.since_time {
            pairs.push(("sinceTime", t.clone()));
        }
        let container = options.container.clone().unwrap_or_default();
        let path = container_path("containerLogs", pod, &container, &pairs);
        let resp = self.request("GET", &path).await?;
        let code = resp.status().as_u16();
        if !(200..300).contains(&code) {
            let body = collect(resp.into_body()).await.unwrap_or_default();
            return Err(answer_error(code, &body));
        }
        let body = resp.into_body().into_data_stream();
        Ok(Box::pin(body.filter_map(|chunk| async move {
            chunk.ok().filter(|c| !c.is_empty()).map(|c| c.to_vec())
        })))
    }

    async fn exec(
        &self,
        pod: &Value,
        options: &StreamOptions,
        io: StreamIo,
    ) -> Result<i32, ClientError> {
        self.remote_command("exec", pod, options, io).await
    }

    async fn attach(
        &self,
        pod: &Value,
        options: &StreamOptions,
        io: StreamIo,
    ) -> Result<i32, ClientError> {
        self.remote_command("attach", pod, options, io).await
    }

    async fn port_forward(&self, pod: &Value, port: u16) -> Result<Box<dyn Duplex>, ClientError> {
        let path = format!("{}?ports={port}", pod_path("portForward", pod));
        let ws = self.websocket(&path, "portforward.k8s.io").await?;
        let (ours, theirs) = tokio::io::duplex(256 * 1024);
        let node = self.node.clone();
        tokio::spawn(async move {
            let (mut sink, mut source) = ws.split();
            let (mut rd, mut wr) = tokio::io::split(theirs);
            let upload = async {
                let mut buf = vec![0u8; 32 * 1024];
                loop {
                    match rd.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            let mut m = Vec::with_capacity(n + 1);
                            m.push(0);
                            m.extend_from_slice(&buf[..n]);
                            if sink.send(Message::binary(m)).await.is_err() {
                                break;
                            }
                        }
                    }
                }
                let _ = sink.close().await;
            };
            let download = async {
                // The first message of each channel is its port.
                let mut opened = [false; 2];
                while let Some(Ok(msg)) = source.next().await {
                    let data = match msg {
                        Message::Binary(b) if !b.is_empty() => b,
                        Message::Close(_) => break,
                        _ => continue,
                    };
                    let ch = usize::from(data[0]);
                    if ch > 1 {
                        continue;
                    }
                    if !opened[ch] {
                        opened[ch] = true;
                        continue;
                    }
                    if ch == 1 {
                        tracing::warn!(
                            node = %node,
                            error = %String::from_utf8_lossy(&data[1..]),
                            "port-forward through the kubelet failed"
                        );
                        break;
                    }
                    if wr.write_all(&data[1..]).await.is_err() {
                        break;
                    }
                }
                let _ = wr.shutdown().await;
            };
            // After the client's side ends (the websocket is closed), what the kubelet still
            // sends is delivered until it closes too.
            tokio::pin!(download);
            tokio::select! {
                () = &mut download => {}
                () = upload => download.await,
            }
        });
        Ok(Box::new(ours))
    }

    async fn proxy(
        &self,
        method: &str,
        path: &str,
        query: Option<&str>,
    ) -> Result<ProxyResponse, ClientError> {
        let path_and_query = match query {
            Some(q) if !q.is_empty() => format!("{path}?{q}"),
            _ => path.to_owned(),
        };
        let answer = async {
            let resp = self.request(method, &path_and_query).await?;
            let status = resp.status().as_u16();
            let content_type = resp
                .headers()
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("text/plain")
                .to_owned();
            let body = collect(resp.into_body())
                .await
                .map_err(|e| unreachable(&self.node, e))?;
            Ok(ProxyResponse {
                status,
                content_type,
                body,
            })
        };
        tokio::time::timeout(REQUEST_TIMEOUT, answer)
            .await
            .unwrap_or_else(|_| Err(unreachable(&self.node, "no answer in time")))
    }
}

/// A whole body, up to [`MAX_BODY`].
async fn collect(
    body: hyper::body::Incoming,
) -> Result<Vec<u8>, Box<dyn std::error::Error + Send + Sync>> {
    let limited = http_body_util::Limited::new(body, MAX_BODY);
    limited.collect().await.map(|b| b.to_bytes().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn exit_codes_from_status() {
        assert_eq!(exit_code(&json!({"status": "Success"})).unwrap(), 0);
        let failed = json!({"status": "Failure", "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": "3"}]}});
        assert_eq!(exit_code(&failed).unwrap(), 3);
        let never = json!({"status": "Failure", "reason": "InternalError",
            "message": "executable file not found"});
        assert!(exit_code(&never).unwrap_err().message.contains("not found"));
    }

    /// A CA and a client certificate of the API server's kubelet identity, PEM.
    fn test_identity() -> (String, String, String) {
        let dir = tempfile::tempdir().unwrap();
        let pki = crate::pki::Pki::load_or_create(&crate::pki::PkiConfig {
            dir: dir.path().join("tls"),
            hostname: "localhost".into(),
            node_ips: vec![std::net::IpAddr::from([127, 0, 0, 1])],
            tls_sans: Vec::new(),
        })
        .unwrap();
        let (cert, key) = pki
            .issue_client_cert(
                KUBELET_CLIENT_USER,
                Some(KUBELET_CLIENT_GROUP),
                jiff::SignedDuration::from_hours(24),
                None,
            )
            .unwrap();
        (pki.ca.cert_pem, cert, key.unwrap())
    }

    #[test]
    fn a_node_without_port_or_address_is_unreachable() {
        let (ca, cert, key) = test_identity();
        let dialer = KubeletDialer::new(&ca, &cert, &key).unwrap();
        let node = json!({"metadata": {"name": "n"}, "status": {
            "addresses": [{"type": "Hostname", "address": "n"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}}}});
        let e = dialer.kubelet(&node).err().unwrap();
        assert_eq!(e, NoKubelet::Address { node: "n".into() });
        assert_eq!(
            e.to_string(),
            "node \"n\" has no InternalIP address in its status"
        );
        let node = json!({"metadata": {"name": "n"}, "status": {
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]}});
        let e = dialer.kubelet(&node).err().unwrap();
        assert_eq!(e, NoKubelet::Port { node: "n".into() });
        assert_eq!(
            e.to_string(),
            "node \"n\" has no kubelet port in its status"
        );
        let node = json!({"metadata": {"name": "n"}, "status": {
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}}}});
        assert_eq!(dialer.kubelet(&node).unwrap().node_name(), "n");
    }
}
