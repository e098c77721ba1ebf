//! The HTTP implementation of [`Client`]: what agents, tools and benchmarks use to reach a
//! k1s (or any Kubernetes) API server from outside the server process.
//!
//! This module owns the wire side of the client: HTTPS with rustls (ring provider) and the
//! server CA pinned from PEM, client-certificate or bearer-token authentication, a connection
//! pool (hyper-util's pooled client over a small rustls connector; ALPN picks h2 or HTTP/1.1),
//! request encoding (paths, query parameters, `DeleteOptions`, patch content types), `Status`
//! bodies turned into [`ClientError`]s, and watch responses (one JSON event per line) turned
//! into a [`WatchStream`]. Kubeconfig parsing lives in [`crate::kubeconfig`].
//!
//! Errors follow the [`Client`] contract: an answer outside 2xx becomes a [`ClientError`] with
//! the `code`, `reason` and `message` of the server's `Status` (or of the HTTP status when the
//! body is not a `Status`); a request that did not get an answer is
//! [`ClientError::transport`] (code 0). A bad answer from the server is an error, never a panic.

use std::future::Future;
use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue, USER_AGENT};
use http::{Method, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client as PooledClient;
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::{Value, json};
use tokio::net::TcpStream;

use crate::client::{
    Client, ClientError, DeleteParams, ListParams, ObjectList, Patch, ResourceRef, Result,
    WatchEvent, WatchParams, WatchStream, WriteParams,
};
use crate::kubeconfig::{Kubeconfig, KubeconfigError};
use crate::server_pool::{LEARNED_SERVER_NAME, ServerPool, Target};
pub use crate::tls::TlsSettings;

/// Connection and timing options; [`Default`] suits most callers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpOptions {
    /// Limit for a TCP connect plus TLS handshake.
    pub connect_timeout: Duration,
    /// Limit for a whole request other than a watch (a watch is limited only until its
    /// response headers arrive; use [`WatchParams::timeout_seconds`] for the rest).
    pub request_timeout: Duration,
    /// Offer only HTTP/1.1 in ALPN (each concurrent request then takes its own connection).
    pub http1_only: bool,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(60),
            http1_only: false,
        }
    }
}

/// Why an [`HttpClient`] could not be built.
#[derive(Debug, thiserror::Error)]
pub enum HttpClientError {
    #[error("invalid server URL {url:?}: {reason}")]
    Url { url: String, reason: String },
    #[error("the {what} is not valid PEM: {source}")]
    Pem {
        what: &'static str,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("the {0} holds no certificate")]
    NoCertificate(&'static str),
    #[error("a client certificate needs its private key and a key its certificate")]
    HalfIdentity,
    #[error("no server CA given and no system CA bundle found (looked at {0})")]
    NoTrustAnchors(String),
    #[error("invalid server name {0:?} for TLS")]
    ServerName(String),
    #[error("the bearer token cannot be sent in a header")]
    Token,
    #[error("TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
    #[error(transparent)]
    Kubeconfig(#[from] KubeconfigError),
}

/// A [`Client`] over HTTPS. Cloning is cheap and shares the connection pool.
#[derive(Clone)]
pub struct HttpClient {
    inner: Arc<Inner>,
}

struct Inner {
    http: PooledClient<TlsConnector, Full<Bytes>>,
    /// `https://host:port` plus any path prefix of the server URL, without a trailing slash.
    base: String,
    authorization: Option<HeaderValue>,
    request_timeout: Duration,
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClient")
            .field("server", &self.inner.base)
            .finish_non_exhaustive()
    }
}

const USER_AGENT_VALUE: &str = concat!("k1s/", env!("CARGO_PKG_VERSION"));
/// A watch line longer than this is refused (upstream's default request body limit is 3 MiB;
/// objects in watch events are bounded the same way).
const MAX_WATCH_LINE: usize = 64 << 20;
/// Error bodies are quoted in messages up to this many bytes.
const MAX_QUOTED_BODY: usize = 512;

impl HttpClient {
    /// A client of `server_url` (`https://host[:port][/prefix]`) with default options.
    pub fn new(server_url: &str, tls: TlsSettings) -> std::result::Result<Self, HttpClientError> {
        Self::with_options(server_url, tls, HttpOptions::default())
    }

    /// A client of `server_url` with `options`.
    pub fn with_options(
        server_url: &str,
        tls: TlsSettings,
        options: HttpOptions,
    ) -> std::result::Result<Self, HttpClientError> {
        Self::build(server_url, tls, options, None)
    }

    /// A client of `server_url` that fails over to the servers of `pool` when the URL's server
    /// cannot be reached ([`ServerPool`]: the last server that answered is dialed first).
    pub fn with_failover(
        server_url: &str,
        tls: TlsSettings,
        options: HttpOptions,
        pool: Arc<ServerPool>,
    ) -> std::result::Result<Self, HttpClientError> {
        Self::build(server_url, tls, options, Some(pool))
    }

    fn build(
        server_url: &str,
        tls: TlsSettings,
        options: HttpOptions,
        pool: Option<Arc<ServerPool>>,
    ) -> std::result::Result<Self, HttpClientError> {
        let bad = |reason: &str| HttpClientError::Url {
            url: server_url.to_owned(),
            reason: reason.to_owned(),
        };
        let uri: Uri = server_url.parse().map_err(|_| bad("not a URL"))?;
        if uri.scheme_str() != Some("https") {
            return Err(bad("only https:// servers are supported"));
        }
        let host = uri
            .host()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| bad("no host"))?;
        if uri.query().is_some() {
            return Err(bad("a server URL has no query"));
        }
        let authority = uri.authority().ok_or_else(|| bad("no host"))?;
        if authority.as_str().contains('@') {
            return Err(bad("user information in the URL is not supported"));
        }
        let prefix = uri.path().trim_end_matches('/');
        let base = format!("https://{authority}{prefix}");

        let name = tls.server_name.clone().unwrap_or_else(|| {
            host.trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned()
        });
        let server_name =
            ServerName::try_from(name.clone()).map_err(|_| HttpClientError::ServerName(name))?;
        let config = client_tls_config(&tls, options.http1_only)?;
        let connector = TlsConnector {
            tls: tokio_rustls::TlsConnector::from(Arc::new(config)),
            server_name,
            learned_name: ServerName::try_from(LEARNED_SERVER_NAME)
                .map_err(|_| HttpClientError::ServerName(LEARNED_SERVER_NAME.into()))?,
            connect_timeout: options.connect_timeout,
            pool,
        };
        let http = PooledClient::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            .pool_idle_timeout(Duration::from_secs(90))
            // A server that vanishes without closing its connections (a host powered off, a
            // partition) is noticed by pings, as client-go does (30 s idle, 15 s to answer):
            // the streams on it fail and their retries dial again.
            .http2_keep_alive_interval(Duration::from_secs(30))
            .http2_keep_alive_timeout(Duration::from_secs(15))
            .http2_keep_alive_while_idle(true)
            // No `http2_adaptive_window`: with it, one of 100 concurrent requests on the
            // connection now and then never completed (the server had answered; `k1s bench
            // pods` timed out after 60 s in 2 of 3 runs); without it, 0 in 6.
            .build(connector);
        let authorization = match &tls.bearer_token {
            None => None,
            Some(t) => {
                let mut v = HeaderValue::from_str(&format!("Bearer {t}"))
                    .map_err(|_| HttpClientError::Token)?;
                v.set_sensitive(true);
                Some(v)
            }
        };
        Ok(Self {
            inner: Arc::new(Inner {
                http,
                base,
                authorization,
                request_timeout: options.request_timeout,
            }),
        })
    }

    /// A client for the current context of the kubeconfig at `path`.
    pub fn from_kubeconfig(path: impl AsRef<Path>) -> std::result::Result<Self, HttpClientError> {
        Self::from_kubeconfig_with(path, None, HttpOptions::default())
    }

    /// A client for `context` (or the current context) of the kubeconfig at `path`.
    pub fn from_kubeconfig_with(
        path: impl AsRef<Path>,
        context: Option<&str>,
        options: HttpOptions,
    ) -> std::result::Result<Self, HttpClientError> {
        let resolved = Kubeconfig::load(path.as_ref())?.resolve(context)?;
        Self::with_options(&resolved.server, resolved.tls, options)
    }

    /// The server URL requests go to (scheme, authority and path prefix).
    pub fn server_url(&self) -> &str {
        &self.inner.base
    }

    /// GET of any path (with its query), decoded as JSON: `/version`, `/api`, ...
    pub async fn get_path(&self, path_and_query: &str) -> Result<Value> {
        self.json(Method::GET, path_and_query.to_owned(), None)
            .await
    }

    /// GET of any path, the body undecoded (benchmarks time the transfer apart from decoding).
    pub async fn get_bytes(&self, path_and_query: &str) -> Result<Bytes> {
        self.bytes(Method::GET, path_and_query, None).await
    }

    fn request(
        &self,
        method: Method,
        path_and_query: &str,
        body: Option<(&'static str, Vec<u8>)>,
    ) -> Result<Request<Full<Bytes>>> {
        let uri: Uri = format!("{}{path_and_query}", self.inner.base)
            .parse()
            .map_err(|e| ClientError {
                code: 0,
                reason: "BadRequest".into(),
                message: format!("cannot make a URL of {path_and_query:?}: {e}"),
            })?;
        let mut b = Request::builder()
            .method(method)
            .uri(uri)
            .header(ACCEPT, "application/json")
            .header(USER_AGENT, USER_AGENT_VALUE);
        if let Some(auth) = &self.inner.authorization {
            b = b.header(AUTHORIZATION, auth.clone());
        }
        let body = match body {
            Some((content_type, bytes)) => {
                b = b.header(CONTENT_TYPE, content_type);
                Full::new(Bytes::from(bytes))
            }
            None => Full::new(Bytes::new()),
        };
        b.body(body).map_err(|e| ClientError {
            code: 0,
            reason: "BadRequest".into(),
            message: e.to_string(),
        })
    }

    /// Sends a request and reads the whole answer: the JSON body of a 2xx, else the Status.
    async fn json(
        &self,
        method: Method,
        path_and_query: String,
        body: Option<(&'static str, Vec<u8>)>,
    ) -> Result<Value> {
        let bytes = self.bytes(method, &path_and_query, body).await?;
        serde_json::from_slice(&bytes).map_err(|e| bad_response(format!("{e}: {}", quote(&bytes))))
    }

    /// Sends a request and reads the whole answer: the body of a 2xx, else the Status.
    async fn bytes(
        &self,
        method: Method,
        path_and_query: &str,
        body: Option<(&'static str, Vec<u8>)>,
    ) -> Result<Bytes> {
        let req = self.request(method, path_and_query, body)?;
        let exchange = async {
            let resp = self
                .inner
                .http
                .request(req)
                .await
                .map_err(|e| transport_error(&e))?;
            let status = resp.status();
            let bytes = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| transport_error(&e))?
                .to_bytes();
            Ok::<_, ClientError>((status, bytes))
        };
        let (status, bytes) = tokio::time::timeout(self.inner.request_timeout, exchange)
            .await
            .map_err(|_| {
                ClientError::transport(format!(
                    "no complete answer to {path_and_query} within {:?}",
                    self.inner.request_timeout
                ))
            })??;
        if !status.is_success() {
            return Err(status_error(status.as_u16(), &bytes));
        }
        Ok(bytes)
    }
}

/// The `Status` in a non-2xx body as a [`ClientError`]; a body that is not a `Status` gives the
/// HTTP status with a canonical reason.
pub fn status_error(http_code: u16, body: &[u8]) -> ClientError {
    match serde_json::from_slice::<Value>(body) {
        Ok(v) if v.get("kind").and_then(Value::as_str) == Some("Status") => {
            status_object_error(&v, http_code)
        }
        _ => ClientError {
            code: http_code,
            reason: reason_of(http_code).into(),
            message: if body.is_empty() {
                StatusCode::from_u16(http_code)
                    .ok()
                    .and_then(|s| s.canonical_reason())
                    .unwrap_or("no message")
                    .to_owned()
            } else {
                quote(body)
            },
        },
    }
}

/// A `Status` object as a [`ClientError`]; `fallback_code` when it carries no usable code.
fn status_object_error(status: &Value, fallback_code: u16) -> ClientError {
    let code = status
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| (100..600).contains(c))
        .unwrap_or(fallback_code);
    let reason = status
        .get("reason")
        .and_then(Value::as_str)
        .filter(|r| !r.is_empty())
        .map_or_else(|| reason_of(code).to_owned(), str::to_owned);
    let message = status
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    ClientError {
        code,
        reason,
        message,
    }
}

/// The `StatusReason` upstream gives an HTTP code (client-go's fallback for non-Status bodies).
fn reason_of(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        406 => "NotAcceptable",
        409 => "Conflict",
        410 => "Expired",
        413 => "RequestEntityTooLarge",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "Unknown",
    }
}

fn bad_response(message: impl Into<String>) -> ClientError {
    ClientError {
        code: 0,
        reason: "BadResponse".into(),
        message: format!("the server's answer does not decode: {}", message.into()),
    }
}

/// The start of a body, for messages.
fn quote(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(MAX_QUOTED_BODY)]);
    if body.len() > MAX_QUOTED_BODY {
        format!("{text}...")
    } else {
        text.into_owned()
    }
}

/// A failed exchange as a transport error, with the whole chain of causes.
fn transport_error(e: &(dyn std::error::Error + 'static)) -> ClientError {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = s.source();
    }
    ClientError::transport(message)
}

/// A rustls client configuration that accepts any server certificate (the handshake must
/// still be signed by the certificate's key). For the places upstream skips verification:
/// the kubelet's HTTPS probes and hooks, the API server's proxy to pods and services (pods
/// serve self-signed certificates nobody can check), and an agent's first download of the
/// CA, which it then checks against its join token.
pub fn unverified_tls_config() -> std::result::Result<rustls::ClientConfig, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(
        rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
            .with_no_client_auth(),
    )
}

/// [`unverified_tls_config`] presenting a client certificate (`(cert PEM, key PEM)`): for an
/// aggregated API server registered with `insecureSkipTLSVerify`, which still authenticates
/// the front proxy by its certificate.
pub fn unverified_client_tls_config(
    client: Option<(&[u8], &[u8])>,
) -> std::result::Result<rustls::ClientConfig, HttpClientError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)));
    Ok(match client {
        Some((cert, key)) => {
            let (chain, key) = client_identity(cert, key)?;
            builder.with_client_auth_cert(chain, key)?
        }
        None => builder.with_no_client_auth(),
    })
}

/// Accepts every server certificate; checks handshake signatures with the provider's
/// algorithms.
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> std::result::Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> std::result::Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> std::result::Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The rustls client configuration of `tls`: its CA (or the system's), its client certificate,
/// ALPN `h2` and `http/1.1` (or only `http/1.1`).
pub fn client_tls_config(
    tls: &TlsSettings,
    http1_only: bool,
) -> std::result::Result<rustls::ClientConfig, HttpClientError> {
    let mut roots = rustls::RootCertStore::empty();
    let ca_pem = match &tls.ca_pem {
        Some(pem) => pem.clone(),
        None => system_ca_bundle()?,
    };
    let cas = certificates(&ca_pem, "server CA")?;
    let (_added, _ignored) = roots.add_parsable_certificates(cas);
    if roots.is_empty() {
        return Err(HttpClientError::NoCertificate("server CA"));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots);
    let mut config = match (&tls.client_cert_pem, &tls.client_key_pem) {
        (Some(cert), Some(key)) => {
            let (chain, key) = client_identity(cert, key)?;
            builder.with_client_auth_cert(chain, key)?
        }
        (None, None) => builder.with_no_client_auth(),
        _ => return Err(HttpClientError::HalfIdentity),
    };
    config.alpn_protocols = if http1_only {
        vec![b"http/1.1".to_vec()]
    } else {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    };
    Ok(config)
}

/// A client certificate chain and its key, from PEM.
fn client_identity(
    cert: &[u8],
    key: &[u8],
) -> std::result::Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), HttpClientError> {
    let chain = certificates(cert, "client certificate")?;
    let key = PrivateKeyDer::from_pem_slice(key).map_err(|source| HttpClientError::Pem {
        what: "client key",
        source,
    })?;
    Ok((chain, key))
}

fn certificates(
    pem: &[u8],
    what: &'static str,
) -> std::result::Result<Vec<CertificateDer<'static>>, HttpClientError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|source| HttpClientError::Pem { what, source })?;
    if certs.is_empty() {
        return Err(HttpClientError::NoCertificate(what));
    }
    Ok(certs)
}

/// The system's CA bundle: `$SSL_CERT_FILE`, else the Debian/Fedora/Alpine locations.
fn system_ca_bundle() -> std::result::Result<Vec<u8>, HttpClientError> {
    let mut candidates: Vec<std::path::PathBuf> = Vec::new();
    if let Some(f) = std::env::var_os("SSL_CERT_FILE") {
        candidates.push(f.into());
    }
    for p in [
        "/etc/ssl/certs/ca-certificates.crt",
        "/etc/pki/tls/certs/ca-bundle.crt",
        "/etc/ssl/cert.pem",
    ] {
        candidates.push(p.into());
    }
    for c in &candidates {
        if let Ok(bytes) = std::fs::read(c) {
            return Ok(bytes);
        }
    }
    Err(HttpClientError::NoTrustAnchors(
        candidates
            .iter()
            .map(|c| c.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
    ))
}

// ---------------------------------------------------------------------------------------------
// Connections

/// Makes the pool's connections: TCP, then TLS with the configured trust and identity; with a
/// [`ServerPool`], to the first server of its order that answers.
#[derive(Clone)]
struct TlsConnector {
    tls: tokio_rustls::TlsConnector,
    server_name: ServerName<'static>,
    /// The name learned servers are verified against.
    learned_name: ServerName<'static>,
    connect_timeout: Duration,
    pool: Option<Arc<ServerPool>>,
}

/// With several servers to try, each gets at most this long (a host that is down drops the
/// SYN; one that is up but has no server refuses at once).
const FAILOVER_ATTEMPT: Duration = Duration::from_secs(3);

type Tls = tokio_rustls::client::TlsStream<TcpStream>;

impl TlsConnector {
    /// TCP then TLS to `host:port`, verified as `name`, within `limit`.
    async fn dial(
        &self,
        host: &str,
        port: u16,
        name: &ServerName<'static>,
        limit: Duration,
    ) -> io::Result<Tls> {
        let connect = async {
            let tcp = TcpStream::connect((host, port)).await?;
            tcp.set_nodelay(true)?;
            self.tls.connect(name.clone(), tcp).await
        };
        tokio::time::timeout(limit, connect).await.map_err(|_| {
            io::Error::new(
                io::ErrorKind::TimedOut,
                format!("connecting to {host}:{port} took over {limit:?}"),
            )
        })?
    }

    /// Tries the pool's servers in its order; the first connection made wins.
    async fn dial_pool(&self, pool: &ServerPool, host: &str, port: u16) -> io::Result<Tls> {
        let configured = host
            .parse()
            .ok()
            .map(|ip| std::net::SocketAddr::new(ip, port));
        let order = pool.order(configured);
        let limit = if order.len() > 1 {
            self.connect_timeout.min(FAILOVER_ATTEMPT)
        } else {
            self.connect_timeout
        };
        let mut errors = Vec::new();
        for target in order {
            let attempt = match &target {
                Target::Configured => self.dial(host, port, &self.server_name, limit).await,
                Target::Learned(a) => {
                    let ip = a.ip().to_string();
                    self.dial(&ip, a.port(), &self.learned_name, limit).await
                }
            };
            match attempt {
                Ok(stream) => {
                    if !errors.is_empty() {
                        tracing::info!(server = ?target, failed = ?errors, "API server reached after failing over");
                    }
                    pool.connected(&target);
                    return Ok(stream);
                }
                Err(e) => {
                    pool.failed(&target);
                    errors.push(format!("{target:?}: {e}"));
                }
            }
        }
        Err(io::Error::new(
            io::ErrorKind::ConnectionRefused,
            format!("no API server could be reached: {}", errors.join("; ")),
        ))
    }
}

impl tower_service::Service<Uri> for TlsConnector {
    type Response = TlsConnection;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<TlsConnection>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let host = uri
                .host()
                .map(|h| h.trim_start_matches('[').trim_end_matches(']').to_owned())
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "URL without host"))?;
            let port = uri.port_u16().unwrap_or(443);
            let stream = match &this.pool {
                Some(pool) => this.dial_pool(pool, &host, port).await?,
                None => {
                    this.dial(&host, port, &this.server_name, this.connect_timeout)
                        .await?
                }
            };
            let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
            Ok(TlsConnection {
                io: TokioIo::new(stream),
                h2,
            })
        })
    }
}

/// One TLS connection of the pool; tells the pool whether ALPN chose h2.
struct TlsConnection {
    io: TokioIo<tokio_rustls::client::TlsStream<TcpStream>>,
    h2: bool,
}

impl Connection for TlsConnection {
    fn connected(&self) -> Connected {
        let c = Connected::new();
        if self.h2 { c.negotiated_h2() } else { c }
    }
}

impl hyper::rt::Read for TlsConnection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for TlsConnection {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
}

// ---------------------------------------------------------------------------------------------
// Requests

/// `?a=b&c=d` of the pairs that are set, or "" when none is.
fn query(pairs: &[(&str, Option<&str>)]) -> String {
    let mut s = form_urlencoded::Serializer::new(String::new());
    let mut any = false;
    for (k, v) in pairs {
        if let Some(v) = v {
            s.append_pair(k, v);
            any = true;
        }
    }
    if any {
        format!("?{}", s.finish())
    } else {
        String::new()
    }
}

fn write_query(params: &WriteParams, extra: &[(&str, Option<&str>)]) -> String {
    let mut pairs = vec![
        ("fieldManager", params.field_manager.as_deref()),
        ("dryRun", params.dry_run.then_some("All")),
    ];
    pairs.extend_from_slice(extra);
    query(&pairs)
}

fn json_body(v: &Value) -> Result<Vec<u8>> {
    serde_json::to_vec(v).map_err(|e| ClientError {
        code: 0,
        reason: "BadRequest".into(),
        message: e.to_string(),
    })
}

/// The `DeleteOptions` body of a delete, or none when every option is the default.
fn delete_options(p: &DeleteParams) -> Option<Value> {
    if *p == DeleteParams::default() {
        return None;
    }
    let mut body = json!({"kind": "DeleteOptions", "apiVersion": "v1"});
    if let Some(g) = p.grace_period_seconds {
        body["gracePeriodSeconds"] = json!(g);
    }
    if let Some(pp) = &p.propagation_policy {
        body["propagationPolicy"] = json!(pp);
    }
    if p.precondition_uid.is_some() || p.precondition_resource_version.is_some() {
        let mut pre = json!({});
        if let Some(uid) = &p.precondition_uid {
            pre["uid"] = json!(uid);
        }
        if let Some(rv) = &p.precondition_resource_version {
            pre["resourceVersion"] = json!(rv);
        }
        body["preconditions"] = pre;
    }
    Some(body)
}

/// A list answer as an [`ObjectList`]. Items get the list's `apiVersion` and `kind` (without
/// `List`) when they lack them, as upstream's dynamic client does, so each item stands alone.
fn object_list(v: Value) -> Result<ObjectList> {
    let Value::Object(mut m) = v else {
        return Err(bad_response("a list is not a JSON object"));
    };
    let mut items = match m.remove("items") {
        Some(Value::Array(items)) => items,
        None | Some(Value::Null) => Vec::new(),
        Some(_) => return Err(bad_response("the list's items are not an array")),
    };
    let kind = m
        .get("kind")
        .and_then(Value::as_str)
        .and_then(|k| k.strip_suffix("List"))
        .filter(|k| !k.is_empty())
        .map(str::to_owned);
    let api_version = m
        .get("apiVersion")
        .and_then(Value::as_str)
        .map(str::to_owned);
    for item in &mut items {
        if let Value::Object(o) = item {
            if let (Some(k), false) = (&kind, o.contains_key("kind")) {
                o.insert("kind".into(), Value::String(k.clone()));
            }
            if let (Some(a), false) = (&api_version, o.contains_key("apiVersion")) {
                o.insert("apiVersion".into(), Value::String(a.clone()));
            }
        }
    }
    let meta = m.get("metadata");
    let field = |name: &str| {
        meta.and_then(|md| md.get(name))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    Ok(ObjectList {
        items,
        resource_version: field("resourceVersion"),
        continue_token: Some(field("continue")).filter(|c| !c.is_empty()),
    })
}

fn object_name(obj: &Value) -> Result<&str> {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ClientError {
            code: 0,
            reason: "BadRequest".into(),
            message: "the object has no metadata.name".into(),
        })
}

#[async_trait::async_trait]
impl Client for HttpClient {
    async fn get(&self, r: &ResourceRef, name: &str) -> Result<Value> {
        self.json(Method::GET, r.path(Some(name), None), None).await
    }

    async fn list(&self, r: &ResourceRef, p: &ListParams) -> Result<ObjectList> {
        let limit = p.limit.map(|l| l.to_string());
        let q = query(&[
            ("labelSelector", p.label_selector.as_deref()),
            ("fieldSelector", p.field_selector.as_deref()),
            ("limit", limit.as_deref()),
            ("continue", p.continue_token.as_deref()),
            ("resourceVersion", p.resource_version.as_deref()),
        ]);
        let v = self
            .json(Method::GET, format!("{}{q}", r.path(None, None)), None)
            .await?;
        object_list(v)
    }

    async fn create(&self, r: &ResourceRef, obj: Value, params: &WriteParams) -> Result<Value> {
        let path = format!("{}{}", r.path(None, None), write_query(params, &[]));
        let body = json_body(&obj)?;
        self.json(Method::POST, path, Some(("application/json", body)))
            .await
    }

    async fn update(
        &self,
        r: &ResourceRef,
        obj: Value,
        subresource: Option<&str>,
        params: &WriteParams,
    ) -> Result<Value> {
        let name = object_name(&obj)?;
        let path = format!(
            "{}{}",
            r.path(Some(name), subresource),
            write_query(params, &[])
        );
        let body = json_body(&obj)?;
        self.json(Method::PUT, path, Some(("application/json", body)))
            .await
    }

    async fn patch(
        &self,
        r: &ResourceRef,
        name: &str,
        patch: &Patch,
        subresource: Option<&str>,
        params: &WriteParams,
    ) -> Result<Value> {
        let force = match patch {
            Patch::Apply { force: true, .. } => Some("true"),
            _ => None,
        };
        let path = format!(
            "{}{}",
            r.path(Some(name), subresource),
            write_query(params, &[("force", force)])
        );
        // JSON is YAML, so an apply configuration is sent as JSON too.
        let body = json_body(patch.body())?;
        self.json(Method::PATCH, path, Some((patch.content_type(), body)))
            .await
    }

    async fn delete(&self, r: &ResourceRef, name: &str, params: &DeleteParams) -> Result<Value> {
        let body = match delete_options(params) {
            Some(opts) => Some(("application/json", json_body(&opts)?)),
            None => None,
        };
        self.json(Method::DELETE, r.path(Some(name), None), body)
            .await
    }

    async fn create_subresource(
        &self,
        r: &ResourceRef,
        name: &str,
        subresource: &str,
        body: Value,
    ) -> Result<Value> {
        let body = json_body(&body)?;
        self.json(
            Method::POST,
            r.path(Some(name), Some(subresource)),
            Some(("application/json", body)),
        )
        .await
    }

    async fn watch(&self, r: &ResourceRef, p: &WatchParams) -> Result<WatchStream> {
        let timeout = p.timeout_seconds.map(|t| t.to_string());
        let q = query(&[
            ("watch", Some("1")),
            ("labelSelector", p.label_selector.as_deref()),
            ("fieldSelector", p.field_selector.as_deref()),
            ("resourceVersion", p.resource_version.as_deref()),
            ("allowWatchBookmarks", p.allow_bookmarks.then_some("true")),
            ("timeoutSeconds", timeout.as_deref()),
        ]);
        let path = format!("{}{q}", r.path(None, None));
        let req = self.request(Method::GET, &path, None)?;
        let resp = tokio::time::timeout(self.inner.request_timeout, self.inner.http.request(req))
            .await
            .map_err(|_| {
                ClientError::transport(format!(
                    "no answer to {path} within {:?}",
                    self.inner.request_timeout
                ))
            })?
            .map_err(|e| transport_error(&e))?;
        let status = resp.status();
        if !status.is_success() {
            let body = tokio::time::timeout(self.inner.request_timeout, resp.into_body().collect())
                .await
                .map_err(|_| ClientError::transport("the error body of a watch never ended"))?
                .map_err(|e| transport_error(&e))?
                .to_bytes();
            return Err(status_error(status.as_u16(), &body));
        }
        Ok(Box::pin(WatchLines::new(resp.into_body())))
    }
}

// ---------------------------------------------------------------------------------------------
// Watch streams

/// The events of a watch response: one JSON object per line, in chunks (HTTP/1.1) or DATA
/// frames (h2) that need not end at line ends. Dropping it closes the watch.
struct WatchLines<B> {
    body: B,
    buf: BytesMut,
    /// How much of `buf` is known to hold no newline.
    scanned: usize,
    done: bool,
}

impl<B> WatchLines<B> {
    fn new(body: B) -> Self {
        Self {
            body,
            buf: BytesMut::new(),
            scanned: 0,
            done: false,
        }
    }
}

impl<B> futures_core::Stream for WatchLines<B>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
    B::Error: std::error::Error + 'static,
{
    type Item = Result<WatchEvent>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if let Some(i) = this.buf[this.scanned..].iter().position(|&b| b == b'\n') {
                let line = this.buf.split_to(this.scanned + i + 1);
                this.scanned = 0;
                if line.trim_ascii().is_empty() {
                    continue;
                }
                let event = parse_watch_line(&line);
                if is_malformed(&event) {
                    this.done = true;
                    this.buf.clear();
                }
                return Poll::Ready(Some(event));
            }
            this.scanned = this.buf.len();
            if this.done {
                return Poll::Ready(None);
            }
            match Pin::new(&mut this.body).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => {
                    this.done = true;
                    // The last line may come without its newline.
                    let rest = this.buf.split();
                    this.scanned = 0;
                    if rest.trim_ascii().is_empty() {
                        return Poll::Ready(None);
                    }
                    return Poll::Ready(Some(parse_watch_line(&rest)));
                }
                Poll::Ready(Some(Err(e))) => {
                    this.done = true;
                    this.buf.clear();
                    this.scanned = 0;
                    return Poll::Ready(Some(Err(transport_error(&e))));
                }
                Poll::Ready(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        this.buf.extend_from_slice(&data);
                        if this.buf.len() > MAX_WATCH_LINE {
                            this.done = true;
                            this.buf.clear();
                            this.scanned = 0;
                            return Poll::Ready(Some(Err(bad_response(format!(
                                "a watch event is longer than {MAX_WATCH_LINE} bytes"
                            )))));
                        }
                    }
                }
            }
        }
    }
}

/// A line that is not a watch event at all: the stream cannot be trusted past it.
fn is_malformed(event: &Result<WatchEvent>) -> bool {
    matches!(event, Err(e) if e.reason == "BadResponse")
}

/// One line of a watch response. `ERROR` events are the `Status` they carry as an `Err`.
pub fn parse_watch_line(line: &[u8]) -> Result<WatchEvent> {
    #[derive(serde::Deserialize)]
    struct Line {
        #[serde(rename = "type")]
        kind: String,
        #[serde(default)]
        object: Value,
    }
    let Line { kind, object } = serde_json::from_slice(line)
        .map_err(|e| bad_response(format!("watch event: {e}: {}", quote(line))))?;
    match kind.as_str() {
        "ADDED" => Ok(WatchEvent::Added(Arc::new(object))),
        "MODIFIED" => Ok(WatchEvent::Modified(Arc::new(object))),
        "DELETED" => Ok(WatchEvent::Deleted(Arc::new(object))),
        "BOOKMARK" => object
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .map(|rv| WatchEvent::Bookmark(rv.to_owned()))
            .ok_or_else(|| bad_response("a BOOKMARK without metadata.resourceVersion")),
        "ERROR" => Err(status_object_error(&object, 500)),
        other => Err(bad_response(format!("unknown watch event type {other:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_core::Stream;
    use std::collections::VecDeque;

    #[test]
    fn status_bodies_become_client_errors() {
        let body = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
            "message":"configmaps \"x\" not found","reason":"NotFound",
            "details":{"name":"x","kind":"configmaps"},"code":404}"#;
        let e = status_error(404, body);
        assert_eq!(e.code, 404);
        assert_eq!(e.reason, "NotFound");
        assert_eq!(e.message, "configmaps \"x\" not found");
        assert!(e.is_not_found());

        let conflict = status_error(
            409,
            br#"{"kind":"Status","reason":"AlreadyExists","message":"exists","code":409}"#,
        );
        assert!(conflict.is_already_exists() && !conflict.is_conflict());

        // A Status without code or reason falls back to the HTTP status.
        let e = status_error(410, br#"{"kind":"Status","message":"too old"}"#);
        assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
        assert!(e.is_expired());

        // Not a Status (a proxy's HTML page, an empty body): the HTTP status and some text.
        let e = status_error(502, b"<html>bad gateway</html>");
        assert_eq!((e.code, e.reason.as_str()), (502, "Unknown"));
        assert!(e.message.contains("bad gateway"));
        let e = status_error(403, b"");
        assert_eq!(
            (e.code, e.reason.as_str(), e.message.as_str()),
            (403, "Forbidden", "Forbidden")
        );
        let long = vec![b'x'; 10_000];
        assert!(status_error(500, &long).message.len() < 600);
    }

    #[test]
    fn watch_lines_parse_into_events() {
        let added = parse_watch_line(
            br#"{"type":"ADDED","object":{"kind":"Pod","metadata":{"name":"a","resourceVersion":"5"}}}"#,
        )
        .unwrap();
        assert!(matches!(added, WatchEvent::Added(o) if o["metadata"]["name"] == "a"));
        assert!(matches!(
            parse_watch_line(br#"{"type":"MODIFIED","object":{}}"#),
            Ok(WatchEvent::Modified(_))
        ));
        assert!(matches!(
            parse_watch_line(br#"{"type":"DELETED","object":{}}"#),
            Ok(WatchEvent::Deleted(_))
        ));
        assert_eq!(
            parse_watch_line(
                br#"{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"42","creationTimestamp":null}}}"#
            )
            .unwrap(),
            WatchEvent::Bookmark("42".into())
        );
        let expired = parse_watch_line(
            br#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 3 (9)","reason":"Expired","code":410}}"#,
        )
        .unwrap_err();
        assert!(expired.is_expired());
        assert_eq!(expired.reason, "Expired");
        assert_eq!(expired.message, "too old resource version: 3 (9)");

        for bad in [
            &b"not json"[..],
            br#"{"object":{}}"#,
            br#"{"type":"SURPRISE","object":{}}"#,
            br#"{"type":"BOOKMARK","object":{"metadata":{}}}"#,
        ] {
            let e = parse_watch_line(bad).unwrap_err();
            assert_eq!((e.code, e.reason.as_str()), (0, "BadResponse"), "{e}");
        }
    }

    /// A body that hands out the given chunks, then ends (or fails).
    struct Chunks {
        chunks: VecDeque<Bytes>,
        fail_at_end: bool,
    }

    impl hyper::body::Body for Chunks {
        type Data = Bytes;
        type Error = io::Error;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
        ) -> Poll<Option<std::result::Result<hyper::body::Frame<Bytes>, io::Error>>> {
            match self.chunks.pop_front() {
                Some(c) => Poll::Ready(Some(Ok(hyper::body::Frame::data(c)))),
                None if self.fail_at_end => {
                    self.fail_at_end = false;
                    Poll::Ready(Some(Err(io::Error::other("connection reset"))))
                }
                None => Poll::Ready(None),
            }
        }
    }

    fn drain(chunks: &[&str], fail_at_end: bool) -> Vec<Result<WatchEvent>> {
        let mut s = WatchLines::new(Chunks {
            chunks: chunks.iter().map(|c| Bytes::from(c.to_string())).collect(),
            fail_at_end,
        });
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let mut out = Vec::new();
        loop {
            match Pin::new(&mut s).poll_next(&mut cx) {
                Poll::Ready(Some(e)) => out.push(e),
                Poll::Ready(None) => return out,
                Poll::Pending => panic!("the test body is never pending"),
            }
        }
    }

    #[test]
    fn watch_streams_split_lines_across_chunks() {
        let a = r#"{"type":"ADDED","object":{"metadata":{"name":"a"}}}"#;
        let b = r#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"7"}}}"#;
        let c = r#"{"type":"DELETED","object":{"metadata":{"name":"c"}}}"#;
        // Two events in one chunk, one split over three, a blank line, the last unterminated.
        let whole = format!("{a}\n{b}\n\n{c}");
        let (p1, rest) = whole.split_at(10);
        let (p2, p3) = rest.split_at(a.len() + 20);
        let events = drain(&[p1, p2, p3], false);
        assert_eq!(events.len(), 3, "{events:?}");
        assert!(matches!(&events[0], Ok(WatchEvent::Added(o)) if o["metadata"]["name"] == "a"));
        assert_eq!(events[1], Ok(WatchEvent::Bookmark("7".into())));
        assert!(matches!(&events[2], Ok(WatchEvent::Deleted(_))));
    }

    #[test]
    fn watch_streams_end_after_errors() {
        let a = r#"{"type":"ADDED","object":{}}"#;
        let expired = r#"{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"gone"}}"#;
        // An ERROR event is an Err item; the server ends the stream after it.
        let events = drain(&[&format!("{a}\n{expired}\n")], false);
        assert!(matches!(&events[..], [Ok(_), Err(e)] if e.is_expired()));
        // A garbled line ends the stream: nothing after it is trusted.
        let events = drain(&[&format!("{a}\ngarbage\n{a}\n")], false);
        assert!(matches!(&events[..], [Ok(_), Err(e)] if e.reason == "BadResponse"));
        // A broken connection is a transport error, then the end.
        let events = drain(&[&format!("{a}\n")], true);
        assert!(
            matches!(&events[..], [Ok(_), Err(e)] if e.code == 0 && e.message.contains("reset"))
        );
    }

    #[test]
    fn lists_fill_in_item_kinds_and_tokens() {
        let list = object_list(json!({
            "kind": "ConfigMapList", "apiVersion": "v1",
            "metadata": {"resourceVersion": "12", "continue": "abc"},
            "items": [{"metadata": {"name": "a"}}, {"kind": "ConfigMap", "apiVersion": "v1"}]
        }))
        .unwrap();
        assert_eq!(list.resource_version, "12");
        assert_eq!(list.continue_token.as_deref(), Some("abc"));
        assert_eq!(list.items[0]["kind"], "ConfigMap");
        assert_eq!(list.items[0]["apiVersion"], "v1");
        let empty =
            object_list(json!({"kind": "PodList", "metadata": {"continue": ""}, "items": null}))
                .unwrap();
        assert!(empty.items.is_empty() && empty.continue_token.is_none());
        assert!(object_list(json!([])).is_err());
        assert!(object_list(json!({"items": {}})).is_err());
    }

    #[test]
    fn requests_encode_queries_and_delete_options() {
        assert_eq!(query(&[("a", None)]), "");
        assert_eq!(
            query(&[
                ("labelSelector", Some("app in (a,b),tier!=x")),
                ("limit", Some("5"))
            ]),
            "?labelSelector=app+in+%28a%2Cb%29%2Ctier%21%3Dx&limit=5"
        );
        assert_eq!(
            write_query(
                &WriteParams {
                    field_manager: Some("me".into()),
                    dry_run: true
                },
                &[("force", Some("true"))]
            ),
            "?fieldManager=me&dryRun=All&force=true"
        );
        assert_eq!(delete_options(&DeleteParams::default()), None);
        assert_eq!(
            delete_options(&DeleteParams {
                grace_period_seconds: Some(0),
                propagation_policy: Some("Foreground".into()),
                precondition_uid: Some("u".into()),
                precondition_resource_version: None,
            }),
            Some(
                json!({"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0,
                "propagationPolicy": "Foreground", "preconditions": {"uid": "u"}})
            )
        );
    }

    #[test]
    fn bad_settings_are_errors_not_panics() {
        let tls = TlsSettings {
            ca_pem: Some(b"not pem".to_vec()),
            ..Default::default()
        };
        assert!(matches!(
            HttpClient::new("https://127.0.0.1:6443", tls.clone()),
            Err(HttpClientError::NoCertificate("server CA"))
        ));
        assert!(matches!(
            HttpClient::new("http://127.0.0.1:6443", tls.clone()),
            Err(HttpClientError::Url { .. })
        ));
        assert!(matches!(
            HttpClient::new("not a url", tls),
            Err(HttpClientError::Url { .. })
        ));
        let text = format!(
            "{:?}",
            TlsSettings {
                bearer_token: Some("secret-token".into()),
                client_key_pem: Some(b"KEY".to_vec()),
                ..Default::default()
            }
        );
        assert!(
            !text.contains("secret-token") && !text.contains("KEY\""),
            "{text}"
        );
    }
}
