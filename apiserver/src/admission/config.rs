//! `--admission-control-config-file`: upstream's `AdmissionConfiguration`
//! (`apiserver.config.k8s.io/v1`, also `apiserver.k8s.io/v1alpha1`), YAML or JSON. Each entry
//! of `plugins` names a plugin and carries its configuration inline (`configuration`) or in a
//! file (`path`, relative to the admission file's directory).
//!
//! The one plugin configured this way today is PodSecurity: its `PodSecurityConfiguration`
//! (`pod-security.admission.config.k8s.io/v1`, `v1beta1`) sets the cluster-wide default
//! levels for namespaces without labels, and the exemptions (users, namespaces, runtime
//! classes). Configurations of other plugins are accepted and ignored, with a log line.

use std::path::Path;

use serde_json::Value;

use super::pod_security::{Level, LevelVersion, Policy, Version};

/// A configuration that cannot be used; the message says what to fix.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
}

/// What the admission chain is configured with.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AdmissionConfig {
    pub pod_security: PodSecurityConfig,
    /// Plugins turned off (`--disable-admission-plugins`).
    pub disabled: std::collections::BTreeSet<super::plugins::Plugin>,
}

/// PodSecurity's defaults and exemptions (upstream's defaults: everything privileged, nothing
/// exempt).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodSecurityConfig {
    pub defaults: Policy,
    /// Authenticated user names whose requests are not checked.
    pub exempt_users: Vec<String>,
    /// Namespaces whose pods are not checked.
    pub exempt_namespaces: Vec<String>,
    /// `spec.runtimeClassName`s whose pods are not checked.
    pub exempt_runtime_classes: Vec<String>,
}

impl PodSecurityConfig {
    /// Whether a request is exempt (upstream checks the user, then the namespace, then the
    /// runtime class of the pod or of a workload's template).
    pub fn exempt(&self, user: Option<&str>, namespace: &str, pod_spec: &Value) -> bool {
        user.is_some_and(|u| self.exempt_users.iter().any(|x| x == u))
            || self.exempt_namespaces.iter().any(|x| x == namespace)
            || pod_spec["runtimeClassName"]
                .as_str()
                .is_some_and(|rc| self.exempt_runtime_classes.iter().any(|x| x == rc))
    }
}

impl AdmissionConfig {
    /// Reads and checks the file at `path`.
    pub fn load(path: &Path) -> Result<AdmissionConfig, ConfigError> {
        let text = read(path)?;
        let dir = path.parent().unwrap_or(Path::new("."));
        Self::parse(&text, &path.display().to_string(), dir)
    }

    /// Parses an `AdmissionConfiguration`; `name` labels errors and `dir` resolves `path`
    /// entries.
    pub fn parse(text: &str, name: &str, dir: &Path) -> Result<AdmissionConfig, ConfigError> {
        let invalid = |message: String| ConfigError::Invalid {
            path: name.to_owned(),
            message,
        };
        let doc = parse_doc(text).map_err(&invalid)?;
        expect_kind(
            &doc,
            &["apiserver.config.k8s.io/v1", "apiserver.k8s.io/v1alpha1"],
            "AdmissionConfiguration",
        )
        .map_err(&invalid)?;
        let mut out = AdmissionConfig::default();
        let plugins = match &doc["plugins"] {
            Value::Null => Vec::new(),
            Value::Array(a) => a.clone(),
            _ => return Err(invalid("plugins: must be a list".into())),
        };
        for (i, p) in plugins.iter().enumerate() {
            let Some(plugin) = p["name"].as_str() else {
                return Err(invalid(format!("plugins[{i}].name: Required value")));
            };
            let (conf, conf_name) = match (&p["configuration"], p["path"].as_str()) {
                (Value::Null, Some(file)) => {
                    let full = dir.join(file);
                    let text = read(&full)?;
                    let shown = full.display().to_string();
                    let parsed = parse_doc(&text).map_err(|message| ConfigError::Invalid {
                        path: shown.clone(),
                        message,
                    })?;
                    (parsed, shown)
                }
                (Value::Null, None) => continue,
                (c, _) => (c.clone(), format!("{name}: plugins[{i}].configuration")),
            };
            match plugin {
                "PodSecurity" => {
                    out.pod_security =
                        pod_security(&conf).map_err(|message| ConfigError::Invalid {
                            path: conf_name,
                            message,
                        })?;
                }
                other => {
                    tracing::info!(
                        plugin = other,
                        "admission configuration ignored: k1s does not configure this plugin"
                    );
                }
            }
        }
        Ok(out)
    }
}

fn read(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.display().to_string(),
        source,
    })
}

/// YAML (a superset of JSON) into a JSON value.
fn parse_doc(text: &str) -> Result<Value, String> {
    serde_yaml::from_str::<Value>(text).map_err(|e| format!("not valid YAML or JSON: {e}"))
}

fn expect_kind(doc: &Value, versions: &[&str], kind: &str) -> Result<(), String> {
    let api_version = doc["apiVersion"].as_str().unwrap_or("");
    let got = doc["kind"].as_str().unwrap_or("");
    if got != kind || !versions.contains(&api_version) {
        return Err(format!(
            "expected kind {kind} with apiVersion {}, got kind {got:?} apiVersion {api_version:?}",
            versions.join(" or ")
        ));
    }
    Ok(())
}

/// A `PodSecurityConfiguration`, checked as upstream's validation does.
fn pod_security(conf: &Value) -> Result<PodSecurityConfig, String> {
    expect_kind(
        conf,
        &[
            "pod-security.admission.config.k8s.io/v1",
            "pod-security.admission.config.k8s.io/v1beta1",
            "pod-security.admission.config.k8s.io/v1alpha1",
        ],
        "PodSecurityConfiguration",
    )?;
    let mut out = PodSecurityConfig::default();
    let d = &conf["defaults"];
    let mut errors = Vec::new();
    for (mode, slot) in [
        ("enforce", &mut out.defaults.enforce),
        ("audit", &mut out.defaults.audit),
        ("warn", &mut out.defaults.warn),
    ] {
        *slot = mode_default(d, mode, &mut errors);
    }
    let list = |field: &str, errors: &mut Vec<String>| -> Vec<String> {
        match &conf["exemptions"][field] {
            Value::Null => Vec::new(),
            Value::Array(a) => a
                .iter()
                .enumerate()
                .filter_map(|(i, v)| match v.as_str() {
                    Some(s) if !s.is_empty() => Some(s.to_owned()),
                    _ => {
                        errors.push(format!("exemptions.{field}[{i}]: Invalid value: {v}: must be a non-empty string"));
                        None
                    }
                })
                .collect(),
            _ => {
                errors.push(format!("exemptions.{field}: must be a list of strings"));
                Vec::new()
            }
        }
    };
    out.exempt_users = list("usernames", &mut errors);
    out.exempt_namespaces = list("namespaces", &mut errors);
    out.exempt_runtime_classes = list("runtimeClasses", &mut errors);
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors.join("; "))
    }
}

/// `defaults.<mode>` and `defaults.<mode>-version` (absent: `privileged`, `latest`).
fn mode_default(d: &Value, mode: &str, errors: &mut Vec<String>) -> LevelVersion {
    let mut lv = LevelVersion::PRIVILEGED_LATEST;
    if let Some(v) = d[mode].as_str() {
        match Level::parse(v) {
            Ok(l) => lv.level = l,
            Err((_, msg)) => errors.push(format!("defaults.{mode}: Invalid value: {v:?}: {msg}")),
        }
    }
    let version_field = format!("{mode}-version");
    if let Some(v) = d[&version_field].as_str() {
        match Version::parse(v) {
            Ok(ver) => lv.version = ver,
            Err((_, msg)) => errors.push(format!(
                "defaults.{version_field}: Invalid value: {v:?}: {msg}"
            )),
        }
    }
    lv
}

#[cfg(test)]
mod tests {
    use super::*;

    const INLINE: &str = r#"
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
  configuration:
    apiVersion: pod-security.admission.config.k8s.io/v1
    kind: PodSecurityConfiguration
    defaults:
      enforce: baseline
      enforce-version: v1.30
      warn: restricted
    exemptions:
      usernames: [ci-bot]
      namespaces: [kube-system]
      runtimeClasses: [kata]
- name: EventRateLimit
  path: eventconfig.yaml
"#;

    #[test]
    fn inline_pod_security_configuration() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("eventconfig.yaml"), "kind: Configuration\n").unwrap();
        let c = AdmissionConfig::parse(INLINE, "admission.yaml", dir.path()).unwrap();
        let ps = &c.pod_security;
        assert_eq!(ps.defaults.enforce.level, Level::Baseline);
        assert_eq!(ps.defaults.enforce.version, Version::V1(30));
        assert_eq!(ps.defaults.warn.level, Level::Restricted);
        assert_eq!(ps.defaults.audit, LevelVersion::PRIVILEGED_LATEST);
        assert!(ps.exempt(Some("ci-bot"), "default", &Value::Null));
        assert!(ps.exempt(None, "kube-system", &Value::Null));
        assert!(ps.exempt(
            None,
            "default",
            &serde_json::json!({"runtimeClassName": "kata"})
        ));
        assert!(!ps.exempt(Some("alice"), "default", &serde_json::json!({})));
    }

    #[test]
    fn configuration_from_a_path_relative_to_the_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("psa.json"),
            r#"{"apiVersion":"pod-security.admission.config.k8s.io/v1","kind":"PodSecurityConfiguration","defaults":{"enforce":"restricted"}}"#,
        )
        .unwrap();
        let main = dir.path().join("admission.yaml");
        std::fs::write(
            &main,
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: PodSecurity\n  path: psa.json\n",
        )
        .unwrap();
        let c = AdmissionConfig::load(&main).unwrap();
        assert_eq!(c.pod_security.defaults.enforce.level, Level::Restricted);
    }

    #[test]
    fn errors_say_what_to_fix() {
        let dir = tempfile::tempdir().unwrap();
        let bad_level = INLINE.replace("enforce: baseline", "enforce: strict");
        let e = AdmissionConfig::parse(&bad_level, "a.yaml", dir.path()).unwrap_err();
        assert!(
            e.to_string()
                .contains("defaults.enforce: Invalid value: \"strict\""),
            "{e}"
        );
        let e = AdmissionConfig::parse("kind: Nope\n", "a.yaml", dir.path()).unwrap_err();
        assert!(
            e.to_string()
                .contains("expected kind AdmissionConfiguration"),
            "{e}"
        );
        let e = AdmissionConfig::parse("{{{", "a.yaml", dir.path()).unwrap_err();
        assert!(e.to_string().contains("not valid YAML"), "{e}");
        let missing = INLINE.replace(
            "- name: EventRateLimit\n  path: eventconfig.yaml\n",
            "- name: PodSecurity\n  path: nope.yaml\n",
        );
        let e = AdmissionConfig::parse(&missing, "a.yaml", dir.path()).unwrap_err();
        assert!(e.to_string().contains("nope.yaml"), "{e}");
    }
}
