//! Which devices a pod asks for, and which free devices a container gets: pure functions of
//! the pod and the device lists, so the rules are unit-tested without a plugin.

use k1s_api::quantity::Quantity;
use k8s_openapi::api::core::v1::{Container, Pod};

/// What one container asks of the device plugins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Want {
    /// The pod worker's container key (`init/NAME`, `main/NAME`).
    pub key: String,
    pub init: bool,
    /// (resource, number of devices), in resource name order.
    pub resources: Vec<(String, usize)>,
}

/// The device plugin resources (those `known` says a plugin serves) each container of `pod`
/// asks for: init containers first, in order, then the regular ones. Extended resources are
/// asked for in limits (requests, if given, equal them: API validation sees to it).
pub(super) fn requests(pod: &Pod, known: impl Fn(&str) -> bool) -> Vec<Want> {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    crate::pod_containers::all_containers(spec)
        .filter_map(|(init, c)| {
            let resources = device_counts(c, &known);
            (!resources.is_empty()).then(|| Want {
                key: crate::pod_containers::container_key(init, &c.name),
                init,
                resources,
            })
        })
        .collect()
}

fn device_counts(c: &Container, known: &impl Fn(&str) -> bool) -> Vec<(String, usize)> {
    let Some(res) = c.resources.as_ref() else {
        return Vec::new();
    };
    let mut names: Vec<&String> = res
        .limits
        .iter()
        .chain(res.requests.iter())
        .flat_map(|m| m.keys())
        .filter(|n| known(n))
        .collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter_map(|name| {
            let q = res
                .limits
                .as_ref()
                .and_then(|l| l.get(name))
                .or_else(|| res.requests.as_ref().and_then(|r| r.get(name)))?;
            let n = Quantity::parse(&q.0).ok()?.value();
            (n > 0).then(|| (name.clone(), n as usize))
        })
        .collect()
}

/// Whether a plugin's preferred allocation can be used: `count` distinct available devices
/// that include `must`.
pub(super) fn acceptable(
    preferred: &[String],
    available: &[String],
    must: &[String],
    count: usize,
) -> bool {
    let mut distinct = preferred.to_vec();
    distinct.sort();
    distinct.dedup();
    distinct.len() == preferred.len()
        && preferred.len() == count
        && preferred.iter().all(|id| available.contains(id))
        && must.iter().all(|id| preferred.contains(id))
}

/// The kubelet's own choice: `must` first, then the other available devices in ID order.
pub(super) fn fallback(available: &[String], must: &[String], count: usize) -> Vec<String> {
    let mut ids: Vec<String> = must.iter().take(count).cloned().collect();
    for id in available {
        if ids.len() == count {
            break;
        }
        if !ids.contains(id) {
            ids.push(id.clone());
        }
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn requests_of_init_and_regular_containers_for_known_resources_only() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"uid": "u"},
            "spec": {
                "initContainers": [
                    {"name": "prep", "resources": {"limits": {"example.com/gpu": "1", "cpu": "1"}}},
                    {"name": "plain"}
                ],
                "containers": [
                    {"name": "a", "resources": {
                        "limits": {"example.com/gpu": "2", "example.com/nic": "1"},
                        "requests": {"example.com/gpu": "2", "example.com/nic": "1"}}},
                    {"name": "b", "resources": {"requests": {"example.com/other": "3"}}},
                    {"name": "c", "resources": {"limits": {"example.com/gpu": "0"}}}
                ]
            }
        }))
        .unwrap();
        let known = |n: &str| n == "example.com/gpu" || n == "example.com/nic";
        assert_eq!(
            requests(&pod, known),
            vec![
                Want {
                    key: "init/prep".into(),
                    init: true,
                    resources: vec![("example.com/gpu".into(), 1)],
                },
                Want {
                    key: "main/a".into(),
                    init: false,
                    resources: vec![("example.com/gpu".into(), 2), ("example.com/nic".into(), 1)],
                },
            ]
        );
        assert!(requests(&pod, |_| false).is_empty());
    }

    #[test]
    fn preferred_allocations_must_fit_the_request() {
        let available = ids(&["d0", "d1", "d2"]);
        assert!(acceptable(&ids(&["d2", "d0"]), &available, &[], 2));
        assert!(acceptable(
            &ids(&["d1", "d2"]),
            &available,
            &ids(&["d1"]),
            2
        ));
        // Wrong size, unknown or taken device, duplicate, missing a must-include.
        assert!(!acceptable(&ids(&["d0"]), &available, &[], 2));
        assert!(!acceptable(&ids(&["d0", "d9"]), &available, &[], 2));
        assert!(!acceptable(&ids(&["d0", "d0"]), &available, &[], 2));
        assert!(!acceptable(
            &ids(&["d0", "d2"]),
            &available,
            &ids(&["d1"]),
            2
        ));
    }

    #[test]
    fn fallback_takes_reusable_devices_first_then_id_order() {
        let available = ids(&["d0", "d1", "d2", "d3"]);
        assert_eq!(fallback(&available, &[], 2), ids(&["d0", "d1"]));
        assert_eq!(fallback(&available, &ids(&["d3"]), 2), ids(&["d3", "d0"]));
        assert_eq!(fallback(&available, &ids(&["d3", "d2"]), 1), ids(&["d3"]));
    }
}
