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
    #[error("{path}: {problem}")]
    Invalid {
        path: String,
        #[source]
        problem: Problem,
    },
}

/// What is wrong inside one configuration document.
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    #[error("not valid YAML or JSON: {0}")]
    Syntax(#[source] serde_yaml::Error),
    /// `versions` are the accepted apiVersions.
    #[error(
        "expected kind {kind} with apiVersion {}, got kind {got:?} apiVersion {api_version:?}",
        .versions.join(" or ")
    )]
    Kind {
        kind: &'static str,
        versions: &'static [&'static str],
        got: String,
        api_version: String,
    },
    #[error("plugins: must be a list")]
    PluginsNotList,
    #[error("plugins[{index}].name: Required value")]
    PluginName { index: usize },
    /// Every field of a `PodSecurityConfiguration` that does not validate.
    #[error("{}", join(.0))]
    PodSecurity(Vec<FieldError>),
}

/// One invalid field of a `PodSecurityConfiguration` (upstream's field error texts).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldError {
    /// `exemptions.<field>[<index>]` is not a non-empty string (`value` as JSON).
    #[error("exemptions.{field}[{index}]: Invalid value: {value}: must be a non-empty string")]
    EmptyExemption {
        field: &'static str,
        index: usize,
        value: Value,
    },
    #[error("exemptions.{field}: must be a list of strings")]
    ExemptionsNotList { field: &'static str },
    /// `defaults.<field>` (a mode or `<mode>-version`) with an unknown value.
    #[error("defaults.{field}: Invalid value: {value:?}: {reason}")]
    Default {
        field: String,
        value: String,
        reason: &'static str,
    },
}

fn join(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
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
        let invalid = |problem: Problem| ConfigError::Invalid {
            path: name.to_owned(),
            problem,
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
            _ => return Err(invalid(Problem::PluginsNotList)),
        };
        for (i, p) in plugins.iter().enumerate() {
            let Some(plugin) = p["name"].as_str() else {
                return Err(invalid(Problem::PluginName { index: i }));
            };
            let (conf, conf_name) = match (&p["configuration"], p["path"].as_str()) {
                (Value::Null, Some(file)) => {
                    let full = dir.join(file);
                    let text = read(&full)?;
                    let shown = full.display().to_string();
                    let parsed = parse_doc(&text).map_err(|problem| ConfigError::Invalid {
                        path: shown.clone(),
                        problem,
                    })?;
                    (parsed, shown)
                }
                (Value::Null, None) => continue,
                (c, _) => (c.clone(), format!("{name}: plugins[{i}].configuration")),
            };
            match plugin {
                "PodSecurity" => {
                    out.pod_security =
                        pod_security(&conf).map_err(|problem| ConfigError::Invalid {
                            path: conf_name,
                            problem,
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
fn parse_doc(text: &str) -> Result<Value, Problem> {
    serde_yaml::from_str::<Value>(text).map_err(Problem::Syntax)
}

fn expect_kind(
    doc: &Value,
    versions: &'static [&'static str],
    kind: &'static str,
) -> Result<(), Problem> {
    let api_version = doc["apiVersion"].as_str().unwrap_or("");
    let got = doc["kind"].as_str().unwrap_or("");
    if got != kind || !versions.contains(&api_version) {
        return Err(Problem::Kind {
            kind,
            versions,
            got: got.to_owned(),
            api_version: api_version.to_owned(),
        });
    }
    Ok(())
}

/// A `PodSecurityConfiguration`, checked as upstream's validation does.
fn pod_security(conf: &Value) -> Result<PodSecurityConfig, Problem> {
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
    let list = |field: &'static str, errors: &mut Vec<FieldError>| -> Vec<String> {
        match &conf["exemptions"][field] {
            Value::Null => Vec::new(),
            Value::Array(a) => a
                .iter()
                .enumerate()
                .filter_map(|(i, v)| match v.as_str() {
                    Some(s) if !s.is_empty() => Some(s.to_owned()),
                    _ => {
                        errors.push(FieldError::EmptyExemption {
                            field,
                            index: i,
                            value: v.clone(),
                        });
                        None
                    }
                })
                .collect(),
            _ => {
                errors.push(FieldError::ExemptionsNotList { field });
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
        Err(Problem::PodSecurity(errors))
    }
}

/// `defaults.<mode>` and `defaults.<mode>-version` (absent: `privileged`, `latest`).
fn mode_default(d: &Value, mode: &str, errors: &mut Vec<FieldError>) -> LevelVersion {
    let mut lv = LevelVersion::PRIVILEGED_LATEST;
    if let Some(v) = d[mode].as_str() {
        match Level::parse(v) {
            Ok(l) => lv.level = l,
            Err((_, reason)) => errors.push(FieldError::Default {
                field: mode.to_owned(),
                value: v.to_owned(),
                reason,
            }),
        }
    }
    let version_field = format!("{mode}-version");
    if let Some(v) = d[&version_field].as_str() {
        match Version::parse(v) {
            Ok(ver) => lv.version = ver,
            Err((_, reason)) => errors.push(FieldError::Default {
                field: version_field.clone(),
                value: v.to_owned(),
                reason,
            }),
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

    #[test]
    fn problems_read_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let e = AdmissionConfig::parse(
            "kind: Nope
",
            "a.yaml",
            dir.path(),
        )
        .unwrap_err();
        assert!(matches!(
            e,
            ConfigError::Invalid {
                problem: Problem::Kind { .. },
                ..
            }
        ));
        assert_eq!(
            e.to_string(),
            "a.yaml: expected kind AdmissionConfiguration with apiVersion apiserver.config.k8s.io/v1 or apiserver.k8s.io/v1alpha1, got kind \"Nope\" apiVersion \"\""
        );
        let head = "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\n";
        let e = AdmissionConfig::parse(&format!("{head}plugins: 3\n"), "a.yaml", dir.path())
            .unwrap_err();
        assert_eq!(e.to_string(), "a.yaml: plugins: must be a list");
        let e = AdmissionConfig::parse(
            &format!("{head}plugins:\n- path: x\n- {{}}\n"),
            "a.yaml",
            dir.path(),
        )
        .unwrap_err();
        assert!(matches!(
            e,
            ConfigError::Invalid {
                problem: Problem::PluginName { index: 0 },
                ..
            }
        ));
        assert_eq!(e.to_string(), "a.yaml: plugins[0].name: Required value");
        let bad = INLINE
            .replace("enforce: baseline", "enforce: strict")
            .replace("enforce-version: v1.30", "enforce-version: two")
            .replace("usernames: [ci-bot]", "usernames: [\"\", 3]")
            .replace("namespaces: [kube-system]", "namespaces: kube-system");
        let e = AdmissionConfig::parse(&bad, "a.yaml", dir.path()).unwrap_err();
        let ConfigError::Invalid {
            path,
            problem: Problem::PodSecurity(fields),
        } = &e
        else {
            panic!("{e:?}");
        };
        assert_eq!(path, "a.yaml: plugins[0].configuration");
        assert_eq!(fields.len(), 5, "{fields:?}");
        assert_eq!(
            fields[2],
            FieldError::EmptyExemption {
                field: "usernames",
                index: 0,
                value: Value::from(""),
            }
        );
        assert_eq!(
            fields[4],
            FieldError::ExemptionsNotList {
                field: "namespaces"
            }
        );
        let text = e.to_string();
        assert!(
            text.starts_with(
                "a.yaml: plugins[0].configuration: defaults.enforce: Invalid value: \"strict\": "
            ),
            "{text}"
        );
        assert!(
            text.ends_with(
                "; exemptions.usernames[0]: Invalid value: \"\": must be a non-empty string; exemptions.usernames[1]: Invalid value: 3: must be a non-empty string; exemptions.namespaces: must be a list of strings"
            ),
            "{text}"
        );
        assert!(
            text.contains("; defaults.enforce-version: Invalid value: \"two\": "),
            "{text}"
        );
    }
}
