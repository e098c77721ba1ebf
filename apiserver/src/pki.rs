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
use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rcgen::string::{BmpString, Ia5String, PrintableString, TeletexString, UniversalString};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, DnValue,
    ExtendedKeyUsagePurpose, IsCa, Issuer, KeyIdMethod, KeyPair, KeyUsagePurpose, PublicKeyData,
    SanType,
};
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;
use rustls::{RootCertStore, ServerConfig};

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

const DAY: u64 = 24 * 60 * 60;
/// Validity of the cluster CA (k3s: 10 years).
const CA_VALIDITY: Duration = Duration::from_secs(3650 * DAY);
/// Validity of leaf certificates (k3s: 1 year).
const LEAF_VALIDITY: Duration = Duration::from_secs(365 * DAY);
/// Leaf certificates are re-issued when they expire within this window (k3s: 90 days).
const RENEW_BEFORE: Duration = Duration::from_secs(90 * DAY);
/// `notBefore` is back-dated this much, for nodes whose clocks lag a little.
const BACKDATE: Duration = Duration::from_secs(60 * 60);

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
        reason: String,
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
        reason: String,
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
        let now = SystemTime::now();
        let ca = ensure_ca(&cfg.dir, now)?;
        let serving = ensure_leaf(&cfg.dir, &ca, LeafKind::Serving, &sans, now)?;
        let admin = ensure_leaf(&cfg.dir, &ca, LeafKind::Admin, &sans, now)?;
        Ok(Pki {
            dir: cfg.dir.clone(),
            ca: ca.pem,
            serving,
            admin,
        })
    }

    /// A rustls server configuration presenting the serving certificate, offering ALPN `h2`
    /// and `http/1.1`, and asking for (but not requiring) a client certificate chained to the
    /// cluster CA. Clients presenting a certificate the CA did not sign are refused.
    pub fn server_config(&self) -> Result<ServerConfig, PkiError> {
        let provider = provider();
        let roots = root_store(&self.ca.cert_path, &self.ca.cert_pem)?;
        let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider.clone())
            .allow_unauthenticated()
            .build()
            .map_err(|source| PkiError::Verifier {
                path: self.ca.cert_path.clone(),
                source,
            })?;
        let chain = CertificateDer::pem_slice_iter(self.serving.cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| corrupt_leaf_pem(&self.serving, true, e.to_string()))?;
        if chain.is_empty() {
            return Err(corrupt_leaf_pem(
                &self.serving,
                true,
                "no CERTIFICATE block".into(),
            ));
        }
        let key = PrivateKeyDer::from_pem_slice(self.serving.key_pem.as_bytes())
            .map_err(|e| corrupt_leaf_pem(&self.serving, false, e.to_string()))?;
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
        let ca = base64(self.ca.cert_pem.as_bytes());
        let cert = base64(self.admin.cert_pem.as_bytes());
        let key = base64(self.admin.key_pem.as_bytes());
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
fn parse_san(value: &str) -> Result<San, String> {
    let v = value.trim();
    if v.is_empty() {
        return Err("empty".into());
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
        return Err("longer than 253 characters".into());
    }
    for (i, label) in name.split('.').enumerate() {
        if label.is_empty() {
            return Err("empty DNS label".into());
        }
        if label == "*" && i == 0 && name.contains('.') {
            continue;
        }
        if label.len() > 63 {
            return Err(format!("DNS label {label:?} is longer than 63 characters"));
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            return Err(format!(
                "not an IP address, and {label:?} is not a DNS label (letters, digits, '-')"
            ));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(format!("DNS label {label:?} starts or ends with '-'"));
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
}

fn ca_remedy(dir: &Path) -> String {
    format!(
        "restore it from a backup, or remove {} to create a new cluster CA (this invalidates \
         every kubeconfig and client certificate issued so far)",
        dir.display()
    )
}

fn ensure_ca(dir: &Path, now: SystemTime) -> Result<Ca, PkiError> {
    let cert_path = dir.join(CA_CERT);
    let key_path = dir.join(CA_KEY);
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
            for leaf in [SERVING_CERT, ADMIN_CERT] {
                if exists(&dir.join(leaf))? {
                    return Err(incomplete(&key_path, &cert_path));
                }
            }
            tracing::warn!(
                path = %key_path.display(),
                "found a CA key without its certificate (an interrupted first start); creating the cluster CA again"
            );
            create_ca(&cert_path, &key_path, now)?;
        }
        (false, false) => create_ca(&cert_path, &key_path, now)?,
    }
    load_ca(dir, now)
}

fn create_ca(cert_path: &Path, key_path: &Path, now: SystemTime) -> Result<(), PkiError> {
    let gen_err = |source| PkiError::Generate {
        what: "cluster CA",
        source,
    };
    let key = KeyPair::generate().map_err(gen_err)?;
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(
        DnType::CommonName,
        format!("k1s-server-ca@{}", unix_secs(now)),
    );
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    set_validity(&mut params, now, now + CA_VALIDITY);
    let cert = params.self_signed(&key).map_err(gen_err)?;
    write_atomic(key_path, key.serialize_pem().as_bytes(), KEY_MODE)?;
    write_atomic(cert_path, cert.pem().as_bytes(), CERT_MODE)?;
    tracing::info!(path = %cert_path.display(), "created the cluster CA");
    Ok(())
}

fn load_ca(dir: &Path, now: SystemTime) -> Result<Ca, PkiError> {
    let cert_path = dir.join(CA_CERT);
    let key_path = dir.join(CA_KEY);
    let corrupt = |path: &Path, what, reason: String| PkiError::Corrupt {
        path: path.to_owned(),
        what,
        reason,
        remedy: ca_remedy(dir),
    };
    let key_pem = read_text(&key_path, "CA private key", || ca_remedy(dir))?;
    let cert_pem = read_text(&cert_path, "CA certificate", || ca_remedy(dir))?;
    tighten_key_mode(&key_path)?;
    let key = KeyPair::from_pem(&key_pem)
        .map_err(|e| corrupt(&key_path, "CA private key", e.to_string()))?;
    let der = CertificateDer::from_pem_slice(cert_pem.as_bytes())
        .map_err(|e| corrupt(&cert_path, "CA certificate", e.to_string()))?;
    let info = parse_cert(&der).map_err(|reason| corrupt(&cert_path, "CA certificate", reason))?;
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
    let now_secs = unix_secs(now);
    if info.not_after <= now_secs {
        return Err(PkiError::CaExpired {
            dir: dir.to_owned(),
            path: cert_path,
            not_after: format_time(info.not_after),
        });
    }
    if info.not_after < now_secs + secs(RENEW_BEFORE) {
        tracing::warn!(
            path = %cert_path.display(),
            not_after = %format_time(info.not_after),
            "the cluster CA expires soon; k1s does not rotate it, plan a new cluster CA"
        );
    }
    let issuer = issuer_from(&info, key).map_err(|reason| {
        let reason = format!("k1s cannot sign with this CA: {reason}");
        corrupt(&cert_path, "CA certificate", reason)
    })?;
    Ok(Ca {
        pem: CertKeyPem {
            cert_path,
            key_path,
            cert_pem,
            key_pem,
        },
        info,
        issuer,
    })
}

/// An rcgen issuer reproducing the CA certificate's subject and key identifier exactly, so
/// issued certificates chain to it (rcgen parses certificates only with x509-parser, which
/// this build does not enable).
fn issuer_from(info: &CertInfo, key: KeyPair) -> Result<Issuer<'static, KeyPair>, String> {
    let mut dn = DistinguishedName::new();
    for NameAttr { oid, tag, value } in parse_name(&info.subject)? {
        let ty = DnType::CustomDnType(oid);
        if dn.get(&ty).is_some() {
            return Err("its subject repeats an attribute".into());
        }
        let text = || String::from_utf8(value.clone()).map_err(|_| "non-UTF-8 subject string");
        let bad = |e: rcgen::Error| format!("subject string: {e}");
        let value = match tag {
            TAG_UTF8_STRING => DnValue::Utf8String(text()?),
            TAG_PRINTABLE_STRING => {
                DnValue::PrintableString(PrintableString::try_from(text()?).map_err(bad)?)
            }
            TAG_IA5_STRING => DnValue::Ia5String(Ia5String::try_from(text()?).map_err(bad)?),
            TAG_TELETEX_STRING => {
                DnValue::TeletexString(TeletexString::try_from(text()?).map_err(bad)?)
            }
            TAG_BMP_STRING => DnValue::BmpString(BmpString::from_utf16be(value).map_err(bad)?),
            TAG_UNIVERSAL_STRING => {
                DnValue::UniversalString(UniversalString::from_utf32be(value).map_err(bad)?)
            }
            other => {
                return Err(format!(
                    "unsupported subject string type (tag {other:#04x})"
                ));
            }
        };
        dn.push(ty, value);
    }
    let mut params = CertificateParams::default();
    params.distinguished_name = dn;
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    if let Some(ski) = &info.ski {
        params.key_identifier_method = KeyIdMethod::PreSpecified(ski.clone());
    }
    Ok(Issuer::new(params, key))
}

// ---------------------------------------------------------------------------------------------
// Leaf certificates

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LeafKind {
    Serving,
    Admin,
}

impl LeafKind {
    fn files(self) -> (&'static str, &'static str) {
        match self {
            LeafKind::Serving => (SERVING_CERT, SERVING_KEY),
            LeafKind::Admin => (ADMIN_CERT, ADMIN_KEY),
        }
    }

    fn what(self) -> &'static str {
        match self {
            LeafKind::Serving => "serving certificate",
            LeafKind::Admin => "admin client certificate",
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

fn corrupt_leaf_pem(pem: &CertKeyPem, is_cert: bool, reason: String) -> PkiError {
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
    now: SystemTime,
) -> Result<CertKeyPem, PkiError> {
    let (cert_file, key_file) = kind.files();
    let cert_path = dir.join(cert_file);
    let key_path = dir.join(key_file);
    let checker = Checker::new(ca)?;
    let reason = match (exists(&cert_path)?, exists(&key_path)?) {
        (true, true) => {
            let pem = load_leaf(&cert_path, &key_path, kind)?;
            match checker.renewal_reason(ca, kind, sans, &pem, now)? {
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
    match checker.renewal_reason(ca, kind, sans, &pem, now)? {
        None => Ok(pem),
        Some(reason) => Err(PkiError::SelfCheck {
            dir: dir.to_owned(),
            ca: ca.pem.cert_path.clone(),
            path: cert_path,
            reason,
        }),
    }
}

fn load_leaf(cert_path: &Path, key_path: &Path, kind: LeafKind) -> Result<CertKeyPem, PkiError> {
    let remedy = || leaf_remedy(cert_path, key_path);
    let key_pem = read_text(key_path, "private key", remedy)?;
    let cert_pem = read_text(cert_path, kind.what(), remedy)?;
    tighten_key_mode(key_path)?;
    Ok(CertKeyPem {
        cert_path: cert_path.to_owned(),
        key_path: key_path.to_owned(),
        cert_pem,
        key_pem,
    })
}

/// Signs a new leaf certificate (with a new key) by the cluster CA; writes nothing.
fn issue_leaf(
    ca: &Ca,
    kind: LeafKind,
    sans: &BTreeSet<San>,
    cert_path: &Path,
    key_path: &Path,
    now: SystemTime,
    not_after: SystemTime,
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
    }
    params.distinguished_name = dn;
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.use_authority_key_identifier_extension = ca.info.ski.is_some();
    // Never outlive the CA.
    let ca_not_after = UNIX_EPOCH + Duration::from_secs(ca.info.not_after.max(0).unsigned_abs());
    set_validity(&mut params, now, not_after.min(ca_not_after));
    let cert = params.signed_by(&key, &ca.issuer).map_err(gen_err)?;
    Ok(CertKeyPem {
        cert_path: cert_path.to_owned(),
        key_path: key_path.to_owned(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// Verifies leaf certificates against the cluster CA with webpki, as TLS peers will.
struct Checker {
    server: Arc<WebPkiServerVerifier>,
    client: Arc<dyn ClientCertVerifier>,
}

impl Checker {
    fn new(ca: &Ca) -> Result<Checker, PkiError> {
        let roots = root_store(&ca.pem.cert_path, &ca.pem.cert_pem)?;
        let verifier_err = |source| PkiError::Verifier {
            path: ca.pem.cert_path.clone(),
            source,
        };
        let server = WebPkiServerVerifier::builder_with_provider(roots.clone(), provider())
            .build()
            .map_err(verifier_err)?;
        let client = WebPkiClientVerifier::builder_with_provider(roots, provider())
            .build()
            .map_err(verifier_err)?;
        Ok(Checker { server, client })
    }

    /// `Err` if the files cannot be parsed; `Ok(Some(reason))` if the certificate must be
    /// re-issued; `Ok(None)` if it is good.
    fn renewal_reason(
        &self,
        ca: &Ca,
        kind: LeafKind,
        sans: &BTreeSet<San>,
        pem: &CertKeyPem,
        now: SystemTime,
    ) -> Result<Option<String>, PkiError> {
        let corrupt = |path: &Path, what, reason: String| PkiError::Corrupt {
            path: path.to_owned(),
            what,
            reason,
            remedy: leaf_remedy(&pem.cert_path, &pem.key_path),
        };
        let key = KeyPair::from_pem(&pem.key_pem)
            .map_err(|e| corrupt(&pem.key_path, "private key", e.to_string()))?;
        let der = CertificateDer::from_pem_slice(pem.cert_pem.as_bytes())
            .map_err(|e| corrupt(&pem.cert_path, kind.what(), e.to_string()))?;
        let info = parse_cert(&der).map_err(|e| corrupt(&pem.cert_path, kind.what(), e))?;
        if info.spki != key.subject_public_key_info() {
            return Ok(Some(
                "it does not match its private key (an interrupted renewal?)".into(),
            ));
        }
        let deadline = (unix_secs(now) + secs(RENEW_BEFORE)).min(ca.info.not_after);
        if info.not_after < deadline {
            return Ok(Some(format!(
                "it expires at {}",
                format_time(info.not_after)
            )));
        }
        if kind == LeafKind::Serving {
            let missing: Vec<String> = sans.difference(&info.sans).map(San::to_string).collect();
            if !missing.is_empty() {
                return Ok(Some(format!("it does not cover {}", missing.join(", "))));
            }
        }
        let verified = match kind {
            LeafKind::Serving => {
                let name = ServerName::DnsName(
                    rustls::pki_types::DnsName::try_from("localhost")
                        .map_err(|e| corrupt(&pem.cert_path, kind.what(), e.to_string()))?,
                );
                self.server
                    .verify_server_cert(&der, &[], &name, &[], unix_time(now))
                    .map(drop)
            }
            LeafKind::Admin => self
                .client
                .verify_client_cert(&der, &[], unix_time(now))
                .map(drop),
        };
        if let Err(e) = verified {
            return Ok(Some(format!("it does not verify against {}: {e}", CA_CERT)));
        }
        Ok(None)
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn root_store(path: &Path, ca_pem: &str) -> Result<Arc<RootCertStore>, PkiError> {
    let corrupt = |reason: String| PkiError::Corrupt {
        path: path.to_owned(),
        what: "CA certificate",
        reason,
        remedy: ca_remedy(path.parent().unwrap_or(Path::new("."))),
    };
    let der =
        CertificateDer::from_pem_slice(ca_pem.as_bytes()).map_err(|e| corrupt(e.to_string()))?;
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
    if !exists(dir)? {
        DirBuilder::new()
            .recursive(true)
            .mode(DIR_MODE)
            .create(dir)
            .map_err(io_err("create directory", dir))?;
    }
    let meta = fs::metadata(dir).map_err(io_err("inspect", dir))?;
    if !meta.is_dir() {
        return Err(PkiError::Io {
            op: "use as the tls directory",
            path: dir.to_owned(),
            source: io::Error::other("not a directory"),
        });
    }
    if meta.permissions().mode() & 0o7777 != DIR_MODE {
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

/// Writes `contents` to `path` with `mode`: a temporary file beside it, fsync, rename, fsync
/// of the directory. Readers see the old file or the new one, never a torn one.
fn write_atomic(path: &Path, contents: &[u8], mode: u32) -> Result<(), PkiError> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path.file_name().ok_or_else(|| PkiError::Io {
        op: "write",
        path: path.to_owned(),
        source: io::Error::new(io::ErrorKind::InvalidInput, "not a file path"),
    })?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(".tmp");
    let tmp = dir.join(tmp_name);
    // A stale temporary file would keep its old mode: start from a fresh one.
    match fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err("remove", &tmp)(e)),
    }
    if let Err(e) = write_and_rename(&tmp, path, contents, mode) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err("fsync directory", dir))
}

fn write_and_rename(tmp: &Path, path: &Path, contents: &[u8], mode: u32) -> Result<(), PkiError> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(tmp)
        .map_err(io_err("create", tmp))?;
    // The umask may have narrowed the mode; the caller asked for exactly this one.
    file.set_permissions(fs::Permissions::from_mode(mode))
        .map_err(io_err("set the mode of", tmp))?;
    file.write_all(contents).map_err(io_err("write", tmp))?;
    file.sync_all().map_err(io_err("fsync", tmp))?;
    drop(file);
    fs::rename(tmp, path).map_err(io_err("rename into place", path))
}

// ---------------------------------------------------------------------------------------------
// Time

fn unix_secs(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

fn secs(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

fn unix_time(t: SystemTime) -> UnixTime {
    UnixTime::since_unix_epoch(t.duration_since(UNIX_EPOCH).unwrap_or_default())
}

fn set_validity(params: &mut CertificateParams, now: SystemTime, not_after: SystemTime) {
    let epoch = rcgen::date_time_ymd(1970, 1, 1);
    let since = |t: SystemTime| t.duration_since(UNIX_EPOCH).unwrap_or_default();
    params.not_before = epoch + since(now).saturating_sub(BACKDATE);
    params.not_after = epoch + since(not_after);
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let month_from_march = (month + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// (year, month, day) of a day count since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// RFC 3339 (UTC) of a Unix time.
fn format_time(unix: i64) -> String {
    let (y, mo, d) = civil_from_days(unix.div_euclid(86_400));
    let s = unix.rem_euclid(86_400);
    format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}Z",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

// ---------------------------------------------------------------------------------------------
// A minimal DER reader for the few certificate fields the PKI needs (rcgen's parser needs
// x509-parser, which this build does not enable).

const TAG_BOOLEAN: u8 = 0x01;
const TAG_INTEGER: u8 = 0x02;
const TAG_OCTET_STRING: u8 = 0x04;
const TAG_OID: u8 = 0x06;
const TAG_UTF8_STRING: u8 = 0x0c;
const TAG_PRINTABLE_STRING: u8 = 0x13;
const TAG_TELETEX_STRING: u8 = 0x14;
const TAG_IA5_STRING: u8 = 0x16;
const TAG_UTC_TIME: u8 = 0x17;
const TAG_GENERALIZED_TIME: u8 = 0x18;
const TAG_UNIVERSAL_STRING: u8 = 0x1c;
const TAG_BMP_STRING: u8 = 0x1e;
const TAG_SEQUENCE: u8 = 0x30;
const TAG_SET: u8 = 0x31;
const TAG_VERSION: u8 = 0xa0; // [0] EXPLICIT
const TAG_EXTENSIONS: u8 = 0xa3; // [3] EXPLICIT
const TAG_SAN_DNS: u8 = 0x82; // [2] IMPLICIT IA5String
const TAG_SAN_IP: u8 = 0x87; // [7] IMPLICIT OCTET STRING

const OID_SUBJECT_KEY_IDENTIFIER: &[u8] = &[0x55, 0x1d, 0x0e]; // 2.5.29.14
const OID_SUBJECT_ALT_NAME: &[u8] = &[0x55, 0x1d, 0x11]; // 2.5.29.17
const OID_BASIC_CONSTRAINTS: &[u8] = &[0x55, 0x1d, 0x13]; // 2.5.29.19

/// The fields of a certificate the PKI looks at.
#[derive(Debug)]
struct CertInfo {
    /// The subject Name's content (the RDN SETs).
    subject: Vec<u8>,
    /// `notAfter`, Unix seconds.
    not_after: i64,
    /// The SubjectPublicKeyInfo, whole DER element.
    spki: Vec<u8>,
    sans: BTreeSet<San>,
    /// Subject key identifier.
    ski: Option<Vec<u8>>,
    /// basicConstraints cA.
    is_ca: bool,
}

struct Tlv<'a> {
    tag: u8,
    content: &'a [u8],
}

struct Der<'a>(&'a [u8]);

impl<'a> Der<'a> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The next element and its whole encoding.
    fn next_raw(&mut self) -> Result<(Tlv<'a>, &'a [u8]), String> {
        let data = self.0;
        let (&tag, rest) = data.split_first().ok_or("truncated DER")?;
        if tag & 0x1f == 0x1f {
            return Err("unsupported DER tag".into());
        }
        let (&first, rest) = rest.split_first().ok_or("truncated DER length")?;
        let (len, rest) = if first < 0x80 {
            (usize::from(first), rest)
        } else {
            let n = usize::from(first & 0x7f);
            if n == 0 || n > 4 || rest.len() < n {
                return Err("bad DER length".into());
            }
            let len = rest[..n]
                .iter()
                .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
            (len, &rest[n..])
        };
        if rest.len() < len {
            return Err("truncated DER element".into());
        }
        let header = data.len() - rest.len();
        self.0 = &rest[len..];
        Ok((
            Tlv {
                tag,
                content: &rest[..len],
            },
            &data[..header + len],
        ))
    }

    fn next(&mut self) -> Result<Tlv<'a>, String> {
        self.next_raw().map(|(tlv, _)| tlv)
    }

    fn expect(&mut self, tag: u8, what: &str) -> Result<Tlv<'a>, String> {
        let tlv = self.next()?;
        if tlv.tag != tag {
            return Err(format!("malformed certificate: expected {what}"));
        }
        Ok(tlv)
    }
}

fn parse_cert(der: &[u8]) -> Result<CertInfo, String> {
    let mut top = Der(der);
    let cert = top.expect(TAG_SEQUENCE, "Certificate")?;
    if !top.is_empty() {
        return Err("trailing data after the certificate".into());
    }
    let mut cert = Der(cert.content);
    let tbs = cert.expect(TAG_SEQUENCE, "TBSCertificate")?;
    let mut tbs = Der(tbs.content);
    let mut field = tbs.next()?;
    if field.tag == TAG_VERSION {
        field = tbs.next()?;
    }
    if field.tag != TAG_INTEGER {
        return Err("malformed certificate: expected serialNumber".into());
    }
    tbs.expect(TAG_SEQUENCE, "signature algorithm")?;
    tbs.expect(TAG_SEQUENCE, "issuer")?;
    let validity = tbs.expect(TAG_SEQUENCE, "validity")?;
    let mut validity = Der(validity.content);
    let _not_before = validity.next()?;
    let not_after = parse_time(&validity.next()?)?;
    let subject = tbs.expect(TAG_SEQUENCE, "subject")?.content.to_vec();
    let (spki, spki_raw) = tbs.next_raw()?;
    if spki.tag != TAG_SEQUENCE {
        return Err("malformed certificate: expected subjectPublicKeyInfo".into());
    }
    let mut info = CertInfo {
        subject,
        not_after,
        spki: spki_raw.to_vec(),
        sans: BTreeSet::new(),
        ski: None,
        is_ca: false,
    };
    while !tbs.is_empty() {
        let field = tbs.next()?;
        if field.tag == TAG_EXTENSIONS {
            parse_extensions(field.content, &mut info)?;
        }
    }
    Ok(info)
}

fn parse_extensions(explicit: &[u8], info: &mut CertInfo) -> Result<(), String> {
    let seq = Der(explicit).expect(TAG_SEQUENCE, "extensions")?;
    let mut exts = Der(seq.content);
    while !exts.is_empty() {
        let ext = exts.expect(TAG_SEQUENCE, "extension")?;
        let mut ext = Der(ext.content);
        let oid = ext.expect(TAG_OID, "extension id")?;
        let mut value = ext.next()?;
        if value.tag == TAG_BOOLEAN {
            value = ext.next()?;
        }
        if value.tag != TAG_OCTET_STRING {
            return Err("malformed certificate: expected extension value".into());
        }
        match oid.content {
            OID_SUBJECT_ALT_NAME => {
                let names = Der(value.content).expect(TAG_SEQUENCE, "subjectAltName")?;
                let mut names = Der(names.content);
                while !names.is_empty() {
                    let name = names.next()?;
                    match name.tag {
                        TAG_SAN_DNS => {
                            let dns = std::str::from_utf8(name.content)
                                .map_err(|_| "non-ASCII DNS name in subjectAltName")?;
                            info.sans.insert(San::Dns(dns.to_ascii_lowercase()));
                        }
                        TAG_SAN_IP => {
                            let ip = match name.content.len() {
                                4 => <[u8; 4]>::try_from(name.content).map(IpAddr::from).ok(),
                                16 => <[u8; 16]>::try_from(name.content).map(IpAddr::from).ok(),
                                _ => None,
                            };
                            info.sans
                                .insert(San::Ip(ip.ok_or("bad IP in subjectAltName")?));
                        }
                        _ => {}
                    }
                }
            }
            OID_SUBJECT_KEY_IDENTIFIER => {
                let ski = Der(value.content).expect(TAG_OCTET_STRING, "subjectKeyIdentifier")?;
                info.ski = Some(ski.content.to_vec());
            }
            OID_BASIC_CONSTRAINTS => {
                let bc = Der(value.content).expect(TAG_SEQUENCE, "basicConstraints")?;
                let mut bc = Der(bc.content);
                if !bc.is_empty() {
                    let first = bc.next()?;
                    info.is_ca = first.tag == TAG_BOOLEAN && first.content.iter().any(|b| *b != 0);
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// UTCTime or GeneralizedTime (`Z` form, as RFC 5280 requires) to Unix seconds.
fn parse_time(tlv: &Tlv<'_>) -> Result<i64, String> {
    let text = std::str::from_utf8(tlv.content).map_err(|_| "bad certificate time")?;
    let digits = text
        .strip_suffix('Z')
        .ok_or("certificate time is not UTC")?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err("bad certificate time".into());
    }
    let (year, rest) = match (tlv.tag, digits.len()) {
        (TAG_UTC_TIME, 12) => {
            let yy: i64 = digits[..2].parse().map_err(|_| "bad certificate time")?;
            (if yy < 50 { 2000 + yy } else { 1900 + yy }, &digits[2..])
        }
        (TAG_GENERALIZED_TIME, 14) => (
            digits[..4].parse().map_err(|_| "bad certificate time")?,
            &digits[4..],
        ),
        _ => return Err("bad certificate time".into()),
    };
    let n = |i: usize| -> i64 {
        rest[i..i + 2]
            .bytes()
            .fold(0, |acc, b| acc * 10 + i64::from(b - b'0'))
    };
    let (month, day, hour, minute, second) = (n(0), n(2), n(4), n(6), n(8));
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return Err("bad certificate time".into());
    }
    Ok(days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second)
}

/// One attribute of a distinguished name.
#[derive(Debug, PartialEq, Eq)]
struct NameAttr {
    /// The attribute type's OID arcs.
    oid: Vec<u64>,
    /// The string type's DER tag.
    tag: u8,
    /// The string's bytes.
    value: Vec<u8>,
}

/// The attribute of each (single-valued) RDN of a Name's content.
fn parse_name(content: &[u8]) -> Result<Vec<NameAttr>, String> {
    let mut rdns = Der(content);
    let mut attrs = Vec::new();
    while !rdns.is_empty() {
        let set = rdns.expect(TAG_SET, "RelativeDistinguishedName")?;
        let mut set = Der(set.content);
        let attr = set.expect(TAG_SEQUENCE, "AttributeTypeAndValue")?;
        if !set.is_empty() {
            return Err("its subject has a multi-valued RDN".into());
        }
        let mut attr = Der(attr.content);
        let oid = decode_oid(attr.expect(TAG_OID, "attribute type")?.content)?;
        let value = attr.next()?;
        attrs.push(NameAttr {
            oid,
            tag: value.tag,
            value: value.content.to_vec(),
        });
    }
    Ok(attrs)
}

fn decode_oid(bytes: &[u8]) -> Result<Vec<u64>, String> {
    let mut arcs = Vec::new();
    let mut acc: u64 = 0;
    for (i, b) in bytes.iter().enumerate() {
        if acc > u64::MAX >> 7 {
            return Err("OID arc too large".into());
        }
        acc = (acc << 7) | u64::from(b & 0x7f);
        if b & 0x80 != 0 {
            if i + 1 == bytes.len() {
                return Err("truncated OID".into());
            }
            continue;
        }
        if arcs.is_empty() {
            let first = (acc / 40).min(2);
            arcs.push(first);
            arcs.push(acc - first * 40);
        } else {
            arcs.push(acc);
        }
        acc = 0;
    }
    if arcs.is_empty() {
        return Err("empty OID".into());
    }
    Ok(arcs)
}

// ---------------------------------------------------------------------------------------------
// base64 (standard alphabet, padded), for the kubeconfig's *-data fields.

fn base64(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b1 = chunk.get(1).copied().unwrap_or(0);
        let b2 = chunk.get(2).copied().unwrap_or(0);
        let n = (u32::from(chunk[0]) << 16) | (u32::from(b1) << 8) | u32::from(b2);
        let sextet = |shift: u32| char::from(ALPHABET[((n >> shift) & 63) as usize]);
        out.push(sextet(18));
        out.push(sextet(12));
        out.push(if chunk.len() > 1 { sextet(6) } else { '=' });
        out.push(if chunk.len() > 2 { sextet(0) } else { '=' });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn decode_base64(s: &str) -> Vec<u8> {
        let value = |c: u8| match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("bad base64 {c}"),
        };
        let mut out = Vec::new();
        for chunk in s.as_bytes().chunks(4) {
            let pad = chunk.iter().filter(|c| **c == b'=').count();
            let n = chunk
                .iter()
                .map(|c| if *c == b'=' { 0 } else { u32::from(value(*c)) })
                .fold(0u32, |acc, v| (acc << 6) | v);
            let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
            out.extend_from_slice(&bytes[..3 - pad]);
        }
        out
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
        ] {
            assert_eq!(mode(&cfg.dir.join(file)), want, "{file}");
        }
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
        assert_eq!(names.len(), 6, "{names:?}");
        // Validity: CA ~10 years, leaves ~1 year.
        let now = unix_secs(SystemTime::now());
        let ca = parse_cert(&der(&pki.ca.cert_pem)).unwrap();
        assert!(ca.is_ca);
        assert!((ca.not_after - now - secs(CA_VALIDITY)).abs() < 60);
        let serving = parse_cert(&der(&pki.serving.cert_pem)).unwrap();
        assert!(!serving.is_ca);
        assert!((serving.not_after - now - secs(LEAF_VALIDITY)).abs() < 60);
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
        let admin = parse_cert(&der(&pki.admin.cert_pem)).unwrap();
        let subject = parse_name(&admin.subject).unwrap();
        let attr = |oid: &[u64], value: &str| NameAttr {
            oid: oid.to_vec(),
            tag: TAG_UTF8_STRING,
            value: value.as_bytes().to_vec(),
        };
        assert!(subject.contains(&attr(&[2, 5, 4, 3], "system:admin")));
        assert!(subject.contains(&attr(&[2, 5, 4, 10], "system:masters")));
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
        let now = SystemTime::now();
        let ca = load_ca(&cfg.dir, now).unwrap();
        let sans = required_sans(&cfg).unwrap();
        // An admin certificate expiring in 30 days.
        let short = issue_leaf(
            &ca,
            LeafKind::Admin,
            &sans,
            &first.admin.cert_path,
            &first.admin.key_path,
            now,
            now + Duration::from_secs(30 * DAY),
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
        assert!(admin.not_after > unix_secs(now) + 300 * secs(Duration::from_secs(DAY)));
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
        assert!(parse_san("").is_err());
        assert!(parse_san("-a.example.com").is_err());
    }

    /// Drives a TLS handshake between in-memory client and server connections.
    fn handshake(
        server: Arc<ServerConfig>,
        client: rustls::ClientConfig,
    ) -> Result<rustls::ServerConnection, rustls::Error> {
        let name = ServerName::try_from("kubernetes.default.svc").unwrap();
        let mut client = rustls::ClientConnection::new(Arc::new(client), name)?;
        let mut server = rustls::ServerConnection::new(server)?;
        for _ in 0..20 {
            let mut buf = Vec::new();
            while client.wants_write() {
                client.write_tls(&mut buf).unwrap();
            }
            let mut slice = buf.as_slice();
            while !slice.is_empty() {
                server.read_tls(&mut slice).unwrap();
            }
            server.process_new_packets()?;
            let mut buf = Vec::new();
            while server.wants_write() {
                server.write_tls(&mut buf).unwrap();
            }
            let mut slice = buf.as_slice();
            while !slice.is_empty() {
                client.read_tls(&mut slice).unwrap();
            }
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

        // A certificate from another CA: refused.
        let other = tempfile::tempdir().unwrap();
        let stranger = Pki::load_or_create(&config(other.path())).unwrap();
        let key = PrivateKeyDer::from_pem_slice(stranger.admin.key_pem.as_bytes()).unwrap();
        let foreign = builder()
            .with_client_auth_cert(vec![der(&stranger.admin.cert_pem)], key)
            .unwrap();
        assert!(handshake(server, foreign).is_err());
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
            decode_base64(&line[prefix.len()..])
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
            assert_eq!(base64(input.as_bytes()), want);
            assert_eq!(decode_base64(want), input.as_bytes());
        }
    }

    #[test]
    fn calendar_arithmetic() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(format_time(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(format_time(4_102_444_799), "2099-12-31T23:59:59Z");
        for days in [-1, 0, 59, 60, 10_957, 20_000, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }
}
