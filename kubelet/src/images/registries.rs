//! Where and how to reach registries: a k3s-style `registries.yaml`, and credentials from
//! `.dockerconfigjson` (imagePullSecrets).
//!
//! ```yaml
//! mirrors:
//!   docker.io:
//!     endpoint: ["https://mirror.example.com:5000"]
//!   "127.0.0.1:5000":
//!     endpoint: ["http://127.0.0.1:5000"]   # http:// = plain HTTP for this endpoint
//!   "*":
//!     endpoint: ["https://catch-all.example.com"]
//! configs:
//!   "mirror.example.com:5000":
//!     auth: {username: u, password: p}      # or auth: <base64 user:pass>
//!     tls: {insecure_skip_verify: true, ca_file: /etc/ssl/mirror.pem}
//! ```
//!
//! As in k3s/containerd, a registry's endpoints are its mirror endpoints in order, then the
//! registry itself over HTTPS (unless a mirror endpoint already is that host); `configs` is
//! keyed by endpoint host. Plain HTTP is used only for endpoints written `http://…`. Not
//! supported: endpoint paths, `rewrite`, client certificates (`cert_file`/`key_file`) and
//! `identity_token`; they are accepted and ignored with a warning.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde::Deserialize;

use super::reference::{DOCKER_HUB, normalize_registry_host};
use super::{ImageError, RegistryAuth};

/// `registries.yaml`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct RegistriesConfig {
    pub mirrors: BTreeMap<String, Mirror>,
    pub configs: BTreeMap<String, RegistryConfig>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Mirror {
    pub endpoint: Vec<String>,
    /// Accepted, not supported.
    pub rewrite: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct RegistryConfig {
    pub auth: Option<AuthConfig>,
    pub tls: Option<TlsConfig>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct AuthConfig {
    pub username: Option<String>,
    pub password: Option<String>,
    /// base64 of `username:password`.
    pub auth: Option<String>,
    /// Accepted, not supported.
    pub identity_token: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct TlsConfig {
    pub ca_file: Option<PathBuf>,
    /// Accepted, not supported.
    pub cert_file: Option<PathBuf>,
    /// Accepted, not supported.
    pub key_file: Option<PathBuf>,
    pub insecure_skip_verify: bool,
}

/// One place to pull a registry's images from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// `host[:port]`, normalised (`docker.io` for Docker Hub).
    pub host: String,
    /// `http://` endpoint: no TLS.
    pub plain_http: bool,
    pub insecure_skip_verify: bool,
    pub ca_file: Option<PathBuf>,
    /// Credentials from `configs.<host>.auth`.
    pub auth: Option<(String, String)>,
    /// The registry itself rather than a mirror.
    pub is_default: bool,
}

impl RegistriesConfig {
    /// Reads `path`; a missing file is an empty config.
    pub fn load(path: &Path) -> Result<Self, ImageError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::parse(&text).map_err(|source| ImageError::Config {
                path: path.to_path_buf(),
                source,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(ImageError::store(path, e)),
        }
    }

    /// Parses YAML, normalising registry keys (`https://index.docker.io/v1/` is `docker.io`).
    pub fn parse(yaml: &str) -> Result<Self, serde_yaml::Error> {
        if yaml.trim().is_empty() {
            return Ok(Self::default());
        }
        let raw: Self = serde_yaml::from_str(yaml)?;
        let mut out = Self::default();
        for (k, m) in raw.mirrors {
            if !m.rewrite.is_empty() {
                tracing::warn!(registry = %k, "registries.yaml: rewrite is not supported, ignored");
            }
            let key = if k == "*" {
                k
            } else {
                normalize_registry_host(&k)
            };
            out.mirrors.insert(key, m);
        }
        for (k, c) in raw.configs {
            if let Some(tls) = &c.tls
                && (tls.cert_file.is_some() || tls.key_file.is_some())
            {
                tracing::warn!(registry = %k, "registries.yaml: client certificates are not supported, ignored");
            }
            out.configs.insert(normalize_registry_host(&k), c);
        }
        Ok(out)
    }

    /// The endpoints to try, in order, for images of `registry`.
    pub fn endpoints(&self, registry: &str) -> Vec<Endpoint> {
        let registry = normalize_registry_host(registry);
        let mirror = self
            .mirrors
            .get(&registry)
            .or_else(|| self.mirrors.get("*"));
        let mut out: Vec<Endpoint> = Vec::new();
        for url in mirror.map(|m| m.endpoint.as_slice()).unwrap_or_default() {
            let url = url.trim();
            if url.is_empty() {
                continue;
            }
            let plain_http = url.starts_with("http://");
            let host = normalize_registry_host(url);
            if host.is_empty() || out.iter().any(|e| e.host == host) {
                continue;
            }
            let path = url
                .trim_start_matches("https://")
                .trim_start_matches("http://")
                .split_once('/')
                .map(|(_, p)| p.trim_matches('/'))
                .unwrap_or_default();
            if !path.is_empty() && path != "v2" {
                tracing::warn!(endpoint = %url, "registries.yaml: endpoint paths are not supported, ignored");
            }
            out.push(self.endpoint(&host, plain_http, host == registry));
        }
        if !out.iter().any(|e| e.host == registry) {
            out.push(self.endpoint(&registry, false, true));
        }
        out
    }

    fn endpoint(&self, host: &str, plain_http: bool, is_default: bool) -> Endpoint {
        let config = self.configs.get(host);
        let tls = config.and_then(|c| c.tls.as_ref());
        Endpoint {
            host: host.to_string(),
            plain_http,
            insecure_skip_verify: tls.is_some_and(|t| t.insecure_skip_verify),
            ca_file: tls.and_then(|t| t.ca_file.clone()),
            auth: config.and_then(|c| c.auth.as_ref()).and_then(|a| {
                credentials(
                    a.username.as_deref(),
                    a.password.as_deref(),
                    a.auth.as_deref(),
                )
            }),
            is_default,
        }
    }
}

/// Username and password from explicit fields, else from a base64 `user:password`.
fn credentials(
    username: Option<&str>,
    password: Option<&str>,
    auth: Option<&str>,
) -> Option<(String, String)> {
    match (username, password) {
        (Some(u), Some(p)) if !u.is_empty() => return Some((u.to_string(), p.to_string())),
        _ => {}
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(auth?.trim())
        .ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (u, p) = decoded.split_once(':')?;
    (!u.is_empty()).then(|| (u.to_string(), p.to_string()))
}

/// Credentials in a `kubernetes.io/dockerconfigjson` (`{"auths": {host: {...}}}`) or legacy
/// `kubernetes.io/dockercfg` (`{host: {...}}`) secret, registry keys normalised. Entries with
/// neither `username`/`password` nor a decodable `auth` are skipped; so is unparsable input.
pub fn auth_from_docker_config_json(data: &[u8]) -> Vec<RegistryAuth> {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Entry {
        username: Option<String>,
        password: Option<String>,
        auth: Option<String>,
    }
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) else {
        return Vec::new();
    };
    let auths = match value.get("auths") {
        Some(auths) => auths.clone(),
        None => value,
    };
    let Ok(entries) = serde_json::from_value::<BTreeMap<String, serde_json::Value>>(auths) else {
        return Vec::new();
    };
    entries
        .into_iter()
        .filter_map(|(registry, v)| {
            let e: Entry = serde_json::from_value(v).ok()?;
            let (username, password) = credentials(
                e.username.as_deref(),
                e.password.as_deref(),
                e.auth.as_deref(),
            )?;
            Some(RegistryAuth {
                registry: normalize_registry_key(&registry),
                username,
                password,
            })
        })
        .collect()
}

/// A credential key: `normalize_registry_host`, keeping a leading `*.` wildcard.
fn normalize_registry_key(key: &str) -> String {
    normalize_registry_host(key)
}

/// Whether the credential key `key` (normalised, maybe `*.example.com`) applies to `host`.
pub fn auth_matches(key: &str, host: &str) -> bool {
    if key == host {
        return true;
    }
    if let Some(suffix) = key.strip_prefix("*.") {
        let (h, port) = host.split_once(':').unwrap_or((host, ""));
        let (s, sport) = suffix.split_once(':').unwrap_or((suffix, ""));
        return port == sport && h.ends_with(&format!(".{s}")) && h != DOCKER_HUB;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    const YAML: &str = r#"
mirrors:
  docker.io:
    endpoint:
      - "https://mirror.example.com:5000"
      - "http://10.0.0.1:5000/v2"
  "127.0.0.1:5000":
    endpoint:
      - "http://127.0.0.1:5000"
  "*":
    endpoint: ["https://all.example.com"]
configs:
  "mirror.example.com:5000":
    auth:
      username: alice
      password: secret
    tls:
      insecure_skip_verify: true
      ca_file: /etc/ssl/mirror.pem
  "registry-1.docker.io":
    auth:
      auth: Ym9iOmh1bnRlcjI=
"#;

    #[test]
    fn parses_mirrors_and_configs() {
        let c = RegistriesConfig::parse(YAML).unwrap();
        let eps = c.endpoints("docker.io");
        assert_eq!(eps.len(), 3);
        assert_eq!(eps[0].host, "mirror.example.com:5000");
        assert!(!eps[0].plain_http);
        assert!(eps[0].insecure_skip_verify);
        assert_eq!(
            eps[0].ca_file.as_deref(),
            Some(Path::new("/etc/ssl/mirror.pem"))
        );
        assert_eq!(eps[0].auth, Some(("alice".into(), "secret".into())));
        assert!(!eps[0].is_default);
        assert_eq!(eps[1].host, "10.0.0.1:5000");
        assert!(eps[1].plain_http);
        assert_eq!(eps[1].auth, None);
        // The registry itself last, with its config (keyed by an alias of docker.io).
        assert_eq!(eps[2].host, "docker.io");
        assert!(eps[2].is_default && !eps[2].plain_http);
        assert_eq!(eps[2].auth, Some(("bob".into(), "hunter2".into())));

        // An http endpoint naming the registry itself: only that, in plain HTTP.
        let eps = c.endpoints("127.0.0.1:5000");
        assert_eq!(eps.len(), 1);
        assert!(eps[0].plain_http && eps[0].is_default);

        // Others: the "*" mirror, then the registry.
        let eps = c.endpoints("quay.io");
        let hosts: Vec<_> = eps.iter().map(|e| e.host.as_str()).collect();
        assert_eq!(hosts, vec!["all.example.com", "quay.io"]);
    }

    #[test]
    fn empty_and_invalid() {
        let c = RegistriesConfig::parse("").unwrap();
        let eps = c.endpoints("127.0.0.1:5000");
        assert_eq!(eps.len(), 1);
        assert!(
            !eps[0].plain_http,
            "HTTPS unless registries.yaml says http://"
        );
        assert!(RegistriesConfig::parse("mirrors: [1, 2]").is_err());
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            RegistriesConfig::load(&dir.path().join("absent.yaml")).unwrap(),
            RegistriesConfig::default()
        );
        let bad = dir.path().join("bad.yaml");
        std::fs::write(&bad, "mirrors: [").unwrap();
        let err = RegistriesConfig::load(&bad).unwrap_err().to_string();
        assert!(err.contains("bad.yaml"), "{err}");
    }

    #[test]
    fn docker_config_json() {
        let json = br#"{"auths": {
            "https://index.docker.io/v1/": {"auth": "dXNlcjpwYTpzcw=="},
            "127.0.0.1:5000": {"username": "u", "password": "p", "email": "x@y"},
            "empty.example.com": {},
            "broken.example.com": {"auth": "!!notbase64"}
        }}"#;
        let auths = auth_from_docker_config_json(json);
        assert_eq!(
            auths,
            vec![
                RegistryAuth {
                    registry: "127.0.0.1:5000".into(),
                    username: "u".into(),
                    password: "p".into()
                },
                RegistryAuth {
                    registry: "docker.io".into(),
                    username: "user".into(),
                    password: "pa:ss".into()
                },
            ]
        );
        // Legacy .dockercfg: no "auths" wrapper.
        let legacy = br#"{"quay.io": {"username": "q", "password": "w"}}"#;
        assert_eq!(auth_from_docker_config_json(legacy)[0].registry, "quay.io");
        assert!(auth_from_docker_config_json(b"not json").is_empty());
    }

    #[test]
    fn wildcard_credentials() {
        assert!(auth_matches("docker.io", "docker.io"));
        assert!(auth_matches("*.example.com", "r.example.com"));
        assert!(!auth_matches("*.example.com", "example.com"));
        assert!(!auth_matches("*.example.com", "r.example.com:5000"));
        assert!(auth_matches("*.example.com:5000", "r.example.com:5000"));
    }
}
