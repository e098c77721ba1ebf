//! Encryption at rest (issue #4): what stands between an object's JSON and the bytes the store
//! keeps, as kube-apiserver's `--encryption-provider-config`.
//!
//! - [`config`]: the `EncryptionConfiguration` file (parse, validate, generate, rotate keys).
//! - [`aesgcm`]: one AES-GCM key and upstream's `k8s:enc:aesgcm:v1:<name>:` value format.
//! - [`sweep`]: rewrites stored objects that are not under the current write key.
//! - [`shared`]: one generated configuration for every server, kept in the datastore.
//!
//! The [`Transformer`] is built from a configuration and held by the REST layer
//! ([`crate::rest::Rest`]); every read or write of stored object bytes in this crate goes
//! through it (REST reads, writes and watches, the authorization mirrors, the CRD catalog).
//! It decides by store key: `/registry/<group>/<plural>/...` is matched against the rules in
//! file order, the first that names the resource applies, and its first provider writes.
//! Values without the `k8s:enc:` prefix are read as plaintext whatever the rule says, so turning
//! encryption on for an existing cluster keeps old objects readable until the sweep rewrites
//! them. Nothing here logs a value or a key.

pub mod aesgcm;
pub mod config;
pub mod shared;
pub mod sweep;

use std::borrow::Cow;
use std::fmt;
use std::sync::{Arc, RwLock};

use ring::rand::SystemRandom;

use crate::status::ApiError;
use aesgcm::AesGcmKey;
use config::{EncryptionConfig, ProviderConfig};

/// What every encrypted value starts with (upstream's envelope prefix).
const ENCRYPTED: &[u8] = b"k8s:enc:";

/// A stored value that could not be decrypted, or a value that could not be encrypted.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EncryptionError {
    #[error(
        "the value of {key} is encrypted with aesgcm key {name:?}, which the encryption configuration does not list for this resource"
    )]
    UnknownKey { key: String, name: String },
    #[error(
        "the value of {key} is encrypted with the {provider} provider, which k1s does not support"
    )]
    UnsupportedProvider { key: String, provider: String },
    #[error("cannot decrypt the value of {key} with aesgcm key {name:?}: {reason}")]
    Decrypt {
        key: String,
        name: String,
        reason: aesgcm::OpenError,
    },
    #[error("cannot encrypt the value of {key}: {reason}")]
    Encrypt {
        key: String,
        reason: aesgcm::SealError,
    },
}

impl From<EncryptionError> for ApiError {
    fn from(e: EncryptionError) -> Self {
        ApiError::new(
            500,
            "InternalError",
            format!("Internal error occurred: {e}"),
        )
    }
}

/// Which resources one rule covers.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Matcher {
    /// `secrets` (core) or `deployments.apps`: (storage group, plural).
    Exact(String, String),
    /// `*.apps`, or `*.` for the core group.
    Group(String),
    /// `*.*`.
    All,
}

impl Matcher {
    fn parse(name: &str) -> Self {
        let (resource, group) = name.split_once('.').unwrap_or((name, ""));
        let group = if group.is_empty() { "core" } else { group };
        match (resource, group) {
            ("*", "*") => Self::All,
            ("*", g) => Self::Group(g.to_owned()),
            (r, g) => Self::Exact(g.to_owned(), r.to_owned()),
        }
    }

    fn matches(&self, group: &str, plural: &str) -> bool {
        match self {
            Self::Exact(g, r) => g == group && r == plural,
            Self::Group(g) => g == group,
            Self::All => true,
        }
    }
}

/// One rule, ready to use.
#[derive(Debug)]
struct Rule {
    matchers: Vec<Matcher>,
    /// The key new writes use (`None`: identity writes plaintext).
    write: Option<usize>,
    /// Every aesgcm key of the rule, longest name first so a name that is a prefix of another
    /// cannot shadow it.
    keys: Vec<Arc<AesGcmKey>>,
}

/// The rules of one configuration.
#[derive(Debug, Default)]
struct Rules {
    rules: Vec<Rule>,
}

impl Rules {
    fn from_config(config: EncryptionConfig) -> Self {
        let mut rules = Vec::new();
        for rule in config.rules {
            let matchers = rule.resources.iter().map(|r| Matcher::parse(r)).collect();
            let writes = matches!(rule.providers.first(), Some(ProviderConfig::AesGcm(_)));
            let mut keys: Vec<Arc<AesGcmKey>> = Vec::new();
            for p in rule.providers {
                if let ProviderConfig::AesGcm(ks) = p {
                    keys.extend(ks.into_iter().map(Arc::new));
                }
            }
            let write_name = writes.then(|| keys[0].name().to_owned());
            keys.sort_by_key(|k| std::cmp::Reverse(k.name().len()));
            let write = write_name.and_then(|n| keys.iter().position(|k| k.name() == n));
            rules.push(Rule {
                matchers,
                write,
                keys,
            });
        }
        Self { rules }
    }

    /// The rule for a store key `/registry/<group>/<plural>/...`.
    fn rule(&self, key: &str) -> Option<&Rule> {
        let mut parts = key.strip_prefix("/registry/")?.splitn(3, '/');
        let (group, plural) = (parts.next()?, parts.next()?);
        self.rules
            .iter()
            .find(|r| r.matchers.iter().any(|m| m.matches(group, plural)))
    }
}

/// Turns object bytes into stored bytes and back, per the encryption configuration.
pub struct Transformer {
    rules: RwLock<Arc<Rules>>,
    rng: SystemRandom,
}

impl fmt::Debug for Transformer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transformer")
            .field("rules", &self.current().rules.len())
            .finish_non_exhaustive()
    }
}

impl Default for Transformer {
    fn default() -> Self {
        Self::identity()
    }
}

impl Transformer {
    /// No encryption: every value is stored as it is (encrypted values still fail clearly).
    pub fn identity() -> Self {
        Self {
            rules: RwLock::new(Arc::new(Rules::default())),
            rng: SystemRandom::new(),
        }
    }

    /// The transformer of a validated configuration.
    pub fn new(config: EncryptionConfig) -> Self {
        let t = Self::identity();
        t.reload(config);
        t
    }

    /// Replaces the rules (a reloaded configuration file); later reads and writes use them.
    pub fn reload(&self, config: EncryptionConfig) {
        let rules = Arc::new(Rules::from_config(config));
        *self.rules.write().unwrap_or_else(|e| e.into_inner()) = rules;
    }

    fn current(&self) -> Arc<Rules> {
        self.rules.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Whether any resource is configured.
    pub fn is_configured(&self) -> bool {
        !self.current().rules.is_empty()
    }

    /// Whether objects under `prefix` (`/registry/<group>/<plural>/`) have a rule.
    pub fn covers(&self, prefix: &str) -> bool {
        self.current().rule(prefix).is_some()
    }

    /// The bytes to store under `key` for the object bytes `plain`.
    pub fn transform_to_storage(
        &self,
        key: &str,
        plain: Vec<u8>,
    ) -> Result<Vec<u8>, EncryptionError> {
        let rules = self.current();
        let Some(k) = rules
            .rule(key)
            .and_then(|r| r.write.map(|i| r.keys[i].clone()))
        else {
            return Ok(plain);
        };
        k.seal(&self.rng, key, &plain)
            .map_err(|reason| EncryptionError::Encrypt {
                key: key.to_owned(),
                reason,
            })
    }

    /// The object bytes of the value stored under `key`.
    pub fn transform_from_storage<'a>(
        &self,
        key: &str,
        stored: &'a [u8],
    ) -> Result<Cow<'a, [u8]>, EncryptionError> {
        if !stored.starts_with(ENCRYPTED) {
            return Ok(Cow::Borrowed(stored));
        }
        let rules = self.current();
        // Several names can match when one is a prefix of another (`k` and `k:2`): try each.
        let mut first_err = None;
        for k in rules
            .rule(key)
            .into_iter()
            .flat_map(|r| &r.keys)
            .filter(|k| stored.starts_with(k.prefix()))
        {
            match k.open(key, stored) {
                Ok(plain) => return Ok(Cow::Owned(plain)),
                Err(reason) => {
                    first_err.get_or_insert(EncryptionError::Decrypt {
                        key: key.to_owned(),
                        name: k.name().to_owned(),
                        reason,
                    });
                }
            }
        }
        Err(first_err.unwrap_or_else(|| unknown(key, stored)))
    }

    /// Whether the value stored under `key` is not in the form a write would give it now (under
    /// another key, plaintext where the rule encrypts, encrypted where it does not): the
    /// sweep rewrites those.
    pub fn is_stale(&self, key: &str, stored: &[u8]) -> bool {
        let rules = self.current();
        let Some(rule) = rules.rule(key) else {
            return false;
        };
        match rule.write {
            Some(i) => !stored.starts_with(rule.keys[i].prefix()),
            None => stored.starts_with(ENCRYPTED),
        }
    }
}

/// The error for an encrypted value no configured key matches, naming what the value says.
fn unknown(key: &str, stored: &[u8]) -> EncryptionError {
    let text = String::from_utf8_lossy(&stored[..stored.len().min(300)]);
    let mut parts = text.splitn(5, ':');
    let (_, _, provider, _, rest) = (
        parts.next(),
        parts.next(),
        parts.next().unwrap_or(""),
        parts.next(),
        parts.next().unwrap_or(""),
    );
    if provider == "aesgcm" {
        let name: String = rest
            .split(':')
            .next()
            .unwrap_or("")
            .chars()
            .filter(|c| !c.is_control())
            .take(100)
            .collect();
        EncryptionError::UnknownKey {
            key: key.to_owned(),
            name,
        }
    } else {
        EncryptionError::UnsupportedProvider {
            key: key.to_owned(),
            provider: provider.chars().filter(|c| c.is_alphanumeric()).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    const K1: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
    const K2: &str = "ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=";

    fn transformer(body: &str) -> Transformer {
        let text = format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n{body}"
        );
        Transformer::new(EncryptionConfig::parse(Path::new("t"), &text).unwrap())
    }

    fn secrets_with(keys: &[(&str, &str)]) -> Transformer {
        let keys: Vec<String> = keys
            .iter()
            .map(|(n, s)| format!("{{name: {n}, secret: {s}}}"))
            .collect();
        transformer(&format!(
            "- resources: [secrets]\n  providers:\n  - aesgcm: {{keys: [{}]}}\n  - identity: {{}}\n",
            keys.join(", ")
        ))
    }

    const SECRET: &str = "/registry/core/secrets/default/s";

    #[test]
    fn round_trip_and_only_configured_resources_are_encrypted() {
        let t = secrets_with(&[("k1", K1)]);
        let stored = t
            .transform_to_storage(SECRET, b"{\"data\":1}".to_vec())
            .unwrap();
        assert!(stored.starts_with(b"k8s:enc:aesgcm:v1:k1:"));
        assert_eq!(
            t.transform_from_storage(SECRET, &stored).unwrap().as_ref(),
            b"{\"data\":1}"
        );
        let cm = "/registry/core/configmaps/default/c";
        assert_eq!(t.transform_to_storage(cm, b"{}".to_vec()).unwrap(), b"{}");
        assert!(!t.is_stale(cm, b"{}"));
        assert!(!t.is_stale(SECRET, &stored));
    }

    #[test]
    fn plaintext_reads_as_identity_and_is_stale() {
        let t = secrets_with(&[("k1", K1)]);
        assert_eq!(
            t.transform_from_storage(SECRET, b"{}").unwrap().as_ref(),
            b"{}"
        );
        assert!(t.is_stale(SECRET, b"{}"));
        assert!(
            matches!(
                t.transform_from_storage(SECRET, b"{}").unwrap(),
                Cow::Borrowed(_)
            ),
            "no copy for plaintext"
        );
    }

    #[test]
    fn rotation_reads_old_writes_new() {
        let old = secrets_with(&[("k1", K1)]);
        let stored = old.transform_to_storage(SECRET, b"v".to_vec()).unwrap();
        let rotated = secrets_with(&[("k2", K2), ("k1", K1)]);
        assert_eq!(
            rotated
                .transform_from_storage(SECRET, &stored)
                .unwrap()
                .as_ref(),
            b"v"
        );
        assert!(rotated.is_stale(SECRET, &stored));
        let fresh = rotated.transform_to_storage(SECRET, b"v".to_vec()).unwrap();
        assert!(fresh.starts_with(b"k8s:enc:aesgcm:v1:k2:"));
        assert!(!rotated.is_stale(SECRET, &fresh));
        // After the old key is removed, its values are a clear error naming it.
        let pruned = secrets_with(&[("k2", K2)]);
        assert_eq!(
            pruned.transform_from_storage(SECRET, &stored).unwrap_err(),
            EncryptionError::UnknownKey {
                key: SECRET.into(),
                name: "k1".into()
            }
        );
        let api: ApiError = pruned
            .transform_from_storage(SECRET, &stored)
            .unwrap_err()
            .into();
        assert_eq!((api.code, api.reason), (500, "InternalError"));
        assert!(api.message.contains("\"k1\""), "{}", api.message);
    }

    #[test]
    fn wrong_key_and_truncated_values_fail_without_panicking() {
        let t = secrets_with(&[("k1", K1)]);
        let stored = t.transform_to_storage(SECRET, b"value".to_vec()).unwrap();
        let impostor = secrets_with(&[("k1", K2)]);
        assert!(matches!(
            impostor.transform_from_storage(SECRET, &stored),
            Err(EncryptionError::Decrypt {
                reason: aesgcm::OpenError::Authentication,
                ..
            })
        ));
        for cut in 0..stored.len() {
            let r = t.transform_from_storage(SECRET, &stored[..cut]);
            if cut < ENCRYPTED.len() {
                assert!(r.is_ok(), "not an encrypted value: read as is");
            } else {
                assert!(r.is_err(), "cut at {cut}");
            }
        }
        assert!(matches!(
            t.transform_from_storage(SECRET, b"k8s:enc:aesgcm:v1:k1:short"),
            Err(EncryptionError::Decrypt {
                reason: aesgcm::OpenError::Truncated,
                ..
            })
        ));
        assert_eq!(
            t.transform_from_storage(SECRET, b"k8s:enc:aescbc:v1:k:xxxx")
                .unwrap_err(),
            EncryptionError::UnsupportedProvider {
                key: SECRET.into(),
                provider: "aescbc".into()
            }
        );
    }

    #[test]
    fn a_value_moved_to_another_key_does_not_decrypt() {
        let t = secrets_with(&[("k1", K1)]);
        let stored = t.transform_to_storage(SECRET, b"value".to_vec()).unwrap();
        assert!(
            t.transform_from_storage("/registry/core/secrets/default/other", &stored)
                .is_err()
        );
    }

    #[test]
    fn identity_first_writes_plaintext_and_marks_encrypted_values_stale() {
        let enc = secrets_with(&[("k1", K1)]);
        let stored = enc.transform_to_storage(SECRET, b"v".to_vec()).unwrap();
        let t = transformer(&format!(
            "- resources: [secrets]\n  providers:\n  - identity: {{}}\n  - aesgcm: {{keys: [{{name: k1, secret: {K1}}}]}}\n"
        ));
        assert_eq!(t.transform_to_storage(SECRET, b"v".to_vec()).unwrap(), b"v");
        assert_eq!(
            t.transform_from_storage(SECRET, &stored).unwrap().as_ref(),
            b"v"
        );
        assert!(t.is_stale(SECRET, &stored));
        assert!(!t.is_stale(SECRET, b"v"));
        // Without any configuration an encrypted value is an error, not garbage.
        assert!(
            Transformer::identity()
                .transform_from_storage(SECRET, &stored)
                .is_err()
        );
    }

    #[test]
    fn rules_match_by_group_and_resource_first_rule_wins() {
        let t = transformer(&format!(
            "- resources: [deployments.apps, widgets.example.com]\n  providers: [{{aesgcm: {{keys: [{{name: a, secret: {K1}}}]}}}}]\n- resources: ['*.']\n  providers: [{{identity: {{}}}}]\n- resources: ['*.*']\n  providers: [{{aesgcm: {{keys: [{{name: b, secret: {K2}}}]}}}}]\n"
        ));
        let w = |k: &str| t.transform_to_storage(k, b"x".to_vec()).unwrap();
        assert!(w("/registry/apps/deployments/d/x").starts_with(b"k8s:enc:aesgcm:v1:a:"));
        assert!(w("/registry/example.com/widgets/d/x").starts_with(b"k8s:enc:aesgcm:v1:a:"));
        assert_eq!(w("/registry/core/secrets/d/x"), b"x");
        assert!(w("/registry/apps/replicasets/d/x").starts_with(b"k8s:enc:aesgcm:v1:b:"));
        assert!(t.covers("/registry/apps/replicasets/"));
        assert!(!secrets_with(&[("k1", K1)]).covers("/registry/core/configmaps/"));
        assert!(!Transformer::identity().is_configured());
    }

    #[test]
    fn key_names_that_prefix_each_other_are_told_apart() {
        let a = secrets_with(&[("k", K1)]);
        let b = secrets_with(&[("k:2", K2)]);
        let both = secrets_with(&[("k", K1), ("k:2", K2)]);
        for t in [&a, &b] {
            let stored = t.transform_to_storage(SECRET, b"v".to_vec()).unwrap();
            assert_eq!(
                both.transform_from_storage(SECRET, &stored)
                    .unwrap()
                    .as_ref(),
                b"v"
            );
        }
    }

    #[test]
    fn reload_switches_keys() {
        let t = secrets_with(&[("k1", K1)]);
        let stored = t.transform_to_storage(SECRET, b"v".to_vec()).unwrap();
        let text = format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers:\n  - aesgcm: {{keys: [{{name: k2, secret: {K2}}}, {{name: k1, secret: {K1}}}]}}\n"
        );
        t.reload(EncryptionConfig::parse(Path::new("t"), &text).unwrap());
        assert!(t.is_stale(SECRET, &stored));
        assert_eq!(
            t.transform_from_storage(SECRET, &stored).unwrap().as_ref(),
            b"v"
        );
    }
}
