//! Building a scheduler profile's [`Framework`]: [`Framework::new`] and
//! [`Framework::with_registry`] instantiate the plugins the profile names (in-tree ones
//! through [`plugins::new_plugin`], out-of-tree ones from a [`Registry`]) and order them at
//! each extension point with their score weights, as the profile's `multiPoint` and
//! per-point sets say.
//!
//! This is where configuration and the in-tree plugins meet the framework: the framework
//! itself knows neither.

use std::collections::HashMap;
use std::sync::Arc;

use crate::config::{PluginSet, Profile};
use crate::framework::runtime::Parts;
use crate::framework::{Framework, FrameworkError, Handle, Plugin, Registry};
use crate::plugins;

fn strip<T>(v: Vec<(T, i64)>) -> Vec<T> {
    v.into_iter().map(|(p, _)| p).collect()
}

/// Names (and weights) enabled at one extension point, in order.
fn resolve(
    multi: &[(String, Option<i32>)],
    implements: impl Fn(&str) -> bool,
    set: &PluginSet,
) -> Vec<(String, i64)> {
    let mut out: Vec<(String, i64)> = multi
        .iter()
        .filter(|(n, _)| implements(n))
        .map(|(n, w)| (n.clone(), i64::from(w.unwrap_or(1))))
        .collect();
    if set.disabled.iter().any(|p| p.name == "*") {
        out.clear();
    } else {
        out.retain(|(n, _)| !set.disabled.iter().any(|d| &d.name == n));
    }
    for p in &set.enabled {
        let w = i64::from(p.weight.unwrap_or(1));
        if let Some(e) = out.iter_mut().find(|(n, _)| n == &p.name) {
            if p.weight.is_some() {
                e.1 = w;
            }
        } else {
            out.push((p.name.clone(), w));
        }
    }
    out
}

impl Framework {
    /// Instantiates the profile's plugins (through [`plugins::new_plugin`]) and orders them.
    pub fn new(profile: &Profile, handle: &Handle) -> Result<Self, FrameworkError> {
        Self::with_registry(profile, handle, &Registry::new())
    }

    /// Like [`Framework::new`], with out-of-tree plugins in `extra` (they may also replace
    /// in-tree plugins of the same name).
    pub fn with_registry(
        profile: &Profile,
        handle: &Handle,
        extra: &Registry,
    ) -> Result<Self, FrameworkError> {
        // multiPoint: the profile's defaults were already merged by `config`.
        let mp = &profile.plugins.multi_point;
        let mut multi: Vec<(String, Option<i32>)> = Vec::new();
        for p in &mp.enabled {
            if mp
                .disabled
                .iter()
                .any(|d| d.name == p.name || d.name == "*")
            {
                continue;
            }
            if let Some(e) = multi.iter_mut().find(|(n, _)| n == &p.name) {
                e.1 = p.weight.or(e.1);
            } else {
                multi.push((p.name.clone(), p.weight));
            }
        }
        let mut instances: HashMap<String, Arc<dyn Plugin>> = HashMap::new();
        let all_names: Vec<String> = {
            let ps = &profile.plugins;
            let mut v: Vec<String> = multi.iter().map(|(n, _)| n.clone()).collect();
            for set in [
                &ps.pre_filter,
                &ps.filter,
                &ps.post_filter,
                &ps.pre_score,
                &ps.score,
                &ps.reserve,
                &ps.permit,
                &ps.pre_bind,
                &ps.bind,
            ] {
                v.extend(set.enabled.iter().map(|p| p.name.clone()));
            }
            v
        };
        for name in all_names {
            if instances.contains_key(&name) {
                continue;
            }
            let args = profile
                .plugin_config
                .iter()
                .find(|c| c.name == name)
                .map(|c| &c.args);
            let p = match extra.get(&name) {
                Some(factory) => factory(handle, args)?,
                None => plugins::new_plugin(&name, handle, args)?,
            };
            instances.insert(name, p);
        }
        let get = |n: &str| instances.get(n).cloned();
        macro_rules! point {
            ($set:expr, $as:ident, $label:literal) => {{
                let list = resolve(&multi, |n| get(n).and_then(|p| p.$as()).is_some(), $set);
                let mut out = Vec::new();
                for (n, w) in list {
                    let p = get(&n).ok_or_else(|| FrameworkError::UnknownPlugin(n.clone()))?;
                    let e = p.$as().ok_or(FrameworkError::NotAnExtension {
                        plugin: n.clone(),
                        point: $label,
                    })?;
                    out.push((e, w));
                }
                out
            }};
        }
        let ps = &profile.plugins;
        let parts = Parts {
            profile_name: profile.scheduler_name.clone(),
            pre_filter: strip(point!(&ps.pre_filter, as_pre_filter, "PreFilter")),
            filter: strip(point!(&ps.filter, as_filter, "Filter")),
            post_filter: strip(point!(&ps.post_filter, as_post_filter, "PostFilter")),
            pre_score: strip(point!(&ps.pre_score, as_pre_score, "PreScore")),
            score: point!(&ps.score, as_score, "Score"),
            reserve: strip(point!(&ps.reserve, as_reserve, "Reserve")),
            permit: strip(point!(&ps.permit, as_permit, "Permit")),
            pre_bind: strip(point!(&ps.pre_bind, as_pre_bind, "PreBind")),
            bind: strip(point!(&ps.bind, as_bind, "Bind")),
            plugins: instances.into_values().collect(),
            percentage_of_nodes_to_score: profile.percentage_of_nodes_to_score,
        };
        if parts.bind.is_empty() {
            return Err(FrameworkError::NoBinder(parts.profile_name));
        }
        Ok(Framework::from_parts(parts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::framework::listers::StaticLister;
    use crate::testing::FakeClient;

    fn handle() -> Handle {
        let l = Arc::new(StaticLister::new());
        Handle {
            client: FakeClient::new(),
            volumes: l.clone(),
            cluster: l,
        }
    }

    fn points(cfg: &str) -> HashMap<&'static str, Vec<String>> {
        let c = Config::parse(&format!(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n{cfg}"
        ))
        .unwrap();
        Framework::new(&c.profiles[0], &handle())
            .unwrap()
            .list_plugins()
            .into_iter()
            .collect()
    }

    #[test]
    fn default_profile_as_upstream() {
        let p = points("");
        assert_eq!(
            p["Filter"],
            [
                "NodeUnschedulable",
                "NodeName",
                "TaintToleration",
                "NodeAffinity",
                "NodePorts",
                "NodeResourcesFit",
                "VolumeRestrictions",
                "NodeVolumeLimits",
                "VolumeBinding",
                "VolumeZone",
                "PodTopologySpread",
                "InterPodAffinity"
            ]
        );
        assert_eq!(
            p["Score"],
            [
                "TaintToleration:3",
                "NodeAffinity:2",
                "NodeResourcesFit:1",
                "PodTopologySpread:2",
                "InterPodAffinity:2",
                "NodeResourcesBalancedAllocation:1",
                "ImageLocality:1"
            ]
        );
        assert_eq!(p["PostFilter"], ["DefaultPreemption"]);
        assert_eq!(p["Bind"], ["DefaultBinder"]);
        assert_eq!(p["Reserve"], ["VolumeBinding"]);
        assert_eq!(p["PreBind"], ["VolumeBinding"]);
    }

    #[test]
    fn enabling_disabling_and_weights() {
        let cases = [
            (
                "disable one filter",
                "profiles:\n- plugins:\n    filter:\n      disabled:\n      - name: NodePorts\n",
                "Filter",
                false,
                "NodePorts",
            ),
            (
                "multiPoint disable removes everywhere",
                "profiles:\n- plugins:\n    multiPoint:\n      disabled:\n      - name: TaintToleration\n",
                "Score",
                false,
                "TaintToleration:3",
            ),
            (
                "score weight override",
                "profiles:\n- plugins:\n    score:\n      enabled:\n      - name: ImageLocality\n        weight: 7\n",
                "Score",
                true,
                "ImageLocality:7",
            ),
            (
                "multiPoint weight override",
                "profiles:\n- plugins:\n    multiPoint:\n      enabled:\n      - name: NodeAffinity\n        weight: 9\n",
                "Score",
                true,
                "NodeAffinity:9",
            ),
        ];
        for (name, cfg, point, present, plugin) in cases {
            let p = points(cfg);
            assert_eq!(
                p[point].iter().any(|x| x == plugin),
                present,
                "{name}: {:?}",
                p[point]
            );
        }
        let c = Config::parse("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- plugins:\n    filter:\n      enabled:\n      - name: Bogus\n").unwrap();
        assert!(matches!(
            Framework::new(&c.profiles[0], &handle()),
            Err(FrameworkError::UnknownPlugin(_))
        ));
    }
}
