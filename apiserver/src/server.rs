//! The HTTPS listener and request routing.
//!
//! Every connection is TLS (rustls, ALPN `h2` and `http/1.1`, so that upgrades such as exec
//! still find HTTP/1.1) and is served by hyper's automatic HTTP/1.1-or-h2 connection. Each
//! connection task is tracked, so shutdown stops accepting, lets in-flight requests finish
//! (bounded by a grace period) and then returns.
//!
//! Every request is authenticated, impersonation applied, and authorized before it is routed
//! (401 and 403 `Status` answers come from there). Routes: `/api` and `/apis` (the REST API),
//! `/openapi/*`, `/version`, `/metrics`, `/healthz`, `/livez`, `/readyz` (each with `?verbose`
//! and per-check sub-paths), the ServiceAccount issuer discovery documents, and k1s's join
//! endpoints (`/cacerts`, `/k1s/v1/node-certificate`). Every other path answers upstream's 404.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use http::{Method, Request, Response, StatusCode, header};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use k8s_openapi::apimachinery::pkg::version::Info;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::auth::ClientCertCheck;
use crate::auth::{PeerCert, UserInfo, impersonation};
use crate::authz::Attributes;
use crate::status::ApiError;

pub use crate::http::body::Body;
pub use crate::state::{ApiConfig, ApiState, ApiStateError};

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

/// Serves HTTPS on `listener` until `cancel` fires, then drains connections. `certs` checks
/// client certificates (see [`k1s_streaming::peer`]); without it they are ignored.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    certs: Option<ClientCertCheck>,
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
        let certs = certs.clone();
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
            let cert = Arc::new(
                certs
                    .map(|c| c.check(tls.get_ref().1.peer_certificates()))
                    .unwrap_or_default(),
            );
            let service = service_fn(move |req| handle(state.clone(), peer, cert.clone(), req));
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
    cert: Arc<PeerCert>,
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
    let resp = match admit_request(&state, &cert, &req, query.as_deref()).await {
        Ok(user) => dispatch(&state, req, user, &method, &path, verbose).await,
        Err(e) => {
            // Take in the (size-limited) body first: an h2 stream answered before its body
            // was read is reset, and some clients report that instead of the Status.
            let _ = crate::http::body::read(req.into_body()).await;
            e.into_response()
        }
    };
    let code = resp.status().as_u16();
    let info = crate::http::request::metrics_info(&method, &path, query.as_deref());
    state.metrics.observe_request(info, code, started);
    tracing::debug!(%peer, %method, %path, code, "request");
    Ok(resp)
}

/// Authenticates the request, applies impersonation, and authorizes it: the user it runs as,
/// or the 401/403 to answer.
async fn admit_request(
    state: &ApiState,
    cert: &PeerCert,
    req: &Request<Incoming>,
    query: Option<&str>,
) -> Result<UserInfo, ApiError> {
    let real = state.authn.authenticate(cert, req.headers()).await?;
    let user = if impersonation::requested(req.headers()) {
        impersonation::impersonate(&state.authz, &real, req.headers()).await?
    } else {
        real
    };
    let q = crate::http::request::query(query);
    let attrs = Attributes::from_request(&user, req.method(), req.uri().path(), &q);
    state.authz.check(&attrs).await?;
    Ok(user)
}

/// Routes an authorized request.
async fn dispatch(
    state: &Arc<ApiState>,
    req: Request<Incoming>,
    user: UserInfo,
    method: &Method,
    path: &str,
    verbose: bool,
) -> Response<Body> {
    if path == "/openapi/v2" || path == "/openapi/v3" || path.starts_with("/openapi/v3/") {
        let hashed = req.uri().query().is_some_and(|q| q.contains("hash="));
        state
            .openapi
            .serve(&state.registry.catalog(), path, hashed, req.headers())
            .unwrap_or_else(ApiError::into_response)
    } else if path == "/api"
        || path.starts_with("/api/")
        || path == "/apis"
        || path.starts_with("/apis/")
    {
        crate::http::serve_api(state, req, &user).await
    } else {
        route(state, req, &user, method, path, verbose).await
    }
}

async fn route(
    state: &ApiState,
    req: Request<Incoming>,
    user: &UserInfo,
    method: &Method,
    path: &str,
    verbose: bool,
) -> Response<Body> {
    let health = ["/healthz", "/livez", "/readyz"].into_iter().find(|p| {
        path == *p
            || path
                .strip_prefix(p)
                .is_some_and(|rest| rest.starts_with('/'))
    });
    match (method, path, health) {
        (&Method::GET, "/version", _) => json(StatusCode::OK, &version()),
        (&Method::GET, "/.well-known/openid-configuration", _) => {
            json(StatusCode::OK, &state.tokens.openid_configuration())
        }
        (&Method::GET, "/openid/v1/jwks", _) => {
            let mut resp = json(StatusCode::OK, &state.tokens.signer().jwks());
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("application/jwk-set+json"),
            );
            resp
        }
        (&Method::GET, "/cacerts", _) => match &state.pki {
            Some(pki) => text(StatusCode::OK, pki.ca.cert_pem.clone()),
            None => ApiError::no_route().into_response(),
        },
        (&Method::POST, crate::auth::join::NODE_CERT_PATH, _) => {
            crate::auth::join::node_certificate(state.pki.as_ref(), user, req)
                .await
                .unwrap_or_else(ApiError::into_response)
        }
        (&Method::GET, crate::datastore_snapshot::PATH, _) => {
            crate::datastore_snapshot::serve(&*state.store, user)
                .await
                .unwrap_or_else(ApiError::into_response)
        }
        (&Method::GET, crate::auth::join::SERVER_JOIN_PATH, _) => {
            crate::auth::join::server_join(state.server_join.as_ref(), user)
                .unwrap_or_else(ApiError::into_response)
        }
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

/// The git commit k1s was built from (hex; empty when the build knew none). Recorded by
/// `build.rs`.
pub const GIT_COMMIT: &str = env!("K1S_BUILD_GIT_COMMIT");
/// `clean` or `dirty` (uncommitted changes in the built tree); empty when unknown.
pub const GIT_TREE_STATE: &str = env!("K1S_BUILD_GIT_TREE_STATE");
/// When k1s was built (RFC 3339 UTC, `SOURCE_DATE_EPOCH` when set).
pub const BUILD_DATE: &str = env!("K1S_BUILD_DATE");

/// What `/version` reports.
pub fn version() -> Info {
    Info {
        build_date: BUILD_DATE.into(),
        compiler: "rustc".into(),
        emulation_major: None,
        emulation_minor: None,
        git_commit: GIT_COMMIT.into(),
        git_tree_state: GIT_TREE_STATE.into(),
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

/// A failed health check (logged only: upstream withholds the reason from callers).
#[derive(Debug, thiserror::Error)]
enum CheckFailed {
    #[error(transparent)]
    Store(#[from] k1s_store::StoreError),
    #[error("the datastore did not answer in time")]
    StoreTimeout,
    #[error("shutting down")]
    ShuttingDown,
}

/// `/healthz`, `/livez` and `/readyz`: the named checks, or one of them (`only`), as
/// kube-apiserver formats them.
async fn health_check(
    state: &ApiState,
    endpoint: &str,
    only: &str,
    verbose: bool,
) -> Response<Body> {
    let mut checks: Vec<(&str, Result<(), CheckFailed>)> = vec![("ping", Ok(()))];
    let store =
        match tokio::time::timeout(STORE_CHECK_TIMEOUT, state.store.current_revision()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(e.into()),
            Err(_) => Err(CheckFailed::StoreTimeout),
        };
    checks.push(("etcd", store));
    if endpoint == "/readyz" {
        let draining = state.shutting_down.load(Ordering::Acquire);
        checks.push((
            "shutdown",
            if draining {
                Err(CheckFailed::ShuttingDown)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_fields_are_well_formed_when_known() {
        let v = version();
        // kubectl's conformance test wants `GitCommit:"[0-9a-f]+"`; this crate is built from
        // a git checkout (or with K1S_GIT_COMMIT), so the commit is known here.
        if !GIT_COMMIT.is_empty() {
            let hex = regex::Regex::new("^[0-9a-f]{7,64}$").unwrap();
            assert!(hex.is_match(&v.git_commit), "{:?}", v.git_commit);
        }
        assert!(
            ["clean", "dirty", ""].contains(&v.git_tree_state.as_str()),
            "{:?}",
            v.git_tree_state
        );
        let date = regex::Regex::new(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$").unwrap();
        assert!(date.is_match(&v.build_date), "{:?}", v.build_date);
        assert!(
            k1s_api::time::parse(&v.build_date).is_some(),
            "{:?}",
            v.build_date
        );
        assert_eq!(v.major, "1");
        assert_eq!(v.git_version, KUBE_GIT_VERSION);
    }
}
