//! httpGet handlers: a GET to `scheme://host:port/path` (HTTPS without certificate checks, as
//! upstream), with the probe's headers, following up to 10 redirects on the same host. A
//! probe succeeds on 200–399; a redirect to another host is not followed and counts as a
//! success with a warning. Bodies are read up to [`super::MAX_OUTPUT`].

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};

use super::{MAX_OUTPUT, Outcome, USER_AGENT_VERSION};

/// Upstream's redirect limit.
const MAX_REDIRECTS: usize = 10;

/// A resolved httpGet action.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HttpGet {
    pub https: bool,
    pub host: String,
    pub port: u16,
    /// Path and query as written; empty is `/`.
    pub path: String,
    pub headers: Vec<(String, String)>,
}

/// The response a GET ended with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub body: String,
    /// Whether a redirect to another host was left unfollowed.
    pub stopped_redirect: bool,
}

/// Where one request goes.
#[derive(Clone, Debug)]
struct Url {
    https: bool,
    host: String,
    port: u16,
    path: String,
}

impl Url {
    fn display(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        let default = if self.https { 443 } else { 80 };
        let authority = if self.port == default {
            bracket(&self.host)
        } else {
            super::tcp::join_host_port(&self.host, self.port)
        };
        format!("{scheme}://{authority}{}", self.path)
    }

    /// `location` (absolute or relative) against this URL.
    fn join(&self, location: &str) -> Option<Url> {
        if location.starts_with("http://") || location.starts_with("https://") {
            let uri: http::Uri = location.parse().ok()?;
            let https = uri.scheme_str() == Some("https");
            let auth = uri.authority()?;
            return Some(Url {
                https,
                host: auth.host().trim_matches(['[', ']']).to_string(),
                port: auth.port_u16().unwrap_or(if https { 443 } else { 80 }),
                path: uri.path_and_query().map_or("/".into(), |p| p.to_string()),
            });
        }
        let path = if location.starts_with('/') {
            location.to_string()
        } else {
            // Relative to the current path's directory.
            let base = self.path.split('?').next().unwrap_or("/");
            let dir = &base[..base.rfind('/').map_or(0, |i| i + 1)];
            format!("{}{location}", if dir.is_empty() { "/" } else { dir })
        };
        Some(Url {
            path,
            ..self.clone()
        })
    }
}

fn bracket(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

fn normalize_path(p: &str) -> String {
    if p.starts_with('/') {
        p.to_string()
    } else {
        format!("/{p}")
    }
}

/// A TLS client configuration that accepts any server certificate: probes and hooks do not
/// verify (upstream sets `InsecureSkipVerify`); also the agent's first download of the CA,
/// which it then checks against its token.
pub(crate) fn insecure_client_config() -> Result<rustls::ClientConfig, rustls::Error> {
    k1s_api::http_client::unverified_tls_config()
}

/// Why one request of an httpGet handler got no answer (the part after `Get "URL": `).
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error(transparent)]
    Dial(#[from] super::tcp::DialError),
    #[error(transparent)]
    Tls(#[from] rustls::Error),
    #[error(transparent)]
    ServerName(#[from] rustls::pki_types::InvalidDnsNameError),
    /// The TLS handshake.
    #[error(transparent)]
    TlsConnect(std::io::Error),
    /// The HTTP/1 handshake, the request or the body.
    #[error(transparent)]
    Http(#[from] hyper::Error),
    /// A header the request cannot carry.
    #[error(transparent)]
    Build(#[from] http::Error),
}

/// Why an httpGet handler failed, worded as Go's client: `Get "URL": ...`.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("Get \"{url}\": {source}")]
    Request { url: String, source: RequestError },
    #[error("Get \"{url}\": stopped after {} redirects", MAX_REDIRECTS)]
    TooManyRedirects { url: String },
}

fn tls_connector() -> Result<tokio_rustls::TlsConnector, RequestError> {
    Ok(tokio_rustls::TlsConnector::from(Arc::new(
        insecure_client_config()?,
    )))
}

/// Aborts the connection task when the request is done (or abandoned).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One request over `io`: the status, the Location header and the capped body.
async fn exchange<S>(
    io: S,
    url: &Url,
    get: &HttpGet,
    agent: &str,
) -> Result<(u16, Option<String>, String), RequestError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io)).await?;
    let _conn = AbortOnDrop(tokio::spawn(async move {
        let _ = conn.await;
    }));
    let mut req = http::Request::get(url.path.as_str());
    let mut host = super::tcp::join_host_port(&url.host, url.port);
    let (mut ua, mut accept) = (true, true);
    for (name, value) in &get.headers {
        if name.eq_ignore_ascii_case("host") {
            host = value.clone();
            continue;
        }
        ua &= !name.eq_ignore_ascii_case("user-agent");
        accept &= !name.eq_ignore_ascii_case("accept");
        req = req.header(name.as_str(), value.as_str());
    }
    if ua {
        req = req.header("user-agent", format!("{agent}/{USER_AGENT_VERSION}"));
    }
    if accept {
        req = req.header("accept", "*/*");
    }
    let req = req
        .header("host", host)
        .header("connection", "close")
        .body(Empty::<Bytes>::new())?;
    let resp = sender.send_request(req).await?;
    let status = resp.status().as_u16();
    let location = resp
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    let mut body = resp.into_body();
    let mut out = Vec::new();
    while out.len() < MAX_OUTPUT {
        match body.frame().await {
            Some(Ok(f)) => {
                if let Ok(d) = f.into_data() {
                    let room = MAX_OUTPUT - out.len();
                    out.extend_from_slice(&d[..d.len().min(room)]);
                }
            }
            Some(Err(e)) => return Err(e.into()),
            None => break,
        }
    }
    Ok((status, location, String::from_utf8_lossy(&out).into_owned()))
}

async fn request(
    url: &Url,
    get: &HttpGet,
    agent: &str,
) -> Result<(u16, Option<String>, String), RequestError> {
    let tcp = super::tcp::connect(&url.host, url.port, Duration::from_secs(3600)).await?;
    if url.https {
        let name = rustls::pki_types::ServerName::try_from(url.host.clone())?;
        let tls = tls_connector()?
            .connect(name, tcp)
            .await
            .map_err(RequestError::TlsConnect)?;
        exchange(tls, url, get, agent).await
    } else {
        exchange(tcp, url, get, agent).await
    }
}

/// GETs `get`, following redirects as upstream's probes do. `agent` is `kube-probe` or
/// `kube-lifecycle`. An `Err` is the Go-style message: `Get "URL": ...`.
pub async fn fetch(get: &HttpGet, agent: &str) -> Result<Response, FetchError> {
    let mut url = Url {
        https: get.https,
        host: get.host.clone(),
        port: get.port,
        path: normalize_path(&get.path),
    };
    let first_host = url.host.clone();
    let mut redirects = 0;
    loop {
        let (status, location, body) =
            request(&url, get, agent)
                .await
                .map_err(|source| FetchError::Request {
                    url: url.display(),
                    source,
                })?;
        let next = match location {
            Some(l) if matches!(status, 301 | 302 | 303 | 307 | 308) => url.join(&l),
            _ => None,
        };
        let Some(next) = next else {
            return Ok(Response {
                status,
                body,
                stopped_redirect: false,
            });
        };
        if next.host != first_host {
            return Ok(Response {
                status,
                body,
                stopped_redirect: true,
            });
        }
        redirects += 1;
        if redirects >= MAX_REDIRECTS {
            return Err(FetchError::TooManyRedirects {
                url: next.display(),
            });
        }
        url = next;
    }
}

/// An httpGet probe.
pub async fn probe(get: &HttpGet, timeout: Duration) -> Outcome {
    let url = Url {
        https: get.https,
        host: get.host.clone(),
        port: get.port,
        path: normalize_path(&get.path),
    };
    let r = match tokio::time::timeout(timeout, fetch(get, "kube-probe")).await {
        Err(_) => {
            return Outcome::failure(format!(
                "Get \"{}\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
                url.display()
            ));
        }
        Ok(Err(e)) => return Outcome::failure(e.to_string()),
        Ok(Ok(r)) => r,
    };
    match r.status {
        200..=299 => Outcome::success(r.body),
        300..=399 if r.stopped_redirect => Outcome::warning(format!(
            "Probe terminated redirects, Response body: {}",
            r.body
        )),
        300..=399 => Outcome::success(r.body),
        s => Outcome::failure(format!("HTTP probe failed with statuscode: {s}")),
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use http_body_util::Full;
    use hyper::service::service_fn;

    use super::*;
    use crate::probes::Verdict;

    /// A local server: `/ok` 200 with a body, `/bad` 503, `/moved` 302 to `/ok`, `/away` 302
    /// to another host, `/loop` 302 to itself, `/big` 200 with 100 KiB, `/echo` the headers.
    async fn server(tls: Option<Arc<rustls::ServerConfig>>) -> u16 {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        tokio::spawn(async move {
            loop {
                let Ok((s, _)) = l.accept().await else { return };
                let tls = tls.clone();
                tokio::spawn(async move {
                    let svc = service_fn(|req: http::Request<hyper::body::Incoming>| async move {
                        let mut r = http::Response::builder();
                        let body = match req.uri().path() {
                            "/ok" => "healthy".to_string(),
                            "/bad" => {
                                r = r.status(503);
                                "down".into()
                            }
                            "/moved" => {
                                r = r.status(302).header("location", "/ok");
                                String::new()
                            }
                            "/away" => {
                                r = r
                                    .status(302)
                                    .header("location", "http://elsewhere.invalid/");
                                "bye".into()
                            }
                            "/loop" => {
                                r = r.status(302).header("location", "/loop");
                                String::new()
                            }
                            "/big" => "y".repeat(100 * 1024),
                            "/echo" => format!(
                                "{} {} {}",
                                req.headers()["host"].to_str().unwrap(),
                                req.headers()["user-agent"].to_str().unwrap(),
                                req.headers()
                                    .get("x-probe")
                                    .map_or("", |v| v.to_str().unwrap())
                            ),
                            _ => {
                                r = r.status(404);
                                String::new()
                            }
                        };
                        Ok::<_, Infallible>(r.body(Full::new(Bytes::from(body))).unwrap())
                    });
                    let b = hyper::server::conn::http1::Builder::new();
                    match tls {
                        Some(cfg) => {
                            let acc = tokio_rustls::TlsAcceptor::from(cfg);
                            if let Ok(s) = acc.accept(s).await {
                                let _ = b.serve_connection(TokioIo::new(s), svc).await;
                            }
                        }
                        None => {
                            let _ = b.serve_connection(TokioIo::new(s), svc).await;
                        }
                    }
                });
            }
        });
        port
    }

    fn get(port: u16, path: &str) -> HttpGet {
        HttpGet {
            host: "127.0.0.1".into(),
            port,
            path: path.into(),
            ..Default::default()
        }
    }

    const T: Duration = Duration::from_secs(5);

    #[tokio::test]
    async fn status_codes_redirects_and_bodies() {
        let port = server(None).await;
        assert_eq!(
            probe(&get(port, "/ok"), T).await,
            Outcome::success("healthy")
        );
        assert_eq!(
            probe(&get(port, "/bad"), T).await,
            Outcome::failure("HTTP probe failed with statuscode: 503")
        );
        assert_eq!(
            probe(&get(port, "moved"), T).await,
            Outcome::success("healthy")
        );
        assert_eq!(
            probe(&get(port, "/away"), T).await,
            Outcome::warning("Probe terminated redirects, Response body: bye")
        );
        let o = probe(&get(port, "/loop"), T).await;
        assert_eq!(o.verdict, Verdict::Failure);
        assert!(o.output.ends_with("stopped after 10 redirects"), "{o:?}");
        let o = probe(&get(port, "/big"), T).await;
        assert_eq!(o.output.len(), MAX_OUTPUT);
        let mut g = get(port, "/echo");
        g.headers = vec![
            ("Host".into(), "example.com".into()),
            ("X-Probe".into(), "yes".into()),
        ];
        assert_eq!(
            probe(&g, T).await,
            Outcome::success("example.com kube-probe/1.33 yes")
        );
    }

    #[tokio::test]
    async fn connection_refused_reads_like_go() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        drop(l);
        assert_eq!(
            probe(&get(port, "/healthz"), T).await,
            Outcome::failure(format!(
                "Get \"http://127.0.0.1:{port}/healthz\": dial tcp 127.0.0.1:{port}: connect: connection refused"
            ))
        );
    }

    #[tokio::test]
    async fn a_slow_server_times_out() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        // Accepts and never answers.
        let _keep = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((s, _)) = l.accept().await {
                held.push(s);
            }
        });
        let o = probe(&get(port, "/"), Duration::from_millis(200)).await;
        assert_eq!(o.verdict, Verdict::Failure);
        assert!(o.output.contains("context deadline exceeded"), "{o:?}");
    }

    #[tokio::test]
    async fn https_without_verification() {
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let key =
            rustls::pki_types::PrivateKeyDer::try_from(cert.signing_key.serialize_der()).unwrap();
        let cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.cert.der().clone()], key)
        .unwrap();
        let port = server(Some(Arc::new(cfg))).await;
        let mut g = get(port, "/ok");
        g.https = true;
        assert_eq!(probe(&g, T).await, Outcome::success("healthy"));
    }

    #[test]
    fn relative_locations() {
        let u = Url {
            https: false,
            host: "h".into(),
            port: 8080,
            path: "/a/b?x=1".into(),
        };
        assert_eq!(u.join("c").unwrap().display(), "http://h:8080/a/c");
        assert_eq!(u.join("/d").unwrap().display(), "http://h:8080/d");
        let abs = u.join("https://other:8443/e?f").unwrap();
        assert_eq!(abs.display(), "https://other:8443/e?f");
    }
}
