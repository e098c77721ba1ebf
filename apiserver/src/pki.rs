//! The cluster PKI of `k1s server`, laid out the way k3s does it.
//!
//! Owns the on-disk PKI under `<data-dir>/tls` (directory mode 0700):
//!
//! | file | what | mode |
//! |------|------|------|
//! | `ca.crt`, `ca.key` | the cluster CA (10 years), created once and never rotated here | 0644, 0600 |
//! | `serving.crt`, `serving.key` | the API server's serving certificate (1 year, server auth) | 0644, 0600 |
//! | `admin.crt`, `admin.key` | the admin client certificate, `system:admin` in `system:masters` (1 year, client auth) | 0644, 0600 |
//!
//! and the admin kubeconfig written at `--write-kubeconfig` (mode `--write-kubeconfig-mode`).
//!
//! Every file is written atomically (temporary file, fsync, rename, fsync of the directory), so a
//! crash never leaves a half-written key. On every start [`Pki::load_or_create`] keeps the CA and
//! re-issues (from that same CA) a leaf certificate that is missing, does not match its key, is
//! not signed by the CA, expires within 90 days or — for the serving certificate — no longer
//! covers the configured names (a new `--tls-san`, a new node IP). Files that exist but cannot be
//! parsed are an error naming the file and the way out, never silently replaced.
//!
//! It must not touch anything else in the data directory (the datastore lives beside it), must
//! never replace or rotate the cluster CA on its own (that invalidates every kubeconfig and
//! client certificate issued so far), and does not decide who a client is: [`Pki::server_config`]
//! only asks for client certificates chained to the cluster CA and accepts clients without one;
//! authentication reads the verified peer certificate later.

use std::collections::BTreeSet;
use std::fmt;
use std::fs::{self, DirBuilder};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use jiff::{SignedDuration, Timestamp};
use rcgen::string::Ia5String;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PublicKeyData, SanType,
};
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use x509_parser::extensions::{GeneralName, ParsedExtension};

use crate::auth::ClientCertCheck;

/// File names under the tls directory.
pub const CA_CERT: &str = "ca.crt";
/// The cluster CA's private key.
pub const CA_KEY: &str = "ca.key";
/// The API server's serving certificate.
pub const SERVING_CERT: &str = "serving.crt";
/// The serving certificate's private key.
pub const SERVING_KEY: &str = "serving.key";
/// The admin client certificate (`system:admin`, `system:masters`).
pub const ADMIN_CERT: &str = "admin.crt";
/// The admin client certificate's private key.
pub const ADMIN_KEY: &str = "admin.key";
/// The CA of the aggregation layer's front proxy (`requestheader-client-ca-file`): kept apart
/// from the cluster CA, as upstream's front-proxy CA, so that no certificate the cluster CA
/// issues can speak for users to an extension API server.
pub const REQUEST_HEADER_CA_CERT: &str = "request-header-ca.crt";
/// Its private key.
pub const REQUEST_HEADER_CA_KEY: &str = "request-header-ca.key";
/// The client certificate the API server presents to extension API servers.
pub const FRONT_PROXY_CERT: &str = "front-proxy-client.crt";
/// Its private key.
pub const FRONT_PROXY_KEY: &str = "front-proxy-client.key";
/// The common name of [`FRONT_PROXY_CERT`] (`requestheader-allowed-names`).
pub const FRONT_PROXY_CN: &str = "front-proxy-client";

/// Validity of the cluster CA (k3s: 10 years).
const CA_VALIDITY: SignedDuration = SignedDuration::from_hours(24 * 3650);
/// Validity of leaf certificates (k3s: 1 year).
const LEAF_VALIDITY: SignedDuration = SignedDuration::from_hours(24 * 365);
/// Leaf certificates are re-issued when they expire within this window (k3s: 90 days).
const RENEW_BEFORE: SignedDuration = SignedDuration::from_hours(24 * 90);
/// `notBefore` is back-dated this much, for nodes whose clocks lag a little.
const BACKDATE: SignedDuration = SignedDuration::from_hours(1);

const KEY_MODE: u32 = 0o600;
const CERT_MODE: u32 = 0o644;
const DIR_MODE: u32 = 0o700;

/// DNS names every serving certificate carries (k3s adds the same).
const FIXED_DNS_SANS: [&str; 5] = [
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
];

/// What the PKI is created for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PkiConfig {
    /// `<data-dir>/tls`.
    pub dir: PathBuf,
    /// This node's hostname, a SAN of the serving certificate (skipped with a warning if it is
    /// not a valid DNS name).
    pub hostname: String,
    /// This node's addresses, IP SANs of the serving certificate.
    pub node_ips: Vec<IpAddr>,
    /// `--tls-san`: more names of the serving certificate, each a DNS name or an IP address.
    pub tls_sans: Vec<String>,
}

/// One certificate and its private key, as PEM, with the files they live in.
#[derive(Clone, PartialEq, Eq)]
pub struct CertKeyPem {
    /// Where the certificate is stored.
    pub cert_path: PathBuf,
    /// Where the private key is stored.
    pub key_path: PathBuf,
    /// The certificate, PEM (`CERTIFICATE`).
    pub cert_pem: String,
    /// The private key, PEM (`PRIVATE KEY`, PKCS#8).
    pub key_pem: String,
}

impl fmt::Debug for CertKeyPem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertKeyPem")
            .field("cert_path", &self.cert_path)
            .field("key_path", &self.key_path)
            .field("cert_pem", &self.cert_pem)
            .field("key_pem", &"[elided]")
            .finish()
    }
}

/// The loaded cluster PKI.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pki {
    /// `<data-dir>/tls`.
    pub dir: PathBuf,
    /// The cluster CA.
    pub ca: CertKeyPem,
    /// The API server's serving certificate.
    pub serving: CertKeyPem,
    /// The admin client certificate.
    pub admin: CertKeyPem,
    /// The front proxy's CA ([`REQUEST_HEADER_CA_CERT`]).
    pub request_header_ca: CertKeyPem,
    /// The front proxy's client certificate ([`FRONT_PROXY_CERT`]).
    pub front_proxy: CertKeyPem,
}

/// What is wrong with a file that does not hold what it should ([`PkiError::Corrupt`]): the
/// parser's error, or a sentence.
pub type Reason = Box<dyn std::error::Error + Send + Sync>;

/// A `--tls-san` (or the hostname) that is neither an IP address nor a DNS name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SanError {
    #[error("empty")]
    Empty,
    #[error("longer than 253 characters")]
    TooLong,
    #[error("empty DNS label")]
    EmptyLabel,
    #[error("DNS label {0:?} is longer than 63 characters")]
    LabelTooLong(String),
    #[error("not an IP address, and {0:?} is not a DNS label (letters, digits, '-')")]
    NotALabel(String),
    #[error("DNS label {0:?} starts or ends with '-'")]
    Hyphen(String),
}

/// A certificate k1s cannot read.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error(transparent)]
    Parse(#[from] x509_parser::nom::Err<x509_parser::error::X509Error>),
    #[error("trailing data after the certificate")]
    TrailingData,
    #[error(transparent)]
    SubjectAltName(#[from] x509_parser::error::X509Error),
    #[error("bad IP in subjectAltName")]
    SanIp,
}

/// Why the PKI could not be loaded, created or used.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// A file system operation failed.
    #[error("cannot {op} {}: {source}", path.display())]
    Io {
        /// What was being done ("read", "write", "create directory", ...).
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A file exists but does not hold what it should.
    #[error("{} is not a usable {what}: {reason}; {remedy}", path.display())]
    Corrupt {
        /// The bad file.
        path: PathBuf,
        /// What it should hold.
        what: &'static str,
        /// What is wrong with it.
        #[source]
        reason: Reason,
        /// What the operator can do about it.
        remedy: String,
    },
    /// One half of the cluster CA is missing.
    #[error(
        "{} exists but {} does not; restore the missing file from a backup, or remove {} to \
         create a new cluster CA (this invalidates every kubeconfig and client certificate \
         issued so far)",
        present.display(), missing.display(), dir.display()
    )]
    CaIncomplete {
        /// The tls directory.
        dir: PathBuf,
        /// The file that exists.
        present: PathBuf,
        /// The file that does not.
        missing: PathBuf,
    },
    /// `ca.crt` and `ca.key` do not belong together.
    #[error(
        "{} was not issued for the private key in {}; restore the matching pair from a backup, \
         or remove {} to create a new cluster CA (this invalidates every kubeconfig and client \
         certificate issued so far)",
        cert.display(), key.display(), dir.display()
    )]
    CaKeyMismatch {
        /// The tls directory.
        dir: PathBuf,
        /// `ca.crt`.
        cert: PathBuf,
        /// `ca.key`.
        key: PathBuf,
    },
    /// The cluster CA has expired; k1s does not rotate it on its own.
    #[error(
        "the cluster CA {} expired at {not_after}; remove {} to create a new cluster CA (this \
         invalidates every kubeconfig and client certificate issued so far)",
        path.display(), dir.display()
    )]
    CaExpired {
        /// The tls directory.
        dir: PathBuf,
        /// `ca.crt`.
        path: PathBuf,
        /// When it expired (RFC 3339, UTC).
        not_after: String,
    },
    /// A `--tls-san` is neither an IP address nor a DNS name.
    #[error("invalid --tls-san {value:?}: {reason}")]
    InvalidSan {
        /// The flag value.
        value: String,
        /// What is wrong with it.
        #[source]
        reason: SanError,
    },
    /// Key or certificate generation failed.
    #[error("cannot generate the {what}: {source}")]
    Generate {
        /// What was being generated.
        what: &'static str,
        /// The rcgen error.
        #[source]
        source: rcgen::Error,
    },
    /// A certificate k1s just issued fails the checks applied to loaded ones.
    #[error(
        "the newly issued {} fails its own checks ({reason}); {} may hold a CA certificate \
         whose subject k1s cannot sign with — restore the CA k1s created, or remove {} to \
         create a new one (this invalidates every kubeconfig and client certificate issued so \
         far)",
        path.display(), ca.display(), dir.display()
    )]
    SelfCheck {
        /// The tls directory.
        dir: PathBuf,
        /// `ca.crt`.
        ca: PathBuf,
        /// The new certificate.
        path: PathBuf,
        /// The failed check.
        reason: String,
    },
    /// rustls rejected a certificate or key.
    #[error("cannot use {} for TLS: {source}", path.display())]
    Tls {
        /// The certificate or key file.
        path: PathBuf,
        /// The rustls error.
        #[source]
        source: rustls::Error,
    },
    /// The certificate verifier could not be built from the CA.
    #[error("cannot build a certificate verifier from {}: {source}", path.display())]
    Verifier {
        /// `ca.crt`.
        path: PathBuf,
        /// The rustls error.
        #[source]
        source: rustls::server::VerifierBuilderError,
    },
    /// The kubeconfig's server URL is unusable.
    #[error("invalid kubeconfig server URL {url:?}: {reason}")]
    ServerUrl {
        /// The URL.
        url: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// Loads the PKI in `cfg.dir`, creating or renewing what is needed. See [`Pki::load_or_create`].
pub fn load_or_create(cfg: &PkiConfig) -> Result<Pki, PkiError> {
    Pki::load_or_create(cfg)
}

impl Pki {
    /// Loads the PKI in `cfg.dir`, creating or renewing what is needed.
    ///
    /// On the first start creates the directory (0700), the cluster CA, the serving and the
    /// admin certificate. Later starts load them, keep the CA, and re-issue the serving
    /// certificate when it no longer covers the configured names or expires within 90 days,
    /// and the admin certificate when it expires within 90 days.
    pub fn load_or_create(cfg: &PkiConfig) -> Result<Pki, PkiError> {
        let sans = required_sans(cfg)?;
        ensure_dir(&cfg.dir)?;
        let now = Timestamp::now();
        let ca = ensure_ca(&cfg.dir, CaKind::Cluster, now)?;
        let serving = ensure_leaf(&cfg.dir, &ca, LeafKind::Serving, &sans, now)?;
        let admin = ensure_leaf(&cfg.dir, &ca, LeafKind::Admin, &sans, now)?;
        let rh_ca = ensure_ca(&cfg.dir, CaKind::RequestHeader, now)?;
        let front_proxy = ensure_leaf(&cfg.dir, &rh_ca, LeafKind::FrontProxy, &sans, now)?;
        Ok(Pki {
            dir: cfg.dir.clone(),
            ca: ca.pem,
            serving,
            admin,
            request_header_ca: rh_ca.pem,
            front_proxy,
        })
    }

    /// The per-connection check of client certificates against the cluster CA.
    pub fn client_cert_check(&self) -> Result<ClientCertCheck, PkiError> {
        let roots = root_store(&self.ca.cert_path, &self.ca.cert_pem)?;
        let strict = WebPkiClientVerifier::builder_with_provider(roots, provider())
            .allow_unauthenticated()
            .build()
            .map_err(|source| PkiError::Verifier {
                path: self.ca.cert_path.clone(),
                source,
            })?;
        Ok(ClientCertCheck::new(strict))
    }

    /// Signs a client certificate for `user` (in `group`, if any), valid for `validity`, by
    /// the cluster CA. With `csr_pem` (a PKCS#10 request) the certificate is for the request's
    /// key and no key is returned; without, a new key is made and returned (PKCS#8 PEM).
    /// (One group only: rcgen keeps one value per subject attribute.)
    pub fn issue_client_cert(
        &self,
        user: &str,
        group: Option<&str>,
        validity: SignedDuration,
        csr_pem: Option<&str>,
    ) -> Result<(String, Option<String>), PkiError> {
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        if let Some(g) = group {
            dn.push(DnType::OrganizationName, g);
        }
        dn.push(DnType::CommonName, user);
        params.distinguished_name = dn;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.issue("client certificate", params, validity, csr_pem)
    }

    /// Signs a serving certificate for a kubelet's HTTPS port: subject `system:node:NAME` in
    /// `system:nodes` (as upstream's kubelet serving certificates), the node name and `ips`
    /// as its names, for the key of `csr_pem` (or a new key, returned too).
    pub fn issue_kubelet_serving_cert(
        &self,
        node: &str,
        ips: &[IpAddr],
        validity: SignedDuration,
        csr_pem: Option<&str>,
    ) -> Result<(String, Option<String>), PkiError> {
        let gen_err = |source| PkiError::Generate {
            what: "kubelet serving certificate",
            source,
        };
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::OrganizationName, "system:nodes");
        dn.push(DnType::CommonName, format!("system:node:{node}"));
        params.distinguished_name = dn;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let mut sans = vec![SanType::DnsName(
            Ia5String::try_from(node).map_err(gen_err)?,
        )];
        sans.extend(ips.iter().map(|ip| SanType::IpAddress(*ip)));
        params.subject_alt_names = sans;
        self.issue("kubelet serving certificate", params, validity, csr_pem)
    }

    /// Signs `params` (a leaf, valid for `validity` from now, back-dated a little) by the
    /// cluster CA, for the key of `csr_pem`, or for a new key that is returned too.
    fn issue(
        &self,
        what: &'static str,
        mut params: CertificateParams,
        validity: SignedDuration,
        csr_pem: Option<&str>,
    ) -> Result<(String, Option<String>), PkiError> {
        let gen_err = |source| PkiError::Generate { what, source };
        let ca_key = KeyPair::from_pem(&self.ca.key_pem).map_err(|e| PkiError::Corrupt {
            path: self.ca.key_path.clone(),
            what: "CA private key",
            reason: e.into(),
            remedy: ca_remedy(&self.dir),
        })?;
        let issuer = Issuer::from_ca_cert_pem(&self.ca.cert_pem, ca_key).map_err(gen_err)?;
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.use_authority_key_identifier_extension = true;
        let now = Timestamp::now();
        params.not_before = rcgen_time(now - BACKDATE);
        params.not_after = rcgen_time(now + validity);
        match csr_pem {
            Some(csr) => {
                let csr = rcgen::CertificateSigningRequestParams::from_pem(csr).map_err(gen_err)?;
                let cert = params
                    .signed_by(&csr.public_key, &issuer)
                    .map_err(gen_err)?;
                Ok((cert.pem(), None))
            }
            None => {
                let key = KeyPair::generate().map_err(gen_err)?;
                let cert = params.signed_by(&key, &issuer).map_err(gen_err)?;
                Ok((cert.pem(), Some(key.serialize_pem())))
            }
        }
    }

    /// A rustls server configuration presenting the serving certificate, offering ALPN `h2`
    /// and `http/1.1`, and asking for (but not requiring) a client certificate. Whether a
    /// presented certificate chains to the cluster CA is checked per connection
    /// ([`Self::client_cert_check`]), so a foreign one gets a 401 instead of a failed handshake.
    pub fn server_config(&self) -> Result<ServerConfig, PkiError> {
        let provider = provider();
        let verifier = self.client_cert_check()?.deferred_verifier();
        let chain = CertificateDer::pem_slice_iter(self.serving.cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| corrupt_leaf_pem(&self.serving, true, e.into()))?;
        if chain.is_empty() {
            return Err(corrupt_leaf_pem(
                &self.serving,
                true,
                "no CERTIFICATE block".into(),
            ));
        }
        let key = PrivateKeyDer::from_pem_slice(self.serving.key_pem.as_bytes())
            .map_err(|e| corrupt_leaf_pem(&self.serving, false, e.into()))?;
        let tls_err = |source| PkiError::Tls {
            path: self.serving.cert_path.clone(),
            source,
        };
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(tls_err)?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, key)
            .map_err(tls_err)?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(config)
    }

    /// The admin kubeconfig (YAML): cluster, user and context `default`, talking to
    /// `server_url` with the admin certificate and trusting the cluster CA.
    pub fn kubeconfig(&self, server_url: &str) -> Result<String, PkiError> {
        let bad = |reason| PkiError::ServerUrl {
            url: server_url.to_owned(),
            reason,
        };
        if server_url.is_empty() {
            return Err(bad("empty"));
        }
        if server_url.chars().any(char::is_control) {
            return Err(bad("contains control characters"));
        }
        // A JSON string is a valid YAML double-quoted scalar.
        let server = serde_json::Value::from(server_url).to_string();
        let ca = BASE64.encode(&self.ca.cert_pem);
        let cert = BASE64.encode(&self.admin.cert_pem);
        let key = BASE64.encode(&self.admin.key_pem);
        Ok(format!(
            "apiVersion: v1
kind: Config
clusters:
- name: default
  cluster:
    server: {server}
    certificate-authority-data: {ca}
users:
- name: default
  user:
    client-certificate-data: {cert}
    client-key-data: {key}
contexts:
- name: default
  context:
    cluster: default
    user: default
current-context: default
preferences: {{}}
"
        ))
    }

    /// Writes the admin kubeconfig to `path` (creating its parent directories) atomically,
    /// with file mode `mode` (k3s `--write-kubeconfig-mode`; 0600 is the safe default).
    pub fn write_kubeconfig(
        &self,
        path: &Path,
        mode: u32,
        server_url: &str,
    ) -> Result<(), PkiError> {
        let yaml = self.kubeconfig(server_url)?;
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs::create_dir_all(parent).map_err(io_err("create directory", parent))?;
        }
        write_atomic(path, yaml.as_bytes(), mode & 0o7777)
    }
}

// ---------------------------------------------------------------------------------------------
// Subject alternative names

/// A subject alternative name of the serving certificate.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum San {
    /// Lower-case DNS name.
    Dns(String),
    Ip(IpAddr),
}

impl fmt::Display for San {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            San::Dns(name) => f.write_str(name),
            San::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

/// An IP address (brackets allowed around IPv6) or a DNS name (`*.` allowed as the first label).
fn parse_san(value: &str) -> Result<San, SanError> {
    let v = value.trim();
    if v.is_empty() {
        return Err(SanError::Empty);
    }
    let unbracketed = v
        .strip_prefix('[')
        .and_then(|s| s.strip_suffix(']'))
        .unwrap_or(v);
    if let Ok(ip) = unbracketed.parse::<IpAddr>() {
        return Ok(San::Ip(ip));
    }
    let name = v.strip_suffix('.').unwrap_or(v).to_ascii_lowercase();
    if name.len() > 253 {
        return Err(SanError::TooLong);
    }
    for (i, label) in name.split('.').enumerate() {
        if label.is_empty() {
            return Err(SanError::EmptyLabel);
        }
        if label == "*" && i == 0 && name.contains('.') {
            continue;
        }
        if label.len() > 63 {
            return Err(SanError::LabelTooLong(label.to_owned()));
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            return Err(SanError::NotALabel(label.to_owned()));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(SanError::Hyphen(label.to_owned()));
        }
    }
    Ok(San::Dns(name))
}

/// The names the serving certificate must cover.
fn required_sans(cfg: &PkiConfig) -> Result<BTreeSet<San>, PkiError> {
    let mut sans: BTreeSet<San> = FIXED_DNS_SANS
        .iter()
        .map(|n| San::Dns((*n).to_owned()))
        .collect();
    sans.insert(San::Ip(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    sans.insert(San::Ip(IpAddr::V6(Ipv6Addr::LOCALHOST)));
    if !cfg.hostname.trim().is_empty() {
        match parse_san(&cfg.hostname) {
            Ok(san) => {
                sans.insert(san);
            }
            Err(reason) => tracing::warn!(
                hostname = %cfg.hostname,
                %reason,
                "hostname is not a valid DNS name; leaving it out of the serving certificate"
            ),
        }
    }
    sans.extend(cfg.node_ips.iter().map(|ip| San::Ip(*ip)));
    for value in &cfg.tls_sans {
        let san = parse_san(value).map_err(|reason| PkiError::InvalidSan {
            value: value.clone(),
            reason,
        })?;
        sans.insert(san);
    }
    Ok(sans)
}

// ---------------------------------------------------------------------------------------------
// The cluster CA

/// The loaded cluster CA, ready to sign.
struct Ca {
    pem: CertKeyPem,
    info: CertInfo,
    issuer: Issuer<'static, KeyPair>,
    /// For verifying what it issued.
    roots: Arc<RootCertStore>,
}

fn ca_remedy(dir: &Path) -> String {
    format!(
        "restore it from a backup, or remove {} to create a new cluster CA (this invalidates \
         every kubeconfig and client certificate issued so far)",
        dir.display()
    )
}

/// The two CAs k1s keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CaKind {
    /// The cluster CA: serving, client and kubelet certificates.
    Cluster,
    /// The front proxy's CA: only the front proxy's client certificate.
    RequestHeader,
}

impl CaKind {
    fn files(self) -> (&'static str, &'static str) {
        match self {
            CaKind::Cluster => (CA_CERT, CA_KEY),
            CaKind::RequestHeader => (REQUEST_HEADER_CA_CERT, REQUEST_HEADER_CA_KEY),
        }
    }

    fn what(self) -> &'static str {
        match self {
            CaKind::Cluster => "cluster CA",
            CaKind::RequestHeader => "front proxy CA",
        }
    }

    fn common_name(self) -> &'static str {
        match self {
            CaKind::Cluster => "k1s-server-ca",
            CaKind::RequestHeader => "k1s-request-header-ca",
        }
    }

    /// The leaf certificates it issues (an interrupted first start left only its key if
    /// none of them exists).
    fn leaves(self) -> &'static [&'static str] {
        match self {
            CaKind::Cluster => &[SERVING_CERT, ADMIN_CERT],
            CaKind::RequestHeader => &[FRONT_PROXY_CERT],
        }
    }
}

fn ensure_ca(dir: &Path, kind: CaKind, now: Timestamp) -> Result<Ca, PkiError> {
    let (cert_file, key_file) = kind.files();
    let cert_path = dir.join(cert_file);
    let key_path = dir.join(key_file);
    let has_cert = exists(&cert_path)?;
    let has_key = exists(&key_path)?;
    let incomplete = |present: &Path, missing: &Path| PkiError::CaIncomplete {
        dir: dir.to_owned(),
        present: present.to_owned(),
        missing: missing.to_owned(),
    };
    match (has_cert, has_key) {
        (true, true) => {}
        (true, false) => return Err(incomplete(&cert_path, &key_path)),
        (false, true) => {
            // The key is written before the certificate, so a first start that crashed in
            // between leaves just the key. Nothing can have been issued from it yet unless a
            // leaf certificate exists.
            for leaf in kind.leaves() {
                if exists(&dir.join(leaf))? {
                    return Err(incomplete(&key_path, &cert_path));
                }
            }
            tracing::warn!(
                path = %key_path.display(),
                "found a CA key without its certificate (an interrupted first start); creating the CA again"
            );
            create_ca(&cert_path, &key_path, kind, now)?;
        }
        (false, false) => create_ca(&cert_path, &key_path, kind, now)?,
    }
    load_ca(dir, kind, now)
}

fn create_ca(
    cert_path: &Path,
    key_path: &Path,
    kind: CaKind,
    now: Timestamp,
) -> Result<(), PkiError> {
    let gen_err = |source| PkiError::Generate {
        what: kind.what(),
        source,
    };
    let key = KeyPair::generate().map_err(gen_err)?;
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(
        DnType::CommonName,
        format!("{}@{}", kind.common_name(), now.as_second()),
    );
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.not_before = rcgen_time(now - BACKDATE);
    params.not_after = rcgen_time(now + CA_VALIDITY);
    let cert = params.self_signed(&key).map_err(gen_err)?;
    write_atomic(key_path, key.serialize_pem().as_bytes(), KEY_MODE)?;
    write_atomic(cert_path, cert.pem().as_bytes(), CERT_MODE)?;
    tracing::info!(path = %cert_path.display(), "created the {}", kind.what());
    Ok(())
}

fn load_ca(dir: &Path, kind: CaKind, now: Timestamp) -> Result<Ca, PkiError> {
    let (cert_file, key_file) = kind.files();
    let cert_path = dir.join(cert_file);
    let key_path = dir.join(key_file);
    let corrupt = |path: &Path, what, reason: Reason| PkiError::Corrupt {
        path: path.to_owned(),
        what,
        reason,
        remedy: ca_remedy(dir),
    };
    let key_pem = read_text(&key_path, "CA private key", || ca_remedy(dir))?;
    let cert_pem = read_text(&cert_path, "CA certificate", || ca_remedy(dir))?;
    tighten_key_mode(&key_path)?;
    let key =
        KeyPair::from_pem(&key_pem).map_err(|e| corrupt(&key_path, "CA private key", e.into()))?;
    let der = CertificateDer::from_pem_slice(cert_pem.as_bytes())
        .map_err(|e| corrupt(&cert_path, "CA certificate", e.into()))?;
    let info = parse_cert(&der).map_err(|e| corrupt(&cert_path, "CA certificate", e.into()))?;
    if !info.is_ca {
        let reason = "it is not a CA certificate (basicConstraints cA is not set)".into();
        return Err(corrupt(&cert_path, "CA certificate", reason));
    }
    if info.spki != key.subject_public_key_info() {
        return Err(PkiError::CaKeyMismatch {
            dir: dir.to_owned(),
            cert: cert_path,
            key: key_path,
        });
    }
    if info.not_after <= now {
        return Err(PkiError::CaExpired {
            dir: dir.to_owned(),
            path: cert_path,
            not_after: format_time(info.not_after),
        });
    }
    if info.not_after < now + RENEW_BEFORE {
        tracing::warn!(
            path = %cert_path.display(),
            not_after = %format_time(info.not_after),
            "the cluster CA expires soon; k1s does not rotate it, plan a new cluster CA"
        );
    }
    // The issuer reproduces the CA's subject and key identifier, so issued certificates chain.
    let issuer = Issuer::from_ca_cert_der(&der, key).map_err(|e| {
        let reason = format!("k1s cannot sign with this CA: {e}");
        corrupt(&cert_path, "CA certificate", reason.into())
    })?;
    let roots = root_store(&cert_path, &cert_pem)?;
    Ok(Ca {
        pem: CertKeyPem {
            cert_path,
            key_path,
            cert_pem,
            key_pem,
        },
        info,
        issuer,
        roots,
    })
}

// ---------------------------------------------------------------------------------------------
// Leaf certificates

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LeafKind {
    Serving,
    Admin,
    FrontProxy,
}

impl LeafKind {
    fn files(self) -> (&'static str, &'static str) {
        match self {
            LeafKind::Serving => (SERVING_CERT, SERVING_KEY),
            LeafKind::Admin => (ADMIN_CERT, ADMIN_KEY),
            LeafKind::FrontProxy => (FRONT_PROXY_CERT, FRONT_PROXY_KEY),
        }
    }

    fn what(self) -> &'static str {
        match self {
            LeafKind::Serving => "serving certificate",
            LeafKind::Admin => "admin client certificate",
            LeafKind::FrontProxy => "front proxy client certificate",
        }
    }
}

fn leaf_remedy(cert: &Path, key: &Path) -> String {
    format!(
        "remove {} and {} and start k1s again to have new ones issued by the cluster CA \
         (existing kubeconfigs stay valid)",
        cert.display(),
        key.display()
    )
}

fn corrupt_leaf_pem(pem: &CertKeyPem, is_cert: bool, reason: Reason) -> PkiError {
    let (path, what) = if is_cert {
        (&pem.cert_path, "PEM certificate")
    } else {
        (&pem.key_path, "PEM private key")
    };
    PkiError::Corrupt {
        path: path.clone(),
        what,
        reason,
        remedy: leaf_remedy(&pem.cert_path, &pem.key_path),
    }
}

fn ensure_leaf(
    dir: &Path,
    ca: &Ca,
    kind: LeafKind,
    sans: &BTreeSet<San>,
    now: Timestamp,
) -> Result<CertKeyPem, PkiError> {
    let (cert_file, key_file) = kind.files();
    let cert_path = dir.join(cert_file);
    let key_path = dir.join(key_file);
    let reason = match (exists(&cert_path)?, exists(&key_path)?) {
        (true, true) => {
            let remedy = || leaf_remedy(&cert_path, &key_path);
            let pem = CertKeyPem {
                key_pem: read_text(&key_path, "private key", remedy)?,
                cert_pem: read_text(&cert_path, kind.what(), remedy)?,
                cert_path: cert_path.clone(),
                key_path: key_path.clone(),
            };
            tighten_key_mode(&key_path)?;
            match renewal_reason(ca, kind, sans, &pem, now)? {
                None => return Ok(pem),
                Some(reason) => reason,
            }
        }
        (false, false) => "it does not exist yet".to_owned(),
        _ => "only one of the certificate and its key exists (an interrupted renewal?)".to_owned(),
    };
    tracing::info!(path = %cert_path.display(), %reason, "issuing the {}", kind.what());
    let not_after = now + LEAF_VALIDITY;
    let pem = issue_leaf(ca, kind, sans, &cert_path, &key_path, now, not_after)?;
    write_atomic(&key_path, pem.key_pem.as_bytes(), KEY_MODE)?;
    write_atomic(&cert_path, pem.cert_pem.as_bytes(), CERT_MODE)?;
    match renewal_reason(ca, kind, sans, &pem, now)? {
        None => Ok(pem),
        Some(reason) => Err(PkiError::SelfCheck {
            dir: dir.to_owned(),
            ca: ca.pem.cert_path.clone(),
            path: cert_path,
            reason,
        }),
    }
}

/// Signs a new leaf certificate (with a new key) by the cluster CA; writes nothing.
fn issue_leaf(
    ca: &Ca,
    kind: LeafKind,
    sans: &BTreeSet<San>,
    cert_path: &Path,
    key_path: &Path,
    now: Timestamp,
    not_after: Timestamp,
) -> Result<CertKeyPem, PkiError> {
    let gen_err = |source| PkiError::Generate {
        what: kind.what(),
        source,
    };
    let key = KeyPair::generate().map_err(gen_err)?;
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    match kind {
        LeafKind::Serving => {
            dn.push(DnType::OrganizationName, "k1s");
            dn.push(DnType::CommonName, "k1s");
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
            params.subject_alt_names = sans
                .iter()
                .map(|san| {
                    Ok(match san {
                        San::Dns(name) => SanType::DnsName(Ia5String::try_from(name.as_str())?),
                        San::Ip(ip) => SanType::IpAddress(*ip),
                    })
                })
                .collect::<Result<_, rcgen::Error>>()
                .map_err(gen_err)?;
        }
        LeafKind::Admin => {
            dn.push(DnType::OrganizationName, "system:masters");
            dn.push(DnType::CommonName, "system:admin");
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        }
        LeafKind::FrontProxy => {
            dn.push(DnType::CommonName, FRONT_PROXY_CN);
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        }
    }
    params.distinguished_name = dn;
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.use_authority_key_identifier_extension = ca.info.has_ski;
    params.not_before = rcgen_time(now - BACKDATE);
    // Never outlive the CA.
    params.not_after = rcgen_time(not_after.min(ca.info.not_after));
    let cert = params.signed_by(&key, &ca.issuer).map_err(gen_err)?;
    Ok(CertKeyPem {
        cert_path: cert_path.to_owned(),
        key_path: key_path.to_owned(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// `Err` if the files cannot be parsed; `Ok(Some(reason))` if the certificate must be
/// re-issued; `Ok(None)` if it is good. Verifies with webpki, as TLS peers will.
fn renewal_reason(
    ca: &Ca,
    kind: LeafKind,
    sans: &BTreeSet<San>,
    pem: &CertKeyPem,
    now: Timestamp,
) -> Result<Option<String>, PkiError> {
    let corrupt = |path: &Path, what, reason: Reason| PkiError::Corrupt {
        path: path.to_owned(),
        what,
        reason,
        remedy: leaf_remedy(&pem.cert_path, &pem.key_path),
    };
    let key = KeyPair::from_pem(&pem.key_pem)
        .map_err(|e| corrupt(&pem.key_path, "private key", e.into()))?;
    let der = CertificateDer::from_pem_slice(pem.cert_pem.as_bytes())
        .map_err(|e| corrupt(&pem.cert_path, kind.what(), e.into()))?;
    let info = parse_cert(&der).map_err(|e| corrupt(&pem.cert_path, kind.what(), e.into()))?;
    if info.spki != key.subject_public_key_info() {
        return Ok(Some(
            "it does not match its private key (an interrupted renewal?)".into(),
        ));
    }
    if info.not_after < (now + RENEW_BEFORE).min(ca.info.not_after) {
        let not_after = format_time(info.not_after);
        return Ok(Some(format!("it expires at {not_after}")));
    }
    if kind == LeafKind::Serving {
        let missing: Vec<String> = sans.difference(&info.sans).map(San::to_string).collect();
        if !missing.is_empty() {
            return Ok(Some(format!("it does not cover {}", missing.join(", "))));
        }
    }
    let verifier_err = |source| PkiError::Verifier {
        path: ca.pem.cert_path.clone(),
        source,
    };
    let roots = ca.roots.clone();
    let verified = match kind {
        LeafKind::Serving => WebPkiServerVerifier::builder_with_provider(roots, provider())
            .build()
            .map_err(verifier_err)?
            .verify_server_cert(
                &der,
                &[],
                &"localhost".try_into().unwrap(),
                &[],
                unix_time(now),
            )
            .map(drop),
        LeafKind::Admin | LeafKind::FrontProxy => {
            WebPkiClientVerifier::builder_with_provider(roots, provider())
                .build()
                .map_err(verifier_err)?
                .verify_client_cert(&der, &[], unix_time(now))
                .map(drop)
        }
    };
    Ok(verified
        .err()
        .map(|e| format!("it does not verify against {CA_CERT}: {e}")))
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn root_store(path: &Path, ca_pem: &str) -> Result<Arc<RootCertStore>, PkiError> {
    let corrupt = |reason: Reason| PkiError::Corrupt {
        path: path.to_owned(),
        what: "CA certificate",
        reason,
        remedy: ca_remedy(path.parent().unwrap_or(Path::new("."))),
    };
    let der = CertificateDer::from_pem_slice(ca_pem.as_bytes()).map_err(|e| corrupt(e.into()))?;
    let mut roots = RootCertStore::empty();
    roots.add(der).map_err(|source| PkiError::Tls {
        path: path.to_owned(),
        source,
    })?;
    Ok(Arc::new(roots))
}

// ---------------------------------------------------------------------------------------------
// Files

fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> PkiError + 'a {
    move |source| PkiError::Io {
        op,
        path: path.to_owned(),
        source,
    }
}

fn exists(path: &Path) -> Result<bool, PkiError> {
    path.try_exists().map_err(io_err("check", path))
}

fn read_text(
    path: &Path,
    what: &'static str,
    remedy: impl FnOnce() -> String,
) -> Result<String, PkiError> {
    let bytes = fs::read(path).map_err(io_err("read", path))?;
    String::from_utf8(bytes).map_err(|_| PkiError::Corrupt {
        path: path.to_owned(),
        what,
        reason: "it is not PEM text (not UTF-8)".into(),
        remedy: remedy(),
    })
}

/// Creates the tls directory 0700, or tightens an existing one that others can read.
fn ensure_dir(dir: &Path) -> Result<(), PkiError> {
    DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(dir)
        .map_err(io_err("create directory", dir))?;
    let mode = fs::metadata(dir)
        .map_err(io_err("inspect", dir))?
        .permissions()
        .mode();
    if mode & 0o7777 != DIR_MODE {
        fs::set_permissions(dir, fs::Permissions::from_mode(DIR_MODE))
            .map_err(io_err("set the mode of", dir))?;
    }
    Ok(())
}

/// Private keys are 0600; fixes keys others can read (restored from a backup, say).
fn tighten_key_mode(path: &Path) -> Result<(), PkiError> {
    let mode = fs::metadata(path)
        .map_err(io_err("inspect", path))?
        .permissions()
        .mode();
    if mode & 0o077 != 0 {
        tracing::warn!(path = %path.display(), mode = format!("{:o}", mode & 0o7777), "private key was readable by others; setting mode 0600");
        fs::set_permissions(path, fs::Permissions::from_mode(KEY_MODE))
            .map_err(io_err("set the mode of", path))?;
    }
    Ok(())
}

fn write_atomic(path: &Path, contents: &[u8], mode: u32) -> Result<(), PkiError> {
    crate::files::write_atomic(path, contents, mode).map_err(|e| PkiError::Io {
        op: e.op,
        path: e.path,
        source: e.source,
    })
}

// ---------------------------------------------------------------------------------------------
// Certificate fields

/// The fields of a certificate the PKI looks at.
#[derive(Debug)]
struct CertInfo {
    not_after: Timestamp,
    /// The SubjectPublicKeyInfo, whole DER element.
    spki: Vec<u8>,
    sans: BTreeSet<San>,
    /// basicConstraints cA.
    is_ca: bool,
    /// Whether it has a subject key identifier.
    has_ski: bool,
}

fn parse_cert(der: &[u8]) -> Result<CertInfo, CertError> {
    let (rest, cert) = x509_parser::parse_x509_certificate(der)?;
    if !rest.is_empty() {
        return Err(CertError::TrailingData);
    }
    let mut sans = BTreeSet::new();
    let san_ext = cert.subject_alternative_name()?;
    for name in san_ext.iter().flat_map(|ext| &ext.value.general_names) {
        match name {
            GeneralName::DNSName(dns) => {
                sans.insert(San::Dns(dns.to_ascii_lowercase()));
            }
            GeneralName::IPAddress(bytes) => {
                let ip = <[u8; 4]>::try_from(*bytes)
                    .map(IpAddr::from)
                    .or_else(|_| <[u8; 16]>::try_from(*bytes).map(IpAddr::from))
                    .map_err(|_| CertError::SanIp)?;
                sans.insert(San::Ip(ip));
            }
            _ => {}
        }
    }
    let has_ski = cert.iter_extensions().any(|e| {
        matches!(
            e.parsed_extension(),
            ParsedExtension::SubjectKeyIdentifier(_)
        )
    });
    Ok(CertInfo {
        not_after: from_unix(cert.validity().not_after.timestamp()),
        spki: cert.public_key().raw.to_vec(),
        sans,
        is_ca: cert.is_ca(),
        has_ski,
    })
}

/// RFC 3339 (UTC).
fn format_time(t: Timestamp) -> String {
    k1s_api::time::format_nano(t)
}

/// Seconds since the epoch (a certificate's validity), clamped to jiff's range (which ends a
/// day before RFC 5280's "no well-defined expiration", 9999-12-31T23:59:59Z).
fn from_unix(secs: i64) -> Timestamp {
    let secs = secs.clamp(Timestamp::MIN.as_second(), Timestamp::MAX.as_second());
    Timestamp::from_second(secs).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// The server's one use of `time`: rcgen's validity fields are `time::OffsetDateTime`.
/// Whole seconds, as the certificate holds them; jiff's range lies within `time`'s.
fn rcgen_time(t: Timestamp) -> time::OffsetDateTime {
    time::OffsetDateTime::from_unix_timestamp(t.as_second())
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
}

/// rustls' clock.
fn unix_time(t: Timestamp) -> UnixTime {
    UnixTime::since_unix_epoch(
        t.duration_since(Timestamp::UNIX_EPOCH)
            .try_into()
            .unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::ServerName;
    use x509_parser::der_parser::asn1_rs::Tag;

    fn config(dir: &Path) -> PkiConfig {
        PkiConfig {
            dir: dir.join("tls"),
            hostname: "node-1".into(),
            node_ips: vec!["192.168.1.10".parse().unwrap()],
            tls_sans: vec!["k1s.example.com".into()],
        }
    }

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    fn der(pem: &str) -> CertificateDer<'static> {
        CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()
    }

    fn server_verifier(pki: &Pki) -> Arc<WebPkiServerVerifier> {
        let roots = root_store(&pki.ca.cert_path, &pki.ca.cert_pem).unwrap();
        WebPkiServerVerifier::builder_with_provider(roots, provider())
            .build()
            .unwrap()
    }

    fn verify_name(pki: &Pki, name: &str) -> Result<(), rustls::Error> {
        let name = ServerName::try_from(name.to_owned()).unwrap();
        server_verifier(pki)
            .verify_server_cert(
                &der(&pki.serving.cert_pem),
                &[],
                &name,
                &[],
                UnixTime::now(),
            )
            .map(drop)
    }

    #[test]
    fn first_start_creates_every_file_with_its_mode() {
        let tmp = tempfile::tempdir().unwrap();
        let cfg = config(tmp.path());
        let pki = Pki::load_or_create(&cfg).unwrap();
        assert_eq!(mode(&cfg.dir), 0o700);
        for (file, want) in [
            (CA_CERT, 0o644),
            (CA_KEY, 0o600),
            (SERVING_CERT, 0o644),
            (SERVING_KEY, 0o600),
            (ADMIN_CERT, 0o644),
            (ADMIN_KEY, 0o600),
            (REQUEST_HEADER_CA_CERT, 0o644),
            (REQUEST_HEADER_CA_KEY, 0o600),
            (FRONT_PROXY_CERT, 0o644),
            (FRONT_PROXY_KEY, 0o600),
        ] {
            assert_eq!(mode(&cfg.dir.join(file)), want, "{file}");
        }
        // The front proxy's certificate is its CA's, not the cluster CA's.
        let fp = parse_cert(&der(&pki.front_proxy.cert_pem)).unwrap();
        assert!(!fp.is_ca);
        assert_ne!(pki.request_header_ca.cert_pem, pki.ca.cert_pem);
        assert_eq!(
            fs::read_to_string(cfg.dir.join(CA_CERT)).unwrap(),
            pki.ca.cert_pem
        );
        assert_eq!(
            fs::read_to_string(cfg.dir.join(ADMIN_KEY)).unwrap(),
            pki.admin.key_pem
        );
        // No temporary files are left behind.
        let names: Vec<_> = fs::read_dir(&cfg.dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 10, "{names:?}");
        // Validity: CA ~10 years, leaves ~1 year.
        let now = Timestamp::now();
        let ca = parse_cert(&der(&pki.ca.cert_pem)).unwrap();
        assert!(ca.is_ca);
        let minute = SignedDuration::from_secs(60);
        assert!((ca.not_after.duration_since(now) - CA_VALIDITY).abs() < minute);
        let serving = parse_cert(&der(&pki.serving.cert_pem)).unwrap();
        assert!(!serving.is_ca);
        assert!((serving.not_after.duration_since(now) - LEAF_VALIDITY).abs() < minute);
    }

    #[test]
    fn second_start_keeps_the_ca_and_the_certificates() {
        let tmp = tempfile::tempdir().unwrap();
        let cfg = config(tmp.path());
        let first = Pki::load_or_create(&cfg).unwrap();
        let ca_bytes = fs::read(cfg.dir.join(CA_CERT)).unwrap();
        let second = Pki::load_or_create(&cfg).unwrap();
        assert_eq!(fs::read(cfg.dir.join(CA_CERT)).unwrap(), ca_bytes);
        assert_eq!(first, second);
        // Also with the SANs listed in another order and spelled differently.
        let mut cfg2 = cfg.clone();
        cfg2.tls_sans = vec!["K1S.example.com.".into(), "127.0.0.1".into()];
        assert_eq!(Pki::load_or_create(&cfg2).unwrap().serving, first.serving);
    }

    #[test]
    fn serving_certificate_covers_the_kubernetes_names_and_tls_sans() {
        let tmp = tempfile::tempdir().unwrap();
        let mut cfg = config(tmp.path());
        cfg.tls_sans.push("10.0.0.7".into());
        let pki = Pki::load_or_create(&cfg).unwrap();
        for name in [
            "127.0.0.1",
            "::1",
            "localhost",
            "node-1",
            "192.168.1.10",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
            "k1s.example.com",
            "10.0.0.7",
        ] {
            verify_name(&pki, name).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        assert!(verify_name(&pki, "other.example.com").is_err());
        assert!(verify_name(&pki, "10.0.0.8").is_err());
        // The DER reader agrees with webpki.
        let sans = parse_cert(&der(&pki.serving.cert_pem)).unwrap().sans;
        assert!(sans.contains(&San::Ip("127.0.0.1".parse().unwrap())));
        assert!(sans.contains(&San::Dns("kubernetes.default.svc".into())));
        assert!(sans.contains(&San::Dns("k1s.example.com".into())));
        // The admin certificate is a client certificate of the CA, not a server certificate.
        let roots = root_store(&pki.ca.cert_path, &pki.ca.cert_pem).unwrap();
        let client = WebPkiClientVerifier::builder_with_provider(roots, provider())
            .build()
            .unwrap();
        client
            .verify_client_cert(&der(&pki.admin.cert_pem), &[], UnixTime::now())
            .unwrap();
        let localhost = ServerName::try_from("localhost").unwrap();
        assert!(
            server_verifier(&pki)
                .verify_server_cert(
                    &der(&pki.admin.cert_pem),
                    &[],
                    &localhost,
                    &[],
                    UnixTime::now()
                )
                .is_err()
        );
        let admin = der(&pki.admin.cert_pem);
        let (_, admin) = x509_parser::parse_x509_certificate(&admin).unwrap();
        let utf8 = |attr: &x509_parser::x509::AttributeTypeAndValue<'_>| {
            assert_eq!(attr.attr_value().header.tag(), Tag::Utf8String);
            attr.as_str().unwrap().to_owned()
        };
        let subject = admin.subject();
        let cn: Vec<_> = subject.iter_common_name().map(utf8).collect();
        let o: Vec<_> = subject.iter_organization().map(utf8).collect();
        assert_eq!(cn, ["system:admin"]);
        assert_eq!(o, ["system:masters"]);
    }

    #[test]
    fn new_tls_san_reissues_the_serving_certificate_from_the_same_ca() {
        let tmp = tempfile::tempdir().unwrap();
        let mut cfg = config(tmp.path());
        let first = Pki::load_or_create(&cfg).unwrap();
        assert!(verify_name(&first, "new.example.com").is_err());
        cfg.tls_sans.push("new.example.com".into());
        let second = Pki::load_or_create(&cfg).unwrap();
        assert_eq!(second.ca, first.ca);
        assert_eq!(second.admin, first.admin);
        assert_ne!(second.serving.cert_pem, first.serving.cert_pem);
        verify_name(&second, "new.example.com").unwrap();
        verify_name(&second, "k1s.example.com").unwrap();
        assert_eq!(
            fs::read_to_string(cfg.dir.join(SERVING_CERT)).unwrap(),
            second.serving.cert_pem
        );
        // ...and it sticks.
        assert_eq!(Pki::load_or_create(&cfg).unwrap().serving, second.serving);
    }

    #[test]
    fn expiring_or_mismatched_leaves_are_reissued() {
        let tmp = tempfile::tempdir().unwrap();
        let cfg = config(tmp.path());
        let first = Pki::load_or_create(&cfg).unwrap();
        let now = Timestamp::now();
        let ca = load_ca(&cfg.dir, CaKind::Cluster, now).unwrap();
        let sans = required_sans(&cfg).unwrap();
        // An admin certificate expiring in 30 days.
        let short = issue_leaf(
            &ca,
            LeafKind::Admin,
            &sans,
            &first.admin.cert_path,
            &first.admin.key_path,
            now,
            now + SignedDuration::from_hours(24 * 30),
        )
        .unwrap();
        write_atomic(&short.key_path, short.key_pem.as_bytes(), KEY_MODE).unwrap();
        write_atomic(&short.cert_path, short.cert_pem.as_bytes(), CERT_MODE).unwrap();
        // A serving key that does not match its certificate (renewal interrupted between the
        // two renames).
        let other_key = KeyPair::generate().unwrap().serialize_pem();
        write_atomic(&first.serving.key_path, other_key.as_bytes(), KEY_MODE).unwrap();

        let second = Pki::load_or_create(&cfg).unwrap();
        assert_eq!(second.ca, first.ca);
        assert_ne!(second.admin.cert_pem, short.cert_pem);
        let admin = parse_cert(&der(&second.admin.cert_pem)).unwrap();
        assert!(admin.not_after > now + SignedDuration::from_hours(24 * 300));
        assert_ne!(second.serving.key_pem, other_key);
        second.server_config().unwrap();
    }

    #[test]
    fn corrupt_files_are_errors_naming_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let cfg = config(tmp.path());
        Pki::load_or_create(&cfg).unwrap();
        let ca_key = cfg.dir.join(CA_KEY);
        fs::write(
            &ca_key,
            "-----BEGIN PRIVATE KEY-----\ngarbage\n-----END PRIVATE KEY-----\n",
        )
        .unwrap();
        let err = Pki::load_or_create(&cfg).unwrap_err();
        assert!(
            matches!(&err, PkiError::Corrupt { path, .. } if *path == ca_key),
            "{err:?}"
        );
        let msg = err.to_string();
        assert!(msg.contains(&ca_key.display().to_string()), "{msg}");
        assert!(msg.contains("invalidates every kubeconfig"), "{msg}");

        // A corrupt leaf certificate names itself and says the CA is not affected.
        let tmp = tempfile::tempdir().unwrap();
        let cfg = config(tmp.path());
        Pki::load_or_create(&cfg).unwrap();
        let admin = cfg.dir.join(ADMIN_CERT);
        fs::write(&admin, "not a certificate").unwrap();
        let msg = Pki::load_or_create(&cfg).unwrap_err().to_string();
        assert!(msg.contains(&admin.display().to_string()), "{msg}");
        assert!(msg.contains("existing kubeconfigs stay valid"), "{msg}");
    }

    #[test]
    fn incomplete_ca() {
        // A CA key alone before anything was issued: an interrupted first start, recovered.
        let tmp = tempfile::tempdir().unwrap();
        let cfg = config(tmp.path());
        fs::create_dir_all(&cfg.dir).unwrap();
        let key = KeyPair::generate().unwrap().serialize_pem();
        write_atomic(&cfg.dir.join(CA_KEY), key.as_bytes(), KEY_MODE).unwrap();
        let pki = Pki::load_or_create(&cfg).unwrap();
        assert!(cfg.dir.join(CA_CERT).exists());
        pki.server_config().unwrap();

        // A missing CA key once certificates exist: an error, nothing is replaced.
        let ca_crt = fs::read(cfg.dir.join(CA_CERT)).unwrap();
        fs::remove_file(cfg.dir.join(CA_KEY)).unwrap();
        let err = Pki::load_or_create(&cfg).unwrap_err();
        assert!(matches!(err, PkiError::CaIncomplete { .. }), "{err:?}");
        assert_eq!(fs::read(cfg.dir.join(CA_CERT)).unwrap(), ca_crt);
        assert!(!cfg.dir.join(CA_KEY).exists());
    }

    #[test]
    fn invalid_tls_san_is_rejected() {
        let tmp = tempfile::tempdir().unwrap();
        let mut cfg = config(tmp.path());
        cfg.tls_sans = vec!["bad name".into()];
        let err = Pki::load_or_create(&cfg).unwrap_err();
        assert!(matches!(err, PkiError::InvalidSan { .. }), "{err:?}");
        assert_eq!(
            parse_san("[::1]"),
            Ok(San::Ip(IpAddr::V6(Ipv6Addr::LOCALHOST)))
        );
        assert_eq!(
            parse_san("*.Example.com"),
            Ok(San::Dns("*.example.com".into()))
        );
        assert_eq!(parse_san(" "), Err(SanError::Empty));
        assert_eq!(
            parse_san("-a.example.com"),
            Err(SanError::Hyphen("-a".into()))
        );
        let cases: [(&str, SanError, &str); 6] = [
            ("", SanError::Empty, "empty"),
            (
                &"a.".repeat(130),
                SanError::TooLong,
                "longer than 253 characters",
            ),
            ("a..b", SanError::EmptyLabel, "empty DNS label"),
            (
                &"x".repeat(64),
                SanError::LabelTooLong("x".repeat(64)),
                &format!(
                    "DNS label {:?} is longer than 63 characters",
                    "x".repeat(64)
                ),
            ),
            (
                "bad name",
                SanError::NotALabel("bad name".into()),
                "not an IP address, and \"bad name\" is not a DNS label (letters, digits, '-')",
            ),
            (
                "a.b-",
                SanError::Hyphen("b-".into()),
                "DNS label \"b-\" starts or ends with '-'",
            ),
        ];
        for (value, want, text) in cases {
            let got = parse_san(value).unwrap_err();
            assert_eq!((&got, got.to_string().as_str()), (&want, text), "{value:?}");
        }
        assert!(matches!(parse_cert(b"junk"), Err(CertError::Parse(_))));
    }

    /// Drives a TLS handshake between in-memory client and server connections.
    /// Moves every TLS byte `from` has to send into `to`.
    fn transfer<A, B>(
        from: &mut rustls::ConnectionCommon<A>,
        to: &mut rustls::ConnectionCommon<B>,
    ) {
        let mut buf = Vec::new();
        while from.wants_write() {
            from.write_tls(&mut buf).unwrap();
        }
        let mut slice = buf.as_slice();
        while !slice.is_empty() {
            to.read_tls(&mut slice).unwrap();
        }
    }

    fn handshake(
        server: Arc<ServerConfig>,
        client: rustls::ClientConfig,
    ) -> Result<rustls::ServerConnection, rustls::Error> {
        let name = ServerName::try_from("kubernetes.default.svc").unwrap();
        let mut client = rustls::ClientConnection::new(Arc::new(client), name)?;
        let mut server = rustls::ServerConnection::new(server)?;
        for _ in 0..20 {
            transfer(&mut client, &mut server);
            server.process_new_packets()?;
            transfer(&mut server, &mut client);
            client.process_new_packets()?;
            if !client.is_handshaking() && !server.is_handshaking() {
                return Ok(server);
            }
        }
        panic!("handshake did not finish");
    }

    #[test]
    fn server_config_accepts_clients_with_and_without_certificates() {
        let tmp = tempfile::tempdir().unwrap();
        let pki = Pki::load_or_create(&config(tmp.path())).unwrap();
        let server = Arc::new(pki.server_config().unwrap());
        assert_eq!(
            server.alpn_protocols,
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        );
        let roots = root_store(&pki.ca.cert_path, &pki.ca.cert_pem).unwrap();
        let builder = || {
            rustls::ClientConfig::builder_with_provider(provider())
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots.clone())
        };

        // The admin certificate: accepted and visible to the server.
        let key = PrivateKeyDer::from_pem_slice(pki.admin.key_pem.as_bytes()).unwrap();
        let mut with_cert = builder()
            .with_client_auth_cert(vec![der(&pki.admin.cert_pem)], key)
            .unwrap();
        with_cert.alpn_protocols = vec![b"h2".to_vec()];
        let conn = handshake(server.clone(), with_cert).unwrap();
        assert_eq!(
            conn.peer_certificates().unwrap()[0],
            der(&pki.admin.cert_pem)
        );
        assert_eq!(conn.alpn_protocol(), Some(&b"h2"[..]));

        // No certificate: accepted, anonymous.
        let conn = handshake(server.clone(), builder().with_no_client_auth()).unwrap();
        assert!(conn.peer_certificates().is_none());

        // A certificate from another CA: the handshake completes (so the client gets a 401
        // Status), and the per-connection check rejects it.
        let check = pki.client_cert_check().unwrap();
        let other = tempfile::tempdir().unwrap();
        let stranger = Pki::load_or_create(&config(other.path())).unwrap();
        let key = PrivateKeyDer::from_pem_slice(stranger.admin.key_pem.as_bytes()).unwrap();
        let foreign = builder()
            .with_client_auth_cert(vec![der(&stranger.admin.cert_pem)], key)
            .unwrap();
        let conn = handshake(server.clone(), foreign).unwrap();
        assert!(matches!(
            check.check(conn.peer_certificates()),
            crate::auth::PeerCert::Invalid(_)
        ));
    }

    #[test]
    fn issued_client_certificates_carry_user_and_groups() {
        let tmp = tempfile::tempdir().unwrap();
        let pki = Pki::load_or_create(&config(tmp.path())).unwrap();
        let check = pki.client_cert_check().unwrap();
        let (cert, key) = pki
            .issue_client_cert("jane", Some("dev"), SignedDuration::from_hours(1), None)
            .unwrap();
        assert!(key.is_some());
        match check.check(Some(&[der(&cert)])) {
            crate::auth::PeerCert::Valid { name, groups, .. } => {
                assert_eq!(name, "jane");
                assert_eq!(groups, ["dev"]);
            }
            other => panic!("{other:?}"),
        }
        // For a CSR: the requester's key, no key returned.
        let node_key = KeyPair::generate().unwrap();
        let csr = CertificateParams::default()
            .serialize_request(&node_key)
            .unwrap()
            .pem()
            .unwrap();
        let (cert, key) = pki
            .issue_client_cert(
                "system:node:n1",
                Some("system:nodes"),
                SignedDuration::from_hours(1),
                Some(&csr),
            )
            .unwrap();
        assert!(key.is_none());
        let info = parse_cert(&der(&cert)).unwrap();
        assert_eq!(info.spki, node_key.subject_public_key_info());
        // Expired: rejected.
        let (cert, _) = pki
            .issue_client_cert("old", None, SignedDuration::from_hours(-2), None)
            .unwrap();
        assert!(matches!(
            check.check(Some(&[der(&cert)])),
            crate::auth::PeerCert::Invalid(_)
        ));
    }

    #[test]
    fn kubeconfig_has_its_mode_url_and_data() {
        let tmp = tempfile::tempdir().unwrap();
        let pki = Pki::load_or_create(&config(tmp.path())).unwrap();
        let path = tmp.path().join("etc/k1s/k1s.yaml");
        pki.write_kubeconfig(&path, 0o600, "https://127.0.0.1:6443")
            .unwrap();
        assert_eq!(mode(&path), 0o600);
        pki.write_kubeconfig(&path, 0o644, "https://127.0.0.1:6443")
            .unwrap();
        assert_eq!(mode(&path), 0o644);
        let yaml = fs::read_to_string(&path).unwrap();
        assert!(
            yaml.contains("server: \"https://127.0.0.1:6443\"\n"),
            "{yaml}"
        );
        assert!(yaml.contains("current-context: default\n"), "{yaml}");
        let field = |name: &str| {
            let prefix = format!("{name}: ");
            let line = yaml
                .lines()
                .map(str::trim)
                .find(|l| l.starts_with(&prefix))
                .unwrap();
            BASE64.decode(&line[prefix.len()..]).unwrap()
        };
        assert_eq!(
            field("certificate-authority-data"),
            pki.ca.cert_pem.as_bytes()
        );
        assert_eq!(
            field("client-certificate-data"),
            pki.admin.cert_pem.as_bytes()
        );
        assert_eq!(field("client-key-data"), pki.admin.key_pem.as_bytes());
        assert!(pki.write_kubeconfig(&path, 0o600, "").is_err());
    }

    #[test]
    fn base64_matches_rfc4648() {
        for (input, want) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(BASE64.encode(input), want);
            assert_eq!(BASE64.decode(want).unwrap(), input.as_bytes());
        }
    }

    #[test]
    fn calendar_arithmetic() {
        let at = |unix| Timestamp::from_second(unix).unwrap();
        let date = |y, m, d| jiff::civil::Date::new(y, m, d).unwrap();
        let utc_date = |t| jiff::tz::Offset::UTC.to_datetime(t).date();
        let epoch = utc_date(Timestamp::UNIX_EPOCH);
        let whole_days = |d: jiff::civil::Date| i64::from(epoch.until(d).unwrap().get_days());
        assert_eq!(date(1970, 1, 1), epoch);
        assert_eq!(whole_days(date(2000, 3, 1)), 11_017);
        assert_eq!(format_time(at(951_782_400)), "2000-02-29T00:00:00Z");
        assert_eq!(format_time(at(4_102_444_799)), "2099-12-31T23:59:59Z");
        // (jiff's timestamps end at 9999-12-30T22:00:00Z, a day before `time`'s.)
        for days in [-1, 0, 59, 60, 10_957, 20_000, 2_932_895] {
            assert_eq!(whole_days(utc_date(at(days * 86_400))), days);
        }
        // A certificate "without expiry" (RFC 5280: 9999-12-31T23:59:59Z) is past jiff's range:
        // clamped to its end, never an error.
        assert_eq!(
            format_time(from_unix(253_402_300_799)),
            "9999-12-30T22:00:00Z"
        );
        assert_eq!(from_unix(i64::MIN).as_second(), Timestamp::MIN.as_second());
        assert_eq!(
            rcgen_time(at(951_782_400)),
            time::OffsetDateTime::from_unix_timestamp(951_782_400).unwrap()
        );
    }
}
