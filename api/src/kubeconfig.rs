//! Kubeconfig files: parsing the YAML (`clusters`, `users`, `contexts`, `current-context`) and
//! resolving one context into what [`crate::http_client::HttpClient`] needs — the server URL,
//! the CA to trust, and the client certificate or bearer token.
//!
//! Only the fields a k1s client uses are read. Credentials given as file paths are read
//! relative to the kubeconfig's directory, as kubectl does. Exec plugins and auth providers are
//! refused with an error rather than silently ignored.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::Deserialize;

use crate::tls::TlsSettings;

/// Why a kubeconfig could not be used.
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    #[error("reading {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the kubeconfig is not valid YAML: {0}")]
    Yaml(#[from] serde_yaml::Error),
    #[error("the kubeconfig has no current-context and none was asked for")]
    NoContext,
    #[error("context {0:?} is not in the kubeconfig")]
    ContextNotFound(String),
    #[error("cluster {0:?} is not in the kubeconfig")]
    ClusterNotFound(String),
    #[error("user {0:?} is not in the kubeconfig")]
    UserNotFound(String),
    #[error("cluster {0:?} has no server URL")]
    NoServer(String),
    #[error("{field} is not valid base64: {source}")]
    Base64 {
        field: &'static str,
        #[source]
        source: base64::DecodeError,
    },
    #[error("{field} is not valid UTF-8")]
    NotUtf8 { field: &'static str },
    #[error("{0} is not supported by the k1s client")]
    Unsupported(&'static str),
}

/// A parsed kubeconfig file.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "kebab-case")]
pub struct Kubeconfig {
    #[serde(default)]
    pub clusters: Vec<NamedCluster>,
    #[serde(default)]
    pub users: Vec<NamedUser>,
    #[serde(default)]
    pub contexts: Vec<NamedContext>,
    #[serde(default)]
    pub current_context: Option<String>,
    /// Relative credential paths are resolved against this directory (the file's own).
    #[serde(skip)]
    pub base_dir: PathBuf,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct NamedCluster {
    pub name: String,
    #[serde(default)]
    pub cluster: Cluster,
}

/// How to reach and trust one API server.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "kebab-case")]
pub struct Cluster {
    #[serde(default)]
    pub server: Option<String>,
    /// Base64 of the PEM CA bundle.
    #[serde(default)]
    pub certificate_authority_data: Option<String>,
    /// Path of a PEM CA bundle.
    #[serde(default)]
    pub certificate_authority: Option<PathBuf>,
    /// Name to verify the server certificate against, instead of the URL's host.
    #[serde(default)]
    pub tls_server_name: Option<String>,
    #[serde(default)]
    pub insecure_skip_tls_verify: bool,
    #[serde(default)]
    pub proxy_url: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct NamedUser {
    pub name: String,
    #[serde(default)]
    pub user: User,
}

/// The credentials of one user. `Debug` does not print keys or tokens.
#[derive(Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "kebab-case")]
pub struct User {
    #[serde(default)]
    pub client_certificate_data: Option<String>,
    #[serde(default)]
    pub client_certificate: Option<PathBuf>,
    #[serde(default)]
    pub client_key_data: Option<String>,
    #[serde(default)]
    pub client_key: Option<PathBuf>,
    #[serde(default)]
    pub token: Option<String>,
    #[serde(default, rename = "tokenFile")]
    pub token_file: Option<PathBuf>,
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub exec: Option<serde_yaml::Value>,
    #[serde(default)]
    pub auth_provider: Option<serde_yaml::Value>,
}

impl std::fmt::Debug for User {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("User")
            .field("client_certificate", &self.client_certificate)
            .field(
                "client_certificate_data",
                &self.client_certificate_data.is_some(),
            )
            .field("client_key", &self.client_key)
            .field("client_key_data", &self.client_key_data.is_some())
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("token_file", &self.token_file)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct NamedContext {
    pub name: String,
    #[serde(default)]
    pub context: Context,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct Context {
    #[serde(default)]
    pub cluster: String,
    #[serde(default)]
    pub user: String,
    #[serde(default)]
    pub namespace: Option<String>,
}

/// One context of a kubeconfig, resolved: everything needed to build a client.
#[derive(Debug, Clone)]
pub struct ResolvedConfig {
    pub context: String,
    pub server: String,
    pub tls: TlsSettings,
    /// The context's default namespace, if it names one.
    pub namespace: Option<String>,
}

impl Kubeconfig {
    /// Reads and parses the kubeconfig at `path`.
    pub fn load(path: &Path) -> Result<Self, KubeconfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| KubeconfigError::Io {
            path: path.to_owned(),
            source,
        })?;
        let base = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        Self::parse(&text, &base)
    }

    /// Parses kubeconfig YAML; relative file paths in it are taken from `base_dir`.
    pub fn parse(yaml: &str, base_dir: &Path) -> Result<Self, KubeconfigError> {
        let mut kc: Kubeconfig = serde_yaml::from_str(yaml)?;
        kc.base_dir = base_dir.to_owned();
        Ok(kc)
    }

    /// Resolves `context` (or the current context) into a server URL and TLS settings, reading
    /// any credential files it names.
    pub fn resolve(&self, context: Option<&str>) -> Result<ResolvedConfig, KubeconfigError> {
        let name = context
            .map(str::to_owned)
            .or_else(|| self.current_context.clone().filter(|c| !c.is_empty()))
            .ok_or(KubeconfigError::NoContext)?;
        let ctx = &self
            .contexts
            .iter()
            .find(|c| c.name == name)
            .ok_or_else(|| KubeconfigError::ContextNotFound(name.clone()))?
            .context;
        let cluster = &self
            .clusters
            .iter()
            .find(|c| c.name == ctx.cluster)
            .ok_or_else(|| KubeconfigError::ClusterNotFound(ctx.cluster.clone()))?
            .cluster;
        // A context without a user is anonymous; a named user must exist.
        let user = if ctx.user.is_empty() {
            User::default()
        } else {
            self.users
                .iter()
                .find(|u| u.name == ctx.user)
                .ok_or_else(|| KubeconfigError::UserNotFound(ctx.user.clone()))?
                .user
                .clone()
        };
        let server = cluster
            .server
            .clone()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| KubeconfigError::NoServer(ctx.cluster.clone()))?;
        if cluster.insecure_skip_tls_verify {
            return Err(KubeconfigError::Unsupported("insecure-skip-tls-verify"));
        }
        if cluster.proxy_url.is_some() {
            return Err(KubeconfigError::Unsupported("proxy-url"));
        }
        if user.exec.is_some() {
            return Err(KubeconfigError::Unsupported("an exec credential plugin"));
        }
        if user.auth_provider.is_some() {
            return Err(KubeconfigError::Unsupported("auth-provider"));
        }
        if user.username.is_some() {
            return Err(KubeconfigError::Unsupported(
                "basic authentication (username)",
            ));
        }
        let ca_pem = self.data_or_file(
            "certificate-authority-data",
            cluster.certificate_authority_data.as_deref(),
            cluster.certificate_authority.as_deref(),
        )?;
        let client_cert_pem = self.data_or_file(
            "client-certificate-data",
            user.client_certificate_data.as_deref(),
            user.client_certificate.as_deref(),
        )?;
        let client_key_pem = self.data_or_file(
            "client-key-data",
            user.client_key_data.as_deref(),
            user.client_key.as_deref(),
        )?;
        let bearer_token = match (&user.token, &user.token_file) {
            (Some(t), _) if !t.is_empty() => Some(t.clone()),
            (_, Some(file)) => {
                let bytes = self.read(file)?;
                let text = String::from_utf8(bytes)
                    .map_err(|_| KubeconfigError::NotUtf8 { field: "tokenFile" })?;
                Some(text.trim().to_owned()).filter(|t| !t.is_empty())
            }
            _ => None,
        };
        Ok(ResolvedConfig {
            context: name,
            server,
            tls: TlsSettings {
                ca_pem,
                client_cert_pem,
                client_key_pem,
                bearer_token,
                server_name: cluster.tls_server_name.clone().filter(|s| !s.is_empty()),
            },
            namespace: ctx.namespace.clone().filter(|n| !n.is_empty()),
        })
    }

    /// The bytes of a `*-data` field (base64), else of the file it names.
    fn data_or_file(
        &self,
        field: &'static str,
        data: Option<&str>,
        file: Option<&Path>,
    ) -> Result<Option<Vec<u8>>, KubeconfigError> {
        if let Some(d) = data.filter(|d| !d.is_empty()) {
            // Some tools wrap long base64 lines; whitespace is not part of the data.
            let compact: String = d.chars().filter(|c| !c.is_ascii_whitespace()).collect();
            return BASE64
                .decode(compact)
                .map(Some)
                .map_err(|source| KubeconfigError::Base64 { field, source });
        }
        match file.filter(|f| !f.as_os_str().is_empty()) {
            Some(f) => self.read(f).map(Some),
            None => Ok(None),
        }
    }

    fn read(&self, file: &Path) -> Result<Vec<u8>, KubeconfigError> {
        let path = self.base_dir.join(file);
        std::fs::read(&path).map_err(|source| KubeconfigError::Io { path, source })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K1S: &str = r#"apiVersion: v1
kind: Config
clusters:
- name: default
  cluster:
    server: "https://127.0.0.1:6443"
    certificate-authority-data: Q0EtUEVN
users:
- name: default
  user:
    client-certificate-data: Q0VSVC1QRU0=
    client-key-data: S0VZLVBFTQ==
contexts:
- name: default
  context:
    cluster: default
    user: default
current-context: default
preferences: {}
"#;

    #[test]
    fn the_k1s_admin_kubeconfig_resolves() {
        let kc = Kubeconfig::parse(K1S, Path::new("/nonexistent")).unwrap();
        let r = kc.resolve(None).unwrap();
        assert_eq!(r.context, "default");
        assert_eq!(r.server, "https://127.0.0.1:6443");
        assert_eq!(r.tls.ca_pem.as_deref(), Some(&b"CA-PEM"[..]));
        assert_eq!(r.tls.client_cert_pem.as_deref(), Some(&b"CERT-PEM"[..]));
        assert_eq!(r.tls.client_key_pem.as_deref(), Some(&b"KEY-PEM"[..]));
        assert_eq!(r.tls.bearer_token, None);
        assert_eq!(r.namespace, None);
    }

    #[test]
    fn files_are_relative_to_the_kubeconfig_and_tokens_are_read() {
        let dir = std::env::temp_dir().join(format!("k1s-kc-test-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("pki")).unwrap();
        std::fs::write(dir.join("pki/ca.crt"), b"CA FILE").unwrap();
        std::fs::write(dir.join("token"), b"  tok-from-file\n").unwrap();
        let yaml = r#"
clusters:
- name: c1
  cluster:
    server: https://k1s.example:6443
    certificate-authority: pki/ca.crt
    tls-server-name: api.k1s.example
- name: c2
  cluster:
    server: https://other:6443
    certificate-authority: /definitely/missing/ca.crt
users:
- name: bob
  user:
    token: plain-token
- name: carol
  user:
    tokenFile: token
contexts:
- name: one
  context: {cluster: c1, user: bob, namespace: team}
- name: two
  context: {cluster: c1, user: carol}
- name: broken
  context: {cluster: c2, user: bob}
- name: lost
  context: {cluster: nowhere, user: bob}
current-context: one
"#;
        let kc = Kubeconfig::parse(yaml, &dir).unwrap();
        let one = kc.resolve(None).unwrap();
        assert_eq!(one.server, "https://k1s.example:6443");
        assert_eq!(one.tls.ca_pem.as_deref(), Some(&b"CA FILE"[..]));
        assert_eq!(one.tls.bearer_token.as_deref(), Some("plain-token"));
        assert_eq!(one.tls.server_name.as_deref(), Some("api.k1s.example"));
        assert_eq!(one.namespace.as_deref(), Some("team"));
        let two = kc.resolve(Some("two")).unwrap();
        assert_eq!(two.tls.bearer_token.as_deref(), Some("tok-from-file"));
        assert!(matches!(
            kc.resolve(Some("broken")),
            Err(KubeconfigError::Io { .. })
        ));
        assert!(matches!(
            kc.resolve(Some("lost")),
            Err(KubeconfigError::ClusterNotFound(c)) if c == "nowhere"
        ));
        assert!(matches!(
            kc.resolve(Some("absent")),
            Err(KubeconfigError::ContextNotFound(_))
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_and_unsupported_kubeconfigs_are_errors() {
        let base = Path::new(".");
        assert!(matches!(
            Kubeconfig::parse("clusters: [", base),
            Err(KubeconfigError::Yaml(_))
        ));
        let no_current = Kubeconfig::parse("clusters: []", base).unwrap();
        assert!(matches!(
            no_current.resolve(None),
            Err(KubeconfigError::NoContext)
        ));
        let bad_b64 = K1S.replace("Q0EtUEVN", "not base64!");
        assert!(matches!(
            Kubeconfig::parse(&bad_b64, base).unwrap().resolve(None),
            Err(KubeconfigError::Base64 {
                field: "certificate-authority-data",
                ..
            })
        ));
        let exec = K1S.replace(
            "    client-key-data: S0VZLVBFTQ==",
            "    exec: {command: aws}",
        );
        assert!(matches!(
            Kubeconfig::parse(&exec, base).unwrap().resolve(None),
            Err(KubeconfigError::Unsupported(_))
        ));
        let insecure = K1S.replace(
            "    certificate-authority-data: Q0EtUEVN",
            "    insecure-skip-tls-verify: true",
        );
        assert!(matches!(
            Kubeconfig::parse(&insecure, base).unwrap().resolve(None),
            Err(KubeconfigError::Unsupported("insecure-skip-tls-verify"))
        ));
        let no_server = K1S.replace("    server: \"https://127.0.0.1:6443\"\n", "");
        assert!(matches!(
            Kubeconfig::parse(&no_server, base).unwrap().resolve(None),
            Err(KubeconfigError::NoServer(_))
        ));
    }

    #[test]
    fn debug_output_hides_credentials() {
        let kc =
            Kubeconfig::parse(&K1S.replace("client-key-data", "token"), Path::new(".")).unwrap();
        let text = format!("{kc:?}");
        assert!(!text.contains("S0VZLVBFTQ=="), "{text}");
    }
}
