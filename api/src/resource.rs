//! A pod's resources as Kubernetes computes them, written once for every component:
//! - what a pod requests and limits (upstream's `resource.PodRequests` / `PodLimits`): app
//!   containers and sidecars (init containers with `restartPolicy: Always`) add up; init
//!   containers run one at a time, so the pod needs at least the largest "init container use"
//!   (an init container plus the sidecars started before it); `spec.overhead` on top;
//! - its QoS class (upstream's `ComputePodQOS`);
//! - which resource names are extended resources.
//!
//! The arithmetic runs over the [`PodResources`] / [`ContainerResources`] traits, implemented
//! for the typed API ([`Pod`], [`PodSpec`], [`Container`]: the kubelet and scheduler) and for
//! JSON specs ([`SpecJson`]: admission, quota). Quantities that do not parse count as absent
//! (the API server validates them, so only a corrupted object has one); the typed side logs
//! them.
//!
//! Pod-level `spec.resources` (the alpha `PodLevelResources` gate) is not looked at.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use serde_json::Value;

use crate::quantity::{Quantity, ResourceList};

/// One container's resources, as the pod arithmetic needs them.
pub trait ContainerResources {
    fn requests(&self) -> ResourceList;
    fn limits(&self) -> ResourceList;
    /// A restartable init container (`restartPolicy: Always`); meaningless for app
    /// containers.
    fn is_sidecar(&self) -> bool;
}

/// A pod's containers and overhead, as the pod arithmetic needs them.
pub trait PodResources {
    type Container: ContainerResources;
    fn containers(&self) -> impl Iterator<Item = &Self::Container>;
    fn init_containers(&self) -> impl Iterator<Item = &Self::Container>;
    fn overhead(&self) -> ResourceList;
}

/// Which of a container's lists to aggregate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Requests,
    Limits,
}

/// Upstream's `PodResourcesOptions`, the parts k1s uses.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options<'a> {
    /// Leave `spec.overhead` out.
    pub exclude_overhead: bool,
    /// Amounts counted for a container that does not request a resource at all (the
    /// scheduler's 100m CPU / 200Mi memory when scoring). An explicit zero stays zero.
    pub non_missing: Option<&'a ResourceList>,
}

/// The aggregation of a pod's container lists: the sum over the app containers and the
/// sidecars, at least the largest init container use. `each` sees every app container's list
/// and every init container's use, as upstream's `ContainerFn` does.
pub fn aggregate<P: PodResources + ?Sized>(
    pod: &P,
    field: Field,
    non_missing: Option<&ResourceList>,
    mut each: impl FnMut(&ResourceList),
) -> ResourceList {
    let get = |c: &P::Container| {
        let l = match field {
            Field::Requests => c.requests(),
            Field::Limits => c.limits(),
        };
        match non_missing {
            Some(defaults) => with_non_missing(l, defaults),
            None => l,
        }
    };
    let mut sum = ResourceList::new();
    for c in pod.containers() {
        let l = get(c);
        each(&l);
        sum.add_assign(&l);
    }
    let mut sidecars = ResourceList::new();
    let mut init_max = ResourceList::new();
    for c in pod.init_containers() {
        let mut usage = get(c);
        if c.is_sidecar() {
            sum.add_assign(&usage);
            sidecars.add_assign(&usage);
            usage.clone_from(&sidecars);
        } else {
            usage.add_assign(&sidecars);
        }
        each(&usage);
        init_max.max_assign(&usage);
    }
    sum.max_assign(&init_max);
    sum
}

fn with_non_missing(mut l: ResourceList, defaults: &ResourceList) -> ResourceList {
    for (name, q) in &defaults.0 {
        if !l.contains(name) {
            l.insert(name.clone(), *q);
        }
    }
    l
}

/// The pod's effective requests (upstream `PodRequests`).
pub fn pod_requests<P: PodResources + ?Sized>(pod: &P, opts: &Options<'_>) -> ResourceList {
    let mut r = aggregate(pod, Field::Requests, opts.non_missing, |_| {});
    if !opts.exclude_overhead {
        r.add_assign(&pod.overhead());
    }
    r
}

/// The pod's effective limits (upstream `PodLimits`); overhead is added only to resources
/// that already have a limit.
pub fn pod_limits<P: PodResources + ?Sized>(pod: &P, opts: &Options<'_>) -> ResourceList {
    let l = aggregate(pod, Field::Limits, None, |_| {});
    with_overhead_on_limits(l, pod, opts)
}

/// Adds the pod's overhead to the resources `limits` has (unless `opts` excludes it).
pub fn with_overhead_on_limits<P: PodResources + ?Sized>(
    mut limits: ResourceList,
    pod: &P,
    opts: &Options<'_>,
) -> ResourceList {
    if !opts.exclude_overhead {
        for (name, q) in pod.overhead().0 {
            if limits.contains(&name) {
                limits.add_to(&name, q);
            }
        }
    }
    limits
}

/// A pod's quality-of-service class (`status.qosClass`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QosClass {
    Guaranteed,
    Burstable,
    BestEffort,
}

impl QosClass {
    pub fn as_str(self) -> &'static str {
        match self {
            QosClass::Guaranteed => "Guaranteed",
            QosClass::Burstable => "Burstable",
            QosClass::BestEffort => "BestEffort",
        }
    }

    /// The class `status.qosClass` names, if it names one.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "Guaranteed" => Some(QosClass::Guaranteed),
            "Burstable" => Some(QosClass::Burstable),
            "BestEffort" => Some(QosClass::BestEffort),
            _ => None,
        }
    }
}

impl std::fmt::Display for QosClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Upstream's `ComputePodQOS` over CPU and memory: BestEffort when no container or init
/// container requests or limits a positive amount of either; Guaranteed when every one of
/// them has positive CPU and memory limits and the summed requests equal the summed limits;
/// else Burstable. It reads the requests as written: the API server defaults requests from
/// limits before it computes the class.
pub fn qos_class<P: PodResources + ?Sized>(pod: &P) -> QosClass {
    let compute = |name: &str| name == "cpu" || name == "memory";
    let mut reqs = ResourceList::new();
    let mut lims = ResourceList::new();
    let mut guaranteed = true;
    for c in pod.containers().chain(pod.init_containers()) {
        for (name, q) in &c.requests().0 {
            if compute(name) && q.sign() > 0 {
                reqs.add_to(name, *q);
            }
        }
        let (mut cpu, mut memory) = (false, false);
        for (name, q) in &c.limits().0 {
            if compute(name) && q.sign() > 0 {
                lims.add_to(name, *q);
                cpu |= name == "cpu";
                memory |= name == "memory";
            }
        }
        if !(cpu && memory) {
            guaranteed = false;
        }
    }
    if reqs.is_empty() && lims.is_empty() {
        return QosClass::BestEffort;
    }
    if guaranteed
        && reqs.0.len() == lims.0.len()
        && reqs.0.iter().all(|(n, r)| lims.get(n) == Some(r))
    {
        QosClass::Guaranteed
    } else {
        QosClass::Burstable
    }
}

/// A native resource: unprefixed (`cpu`) or in a `kubernetes.io/` domain.
pub fn is_native_resource(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

/// An extended resource (`example.com/gpu`): prefixed, not native and not a quota's
/// `requests.` name (upstream `IsExtendedResourceName`).
pub fn is_extended_resource(name: &str) -> bool {
    !is_native_resource(name) && !name.starts_with("requests.")
}

// ---- the typed API ----

/// A resource map of the typed API as an exact [`ResourceList`]; entries that do not parse
/// are logged and left out.
pub fn list_of(m: Option<&BTreeMap<String, ApiQuantity>>) -> ResourceList {
    let mut out = ResourceList::new();
    for (name, q) in m.into_iter().flatten() {
        match Quantity::parse(q.0.trim()) {
            Ok(v) => out.insert(name.clone(), v),
            Err(e) => tracing::warn!(resource = %name, value = %q.0, "ignoring bad quantity: {e}"),
        }
    }
    out
}

impl ContainerResources for Container {
    fn requests(&self) -> ResourceList {
        list_of(self.resources.as_ref().and_then(|r| r.requests.as_ref()))
    }

    fn limits(&self) -> ResourceList {
        list_of(self.resources.as_ref().and_then(|r| r.limits.as_ref()))
    }

    fn is_sidecar(&self) -> bool {
        self.restart_policy.as_deref() == Some("Always")
    }
}

impl PodResources for PodSpec {
    type Container = Container;

    fn containers(&self) -> impl Iterator<Item = &Container> {
        self.containers.iter()
    }

    fn init_containers(&self) -> impl Iterator<Item = &Container> {
        self.init_containers.iter().flatten()
    }

    fn overhead(&self) -> ResourceList {
        list_of(self.overhead.as_ref())
    }
}

/// A pod without a spec has no containers.
impl PodResources for Pod {
    type Container = Container;

    fn containers(&self) -> impl Iterator<Item = &Container> {
        self.spec.iter().flat_map(|s| s.containers.iter())
    }

    fn init_containers(&self) -> impl Iterator<Item = &Container> {
        self.spec
            .iter()
            .flat_map(|s| s.init_containers.iter().flatten())
    }

    fn overhead(&self) -> ResourceList {
        list_of(self.spec.as_ref().and_then(|s| s.overhead.as_ref()))
    }
}

// ---- JSON ----

/// A pod spec (`pod.spec`, a template's `spec`) as JSON. Missing or mistyped lists count as
/// empty.
#[derive(Debug, Clone, Copy)]
pub struct SpecJson<'a>(pub &'a Value);

fn json_list(v: &Value) -> &[Value] {
    v.as_array().map_or(&[][..], Vec::as_slice)
}

/// A container as JSON.
impl ContainerResources for Value {
    fn requests(&self) -> ResourceList {
        ResourceList::from_json_lenient(&self["resources"]["requests"])
    }

    fn limits(&self) -> ResourceList {
        ResourceList::from_json_lenient(&self["resources"]["limits"])
    }

    fn is_sidecar(&self) -> bool {
        self["restartPolicy"].as_str() == Some("Always")
    }
}

impl PodResources for SpecJson<'_> {
    type Container = Value;

    fn containers(&self) -> impl Iterator<Item = &Value> {
        json_list(&self.0["containers"]).iter()
    }

    fn init_containers(&self) -> impl Iterator<Item = &Value> {
        json_list(&self.0["initContainers"]).iter()
    }

    fn overhead(&self) -> ResourceList {
        ResourceList::from_json_lenient(&self.0["overhead"])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap()
    }

    /// A container with `requests` and `limits` given as `[(name, qty)]`.
    fn ctr(req: &[(&str, &str)], lim: &[(&str, &str)]) -> Value {
        let m = |l: &[(&str, &str)]| {
            Value::Object(l.iter().map(|(k, v)| (k.to_string(), json!(v))).collect())
        };
        json!({"name": "c", "resources": {"requests": m(req), "limits": m(lim)}})
    }

    fn sidecar(req: &[(&str, &str)]) -> Value {
        let mut c = ctr(req, &[]);
        c["restartPolicy"] = json!("Always");
        c
    }

    /// The same spec as JSON and typed: both sides must agree on every case.
    fn both(spec: &Value) -> (SpecJson<'_>, PodSpec) {
        (
            SpecJson(spec),
            serde_json::from_value(spec.clone()).unwrap(),
        )
    }

    #[test]
    fn requests_limits_and_overhead_as_upstream() {
        struct Case {
            name: &'static str,
            spec: Value,
            cpu: &'static str,
            memory: Option<&'static str>,
            limit_cpu: Option<&'static str>,
        }
        let cases = [
            Case {
                name: "no containers",
                spec: json!({}),
                cpu: "0",
                memory: None,
                limit_cpu: None,
            },
            Case {
                name: "app containers add up",
                spec: json!({"containers": [ctr(&[("cpu", "1"), ("memory", "1Gi")], &[("cpu", "2")]),
                    ctr(&[("cpu", "500m")], &[("cpu", "1")])]}),
                cpu: "1500m",
                memory: Some("1Gi"),
                limit_cpu: Some("3"),
            },
            Case {
                name: "the largest init container wins over the app containers",
                spec: json!({"containers": [ctr(&[("cpu", "1")], &[])],
                    "initContainers": [ctr(&[("cpu", "3")], &[]), ctr(&[("cpu", "2")], &[])]}),
                cpu: "3",
                memory: None,
                limit_cpu: None,
            },
            Case {
                name: "a sidecar adds to the app containers and to later init containers",
                spec: json!({"containers": [ctr(&[("cpu", "1")], &[])],
                    "initContainers": [sidecar(&[("cpu", "1")]), ctr(&[("cpu", "2500m")], &[])]}),
                cpu: "3500m",
                memory: None,
                limit_cpu: None,
            },
            Case {
                name: "overhead on requests, and on limits only where one is set",
                spec: json!({"containers": [ctr(&[("cpu", "1")], &[("cpu", "1")])],
                    "overhead": {"cpu": "250m", "memory": "10"}}),
                cpu: "1250m",
                memory: Some("10"),
                limit_cpu: Some("1250m"),
            },
            Case {
                name: "a quantity that does not parse counts as absent",
                spec: json!({"containers": [ctr(&[("cpu", "lots"), ("memory", "1Mi")], &[])]}),
                cpu: "0",
                memory: Some("1Mi"),
                limit_cpu: None,
            },
        ];
        let opts = Options::default();
        for c in &cases {
            let (j, t) = both(&c.spec);
            for (side, r, l) in [
                ("json", pod_requests(&j, &opts), pod_limits(&j, &opts)),
                ("typed", pod_requests(&t, &opts), pod_limits(&t, &opts)),
            ] {
                let cpu = r.get("cpu").copied().unwrap_or_default();
                assert_eq!(cpu, q(c.cpu), "{} ({side})", c.name);
                assert_eq!(
                    r.get("memory").copied(),
                    c.memory.map(q),
                    "{} ({side})",
                    c.name
                );
                assert_eq!(
                    l.get("cpu").copied(),
                    c.limit_cpu.map(q),
                    "{} ({side})",
                    c.name
                );
                assert!(l.get("memory").is_none(), "{} ({side})", c.name);
            }
        }
    }

    #[test]
    fn overhead_can_be_left_out() {
        let spec = json!({"containers": [ctr(&[("cpu", "1")], &[("cpu", "1")])],
            "overhead": {"cpu": "250m"}});
        let opts = Options {
            exclude_overhead: true,
            ..Options::default()
        };
        assert_eq!(
            pod_requests(&SpecJson(&spec), &opts).get("cpu"),
            Some(&q("1"))
        );
        assert_eq!(
            pod_limits(&SpecJson(&spec), &opts).get("cpu"),
            Some(&q("1"))
        );
    }

    #[test]
    fn non_missing_defaults_fill_only_absent_requests() {
        let defaults: ResourceList = [("cpu".to_string(), q("100m"))].into_iter().collect();
        let spec = json!({"containers": [ctr(&[], &[]), ctr(&[("cpu", "0")], &[]),
            ctr(&[("cpu", "1")], &[])],
            "initContainers": [ctr(&[], &[])]});
        let opts = Options {
            non_missing: Some(&defaults),
            ..Options::default()
        };
        // 100m for the first, an explicit zero stays zero, 1 for the third; the init
        // container's default 100m is below that sum.
        let (j, t) = both(&spec);
        assert_eq!(pod_requests(&j, &opts).get("cpu"), Some(&q("1100m")));
        assert_eq!(pod_requests(&t, &opts).get("cpu"), Some(&q("1100m")));
        assert_eq!(
            pod_requests(&j, &Options::default()).get("cpu"),
            Some(&q("1"))
        );
    }

    #[test]
    fn qos_classes_as_upstream() {
        let g = &[("cpu", "1"), ("memory", "1Gi")][..];
        let cases: Vec<(&str, Value, QosClass)> = vec![
            ("no spec", json!({}), QosClass::BestEffort),
            (
                "no resources",
                json!({"containers": [ctr(&[], &[])]}),
                QosClass::BestEffort,
            ),
            (
                "requests equal limits everywhere",
                json!({"containers": [ctr(g, g), ctr(g, g)]}),
                QosClass::Guaranteed,
            ),
            // Written by a client, before the API server defaults requests from limits.
            (
                "limits only",
                json!({"containers": [ctr(&[], g)]}),
                QosClass::Burstable,
            ),
            (
                "requests below limits",
                json!({"containers": [ctr(&[("cpu", "500m"), ("memory", "1Gi")], g)]}),
                QosClass::Burstable,
            ),
            (
                "a container without limits",
                json!({"containers": [ctr(g, g), ctr(&[], &[])]}),
                QosClass::Burstable,
            ),
            (
                "an init container without limits",
                json!({"containers": [ctr(g, g)], "initContainers": [ctr(&[], &[])]}),
                QosClass::Burstable,
            ),
            (
                "memory only",
                json!({"containers": [ctr(&[("memory", "1Gi")], &[("memory", "1Gi")])]}),
                QosClass::Burstable,
            ),
            (
                "zero and other resources do not count",
                json!({"containers": [ctr(&[("cpu", "0"), ("ephemeral-storage", "1Gi")], &[])]}),
                QosClass::BestEffort,
            ),
        ];
        for (name, spec, want) in &cases {
            let (j, t) = both(spec);
            assert_eq!(qos_class(&j), *want, "{name} (json)");
            assert_eq!(qos_class(&t), *want, "{name} (typed)");
            assert_eq!(QosClass::parse(want.as_str()), Some(*want));
        }
        assert_eq!(QosClass::parse("Bogus"), None);
    }

    #[test]
    fn extended_resources() {
        for (name, want) in [
            ("example.com/gpu", true),
            ("cpu", false),
            ("hugepages-2Mi", false),
            ("kubernetes.io/foo", false),
            ("requests.example.com/gpu", false),
        ] {
            assert_eq!(is_extended_resource(name), want, "{name}");
        }
    }
}
