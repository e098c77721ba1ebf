//! Pure functions from the API objects to cgroup [`Resources`] and [`QosClass`], with upstream
//! kubelet's arithmetic (`pkg/kubelet/cm/helpers_linux.go`, the kuberuntime container limits).
//! No I/O. A pod's requests, limits and QoS class are [`k1s_api::resource`]'s, shared with the
//! scheduler and admission.

use std::collections::BTreeMap;

use k1s_api::quantity::{Quantity, ResourceList};
use k1s_api::resource::{self, ContainerResources, Field, Options};
use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;

use super::{QosClass, Resources};

/// The smallest `cpu.shares` (what zero CPU requested gets).
pub const MIN_SHARES: u64 = 2;
/// The largest `cpu.shares` the kernel takes.
pub const MAX_SHARES: u64 = 262_144;
/// `cpu.shares` per whole CPU.
pub const SHARES_PER_CPU: i64 = 1024;
/// The CFS period upstream uses, in µs.
pub const DEFAULT_CPU_PERIOD: u64 = 100_000;
/// The smallest CFS quota the kernel takes, in µs.
pub const MIN_QUOTA: i64 = 1000;

/// Upstream's `MilliCPUToShares`: 2 for zero, else `milli * 1024 / 1000` within 2..=262144.
pub fn milli_cpu_to_shares(milli_cpu: i64) -> u64 {
    if milli_cpu <= 0 {
        return MIN_SHARES;
    }
    let shares = i128::from(milli_cpu) * i128::from(SHARES_PER_CPU) / 1000;
    u64::try_from(shares)
        .unwrap_or(MAX_SHARES)
        .clamp(MIN_SHARES, MAX_SHARES)
}

/// Upstream's `milliCPUToQuota`: 0 (no quota) for zero, else `milli * period / 1000` µs, at
/// least [`MIN_QUOTA`].
pub fn milli_cpu_to_quota(milli_cpu: i64, period: u64) -> i64 {
    if milli_cpu <= 0 {
        return 0;
    }
    let quota = i128::from(milli_cpu) * i128::from(period) / 1000;
    i64::try_from(quota).unwrap_or(i64::MAX).max(MIN_QUOTA)
}

/// `cpu.shares` to cgroup v2 `cpu.weight` as upstream (libcontainer's
/// `ConvertCPUSharesToCgroupV2Value`): `1 + (shares - 2) * 9999 / 262142`, shares clamped to
/// 2..=262144, so 2 → 1, 1024 → 39, 262144 → 10000.
pub fn shares_to_weight(shares: u64) -> u64 {
    let s = shares.clamp(MIN_SHARES, MAX_SHARES);
    1 + ((s - 2) * 9999) / 262_142
}

fn milli(l: &ResourceList, name: &str) -> i64 {
    l.get(name).map_or(0, Quantity::milli_value)
}

fn value(l: &ResourceList, name: &str) -> i64 {
    l.get(name).map_or(0, Quantity::value)
}

/// The pod's effective requests ([`k1s_api::resource::pod_requests`], overhead included).
pub fn pod_requests(pod: &Pod) -> ResourceList {
    resource::pod_requests(pod, &Options::default())
}

/// The pod's effective limits ([`k1s_api::resource::pod_limits`], overhead on the resources
/// that have a limit), and whether every container (and every init container use) declares a
/// CPU and a memory limit.
pub fn pod_limits(pod: &Pod) -> PodLimits {
    let mut cpu_declared = true;
    let mut memory_declared = true;
    let limits = resource::aggregate(pod, Field::Limits, None, |l| {
        if l.get("cpu").is_none_or(Quantity::is_zero) {
            cpu_declared = false;
        }
        if l.get("memory").is_none_or(Quantity::is_zero) {
            memory_declared = false;
        }
    });
    PodLimits {
        limits: resource::with_overhead_on_limits(limits, pod, &Options::default()),
        cpu_declared,
        memory_declared,
    }
}

/// What [`pod_limits`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodLimits {
    pub limits: ResourceList,
    /// Every container has a non-zero CPU limit.
    pub cpu_declared: bool,
    /// Every container has a non-zero memory limit.
    pub memory_declared: bool,
}

/// A container's group limits, as upstream's kuberuntime computes them: shares from the CPU
/// request (from the CPU limit when no request is given), a CFS quota from the CPU limit over
/// the 100ms period, the memory limit. No pids limit (upstream sets that on the pod only).
pub fn container_resources(c: &Container) -> Resources {
    let req = c.requests();
    let lim = c.limits();
    let cpu_limit = milli(&lim, "cpu");
    let shares = match req.get("cpu") {
        None if cpu_limit != 0 => milli_cpu_to_shares(cpu_limit),
        _ => milli_cpu_to_shares(milli(&req, "cpu")),
    };
    let quota = milli_cpu_to_quota(cpu_limit, DEFAULT_CPU_PERIOD);
    Resources {
        cpu_shares: Some(shares),
        cpu_quota: (quota > 0).then_some(quota),
        cpu_period: Some(DEFAULT_CPU_PERIOD),
        memory_limit: Some(value(&lim, "memory")).filter(|m| *m > 0),
        pids_limit: None,
        devices: None,
    }
}

/// A pod's group limits, as upstream's `ResourceConfigForPod` (CFS quota enforced):
/// - Guaranteed: shares from the pod's CPU requests, quota from its CPU limits, memory limit;
/// - Burstable: shares; the quota only when every container has a CPU limit, the memory limit
///   only when every container has a memory limit;
/// - BestEffort: shares 2 only.
///
/// `pod_pids_limit` is the kubelet's `podPidsLimit` (None or ≤ 0: unlimited), for every class.
pub fn pod_resources(pod: &Pod, pod_pids_limit: Option<i64>) -> Resources {
    let pids_limit = pod_pids_limit.filter(|p| *p > 0);
    let qos = qos_class(pod);
    if qos == QosClass::BestEffort {
        return Resources {
            cpu_shares: Some(MIN_SHARES),
            pids_limit,
            ..Resources::default()
        };
    }
    let reqs = pod_requests(pod);
    let lim = pod_limits(pod);
    let shares = milli_cpu_to_shares(milli(&reqs, "cpu"));
    let quota = milli_cpu_to_quota(milli(&lim.limits, "cpu"), DEFAULT_CPU_PERIOD);
    let memory = value(&lim.limits, "memory");
    let guaranteed = qos == QosClass::Guaranteed;
    let mut r = Resources {
        cpu_shares: Some(shares),
        pids_limit,
        ..Resources::default()
    };
    if guaranteed || lim.cpu_declared {
        r.cpu_quota = (quota > 0).then_some(quota);
        r.cpu_period = Some(DEFAULT_CPU_PERIOD);
    }
    if guaranteed || lim.memory_declared {
        r.memory_limit = (memory > 0).then_some(memory);
    }
    r
}

/// The Burstable QoS group's limits (upstream's QoS container manager without the
/// `QOSReserved` gate): `cpu.shares` from the sum of the CPU requests of the Burstable pods
/// among `pods` (the active pods of the node).
pub fn burstable_qos_resources<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> Resources {
    let total: i64 = pods
        .into_iter()
        .filter(|p| qos_class(p) == QosClass::Burstable)
        .map(|p| milli(&pod_requests(p), "cpu"))
        .fold(0i64, i64::saturating_add);
    Resources {
        cpu_shares: Some(milli_cpu_to_shares(total)),
        ..Resources::default()
    }
}

/// The top-level group's limits from what the node gives pods (upstream's node allocatable
/// enforcement: capacity minus kube and system reserved): `cpu.shares` from `cpu`, the memory
/// limit from `memory`, the pids limit from `pid`. Absent resources stay unlimited.
pub fn node_allocatable_resources(allocatable: &BTreeMap<String, ApiQuantity>) -> Resources {
    let l = resource::list_of(Some(allocatable));
    Resources {
        cpu_shares: l.get("cpu").map(|q| milli_cpu_to_shares(q.milli_value())),
        memory_limit: l.get("memory").map(Quantity::value).filter(|m| *m > 0),
        pids_limit: l.get("pid").map(Quantity::value).filter(|p| *p > 0),
        ..Resources::default()
    }
}

/// `status.qosClass` when the apiserver set it, else [`compute_qos_class`].
pub fn qos_class(pod: &Pod) -> QosClass {
    pod.status
        .as_ref()
        .and_then(|s| s.qos_class.as_deref())
        .and_then(QosClass::parse)
        .unwrap_or_else(|| compute_qos_class(pod))
}

/// Upstream's `ComputePodQOS` ([`k1s_api::resource::qos_class`]).
pub fn compute_qos_class(pod: &Pod) -> QosClass {
    resource::qos_class(pod)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    /// A container with `requests` and `limits` given as `[(name, qty)]`.
    fn ctr(name: &str, req: &[(&str, &str)], lim: &[(&str, &str)]) -> serde_json::Value {
        let m = |l: &[(&str, &str)]| {
            serde_json::Value::Object(l.iter().map(|(k, v)| (k.to_string(), json!(v))).collect())
        };
        json!({"name": name, "resources": {"requests": m(req), "limits": m(lim)}})
    }

    fn pod_of(containers: Vec<serde_json::Value>, init: Vec<serde_json::Value>) -> Pod {
        pod(json!({"spec": {"containers": containers, "initContainers": init}}))
    }

    #[test]
    fn shares_and_quota_conversions() {
        let cases: &[(i64, u64)] = &[
            (0, 2),
            (-5, 2),
            (1, 2),
            (2, 2),
            (3, 3),
            (100, 102),
            (250, 256),
            (1000, 1024),
            (1500, 1536),
            (256_000, 262_144),
            (1_000_000, 262_144),
            (i64::MAX, 262_144),
        ];
        for (m, s) in cases {
            assert_eq!(milli_cpu_to_shares(*m), *s, "shares of {m}m");
        }
        let cases: &[(i64, u64, i64)] = &[
            (0, 100_000, 0),
            (1, 100_000, 1000),
            (5, 100_000, 1000),
            (10, 100_000, 1000),
            (11, 100_000, 1100),
            (100, 100_000, 10_000),
            (1500, 100_000, 150_000),
            (333, 100_000, 33_300),
            (1, 50_000, 1000),
            (i64::MAX, 100_000, i64::MAX),
        ];
        for (m, p, q) in cases {
            assert_eq!(milli_cpu_to_quota(*m, *p), *q, "quota of {m}m over {p}");
        }
        for (s, w) in [
            (0, 1),
            (2, 1),
            (1024, 39),
            (102, 4),
            (262_144, 10_000),
            (1 << 40, 10_000),
        ] {
            assert_eq!(shares_to_weight(s), w, "weight of {s}");
        }
    }

    #[test]
    fn container_limits() {
        let cases: Vec<(&str, serde_json::Value, Resources)> = vec![
            (
                "requests and limits",
                ctr(
                    "a",
                    &[("cpu", "250m"), ("memory", "64Mi")],
                    &[("cpu", "500m"), ("memory", "128Mi")],
                ),
                Resources {
                    cpu_shares: Some(256),
                    cpu_quota: Some(50_000),
                    cpu_period: Some(100_000),
                    memory_limit: Some(128 << 20),
                    pids_limit: None,
                    devices: None,
                },
            ),
            (
                "limit only: shares from the limit",
                ctr("a", &[], &[("cpu", "2"), ("memory", "1G")]),
                Resources {
                    cpu_shares: Some(2048),
                    cpu_quota: Some(200_000),
                    cpu_period: Some(100_000),
                    memory_limit: Some(1_000_000_000),
                    pids_limit: None,
                    devices: None,
                },
            ),
            (
                "nothing",
                ctr("a", &[], &[]),
                Resources {
                    cpu_shares: Some(2),
                    cpu_period: Some(100_000),
                    ..Resources::default()
                },
            ),
            (
                "tiny cpu: min shares and min quota",
                ctr("a", &[("cpu", "1m")], &[("cpu", "1m")]),
                Resources {
                    cpu_shares: Some(2),
                    cpu_quota: Some(1000),
                    cpu_period: Some(100_000),
                    ..Resources::default()
                },
            ),
            (
                "fractional memory rounds up, bad quantity ignored",
                ctr("a", &[("cpu", "x")], &[("memory", "1500m")]),
                Resources {
                    cpu_shares: Some(2),
                    cpu_period: Some(100_000),
                    memory_limit: Some(2),
                    ..Resources::default()
                },
            ),
        ];
        for (name, c, want) in cases {
            let c: Container = serde_json::from_value(c).unwrap();
            assert_eq!(container_resources(&c), want, "{name}");
        }
    }

    #[test]
    fn qos_class_prefers_the_status() {
        let g = &[("cpu", "1"), ("memory", "1Gi")][..];
        // The class is computed when the status names none (the table is k1s_api's).
        let p = pod_of(vec![ctr("a", g, g)], vec![]);
        assert_eq!(qos_class(&p), QosClass::Guaranteed);
        assert_eq!(qos_class(&pod(json!({}))), QosClass::BestEffort);
        let mut p = pod_of(vec![ctr("a", &[], &[])], vec![]);
        p.status = Some(serde_json::from_value(json!({"qosClass": "Guaranteed"})).unwrap());
        assert_eq!(qos_class(&p), QosClass::Guaranteed);
        p.status = Some(serde_json::from_value(json!({"qosClass": "Bogus"})).unwrap());
        assert_eq!(qos_class(&p), QosClass::BestEffort);
    }

    #[test]
    fn pod_level_limits() {
        let g = &[("cpu", "1"), ("memory", "1Gi")][..];
        let half = &[("cpu", "500m"), ("memory", "256Mi")][..];
        let gi = 1i64 << 30;
        let cases: Vec<(&str, Pod, Option<i64>, Resources)> = vec![
            (
                "guaranteed: sums",
                pod_of(vec![ctr("a", g, g), ctr("b", half, half)], vec![]),
                None,
                Resources {
                    cpu_shares: Some(1536),
                    cpu_quota: Some(150_000),
                    cpu_period: Some(100_000),
                    memory_limit: Some(gi + (256 << 20)),
                    pids_limit: None,
                    devices: None,
                },
            ),
            (
                "guaranteed: a larger init container wins",
                pod_of(
                    vec![ctr("a", half, half)],
                    vec![ctr(
                        "i",
                        &[("cpu", "2"), ("memory", "2Gi")],
                        &[("cpu", "2"), ("memory", "2Gi")],
                    )],
                ),
                Some(100),
                Resources {
                    cpu_shares: Some(2048),
                    cpu_quota: Some(200_000),
                    cpu_period: Some(100_000),
                    memory_limit: Some(2 * gi),
                    pids_limit: Some(100),
                    devices: None,
                },
            ),
            (
                "sidecar adds to the sum and to later init containers",
                pod(json!({"spec": {
                    "containers": [ctr("a", half, half)],
                    "initContainers": [
                        {"name": "s", "restartPolicy": "Always",
                         "resources": {"requests": {"cpu": "500m", "memory": "256Mi"},
                                       "limits": {"cpu": "500m", "memory": "256Mi"}}},
                        ctr("i", half, half),
                    ],
                }})),
                None,
                Resources {
                    cpu_shares: Some(1024),
                    cpu_quota: Some(100_000),
                    cpu_period: Some(100_000),
                    memory_limit: Some(512 << 20),
                    pids_limit: None,
                    devices: None,
                },
            ),
            (
                "overhead added to requests and to declared limits",
                pod(json!({"spec": {
                    "containers": [ctr("a", g, g)],
                    "overhead": {"cpu": "250m", "memory": "120Mi"},
                }})),
                None,
                Resources {
                    cpu_shares: Some(1280),
                    cpu_quota: Some(125_000),
                    cpu_period: Some(100_000),
                    memory_limit: Some(gi + (120 << 20)),
                    pids_limit: None,
                    devices: None,
                },
            ),
            (
                "burstable: all limits declared",
                pod_of(vec![ctr("a", half, g), ctr("b", half, g)], vec![]),
                None,
                Resources {
                    cpu_shares: Some(1024),
                    cpu_quota: Some(200_000),
                    cpu_period: Some(100_000),
                    memory_limit: Some(2 * gi),
                    pids_limit: None,
                    devices: None,
                },
            ),
            (
                "burstable: one container lacks a memory limit",
                pod_of(
                    vec![ctr("a", half, g), ctr("b", half, &[("cpu", "1")])],
                    vec![],
                ),
                None,
                Resources {
                    cpu_shares: Some(1024),
                    cpu_quota: Some(200_000),
                    cpu_period: Some(100_000),
                    memory_limit: None,
                    pids_limit: None,
                    devices: None,
                },
            ),
            (
                "burstable: requests only",
                pod_of(
                    vec![
                        ctr("a", &[("cpu", "100m")], &[]),
                        ctr("b", &[("memory", "1Gi")], &[]),
                    ],
                    vec![],
                ),
                Some(0),
                Resources {
                    cpu_shares: Some(102),
                    ..Resources::default()
                },
            ),
            (
                "burstable: init container without limits undeclares",
                pod_of(vec![ctr("a", half, g)], vec![ctr("i", &[], &[])]),
                None,
                Resources {
                    cpu_shares: Some(512),
                    ..Resources::default()
                },
            ),
            (
                "burstable: tiny quota rounds up to the minimum",
                pod_of(
                    vec![ctr(
                        "a",
                        &[("cpu", "1m")],
                        &[("cpu", "5m"), ("memory", "1Mi")],
                    )],
                    vec![],
                ),
                None,
                Resources {
                    cpu_shares: Some(2),
                    cpu_quota: Some(1000),
                    cpu_period: Some(100_000),
                    memory_limit: Some(1 << 20),
                    pids_limit: None,
                    devices: None,
                },
            ),
            (
                "besteffort",
                pod_of(vec![ctr("a", &[], &[]), ctr("b", &[], &[])], vec![]),
                Some(1024),
                Resources {
                    cpu_shares: Some(2),
                    pids_limit: Some(1024),
                    ..Resources::default()
                },
            ),
        ];
        for (name, p, pids, want) in cases {
            assert_eq!(pod_resources(&p, pids), want, "{name}");
        }
    }

    #[test]
    fn qos_and_node_level() {
        let g = &[("cpu", "1"), ("memory", "1Gi")][..];
        let pods = [
            pod_of(vec![ctr("a", &[("cpu", "250m")], &[])], vec![]),
            pod_of(
                vec![ctr("a", &[("cpu", "750m"), ("memory", "1Gi")], g)],
                vec![],
            ),
            pod_of(vec![ctr("a", g, g)], vec![]),
            pod_of(vec![ctr("a", &[], &[])], vec![]),
        ];
        assert_eq!(burstable_qos_resources(&pods).cpu_shares, Some(1024));
        assert_eq!(burstable_qos_resources(&pods[2..]).cpu_shares, Some(2));

        let alloc: BTreeMap<String, ApiQuantity> = [
            ("cpu", "3500m"),
            ("memory", "7Gi"),
            ("pid", "4096"),
            ("pods", "110"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), ApiQuantity(v.to_string())))
        .collect();
        assert_eq!(
            node_allocatable_resources(&alloc),
            Resources {
                cpu_shares: Some(3584),
                memory_limit: Some(7 << 30),
                pids_limit: Some(4096),
                ..Resources::default()
            }
        );
        assert_eq!(
            node_allocatable_resources(&BTreeMap::new()),
            Resources::default()
        );
    }
}
