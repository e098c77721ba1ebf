//! The `proxy` subresources of pods and services: `pods/[SCHEME:]NAME[:PORT]/proxy/PATH` and
//! `services/[SCHEME:]NAME[:PORT]/proxy/PATH`, an HTTP request forwarded by the API server to
//! the pod, or to one ready endpoint of the service, and its answer passed back, as
//! kube-apiserver does (`kubectl proxy` users, dashboards, and the conformance suite read pods'
//! answers this way).
//!
//! - Where: a pod's `status.podIP`, at PORT if given (else the first port a container
//!   declares, else the scheme's default port); a
//!   service's `Endpoints`: PORT is a service port's name or number (a number is mapped to its
//!   port's name), one subset holding that port is picked at random and one of its ready
//!   addresses at random; ExternalName services are not proxied (upstream proxies them to the
//!   external name; k1s answers 503 with why).
//! - How: HTTP/1.1 over TCP, or TLS for `https:` **without verifying the pod's certificate**,
//!   as upstream (pods serve self-signed certificates; the API server has nothing to check them
//!   against). The request's method, query, body and headers go along, without the client's
//!   `Authorization` (upstream's authentication filter removes it) and hop-by-hop headers.
//! - Errors: a pod without an IP, an unknown service port or no ready endpoint is 503
//!   ServiceUnavailable, as upstream; a connection that fails is 503 "error trying to reach
//!   service: …".

use std::sync::Arc;
use std::time::Duration;

use http::{HeaderMap, Method, Response, StatusCode, header};
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpStream;

use super::body::Body;
use super::upstream::{forwarded, pick_endpoint, round_trip, service_port_name};
use crate::registry::ResourceType;
use crate::rest::Rest;
use crate::status::ApiError;

/// Limit for connecting to the pod.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Limit for the whole answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// One proxied request: what the client sent beyond the target.
pub struct Forward<'a> {
    pub method: &'a Method,
    /// What follows `.../proxy`, starting with `/`.
    pub path: &'a str,
    pub query: Option<&'a str>,
    pub headers: &'a HeaderMap,
    pub body: bytes::Bytes,
}

/// `[SCHEME:]NAME[:PORT]` split as upstream's `SplitSchemeNamePort`: one part is a name, two
/// are name and port, three are scheme, name and port; the scheme is `http`, `https` or empty.
fn split_scheme_name_port(id: &str) -> Option<(&str, &str, &str)> {
    let parts: Vec<&str> = id.split(':').collect();
    let (scheme, name, port) = match parts.as_slice() {
        [name] => ("", *name, ""),
        [name, port] => ("", *name, *port),
        [scheme, name, port] => (*scheme, *name, *port),
        _ => return None,
    };
    (!name.is_empty() && matches!(scheme, "" | "http" | "https")).then_some((scheme, name, port))
}

fn invalid_id(kind: &str, id: &str) -> ApiError {
    ApiError::bad_request(format!("invalid {kind} request {id:?}"))
}

/// `pods/ID/proxy/PATH`.
pub async fn pod(
    rest: &Rest,
    res: &ResourceType,
    ns: &str,
    id: &str,
    forward: Forward<'_>,
) -> Result<Response<Body>, ApiError> {
    let (scheme, name, port) = split_scheme_name_port(id).ok_or_else(|| invalid_id("pod", id))?;
    let pod = rest.get(res, Some(ns), name).await?;
    let ip = pod["status"]["podIP"].as_str().unwrap_or_default();
    if ip.is_empty() {
        return Err(ApiError::new(
            503,
            "ServiceUnavailable",
            format!("pod {name} does not have an IP address yet"),
        ));
    }
    let port = if port.is_empty() {
        first_container_port(&pod).unwrap_or_else(|| default_port(scheme))
    } else {
        port.parse::<u16>()
            .map_err(|_| ApiError::bad_request(format!("invalid port {port:?} for pod {name}")))?
    };
    let prefix = format!("/api/v1/namespaces/{ns}/pods/{id}/proxy");
    send(scheme, ip, port, &prefix, forward).await
}

/// The first port a container of `pod` declares: where upstream proxies when the request
/// names none.
fn first_container_port(pod: &Value) -> Option<u16> {
    pod["spec"]["containers"]
        .as_array()?
        .iter()
        .find_map(|c| c["ports"].as_array()?.first()?["containerPort"].as_u64())
        .and_then(|p| u16::try_from(p).ok())
}

/// `services/ID/proxy/PATH`.
pub async fn service(
    rest: &Rest,
    res: &ResourceType,
    ns: &str,
    id: &str,
    forward: Forward<'_>,
) -> Result<Response<Body>, ApiError> {
    let (scheme, name, port) =
        split_scheme_name_port(id).ok_or_else(|| invalid_id("service", id))?;
    let svc = rest.get(res, Some(ns), name).await?;
    let unavailable = |message: String| ApiError::new(503, "ServiceUnavailable", message);
    if svc["spec"]["type"] == "ExternalName" {
        return Err(unavailable(format!(
            "service {name:?} is of type ExternalName, which this server does not proxy"
        )));
    }
    let port_name = service_port_name(&svc, port)
        .ok_or_else(|| unavailable(format!("no service port {port} found for service {name:?}")))?;
    let endpoints_type = rest
        .registry
        .builtin_kind("", "Endpoints")
        .ok_or_else(|| ApiError::new(500, "InternalError", "no Endpoints resource"))?;
    let endpoints = rest.get(&endpoints_type, Some(ns), name).await.ok();
    let (ip, port) = endpoints
        .as_ref()
        .and_then(|eps| pick_endpoint(eps, &port_name, &mut rand::rng()))
        .ok_or_else(|| unavailable(format!("no endpoints available for service {name:?}")))?;
    let prefix = format!("/api/v1/namespaces/{ns}/services/{id}/proxy");
    send(scheme, &ip, port, &prefix, forward).await
}

fn default_port(scheme: &str) -> u16 {
    if scheme == "https" { 443 } else { 80 }
}

/// Sends the request to `ip:port` and passes the answer back.
async fn send(
    scheme: &str,
    ip: &str,
    port: u16,
    prefix: &str,
    forward: Forward<'_>,
) -> Result<Response<Body>, ApiError> {
    let host = if ip.contains(':') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    };
    let unreachable = |e: &dyn std::fmt::Display| {
        ApiError::new(
            503,
            "ServiceUnavailable",
            format!("error trying to reach service: {e}"),
        )
    };
    let path_and_query = match forward.query {
        Some(q) if !q.is_empty() => format!("{}?{q}", forward.path),
        _ => forward.path.to_owned(),
    };
    let mut request = http::Request::builder()
        .method(forward.method.clone())
        .uri(path_and_query)
        .header(header::HOST, &host);
    for (name, value) in forward.headers {
        if forwarded(name) {
            request = request.header(name, value);
        }
    }
    let request = request
        .body(Full::new(forward.body))
        .map_err(|e| ApiError::bad_request(format!("cannot forward this request: {e}")))?;
    let answer = async {
        let tcp = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(&host))
            .await
            .map_err(|_| unreachable(&format!("dial tcp {host}: i/o timeout")))?
            .map_err(|e| unreachable(&format!("dial tcp {host}: {e}")))?;
        let (parts, body) = if scheme == "https" {
            let tls =
                tokio_rustls::TlsConnector::from(unverified_tls().map_err(|e| unreachable(&e))?)
                    .connect(server_name(ip), tcp)
                    .await
                    .map_err(|e| unreachable(&e))?;
            round_trip(TokioIo::new(tls), request).await
        } else {
            round_trip(TokioIo::new(tcp), request).await
        }
        .map_err(|e| unreachable(&e))?;
        let content_type = parts
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("text/plain")
            .to_owned();
        let status = StatusCode::from_u16(parts.status.as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
        let encoded = parts.headers.contains_key(header::CONTENT_ENCODING);
        let body = match std::str::from_utf8(&body) {
            Ok(html) if content_type.starts_with("text/html") && !encoded => {
                bytes::Bytes::from(rewrite_links(html, prefix))
            }
            _ => body,
        };
        Ok(super::body::respond(status, &content_type, body))
    };
    tokio::time::timeout(REQUEST_TIMEOUT, answer)
        .await
        .unwrap_or_else(|_| Err(unreachable(&"no answer in time")))
}

/// An HTML answer's links to absolute paths (`href`, `src`, `action` values starting with one
/// `/`) pointed back through the proxy at `prefix`, as upstream's proxy rewrites them, so a
/// page served through the API server links to itself there.
fn rewrite_links(html: &str, prefix: &str) -> String {
    // ASCII lowercasing keeps byte offsets: attribute names are found in the copy, values
    // copied from the original.
    let lower = html.to_ascii_lowercase();
    let bytes = lower.as_bytes();
    let mut out = String::with_capacity(html.len() + 64);
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        let attr = ["href=", "src=", "action="]
            .into_iter()
            .find(|a| bytes[i..].starts_with(a.as_bytes()));
        let boundary = i == 0 || bytes[i - 1].is_ascii_whitespace();
        let Some(attr) = attr.filter(|_| boundary) else {
            i += 1;
            continue;
        };
        let quote = bytes.get(i + attr.len()).copied();
        i += attr.len();
        if !matches!(quote, Some(b'"' | b'\'')) {
            continue;
        }
        let start = i + 1;
        let value = &html[start..];
        if value.starts_with('/') && !value.starts_with("//") && !value.starts_with(prefix) {
            out.push_str(&html[copied..start]);
            out.push_str(prefix);
            copied = start;
        }
        i = start;
    }
    out.push_str(&html[copied..]);
    out
}

fn server_name(ip: &str) -> rustls::pki_types::ServerName<'static> {
    match ip.parse::<std::net::IpAddr>() {
        Ok(addr) => rustls::pki_types::ServerName::IpAddress(addr.into()),
        Err(_) => rustls::pki_types::ServerName::try_from(ip.to_owned()).unwrap_or_else(|_| {
            rustls::pki_types::ServerName::IpAddress(std::net::Ipv4Addr::UNSPECIFIED.into())
        }),
    }
}

/// A TLS client that accepts any server certificate (see the module docs for why).
fn unverified_tls() -> Result<Arc<rustls::ClientConfig>, rustls::Error> {
    static CONFIG: std::sync::OnceLock<Arc<rustls::ClientConfig>> = std::sync::OnceLock::new();
    if let Some(config) = CONFIG.get() {
        return Ok(config.clone());
    }
    let config = Arc::new(k1s_api::http_client::unverified_tls_config()?);
    Ok(CONFIG.get_or_init(|| config).clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ids_split_as_upstream() {
        assert_eq!(split_scheme_name_port("web"), Some(("", "web", "")));
        assert_eq!(
            split_scheme_name_port("web:8080"),
            Some(("", "web", "8080"))
        );
        assert_eq!(
            split_scheme_name_port("https:web:tls"),
            Some(("https", "web", "tls"))
        );
        assert_eq!(split_scheme_name_port("ftp:web:21"), None);
        assert_eq!(split_scheme_name_port("a:b:c:d"), None);
        assert_eq!(split_scheme_name_port(":80"), None);
    }

    #[test]
    fn html_links_point_back_through_the_proxy() {
        let p = "/api/v1/namespaces/ns/pods/web:80/proxy";
        assert_eq!(
            rewrite_links(
                r#"<a href="/rewriteme">x</a><img SRC='/i.png'><a href="//cdn/x"><a href="rel">"#,
                p
            ),
            format!(
                r#"<a href="{p}/rewriteme">x</a><img SRC='{p}/i.png'><a href="//cdn/x"><a href="rel">"#
            )
        );
        // Text that is not ASCII passes whole.
        assert_eq!(
            rewrite_links(r#"<p>héllo wörld</p><a href="/ü">"#, p),
            format!(r#"<p>héllo wörld</p><a href="{p}/ü">"#)
        );
        // Already through the proxy, or not an attribute: left alone.
        let through = format!(r#"<form action="{p}/post">data-href="/no""#);
        assert_eq!(rewrite_links(&through, p), through);
    }

    #[test]
    fn pods_are_proxied_at_their_first_declared_port() {
        let pod = json!({"spec": {"containers": [{"name": "a"},
            {"name": "b", "ports": [{"containerPort": 9376}, {"containerPort": 80}]}]}});
        assert_eq!(first_container_port(&pod), Some(9376));
        assert_eq!(
            first_container_port(&json!({"spec": {"containers": [{}]}})),
            None
        );
    }
}
