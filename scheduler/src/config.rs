//! The scheduler's configuration, shaped like `KubeSchedulerConfiguration`
//! (`kubescheduler.config.k8s.io/v1`): profiles by `schedulerName`, plugins enabled and
//! disabled per extension point (and `multiPoint`), `pluginConfig` arguments,
//! `percentageOfNodesToScore` and pod backoff. Defaults are upstream's.
//!
//! Owns parsing and defaulting only; [`crate::framework::Framework::new`] turns a profile into
//! running plugins.

use serde::{Deserialize, Serialize};

use crate::plugin_names as names;

pub const API_VERSION: &str = "kubescheduler.config.k8s.io/v1";
pub const KIND: &str = "KubeSchedulerConfiguration";
pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";

/// A configuration that does not parse or validate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("decoding scheduler configuration: {0}")]
    Decode(String),
    #[error("unsupported apiVersion {0:?}: want {API_VERSION}")]
    ApiVersion(String),
    #[error("unsupported kind {0:?}: want {KIND}")]
    Kind(String),
    #[error("percentageOfNodesToScore {0} is not in 0..=100")]
    Percentage(i32),
    #[error("duplicate profile schedulerName {0:?}")]
    DuplicateProfile(String),
    #[error("profile schedulerName must not be empty")]
    EmptySchedulerName,
    #[error(
        "podInitialBackoffSeconds {initial} and podMaxBackoffSeconds {max} must be positive with initial <= max"
    )]
    Backoff { initial: i64, max: i64 },
}

/// `KubeSchedulerConfiguration`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default = "Config::empty")]
pub struct Config {
    pub api_version: String,
    pub kind: String,
    /// 0 (the default) means adaptive, as upstream.
    pub percentage_of_nodes_to_score: Option<i32>,
    pub pod_initial_backoff_seconds: Option<i64>,
    pub pod_max_backoff_seconds: Option<i64>,
    pub profiles: Vec<Profile>,
    /// Defaults were applied (they must be applied once).
    #[serde(skip)]
    defaulted: bool,
}

impl Default for Config {
    /// The defaulted configuration: one `default-scheduler` profile.
    fn default() -> Self {
        let mut c = Self::empty();
        c.set_defaults();
        c
    }
}

impl Config {
    fn empty() -> Self {
        Self {
            api_version: API_VERSION.into(),
            kind: KIND.into(),
            percentage_of_nodes_to_score: None,
            pod_initial_backoff_seconds: None,
            pod_max_backoff_seconds: None,
            profiles: Vec::new(),
            defaulted: false,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Profile {
    pub scheduler_name: String,
    pub percentage_of_nodes_to_score: Option<i32>,
    pub plugins: Plugins,
    pub plugin_config: Vec<PluginConfig>,
}

/// Plugins per extension point.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Plugins {
    pub pre_enqueue: PluginSet,
    pub queue_sort: PluginSet,
    pub pre_filter: PluginSet,
    pub filter: PluginSet,
    pub post_filter: PluginSet,
    pub pre_score: PluginSet,
    pub score: PluginSet,
    pub reserve: PluginSet,
    pub permit: PluginSet,
    pub pre_bind: PluginSet,
    pub bind: PluginSet,
    pub post_bind: PluginSet,
    pub multi_point: PluginSet,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PluginSet {
    pub enabled: Vec<PluginRef>,
    pub disabled: Vec<PluginRef>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PluginRef {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
}

impl PluginRef {
    pub fn new(name: &str, weight: Option<i32>) -> Self {
        Self {
            name: name.into(),
            weight,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PluginConfig {
    pub name: String,
    pub args: serde_json::Value,
}

/// Upstream's default plugin set (v1 `getDefaultPlugins`), in order, with score weights.
pub fn default_plugins() -> Vec<PluginRef> {
    [
        (names::SCHEDULING_GATES, None),
        (names::PRIORITY_SORT, None),
        (names::NODE_UNSCHEDULABLE, None),
        (names::NODE_NAME, None),
        (names::TAINT_TOLERATION, Some(3)),
        (names::NODE_AFFINITY, Some(2)),
        (names::NODE_PORTS, None),
        (names::NODE_RESOURCES_FIT, Some(1)),
        (names::VOLUME_RESTRICTIONS, None),
        (names::NODE_VOLUME_LIMITS, None),
        (names::VOLUME_BINDING, None),
        (names::VOLUME_ZONE, None),
        (names::POD_TOPOLOGY_SPREAD, Some(2)),
        (names::INTER_POD_AFFINITY, Some(2)),
        (names::DEFAULT_PREEMPTION, None),
        (names::NODE_RESOURCES_BALANCED_ALLOCATION, Some(1)),
        (names::IMAGE_LOCALITY, Some(1)),
        (names::DEFAULT_BINDER, None),
    ]
    .into_iter()
    .map(|(n, w)| PluginRef::new(n, w))
    .collect()
}

impl Config {
    /// Parses YAML or JSON, checks apiVersion and kind, and applies defaults.
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let mut c: Config =
            serde_yaml::from_str(text).map_err(|e| ConfigError::Decode(e.to_string()))?;

        if c.api_version != API_VERSION {
            return Err(ConfigError::ApiVersion(c.api_version));
        }
        if c.kind != KIND {
            return Err(ConfigError::Kind(c.kind));
        }
        c.set_defaults();
        c.validate()?;
        Ok(c)
    }

    /// One `default-scheduler` profile when none is given; each profile's multiPoint starts
    /// with the default plugins, followed by the profile's own.
    pub fn set_defaults(&mut self) {
        if self.defaulted {
            return;
        }
        self.defaulted = true;
        if self.profiles.is_empty() {
            self.profiles.push(Profile {
                scheduler_name: DEFAULT_SCHEDULER_NAME.into(),
                ..Default::default()
            });
        }
        for p in &mut self.profiles {
            if p.scheduler_name.is_empty() {
                p.scheduler_name = DEFAULT_SCHEDULER_NAME.into();
            }
            let mut enabled = default_plugins();
            enabled.append(&mut p.plugins.multi_point.enabled);
            p.plugins.multi_point.enabled = enabled;
            if p.percentage_of_nodes_to_score.is_none() {
                p.percentage_of_nodes_to_score = self.percentage_of_nodes_to_score;
            }
        }
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let pcts = std::iter::once(self.percentage_of_nodes_to_score)
            .chain(self.profiles.iter().map(|p| p.percentage_of_nodes_to_score));
        for p in pcts.flatten() {
            if !(0..=100).contains(&p) {
                return Err(ConfigError::Percentage(p));
            }
        }
        let mut seen = std::collections::HashSet::new();
        for p in &self.profiles {
            if p.scheduler_name.is_empty() {
                return Err(ConfigError::EmptySchedulerName);
            }
            if !seen.insert(p.scheduler_name.as_str()) {
                return Err(ConfigError::DuplicateProfile(p.scheduler_name.clone()));
            }
        }
        let (i, m) = self.backoff_seconds();
        if i <= 0 || m <= 0 || i > m {
            return Err(ConfigError::Backoff { initial: i, max: m });
        }
        Ok(())
    }

    /// (initial, max) pod backoff in seconds: 1 and 10 by default.
    pub fn backoff_seconds(&self) -> (i64, i64) {
        (
            self.pod_initial_backoff_seconds.unwrap_or(1),
            self.pod_max_backoff_seconds.unwrap_or(10),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_as_upstream() {
        let c = Config::parse(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n",
        )
        .unwrap();
        assert_eq!(c.profiles.len(), 1);
        assert_eq!(c.profiles[0].scheduler_name, "default-scheduler");
        let mp = &c.profiles[0].plugins.multi_point.enabled;
        assert_eq!(mp.len(), 18);
        assert_eq!(
            mp.iter()
                .find(|p| p.name == "TaintToleration")
                .unwrap()
                .weight,
            Some(3)
        );
        assert_eq!(c.backoff_seconds(), (1, 10));
    }

    #[test]
    fn parses_profiles_and_args() {
        let text = r#"
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 30
profiles:
- schedulerName: default-scheduler
- schedulerName: bin-packer
  plugins:
    score:
      disabled:
      - name: NodeResourcesBalancedAllocation
      enabled:
      - name: NodeResourcesFit
        weight: 5
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
"#;
        let c = Config::parse(text).unwrap();
        assert_eq!(c.profiles.len(), 2);
        assert_eq!(c.profiles[1].percentage_of_nodes_to_score, Some(30));
        assert_eq!(
            c.profiles[1].plugin_config[0].args["scoringStrategy"]["type"],
            "MostAllocated"
        );
    }

    #[test]
    fn rejects_bad_configs() {
        let cases = [
            (
                "apiVersion: v1\nkind: KubeSchedulerConfiguration\n",
                "apiVersion",
            ),
            (
                "apiVersion: kubescheduler.config.k8s.io/v1\nkind: Pod\n",
                "kind",
            ),
            (
                "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\npercentageOfNodesToScore: 101\n",
                "percentage",
            ),
            (
                "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: a\n- schedulerName: a\n",
                "duplicate",
            ),
            ("[", "decode"),
        ];
        for (text, what) in cases {
            assert!(Config::parse(text).is_err(), "{what}");
        }
    }
}
