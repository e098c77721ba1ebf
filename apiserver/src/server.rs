//! The HTTPS listener and request routing.
//!
//! Every connection is TLS (rustls, ALPN `h2` and `http/1.1`, so that upgrades such as exec
//! still find HTTP/1.1) and is served by hyper's automatic HTTP/1.1-or-h2 connection. Each
//! connection task is tracked, so shutdown stops accepting, lets in-flight requests finish
//! (bounded by a grace period) and then returns.
//!
//! Served so far: `/version`, `/metrics`, `/healthz`, `/livez`, `/readyz` (each with
//! `?verbose` and per-check sub-paths). Every other path answers upstream's 404 `Status`; the resource
//! handlers come with the rest of issue #3.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use http::{Method, Request, Response, StatusCode, header};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use k1s_store::Store;
use k8s_openapi::apimachinery::pkg::version::Info;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::metrics::{InstrumentedStore, Metrics};
use crate::registry::Registry;
use crate::rest::{Rest, ServiceNetwork};
use crate::status::ApiError;

pub use crate::http::body::Body;

/// The Kubernetes minor version k1s serves (kubectl picks its matching client from it).
pub const KUBE_MINOR: &str = "33";
/// The full version reported by `/version`.
pub const KUBE_GIT_VERSION: &str = concat!("v1.33.0+k1s-", env!("CARGO_PKG_VERSION"));

/// How long a client gets to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long in-flight requests get to finish on shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// How long the datastore gets to answer a health check.
const STORE_CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// What the handlers share.
pub struct ApiState {
    /// The datastore, timed into `metrics`.
    pub store: Arc<dyn Store>,
    /// The generic storage of every resource (over `store`).
    pub rest: Arc<Rest>,
    pub registry: Arc<Registry>,
    /// The OpenAPI documents of the current catalog.
    pub openapi: crate::http::openapi::OpenApiCache,
    /// Fired when the server stops: ends watches so connections can drain.
    pub cancel: CancellationToken,
    pub metrics: Arc<Metrics>,
    /// Set when shutdown begins: `/readyz` fails from then on, so load balancers drain.
    pub shutting_down: AtomicBool,
}

/// Settings of the API beyond the store.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// `--service-cidr` and `--service-node-port-range`.
    pub services: ServiceNetwork,
    /// The address other nodes and pods reach this server at (the `kubernetes` Service's
    /// endpoint).
    pub advertise_address: std::net::IpAddr,
    /// The HTTPS port.
    pub port: u16,
}

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            services: ServiceNetwork::default(),
            advertise_address: std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
            port: 6443,
        }
    }
}

impl ApiState {
    pub fn new(store: Arc<dyn Store>, config: &ApiConfig) -> Arc<Self> {
        let metrics = Metrics::new();
        let store: Arc<dyn Store> = Arc::new(InstrumentedStore::new(store, metrics.clone()));
        let registry = Arc::new(Registry::new());
        Arc::new(Self {
            rest: Arc::new(Rest::new(store.clone(), registry.clone(), config.services)),
            registry,
            openapi: Default::default(),
            cancel: CancellationToken::new(),
            store,
            metrics,
            shutting_down: AtomicBool::new(false),
        })
    }
}

/// Serves HTTPS on `listener` until `cancel` fires, then drains connections.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    state: Arc<ApiState>,
    cancel: CancellationToken,
) {
    let acceptor = TlsAcceptor::from(tls);
    let graceful = GracefulShutdown::new();
    let builder = auto::Builder::new(TokioExecutor::new());
    loop {
        let (tcp, peer) = tokio::select! {
            () = cancel.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let state = state.clone();
        let builder = builder.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    return;
                }
            };
            let service = service_fn(move |req| handle(state.clone(), peer, req));
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(tls), service);
            if let Err(e) = watcher.watch(conn.into_owned()).await {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
    state.shutting_down.store(true, Ordering::Release);
    state.cancel.cancel();
    if tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("some API connections were still busy after the shutdown grace period");
    }
}

async fn handle(
    state: Arc<ApiState>,
    peer: SocketAddr,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let query = req.uri().query().map(str::to_owned);
    let verbose = req.uri().query().is_some_and(|q| {
        q.split('&')
            .any(|kv| kv == "verbose" || kv.starts_with("verbose="))
    });
    let started = std::time::Instant::now();
    let resp = if path == "/openapi/v2" || path == "/openapi/v3" || path.starts_with("/openapi/v3/")
    {
        let hashed = req.uri().query().is_some_and(|q| q.contains("hash="));
        state
            .openapi
            .serve(&state.registry.catalog(), &path, hashed, req.headers())
            .unwrap_or_else(ApiError::into_response)
    } else if path == "/api"
        || path.starts_with("/api/")
        || path == "/apis"
        || path.starts_with("/apis/")
    {
        crate::http::serve_api(&state, req).await
    } else {
        route(&state, &method, &path, verbose).await
    };
    let code = resp.status().as_u16();
    let info = crate::http::request::metrics_info(&method, &path, query.as_deref());
    state.metrics.observe_request(info, code, started);
    tracing::debug!(%peer, %method, %path, code, "request");
    Ok(resp)
}

async fn route(state: &ApiState, method: &Method, path: &str, verbose: bool) -> Response<Body> {
    let health = ["/healthz", "/livez", "/readyz"].into_iter().find(|p| {
        path == *p
            || path
                .strip_prefix(p)
                .is_some_and(|rest| rest.starts_with('/'))
    });
    match (method, path, health) {
        (&Method::GET, "/version", _) => json(StatusCode::OK, &version()),
        (&Method::GET, "/metrics", _) => {
            let mut resp = text(StatusCode::OK, state.metrics.encode());
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            );
            resp
        }
        (&Method::GET | &Method::HEAD, _, Some(endpoint)) => {
            let only = path[endpoint.len()..].trim_start_matches('/');
            health_check(state, endpoint, only, verbose).await
        }
        (_, "/version", _) | (_, _, Some(_)) => {
            ApiError::method_not_allowed(method).into_response()
        }
        _ => ApiError::no_route().into_response(),
    }
}

/// What `/version` reports.
pub fn version() -> Info {
    Info {
        build_date: String::new(),
        compiler: "rustc".into(),
        emulation_major: None,
        emulation_minor: None,
        git_commit: String::new(),
        git_tree_state: "clean".into(),
        git_version: KUBE_GIT_VERSION.into(),
        go_version: "none (k1s is written in Rust)".into(),
        major: "1".into(),
        min_compatibility_major: None,
        min_compatibility_minor: None,
        minor: KUBE_MINOR.into(),
        platform: format!("{}/{}", std::env::consts::OS, go_arch()),
    }
}

/// The architecture as Go names it (kubectl prints it).
fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "arm" => "arm",
        other => other,
    }
}

/// `/healthz`, `/livez` and `/readyz`: the named checks, or one of them (`only`), as
/// kube-apiserver formats them.
async fn health_check(
    state: &ApiState,
    endpoint: &str,
    only: &str,
    verbose: bool,
) -> Response<Body> {
    let mut checks: Vec<(&str, Result<(), String>)> = vec![("ping", Ok(()))];
    let store =
        match tokio::time::timeout(STORE_CHECK_TIMEOUT, state.store.current_revision()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("the datastore did not answer in time".into()),
        };
    checks.push(("etcd", store));
    if endpoint == "/readyz" {
        let draining = state.shutting_down.load(Ordering::Acquire);
        checks.push((
            "shutdown",
            if draining {
                Err("shutting down".into())
            } else {
                Ok(())
            },
        ));
    }
    let name = endpoint.trim_start_matches('/');
    if !only.is_empty() {
        return match checks.iter().find(|(n, _)| *n == only) {
            Some((_, Ok(()))) => text(StatusCode::OK, "ok".into()),
            Some((n, Err(e))) => {
                tracing::warn!(check = n, error = %e, "health check failed");
                text(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("internal server error: {n} failed\n"),
                )
            }
            None => ApiError::no_route().into_response(),
        };
    }
    let failed = checks.iter().any(|(_, r)| r.is_err());
    if !failed && !verbose {
        return text(StatusCode::OK, "ok".into());
    }
    let mut body = String::new();
    for (n, r) in &checks {
        match r {
            Ok(()) => body.push_str(&format!("[+]{n} ok\n")),
            Err(e) => {
                tracing::warn!(check = n, error = %e, "health check failed");
                // Upstream withholds the reason from unauthenticated callers.
                body.push_str(&format!("[-]{n} failed: reason withheld\n"));
            }
        }
    }
    if failed {
        body.push_str(&format!("{name} check failed\n"));
        text(StatusCode::INTERNAL_SERVER_ERROR, body)
    } else {
        body.push_str(&format!("{name} check passed\n"));
        text(StatusCode::OK, body)
    }
}

fn text(code: StatusCode, body: String) -> Response<Body> {
    let mut resp = crate::http::body::respond(code, "text/plain; charset=utf-8", body);
    resp.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        header::HeaderValue::from_static("nosniff"),
    );
    resp
}

fn json<T: serde::Serialize>(code: StatusCode, value: &T) -> Response<Body> {
    match serde_json::to_vec(value) {
        Ok(body) => crate::http::body::respond(code, "application/json", body),
        Err(e) => ApiError::new(500, "InternalError", e.to_string()).into_response(),
    }
}
