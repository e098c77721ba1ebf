//! The agent's TLS bootstrap: from the join token to the node's credentials, as upstream's
//! kubelet bootstraps with a bootstrap token (and k3s's agent with its `K10...` token).
//!
//! 1. `GET /cacerts` without verifying the server (nothing is sent but the request), then
//!    the downloaded CA must hash (SHA-256 of the PEM) to the hash in the token: from here on
//!    the server is verified against that CA.
//! 2. `POST /k1s/v1/node-certificate` with the token as bearer: a CSR for the kubelet's client
//!    certificate (`system:node:NAME` in `system:nodes`), one for the serving certificate
//!    of its HTTPS port (the node name and addresses as names), and one for the node's
//!    cluster-network components (`system:k1s:network:NAME` in `system:k1s:networks`).
//! 3. Keys (made here, never sent) and certificates are kept under `DIR` (`0600` keys): a
//!    restart reuses them while they are valid for 30 more days, are for the same server,
//!    node and addresses; otherwise the agent joins again with its token.
//!
//! A server joining the cluster ([`server_join`]) takes step 1 the same way, then asks for
//! the shared datastore instead of certificates.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use k1s_api::join::ca_hash;
use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};
use serde_json::{Value, json};

/// What the node needs to talk to the API server and to serve its kubelet port.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub ca_pem: String,
    pub client_cert_pem: String,
    pub client_key_pem: String,
    pub serving_cert_pem: String,
    pub serving_key_pem: String,
    /// The cluster-network identity (`system:k1s:network:NODE`), for NetworkPolicy
    /// enforcement.
    pub network_cert_pem: String,
    pub network_key_pem: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials").finish_non_exhaustive()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    #[error("--token: {0}")]
    Token(String),
    #[error("--server {url:?}: {reason}")]
    ServerUrl { url: String, reason: String },
    #[error("cannot reach the server {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error(
        "the server's CA does not match the CA hash in the token (the token is for another \
         cluster, or something is intercepting the connection)"
    )]
    CaMismatch,
    #[error("the server refused the join ({code}): {message}")]
    Refused { code: u16, message: String },
    #[error("cannot {op} {}: {source}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot make a key or a certificate request: {0}")]
    Key(String),
}

/// The CA hash of a full token (`K10<hash>::user:password`).
fn token_hash(token: &str) -> Result<&str, BootstrapError> {
    let rest = token.trim().strip_prefix("K10").ok_or_else(|| {
        BootstrapError::Token(
            "not a full join token (K10<ca-hash>::server:<secret>); a short token cannot \
             verify the server: use the full token from the server's DATA_DIR/server/token"
                .into(),
        )
    })?;
    let (hash, creds) = rest
        .split_once("::")
        .ok_or_else(|| BootstrapError::Token("a K10 token needs '::' after the CA hash".into()))?;
    if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) || creds.is_empty() {
        return Err(BootstrapError::Token(
            "the CA hash must be 64 hex digits, followed by '::' and the credentials".into(),
        ));
    }
    Ok(hash)
}

/// What the saved credentials were issued for.
#[derive(Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Issued {
    server: String,
    node: String,
    addresses: Vec<IpAddr>,
}

const FILES: [&str; 7] = [
    "ca.crt",
    "client.crt",
    "client.key",
    "serving.crt",
    "serving.key",
    "network.crt",
    "network.key",
];
/// Credentials expiring sooner than this are renewed at start.
const RENEW_BEFORE: jiff::SignedDuration = jiff::SignedDuration::from_hours(24 * 30);

/// The node's credentials in `dir`, joining `server_url` with `token` when there are none
/// usable for `node` and `addresses`.
pub async fn load_or_join(
    dir: &Path,
    server_url: &str,
    token: &str,
    node: &str,
    addresses: &[IpAddr],
) -> Result<Credentials, BootstrapError> {
    let issued = Issued {
        server: server_url.trim_end_matches('/').to_owned(),
        node: node.to_owned(),
        addresses: addresses.to_vec(),
    };
    if let Some(c) = load(dir, &issued) {
        tracing::info!(dir = %dir.display(), "using the node credentials issued before");
        return Ok(c);
    }
    let creds = join(&issued.server, token, node, addresses).await?;
    save(dir, &issued, &creds)?;
    tracing::info!(node, server = %issued.server, "joined: node credentials issued");
    Ok(creds)
}

fn load(dir: &Path, want: &Issued) -> Option<Credentials> {
    let issued: Issued =
        serde_json::from_slice(&std::fs::read(dir.join("issued.json")).ok()?).ok()?;
    if issued != *want {
        tracing::info!("the saved node credentials are for another server, node or address");
        return None;
    }
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
    let creds = Credentials {
        ca_pem: read(FILES[0])?,
        client_cert_pem: read(FILES[1])?,
        client_key_pem: read(FILES[2])?,
        serving_cert_pem: read(FILES[3])?,
        serving_key_pem: read(FILES[4])?,
        // Missing in credentials saved by an older k1s: then the agent joins again.
        network_cert_pem: read(FILES[5])?,
        network_key_pem: read(FILES[6])?,
    };
    let fresh = |pem: &str| {
        let der = CertificateDer::from_pem_slice(pem.as_bytes()).ok()?;
        let (_, cert) = x509_parser::parse_x509_certificate(&der).ok()?;
        let not_after = cert.validity().not_after.timestamp();
        Some(not_after > (jiff::Timestamp::now() + RENEW_BEFORE).as_second())
    };
    if fresh(&creds.client_cert_pem)?
        && fresh(&creds.serving_cert_pem)?
        && fresh(&creds.network_cert_pem)?
    {
        Some(creds)
    } else {
        tracing::info!("the saved node certificates expire soon: joining again");
        None
    }
}

fn save(dir: &Path, issued: &Issued, c: &Credentials) -> Result<(), BootstrapError> {
    use std::os::unix::fs::OpenOptionsExt;
    let io = |op, path: PathBuf| move |source| BootstrapError::Io { op, path, source };
    std::fs::create_dir_all(dir).map_err(io("create", dir.to_path_buf()))?;
    // Written last: until then a crash leaves no record that could pair a new certificate
    // with an old key.
    match std::fs::remove_file(dir.join("issued.json")) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(io("remove", dir.join("issued.json"))(e));
        }
        _ => {}
    }
    let issued = serde_json::to_string(issued).unwrap_or_default();
    let all = [
        (FILES[0], &c.ca_pem),
        (FILES[1], &c.client_cert_pem),
        (FILES[2], &c.client_key_pem),
        (FILES[3], &c.serving_cert_pem),
        (FILES[4], &c.serving_key_pem),
        (FILES[5], &c.network_cert_pem),
        (FILES[6], &c.network_key_pem),
        ("issued.json", &issued),
    ];
    for (name, bytes) in all {
        let path = dir.join(name);
        let tmp = dir.join(format!(".{name}.tmp"));
        let write = || -> std::io::Result<()> {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(bytes.as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)
        };
        write().map_err(io("write", path.clone()))?;
    }
    Ok(())
}

/// A new key and a PEM certificate request for it.
fn key_and_csr(cn: &str) -> Result<(String, String), BootstrapError> {
    let key = rcgen::KeyPair::generate().map_err(|e| BootstrapError::Key(e.to_string()))?;
    let mut params = rcgen::CertificateParams::default();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, cn);
    let csr = params
        .serialize_request(&key)
        .and_then(|r| r.pem())
        .map_err(|e| BootstrapError::Key(e.to_string()))?;
    Ok((key.serialize_pem(), csr))
}

async fn join(
    server: &str,
    token: &str,
    node: &str,
    addresses: &[IpAddr],
) -> Result<Credentials, BootstrapError> {
    let (target, ca) = pinned_ca(server, token).await?;
    let (client_key_pem, csr) = key_and_csr(&format!("system:node:{node}"))?;
    let (serving_key_pem, serving_csr) = key_and_csr(node)?;
    let (network_key_pem, network_csr) = key_and_csr(&format!("system:k1s:network:{node}"))?;
    let body = json!({
        "nodeName": node,
        "csr": csr,
        "servingCsr": serving_csr,
        "networkCsr": network_csr,
        "addresses": addresses.iter().map(ToString::to_string).collect::<Vec<_>>(),
    });
    let (code, reply) = target
        .request(
            verified_config(&ca)?,
            "POST",
            "/k1s/v1/node-certificate",
            Some(token.trim()),
            Some(serde_json::to_vec(&body).unwrap_or_default()),
        )
        .await?;
    let reply = answer(code, &reply, 201)?;
    let field = |k: &str| {
        reply[k]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| BootstrapError::Refused {
                code,
                message: format!("the answer has no {k}"),
            })
    };
    Ok(Credentials {
        ca_pem: ca,
        client_cert_pem: field("certificate")?,
        client_key_pem,
        serving_cert_pem: field("servingCertificate")?,
        serving_key_pem,
        network_cert_pem: field("networkCertificate")?,
        network_key_pem,
    })
}

/// Step 1: the server's CA, checked against the token's hash.
async fn pinned_ca(server: &str, token: &str) -> Result<(Target, String), BootstrapError> {
    let hash = token_hash(token)?;
    let target = Target::parse(server)?;
    // For `/cacerts` only: any server certificate (the CA it returns is checked against the
    // token's hash before anything is trusted or sent).
    let insecure = crate::probes::http::insecure_client_config()
        .map_err(|e| BootstrapError::Key(e.to_string()))?;
    let (code, ca) = target
        .request(insecure, "GET", "/cacerts", None, None)
        .await?;
    let ca = String::from_utf8_lossy(&ca).into_owned();
    if code != 200 {
        return Err(BootstrapError::Refused {
            code,
            message: format!("GET /cacerts: {}", ca.trim()),
        });
    }
    if !ca_hash(&ca).eq_ignore_ascii_case(hash) {
        return Err(BootstrapError::CaMismatch);
    }
    Ok((target, ca))
}

/// For a server joining the cluster at `server` (`k1s server --server URL --token TOKEN`):
/// the cluster's datastore as `GET /k1s/v1/server-join` answers it (`datastoreEndpoint`,
/// and the etcd TLS PEMs when set), from a server verified as for an agent.
pub async fn server_join(server: &str, token: &str) -> Result<Value, BootstrapError> {
    let (target, ca) = pinned_ca(server, token).await?;
    let (code, reply) = target
        .request(
            verified_config(&ca)?,
            "GET",
            "/k1s/v1/server-join",
            Some(token.trim()),
            None,
        )
        .await?;
    answer(code, &reply, 200)
}

/// A JSON answer with status `code`: the object if `code` is `expected`, else the refusal with
/// the server's message (a `Status` or plain text).
fn answer(code: u16, body: &[u8], expected: u16) -> Result<Value, BootstrapError> {
    let reply: Value = serde_json::from_slice(body)
        .unwrap_or_else(|_| json!({"message": String::from_utf8_lossy(body).trim().to_owned()}));
    if code != expected {
        return Err(BootstrapError::Refused {
            code,
            message: reply["message"].as_str().unwrap_or_default().to_owned(),
        });
    }
    Ok(reply)
}

/// The host and port of a server URL (`https://HOST[:PORT]`, 443 by default).
pub fn server_address(url: &str) -> Result<(String, u16), BootstrapError> {
    let t = Target::parse(url)?;
    Ok((t.host, t.port))
}

/// Where the server is.
struct Target {
    url: String,
    host: String,
    port: u16,
}

impl Target {
    fn parse(url: &str) -> Result<Self, BootstrapError> {
        let bad = |reason: &str| BootstrapError::ServerUrl {
            url: url.to_owned(),
            reason: reason.to_owned(),
        };
        let uri: http::Uri = url.parse().map_err(|_| bad("not a URL"))?;
        if uri.scheme_str() != Some("https") {
            return Err(bad("must be https://HOST:PORT"));
        }
        let host = uri
            .host()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| bad("no host"))?;
        Ok(Self {
            url: url.to_owned(),
            host: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned(),
            port: uri.port_u16().unwrap_or(443),
        })
    }

    /// One request over a new connection: the status and the body.
    async fn request(
        &self,
        config: rustls::ClientConfig,
        method: &str,
        path: &str,
        bearer: Option<&str>,
        body: Option<Vec<u8>>,
    ) -> Result<(u16, Vec<u8>), BootstrapError> {
        let fail = |e: &dyn std::fmt::Display| BootstrapError::Unreachable {
            url: self.url.clone(),
            reason: e.to_string(),
        };
        let name = ServerName::try_from(self.host.clone()).map_err(|e| fail(&e))?;
        let exchange = async {
            let tcp = tokio::net::TcpStream::connect((self.host.as_str(), self.port))
                .await
                .map_err(|e| fail(&e))?;
            let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
                .connect(name, tcp)
                .await
                .map_err(|e| fail(&e))?;
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
                .await
                .map_err(|e| fail(&e))?;
            // Not tracked: the connection of this one request ends when `sender` is dropped.
            tokio::spawn(conn);
            let mut req = hyper::Request::builder()
                .method(method)
                .uri(path)
                .header(http::header::HOST, format!("{}:{}", self.host, self.port))
                .header(http::header::CONTENT_TYPE, "application/json");
            if let Some(t) = bearer {
                req = req.header(http::header::AUTHORIZATION, format!("Bearer {t}"));
            }
            let req = req
                .body(Full::new(Bytes::from(body.unwrap_or_default())))
                .map_err(|e| fail(&e))?;
            let resp = sender.send_request(req).await.map_err(|e| fail(&e))?;
            let code = resp.status().as_u16();
            let bytes = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| fail(&e))?
                .to_bytes();
            Ok((code, bytes.to_vec()))
        };
        tokio::time::timeout(std::time::Duration::from_secs(30), exchange)
            .await
            .unwrap_or_else(|_| Err(fail(&"no answer in 30 s")))
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Trusts `ca_pem` only.
fn verified_config(ca_pem: &str) -> Result<rustls::ClientConfig, BootstrapError> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        let c = c.map_err(|e| BootstrapError::Refused {
            code: 200,
            message: format!("/cacerts is not PEM: {e}"),
        })?;
        let _ = roots.add(c);
    }
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| BootstrapError::Key(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_must_carry_a_ca_hash() {
        let h = "a".repeat(64);
        assert_eq!(token_hash(&format!("K10{h}::server:secret12")).unwrap(), h);
        for bad in [
            "secret-only",
            "K10abc::server:x",
            &format!("K10{h}server:x"),
            &format!("K10{h}::"),
        ] {
            assert!(token_hash(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn saved_credentials_are_reused_only_for_the_same_join() {
        let dir = tempfile::tempdir().unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["n1".into()])
            .unwrap()
            .self_signed(&key)
            .unwrap()
            .pem();
        let creds = Credentials {
            ca_pem: cert.clone(),
            client_cert_pem: cert.clone(),
            client_key_pem: key.serialize_pem(),
            serving_cert_pem: cert.clone(),
            serving_key_pem: key.serialize_pem(),
            network_cert_pem: cert,
            network_key_pem: key.serialize_pem(),
        };
        let issued = Issued {
            server: "https://s:6443".into(),
            node: "n1".into(),
            addresses: vec![IpAddr::from([10, 0, 0, 1])],
        };
        save(dir.path(), &issued, &creds).unwrap();
        let mode = std::fs::metadata(dir.path().join("client.key")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(mode.permissions().mode() & 0o777, 0o600);
        assert_eq!(load(dir.path(), &issued), Some(creds));
        let other = Issued {
            node: "n2".into(),
            ..issued
        };
        assert_eq!(load(dir.path(), &other), None);
    }
}
