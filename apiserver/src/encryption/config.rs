//! The `apiserver.config.k8s.io/v1` `EncryptionConfiguration` file: parsing and validation
//! (YAML or JSON, as kube-apiserver's `--encryption-provider-config`), generation of a fresh one
//! (k3s's `--secrets-encryption`) and key rotation (`k1s secrets-encrypt rotate-keys`), which
//! rewrites the file atomically with mode 0600.
//!
//! Only the `aesgcm` and `identity` providers are built; `aescbc`, `secretbox` and `kms` are
//! refused with an error that says so.

use std::collections::HashSet;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::aesgcm::{self, AesGcmKey};

pub const API_VERSION: &str = "apiserver.config.k8s.io/v1";
pub const KIND: &str = "EncryptionConfiguration";

/// A configuration that cannot be used; the message says what to fix.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not valid YAML or JSON: {detail}")]
    Syntax { path: PathBuf, detail: String },
    #[error("{path}: {field}: {message}")]
    Invalid {
        path: PathBuf,
        field: String,
        message: String,
    },
    /// A `resources[].resources[]` entry upstream rejects.
    #[error("{path}: {field}: {reason}")]
    ResourceName {
        path: PathBuf,
        field: String,
        #[source]
        reason: ResourceNameError,
    },
    #[error(transparent)]
    Random(#[from] aesgcm::RandomFailed),
}

/// Why a `resources[].resources[]` entry is refused (upstream's messages; `name` is the
/// entry).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResourceNameError {
    #[error("must not be empty")]
    Empty,
    #[error(
        "use '*.' to encrypt all the resources from core API group or *.* to encrypt all resources"
    )]
    BareWildcard,
    #[error(
        "{name:?} is not a resource name: use the lower-case plural, e.g. secrets or deployments.apps"
    )]
    NotPlural { name: String },
    #[error("{name:?}: only '*.*' may have a wildcard group")]
    WildcardGroup { name: String },
    #[error("{name:?}: a wildcard group needs a wildcard resource ('*.*')")]
    GroupWithoutWildcardResource { name: String },
    #[error("'extensions' group has been removed and cannot be used for encryption")]
    Extensions,
    #[error(
        "'*.events.k8s.io' objects are stored using the 'events' API group in etcd. Use 'events' instead in the config file"
    )]
    EventsGroup,
}

/// A parsed, validated configuration.
#[derive(Debug)]
pub struct EncryptionConfig {
    /// Where it was read from.
    pub path: PathBuf,
    /// The rules in file order: the first that matches a resource applies to it.
    pub rules: Vec<RuleConfig>,
}

/// One entry of `resources[]`.
#[derive(Debug)]
pub struct RuleConfig {
    /// As written: `secrets`, `deployments.apps`, `*.apps`, `*.`, `*.*`.
    pub resources: Vec<String>,
    /// In order: the first writes, all read.
    pub providers: Vec<ProviderConfig>,
}

/// One provider.
#[derive(Debug)]
pub enum ProviderConfig {
    Identity,
    AesGcm(Vec<AesGcmKey>),
}

impl ProviderConfig {
    /// What `status` shows for it.
    pub fn describe(&self) -> String {
        match self {
            Self::Identity => "identity".into(),
            Self::AesGcm(keys) => {
                let names: Vec<&str> = keys.iter().map(AesGcmKey::name).collect();
                format!("aesgcm (keys: {})", names.join(", "))
            }
        }
    }

    /// The name of the key new writes use, if this provider encrypts.
    pub fn write_key(&self) -> Option<&str> {
        match self {
            Self::Identity => None,
            Self::AesGcm(keys) => keys.first().map(AesGcmKey::name),
        }
    }
}

impl EncryptionConfig {
    /// Reads and validates the file at `path`.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// Validates a document (`path` only names it in errors).
    pub fn parse(path: &Path, text: &str) -> Result<Self, ConfigError> {
        let doc = parse_document(path, text)?;
        let invalid = |field: &str, message: &str| ConfigError::Invalid {
            path: path.to_owned(),
            field: field.to_owned(),
            message: message.to_owned(),
        };
        let obj = doc
            .as_object()
            .ok_or_else(|| invalid("(document)", "must be an EncryptionConfiguration object"))?;
        if obj.get("kind").and_then(Value::as_str) != Some(KIND) {
            return Err(invalid("kind", &format!("must be {KIND:?}")));
        }
        if obj.get("apiVersion").and_then(Value::as_str) != Some(API_VERSION) {
            return Err(invalid("apiVersion", &format!("must be {API_VERSION:?}")));
        }
        let resources = match obj.get("resources") {
            Some(Value::Array(a)) if !a.is_empty() => a,
            _ => {
                return Err(invalid(
                    "resources",
                    "must list at least one entry of resources and providers",
                ));
            }
        };
        let mut seen = HashSet::new();
        let mut rules = Vec::new();
        for (i, entry) in resources.iter().enumerate() {
            let at = format!("resources[{i}]");
            let names = match entry.get("resources") {
                Some(Value::Array(a)) if !a.is_empty() => a,
                _ => {
                    return Err(invalid(
                        &format!("{at}.resources"),
                        "must name at least one resource, e.g. secrets",
                    ));
                }
            };
            let mut list = Vec::new();
            for (j, n) in names.iter().enumerate() {
                let field = format!("{at}.resources[{j}]");
                let n = n
                    .as_str()
                    .ok_or_else(|| invalid(&field, "must be a string"))?;
                check_resource_name(n).map_err(|reason| ConfigError::ResourceName {
                    path: path.to_owned(),
                    field: field.clone(),
                    reason,
                })?;
                if !seen.insert(n.to_owned()) {
                    return Err(invalid(
                        &field,
                        "the same resource is listed more than once",
                    ));
                }
                list.push(n.to_owned());
            }
            let providers = match entry.get("providers") {
                Some(Value::Array(a)) if !a.is_empty() => a,
                _ => {
                    return Err(invalid(
                        &format!("{at}.providers"),
                        "must list at least one provider (aesgcm or identity)",
                    ));
                }
            };
            let mut parsed = Vec::new();
            let mut key_names = HashSet::new();
            for (j, p) in providers.iter().enumerate() {
                let field = format!("{at}.providers[{j}]");
                let p =
                    parse_provider(p, &field, &mut key_names).map_err(|(f, m)| invalid(&f, &m))?;
                parsed.push(p);
            }
            rules.push(RuleConfig {
                resources: list,
                providers: parsed,
            });
        }
        Ok(Self {
            path: path.to_owned(),
            rules,
        })
    }

    /// A human-readable summary: each rule's resources and providers in order, and which key
    /// writes. No key material.
    pub fn describe(&self) -> String {
        let mut out = format!("Encryption configuration: {}\n", self.path.display());
        for rule in &self.rules {
            out.push_str(&format!("Resources: {}\n", rule.resources.join(", ")));
            for (i, p) in rule.providers.iter().enumerate() {
                out.push_str(&format!("  {}. {}\n", i + 1, p.describe()));
            }
            match rule.providers.first().and_then(ProviderConfig::write_key) {
                Some(k) => out.push_str(&format!("  writes with: aesgcm key {k}\n")),
                None => out.push_str("  writes with: identity (not encrypted)\n"),
            }
        }
        out
    }
}

fn parse_document(path: &Path, text: &str) -> Result<Value, ConfigError> {
    // JSON is YAML; serde_yaml reads both.
    serde_yaml::from_str::<Value>(text).map_err(|e| ConfigError::Syntax {
        path: path.to_owned(),
        detail: e.to_string(),
    })
}

/// Upstream's rules for `resources[].resources[]`.
fn check_resource_name(n: &str) -> Result<(), ResourceNameError> {
    let name = || n.to_owned();
    if n.is_empty() {
        return Err(ResourceNameError::Empty);
    }
    if n == "*" {
        return Err(ResourceNameError::BareWildcard);
    }
    if n.chars()
        .any(|c| c.is_ascii_uppercase() || c.is_whitespace() || c == '/')
    {
        return Err(ResourceNameError::NotPlural { name: name() });
    }
    let (resource, group) = n.split_once('.').unwrap_or((n, ""));
    if resource == "*" && group.contains('*') && group != "*" {
        return Err(ResourceNameError::WildcardGroup { name: name() });
    }
    if resource != "*" && group.contains('*') {
        return Err(ResourceNameError::GroupWithoutWildcardResource { name: name() });
    }
    if group == "extensions" {
        return Err(ResourceNameError::Extensions);
    }
    if group == "events.k8s.io" {
        return Err(ResourceNameError::EventsGroup);
    }
    Ok(())
}

fn parse_provider(
    p: &Value,
    field: &str,
    key_names: &mut HashSet<String>,
) -> Result<ProviderConfig, (String, String)> {
    let bad = |f: &str, m: &str| (f.to_owned(), m.to_owned());
    let obj = p
        .as_object()
        .ok_or_else(|| bad(field, "must be an object such as {aesgcm: {keys: [...]}}"))?;
    if obj.len() != 1 {
        return Err(bad(
            field,
            "must name exactly one provider (aesgcm or identity); split several into separate list elements",
        ));
    }
    let (kind, body) = obj.iter().next().expect("one entry");
    match kind.as_str() {
        "identity" => Ok(ProviderConfig::Identity),
        "aesgcm" => {
            let keys = match body.get("keys") {
                Some(Value::Array(a)) if !a.is_empty() => a,
                _ => {
                    return Err(bad(
                        &format!("{field}.aesgcm.keys"),
                        "must list at least one key {name, secret}",
                    ));
                }
            };
            let mut out = Vec::new();
            for (k, key) in keys.iter().enumerate() {
                let at = format!("{field}.aesgcm.keys[{k}]");
                let name = key
                    .get("name")
                    .and_then(Value::as_str)
                    .filter(|n| !n.is_empty())
                    .ok_or_else(|| bad(&format!("{at}.name"), "is required"))?;
                if !key_names.insert(name.to_owned()) {
                    return Err(bad(
                        &format!("{at}.name"),
                        &format!("key name {name:?} is used more than once"),
                    ));
                }
                let secret = key
                    .get("secret")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .ok_or_else(|| {
                        bad(
                            &format!("{at}.secret"),
                            "is required: the base64 of a random 16- or 32-byte key (head -c 32 /dev/urandom | base64)",
                        )
                    })?;
                out.push(
                    AesGcmKey::new(name, secret)
                        .map_err(|e| bad(&format!("{at}.secret"), &e.to_string()))?,
                );
            }
            Ok(ProviderConfig::AesGcm(out))
        }
        "aescbc" | "secretbox" | "kms" => Err(bad(
            &format!("{field}.{kind}"),
            &format!("the {kind} provider is not supported by k1s; use aesgcm (or identity)"),
        )),
        other => Err(bad(
            &format!("{field}.{other}"),
            "unknown provider; use aesgcm or identity",
        )),
    }
}

/// `--secrets-encryption` without a config file: the file under the data dir, created on first
/// use with one random 32-byte aesgcm key for secrets (identity after it, so values written
/// before encryption was enabled still read).
pub fn generated_path(data_dir: &Path) -> PathBuf {
    data_dir.join("server/cred/encryption-config.json")
}

/// Creates the generated configuration at `path` unless it exists.
pub fn ensure_generated(path: &Path) -> Result<(), ConfigError> {
    if path.exists() {
        return Ok(());
    }
    let secret = aesgcm::random_secret().map_err(ConfigError::Random)?;
    let doc = json!({
        "kind": KIND,
        "apiVersion": API_VERSION,
        "resources": [{
            "resources": ["secrets"],
            "providers": [
                {"aesgcm": {"keys": [{"name": key_name(&HashSet::new()), "secret": secret}]}},
                {"identity": {}},
            ],
        }],
    });
    write_atomically(path, &doc, true)
}

/// What [`rotate_keys`] did.
#[derive(Debug)]
pub struct Rotated {
    /// The new key's name (now first, so it writes).
    pub new_key: String,
    /// Rules whose first provider is not aesgcm: they do not write with the new key.
    pub not_writing: Vec<String>,
}

/// Prepends a new random key to the first aesgcm provider of every rule that has one, keeping
/// the old keys (they still decrypt), and rewrites the file atomically with mode 0600.
pub fn rotate_keys(path: &Path) -> Result<Rotated, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_owned(),
        source,
    })?;
    // Refuse to rewrite a file the server would not accept.
    EncryptionConfig::parse(path, &text)?;
    let mut doc = parse_document(path, &text)?;
    let mut taken = HashSet::new();
    for rule in doc["resources"].as_array().into_iter().flatten() {
        for p in rule["providers"].as_array().into_iter().flatten() {
            for k in p["aesgcm"]["keys"].as_array().into_iter().flatten() {
                if let Some(n) = k["name"].as_str() {
                    taken.insert(n.to_owned());
                }
            }
        }
    }
    let name = key_name(&taken);
    let secret = aesgcm::random_secret().map_err(ConfigError::Random)?;
    let mut rotated = 0;
    let mut not_writing = Vec::new();
    for rule in doc["resources"].as_array_mut().into_iter().flatten() {
        let resources = rule["resources"].to_string();
        let Some(providers) = rule["providers"].as_array_mut() else {
            continue;
        };
        if providers.first().is_some_and(|p| p.get("aesgcm").is_none()) {
            not_writing.push(resources);
        }
        if let Some(keys) = providers
            .iter_mut()
            .find_map(|p| p.get_mut("aesgcm"))
            .and_then(|a| a.get_mut("keys"))
            .and_then(Value::as_array_mut)
        {
            keys.insert(0, json!({"name": name, "secret": secret}));
            rotated += 1;
        }
    }
    if rotated == 0 {
        return Err(ConfigError::Invalid {
            path: path.to_owned(),
            field: "resources[].providers".into(),
            message: "no aesgcm provider to rotate; add one first".into(),
        });
    }
    let json = text.trim_start().starts_with('{');
    write_atomically(path, &doc, json)?;
    Ok(Rotated {
        new_key: name,
        not_writing,
    })
}

/// `aesgcmkey-<UTC time>`, made unique among `taken`.
fn key_name(taken: &HashSet<String>) -> String {
    let now = jiff::tz::Offset::UTC.to_datetime(jiff::Timestamp::now());
    let base = format!(
        "aesgcmkey-{:04}{:02}{:02}T{:02}{:02}{:02}Z",
        now.year(),
        now.month(),
        now.day(),
        now.hour(),
        now.minute(),
        now.second()
    );
    let mut name = base.clone();
    let mut n = 2;
    while taken.contains(&name) {
        name = format!("{base}-{n}");
        n += 1;
    }
    name
}

/// Writes `doc` to a temporary file next to `path` with mode 0600, syncs it and renames it over
/// `path`, so a reader sees the old or the new file, never half of one.
fn write_atomically(path: &Path, doc: &Value, as_json: bool) -> Result<(), ConfigError> {
    let err = |source| ConfigError::Write {
        path: path.to_owned(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(err)?;
    let text = if as_json {
        serde_json::to_string_pretty(doc).unwrap_or_default() + "\n"
    } else {
        serde_yaml::to_string(doc).map_err(|e| err(std::io::Error::other(e.to_string())))?
    };
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(".tmp");
    let tmp = dir.join(tmp_name);
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(err)?;
    f.set_permissions(std::fs::Permissions::from_mode(0o600))
        .map_err(err)?;
    f.write_all(text.as_bytes()).map_err(err)?;
    f.sync_all().map_err(err)?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(err)?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const K32: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
    const K16: &str = "MDEyMzQ1Njc4OWFiY2RlZg==";

    fn parse(text: &str) -> Result<EncryptionConfig, ConfigError> {
        EncryptionConfig::parse(Path::new("enc.yaml"), text)
    }

    #[test]
    fn yaml_and_json_parse() {
        let yaml = format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets, configmaps]\n  providers:\n  - aesgcm:\n      keys:\n      - name: key2\n        secret: {K32}\n      - name: key1\n        secret: {K16}\n  - identity: {{}}\n"
        );
        let c = parse(&yaml).unwrap();
        assert_eq!(c.rules.len(), 1);
        assert_eq!(c.rules[0].resources, ["secrets", "configmaps"]);
        assert_eq!(c.rules[0].providers[0].write_key(), Some("key2"));
        assert!(matches!(c.rules[0].providers[1], ProviderConfig::Identity));
        let d = c.describe();
        assert!(d.contains("aesgcm (keys: key2, key1)"), "{d}");
        assert!(d.contains("writes with: aesgcm key key2"), "{d}");
        assert!(!d.contains(K32));

        let json = format!(
            r#"{{"apiVersion":"apiserver.config.k8s.io/v1","kind":"EncryptionConfiguration","resources":[{{"resources":["*.apps"],"providers":[{{"identity":{{}}}},{{"aesgcm":{{"keys":[{{"name":"a","secret":"{K32}"}}]}}}}]}}]}}"#
        );
        let c = parse(&json).unwrap();
        assert_eq!(c.rules[0].providers[0].write_key(), None);
        assert!(c.describe().contains("identity (not encrypted)"));
    }

    #[test]
    fn bad_configurations_say_what_to_fix() {
        let head = "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n";
        let cases = [
            ("resources: [", "not valid YAML or JSON"),
            (
                "apiVersion: v1\nkind: EncryptionConfiguration\nresources: []",
                "apiVersion: must be",
            ),
            (
                "apiVersion: apiserver.config.k8s.io/v1\nkind: Foo",
                "kind: must be",
            ),
            ("resources: []", "resources: must list"),
            (
                "resources:\n- providers: [{identity: {}}]",
                "resources[0].resources: must name",
            ),
            (
                "resources:\n- resources: [secrets]",
                "resources[0].providers: must list",
            ),
            (
                "resources:\n- resources: ['*']\n  providers: [{identity: {}}]",
                "use '*.' to encrypt",
            ),
            (
                "resources:\n- resources: [Secrets]\n  providers: [{identity: {}}]",
                "lower-case plural",
            ),
            (
                "resources:\n- resources: [secrets, secrets]\n  providers: [{identity: {}}]",
                "more than once",
            ),
            (
                "resources:\n- resources: [events.events.k8s.io]\n  providers: [{identity: {}}]",
                "Use 'events' instead",
            ),
            (
                "resources:\n- resources: [secrets]\n  providers: [{aescbc: {keys: []}}]",
                "providers[0].aescbc: the aescbc provider is not supported",
            ),
            (
                "resources:\n- resources: [secrets]\n  providers: [{aesgm: {}}]",
                "unknown provider",
            ),
            (
                "resources:\n- resources: [secrets]\n  providers: [{identity: {}, aesgcm: {}}]",
                "exactly one provider",
            ),
            (
                "resources:\n- resources: [secrets]\n  providers: [{aesgcm: {keys: []}}]",
                "aesgcm.keys: must list",
            ),
            (
                "resources:\n- resources: [secrets]\n  providers: [{aesgcm: {keys: [{secret: x}]}}]",
                "keys[0].name: is required",
            ),
            (
                "resources:\n- resources: [secrets]\n  providers: [{aesgcm: {keys: [{name: a}]}}]",
                "keys[0].secret: is required",
            ),
            (
                "resources:\n- resources: [secrets]\n  providers: [{aesgcm: {keys: [{name: a, secret: '!!'}]}}]",
                "not valid base64",
            ),
            (
                "resources:\n- resources: [secrets]\n  providers: [{aesgcm: {keys: [{name: a, secret: 'YWJj'}]}}]",
                "must be 16 or 32 bytes",
            ),
        ];
        for (body, want) in cases {
            let text = if body.starts_with("apiVersion") || body == "resources: [" {
                body.to_owned()
            } else {
                format!("{head}{body}")
            };
            let err = parse(&text).unwrap_err().to_string();
            assert!(err.contains(want), "{body:?}: {err}");
            assert!(err.starts_with("enc.yaml"), "{err}");
        }
        let dup = format!(
            "{head}resources:\n- resources: [secrets]\n  providers:\n  - aesgcm: {{keys: [{{name: a, secret: {K32}}}]}}\n  - aesgcm: {{keys: [{{name: a, secret: {K16}}}]}}"
        );
        assert!(
            parse(&dup)
                .unwrap_err()
                .to_string()
                .contains("used more than once")
        );
    }

    #[test]
    fn resource_names_are_refused_with_upstream_words() {
        let cases = [
            ("", ResourceNameError::Empty, "must not be empty"),
            (
                "*",
                ResourceNameError::BareWildcard,
                "use '*.' to encrypt all the resources from core API group or *.* to encrypt all resources",
            ),
            (
                "Secrets",
                ResourceNameError::NotPlural {
                    name: "Secrets".into(),
                },
                "\"Secrets\" is not a resource name: use the lower-case plural, e.g. secrets or deployments.apps",
            ),
            (
                "*.a*",
                ResourceNameError::WildcardGroup {
                    name: "*.a*".into(),
                },
                "\"*.a*\": only '*.*' may have a wildcard group",
            ),
            (
                "secrets.*",
                ResourceNameError::GroupWithoutWildcardResource {
                    name: "secrets.*".into(),
                },
                "\"secrets.*\": a wildcard group needs a wildcard resource ('*.*')",
            ),
            (
                "*.extensions",
                ResourceNameError::Extensions,
                "'extensions' group has been removed and cannot be used for encryption",
            ),
            (
                "events.events.k8s.io",
                ResourceNameError::EventsGroup,
                "'*.events.k8s.io' objects are stored using the 'events' API group in etcd. Use 'events' instead in the config file",
            ),
        ];
        for (name, want, text) in cases {
            let got = check_resource_name(name).unwrap_err();
            assert_eq!((&got, got.to_string().as_str()), (&want, text), "{name:?}");
        }
        assert!(check_resource_name("*.*").is_ok() && check_resource_name("*.").is_ok());
        let head = "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n";
        let err = parse(&format!(
            "{head}resources:\n- resources: [secrets, '']\n  providers: [{{identity: {{}}}}]"
        ))
        .unwrap_err();
        assert!(matches!(
            err,
            ConfigError::ResourceName {
                reason: ResourceNameError::Empty,
                ..
            }
        ));
        assert_eq!(
            err.to_string(),
            "enc.yaml: resources[0].resources[1]: must not be empty"
        );
    }

    #[test]
    fn generated_file_is_private_and_valid() {
        let dir = tempfile::tempdir().unwrap();
        let path = generated_path(dir.path());
        ensure_generated(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let c = EncryptionConfig::load(&path).unwrap();
        assert_eq!(c.rules[0].resources, ["secrets"]);
        let first = c.rules[0].providers[0].write_key().unwrap().to_owned();
        assert!(first.starts_with("aesgcmkey-"));
        // A second start keeps the key.
        ensure_generated(&path).unwrap();
        let again = EncryptionConfig::load(&path).unwrap();
        assert_eq!(
            again.rules[0].providers[0].write_key(),
            Some(first.as_str())
        );
    }

    #[test]
    fn rotate_keys_prepends_a_new_key_and_keeps_the_old() {
        let dir = tempfile::tempdir().unwrap();
        for (file, text) in [
            (
                "enc.yaml",
                format!(
                    "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers:\n  - aesgcm:\n      keys:\n      - name: old\n        secret: {K32}\n  - identity: {{}}\n"
                ),
            ),
            (
                "enc.json",
                format!(
                    r#"{{"apiVersion":"apiserver.config.k8s.io/v1","kind":"EncryptionConfiguration","resources":[{{"resources":["secrets"],"providers":[{{"aesgcm":{{"keys":[{{"name":"old","secret":"{K32}"}}]}}}}]}}]}}"#
                ),
            ),
        ] {
            let path = dir.path().join(file);
            std::fs::write(&path, text).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
            let r = rotate_keys(&path).unwrap();
            assert!(r.not_writing.is_empty());
            let c = EncryptionConfig::load(&path).unwrap();
            let ProviderConfig::AesGcm(keys) = &c.rules[0].providers[0] else {
                panic!("aesgcm first");
            };
            let names: Vec<&str> = keys.iter().map(AesGcmKey::name).collect();
            assert_eq!(names, [r.new_key.as_str(), "old"]);
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{file}");
            let text = std::fs::read_to_string(&path).unwrap();
            assert_eq!(text.trim_start().starts_with('{'), file.ends_with("json"));
            assert!(text.contains(K32), "the old key stays");
            // Twice in the same second: still unique names.
            let r2 = rotate_keys(&path).unwrap();
            assert_ne!(r2.new_key, r.new_key);
            assert!(!dir.path().join(format!("{file}.tmp")).exists());
        }
    }

    #[test]
    fn rotate_keys_refuses_bad_files_and_files_without_aesgcm() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("enc.yaml");
        std::fs::write(&path, "kind: Nope").unwrap();
        assert!(rotate_keys(&path).is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "kind: Nope");
        std::fs::write(
            &path,
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers: [{identity: {}}]\n",
        )
        .unwrap();
        let err = rotate_keys(&path).unwrap_err().to_string();
        assert!(err.contains("no aesgcm provider"), "{err}");
        assert!(matches!(
            rotate_keys(&dir.path().join("missing")),
            Err(ConfigError::Read { .. })
        ));
    }
}
