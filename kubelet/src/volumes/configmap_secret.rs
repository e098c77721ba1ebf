//! The configMap and secret volume plugins (`kubernetes.io~configmap`, `kubernetes.io~secret`):
//! fetching the object, and turning it into an atomic-writer payload as upstream's
//! `MakePayload` does (`items` key → path with their modes, `defaultMode`, `optional`). Also
//! used by the projected plugin for its configMap and secret sources.
//!
//! Secret values never appear in errors or logs.

use std::collections::BTreeMap;

use k1s_api::client::{Client, ClientError, ResourceRef};
use k8s_openapi::api::core::v1::{ConfigMap, KeyToPath, Secret};

use super::atomic_writer::{FileProjection, Payload};

/// Why a configMap or secret (volume or projection) has no payload. `kind` is `configmap` or
/// `secret`.
#[derive(Debug, thiserror::Error)]
pub enum ConfigMapSecretError {
    #[error("{kind} \"{name}\" not found")]
    NotFound { kind: &'static str, name: String },
    #[error("couldn't get {kind} {namespace}/{name}: {source}")]
    Get {
        kind: &'static str,
        namespace: String,
        name: String,
        source: ClientError,
    },
    #[error("configmap \"{name}\" does not decode: {source}")]
    ConfigMapDecode {
        name: String,
        source: serde_json::Error,
    },
    /// The decode error could quote a value: not kept.
    #[error("secret \"{name}\" does not decode")]
    SecretDecode { name: String },
    #[error("configmap references non-existent config key: {0}")]
    MissingConfigMapKey(String),
    #[error("references non-existent secret key: {0}")]
    MissingSecretKey(String),
}

/// Upstream's default mode of configMap, secret, downwardAPI and projected files.
pub(crate) const DEFAULT_MODE: i32 = 0o644;

/// Which kind of object a payload comes from (for error messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    ConfigMap,
    Secret,
}

impl Kind {
    fn word(self) -> &'static str {
        match self {
            Kind::ConfigMap => "configmap",
            Kind::Secret => "secret",
        }
    }
}

/// A mode from the API (validated there to 0..=0777) as permission bits.
pub(crate) fn file_mode(mode: Option<i32>, default: i32) -> u32 {
    (mode.unwrap_or(default) as u32) & 0o777
}

/// The key → bytes of a configMap (`data` and `binaryData`) or of a secret (`data`), None if
/// the object does not exist and is optional.
pub(crate) async fn fetch(
    client: &dyn Client,
    kind: Kind,
    namespace: &str,
    name: &str,
    optional: bool,
) -> Result<Option<BTreeMap<String, Vec<u8>>>, ConfigMapSecretError> {
    let resource = match kind {
        Kind::ConfigMap => "configmaps",
        Kind::Secret => "secrets",
    };
    let r = ResourceRef::new("", "v1", resource, Some(namespace));
    let value = match client.get(&r, name).await {
        Ok(v) => v,
        Err(e) if e.is_not_found() => {
            if optional {
                return Ok(None);
            }
            return Err(ConfigMapSecretError::NotFound {
                kind: kind.word(),
                name: name.to_string(),
            });
        }
        Err(source) => {
            return Err(ConfigMapSecretError::Get {
                kind: kind.word(),
                namespace: namespace.to_string(),
                name: name.to_string(),
                source,
            });
        }
    };
    let mut out = BTreeMap::new();
    match kind {
        Kind::ConfigMap => {
            let cm: ConfigMap = serde_json::from_value(value).map_err(|source| {
                ConfigMapSecretError::ConfigMapDecode {
                    name: name.to_string(),
                    source,
                }
            })?;
            for (k, v) in cm.data.unwrap_or_default() {
                out.insert(k, v.into_bytes());
            }
            for (k, v) in cm.binary_data.unwrap_or_default() {
                out.insert(k, v.0);
            }
        }
        Kind::Secret => {
            // The decode error could quote a value: not shown.
            let s: Secret =
                serde_json::from_value(value).map_err(|_| ConfigMapSecretError::SecretDecode {
                    name: name.to_string(),
                })?;
            for (k, v) in s.data.unwrap_or_default() {
                out.insert(k, v.0);
            }
        }
    }
    Ok(Some(out))
}

/// The files of a configMap or secret volume (or projection), as upstream's `MakePayload`.
pub(crate) fn make_payload(
    kind: Kind,
    data: &BTreeMap<String, Vec<u8>>,
    items: &[KeyToPath],
    default_mode: u32,
    optional: bool,
) -> Result<Payload, ConfigMapSecretError> {
    let mut payload = Payload::new();
    if items.is_empty() {
        for (k, v) in data {
            payload.insert(
                k.clone(),
                FileProjection {
                    data: v.clone(),
                    mode: default_mode,
                },
            );
        }
        return Ok(payload);
    }
    for item in items {
        let Some(v) = data.get(&item.key) else {
            if optional {
                continue;
            }
            return Err(match kind {
                Kind::ConfigMap => ConfigMapSecretError::MissingConfigMapKey(item.key.clone()),
                Kind::Secret => ConfigMapSecretError::MissingSecretKey(item.key.clone()),
            });
        };
        payload.insert(
            item.path.clone(),
            FileProjection {
                data: v.clone(),
                mode: item.mode.map_or(default_mode, |m| (m as u32) & 0o777),
            },
        );
    }
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data() -> BTreeMap<String, Vec<u8>> {
        [
            ("a".to_string(), b"1".to_vec()),
            ("b".to_string(), b"2".to_vec()),
        ]
        .into_iter()
        .collect()
    }

    fn item(key: &str, path: &str, mode: Option<i32>) -> KeyToPath {
        KeyToPath {
            key: key.into(),
            path: path.into(),
            mode,
        }
    }

    #[test]
    fn all_keys_with_the_default_mode() {
        let p = make_payload(Kind::ConfigMap, &data(), &[], 0o644, false).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p["a"].mode, 0o644);
    }

    #[test]
    fn items_select_rename_and_set_modes() {
        let items = [item("a", "x/renamed", Some(0o400)), item("b", "b", None)];
        let p = make_payload(Kind::Secret, &data(), &items, 0o640, false).unwrap();
        assert_eq!(p.keys().collect::<Vec<_>>(), ["b", "x/renamed"]);
        assert_eq!(p["x/renamed"].mode, 0o400);
        assert_eq!(p["b"].mode, 0o640);
    }

    #[test]
    fn missing_keys_fail_unless_optional() {
        let items = [item("zz", "zz", None)];
        assert_eq!(
            make_payload(Kind::ConfigMap, &data(), &items, 0o644, false)
                .unwrap_err()
                .to_string(),
            "configmap references non-existent config key: zz"
        );
        assert_eq!(
            make_payload(Kind::Secret, &data(), &items, 0o644, false)
                .unwrap_err()
                .to_string(),
            "references non-existent secret key: zz"
        );
        assert!(
            make_payload(Kind::Secret, &data(), &items, 0o644, true)
                .unwrap()
                .is_empty()
        );
    }
}
